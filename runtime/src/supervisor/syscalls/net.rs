//! connect(2), sendto(2), sendmsg(2) under the network egress policy.
//!
//! The destination is copied out of the caller's memory once and decided
//! on; an allowed call is then performed by the supervisor on a
//! pidfd_getfd(2) copy of the caller's socket (the same open file
//! description, so non-blocking sockets keep their semantics) with the
//! copied address and data. The kernel never re-reads the caller's memory,
//! and swapping the fd number meanwhile does not matter: we act on the
//! object we copied. Denied destinations get EPERM, as a local firewall
//! rule gives. Calls that may block run on their own thread.
//!
//! Unix-domain paths are resolved inside the container: the connect is
//! made to `/proc/self/fd/<dir>/<name>`, with `<dir>` the parent directory
//! opened under the caller's root with openat2(RESOLVE_IN_ROOT).

use std::ffi::CString;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::{Ctx, Outcome, Reply};
use crate::policy::NetAction;
use crate::supervisor::creds::{self, Creds};
use crate::sys;

/// Largest payload copied for one sendto/sendmsg; a longer stream write is
/// sent short (allowed by send(2)); a longer datagram gets EMSGSIZE anyway.
const MAX_PAYLOAD: usize = 1 << 20;
const MAX_ADDR: usize = 128;
const MAX_CONTROL: usize = 4096;

/// A copied socket address.
struct Addr {
    bytes: Vec<u8>,
}

impl Addr {
    fn read(pid: i32, ptr: u64, len: u64) -> Result<Self, i32> {
        let len = usize::try_from(len).map_err(|_| libc::EINVAL)?;
        if len > MAX_ADDR {
            return Err(libc::EINVAL);
        }
        let mut bytes = vec![0u8; len];
        if len > 0 && sys::read_mem(pid, ptr, &mut bytes).map_err(|_| libc::EFAULT)? != len {
            return Err(libc::EFAULT);
        }
        Ok(Self { bytes })
    }

    fn family(&self) -> i32 {
        if self.bytes.len() < 2 {
            return libc::AF_UNSPEC;
        }
        i32::from(u16::from_ne_bytes([self.bytes[0], self.bytes[1]]))
    }

    /// The IP destination, for AF_INET and AF_INET6.
    fn ip(&self) -> Option<(IpAddr, u16)> {
        let b = &self.bytes;
        match self.family() {
            libc::AF_INET if b.len() >= 8 => {
                let port = u16::from_be_bytes([b[2], b[3]]);
                Some((IpAddr::V4(Ipv4Addr::new(b[4], b[5], b[6], b[7])), port))
            }
            libc::AF_INET6 if b.len() >= 24 => {
                let port = u16::from_be_bytes([b[2], b[3]]);
                let mut a = [0u8; 16];
                a.copy_from_slice(&b[8..24]);
                Some((IpAddr::V6(Ipv6Addr::from(a)), port))
            }
            _ => None,
        }
    }

    fn describe(&self) -> String {
        match (self.family(), self.ip()) {
            (_, Some((IpAddr::V6(a), p))) => format!("[{a}]:{p}"),
            (_, Some((a, p))) => format!("{a}:{p}"),
            (libc::AF_UNIX, _) => {
                let path = &self.bytes[2.min(self.bytes.len())..];
                match path.first() {
                    Some(0) => format!("unix:@{}", String::from_utf8_lossy(&path[1..]).trim_end_matches('\0')),
                    _ => format!("unix:{}", String::from_utf8_lossy(path).trim_end_matches('\0')),
                }
            }
            (f, _) => format!("family {f}"),
        }
    }
}

/// Policy verdict on a copied address: `Err(EPERM)` when denied.
fn check(ctx: &Ctx<'_>, addr: &Addr) -> Result<(), i32> {
    match addr.ip() {
        Some((ip, port)) if ctx.sup.policy.net.decide(ip, port) == NetAction::Deny => Err(libc::EPERM),
        _ => Ok(()),
    }
}

fn socket_copy(ctx: &Ctx<'_>, fd: i32) -> Result<OwnedFd, i32> {
    let pidfd = sys::pidfd_open(tgid(ctx.pid())).map_err(|_| libc::ESRCH)?;
    sys::pidfd_getfd(pidfd.as_fd(), fd).map_err(|e| match e.raw_os_error() {
        Some(libc::EBADF) => libc::EBADF,
        _ => libc::EBADF,
    })
}

