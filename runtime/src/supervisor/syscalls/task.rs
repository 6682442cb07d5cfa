//! The caller of a notification as a handler sees it: its arguments, its
//! memory and fds, whether it still waits, and what its identity is made
//! of (credentials and capabilities, root, UTS names, cgroups). Handlers
//! written against [`Task`] instead of a raw pid and `sys::` calls decide
//! the same way on the real caller ([`Ctx`], on either platform) and on
//! a fake one in unit tests, which need neither root nor a container.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use super::path::Root;
use super::Ctx;
use crate::supervisor::callers::Caller;
use crate::supervisor::creds::Creds;
use crate::supervisor::Supervisor;
use crate::sys;
use crate::views::cgroup::CgroupDirs;

/// The caller a handler acts for. Every method reads the caller at the
/// time of the call; errors are the caller's (it exited: ESRCH, ENOENT; a
/// bad address: EFAULT).
pub trait Task {
    /// Shared supervisor state: policy, audit, views, resolver names.
    fn sup(&self) -> &Supervisor;
    /// Host tid of the caller.
    fn pid(&self) -> i32;
    /// Raw argument register `i` (0-5) of the call.
    fn arg(&self, i: usize) -> u64;
    /// Reads `buf.len()` bytes at `addr` of the caller's memory; returns
    /// how many were read (short at an unmapped page).
    fn read_mem(&self, addr: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Writes `data` at `addr` of the caller's memory (EFAULT if any of it
    /// cannot be written).
    fn write_mem(&self, addr: u64, data: &[u8]) -> io::Result<()>;
    /// The NUL-terminated string at `addr`, without the NUL, of at most
    /// `max` bytes (ENAMETOOLONG beyond; see [`sys::decode_cstring`]).
    fn read_cstring(&self, addr: u64, max: usize) -> io::Result<Vec<u8>>;
    /// Our copy of the caller's fd `fd` (pidfd_getfd(2)): the same open
    /// file description. ESRCH when the caller is gone, another error
    /// (EBADF) when it has no such fd.
    fn take_fd(&self, fd: i32) -> io::Result<OwnedFd>;
    /// The caller's root directory, opened anew (`/proc/<tid>/root`):
    /// paths of the caller are looked up under it (see [`Task::caller`]
    /// for the one the supervisor keeps).
    fn root(&self) -> io::Result<Root>;
    /// An O_PATH fd on the caller's working directory (`/proc/<tid>/cwd`).
    fn cwd(&self) -> io::Result<OwnedFd>;
    /// An O_PATH fd on the binary the caller runs (`/proc/<tid>/exe`).
    fn exe(&self) -> io::Result<OwnedFd>;
    /// The caller's pid and tid as its own pid namespace numbers them
    /// (the last `NSpid:` of `/proc/<tid>/status`); `None` when gone.
    fn ns_ids(&self) -> Option<(String, String)>;
    /// Whether the caller still waits for this answer: checked after a
    /// memory read, so the read was the caller's.
    fn still_valid(&self) -> bool;
    /// The caller's credentials and effective capabilities (cleared in
    /// another user namespace than the supervisor's) and umask.
    fn creds(&self) -> io::Result<Creds>;
    /// The caller's credentials and root directory (its mount namespace
    /// as seen from its root).
    fn caller(&self) -> io::Result<Caller>;
    /// The nodename and domain name of the caller's UTS namespace; `None`
    /// when it cannot be read.
    fn uts_names(&self) -> Option<(String, String)>;
    /// The container's cgroup directories, as the caller's cgroup
    /// namespace shows them (see [`Supervisor::cgroups`]); `None` when the
    /// task is gone.
    fn cgroups(&self) -> Option<CgroupDirs>;
}

impl Task for Ctx<'_> {
    fn sup(&self) -> &Supervisor {
        self.sup
    }
    fn pid(&self) -> i32 {
        Ctx::pid(self)
    }
    fn arg(&self, i: usize) -> u64 {
        Ctx::arg(self, i)
    }
    fn read_mem(&self, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
        sys::read_mem(Ctx::pid(self), addr, buf)
    }
    fn write_mem(&self, addr: u64, data: &[u8]) -> io::Result<()> {
        sys::write_mem(Ctx::pid(self), addr, data)
    }
    fn read_cstring(&self, addr: u64, max: usize) -> io::Result<Vec<u8>> {
        sys::read_cstring(Ctx::pid(self), addr, max)
    }
    fn take_fd(&self, fd: i32) -> io::Result<OwnedFd> {
        let tid = Ctx::pid(self);
        // Before Linux 6.9 (no PIDFD_THREAD) a thread other than the
        // leader has no pidfd of its own: its thread group's shares its
        // fd table (unless it unshared CLONE_FILES).
        let pidfd = super::pidfd_of(tid)
            .or_else(|_| sys::pidfd_open(tgid(tid)))
            .map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
        sys::pidfd_getfd(pidfd.as_fd(), fd)
    }
    fn root(&self) -> io::Result<Root> {
        super::path::open_root(Ctx::pid(self)).map(Root::new)
    }
    fn cwd(&self) -> io::Result<OwnedFd> {
        proc_link(Ctx::pid(self), "cwd", libc::O_DIRECTORY)
    }
    fn exe(&self) -> io::Result<OwnedFd> {
        proc_link(Ctx::pid(self), "exe", 0)
    }
    fn ns_ids(&self) -> Option<(String, String)> {
        super::path::ns_ids(Ctx::pid(self))
    }
    fn still_valid(&self) -> bool {
        Ctx::still_valid(self)
    }
    fn creds(&self) -> io::Result<Creds> {
        Ctx::creds(self)
    }
    fn caller(&self) -> io::Result<Caller> {
        Ctx::caller(self)
    }
    fn uts_names(&self) -> Option<(String, String)> {
        super::uname::names_in_uts_of(Ctx::pid(self))
    }
    fn cgroups(&self) -> Option<CgroupDirs> {
        self.sup.cgroups(Ctx::pid(self))
    }
}

