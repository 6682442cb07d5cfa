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
    /// `connect`, `sendto`, `sendmsg` or `sendmmsg`.
    pub syscall: String,
    /// The host name the address was looked up by, if the resolver
    /// answered it.
    pub host: Option<String>,
    /// The destination address.
    pub address: String,
    /// The destination port.
    pub port: u16,
    /// The rule, as the trail names it (`net[3] example.com`).
    pub rule: String,
}

impl Question {
    /// What a remembered answer is kept under: the rule and the
    /// destination (by name when it has one).
    fn key(&self) -> String {
        let dest = self.host.as_deref().unwrap_or(&self.address);
        format!("{}\u{0}{dest}\u{0}{}", self.rule, self.port)
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

    /// One question and its answer line over a new connection. The wait
    /// is a poll(2) with the timeout (the supervisor's own filter has no
    /// setsockopt for SO_RCVTIMEO); the line is short enough for the
    /// socket's buffer, so the write does not wait.
    fn exchange(&self, socket: &PathBuf, q: &Question) -> Result<Reply, String> {
        let mut stream = UnixStream::connect(socket).map_err(|e| format!("{}: {e}", socket.display()))?;
        let mut line = serde_json::to_string(q).map_err(|e| e.to_string())?;
        line.push('\n');
        stream.write_all(line.as_bytes()).map_err(|e| e.to_string())?;
        let deadline = std::time::Instant::now() + self.timeout;
        let mut answer = Vec::new();
        let mut buf = [0u8; 512];
        while !answer.contains(&b'\n') {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
            if ms == 0 || !readable(&stream, ms)? {
                if std::time::Instant::now() >= deadline {
                    return Err(format!("timeout {} ms", self.timeout.as_millis()));
                }
                continue;
            }
            let n = std::io::Read::read(&mut stream, &mut buf).map_err(|e| e.to_string())?;
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

/// Whether `stream` has data (or its end) within `ms` milliseconds.
fn readable(stream: &UnixStream, ms: u16) -> Result<bool, String> {
    use std::os::fd::AsFd;
    let mut pfd = [nix::poll::PollFd::new(stream.as_fd(), nix::poll::PollFlags::POLLIN)];
    match nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(ms)) {
        Ok(n) => Ok(n > 0),
        // The handler was interrupted: its caller is gone (platform.rs).
        Err(nix::errno::Errno::EINTR) => Err("interrupted: the caller is gone".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The command line of host pid `pid`, arguments joined by spaces (empty
/// when it is gone).
pub fn command_of(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}
