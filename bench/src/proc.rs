//! Running commands: every child of the harness is reaped by one reaper
//! thread with `wait4(-1)`, which also collects the processes orphaned to
//! us (the harness is a child subreaper, like an engine's shim), with their
//! resource usage (peak RSS).
//!
//! Never use `std::process::Command::{status,output,wait}` in this crate:
//! the reaper would steal the exit status.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// How a process ended, seen by the reaper.
#[derive(Debug, Clone, Copy)]
pub struct Exit {
    /// Exit code, or 128+N when killed by signal N.
    pub code: i32,
    /// Peak RSS in KiB of the process and its reaped descendants.
    pub maxrss_kib: u64,
    /// When the reaper saw it.
    pub at: Instant,
}

#[derive(Default)]
struct State {
    exited: HashMap<i32, Exit>,
    spawned: HashSet<i32>,
    generation: u64,
}

struct Reaper {
    state: Mutex<State>,
    cv: Condvar,
}

static REAPER: OnceLock<Reaper> = OnceLock::new();

fn reaper() -> &'static Reaper {
    REAPER.get().expect("proc::init_reaper not called")
}

/// Makes the harness a child subreaper and starts the reaper thread.
pub fn init_reaper() -> anyhow::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        bail!("prctl(PR_SET_CHILD_SUBREAPER): {}", std::io::Error::last_os_error());
    }
    REAPER
        .set(Reaper {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        })
        .map_err(|_| anyhow::anyhow!("reaper started twice"))?;
    std::thread::Builder::new()
        .name("reaper".into())
        .spawn(reap_loop)
        .context("start the reaper thread")?;
    Ok(())
}

