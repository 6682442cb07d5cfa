//! connect(2), sendto(2), sendmsg(2), sendmmsg(2) under the network
//! egress policy.
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

mod connect;
mod send;
mod sockname;
#[cfg(test)]
mod tests;

pub use connect::{bind, connect};
pub use send::{cmsgs, gather, sendmmsg, sendmsg, sendto, Cmsg, IoVec, MsgHdr};
pub use sockname::sockname;

use super::path::Denied;
use super::{Ctx, Outcome, Reply, Task};
use crate::policy::NetAction;
use crate::supervisor::audit::Decision;
use crate::supervisor::creds::{self, Creds};
use crate::sys;

/// Largest payload copied for one sendto/sendmsg; a longer stream write is
/// sent short (allowed by send(2)); a longer datagram gets EMSGSIZE anyway.
const MAX_PAYLOAD: usize = 1 << 20;
const MAX_ADDR: usize = 128;
const MAX_CONTROL: usize = 4096;

/// A socket address copied from the caller (`struct sockaddr_*`, the
/// caller's `addrlen` bytes of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addr {
    bytes: Vec<u8>,
}

impl Addr {
    fn read(t: &dyn Task, ptr: u64, len: u64) -> Result<Self, i32> {
        let len = usize::try_from(len).map_err(|_| libc::EINVAL)?;
        if len > MAX_ADDR {
            return Err(libc::EINVAL);
        }
        let mut bytes = vec![0u8; len];
        if len > 0 && t.read_mem(ptr, &mut bytes).map_err(|_| libc::EFAULT)? != len {
            return Err(libc::EFAULT);
        }
        Self::from_bytes(&bytes)
    }

    /// Decodes a socket address from the `addrlen` bytes the caller passed
    /// (any length from 0; the family is the first two bytes, native
    /// endian). Errors: `EINVAL` above 128 bytes (`sockaddr_storage`).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, i32> {
        if bytes.len() > MAX_ADDR {
            return Err(libc::EINVAL);
        }
        Ok(Self { bytes: bytes.to_vec() })
    }

    /// The bytes as copied.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// `sa_family`, or `AF_UNSPEC` for an address shorter than two bytes.
    pub fn family(&self) -> i32 {
        if self.bytes.len() < 2 {
            return libc::AF_UNSPEC;
        }
        i32::from(u16::from_ne_bytes([self.bytes[0], self.bytes[1]]))
    }

    /// The IP destination (address, port in host order), for AF_INET (at
    /// least 8 bytes) and AF_INET6 (at least 24 bytes); `None` otherwise.
    pub fn ip(&self) -> Option<(IpAddr, u16)> {
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

    /// [`Addr::ip`] as a socket address, with an IPv6 address's flow
    /// label and scope (`sin6_flowinfo`, `sin6_scope_id`) when the caller
    /// passed a whole `sockaddr_in6`.
    pub fn socket_addr(&self) -> Option<std::net::SocketAddr> {
        let (ip, port) = self.ip()?;
        Some(match ip {
            IpAddr::V4(v4) => std::net::SocketAddr::new(IpAddr::V4(v4), port),
            IpAddr::V6(v6) => {
                let b = &self.bytes;
                let word = |at: usize| b.get(at..at + 4).map(|w| [w[0], w[1], w[2], w[3]]);
                let flow = word(4).map(u32::from_be_bytes).unwrap_or(0);
                let scope = word(24).map(u32::from_ne_bytes).unwrap_or(0);
                std::net::SocketAddr::V6(std::net::SocketAddrV6::new(v6, port, flow, scope))
            }
        })
    }

    /// The IP destination a datagram sent to this address goes to:
    /// [`Addr::ip`], and for `AF_UNSPEC` with at least 16 bytes the IPv4
    /// reading, because udp(7) and raw(7) IPv4 sockets take an `AF_UNSPEC`
    /// destination of `sendto`/`sendmsg` as `AF_INET` (connect(2) with
    /// `AF_UNSPEC` only dissolves the association).
    pub fn send_ip(&self) -> Option<(IpAddr, u16)> {
        let b = &self.bytes;
        if self.family() == libc::AF_UNSPEC && b.len() >= std::mem::size_of::<libc::sockaddr_in>() {
            let port = u16::from_be_bytes([b[2], b[3]]);
            return Some((IpAddr::V4(Ipv4Addr::new(b[4], b[5], b[6], b[7])), port));
        }
        self.ip()
    }

    /// The `sun_path` of an AF_UNIX address that names a file (not an
    /// abstract or unnamed one): the bytes after the family up to the
    /// first NUL, never empty; `None` for other addresses.
    pub fn unix_path(&self) -> Option<&[u8]> {
        if self.family() != libc::AF_UNIX || self.bytes.len() <= 2 || self.bytes[2] == 0 {
            return None;
        }
        let path = &self.bytes[2..];
        Some(&path[..path.iter().position(|&b| b == 0).unwrap_or(path.len())])
    }

    /// The address as text for the audit trail.
    pub fn describe(&self) -> String {
        match (self.family(), self.ip()) {
            (_, Some((IpAddr::V6(a), p))) => format!("[{a}]:{p}"),
            (_, Some((a, p))) => format!("{a}:{p}"),
            (libc::AF_UNIX, _) => {
                let path = &self.bytes[2.min(self.bytes.len())..];
                match path.first() {
                    Some(0) => format!("unix:@{}", String::from_utf8_lossy(&path[1..]).trim_end_matches('\0')),
                    // A path ends at its first NUL, as the kernel reads it.
                    _ => format!(
                        "unix:{}",
                        String::from_utf8_lossy(&path[..path.iter().position(|&b| b == 0).unwrap_or(path.len())])
                    ),
                }
            }
            (f, _) => format!("family {f} ({})", crate::policy::family_name(f)),
        }
    }
}

