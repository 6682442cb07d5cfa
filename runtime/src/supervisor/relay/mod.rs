//! Names checked on the wire: a TCP connection that a `host` rule allowed
//! to a TLS or HTTP port ([`crate::policy::NetPolicy::wire_check`]) goes
//! through the supervisor, which reads what the client sends first and
//! lets it on only for a name the policy allows there.
//!
//! A host rule authorises the addresses its names resolved to; a CDN
//! serves many sites from one address, so without this an allowed name's
//! address carries every other site on it. With it:
//! - the supervisor connects a socket of its own to the destination, made
//!   in the caller's socket's network namespace (`SIOCGSKNS`, then
//!   setns(CLONE_NEWNET) on a short-lived thread), so a refused or
//!   unreachable destination fails the caller's connect with the kernel's
//!   errno, as without the relay;
//! - the caller's socket (our copy of it: the same object, its options
//!   and O_NONBLOCK kept) is connected instead to a listener the
//!   supervisor made on that namespace's loopback for this connection
//!   alone; the connection accepted there is the one whose peer is the
//!   caller's socket's own address, nothing else;
//! - two threads relay the bytes. Client to server: on a TLS port the
//!   ClientHello is read whole ([`tls::client_hello`]) and its server name
//!   must be allowed for the destination
//!   ([`crate::policy::NetPolicy::decide_named`] with that name); on an
//!   HTTP port every request head is read ([`http::parse_head`]), its
//!   `Host` (and an absolute target's host) must be allowed, and its body
//!   is passed on by its length, so the next request on a keep-alive
//!   connection is checked too. Nothing the client sent reaches the server
//!   before its name was checked. A name refused, a connection naming none
//!   under `sni = "required"`, or a request the relay cannot frame ends the
//!   connection with a reset, recorded in the audit trail with the name
//!   asked for.
//!
//! `getpeername` and `getsockname` on the caller's socket are answered with
//! the addresses a direct connection has ([`relayed`], the `Sockname`
//! handlers). What the caller sees differently (docs/POLICY.md, "Names on
//! the wire"): socket options set on its socket do not reach the packets
//! the supervisor's own socket sends.

pub mod http;
pub mod tls;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::policy::{NetAction, Policy, Sni, Wire};
use crate::supervisor::audit::{AuditLog, Decision};
use crate::sys;

/// At most this many connections are relayed at once per container; a
/// connect past it fails with EAGAIN (connect(2): no more local ports).
pub const MAX_RELAYS: usize = 512;

/// `TCP_CLOSE` (tcp_states.h): a socket neither connected nor connecting.
const TCP_CLOSE: u8 = 7;

static RELAYS: AtomicUsize = AtomicUsize::new(0);

/// The relayed connections, by the caller's socket (device and inode):
/// its peer and local address as a direct connection would show them
/// (the destination, and the supervisor's upstream socket's own address,
/// which the same namespace chose the same way).
static RELAYED: Mutex<BTreeMap<(u64, u64), (SocketAddr, SocketAddr)>> = Mutex::new(BTreeMap::new());

/// The identity of socket `sock` in [`RELAYED`].
fn key(sock: &impl AsFd) -> Option<(u64, u64)> {
    let st = nix::sys::stat::fstat(sock.as_fd().as_raw_fd()).ok()?;
    Some((st.st_dev, st.st_ino))
}

/// For a socket the relay connected and still relays: the destination
/// and the local address a direct connection would have (`getpeername`,
/// `getsockname`).
pub fn relayed(sock: &impl AsFd) -> Option<(SocketAddr, SocketAddr)> {
    let k = key(sock)?;
    RELAYED.lock().unwrap_or_else(|e| e.into_inner()).get(&k).copied()
}

