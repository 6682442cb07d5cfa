//! File metadata and directory-entry syscalls under the path policy: the
//! stat, access and readlink families (a denied path gives EACCES, so its
//! metadata stays hidden) and the calls that change the tree (mkdir,
//! unlink, rename, link, symlink, chmod, chown, truncate, mknod), which need
//! write access to every path they touch (a denied or read-only path gives
//! EACCES).
//!
//! Like opens, they are performed by the supervisor on objects it resolved
//! itself under the caller's root (openat2 RESOLVE_IN_ROOT), with the
//! caller's credentials and umask, and the results copied back: the kernel
//! never re-reads a path the decision was based on.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

use super::path::*;
use super::{Ctx, Outcome, Reply};
use crate::supervisor::creds::Creds;
use crate::sys;

/// Handles one notification of the families above (the file syscalls of
/// [`crate::policy::EMULATED`] other than the open family).
pub fn fs(ctx: &Ctx<'_>, name: &str) -> Outcome {
    let mut detail = String::new();
    let reply = match run(ctx, name, &mut detail) {
        Ok(v) => Reply::Value(v),
        Err(Denied::Policy(p)) => return Outcome::path_denied(ctx, p),
        Err(Denied::Errno(e)) => Reply::Errno(e),
    };
    Outcome::new(reply, "allow", detail)
}

fn path_arg(ctx: &Ctx<'_>, i: usize) -> Result<Vec<u8>, Denied> {
    sys::read_cstring(ctx.pid(), ctx.arg(i), PATH_MAX)
        .map_err(|e| Denied::Errno(e.raw_os_error().unwrap_or(libc::EFAULT)))
}

fn check_read(ctx: &Ctx<'_>, path: &str) -> Result<(), Denied> {
    if ctx.sup.policy.paths.access(path) == crate::policy::PathAccess::Deny {
        return Err(Denied::Policy(path.to_string()));
    }
    Ok(())
}

pub(super) fn check_write(ctx: &Ctx<'_>, path: &str) -> Result<(), Denied> {
    if !ctx.sup.policy.paths.allows_open(path, libc::O_WRONLY as u64) {
        return Err(Denied::Policy(path.to_string()));
    }
    Ok(())
}

fn ok_or_errno(r: libc::c_int) -> std::io::Result<i64> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(i64::from(r))
    }
}

fn empty() -> CString {
    CString::default()
}

/// An O_PATH fd's `/proc/self/fd/N` path: operations through it act on
/// exactly that object.
fn fd_link(fd: &OwnedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default()
}

