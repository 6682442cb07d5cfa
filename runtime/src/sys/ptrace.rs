//! ptrace(2) wrappers for the ptrace platform (x86-64 registers), and the
//! probe that tells whether seccomp user notification works here.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::cvt;

/// `PTRACE_GET_SYSCALL_INFO` (Linux 5.3) and its `op` values.
const PTRACE_GET_SYSCALL_INFO: libc::c_uint = 0x420e;
/// Stopped at syscall entry.
pub const SYSCALL_INFO_ENTRY: u8 = 1;
/// Stopped at syscall exit.
pub const SYSCALL_INFO_EXIT: u8 = 2;
/// Stopped by a `SECCOMP_RET_TRACE`.
pub const SYSCALL_INFO_SECCOMP: u8 = 3;

/// The options every tracee gets: seccomp stops, follow every clone, fork,
/// vfork and exec, tell syscall stops apart (TRACESYSGOOD), and kill the
/// tracees if the tracer exits (EXITKILL: fail closed).
pub const OPTIONS: libc::c_int = libc::PTRACE_O_TRACESECCOMP
    | libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACEEXEC
    | libc::PTRACE_O_TRACESYSGOOD
    | libc::PTRACE_O_EXITKILL;

fn req(request: libc::c_uint, pid: i32, addr: usize, data: usize) -> io::Result<libc::c_long> {
    // SAFETY: ptrace(2) requests that take integers, or a pointer the
    // callers below pass to a live, correctly sized local.
    cvt(unsafe { libc::ptrace(request, pid, addr as *mut libc::c_void, data as *mut libc::c_void) })
}

/// PTRACE_SEIZE `pid` with [`OPTIONS`]: traced without being stopped.
pub fn seize(pid: i32) -> io::Result<()> {
    req(libc::PTRACE_SEIZE, pid, 0, OPTIONS as usize).map(|_| ())
}

/// PTRACE_CONT, delivering `sig` (0 for none).
pub fn cont(pid: i32, sig: i32) -> io::Result<()> {
    req(libc::PTRACE_CONT, pid, 0, sig as usize).map(|_| ())
}

/// PTRACE_SYSCALL: continue to the next syscall entry or exit stop.
pub fn syscall(pid: i32, sig: i32) -> io::Result<()> {
    req(libc::PTRACE_SYSCALL, pid, 0, sig as usize).map(|_| ())
}

/// PTRACE_LISTEN: leave a group-stopped tracee stopped, but let SIGCONT
/// (job control) resume it.
pub fn listen(pid: i32) -> io::Result<()> {
    req(libc::PTRACE_LISTEN, pid, 0, 0).map(|_| ())
}

/// PTRACE_INTERRUPT: make a running tracee trap (PTRACE_EVENT_STOP, which
/// reports the group's stop signal while its group is stopped).
pub fn interrupt(pid: i32) -> io::Result<()> {
    req(libc::PTRACE_INTERRUPT, pid, 0, 0).map(|_| ())
}

/// PTRACE_GETSIGMASK: the stopped tracee's blocked signals (bit `n - 1`
/// for signal `n`).
pub fn sigmask(pid: i32) -> io::Result<u64> {
    let mut v: u64 = 0;
    req(libc::PTRACE_GETSIGMASK, pid, 8, &mut v as *mut _ as usize)?;
    Ok(v)
}

/// PTRACE_SETSIGMASK: sets the stopped tracee's blocked signals (the kernel
/// leaves SIGKILL and SIGSTOP out).
pub fn set_sigmask(pid: i32, mask: u64) -> io::Result<()> {
    req(libc::PTRACE_SETSIGMASK, pid, 8, &mask as *const _ as usize).map(|_| ())
}

/// A stop or end of a tracee as waitpid(2) reports it, with raw signal
/// numbers.
///
/// nix's `WaitStatus` holds a `Signal`, which has no real-time signals:
/// its `waitpid` fails with EINVAL for a stop of signal 32..64 (glibc's
/// SIGCANCEL and SIGSETXID, SIGRTMIN+n), and it does so after the kernel
/// has handed the status over, so the stop is consumed and lost and the
/// thread stays stopped for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Exited or killed: gone.
    Gone(i32),
    /// Signal-delivery-stop of signal `.1`: resuming with it delivers it.
    Signal(i32, i32),
    /// PTRACE_EVENT_STOP: a group-stop (`.1` is the stop signal), the first
    /// stop of a new tracee or an interrupt (`.1` is SIGTRAP).
    EventStop(i32, i32),
    /// Another PTRACE_EVENT_* (`.1`).
    Event(i32, i32),
    /// A syscall entry or exit stop (TRACESYSGOOD).
    Syscall(i32),
}

impl Stop {
    /// The thread the stop is of.
    pub fn tid(&self) -> i32 {
        match *self {
            Stop::Gone(t) | Stop::Signal(t, _) | Stop::EventStop(t, _) | Stop::Event(t, _) | Stop::Syscall(t) => t,
        }
    }
}