/// What a steered connection must carry, and what the trail says of it.
pub struct Plan {
    /// TLS or HTTP.
    pub wire: Wire,
    /// Whether a connection naming no host passes.
    pub sni: Sni,
    /// The destination.
    pub dest: SocketAddr,
    /// The policy the connect was decided under.
    pub policy: Arc<Policy>,
    /// The trail.
    pub audit: Arc<AuditLog>,
    /// The caller's host tid, for the trail.
    pub pid: i32,
    /// The connect's audit detail (`allowed.test (192.0.2.1):443`).
    pub detail: String,
    /// Whether the caller's socket is blocking (no O_NONBLOCK).
    pub blocking: bool,
}

/// Waits, at most `limit`, for the relayed connections to end and their
/// ends to be recorded: once the container's init exited its processes'
/// sockets close, and each relay ends when its server side closes too.
pub fn settle(limit: Duration) {
    let deadline = Instant::now() + limit;
    while RELAYS.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What a connect of a socket to a destination whose name is checked on
/// the wire does ([`classify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// A TCP socket neither connected nor connecting: through the relay.
    Relay,
    /// Not a stream (a datagram: no connection is made): a direct connect.
    Direct,
    /// A TCP socket already connecting (`EALREADY`) or connected, or
    /// listening (`EISCONN`): the kernel's answer, given without a connect.
    /// (A connect made for it could find the socket closed meanwhile by
    /// another thread's `shutdown`, and open a connection past the relay.)
    Busy(i32),
    /// A stream socket of another protocol (MPTCP, SCTP): the relay takes
    /// TCP only, and a direct connection would carry any name, so it is
    /// refused.
    Refuse,
}

/// The [`Route`] of a connect of `sock`.
pub fn classify(sock: &OwnedFd) -> Route {
    let fd = sock.as_fd();
    if sys::net::sockopt_int(fd, libc::SO_TYPE).ok() != Some(libc::SOCK_STREAM) {
        return Route::Direct;
    }
    if sys::net::sockopt_int(fd, libc::SO_PROTOCOL).ok() != Some(libc::IPPROTO_TCP) {
        return Route::Refuse;
    }
    match sys::net::tcp_state(fd) {
        Ok(TCP_CLOSE) => Route::Relay,
        // TCP_SYN_SENT, TCP_SYN_RECV (tcp_states.h).
        Ok(2 | 3) => Route::Busy(libc::EALREADY),
        Ok(_) => Route::Busy(libc::EISCONN),
        Err(_) => Route::Refuse,
    }
}

/// Whether `sock` is a stream socket: a send with MSG_FASTOPEN on it may
/// open a connection, past the relay (whatever its state now: another
/// thread can close it before the send).
pub fn stream(sock: &OwnedFd) -> bool {
    sys::net::sockopt_int(sock.as_fd(), libc::SO_TYPE).ok() == Some(libc::SOCK_STREAM)
}

/// Connects the caller's socket `sock` through a relay to `plan.dest`:
/// returns the connect's result for the caller, 0 or an errno (the
/// destination's; EINPROGRESS for a non-blocking socket, the relay then
/// running).
pub fn steer(sock: OwnedFd, plan: Plan) -> i32 {
    if RELAYS.fetch_add(1, Ordering::SeqCst) >= MAX_RELAYS {
        RELAYS.fetch_sub(1, Ordering::SeqCst);
        return libc::EAGAIN;
    }
    match steer_counted(sock, plan) {
        Ok(r) => r,
        Err(e) => {
            RELAYS.fetch_sub(1, Ordering::SeqCst);
            e
        }
    }
}

/// How long a non-blocking caller's `connect` waits for the supervisor's
/// own connection before it gets EINPROGRESS anyway (the relay then waits
/// on, and a connection that fails resets the caller's): an event loop's
/// connect must not hold its thread (RFC 8305 tries the next address
/// after 250 ms).
const NONBLOCKING_WAIT: Duration = Duration::from_millis(250);

