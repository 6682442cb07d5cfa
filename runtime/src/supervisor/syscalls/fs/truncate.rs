//! truncate: a new size for a file the policy lets the caller write, set
//! with its credentials and within its RLIMIT_FSIZE.

use std::os::fd::{AsRawFd, OwnedFd};

use super::{check_write, fd_link, object};
use crate::abi::table::Arg;
use crate::supervisor::creds::Creds;
use crate::supervisor::syscalls::call::Call;
use crate::supervisor::syscalls::path::{as_caller, Denied};
use crate::supervisor::syscalls::Task;
use crate::sys;

/// truncate(2).
pub(in crate::supervisor::syscalls) fn truncate(c: &mut Call<'_>) -> Result<i64, Denied> {
    let (ctx, creds) = (c.ctx, c.creds);
    let (dirfd, pi) = c.path()?;
    let len = c.word(Arg::Len) as i64;
    let fd = object(ctx, dirfd, pi, c.flags(), creds, c.detail)?;
    check_write(ctx, c.detail.as_str())?;
    file_size_limit(ctx, &fd, len, creds)?;
    let link = fd_link(&fd);
    as_caller(creds, || sys::fs::truncate(&link, len))?;
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
