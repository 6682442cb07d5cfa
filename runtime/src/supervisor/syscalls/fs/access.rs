//! access, faccessat, faccessat2: the kernel's answer for the caller's
//! credentials on an object the policy does not deny.

use super::{at, fd_link, object, Call};
use crate::supervisor::syscalls::path::{as_caller, Denied};
use crate::sys;

/// access(2), faccessat(2), faccessat2(2).
pub(super) fn access(c: &mut Call<'_>) -> Result<i64, Denied> {
    let ctx = c.ctx;
    let name = c.name;
    let (dirfd, pi) = if name == "access" {
        at(ctx, None, 0)
    } else {
        at(ctx, Some(0), 1)
    };
    let mode = if name == "access" { ctx.arg(1) } else { ctx.arg(2) } as i32;
    let flags = if name == "faccessat2" { ctx.arg(3) as i32 } else { 0 };
    // do_faccessat(): the mode's bits and these flags only.
    if mode & !(libc::F_OK | libc::R_OK | libc::W_OK | libc::X_OK) != 0
        || flags & !(libc::AT_EACCESS | libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0
    {
        return Err(Denied::Errno(libc::EINVAL));
    }
    let lookup = flags & (libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH);
    let fd = object(ctx, dirfd, pi, lookup, c.creds, c.detail)?;
    let link = fd_link(&fd);
    as_caller(c.creds, || sys::fs::access_eaccess(&link, mode))?;
    Ok(0)
}
