//! The ptrace platform: the same policy, handlers and audit trail as
//! seccomp-notify, for where a notify listener cannot be created (an old
//! kernel, or cordon inside a sandbox whose filter already has one).
//!
//! The container's filter returns `SECCOMP_RET_TRACE` where seccomp-notify
//! would return `SECCOMP_RET_USER_NOTIF`. One tracer thread seizes every
//! container process before it execs (PTRACE_SEIZE with TRACESECCOMP,
//! TRACECLONE/FORK/VFORK, TRACEEXEC, EXITKILL), so every thread and child
//! is followed; everything the filter allows runs untraced. At a seccomp
//! stop the tracer reads the registers into a `seccomp_notif`, asks the
//! policy and the handlers, then:
//! - deny / emulated value: skips the call (`orig_rax = -1`) and sets `rax`;
//! - allow / audit: continues (the kernel runs the call);
//! - an emulated open: installs the supervisor's fd in the tracee by
//!   running syscalls in it (socketpair, our end taken with pidfd_getfd,
//!   SCM_RIGHTS, recvmsg, close), then returns the new fd number;
//! - a handler that may block runs on its own thread; the caller stays
//!   stopped until its answer comes back to the tracer thread.
//!
//! At PTRACE_EVENT_EXEC the new program (`/proc/PID/exe`, the file the
//! kernel actually mapped) is checked against the path rules and the
//! process is killed before its first instruction if the rules deny it: no
//! TOCTOU on the path (seccomp-notify cannot do this).
//!
//! Group-stops are left to job control with PTRACE_LISTEN; other signals
//! are delivered. If the supervisor dies, EXITKILL kills every tracee; a
//! process that is not traced gets ENOSYS for every traced call.
//!
//! Every stop the tracer is told of must be resumed (or, for a group-stop,
//! listened) exactly as the kernel would have gone on without a tracer: a
//! stop that is read and dropped leaves its thread in `t` state for ever,
//! and whoever waits for that thread with it. Hence:
//! - wait statuses are decoded by [`pt::wait`], with raw signal numbers: a
//!   real-time signal is a signal like any other (nix's `waitpid` consumed
//!   those stops and returned EINVAL: glibc's SIGSETXID, sent to every
//!   thread by setuid/setgroups in a threaded process, was never delivered
//!   and the caller waited on a futex for ever; issue #25);
//! - while syscalls are injected into a thread ([`Injector`]) it has every
//!   signal blocked, so no signal is dequeued in the middle: signals that
//!   arrive stay pending with their siginfo and are delivered by the kernel
//!   once its mask is back (re-sending them with tgkill lost the siginfo,
//!   which glibc checks for SIGSETXID and SIGCANCEL). SIGSTOP, which cannot
//!   be blocked, is delivered at once; a group-stop met meanwhile is
//!   reported again with PTRACE_INTERRUPT when the thread is answered, and
//!   then left to job control like any other;
//! - the injector waits on its own tid only and hands back to the loop a
//!   stop that is not its own (the exec of another thread, which takes the
//!   leader's tid);
//! - PTRACE_EVENT_STOP is a group-stop exactly when it reports a stop
//!   signal, a new tracee's attach stop included.

use std::cell::RefCell;
use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use nix::sys::signal::{SigSet, Signal};

use super::platform::{self, Backend, Jobs};
use super::syscalls::{Ctx, Job, Outcome, Reply};
use super::Supervisor;
use crate::sys;
use crate::sys::ptrace as pt;
use crate::sys::ptrace::Stop;

use crate::abi::AUDIT_ARCH_X86_64;
use crate::supervisor::audit::Decision;

enum Request {
    /// Seize this process and answer on the channel.
    Seize(i32, Sender<io::Result<()>>),
    /// A blocking handler finished for stopped thread `tid`.
    Done {
        tid: i32,
        regs: Box<libc::user_regs_struct>,
        notif: Box<libc::seccomp_notif>,
        name: &'static str,
        outcome: Outcome,
    },
}

/// Handle to the tracer thread.
pub struct Tracer {
    tx: Sender<Request>,
    wake: Arc<OwnedFd>,
}

