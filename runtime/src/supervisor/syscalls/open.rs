//! open(2), openat(2), openat2(2), creat(2) under the file path policy.
//!
//! The supervisor performs the open itself and installs the result in the
//! caller with ADDFD, so the kernel never re-reads the caller's path:
//! 1. copy the path (and `struct open_how`) out of the caller's memory once;
//! 2. make it absolute inside the container: relative paths are joined to
//!    the caller's cwd or `dirfd` (a pidfd_getfd copy); `/proc/self`,
//!    `/proc/thread-self`, `/dev/fd` and `/dev/std*` are rewritten to the
//!    caller's own pid as the container's procfs numbers it;
//! 3. open it with openat2(2) against the caller's root (`/proc/PID/root`)
//!    with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS: `..` and absolute
//!    symlinks stay inside the rootfs, and magic links are refused
//!    (`/proc/self/fd/N` reopens are done on a pidfd_getfd copy of fd N);
//! 4. decide on the path of the object actually opened (readlink of our own
//!    fd), not on the string the caller passed: aliases (`/./`, `..`,
//!    symlinks, bind mounts) all end at the same answer;
//! 5. ADDFD with SECCOMP_ADDFD_FLAG_SEND answers atomically.
//!
//! Creating opens are checked on the resolved parent directory first, so a
//! denied file is never created. Opens that can block (a FIFO without
//! O_NONBLOCK) are finished on their own thread.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::path::*;
use super::{Ctx, Outcome, Reply, Task};
use crate::abi::table::{Arg, Entry};
use crate::supervisor::audit::Decision;
use crate::supervisor::creds::Creds;
use crate::sys;

/// The decoded arguments of one open-family call.
#[derive(Debug, Clone)]
struct Request {
    dirfd: i32,
    path: Vec<u8>,
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Handles one open-family notification.
pub fn open(ctx: &dyn Task, entry: &'static Entry) -> Outcome {
    let name = entry.name;
    let req = match decode(ctx, entry) {
        Ok(r) => r,
        Err(e) => return Outcome::new(Reply::Errno(e), Decision::Emulate, format!("{name}: bad arguments")),
    };
    if !ctx.still_valid() {
        return Outcome::new(Reply::Errno(libc::EINTR), Decision::Emulate, "caller gone".into());
    }
    let detail = format!("{} {}", String::from_utf8_lossy(&req.path), flags_str(req.flags));
    match super::asked::asking(ctx, name, || perform(ctx, &req, false)) {
        Ok(Done::Fd(fd)) => {
            let cloexec = req.flags & libc::O_CLOEXEC as u64 != 0;
            Outcome::new(Reply::Fd { fd, cloexec }, Decision::Allow, detail)
        }
        Ok(Done::Continue) => Outcome::new(Reply::Continue, Decision::Allow, detail),
        Ok(Done::MayBlock) => {
            let req2 = req.clone();
            let job = Box::new(move |ctx: &Ctx<'_>| {
                let detail = format!("{} {}", String::from_utf8_lossy(&req2.path), flags_str(req2.flags));
                let asked = |ctx: &Ctx<'_>| super::asked::asking(ctx, "open", || perform(ctx, &req2, true));
                match crate::supervisor::ask::waiting(|| asked(ctx)) {
                    Ok(Done::Fd(fd)) => {
                        let cloexec = req2.flags & libc::O_CLOEXEC as u64 != 0;
                        Outcome::new(Reply::Fd { fd, cloexec }, Decision::Allow, detail)
                    }
                    Ok(Done::MayBlock) => Outcome::new(Reply::Errno(libc::EAGAIN), Decision::Allow, detail),
                    Ok(Done::Continue) => Outcome::new(Reply::Continue, Decision::Allow, detail),
                    Err(Denied::Policy(p)) => Outcome::path_denied(ctx, p),
                    Err(Denied::Errno(e)) => Outcome::new(Reply::Errno(e), Decision::Allow, detail),
                }
            });
            Outcome::new(Reply::Blocking(job), Decision::Allow, String::new())
        }
        Err(Denied::Policy(p)) => {
            let rule = ctx.sup().policy().explain_path(&p);
            Outcome::new(
                Reply::Errno(libc::EACCES),
                Decision::Deny,
                format!("{p} {}", flags_str(req.flags)),
            )
            .by(rule)
        }
        Err(Denied::Errno(super::ASK_FIRST)) => super::again_to_ask(detail, move |ctx| open(ctx, entry)),
        Err(Denied::Errno(e)) => Outcome::new(Reply::Errno(e), Decision::Allow, detail),
    }
}

