//! Refuses the exec of a file a supervisor-level path rule denies, on
//! both platforms.
//!
//! An `execve` cannot be emulated, and deciding on the path the call
//! names, then letting the kernel read it again, would let another thread
//! of the caller swap the path in between. So the decision is the
//! kernel's own question instead: a fanotify group (fanotify(7),
//! `FAN_CLASS_CONTENT`) with a `FAN_OPEN_EXEC_PERM` mark on each mount of
//! the container. The kernel holds every exec of a file on those mounts
//! and hands this thread the file it opened for it; the file's path in
//! the container is taken from that open file, checked against the
//! container's own root, and decided by the path rules. A refused exec
//! fails with EPERM (fanotify's answer; Landlock's is EACCES). The wait is
//! killable, as the views' opens are.
//!
//! Only a policy with supervisor-level `deny` or `ask` path rules gets
//! the group: at the kernel level, the mounts and Landlock refuse the
//! exec themselves. If the supervisor dies, the kernel allows what was
//! pending and the watchdog ends the container.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nix::sys::fanotify::{
    EventFFlags, Fanotify, FanotifyEvent, FanotifyResponse, InitFlags, MarkFlags, MaskFlags, Response,
};

use super::ask;
use super::audit::Decision;
use super::Supervisor;
use crate::policy::model::PathAccess;

/// The fanotify group of one container's execs.
pub(crate) struct ExecGuard {
    fan: Fanotify,
    /// Execs waiting for the decision program now.
    asking: AtomicUsize,
}

impl ExecGuard {
    /// The group, made before the supervisor confines itself
    /// (fanotify_init is not in its allow-list; fanotify_mark is, for
    /// [`ExecGuard::mark`]). Errors: a kernel without
    /// `CONFIG_FANOTIFY_ACCESS_PERMISSIONS`, or no CAP_SYS_ADMIN.
    pub(crate) fn init() -> io::Result<Self> {
        let fan = Fanotify::init(
            InitFlags::FAN_CLASS_CONTENT | InitFlags::FAN_CLOEXEC | InitFlags::FAN_UNLIMITED_QUEUE,
            EventFFlags::O_RDONLY | EventFFlags::O_LARGEFILE | EventFFlags::O_CLOEXEC,
        )
        .map_err(|e| io::Error::other(format!("fanotify_init: {e}")))?;
        Ok(ExecGuard {
            fan,
            asking: AtomicUsize::new(0),
        })
    }

    /// The group's fd.
    pub(crate) fn fanotify(&self) -> BorrowedFd<'_> {
        self.fan.as_fd()
    }

    /// Marks every mount of the container whose init is host pid `pid`
    /// (the mount points of its `/proc/PID/mountinfo`, reached through its
    /// `/proc/PID/root`, so the container's own mounts are marked, not the
    /// host's); the number marked. Called before the init's exec: the
    /// container's mounts are all made by then, and it may make no more.
    pub(crate) fn mark(&self, pid: i32) -> io::Result<usize> {
        let info = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))?;
        let root = std::fs::File::open(format!("/proc/{pid}/root"))?;
        let mut marked = 0;
        for point in info.lines().filter_map(|l| l.split(' ').nth(4)) {
            let rel = unescape(point.trim_start_matches('/'));
            let rel = if rel.is_empty() { ".".to_string() } else { rel };
            // A mount point hidden by another mount is not reachable: its
            // files are not either.
            if self
                .fan
                .mark(
                    MarkFlags::FAN_MARK_ADD | MarkFlags::FAN_MARK_MOUNT,
                    MaskFlags::FAN_OPEN_EXEC_PERM,
                    Some(root.as_raw_fd()),
                    Some(rel.as_str()),
                )
                .is_ok()
            {
                marked += 1;
            }
        }
        if marked == 0 {
            return Err(io::Error::other("no mount of the container could be marked"));
        }
        Ok(marked)
    }

    /// Serves the group on a thread of its own: each exec of a file a
    /// `deny` rule covers is refused and recorded, every other allowed.
    pub(crate) fn serve(self, sup: Arc<Supervisor>) -> io::Result<()> {
        let guard = Arc::new(self);
        std::thread::Builder::new()
            .name("exec-guard".into())
            .stack_size(256 * 1024)
            .spawn(move || loop {
                let events = match guard.fan.read_events() {
                    Ok(e) => e,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => {
                        sup.audit
                            .record(0, "supervisor", &format!("exec guard: {e}"), Decision::Event, "error");
                        return;
                    }
                };
                for ev in events {
                    if ev.fd().is_none() || !ev.mask().contains(MaskFlags::FAN_OPEN_EXEC_PERM) {
                        continue;
                    }
                    decide(&guard, &sup, ev);
                }
            })
            .map(drop)
    }
}

