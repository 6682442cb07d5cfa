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

use super::path::Denied;
use super::{Ctx, Outcome, Reply, Task};
use crate::policy::NetAction;
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
                address: ip.to_string(),
                port,
                rule: policy.explain_net_rule(rule),
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
const ASK_FIRST: i32 = -1;

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
    let job = Box::new(move |ctx: &Ctx<'_>| {
        let out = crate::supervisor::ask::waiting(|| handler(ctx));
        // Already on a thread of its own: a call that blocks is made here.
        match out.reply {
            Reply::Blocking(then) => then(ctx),
            _ => out,
        }
    });
    Some(Outcome::new(Reply::Blocking(job), "ask", detail.to_string()))
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
    if ctx.sup().policy().paths.access(&cpath) == crate::policy::PathAccess::Deny {
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
        return Err(out(libc::EINTR, "emulate"));
    }
    // A question not asked (a handler that missed `ask_first`) refuses.
    verdict.map_err(|(e, rule)| out(if e == ASK_FIRST { libc::EPERM } else { e }, "deny").by(Some(rule)))?;
    let creds = ctx.creds().map_err(|_| out(libc::ESRCH, "allow"))?;
    let sock = socket_copy(ctx, ctx.arg(0) as i32).map_err(|e| out(e, "allow"))?;
    let (addr, dir) = match unix_in_root(ctx, addr, &creds) {
        Ok(Some((b, d))) => (b, Some(d)),
        Ok(None) => (addr.bytes.clone(), None),
        Err(Denied::Policy(p)) => return Err(Outcome::path_denied(ctx, p)),
        Err(Denied::Errno(e)) => return Err(out(e, "allow")),
    };
    Ok(Prepared { sock, addr, dir, creds })
}