/// The thread group of thread `tid` (`Tgid:` of `/proc/<tid>/status`),
/// or `tid` itself when it cannot be read.
fn tgid(tid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(tid)
}

/// An O_PATH fd (plus `flags`) on `/proc/<tid>/<link>`.
fn proc_link(tid: i32, link: &str, flags: i32) -> io::Result<OwnedFd> {
    let path = std::ffi::CString::new(format!("/proc/{tid}/{link}")).map_err(io::Error::other)?;
    sys::openat2(
        sys::cwd_fd(),
        &path,
        (libc::O_PATH | libc::O_CLOEXEC | flags) as u64,
        0,
        0,
    )
}

/// A fake caller for unit tests: arguments, a memory of its own (one
/// region at [`Fake::BASE`]), fixed credentials and UTS names, a host
/// directory as its root (and cwd), fds of its own, and a supervisor built
/// from a policy text; no process, no root needed.
#[cfg(test)]
pub(crate) mod fake {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::io;
    use std::os::fd::OwnedFd;
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::{Root, Task};
    use crate::supervisor::callers::Caller;
    use crate::supervisor::creds::Creds;
    use crate::supervisor::{dns, Supervisor};

    /// See the module.
    pub struct Fake {
        pub sup: Supervisor,
        pub args: [u64; 6],
        /// The caller's memory, from [`Fake::BASE`].
        pub mem: RefCell<Vec<u8>>,
        pub uts: Option<(String, String)>,
        /// Whether the caller still waits.
        pub valid: bool,
        /// The host directory that is the caller's root; `None`: ESRCH.
        pub root: Option<PathBuf>,
        /// The caller's working directory (host path); `None`: its root.
        pub cwd: Option<PathBuf>,
        /// The caller's fds.
        pub fds: HashMap<i32, OwnedFd>,
    }

    impl Fake {
        /// Where the fake memory starts: addresses below (0, say) fault.
        pub const BASE: u64 = 0x10000;

        /// A caller under the policy `toml`, with `mem` bytes of memory.
        pub fn new(toml: &str, mem: usize) -> Self {
            let policy = crate::policy::Policy::from_toml(toml, "test").expect("policy");
            let sup = Supervisor {
                id: "test".into(),
                asker: crate::supervisor::ask::Asker::default(),
                policy: std::sync::RwLock::new(std::sync::Arc::new(policy)),
                audit: std::sync::Arc::new(crate::supervisor::audit::AuditLog::open(None).expect("audit")),
                hostname: "box".into(),
                identity: ("6.1.0-virtual".into(), "#1 SMP cordon".into()),
                init: std::sync::OnceLock::new(),
                cgroups: std::sync::OnceLock::new(),
                started: std::time::Instant::now(),
                loads: std::sync::Mutex::new((std::time::Instant::now(), [0.0; 3])),
                blocking: std::sync::atomic::AtomicUsize::new(0),
                answering: std::sync::atomic::AtomicUsize::new(0),
                emulates_files: true,
                exec_guard: std::sync::Mutex::new(None),
                asked_execs: std::sync::Mutex::new(std::collections::VecDeque::new()),
                names: dns::Names::default(),
                guards: dns::Guards::default(),
            };
            Self {
                sup,
                args: [0; 6],
                mem: RefCell::new(vec![0; mem]),
                uts: None,
                valid: true,
                root: None,
                cwd: None,
                fds: HashMap::new(),
            }
        }

