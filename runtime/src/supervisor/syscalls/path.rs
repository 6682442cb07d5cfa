//! Path resolution inside a caller's container, shared by the file
//! handlers: the caller's root, cwd and dirfds as the supervisor's own
//! copies, self-referring `/proc` aliases rewritten to the caller's pid,
//! and the caller's credentials around every access.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::Task;
use crate::supervisor::creds::{self, Creds};
use crate::sys;

pub const PATH_MAX: usize = 4096;
pub const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
pub const RESOLVE_NO_SYMLINKS: u64 = 0x04;
pub const RESOLVE_BENEATH: u64 = 0x08;
pub const RESOLVE_IN_ROOT: u64 = 0x10;
pub const RESOLVE_NO_XDEV: u64 = 0x01;
pub const PIDFD_THREAD: u32 = libc::O_EXCL as u32;

pub enum Denied {
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
pub fn as_caller<T>(c: &Creds, f: impl FnOnce() -> std::io::Result<T>) -> Result<T, Denied> {
    match creds::with(c, f) {
        Ok(r) => r.map_err(Into::into),
        Err(_) => Err(Denied::Errno(libc::EPERM)),
    }
}

pub fn cwd_fd() -> std::os::fd::BorrowedFd<'static> {
    sys::cwd_fd()
}

pub fn cstr(b: impl AsRef<[u8]>) -> Result<CString, Denied> {
    CString::new(b.as_ref()).map_err(|_| Denied::Errno(libc::EINVAL))
}

/// A pidfd for thread `tid` (PIDFD_THREAD, Linux 6.9), or its process.
pub fn pidfd_of(tid: i32) -> std::io::Result<OwnedFd> {
    sys::pidfd_open_flags(tid, PIDFD_THREAD).or_else(|_| sys::pidfd_open(tid))
}

/// Our copy of the caller's fd `dirfd` (its cwd for AT_FDCWD): ESRCH when
/// the caller is gone, EBADF when it has no such fd.
pub fn dir_copy(t: &dyn Task, dirfd: i32) -> Result<OwnedFd, Denied> {
    if dirfd == libc::AT_FDCWD {
        return t.cwd().map_err(Into::into);
    }
    take_fd_or(t, dirfd, libc::EBADF)
}

/// The caller's fd `n`, or `errno` when it has none (ESRCH when it is gone).
pub fn take_fd_or(t: &dyn Task, n: i32, errno: i32) -> Result<OwnedFd, Denied> {
    t.take_fd(n).map_err(|e| match e.raw_os_error() {
        Some(libc::ESRCH) => Denied::Errno(libc::ESRCH),
        _ => Denied::Errno(errno),
    })
}

/// A caller's root directory: an O_PATH fd on it, and (read once, on
/// first use) the name readlink(2) gives it from the supervisor.
pub struct Root {
    fd: OwnedFd,
    link: std::sync::OnceLock<PathBuf>,
}

impl Root {
    /// Wraps an O_PATH fd on a root directory.
    pub fn new(fd: OwnedFd) -> Self {
        Self {
            fd,
            link: std::sync::OnceLock::new(),
        }
    }

    /// readlink of `/proc/self/fd/N` for the root fd.
    fn link(&self) -> std::io::Result<&Path> {
        if let Some(l) = self.link.get() {
            return Ok(l);
        }
        let l = std::fs::read_link(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))?;
        Ok(self.link.get_or_init(|| l))
    }
}