/// connect(fd, addr, len)
pub fn connect(ctx: &dyn Task) -> Outcome {
    let addr = match Addr::read(ctx, ctx.arg(1), ctx.arg(2)) {
        Ok(a) => a,
        Err(e) => return Outcome::new(Reply::Errno(e), "emulate", "connect: bad address".into()),
    };
    let (detail, verdict) = check(ctx, &addr, false);
    if let Some(out) = ask_first(&verdict, &detail, connect) {
        return out;
    }
    let by = verdict.clone().ok().flatten();
    let Prepared {
        sock,
        addr: bytes,
        dir,
        creds,
    } = match prepare(ctx, &addr, verdict, &detail) {
        Ok(p) => p,
        Err(out) => return out,
    };
    let blocking = is_blocking(&sock);
    // The peer sees the caller's uid and gid (SO_PEERCRED); the socket file
    // is reached with its credentials (connect needs write permission).
    let run = move || {
        let r = as_caller_identity(&creds, || do_connect(&sock, &bytes));
        drop(dir);
        r
    };
    if blocking {
        let (d2, by2) = (detail.clone(), by.clone());
        let job = Box::new(move |_: &Ctx<'_>| Outcome::new(run(), "allow", d2).by(by2));
        return Outcome::new(Reply::Blocking(job), "allow", detail).by(by);
    }
    Outcome::new(run(), "allow", detail).by(by)
}

/// bind(fd, addr, len). Every bind comes here (BPF cannot see the
/// family): a unix socket's path is a new file, which the path rules
/// govern like any other. Other addresses are bound as the caller (its
/// capabilities decide on privileged ports and netlink groups).
///
/// A unix path is bound with the caller's exact bytes, so `getsockname`
/// and the peer's `getpeername` show what the caller passed. Everything
/// runs on a thread that has taken the caller's root and cwd (held copies,
/// read once: unshare(CLONE_FS), chroot, fchdir) and its identity, so the
/// kernel resolves the path for the check, the bind and the check after it
/// exactly as for the caller, from the same places:
/// 1. the parent directory is opened (O_PATH) and its container path
///    (readlink of our fd, which the kernel gives relative to the thread's
///    root) with the entry's name must be writable under the rules;
/// 2. the bind;
/// 3. the parent is opened again and must be the same directory holding a
///    socket under that name; if a tree changed between 1 and 3 and it is
///    not, the entry is removed as the caller (only a socket) and the
///    caller gets EACCES. What remains (docs/SECURITY.md): a race that
///    moves directories back and forth around the bind can leave a socket
///    file, never data, in a read-only tree; no kernel-level rule is
///    affected.
pub fn bind(ctx: &dyn Task) -> Outcome {
    let addr = match Addr::read(ctx, ctx.arg(1), ctx.arg(2)) {
        Ok(a) => a,
        Err(e) => return Outcome::new(Reply::Errno(e), "emulate", "bind: bad address".into()),
    };
    let detail = addr.describe();
    let out = |e, action| Outcome::new(Reply::Errno(e), action, detail.clone());
    if !ctx.still_valid() {
        return out(libc::EINTR, "emulate");
    }
    let Ok(caller) = ctx.caller() else {
        return out(libc::ESRCH, "allow");
    };
    let sock = match socket_copy(ctx, ctx.arg(0) as i32) {
        Ok(s) => s,
        Err(e) => return out(e, "allow"),
    };
    let creds = &caller.creds;
    let Some(path) = addr.unix_path() else {
        return Outcome::new(
            as_caller_identity(creds, || do_bind(&sock, addr.bytes())),
            "allow",
            detail,
        );
    };
    let cwd = match super::path::dir_copy(ctx, libc::AT_FDCWD) {
        Ok(c) => c,
        Err(_) => return out(libc::ESRCH, "allow"),
    };
    // Our own fd table, opened before the chroot: its readlinks name our
    // fds from the thread's root, the caller's.
    let fds = match std::fs::File::open("/proc/thread-self/fd") {
        Ok(f) => f,
        Err(_) => return out(libc::EIO, "allow"),
    };
    let paths = &ctx.sup().policy().paths;
    let (parent, name) = super::path::split_parent(path);
    let (Ok(parent), Ok(name)) = (CString::new(parent), CString::new(name)) else {
        return out(libc::EINVAL, "allow");
    };
    let r = in_fs_of(&caller.root, &cwd, creds.umask, || {
        creds::with_identity(creds, || -> Result<Reply, Denied> {
            let dir_flags = (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
            let place = |dir: &OwnedFd| -> Result<String, Denied> {
                let link = nix::fcntl::readlinkat(Some(fds.as_raw_fd()), format!("{}", dir.as_raw_fd()).as_str())
                    .map_err(|e| Denied::Errno(e as i32))?;
                let link = link.to_string_lossy();
                let sep = if link.ends_with('/') { "" } else { "/" };
                Ok(format!("{link}{sep}{}", name.to_string_lossy()))
            };
            let before = sys::openat2(super::path::cwd_fd(), &parent, dir_flags, 0, 0)?;
            let want = place(&before)?;
            if !paths.allows_open(&want, libc::O_WRONLY as u64) {
                return Err(Denied::Policy(want));
            }
            let reply = do_bind(&sock, addr.bytes());
            if !matches!(reply, Reply::Value(_)) {
                return Ok(reply);
            }
            let same = |a: &OwnedFd, b: &OwnedFd| {
                let (x, y) = (
                    nix::sys::stat::fstat(a.as_raw_fd()),
                    nix::sys::stat::fstat(b.as_raw_fd()),
                );
                matches!((x, y), (Ok(x), Ok(y)) if (x.st_dev, x.st_ino) == (y.st_dev, y.st_ino))
            };
            let is_socket = |dir: &OwnedFd| {
                nix::sys::stat::fstatat(
                    Some(dir.as_raw_fd()),
                    name.as_c_str(),
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFSOCK)
            };
            match sys::openat2(super::path::cwd_fd(), &parent, dir_flags, 0, 0) {
                Ok(after) if same(&before, &after) && is_socket(&before) => Ok(reply),
                Ok(after) => {
                    // Moved while bound: take back what landed elsewhere, as
                    // the caller, and only a socket.
                    if is_socket(&after) {
                        let _ = nix::unistd::unlinkat(
                            Some(after.as_raw_fd()),
                            name.as_c_str(),
                            nix::unistd::UnlinkatFlags::NoRemoveDir,
                        );
                    }
                    Err(Denied::Policy(format!("{want} (moved while bound)")))
                }
                Err(_) => Err(Denied::Policy(format!("{want} (moved while bound)"))),
            }
        })
    });
    match r {
        Ok(Ok(Ok(reply))) => Outcome::new(reply, "allow", detail),
        Ok(Ok(Err(Denied::Policy(p)))) => Outcome::path_denied(ctx, p),
        Ok(Ok(Err(Denied::Errno(e)))) => out(e, "allow"),
        _ => out(libc::EPERM, "allow"),
    }
}

fn do_bind(sock: &OwnedFd, addr: &[u8]) -> Reply {
    reply(sys::net::bind(sock.as_fd(), addr).map(|()| 0))
}

/// Runs `f` on a thread of its own whose root directory, cwd and umask
/// are the caller's (`root`, `cwd`: O_PATH fds; `umask`, which the kernel
/// applies to a bound socket's mode): unshare(CLONE_FS) gives the thread a
/// private `fs_struct`, which goes with the thread. Errors: a step of the
/// switch failed (`f` did not run).
fn in_fs_of<T: Send>(
    root: &super::path::Root,
    cwd: &OwnedFd,
    umask: u32,
    f: impl FnOnce() -> T + Send,
) -> std::io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| -> std::io::Result<T> {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS)?;
            nix::unistd::fchdir(root.as_fd().as_raw_fd())?;
            nix::unistd::chroot(".")?;
            nix::unistd::fchdir(cwd.as_raw_fd())?;
            nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(umask as libc::mode_t));
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("bind thread panicked")))
    })
}

