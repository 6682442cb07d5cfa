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

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{Ctx, Outcome, Reply};
use crate::supervisor::creds::{self, Creds};
use crate::sys;

const PATH_MAX: usize = 4096;
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;
const RESOLVE_IN_ROOT: u64 = 0x10;
const RESOLVE_NO_XDEV: u64 = 0x01;
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;

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
pub fn open(ctx: &Ctx<'_>, name: &str) -> Outcome {
    let req = match decode(ctx, name) {
        Ok(r) => r,
        Err(e) => return Outcome::new(Reply::Errno(e), "emulate", format!("{name}: bad arguments")),
    };
    if !ctx.still_valid() {
        return Outcome::new(Reply::Errno(libc::EINTR), "emulate", "caller gone".into());
    }
    let detail = format!("{} {}", String::from_utf8_lossy(&req.path), flags_str(req.flags));
    match perform(ctx, &req, false) {
        Ok(Done::Fd(fd)) => {
            let cloexec = req.flags & libc::O_CLOEXEC as u64 != 0;
            Outcome::new(Reply::Fd { fd, cloexec }, "allow", detail)
        }
        Ok(Done::MayBlock) => {
            let req2 = req.clone();
            let job = Box::new(move |ctx: &Ctx<'_>| {
                let detail = format!("{} {}", String::from_utf8_lossy(&req2.path), flags_str(req2.flags));
                match perform(ctx, &req2, true) {
                    Ok(Done::Fd(fd)) => {
                        let cloexec = req2.flags & libc::O_CLOEXEC as u64 != 0;
                        Outcome::new(Reply::Fd { fd, cloexec }, "allow", detail)
                    }
                    Ok(Done::MayBlock) => Outcome::new(Reply::Errno(libc::EAGAIN), "allow", detail),
                    Err(Denied::Policy(p)) => Outcome::new(Reply::Errno(libc::EACCES), "deny", p),
                    Err(Denied::Errno(e)) => Outcome::new(Reply::Errno(e), "allow", detail),
                }
            });
            Outcome::new(Reply::Blocking(job), "allow", String::new())
        }
        Err(Denied::Policy(p)) => Outcome::new(
            Reply::Errno(libc::EACCES),
            "deny",
            format!("{p} {}", flags_str(req.flags)),
        ),
        Err(Denied::Errno(e)) => Outcome::new(Reply::Errno(e), "allow", detail),
    }
}

