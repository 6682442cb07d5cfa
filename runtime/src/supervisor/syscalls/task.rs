//! The caller of a notification as a handler sees it: its arguments, its
//! memory and fds, whether it still waits, and what its identity is made
//! of (credentials and capabilities, root, UTS names, cgroups). Handlers
//! written against [`Task`] instead of a raw pid and `sys::` calls decide
//! the same way on the real caller ([`Ctx`], on either platform) and on
//! a fake one in unit tests, which need neither root nor a container.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use super::Ctx;
use crate::supervisor::creds::Creds;
use crate::supervisor::task::Caller;
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
    /// file description. EBADF when it has none.
    fn take_fd(&self, fd: i32) -> io::Result<OwnedFd>;
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
        let pidfd = super::pidfd_of(Ctx::pid(self))?;
        sys::pidfd_getfd(pidfd.as_fd(), fd)
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

/// A fake caller for unit tests: arguments, a memory of its own (one
/// region at [`Fake::BASE`]), fixed credentials and UTS names, and a
/// supervisor built from a policy text; no process, no root needed.
#[cfg(test)]
pub(crate) mod fake {
    use std::cell::RefCell;
    use std::io;
    use std::os::fd::OwnedFd;

    use super::Task;
    use crate::supervisor::creds::Creds;
    use crate::supervisor::task::Caller;
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
    }

    impl Fake {
        /// Where the fake memory starts: addresses below (0, say) fault.
        pub const BASE: u64 = 0x10000;

        /// A caller under the policy `toml`, with `mem` bytes of memory.
        pub fn new(toml: &str, mem: usize) -> Self {
            let policy = crate::policy::Policy::from_toml(toml, "test").expect("policy");
            let sup = Supervisor {
                policy,
                audit: crate::supervisor::audit::AuditLog::open(None).expect("audit"),
                hostname: "box".into(),
                identity: ("6.1.0-virtual".into(), "#1 SMP cordon".into()),
                init: std::sync::OnceLock::new(),
                cgroups: std::sync::OnceLock::new(),
                started: std::time::Instant::now(),
                loads: std::sync::Mutex::new((std::time::Instant::now(), [0.0; 3])),
                blocking: std::sync::atomic::AtomicUsize::new(0),
                answering: std::sync::atomic::AtomicUsize::new(0),
                emulates_files: true,
                names: dns::Names::default(),
            };
            Self {
                sup,
                args: [0; 6],
                mem: RefCell::new(vec![0; mem]),
                uts: None,
                valid: true,
            }
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
        fn take_fd(&self, _: i32) -> io::Result<OwnedFd> {
            Err(io::Error::from_raw_os_error(libc::EBADF))
        }
        fn still_valid(&self) -> bool {
            self.valid
        }
        fn creds(&self) -> io::Result<Creds> {
            Ok(Creds {
                uids: [0; 3],
                gids: [0; 3],
                fsuid: 0,
                fsgid: 0,
                groups: Vec::new(),
                cap_eff: 0,
                umask: 0o022,
            })
        }
        fn caller(&self) -> io::Result<Caller> {
            Err(io::Error::from_raw_os_error(libc::ESRCH))
        }
        fn uts_names(&self) -> Option<(String, String)> {
            self.uts.clone()
        }
        fn cgroups(&self) -> Option<crate::views::cgroup::CgroupDirs> {
            None
        }
    }
}