/// [`steer`], once counted: `Ok` once the relay runs (0 or EINPROGRESS),
/// `Err` when nothing was started.
fn steer_counted(sock: OwnedFd, plan: Plan) -> Result<i32, i32> {
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let ns = sys::net::netns_of(sock.as_fd()).map_err(errno)?;
    let v6 = sys::net::sockopt_int(sock.as_fd(), libc::SO_DOMAIN).ok() == Some(libc::AF_INET6);
    let dest = plan.dest;
    // In the socket's namespace: the upstream connection (started, not
    // waited for), then the listener (after it: a destination that refuses
    // at once leaves nothing).
    let (upstream, listener) = std::thread::scope(|s| {
        s.spawn(|| -> std::io::Result<(OwnedFd, TcpListener)> {
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)?;
            let family = if dest.is_ipv4() {
                nix::sys::socket::AddressFamily::Inet
            } else {
                nix::sys::socket::AddressFamily::Inet6
            };
            let flags = nix::sys::socket::SockFlag::SOCK_NONBLOCK | nix::sys::socket::SockFlag::SOCK_CLOEXEC;
            let upstream = nix::sys::socket::socket(family, nix::sys::socket::SockType::Stream, flags, None)?;
            match sys::net::connect(upstream.as_fd(), &sockaddr(dest)) {
                Err(e) if e.raw_os_error() != Some(libc::EINPROGRESS) => return Err(e),
                _ => {}
            }
            let listener = if v6 {
                TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).or_else(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))?
            } else {
                TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            };
            Ok((upstream, listener))
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::from_raw_os_error(libc::EIO)))
    })
    .map_err(errno)?;
    // A blocking caller waits as long as the kernel's connect would; a
    // non-blocking one at most NONBLOCKING_WAIT.
    let limit = if plan.blocking { None } else { Some(NONBLOCKING_WAIT) };
    let pending = match connected(&upstream, limit) {
        Some(Ok(())) => false,
        Some(Err(e)) => return Err(e),
        None => true,
    };
    let at = listener.local_addr().map_err(errno)?;
    // TCP_FASTOPEN_CONNECT would hold the connect to the listener until
    // the caller's first write; the listener must see it now.
    let _ = nix::sys::socket::setsockopt(&sock, nix::sys::socket::sockopt::TcpFastOpenConnect, &false);
    let to = sockaddr(match (v6, at) {
        (true, SocketAddr::V4(a)) => SocketAddr::new(IpAddr::V6(a.ip().to_ipv6_mapped()), a.port()),
        _ => at,
    });
    let result = match sys::net::connect(sock.as_fd(), &to) {
        Ok(()) => 0,
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => libc::EINPROGRESS,
        Err(e) => return Err(errno(e)),
    };
    let client = accept_from(&listener, &sock).ok_or(libc::ECONNREFUSED)?;
    drop(listener);
    let upstream = TcpStream::from(upstream);
    let local = upstream.local_addr().map_err(errno)?;
    let entry = key(&sock);
    if let Some(k) = entry {
        RELAYED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(k, (dest, local));
    }
    let started = Instant::now();
    let forth = std::thread::Builder::new().name("relay".into()).spawn(move || {
        let (sent, received) = relay(client, upstream, &plan, pending);
        let detail = closed_detail(&plan.detail, sent, received, started.elapsed());
        plan.audit
            .record(plan.pid, "connect", &detail, Decision::Event, "closed");
        if let Some(k) = entry {
            RELAYED.lock().unwrap_or_else(|e| e.into_inner()).remove(&k);
        }
        RELAYS.fetch_sub(1, Ordering::SeqCst);
    });
    if forth.is_err() {
        return Err(libc::EAGAIN);
    }
    Ok(result)
}

/// Whether the non-blocking connect of `upstream` finished within `limit`
/// (`None`: as long as it takes): `Some` with its result (`SO_ERROR`), or
/// `None` while it still runs.
fn connected(upstream: &OwnedFd, limit: Option<Duration>) -> Option<Result<(), i32>> {
    let deadline = limit.map(|l| Instant::now() + l);
    loop {
        let left = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                nix::poll::PollTimeout::try_from(left).unwrap_or(nix::poll::PollTimeout::MAX)
            }
            None => nix::poll::PollTimeout::NONE,
        };
        let mut fds = [nix::poll::PollFd::new(upstream.as_fd(), nix::poll::PollFlags::POLLOUT)];
        match nix::poll::poll(&mut fds, left) {
            Ok(0) => return None,
            Ok(_) => {
                return Some(match sys::net::sockopt_int(upstream.as_fd(), libc::SO_ERROR) {
                    Ok(0) => Ok(()),
                    Ok(e) => Err(e),
                    Err(e) => Err(e.raw_os_error().unwrap_or(libc::EIO)),
                })
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Some(Err(e as i32)),
        }
    }
}