fn decode(ctx: &Ctx<'_>, name: &str) -> Result<Request, i32> {
    let pid = ctx.pid();
    let (dirfd, ptr, flags, mode, resolve) = match name {
        "open" => (libc::AT_FDCWD, ctx.arg(0), ctx.arg(1), ctx.arg(2), 0),
        "creat" => (
            libc::AT_FDCWD,
            ctx.arg(0),
            (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64,
            ctx.arg(1),
            0,
        ),
        "openat" => (ctx.arg(0) as i32, ctx.arg(1), ctx.arg(2), ctx.arg(3), 0),
        "openat2" => {
            let size = ctx.arg(3) as usize;
            if size < std::mem::size_of::<libc::open_how>() {
                return Err(libc::EINVAL);
            }
            if size > 4096 {
                return Err(libc::E2BIG);
            }
            let how: OpenHow = sys::read_pod(pid, ctx.arg(2)).map_err(|_| libc::EFAULT)?;
            if size > std::mem::size_of::<OpenHow>() {
                // Extension bytes must be zero (openat2(2), E2BIG).
                let mut rest = vec![0u8; size - std::mem::size_of::<OpenHow>()];
                sys::read_mem(pid, ctx.arg(2) + std::mem::size_of::<OpenHow>() as u64, &mut rest)
                    .map_err(|_| libc::EFAULT)?;
                if rest.iter().any(|&b| b != 0) {
                    return Err(libc::E2BIG);
                }
            }
            (ctx.arg(0) as i32, ctx.arg(1), how.flags, how.mode, how.resolve)
        }
        _ => return Err(libc::ENOSYS),
    };
    let path = sys::read_cstring(pid, ptr, PATH_MAX).map_err(|e| e.raw_os_error().unwrap_or(libc::EFAULT))?;
    if path.is_empty() {
        return Err(libc::ENOENT);
    }
    // open/openat ignore the mode without O_CREAT/O_TMPFILE; openat2 refuses it.
    let creating = flags as i32 & libc::O_CREAT != 0 || flags as i32 & libc::O_TMPFILE == libc::O_TMPFILE;
    let mode = if creating {
        mode & 0o7777
    } else if name == "openat2" && mode != 0 {
        return Err(libc::EINVAL);
    } else {
        0
    };
    Ok(Request {
        dirfd,
        path,
        flags,
        mode,
        resolve,
    })
}

/// `struct open_how` as openat2(2) reads it (flags, mode, resolve).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

enum Done {
    Fd(OwnedFd),
    MayBlock,
}

enum Denied {
    /// The policy refused this container path.
    Policy(String),
    /// The open itself failed with this errno.
    Errno(i32),
}

impl From<std::io::Error> for Denied {
    fn from(e: std::io::Error) -> Self {
        Denied::Errno(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

/// Runs `f` with the caller's filesystem credentials (see [`creds`]).
fn as_caller<T>(c: &Creds, f: impl FnOnce() -> std::io::Result<T>) -> Result<T, Denied> {
    match creds::with(c, f) {
        Ok(r) => r.map_err(Into::into),
        Err(_) => Err(Denied::Errno(libc::EPERM)),
    }
}

fn perform(ctx: &Ctx<'_>, req: &Request, may_block: bool) -> Result<Done, Denied> {
    let pid = ctx.pid();
    let creds = Creds::of(pid).map_err(|_| Denied::Errno(libc::ESRCH))?;
    let policy = &ctx.sup.policy.paths;
    let proc_dir = format!("/proc/{pid}");
    let root = sys::openat2(
        cwd_fd(),
        &cstr(format!("{proc_dir}/root").as_bytes())?,
        (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        0,
        0,
    )
    .map_err(|_| Denied::Errno(libc::ESRCH))?;

    // The caller asked for scoped resolution: the kernel's own semantics on
    // a copy of its dirfd; the final path is still checked below.
    let scoped = req.resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT) != 0;
    let (base, target): (OwnedFd, Vec<u8>) = if scoped {
        (dir_copy(pid, req.dirfd)?, req.path.clone())
    } else {
        let abs = absolute(pid, req)?;
        let mut abs = rewrite_proc_self(pid, &abs);
        match own_magic_link(pid, &abs) {
            Some(Magic::Fd(n)) => return reopen_fd(ctx, req, n, &creds),
            Some(Magic::Exe) => return reopen_exe(ctx, req, &creds),
            // The caller's own root or cwd followed by a path: the same
            // path from the root we resolve in, or from its cwd.
            Some(Magic::Root(rest)) => abs = [b"/".as_slice(), &rest].concat(),
            Some(Magic::Cwd(rest)) => {
                abs = absolute(
                    pid,
                    &Request {
                        dirfd: libc::AT_FDCWD,
                        path: rest,
                        ..req.clone()
                    },
                )?
            }
            None => {}
        }
        (root.try_clone()?, abs)
    };
    let resolve = if scoped {
        req.resolve | RESOLVE_NO_MAGICLINKS
    } else {
        RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | (req.resolve & (RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV))
    };

    let creating = req.flags as i32 & libc::O_CREAT != 0;
    if creating && !policy.is_empty() {
        // Check where the file would be created before creating it.
        let (parent, name) = split_parent(&target);
        let parent = cstr(parent)?;
        let dir = as_caller(&creds, || {
            sys::openat2(
                base.as_fd(),
                &parent,
                (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
                0,
                resolve,
            )
        })?;
        let mut prospective = container_path(&root, &dir)?;
        if prospective.as_os_str().as_bytes() != b"/" {
            prospective.push(OsStr::from_bytes(name));
        } else {
            prospective = Path::new("/").join(OsStr::from_bytes(name));
        }
        if !policy.allows_open(&prospective.to_string_lossy(), req.flags) {
            return Err(Denied::Policy(prospective.to_string_lossy().into_owned()));
        }
    }

    let blocking_requested = req.flags as i32 & libc::O_NONBLOCK == 0;
    let mut flags = req.flags | libc::O_CLOEXEC as u64;
    if blocking_requested && !may_block {
        flags |= libc::O_NONBLOCK as u64;
    }
    let target = cstr(&target)?;
    let fd = match creds::with(&creds, || sys::openat2(base.as_fd(), &target, flags, req.mode, resolve))
        .unwrap_or_else(|_| Err(std::io::Error::from_raw_os_error(libc::EPERM)))
    {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) && blocking_requested && !may_block => {
            return Ok(Done::MayBlock)
        }
        Err(e) => return Err(e.into()),
    };
    let path = container_path(&root, &fd)?;
    if !policy.allows_open(&path.to_string_lossy(), req.flags) {
        return Err(Denied::Policy(path.to_string_lossy().into_owned()));
    }
    if blocking_requested && !may_block {
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| Denied::Errno(e as i32))?;
        if st.st_mode & libc::S_IFMT == libc::S_IFIFO {
            return Ok(Done::MayBlock);
        }
        // O_NONBLOCK was ours: clear it on the shared file description.
        let fl =
            nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL).map_err(|e| Denied::Errno(e as i32))?;
        let fl = nix::fcntl::OFlag::from_bits_retain(fl) & !nix::fcntl::OFlag::O_NONBLOCK;
        nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(fl)).map_err(|e| Denied::Errno(e as i32))?;
    }
    Ok(Done::Fd(fd))
}

fn cwd_fd() -> std::os::fd::BorrowedFd<'static> {
    // SAFETY: AT_FDCWD is a constant understood by the *at syscalls, never
    // closed or dereferenced as a real fd.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}

fn cstr(b: impl AsRef<[u8]>) -> Result<CString, Denied> {
    CString::new(b.as_ref()).map_err(|_| Denied::Errno(libc::EINVAL))
}

/// A pidfd for thread `tid` (PIDFD_THREAD, Linux 6.9), or its process.
fn pidfd_of(tid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) };
    if r >= 0 {
        // SAFETY: a new fd returned by the kernel, owned by us.
        return Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(r as i32) });
    }
    sys::pidfd_open(tid)
}

