//! sendto(2), sendmsg(2), sendmmsg(2): each message's destination,
//! data and ancillary data copied once, decided, then sent on our copy
//! of the caller's socket.

use super::*;

/// sendto(fd, buf, len, flags, addr, addrlen) with a non-null addr.
pub fn sendto(ctx: &dyn Task) -> Outcome {
    let addr = match Addr::read(ctx, ctx.arg(4), ctx.arg(5)) {
        Ok(a) => a,
        Err(e) => return Outcome::new(Reply::Errno(e), Decision::Emulate, "sendto: bad address".into()),
    };
    let len = (ctx.arg(2) as usize).min(MAX_PAYLOAD);
    let mut data = vec![0u8; len];
    if len > 0 && ctx.read_mem(ctx.arg(1), &mut data).map(|n| n != len).unwrap_or(true) {
        return Outcome::new(Reply::Errno(libc::EFAULT), Decision::Emulate, addr.describe());
    }
    let (shown, verdict) = check(ctx, &addr, true);
    let by = verdict.clone().ok().flatten();
    let detail = format!("{shown} {len} bytes");
    if let Some(out) = ask_first(&verdict, &detail, sendto) {
        return out;
    }
    let Prepared {
        sock,
        addr: abytes,
        dir,
        creds,
    } = match prepare(ctx, &addr, verdict, &detail) {
        Ok(p) => p,
        Err(out) => return out,
    };
    if let Err(e) = audit_netlink_allowed(ctx, &sock, &data) {
        return Outcome::new(Reply::Errno(e), Decision::Deny, detail);
    }
    let flags = ctx.arg(3) as i32;
    if let Some((e, why)) = past_the_relay(ctx, Some(&addr), &sock, flags) {
        return Outcome::new(Reply::Errno(e), Decision::Deny, detail).by(Some(why));
    }
    let run = move || {
        let r = as_caller_identity(&creds, || {
            sent(sys::net::sendto(
                sock.as_fd(),
                &data,
                flags | libc::MSG_NOSIGNAL,
                &abytes,
            ))
        });
        drop(dir);
        r
    };
    if flags & libc::MSG_DONTWAIT == 0 {
        let (d2, by2) = (detail.clone(), by.clone());
        return Outcome::new(
            Reply::Blocking(Box::new(move |_: &Ctx<'_>| {
                Outcome::new(run(), Decision::Allow, d2).by(by2)
            })),
            Decision::Allow,
            detail,
        )
        .by(by);
    }
    Outcome::new(run(), Decision::Allow, detail).by(by)
}

/// `struct msghdr` as the caller laid it out (x86-64: 56 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct MsgHdr {
    /// `msg_name`: the destination address, or 0.
    pub name: u64,
    /// `msg_namelen`, in bytes.
    pub namelen: u32,
    _pad: u32,
    /// `msg_iov`: address of the iovec array.
    pub iov: u64,
    /// `msg_iovlen`: number of iovecs.
    pub iovlen: u64,
    /// `msg_control`: address of the ancillary data.
    pub control: u64,
    /// `msg_controllen`, in bytes.
    pub controllen: u64,
    /// `msg_flags` (ignored by sendmsg).
    pub flags: i32,
    _pad2: u32,
}

impl MsgHdr {
    /// Decodes the first 56 bytes of `bytes` (native endian). Errors:
    /// `EFAULT` when fewer than 56 bytes are given (a short copy).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, i32> {
        let b = bytes.get(..std::mem::size_of::<Self>()).ok_or(libc::EFAULT)?;
        let u64_at = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap_or_default());
        Ok(Self {
            name: u64_at(0),
            namelen: u32_at(8),
            _pad: u32_at(12),
            iov: u64_at(16),
            iovlen: u64_at(24),
            control: u64_at(32),
            controllen: u64_at(40),
            flags: u32_at(48) as i32,
            _pad2: u32_at(52),
        })
    }
}

