//! What both platforms share: the policy's decision on a call, the
//! handlers that may block (run on their own thread, cancelled when their
//! caller goes away), the answer and its audit record.
//!
//! A platform ([`Backend`]) is how calls reach the supervisor and how they
//! are answered: seccomp-notify ([`super::notify`]: a listener per filter,
//! answered with ioctls) or ptrace ([`super::ptrace`]: the caller stopped
//! at a seccomp stop, answered by rewriting its registers). Each keeps its
//! own receive loop (a listener vs waitpid) and hands every call to
//! [`handle`]:
//!
//! ```text
//! receive loop -> handle -> decide (policy, handler) -> answer -> audit record
//!                              \-> blocking job -> spawn_job -> Backend::defer's delivery -> answer
//! ```
//!
//! A handler that may block (a blocking connect, an open of a FIFO) runs
//! on its own thread so that the container's other threads keep being
//! served. It must not outlive its call: when the caller goes away while
//! the handler waits (killed, or its process execs or exits), the platform
//! interrupts the handler's wait with [`CANCEL`] ([`Jobs::cancel`]), so it
//! does not keep a thread and one of the [`super::MAX_BLOCKING`] slots
//! forever.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use nix::sys::signal::Signal;

use super::syscalls::{self, Ctx, Job, Outcome, Reply};
use super::Supervisor;
use crate::abi::{table, AUDIT_ARCH_X86_64};
use crate::policy::Action;
use crate::supervisor::audit::Decision;
use crate::sys;

/// The signal that interrupts a blocked handler whose caller is gone. Its
/// handler does nothing and is installed without SA_RESTART, so the
/// handler's blocking syscall fails with EINTR.
pub(super) const CANCEL: Signal = Signal::SIGUSR1;

/// Installs the (empty) handler of [`CANCEL`], once per process: before
/// any blocking handler may need interrupting.
pub(super) fn install_cancel_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Err(e) = crate::sys::process::install_empty_handler(CANCEL) {
            tracing::warn!("install the cancel handler: {e}");
        }
    });
}

/// The blocking handlers of one platform still running: a key naming the
/// call (seccomp-notify: the notification id; ptrace: the caller's tid)
/// -> the handler thread's tid. A handler is in the map for as long as its
/// thread may block, and its thread is alive for as long as it is there.
#[derive(Clone, Default)]
pub(super) struct Jobs(Arc<Mutex<HashMap<u64, libc::pid_t>>>);

impl Jobs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, libc::pid_t>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether no blocking handler is running.
    pub(super) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Interrupts the handler of every call whose key `orphaned` says has
    /// no caller any more.
    pub(super) fn cancel(&self, orphaned: impl Fn(u64) -> bool) {
        let jobs = self.lock();
        for (&key, &thread) in jobs.iter() {
            if orphaned(key) {
                // `thread` is a live thread of this process (it leaves the
                // map, under this lock, before it exits).
                let _ = crate::sys::process::tgkill(std::process::id() as libc::pid_t, thread, CANCEL as libc::c_int);
            }
        }
    }
}

/// A platform's backend: how calls are answered on it (the platform a
/// container runs on is [`crate::config::Platform`]). Its receive loop hands each
/// call to [`handle`].
pub(super) trait Backend {
    /// What the platform keeps of a waiting call besides its notification
    /// to answer it (ptrace: the caller's registers at its seccomp stop).
    type Stop;

    /// Shared supervisor state.
    fn sup(&self) -> &Arc<Supervisor>;

    /// The listener calls come from (the [`Ctx`] handlers see); `None` on
    /// ptrace.
    fn listener(&self) -> Option<BorrowedFd<'_>>;

    /// Sends `reply` to the caller of `notif`. Returns the result the audit
    /// trail records (`continue`, a value, an errno name, `fd N`).
    fn reply(&self, stop: &Self::Stop, notif: &libc::seccomp_notif, reply: Reply) -> io::Result<String>;

    /// Whether `e`, from [`Backend::reply`], means the caller is gone.
    fn gone(&self, e: &io::Error) -> bool;

    /// Runs blocking `job` for the call `notif` on its own thread (with
    /// [`spawn_job`]) and has its outcome answered; a slot of
    /// [`super::MAX_BLOCKING`] is taken, which [`spawn_job`] gives back.
    /// `action` and `detail` are the outcome's that returned the job.
    fn defer(
        &mut self,
        stop: Self::Stop,
        notif: libc::seccomp_notif,
        name: &'static str,
        job: Job,
        action: Decision,
        detail: String,
    );
}