/// Our copy of the caller's fd `dirfd`.
fn dir_copy(pid: i32, dirfd: i32) -> Result<OwnedFd, Denied> {
    if dirfd == libc::AT_FDCWD {
        return sys::openat2(
            cwd_fd(),
            &cstr(format!("/proc/{pid}/cwd"))?,
            (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
            0,
            0,
        )
        .map_err(Into::into);
    }
    let pidfd = pidfd_of(pid).map_err(|_| Denied::Errno(libc::ESRCH))?;
    sys::pidfd_getfd(pidfd.as_fd(), dirfd).map_err(|_| Denied::Errno(libc::EBADF))
}

/// The container path of an object we hold, given the caller's root.
/// readlink of `/proc/self/fd/N` names it from the root of its mount
/// namespace, which for a pivoted container is the container's root.
fn container_path(root: &OwnedFd, fd: &OwnedFd) -> Result<PathBuf, Denied> {
    let link = |f: &OwnedFd| std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd()));
    let p = link(fd)?;
    let r = link(root)?;
    // Without pivot_root (chroot, --no-pivot) the path includes the rootfs.
    if r != Path::new("/") {
        if let Ok(rest) = p.strip_prefix(&r) {
            return Ok(Path::new("/").join(rest));
        }
    }
    Ok(p)
}

