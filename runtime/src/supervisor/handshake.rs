//! How a container process hands its seccomp listener to the supervisor.
//!
//! The container process (libcontainer's init or exec'd tenant, in
//! [`crate::container::executor`], right before execve) holds a connected
//! stream socket to the supervisor:
//!
//! 1. it sends one byte (`I` for the container's init, `E` for an exec) with
//!    a pidfd of itself attached (SCM_RIGHTS);
//! 2. it installs the policy's filter with `SECCOMP_FILTER_FLAG_NEW_LISTENER`;
//! 3. it writes the listener's fd number (4 bytes, native endian);
//! 4. the supervisor takes the listener with pidfd_getfd(2), starts serving
//!    it, and answers one byte `K`;
//! 5. the process closes its listener copy and the socket, then execs.
//!
//! On the ptrace platform the tag is lower case (`i`, `e`); the supervisor
//! seizes the process (PTRACE_SEIZE) and answers `S`; only then the process
//! installs the policy's filter, whose supervisor actions are
//! `SECCOMP_RET_TRACE`, and execs.
//!
//! `create` also connects once, under a policy with `host` rules, to hand
//! over the resolver's sockets (tag `D`, see [`send_resolver`]) before the
//! container runs; the supervisor answers `K` once its resolver serves.
//! `cordon policy update` sends a new policy (tag `U`, see
//! [`send_update`]); the supervisor answers `K` once it is in force, or
//! `N` and why not.
//!
//! After step 2 only `write`, `read` and `close` run before execve, and the
//! policy may never send those to the supervisor, so the handover cannot
//! deadlock on its own filter (libcontainer's `listenerPath` handover uses
//! `sendmsg` after the filter is loaded, which would deadlock as soon as the
//! policy intercepts `sendmsg`). If the supervisor is gone, step 4 fails and
//! the process exits before running any container code: fail closed.

use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};

use crate::sys;

/// Which kind of container process is attaching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The container's init (its exit ends the container).
    Init,
    /// A process started by `cordon exec`.
    Exec,
}

/// Client side, run in the container process. Installs `prog` and hands the
/// listener to the supervisor (seccomp-notify), or has the supervisor seize
/// this process first (ptrace). On error the caller must not exec.
pub fn attach(
    sock: &mut UnixStream,
    role: Role,
    prog: &[libc::sock_filter],
    platform: crate::config::Platform,
) -> io::Result<()> {
    let me = sys::pidfd_open(std::process::id() as i32)?;
    let ptrace = platform == crate::config::Platform::Ptrace;
    let tag = [match (role, ptrace) {
        (Role::Init, false) => b'I',
        (Role::Exec, false) => b'E',
        (Role::Init, true) => b'i',
        (Role::Exec, true) => b'e',
    }];
    let fds = [me.as_raw_fd()];
    sendmsg::<()>(
        sock.as_raw_fd(),
        &[IoSlice::new(&tag)],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map_err(io::Error::from)?;
    drop(me);
    if ptrace {
        let mut ack = [0u8; 1];
        sock.read_exact(&mut ack)?;
        if ack[0] != b'S' {
            return Err(io::Error::other("the supervisor could not trace this process"));
        }
        sys::seccomp_set_filter(prog, 0)?;
        return Ok(());
    }
    let flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    let listener = match sys::seccomp_set_filter(prog, flags) {
        Ok(l) => l,
        // Kernels before 5.19 lack WAIT_KILLABLE_RECV.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            sys::seccomp_set_filter(prog, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER)?
        }
        Err(e) => return Err(e),
    }
    .ok_or_else(|| io::Error::other("seccomp returned no listener"))?;
    sock.write_all(&listener.as_raw_fd().to_ne_bytes())?;
    let mut ack = [0u8; 1];
    sock.read_exact(&mut ack)?;
    if ack[0] != b'K' {
        return Err(io::Error::other("supervisor refused the listener"));
    }
    drop(listener);
    Ok(())
}

