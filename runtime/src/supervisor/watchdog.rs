//! Fail closed: a tiny child process that kills the container if the
//! supervisor dies.
//!
//! The supervisor keeps one end of a socketpair; the watchdog blocks reading
//! the other. When the supervisor exits for any reason (a crash, SIGKILL, an
//! OOM kill), the kernel closes its end, the read returns EOF, and the
//! watchdog sends SIGKILL to the container's init through a pidfd (no pid
//! reuse race). The init is pid 1 of the container's pid namespace, so every
//! process of the container dies with it. Until then, intercepted syscalls of
//! a container whose supervisor is gone fail with ENOSYS: none succeeds
//! without a decision.

use std::io::{IoSlice, IoSliceMut, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use nix::unistd::{fork, ForkResult};

use crate::sys;

/// Forks the watchdog. Must be called while the process has one thread.
/// Returns the supervisor's end of the connection.
pub fn spawn() -> std::io::Result<Option<UnixStream>> {
    let (ours, theirs) = UnixStream::pair()?;
    // SAFETY: called from `supervisor::run` before any thread is started, so
    // the child is a faithful copy with no lock held by another thread.
    match unsafe { fork() }.map_err(std::io::Error::from)? {
        ForkResult::Parent { .. } => {
            drop(theirs);
            Ok(Some(ours))
        }
        ForkResult::Child => {
            drop(ours);
            let fd = theirs.into_raw_fd();
            // Keep only the connection, as fd 3.
            let _ = nix::unistd::dup2(fd, 3);
            let _ = sys::close_fds_from(4);
            // SAFETY: fd 3 is the connection we just placed there; we own it.
            let conn = unsafe { UnixStream::from_raw_fd(3) };
            let _ = nix::sys::prctl::set_name(c"cordon-watchdog");
            watch(conn)
        }
    }
}

/// Hands the container init's pidfd to the watchdog.
pub fn arm(conn: &UnixStream, pidfd: BorrowedFd<'_>) -> std::io::Result<()> {
    let fds = [pidfd.as_raw_fd()];
    sendmsg::<()>(
        conn.as_raw_fd(),
        &[IoSlice::new(b"P")],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map(drop)
    .map_err(std::io::Error::from)
}

fn watch(mut conn: UnixStream) -> ! {
    let mut init: Option<OwnedFd> = None;
    loop {
        let mut buf = [0u8; 1];
        let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let mut iov = [IoSliceMut::new(&mut buf)];
        match recvmsg::<()>(conn.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::empty()) {
            Ok(msg) if msg.bytes > 0 => {
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmRights(fds) = c {
                            for fd in fds {
                                // SAFETY: SCM_RIGHTS fds are new in our table and ours.
                                init = Some(unsafe { OwnedFd::from_raw_fd(fd) });
                            }
                        }
                    }
                }
            }
            Err(nix::errno::Errno::EINTR) => continue,
            _ => break,
        }
    }
    let _ = conn.read(&mut [0u8; 1]);
    if let Some(pidfd) = &init {
        let _ = sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
    }
    std::process::exit(0)
}
