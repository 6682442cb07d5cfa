//! symlink and symlinkat: a new symlink where the policy allows writes.
//! Its target is stored as given: it is resolved (and checked) when used.

use std::ffi::CString;
use std::os::fd::AsFd;

use super::{at, entry, new_name, path_arg, Call};
use crate::supervisor::syscalls::path::{as_caller, Denied};
use crate::sys;

/// symlink(2), symlinkat(2).
pub(super) fn symlink(c: &mut Call<'_>) -> Result<i64, Denied> {
    let ctx = c.ctx;
    let target = CString::new(path_arg(ctx, 0)?).map_err(|_| Denied::Errno(libc::EINVAL))?;
    let (nd, np) = if c.name == "symlinkat" {
        at(ctx, Some(1), 2)
    } else {
        at(ctx, None, 1)
    };
    let p = entry(ctx, nd, np, c.creds, c.detail)?;
    new_name(&p, c.creds)?;
    as_caller(c.creds, || sys::fs::symlinkat(&target, p.dir.as_fd(), &p.name))?;
    Ok(0)
}
