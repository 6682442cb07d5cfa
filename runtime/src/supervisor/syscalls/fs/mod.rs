//! File metadata and directory-entry syscalls under the path policy: the
//! stat, access and readlink families (a denied path gives EACCES, so its
//! metadata stays hidden) and the calls that change the tree (mkdir,
//! unlink, rename, link, symlink, truncate, mknod), which need
//! write access to every path they touch (a denied or read-only path gives
//! EACCES).
//!
//! Like opens, they are performed by the supervisor on objects it resolved
//! itself under the caller's root (openat2 RESOLVE_IN_ROOT), with the
//! caller's credentials and umask, and the results copied back: the kernel
//! never re-reads a path the decision was based on.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

pub(super) mod access;
pub(super) mod mknod;
pub(super) mod readlink;
pub(super) mod rename;
pub(super) mod stat;
pub(super) mod symlink;
pub(super) mod truncate;
pub(super) mod unlink;

use super::path::*;
use super::Task;
use crate::supervisor::creds::Creds;

pub(super) fn path_arg(ctx: &dyn Task, i: usize) -> Result<Vec<u8>, Denied> {
    ctx.read_cstring(ctx.arg(i), PATH_MAX)
        .map_err(|e| Denied::Errno(e.raw_os_error().unwrap_or(libc::EFAULT)))
}

fn check_read(ctx: &dyn Task, path: &str) -> Result<(), Denied> {
    match ctx.sup().policy().paths.access(path) {
        crate::policy::PathAccess::Deny => Err(Denied::Policy(path.to_string())),
        crate::policy::PathAccess::Ask => super::asked::verdict(ctx, path),
        _ => Ok(()),
    }
}

pub(super) fn check_write(ctx: &dyn Task, path: &str) -> Result<(), Denied> {
    match ctx.sup().policy().paths.access(path) {
        crate::policy::PathAccess::Ask => super::asked::verdict(ctx, path),
        a if a.allows_open(libc::O_WRONLY as u64) => Ok(()),
        _ => Err(Denied::Policy(path.to_string())),
    }
}

/// An O_PATH fd's `/proc/self/fd/N` path: operations through it act on
/// exactly that object.
pub(super) fn fd_link(fd: &OwnedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default()
}

/// The object a metadata call names: `dirfd` itself with AT_EMPTY_PATH and
/// an empty path, else the path resolved in the caller's root. Checks that
/// the policy does not deny it; `detail` gets its container path.
pub(super) fn object(
    ctx: &dyn Task,
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
    ctx: &dyn Task,
    dirfd: i32,
    raw: &[u8],
    flags: i32,
    creds: &Creds,
    detail: &mut String,
) -> Result<OwnedFd, Denied> {
    if !ctx.still_valid() {
        return Err(Denied::Errno(libc::EINTR));
    }
    let (fd, path) = if raw.is_empty() {
        if flags & libc::AT_EMPTY_PATH == 0 {
            return Err(Denied::Errno(libc::ENOENT));
        }
        let fd = dir_copy(ctx, dirfd)?;
        let p = container_path(&root_of(ctx)?, &fd)?;
        (fd, p.to_string_lossy().into_owned())
    } else {
        target(ctx, dirfd, raw, flags & libc::AT_SYMLINK_NOFOLLOW == 0, creds)?
    };
    *detail = path.clone();
    check_read(ctx, &path)?;
    Ok(fd)
}

/// The directory entry a tree-changing call names, with write access
/// checked against the policy; `detail` gets its container path. "/", "."
/// and ".." come back unchecked ([`Parent::last`]): no call changes them,
/// each refuses them with its own errno.
pub(super) fn entry(
    ctx: &dyn Task,
    dirfd: i32,
    pi: usize,
    creds: &Creds,
    detail: &mut String,
) -> Result<Parent, Denied> {
    let raw = path_arg(ctx, pi)?;
    if !ctx.still_valid() {
        return Err(Denied::Errno(libc::EINTR));
    }
    if raw.is_empty() {
        return Err(Denied::Errno(libc::ENOENT));
    }
    let p = parent_any(ctx, dirfd, &raw, creds)?;
    *detail = p.path.clone();
    if p.last == Last::Norm {
        check_write(ctx, &p.path)?;
    }
    Ok(p)
}