/// `struct iovec` (x86-64: 16 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct IoVec {
    /// `iov_base`: address of the data.
    pub base: u64,
    /// `iov_len`, in bytes.
    pub len: u64,
}

/// Most iovecs in one sendmsg (UIO_MAXIOV); more get EMSGSIZE.
const MAX_IOV: u64 = 1024;

/// Copies the data a sendmsg(2) `hdr` describes, at most 1 MiB (a longer
/// message is sent short). `read(addr, buf)` copies caller memory at
/// `addr` into `buf` and returns how many bytes it copied (short at an
/// unmapped page); in the supervisor it is process_vm_readv(2).
///
/// Errors: `EMSGSIZE` for more than 1024 iovecs; `EFAULT` when an iovec
/// or the data it points at cannot be copied whole, or the iovec array
/// runs past the end of the address space.
pub fn gather(hdr: &MsgHdr, mut read: impl FnMut(u64, &mut [u8]) -> Result<usize, i32>) -> Result<Vec<u8>, i32> {
    if hdr.iovlen > MAX_IOV {
        return Err(libc::EMSGSIZE);
    }
    let mut data = Vec::new();
    for i in 0..hdr.iovlen {
        let at = hdr.iov.checked_add(i * 16).ok_or(libc::EFAULT)?;
        let mut raw = [0u8; 16];
        if read(at, &mut raw)? != raw.len() {
            return Err(libc::EFAULT);
        }
        let v = IoVec {
            base: u64::from_ne_bytes(raw[..8].try_into().unwrap_or_default()),
            len: u64::from_ne_bytes(raw[8..].try_into().unwrap_or_default()),
        };
        let take = usize::try_from(v.len)
            .unwrap_or(usize::MAX)
            .min(MAX_PAYLOAD - data.len());
        let start = data.len();
        data.resize(start + take, 0);
        if take > 0 && read(v.base, &mut data[start..]).map(|n| n != take).unwrap_or(true) {
            return Err(libc::EFAULT);
        }
        if data.len() >= MAX_PAYLOAD {
            break;
        }
    }
    Ok(data)
}

/// One control message of a sendmsg(2) ancillary buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmsg {
    /// `cmsg_level`, e.g. `SOL_SOCKET`.
    pub level: i32,
    /// `cmsg_type`, e.g. `SCM_RIGHTS`.
    pub kind: i32,
    /// Where its data is in the buffer (byte offsets).
    pub data: std::ops::Range<usize>,
}

impl Cmsg {
    /// Offsets of the whole 4-byte ints in the data (the fd numbers of
    /// SCM_RIGHTS); a partial int at the end is left out, as the kernel does.
    pub fn int_offsets(&self) -> impl Iterator<Item = usize> {
        let n = self.data.len() / 4;
        let start = self.data.start;
        (0..n).map(move |i| start + 4 * i)
    }
}

/// The control messages of `control` (the caller's `msg_control`, as
/// copied), in order, as the kernel walks them (`CMSG_FIRSTHDR`,
/// `CMSG_NXTHDR`, `CMSG_OK`): a header is 16 bytes (`cmsg_len` u64, level
/// i32, type i32), `cmsg_len` counts the header and the data, the next
/// header starts at `cmsg_len` rounded up to 8; fewer than 16 bytes left
/// end the walk. A header whose `cmsg_len` is below 16 or past the end of
/// the buffer gives `Err(EINVAL)`, and the walk stops there.
pub fn cmsgs(control: &[u8]) -> impl Iterator<Item = Result<Cmsg, i32>> + '_ {
    const HDR: usize = std::mem::size_of::<libc::cmsghdr>();
    let mut off = 0usize;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || control.len().saturating_sub(off) < HDR {
            return None;
        }
        let h = &control[off..off + HDR];
        let len = u64::from_ne_bytes(h[..8].try_into().unwrap_or_default());
        let level = i32::from_ne_bytes(h[8..12].try_into().unwrap_or_default());
        let kind = i32::from_ne_bytes(h[12..16].try_into().unwrap_or_default());
        match usize::try_from(len) {
            Ok(len) if len >= HDR && len <= control.len() - off => {
                let data = off + HDR..off + len;
                // off + len <= control.len(): the rounding cannot overflow.
                off += (len + 7) & !7;
                Some(Ok(Cmsg { level, kind, data }))
            }
            _ => {
                failed = true;
                Some(Err(libc::EINVAL))
            }
        }
    })
}

