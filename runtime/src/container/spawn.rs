//! The supervisor of a container: its platform chosen, its process
//! started (`cordon supervise`) and waited for until it is ready.

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{io, Error, Result};
use crate::policy::Policy;
use crate::sys::timings;

/// The platform a container runs on: the one asked for, except that
/// seccomp-notify falls back to ptrace when this process cannot create a
/// notify listener (its descendants, the container's processes, inherit
/// its filters and could not either). Returns the platform and, after a
/// fallback, why.
pub(super) fn choose_platform(name: &str, policy: &Policy) -> Result<(crate::config::Platform, Option<String>)> {
    use crate::config::Platform;
    let asked = Platform::parse(name, "platform")?;
    if asked == Platform::Ptrace || !policy.needs_supervisor() {
        return Ok((asked, None));
    }
    match crate::sys::ptrace::probe_notify() {
        Ok(()) => Ok((asked, None)),
        Err(e) => {
            let why = format!("cannot create a seccomp notify listener: {e}");
            tracing::warn!("{why}; falling back to the ptrace platform");
            Ok((Platform::Ptrace, Some(why)))
        }
    }
}

/// A supervisor started by [`spawn_supervisor`], not known to be ready yet.
pub(super) struct Starting {
    pub(super) pid: i32,
    child: std::process::Child,
    ready: OwnedFd,
    log_path: PathBuf,
}

impl Starting {
    /// Waits (up to 10 s) for the supervisor's "R"; on anything else kills
    /// it and returns the last line of its log as the reason.
    pub(super) fn wait_ready(mut self, id: &str) -> Result<()> {
        let mut buf = [0u8; 1];
        let ok = wait_readable(&self.ready, 10_000)
            && std::fs::File::from(self.ready)
                .read(&mut buf)
                .map(|n| n == 1 && buf[0] == b'R')
                .unwrap_or(false);
        if !ok {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let log = std::fs::read_to_string(&self.log_path).unwrap_or_default();
            let line = log
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no reason given")
                .to_string();
            return Err(Error::Supervisor {
                id: id.to_string(),
                reason: super::SupervisorStart::Log(line),
            });
        }
        // The child is reaped by whoever inherits it (an engine's shim is a
        // subreaper); forget the handle without waiting.
        std::mem::forget(self.child);
        Ok(())
    }
}

/// What the supervisor is given besides its policy: the names the
/// emulated uname reports, its platform (and why it fell back to it), the
/// enforcement plan of the path rules, the decision program of `ask`
/// rules.
pub(super) struct Settings<'a> {
    pub(super) hostname: &'a str,
    pub(super) domainname: &'a str,
    pub(super) platform: crate::config::Platform,
    pub(super) fallback: Option<&'a str>,
    /// Where each path rule is enforced: whether file syscalls come to the
    /// supervisor at all, and the line the trail shows.
    pub(super) plan: &'a crate::policy::levels::Plan,
    /// The runtime config's decision program for `ask` rules.
    pub(super) ask: &'a crate::config::Ask,
}

/// Binds the supervisor's socket in `dir` and starts `cordon supervise`
/// for container `id` on it (fd 4), with a readiness pipe (fd 3), in its
/// own session with stdio on /dev/null and its log and no other fd; does
/// not wait for it ([`Starting::wait_ready`]).
pub(super) fn spawn_supervisor(id: &str, dir: &Path, policy: &str, given: Settings<'_>) -> Result<Starting> {
    let (ready_r, ready_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error::Io {
        what: "pipe".into(),
        source: e.into(),
    })?;
    let listener = crate::supervisor::bind(dir).map_err(|e| Error::Supervisor {
        id: id.to_string(),
        reason: e.into(),
    })?;
    let log_path = dir.join(crate::layout::SUPERVISOR_LOG);
    let log = std::fs::File::create(&log_path).map_err(io("create supervisor.log"))?;
    let exe = match std::env::var_os(super::BINARY_ENV) {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe().map_err(io("find the cordon binary"))?,
    };
    let args = crate::supervisor::SuperviseArgs {
        container_id: id.to_string(),
        dir: dir.to_path_buf(),
        policy: policy.to_string(),
        hostname: given.hostname.to_string(),
        ready_fd: Some(3),
        listen_fd: Some(4),
        platform: given.platform.name().to_string(),
        fallback: given.fallback.map(str::to_string),
        enforcement: given.plan.describe(),
        kernel_paths: given.plan.all_kernel,
        ask_socket: given.ask.socket.clone(),
        ask_timeout_ms: given.ask.timeout_ms,
        kernel_audit: given.plan.landlock.as_ref().is_some_and(|l| l.log),
    };
    let mut cmd = Command::new(exe);
    cmd.arg(crate::supervisor::SuperviseArgs::COMMAND)
        .args(args.to_args())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env(crate::config::DOMAINNAME_ENV, given.domainname)
        .envs(timings::env_for_child());
    crate::sys::process::pre_exec_fds_3_4(&mut cmd, ready_w.as_fd(), listener.as_fd())
        .map_err(io("start the supervisor"))?;
    let child = cmd.spawn().map_err(io("start the supervisor"))?;
    // The command holds copies of both fds.
    drop(cmd);
    drop(ready_w);
    drop(listener);
    Ok(Starting {
        pid: child.id() as i32,
        child,
        ready: ready_r,
        log_path,
    })
}

fn wait_readable(fd: &OwnedFd, timeout_ms: u16) -> bool {
    use std::os::fd::AsFd;
    let mut pfd = [nix::poll::PollFd::new(fd.as_fd(), nix::poll::PollFlags::POLLIN)];
    matches!(nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(timeout_ms)), Ok(n) if n > 0)
}