/// Where a connect to `addr` goes through the relay that checks the name
/// on the wire ([`crate::supervisor::relay`]): when a `host` rule allowed
/// it ([`check`] gave `Ok(Some(_))`) and checks names on that port
/// ([`crate::policy::NetPolicy::wire_check`]). Returns the protocol, the
/// rule's `sni` and the destination.
fn wire_plan(
    t: &(impl Task + ?Sized),
    addr: &Addr,
) -> Option<(crate::policy::Wire, crate::policy::Sni, std::net::SocketAddr)> {
    let (ip, port) = addr.ip()?;
    let sup = t.sup();
    let policy = sup.policy();
    if !policy.net.has_names() {
        return None;
    }
    let names = sup.names.of(ip);
    let (action, rule, which) = policy.net.decide_named(ip, port, &names);
    which?;
    if action == NetAction::Deny {
        return None;
    }
    let (wire, sni) = policy.net.wire_check(rule?, port)?;
    Some((wire, sni, addr.socket_addr()?))
}

/// [`quic_refusal`] of a message sent to `addr`, or without one on a
/// connected socket, to the socket's peer.
fn quic_refusal_of(t: &(impl Task + ?Sized), addr: Option<&Addr>, sock: &OwnedFd) -> Option<String> {
    match addr {
        Some(a) => quic_refusal(t, a, sock),
        // Every sendmsg comes here: the peer is looked up only for a
        // datagram socket under host rules.
        None if t.sup().policy().net.has_names() && datagram(sock) => {
            let peer = nix::sys::socket::getpeername::<nix::sys::socket::SockaddrStorage>(sock.as_raw_fd()).ok()?;
            let peer = crate::supervisor::relay::storage_addr(&peer)?;
            let a = Addr::from_bytes(&crate::supervisor::relay::sockaddr(peer)).ok()?;
            quic_refusal(t, &a, sock)
        }
        None => None,
    }
}

fn datagram(sock: &OwnedFd) -> bool {
    sys::net::sockopt_int(sock.as_fd(), libc::SO_TYPE).ok() == Some(libc::SOCK_DGRAM)
}