fn reap_loop() {
    let r = reaper();
    loop {
        let generation = r.state.lock().unwrap().generation;
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value to be overwritten.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: status and ru are valid out-pointers for wait4.
        let pid = unsafe { libc::wait4(-1, &mut status, libc::__WALL, &mut ru) };
        let at = Instant::now();
        if pid > 0 {
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else if libc::WIFSIGNALED(status) {
                128 + libc::WTERMSIG(status)
            } else {
                continue;
            };
            let mut st = r.state.lock().unwrap();
            st.exited.insert(
                pid,
                Exit {
                    code,
                    maxrss_kib: ru.ru_maxrss.max(0) as u64,
                    at,
                },
            );
            r.cv.notify_all();
            continue;
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        // ECHILD: nothing to wait for until the next spawn (orphans can
        // only come from descendants, which only exist after a spawn).
        let st = r.state.lock().unwrap();
        let _ =
            r.cv.wait_timeout_while(st, Duration::from_millis(200), |s| s.generation == generation);
    }
}

/// Registers a freshly spawned child and wakes the reaper.
fn register(pid: i32) {
    let r = reaper();
    let mut st = r.state.lock().unwrap();
    st.spawned.insert(pid);
    st.generation += 1;
    r.cv.notify_all();
}

/// Waits for the exit of spawned child `pid`; on timeout kills it (SIGKILL)
/// and still waits for it, then returns `None`.
fn wait_for(pid: i32, timeout: Duration) -> (Option<Exit>, Exit) {
    let r = reaper();
    let deadline = Instant::now() + timeout;
    let mut st = r.state.lock().unwrap();
    let mut killed = false;
    loop {
        if let Some(e) = st.exited.remove(&pid) {
            st.spawned.remove(&pid);
            return (if killed { None } else { Some(e) }, e);
        }
        let now = Instant::now();
        if !killed && now >= deadline {
            // SAFETY: plain kill(2) of our own, not yet reaped, child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
        }
        let wait = if killed {
            Duration::from_millis(100)
        } else {
            deadline - now
        };
        st = r.cv.wait_timeout(st, wait).unwrap().0;
    }
}

/// Takes the exits of processes that were orphaned to the harness (not
/// spawned by it). Call only when no other thread is spawning.
pub fn take_orphans() -> Vec<(i32, Exit)> {
    let r = reaper();
    let mut st = r.state.lock().unwrap();
    let spawned = st.spawned.clone();
    let mut out = Vec::new();
    st.exited.retain(|pid, e| {
        if spawned.contains(pid) {
            true
        } else {
            out.push((*pid, *e));
            false
        }
    });
    out
}

/// Waits up to `timeout` until the harness has no live children besides
/// the ones other threads spawned, collecting orphans as they exit. Returns
/// the orphans and the pids still alive at the deadline.
pub fn settle_orphans(timeout: Duration) -> (Vec<(i32, Exit)>, Vec<i32>) {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    loop {
        got.extend(take_orphans());
        let alive = live_children();
        if alive.is_empty() || Instant::now() >= deadline {
            return (got, alive);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Our live child processes (from /proc), excluding zombies already reaped.
pub fn live_children() -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may contain spaces, split after ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().unwrap_or("");
        let ppid = f.next().and_then(|p| p.parse::<i32>().ok()).unwrap_or(0);
        if ppid == me && state != "Z" {
            out.push(pid);
        }
    }
    out
}

/// What a command did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Exit code (128+N for signal N); `None` when it timed out and was killed.
    pub code: Option<i32>,
    /// Wall time from just before spawn to the reaper seeing the exit.
    pub elapsed: Duration,
    /// Peak RSS (KiB) of the process and its reaped descendants.
    pub maxrss_kib: u64,
    /// Captured stdout.
    pub stdout: String,
    /// Captured stderr.
    pub stderr: String,
}

impl Outcome {
    /// Exited 0.
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// A one-line description of a failure, for reports.
    pub fn failure(&self, what: &str) -> String {
        let how = match self.code {
            None => "timed out".to_string(),
            Some(c) => format!("exit {c}"),
        };
        let err = self.stderr.trim();
        let err: String = err.lines().rev().take(2).collect::<Vec<_>>().join(" | ");
        let err: String = err.chars().take(300).collect();
        format!("{what}: {how}: {err}")
    }
}

static SCRATCH: OnceLock<PathBuf> = OnceLock::new();
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Sets the directory for captured output files.
pub fn set_scratch(dir: &Path) {
    let _ = SCRATCH.set(dir.to_path_buf());
}

/// Runs `cmd` with stdin from /dev/null and stdout/stderr captured through
/// files (a container created by it may inherit them and outlive it; a pipe
/// would then never close). Kills it after `timeout`.
pub fn run(cmd: &mut Command, timeout: Duration) -> anyhow::Result<Outcome> {
    let (o, e) = scratch_files()?;
    let out = run_to(cmd, timeout, &o, &e);
    let _ = std::fs::remove_file(&o);
    let _ = std::fs::remove_file(&e);
    out
}

/// Two fresh paths for captured stdout and stderr in the scratch directory.
pub fn scratch_files() -> anyhow::Result<(PathBuf, PathBuf)> {
    let dir = SCRATCH.get().context("proc::set_scratch not called")?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    Ok((dir.join(format!("{n}.out")), dir.join(format!("{n}.err"))))
}

/// [`run`] with stdout and stderr written to the files `o` and `e`, which
/// are left in place (a daemon the command starts may go on writing them).
pub fn run_to(cmd: &mut Command, timeout: Duration, o: &Path, e: &Path) -> anyhow::Result<Outcome> {
    cmd.stdin(Stdio::null())
        .stdout(File::create(o).with_context(|| format!("create {}", o.display()))?)
        .stderr(File::create(e).with_context(|| format!("create {}", e.display()))?);
    let start = Instant::now();
    let child = cmd.spawn().with_context(|| format!("start {}", describe(cmd)))?;
    let pid = child.id() as i32;
    // The reaper owns the exit status; never wait on `child`.
    drop(child);
    register(pid);
    let (exit, raw) = wait_for(pid, timeout);
    let stdout = std::fs::read_to_string(o).unwrap_or_default();
    let stderr = std::fs::read_to_string(e).unwrap_or_default();
    Ok(Outcome {
        code: exit.map(|x| x.code),
        elapsed: raw.at.saturating_duration_since(start),
        maxrss_kib: raw.maxrss_kib,
        stdout,
        stderr,
    })
}

/// Runs `cmd` and fails unless it exits 0.
pub fn run_ok(cmd: &mut Command, timeout: Duration) -> anyhow::Result<Outcome> {
    let what = describe(cmd);
    let out = run(cmd, timeout)?;
    if !out.ok() {
        bail!("{}", out.failure(&what));
    }
    Ok(out)
}

/// `prog arg arg...` for messages.
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// A `Command` for `prog args...`.
pub fn command<S: AsRef<OsStr>>(prog: impl AsRef<OsStr>, args: &[S]) -> Command {
    let mut c = Command::new(prog);
    c.args(args);
    c
}