impl AsFd for Root {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The container path of an object we hold, given the caller's root.
/// readlink of `/proc/self/fd/N` names it from the root of its mount
/// namespace, which for a pivoted container is the container's root.
pub fn container_path(root: &Root, fd: &OwnedFd) -> Result<PathBuf, Denied> {
    let p = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    let r = root.link()?;
    // Without pivot_root (chroot, --no-pivot) the path includes the rootfs.
    if r != Path::new("/") {
        if let Ok(rest) = p.strip_prefix(r) {
            return Ok(Path::new("/").join(rest));
        }
    }
    Ok(p)
}

/// The caller's path made absolute inside the container, or
/// [`Magic::Deleted`] when it names a deleted directory (the caller's cwd
/// or `dirfd`) itself, which no path names.
pub fn absolute(root: &Root, t: &dyn Task, dirfd: i32, path: &[u8]) -> Result<Result<Vec<u8>, Magic>, Denied> {
    if path.first() == Some(&b'/') {
        return Ok(Ok(path.to_vec()));
    }
    let dir = dir_copy(t, dirfd)?;
    let st = nix::sys::stat::fstat(dir.as_raw_fd()).map_err(|e| Denied::Errno(e as i32))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(Denied::Errno(libc::ENOTDIR));
    }
    if st.st_nlink == 0 {
        return in_deleted(root, dirfd, &dir, path);
    }
    Ok(Ok(joined(root, &dir, path)?))
}

/// `path` below the directory `dir`, as a container path.
fn joined(root: &Root, dir: &OwnedFd, path: &[u8]) -> Result<Vec<u8>, Denied> {
    let base = container_path(root, dir)?;
    let mut out = base.as_os_str().as_bytes().to_vec();
    if out.last() != Some(&b'/') {
        out.push(b'/');
    }
    out.extend_from_slice(path);
    Ok(out)
}

