//! `action = "ask"`: the supervisor holds a call a rule makes askable and
//! asks the admin's decision program (the runtime config's `[ask] socket`)
//! whether to allow it.
//!
//! One question per connection to the program's unix stream socket: the
//! supervisor writes one JSON line and reads one JSON line back.
//!
//! ```text
//! > {"container":"ag1","pid":4242,"command":"curl https://example.com","syscall":"connect",
//!    "host":"example.com","address":"93.184.216.34","port":443,"rule":"net[0] example.com"}
//! < {"answer":"allow","remember":true}
//! ```
//!
//! `answer` is `allow` or `deny`; `errno` (a name, default `EPERM`) is what
//! a denied caller gets; `remember: true` keeps the answer for the same
//! rule and destination for the rest of the container's life (the
//! supervisor's memory: a restart forgets). No socket configured, no
//! answer within `timeout_ms`, or an answer that does not parse: deny
//! (EPERM), recorded with why.
//!
//! The call waits on a handler thread of its own ([`super::syscalls::Reply::Blocking`]):
//! the container's other calls go on meanwhile, and a caller that is
//! killed or exits has its question dropped (the job is interrupted as
//! any blocking handler is). A caught signal is delivered once the
//! answer is in (the listener's `WAIT_KILLABLE_RECV`), so a question
//! holds its caller at most `timeout_ms`.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// The decision program the supervisor asks, and what it answered that
/// is remembered.
#[derive(Debug, Default)]
pub struct Asker {
    /// The program's socket; `None`: every question is denied.
    socket: Option<PathBuf>,
    /// How long one question may wait for its answer.
    timeout: Duration,
    /// Remembered answers, by [`Question::key`].
    remembered: Mutex<HashMap<String, Answer>>,
}

/// What the program decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The call goes on as the rule's `allow` would.
    Allow,
    /// The call fails with this errno.
    Deny(i32),
}

/// One question: the call and the rule that made it askable.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Question {
    /// Container id.
    pub container: String,
    /// Host pid of the caller.
    pub pid: i32,
    /// The caller's command line (its `/proc/PID/cmdline`, spaces between
    /// arguments).
    pub command: String,
    /// `connect`, `sendto`, `sendmsg` or `sendmmsg`; for a path rule the
    /// file syscall (`openat`, `stat`, `mkdir`, ...).
    pub syscall: String,
    /// The host name the address was looked up by, if the resolver
    /// answered it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The destination address (network rules).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The destination port (network rules).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The path in the container (path rules).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The rule, as the trail names it (`net[3] example.com`).
    pub rule: String,
    /// The rule whole (target, ports, action), as remembered answers are
    /// kept under it: a rule a policy update changes is asked again.
    #[serde(skip)]
    pub rule_key: String,
}

impl Question {
    /// What a remembered answer is kept under: the rule and the
    /// destination (by name when it has one) or the path.
    fn key(&self) -> String {
        let dest = self
            .path
            .as_deref()
            .or(self.host.as_deref())
            .or(self.address.as_deref())
            .unwrap_or_default();
        format!("{}\u{0}{dest}\u{0}{}", self.rule_key, self.port.unwrap_or(0))
    }
}

/// The question about container path `path` for `syscall` by host pid
/// `pid`, under the path rule of `sup`'s policy that decides it; its
/// `command` is left empty (filled only when it is asked:
/// [`command_of`]).
pub(crate) fn path_question(sup: &super::Supervisor, pid: i32, syscall: &str, path: &str) -> Question {
    let policy = sup.policy();
    let rule = policy.paths.deciding_rule(path);
    Question {
        container: sup.id.clone(),
        pid,
        command: String::new(),
        syscall: syscall.to_string(),
        host: None,
        address: None,
        port: None,
        path: Some(path.to_string()),
        rule: policy.explain_path(path).unwrap_or_default(),
        rule_key: rule
            .and_then(|i| policy.source.paths.get(i))
            .and_then(|r| serde_json::to_string(r).ok())
            .unwrap_or_default(),
    }
}

/// The program's answer line.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Reply {
    answer: String,
    #[serde(default)]
    errno: Option<String>,
    #[serde(default)]
    remember: bool,
}

