//! rename, renameat, renameat2, link, linkat: a second name (or a moved
//! one) where the policy allows writes on both. A rename of a directory
//! that rules restrict below is denied: it would move what they protect.

use std::os::fd::{AsFd, AsRawFd};

use super::{check_write, entry, fd_link, kind, new_name, object, path_arg, read_only};
use crate::supervisor::creds::Creds;
use crate::supervisor::syscalls::call::Call;
use crate::supervisor::syscalls::path::{as_caller, Denied, Last, Parent};
use crate::supervisor::syscalls::Task;
use crate::sys;

/// rename(2), renameat(2), renameat2(2).
pub(in crate::supervisor::syscalls) fn rename(c: &mut Call<'_>) -> Result<i64, Denied> {
    let (ctx, creds) = (c.ctx, c.creds);
    let ((od, op), (nd, np)) = (c.path()?, c.path2()?);
    let flags = c.flags() as u32;
    let known = libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT;
    let exchange = flags & libc::RENAME_EXCHANGE != 0;
    if flags & !known != 0 || (exchange && flags & (libc::RENAME_NOREPLACE | libc::RENAME_WHITEOUT) != 0) {
        return Err(Denied::Errno(libc::EINVAL));
    }
    let old = entry(ctx, od, op, creds, c.detail)?;
    // The record is `OLD -> NEW` from here on, `OLD -> ` when the new
    // name is not reached: a name holding ` -> ` itself always shows as
    // more than two parts (`cordon learn` leaves those out).
    c.detail.push_str(" -> ");
    let paths = &ctx.sup().policy().paths;
    if paths.restricts_below(&old.path) {
        // Moving a directory moves what the rules protect below it.
        return Err(Denied::Policy(old.path));
    }
    let mut d2 = String::new();
    let new = entry(ctx, nd, np, creds, &mut d2)?;
    c.detail.push_str(&d2);
    rename_names(&old, &new, flags, creds)?;
    if exchange && paths.restricts_below(&new.path) {
        // An exchange moves the new name's tree to the old name.
        return Err(Denied::Policy(new.path));
    }
    as_caller(creds, || {
        sys::fs::renameat2((old.dir.as_fd(), &old.name), (new.dir.as_fd(), &new.name), flags)
    })?;
    Ok(0)
}

/// link(2), linkat(2).
pub(in crate::supervisor::syscalls) fn link(c: &mut Call<'_>) -> Result<i64, Denied> {
    let (ctx, creds) = (c.ctx, c.creds);
    let ((od, op), (nd, np)) = (c.path()?, c.path2()?);
    let flags = c.flags();
    if flags & !(libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH) != 0 {
        return Err(Denied::Errno(libc::EINVAL));
    }
    if flags & libc::AT_SYMLINK_FOLLOW != 0 {
        return link_followed(ctx, (od, op), (nd, np), 0, creds, c.detail);
    }
    if flags & libc::AT_EMPTY_PATH != 0 && path_arg(ctx, op)?.is_empty() {
        // The object open as `od` gets the new name.
        return link_followed(ctx, (od, op), (nd, np), libc::AT_EMPTY_PATH, creds, c.detail);
    }
    let old = entry(ctx, od, op, creds, c.detail)?;
    if old.last != Last::Norm || old.slash {
        // The kernel looks the old name up whole: "f/" and "." are
        // followed to what they name (a directory gets EPERM, a
        // non-directory with a slash ENOTDIR).
        drop(old);
        return link_followed(ctx, (od, op), (nd, np), 0, creds, c.detail);
    }
    c.detail.push_str(" -> ");
    let mut d2 = String::new();
    let new = entry(ctx, nd, np, creds, &mut d2)?;
    c.detail.push_str(&d2);
    new_name(&new, creds)?;
    as_caller(creds, || {
        sys::fs::linkat((old.dir.as_raw_fd(), &old.name), (new.dir.as_fd(), &new.name), 0)
    })?;
    Ok(0)
}

/// linkat(2) with AT_SYMLINK_FOLLOW: the object a symlink names gets the
/// new name, so the decision is on that object's path (it must be
/// writable: a new name would let a denied or read-only file be reached
/// by a path no rule covers), and the link is made to exactly that object
/// through our O_PATH fd's `/proc/self/fd` link.
fn link_followed(
    ctx: &dyn Task,
    (od, op): (i32, usize),
    (nd, np): (i32, usize),
    lookup: i32,
    creds: &Creds,
    detail: &mut String,
) -> Result<i64, Denied> {
    let old = object(ctx, od, op, lookup, creds, detail)?;
    check_write(ctx, detail)?;
    detail.push_str(" -> ");
    let mut d2 = String::new();
    let new = entry(ctx, nd, np, creds, &mut d2)?;
    detail.push_str(&d2);
    new_name(&new, creds)?;
    let link = fd_link(&old);
    as_caller(creds, || {
        sys::fs::linkat(
            (libc::AT_FDCWD, &link),
            (new.dir.as_fd(), &new.name),
            libc::AT_SYMLINK_FOLLOW,
        )
    })?;
    Ok(0)
}

/// rename's checks on its two names, in the kernel's order: "/", "." and
/// ".." are busy (or exist, with RENAME_NOREPLACE); a trailing slash on
/// either name requires the source (and, for an exchange, the target) to
/// be a directory.
fn rename_names(old: &Parent, new: &Parent, flags: u32, creds: &Creds) -> Result<(), Denied> {
    if old.last != Last::Norm {
        return Err(Denied::Errno(libc::EBUSY));
    }
    if new.last != Last::Norm {
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        return Err(Denied::Errno(if noreplace { libc::EEXIST } else { libc::EBUSY }));
    }
    if !old.slash && !new.slash {
        return Ok(());
    }
    read_only(old)?;
    let old_kind = kind(old, creds)?;
    let exchange = flags & libc::RENAME_EXCHANGE != 0;
    let new_kind = match kind(new, creds) {
        Ok(_) if flags & libc::RENAME_NOREPLACE != 0 => return Err(Denied::Errno(libc::EEXIST)),
        Ok(k) => Some(k),
        Err(Denied::Errno(libc::ENOENT)) if !exchange => None,
        Err(e) => return Err(e),
    };
    if exchange && new.slash && new_kind != Some(libc::S_IFDIR) {
        return Err(Denied::Errno(libc::ENOTDIR));
    }
    if old_kind != libc::S_IFDIR && (old.slash || (!exchange && new.slash)) {
        return Err(Denied::Errno(libc::ENOTDIR));
    }
    Ok(())
}