/// Why a datagram to `addr` on `sock` is refused, when it is one: UDP
/// (QUIC, HTTP/3) to a TLS port of an address a host rule allowed with
/// its name checked on the wire ([`wire_plan`]). Its name travels
/// encrypted, so it cannot be checked; a `cidr` rule for the address, or
/// `sni = "off"` on the rule, allows it. Clients then fall back to TCP.
/// A UDP `connect` to such an address is allowed (it sends nothing:
/// glibc's getaddrinfo connects one to each answer to sort them), and so
/// is what the filter does not send to the supervisor: `send`/`write` on
/// a connected socket (docs/POLICY.md, "Names on the wire").
fn quic_refusal(t: &(impl Task + ?Sized), addr: &Addr, sock: &OwnedFd) -> Option<String> {
    let (wire, _, _) = wire_plan(t, addr)?;
    (wire == crate::policy::Wire::Tls && datagram(sock)).then(|| {
        "sni: UDP to a TLS port (QUIC) carries its name encrypted, so a host rule cannot check it \
         (a cidr rule for the address, or sni = \"off\", allows it)"
            .to_string()
    })
}

/// Whether a send with `flags` on `sock` to `addr` could open a TCP
/// connection past the relay: MSG_FASTOPEN on a stream socket (in any
/// state: another thread may close it first), to a destination whose name
/// is checked on the wire ([`wire_plan`]). Such a send is refused with EOPNOTSUPP, what
/// the kernel answers when TCP Fast Open is off for clients.
fn fastopen_past_relay(t: &(impl Task + ?Sized), addr: &Addr, sock: &OwnedFd, flags: i32) -> bool {
    flags & libc::MSG_FASTOPEN != 0 && wire_plan(t, addr).is_some() && crate::supervisor::relay::stream(sock)
}

/// Ports that carry DNS (53) and DNS over TLS (853): under a policy with
/// `host` rules only the supervisor's resolver may be reached on them.
const DNS_PORTS: [u16; 2] = [53, 853];

/// Policy verdict on a copied address: the detail for the audit trail
/// (the address, after the name the resolver answered it for when it
/// did: `pypi.org (151.101.0.223):443`) and `Err((EPERM, rule))` when
/// denied, with the rule that denied (see
/// [`crate::policy::Policy::explain_net`]); `Ok(Some(rule))` when a `host`
/// rule allowed. `send`: the address of a
/// sendto/sendmsg (see [`Addr::send_ip`]).
fn check(t: &(impl Task + ?Sized), addr: &Addr, send: bool) -> (String, Result<Option<String>, (i32, String)>) {
    let dest = if send { addr.send_ip() } else { addr.ip() };
    let Some((ip, port)) = dest else {
        return (addr.describe(), family_verdict(t, addr));
    };
    let sup = t.sup();
    // One policy for the whole decision (a live update swaps it: a call
    // decided before the swap keeps its answer).
    let policy = sup.policy();
    let net = &policy.net;
    if net.has_names() && DNS_PORTS.contains(&port) {
        let resolver = sup.names.resolver();
        let to_resolver = resolver.is_some_and(|r| {
            let ip = match ip {
                IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
                v4 => v4,
            };
            r.ip() == ip && r.port() == port
        });
        if to_resolver {
            return (format!("resolver {}", addr.describe()), Ok(None));
        }
        return (
            addr.describe(),
            Err((
                libc::EPERM,
                "dns: ports 53 and 853 reach only the supervisor's resolver under host rules".into(),
            )),
        );
    }
    let names = if net.has_names() { sup.names.of(ip) } else { Vec::new() };
    let (action, rule, which) = net.decide_named(ip, port, &names);
    let name = which
        .or(if names.is_empty() { None } else { Some(0) })
        .and_then(|i| names.get(i));
    let detail = match name {
        Some(n) => format!("{n} ({ip}):{port}"),
        None => addr.describe(),
    };
    match action {
        NetAction::Deny if rule.is_none() => (detail, Err((libc::EPERM, why_default(&policy, ip, port, &names)))),
        NetAction::Deny => (detail, Err((libc::EPERM, policy.explain_net_rule(rule)))),
        NetAction::Ask => {
            let q = crate::supervisor::ask::Question {
                container: sup.id.clone(),
                pid: t.pid(),
                command: String::new(),
                syscall: if send { "send" } else { "connect" }.into(),
                host: name.cloned(),
                address: Some(ip.to_string()),
                port: Some(port),
                path: None,
                rule: policy.explain_net_rule(rule),
                rule_key: rule
                    .and_then(|i| policy.source.net.get(i))
                    .and_then(|r| serde_json::to_string(r).ok())
                    .unwrap_or_default(),
            };
            (detail, asked(sup, q))
        }
        NetAction::Allow => (detail, Ok(which.map(|_| policy.explain_net_rule(rule)))),
    }
}