/// What the supervisor receives from one attaching process.
pub struct Attached {
    /// Init or exec.
    pub role: Role,
    /// A pidfd of the attached process.
    pub pidfd: OwnedFd,
    /// The process's seccomp listener (our own copy); `None` on the ptrace
    /// platform: the supervisor seizes the process, then [`ack_traced`].
    pub listener: Option<OwnedFd>,
}

/// Most fds one handover carries: the resolver's socket and one socket
/// per worker and nameserver.
const MAX_FDS: usize = 2 + (crate::supervisor::dns::WORKERS + 1) * crate::supervisor::dns::MAX_NAMESERVERS;

/// What arrives on the supervisor's socket.
pub enum Incoming {
    /// A container process attaching.
    Process(Attached),
    /// `create` handing over the resolver's sockets.
    Resolver(crate::supervisor::dns::Handover),
    /// `cordon policy update`: the policy's name and its TOML text.
    Update(String, String),
}

/// Longest policy text an update carries (bytes).
const MAX_POLICY: usize = 4 << 20;

/// Client side of a live policy update, run by `cordon policy update`:
/// sends `U`, then the policy's name and its TOML text, each
/// length-prefixed (u32, native endian; neither may frame the other), and
/// reads the answer: `K` (in force), or `N` followed by a length-prefixed
/// line saying why not. `Ok(Err(why))` is a refusal.
pub fn send_update(sock: &mut UnixStream, name: &str, text: &str) -> io::Result<Result<(), String>> {
    if text.len() > MAX_POLICY || name.len() > 4096 {
        return Ok(Err(format!(
            "the policy is longer than {MAX_POLICY} bytes, or its name than 4096"
        )));
    }
    sock.write_all(b"U")?;
    for field in [name, text] {
        sock.write_all(&(field.len() as u32).to_ne_bytes())?;
        sock.write_all(field.as_bytes())?;
    }
    let mut ack = [0u8; 1];
    sock.read_exact(&mut ack)?;
    match ack[0] {
        b'K' => Ok(Ok(())),
        b'N' => Ok(Err(read_line(sock, 4096)?)),
        _ => Err(io::Error::other("the supervisor answered an update with a bad byte")),
    }
}

/// Answers an update: `None` when the policy is in force, else why not.
pub fn answer_update(sock: &mut UnixStream, refused: Option<&str>) -> io::Result<()> {
    match refused {
        None => sock.write_all(b"K"),
        Some(why) => {
            let why = &why.as_bytes()[..why.len().min(4096)];
            sock.write_all(b"N")?;
            sock.write_all(&(why.len() as u32).to_ne_bytes())?;
            sock.write_all(why)
        }
    }
}

/// Reads a length-prefixed (u32, native endian) UTF-8 text of at most
/// `max` bytes.
fn read_line(sock: &mut UnixStream, max: usize) -> io::Result<String> {
    let mut len = [0u8; 4];
    sock.read_exact(&mut len)?;
    let len = u32::from_ne_bytes(len) as usize;
    if len > max {
        return Err(io::Error::other(format!("a message longer than {max} bytes")));
    }
    let mut line = vec![0u8; len];
    sock.read_exact(&mut line)?;
    String::from_utf8(line).map_err(|_| io::Error::other("a message that is not UTF-8"))
}

/// Reads the rest of an update after its tag (see [`send_update`]).
fn accept_update(sock: &mut UnixStream) -> io::Result<Incoming> {
    let name = read_line(sock, 4096)?;
    let text = read_line(sock, MAX_POLICY)?;
    Ok(Incoming::Update(name, text))
}