/// sendmsg(fd, msg, flags): the header, address, data and ancillary data
/// are copied; SCM_RIGHTS fds are translated through pidfd_getfd.
pub fn sendmsg(ctx: &dyn Task) -> Outcome {
    match sendmsg_inner(ctx) {
        Ok(o) => o,
        Err(e) => Outcome::new(Reply::Errno(e), Decision::Emulate, "sendmsg: bad arguments".into()),
    }
}

/// A message of sendmsg(2) or sendmmsg(2) as copied from the caller once:
/// its destination (`msg_name`), data and ancillary data.
struct Copied {
    addr: Option<Addr>,
    data: Vec<u8>,
    control: Vec<u8>,
}

/// Copies the `struct msghdr` at `at` and what it points at. Errors:
/// `EFAULT` for memory that cannot be read whole, `EMSGSIZE` for too many
/// iovecs, `EINVAL` for a bad address length (see [`gather`], [`Addr`]).
fn copy_message(ctx: &dyn Task, at: u64) -> Result<Copied, i32> {
    let mut raw = [0u8; std::mem::size_of::<MsgHdr>()];
    let n = ctx.read_mem(at, &mut raw).map_err(|_| libc::EFAULT)?;
    let hdr = MsgHdr::from_bytes(&raw[..n])?;
    let addr = if hdr.name != 0 && hdr.namelen > 0 {
        Some(Addr::read(ctx, hdr.name, u64::from(hdr.namelen))?)
    } else {
        None
    };
    let data = gather(&hdr, |at, buf| ctx.read_mem(at, buf).map_err(|_| libc::EFAULT))?;
    let controllen = (hdr.controllen as usize).min(MAX_CONTROL);
    let mut control = vec![0u8; controllen];
    if controllen > 0
        && ctx
            .read_mem(hdr.control, &mut control)
            .map(|n| n != controllen)
            .unwrap_or(true)
    {
        return Err(libc::EFAULT);
    }
    Ok(Copied { addr, data, control })
}

/// The verdict on a copied message: its audit detail (destination and
/// size), the rule that allowed it, or `Err` with the rule that denied.
fn decide_message(ctx: &dyn Task, msg: &Copied) -> (String, Result<Option<String>, (i32, String)>) {
    let (shown, verdict) = match &msg.addr {
        Some(a) => check(ctx, a, true),
        None => ("connected".into(), Ok(None)),
    };
    (format!("{shown} {} bytes", msg.data.len()), verdict)
}

/// A decided message in the supervisor's terms, ready to send on our copy
/// of the caller's socket.
struct Ready {
    data: Vec<u8>,
    control: Vec<u8>,
    addr: Option<Vec<u8>>,
    /// Our copies of the SCM_RIGHTS fds and the socket file a rewritten
    /// unix path names: open until the message is sent (dropped with it).
    _held: Vec<OwnedFd>,
}

impl Ready {
    /// Sends it with `flags` (plus MSG_NOSIGNAL: the caller gets EPIPE
    /// from us, never our SIGPIPE) as the caller's identity.
    fn send(&self, sock: &OwnedFd, creds: &Creds, flags: i32) -> Reply {
        as_caller_identity(creds, || {
            let f = flags | libc::MSG_NOSIGNAL;
            sent(sys::net::sendmsg(
                sock.as_fd(),
                &self.data,
                self.addr.as_deref(),
                &self.control,
                f,
            ))
        })
    }
}