/// A relative `path` from the deleted directory `dir` (the caller's
/// `dirfd`): its name (readlink's "... (deleted)") is no path to it, so it
/// is walked from the object, as the kernel does. A deleted directory is
/// empty and nothing can be created in it: "." (and "./.") is the
/// directory itself, ".." its former parent, any other name ENOENT.
fn in_deleted(root: &Root, dirfd: i32, dir: &OwnedFd, path: &[u8]) -> Result<Result<Vec<u8>, Magic>, Denied> {
    let mut rest = path;
    loop {
        let start = rest.iter().position(|&b| b != b'/').unwrap_or(rest.len());
        rest = &rest[start..];
        let end = rest.iter().position(|&b| b == b'/').unwrap_or(rest.len());
        let (comp, tail) = rest.split_at(end);
        match comp {
            b"" => return Ok(Err(Magic::Deleted(dirfd))),
            b"." => rest = tail,
            b".." => {
                let up = sys::openat2(
                    dir.as_fd(),
                    c"..",
                    (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
                    0,
                    0,
                )?;
                let st = nix::sys::stat::fstat(up.as_raw_fd()).map_err(|e| Denied::Errno(e as i32))?;
                if st.st_nlink == 0 {
                    // Deleted too: nothing names it (rare; not emulated).
                    return Err(Denied::Errno(libc::ENOENT));
                }
                // ".." itself ends as "." of the parent: the same object
                // and, for the calls that refuse both, no tree change.
                let tail = tail.strip_prefix(b"/").unwrap_or(tail);
                return Ok(Ok(joined(root, &up, if tail.is_empty() { b"." } else { tail })?));
            }
            _ => return Err(Denied::Errno(libc::ENOENT)),
        }
    }
}

/// The caller's pid and tid as its own pid namespace numbers them.
pub fn ns_ids(tid: i32) -> Option<(String, String)> {
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
pub fn rewrite_proc_self(t: &dyn Task, abs: &[u8]) -> Vec<u8> {
    rewrite_proc_alias(abs, || t.ns_ids())
}

/// Rewrites a self-referring alias at the start of the absolute container
/// path `abs` (`/proc/self`, `/proc/thread-self`, `/proc/mounts`,
/// `/proc/net`, `/dev/fd`, `/dev/std{in,out,err}`, each followed by `/` or
/// the end) to the caller's own `/proc/<pid>[/task/<tid>]` path. `ids` gives
/// the caller's (pid, tid) in its pid namespace and is called only when an
/// alias matches; without them, or without an alias, `abs` is returned as is.
pub fn rewrite_proc_alias(abs: &[u8], ids: impl FnOnce() -> Option<(String, String)>) -> Vec<u8> {
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
        let Some((ns_pid, ns_tid)) = ids() else {
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Magic {
    /// `fd/<n>`
    Fd(i32),
    /// `exe`
    Exe,
    /// `root/<rest>`
    Root(Vec<u8>),
    /// `cwd/<rest>` (rest may be empty: the cwd itself, as ".")
    Cwd(Vec<u8>),
    /// `fd/<n>/<rest>`: a path below the directory open as fd n
    FdPath(i32, Vec<u8>),
    /// The deleted directory open as this dirfd (or the cwd, AT_FDCWD)
    /// itself: no path names it (see [`absolute`]). Never parsed.
    Deleted(i32),
}

/// Recognises the caller's own magic links, which openat2 refuses with
/// RESOLVE_NO_MAGICLINKS; other processes' stay refused (ELOOP).
pub fn own_magic_link(t: &dyn Task, abs: &[u8]) -> Option<Magic> {
    let (pid, magic) = parse_magic_link(abs)?;
    let (ns_pid, _) = t.ns_ids()?;
    (pid == ns_pid).then_some(magic)
}

/// Parses `/proc/<pid>/{fd/<n>[/<rest>],exe,root[/<rest>],cwd[/<rest>]}`
/// (also below `/proc/<pid>/task/<tid>/`) in the absolute path `abs`:
/// the `<pid>` component as written (not checked to be a number), and the
/// link. `None` for any other path, a non-UTF-8 `<pid>`, or an `fd/<n>`
/// whose `<n>` is not an i32.
pub fn parse_magic_link(abs: &[u8]) -> Option<(&str, Magic)> {
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
            let (num, rest) = match tail.iter().position(|&b| b == b'/') {
                Some(i) => (&tail[..i], tail[i + 1..].to_vec()),
                None => (&tail[..], Vec::new()),
            };
            let n = std::str::from_utf8(num).ok()?.parse().ok()?;
            if rest.iter().all(|&b| b == b'/') {
                Magic::Fd(n)
            } else {
                Magic::FdPath(n, rest)
            }
        }
        b"exe" if tail.is_empty() => Magic::Exe,
        b"root" => Magic::Root(tail),
        b"cwd" => Magic::Cwd(if tail.is_empty() { b".".to_vec() } else { tail }),
        _ => return None,
    };
    Some((pid, magic))
}

/// Splits `path` into its parent and its last component, after dropping
/// trailing slashes: `/a/b/` gives (`/a`, `b`), `/a` gives (`/`, `a`), `a`
/// gives (`.`, `a`), `/` gives (`/`, ``). The parts are sub-slices of `path`
/// (or the literals `/` and `.`).
pub fn split_parent(path: &[u8]) -> (&[u8], &[u8]) {
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

/// The caller's root directory (`/proc/<tid>/root`), opened anew; see
/// [`crate::supervisor::callers::caller`] for the kept one.
pub fn root_of(t: &dyn Task) -> Result<Root, Denied> {
    t.root().map_err(|_| Denied::Errno(libc::ESRCH))
}

/// An O_PATH fd on `/proc/<tid>/root`.
pub fn open_root(pid: i32) -> std::io::Result<OwnedFd> {
    sys::openat2(
        cwd_fd(),
        &CString::new(format!("/proc/{pid}/root")).map_err(std::io::Error::other)?,
        (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        0,
        0,
    )
}

/// The flags every lookup under the caller's root uses.
pub const IN_ROOT: u64 = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;

/// A path of the caller made absolute inside its container, with the
/// caller's own `/proc` aliases rewritten (`root/` and `cwd/` links
/// folded in). `None` for links that need an object (`fd/N`, `exe`).
pub fn container_abs(root: &Root, t: &dyn Task, dirfd: i32, path: &[u8]) -> Result<Result<Vec<u8>, Magic>, Denied> {
    let abs = match absolute(root, t, dirfd, path)? {
        Ok(a) => a,
        Err(m) => return Ok(Err(m)),
    };
    let abs = rewrite_proc_self(t, &abs);
    Ok(match own_magic_link(t, &abs) {
        Some(Magic::Root(rest)) => Ok([b"/".as_slice(), &rest].concat()),
        Some(Magic::Cwd(rest)) => absolute(root, t, libc::AT_FDCWD, &rest)?,
        Some(Magic::FdPath(n, rest)) => absolute(root, t, n, &rest)?,
        Some(m) => Err(m),
        None => Ok(abs),
    })
}

/// Where a new directory entry would go: the resolved parent directory
/// (O_PATH, looked up with the caller's credentials), the entry's name,
/// and its container path for the policy.
pub struct Parent {
    /// The parent directory.
    pub dir: OwnedFd,
    /// The final component.
    pub name: CString,
    /// The entry's path inside the container (parent resolved).
    pub path: String,
    /// What the final component is (the kernel's `last_type`).
    pub last: Last,
    /// The path ended with a slash: the entry must be (or become) a
    /// directory.
    pub slash: bool,
}

/// The kind of a path's final component, as the kernel tells them apart:
/// only a normal name can be created, removed or renamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Last {
    /// A name.
    Norm,
    /// `.`
    Dot,
    /// `..`
    DotDot,
    /// `/` itself (no final component).
    Root,
}

/// Whether `path` ends with a slash after a final component (`a/`, not `/`).
pub fn trailing_slash(path: &[u8]) -> bool {
    path.len() > 1 && path.ends_with(b"/") && path.iter().any(|&b| b != b'/')
}

/// Resolves the parent of `path` (relative to the caller's `dirfd`); "/",
/// "." and ".." (entries that always exist) give EEXIST.
pub fn parent(t: &dyn Task, dirfd: i32, path: &[u8], creds: &Creds) -> Result<Parent, Denied> {
    let p = parent_any(t, dirfd, path, creds)?;
    if p.last != Last::Norm {
        // mkdir -p asks for "/" first and expects EEXIST.
        return Err(Denied::Errno(libc::EEXIST));
    }
    Ok(p)
}

/// As [`parent`], for any final component: for "/", "." and ".." the
/// directory holding it is resolved as the kernel resolves it (so its
/// errors come first) and [`Parent::last`] says which it is; each call
/// then gives its own errno for them.
pub fn parent_any(t: &dyn Task, dirfd: i32, path: &[u8], creds: &Creds) -> Result<Parent, Denied> {
    let root = root_of(t)?;
    let abs = match container_abs(&root, t, dirfd, path)? {
        Ok(a) => a,
        Err(Magic::Deleted(d)) => {
            // "." of a deleted directory: it exists (it is the caller's).
            let dir = dir_copy(t, d)?;
            let full = container_path(&root, &dir)?.to_string_lossy().into_owned();
            return Ok(Parent {
                dir,
                name: cstr(b".")?,
                path: full,
                last: Last::Dot,
                slash: trailing_slash(path),
            });
        }
        Err(_) => return Err(Denied::Errno(libc::EPERM)),
    };
    let slash = trailing_slash(path) || trailing_slash(&abs);
    let (p, name) = split_parent(&abs);
    let kind = |name: &[u8]| match name {
        b"" => Last::Root,
        b"." => Last::Dot,
        b".." => Last::DotDot,
        _ => Last::Norm,
    };
    // The caller's own final component says what it is: ".." from a
    // deleted directory comes back as "<parent>/.".
    let last = match kind(split_parent(path).1) {
        Last::Norm => kind(name),
        l => l,
    };
    let pc = cstr(p)?;
    let dir = as_caller(creds, || {
        sys::openat2(
            root.as_fd(),
            &pc,
            (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
            0,
            IN_ROOT,
        )
    })?;
    let mut full = container_path(&root, &dir)?;
    if full.as_os_str().as_bytes() == b"/" {
        full = Path::new("/").join(OsStr::from_bytes(name));
    } else {
        full.push(OsStr::from_bytes(name));
    }
    Ok(Parent {
        dir,
        name: cstr(if name.is_empty() { b"." } else { name })?,
        path: full.to_string_lossy().into_owned(),
        last,
        slash,
    })
}

/// Resolves `path` itself to an O_PATH fd (following a final symlink when
/// `follow`), with the caller's credentials, and its container path.
pub fn target(t: &dyn Task, dirfd: i32, path: &[u8], follow: bool, creds: &Creds) -> Result<(OwnedFd, String), Denied> {
    let root = root_of(t)?;
    let abs = match container_abs(&root, t, dirfd, path)? {
        Ok(a) => a,
        Err(Magic::Deleted(d)) => {
            let fd = dir_copy(t, d)?;
            let p = container_path(&root, &fd)?;
            return Ok((fd, p.to_string_lossy().into_owned()));
        }
        Err(Magic::Fd(n)) => {
            let fd = take_fd_or(t, n, libc::ENOENT)?;
            let p = container_path(&root, &fd)?;
            return Ok((fd, p.to_string_lossy().into_owned()));
        }
        Err(_) => {
            let fd = t.exe()?;
            let p = container_path(&root, &fd)?;
            return Ok((fd, p.to_string_lossy().into_owned()));
        }
    };
    let flags = libc::O_PATH | libc::O_CLOEXEC | if follow { 0 } else { libc::O_NOFOLLOW };
    let c = cstr(&abs)?;
    let fd = as_caller(creds, || sys::openat2(root.as_fd(), &c, flags as u64, 0, IN_ROOT))?;
    let p = container_path(&root, &fd)?;
    Ok((fd, p.to_string_lossy().into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_links() {
        let parse = parse_magic_link;
        assert_eq!(parse(b"/proc/12/fd/3"), Some(("12", Magic::Fd(3))));
        assert_eq!(parse(b"/proc/12/fd/3//"), Some(("12", Magic::Fd(3))));
        assert_eq!(
            parse(b"/proc/12/task/13/fd/3/a/b"),
            Some(("12", Magic::FdPath(3, b"a/b".to_vec())))
        );
        assert_eq!(parse(b"/proc/12/exe"), Some(("12", Magic::Exe)));
        assert_eq!(parse(b"/proc/12/exe/x"), None);
        assert_eq!(parse(b"/proc/12/cwd"), Some(("12", Magic::Cwd(b".".to_vec()))));
        assert_eq!(parse(b"/proc/12/root/etc"), Some(("12", Magic::Root(b"etc".to_vec()))));
        assert_eq!(parse(b"/proc/12/fd/99999999999"), None);
        assert_eq!(parse(b"/proc/12"), None);
        assert_eq!(parse(b"/proc/\xff/fd/1"), None);
        assert_eq!(parse(b"/proc/12/task/13"), None);
    }

    #[test]
    fn proc_aliases() {
        let ids = || Some(("7".to_string(), "9".to_string()));
        assert_eq!(rewrite_proc_alias(b"/proc/self/fd/1", ids), b"/proc/7/fd/1");
        assert_eq!(
            rewrite_proc_alias(b"/proc/thread-self/comm", ids),
            b"/proc/7/task/9/comm"
        );
        assert_eq!(rewrite_proc_alias(b"/dev/stdin", ids), b"/proc/7/fd/0");
        assert_eq!(rewrite_proc_alias(b"/proc/net/tcp", ids), b"/proc/7/net/tcp");
        assert_eq!(rewrite_proc_alias(b"/proc/selfish", ids), b"/proc/selfish");
        assert_eq!(rewrite_proc_alias(b"/proc/self", || None), b"/proc/self");
        let mut asked = false;
        rewrite_proc_alias(b"/etc/passwd", || {
            asked = true;
            None
        });
        assert!(!asked, "ids are looked up only for an alias");
    }

    #[test]
    fn parents() {
        assert_eq!(split_parent(b"/"), (&b"/"[..], &b""[..]));
        assert_eq!(split_parent(b""), (&b"."[..], &b""[..]));
        assert_eq!(split_parent(b"a"), (&b"."[..], &b"a"[..]));
        assert_eq!(split_parent(b"//a//"), (&b"/"[..], &b"a"[..]));
        assert!(trailing_slash(b"a/") && trailing_slash(b"/a//"));
        assert!(!trailing_slash(b"/") && !trailing_slash(b"//") && !trailing_slash(b"a"));
    }
}
