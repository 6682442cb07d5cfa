//! Emulation handlers, one file per syscall family (like gVisor's
//! `pkg/sentry/syscalls/linux/sys_*.go`). The syscall table binds each
//! number to its handler ([`crate::abi::table::Handler`]) and [`dispatch`]
//! maps each handler to its function. Each handler decodes the arguments,
//! copies what it needs from the caller's memory once, decides on that
//! copy, acts, and returns a [`Reply`]. No handler answers CONTINUE after a
//! decision that read caller memory: the kernel would read it again.

mod asked;
mod call;
mod fs;
mod meta;
mod net;
mod open;
pub(crate) mod path;
mod sysinfo;
mod task;
mod uname;

pub use task::Task;

use crate::supervisor::audit::Decision;
/// The pure decoders of what handlers copy out of a caller's memory: no
/// syscalls, so tests and the fuzz targets (`fuzz/`) run them on any bytes.
/// A C string is [`crate::sys::decode_cstring`].
pub use meta::SETTING_IOCTLS;

pub mod decode {
    pub use super::net::{cmsgs, gather, Addr, Cmsg, IoVec, MsgHdr};
    pub use super::open::{open_mode, OpenHow};
    pub use super::path::{parse_magic_link, rewrite_proc_alias, split_parent, Magic};
}

use std::os::fd::{BorrowedFd, OwnedFd};

pub(crate) use path::pidfd_of;

use super::Supervisor;
use crate::sys;

/// The notification being handled and where to answer it.
pub struct Ctx<'a> {
    /// Shared supervisor state (policy, audit).
    pub sup: &'a Supervisor,
    /// The listener the notification came from; `None` on the ptrace
    /// platform, where the caller stays stopped until answered.
    pub listener: Option<BorrowedFd<'a>>,
    /// The notification (a kernel copy: safe to trust). On ptrace, built
    /// from the stopped caller's registers (`id` 0).
    pub notif: &'a libc::seccomp_notif,
}

/// The [`crate::supervisor::callers::Owner`] of calls from `listener`: its fd
/// number plus one (the listener stays open for as long as its entries
/// are kept), or 0 without one.
pub fn owner(listener: Option<BorrowedFd<'_>>) -> crate::supervisor::callers::Owner {
    use std::os::fd::AsRawFd;
    listener.map(|l| l.as_raw_fd() as u64 + 1).unwrap_or(0)
}

impl Ctx<'_> {
    /// Host tid of the caller.
    pub fn pid(&self) -> i32 {
        self.notif.pid as i32
    }
    /// The caller's credentials, through the supervisor's kept entries.
    pub fn creds(&self) -> std::io::Result<crate::supervisor::creds::Creds> {
        crate::supervisor::callers::creds(self.pid(), owner(self.listener))
    }
    /// The caller's credentials and root, through the supervisor's kept
    /// entries.
    pub fn caller(&self) -> std::io::Result<crate::supervisor::callers::Caller> {
        crate::supervisor::callers::caller(self.pid(), owner(self.listener))
    }
    /// Raw argument register `i`.
    pub fn arg(&self, i: usize) -> u64 {
        self.notif.data.args[i]
    }
    /// Whether the caller is still waiting for this notification: checked
    /// after reading its memory, so the memory read was the caller's.
    pub fn still_valid(&self) -> bool {
        match self.listener {
            Some(l) => sys::notif_id_valid(l, self.notif.id),
            // A ptrace-stopped caller cannot run until the tracer resumes it.
            None => true,
        }
    }
}

/// The errno a handler's decision gives when an `ask` rule's question is
/// still to be asked: the handler then runs again on a thread of its own,
/// where the question may wait for its answer ([`again_to_ask`]).
pub(crate) const ASK_FIRST: i32 = -1;

/// The answer to give now for a call whose question must wait: `handler`
/// run again on a blocking handler's thread, within
/// [`crate::supervisor::ask::waiting`]; a call that blocks is made there.
pub(crate) fn again_to_ask(detail: String, handler: impl FnOnce(&Ctx<'_>) -> Outcome + Send + 'static) -> Outcome {
    let job = Box::new(move |ctx: &Ctx<'_>| {
        let out = crate::supervisor::ask::waiting(|| handler(ctx));
        match out.reply {
            Reply::Blocking(then) => then(ctx),
            _ => out,
        }
    });
    Outcome::new(Reply::Blocking(job), Decision::Ask, detail)
}

