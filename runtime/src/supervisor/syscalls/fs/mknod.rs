//! mkdir, mkdirat, mknod, mknodat: a new entry where the policy allows
//! writes, made with the caller's credentials and umask (and, for a
//! device node, its device cgroup's consent).

use std::os::fd::AsFd;

use super::{at, entry, new_name, Call};
use crate::supervisor::syscalls::path::{as_caller, Denied, Last};
use crate::sys;

/// mkdir(2), mkdirat(2), mknod(2), mknodat(2).
pub(super) fn mknod(c: &mut Call<'_>) -> Result<i64, Denied> {
    let ctx = c.ctx;
    let name = c.name;
    let (dirfd, pi) = if name.ends_with("at") {
        at(ctx, Some(0), 1)
    } else {
        at(ctx, None, 0)
    };
    let mode = ctx.arg(pi + 1) as u32 & !c.creds.umask;
    let p = entry(ctx, dirfd, pi, c.creds, c.detail)?;
    if name.starts_with("mkdir") {
        // A trailing slash asks for a directory: what mkdir makes.
        if p.last != Last::Norm {
            return Err(Denied::Errno(libc::EEXIST));
        }
    } else {
        new_name(&p, c.creds)?;
    }
    // The caller's device cgroup decides on a device node, not the
    // supervisor's (the kernel would ask ours).
    let kind = match mode & libc::S_IFMT {
        libc::S_IFCHR if name.starts_with("mknod") => Some('c'),
        libc::S_IFBLK if name.starts_with("mknod") => Some('b'),
        _ => None,
    };
    if let Some(kind) = kind {
        use crate::supervisor::devices;
        devices::check_dev(ctx.pid(), kind, ctx.arg(pi + 2), devices::Access::Mknod).map_err(Denied::Errno)?;
    }
    as_caller(c.creds, || {
        if name.starts_with("mkdir") {
            sys::fs::mkdirat(p.dir.as_fd(), &p.name, mode)
        } else {
            sys::fs::mknodat(p.dir.as_fd(), &p.name, mode, ctx.arg(pi + 2))
        }
    })?;
    Ok(0)
}
