//! The supervisor's resolver: egress by host name.
//!
//! seccomp shows where a datagram goes, not what it asks, and cannot put
//! an answer in its place; so under a policy with `host` rules the
//! container's lookups go to a resolver the supervisor runs:
//!
//! - `create` binds a UDP socket to [`RESOLVER_V4`] port 53 in the
//!   container's network namespace, plus, per worker, one UDP socket
//!   connected to each nameserver the container was configured with (its
//!   resolv.conf), also in that namespace, and hands them to the
//!   supervisor before the container runs ([`super::handshake`]). The
//!   resolver never enters the container's namespace itself (only the
//!   relay's short-lived threads do, [`super::relay`]). The container's
//!   /etc/resolv.conf is a read-only bind mount naming [`RESOLVER_V4`].
//!   A TCP listener on the same address serves what a client retries over
//!   TCP (a truncated answer, `options use-vc`), one connection at a time.
//! - [`WORKERS`] threads read queries from that socket (the kernel queues
//!   what they cannot take yet, and drops past the socket's buffer: memory
//!   and threads stay bounded under a flood). A name no rule allows (see
//!   [`crate::policy::NetPolicy::decide_name`]) gets NXDOMAIN at once; an
//!   allowed one is asked of the nameservers with a fresh random ID and
//!   only the question (plus EDNS(0) if the container used it), and their
//!   answer is passed back under the container's ID, from the address the
//!   container asked (glibc and musl drop other replies). No answer within
//!   `[dns] timeout_ms`: SERVFAIL. An answer whose CNAME chain passes
//!   through a name a rule denies: NXDOMAIN.
//! - Every A and AAAA address of the chain is bound to the queried name
//!   for the record's TTL, clamped to `[dns] ttl_min`..`ttl_max`
//!   ([`Names`]). connect/sendto/sendmsg decide on the names bound to the
//!   destination ([`crate::policy::NetPolicy::decide_named`]), so an
//!   address never answered for an allowed name is decided by the `cidr`
//!   rules and `net_default` alone.
//!
//! The resolver acts with the supervisor's identity, the one exception to
//! "acting as the caller": docs/SECURITY.md says why that is safe.

mod guard;
pub mod wire;

pub use guard::Guards;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Supervisor;
use crate::policy::NetAction;
use crate::supervisor::audit::Decision;

/// The address of the supervisor's resolver inside the container's
/// network namespace (port 53), as its /etc/resolv.conf names it.
pub const RESOLVER_V4: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 53);
/// Threads answering queries; each has its own sockets to the nameservers.
pub const WORKERS: usize = 4;
/// Nameservers used, at most (glibc's MAXNS, resolv.conf(5)).
pub const MAX_NAMESERVERS: usize = 3;
/// Bindings kept at most; past it the ones closest to expiry go first.
pub const MAX_BINDINGS: usize = 16384;
/// Largest DNS message read or passed on (UDP, EDNS(0) included).
const MAX_MESSAGE: usize = 4096;

/// What `create` hands the supervisor for its resolver (see the module
/// documentation).
#[derive(Debug)]
pub struct Handover {
    /// The UDP socket bound to [`Handover::address`] in the container's
    /// network namespace.
    pub listen: OwnedFd,
    /// A TCP listener on the same address.
    pub tcp: OwnedFd,
    /// Its address.
    pub address: SocketAddr,
    /// The nameservers, in resolv.conf order.
    pub nameservers: Vec<SocketAddr>,
    /// Per worker and one more for the TCP server, one non-blocking UDP
    /// socket connected to each nameserver (same order), created in the
    /// container's network namespace.
    pub upstream: Vec<Vec<OwnedFd>>,
}

/// Addresses the resolver answered, bound to the names they were answered
/// for until their (clamped) TTL ends.
#[derive(Debug, Default)]
pub struct Names {
    table: Mutex<Table>,
    /// The resolver's address once it runs.
    resolver: std::sync::OnceLock<SocketAddr>,
}

#[derive(Debug, Default)]
struct Table {
    map: HashMap<IpAddr, Vec<(String, Instant)>>,
    /// Bindings in `map`.
    count: usize,
}

impl Table {
    fn prune(&mut self, now: Instant) {
        self.map.retain(|_, v| {
            v.retain(|(_, t)| *t > now);
            !v.is_empty()
        });
        self.count = self.map.values().map(Vec::len).sum();
    }