impl Tracer {
    /// Starts the tracer thread. SIGCHLD must be blocked in every thread
    /// (the supervisor blocks it before starting any): the tracer reads it
    /// from a signalfd.
    pub fn start(sup: Arc<Supervisor>) -> io::Result<Tracer> {
        let (tx, rx) = channel();
        let wake = Arc::new(eventfd()?);
        let mut mask = SigSet::empty();
        mask.add(Signal::SIGCHLD);
        let sfd = nix::sys::signalfd::SignalFd::with_flags(
            &mask,
            nix::sys::signalfd::SfdFlags::SFD_CLOEXEC | nix::sys::signalfd::SfdFlags::SFD_NONBLOCK,
        )
        .map_err(io::Error::from)?;
        let (wake2, tx2) = (Arc::clone(&wake), tx.clone());
        std::thread::Builder::new()
            .name("ptrace".into())
            .stack_size(512 * 1024)
            .spawn(move || {
                platform::install_cancel_handler();
                let mut t = Loop {
                    sup,
                    rx,
                    tx: tx2,
                    wake: wake2,
                    pending: HashSet::new(),
                    jobs: Jobs::default(),
                    handed_back: RefCell::new(Vec::new()),
                };
                t.run(&sfd);
            })?;
        Ok(Tracer { tx, wake })
    }

    /// Seizes `pid` (from the tracer thread: ptrace requests only work from
    /// the thread that attached).
    pub fn seize(&self, pid: i32) -> io::Result<()> {
        let (tx, rx) = channel();
        self.tx
            .send(Request::Seize(pid, tx))
            .map_err(|_| io::Error::other("the tracer thread is gone"))?;
        poke(&self.wake);
        rx.recv().map_err(|_| io::Error::other("the tracer thread is gone"))?
    }
}

fn eventfd() -> io::Result<OwnedFd> {
    let fd = nix::sys::eventfd::EventFd::from_flags(
        nix::sys::eventfd::EfdFlags::EFD_CLOEXEC | nix::sys::eventfd::EfdFlags::EFD_NONBLOCK,
    )
    .map_err(io::Error::from)?;
    Ok(fd.into())
}

fn poke(fd: &OwnedFd) {
    let _ = nix::unistd::write(fd, &1u64.to_ne_bytes());
}

struct Loop {
    sup: Arc<Supervisor>,
    rx: Receiver<Request>,
    tx: Sender<Request>,
    wake: Arc<OwnedFd>,
    /// Stopped threads waiting for a blocking handler (signals sent to them
    /// meanwhile stay pending in the kernel, delivered once they run).
    pending: HashSet<i32>,
    /// The blocking handlers running, by caller tid: when the caller dies
    /// first, its handler is interrupted ([`platform::CANCEL`]) so it does
    /// not hold a slot forever.
    jobs: Jobs,
    /// Stops read by an [`Injector`] that are not its own (the exec of
    /// another thread, reported under the caller's tid): handled by
    /// [`Loop::reap`] with the others.
    handed_back: RefCell<Vec<Stop>>,
}