fn run(ctx: &Ctx<'_>, name: &str, detail: &mut String) -> Result<i64, Denied> {
    let pid = ctx.pid();
    let fdarg = |i: usize| ctx.arg(i) as i32;
    let creds = ctx.creds().map_err(|_| Denied::Errno(libc::ESRCH))?;
    // (dirfd, path argument index) of the first path, per syscall.
    let at = |dirfd_idx: Option<usize>, path_idx: usize| -> (i32, usize) {
        (dirfd_idx.map(fdarg).unwrap_or(libc::AT_FDCWD), path_idx)
    };
    match name {
        "stat" | "lstat" | "newfstatat" => {
            let ((dirfd, pi), flags) = match name {
                "stat" => (at(None, 0), 0),
                "lstat" => (at(None, 0), libc::AT_SYMLINK_NOFOLLOW),
                _ => (at(Some(0), 1), ctx.arg(3) as i32),
            };
            // vfs_fstatat(): only these flags.
            if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_NO_AUTOMOUNT | libc::AT_EMPTY_PATH) != 0 {
                return Err(Denied::Errno(libc::EINVAL));
            }
            let buf = if name == "newfstatat" { ctx.arg(2) } else { ctx.arg(1) };
            let fd = object(ctx, dirfd, pi, flags, &creds, detail)?;
            let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| Denied::Errno(e as i32))?;
            sys::write_mem(pid, buf, sys::pod_bytes(&st)).map_err(|_| Denied::Errno(libc::EFAULT))?;
            Ok(0)
        }
        "statx" => {
            let flags = ctx.arg(2) as i32;
            // do_statx(): only these flags, one sync type, and no
            // reserved mask bit.
            let known =
                libc::AT_SYMLINK_NOFOLLOW | libc::AT_NO_AUTOMOUNT | libc::AT_EMPTY_PATH | libc::AT_STATX_SYNC_TYPE;
            if flags & !known != 0
                || flags & libc::AT_STATX_SYNC_TYPE == libc::AT_STATX_SYNC_TYPE
                || ctx.arg(3) as u32 & (libc::STATX__RESERVED as u32) != 0
            {
                return Err(Denied::Errno(libc::EINVAL));
            }
            let fd = object(ctx, fdarg(0), 1, flags, &creds, detail)?;
            let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
            let sync = flags & libc::AT_STATX_SYNC_TYPE;
            // SAFETY: `stx` is a statx buffer we own; the empty path with
            // AT_EMPTY_PATH names `fd` itself.
            let r = unsafe {
                libc::statx(
                    fd.as_raw_fd(),
                    empty().as_ptr(),
                    libc::AT_EMPTY_PATH | sync,
                    ctx.arg(3) as u32,
                    stx.as_mut_ptr(),
                )
            };
            ok_or_errno(r)?;
            // SAFETY: statx succeeded and filled the buffer.
            let stx = unsafe { stx.assume_init() };
            sys::write_mem(pid, ctx.arg(4), sys::pod_bytes(&stx)).map_err(|_| Denied::Errno(libc::EFAULT))?;
            Ok(0)
        }
        "access" | "faccessat" | "faccessat2" => {
            let (dirfd, pi) = if name == "access" { at(None, 0) } else { at(Some(0), 1) };
            let mode = if name == "access" { ctx.arg(1) } else { ctx.arg(2) } as i32;
            let flags = if name == "faccessat2" { ctx.arg(3) as i32 } else { 0 };
            // do_faccessat(): the mode's bits and these flags only.
            if mode & !(libc::F_OK | libc::R_OK | libc::W_OK | libc::X_OK) != 0
                || flags & !(libc::AT_EACCESS | libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0
            {
                return Err(Denied::Errno(libc::EINVAL));
            }
            let fd = object(
                ctx,
                dirfd,
                pi,
                flags & (libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH),
                &creds,
                detail,
            )?;
            let link = fd_link(&fd);
            Ok(as_caller(&creds, || {
                // SAFETY: a NUL-terminated path we own.
                ok_or_errno(unsafe { libc::faccessat(libc::AT_FDCWD, link.as_ptr(), mode, libc::AT_EACCESS) })
            })?)
        }
        "readlink" | "readlinkat" => {
            let (dirfd, pi) = if name == "readlink" {
                at(None, 0)
            } else {
                at(Some(0), 1)
            };
            let (buf, size) = if name == "readlink" {
                (ctx.arg(1), ctx.arg(2))
            } else {
                (ctx.arg(2), ctx.arg(3))
            };
            if (size as i64) <= 0 {
                return Err(Denied::Errno(libc::EINVAL));
            }
            // readlinkat(2) with an empty path reads the link `dirfd`
            // names (an O_PATH fd of a symlink), since Linux 2.6.39.
            let raw = path_arg(ctx, pi)?;
            let fd = object_raw(
                ctx,
                dirfd,
                &raw,
                libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH,
                &creds,
                detail,
            )?;
            let mut out = vec![0u8; (size as usize).min(PATH_MAX)];
            // SAFETY: `out` is ours and its length is passed.
            let n = unsafe { libc::readlinkat(fd.as_raw_fd(), empty().as_ptr(), out.as_mut_ptr().cast(), out.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                // Not a symlink: do_readlinkat() says ENOENT for an empty
                // path and EINVAL for a name (ours is always empty).
                if e.raw_os_error() == Some(libc::ENOENT) && !raw.is_empty() {
                    return Err(Denied::Errno(libc::EINVAL));
                }
                return Err(e.into());
            }
            sys::write_mem(pid, buf, &out[..n as usize]).map_err(|_| Denied::Errno(libc::EFAULT))?;
            Ok(n as i64)
        }
        "mkdir" | "mkdirat" | "mknod" | "mknodat" => {
            let (dirfd, pi) = if name.ends_with("at") {
                at(Some(0), 1)
            } else {
                at(None, 0)
            };
            let mode = ctx.arg(pi + 1) as u32 & !creds.umask;
            let p = entry(ctx, dirfd, pi, &creds, detail)?;
            if name.starts_with("mkdir") {
                // A trailing slash asks for a directory: what mkdir makes.
                if p.last != Last::Norm {
                    return Err(Denied::Errno(libc::EEXIST));
                }
            } else {
                new_name(&p, &creds)?;
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
                devices::check_dev(pid, kind, ctx.arg(pi + 2), devices::Access::Mknod).map_err(Denied::Errno)?;
            }
            as_caller(&creds, || {
                let r = if name.starts_with("mkdir") {
                    // SAFETY: dir fd and name we own.
                    unsafe { libc::mkdirat(p.dir.as_raw_fd(), p.name.as_ptr(), mode) }
                } else {
                    // SAFETY: as above.
                    unsafe { libc::mknodat(p.dir.as_raw_fd(), p.name.as_ptr(), mode, ctx.arg(pi + 2)) }
                };
                ok_or_errno(r)
            })
        }
        "unlink" | "rmdir" | "unlinkat" => {
            let (dirfd, pi) = if name == "unlinkat" {
                at(Some(0), 1)
            } else {
                at(None, 0)
            };
            let flags = match name {
                "rmdir" => libc::AT_REMOVEDIR,
                "unlinkat" => ctx.arg(2) as i32,
                _ => 0,
            };
            if flags & !libc::AT_REMOVEDIR != 0 {
                return Err(Denied::Errno(libc::EINVAL));
            }
            let p = entry(ctx, dirfd, pi, &creds, detail)?;
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
                return Err(Denied::Errno(if kind(&p, &creds)? == libc::S_IFDIR {
                    libc::EISDIR
                } else {
                    libc::ENOTDIR
                }));
            }
            as_caller(&creds, || {
                // SAFETY: dir fd and NUL-terminated name we own.
                ok_or_errno(unsafe { libc::unlinkat(p.dir.as_raw_fd(), p.name.as_ptr(), flags) })
            })
        }
        "rename" | "renameat" | "renameat2" | "link" | "linkat" => {
            let two_dirs = name.ends_with("at") || name == "renameat2";
            let ((od, op), (nd, np)) = if two_dirs {
                (at(Some(0), 1), at(Some(2), 3))
            } else {
                (at(None, 0), at(None, 1))
            };
            let flags = match name {
                "renameat2" | "linkat" => ctx.arg(4) as u32,
                _ => 0,
            };
            if name == "renameat2" {
                let known = libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT;
                let exchange = flags & libc::RENAME_EXCHANGE != 0;
                if flags & !known != 0 || (exchange && flags & (libc::RENAME_NOREPLACE | libc::RENAME_WHITEOUT) != 0) {
                    return Err(Denied::Errno(libc::EINVAL));
                }
            }
            if name == "linkat" {
                let flags = flags as i32;
                if flags & !(libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH) != 0 {
                    return Err(Denied::Errno(libc::EINVAL));
                }
                if flags & libc::AT_SYMLINK_FOLLOW != 0 {
                    return link_followed(ctx, (od, op), (nd, np), 0, &creds, detail);
                }
                if flags & libc::AT_EMPTY_PATH != 0 && path_arg(ctx, op)?.is_empty() {
                    // The object open as `od` gets the new name.
                    return link_followed(ctx, (od, op), (nd, np), libc::AT_EMPTY_PATH, &creds, detail);
                }
            }
            let old = entry(ctx, od, op, &creds, detail)?;
            if name.starts_with("link") && (old.last != Last::Norm || old.slash) {
                // The kernel looks the old name up whole: "f/" and "." are
                // followed to what they name (a directory gets EPERM, a
                // non-directory with a slash ENOTDIR).
                drop(old);
                return link_followed(ctx, (od, op), (nd, np), 0, &creds, detail);
            }
            let paths = &ctx.sup.policy.paths;
            if name.starts_with("rename") && paths.restricts_below(&old.path) {
                // Moving a directory moves what the rules protect below it.
                return Err(Denied::Policy(old.path));
            }
            let mut d2 = String::new();
            let new = entry(ctx, nd, np, &creds, &mut d2)?;
            if name.starts_with("rename") {
                rename_names(&old, &new, flags, &creds)?;
            } else {
                new_name(&new, &creds)?;
            }
            if flags & libc::RENAME_EXCHANGE != 0 && paths.restricts_below(&new.path) {
                // An exchange moves the new name's tree to the old name.
                return Err(Denied::Policy(new.path));
            }
            detail.push_str(" -> ");
            detail.push_str(&d2);
            as_caller(&creds, || {
                let r = if name.starts_with("rename") {
                    // SAFETY: dir fds and names we own.
                    unsafe {
                        libc::renameat2(
                            old.dir.as_raw_fd(),
                            old.name.as_ptr(),
                            new.dir.as_raw_fd(),
                            new.name.as_ptr(),
                            flags,
                        )
                    }
                } else {
                    // SAFETY: as above.
                    unsafe {
                        libc::linkat(
                            old.dir.as_raw_fd(),
                            old.name.as_ptr(),
                            new.dir.as_raw_fd(),
                            new.name.as_ptr(),
                            (flags as i32) & libc::AT_SYMLINK_FOLLOW,
                        )
                    }
                };
                ok_or_errno(r)
            })
        }
        "symlink" | "symlinkat" => {
            let target = CString::new(path_arg(ctx, 0)?).map_err(|_| Denied::Errno(libc::EINVAL))?;
            let (nd, np) = if name == "symlinkat" {
                at(Some(1), 2)
            } else {
                at(None, 1)
            };
            let p = entry(ctx, nd, np, &creds, detail)?;
            new_name(&p, &creds)?;
            as_caller(&creds, || {
                // SAFETY: NUL-terminated strings and a dir fd we own.
                ok_or_errno(unsafe { libc::symlinkat(target.as_ptr(), p.dir.as_raw_fd(), p.name.as_ptr()) })
            })
        }
        "chmod" | "fchmodat" | "chown" | "lchown" | "fchownat" | "truncate" => {
            let (dirfd, pi) = if name.starts_with('f') {
                at(Some(0), 1)
            } else {
                at(None, 0)
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
            let fd = object(ctx, dirfd, pi, lookup, &creds, detail)?;
            check_write(ctx, detail.as_str())?;
            if name == "truncate" {
                file_size_limit(ctx, &fd, ctx.arg(1) as i64, &creds)?;
            }
            let link = fd_link(&fd);
            as_caller(&creds, || {
                let r = match name {
                    // SAFETY: a path we own naming our O_PATH fd.
                    "chmod" | "fchmodat" => unsafe {
                        libc::fchmodat(libc::AT_FDCWD, link.as_ptr(), ctx.arg(pi + 1) as u32, 0)
                    },
                    // SAFETY: as above; AT_EMPTY_PATH acts on `fd` itself.
                    "truncate" => unsafe { libc::truncate(link.as_ptr(), ctx.arg(1) as i64) },
                    // SAFETY: as above.
                    _ => unsafe {
                        libc::fchownat(
                            fd.as_raw_fd(),
                            empty().as_ptr(),
                            ctx.arg(pi + 1) as u32,
                            ctx.arg(pi + 2) as u32,
                            libc::AT_EMPTY_PATH,
                        )
                    },
                };
                ok_or_errno(r)
            })
        }
        _ => Err(Denied::Errno(libc::ENOSYS)),
    }
}