/// Relays between the caller's connection (`client`) and `upstream` until
/// both ends are done; `pending`: the upstream connect still runs, and a
/// failure of it resets the client. Returns the bytes sent and received.
fn relay(client: TcpStream, upstream: TcpStream, plan: &Plan, pending: bool) -> (u64, u64) {
    if pending {
        let done = std::os::fd::AsFd::as_fd(&upstream).try_clone_to_owned().ok();
        if let Some(Err(e)) = done.as_ref().and_then(|fd| connected(fd, None)) {
            let detail = format!("{} failed after the caller's connect returned", plan.detail);
            plan.audit
                .record(plan.pid, "connect", &detail, Decision::Event, &format!("errno {e}"));
            reset(&client);
            return (0, 0);
        }
    }
    let _ = upstream.set_nonblocking(false);
    let (upstream, client) = (Arc::new(upstream), Arc::new(client));
    let refused = Arc::new(AtomicBool::new(false));
    let (c, u, r) = (Arc::clone(&client), Arc::clone(&upstream), Arc::clone(&refused));
    let Ok(back) = std::thread::Builder::new()
        .name("relay".into())
        .spawn(move || server_to_client(&u, &c, &r))
    else {
        reset(&client);
        return (0, 0);
    };
    let sent = client_to_server(&client, &upstream, plan, &refused);
    (sent, back.join().unwrap_or(0))
}

/// The trail's detail for the end of a relayed connection (`connect`'s
/// own detail, then the bytes each way and the duration).
fn closed_detail(connect: &str, sent: u64, received: u64, took: Duration) -> String {
    format!(
        "{connect} closed: {sent} bytes sent, {received} bytes received in {} ms",
        took.as_millis()
    )
}

/// The bytes sent and received that a [`closed_detail`] records, for
/// `cordon audit --stats`.
pub fn closed_bytes(detail: &str) -> Option<(u64, u64)> {
    let (_, rest) = detail.rsplit_once(" closed: ")?;
    let (sent, rest) = rest.split_once(" bytes sent, ")?;
    let (received, _) = rest.split_once(" bytes received in ")?;
    Some((sent.parse().ok()?, received.parse().ok()?))
}

/// The raw `sockaddr` bytes of `a` (`sockaddr_in` or `sockaddr_in6`).
pub fn sockaddr(a: SocketAddr) -> Vec<u8> {
    let mut b = Vec::with_capacity(28);
    match a {
        SocketAddr::V4(a) => {
            b.extend((libc::AF_INET as u16).to_ne_bytes());
            b.extend(a.port().to_be_bytes());
            b.extend(a.ip().octets());
            b.extend([0u8; 8]);
        }
        SocketAddr::V6(a) => {
            b.extend((libc::AF_INET6 as u16).to_ne_bytes());
            b.extend(a.port().to_be_bytes());
            b.extend(a.flowinfo().to_be_bytes());
            b.extend(a.ip().octets());
            b.extend(a.scope_id().to_ne_bytes());
        }
    }
    b
}

/// The connection on `listener` whose peer is `sock`'s own address,
/// within a few seconds; others (a process in the namespace that found
/// the port first) are closed.
fn accept_from(listener: &TcpListener, sock: &OwnedFd) -> Option<TcpStream> {
    let own = nix::sys::socket::getsockname::<nix::sys::socket::SockaddrStorage>(sock.as_raw_fd()).ok()?;
    let own = storage_addr(&own)?;
    listener.set_nonblocking(true).ok()?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match listener.accept() {
            Ok((c, peer)) if same(peer, own) => {
                c.set_nonblocking(false).ok()?;
                return Some(c);
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut fds = [nix::poll::PollFd::new(listener.as_fd(), nix::poll::PollFlags::POLLIN)];
                let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(100u8));
            }
            Err(_) => return None,
        }
    }
    None
}

