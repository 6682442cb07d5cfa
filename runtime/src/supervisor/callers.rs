//! What the supervisor keeps about the threads that call into it, from
//! one call to the next: an open `/proc/<tid>/status` (the caller's
//! credentials cost a pread(2) instead of a path walk, an open and a
//! close) and, when the policy rules out changing them, the caller's user
//! namespace check and root directory.
//!
//! Entries are bound to tasks, not to numbers. A procfs fd stays bound to
//! the task it was opened for (its `struct pid`): once that task is gone,
//! reads fail with ESRCH, and no later task reusing the number can be read
//! through it. Every lookup starts with that read (it also yields the
//! credentials, which are never kept), so an entry that answers belongs to
//! the live task with that tid: the caller, which is blocked in its call.
//!
//! A thread's root directory changes only by chroot(2), pivot_root(2) or
//! setns(2), and its user namespace only by unshare(2) or setns(2) (clone
//! makes a new task, with a new entry). [`pin`] is told at start whether
//! the policy denies all of those outright ([`Policy::pins_root`],
//! [`Policy::pins_user_namespace`]); only then are they kept. Otherwise
//! both are read anew on every call, as before.
//!
//! [`Policy::pins_root`]: crate::policy::Policy::pins_root
//! [`Policy::pins_user_namespace`]: crate::policy::Policy::pins_user_namespace

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::creds::Creds;
use super::syscalls::path::{open_root, Root};

/// Which listener a lookup comes from: a task calls through one listener
/// all its life (its filter's), so when that listener hangs up its
/// entries can go. 0: none (the ptrace platform, which forgets a tid when
/// the tracee exits).
pub type Owner = u64;

/// Threads whose entries are kept (the oldest is dropped beyond this).
const KEPT: usize = 64;

static ROOT_PINNED: AtomicBool = AtomicBool::new(false);
static USERNS_PINNED: AtomicBool = AtomicBool::new(false);

/// Records what the policy rules out (see the module docs). Called once,
/// at the supervisor's start.
pub fn pin(user_namespace: bool, root: bool) {
    USERNS_PINNED.store(user_namespace, Ordering::SeqCst);
    ROOT_PINNED.store(root, Ordering::SeqCst);
}

struct Entry {
    /// The listener the entry was made for ([`Owner`]), 0 for none.
    owner: u64,
    status: File,
    /// Whether the task shares the supervisor's user namespace (kept only
    /// when pinned).
    same_userns: Option<bool>,
    /// The task's root (kept only when pinned).
    root: Option<Arc<Root>>,
}

#[derive(Default)]
struct Table {
    entries: HashMap<i32, Entry>,
    /// Tids in insertion order, for eviction.
    order: VecDeque<i32>,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// A caller as the handlers need it.
pub struct Caller {
    /// Its filesystem credentials, read on this call.
    pub creds: Creds,
    /// Its root directory.
    pub root: Arc<Root>,
}

/// The credentials of host thread `tid` (capabilities cleared when it lives
/// in another user namespace than the supervisor).
///
/// Errors: the thread is gone (ESRCH, ENOENT) or its status is unreadable.
pub fn creds(tid: i32, owner: Owner) -> io::Result<Creds> {
    lookup(tid, owner, false).map(|(c, _)| c)
}

/// The credentials and root directory of host thread `tid`.
///
/// Errors: as [`creds`]; the root cannot be opened (the thread exited).
pub fn caller(tid: i32, owner: Owner) -> io::Result<Caller> {
    let (creds, root) = lookup(tid, owner, true)?;
    let root = root.ok_or_else(|| io::Error::other("no root looked up"))?;
    Ok(Caller { creds, root })
}

fn lookup(tid: i32, owner: Owner, want_root: bool) -> io::Result<(Creds, Option<Arc<Root>>)> {
    use std::io::Read;
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 8192];
    let mut guard = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let table = guard.get_or_insert_with(Table::default);
    let mut n = 0;
    if let Some(e) = table.entries.get(&tid) {
        match e.status.read_at(&mut buf, 0) {
            Ok(len) if len > 0 => n = len,
            // ESRCH (or nothing): an earlier task that had this tid.
            _ => drop_entry(table, tid),
        }
    }
    if n == 0 {
        let mut status = File::open(format!("/proc/{tid}/status"))?;
        n = status.read(&mut buf)?;
        if table.order.len() >= KEPT {
            if let Some(old) = table.order.pop_front() {
                table.entries.remove(&old);
            }
        }
        table.order.push_back(tid);
        table.entries.insert(
            tid,
            Entry {
                owner,
                status,
                same_userns: None,
                root: None,
            },
        );
    }
    let text = std::str::from_utf8(&buf[..n]).map_err(|_| io::Error::other("unparsable /proc status"))?;
    let mut creds = Creds::parse(text).ok_or_else(|| io::Error::other("unparsable /proc status"))?;
    let entry = table.entries.get_mut(&tid).expect("entry inserted above");

