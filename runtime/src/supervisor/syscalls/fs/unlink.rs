//! unlink, rmdir, unlinkat: removal of an entry where the policy allows
//! writes, with the kernel's errno for "/", "." and ".." and a trailing
//! slash.

use std::os::fd::AsFd;

use super::{entry, kind, read_only};
use crate::supervisor::syscalls::call::Call;
use crate::supervisor::syscalls::path::{as_caller, Denied, Last};
use crate::sys;

/// unlink(2), rmdir(2), unlinkat(2).
pub(in crate::supervisor::syscalls) fn unlink(c: &mut Call<'_>) -> Result<i64, Denied> {
    let ctx = c.ctx;
    let (dirfd, pi) = c.path()?;
    let flags = c.flags();
    if flags & !libc::AT_REMOVEDIR != 0 {
        return Err(Denied::Errno(libc::EINVAL));
    }
    let p = entry(ctx, dirfd, pi, c.creds, c.detail)?;
    if flags & libc::AT_REMOVEDIR != 0 {
        // A trailing slash changes nothing for rmdir: it removes
        // directories only.
        match p.last {
            Last::Norm => {}
            Last::Dot => return Err(Denied::Errno(libc::EINVAL)),
            Last::DotDot => return Err(Denied::Errno(libc::ENOTEMPTY)),
            Last::Root => return Err(Denied::Errno(libc::EBUSY)),
        }
    } else if p.last != Last::Norm {
        return Err(Denied::Errno(libc::EISDIR));
    } else if p.slash {
        // "f/" names a directory: unlink refuses one (EISDIR), and
        // anything else is not what the slash asked for.
        read_only(&p)?;
        return Err(Denied::Errno(if kind(&p, c.creds)? == libc::S_IFDIR {
            libc::EISDIR
        } else {
            libc::ENOTDIR
        }));
    }
    as_caller(c.creds, || sys::fs::unlinkat(p.dir.as_fd(), &p.name, flags))?;
    Ok(0)
}
