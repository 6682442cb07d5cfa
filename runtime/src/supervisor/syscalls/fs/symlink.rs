//! symlink and symlinkat: a new symlink where the policy allows writes.
//! Its target is stored as given: it is resolved (and checked) when used.

use std::ffi::CString;
use std::os::fd::AsFd;

use super::{entry, new_name, path_arg};
use crate::abi::table::Arg;
use crate::supervisor::syscalls::call::Call;
use crate::supervisor::syscalls::path::{as_caller, Denied};
use crate::sys;

/// symlink(2), symlinkat(2).
pub(in crate::supervisor::syscalls) fn symlink(c: &mut Call<'_>) -> Result<i64, Denied> {
    let ctx = c.ctx;
    let target = c.entry.arg(Arg::Target).ok_or(Denied::Errno(libc::ENOSYS))?;
    let target = CString::new(path_arg(ctx, target)?).map_err(|_| Denied::Errno(libc::EINVAL))?;
    let (nd, np) = c.path()?;
    let p = entry(ctx, nd, np, c.creds, c.detail)?;
    new_name(&p, c.creds)?;
    as_caller(c.creds, || sys::fs::symlinkat(&target, p.dir.as_fd(), &p.name))?;
    Ok(0)
}
