//! The seccomp-notify receiver: one thread per listener receives
//! notifications, asks the policy, runs the handler and answers.
//!
//! Every notification is answered, also when the tracee died meanwhile (the
//! answer then fails with ENOENT, which is fine). A handler that may block
//! (a blocking connect, an open of a FIFO) runs on its own thread so that
//! the other threads of the container keep being served.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::syscalls::{self, Ctx, Outcome, Reply};
use super::Supervisor;
use crate::filter::table;
use crate::policy::Action;
use crate::sys;

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

/// Serves `listener` until no process uses its filter any more.
pub fn serve(sup: &Arc<Supervisor>, listener: &Arc<OwnedFd>) {
    loop {
        let mut pfd = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut pfd, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
        let revents = pfd[0].revents().unwrap_or(PollFlags::empty());
        if !revents.contains(PollFlags::POLLIN) {
            // POLLHUP: every task using this filter has exited.
            return;
        }
        let mut notif = sys::empty_notif();
        match sys::notif_recv(listener.as_fd(), &mut notif) {
            Ok(()) => handle(sup, listener, notif),
            // ENOENT: the tracee was killed before we received it.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::EINTR)) => {}
            Err(_) => return,
        }
    }
}

fn handle(sup: &Arc<Supervisor>, listener: &Arc<OwnedFd>, notif: libc::seccomp_notif) {
    let nr = notif.data.nr as u32;
    let name = table::name(nr).unwrap_or("unknown");
    if notif.data.arch != AUDIT_ARCH_X86_64 {
        // The filter never notifies other entry points; refuse defensively.
        let _ = sys::notif_send(listener.as_fd(), notif.id, 0, libc::ENOSYS, false);
        return;
    }
    let (action, errno) = sup.policy.decide(nr, &notif.data.args);
    let outcome = match action {
        Action::Audit => Outcome::new(Reply::Continue, "audit", syscalls::summary(name, &notif)),
        Action::Emulate => {
            let ctx = Ctx {
                sup,
                listener: listener.as_fd(),
                notif: &notif,
            };
            syscalls::dispatch(&ctx, name)
        }
        Action::Deny => Outcome::new(Reply::Errno(errno), "deny", syscalls::summary(name, &notif)),
        Action::Allow => Outcome::new(Reply::Continue, "allow", syscalls::summary(name, &notif)),
        Action::Kill => {
            if let Ok(pidfd) = sys::pidfd_open(notif.pid as i32) {
                let _ = sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
            }
            Outcome::new(Reply::Errno(libc::ENOSYS), "kill", syscalls::summary(name, &notif))
        }
    };
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
            let spawned = std::thread::Builder::new()
                .name("blocking".into())
                .stack_size(256 * 1024)
                .spawn(move || {
                    let ctx = Ctx {
                        sup: &sup2,
                        listener: listener2.as_fd(),
                        notif: &notif,
                    };
                    let out = job(&ctx);
                    finish(&sup2, listener2.as_fd(), &notif, name, out);
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

/// Sends the answer and records the decision.
fn finish(sup: &Supervisor, listener: BorrowedFd<'_>, notif: &libc::seccomp_notif, name: &str, out: Outcome) {
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
        sup.audit
            .record(notif.pid as i32, name, &out.detail, out.action, &result);
    }
}

fn unreachable_blocking(listener: BorrowedFd<'_>, id: u64) -> std::io::Result<String> {
    // A blocking job never returns another blocking job; answer defensively.
    sys::notif_send(listener, id, 0, libc::EAGAIN, false).map(|_| "EAGAIN".into())
}