/// Decides the call in `notif`, answers it and records the decision; a
/// handler that may block goes to [`Backend::defer`].
pub(super) fn handle<P: Backend>(p: &mut P, stop: P::Stop, notif: libc::seccomp_notif) {
    let nr = notif.data.nr as u32;
    let name = table::name(nr).unwrap_or("unknown");
    if notif.data.arch != AUDIT_ARCH_X86_64 {
        // The filter never notifies other entry points; refuse defensively.
        let _ = p.reply(&stop, &notif, Reply::Errno(libc::ENOSYS));
        return;
    }
    let outcome = {
        let ctx = Ctx {
            sup: p.sup(),
            listener: p.listener(),
            notif: &notif,
        };
        decide(&ctx, nr, name)
    };
    let Outcome {
        reply: Reply::Blocking(job),
        action,
        detail,
        record,
        ..
    } = outcome
    else {
        return answer(p, &stop, &notif, name, outcome);
    };
    let sup = p.sup();
    if sup.blocking.fetch_add(1, Ordering::SeqCst) >= super::MAX_BLOCKING {
        sup.blocking.fetch_sub(1, Ordering::SeqCst);
        let out = Outcome {
            reply: Reply::Errno(libc::EAGAIN),
            action,
            detail: "too many blocked calls".into(),
            record,
            rule: None,
        };
        return answer(p, &stop, &notif, name, out);
    }
    p.defer(stop, notif, name, job, action, detail);
}

/// The policy's decision on the call in `ctx` (syscall `nr`, `name`), and
/// for emulated calls the handler's answer.
pub(super) fn decide(ctx: &Ctx<'_>, nr: u32, name: &str) -> Outcome {
    let notif = ctx.notif;
    let policy = ctx.sup.policy();
    let (action, errno) = policy.decide(nr, &notif.data.args);
    match action {
        Action::Audit => Outcome::new(
            Reply::Continue,
            Decision::Audit,
            syscalls::audit_detail(ctx, nr, name, notif),
        )
        .by(Some(policy.explain_syscall(nr, &notif.data.args))),
        Action::Emulate => syscalls::dispatch(ctx, nr),
        Action::Deny => Outcome::new(Reply::Errno(errno), Decision::Deny, syscalls::summary(name, notif))
            .by(Some(policy.explain_syscall(nr, &notif.data.args))),
        Action::Allow => Outcome::new(Reply::Continue, Decision::Allow, syscalls::summary(name, notif)),
        Action::Kill => {
            if let Ok(pidfd) = sys::pidfd_open(notif.pid as i32) {
                let _ = sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
            }
            Outcome::new(
                Reply::Errno(libc::ENOSYS),
                Decision::Kill,
                syscalls::summary(name, notif),
            )
        }
    }
}

/// Sends `out`'s answer to the caller of `notif` and records the decision
/// (unless `out` is not to be recorded).
pub(super) fn answer<P: Backend + ?Sized>(
    p: &P,
    stop: &P::Stop,
    notif: &libc::seccomp_notif,
    name: &str,
    out: Outcome,
) {
    let sup = p.sup();
    let _answering = sup.answering();
    let result = match p.reply(stop, notif, out.reply) {
        Ok(r) => r,
        Err(e) if p.gone(&e) => "caller gone".to_string(),
        Err(e) => format!("answer failed: {e}"),
    };
    if out.record {
        sup.audit.record_by(
            notif.pid as i32,
            name,
            &out.detail,
            out.action,
            &result,
            out.rule.as_deref(),
        );
    }
}

/// Runs `run` (a blocking handler) on a thread of its own, registered in
/// `jobs` under `key` while it runs, then gives back its
/// [`super::MAX_BLOCKING`] slot and hands its outcome to `deliver`. On
/// error (no thread) the slot is given back and nothing runs.
pub(super) fn spawn_job(
    sup: &Arc<Supervisor>,
    jobs: &Jobs,
    key: u64,
    run: impl FnOnce() -> Outcome + Send + 'static,
    deliver: impl FnOnce(Outcome) + Send + 'static,
) -> io::Result<()> {
    let (sup2, jobs2) = (Arc::clone(sup), jobs.clone());
    let spawned = std::thread::Builder::new()
        .name("blocking".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            jobs2.lock().insert(key, nix::unistd::gettid().as_raw());
            let out = run();
            jobs2.lock().remove(&key);
            sup2.blocking.fetch_sub(1, Ordering::SeqCst);
            deliver(out);
        });
    if let Err(e) = spawned {
        sup.blocking.fetch_sub(1, Ordering::SeqCst);
        return Err(e);
    }
    Ok(())
}
