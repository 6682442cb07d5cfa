//! mkdir, mkdirat, mknod, mknodat: a new entry where the policy allows
//! writes, made with the caller's credentials and umask (and, for a
//! device node, its device cgroup's consent).

use std::os::fd::AsFd;

use super::{entry, new_name};
use crate::abi::table::Arg;
use crate::supervisor::syscalls::call::Call;
use crate::supervisor::syscalls::path::{as_caller, Denied, Last};
use crate::sys;

/// mkdir(2), mkdirat(2).
pub(in crate::supervisor::syscalls) fn mkdir(c: &mut Call<'_>) -> Result<i64, Denied> {
    let (dirfd, pi) = c.path()?;
    let mode = c.mode() & !c.creds.umask;
    let p = entry(c.ctx, dirfd, pi, c.creds, c.detail)?;
    // A trailing slash asks for a directory: what mkdir makes.
    if p.last != Last::Norm {
        return Err(Denied::Errno(libc::EEXIST));
    }
    as_caller(c.creds, || sys::fs::mkdirat(p.dir.as_fd(), &p.name, mode))?;
    Ok(0)
}

/// mknod(2), mknodat(2).
pub(in crate::supervisor::syscalls) fn mknod(c: &mut Call<'_>) -> Result<i64, Denied> {
    let (dirfd, pi) = c.path()?;
    let mode = c.mode() & !c.creds.umask;
    let dev = c.word(Arg::Dev);
    let p = entry(c.ctx, dirfd, pi, c.creds, c.detail)?;
    new_name(&p, c.creds)?;
    // The caller's device cgroup decides on a device node, not the
    // supervisor's (the kernel would ask ours).
    let kind = match mode & libc::S_IFMT {
        libc::S_IFCHR => Some('c'),
        libc::S_IFBLK => Some('b'),
        _ => None,
    };
    if let Some(kind) = kind {
        use crate::supervisor::devices;
        devices::check_dev(c.ctx.pid(), kind, dev, devices::Access::Mknod).map_err(Denied::Errno)?;
    }
    as_caller(c.creds, || sys::fs::mknodat(p.dir.as_fd(), &p.name, mode, dev))?;
    Ok(0)
}