/// An IPv4 or IPv6 socket address as the standard library's; `None` for
/// other families.
pub fn storage_addr(s: &nix::sys::socket::SockaddrStorage) -> Option<SocketAddr> {
    if let Some(a) = s.as_sockaddr_in() {
        return Some(SocketAddr::new(IpAddr::V4(a.ip()), a.port()));
    }
    s.as_sockaddr_in6()
        .map(|a| SocketAddr::new(IpAddr::V6(a.ip()), a.port()))
}

/// Whether two socket addresses are the same, an IPv4-mapped IPv6 one
/// equal to its IPv4 address.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let plain = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    };
    a.port() == b.port() && plain(a.ip()) == plain(b.ip())
}

/// Copies what the server sends to the client until either side ends; a
/// reset by the server resets the client. Once the other direction
/// `refused` the client, its end is left to the reset.
fn server_to_client(upstream: &TcpStream, client: &TcpStream, refused: &AtomicBool) -> u64 {
    let mut buf = vec![0u8; 64 * 1024];
    let mut from = upstream;
    let mut to = client;
    let mut total = 0u64;
    loop {
        match from.read(&mut buf) {
            Ok(0) => {
                if !refused.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Write);
                }
                return total;
            }
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    let _ = upstream.shutdown(Shutdown::Both);
                    return total;
                }
                total += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                reset(client);
                return total;
            }
        }
    }
}

/// Ends `client`'s connection with a reset once the last copy of it
/// closes (SO_LINGER with a zero timeout), and wakes its readers.
fn reset(client: &TcpStream) {
    let _ = nix::sys::socket::setsockopt(
        client,
        nix::sys::socket::sockopt::Linger,
        &libc::linger {
            l_onoff: 1,
            l_linger: 0,
        },
    );
    let _ = client.shutdown(Shutdown::Read);
}

/// Passes what the client sends on to the server, checking the name on
/// the wire first; a refusal resets the client and closes the upstream.
fn client_to_server(client: &TcpStream, upstream: &TcpStream, plan: &Plan, refused: &AtomicBool) -> u64 {
    // No timeout of its own: a client that stays silent holds its
    // connection as it would a direct one, until the server's idle
    // timeout closes the upstream side (then the client's too).
    let mut reader = BufReader::with_capacity(64 * 1024, client);
    let mut to = Counted { inner: upstream, n: 0 };
    let checked = match plan.wire {
        Wire::Tls => tls_hello(&mut reader, plan).and_then(|hello| to.write_all(&hello).map_err(|_| Stop::Quiet)),
        Wire::Http => http_requests(&mut reader, &mut to, plan),
    };
    match checked {
        Ok(()) => copy_rest(&mut reader, &mut to),
        Err(Stop::Quiet) => {
            let _ = upstream.shutdown(Shutdown::Write);
        }
        Err(Stop::Refused(name, why)) => {
            let detail = format!("{} named {name} on the wire", plan.detail);
            plan.audit.record_by(
                plan.pid,
                "connect",
                &detail,
                Decision::Deny,
                &format!("errno {}", libc::ECONNRESET),
                Some(&why),
            );
            refused.store(true, Ordering::SeqCst);
            reset(client);
            let _ = upstream.shutdown(Shutdown::Both);
        }
    }
    to.n
}

/// A writer to the upstream socket that counts what it passed on.
struct Counted<'a> {
    inner: &'a TcpStream,
    n: u64,
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = (&mut self.inner).write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        (&mut self.inner).flush()
    }
}