    /// Drops the binding closest to expiry.
    fn evict_one(&mut self) {
        let Some((ip, i)) = self
            .map
            .iter()
            .flat_map(|(ip, v)| v.iter().enumerate().map(move |(i, (_, t))| (*t, *ip, i)))
            .min()
            .map(|(_, ip, i)| (ip, i))
        else {
            return;
        };
        if let Some(v) = self.map.get_mut(&ip) {
            v.remove(i);
            self.count -= 1;
            if v.is_empty() {
                self.map.remove(&ip);
            }
        }
    }
}

impl Names {
    /// Binds `addr` to `name` for `ttl` (an existing binding of the pair is
    /// renewed). Bounded by [`MAX_BINDINGS`].
    pub fn bind(&self, addr: IpAddr, name: &str, ttl: Duration) {
        let now = Instant::now();
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if t.count >= MAX_BINDINGS {
            t.prune(now);
            if t.count >= MAX_BINDINGS {
                t.evict_one();
            }
        }
        let v = t.map.entry(addr).or_default();
        let before = v.len();
        v.retain(|(n, until)| n != name && *until > now);
        v.insert(0, (name.to_string(), now + ttl));
        let after = v.len();
        t.count = t.count + after - before;
    }

    /// The names `addr` is bound to now, the most recently answered first.
    /// IPv4-mapped IPv6 addresses are looked up as IPv4.
    pub fn of(&self, addr: IpAddr) -> Vec<String> {
        let addr = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(addr),
            a => a,
        };
        let now = Instant::now();
        let t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        t.map
            .get(&addr)
            .map(|v| v.iter().filter(|(_, t)| *t > now).map(|(n, _)| n.clone()).collect())
            .unwrap_or_default()
    }

    /// The resolver's address in the container's network namespace, once
    /// it runs.
    pub fn resolver(&self) -> Option<SocketAddr> {
        self.resolver.get().copied()
    }
}

/// Starts the resolver's workers on the handed-over sockets (the last
/// upstream set is the TCP server's). Errors: a thread could not be
/// started.
pub fn serve(sup: &Arc<Supervisor>, mut h: Handover) -> std::io::Result<()> {
    let listen = Arc::new(UdpSocket::from(h.listen));
    let nameservers = Arc::new(h.nameservers);
    if let Some(ups) = h.upstream.pop() {
        let ups: Vec<UdpSocket> = ups.into_iter().map(UdpSocket::from).collect();
        let tcp = TcpListener::from(h.tcp);
        let (sup, nameservers) = (Arc::clone(sup), Arc::clone(&nameservers));
        std::thread::Builder::new()
            .name("dns-tcp".into())
            .stack_size(256 * 1024)
            .spawn(move || tcp_server(&sup, &tcp, &ups, &nameservers))?;
    }
    for ups in h.upstream {
        let ups: Vec<UdpSocket> = ups.into_iter().map(UdpSocket::from).collect();
        let (sup, listen, nameservers) = (Arc::clone(sup), Arc::clone(&listen), Arc::clone(&nameservers));
        std::thread::Builder::new()
            .name("dns".into())
            .stack_size(256 * 1024)
            .spawn(move || worker(&sup, &listen, &ups, &nameservers))?;
    }
    let _ = sup.names.resolver.set(h.address);
    Ok(())
}

fn worker(sup: &Supervisor, listen: &UdpSocket, ups: &[UdpSocket], nameservers: &[SocketAddr]) {
    let mut buf = vec![0u8; MAX_MESSAGE];
    loop {
        let (n, from) = match listen.recv_from(&mut buf) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                sup.audit
                    .record(0, "dns", &format!("resolver stopped: {e}"), Decision::Event, "error");
                return;
            }
        };
        if let Some(answer) = answer(sup, &buf[..n], ups, nameservers, false) {
            let _ = listen.send_to(&answer, from);
        }
    }
}

/// How long a TCP client may take to send a query, or to take an answer.
const TCP_IDLE: Duration = Duration::from_secs(2);
/// Queries served on one TCP connection at most.
const TCP_QUERIES: usize = 16;

/// Serves DNS over TCP (RFC 1035 section 4.2.2: each message after its
/// 2-byte length), one connection at a time, each bounded by [`TCP_IDLE`]
/// per step and [`TCP_QUERIES`] queries.
fn tcp_server(sup: &Supervisor, listener: &TcpListener, ups: &[UdpSocket], nameservers: &[SocketAddr]) {
    loop {
        let mut conn = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
            Err(e) => {
                sup.audit.record(
                    0,
                    "dns",
                    &format!("TCP resolver stopped: {e}"),
                    Decision::Event,
                    "error",
                );
                return;
            }
        };
        if conn.set_nonblocking(true).is_err() {
            continue;
        }
        for _ in 0..TCP_QUERIES {
            let mut len = [0u8; 2];
            if !io_within(&mut conn, &mut len, true) {
                break;
            }
            let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
            if !io_within(&mut conn, &mut msg, true) {
                break;
            }
            let Some(mut answer) = answer(sup, &msg, ups, nameservers, true) else {
                break;
            };
            answer.truncate(usize::from(u16::MAX));
            let mut out = (answer.len() as u16).to_be_bytes().to_vec();
            out.extend_from_slice(&answer);
            if !io_within(&mut conn, &mut out, false) {
                break;
            }
        }
    }
}