/// The arguments of any form of open: openat2's `struct open_how`
/// ([`Arg::How`]) read and checked, or the flags ([`Arg::Flags`], or
/// creat's implied ones) and mode of the others.
fn decode(ctx: &dyn Task, entry: &Entry) -> Result<Request, i32> {
    let word = |a: Arg| entry.arg(a).map(|i| ctx.arg(i)).unwrap_or(0);
    let dirfd = entry
        .arg(Arg::Dirfd)
        .map(|i| ctx.arg(i) as i32)
        .unwrap_or(libc::AT_FDCWD);
    let ptr = word(Arg::Path);
    let openat2 = entry.arg(Arg::How).is_some();
    let (flags, mode, resolve) = if openat2 {
        let (at, size) = (word(Arg::How), word(Arg::Size) as usize);
        OpenHow::check_size(size)?;
        // The struct must be readable whole; the extension is read as
        // far as it can be (what is not read stays zero).
        let mut raw = vec![0u8; size];
        let (head, rest) = raw.split_at_mut(OPEN_HOW_SIZE);
        if ctx.read_mem(at, head).map_err(|_| libc::EFAULT)? != OPEN_HOW_SIZE {
            return Err(libc::EFAULT);
        }
        if !rest.is_empty() {
            let at = at.checked_add(OPEN_HOW_SIZE as u64).ok_or(libc::EFAULT)?;
            ctx.read_mem(at, rest).map_err(|_| libc::EFAULT)?;
        }
        let how = OpenHow::from_bytes(&raw)?;
        how.check()?;
        (how.flags, how.mode, how.resolve)
    } else {
        let flags = match entry.arg(Arg::Flags) {
            Some(i) => ctx.arg(i),
            None => entry.implied as u64,
        };
        (flags, word(Arg::Mode), 0)
    };
    // open(2) and openat(2) ignore flags they do not know (openat2 refuses
    // them, above), and O_PATH keeps only the flags it understands.
    let flags = if openat2 { flags } else { legacy_flags(flags) };
    let path = ctx
        .read_cstring(ptr, PATH_MAX)
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EFAULT))?;
    if path.is_empty() {
        return Err(libc::ENOENT);
    }
    let mode = open_mode(openat2, flags, mode)?;
    Ok(Request {
        dirfd,
        path,
        flags,
        mode,
        resolve,
    })
}

/// The mode an open-family call creates with: `mode & 0o7777` when
/// `flags` create a file (O_CREAT, O_TMPFILE), else 0. open/openat ignore
/// a mode without those flags; openat2 (`openat2`) refuses it with EINVAL.
pub fn open_mode(openat2: bool, flags: u64, mode: u64) -> Result<u64, i32> {
    let creating = flags as i32 & libc::O_CREAT != 0 || flags as i32 & libc::O_TMPFILE == libc::O_TMPFILE;
    if creating {
        // build_open_how(): openat2 refuses mode bits beyond S_IALLUGO,
        // open and openat drop them.
        if openat2 && mode & !0o7777 != 0 {
            return Err(libc::EINVAL);
        }
        Ok(mode & 0o7777)
    } else if openat2 && mode != 0 {
        Err(libc::EINVAL)
    } else {
        Ok(0)
    }
}

/// The open flags the kernel knows (its `VALID_OPEN_FLAGS`).
pub const VALID_OPEN_FLAGS: u64 = (libc::O_ACCMODE
    | libc::O_CREAT
    | libc::O_EXCL
    | libc::O_NOCTTY
    | libc::O_TRUNC
    | libc::O_APPEND
    | libc::O_NONBLOCK
    | libc::O_DSYNC
    | libc::O_ASYNC
    | libc::O_DIRECT
    | 0o100000 // the kernel's O_LARGEFILE (0 in the x86-64 libc headers)
    | libc::O_DIRECTORY
    | libc::O_NOFOLLOW
    | libc::O_NOATIME
    | libc::O_CLOEXEC
    | libc::O_PATH
    | libc::O_TMPFILE
    | libc::O_SYNC) as u64;
