//! How a container process hands its seccomp listener to the supervisor.
//!
//! The container process (libcontainer's init or exec'd tenant, in
//! [`crate::container::executor`], right before execve) holds a connected
//! stream socket to the supervisor:
//!
//! 1. it sends one byte (`I` for the container's init, `E` for an exec) with
//!    a pidfd of itself attached (SCM_RIGHTS);
//! 2. it installs the policy's filter with `SECCOMP_FILTER_FLAG_NEW_LISTENER`;
//! 3. it writes the listener's fd number (4 bytes, native endian);
//! 4. the supervisor takes the listener with pidfd_getfd(2), starts serving
//!    it, and answers one byte `K`;
//! 5. the process closes its listener copy and the socket, then execs.
//!
//! On the ptrace platform the tag is lower case (`i`, `e`); the supervisor
//! seizes the process (PTRACE_SEIZE) and answers `S`; only then the process
//! installs the policy's filter, whose supervisor actions are
//! `SECCOMP_RET_TRACE`, and execs.
//!
//! After step 2 only `write`, `read` and `close` run before execve, and the
//! policy may never send those to the supervisor, so the handover cannot
//! deadlock on its own filter (libcontainer's `listenerPath` handover uses
//! `sendmsg` after the filter is loaded, which would deadlock as soon as the
//! policy intercepts `sendmsg`). If the supervisor is gone, step 4 fails and
//! the process exits before running any container code: fail closed.

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

use crate::sys;

/// Which kind of container process is attaching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The container's init (its exit ends the container).
    Init,
    /// A process started by `cordon exec`.
    Exec,
}

/// Client side, run in the container process. Installs `prog` and hands the
/// listener to the supervisor (seccomp-notify), or has the supervisor seize
/// this process first (ptrace). On error the caller must not exec.
pub fn attach(
    sock: &mut UnixStream,
    role: Role,
    prog: &[libc::sock_filter],
    platform: crate::config::Platform,
) -> io::Result<()> {
    let me = sys::pidfd_open(std::process::id() as i32)?;
    let ptrace = platform == crate::config::Platform::Ptrace;
    let tag = [match (role, ptrace) {
        (Role::Init, false) => b'I',
        (Role::Exec, false) => b'E',
        (Role::Init, true) => b'i',
        (Role::Exec, true) => b'e',
    }];
    let fds = [me.as_raw_fd()];
    sendmsg::<()>(
        sock.as_raw_fd(),
        &[IoSlice::new(&tag)],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map_err(io::Error::from)?;
    drop(me);
    if ptrace {
        let mut ack = [0u8; 1];
        sock.read_exact(&mut ack)?;
        if ack[0] != b'S' {
            return Err(io::Error::other("the supervisor could not trace this process"));
        }
        sys::seccomp_set_filter(prog, 0)?;
        return Ok(());
    }
    let flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    let listener = match sys::seccomp_set_filter(prog, flags) {
        Ok(l) => l,
        // Kernels before 5.19 lack WAIT_KILLABLE_RECV.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            sys::seccomp_set_filter(prog, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER)?
        }
        Err(e) => return Err(e),
    }
    .ok_or_else(|| io::Error::other("seccomp returned no listener"))?;
    sock.write_all(&listener.as_raw_fd().to_ne_bytes())?;
    let mut ack = [0u8; 1];
    sock.read_exact(&mut ack)?;
    if ack[0] != b'K' {
        return Err(io::Error::other("supervisor refused the listener"));
    }
    drop(listener);
    Ok(())
}

/// What the supervisor receives from one attaching process.
pub struct Attached {
    /// Init or exec.
    pub role: Role,
    /// A pidfd of the attached process.
    pub pidfd: OwnedFd,
    /// The process's seccomp listener (our own copy); `None` on the ptrace
    /// platform: the supervisor seizes the process, then [`ack_traced`].
    pub listener: Option<OwnedFd>,
}

/// Supervisor side: receives the pidfd and the listener of one process.
/// The caller answers with [`ack`] once it serves the listener.
pub fn accept(sock: &mut UnixStream) -> io::Result<Attached> {
    let mut tag = [0u8; 1];
    let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let mut iov = [IoSliceMut::new(&mut tag)];
    let msg = recvmsg::<()>(sock.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC)
        .map_err(io::Error::from)?;
    let mut pidfd = None;
    for c in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for fd in fds {
                // SAFETY: SCM_RIGHTS fds are new in our table and owned by us.
                let owned = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
                pidfd.get_or_insert(owned);
            }
        }
    }
    let (role, ptrace) = match tag[0] {
        b'I' => (Role::Init, false),
        b'E' => (Role::Exec, false),
        b'i' => (Role::Init, true),
        b'e' => (Role::Exec, true),
        _ => return Err(io::Error::other("bad handshake tag")),
    };
    let pidfd = pidfd.ok_or_else(|| io::Error::other("handshake without a pidfd"))?;
    if ptrace {
        return Ok(Attached {
            role,
            pidfd,
            listener: None,
        });
    }
    let mut num = [0u8; 4];
    sock.read_exact(&mut num)?;
    let listener = sys::pidfd_getfd(pidfd.as_fd(), i32::from_ne_bytes(num))?;
    Ok(Attached {
        role,
        pidfd,
        listener: Some(listener),
    })
}

/// Tells a process the supervisor traces it: it may install its filter.
pub fn ack_traced(sock: &mut UnixStream) -> io::Result<()> {
    sock.write_all(b"S")
}

/// Tells the attached process it may exec.
pub fn ack(sock: &mut UnixStream) -> io::Result<()> {
    sock.write_all(b"K")
}
