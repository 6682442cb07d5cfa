//! Metadata changes under the path rules, by path and by fd: chmod,
//! fchmodat, fchmodat2, fchmod, chown, lchown, fchownat, fchown, utimensat (and futimens, which is utimensat with a
//! NULL path), utime, utimes, futimesat, the six set/remove xattr calls,
//! and the file-flag ioctls (FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR,
//! FS_IOC_SETVERSION). A denied or read-only path gives EACCES: its mode,
//! owner, times, xattrs and flags never change, however the object is
//! reached (an fd opened for reading included).
//!
//! As for the other file calls, the object is resolved by the supervisor
//! under the caller's root (or is a pidfd_getfd copy of the caller's fd),
//! the decision is taken on its container path, and the change is made on
//! that object with the caller's credentials; arguments in caller memory
//! (times, names, values, flags) are copied once and passed from the copy.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::call::{by_path, Call};
use super::fs::{check_write, fd_link, object, object_raw};
use super::path::*;
use super::{Outcome, Reply, Task};
use crate::abi::table::{Arg, Entry};
use crate::supervisor::audit::Decision;
use crate::supervisor::creds::Creds;
use crate::sys;
use crate::sys::meta::XattrOn;

/// `FS_IOC_SETFLAGS` (`_IOW('f', 2, long)`; the kernel reads an int).
pub const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
/// `FS_IOC32_SETFLAGS` (`_IOW('f', 2, int)`).
pub const FS_IOC32_SETFLAGS: u32 = 0x4004_6602;
/// `FS_IOC_SETVERSION` (`_IOW('v', 2, long)`; an int is read).
pub const FS_IOC_SETVERSION: u32 = 0x4008_7602;
/// `FS_IOC32_SETVERSION` (`_IOW('v', 2, int)`).
pub const FS_IOC32_SETVERSION: u32 = 0x4004_7602;
/// `FS_IOC_FSSETXATTR` (`_IOW('X', 32, struct fsxattr)`, 28 bytes).
pub const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;
/// The ioctl commands that change a file's metadata, which the default
/// policy sends here (the BPF filter matches arg 1's low 32 bits).
pub const SETTING_IOCTLS: [u32; 5] = [
    FS_IOC_SETFLAGS,
    FS_IOC32_SETFLAGS,
    FS_IOC_SETVERSION,
    FS_IOC32_SETVERSION,
    FS_IOC_FSSETXATTR,
];

const XATTR_NAME_MAX: usize = 255;
const XATTR_SIZE_MAX: usize = 65536;
const UTIME_NOW: i64 = (1 << 30) - 1;
const UTIME_OMIT: i64 = (1 << 30) - 2;

/// ioctl(2): the file-flag commands ([`SETTING_IOCTLS`]) are decided and
/// made with a copied argument; a policy that sends other commands here
/// gets them run by the kernel (the decision read only registers, which the
/// kernel does not read again from memory).
pub(super) fn ioctl(ctx: &dyn Task, entry: &'static Entry) -> Outcome {
    let request = entry.arg(Arg::Request).map(|i| ctx.arg(i) as u32).unwrap_or(0);
    if !SETTING_IOCTLS.contains(&request) {
        return Outcome::new(Reply::Continue, Decision::Allow, format!("ioctl {request:#x}"));
    }
    by_path(ctx, entry, ioctl_setting)
}

fn errno(e: std::io::Error) -> Denied {
    Denied::Errno(e.raw_os_error().unwrap_or(libc::EIO))
}

/// A copy of the caller's fd `n` and its container path, checked writable.
fn fd_object(ctx: &dyn Task, n: i32, detail: &mut String) -> Result<OwnedFd, Denied> {
    let fd = take_fd_or(ctx, n, libc::EBADF)?;
    if !ctx.still_valid() {
        return Err(Denied::Errno(libc::EINTR));
    }
    let path = container_path(&root_of(ctx)?, &fd)?;
    *detail = path.to_string_lossy().into_owned();
    check_write(ctx, detail)?;
    Ok(fd)
}

/// Whether `fd` is an O_PATH fd (which fd-based calls refuse with EBADF).
fn is_opath(fd: &OwnedFd) -> bool {
    nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL).is_ok_and(|f| f & libc::O_PATH != 0)
}

