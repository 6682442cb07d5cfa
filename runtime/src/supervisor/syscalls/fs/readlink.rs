//! readlink and readlinkat: the target of a symlink the policy does not
//! deny, read through our O_PATH fd and copied to the caller.

use std::os::fd::AsFd;

use super::{object_raw, path_arg};
use crate::abi::table::Arg;
use crate::supervisor::syscalls::call::Call;
use crate::supervisor::syscalls::path::{Denied, PATH_MAX};
use crate::sys;

/// readlink(2), readlinkat(2).
pub(in crate::supervisor::syscalls) fn readlink(c: &mut Call<'_>) -> Result<i64, Denied> {
    let ctx = c.ctx;
    let (dirfd, pi) = c.path()?;
    let (buf, size) = (c.word(Arg::Buf), c.word(Arg::Size));
    if (size as i64) <= 0 {
        return Err(Denied::Errno(libc::EINVAL));
    }
    // readlinkat(2) with an empty path reads the link `dirfd` names (an
    // O_PATH fd of a symlink), since Linux 2.6.39.
    let raw = path_arg(ctx, pi)?;
    let lookup = libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH;
    let fd = object_raw(ctx, dirfd, &raw, lookup, c.creds, c.detail)?;
    let mut out = vec![0u8; (size as usize).min(PATH_MAX)];
    let n = match sys::fs::readlink_fd(fd.as_fd(), &mut out) {
        Ok(n) => n,
        // Not a symlink: do_readlinkat() says ENOENT for an empty path and
        // EINVAL for a name (ours is always empty).
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) && !raw.is_empty() => return Err(Denied::Errno(libc::EINVAL)),
        Err(e) => return Err(e.into()),
    };
    ctx.write_mem(buf, &out[..n]).map_err(|_| Denied::Errno(libc::EFAULT))?;
    Ok(n as i64)
}