/// Puts an allowed message in the supervisor's terms: the NETLINK_AUDIT
/// check, SCM_RIGHTS numbers translated to our copies of the caller's fds,
/// SCM_CREDENTIALS checked as the kernel checks the caller's, a unix path
/// resolved in the caller's root. `Err` is the answer for this message.
fn make_ready(ctx: &dyn Task, msg: Copied, sock: &OwnedFd, creds: &Creds, detail: &str) -> Result<Ready, Outcome> {
    let errno = |e| Outcome::new(Reply::Errno(e), Decision::Emulate, detail.to_string());
    let Copied {
        addr,
        data,
        mut control,
    } = msg;
    if let Err(e) = audit_netlink_allowed(ctx, sock, &data) {
        return Err(Outcome::new(Reply::Errno(e), Decision::Deny, detail.to_string()));
    }
    let mut held: Vec<OwnedFd> = Vec::new();
    let msgs: Vec<Result<Cmsg, i32>> = cmsgs(&control).collect();
    // The kernel reads IPv4 control messages on IPv4 and IPv6 sockets (an
    // IPv6 socket sends to a mapped address as IPv4) and IPv6 ones on IPv6
    // sockets only; other sockets skip both.
    let domain = if control.is_empty() {
        None
    } else {
        sockopt_int(sock, libc::SO_DOMAIN)
    };
    let read_by_kernel = |c: &Cmsg| match domain {
        Some(libc::AF_INET) => c.level == libc::IPPROTO_IP,
        Some(libc::AF_INET6) => true,
        _ => false,
    };
    for c in msgs {
        let c = c.map_err(errno)?;
        if let Some(name) = routing_cmsg(&c).filter(|_| read_by_kernel(&c)) {
            return Err(Outcome::new(
                Reply::Errno(libc::EPERM),
                Decision::Deny,
                format!("{detail} cmsg {name}"),
            )
            .by(Some(format!(
                "net: the control message {name} routes the packet past the address the rules decide"
            ))));
        }
        if c.level == libc::SOL_SOCKET && c.kind == libc::SCM_CREDENTIALS {
            if let Err(e) = own_credentials(ctx, creds, &mut control[c.data.clone()]) {
                return Err(Outcome::new(
                    Reply::Errno(e),
                    Decision::Deny,
                    format!("{detail} SCM_CREDENTIALS not the caller's"),
                ));
            }
        }
        if c.level == libc::SOL_SOCKET && c.kind == libc::SCM_RIGHTS {
            for at in c.int_offsets() {
                let n = i32::from_ne_bytes(control[at..at + 4].try_into().map_err(|_| errno(libc::EINVAL))?);
                let copy = socket_copy(ctx, n).map_err(errno)?;
                control[at..at + 4].copy_from_slice(&copy.as_raw_fd().to_ne_bytes());
                held.push(copy);
            }
        }
    }
    let addr = match addr.as_ref().map(|a| unix_in_root(ctx, a, creds)).transpose() {
        Ok(Some(Some((b, d)))) => {
            held.push(d);
            Some(b)
        }
        Ok(Some(None)) => addr.map(|a| a.bytes),
        Ok(None) => None,
        Err(Denied::Policy(p)) => return Err(Outcome::path_denied(ctx, p)),
        Err(Denied::Errno(e)) => return Err(errno(e)),
    };
    Ok(Ready {
        data,
        control,
        addr,
        _held: held,
    })
}