/// The object of a path-or-fd call (utimensat, futimesat): the path
/// resolved (arg `pi`, following unless `flags` has AT_SYMLINK_NOFOLLOW),
/// or with a NULL path the fd `dirfd` itself, as the kernel's
/// `do_utimes` does; checked writable.
fn path_or_fd(
    ctx: &dyn Task,
    (dirfd, pi): (i32, usize),
    flags: i32,
    creds: &Creds,
    detail: &mut String,
) -> Result<OwnedFd, Denied> {
    if ctx.arg(pi) == 0 {
        if dirfd == libc::AT_FDCWD {
            return Err(Denied::Errno(libc::EFAULT));
        }
        if flags != 0 {
            return Err(Denied::Errno(libc::EINVAL));
        }
        let fd = fd_object(ctx, dirfd, detail)?;
        if is_opath(&fd) {
            return Err(Denied::Errno(libc::EBADF));
        }
        return Ok(fd);
    }
    if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
        return Err(Denied::Errno(libc::EINVAL));
    }
    let fd = object(ctx, dirfd, pi, flags, creds, detail)?;
    check_write(ctx, detail)?;
    Ok(fd)
}

/// Two timespecs from the caller, validated as utimensat(2) does
/// (`EINVAL` for a nanosecond field out of range that is not UTIME_NOW
/// or UTIME_OMIT).
fn read_timespecs(ctx: &dyn Task, at: u64) -> Result<[libc::timespec; 2], Denied> {
    let mut raw = [0u8; 32];
    if ctx.read_mem(at, &mut raw).map_err(|_| Denied::Errno(libc::EFAULT))? != 32 {
        return Err(Denied::Errno(libc::EFAULT));
    }
    let i64_at = |i: usize| i64::from_ne_bytes(raw[i..i + 8].try_into().unwrap_or_default());
    let t = [(i64_at(0), i64_at(8)), (i64_at(16), i64_at(24))];
    for &(_, ns) in &t {
        if !(0..1_000_000_000).contains(&ns) && ns != UTIME_NOW && ns != UTIME_OMIT {
            return Err(Denied::Errno(libc::EINVAL));
        }
    }
    Ok(t.map(|(sec, ns)| libc::timespec {
        tv_sec: sec,
        tv_nsec: ns,
    }))
}

/// The times of utime(2) (`struct utimbuf`, seconds) or utimes(2) and
/// futimesat(2) (`struct timeval[2]`) as timespecs: `EINVAL` for a
/// microsecond field out of range, as the kernel says.
fn read_legacy_times(ctx: &dyn Task, at: u64, timeval: bool) -> Result<[libc::timespec; 2], Denied> {
    let size = if timeval { 32 } else { 16 };
    let mut raw = [0u8; 32];
    if ctx
        .read_mem(at, &mut raw[..size])
        .map_err(|_| Denied::Errno(libc::EFAULT))?
        != size
    {
        return Err(Denied::Errno(libc::EFAULT));
    }
    let i64_at = |i: usize| i64::from_ne_bytes(raw[i..i + 8].try_into().unwrap_or_default());
    if !timeval {
        return Ok([0, 8].map(|i| libc::timespec {
            tv_sec: i64_at(i),
            tv_nsec: 0,
        }));
    }
    let t = [(i64_at(0), i64_at(8)), (i64_at(16), i64_at(24))];
    if t.iter().any(|&(_, us)| !(0..1_000_000).contains(&us)) {
        return Err(Denied::Errno(libc::EINVAL));
    }
    Ok(t.map(|(sec, us)| libc::timespec {
        tv_sec: sec,
        tv_nsec: us * 1000,
    }))
}

/// An xattr name from the caller: `ERANGE` when empty or longer than 255
/// bytes, as setxattr(2) says.
fn read_xattr_name(ctx: &dyn Task, at: u64) -> Result<CString, Denied> {
    let name = match ctx.read_cstring(at, XATTR_NAME_MAX + 1) {
        Ok(n) => n,
        Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => return Err(Denied::Errno(libc::ERANGE)),
        Err(e) => return Err(errno(e)),
    };
    if name.is_empty() {
        return Err(Denied::Errno(libc::ERANGE));
    }
    cstr(name)
}