/// linkat(2) with AT_SYMLINK_FOLLOW: the object a symlink names gets the
/// new name, so the decision is on that object's path (it must be
/// writable: a new name would let a denied or read-only file be reached
/// by a path no rule covers), and the link is made to exactly that object
/// through our O_PATH fd's `/proc/self/fd` link.
fn link_followed(
    ctx: &Ctx<'_>,
    (od, op): (i32, usize),
    (nd, np): (i32, usize),
    lookup: i32,
    creds: &Creds,
    detail: &mut String,
) -> Result<i64, Denied> {
    let old = object(ctx, od, op, lookup, creds, detail)?;
    check_write(ctx, detail)?;
    let mut d2 = String::new();
    let new = entry(ctx, nd, np, creds, &mut d2)?;
    new_name(&new, creds)?;
    detail.push_str(" -> ");
    detail.push_str(&d2);
    let link = fd_link(&old);
    as_caller(creds, || {
        // SAFETY: NUL-terminated paths and a dir fd we own.
        ok_or_errno(unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                link.as_ptr(),
                new.dir.as_raw_fd(),
                new.name.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        })
    })
}

/// The object a metadata call names: `dirfd` itself with AT_EMPTY_PATH and
/// an empty path, else the path resolved in the caller's root. Checks that
/// the policy does not deny it; `detail` gets its container path.
pub(super) fn object(
    ctx: &Ctx<'_>,
    dirfd: i32,
    pi: usize,
    flags: i32,
    creds: &Creds,
    detail: &mut String,
) -> Result<OwnedFd, Denied> {
    object_raw(ctx, dirfd, &path_arg(ctx, pi)?, flags, creds, detail)
}

