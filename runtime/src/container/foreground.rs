//! Waiting for a foreground process (`run` without `--detach`, `exec`
//! without `--detach`) the way runc does: every signal the runtime gets is
//! forwarded to the process, and the exit status is returned (128+N when it
//! was killed by signal N).

use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// Blocks every signal in the calling thread. Call before the process can
/// exit (before `start`), so its SIGCHLD is kept pending, not lost.
pub fn block_signals() -> nix::Result<SigSet> {
    let all = SigSet::all();
    all.thread_block()?;
    Ok(all)
}

/// Reaps children until `pid` exits; forwards other signals to it.
/// Returns its exit code, or 128+N if signal N killed it.
pub fn wait(pid: Pid, signals: &SigSet) -> nix::Result<i32> {
    loop {
        // Reap first: the process may have exited before we got here.
        if let Some(code) = reap(pid)? {
            return Ok(code);
        }
        match signals.wait()? {
            Signal::SIGCHLD => {}
            Signal::SIGURG | Signal::SIGWINCH => {}
            sig => {
                let _ = kill(pid, sig);
            }
        }
    }
}

fn reap(pid: Pid) -> nix::Result<Option<i32>> {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(p, code)) if p == pid => return Ok(Some(code)),
            Ok(WaitStatus::Signaled(p, sig, _)) if p == pid => return Ok(Some(128 + sig as i32)),
            Ok(WaitStatus::StillAlive) => return Ok(None),
            Ok(_) => continue,
            Err(nix::errno::Errno::ECHILD) => return Ok(Some(255)),
            Err(e) => return Err(e),
        }
    }
}