/// chmod(2), fchmodat(2), fchmodat2(2), and fchmod(2) on an fd.
pub(super) fn chmod(c: &mut Call<'_>) -> Result<i64, Denied> {
    let (ctx, creds, mode) = (c.ctx, c.creds, c.mode());
    if c.has(Arg::Fd) {
        let fd = fd_object(ctx, c.fd(Arg::Fd), c.detail)?;
        let mode = nix::sys::stat::Mode::from_bits_truncate(mode);
        return as_caller(creds, || {
            nix::sys::stat::fchmod(fd.as_raw_fd(), mode)
                .map(|_| 0)
                .map_err(Into::into)
        });
    }
    let (fd, flags) = writable_object(c)?;
    if c.has(Arg::Flags) {
        // fchmodat2 (Linux 6.6) is made as fchmodat2: ENOSYS on an older
        // kernel, as the caller would get.
        return as_caller(creds, || {
            sys::meta::fchmod_empty(fd.as_fd(), mode, flags & libc::AT_SYMLINK_NOFOLLOW)
        });
    }
    let link = fd_link(&fd);
    as_caller(creds, || sys::fs::chmod(&link, mode))?;
    Ok(0)
}

/// chown(2), lchown(2), fchownat(2), and fchown(2) on an fd.
pub(super) fn chown(c: &mut Call<'_>) -> Result<i64, Denied> {
    let (ctx, creds) = (c.ctx, c.creds);
    let (uid, gid) = (c.word(Arg::Uid) as u32, c.word(Arg::Gid) as u32);
    if c.has(Arg::Fd) {
        let fd = fd_object(ctx, c.fd(Arg::Fd), c.detail)?;
        let id = |v: u32| (v != u32::MAX).then_some(v);
        return as_caller(creds, || {
            nix::unistd::fchown(
                fd.as_raw_fd(),
                id(uid).map(nix::unistd::Uid::from_raw),
                id(gid).map(nix::unistd::Gid::from_raw),
            )
            .map(|_| 0)
            .map_err(Into::into)
        });
    }
    let (fd, _) = writable_object(c)?;
    as_caller(creds, || sys::fs::chown_fd(fd.as_fd(), uid, gid))?;
    Ok(0)
}

/// The object a by-path metadata change names, looked up with the call's
/// flags (`AT_SYMLINK_NOFOLLOW` and `AT_EMPTY_PATH` only: EINVAL for any
/// other, before any lookup) and checked writable; and those flags.
fn writable_object(c: &mut Call<'_>) -> Result<(OwnedFd, i32), Denied> {
    let flags = c.flags();
    if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
        return Err(Denied::Errno(libc::EINVAL));
    }
    let (dirfd, pi) = c.path()?;
    let fd = object(c.ctx, dirfd, pi, flags, c.creds, c.detail)?;
    check_write(c.ctx, c.detail)?;
    Ok((fd, flags))
}

/// utimensat(2), utimes(2), futimesat(2), utime(2): the times argument's
/// kind ([`Arg::Timespecs`], [`Arg::Timevals`], [`Arg::Utimbuf`]) says
/// how they are read.
pub(super) fn utimes(c: &mut Call<'_>) -> Result<i64, Denied> {
    let ctx = c.ctx;
    let (dirfd, pi) = c.path()?;
    let flags = c.flags();
    let (at, kind) = [Arg::Timespecs, Arg::Timevals, Arg::Utimbuf]
        .into_iter()
        .find_map(|a| Some((ctx.arg(c.entry.arg(a)?), a)))
        .ok_or(Denied::Errno(libc::ENOSYS))?;
    let times = match at {
        0 => None,
        at if kind == Arg::Timespecs => Some(read_timespecs(ctx, at)?),
        at => Some(read_legacy_times(ctx, at, kind == Arg::Timevals)?),
    };
    // Both omitted: nothing to do, and the kernel answers 0 first.
    if times.is_some_and(|t| t.iter().all(|t| t.tv_nsec == UTIME_OMIT)) {
        return Ok(0);
    }
    let fd = path_or_fd(ctx, (dirfd, pi), flags, c.creds, c.detail)?;
    as_caller(c.creds, || {
        sys::meta::utimens_empty(fd.as_fd(), times.as_ref(), flags & libc::AT_SYMLINK_NOFOLLOW)
    })
}