/// waitpid(2) with `__WALL` for `pid` (-1: any tracee or child); with
/// `nohang`, `None` when none is ready. EINTR is retried.
pub fn wait(pid: i32, nohang: bool) -> io::Result<Option<Stop>> {
    let flags = libc::__WALL | if nohang { libc::WNOHANG } else { 0 };
    let mut status: libc::c_int = 0;
    let tid = loop {
        // SAFETY: `status` is a live c_int the kernel writes.
        let r = unsafe { libc::waitpid(pid, &mut status, flags) };
        if r >= 0 {
            break r;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    };
    if tid == 0 {
        return Ok(None);
    }
    Ok(Some(decode(tid, status)))
}

/// Decodes a waitpid(2) status of tracee `tid`.
pub fn decode(tid: i32, status: libc::c_int) -> Stop {
    if !libc::WIFSTOPPED(status) {
        // WIFEXITED or WIFSIGNALED (WCONTINUED is not asked for).
        return Stop::Gone(tid);
    }
    let sig = libc::WSTOPSIG(status);
    let event = status >> 16;
    if sig == libc::SIGTRAP | 0x80 {
        Stop::Syscall(tid)
    } else if event == libc::PTRACE_EVENT_STOP {
        Stop::EventStop(tid, sig)
    } else if event != 0 {
        Stop::Event(tid, event)
    } else {
        Stop::Signal(tid, sig)
    }
}

/// PTRACE_GETEVENTMSG: the new pid of a clone/fork event.
pub fn event_msg(pid: i32) -> io::Result<u64> {
    let mut v: libc::c_ulong = 0;
    req(libc::PTRACE_GETEVENTMSG, pid, 0, &mut v as *mut _ as usize)?;
    Ok(v)
}

/// The tracee's general registers.
pub fn getregs(pid: i32) -> io::Result<libc::user_regs_struct> {
    // SAFETY: user_regs_struct is plain integers; all-zero is valid.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    req(libc::PTRACE_GETREGS, pid, 0, &mut regs as *mut _ as usize)?;
    Ok(regs)
}

/// Sets the tracee's general registers.
pub fn setregs(pid: i32, regs: &libc::user_regs_struct) -> io::Result<()> {
    req(libc::PTRACE_SETREGS, pid, 0, regs as *const _ as usize).map(|_| ())
}

/// The kind of syscall stop the tracee is in ([`SYSCALL_INFO_ENTRY`],
/// [`SYSCALL_INFO_EXIT`], [`SYSCALL_INFO_SECCOMP`], 0 for none).
pub fn syscall_stop_kind(pid: i32) -> io::Result<u8> {
    // struct ptrace_syscall_info starts with `__u8 op`; 88 bytes cover it.
    let mut buf = [0u64; 11];
    req(
        PTRACE_GET_SYSCALL_INFO,
        pid,
        std::mem::size_of_val(&buf),
        buf.as_mut_ptr() as usize,
    )?;
    Ok(buf[0].to_ne_bytes()[0])
}

/// The pid (in our pid namespace) of the process behind `pidfd`, from
/// /proc/self/fdinfo (`Pid:`; -1 once it has exited).
pub fn pidfd_pid(pidfd: BorrowedFd<'_>) -> io::Result<i32> {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&p: &i32| p > 0)
        .ok_or_else(|| io::Error::other("the process has exited"))
}

/// Whether this process (and so its descendants, which inherit its seccomp
/// filters) can create a seccomp notify listener: a forked child sets
/// no_new_privs and installs an allow-all filter with
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`. The kernel refuses it when a filter
/// already in the chain has a listener (EBUSY) or lacks the feature.
/// Returns the errno of the refusal.
pub fn probe_notify() -> Result<(), io::Error> {
    let allow = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    // SAFETY: the child only makes raw syscalls (prctl, seccomp, _exit) and
    // touches no lock or allocator state.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            let prog = libc::sock_fprog {
                len: 1,
                filter: allow.as_ptr() as *mut libc::sock_filter,
            };
            // SAFETY: raw syscalls in the forked child with valid arguments.
            let code = unsafe {
                let failed = libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::syscall(
                        libc::SYS_seccomp,
                        libc::SECCOMP_SET_MODE_FILTER,
                        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                        &prog as *const libc::sock_fprog,
                    ) < 0;
                if failed {
                    *libc::__errno_location()
                } else {
                    0
                }
            };
            // SAFETY: ends the child without running any Rust cleanup.
            unsafe { libc::_exit(code & 0xff) }
        }
        child => {
            let mut status = 0;
            // SAFETY: waits for the child forked above.
            if unsafe { libc::waitpid(child, &mut status, 0) } < 0 {
                return Err(io::Error::last_os_error());
            }
            match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
                Some(0) => Ok(()),
                Some(errno) => Err(io::Error::from_raw_os_error(errno)),
                None => Err(io::Error::other("the probe was killed")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stopped status as the kernel writes it: `0x7f | sig << 8 | event << 16`.
    fn stopped(sig: i32, event: i32) -> libc::c_int {
        0x7f | (sig << 8) | (event << 16)
    }

    #[test]
    fn decodes_every_stop_kind() {
        // Real-time signals (glibc's SIGCANCEL 32, SIGSETXID 33, SIGRTMAX).
        for sig in [32, 33, libc::SIGRTMAX()] {
            assert_eq!(decode(7, stopped(sig, 0)), Stop::Signal(7, sig));
        }
        assert_eq!(decode(7, stopped(libc::SIGCHLD, 0)), Stop::Signal(7, libc::SIGCHLD));
        assert_eq!(
            decode(7, stopped(libc::SIGSTOP, libc::PTRACE_EVENT_STOP)),
            Stop::EventStop(7, libc::SIGSTOP)
        );
        assert_eq!(
            decode(7, stopped(libc::SIGTRAP, libc::PTRACE_EVENT_SECCOMP)),
            Stop::Event(7, libc::PTRACE_EVENT_SECCOMP)
        );
        assert_eq!(decode(7, stopped(libc::SIGTRAP | 0x80, 0)), Stop::Syscall(7));
        // Exited with 3; killed by SIGRTMIN (34).
        assert_eq!(decode(7, 3 << 8), Stop::Gone(7));
        assert_eq!(decode(7, 34), Stop::Gone(7));
    }
}
