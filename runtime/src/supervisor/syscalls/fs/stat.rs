//! stat, lstat, newfstatat and statx: the metadata of an object the policy
//! does not deny, taken on our own O_PATH fd and copied to the caller.

use std::os::fd::{AsFd, AsRawFd};

use super::object;
use crate::abi::table::Arg;
use crate::supervisor::syscalls::call::Call;
use crate::supervisor::syscalls::path::Denied;
use crate::sys;

/// stat(2), lstat(2), newfstatat(2): `struct stat` to the caller's buffer.
pub(in crate::supervisor::syscalls) fn stat(c: &mut Call<'_>) -> Result<i64, Denied> {
    let ctx = c.ctx;
    let (dirfd, pi) = c.path()?;
    let flags = c.flags();
    // vfs_fstatat(): only these flags.
    if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_NO_AUTOMOUNT | libc::AT_EMPTY_PATH) != 0 {
        return Err(Denied::Errno(libc::EINVAL));
    }
    let buf = c.word(Arg::Buf);
    let fd = object(ctx, dirfd, pi, flags, c.creds, c.detail)?;
    let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| Denied::Errno(e as i32))?;
    ctx.write_mem(buf, sys::pod_bytes(&st))
        .map_err(|_| Denied::Errno(libc::EFAULT))?;
    Ok(0)
}

/// statx(2): `struct statx` with the caller's mask and sync type.
pub(in crate::supervisor::syscalls) fn statx(c: &mut Call<'_>) -> Result<i64, Denied> {
    let ctx = c.ctx;
    let flags = c.flags();
    let mask = c.word(Arg::Mask) as u32;
    // do_statx(): only these flags, one sync type, and no reserved mask
    // bit.
    let known = libc::AT_SYMLINK_NOFOLLOW | libc::AT_NO_AUTOMOUNT | libc::AT_EMPTY_PATH | libc::AT_STATX_SYNC_TYPE;
    if flags & !known != 0
        || flags & libc::AT_STATX_SYNC_TYPE == libc::AT_STATX_SYNC_TYPE
        || mask & (libc::STATX__RESERVED as u32) != 0
    {
        return Err(Denied::Errno(libc::EINVAL));
    }
    let (dirfd, pi) = c.path()?;
    let fd = object(ctx, dirfd, pi, flags, c.creds, c.detail)?;
    let stx = sys::fs::statx_fd(fd.as_fd(), flags & libc::AT_STATX_SYNC_TYPE, mask)?;
    ctx.write_mem(c.word(Arg::Buf), sys::pod_bytes(&stx))
        .map_err(|_| Denied::Errno(libc::EFAULT))?;
    Ok(0)
}