/// setxattr(2), lsetxattr(2), fsetxattr(2).
pub(super) fn setxattr(c: &mut Call<'_>) -> Result<i64, Denied> {
    xattr(c, true)
}

/// removexattr(2), lremovexattr(2), fremovexattr(2).
pub(super) fn removexattr(c: &mut Call<'_>) -> Result<i64, Denied> {
    xattr(c, false)
}

/// An xattr set (`set`) or removed: on an fd ([`Arg::Fd`]), on a path,
/// or on a path's last component not followed (the `l` forms, which imply
/// `AT_SYMLINK_NOFOLLOW`).
fn xattr(c: &mut Call<'_>, set: bool) -> Result<i64, Denied> {
    let (ctx, creds) = (c.ctx, c.creds);
    let xflags = c.word(Arg::Xflags) as i32;
    if xflags & !(libc::XATTR_CREATE | libc::XATTR_REPLACE) != 0 {
        return Err(Denied::Errno(libc::EINVAL));
    }
    let xname = read_xattr_name(ctx, c.word(Arg::Xname))?;
    let mut value = Vec::new();
    if set {
        let size = c.word(Arg::Size) as usize;
        if size > XATTR_SIZE_MAX {
            return Err(Denied::Errno(libc::E2BIG));
        }
        value.resize(size, 0);
        if size > 0 && ctx.read_mem(c.word(Arg::Value), &mut value).map_err(errno)? != size {
            return Err(Denied::Errno(libc::EFAULT));
        }
    }
    let act = |on: XattrOn<'_>| {
        if set {
            sys::meta::setxattr(on, &xname, &value, xflags)
        } else {
            sys::meta::removexattr(on, &xname)
        }
    };
    if c.has(Arg::Fd) {
        let fd = fd_object(ctx, c.fd(Arg::Fd), c.detail)?;
        return as_caller(creds, || act(XattrOn::Fd(fd.as_fd())));
    }
    let (dirfd, pi) = c.path()?;
    // The path is copied once: the decision and the call are on
    // that copy.
    let raw = ctx.read_cstring(ctx.arg(pi), PATH_MAX).map_err(errno)?;
    if c.flags() & libc::AT_SYMLINK_NOFOLLOW != 0 {
        // The entry itself, not followed: its parent resolved once
        // and held, the decision on the entry's path, the call
        // through the held parent.
        match parent(ctx, dirfd, &raw, creds) {
            // "l/" follows l (the kernel's trailing-slash rule).
            Ok(p) if !p.slash => {
                *c.detail = p.path.clone();
                check_write(ctx, &p.path)?;
                let mut at = format!("/proc/self/fd/{}/", p.dir.as_raw_fd()).into_bytes();
                at.extend_from_slice(p.name.as_bytes());
                let at = cstr(at)?;
                return as_caller(creds, || act(XattrOn::LinkPath(&at)));
            }
            // "/", "." or "..": a directory, never a link.
            Ok(_) | Err(Denied::Errno(libc::EEXIST)) => {}
            Err(e) => return Err(e),
        }
    }
    let fd = object_raw(ctx, dirfd, &raw, 0, creds, c.detail)?;
    check_write(ctx, c.detail)?;
    // Following our fd's /proc link lands on the object itself.
    let link = cstr(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    as_caller(creds, || act(XattrOn::Path(&link)))
}

/// ioctl(2) of the file-flag commands ([`SETTING_IOCTLS`],
/// `FS_IOC_FSSETXATTR`) with a copied argument.
fn ioctl_setting(c: &mut Call<'_>) -> Result<i64, Denied> {
    let ctx = c.ctx;
    let cmd = c.word(Arg::Request) as u32;
    let size = match cmd {
        FS_IOC_FSSETXATTR => 28,
        c if SETTING_IOCTLS.contains(&c) => 4,
        _ => return Err(Denied::Errno(libc::ENOSYS)),
    };
    let mut arg = vec![0u8; size];
    if ctx
        .read_mem(c.word(Arg::Argp), &mut arg)
        .map_err(|_| Denied::Errno(libc::EFAULT))?
        != size
    {
        return Err(Denied::Errno(libc::EFAULT));
    }
    let fd = fd_object(ctx, c.fd(Arg::Fd), c.detail)?;
    as_caller(c.creds, || sys::meta::ioctl_in(fd.as_fd(), cmd, &arg))
}