/// As [`object`], for a path already copied from the caller (`raw`).
pub(super) fn object_raw(
    ctx: &Ctx<'_>,
    dirfd: i32,
    raw: &[u8],
    flags: i32,
    creds: &Creds,
    detail: &mut String,
) -> Result<OwnedFd, Denied> {
    let pid = ctx.pid();
    if !ctx.still_valid() {
        return Err(Denied::Errno(libc::EINTR));
    }
    let (fd, path) = if raw.is_empty() {
        if flags & libc::AT_EMPTY_PATH == 0 {
            return Err(Denied::Errno(libc::ENOENT));
        }
        let fd = dir_copy(pid, dirfd)?;
        let p = container_path(&root_of(pid)?, &fd)?;
        (fd, p.to_string_lossy().into_owned())
    } else {
        target(pid, dirfd, raw, flags & libc::AT_SYMLINK_NOFOLLOW == 0, creds)?
    };
    *detail = path.clone();
    check_read(ctx, &path)?;
    Ok(fd)
}

/// The directory entry a tree-changing call names, with write access
/// checked against the policy; `detail` gets its container path. "/", "."
/// and ".." come back unchecked ([`Parent::last`]): no call changes them,
/// each refuses them with its own errno.
fn entry(ctx: &Ctx<'_>, dirfd: i32, pi: usize, creds: &Creds, detail: &mut String) -> Result<Parent, Denied> {
    let raw = path_arg(ctx, pi)?;
    if !ctx.still_valid() {
        return Err(Denied::Errno(libc::EINTR));
    }
    if raw.is_empty() {
        return Err(Denied::Errno(libc::ENOENT));
    }
    let p = parent_any(ctx.pid(), dirfd, &raw, creds)?;
    *detail = p.path.clone();
    if p.last == Last::Norm {
        check_write(ctx, &p.path)?;
    }
    Ok(p)
}