impl Loop {
    fn run(&mut self, sfd: &nix::sys::signalfd::SignalFd) {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        loop {
            {
                let mut fds = [
                    PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
                    PollFd::new(self.wake.as_fd(), PollFlags::POLLIN),
                ];
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(_) => return,
                }
            }
            let mut buf = [0u8; 8];
            let _ = nix::unistd::read(self.wake.as_raw_fd(), &mut buf);
            while let Ok(Some(_)) = sfd.read_signal() {}
            while let Ok(r) = self.rx.try_recv() {
                self.request(r);
            }
            self.reap();
        }
    }

    fn request(&mut self, r: Request) {
        match r {
            Request::Seize(pid, reply) => {
                let _ = reply.send(pt::seize(pid));
            }
            Request::Done {
                tid,
                regs,
                notif,
                name,
                outcome,
            } => {
                // A caller that died meanwhile is not answered: its tid may
                // already name another thread.
                if !self.pending.remove(&tid) {
                    return;
                }
                platform::answer(self, &regs, &notif, name, outcome);
            }
        }
    }

    /// Handles every stop and exit that is ready, in rounds: all that are
    /// ready are collected first, then handled in turn. Handling them one
    /// waitpid at a time starved the others: a thread that stops again as
    /// soon as it is answered (an open loop) was reported first every time,
    /// while another thread's clone or exit waited, and the program never
    /// got past it (40 threads opening files while the main one exits).
    fn reap(&mut self) {
        loop {
            let mut ready = self.handed_back.take();
            while let Ok(Some(st)) = pt::wait(-1, true) {
                ready.push(st);
            }
            if ready.is_empty() {
                return;
            }
            for st in ready {
                self.status(st);
            }
        }
    }

    /// Resumes a stop as the kernel would go on without a tracer (every
    /// kind: see the module's documentation).
    fn status(&mut self, st: Stop) {
        match st {
            Stop::Event(pid, ev) => match ev {
                libc::PTRACE_EVENT_SECCOMP => self.seccomp(pid),
                libc::PTRACE_EVENT_EXEC => self.exec(pid),
                // Clone, fork, vfork: the child reports its own attach
                // stop, maybe before this event.
                _ => {
                    let _ = pt::cont(pid, 0);
                }
            },
            Stop::EventStop(pid, sig) => {
                // The kernel reports the stop signal only while the
                // thread's group is stopping or stopped (do_jobctl_trap),
                // SIGTRAP otherwise: a new tracee's attach stop is a
                // group-stop too when its group is stopped (a thread
                // cloned meanwhile joins the stop), so it is listened as
                // well rather than left running in a stopped process.
                if job_control(sig) {
                    // A group-stop: stay stopped until SIGCONT.
                    let _ = pt::listen(pid);
                } else {
                    // The attach stop of a new tracee, or an interrupt
                    // (or a SIGCONT) once its group-stop has ended.
                    let _ = pt::cont(pid, 0);
                }
            }
            Stop::Signal(pid, sig) => {
                // Signal-delivery-stop: deliver it.
                let _ = pt::cont(pid, sig);
            }
            Stop::Syscall(pid) => {
                let _ = pt::cont(pid, 0);
            }
            Stop::Gone(pid) => self.gone_tid(pid),
        }
    }

    /// Thread `tid` is gone: forget it, and interrupt its blocking handler.
    fn gone_tid(&mut self, tid: i32) {
        super::callers::forget(tid);
        if self.pending.remove(&tid) {
            self.jobs.cancel(|t| t == tid as u64);
        }
    }

    /// A `SECCOMP_RET_TRACE` stop: decide and answer, as seccomp-notify.
    fn seccomp(&mut self, tid: i32) {
        let Ok(regs) = pt::getregs(tid) else { return };
        let mut notif = sys::empty_notif();
        notif.pid = tid as u32;
        notif.data.nr = regs.orig_rax as i32;
        notif.data.arch = AUDIT_ARCH_X86_64;
        notif.data.instruction_pointer = regs.rip;
        notif.data.args = [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9];
        platform::handle(self, Box::new(regs), notif);
    }

    /// PTRACE_EVENT_EXEC: the program now mapped must be allowed by the
    /// path rules, else the process dies before its first instruction.
    /// An `ask` rule's exec passes only when the exec guard held it and
    /// the decision program allowed it ([`super::exec_guard::asked_allowed`]);
    /// without the guard nothing asked, and it dies as a denied one does.
    fn exec(&mut self, pid: i32) {
        // A thread other than the leader that execs takes the leader's tid;
        // its own tid ends without an exit report.
        if let Ok(former) = pt::event_msg(pid) {
            let former = former as i32;
            if former != pid {
                self.gone_tid(former);
            }
        }
        let path = exe_in_container(pid);
        let denied = path
            .as_deref()
            .map(|p| match self.sup.policy().paths.access(p) {
                crate::policy::PathAccess::Deny => true,
                crate::policy::PathAccess::Ask => !super::exec_guard::asked_allowed(&self.sup, pid),
                _ => false,
            })
            .unwrap_or(false);
        if denied {
            if let Ok(fd) = super::syscalls::pidfd_of(pid) {
                let _ = sys::pidfd_send_signal(fd.as_fd(), libc::SIGKILL);
            }
        }
        if denied {
            let rule = path.as_deref().and_then(|p| self.sup.policy().explain_path(p));
            self.sup.audit.record_by(
                pid,
                "execve",
                path.as_deref().unwrap_or("?"),
                if denied { Decision::Deny } else { Decision::Audit },
                if denied { "killed" } else { "exec" },
                rule.as_deref(),
            );
        }
        let _ = pt::cont(pid, 0);
    }

    /// Installs `fd` in stopped thread `tid` (at its seccomp stop) and makes
    /// its call return the new fd number: the tracee runs socketpair(2),
    /// the supervisor takes one end with pidfd_getfd(2) and sends `fd` on it
    /// (SCM_RIGHTS), the tracee runs recvmsg(2), closes both ends and moves
    /// the fd down to the lowest free number (fcntl F_DUPFD).
    /// The scratch memory is below the tracee's stack red zone.
    fn inject_fd(
        &self,
        tid: i32,
        regs: libc::user_regs_struct,
        fd: std::os::fd::BorrowedFd<'_>,
        cloexec: bool,
    ) -> io::Result<i32> {
        let mut inj = match Injector::new(tid, regs) {
            Ok(inj) => inj,
            // The call fails rather than run with signals deliverable
            // in the middle of the injected calls.
            Err(e) => return skip(tid, regs, -i64::from(libc::EIO)).and(Err(e)),
        };
        let result = self.inject_steps(&mut inj, fd, cloexec);
        // Other threads' stops and ends read meanwhile: the loop's next round.
        self.handed_back.borrow_mut().append(&mut inj.others);
        if let Some(st) = inj.handed_back.take() {
            // Another thread exec'd: the caller is gone and this tid now
            // runs the new program, whose exec stop the loop checks.
            self.handed_back.borrow_mut().push(st);
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        let ret = match &result {
            Ok(n) => i64::from(*n),
            Err(e) => -i64::from(e.raw_os_error().unwrap_or(libc::EIO)),
        };
        inj.finish(ret)?;
        result
    }

    fn inject_steps(&self, inj: &mut Injector, fd: std::os::fd::BorrowedFd<'_>, cloexec: bool) -> io::Result<i32> {
        let scratch = (inj.saved.rsp - 128 - 256) & !15;
        // int sv[2]
        let sv_addr = scratch;
        let r = inj.call(
            libc::SYS_socketpair,
            [
                libc::AF_UNIX as u64,
                (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as u64,
                0,
                sv_addr,
                0,
                0,
            ],
        )?;
        if r < 0 {
            return Err(io::Error::from_raw_os_error(-r as i32));
        }
        let sv: [i32; 2] = sys::read_pod(inj.tid, sv_addr)?;
        let sent = (|| -> io::Result<()> {
            let pidfd = super::syscalls::pidfd_of(inj.tid)?;
            let ours = sys::pidfd_getfd(pidfd.as_fd(), sv[0])?;
            let fds = [fd.as_raw_fd()];
            nix::sys::socket::sendmsg::<()>(
                ours.as_raw_fd(),
                &[io::IoSlice::new(b"F")],
                &[nix::sys::socket::ControlMessage::ScmRights(&fds)],
                nix::sys::socket::MsgFlags::empty(),
                None,
            )
            .map_err(io::Error::from)?;
            Ok(())
        })();
        // The datagram waits in sv[1]'s queue: the sending end can go now,
        // so the fd received takes the slot it held (a table with two free
        // slots still gets the fd, as an open would).
        let sent_ok = sent.is_ok();
        if sent_ok {
            let _ = inj.call(libc::SYS_close, [sv[0] as u64, 0, 0, 0, 0, 0]);
        }
        let got = match sent {
            Ok(()) => {
                // struct msghdr at +16, iovec at +80, 1-byte buffer at +96,
                // control (CMSG_SPACE(sizeof(int)) = 24) at +112.
                let (msg, iov, byte, ctl) = (scratch + 16, scratch + 80, scratch + 96, scratch + 112);
                let mut m = [0u64; 7];
                m[2] = iov; // msg_iov
                m[3] = 1; // msg_iovlen
                m[4] = ctl; // msg_control
                m[5] = 24; // msg_controllen
                sys::write_mem(inj.tid, msg, sys::pod_bytes(&m))?;
                sys::write_mem(inj.tid, iov, sys::pod_bytes(&[byte, 1u64]))?;
                sys::write_mem(inj.tid, ctl, &[0u8; 24])?;
                let flags = if cloexec { libc::MSG_CMSG_CLOEXEC } else { 0 } as u64;
                let r = inj.call(libc::SYS_recvmsg, [sv[1] as u64, msg, flags, 0, 0, 0])?;
                if r < 0 {
                    Err(io::Error::from_raw_os_error(-r as i32))
                } else {
                    // cmsghdr { len: u64, level: i32, type: i32 } then the fd.
                    let c: [i32; 5] = sys::read_pod(inj.tid, ctl)?;
                    let m: [u64; 7] = sys::read_pod(inj.tid, msg)?;
                    if c[2] == libc::SOL_SOCKET && c[3] == libc::SCM_RIGHTS {
                        Ok(c[4])
                    } else if m[6] as i32 & libc::MSG_CTRUNC != 0 {
                        // No free slot for the fd: the table is full.
                        Err(io::Error::from_raw_os_error(libc::EMFILE))
                    } else {
                        Err(io::Error::from_raw_os_error(libc::EIO))
                    }
                }
            }
            Err(e) => Err(e),
        };
        let held = if sent_ok { &sv[1..] } else { &sv[..] };
        for &s in held {
            let _ = inj.call(libc::SYS_close, [s as u64, 0, 0, 0, 0, 0]);
        }
        // open(2) returns the lowest free fd (shells rely on it: close(0)
        // then open("/dev/null") must give 0), but the socketpair held the
        // lowest ones while the fd arrived: move it down to the lowest now
        // free, as the kernel's open would have chosen.
        let fd = got?;
        let cmd = if cloexec { libc::F_DUPFD_CLOEXEC } else { libc::F_DUPFD };
        let low = inj.call(libc::SYS_fcntl, [fd as u64, cmd as u64, 0, 0, 0, 0])?;
        if low >= 0 && low < i64::from(fd) {
            let _ = inj.call(libc::SYS_close, [fd as u64, 0, 0, 0, 0, 0]);
            return Ok(low as i32);
        }
        if low >= 0 {
            let _ = inj.call(libc::SYS_close, [low as u64, 0, 0, 0, 0, 0]);
        }
        Ok(fd)
    }
}

impl Backend for Loop {
    /// The caller's registers at its seccomp stop (the caller is
    /// `notif.pid`).
    type Stop = Box<libc::user_regs_struct>;

    fn sup(&self) -> &Arc<Supervisor> {
        &self.sup
    }

    fn listener(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    /// Resumes the stopped caller with `reply`.
    fn reply(&self, regs: &Self::Stop, notif: &libc::seccomp_notif, reply: Reply) -> io::Result<String> {
        let (tid, regs) = (notif.pid as i32, **regs);
        match reply {
            Reply::Continue => pt::cont(tid, 0).map(|_| "continue".to_string()),
            Reply::Value(v) => skip(tid, regs, v).map(|_| v.to_string()),
            Reply::Errno(e) => skip(tid, regs, -i64::from(e)).map(|_| crate::errno::name(e)),
            Reply::Fd { fd, cloexec } => self
                .inject_fd(tid, regs, fd.as_fd(), cloexec)
                .map(|n| format!("fd {n}")),
            // A blocking job does not return another blocking job.
            Reply::Blocking(_) => skip(tid, regs, -i64::from(libc::EAGAIN)).map(|_| "EAGAIN".into()),
        }
    }

    fn gone(&self, e: &io::Error) -> bool {
        e.raw_os_error() == Some(libc::ESRCH)
    }

    /// The caller stays stopped until the job's outcome comes back to the
    /// tracer thread ([`Request::Done`]).
    fn defer(
        &mut self,
        regs: Self::Stop,
        notif: libc::seccomp_notif,
        name: &'static str,
        job: Job,
        action: Decision,
        detail: String,
    ) {
        let tid = notif.pid as i32;
        let (sup, tx, wake) = (Arc::clone(&self.sup), self.tx.clone(), Arc::clone(&self.wake));
        self.pending.insert(tid);
        let run = move || {
            let ctx = Ctx {
                sup: &sup,
                listener: None,
                notif: &notif,
            };
            // The caller may have died before the job was registered.
            let alive = std::path::Path::new(&format!("/proc/{tid}")).exists();
            let mut out = if alive {
                job(&ctx)
            } else {
                Outcome::new(Reply::Errno(libc::EINTR), action, String::new())
            };
            if out.detail.is_empty() {
                out.detail = detail;
            }
            out
        };
        let regs2 = regs.clone();
        let deliver = move |outcome| {
            let _ = tx.send(Request::Done {
                tid,
                regs: regs2,
                notif: Box::new(notif),
                name,
                outcome,
            });
            poke(&wake);
        };
        if platform::spawn_job(&self.sup, &self.jobs, tid as u64, run, deliver).is_err() {
            self.pending.remove(&tid);
            let out = Outcome::new(Reply::Errno(libc::EAGAIN), action, "no thread".into());
            platform::answer(self, &regs, &notif, name, out);
        }
    }
}

/// Runs syscalls in a thread stopped at a seccomp stop, then resumes it
/// with its original registers, signal mask and a chosen return value.
///
/// The thread has every signal blocked meanwhile: a signal dequeued in the
/// middle could only be delivered (its handler would run inside the
/// injected sequence) or held back and sent again later, which loses its
/// siginfo (glibc ignores a SIGSETXID or SIGCANCEL not sent by its own
/// process) and the thread it was sent to. Blocked, it stays pending in the
/// kernel, as it would have while the thread was in its syscall.
struct Injector {
    tid: i32,
    saved: libc::user_regs_struct,
    /// Still at the seccomp stop (else at the exit stop of an injected call).
    at_seccomp: bool,
    /// The thread's own signal mask, put back by [`Injector::finish`].
    mask: u64,
    /// The thread took part in a group-stop meanwhile (and was resumed to
    /// finish): it reports it again once answered.
    group_stop: bool,
    /// A stop of this tid that ended the injection and is the loop's to
    /// handle: PTRACE_EVENT_EXEC when another thread of the process
    /// exec'd (the caller died in de_thread and the execing thread took
    /// its tid, the thread group leader's).
    handed_back: Option<Stop>,
    /// Stops and ends of other tracees read while waiting for this one's,
    /// for [`Loop::reap`] to handle after the injection.
    others: Vec<Stop>,
}

impl Injector {
    /// Takes thread `tid`, stopped at its seccomp stop with `regs`, and
    /// blocks every signal in it.
    fn new(tid: i32, regs: libc::user_regs_struct) -> io::Result<Injector> {
        let mask = pt::sigmask(tid)?;
        pt::set_sigmask(tid, !0)?;
        Ok(Injector {
            tid,
            saved: regs,
            at_seccomp: true,
            mask,
            group_stop: false,
            handed_back: None,
            others: Vec::new(),
        })
    }

    /// Runs syscall `nr(args)` in the tracee; returns its raw result.
    fn call(&mut self, nr: libc::c_long, args: [u64; 6]) -> io::Result<i64> {
        if self.handed_back.is_some() {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        let mut r = self.saved;
        r.rdi = args[0];
        r.rsi = args[1];
        r.rdx = args[2];
        r.r10 = args[3];
        r.r8 = args[4];
        r.r9 = args[5];
        if self.at_seccomp {
            // Replace the stopped call: the kernel runs `nr` instead (its
            // filter is checked again; a TRACE verdict is not re-reported).
            r.orig_rax = nr as u64;
            r.rax = nr as u64;
            pt::setregs(self.tid, &r)?;
            self.at_seccomp = false;
        } else {
            // At an exit stop: execute the `syscall` instruction again.
            r.rip = self.saved.rip - 2;
            r.rax = nr as u64;
            r.orig_rax = nr as u64;
            pt::setregs(self.tid, &r)?;
        }
        self.until_exit()?;
        Ok(pt::getregs(self.tid)?.rax as i64)
    }

    /// Resumes with PTRACE_SYSCALL until the tracee is at a syscall-exit
    /// stop. Every tracee's stops are read (waitpid of -1): this thread's
    /// are handled here, the others' kept in `others` for [`Loop::reap`].
    /// Waiting for this thread alone deadlocked when the container ended
    /// during an injection: the last thread of the pid namespace's init,
    /// in `zap_pid_ns_processes`, waits for every other task of the
    /// namespace to be reaped, and traced threads that exited are reaped
    /// only by their tracer's wait, which waited for that last thread.
    fn until_exit(&mut self) -> io::Result<()> {
        pt::syscall(self.tid, 0)?;
        loop {
            let gone = || io::Error::from_raw_os_error(libc::ESRCH);
            let st = loop {
                let st = pt::wait(-1, false)?.ok_or_else(gone)?;
                if st.tid() == self.tid {
                    break st;
                }
                self.others.push(st);
            };
            let deliver = match st {
                Stop::Syscall(_) => {
                    if pt::syscall_stop_kind(self.tid)? == pt::SYSCALL_INFO_EXIT {
                        return Ok(());
                    }
                    0
                }
                // A seccomp stop of an injected call: it runs.
                Stop::Event(_, libc::PTRACE_EVENT_SECCOMP) => 0,
                st @ Stop::Event(..) => {
                    self.handed_back = Some(st);
                    return Err(gone());
                }
                Stop::EventStop(_, sig) => {
                    self.group_stop |= job_control(sig);
                    0
                }
                // Signals are blocked: this is SIGSTOP (its group-stop
                // follows) or a signal the kernel forces; delivered now, as
                // the kernel would.
                Stop::Signal(_, sig) => sig,
                Stop::Gone(_) => return Err(gone()),
            };
            pt::syscall(self.tid, deliver)?;
        }
    }

    /// Restores the original registers with return value `ret`, and the
    /// signal mask, and continues the tracee (which first reports the
    /// group-stop it was taken out of, if any).
    fn finish(&mut self, ret: i64) -> io::Result<()> {
        let mut r = self.saved;
        r.rax = ret as u64;
        if self.at_seccomp {
            // Nothing was injected: skip the original call.
            r.orig_rax = u64::MAX;
        }
        pt::setregs(self.tid, &r)?;
        pt::set_sigmask(self.tid, self.mask)?;
        if self.group_stop {
            // Trapped before it returns to user space: a PTRACE_EVENT_STOP
            // with the stop signal while its group is still stopped (then
            // listened), SIGTRAP if SIGCONT came meanwhile (continued).
            pt::interrupt(self.tid)?;
        }
        pt::cont(self.tid, 0)
    }
}

/// Whether `sig` is a stop signal (its PTRACE_EVENT_STOP is a group-stop).
fn job_control(sig: i32) -> bool {
    matches!(sig, libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU)
}

/// Skips the call a thread is stopped at and makes it return `ret`.
fn skip(tid: i32, mut regs: libc::user_regs_struct, ret: i64) -> io::Result<()> {
    regs.orig_rax = u64::MAX;
    regs.rax = ret as u64;
    pt::setregs(tid, &regs)?;
    pt::cont(tid, 0)
}

/// The path of `pid`'s program inside its container: `/proc/PID/exe`
/// relative to `/proc/PID/root`.
fn exe_in_container(pid: i32) -> Option<String> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let root = std::fs::read_link(format!("/proc/{pid}/root")).ok()?;
    let exe = exe.to_string_lossy().into_owned();
    let root = root.to_string_lossy().into_owned();
    if root == "/" {
        return Some(exe);
    }
    exe.strip_prefix(&root)
        .filter(|rest| rest.starts_with('/'))
        .map(str::to_string)
        .or(Some(exe))
}