fn sendmsg_inner(ctx: &dyn Task) -> Result<Outcome, i32> {
    let msg = copy_message(ctx, ctx.arg(1))?;
    let (detail, verdict) = decide_message(ctx, &msg);
    if let Some(out) = ask_first(&verdict, &detail, sendmsg) {
        return Ok(out);
    }
    let by = verdict.clone().ok().flatten();
    if !ctx.still_valid() {
        return Ok(Outcome::new(Reply::Errno(libc::EINTR), Decision::Emulate, detail));
    }
    if let Err((e, rule)) = verdict {
        return Ok(Outcome::new(Reply::Errno(e), Decision::Deny, detail).by(Some(rule)));
    }
    let creds = ctx.creds().map_err(|_| libc::ESRCH)?;
    let sock = socket_copy(ctx, ctx.arg(0) as i32)?;
    let flags = ctx.arg(2) as i32;
    if let Some((e, why)) = past_the_relay(ctx, msg.addr.as_ref(), &sock, flags) {
        return Ok(Outcome::new(Reply::Errno(e), Decision::Deny, detail).by(Some(why)));
    }
    let ready = match make_ready(ctx, msg, &sock, &creds, &detail) {
        Ok(r) => r,
        Err(out) => return Ok(out),
    };
    let blocking = flags & libc::MSG_DONTWAIT == 0 && is_blocking(&sock);
    let run = move || ready.send(&sock, &creds, flags);
    if blocking {
        let (d2, by2) = (detail.clone(), by.clone());
        return Ok(Outcome::new(
            Reply::Blocking(Box::new(move |_: &Ctx<'_>| {
                Outcome::new(run(), Decision::Allow, d2).by(by2)
            })),
            Decision::Allow,
            detail,
        )
        .by(by));
    }
    Ok(Outcome::new(run(), Decision::Allow, detail).by(by))
}

/// Most messages one sendmmsg(2) sends (UIO_MAXIOV): a larger `vlen` is
/// cut to it, as the kernel does.
const MAX_MMSG: u64 = 1024;

/// Size of `struct mmsghdr` (x86-64): a `struct msghdr` and the `msg_len`
/// the kernel writes back (an unsigned int, padded to 64 bytes).
const MMSGHDR: u64 = 64;