/// The flags O_PATH keeps (the kernel's `O_PATH_FLAGS`).
const O_PATH_FLAGS: u64 = (libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_PATH | libc::O_CLOEXEC) as u64;
/// openat2's RESOLVE_CACHED (Linux 5.12).
const RESOLVE_CACHED: u64 = 0x20;
/// The `RESOLVE_*` flags the kernel knows.
pub const VALID_RESOLVE: u64 =
    RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_IN_ROOT | RESOLVE_CACHED;

/// open(2)'s and openat(2)'s flags as the kernel takes them: unknown bits
/// dropped, and only [`O_PATH_FLAGS`] with O_PATH (build_open_how).
pub fn legacy_flags(flags: u64) -> u64 {
    let flags = flags & VALID_OPEN_FLAGS & 0xffff_ffff;
    if flags & libc::O_PATH as u64 != 0 {
        flags & O_PATH_FLAGS
    } else {
        flags
    }
}

/// Size of `struct open_how` as this supervisor knows it (openat2's
/// `OPEN_HOW_SIZE_VER0`).
const OPEN_HOW_SIZE: usize = std::mem::size_of::<OpenHow>();
/// Largest `size` openat2 accepts (a page, as the kernel does).
const OPEN_HOW_MAX: usize = 4096;

/// `struct open_how` as openat2(2) reads it (flags, mode, resolve).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct OpenHow {
    /// open(2) flags.
    pub flags: u64,
    /// Creation mode.
    pub mode: u64,
    /// `RESOLVE_*` flags.
    pub resolve: u64,
}

impl OpenHow {
    /// Checks openat2's `size` argument (bytes) before anything is read:
    /// `EINVAL` below 24 (the first version of the struct), `E2BIG` above
    /// 4096.
    pub fn check_size(size: usize) -> Result<(), i32> {
        if size < OPEN_HOW_SIZE {
            return Err(libc::EINVAL);
        }
        if size > OPEN_HOW_MAX {
            return Err(libc::E2BIG);
        }
        Ok(())
    }

    /// Decodes the `size` bytes the caller passed (`bytes.len()` is the
    /// size argument): three native-endian u64 (flags, mode, resolve), then
    /// extension bytes that must all be zero. Errors: those of
    /// [`OpenHow::check_size`], and `E2BIG` for a non-zero extension byte
    /// (openat2(2)).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, i32> {
        Self::check_size(bytes.len())?;
        let u64_at = |i: usize| u64::from_ne_bytes(bytes[i..i + 8].try_into().unwrap_or_default());
        if bytes[OPEN_HOW_SIZE..].iter().any(|&b| b != 0) {
            return Err(libc::E2BIG);
        }
        Ok(Self {
            flags: u64_at(0),
            mode: u64_at(8),
            resolve: u64_at(16),
        })
    }

    /// What openat2(2) refuses with EINVAL before any lookup: unknown
    /// flags or `resolve` bits, O_PATH with flags it does not take, and
    /// RESOLVE_BENEATH with RESOLVE_IN_ROOT.
    pub fn check(&self) -> Result<(), i32> {
        let both = RESOLVE_BENEATH | RESOLVE_IN_ROOT;
        if self.flags & !VALID_OPEN_FLAGS != 0
            || self.resolve & !VALID_RESOLVE != 0
            || self.resolve & both == both
            || (self.flags & libc::O_PATH as u64 != 0 && self.flags & !O_PATH_FLAGS != 0)
        {
            return Err(libc::EINVAL);
        }
        Ok(())
    }
}

enum Done {
    Fd(OwnedFd),
    MayBlock,
    /// An O_PATH open of an allowed path: the kernel performs it. Safe to
    /// the extent that an O_PATH fd gives metadata only: every open through
    /// it comes back here and is decided on what it names.
    Continue,
}