#[cfg(test)]
mod tests {
    use super::super::task::fake::Fake;
    use super::*;

    /// The reply to `name(args)` from a caller whose memory is `mem` at
    /// `Fake::BASE`.
    fn reply(name: &str, args: [u64; 6], mem: &[u8]) -> Reply {
        let t = Fake {
            args,
            ..Fake::new("name = 't'\n", mem.len())
        };
        t.mem.borrow_mut().copy_from_slice(mem);
        super::super::dispatch_named(&t, name).reply
    }

    fn errno(name: &str, args: [u64; 6], mem: &[u8]) -> i32 {
        match reply(name, args, mem) {
            Reply::Errno(e) => e,
            Reply::Value(v) => panic!("{name}: value {v}"),
            _ => panic!("{name}: another reply"),
        }
    }

    const B: u64 = Fake::BASE;

    #[test]
    fn ioctls_that_set_nothing_continue_and_setting_ones_are_copied() {
        let tiocgwinsz = 0x5413;
        assert!(matches!(
            reply("ioctl", [0, tiocgwinsz, 0, 0, 0, 0], &[]),
            Reply::Continue
        ));
        // FS_IOC_SETFLAGS with an unreadable argument.
        assert_eq!(
            errno("ioctl", [0, u64::from(SETTING_IOCTLS[0]), 0, 0, 0, 0], &[]),
            libc::EFAULT
        );
    }

    #[test]
    fn xattr_names_values_and_flags_are_checked_as_the_kernel_does() {
        let mut mem = b"/f\0\0user.a\0".to_vec();
        let (path, empty, name) = (B, B + 3, B + 4);
        // An empty name, one longer than 255 bytes: ERANGE.
        assert_eq!(errno("setxattr", [path, empty, 0, 0, 0, 0], &mem), libc::ERANGE);
        let long = mem.len() as u64;
        mem.extend(std::iter::repeat_n(b'a', 300));
        mem.push(0);
        assert_eq!(errno("removexattr", [path, B + long, 0, 0, 0, 0], &mem), libc::ERANGE);
        // Unknown flags: EINVAL; a value above 64 KiB: E2BIG; an
        // unreadable one: EFAULT.
        assert_eq!(errno("setxattr", [path, name, 0, 0, 4, 0], &mem), libc::EINVAL);
        assert_eq!(errno("setxattr", [path, name, 0, 65537, 0, 0], &mem), libc::E2BIG);
        assert_eq!(errno("setxattr", [path, name, 0, 8, 0, 0], &mem), libc::EFAULT);
    }

    #[test]
    fn utimensat_checks_its_times_before_any_lookup() {
        let ts = |sec: i64, nsec: i64| [sec.to_ne_bytes(), nsec.to_ne_bytes()].concat();
        let omit = [ts(0, UTIME_OMIT), ts(0, UTIME_OMIT)].concat();
        let cwd = libc::AT_FDCWD as u64;
        // Both omitted: 0 at once, even for a path no one could read.
        assert!(matches!(
            reply("utimensat", [cwd, 0, B, 0, 0, 0], &omit),
            Reply::Value(0)
        ));
        let bad = [ts(0, 1_000_000_000), ts(0, 0)].concat();
        assert_eq!(errno("utimensat", [cwd, 0, B, 0, 0, 0], &bad), libc::EINVAL);
        // A NULL path needs a real fd, not AT_FDCWD.
        let now = [ts(0, UTIME_NOW), ts(0, 0)].concat();
        assert_eq!(errno("utimensat", [cwd, 0, B, 0, 0, 0], &now), libc::EFAULT);
        assert_eq!(errno("utimensat", [cwd, 0, 8, 0, 0, 0], &now), libc::EFAULT);
    }
}