/// Why `net_default` denied `ip`:`port` (looked up as `names`), as the
/// trail says it: which part failed, so an agent can act on it.
fn why_default(policy: &crate::policy::Policy, ip: IpAddr, port: u16, names: &[String]) -> String {
    if let Some((i, ports)) = policy.net.port_miss(ip, names) {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        return format!(
            "net_default (port {port} not allowed: {} allows ports {})",
            policy.explain_net_rule(Some(i)),
            ports.join(",")
        );
    }
    match names.first() {
        Some(name) => format!("net_default (no rule allows the name {name})"),
        None => format!("net_default (no rule allows the address {ip})"),
    }
}

/// A verdict no answer was asked for yet: the handler must run again on a
/// thread of its own, where the question may wait ([`ask_first`]).
use super::ASK_FIRST;

/// The verdict of an `ask` rule on question `q`: the remembered answer,
/// else (on a thread that may wait) the decision program's, else
/// [`ASK_FIRST`]. The rule text names how the answer came.
fn asked(
    sup: &crate::supervisor::Supervisor,
    mut q: crate::supervisor::ask::Question,
) -> Result<Option<String>, (i32, String)> {
    use crate::supervisor::ask::{self, Answer};
    let (answer, how) = match sup.asker.remembered(&q) {
        Some(a) => (a, "remembered".to_string()),
        None if ask::may_wait() => {
            q.command = ask::command_of(q.pid);
            sup.asker.ask(&q)
        }
        None => return Err((ASK_FIRST, q.rule)),
    };
    let by = format!("{} ({how})", q.rule);
    match answer {
        Answer::Allow => Ok(Some(by)),
        Answer::Deny(e) => Err((e, by)),
    }
}

/// When `verdict` waits for a question, the answer to give now: `handler`
/// run again on a blocking handler's thread, where the question waits
/// for its answer and the call is then decided and made.
fn ask_first(
    verdict: &Result<Option<String>, (i32, String)>,
    detail: &str,
    handler: fn(&dyn Task) -> Outcome,
) -> Option<Outcome> {
    if !matches!(verdict, Err((ASK_FIRST, _))) {
        return None;
    }
    Some(super::again_to_ask(detail.to_string(), move |ctx| handler(ctx)))
}

