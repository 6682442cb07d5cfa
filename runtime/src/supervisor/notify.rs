//! The seccomp-notify receiver: one thread per listener receives
//! notifications, asks the policy, runs the handler and answers.
//!
//! Every notification is answered, also when the tracee died meanwhile (the
//! answer then fails with ENOENT, which is fine). A handler that may block
//! (a blocking connect, an open of a FIFO) runs on its own thread so that
//! the other threads of the container keep being served.
//!
//! Such a handler must not outlive its call: when the caller goes away
//! while the handler waits (killed, or its process execs or exits), the
//! receiver interrupts the handler's wait with [`CANCEL`], so it does not
//! keep a thread and one of the [`super::MAX_BLOCKING`] slots forever.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::Signal;

use super::syscalls::{self, Ctx, Outcome, Reply};
use super::Supervisor;
use crate::filter::table;
use crate::policy::Action;
use crate::sys;

use crate::filter::AUDIT_ARCH_X86_64;

/// The signal that interrupts a blocked handler whose caller is gone. Its
/// handler does nothing and is installed without SA_RESTART, so the
/// handler's blocking syscall fails with EINTR.
pub(super) const CANCEL: Signal = Signal::SIGUSR1;

/// How often the handlers still blocked are checked for a caller that went
/// away (only while there are any).
const SWEEP: Duration = Duration::from_millis(200);

/// The blocking handlers of one listener still running: notification id ->
/// the handler thread's tid. A handler is in the map for as long as its
/// thread may block, and its thread is alive for as long as it is there.
type Jobs = Arc<Mutex<HashMap<u64, libc::pid_t>>>;

pub(super) fn install_cancel_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Err(e) = sys::process::install_empty_handler(CANCEL) {
            tracing::warn!("install the cancel handler: {e}");
        }
    });
}

/// Interrupts the handlers in `jobs` whose notification is no longer valid
/// (the caller was killed, exec'd or exited); all of them with `all`.
fn cancel_orphans(listener: BorrowedFd<'_>, jobs: &Jobs, all: bool) {
    let jobs = jobs.lock().unwrap_or_else(|e| e.into_inner());
    for (&id, &tid) in jobs.iter() {
        if all || !sys::notif_id_valid(listener, id) {
            // `tid` is a live thread of this process (it leaves the map,
            // under this lock, before it exits).
            let _ = sys::process::tgkill(std::process::id() as i32, tid, CANCEL as libc::c_int);
        }
    }
}

/// Serves `listener` until no process uses its filter any more and every
/// blocking handler has returned.
pub fn serve(sup: &Arc<Supervisor>, listener: &Arc<OwnedFd>) {
    install_cancel_handler();
    // However this returns, the callers of this listener are gone: drop
    // what the supervisor kept about them (supervisor/task.rs).
    struct Sweep(super::task::Owner);
    impl Drop for Sweep {
        fn drop(&mut self) {
            super::task::sweep(self.0);
        }
    }
    let _sweep = Sweep(syscalls::owner(Some(listener.as_fd())));
    let jobs: Jobs = Arc::default();
    let mut swept = Instant::now();
    loop {
        let pending = !jobs.lock().unwrap_or_else(|e| e.into_inner()).is_empty();
        let timeout = if pending {
            PollTimeout::from(SWEEP.as_millis() as u16)
        } else {
            PollTimeout::NONE
        };
        let mut pfd = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut pfd, timeout) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
        let revents = pfd[0].revents().unwrap_or(PollFlags::empty());
        if pending && swept.elapsed() >= SWEEP {
            cancel_orphans(listener.as_fd(), &jobs, false);
            swept = Instant::now();
        }
        if revents.is_empty() {
            continue;
        }
        if !revents.contains(PollFlags::POLLIN) {
            // POLLHUP: every task using this filter has exited; no handler
            // has a caller any more.
            if !pending {
                return;
            }
            cancel_orphans(listener.as_fd(), &jobs, true);
            std::thread::sleep(SWEEP);
            continue;
        }
        let mut notif = sys::empty_notif();
        match sys::notif_recv(listener.as_fd(), &mut notif) {
            Ok(()) => handle(sup, listener, &jobs, notif),
            // ENOENT: the tracee was killed before we received it.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::EINTR)) => {}
            Err(_) => return,
        }
    }
}

