//! The directory-entry and metadata calls the file handlers
//! (`supervisor::syscalls::fs`) make on objects the supervisor resolved
//! itself: a directory fd plus a name, an O_PATH fd, or that fd's
//! `/proc/self/fd/N` path. Each returns the kernel's errno unchanged, so
//! the caller sees what the kernel said.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

fn cvt(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// statx(2) of the object `fd` names (`AT_EMPTY_PATH`), with `sync` (the
/// `AT_STATX_SYNC_TYPE` bits) and the caller's `mask`.
pub fn statx_fd(fd: BorrowedFd<'_>, sync: i32, mask: u32) -> io::Result<libc::statx> {
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `stx` is a statx buffer we own; the empty path literal is
    // NUL-terminated and with AT_EMPTY_PATH names `fd` itself.
    cvt(unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | sync,
            mask,
            stx.as_mut_ptr(),
        )
    })?;
    // SAFETY: statx succeeded and filled the buffer (and it was zeroed, so
    // every byte is initialised either way).
    Ok(unsafe { stx.assume_init() })
}

/// `faccessat(AT_FDCWD, path, mode, AT_EACCESS)`: whether the current
/// (filesystem) credentials may access `path` with `mode`.
pub fn access_eaccess(path: &CStr, mode: i32) -> io::Result<()> {
    // SAFETY: a NUL-terminated path we borrow; the kernel only reads it.
    cvt(unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), mode, libc::AT_EACCESS) })
}

/// readlinkat(2) of the symlink `fd` names (an O_PATH fd, empty path) into
/// `out`. Returns the number of bytes written (not NUL-terminated).
pub fn readlink_fd(fd: BorrowedFd<'_>, out: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `out` is a buffer we own, passed with its length; the empty
    // path literal is NUL-terminated.
    let n = unsafe { libc::readlinkat(fd.as_raw_fd(), c"".as_ptr(), out.as_mut_ptr().cast(), out.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// mkdirat(2): directory `name` in `dir` with `mode` (before the umask).
pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: a borrowed dir fd and a NUL-terminated name the kernel only reads.
    cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) })
}

/// mknodat(2): node `name` in `dir` of `mode` (type and permissions) and
/// device number `dev`.
pub fn mknodat(dir: BorrowedFd<'_>, name: &CStr, mode: u32, dev: u64) -> io::Result<()> {
    // SAFETY: as for mkdirat.
    cvt(unsafe { libc::mknodat(dir.as_raw_fd(), name.as_ptr(), mode, dev) })
}

/// unlinkat(2) of `name` in `dir`; `flags` is 0 or `AT_REMOVEDIR`.
pub fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> io::Result<()> {
    // SAFETY: as for mkdirat.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) })
}

/// renameat2(2) of `old` (a dir fd and name) to `new`, with the
/// `RENAME_*` `flags`.
pub fn renameat2(old: (BorrowedFd<'_>, &CStr), new: (BorrowedFd<'_>, &CStr), flags: u32) -> io::Result<()> {
    // SAFETY: borrowed dir fds and NUL-terminated names the kernel only reads.
    cvt(unsafe {
        libc::renameat2(
            old.0.as_raw_fd(),
            old.1.as_ptr(),
            new.0.as_raw_fd(),
            new.1.as_ptr(),
            flags,
        )
    })
}

/// linkat(2): `new` (a dir fd and name) becomes a name of `old`; `flags`
/// may hold `AT_SYMLINK_FOLLOW`. `old`'s fd may be `AT_FDCWD` for an
/// absolute path.
pub fn linkat(old: (i32, &CStr), new: (BorrowedFd<'_>, &CStr), flags: i32) -> io::Result<()> {
    // SAFETY: NUL-terminated names the kernel only reads; fds are integers
    // to it (a bad one gives EBADF).
    cvt(unsafe { libc::linkat(old.0, old.1.as_ptr(), new.0.as_raw_fd(), new.1.as_ptr(), flags) })
}

/// symlinkat(2): `name` in `dir` becomes a symlink to `target`.
pub fn symlinkat(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated strings and a borrowed dir fd; the kernel only
    // reads them.
    cvt(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) })
}

/// `fchmodat(AT_FDCWD, path, mode, 0)`: chmod of what `path` names.
pub fn chmod(path: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: a NUL-terminated path the kernel only reads.
    cvt(unsafe { libc::fchmodat(libc::AT_FDCWD, path.as_ptr(), mode, 0) })
}

/// truncate(2) of the file `path` names to `len` bytes.
pub fn truncate(path: &CStr, len: i64) -> io::Result<()> {
    // SAFETY: a NUL-terminated path the kernel only reads.
    cvt(unsafe { libc::truncate(path.as_ptr(), len) })
}

/// `fchownat(fd, "", uid, gid, AT_EMPTY_PATH)`: chown of the object `fd`
/// names (an O_PATH fd included); `u32::MAX` (-1) leaves an id unchanged.
pub fn chown_fd(fd: BorrowedFd<'_>, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: a borrowed fd and a NUL-terminated empty path literal.
    cvt(unsafe { libc::fchownat(fd.as_raw_fd(), c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH) })
}

/// mknod(2) of `path` with `mode` (type and permissions) and device `dev`.
pub fn mknod(path: &CStr, mode: u32, dev: u64) -> io::Result<()> {
    // SAFETY: a NUL-terminated path the kernel only reads.
    cvt(unsafe { libc::mknod(path.as_ptr(), mode, dev) })
}

/// lgetxattr(2): the value of attribute `name` of `path` (not followed)
/// into `buf`; returns its length (ERANGE when `buf` is too small).
pub fn lgetxattr(path: &CStr, name: &CStr, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: NUL-terminated strings and a buffer we own, with its length.
    let r = unsafe { libc::lgetxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

/// lsetxattr(2): sets attribute `name` of `path` (not followed) to `value`.
pub fn lsetxattr(path: &CStr, name: &CStr, value: &[u8]) -> io::Result<()> {
    // SAFETY: NUL-terminated strings and a buffer we borrow, with its
    // length; the kernel only reads them.
    cvt(unsafe { libc::lsetxattr(path.as_ptr(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) })
}