/// The caller's path made absolute inside the container.
fn absolute(pid: i32, req: &Request) -> Result<Vec<u8>, Denied> {
    if req.path.first() == Some(&b'/') {
        return Ok(req.path.clone());
    }
    let root = sys::openat2(
        cwd_fd(),
        &cstr(format!("/proc/{pid}/root"))?,
        (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        0,
        0,
    )?;
    let dir = dir_copy(pid, req.dirfd)?;
    let st = nix::sys::stat::fstat(dir.as_raw_fd()).map_err(|e| Denied::Errno(e as i32))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(Denied::Errno(libc::ENOTDIR));
    }
    let base = container_path(&root, &dir)?;
    let mut out = base.as_os_str().as_bytes().to_vec();
    if out.last() != Some(&b'/') {
        out.push(b'/');
    }
    out.extend_from_slice(&req.path);
    Ok(out)
}

/// The caller's pid and tid as its own pid namespace numbers them.
fn ns_ids(tid: i32) -> Option<(String, String)> {
    let last = |s: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .and_then(|v| v.split_whitespace().last().map(str::to_string))
    };
    let thread = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let tgid: i32 = thread
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()?;
    let ns_tid = last(&thread)?;
    let ns_pid = if tgid == tid {
        ns_tid.clone()
    } else {
        last(&std::fs::read_to_string(format!("/proc/{tgid}/status")).ok()?)?
    };
    Some((ns_pid, ns_tid))
}

/// Rewrites the self-referring aliases to the caller's own numbers.
fn rewrite_proc_self(tid: i32, abs: &[u8]) -> Vec<u8> {
    let aliases: [(&[u8], &str); 8] = [
        (b"/proc/mounts", "/proc/self/mounts"),
        (b"/proc/net", "/proc/self/net"),
        (b"/dev/fd", "/proc/self/fd"),
        (b"/dev/stdin", "/proc/self/fd/0"),
        (b"/dev/stdout", "/proc/self/fd/1"),
        (b"/dev/stderr", "/proc/self/fd/2"),
        (b"/proc/thread-self", "/proc/thread-self"),
        (b"/proc/self", "/proc/self"),
    ];
    for (prefix, repl) in aliases {
        let rest = match abs.strip_prefix(prefix) {
            Some(r) if r.is_empty() || r[0] == b'/' => r,
            _ => continue,
        };
        let Some((ns_pid, ns_tid)) = ns_ids(tid) else {
            return abs.to_vec();
        };
        let repl = repl
            .replace("/proc/thread-self", &format!("/proc/{ns_pid}/task/{ns_tid}"))
            .replace("/proc/self", &format!("/proc/{ns_pid}"));
        let mut out = repl.into_bytes();
        out.extend_from_slice(rest);
        return out;
    }
    abs.to_vec()
}

/// A magic link of the caller's own `/proc/<pid>` (or `/proc/<pid>/task/<tid>`).
enum Magic {
    /// `fd/<n>`
    Fd(i32),
    /// `exe`
    Exe,
    /// `root/<rest>`
    Root(Vec<u8>),
    /// `cwd/<rest>` (rest may be empty: the cwd itself, as ".")
    Cwd(Vec<u8>),
}

/// Recognises the caller's own magic links, which openat2 refuses with
/// RESOLVE_NO_MAGICLINKS; other processes' stay refused (ELOOP).
fn own_magic_link(tid: i32, abs: &[u8]) -> Option<Magic> {
    let rest = abs.strip_prefix(b"/proc/")?;
    let slash = rest.iter().position(|&b| b == b'/')?;
    let (pid, mut rest) = (std::str::from_utf8(&rest[..slash]).ok()?, &rest[slash + 1..]);
    if let Some(r) = rest.strip_prefix(b"task/") {
        let s = r.iter().position(|&b| b == b'/')?;
        rest = &r[s + 1..];
    }
    let (head, tail) = match rest.iter().position(|&b| b == b'/') {
        Some(i) => (&rest[..i], rest[i + 1..].to_vec()),
        None => (rest, Vec::new()),
    };
    let magic = match head {
        b"fd" => {
            let n = std::str::from_utf8(&tail).ok()?.trim_end_matches('/').parse().ok()?;
            Magic::Fd(n)
        }
        b"exe" if tail.is_empty() => Magic::Exe,
        b"root" => Magic::Root(tail),
        b"cwd" => Magic::Cwd(if tail.is_empty() { b".".to_vec() } else { tail }),
        _ => return None,
    };
    let (ns_pid, _) = ns_ids(tid)?;
    (pid == ns_pid).then_some(magic)
}