fn handle(sup: &Arc<Supervisor>, listener: &Arc<OwnedFd>, jobs: &Jobs, notif: libc::seccomp_notif) {
    let nr = notif.data.nr as u32;
    let name = table::name(nr).unwrap_or("unknown");
    if notif.data.arch != AUDIT_ARCH_X86_64 {
        // The filter never notifies other entry points; refuse defensively.
        let _ = sys::notif_send(listener.as_fd(), notif.id, 0, libc::ENOSYS, false);
        return;
    }
    let ctx = Ctx {
        sup,
        listener: Some(listener.as_fd()),
        notif: &notif,
    };
    let outcome = decide(&ctx, nr, name);
    match outcome.reply {
        Reply::Blocking(job) => {
            use std::sync::atomic::Ordering;
            if sup.blocking.fetch_add(1, Ordering::SeqCst) >= super::MAX_BLOCKING {
                sup.blocking.fetch_sub(1, Ordering::SeqCst);
                let out = Outcome::new(
                    Reply::Errno(libc::EAGAIN),
                    outcome.action,
                    "too many blocked calls".into(),
                );
                return finish(sup, listener.as_fd(), &notif, name, out);
            }
            // Runs on its own thread; the receiver goes back to receiving.
            let sup2 = Arc::clone(sup);
            let listener2 = Arc::clone(listener);
            let jobs2 = Arc::clone(jobs);
            let spawned = std::thread::Builder::new()
                .name("blocking".into())
                .stack_size(256 * 1024)
                .spawn(move || {
                    let ctx = Ctx {
                        sup: &sup2,
                        listener: Some(listener2.as_fd()),
                        notif: &notif,
                    };
                    jobs2
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(notif.id, nix::unistd::gettid().as_raw());
                    let out = job(&ctx);
                    finish(&sup2, listener2.as_fd(), &notif, name, out);
                    jobs2.lock().unwrap_or_else(|e| e.into_inner()).remove(&notif.id);
                    sup2.blocking.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                sup.blocking.fetch_sub(1, Ordering::SeqCst);
                let _ = sys::notif_send(listener.as_fd(), notif.id, 0, libc::EAGAIN, false);
            }
        }
        _ => finish(sup, listener.as_fd(), &notif, name, outcome),
    }
}

/// The policy's decision on the call in `ctx` (syscall `nr`, `name`), and
/// for emulated calls the handler's answer. Shared by both platforms.
pub(super) fn decide(ctx: &Ctx<'_>, nr: u32, name: &str) -> Outcome {
    let notif = ctx.notif;
    let (action, errno) = ctx.sup.policy.decide(nr, &notif.data.args);
    match action {
        Action::Audit => Outcome::new(Reply::Continue, "audit", syscalls::summary(name, notif))
            .by(Some(ctx.sup.policy.explain_syscall(nr, &notif.data.args))),
        Action::Emulate => syscalls::dispatch(ctx, name),
        Action::Deny => Outcome::new(Reply::Errno(errno), "deny", syscalls::summary(name, notif))
            .by(Some(ctx.sup.policy.explain_syscall(nr, &notif.data.args))),
        Action::Allow => Outcome::new(Reply::Continue, "allow", syscalls::summary(name, notif)),
        Action::Kill => {
            if let Ok(pidfd) = sys::pidfd_open(notif.pid as i32) {
                let _ = sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
            }
            Outcome::new(Reply::Errno(libc::ENOSYS), "kill", syscalls::summary(name, notif))
        }
    }
}

/// Sends the answer and records the decision.
fn finish(sup: &Supervisor, listener: BorrowedFd<'_>, notif: &libc::seccomp_notif, name: &str, out: Outcome) {
    let _answering = sup.answering();
    let result = match out.reply {
        Reply::Value(v) => sys::notif_send(listener, notif.id, v, 0, false).map(|_| v.to_string()),
        Reply::Errno(e) => sys::notif_send(listener, notif.id, 0, e, false).map(|_| crate::errno::name(e)),
        Reply::Continue => sys::notif_send(listener, notif.id, 0, 0, true).map(|_| "continue".to_string()),
        Reply::Fd { fd, cloexec } => match sys::notif_addfd(listener, notif.id, fd.as_fd(), cloexec, true) {
            Ok(n) => Ok(format!("fd {n}")),
            // The fd could not be installed (EMFILE in the caller, ...):
            // the notification is still pending and must be answered.
            Err(e) if e.raw_os_error() != Some(libc::ENOENT) => {
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                sys::notif_send(listener, notif.id, 0, errno, false).map(|_| crate::errno::name(errno))
            }
            Err(e) => Err(e),
        },
        Reply::Blocking(_) => unreachable_blocking(listener, notif.id),
    };
    let result = match result {
        Ok(r) => r,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => "caller gone".to_string(),
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

fn unreachable_blocking(listener: BorrowedFd<'_>, id: u64) -> std::io::Result<String> {
    // A blocking job never returns another blocking job; answer defensively.
    sys::notif_send(listener, id, 0, libc::EAGAIN, false).map(|_| "EAGAIN".into())
}