/// sendmmsg(fd, msgvec, vlen, flags): each message is copied and decided
/// as sendmsg(2) decides one, in order; the messages before the first one
/// that is refused or cannot be copied are sent, each with sendmsg(2) on
/// our copy of the socket, and each sent one's `msg_len` is written back.
/// The result is what the kernel returns (net/socket.c,
/// `__sys_sendmmsg`): the number of messages sent when it is not zero,
/// else the first message's error (EPERM naming the rule for a denied
/// destination). glibc's resolver sends a lookup's A and AAAA queries
/// with it (Debian 12's has no fall-back when it fails).
pub fn sendmmsg(ctx: &dyn Task) -> Outcome {
    let vlen = u64::from(ctx.arg(2) as u32).min(MAX_MMSG);
    let base = ctx.arg(1);
    let mut batch: Vec<(Ready, u64)> = Vec::new();
    let mut details: Vec<String> = Vec::new();
    let mut by = None;
    // Why the batch stops where it does: the answer when nothing is sent.
    let mut stop: Option<Outcome> = None;
    let setup = caller_socket(ctx);
    let (creds, sock) = match setup {
        Ok(s) => s,
        Err(e) => return Outcome::new(Reply::Errno(e), Decision::Allow, "sendmmsg".into()),
    };
    for i in 0..vlen {
        let at = base.wrapping_add(i * MMSGHDR);
        let msg = match copy_message(ctx, at) {
            Ok(m) => m,
            Err(e) => {
                stop = Some(Outcome::new(
                    Reply::Errno(e),
                    Decision::Emulate,
                    format!("message {i}: bad arguments"),
                ));
                break;
            }
        };
        let (detail, verdict) = decide_message(ctx, &msg);
        if let Some(out) = ask_first(&verdict, &detail, sendmmsg) {
            return out;
        }
        let verdict = match past_the_relay(ctx, msg.addr.as_ref(), &sock, ctx.arg(3) as i32) {
            Some(refusal) => Err(refusal),
            None => verdict,
        };
        match verdict {
            Err((e, rule)) => {
                stop = Some(Outcome::new(Reply::Errno(e), Decision::Deny, detail).by(Some(rule)));
                break;
            }
            Ok(rule) => by = by.or(rule),
        }
        match make_ready(ctx, msg, &sock, &creds, &detail) {
            Ok(r) => batch.push((r, at)),
            Err(out) => {
                stop = Some(out);
                break;
            }
        }
        details.push(detail);
    }
    if !ctx.still_valid() {
        return Outcome::new(Reply::Errno(libc::EINTR), Decision::Emulate, details.join(", "));
    }
    let mut detail = format!("{} of {vlen} messages: {}", batch.len(), details.join(", "));
    let (action, rule) = match &stop {
        Some(o) => {
            detail = format!("{detail}; stopped at {}", o.detail);
            (o.action, o.rule.clone())
        }
        None => (Decision::Allow, by),
    };
    if batch.is_empty() {
        let reply = stop.map(|o| o.reply).unwrap_or(Reply::Value(0));
        return Outcome::new(reply, action, detail).by(rule);
    }
    let flags = ctx.arg(3) as i32;
    let blocking = flags & libc::MSG_DONTWAIT == 0 && is_blocking(&sock);
    let run = move |t: &dyn Task| {
        let mut sent = 0i64;
        let mut first_err = None;
        for (msg, at) in &batch {
            match msg.send(&sock, &creds, flags) {
                Reply::Value(n) => {
                    // msg_len: what the kernel writes back for each sent one.
                    let _ = t.write_mem(at + std::mem::size_of::<MsgHdr>() as u64, &(n as u32).to_ne_bytes());
                    sent += 1;
                }
                Reply::Errno(e) => {
                    first_err = Some(e);
                    break;
                }
                _ => break,
            }
        }
        match first_err {
            Some(e) if sent == 0 => Reply::Errno(e),
            _ => Reply::Value(sent),
        }
    };
    if blocking {
        let (d2, rule2) = (detail.clone(), rule.clone());
        return Outcome::new(
            Reply::Blocking(Box::new(move |c: &Ctx<'_>| Outcome::new(run(c), action, d2).by(rule2))),
            action,
            detail,
        )
        .by(rule);
    }
    Outcome::new(run(ctx), action, detail).by(rule)
}

/// The caller's credentials and our copy of its socket (argument 0),
/// looked up as the kernel looks the socket up before anything else: a
/// file that is no socket is ENOTSOCK, even for an empty batch.
fn caller_socket(ctx: &dyn Task) -> Result<(Creds, OwnedFd), i32> {
    let creds = ctx.creds().map_err(|_| libc::ESRCH)?;
    let sock = socket_copy(ctx, ctx.arg(0) as i32)?;
    let st = nix::sys::stat::fstat(sock.as_raw_fd()).map_err(|e| e as i32)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(libc::ENOTSOCK);
    }
    Ok((creds, sock))
}

/// Checks the `struct ucred` (pid, uid, gid: 12 bytes) of an
/// SCM_CREDENTIALS message as the kernel checks a sender's (unix(7)): the
/// pid is the caller's own (as its pid namespace numbers it) unless it has
/// CAP_SYS_ADMIN, the uid one of its real, effective or saved uids unless
/// it has CAP_SETUID, the gid likewise with CAP_SETGID. The message is then
/// sent by the supervisor, so the pid is rewritten to the supervisor's own
/// (the kernel requires the sender's): the receiver sees pid 0, as with
/// `SO_PEERCRED` under emulation. Errors: `EINVAL` for a short message,
/// `EPERM` for credentials that are not the caller's.
fn own_credentials(t: &dyn Task, creds: &Creds, ucred: &mut [u8]) -> Result<(), i32> {
    if ucred.len() < 12 {
        return Err(libc::EINVAL);
    }
    let at = |i: usize| u32::from_ne_bytes([ucred[i], ucred[i + 1], ucred[i + 2], ucred[i + 3]]);
    let (pid, uid, gid) = (at(0) as i32, at(4), at(8));
    let own_pid = t
        .ns_ids()
        .and_then(|(p, _)| p.parse::<i32>().ok())
        .is_some_and(|p| p == pid);
    const CAP_SETGID: u32 = 6;
    const CAP_SETUID: u32 = 7;
    const CAP_SYS_ADMIN: u32 = 21;
    let ok = (own_pid || creds.has_cap(CAP_SYS_ADMIN))
        && (creds.uids.contains(&uid) || creds.has_cap(CAP_SETUID))
        && (creds.gids.contains(&gid) || creds.has_cap(CAP_SETGID));
    if !ok {
        return Err(libc::EPERM);
    }
    ucred[..4].copy_from_slice(&(std::process::id() as i32).to_ne_bytes());
    Ok(())
}

/// The one kernel check the supervisor cannot make as the caller: the
/// audit subsystem refuses every message but the user-space ones
/// (`AUDIT_USER*`) from a task outside the initial pid namespace
/// (kernel/audit.c, `audit_netlink_ok`), and the supervisor is in it. For
/// a NETLINK_AUDIT socket of a caller in another pid namespace, `Err(EPERM)`
/// when `data` holds any other message type.
fn audit_netlink_allowed(ctx: &dyn Task, sock: &OwnedFd, data: &[u8]) -> Result<(), i32> {
    const NETLINK_AUDIT: i32 = 9;
    if sockopt_int(sock, libc::SO_DOMAIN) != Some(libc::AF_NETLINK)
        || sockopt_int(sock, libc::SO_PROTOCOL) != Some(NETLINK_AUDIT)
    {
        return Ok(());
    }
    if same_pid_ns(ctx.pid()) {
        return Ok(());
    }
    let user_msg = |t: u16| t == 1005 || (1100..=1199).contains(&t) || (2100..=2999).contains(&t);
    let mut off = 0usize;
    while data.len().saturating_sub(off) >= 16 {
        let len = u32::from_ne_bytes([data[off], data[off + 1], data[off + 2], data[off + 3]]) as usize;
        let kind = u16::from_ne_bytes([data[off + 4], data[off + 5]]);
        if !user_msg(kind) {
            return Err(libc::EPERM);
        }
        if len < 16 {
            break;
        }
        off = off.saturating_add((len + 3) & !3);
    }
    Ok(())
}

/// An int-valued SOL_SOCKET option of a socket (SO_DOMAIN, SO_PROTOCOL).
fn sockopt_int(sock: &OwnedFd, opt: i32) -> Option<i32> {
    sys::net::sockopt_int(sock.as_fd(), opt).ok()
}

/// Whether thread `tid` is in the supervisor's pid namespace.
fn same_pid_ns(tid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let id = |p: String| std::fs::metadata(p).map(|m| (m.dev(), m.ino()));
    matches!((id(format!("/proc/{tid}/ns/pid")), id("/proc/self/ns/pid".into())), (Ok(a), Ok(b)) if a == b)
}

/// A message's refusal when it would reach a destination whose name is
/// checked on the wire past the relay: UDP to its TLS port (QUIC, EPERM),
/// or a TCP Fast Open send (EOPNOTSUPP). `None` otherwise.
fn past_the_relay(ctx: &dyn Task, addr: Option<&Addr>, sock: &OwnedFd, flags: i32) -> Option<(i32, String)> {
    if let Some(why) = quic_refusal_of(ctx, addr, sock) {
        return Some((libc::EPERM, why));
    }
    addr.filter(|a| fastopen_past_relay(ctx, a, sock, flags)).map(|_| {
        (
            libc::EOPNOTSUPP,
            "MSG_FASTOPEN to a destination whose name is checked on the wire".to_string(),
        )
    })
}
