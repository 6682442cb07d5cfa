//! access, faccessat, faccessat2: the kernel's answer for the caller's
//! credentials on an object the policy does not deny.

use super::{fd_link, object};
use crate::supervisor::syscalls::call::Call;
use crate::supervisor::syscalls::path::{as_caller, Denied};
use crate::sys;

/// access(2), faccessat(2), faccessat2(2).
pub(in crate::supervisor::syscalls) fn access(c: &mut Call<'_>) -> Result<i64, Denied> {
    let ctx = c.ctx;
    let (dirfd, pi) = c.path()?;
    let mode = c.mode() as i32;
    let flags = c.flags();
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
