//! The seccomp-notify platform: one thread per listener receives
//! notifications and hands them to [`platform::handle`], which asks the
//! policy, runs the handler and answers with the listener's ioctls.
//!
//! Every notification is answered, also when the tracee died meanwhile (the
//! answer then fails with ENOENT, which is fine). While blocking handlers
//! run ([`platform`]), the receiver checks every [`SWEEP`] whether their
//! notifications are still valid and cancels those whose caller is gone.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::supervisor::audit::Decision;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::platform::{self, Backend, Jobs};
use super::syscalls::{self, Ctx, Job, Reply};
use super::Supervisor;
use crate::sys;

/// How often the handlers still blocked are checked for a caller that went
/// away (only while there are any).
const SWEEP: Duration = Duration::from_millis(200);

/// The seccomp-notify platform of one listener.
#[derive(Clone)]
struct Notify {
    sup: Arc<Supervisor>,
    listener: Arc<OwnedFd>,
    jobs: Jobs,
}

impl Notify {
    /// Interrupts the handlers whose notification is no longer valid (the
    /// caller was killed, exec'd or exited); all of them with `all`.
    fn cancel_orphans(&self, all: bool) {
        self.jobs
            .cancel(|id| all || !sys::notif_id_valid(self.listener.as_fd(), id));
    }
}

impl Backend for Notify {
    /// A notification is answered by its id alone.
    type Stop = ();

    fn sup(&self) -> &Arc<Supervisor> {
        &self.sup
    }

    fn listener(&self) -> Option<BorrowedFd<'_>> {
        Some(self.listener.as_fd())
    }

    fn reply(&self, _: &(), notif: &libc::seccomp_notif, reply: Reply) -> std::io::Result<String> {
        let listener = self.listener.as_fd();
        match reply {
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
            // A blocking job never returns another blocking job; answer
            // defensively.
            Reply::Blocking(_) => sys::notif_send(listener, notif.id, 0, libc::EAGAIN, false).map(|_| "EAGAIN".into()),
        }
    }

    fn gone(&self, e: &std::io::Error) -> bool {
        e.raw_os_error() == Some(libc::ENOENT)
    }

    fn defer(
        &mut self,
        (): (),
        notif: libc::seccomp_notif,
        name: &'static str,
        job: Job,
        _action: Decision,
        _detail: String,
    ) {
        // Runs on its own thread; the receiver goes back to receiving.
        let (here, there) = (self.clone(), self.clone());
        let run = move || {
            job(&Ctx {
                sup: &here.sup,
                listener: Some(here.listener.as_fd()),
                notif: &notif,
            })
        };
        let deliver = move |out| platform::answer(&there, &(), &notif, name, out);
        if platform::spawn_job(&self.sup, &self.jobs, notif.id, run, deliver).is_err() {
            let _ = sys::notif_send(self.listener.as_fd(), notif.id, 0, libc::EAGAIN, false);
        }
    }
}

/// Serves `listener` until no process uses its filter any more and every
/// blocking handler has returned.
pub fn serve(sup: &Arc<Supervisor>, listener: &Arc<OwnedFd>) {
    platform::install_cancel_handler();
    // However this returns, the callers of this listener are gone: drop
    // what the supervisor kept about them (supervisor/callers.rs).
    struct Sweep(super::callers::Owner);
    impl Drop for Sweep {
        fn drop(&mut self) {
            super::callers::sweep(self.0);
        }
    }
    let _sweep = Sweep(syscalls::owner(Some(listener.as_fd())));
    let mut notify = Notify {
        sup: Arc::clone(sup),
        listener: Arc::clone(listener),
        jobs: Jobs::default(),
    };
    let mut swept = Instant::now();
    loop {
        let pending = !notify.jobs.is_empty();
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
            notify.cancel_orphans(false);
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
            notify.cancel_orphans(true);
            std::thread::sleep(SWEEP);
            continue;
        }
        let mut notif = sys::empty_notif();
        match sys::notif_recv(listener.as_fd(), &mut notif) {
            Ok(()) => platform::handle(&mut notify, (), notif),
            // ENOENT: the tracee was killed before we received it.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::EINTR)) => {}
            Err(_) => return,
        }
    }
}