fn tgid(tid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(tid)
}

fn is_blocking(fd: &OwnedFd) -> bool {
    nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL)
        .map(|fl| fl & libc::O_NONBLOCK == 0)
        .unwrap_or(true)
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// For a unix path address, the address rewritten to reach the path inside
/// the caller's root; the directory fd must stay open during the call.
fn unix_in_root(pid: i32, addr: &Addr) -> Result<Option<(Vec<u8>, OwnedFd)>, i32> {
    if addr.family() != libc::AF_UNIX || addr.bytes.len() <= 2 || addr.bytes[2] == 0 {
        return Ok(None);
    }
    let path: Vec<u8> = addr.bytes[2..].iter().copied().take_while(|&b| b != 0).collect();
    let (parent, name) = match path.iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/".to_vec(), path[1..].to_vec()),
        Some(i) => (path[..i].to_vec(), path[i + 1..].to_vec()),
        None => {
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).map_err(|_| libc::ESRCH)?;
            (
                std::os::unix::ffi::OsStrExt::as_bytes(cwd.as_os_str()).to_vec(),
                path.clone(),
            )
        }
    };
    let root = super::path::root_of(pid).map_err(|_| libc::ESRCH)?;
    let dir = sys::openat2(
        root.as_fd(),
        &CString::new(parent).map_err(|_| libc::EINVAL)?,
        (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        0,
        super::path::IN_ROOT,
    )
    .map_err(|e| e.raw_os_error().unwrap_or(libc::ENOENT))?;
    let mut p = format!("/proc/self/fd/{}/", dir.as_raw_fd()).into_bytes();
    p.extend_from_slice(&name);
    if p.len() >= 108 {
        return Err(libc::ENAMETOOLONG);
    }
    let mut bytes = addr.bytes[..2].to_vec();
    bytes.extend_from_slice(&p);
    bytes.push(0);
    Ok(Some((bytes, dir)))
}

fn do_connect(sock: &OwnedFd, addr: &[u8]) -> Reply {
    // SAFETY: `addr` is a byte buffer of the length we pass; the kernel
    // copies it before returning.
    let r = unsafe { libc::connect(sock.as_raw_fd(), addr.as_ptr().cast(), addr.len() as libc::socklen_t) };
    if r == 0 {
        Reply::Value(0)
    } else {
        Reply::Errno(last_errno())
    }
}

/// What an allowed address-carrying call acts on.
struct Prepared {
    /// Our copy of the caller's socket (arg 0).
    sock: OwnedFd,
    /// The address to pass (unix paths rewritten into the caller's root).
    addr: Vec<u8>,
    /// The directory a rewritten unix path goes through; keep it open.
    dir: Option<OwnedFd>,
}

/// The steps every address-carrying call shares once the address is
/// copied: the caller is still waiting, the destination is allowed, our
/// copy of its socket, the address in our terms. `Err` is the answer.
fn prepare(ctx: &Ctx<'_>, addr: &Addr, detail: &str) -> Result<Prepared, Outcome> {
    let out = |e, action| Outcome::new(Reply::Errno(e), action, detail.to_string());
    if !ctx.still_valid() {
        return Err(out(libc::EINTR, "emulate"));
    }
    check(ctx, addr).map_err(|e| out(e, "deny"))?;
    let sock = socket_copy(ctx, ctx.arg(0) as i32).map_err(|e| out(e, "allow"))?;
    let (addr, dir) = match unix_in_root(ctx.pid(), addr) {
        Ok(Some((b, d))) => (b, Some(d)),
        Ok(None) => (addr.bytes.clone(), None),
        Err(e) => return Err(out(e, "allow")),
    };
    Ok(Prepared { sock, addr, dir })
}