/// Reads (`read`) or writes all of `buf` on a non-blocking stream, each
/// wait at most [`TCP_IDLE`]. `false`: the peer closed, failed or idled.
fn io_within(conn: &mut std::net::TcpStream, buf: &mut [u8], read: bool) -> bool {
    use std::io::{Read, Write};
    let mut done = 0;
    while done < buf.len() {
        let r = if read {
            conn.read(&mut buf[done..])
        } else {
            conn.write(&buf[done..])
        };
        match r {
            Ok(0) => return false,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let flags = if read {
                    nix::poll::PollFlags::POLLIN
                } else {
                    nix::poll::PollFlags::POLLOUT
                };
                let mut pfd = [nix::poll::PollFd::new(conn.as_fd(), flags)];
                let t = nix::poll::PollTimeout::try_from(TCP_IDLE).unwrap_or(nix::poll::PollTimeout::MAX);
                if !matches!(nix::poll::poll(&mut pfd, t), Ok(n) if n > 0) {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
    true
}

/// The QTYPE as text for the audit trail.
fn type_name(t: u16) -> String {
    match t {
        wire::TYPE_A => "A".into(),
        wire::TYPE_AAAA => "AAAA".into(),
        wire::TYPE_CNAME => "CNAME".into(),
        2 => "NS".into(),
        6 => "SOA".into(),
        12 => "PTR".into(),
        15 => "MX".into(),
        16 => "TXT".into(),
        33 => "SRV".into(),
        65 => "HTTPS".into(),
        t => format!("TYPE{t}"),
    }
}

/// The answer to one message from the container (`None`: nothing to
/// answer), recorded in the audit trail as a `dns` decision. `tcp`: the
/// query came over TCP, whose answers are not limited to 512 bytes: the
/// nameservers are asked with EDNS(0) for [`wire::EDNS_SIZE`] bytes.
fn answer(sup: &Supervisor, msg: &[u8], ups: &[UdpSocket], nameservers: &[SocketAddr], tcp: bool) -> Option<Vec<u8>> {
    let mut q = match wire::parse_query(msg) {
        Ok(q) => q,
        Err(wire::Bad::NoHeader) => return None,
        Err(wire::Bad::Answer(rc)) => {
            sup.audit
                .record(0, "dns", "(malformed)", Decision::Deny, rcode_name(rc));
            return wire::reply_header_only(msg, rc);
        }
    };
    if tcp {
        q.edns = Some(wire::EDNS_SIZE);
    }
    let shown = if q.name.is_empty() { "." } else { q.name.as_str() };
    let detail = format!("{shown} {}{}", type_name(q.qtype), if tcp { " (TCP)" } else { "" });
    // One policy for the whole answer (a live update swaps it).
    let policy = sup.policy();
    let net = &policy.net;
    let record = |action: Decision, result: &str, rule: Option<usize>| {
        let rule = policy.explain_net_rule(rule);
        sup.audit.record_by(0, "dns", &detail, action, result, Some(&rule));
    };
    let (verdict, rule) = net.decide_name(&q.name);
    if verdict == NetAction::Deny {
        record(Decision::Deny, "NXDOMAIN", rule);
        return Some(wire::reply(&q, wire::NXDOMAIN));
    }
    let wildcard = rule.is_some_and(|i| net.name_cap(i).is_some());
    if let Some(i) = rule.filter(|_| wildcard) {
        if let Err(why) = sup.guards.take_name(net, i, &policy.explain_net_rule(Some(i)), &q.name) {
            record(Decision::Deny, &why, rule);
            return Some(wire::reply(&q, wire::NXDOMAIN));
        }
    }
    let timeout = Duration::from_millis(u64::from(policy.source.dns.timeout_ms));
    let Some((bytes, resp)) = forward(&q, ups, timeout) else {
        let why = if nameservers.is_empty() {
            "SERVFAIL (no nameserver)".to_string()
        } else {
            "SERVFAIL (no answer)".to_string()
        };
        record(Decision::Allow, &why, rule);
        return Some(wire::reply(&q, wire::SERVFAIL));
    };
    let chain = wire::chain(&q.name, &resp.records);
    if let Some((name, i)) = guard::refused_in_chain(net, &chain, wildcard) {
        record(Decision::Deny, &format!("NXDOMAIN (CNAME {name})"), i);
        return Some(wire::reply(&q, wire::NXDOMAIN));
    }
    let answered: Vec<(IpAddr, u32)> = resp
        .records
        .iter()
        .filter_map(|r| match r {
            wire::Record::Addr(owner, ip, ttl) if chain.contains(owner) => Some((*ip, *ttl)),
            _ => None,
        })
        .collect();
    let addrs: Vec<IpAddr> = answered.iter().map(|(ip, _)| *ip).collect();
    if let Some(why) = sup.guards.internal(net, &addrs) {
        record(Decision::Deny, &why, rule);
        return Some(wire::reply(&q, wire::NXDOMAIN));
    }
    let dns = &policy.source.dns;
    let mut bound = Vec::new();
    for (ip, ttl) in answered {
        let secs = ttl.clamp(dns.ttl_min, dns.ttl_max);
        sup.names.bind(ip, &q.name, Duration::from_secs(u64::from(secs)));
        bound.push(ip.to_string());
    }
    let mut result = rcode_name(resp.rcode).to_string();
    if !bound.is_empty() {
        result.push_str(&format!(" {}", bound.join(" ")));
    }
    if resp.truncated {
        result.push_str(" (truncated)");
    }
    record(Decision::Allow, &result, rule);
    Some(wire::with_question(&wire::with_id(&bytes, q.id), &q.question))
}

fn rcode_name(rc: u8) -> &'static str {
    match rc {
        wire::NOERROR => "NOERROR",
        wire::FORMERR => "FORMERR",
        wire::SERVFAIL => "SERVFAIL",
        wire::NXDOMAIN => "NXDOMAIN",
        wire::NOTIMP => "NOTIMP",
        5 => "REFUSED",
        _ => "RCODE",
    }
}

/// Asks the nameservers (`ups`: connected sockets, in order) for `q`,
/// each in turn for its share of `timeout`; the first answer to our
/// question and ID wins. `None`: no answer in time.
fn forward(q: &wire::Query, ups: &[UdpSocket], timeout: Duration) -> Option<(Vec<u8>, wire::Response)> {
    let deadline = Instant::now() + timeout;
    let share = timeout / (ups.len().max(1) as u32);
    let mut buf = vec![0u8; MAX_MESSAGE];
    for (k, s) in ups.iter().enumerate() {
        // Late answers to earlier queries of this socket.
        while s.recv(&mut buf).is_ok() {}
        let id = crate::sys::random_u16();
        if s.send(&wire::upstream_query(q, id)).is_err() {
            continue;
        }
        let until = if k + 1 == ups.len() {
            deadline
        } else {
            (Instant::now() + share).min(deadline)
        };
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let mut pfd = [nix::poll::PollFd::new(s.as_fd(), nix::poll::PollFlags::POLLIN)];
            let t = nix::poll::PollTimeout::try_from(left).unwrap_or(nix::poll::PollTimeout::MAX);
            match nix::poll::poll(&mut pfd, t) {
                Ok(0) => break,
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(_) => break,
            }
            match s.recv(&mut buf) {
                Ok(n) => {
                    if let Some(r) = wire::parse_response(&buf[..n], id, q) {
                        return Some((buf[..n].to_vec(), r));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // ECONNREFUSED and the like: the next nameserver.
                Err(_) => break,
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_expire_and_stay_bounded() {
        let n = Names::default();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        n.bind(ip, "a.example", Duration::from_secs(60));
        n.bind(ip, "b.example", Duration::from_secs(60));
        n.bind(ip, "a.example", Duration::from_secs(60));
        assert_eq!(n.of(ip), ["a.example", "b.example"]);
        assert_eq!(n.of("::ffff:192.0.2.1".parse().unwrap()), ["a.example", "b.example"]);
        n.bind(ip, "c.example", Duration::ZERO);
        assert!(!n.of(ip).contains(&"c.example".to_string()), "expired at once");
        for i in 0..(MAX_BINDINGS as u32 + 10) {
            n.bind(
                IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)),
                "x",
                Duration::from_secs(600),
            );
        }
        let t = n.table.lock().unwrap();
        let total: usize = t.map.values().map(Vec::len).sum();
        assert_eq!(total, t.count);
        assert!(total <= MAX_BINDINGS, "{total}");
    }
}