    let same = match entry.same_userns {
        Some(s) => s,
        None => {
            let s = same_userns(tid)?;
            if USERNS_PINNED.load(Ordering::Relaxed) {
                entry.same_userns = Some(s);
            }
            s
        }
    };
    if !same {
        // Its capabilities only apply inside its own namespace.
        creds.cap_eff = 0;
    }

    let root = match (&entry.root, want_root) {
        (_, false) => None,
        (Some(r), true) => Some(Arc::clone(r)),
        (None, true) => {
            let r = Arc::new(Root::new(open_root(tid)?));
            if ROOT_PINNED.load(Ordering::Relaxed) {
                entry.root = Some(Arc::clone(&r));
            }
            Some(r)
        }
    };
    Ok((creds, root))
}

fn drop_entry(table: &mut Table, tid: i32) {
    table.entries.remove(&tid);
    table.order.retain(|&t| t != tid);
}

/// Drops what is kept about thread `tid` (it exited).
pub fn forget(tid: i32) {
    let mut guard = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(table) = guard.as_mut() {
        drop_entry(table, tid);
    }
}

/// Drops what is kept about the callers of listener `owner` (non-zero;
/// the listener hung up: none of them will call through it again, even if
/// the kernel still shows one exiting) and about every thread that has
/// exited (gone, or a zombie: it makes no more calls, and its tid is not
/// reused before it is reaped), so the fds kept come back to what the live
/// callers need. Costs one pread per entry.
pub fn sweep(owner: u64) {
    use std::os::unix::fs::FileExt;
    let mut guard = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(table) = guard.as_mut() else { return };
    let mut buf = [0u8; 512];
    let dead: Vec<i32> = table
        .entries
        .iter()
        .filter(|(_, e)| {
            (owner != 0 && e.owner == owner)
                || match e.status.read_at(&mut buf, 0) {
                    Ok(n) if n > 0 => exited(&buf[..n]),
                    _ => true,
                }
        })
        .map(|(&tid, _)| tid)
        .collect();
    for tid in dead {
        drop_entry(table, tid);
    }
}

/// Whether a status text says the task has exited (`State:` Z or X).
fn exited(status: &[u8]) -> bool {
    let text = String::from_utf8_lossy(status);
    text.lines()
        .find_map(|l| l.strip_prefix("State:"))
        .map(|s| matches!(s.trim_start().chars().next(), Some('Z') | Some('X')))
        .unwrap_or(false)
}

/// Whether `tid` lives in the supervisor's user namespace.
fn same_userns(tid: i32) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    static OURS: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
    let ours = match OURS.get() {
        Some(o) => *o,
        None => {
            let m = std::fs::metadata("/proc/self/ns/user")?;
            *OURS.get_or_init(|| (m.dev(), m.ino()))
        }
    };
    let theirs = std::fs::metadata(format!("/proc/{tid}/ns/user"))?;
    Ok((theirs.dev(), theirs.ino()) == ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zombies_count_as_exited() {
        assert!(exited(b"Name:\tsh\nUmask:\t0022\nState:\tZ (zombie)\nTgid:\t7\n"));
        assert!(exited(b"Name:\tsh\nState:\tX (dead)\n"));
        assert!(!exited(b"Name:\tsh\nUmask:\t0022\nState:\tS (sleeping)\n"));
        assert!(!exited(b"Name:\tsh\n"));
    }

    #[test]
    fn an_entry_answers_for_its_own_task_only() {
        // This thread, twice: the second lookup reads the kept file.
        let me = nix::unistd::gettid().as_raw();
        let a = creds(me, 0).unwrap();
        assert_eq!(creds(me, 0).unwrap(), a);
        // A thread that exits: its kept file no longer reads, so a lookup
        // of the same number fails instead of answering for it.
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || tx.send(nix::unistd::gettid().as_raw()).unwrap());
        let tid = rx.recv().unwrap();
        creds(tid, 0).ok();
        t.join().unwrap();
        // A sweep drops the dead thread's entry (and its fd) ...
        let kept = |tid| {
            TABLE
                .lock()
                .unwrap()
                .as_ref()
                .is_some_and(|t| t.entries.contains_key(&tid))
        };
        for _ in 0..100 {
            sweep(0);
            if !kept(tid) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!kept(tid), "a sweep keeps a dead thread's entry");
        // ... and keeps the live one's.
        assert!(kept(me));
        creds(tid, 0).ok();
        // Give the kernel a moment to release the exited thread.
        let mut gone = false;
        for _ in 0..100 {
            if creds(tid, 0).is_err() {
                gone = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(gone, "a dead thread's kept entry still answered");
    }
}