/// The verdict on an address that is no IP destination. unix addresses
/// are files, which the path rules decide ([`unix_in_root`]); `AF_UNSPEC`
/// and IPv4/IPv6 addresses too short to be one name no destination (the
/// kernel dissolves an association or refuses them). Every other family
/// (vsock, packet, bluetooth, ...) is decided by its `family` rule, else
/// by `net_default`, never allowed unrecorded; netlink, without a rule,
/// is allowed: it reaches the kernel of the container's own network
/// namespace (`ip addr`, getifaddrs), not the network.
fn family_verdict(t: &(impl Task + ?Sized), addr: &Addr) -> Result<Option<String>, (i32, String)> {
    let f = addr.family();
    if matches!(f, libc::AF_UNIX | libc::AF_UNSPEC | libc::AF_INET | libc::AF_INET6) {
        return Ok(None);
    }
    let policy = t.sup().policy();
    let net = &policy.net;
    let (action, rule) = match net.decide_family(f) {
        Some((action, i)) => (action, policy.explain_net_rule(Some(i))),
        None if f == libc::AF_NETLINK => (
            NetAction::Allow,
            "netlink reaches the kernel of the container's own network namespace (a family = \"netlink\" rule \
             decides otherwise)"
                .into(),
        ),
        None => (
            net.default_action(),
            format!(
                "net_default (no rule names {} addresses)",
                crate::policy::family_name(f)
            ),
        ),
    };
    match action {
        // Family rules cannot ask (refused when the policy is compiled).
        NetAction::Deny | NetAction::Ask => Err((libc::EPERM, rule)),
        NetAction::Allow => Ok(Some(rule)),
    }
}

/// Control messages of sendmsg(2) that change where an IP packet goes or
/// what routers do with it, by (level, type): IPv4 options (source
/// routes, `IP_OPTIONS` and its alias `IP_RETOPTS`), IPv6 routing headers
/// (type 0, type 2 and type 4 segment routing alike), the next hop, and
/// hop-by-hop and destination options (RFC 3542 and RFC 2292 numbers).
/// The rules decide on the destination address; these would take the
/// packet elsewhere, so under network rules they are refused (EPERM).
const ROUTING_CMSGS: &[(i32, i32, &str)] = &[
    (libc::IPPROTO_IP, libc::IP_OPTIONS, "IP_OPTIONS"),
    (libc::IPPROTO_IP, libc::IP_RETOPTS, "IP_RETOPTS"),
    (libc::IPPROTO_IPV6, libc::IPV6_RTHDR, "IPV6_RTHDR"),
    (libc::IPPROTO_IPV6, libc::IPV6_2292RTHDR, "IPV6_2292RTHDR"),
    (libc::IPPROTO_IPV6, libc::IPV6_NEXTHOP, "IPV6_NEXTHOP"),
    (libc::IPPROTO_IPV6, libc::IPV6_HOPOPTS, "IPV6_HOPOPTS"),
    (libc::IPPROTO_IPV6, libc::IPV6_2292HOPOPTS, "IPV6_2292HOPOPTS"),
    (libc::IPPROTO_IPV6, libc::IPV6_DSTOPTS, "IPV6_DSTOPTS"),
    (libc::IPPROTO_IPV6, libc::IPV6_2292DSTOPTS, "IPV6_2292DSTOPTS"),
    (libc::IPPROTO_IPV6, libc::IPV6_RTHDRDSTOPTS, "IPV6_RTHDRDSTOPTS"),
];

/// The name of a routing control message ([`ROUTING_CMSGS`]), if `c` is one.
fn routing_cmsg(c: &Cmsg) -> Option<&'static str> {
    ROUTING_CMSGS
        .iter()
        .find(|(level, kind, _)| c.level == *level && c.kind == *kind)
        .map(|(_, _, name)| *name)
}

/// Our copy of the caller's fd `fd`: ESRCH when the caller is gone,
/// EBADF when it has no such fd.
fn socket_copy(ctx: &dyn Task, fd: i32) -> Result<OwnedFd, i32> {
    ctx.take_fd(fd).map_err(|e| match e.raw_os_error() {
        Some(libc::ESRCH) => libc::ESRCH,
        _ => libc::EBADF,
    })
}

fn is_blocking(fd: &OwnedFd) -> bool {
    nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL)
        .map(|fl| fl & libc::O_NONBLOCK == 0)
        .unwrap_or(true)
}

