//! The socket calls the network handlers (`supervisor::syscalls::net`)
//! make on the caller's socket (our copy of its fd) with an address and
//! data they copied and checked: the raw `sockaddr` bytes go to the kernel
//! unchanged. Each returns the kernel's errno unchanged.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

fn cvt(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// connect(2) of `sock` to `addr` (a raw `sockaddr` of `addr.len()` bytes).
pub fn connect(sock: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    // SAFETY: `addr` is a byte buffer of the length we pass; the kernel
    // copies it before returning.
    let r = unsafe { libc::connect(sock.as_raw_fd(), addr.as_ptr().cast(), addr.len() as libc::socklen_t) };
    cvt(r as isize).map(drop)
}

/// bind(2) of `sock` to `addr` (a raw `sockaddr` of `addr.len()` bytes).
pub fn bind(sock: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    // SAFETY: as for connect.
    let r = unsafe { libc::bind(sock.as_raw_fd(), addr.as_ptr().cast(), addr.len() as libc::socklen_t) };
    cvt(r as isize).map(drop)
}

/// sendto(2) of `data` on `sock` to `addr` (empty: none) with `flags`.
/// Returns the bytes sent.
pub fn sendto(sock: BorrowedFd<'_>, data: &[u8], flags: i32, addr: &[u8]) -> io::Result<usize> {
    // SAFETY: `data` and `addr` are buffers we borrow, with the lengths
    // passed; the kernel only reads them.
    cvt(unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            data.as_ptr().cast(),
            data.len(),
            flags,
            addr.as_ptr().cast(),
            addr.len() as libc::socklen_t,
        )
    })
}

/// sendmsg(2) of one buffer `data` on `sock`, to `addr` when given, with
/// ancillary `control` bytes (empty: none) and `flags`. Returns the bytes
/// sent.
pub fn sendmsg(
    sock: BorrowedFd<'_>,
    data: &[u8],
    addr: Option<&[u8]>,
    control: &[u8],
    flags: i32,
) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data, for which all zeroes is a valid value
    // (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    if let Some(a) = addr {
        msg.msg_name = a.as_ptr() as *mut libc::c_void;
        msg.msg_namelen = a.len() as libc::socklen_t;
    }
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !control.is_empty() {
        msg.msg_control = control.as_ptr() as *mut libc::c_void;
        msg.msg_controllen = control.len();
    }
    // SAFETY: every pointer in `msg` points at `iov` or at buffers we
    // borrow, all alive for the call; the kernel only reads them.
    cvt(unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, flags) })
}

/// An int-valued `SOL_SOCKET` option `opt` of `sock` (getsockopt(2)).
pub fn sockopt_int(sock: BorrowedFd<'_>, opt: i32) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: an int-sized buffer and its length, as getsockopt(2) takes.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    cvt(r as isize).map(|_| v)
}

/// recvmsg(2) of one message on `sock` into `buf`, with room for `N` fds of
/// SCM_RIGHTS control messages (MSG_CMSG_CLOEXEC when `cloexec`). Returns
/// the bytes read and the fds received, each owned by the caller (the
/// kernel installed them in our table for this call: nothing else holds
/// them); `None` instead of the fds when the control data was truncated
/// (more fds sent than `N`). Errors: recvmsg's (EINTR included).
pub fn recv_with_fds<const N: usize>(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
    cloexec: bool,
) -> io::Result<(usize, Option<Vec<OwnedFd>>)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut cmsg = nix::cmsg_space!([RawFd; N]);
    let mut iov = [io::IoSliceMut::new(buf)];
    let flags = if cloexec {
        MsgFlags::MSG_CMSG_CLOEXEC
    } else {
        MsgFlags::empty()
    };
    let msg = recvmsg::<()>(sock.as_raw_fd(), &mut iov, Some(&mut cmsg), flags)?;
    let Ok(cmsgs) = msg.cmsgs() else {
        return Ok((msg.bytes, None));
    };
    let mut fds = Vec::new();
    for c in cmsgs {
        if let ControlMessageOwned::ScmRights(received) = c {
            for fd in received {
                // SAFETY: SCM_RIGHTS fds are new in our fd table, installed
                // by this recvmsg; no other owner knows their numbers.
                fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    Ok((msg.bytes, Some(fds)))
}

/// The TCP state of `sock` (`tcpi_state` of `TCP_INFO`, tcp(7); 7 is
/// `TCP_CLOSE`: neither connected nor connecting).
pub fn tcp_state(sock: BorrowedFd<'_>) -> io::Result<u8> {
    let mut info = [0u8; 256];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: a buffer of the length we pass; the kernel writes at most
    // that much and sets `len`.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    cvt(r as isize)?;
    Ok(info[0])
}

/// The network namespace `sock` was made in (`SIOCGSKNS`, sock(7)), as a
/// new fd for setns(2). Needs CAP_NET_ADMIN over that namespace.
pub fn netns_of(sock: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    const SIOCGSKNS: libc::c_ulong = 0x894C;
    // SAFETY: SIOCGSKNS takes no argument and returns a new fd.
    let fd = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCGSKNS) };
    cvt(fd as isize)?;
    // SAFETY: a new fd the kernel just opened for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}
