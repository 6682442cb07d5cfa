//! chmod, fchmodat, chown, lchown, fchownat, truncate: changes to an
//! object the policy lets the caller write, made with its credentials.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::{at, check_write, fd_link, object, Call};
use crate::supervisor::creds::Creds;
use crate::supervisor::syscalls::path::{as_caller, Denied};
use crate::supervisor::syscalls::Task;
use crate::sys;

/// chmod(2), fchmodat(2), chown(2), lchown(2), fchownat(2), truncate(2).
pub(super) fn attr(c: &mut Call<'_>) -> Result<i64, Denied> {
    let (ctx, name, creds) = (c.ctx, c.name, c.creds);
    let (dirfd, pi) = if name.starts_with('f') {
        at(ctx, Some(0), 1)
    } else {
        at(ctx, None, 0)
    };
    let lookup = match name {
        "lchown" => libc::AT_SYMLINK_NOFOLLOW,
        "fchownat" => {
            let flags = ctx.arg(4) as i32;
            if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
                return Err(Denied::Errno(libc::EINVAL));
            }
            flags
        }
        _ => 0,
    };
    let fd = object(ctx, dirfd, pi, lookup, creds, c.detail)?;
    check_write(ctx, c.detail.as_str())?;
    if name == "truncate" {
        file_size_limit(ctx, &fd, ctx.arg(1) as i64, creds)?;
    }
    let link = fd_link(&fd);
    as_caller(creds, || match name {
        "chmod" | "fchmodat" => sys::fs::chmod(&link, ctx.arg(pi + 1) as u32),
        "truncate" => sys::fs::truncate(&link, ctx.arg(1) as i64),
        _ => sys::fs::chown_fd(fd.as_fd(), ctx.arg(pi + 1) as u32, ctx.arg(pi + 2) as u32),
    })?;
    Ok(0)
}

/// truncate(2) past the caller's RLIMIT_FSIZE: the kernel refuses to grow
/// a regular file beyond it with EFBIG and sends the caller SIGXFSZ, after
/// the permission checks (which the call itself would make).
fn file_size_limit(ctx: &dyn Task, fd: &OwnedFd, len: i64, creds: &Creds) -> Result<(), Denied> {
    let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| Denied::Errno(e as i32))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || len <= st.st_size {
        return Ok(());
    }
    let limit = sys::rlimit_of(ctx.pid(), libc::RLIMIT_FSIZE).map_err(|_| Denied::Errno(libc::ESRCH))?;
    if limit == libc::RLIM_INFINITY || len as u64 <= limit {
        return Ok(());
    }
    let link = fd_link(fd);
    as_caller(creds, || sys::fs::access_eaccess(&link, libc::W_OK))?;
    sys::signal_thread(ctx.pid(), libc::SIGXFSZ).map_err(|_| Denied::Errno(libc::ESRCH))?;
    Err(Denied::Errno(libc::EFBIG))
}