/// sendto(fd, buf, len, flags, addr, addrlen) with a non-null addr.
pub fn sendto(ctx: &dyn Task) -> Outcome {
    let addr = match Addr::read(ctx, ctx.arg(4), ctx.arg(5)) {
        Ok(a) => a,
        Err(e) => return Outcome::new(Reply::Errno(e), "emulate", "sendto: bad address".into()),
    };
    let len = (ctx.arg(2) as usize).min(MAX_PAYLOAD);
    let mut data = vec![0u8; len];
    if len > 0 && ctx.read_mem(ctx.arg(1), &mut data).map(|n| n != len).unwrap_or(true) {
        return Outcome::new(Reply::Errno(libc::EFAULT), "emulate", addr.describe());
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
        return Outcome::new(Reply::Errno(e), "deny", detail);
    }
    let flags = ctx.arg(3) as i32;
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
            Reply::Blocking(Box::new(move |_: &Ctx<'_>| Outcome::new(run(), "allow", d2).by(by2))),
            "allow",
            detail,
        )
        .by(by);
    }
    Outcome::new(run(), "allow", detail).by(by)
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
        Err(e) => Outcome::new(Reply::Errno(e), "emulate", "sendmsg: bad arguments".into()),
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
    let errno = |e| Outcome::new(Reply::Errno(e), "emulate", detail.to_string());
    let Copied {
        addr,
        data,
        mut control,
    } = msg;
    if let Err(e) = audit_netlink_allowed(ctx, sock, &data) {
        return Err(Outcome::new(Reply::Errno(e), "deny", detail.to_string()));
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
            return Err(
                Outcome::new(Reply::Errno(libc::EPERM), "deny", format!("{detail} cmsg {name}")).by(Some(format!(
                    "net: the control message {name} routes the packet past the address the rules decide"
                ))),
            );
        }
        if c.level == libc::SOL_SOCKET && c.kind == libc::SCM_CREDENTIALS {
            if let Err(e) = own_credentials(ctx, creds, &mut control[c.data.clone()]) {
                return Err(Outcome::new(
                    Reply::Errno(e),
                    "deny",
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
        return Ok(Outcome::new(Reply::Errno(libc::EINTR), "emulate", detail));
    }
    if let Err((e, rule)) = verdict {
        return Ok(Outcome::new(Reply::Errno(e), "deny", detail).by(Some(rule)));
    }
    let creds = ctx.creds().map_err(|_| libc::ESRCH)?;
    let sock = socket_copy(ctx, ctx.arg(0) as i32)?;
    let ready = match make_ready(ctx, msg, &sock, &creds, &detail) {
        Ok(r) => r,
        Err(out) => return Ok(out),
    };
    let flags = ctx.arg(2) as i32;
    let blocking = flags & libc::MSG_DONTWAIT == 0 && is_blocking(&sock);
    let run = move || ready.send(&sock, &creds, flags);
    if blocking {
        let (d2, by2) = (detail.clone(), by.clone());
        return Ok(Outcome::new(
            Reply::Blocking(Box::new(move |_: &Ctx<'_>| Outcome::new(run(), "allow", d2).by(by2))),
            "allow",
            detail,
        )
        .by(by));
    }
    Ok(Outcome::new(run(), "allow", detail).by(by))
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
        Err(e) => return Outcome::new(Reply::Errno(e), "allow", "sendmmsg".into()),
    };
    for i in 0..vlen {
        let at = base.wrapping_add(i * MMSGHDR);
        let msg = match copy_message(ctx, at) {
            Ok(m) => m,
            Err(e) => {
                stop = Some(Outcome::new(
                    Reply::Errno(e),
                    "emulate",
                    format!("message {i}: bad arguments"),
                ));
                break;
            }
        };
        let (detail, verdict) = decide_message(ctx, &msg);
        if let Some(out) = ask_first(&verdict, &detail, sendmmsg) {
            return out;
        }
        match verdict {
            Err((e, rule)) => {
                stop = Some(Outcome::new(Reply::Errno(e), "deny", detail).by(Some(rule)));
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
        return Outcome::new(Reply::Errno(libc::EINTR), "emulate", details.join(", "));
    }
    let mut detail = format!("{} of {vlen} messages: {}", batch.len(), details.join(", "));
    let (action, rule) = match &stop {
        Some(o) => {
            detail = format!("{detail}; stopped at {}", o.detail);
            (o.action, o.rule.clone())
        }
        None => ("allow", by),
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

#[cfg(test)]
mod tests {
    use super::super::task::fake::Fake;
    use super::*;

    fn v4(ip: [u8; 4], port: u16) -> Addr {
        Addr::from_bytes(&sin(libc::AF_INET as u16, port, ip)).unwrap()
    }

    const RULES: &str = "name = 't'
[[net]]
cidr = '10.0.0.0/8'
action = 'deny'
[[net]]
host = '*.example.com'
ports = [443]
action = 'allow'
[[net]]
cidr = '0.0.0.0/0'
ports = [443]
action = 'deny'
";

    #[test]
    fn a_denied_network_gets_eperm_naming_its_rule() {
        let t = Fake::new(RULES, 0);
        let (detail, verdict) = check(&t, &v4([10, 1, 2, 3], 80), false);
        assert_eq!(detail, "10.1.2.3:80");
        let (errno, rule) = verdict.unwrap_err();
        assert_eq!(errno, libc::EPERM);
        assert!(rule.contains("10.0.0.0/8"), "{rule}");
    }

    /// Other families follow their `family` rule, else `net_default`,
    /// recorded either way; netlink without a rule is allowed; unix and
    /// AF_UNSPEC are no network destination.
    #[test]
    fn other_families_follow_family_rules_and_net_default() {
        let addr = |family: i32| Addr::from_bytes(&[&(family as u16).to_ne_bytes()[..], &[0u8; 14]].concat()).unwrap();
        let deny = Fake::new("name = 'd'\nnet_default = 'deny'\n", 0);
        let (detail, verdict) = check(&deny, &addr(libc::AF_VSOCK), false);
        assert_eq!(detail, "family 40 (vsock)");
        assert_eq!(
            verdict,
            Err((libc::EPERM, "net_default (no rule names vsock addresses)".into()))
        );
        assert!(check(&deny, &addr(libc::AF_NETLINK), true)
            .1
            .unwrap()
            .unwrap()
            .starts_with("netlink"));
        assert_eq!(check(&deny, &addr(libc::AF_UNSPEC), false).1, Ok(None));
        let allow = Fake::new("name = 'a'\n[[net]]\nfamily = 'bluetooth'\naction = 'deny'\n", 0);
        let (_, verdict) = check(&allow, &addr(libc::AF_BLUETOOTH), true);
        assert_eq!(verdict.unwrap_err().1, "net[0] bluetooth");
        let (_, verdict) = check(&allow, &addr(libc::AF_VSOCK), false);
        assert_eq!(verdict, Ok(Some("net_default (no rule names vsock addresses)".into())));
    }

    #[test]
    fn routing_control_messages_are_named() {
        let c = |level, kind| Cmsg {
            level,
            kind,
            data: 0..0,
        };
        assert_eq!(
            routing_cmsg(&c(libc::IPPROTO_IPV6, libc::IPV6_RTHDR)),
            Some("IPV6_RTHDR")
        );
        assert_eq!(routing_cmsg(&c(libc::IPPROTO_IP, libc::IP_RETOPTS)), Some("IP_RETOPTS"));
        assert_eq!(routing_cmsg(&c(libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT)), None);
        assert_eq!(routing_cmsg(&c(libc::SOL_SOCKET, libc::SCM_RIGHTS)), None);
    }

    #[test]
    fn an_address_no_rule_names_is_allowed() {
        let t = Fake::new(RULES, 0);
        let (detail, verdict) = check(&t, &v4([192, 0, 2, 1], 80), false);
        assert_eq!(detail, "192.0.2.1:80");
        assert_eq!(verdict, Ok(None));
    }

    #[test]
    fn an_address_the_resolver_answered_for_an_allowed_name_is_allowed_by_its_rule() {
        let t = Fake::new(RULES, 0);
        let ip = IpAddr::from([93, 184, 216, 34]);
        let (_, verdict) = check(&t, &v4([93, 184, 216, 34], 443), false);
        assert!(verdict.is_err(), "no name yet: the catch-all denies");
        t.sup
            .names
            .bind(ip, "a.example.com", std::time::Duration::from_secs(60));
        let (detail, verdict) = check(&t, &v4([93, 184, 216, 34], 443), false);
        assert_eq!(detail, "a.example.com (93.184.216.34):443");
        assert!(verdict.unwrap().unwrap().contains("*.example.com"));
        // The name's rule covers port 443 only.
        let (_, verdict) = check(&t, &v4([93, 184, 216, 34], 80), false);
        assert_eq!(verdict, Ok(None));
    }

    #[test]
    fn under_host_rules_dns_ports_reach_only_the_resolver() {
        let t = Fake::new(RULES, 0);
        for port in [53, 853] {
            let (_, verdict) = check(&t, &v4([8, 8, 8, 8], port), false);
            let (errno, why) = verdict.unwrap_err();
            assert_eq!(errno, libc::EPERM);
            assert!(why.starts_with("dns:"), "{why}");
        }
        // Without host rules, port 53 is an address like any other.
        let t = Fake::new("name = 't'\n", 0);
        assert_eq!(check(&t, &v4([8, 8, 8, 8], 53), false).1, Ok(None));
    }

    /// A caller rooted in a temp tree with `/secret/app.sock` (denied by
    /// the path rules), `/data/app.sock` and symlinks into `/secret`, whose
    /// fd 3 is a non-blocking unbound unix datagram socket; `path` as a
    /// `sockaddr_un` at [`Fake::BASE`] (its length returned).
    fn unix_caller(path: &str) -> (crate::supervisor::syscalls::task::fake::TempTree, Fake, u64) {
        let root = crate::supervisor::syscalls::task::fake::TempTree::new("net");
        for d in ["secret", "data"] {
            std::fs::create_dir(root.join(d)).unwrap();
        }
        std::fs::write(root.join("secret/app.sock"), "").unwrap();
        std::fs::write(root.join("data/app.sock"), "").unwrap();
        std::os::unix::fs::symlink("/secret/app.sock", root.join("data/abs.sock")).unwrap();
        std::os::unix::fs::symlink("../secret", root.join("data/dir")).unwrap();
        let policy = "name = 't'\n[[path]]\npattern = \"/secret/**\"\naccess = \"deny\"\n";
        let mut t = Fake::new(policy, 256);
        t.root = Some(root.0.clone());
        let sock = std::os::unix::net::UnixDatagram::unbound().unwrap();
        sock.set_nonblocking(true).unwrap();
        t.fds.insert(3, sock.into());
        let mut addr = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        addr.extend_from_slice(path.as_bytes());
        addr.push(0);
        t.mem.borrow_mut()[..addr.len()].copy_from_slice(&addr);
        (root, t, addr.len() as u64)
    }

    #[test]
    fn unix_connects_and_sends_decide_on_the_socket_file_reached() {
        for path in [
            "/secret/app.sock",
            "/data/abs.sock",
            "/data/dir/app.sock",
            "/data/../../secret/app.sock",
            "/proc/self/root/secret/app.sock",
        ] {
            let (_root, mut t, len) = unix_caller(path);
            t.args = [3, Fake::BASE, len, 0, 0, 0];
            let out = connect(&t);
            assert!(matches!(out.reply, Reply::Errno(libc::EACCES)), "connect {path}");
            assert_eq!((out.action, out.detail.as_str()), ("deny", "/secret/app.sock"));
            // sendto(fd, buf, 0, flags, addr, len)
            t.args = [3, Fake::BASE, 0, 0, Fake::BASE, len];
            let out = sendto(&t);
            assert!(matches!(out.reply, Reply::Errno(libc::EACCES)), "sendto {path}");
            assert_eq!(out.action, "deny");
        }
        // (An allowed connect goes on with the caller's identity, which
        // needs root: the integration suites check it.) A socket fd the
        // caller does not have.
        let (_root, mut t, len) = unix_caller("/data/app.sock");
        t.args = [4, Fake::BASE, len, 0, 0, 0];
        assert!(matches!(connect(&t).reply, Reply::Errno(libc::EBADF)));
    }

    #[test]
    fn unix_addresses_are_left_to_the_path_rules() {
        let t = Fake::new(RULES, 0);
        let mut b = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        b.extend_from_slice(b"/run/x.sock\0");
        let (detail, verdict) = check(&t, &Addr::from_bytes(&b).unwrap(), false);
        assert_eq!(detail, "unix:/run/x.sock");
        assert_eq!(verdict, Ok(None));
    }

    fn sin(family: u16, port: u16, ip: [u8; 4]) -> Vec<u8> {
        let mut b = family.to_ne_bytes().to_vec();
        b.extend_from_slice(&port.to_be_bytes());
        b.extend_from_slice(&ip);
        b.extend_from_slice(&[0; 8]);
        b
    }

    #[test]
    fn addresses() {
        let a = Addr::from_bytes(&sin(libc::AF_INET as u16, 80, [169, 254, 169, 254])).unwrap();
        assert_eq!(a.ip(), Some(("169.254.169.254".parse().unwrap(), 80)));
        assert_eq!(a.describe(), "169.254.169.254:80");
        assert_eq!(Addr::from_bytes(&[0; 129]), Err(libc::EINVAL));
        assert_eq!(Addr::from_bytes(&[]).unwrap().family(), libc::AF_UNSPEC);
        let short = Addr::from_bytes(&sin(libc::AF_INET as u16, 80, [10, 0, 0, 1])[..6]).unwrap();
        assert_eq!(short.ip(), None);

        let mut un = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        un.extend_from_slice(b"/run/x.sock\0junk");
        assert_eq!(Addr::from_bytes(&un).unwrap().unix_path(), Some(&b"/run/x.sock"[..]));
        assert_eq!(
            Addr::from_bytes(&un).unwrap().describe(),
            "unix:/run/x.sock",
            "cut at the NUL"
        );
        let mut abstract_ = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        abstract_.extend_from_slice(b"\0name");
        let abstract_ = Addr::from_bytes(&abstract_).unwrap();
        assert_eq!(abstract_.unix_path(), None);
        assert_eq!(abstract_.describe(), "unix:@name");
    }

    /// Found while extracting the decoders for fuzzing: udp(7) and raw(7)
    /// IPv4 sockets send to an AF_UNSPEC destination as to AF_INET, so the
    /// network rules must read such an address as IPv4 for sendto/sendmsg.
    #[test]
    fn unspec_destination_of_a_datagram_is_ipv4() {
        let a = Addr::from_bytes(&sin(libc::AF_UNSPEC as u16, 53, [169, 254, 169, 254])).unwrap();
        assert_eq!(a.ip(), None, "connect(AF_UNSPEC) only disconnects");
        assert_eq!(a.send_ip(), Some(("169.254.169.254".parse().unwrap(), 53)));
        let p = crate::policy::Policy::load("default").unwrap();
        let (ip, port) = a.send_ip().unwrap();
        assert_eq!(p.net.decide(ip, port), NetAction::Deny);
        // Shorter than sockaddr_in: the kernel refuses it (EINVAL).
        let short = Addr::from_bytes(&sin(libc::AF_UNSPEC as u16, 53, [169, 254, 169, 254])[..8]).unwrap();
        assert_eq!(short.send_ip(), None);
    }

    fn msghdr(iov: u64, iovlen: u64) -> MsgHdr {
        let mut b = [0u8; 56];
        b[16..24].copy_from_slice(&iov.to_ne_bytes());
        b[24..32].copy_from_slice(&iovlen.to_ne_bytes());
        MsgHdr::from_bytes(&b).unwrap()
    }

    /// Reads of a caller memory image mapped at address 0.
    fn mem(image: &[u8]) -> impl FnMut(u64, &mut [u8]) -> Result<usize, i32> + '_ {
        move |addr, buf| {
            let at = usize::try_from(addr)
                .ok()
                .filter(|&a| a < image.len())
                .ok_or(libc::EFAULT)?;
            let n = buf.len().min(image.len() - at);
            buf[..n].copy_from_slice(&image[at..at + n]);
            Ok(n)
        }
    }

    #[test]
    fn gathers_iovecs() {
        let mut image = b"hello, world".to_vec();
        image.resize(16, 0);
        for (base, len) in [(0u64, 5u64), (7, 5)] {
            image.extend_from_slice(&base.to_ne_bytes());
            image.extend_from_slice(&len.to_ne_bytes());
        }
        assert_eq!(gather(&msghdr(16, 2), mem(&image)), Ok(b"helloworld".to_vec()));
        assert_eq!(gather(&msghdr(16, 1025), mem(&image)), Err(libc::EMSGSIZE));
        assert_eq!(gather(&msghdr(16, 3), mem(&image)), Err(libc::EFAULT));
        assert_eq!(MsgHdr::from_bytes(&[0; 55]), Err(libc::EFAULT));
    }

    /// Found while extracting the decoders for fuzzing (seed
    /// fuzz/corpus/decode/msg-iov-wraps): an iovec array at the top of the
    /// address space overflowed `iov + 16 * i` (a panic in debug builds).
    #[test]
    fn iovec_array_at_the_end_of_the_address_space() {
        assert_eq!(gather(&msghdr(u64::MAX - 15, 3), mem(&[])), Err(libc::EFAULT));
    }

    fn cmsg(len: u64, level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        let mut b = len.to_ne_bytes().to_vec();
        b.extend_from_slice(&level.to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(data);
        b.resize(b.len().next_multiple_of(8), 0);
        b
    }

    #[test]
    fn control_messages() {
        let mut c = cmsg(
            28,
            libc::SOL_SOCKET,
            libc::SCM_RIGHTS,
            &[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0],
        );
        c.extend(cmsg(20, libc::SOL_SOCKET, libc::SCM_CREDENTIALS, &[0; 4]));
        c.extend_from_slice(&[0; 15]); // less than a header: ignored
        let all: Vec<_> = cmsgs(&c).collect();
        assert_eq!(all.len(), 2);
        let first = all[0].clone().unwrap();
        assert_eq!(
            (first.level, first.kind, first.data.clone()),
            (libc::SOL_SOCKET, libc::SCM_RIGHTS, 16..28)
        );
        assert_eq!(first.int_offsets().collect::<Vec<_>>(), [16, 20, 24]);
        assert_eq!(all[1].clone().unwrap().data, 48..52);
        // A length below the header's, or past the buffer: EINVAL, then stop.
        assert_eq!(cmsgs(&cmsg(8, 1, 1, &[])).collect::<Vec<_>>(), [Err(libc::EINVAL)]);
        assert_eq!(cmsgs(&cmsg(40, 1, 1, &[0; 4])).collect::<Vec<_>>(), [Err(libc::EINVAL)]);
    }

    /// Found while extracting the decoders for fuzzing (seed
    /// fuzz/corpus/decode/cmsg-len-huge): a `cmsg_len` near u64::MAX
    /// overflowed `off + len` (a panic in debug builds).
    #[test]
    fn control_message_length_near_the_top() {
        let c = cmsg(u64::MAX, libc::SOL_SOCKET, libc::SCM_RIGHTS, &[3, 0, 0, 0]);
        assert_eq!(cmsgs(&c).collect::<Vec<_>>(), [Err(libc::EINVAL)]);
        let mut c = cmsg(20, libc::SOL_SOCKET, libc::SCM_RIGHTS, &[3, 0, 0, 0]);
        c.extend(cmsg(u64::MAX - 6, 1, 1, &[]));
        assert_eq!(cmsgs(&c).count(), 2);
    }
}