/// For a unix path address, the address rewritten to reach the socket
/// file the caller names, resolved whole inside the caller's root and
/// mount namespace with its credentials (every symlink, the last component
/// included: openat2 RESOLVE_IN_ROOT), as an O_PATH fd that the address
/// names as `/proc/self/fd/<fd>`; the fd must stay open during the call.
/// A path the policy denies gives EACCES (`Denied::Policy`).
fn unix_in_root(ctx: &dyn Task, addr: &Addr, creds: &Creds) -> Result<Option<(Vec<u8>, OwnedFd)>, Denied> {
    let Some(path) = addr.unix_path() else {
        return Ok(None);
    };
    let (fd, cpath) = super::path::target(ctx, libc::AT_FDCWD, path, true, creds)?;
    // A socket under an `ask` rule is refused too: only opens and
    // metadata calls ask (docs/POLICY.md, "Ask").
    if matches!(
        ctx.sup().policy().paths.access(&cpath),
        crate::policy::PathAccess::Deny | crate::policy::PathAccess::Ask
    ) {
        return Err(Denied::Policy(cpath));
    }
    let mut bytes = addr.bytes[..2].to_vec();
    bytes.extend_from_slice(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_bytes());
    bytes.push(0);
    Ok(Some((bytes, fd)))
}

/// The answer for a send(2)-family return value `r`, errno read at once.
/// The reply for a call's result: its value, or its errno.
fn reply<T: Into<i64>>(r: std::io::Result<T>) -> Reply {
    match r {
        Ok(v) => Reply::Value(v.into()),
        Err(e) => Reply::Errno(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}

fn sent(r: std::io::Result<usize>) -> Reply {
    reply(r.map(|n| n as i64))
}

fn do_connect(sock: &OwnedFd, addr: &[u8]) -> Reply {
    reply(sys::net::connect(sock.as_fd(), addr).map(|()| 0))
}

/// Runs `f` (the call itself) as the caller: its uids, gids, groups and
/// effective capabilities (see [`creds::with_identity`]). EPERM when the
/// switch cannot be made: never the supervisor's own identity.
fn as_caller_identity(c: &Creds, f: impl FnOnce() -> Reply) -> Reply {
    creds::with_identity(c, f).unwrap_or(Reply::Errno(libc::EPERM))
}

/// What an allowed address-carrying call acts on.
struct Prepared {
    /// Our copy of the caller's socket (arg 0).
    sock: OwnedFd,
    /// The address to pass (unix paths rewritten into the caller's root).
    addr: Vec<u8>,
    /// The socket file a rewritten unix path names; keep it open.
    dir: Option<OwnedFd>,
    /// The caller's credentials, taken on around the call.
    creds: Creds,
}

/// The steps every address-carrying call shares once the address is
/// copied: the caller is still waiting, the destination is allowed, our
/// copy of its socket, the address in our terms. `Err` is the answer.
fn prepare(
    ctx: &dyn Task,
    addr: &Addr,
    verdict: Result<Option<String>, (i32, String)>,
    detail: &str,
) -> Result<Prepared, Outcome> {
    let out = |e, action| Outcome::new(Reply::Errno(e), action, detail.to_string());
    if !ctx.still_valid() {
        return Err(out(libc::EINTR, Decision::Emulate));
    }
    // A question not asked (a handler that missed `ask_first`) refuses.
    verdict.map_err(|(e, rule)| out(if e == ASK_FIRST { libc::EPERM } else { e }, Decision::Deny).by(Some(rule)))?;
    let creds = ctx.creds().map_err(|_| out(libc::ESRCH, Decision::Allow))?;
    let sock = socket_copy(ctx, ctx.arg(0) as i32).map_err(|e| out(e, Decision::Allow))?;
    let (addr, dir) = match unix_in_root(ctx, addr, &creds) {
        Ok(Some((b, d))) => (b, Some(d)),
        Ok(None) => (addr.bytes.clone(), None),
        Err(Denied::Policy(p)) => return Err(Outcome::path_denied(ctx, p)),
        Err(Denied::Errno(e)) => return Err(out(e, Decision::Allow)),
    };
    Ok(Prepared { sock, addr, dir, creds })
}
