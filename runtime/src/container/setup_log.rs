//! What went wrong inside the container's set-up, in one line.
//!
//! libcontainer sets a container up in processes it forks (the intermediate
//! and the init); when a step fails there, the error that reaches `create`
//! is the step's name alone ("failed to prepare rootfs", "failed
//! syscall"), while the forked process logged which mount or field and
//! which errno at error level. A [`Capture`] collects those error events of
//! forked processes through a socket ([`SetupErrors`] is the tracing layer
//! that writes them), and [`describe`] turns them into the detail runc
//! gives: the mount destination or the failing step, and the errno.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Sending end of the capture socket (-1: no capture running).
static PIPE: AtomicI32 = AtomicI32::new(-1);
/// The process that started the capture: its own errors are not set-up
/// errors of the container (it reports them itself).
static OWNER: AtomicI32 = AtomicI32::new(-1);

/// Tracing layer that sends error events of processes forked during a
/// [`Capture`] to it. Install it in every subscriber of a process that
/// creates containers (it does nothing outside a capture).
pub struct SetupErrors;

struct Line(String);

/// A captured line: the message, then a tab and the fields
/// (`name=value`, space-separated).
impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}\t"));
        } else {
            self.0.push_str(&format!(" {}={:?}", field.name(), value));
        }
    }
}

impl<S: Subscriber> Layer<S> for SetupErrors {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let fd = PIPE.load(Ordering::SeqCst);
        if fd < 0
            || *event.metadata().level() != Level::ERROR
            || OWNER.load(Ordering::SeqCst) == std::process::id() as i32
        {
            return;
        }
        let mut line = Line(String::new());
        event.record(&mut line);
        if !line.0.contains('\t') {
            line.0.insert(0, '\t');
        }
        let mut bytes: Vec<u8> = line.0.replace('\n', " ").into_bytes();
        bytes.truncate(4000);
        bytes.push(b'\n');
        // One datagram per line (lines of several processes never
        // interleave), without SIGPIPE: a forked process keeps the fd until
        // it execs, after the capture ended.
        // `fd` is the capture socket's sending end (non-blocking).
        let _ = crate::sys::process::send_raw(fd, &bytes, libc::MSG_NOSIGNAL);
    }
}

/// Collects the error events of processes forked until [`Capture::finish`].
pub struct Capture {
    read: OwnedFd,
    write: OwnedFd,
}

impl Capture {
    /// Starts a capture (one at a time per process); `None` if no socket
    /// pair could be made (errors then come without their detail).
    pub fn start() -> Option<Capture> {
        use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
        let (read, write) = socketpair(
            AddressFamily::Unix,
            SockType::Datagram,
            None,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        )
        .ok()?;
        OWNER.store(std::process::id() as i32, Ordering::SeqCst);
        PIPE.store(write.as_raw_fd(), Ordering::SeqCst);
        Some(Capture { read, write })
    }

    /// Ends the capture; returns the lines the forked processes logged.
    pub fn finish(self) -> Vec<String> {
        PIPE.store(-1, Ordering::SeqCst);
        drop(self.write);
        let mut lines = Vec::new();
        let mut sock = std::fs::File::from(self.read);
        let mut buf = [0u8; 4096];
        // Non-blocking: what was logged before the build returned is there.
        while let Ok(n @ 1..) = sock.read(&mut buf) {
            lines.extend(String::from_utf8_lossy(&buf[..n]).lines().map(str::to_string));
        }
        lines
    }
}

/// The detail of a failed set-up from the captured lines: what failed (a
/// mount's destination and type, else the first step logged) and the
/// errno, e.g. `mount /mnt/x (tmpfs): EINVAL (Invalid argument)`; `None`
/// without lines.
pub fn describe(lines: &[String]) -> Option<String> {
    let first = lines.first()?;
    let mount = lines.iter().find_map(|l| {
        let dest = quoted_after(l, "destination: \"")?;
        let typ = quoted_after(l, "typ: Some(\"").unwrap_or_default();
        Some(if typ.is_empty() {
            format!("mount {dest}")
        } else {
            format!("mount {dest} ({typ})")
        })
    });
    let what = mount.unwrap_or_else(|| first.split('\t').next().unwrap_or(first).trim().to_string());
    // runc's words for the step.
    let what = match what.as_str() {
        "failed to drop capabilities" => "unable to apply caps".to_string(),
        _ => what,
    };
    match lines.iter().find_map(|l| errno_in(l)) {
        Some(e) => Some(format!("{what}: {e:?} ({})", e.desc())),
        None => Some(what),
    }
}