/// The file type (`S_IFMT` bits) of the entry itself (not followed),
/// looked up with the caller's credentials.
fn kind(p: &Parent, creds: &Creds) -> Result<u32, Denied> {
    let st = as_caller(creds, || {
        nix::sys::stat::fstatat(
            Some(p.dir.as_raw_fd()),
            p.name.as_c_str(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(std::io::Error::from)
    })?;
    Ok(st.st_mode & libc::S_IFMT)
}

/// EROFS when the entry's directory is on a read-only mount: the kernel
/// says so before it looks the entry up.
fn read_only(p: &Parent) -> Result<(), Denied> {
    match nix::sys::statvfs::fstatvfs(&p.dir) {
        Ok(v) if v.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY) => Err(Denied::Errno(libc::EROFS)),
        _ => Ok(()),
    }
}

/// The checks the kernel makes on a name a call creates that is not a
/// directory (mknod, symlink, link's new name): "/", "." and ".." exist
/// (EEXIST); with a trailing slash it asked for a directory, so an
/// existing entry gives EEXIST and a missing one ENOENT (even on a
/// read-only mount: filename_create reports EROFS last).
fn new_name(p: &Parent, creds: &Creds) -> Result<(), Denied> {
    if p.last != Last::Norm {
        return Err(Denied::Errno(libc::EEXIST));
    }
    if p.slash {
        kind(p, creds)?;
        return Err(Denied::Errno(libc::EEXIST));
    }
    Ok(())
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

/// truncate(2) past the caller's RLIMIT_FSIZE: the kernel refuses to grow
/// a regular file beyond it with EFBIG and sends the caller SIGXFSZ, after
/// the permission checks (which the call itself would make).
fn file_size_limit(ctx: &Ctx<'_>, fd: &OwnedFd, len: i64, creds: &Creds) -> Result<(), Denied> {
    let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| Denied::Errno(e as i32))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || len <= st.st_size {
        return Ok(());
    }
    let limit = sys::rlimit_of(ctx.pid(), libc::RLIMIT_FSIZE).map_err(|_| Denied::Errno(libc::ESRCH))?;
    if limit == libc::RLIM_INFINITY || len as u64 <= limit {
        return Ok(());
    }
    let link = fd_link(fd);
    as_caller(creds, || {
        // SAFETY: a NUL-terminated path we own.
        ok_or_errno(unsafe { libc::faccessat(libc::AT_FDCWD, link.as_ptr(), libc::W_OK, libc::AT_EACCESS) })
    })?;
    sys::signal_thread(ctx.pid(), libc::SIGXFSZ).map_err(|_| Denied::Errno(libc::ESRCH))?;
    Err(Denied::Errno(libc::EFBIG))
}