/// A deferred handler that may block; run on its own thread.
pub type Job = Box<dyn FnOnce(&Ctx<'_>) -> Outcome + Send>;

/// The answer to a notification.
pub enum Reply {
    /// Success with this return value.
    Value(i64),
    /// Failure with this errno.
    Errno(i32),
    /// Let the kernel run the syscall (only when no decision read memory).
    Continue,
    /// Install this fd in the caller and return its number (ADDFD + SEND).
    Fd {
        /// Our copy of the object.
        fd: OwnedFd,
        /// O_CLOEXEC on the caller's fd.
        cloexec: bool,
    },
    /// Finish on another thread: the work may block.
    Blocking(Job),
}

/// A reply plus what the audit trail records about it.
pub struct Outcome {
    /// The answer.
    pub reply: Reply,
    /// `allow`, `deny`, `emulate`, `audit`.
    pub action: Decision,
    /// Argument summary.
    pub detail: String,
    /// Whether to write an audit record.
    pub record: bool,
    /// The policy rule that decided, when one did (see
    /// [`crate::policy::Policy::explain_path`]).
    pub rule: Option<String>,
}

impl Outcome {
    /// An outcome that is recorded.
    pub fn new(reply: Reply, action: Decision, detail: String) -> Self {
        Self {
            reply,
            action,
            detail,
            record: true,
            rule: None,
        }
    }

    /// This outcome, naming the rule that decided it.
    pub fn by(mut self, rule: Option<String>) -> Self {
        self.rule = rule;
        self
    }

    /// A refusal of container path `path` by a path rule: EACCES, naming
    /// the rule.
    pub fn path_denied(t: &(impl Task + ?Sized), path: String) -> Self {
        let rule = t.sup().policy().explain_path(&path);
        Self::new(Reply::Errno(libc::EACCES), Decision::Deny, path).by(rule)
    }
}

/// Runs the handler the syscall table binds to syscall `nr`
/// ([`crate::abi::table::Entry::handler`]), on any [`Task`]. A number
/// without one (the policy's validation refuses `emulate` for it) fails
/// with ENOSYS.
pub fn dispatch(t: &dyn Task, nr: u32) -> Outcome {
    use crate::abi::table::{self, Handler};
    use call::by_path;
    let Some((e, handler)) = table::entry(nr).and_then(|e| Some((e, e.handler?))) else {
        return Outcome::new(Reply::Errno(libc::ENOSYS), Decision::Allow, String::new());
    };
    match handler {
        Handler::Uname => uname::uname(t),
        Handler::Sysinfo => sysinfo::sysinfo(t),
        Handler::Open => open::open(t, e),
        Handler::Connect => net::connect(t),
        Handler::Bind => net::bind(t),
        Handler::Sendto => net::sendto(t),
        Handler::Sendmsg => net::sendmsg(t),
        Handler::Sendmmsg => net::sendmmsg(t),
        Handler::Getsockname => net::sockname(t, false),
        Handler::Getpeername => net::sockname(t, true),
        Handler::Stat => by_path(t, e, fs::stat::stat),
        Handler::Statx => by_path(t, e, fs::stat::statx),
        Handler::Access => by_path(t, e, fs::access::access),
        Handler::Readlink => by_path(t, e, fs::readlink::readlink),
        Handler::Mkdir => by_path(t, e, fs::mknod::mkdir),
        Handler::Mknod => by_path(t, e, fs::mknod::mknod),
        Handler::Unlink => by_path(t, e, fs::unlink::unlink),
        Handler::Rename => by_path(t, e, fs::rename::rename),
        Handler::Link => by_path(t, e, fs::rename::link),
        Handler::Symlink => by_path(t, e, fs::symlink::symlink),
        Handler::Truncate => by_path(t, e, fs::truncate::truncate),
        Handler::Chmod => by_path(t, e, meta::chmod),
        Handler::Chown => by_path(t, e, meta::chown),
        Handler::Utimes => by_path(t, e, meta::utimes),
        Handler::SetXattr => by_path(t, e, meta::setxattr),
        Handler::RemoveXattr => by_path(t, e, meta::removexattr),
        Handler::Ioctl => meta::ioctl(t, e),
    }
}

/// [`dispatch`] of syscall `name`, for the handlers' unit tests.
#[cfg(test)]
pub(crate) fn dispatch_named(t: &dyn Task, name: &str) -> Outcome {
    dispatch(t, crate::abi::table::number(name).unwrap_or(u32::MAX))
}

/// The detail of an `audit` record of syscall `nr` (`name`): the path the
/// call names when it is absolute (`execve`'s program, `chdir`'s
/// directory), as the caller's memory held
/// it when the call was seen, else [`summary`]. The path is read for the
/// record only: the call is let through and the kernel reads it again and
/// decides (a record, not a decision, so a thread changing it in between
/// changes what is recorded, never what is allowed). `cordon learn`
/// takes the programs a job ran from these records.
pub fn audit_detail(t: &dyn Task, nr: u32, name: &str, n: &libc::seccomp_notif) -> String {
    // An absolute path names the same file whatever the call's
    // directory fd; a relative one is left as the raw arguments.
    crate::abi::table::entry(nr)
        .and_then(|e| e.path)
        .and_then(|i| t.read_cstring(t.arg(usize::from(i)), libc::PATH_MAX as usize).ok())
        .and_then(|raw| String::from_utf8(raw).ok())
        .filter(|p| p.starts_with('/'))
        .unwrap_or_else(|| summary(name, n))
}

/// A short summary of the raw arguments, for records without a handler.
pub fn summary(name: &str, n: &libc::seccomp_notif) -> String {
    let a = n.data.args;
    format!("{name}({:#x}, {:#x}, {:#x})", a[0], a[1], a[2])
}