/// Why the relay stopped before the stream was checked.
enum Stop {
    /// The client went away, or the server did.
    Quiet,
    /// Refused: the name asked for (or what the client sent instead), and
    /// why.
    Refused(String, String),
}

/// Reads the ClientHello and checks its server name; returns its bytes.
fn tls_hello(reader: &mut BufReader<&TcpStream>, plan: &Plan) -> Result<Vec<u8>, Stop> {
    let mut got = Vec::new();
    loop {
        match tls::client_hello(&got) {
            tls::Hello::Incomplete => {}
            tls::Hello::Name(name) => {
                check_name(&name, plan)?;
                passed(plan, &format!("named {name} on the wire"));
                return Ok(got);
            }
            tls::Hello::NoName if plan.sni == Sni::Optional => return Ok(got),
            tls::Hello::NoName => {
                return Err(Stop::Refused(
                    "no server name".into(),
                    "sni required: a TLS ClientHello without a server name".into(),
                ))
            }
            tls::Hello::Encrypted(outer) => {
                return Err(Stop::Refused(
                    format!("an encrypted ClientHello (outer name {outer:?})"),
                    "encrypted_client_hello hides the server name the client asks for".into(),
                ))
            }
            tls::Hello::NotTls => {
                return Err(Stop::Refused(
                    "no TLS".into(),
                    "the client did not open with a well-formed TLS ClientHello".into(),
                ))
            }
        }
        let buf = reader.fill_buf().map_err(|_| Stop::Quiet)?;
        if buf.is_empty() {
            return Err(Stop::Quiet);
        }
        let n = buf.len();
        got.extend_from_slice(buf);
        reader.consume(n);
    }
}

/// Checks and passes on request after request: each head, then its body
/// by its length. Returns when the client closes its side.
fn http_requests(reader: &mut BufReader<&TcpStream>, to: &mut Counted<'_>, plan: &Plan) -> Result<(), Stop> {
    let quiet = |_| Stop::Quiet;
    loop {
        let Some(head) = read_head(reader)? else {
            return Ok(());
        };
        let h = http::parse_head(&head).map_err(|why| Stop::Refused("an HTTP request".into(), why.to_string()))?;
        if h.names.is_empty() && plan.sni != Sni::Optional {
            return Err(Stop::Refused(
                "no Host".into(),
                "sni required: an HTTP request without Host".into(),
            ));
        }
        for name in &h.names {
            let rule = check_name(name, plan)?;
            // The rule that allowed the name may hold the request to
            // methods and paths (policy/http.rs).
            if let Some(why) = rule
                .and_then(|i| plan.policy.net.http_rule(i))
                .and_then(|r| r.refuses(&h.method, &h.target))
            {
                let rule = plan.policy.explain_net_rule(rule);
                return Err(Stop::Refused(
                    format!("{name}: {}", h.request()),
                    format!("{why} ({rule})"),
                ));
            }
        }
        let names = if h.names.is_empty() {
            "no Host".to_string()
        } else {
            h.names.join(", ")
        };
        passed(plan, &format!("named {names} on the wire: {}", h.request()));
        to.write_all(&head).map_err(quiet)?;
        match h.body {
            http::Body::Length(n) => copy_exact(reader, to, n)?,
            http::Body::Chunked => loop {
                let line = read_line(reader)?;
                let size = http::chunk_size(&line)
                    .ok_or_else(|| Stop::Refused("an HTTP request".into(), "a malformed chunk size".into()))?;
                to.write_all(&line).map_err(quiet)?;
                if size == 0 {
                    // Trailers, up to the empty line.
                    loop {
                        let t = read_line(reader)?;
                        if !http::trailer_line(&t) {
                            return Err(Stop::Refused(
                                "an HTTP request".into(),
                                "a malformed trailer line".into(),
                            ));
                        }
                        to.write_all(&t).map_err(quiet)?;
                        if t == b"\r\n" {
                            break;
                        }
                    }
                    break;
                }
                copy_exact(reader, to, size)?;
                // The chunk's CRLF, exactly: a server that took other
                // bytes for it would frame the rest otherwise.
                let mut crlf = [0u8; 2];
                reader.read_exact(&mut crlf).map_err(quiet)?;
                if &crlf != b"\r\n" {
                    return Err(Stop::Refused(
                        "an HTTP request".into(),
                        "a chunk not ended by CRLF".into(),
                    ));
                }
                to.write_all(&crlf).map_err(quiet)?;
            },
        }
    }
}

