//! Fail closed: a tiny child process that kills the container if the
//! supervisor dies.
//!
//! The child execs `cordon-watchdog` (runtime/watchdog/watchdog.c, built by
//! build.rs and embedded here) from a sealed memfd: a static program with
//! no libc whose resident set is a few pages, where a fork of the
//! supervisor would keep a copy of its address space (about 1.7 MiB of
//! resident memory) for the whole life of the container. If that exec
//! fails (or the program was not built), the forked child runs the same
//! protocol itself ([`watch`]).
//!
//! The supervisor keeps one end of a socketpair; the watchdog blocks reading
//! the other. When the supervisor exits for any reason (a crash, SIGKILL, an
//! OOM kill), the kernel closes its end, the read returns EOF, and the
//! watchdog sends SIGKILL to the container's init through a pidfd (no pid
//! reuse race). The init is pid 1 of the container's pid namespace, so every
//! process of the container dies with it. Until then, intercepted syscalls of
//! a container whose supervisor is gone fail with ENOSYS: none succeeds
//! without a decision.

use std::io::{IoSlice, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
use nix::unistd::ForkResult;

use crate::sys;

/// The watchdog program (an empty slice when build.rs had no C compiler).
static PROGRAM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/watchdog"));

/// A sealed memfd holding [`PROGRAM`], or `None` when there is none.
fn program_memfd() -> Option<OwnedFd> {
    if PROGRAM.is_empty() {
        return None;
    }
    sys::process::sealed_memfd(c"cordon-watchdog", PROGRAM).ok()
}

/// Forks the watchdog. Must be called while the process has one thread.
/// `id` names the container in the watchdog's command line. Returns the
/// supervisor's end of the connection.
pub fn spawn(id: &str) -> std::io::Result<Option<UnixStream>> {
    let (ours, theirs) = UnixStream::pair()?;
    let program = program_memfd();
    let arg0 = c"cordon-watchdog";
    let arg1 = std::ffi::CString::new(id).unwrap_or_default();
    // Called from `supervisor::run` before any thread is started, so the
    // child is a faithful copy with no lock held by another thread.
    match sys::process::fork_single_threaded()? {
        ForkResult::Parent { .. } => {
            drop(theirs);
            Ok(Some(ours))
        }
        ForkResult::Child => {
            drop(ours);
            let fd = theirs.into_raw_fd();
            // Keep only the connection, as fd 3 (and the program, as fd 4).
            let _ = nix::unistd::dup2(fd, 3);
            if let Some(p) = &program {
                if nix::unistd::dup2(p.as_raw_fd(), 4).is_ok() {
                    // An ELF program execs from a close-on-exec fd.
                    let _ = sys::process::set_cloexec(4);
                    let _ = sys::close_fds_from(5);
                    // Returns only on failure.
                    let _ = sys::process::execveat_fd(4, &[arg0, arg1.as_c_str()]);
                }
            }
            let _ = sys::close_fds_from(4);
            // fd 3 is the connection we just placed there; we own it.
            let Ok(conn) = sys::process::own_fd(3) else {
                // As `watch` does when its connection fails.
                std::process::exit(0);
            };
            let conn = UnixStream::from(conn);
            let _ = nix::sys::prctl::set_name(c"cordon-watchdog");
            watch(conn)
        }
    }
}

/// Hands the container init's pidfd to the watchdog.
pub fn arm(conn: &UnixStream, pidfd: BorrowedFd<'_>) -> std::io::Result<()> {
    send_fd(conn, b'P', pidfd)
}

/// Hands `fd` to the watchdog, which holds it until it exits: for the
/// supervisor's inotify and fanotify groups, whose last close waits for
/// an SRCU grace period (fsnotify_destroy_group, tens of milliseconds).
/// Held there, the supervisor's own exit does not wait for it, and so
/// neither does `delete`, which must see the supervisor gone from the
/// container's cgroups before it removes them; the watchdog is in none.
pub fn hold(conn: &UnixStream, fd: BorrowedFd<'_>) -> std::io::Result<()> {
    send_fd(conn, b'H', fd)
}

fn send_fd(conn: &UnixStream, byte: u8, fd: BorrowedFd<'_>) -> std::io::Result<()> {
    let fds = [fd.as_raw_fd()];
    sendmsg::<()>(
        conn.as_raw_fd(),
        &[IoSlice::new(&[byte])],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map(drop)
    .map_err(std::io::Error::from)
}

/// The protocol of watchdog.c, for when the program cannot be exec'd.
fn watch(mut conn: UnixStream) -> ! {
    let mut init: Option<OwnedFd> = None;
    let mut held = Vec::new();
    loop {
        let mut buf = [0u8; 1];
        match sys::net::recv_with_fds::<1>(conn.as_fd(), &mut buf, false) {
            Ok((n, fds)) if n > 0 => {
                for fd in fds.into_iter().flatten() {
                    if buf[0] == b'P' {
                        init = Some(fd);
                    } else {
                        held.push(fd);
                    }
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            _ => break,
        }
    }
    let _ = conn.read(&mut [0u8; 1]);
    if let Some(pidfd) = &init {
        let _ = sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
    }
    std::process::exit(0)
}