/// Decides the exec held as `ev` (a `FAN_OPEN_EXEC_PERM` event with its
/// fd): by the path rules, or for an `ask` rule by the decision program,
/// whose answer is waited for on a thread of its own so that the
/// container's other execs go on meanwhile.
fn decide(guard: &Arc<ExecGuard>, sup: &Arc<Supervisor>, ev: FanotifyEvent) {
    let Some(fd) = ev.fd() else { return };
    let pid = ev.pid();
    let path = container_path(fd, pid);
    let policy = sup.policy();
    let allow = match path.as_deref().map(|p| policy.paths.access(p)) {
        Some(PathAccess::Ask) => {
            let path = path.unwrap_or_default();
            let q = ask::path_question(sup, pid, "execve", &path);
            if let Some(a) = sup.asker.remembered(&q) {
                let allow = a == ask::Answer::Allow;
                record(sup, pid, &path, allow, "remembered", &q.rule);
                answer_asked(sup, &guard.fan, fd, pid, allow);
                return;
            }
            // One thread per question, at most MAX_BLOCKING at once (each
            // holds one of the container's processes in its exec).
            if guard.asking.fetch_add(1, Ordering::SeqCst) >= super::MAX_BLOCKING {
                guard.asking.fetch_sub(1, Ordering::SeqCst);
                record(sup, pid, &path, false, "too many questions at once", &q.rule);
                answer(&guard.fan, fd, false);
                return;
            }
            let held = Arc::new(std::sync::Mutex::new(Some(ev)));
            let (g, s, h) = (Arc::clone(guard), Arc::clone(sup), Arc::clone(&held));
            let asked = std::thread::Builder::new()
                .name("exec-ask".into())
                .stack_size(256 * 1024)
                .spawn(move || {
                    let mut q = q;
                    q.command = ask::command_of(pid);
                    let (a, how) = s.asker.ask(&q);
                    let allow = a == ask::Answer::Allow;
                    record(&s, pid, &path, allow, &how, &q.rule);
                    if let Some(ev) = h.lock().unwrap_or_else(|e| e.into_inner()).take() {
                        if let Some(fd) = ev.fd() {
                            answer_asked(&s, &g.fan, fd, pid, allow);
                        }
                    }
                    g.asking.fetch_sub(1, Ordering::SeqCst);
                });
            if asked.is_err() {
                // No thread to wait on: the exec is refused, as a
                // question without an answer is.
                guard.asking.fetch_sub(1, Ordering::SeqCst);
                if let Some(ev) = held.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    if let Some(fd) = ev.fd() {
                        answer(&guard.fan, fd, false);
                    }
                }
            }
            return;
        }
        Some(PathAccess::Deny) => false,
        Some(_) => true,
        // A file whose path in the container cannot be told: no rule can
        // be said to allow it.
        None => !policy.paths.refuses_some(),
    };
    if !allow {
        let shown = path.as_deref().unwrap_or("(a file whose path cannot be told)");
        let rule = path.as_deref().and_then(|p| policy.explain_path(p));
        sup.audit
            .record_by(pid, "execve", shown, Decision::Deny, "EPERM", rule.as_deref());
    }
    answer(&guard.fan, fd, allow);
}

/// The trail's record of an asked exec: allowed, or refused with EPERM
/// (fanotify's only refusal), and how the answer came.
fn record(sup: &Supervisor, pid: i32, path: &str, allow: bool, how: &str, rule: &str) {
    let (action, result) = if allow {
        (Decision::Allow, format!("{how}: exec"))
    } else {
        (Decision::Deny, format!("{how}: EPERM"))
    };
    sup.audit.record_by(pid, "execve", path, action, &result, Some(rule));
}

/// How many approved asked execs [`Supervisor::asked_execs`] keeps for
/// the ptrace platform's exec stop (which takes each at once).
pub(crate) const APPROVED: usize = 1024;

/// Answers the asked exec of host pid `pid` held as `fd`; an allowed one
/// is noted first for the ptrace platform's exec stop ([`asked_allowed`]).
fn answer_asked(sup: &Supervisor, fan: &Fanotify, fd: BorrowedFd<'_>, pid: i32, allow: bool) {
    if allow {
        let mut approved = sup.asked_execs.lock().unwrap_or_else(|e| e.into_inner());
        if approved.len() >= APPROVED {
            approved.pop_front();
        }
        approved.push_back(pid);
    }
    answer(fan, fd, allow);
}

/// Whether the exec host pid `pid` just made of a file an `ask` rule
/// covers was allowed by the decision program through the guard; takes
/// the approval (one per exec).
pub(crate) fn asked_allowed(sup: &Supervisor, pid: i32) -> bool {
    let mut approved = sup.asked_execs.lock().unwrap_or_else(|e| e.into_inner());
    match approved.iter().position(|&p| p == pid) {
        Some(i) => approved.remove(i).is_some(),
        None => false,
    }
}

/// Answers the exec held as `fd`.
fn answer(fan: &Fanotify, fd: BorrowedFd<'_>, allow: bool) {
    let r = if allow { Response::FAN_ALLOW } else { Response::FAN_DENY };
    let _ = fan.write_response(FanotifyResponse::new(fd, r));
}

/// The path in the container of the file open as `fd`, which host pid
/// `pid` is executing: the path the kernel gives the open file (from the
/// root of the container's mount namespace), kept only when it leads to
/// that same file from the process's own root.
fn container_path(fd: BorrowedFd<'_>, pid: i32) -> Option<String> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let path = link.to_str()?.to_string();
    if !path.starts_with('/') {
        return None;
    }
    let file = nix::sys::stat::fstat(fd.as_raw_fd()).ok()?;
    let root = std::fs::File::open(format!("/proc/{pid}/root")).ok()?;
    let c = std::ffi::CString::new(path.as_bytes()).ok()?;
    let there = crate::sys::openat2(
        root.as_fd(),
        &c,
        (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
        0,
        libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS,
    )
    .ok()?;
    let st = nix::sys::stat::fstat(there.as_raw_fd()).ok()?;
    (st.st_dev == file.st_dev && st.st_ino == file.st_ino).then_some(path)
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let n = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(n);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape("work/my\\040dir"), "work/my dir");
        assert_eq!(unescape("a\\134b"), "a\\b");
        assert_eq!(unescape("plain"), "plain");
        assert_eq!(unescape("end\\04"), "end\\04", "a cut escape stays");
    }
}