fn perform(ctx: &dyn Task, req: &Request, may_block: bool) -> Result<Done, Denied> {
    let crate::supervisor::callers::Caller { creds, root } = ctx.caller().map_err(|_| Denied::Errno(libc::ESRCH))?;
    let root: &Root = &root;
    let policy = &ctx.sup().policy().paths;

    // The caller asked for scoped resolution: the kernel's own semantics on
    // a copy of its dirfd; the final path is still checked below.
    let scoped = req.resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT) != 0;
    let copy;
    let (base, target): (BorrowedFd<'_>, Vec<u8>) = if scoped {
        copy = dir_copy(ctx, req.dirfd)?;
        (copy.as_fd(), req.path.clone())
    } else {
        if req.resolve & (RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) != 0 {
            no_links(root, ctx, req)?;
        }
        let abs = match container_abs(root, ctx, req.dirfd, &req.path)? {
            Ok(abs) => abs,
            Err(Magic::Fd(n)) => {
                let copy = ctx.take_fd(n).map_err(|e| match e.raw_os_error() {
                    Some(libc::ESRCH) => Denied::Errno(libc::ESRCH),
                    _ => Denied::Errno(libc::ENOENT),
                })?;
                return reopen_fd(ctx, req, copy, &creds);
            }
            // A deleted directory itself (its "."): reopened from our copy.
            Err(Magic::Deleted(d)) => return reopen_fd(ctx, req, dir_copy(ctx, d)?, &creds),
            Err(_) => return reopen_exe(ctx, req, &creds),
        };
        (root.as_fd(), abs)
    };
    let resolve = if scoped {
        req.resolve | RESOLVE_NO_MAGICLINKS
    } else {
        RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | (req.resolve & (RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV))
    };

    let creating = req.flags as i32 & libc::O_CREAT != 0;

    // Look the path up once without opening it (O_PATH has no side
    // effects: a FIFO's other end is not woken), decide on that object,
    // then open exactly that object through our fd's /proc link.
    let target = cstr(&target)?;
    let lookup = (libc::O_PATH | libc::O_CLOEXEC) as u64 | (req.flags & (libc::O_NOFOLLOW | libc::O_DIRECTORY) as u64);
    // Lookup, decision and reopen run in one switch to the caller's
    // credentials (each switch is a syscall or more, and its undoing).
    as_caller(&creds, || -> std::io::Result<Result<Done, Denied>> {
        Ok(match sys::openat2(base, &target, lookup, 0, resolve) {
            Ok(found) => decide_and_reopen(ctx, root, found, req, &creds, policy, creating, may_block),
            // "f/" of an existing non-directory: create gives the
            // kernel's EISDIR (after its parent's errors).
            Err(e)
                if creating
                    && (e.raw_os_error() == Some(libc::ENOENT)
                        || (e.raw_os_error() == Some(libc::ENOTDIR) && trailing_slash(target.to_bytes()))) =>
            {
                create(ctx, root, base, &target, req, &creds, policy, resolve)
            }
            Err(e) => Err(e.into()),
        })
    })?
}

/// RESOLVE_NO_SYMLINKS and RESOLVE_NO_MAGICLINKS on the aliases the
/// supervisor rewrites itself: `/proc/self`, `/dev/stdin`, `/dev/fd` and
/// the others are symlinks (ELOOP with RESOLVE_NO_SYMLINKS), and the
/// caller's own `/proc/<pid>/{fd/N,exe,cwd,root}` are magic links (ELOOP
/// with either).
fn no_links(root: &Root, t: &dyn Task, req: &Request) -> Result<(), Denied> {
    let Ok(abs) = absolute(root, t, req.dirfd, &req.path)? else {
        // A deleted directory itself: no link on the way.
        return Ok(());
    };
    let rewritten = rewrite_proc_self(t, &abs);
    if (req.resolve & RESOLVE_NO_SYMLINKS != 0 && rewritten != abs) || own_magic_link(t, &rewritten).is_some() {
        return Err(Denied::Errno(libc::ELOOP));
    }
    Ok(())
}

/// The decision on an existing object found by the lookup, then its reopen
/// with the caller's flags (run with the caller's credentials).
#[allow(clippy::too_many_arguments)]
fn decide_and_reopen(
    t: &dyn Task,
    root: &Root,
    found: OwnedFd,
    req: &Request,
    creds: &Creds,
    policy: &crate::policy::PathPolicy,
    creating: bool,
    may_block: bool,
) -> Result<Done, Denied> {
    if creating && req.flags as i32 & libc::O_EXCL != 0 {
        return Err(Denied::Errno(libc::EEXIST));
    }
    let st = nix::sys::stat::fstat(found.as_raw_fd()).map_err(|e| Denied::Errno(e as i32))?;
    if creating && st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        // O_CREAT never opens a directory ("d", "d/", ".").
        return Err(Denied::Errno(libc::EISDIR));
    }
    let path = container_path(root, &found)?;
    open_allowed(t, policy, &path.to_string_lossy(), req.flags)?;
    if req.flags as i32 & libc::O_PATH != 0 {
        // seccomp cannot install O_PATH fds (ADDFD refuses them).
        return Ok(Done::Continue);
    }
    if st.st_mode & libc::S_IFMT == libc::S_IFIFO && req.flags as i32 & libc::O_NONBLOCK == 0 && !may_block {
        return Ok(Done::MayBlock);
    }
    check_device(t.pid(), &st, req.flags)?;
    let link = cstr(format!("/proc/self/fd/{}", found.as_raw_fd()))?;
    let flags = (req.flags | libc::O_CLOEXEC as u64) & !((libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW) as u64);
    // O_TMPFILE creates a file in the directory found: it takes a mode.
    let tmpfile = req.flags as i32 & libc::O_TMPFILE == libc::O_TMPFILE;
    let mode = if tmpfile { req.mode & !u64::from(creds.umask) } else { 0 };
    Ok(Done::Fd(sys::openat2(cwd_fd(), &link, flags, mode, 0)?))
}