/// An open of the caller's own `/proc/self/exe`: the binary it runs, opened
/// through our view of its procfs entry, after checking its container path.
fn reopen_exe(ctx: &Ctx<'_>, req: &Request, creds: &Creds) -> Result<Done, Denied> {
    let pid = ctx.pid();
    let root = sys::openat2(
        cwd_fd(),
        &cstr(format!("/proc/{pid}/root"))?,
        (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        0,
        0,
    )?;
    let flags = (req.flags | libc::O_CLOEXEC as u64) & !((libc::O_CREAT | libc::O_TRUNC) as u64);
    // Open the link as root (procfs checks ptrace access), then check the
    // caller may open the binary itself: reopen our copy as the caller.
    let exe = sys::openat2(
        cwd_fd(),
        &cstr(format!("/proc/{pid}/exe"))?,
        (libc::O_PATH | libc::O_CLOEXEC) as u64,
        0,
        0,
    )?;
    let link = cstr(format!("/proc/self/fd/{}", exe.as_raw_fd()))?;
    let fd = as_caller(creds, || sys::openat2(cwd_fd(), &link, flags, 0, 0))?;
    let path = container_path(&root, &fd)?;
    if !ctx.sup.policy.paths.allows_open(&path.to_string_lossy(), req.flags) {
        return Err(Denied::Policy(path.to_string_lossy().into_owned()));
    }
    Ok(Done::Fd(fd))
}

/// A reopen of the caller's own fd through `/proc/self/fd/N`: done on a
/// pidfd_getfd copy, after checking the path of the object it refers to.
fn reopen_fd(ctx: &Ctx<'_>, req: &Request, fdnum: i32, creds: &Creds) -> Result<Done, Denied> {
    let pid = ctx.pid();
    let pidfd = pidfd_of(pid).map_err(|_| Denied::Errno(libc::ESRCH))?;
    let copy = sys::pidfd_getfd(pidfd.as_fd(), fdnum).map_err(|_| Denied::Errno(libc::ENOENT))?;
    let root = sys::openat2(
        cwd_fd(),
        &cstr(format!("/proc/{pid}/root"))?,
        (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        0,
        0,
    )?;
    let path = container_path(&root, &copy)?;
    if !ctx.sup.policy.paths.allows_open(&path.to_string_lossy(), req.flags) {
        return Err(Denied::Policy(path.to_string_lossy().into_owned()));
    }
    let link = cstr(format!("/proc/self/fd/{}", copy.as_raw_fd()))?;
    let flags = (req.flags | libc::O_CLOEXEC as u64) & !(libc::O_CREAT as u64);
    let fd = as_caller(creds, || sys::openat2(cwd_fd(), &link, flags, 0, 0))?;
    Ok(Done::Fd(fd))
}

fn split_parent(path: &[u8]) -> (&[u8], &[u8]) {
    let trimmed = {
        let mut end = path.len();
        while end > 1 && path[end - 1] == b'/' {
            end -= 1;
        }
        &path[..end]
    };
    match trimmed.iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/", &trimmed[1..]),
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => (b".", trimmed),
    }
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
mod tests {
    use super::*;

    #[test]
    fn parent_split() {
        assert_eq!(split_parent(b"/a/b"), (&b"/a"[..], &b"b"[..]));
        assert_eq!(split_parent(b"/a"), (&b"/"[..], &b"a"[..]));
        assert_eq!(split_parent(b"/a/b/"), (&b"/a"[..], &b"b"[..]));
    }

    #[test]
    fn flags_text() {
        assert_eq!(
            flags_str((libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC) as u64),
            "O_WRONLY|O_CREAT|O_TRUNC"
        );
        assert_eq!(flags_str(0), "O_RDONLY");
    }
}
