//! Leave nothing behind: every container under every runtime root the
//! harness made, stray processes, cgroups and the temporary directory, on
//! success, on failure, on a panic and on SIGINT/SIGTERM/SIGHUP.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::{proc, procfs};

/// Set once a signal asked us to stop: no new container is started.
pub static STOP: AtomicBool = AtomicBool::new(false);

#[derive(Default)]
struct Registry {
    roots: Vec<(PathBuf, PathBuf)>,
    cgroup_parent: Option<String>,
    tmp: Option<PathBuf>,
}

static REG: Mutex<Registry> = Mutex::new(Registry {
    roots: Vec::new(),
    cgroup_parent: None,
    tmp: None,
});

/// Remembers a runtime state root (`bin --root root`).
pub fn register_root(bin: &Path, root: &Path) {
    let mut r = REG.lock().unwrap();
    if !r.roots.iter().any(|(b, p)| b == bin && p == root) {
        r.roots.push((bin.to_path_buf(), root.to_path_buf()));
    }
}

/// Remembers the cgroup directory name every container lives under.
pub fn set_cgroup_parent(name: &str) {
    REG.lock().unwrap().cgroup_parent = Some(name.to_string());
}

/// Remembers the temporary directory.
pub fn set_tmp(dir: &Path) {
    REG.lock().unwrap().tmp = Some(dir.to_path_buf());
}

/// Container ids present in a runtime root (runc, crun and cordon keep one
/// directory per container; cordon's own metadata lives in `.cordon/<id>`).
pub fn container_ids(root: &Path) -> Vec<String> {
    let mut ids = Vec::new();
    for dir in [root.to_path_buf(), root.join(".cordon")] {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                // Container ids are [A-Za-z0-9_+-.]; cordon keeps other
                // entries there too (`@lower`, for its binary's view).
                let id_like = name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_+-.".contains(&b));
                if id_like && !name.starts_with('.') && e.path().is_dir() && !ids.contains(&name) {
                    ids.push(name);
                }
            }
        }
    }
    ids.sort();
    ids
}

/// Force-deletes every container in `root`; returns the ids found.
pub fn clean_root(bin: &Path, root: &Path) -> Vec<String> {
    let ids = container_ids(root);
    for id in &ids {
        let mut c = std::process::Command::new(bin);
        c.arg("--root").arg(root).args(["delete", "--force", id]);
        let _ = proc::run(&mut c, Duration::from_secs(30));
    }
    ids
}

/// Kills processes that belong to this harness's containers and runtimes:
/// their command line names our temporary directory, or they live in our
/// cgroups. Returns how many were signalled.
pub fn kill_strays(tmp: Option<&Path>, cgroup_parent: Option<&str>) -> usize {
    let me = std::process::id() as i32;
    let tmp = tmp.map(|t| t.to_string_lossy().into_owned());
    let mut n = 0;
    for p in procfs::processes() {
        if p.pid == me {
            continue;
        }
        let by_cmd = tmp.as_deref().is_some_and(|t| p.cmdline.iter().any(|a| a.contains(t)));
        let by_cg = cgroup_parent.is_some_and(|cg| procfs::in_cgroup(p.pid, &format!("/{cg}/")));
        if by_cmd || by_cg {
            // SAFETY: plain kill(2); the pid was just read from /proc and is
            // one of ours (see above).
            unsafe { libc::kill(p.pid, libc::SIGKILL) };
            n += 1;
        }
    }
    n
}

/// Removes `/sys/fs/cgroup/*/<parent>` trees (deepest first, rmdir only:
/// a cgroup that still has processes stays and is reported).
pub fn remove_cgroups(parent: &str) -> Vec<String> {
    let mut left = Vec::new();
    let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") else {
        return left;
    };
    let mut hierarchies: Vec<PathBuf> = rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    // cgroup v2 mounted directly on /sys/fs/cgroup.
    hierarchies.push(PathBuf::from("/sys/fs/cgroup"));
    for h in hierarchies {
        let top = h.join(parent);
        if !top.is_dir() {
            continue;
        }
        for attempt in 0..20 {
            rmdir_tree(&top);
            if !top.exists() {
                break;
            }
            if attempt == 19 {
                left.push(top.display().to_string());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    left
}

fn rmdir_tree(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                rmdir_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Held for the whole of [`cleanup_all`]: a second caller (the main thread
/// while the signal thread cleans, or the reverse) waits until the first is
/// done, so the process never exits half-way through a cleanup.
static CLEANING: Mutex<()> = Mutex::new(());

/// Everything, once. Returns what could not be cleaned.
pub fn cleanup_all() -> Vec<String> {
    let _guard = CLEANING.lock().unwrap_or_else(|e| e.into_inner());
    let (roots, cg, tmp) = {
        let mut r = REG.lock().unwrap();
        (std::mem::take(&mut r.roots), r.cgroup_parent.take(), r.tmp.take())
    };
    let mut problems = Vec::new();
    // Runtime commands still in flight (after a signal) would create
    // containers behind our back: stop them, and whatever runs in our
    // cgroups, first.
    if kill_strays(tmp.as_deref(), cg.as_deref()) > 0 {
        std::thread::sleep(Duration::from_millis(300));
    }
    for (bin, root) in &roots {
        clean_root(bin, root);
        let left = container_ids(root);
        if !left.is_empty() {
            problems.push(format!(
                "{}: containers left after delete --force: {left:?}",
                root.display()
            ));
        }
    }
    // Supervisors, watchdogs, container processes, hung runtime commands.
    for _ in 0..3 {
        if kill_strays(tmp.as_deref(), cg.as_deref()) == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = proc::settle_orphans(Duration::from_millis(500));
    if let Some(cg) = &cg {
        for c in remove_cgroups(cg) {
            problems.push(format!("cgroup left: {c}"));
        }
    }
    if let Some(tmp) = &tmp {
        if let Err(e) = std::fs::remove_dir_all(tmp) {
            if tmp.exists() {
                problems.push(format!("remove {}: {e}", tmp.display()));
            }
        }
    }
    problems
}

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread (and so in every thread
/// started after) and handles them on a dedicated thread: clean up, exit.
/// Children get a clean signal mask from `std::process::Command`.
pub fn install_signal_handler() -> anyhow::Result<()> {
    // SAFETY: an all-zero sigset_t is valid storage for sigemptyset.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid sigset_t; the signal numbers are valid.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
    }
    // SAFETY: set is initialised; the old mask is not wanted.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        anyhow::bail!("pthread_sigmask: {}", std::io::Error::from_raw_os_error(r));
    }
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        let mut sig = 0;
        // SAFETY: set is initialised and blocked in every thread; sig is a
        // valid out-pointer.
        if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
            return;
        }
        STOP.store(true, Ordering::SeqCst);
        eprintln!("cordon-bench: signal {sig}: cleaning up");
        for p in cleanup_all() {
            eprintln!("cordon-bench: cleanup: {p}");
        }
        std::process::exit(128 + sig);
    })?;
    Ok(())
}