        /// An O_PATH fd on the host directory `dir`.
        pub fn open_dir(dir: &std::path::Path) -> io::Result<OwnedFd> {
            let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
            crate::sys::openat2(
                crate::sys::cwd_fd(),
                &c,
                (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
                0,
                0,
            )
        }

        /// This caller with a copy of `other`'s memory.
        pub fn with_mem(self, other: &Fake) -> Self {
            Self {
                mem: RefCell::new(other.mem.borrow().clone()),
                ..self
            }
        }

        /// The range `addr..addr+len` in the fake memory, or EFAULT.
        fn range(&self, addr: u64, len: usize) -> io::Result<std::ops::Range<usize>> {
            let start = addr
                .checked_sub(Self::BASE)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
            let start = start as usize;
            let end = start + len;
            if end > self.mem.borrow().len() {
                return Err(io::Error::from_raw_os_error(libc::EFAULT));
            }
            Ok(start..end)
        }
    }

    /// A directory of its own under the system's temporary directory,
    /// removed with everything in it when dropped.
    pub struct TempTree(pub PathBuf);

    impl TempTree {
        /// A new empty directory named after `name`.
        pub fn new(name: &str) -> Self {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("cordon-{name}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("temp dir");
            // The path as the kernel names it (readlink of an fd on it).
            Self(std::fs::canonicalize(&dir).expect("temp dir"))
        }

        /// `rel` below the directory.
        pub fn join(&self, rel: &str) -> PathBuf {
            self.0.join(rel)
        }
    }

    impl Drop for TempTree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    impl Task for Fake {
        fn sup(&self) -> &Supervisor {
            &self.sup
        }
        fn pid(&self) -> i32 {
            // No such thread: a handler that reaches for the real caller
            // gets ESRCH.
            i32::MAX
        }
        fn arg(&self, i: usize) -> u64 {
            self.args[i]
        }
        fn read_mem(&self, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
            let r = self.range(addr, buf.len())?;
            buf.copy_from_slice(&self.mem.borrow()[r]);
            Ok(buf.len())
        }
        fn write_mem(&self, addr: u64, data: &[u8]) -> io::Result<()> {
            let r = self.range(addr, data.len())?;
            self.mem.borrow_mut()[r].copy_from_slice(data);
            Ok(())
        }
        fn read_cstring(&self, addr: u64, max: usize) -> io::Result<Vec<u8>> {
            let r = self.range(addr, 0)?;
            let mem = self.mem.borrow();
            crate::sys::decode_cstring(&mem[r.start..], max).map_err(io::Error::from_raw_os_error)
        }
        fn take_fd(&self, fd: i32) -> io::Result<OwnedFd> {
            match self.fds.get(&fd) {
                Some(f) => f.try_clone(),
                None => Err(io::Error::from_raw_os_error(libc::EBADF)),
            }
        }
        fn root(&self) -> io::Result<Root> {
            let dir = self
                .root
                .as_ref()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
            Self::open_dir(dir).map(Root::new)
        }
        fn cwd(&self) -> io::Result<OwnedFd> {
            match (&self.cwd, &self.root) {
                (Some(d), _) | (None, Some(d)) => Self::open_dir(d),
                (None, None) => Err(io::Error::from_raw_os_error(libc::ESRCH)),
            }
        }
        fn exe(&self) -> io::Result<OwnedFd> {
            Err(io::Error::from_raw_os_error(libc::ENOENT))
        }
        fn ns_ids(&self) -> Option<(String, String)> {
            // Pid 1 of its own pid namespace, as a container's init.
            Some(("1".into(), "1".into()))
        }
        fn still_valid(&self) -> bool {
            self.valid
        }
        fn creds(&self) -> io::Result<Creds> {
            // The test process's own: taking them on switches nothing,
            // which needs no privilege.
            let status = std::fs::read_to_string("/proc/thread-self/status")?;
            Creds::parse(&status).ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))
        }
        fn caller(&self) -> io::Result<Caller> {
            Ok(Caller {
                creds: self.creds()?,
                root: Arc::new(self.root()?),
            })
        }
        fn uts_names(&self) -> Option<(String, String)> {
            self.uts.clone()
        }
        fn cgroups(&self) -> Option<crate::views::cgroup::CgroupDirs> {
            None
        }
    }
}
