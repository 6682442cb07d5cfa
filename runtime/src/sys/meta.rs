//! File metadata calls on objects the supervisor holds (an O_PATH fd, or a
//! copy of a caller's fd): the raw syscalls `nix` does not cover with the
//! flags the handlers need (`AT_EMPTY_PATH` on an O_PATH fd, the `l*`
//! xattr calls through a directory fd's `/proc/self/fd` path, file-flag
//! ioctls with a copied argument). Each returns the syscall's result or
//! its errno, unchanged, so the caller sees what the kernel said.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

fn cvt(r: libc::c_long) -> io::Result<i64> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `fchmodat2(fd, "", mode, AT_EMPTY_PATH | nofollow)` (Linux 6.6): chmod of
/// the object `fd` names, an O_PATH fd included; `flags` may add
/// `AT_SYMLINK_NOFOLLOW`. ENOSYS on older kernels, as for the caller.
pub fn fchmod_empty(fd: BorrowedFd<'_>, mode: u32, flags: i32) -> io::Result<i64> {
    // SAFETY: a borrowed fd, a NUL-terminated empty string literal and
    // integers; the kernel reads only the string.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_fchmodat2,
            fd.as_raw_fd(),
            c"".as_ptr(),
            mode,
            libc::AT_EMPTY_PATH | flags,
        )
    })
}

/// `utimensat(fd, "", times, AT_EMPTY_PATH | flags)`: sets the times of the
/// object `fd` names (an O_PATH fd included); `None` sets both to now.
pub fn utimens_empty(fd: BorrowedFd<'_>, times: Option<&[libc::timespec; 2]>, flags: i32) -> io::Result<i64> {
    let ptr = times.map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: `ptr` is null or points at two timespecs we own for the
    // call; the path is a NUL-terminated literal.
    cvt(unsafe { libc::utimensat(fd.as_raw_fd(), c"".as_ptr(), ptr, libc::AT_EMPTY_PATH | flags) }.into())
}

/// Which xattr call to make: through a path that is followed at the end,
/// one that is not (`l*`), or an fd (`f*`).
#[derive(Debug, Clone, Copy)]
pub enum XattrOn<'a> {
    /// setxattr(2)/removexattr(2) on a path.
    Path(&'a CStr),
    /// lsetxattr(2)/lremovexattr(2) on a path.
    LinkPath(&'a CStr),
    /// fsetxattr(2)/fremovexattr(2) on an fd.
    Fd(BorrowedFd<'a>),
}

/// setxattr(2) and its `l`/`f` forms with a copied name and value.
pub fn setxattr(on: XattrOn<'_>, name: &CStr, value: &[u8], flags: i32) -> io::Result<i64> {
    let (v, n) = (value.as_ptr().cast(), value.len());
    // SAFETY: NUL-terminated strings and a value buffer with its length,
    // all ours for the call; fds borrowed.
    let r = unsafe {
        match on {
            XattrOn::Path(p) => libc::setxattr(p.as_ptr(), name.as_ptr(), v, n, flags),
            XattrOn::LinkPath(p) => libc::lsetxattr(p.as_ptr(), name.as_ptr(), v, n, flags),
            XattrOn::Fd(fd) => libc::fsetxattr(fd.as_raw_fd(), name.as_ptr(), v, n, flags),
        }
    };
    cvt(r.into())
}

/// removexattr(2) and its `l`/`f` forms.
pub fn removexattr(on: XattrOn<'_>, name: &CStr) -> io::Result<i64> {
    // SAFETY: NUL-terminated strings ours for the call; fds borrowed.
    let r = unsafe {
        match on {
            XattrOn::Path(p) => libc::removexattr(p.as_ptr(), name.as_ptr()),
            XattrOn::LinkPath(p) => libc::lremovexattr(p.as_ptr(), name.as_ptr()),
            XattrOn::Fd(fd) => libc::fremovexattr(fd.as_raw_fd(), name.as_ptr()),
        }
    };
    cvt(r.into())
}

/// ioctl(2) `cmd` on `fd` with `arg` pointing at a copy of the caller's
/// argument (the kernel reads at most `arg.len()` bytes for the commands
/// the handlers pass: FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR, FS_IOC_SETVERSION).
pub fn ioctl_in(fd: BorrowedFd<'_>, cmd: u32, arg: &[u8]) -> io::Result<i64> {
    // SAFETY: `arg` is a buffer we own, as large as what `cmd` reads; the
    // commands passed only read from it.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, arg.as_ptr()) }.into())
}