/// Client side of the resolver handover, run by `create`: sends `h` (tag
/// `D`, the sockets as SCM_RIGHTS: the UDP one, the TCP listener, then
/// each upstream set in nameserver order; then a length-prefixed line
/// `ADDRESS SETS NS...`)
/// and waits for the supervisor's `K`.
pub fn send_resolver(sock: &mut UnixStream, h: &crate::supervisor::dns::Handover) -> io::Result<()> {
    let mut fds = vec![h.listen.as_raw_fd(), h.tcp.as_raw_fd()];
    fds.extend(h.upstream.iter().flatten().map(|f| f.as_raw_fd()));
    if fds.len() > MAX_FDS {
        return Err(io::Error::other("too many resolver sockets"));
    }
    sendmsg::<()>(
        sock.as_raw_fd(),
        &[IoSlice::new(b"D")],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map_err(io::Error::from)?;
    let mut line = format!("{} {}", h.address, h.upstream.len());
    for ns in &h.nameservers {
        line.push_str(&format!(" {ns}"));
    }
    sock.write_all(&(line.len() as u32).to_ne_bytes())?;
    sock.write_all(line.as_bytes())?;
    let mut ack = [0u8; 1];
    sock.read_exact(&mut ack)?;
    if ack[0] != b'K' {
        return Err(io::Error::other("the supervisor refused the resolver"));
    }
    Ok(())
}

/// Reads the rest of a resolver handover after its tag (see
/// [`send_resolver`]).
fn accept_resolver(sock: &mut UnixStream, mut fds: Vec<OwnedFd>) -> io::Result<crate::supervisor::dns::Handover> {
    let bad = |what: &str| io::Error::other(format!("resolver handover: {what}"));
    let line = read_line(sock, 4096)?;
    let mut words = line.split(' ');
    let address = words
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| bad("address"))?;
    let workers: usize = words
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| bad("workers"))?;
    let nameservers = words
        .map(|w| w.parse())
        .collect::<Result<Vec<std::net::SocketAddr>, _>>()
        .map_err(|_| bad("nameserver"))?;
    // At least one UDP worker's set and the TCP server's.
    if fds.len() != 2 + workers * nameservers.len() || workers < 2 {
        return Err(bad("socket count"));
    }
    let mut rest = fds.split_off(2);
    let tcp = fds.pop().ok_or_else(|| bad("socket count"))?;
    let listen = fds.pop().ok_or_else(|| bad("socket count"))?;
    let mut upstream = Vec::with_capacity(workers);
    for _ in 0..workers {
        let tail = rest.split_off(nameservers.len());
        upstream.push(rest);
        rest = tail;
    }
    Ok(crate::supervisor::dns::Handover {
        listen,
        tcp,
        address,
        nameservers,
        upstream,
    })
}

/// Supervisor side: receives the pidfd and the listener of one process
/// (the caller answers with [`ack`] once it serves the listener), or a
/// resolver handover (answer [`ack`] once the resolver serves).
pub fn accept(sock: &mut UnixStream) -> io::Result<Incoming> {
    let mut tag = [0u8; 1];
    let (_, fds) = sys::net::recv_with_fds::<MAX_FDS>(sock.as_fd(), &mut tag, true)?;
    let fds = fds.ok_or_else(|| io::Error::from(nix::errno::Errno::ENOBUFS))?;
    if tag[0] == b'D' {
        return accept_resolver(sock, fds).map(Incoming::Resolver);
    }
    if tag[0] == b'U' {
        return accept_update(sock);
    }
    let pidfd = fds.into_iter().next();
    let (role, ptrace) = match tag[0] {
        b'I' => (Role::Init, false),
        b'E' => (Role::Exec, false),
        b'i' => (Role::Init, true),
        b'e' => (Role::Exec, true),
        _ => return Err(io::Error::other("bad handshake tag")),
    };
    let pidfd = pidfd.ok_or_else(|| io::Error::other("handshake without a pidfd"))?;
    if ptrace {
        return Ok(Incoming::Process(Attached {
            role,
            pidfd,
            listener: None,
        }));
    }
    let mut num = [0u8; 4];
    sock.read_exact(&mut num)?;
    let listener = sys::pidfd_getfd(pidfd.as_fd(), i32::from_ne_bytes(num))?;
    Ok(Incoming::Process(Attached {
        role,
        pidfd,
        listener: Some(listener),
    }))
}

/// Tells a process the supervisor traces it: it may install its filter.
pub fn ack_traced(sock: &mut UnixStream) -> io::Result<()> {
    sock.write_all(b"S")
}

/// Tells the attached process it may exec.
pub fn ack(sock: &mut UnixStream) -> io::Result<()> {
    sock.write_all(b"K")
}