/// connect(fd, addr, len)
pub fn connect(ctx: &Ctx<'_>) -> Outcome {
    let pid = ctx.pid();
    let addr = match Addr::read(pid, ctx.arg(1), ctx.arg(2)) {
        Ok(a) => a,
        Err(e) => return Outcome::new(Reply::Errno(e), "emulate", "connect: bad address".into()),
    };
    let detail = addr.describe();
    let Prepared { sock, addr: bytes, dir } = match prepare(ctx, &addr, &detail) {
        Ok(p) => p,
        Err(out) => return out,
    };
    let blocking = is_blocking(&sock);
    // A unix socket file is reached with the caller's credentials (connect
    // needs write permission on it).
    let creds = match dir.as_ref().map(|_| Creds::of(pid)).transpose() {
        Ok(c) => c,
        Err(_) => return Outcome::new(Reply::Errno(libc::ESRCH), "allow", detail),
    };
    let run = move || {
        let r = match &creds {
            Some(c) => creds::with(c, || do_connect(&sock, &bytes)).unwrap_or(Reply::Errno(libc::EPERM)),
            None => do_connect(&sock, &bytes),
        };
        drop(dir);
        r
    };
    if blocking {
        let d2 = detail.clone();
        let job = Box::new(move |_: &Ctx<'_>| Outcome::new(run(), "allow", d2));
        return Outcome::new(Reply::Blocking(job), "allow", detail);
    }
    Outcome::new(run(), "allow", detail)
}

/// sendto(fd, buf, len, flags, addr, addrlen) with a non-null addr.
pub fn sendto(ctx: &Ctx<'_>) -> Outcome {
    let pid = ctx.pid();
    let addr = match Addr::read(pid, ctx.arg(4), ctx.arg(5)) {
        Ok(a) => a,
        Err(e) => return Outcome::new(Reply::Errno(e), "emulate", "sendto: bad address".into()),
    };
    let len = (ctx.arg(2) as usize).min(MAX_PAYLOAD);
    let mut data = vec![0u8; len];
    if len > 0
        && sys::read_mem(pid, ctx.arg(1), &mut data)
            .map(|n| n != len)
            .unwrap_or(true)
    {
        return Outcome::new(Reply::Errno(libc::EFAULT), "emulate", addr.describe());
    }
    let detail = format!("{} {} bytes", addr.describe(), len);
    let Prepared {
        sock,
        addr: abytes,
        dir,
    } = match prepare(ctx, &addr, &detail) {
        Ok(p) => p,
        Err(out) => return out,
    };
    let flags = ctx.arg(3) as i32;
    let run = move || {
        // SAFETY: `data` and `abytes` are our buffers with the lengths passed.
        let r = unsafe {
            libc::sendto(
                sock.as_raw_fd(),
                data.as_ptr().cast(),
                data.len(),
                flags | libc::MSG_NOSIGNAL,
                abytes.as_ptr().cast(),
                abytes.len() as libc::socklen_t,
            )
        };
        drop(dir);
        if r >= 0 {
            Reply::Value(r as i64)
        } else {
            Reply::Errno(last_errno())
        }
    };
    if flags & libc::MSG_DONTWAIT == 0 {
        let d2 = detail.clone();
        return Outcome::new(
            Reply::Blocking(Box::new(move |_: &Ctx<'_>| Outcome::new(run(), "allow", d2))),
            "allow",
            detail,
        );
    }
    Outcome::new(run(), "allow", detail)
}

/// `struct msghdr` as the caller laid it out (x86-64).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
struct MsgHdr {
    name: u64,
    namelen: u32,
    _pad: u32,
    iov: u64,
    iovlen: u64,
    control: u64,
    controllen: u64,
    flags: i32,
    _pad2: u32,
}

#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
struct IoVec {
    base: u64,
    len: u64,
}

/// sendmsg(fd, msg, flags): the header, address, data and ancillary data
/// are copied; SCM_RIGHTS fds are translated through pidfd_getfd.
pub fn sendmsg(ctx: &Ctx<'_>) -> Outcome {
    match sendmsg_inner(ctx) {
        Ok(o) => o,
        Err(e) => Outcome::new(Reply::Errno(e), "emulate", "sendmsg: bad arguments".into()),
    }
}

fn sendmsg_inner(ctx: &Ctx<'_>) -> Result<Outcome, i32> {
    let pid = ctx.pid();
    let hdr: MsgHdr = sys::read_pod(pid, ctx.arg(1)).map_err(|_| libc::EFAULT)?;
    let addr = if hdr.name != 0 && hdr.namelen > 0 {
        Some(Addr::read(pid, hdr.name, u64::from(hdr.namelen))?)
    } else {
        None
    };
    if hdr.iovlen > 1024 {
        return Err(libc::EMSGSIZE);
    }
    let mut data = Vec::new();
    for i in 0..hdr.iovlen {
        let v: IoVec = sys::read_pod(pid, hdr.iov + i * 16).map_err(|_| libc::EFAULT)?;
        let take = (v.len as usize).min(MAX_PAYLOAD - data.len());
        let start = data.len();
        data.resize(start + take, 0);
        if take > 0
            && sys::read_mem(pid, v.base, &mut data[start..])
                .map(|n| n != take)
                .unwrap_or(true)
        {
            return Err(libc::EFAULT);
        }
        if data.len() >= MAX_PAYLOAD {
            break;
        }
    }
    let controllen = (hdr.controllen as usize).min(MAX_CONTROL);
    let mut control = vec![0u8; controllen];
    if controllen > 0
        && sys::read_mem(pid, hdr.control, &mut control)
            .map(|n| n != controllen)
            .unwrap_or(true)
    {
        return Err(libc::EFAULT);
    }
    let detail = format!(
        "{} {} bytes",
        addr.as_ref().map(Addr::describe).unwrap_or_else(|| "connected".into()),
        data.len()
    );
    if !ctx.still_valid() {
        return Ok(Outcome::new(Reply::Errno(libc::EINTR), "emulate", detail));
    }
    if let Some(a) = &addr {
        if let Err(e) = check(ctx, a) {
            return Ok(Outcome::new(Reply::Errno(e), "deny", detail));
        }
    }
    let sock = socket_copy(ctx, ctx.arg(0) as i32)?;
    // Translate SCM_RIGHTS: the numbers are the caller's fds.
    let mut held: Vec<OwnedFd> = Vec::new();
    let mut off = 0usize;
    let hdr_len = std::mem::size_of::<libc::cmsghdr>();
    while off + hdr_len <= control.len() {
        let len = u64::from_ne_bytes(control[off..off + 8].try_into().map_err(|_| libc::EINVAL)?) as usize;
        let level = i32::from_ne_bytes(control[off + 8..off + 12].try_into().map_err(|_| libc::EINVAL)?);
        let kind = i32::from_ne_bytes(control[off + 12..off + 16].try_into().map_err(|_| libc::EINVAL)?);
        if len < hdr_len || off + len > control.len() {
            return Err(libc::EINVAL);
        }
        if level == libc::SOL_SOCKET && kind == libc::SCM_CREDENTIALS {
            return Ok(Outcome::new(
                Reply::Errno(libc::EPERM),
                "deny",
                format!("{detail} SCM_CREDENTIALS"),
            ));
        }
        if level == libc::SOL_SOCKET && kind == libc::SCM_RIGHTS {
            let pidfd = sys::pidfd_open(tgid(pid)).map_err(|_| libc::ESRCH)?;
            let mut at = off + hdr_len;
            while at + 4 <= off + len {
                let n = i32::from_ne_bytes(control[at..at + 4].try_into().map_err(|_| libc::EINVAL)?);
                let copy = sys::pidfd_getfd(pidfd.as_fd(), n).map_err(|_| libc::EBADF)?;
                control[at..at + 4].copy_from_slice(&copy.as_raw_fd().to_ne_bytes());
                held.push(copy);
                at += 4;
            }
        }
        off += (len + 7) & !7;
    }
    let (abytes, dir) = match addr.as_ref().map(|a| unix_in_root(pid, a)).transpose()? {
        Some(Some((b, d))) => (Some(b), Some(d)),
        Some(None) => (addr.as_ref().map(|a| a.bytes.clone()), None),
        None => (None, None),
    };
    let flags = ctx.arg(2) as i32;
    let blocking = flags & libc::MSG_DONTWAIT == 0 && is_blocking(&sock);
    let run = move || {
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        // SAFETY: msghdr is plain data; every pointer we set below points at
        // buffers owned by this closure that outlive the sendmsg call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        if let Some(a) = &abytes {
            msg.msg_name = a.as_ptr() as *mut libc::c_void;
            msg.msg_namelen = a.len() as libc::socklen_t;
        }
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !control.is_empty() {
            msg.msg_control = control.as_ptr() as *mut libc::c_void;
            msg.msg_controllen = control.len();
        }
        // SAFETY: see above; `msg` is valid for the duration of the call.
        let r = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, flags | libc::MSG_NOSIGNAL) };
        drop(held);
        drop(dir);
        if r >= 0 {
            Reply::Value(r as i64)
        } else {
            Reply::Errno(last_errno())
        }
    };
    if blocking {
        let d2 = detail.clone();
        return Ok(Outcome::new(
            Reply::Blocking(Box::new(move |_: &Ctx<'_>| Outcome::new(run(), "allow", d2))),
            "allow",
            detail,
        ));
    }
    Ok(Outcome::new(run(), "allow", detail))
}