/// Runs with the caller's credentials (see `perform`).
/// Creates a new file for an O_CREAT open, never following a symlink at
/// creation time: each candidate place (the path, or where a dangling
/// symlink points) is checked against the policy *before* anything is
/// created, and the file is created there with O_NOFOLLOW relative to the
/// checked directory, so a symlink swapped in meanwhile fails (ELOOP)
/// instead of redirecting the creation.
#[allow(clippy::too_many_arguments)]
fn create(
    t: &dyn Task,
    root: &Root,
    base: std::os::fd::BorrowedFd<'_>,
    target: &std::ffi::CStr,
    req: &Request,
    creds: &Creds,
    policy: &crate::policy::PathPolicy,
    resolve: u64,
) -> Result<Done, Denied> {
    let mode = req.mode & !u64::from(creds.umask);
    let flags = req.flags | (libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64;
    let mut cur = target.to_bytes().to_vec();
    for _ in 0..40 {
        let (parent, name) = split_parent(&cur);
        if name.is_empty() || name == b"." || name == b".." {
            return Err(Denied::Errno(libc::EISDIR));
        }
        let parent = cstr(parent)?;
        let dir_flags = (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
        let dir = sys::openat2(base, &parent, dir_flags, 0, resolve)?;
        if trailing_slash(&cur) {
            // "n/" (or a symlink to it) asks for a directory, which
            // O_CREAT does not make.
            return Err(Denied::Errno(libc::EISDIR));
        }
        let dir_path = container_path(root, &dir)?;
        let place = if dir_path.as_os_str().as_bytes() == b"/" {
            Path::new("/").join(OsStr::from_bytes(name))
        } else {
            dir_path.join(OsStr::from_bytes(name))
        };
        open_allowed(t, policy, &place.to_string_lossy(), req.flags)?;
        let cname = cstr(name)?;
        match sys::openat2(dir.as_fd(), &cname, flags, mode, RESOLVE_BENEATH) {
            Ok(fd) => return Ok(Done::Fd(fd)),
            // The last component is a symlink (dangling, or it would have
            // been found): follow it by hand unless the caller said not to.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) && req.flags as i32 & libc::O_NOFOLLOW == 0 => {
                let link = nix::fcntl::readlinkat(Some(dir.as_raw_fd()), cname.as_c_str())
                    .map_err(|e| Denied::Errno(e as i32))?;
                let link = link.as_bytes();
                cur = if link.first() == Some(&b'/') {
                    link.to_vec()
                } else {
                    let mut p = dir_path.as_os_str().as_bytes().to_vec();
                    p.push(b'/');
                    p.extend_from_slice(link);
                    p
                };
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(Denied::Errno(libc::ELOOP))
}

/// An open of the caller's own `/proc/self/exe`: the binary it runs, opened
/// through our view of its procfs entry, after checking its container path.
fn reopen_exe(ctx: &dyn Task, req: &Request, creds: &Creds) -> Result<Done, Denied> {
    let root = root_of(ctx)?;
    let flags = (req.flags | libc::O_CLOEXEC as u64) & !((libc::O_CREAT | libc::O_TRUNC) as u64);
    // Open the link as root (procfs checks ptrace access), then check the
    // caller may open the binary itself: reopen our copy as the caller.
    let exe = ctx.exe()?;
    let link = cstr(format!("/proc/self/fd/{}", exe.as_raw_fd()))?;
    let fd = as_caller(creds, || sys::openat2(cwd_fd(), &link, flags, 0, 0))?;
    let path = container_path(&root, &fd)?;
    open_allowed(ctx, &ctx.sup().policy().paths, &path.to_string_lossy(), req.flags)?;
    if writes_memfd(&path, req.flags) {
        return Err(Denied::Policy(path.to_string_lossy().into_owned()));
    }
    if req.flags & libc::O_PATH as u64 != 0 {
        // ADDFD cannot install an O_PATH fd (see decide_and_reopen).
        return Ok(Done::Continue);
    }
    Ok(Done::Fd(fd))
}

/// A reopen of an object the caller holds (its own fd through
/// `/proc/self/fd/N`, or its deleted cwd or dirfd): done on our `copy`
/// (pidfd_getfd), after checking the path of the object it refers to.
fn reopen_fd(ctx: &dyn Task, req: &Request, copy: OwnedFd, creds: &Creds) -> Result<Done, Denied> {
    let root = root_of(ctx)?;
    let path = container_path(&root, &copy)?;
    open_allowed(ctx, &ctx.sup().policy().paths, &path.to_string_lossy(), req.flags)?;
    if writes_memfd(&path, req.flags) {
        return Err(Denied::Policy(path.to_string_lossy().into_owned()));
    }
    if req.flags & libc::O_PATH as u64 != 0 {
        // ADDFD cannot install an O_PATH fd (see decide_and_reopen): the
        // kernel opens the caller's own object itself.
        return Ok(Done::Continue);
    }
    let st = nix::sys::stat::fstat(copy.as_raw_fd()).map_err(|e| Denied::Errno(e as i32))?;
    check_device(ctx.pid(), &st, req.flags)?;
    let link = cstr(format!("/proc/self/fd/{}", copy.as_raw_fd()))?;
    let flags = (req.flags | libc::O_CLOEXEC as u64) & !(libc::O_CREAT as u64);
    let fd = as_caller(creds, || sys::openat2(cwd_fd(), &link, flags, 0, 0))?;
    Ok(Done::Fd(fd))
}

/// The path rules' verdict on an open of container path `path` with
/// open(2) `flags`; a path an `ask` rule decides gets the decision
/// program's answer ([`super::asked::verdict`]).
fn open_allowed(t: &dyn Task, policy: &crate::policy::PathPolicy, path: &str, flags: u64) -> Result<(), Denied> {
    match policy.access(path) {
        crate::policy::PathAccess::Ask => super::asked::verdict(t, path),
        a if a.allows_open(flags) => Ok(()),
        _ => Err(Denied::Policy(path.to_string())),
    }
}

/// The caller's device cgroup decides on a device node the supervisor is
/// about to open for it (see `supervisor::devices`): EPERM when refused.
fn check_device(pid: i32, st: &libc::stat, flags: u64) -> Result<(), Denied> {
    match crate::supervisor::devices::Access::of_open(flags) {
        Some(access) => crate::supervisor::devices::check(pid, st, access).map_err(Denied::Errno),
        None => Ok(()),
    }
}

/// A reopen for writing of a memfd: how a process would reach the runtime's
/// sealed binary (`/memfd:...`) through another process's `/proc/PID/exe`.
/// The seal refuses the writes; this refuses the fd as well.
fn writes_memfd(path: &Path, flags: u64) -> bool {
    path.as_os_str().as_bytes().starts_with(b"/memfd:") && crate::policy::is_write_open(flags)
}

/// open(2) flags as text for the audit trail.
pub fn flags_str(flags: u64) -> String {
    let f = flags as i32;
    let mut parts = vec![match f & libc::O_ACCMODE {
        libc::O_WRONLY => "O_WRONLY",
        libc::O_RDWR => "O_RDWR",
        _ => "O_RDONLY",
    }];
    for (bit, name) in [
        (libc::O_CREAT, "O_CREAT"),
        (libc::O_EXCL, "O_EXCL"),
        (libc::O_TRUNC, "O_TRUNC"),
        (libc::O_APPEND, "O_APPEND"),
        (libc::O_DIRECTORY, "O_DIRECTORY"),
        (libc::O_NOFOLLOW, "O_NOFOLLOW"),
        (libc::O_PATH, "O_PATH"),
    ] {
        if f & bit == bit {
            parts.push(name);
        }
    }
    parts.join("|")
}

#[cfg(test)]
#[path = "open_tests.rs"]
mod tests;