/// A request head up to and including its empty line; `None` when the
/// client closed before sending another.
fn read_head(reader: &mut BufReader<&TcpStream>) -> Result<Option<Vec<u8>>, Stop> {
    let mut head = Vec::new();
    loop {
        let line = read_line(reader)?;
        if line.is_empty() {
            return if head.is_empty() { Ok(None) } else { Err(Stop::Quiet) };
        }
        head.extend_from_slice(&line);
        if line == b"\r\n" && head.len() > 2 {
            return Ok(Some(head));
        }
        if head.len() > http::MAX_HEAD {
            return Err(Stop::Refused(
                "an HTTP request".into(),
                "a request head over 64 KiB".into(),
            ));
        }
    }
}

/// One line, up to and including its LF (empty at the end of the stream),
/// at most [`http::MAX_HEAD`] bytes.
fn read_line(reader: &mut BufReader<&TcpStream>) -> Result<Vec<u8>, Stop> {
    let mut line = Vec::new();
    let mut limited = reader.take(http::MAX_HEAD as u64 + 1);
    limited.read_until(b'\n', &mut line).map_err(|_| Stop::Quiet)?;
    if line.len() > http::MAX_HEAD {
        return Err(Stop::Refused("an HTTP request".into(), "a line over 64 KiB".into()));
    }
    Ok(line)
}

/// Passes exactly `n` bytes on; the client closing before is a stop.
fn copy_exact(reader: &mut BufReader<&TcpStream>, to: &mut Counted<'_>, n: u64) -> Result<(), Stop> {
    let copied = std::io::copy(&mut reader.take(n), to).map_err(|_| Stop::Quiet)?;
    if copied < n {
        return Err(Stop::Quiet);
    }
    Ok(())
}

/// Passes the rest of the stream on unchecked (a TLS connection once its
/// ClientHello was).
fn copy_rest(reader: &mut BufReader<&TcpStream>, to: &mut Counted<'_>) {
    let _ = std::io::copy(reader, to);
    let _ = to.inner.shutdown(Shutdown::Write);
}

/// Records in the trail what the relay let through on the plan's
/// connection (`what`: the name, and for HTTP the request).
fn passed(plan: &Plan, what: &str) {
    let detail = format!("{} {what}", plan.detail);
    plan.audit
        .record(plan.pid, "connect", &detail, Decision::Allow, "passed");
}

/// Whether `name` may be asked for on a connection to the plan's
/// destination: the policy's verdict for the destination looked up as
/// that name; the rule that allowed it (`None`: `net_default`).
fn check_name(name: &str, plan: &Plan) -> Result<Option<usize>, Stop> {
    let (action, rule, _) = plan
        .policy
        .net
        .decide_named(plan.dest.ip(), plan.dest.port(), &[name.to_string()]);
    if action == NetAction::Allow {
        return Ok(rule);
    }
    let why = match rule {
        Some(_) => plan.policy.explain_net_rule(rule),
        None => format!("net_default (no rule allows the name {name} on the wire)"),
    };
    Err(Stop::Refused(name.to_string(), why))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_closed_record_reads_back() {
        let d = super::closed_detail(
            "a.test (192.0.2.1):443",
            517,
            9000,
            std::time::Duration::from_millis(12),
        );
        assert_eq!(
            d,
            "a.test (192.0.2.1):443 closed: 517 bytes sent, 9000 bytes received in 12 ms"
        );
        assert_eq!(super::closed_bytes(&d), Some((517, 9000)));
        assert_eq!(
            super::closed_bytes("a.test (192.0.2.1):443 named a.test on the wire"),
            None
        );
    }
}