thread_local! {
    /// Whether this thread may wait for an answer (a blocking handler's).
    static MAY_WAIT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` on this (blocking handler's) thread with questions answered
/// here ([`may_wait`] true).
pub fn waiting<T>(f: impl FnOnce() -> T) -> T {
    MAY_WAIT.with(|w| w.set(true));
    let out = f();
    MAY_WAIT.with(|w| w.set(false));
    out
}

/// Whether this thread may wait for an answer; else the handler must
/// first move to a thread of its own.
pub fn may_wait() -> bool {
    MAY_WAIT.with(Cell::get)
}

impl Asker {
    /// An asker of the program at `socket` (none: deny), waiting at most
    /// `timeout` for an answer.
    pub fn new(socket: Option<PathBuf>, timeout: Duration) -> Self {
        Asker {
            socket,
            timeout,
            remembered: Mutex::new(HashMap::new()),
        }
    }

    /// The remembered answer to `q`, if any.
    pub fn remembered(&self, q: &Question) -> Option<Answer> {
        self.remembered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&q.key())
            .copied()
    }

    /// Asks the program (blocks up to the timeout): the answer and how it
    /// came, for the trail (`asked: allow`, `no answer (...): deny`).
    pub fn ask(&self, q: &Question) -> (Answer, String) {
        let Some(socket) = &self.socket else {
            return (
                Answer::Deny(libc::EPERM),
                "no decision program ([ask] socket in the runtime config): deny".into(),
            );
        };
        match self.exchange(socket, q) {
            Ok(reply) => self.take(q, reply),
            Err(why) => (Answer::Deny(libc::EPERM), format!("no answer ({why}): deny")),
        }
    }

    /// One question and its answer line over a new connection, all within
    /// the timeout: the socket is non-blocking, so neither a program that
    /// does not accept (its backlog full) nor one that does not read holds
    /// the caller longer, and each wait is a poll(2) that the handler's
    /// cancellation interrupts (the supervisor's own filter has no
    /// setsockopt for SO_RCVTIMEO).
    fn exchange(&self, socket: &std::path::Path, q: &Question) -> Result<Reply, String> {
        use nix::sys::socket::{connect, socket as new_socket, AddressFamily, SockFlag, SockType, UnixAddr};
        use std::os::fd::AsRawFd;
        let deadline = std::time::Instant::now() + self.timeout;
        let timeout = || format!("timeout {} ms", self.timeout.as_millis());
        let fd = new_socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(|e| e.to_string())?;
        let addr = UnixAddr::new(socket).map_err(|e| format!("{}: {e}", socket.display()))?;
        match connect(fd.as_raw_fd(), &addr) {
            Ok(()) => {}
            Err(nix::errno::Errno::EAGAIN) => {
                return Err(format!("{}: the program takes no more questions", socket.display()))
            }
            Err(e) => return Err(format!("{}: {e}", socket.display())),
        }
        let mut stream = UnixStream::from(fd);
        let mut line = serde_json::to_string(q).map_err(|e| e.to_string())?;
        line.push('\n');
        let mut sent = 0;
        while sent < line.len() {
            match stream.write(&line.as_bytes()[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if !ready(&stream, nix::poll::PollFlags::POLLOUT, deadline)? {
                        return Err(timeout());
                    }
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        let mut answer = Vec::new();
        let mut buf = [0u8; 512];
        while !answer.contains(&b'\n') {
            if !ready(&stream, nix::poll::PollFlags::POLLIN, deadline)? {
                return Err(timeout());
            }
            let n = match std::io::Read::read(&mut stream, &mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e.to_string()),
            };
            if n == 0 {
                return Err("the program closed the connection".into());
            }
            answer.extend_from_slice(&buf[..n]);
            if answer.len() > 4096 {
                return Err("an answer longer than 4096 bytes".into());
            }
        }
        let answer = String::from_utf8_lossy(&answer);
        let answer = answer.lines().next().unwrap_or("").trim();
        serde_json::from_str(answer).map_err(|e| format!("bad answer {answer:?}: {e}"))
    }

    /// Turns a parsed reply into an answer, remembering it if asked to.
    fn take(&self, q: &Question, reply: Reply) -> (Answer, String) {
        let answer = match reply.answer.as_str() {
            "allow" => Answer::Allow,
            "deny" => {
                let errno = reply
                    .errno
                    .as_deref()
                    .map(crate::errno::from_name)
                    .unwrap_or(Some(libc::EPERM));
                match errno {
                    Some(e) => Answer::Deny(e),
                    None => return (Answer::Deny(libc::EPERM), format!("bad errno {:?}: deny", reply.errno)),
                }
            }
            other => return (Answer::Deny(libc::EPERM), format!("bad answer {other:?}: deny")),
        };
        if reply.remember {
            self.remembered
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(q.key(), answer);
        }
        let said = if answer == Answer::Allow { "allow" } else { "deny" };
        let how = if reply.remember { ", remembered" } else { "" };
        (answer, format!("asked: {said}{how}"))
    }
}

/// Whether `stream` is ready for `events` before `deadline` (false: the
/// deadline passed). An interrupted wait is an error: the handler is
/// being cancelled, its caller gone (platform.rs).
fn ready(stream: &UnixStream, events: nix::poll::PollFlags, deadline: std::time::Instant) -> Result<bool, String> {
    use std::os::fd::AsFd;
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    if left.is_zero() {
        return Ok(false);
    }
    let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
    let mut pfd = [nix::poll::PollFd::new(stream.as_fd(), events)];
    match nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(ms)) {
        Ok(0) => Ok(std::time::Instant::now() < deadline && ready(stream, events, deadline)?),
        Ok(_) => Ok(true),
        Err(nix::errno::Errno::EINTR) => Err("interrupted: the caller is gone".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The longest command line a question carries (bytes); longer ones are
/// cut, marked with `...`.
pub const MAX_COMMAND: usize = 1024;

/// The command line of host pid `pid`, arguments joined by spaces, at
/// most [`MAX_COMMAND`] bytes (empty when it is gone).
pub fn command_of(pid: i32) -> String {
    let mut line = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    if line.len() > MAX_COMMAND {
        let mut cut = MAX_COMMAND;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push_str("...");
    }
    line
}
