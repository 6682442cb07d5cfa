//! uname(2): a virtual kernel identity, so the host's kernel version (which
//! tells an attacker which exploits apply) and its hostname do not leak.

//! The release and version come from the policy's `[views]`
//! ([`crate::views`]): the virtual release (or the host's with `identity =
//! "host"`), the same the container's `/proc/version` and
//! `/proc/sys/kernel/osrelease` show.

use super::{Outcome, Reply, Task};
use crate::supervisor::audit::Decision;
use crate::sys;

fn fill(field: &mut [libc::c_char; 65], s: &str) {
    for (d, b) in field.iter_mut().zip(s.bytes().take(64)) {
        *d = b as libc::c_char;
    }
}

/// Every field is written by us: copying the host's struct would leak it.
pub fn uname(t: &(impl Task + ?Sized)) -> Outcome {
    // SAFETY-free: utsname is plain data; start from zeroes (NUL padding).
    let mut u = utsname_zeroed();
    fill(&mut u.sysname, "Linux");
    // The names the caller's UTS namespace holds now (the config's, or
    // what a sethostname/setdomainname inside made of them), else the
    // config's.
    let (node, domain) = t
        .uts_names()
        .unwrap_or_else(|| (t.sup().hostname.clone(), domainname().to_string()));
    fill(&mut u.nodename, &node);
    let (release, version) = &t.sup().identity;
    fill(&mut u.release, release);
    fill(&mut u.version, version);
    fill(&mut u.machine, "x86_64");
    fill(&mut u.domainname, &domain);
    let reply = match t.write_mem(t.arg(0), sys::pod_bytes(&u)) {
        Ok(()) => Reply::Value(0),
        Err(_) => Reply::Errno(libc::EFAULT),
    };
    Outcome::new(reply, Decision::Emulate, format!("release {release}"))
}

/// The nodename and domain name in the UTS namespace of thread `pid`:
/// the handling thread itself joins that namespace (setns
/// `CLONE_NEWUTS`, the one namespace the supervisor's own filter lets it
/// enter: it holds only the two names, which nothing else of the
/// supervisor reads) and calls uname(2). It stays there: the next call
/// from the same namespace, almost always the container's one, costs a
/// stat(2) of `/proc/<pid>/ns/uts` and the uname. `None` when the
/// namespace cannot be opened or joined.
pub(super) fn names_in_uts_of(pid: i32) -> Option<(String, String)> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    thread_local! {
        /// (device, inode) of the UTS namespace this thread is in, once
        /// it joined one.
        static JOINED: std::cell::Cell<Option<(u64, u64)>> = const { std::cell::Cell::new(None) };
    }
    let path = format!("/proc/{pid}/ns/uts");
    let st = std::fs::metadata(&path).ok()?;
    let ns = (st.dev(), st.ino());
    if JOINED.get() != Some(ns) {
        let file = std::fs::File::open(&path).ok()?;
        // The file is the namespace stat(2) named only if it is the same
        // inode: the thread may have exec'd or exited in between.
        let opened = file.metadata().ok()?;
        if (opened.dev(), opened.ino()) != ns {
            return None;
        }
        nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWUTS).ok()?;
        JOINED.set(Some(ns));
    }
    let u = nix::sys::utsname::uname().ok()?;
    Some((
        u.nodename().to_string_lossy().into_owned(),
        u.domainname().to_string_lossy().into_owned(),
    ))
}

/// The container's domain name, as `create` passed it
/// ([`crate::config::DOMAINNAME_ENV`]); `(none)`, the kernel's default,
/// without one.
fn domainname() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| std::env::var(crate::config::DOMAINNAME_ENV).unwrap_or_else(|_| "(none)".into()))
}

fn utsname_zeroed() -> libc::utsname {
    libc::utsname {
        sysname: [0; 65],
        nodename: [0; 65],
        release: [0; 65],
        version: [0; 65],
        machine: [0; 65],
        domainname: [0; 65],
    }
}

#[cfg(test)]
mod tests {
    use super::super::task::fake::Fake;
    use super::*;

    fn field(bytes: &[u8], offset: usize) -> String {
        let f = &bytes[offset..offset + 65];
        String::from_utf8_lossy(&f[..f.iter().position(|&b| b == 0).unwrap()]).into_owned()
    }

    fn call(t: &Fake) -> (Outcome, Vec<u8>) {
        let out = uname(t);
        (out, t.mem.borrow().clone())
    }

    #[test]
    fn shows_the_virtual_identity_and_the_uts_names_never_the_hosts() {
        let mut t = Fake::new("name = 't'\n", std::mem::size_of::<libc::utsname>());
        t.args[0] = Fake::BASE;
        t.uts = Some(("web-1".into(), "example.org".into()));
        let (out, mem) = call(&t);
        assert!(matches!(out.reply, Reply::Value(0)));
        assert_eq!(out.action.as_str(), "emulate");
        assert_eq!(out.detail, "release 6.1.0-virtual");
        assert_eq!(field(&mem, 0), "Linux");
        assert_eq!(field(&mem, 65), "web-1");
        assert_eq!(field(&mem, 2 * 65), "6.1.0-virtual");
        assert_eq!(field(&mem, 3 * 65), "#1 SMP cordon");
        assert_eq!(field(&mem, 4 * 65), "x86_64");
        assert_eq!(field(&mem, 5 * 65), "example.org");
        let host = nix::sys::utsname::uname().unwrap();
        assert_ne!(field(&mem, 3 * 65), host.version().to_string_lossy());
    }

    #[test]
    fn without_the_uts_names_the_configured_hostname() {
        let mut t = Fake::new("name = 't'\n", std::mem::size_of::<libc::utsname>());
        t.args[0] = Fake::BASE;
        let (_, mem) = call(&t);
        assert_eq!(field(&mem, 65), "box");
    }

    #[test]
    fn a_bad_buffer_gets_efault() {
        let mut t = Fake::new("name = 't'\n", 10);
        t.args[0] = Fake::BASE;
        assert!(matches!(uname(&t).reply, Reply::Errno(libc::EFAULT)));
        t.args[0] = 0;
        assert!(matches!(uname(&t).reply, Reply::Errno(libc::EFAULT)));
    }
}