/// The text between `prefix` and the next unescaped `"` in `line`.
fn quoted_after(line: &str, prefix: &str) -> Option<String> {
    let rest = &line[line.find(prefix)? + prefix.len()..];
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            '"' => return Some(out),
            c => out.push(c),
        }
    }
    None
}

/// An errno named in a logged error: `Nix(EINVAL)`, `Errno(EINVAL)`, a
/// field `e=EINVAL`, `(os error 22)` or an `io::Error`'s debug form
/// `Os { code: 20, ... }` (pathrs' errors, e.g. a mount destination that
/// crosses a file).
fn errno_in(line: &str) -> Option<nix::errno::Errno> {
    use nix::errno::Errno;
    for prefix in ["(os error ", "Os { code: "] {
        if let Some(i) = line.find(prefix) {
            let n: String = line[i + prefix.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            return n.parse().ok().map(Errno::from_raw);
        }
    }
    for prefix in ["Nix(", "Errno(", "="] {
        let mut rest = line;
        while let Some(i) = rest.find(prefix) {
            rest = &rest[i + prefix.len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            if let Some(e) = (1..134).map(Errno::from_raw).find(|e| format!("{e:?}") == name) {
                return Some(e);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_failure_names_the_destination_and_the_errno() {
        let lines = [
            "failed to mount Mount { destination: \"/mnt/x\", typ: Some(\"tmpfs\"), source: Some(\"tmpfs\"), options: Some([\"size=abc\"]), uid_mappings: None, gid_mappings: None }: syscall\t",
            "failed to prepare rootfs\t err=Mount(Syscall(Nix(EINVAL)))",
            "failed to initialize container process: failed to prepare rootfs\t",
        ]
        .map(String::from);
        assert_eq!(
            describe(&lines).unwrap(),
            "mount /mnt/x (tmpfs): EINVAL (Invalid argument)"
        );
    }

    #[test]
    fn another_failure_names_the_first_step_and_the_errno() {
        let lines = [
            "failed to set hostname\t err=Nix(EPERM) hostname=\"x\"",
            "failed syscall\t",
        ]
        .map(String::from);
        assert_eq!(
            describe(&lines).unwrap(),
            "failed to set hostname: EPERM (Operation not permitted)"
        );
        let lines = ["failed to drop capabilities\t err=Nix(EPERM)".to_string()];
        assert_eq!(
            describe(&lines).unwrap(),
            "unable to apply caps: EPERM (Operation not permitted)"
        );
        let lines = ["failed to chdir\t e=ENOTDIR".to_string()];
        assert_eq!(describe(&lines).unwrap(), "failed to chdir: ENOTDIR (Not a directory)");
        let lines = ["failed to open /x: No such file or directory (os error 2)\t".to_string()];
        assert_eq!(
            describe(&lines).unwrap(),
            "failed to open /x: No such file or directory (os error 2): ENOENT (No such file or directory)"
        );
        assert_eq!(describe(&[]), None);
    }

    #[test]
    fn a_mount_across_a_file_names_enotdir() {
        let lines = [
            "failed to mount Mount { destination: \"/etc/passwd/sub\", typ: Some(\"tmpfs\"), source: Some(\"tmpfs\"), options: None, uid_mappings: None, gid_mappings: None }: openat2 subpath failed\t",
            "failed to prepare rootfs\t err=Mount(Pathrs(Error(RawOsError { operation: \"openat2 subpath\", source: Openat2 { dirfd: FrozenFd(8, Some(\"/b/rootfs\")), path: \"/etc/passwd/sub\", how: OpenHow { flags: OpenFlags(O_PATH | O_CLOEXEC), mode: 0, resolve: 18 }, size: 24, source: Os { code: 20, kind: NotADirectory, message: \"Not a directory\" } } })))",
        ]
        .map(String::from);
        assert_eq!(
            describe(&lines).unwrap(),
            "mount /etc/passwd/sub (tmpfs): ENOTDIR (Not a directory)"
        );
    }
}