/// The file type (`S_IFMT` bits) of the entry itself (not followed),
/// looked up with the caller's credentials.
pub(super) fn kind(p: &Parent, creds: &Creds) -> Result<u32, Denied> {
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
pub(super) fn read_only(p: &Parent) -> Result<(), Denied> {
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
pub(super) fn new_name(p: &Parent, creds: &Creds) -> Result<(), Denied> {
    if p.last != Last::Norm {
        return Err(Denied::Errno(libc::EEXIST));
    }
    if p.slash {
        kind(p, creds)?;
        return Err(Denied::Errno(libc::EEXIST));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::task::fake::Fake;
    use super::super::{dispatch_named, Reply};

    /// A caller with the path "/etc/hosts" at `Fake::BASE` and "" right
    /// after it.
    fn caller() -> Fake {
        let t = Fake::new("name = 't'\n", 64);
        t.mem.borrow_mut()[..11].copy_from_slice(b"/etc/hosts\0");
        t
    }
    const PATH: u64 = Fake::BASE;
    const EMPTY: u64 = Fake::BASE + 10;

    fn errno(t: &Fake, name: &str, args: [u64; 6]) -> i32 {
        let t = Fake {
            args,
            ..Fake::new("name = 't'\n", 0)
        }
        .with_mem(t);
        match dispatch_named(&t, name).reply {
            Reply::Errno(e) => e,
            Reply::Value(v) => panic!("{name}: value {v}"),
            _ => panic!("{name}: another reply"),
        }
    }

    #[test]
    fn unknown_flag_bits_get_einval_before_any_lookup() {
        let t = caller();
        let bad = 0x4000_0000u64;
        let cwd = libc::AT_FDCWD as u64;
        for (name, args) in [
            ("newfstatat", [cwd, PATH, PATH, bad, 0, 0]),
            ("statx", [cwd, PATH, bad, 0, PATH, 0]),
            // Both sync types at once.
            ("statx", [cwd, PATH, libc::AT_STATX_SYNC_TYPE as u64, 0, PATH, 0]),
            // A reserved mask bit.
            ("statx", [cwd, PATH, 0, libc::STATX__RESERVED as u64, PATH, 0]),
            ("faccessat", [cwd, PATH, 0o10, 0, 0, 0]),
            ("faccessat2", [cwd, PATH, 0, bad, 0, 0]),
            ("readlink", [PATH, PATH, 0, 0, 0, 0]),
            ("readlinkat", [cwd, PATH, PATH, (-1i64) as u64, 0, 0]),
            ("unlinkat", [cwd, PATH, libc::AT_SYMLINK_NOFOLLOW as u64, 0, 0, 0]),
            ("renameat2", [cwd, PATH, cwd, PATH, bad, 0]),
            (
                "renameat2",
                [
                    cwd,
                    PATH,
                    cwd,
                    PATH,
                    u64::from(libc::RENAME_EXCHANGE | libc::RENAME_NOREPLACE),
                    0,
                ],
            ),
            ("linkat", [cwd, PATH, cwd, PATH, libc::AT_SYMLINK_NOFOLLOW as u64, 0]),
            ("fchownat", [cwd, PATH, 0, 0, bad, 0]),
        ] {
            assert_eq!(errno(&t, name, args), libc::EINVAL, "{name} {args:x?}");
        }
    }

    #[test]
    fn an_unreadable_path_gets_efault() {
        let t = caller();
        for name in [
            "stat", "lstat", "access", "readlink", "mkdir", "unlink", "rmdir", "chmod", "truncate",
        ] {
            assert_eq!(errno(&t, name, [0, 0, 16, 0, 0, 0]), libc::EFAULT, "{name}");
        }
        assert_eq!(errno(&t, "symlink", [0, PATH, 0, 0, 0, 0]), libc::EFAULT);
        assert_eq!(errno(&t, "rename", [0, PATH, 0, 0, 0, 0]), libc::EFAULT);
    }

    #[test]
    fn an_empty_path_gets_enoent_without_at_empty_path() {
        let t = caller();
        let cwd = libc::AT_FDCWD as u64;
        for (name, args) in [
            ("stat", [EMPTY, PATH, 0, 0, 0, 0]),
            ("newfstatat", [cwd, EMPTY, PATH, 0, 0, 0]),
            ("access", [EMPTY, 0, 0, 0, 0, 0]),
            ("mkdir", [EMPTY, 0o755, 0, 0, 0, 0]),
            ("unlink", [EMPTY, 0, 0, 0, 0, 0]),
            ("rename", [EMPTY, PATH, 0, 0, 0, 0]),
            ("symlink", [PATH, EMPTY, 0, 0, 0, 0]),
            ("chown", [EMPTY, 0, 0, 0, 0, 0]),
        ] {
            assert_eq!(errno(&t, name, args), libc::ENOENT, "{name}");
        }
    }

    #[test]
    fn a_caller_that_stopped_waiting_gets_eintr_and_nothing_is_looked_up() {
        let t = caller();
        for (name, args) in [
            ("stat", [PATH, PATH, 0, 0, 0, 0]),
            ("readlink", [PATH, PATH, 16, 0, 0, 0]),
            ("mkdir", [PATH, 0o755, 0, 0, 0, 0]),
            ("unlink", [PATH, 0, 0, 0, 0, 0]),
            ("rename", [PATH, PATH, 0, 0, 0, 0]),
        ] {
            let t = Fake {
                args,
                valid: false,
                ..Fake::new("name = 't'\n", 0)
            }
            .with_mem(&t);
            assert!(
                matches!(dispatch_named(&t, name).reply, Reply::Errno(libc::EINTR)),
                "{name}"
            );
        }
    }

    /// A caller rooted in a temp tree with `/secret/key` (denied), `/etc`
    /// (read-only), `/data` with symlinks into `/secret`, and `/work`.
    fn rooted() -> (crate::supervisor::syscalls::task::fake::TempTree, Fake) {
        let root = crate::supervisor::syscalls::task::fake::TempTree::new("fs");
        for d in ["secret", "data", "etc", "work"] {
            std::fs::create_dir(root.join(d)).unwrap();
        }
        std::fs::write(root.join("secret/key"), "k").unwrap();
        std::fs::write(root.join("data/ok.txt"), "fine").unwrap();
        std::os::unix::fs::symlink("/secret/key", root.join("data/abs-link")).unwrap();
        std::os::unix::fs::symlink("../../secret", root.join("data/dir-link")).unwrap();
        let policy = "name = 't'\n\
            [[path]]\npattern = \"/secret/**\"\naccess = \"deny\"\n\
            [[path]]\npattern = \"/secret\"\naccess = \"deny\"\n\
            [[path]]\npattern = \"/etc/**\"\naccess = \"read-only\"\n";
        let mut t = Fake::new(policy, 4096);
        t.root = Some(root.0.clone());
        t.fds.insert(5, Fake::open_dir(&root.join("data")).unwrap());
        (root, t)
    }

    /// `name` with `args`, the path `path` at [`Fake::BASE`] (the stat
    /// buffer after it): the reply's value or errno, and the audit action.
    fn call(t: &mut Fake, name: &str, path: &str, args: [u64; 6]) -> (Result<i64, i32>, &'static str) {
        let mut mem = t.mem.borrow_mut();
        mem[..path.len()].copy_from_slice(path.as_bytes());
        mem[path.len()] = 0;
        drop(mem);
        t.args = args;
        let out = dispatch_named(t, name);
        let r = match out.reply {
            Reply::Value(v) => Ok(v),
            Reply::Errno(e) => Err(e),
            _ => panic!("{name} {path}: another reply"),
        };
        (r, out.action.as_str())
    }

    #[test]
    fn path_calls_deny_every_alias_of_a_denied_path() {
        let (root, mut t) = rooted();
        let (p, buf, at) = (Fake::BASE, Fake::BASE + 1024, libc::AT_FDCWD as u64);
        let denied = (Err(libc::EACCES), "deny");
        for path in [
            "/secret/key",
            "//secret//key",
            "/etc/../../secret/key",
            "/data/abs-link",
            "/data/dir-link/key",
            "/proc/self/root/secret/key",
            "/dev/fd/5/abs-link",
        ] {
            assert_eq!(
                call(&mut t, "newfstatat", path, [at, p, buf, 0, 0, 0]),
                denied,
                "stat {path}"
            );
        }
        assert_eq!(call(&mut t, "newfstatat", "dir-link/key", [5, p, buf, 0, 0, 0]), denied);
        // Not followed: the link itself is in /data.
        let nofollow = libc::AT_SYMLINK_NOFOLLOW as u64;
        assert_eq!(
            call(&mut t, "newfstatat", "abs-link", [5, p, buf, nofollow, 0, 0]),
            (Ok(0), "allow")
        );
        assert_eq!(
            call(&mut t, "newfstatat", "/data/ok.txt", [at, p, buf, 0, 0, 0]),
            (Ok(0), "allow")
        );
        // Changes: nothing made or removed in a denied or read-only tree.
        assert_eq!(
            call(&mut t, "mkdir", "/data/dir-link/new", [p, 0o755, 0, 0, 0, 0]),
            denied
        );
        assert!(!root.join("secret/new").exists());
        assert_eq!(call(&mut t, "mkdir", "/etc/new", [p, 0o755, 0, 0, 0, 0]), denied);
        assert!(!root.join("etc/new").exists());
        assert_eq!(
            call(&mut t, "unlink", "/proc/self/root/secret/key", [p, 0, 0, 0, 0, 0]),
            denied
        );
        assert!(root.join("secret/key").exists());
        assert_eq!(
            call(&mut t, "mkdir", "/work/new", [p, 0o755, 0, 0, 0, 0]),
            (Ok(0), "allow")
        );
        assert!(root.join("work/new").is_dir());
    }
}
