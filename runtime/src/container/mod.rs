//! The OCI life cycle (OCI runtime spec, "Runtime and Lifecycle"): create,
//! start, state, kill, delete, exec and the runc extras, on libcontainer,
//! one file per operation (as youki's `container_*.rs`): `create.rs`,
//! `start.rs`, `state.rs` (state, list), `kill.rs`, `delete.rs`,
//! `exec.rs`, `pause.rs` (pause, resume), `update.rs`, `events.rs`,
//! `ps.rs`, and the snapshot operations `checkpoint.rs`, `restore.rs`,
//! `fork.rs`, `diff.rs`. This file holds what they share: the runtime
//! and its state root, cordon's [`Meta`], loading and locking a container.
//! cordon adds, per container, a supervisor and the policy's seccomp filter.
//!
//! The state root's layout (libcontainer's `<root>/<id>/`, cordon's own
//! `<root>/.cordon/<id>/`) is [`crate::layout`]'s.

pub mod bundle_seccomp;
mod checkpoint;
mod create;
mod delete;
mod diff;
mod error;
mod events;
mod exec;
pub mod executor;
pub mod foreground;
mod fork;
mod harden;
mod kill;
pub mod landlock;
pub mod learn;
pub mod mount_ns;
mod pause;
mod plan;
mod policy_update;
mod ps;
pub mod resolver;
mod restore;
pub mod setup_log;
pub mod snapshot;
mod spawn;
mod start;
mod state;
mod update;
pub mod validate;

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use libcontainer::container::{Container, ContainerStatus};
use serde::{Deserialize, Serialize};

pub use create::{CreateOptions, Inherited, StdioFds};
use delete::kill_supervisor;
pub use delete::Keep;
use error::{cgroup, io, lib};
pub use error::{chain, Error, Result, SupervisorStart};
pub use exec::ExecOptions;
pub use plan::plan_for_bundle;
pub use state::StateJson;

use crate::config::RuntimeConfig;

/// Environment variable naming the cordon binary on disk, set before the
/// re-exec from a sealed memfd; the supervisor is started from it.
pub const BINARY_ENV: &str = "CORDON_BINARY";

/// Default state root, as runc's is /run/runc.
pub const DEFAULT_ROOT: &str = "/run/cordon";
use crate::layout::META;
pub use crate::layout::POLICY_FILE;

/// What cordon records about a container beside libcontainer's state.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Meta {
    /// The bundle the user gave (libcontainer may see a shadow copy).
    pub bundle: PathBuf,
    /// Policy name or file.
    pub policy: String,
    /// Platform name.
    pub platform: String,
    /// Host pid of the supervisor, if one runs.
    pub supervisor_pid: Option<i32>,
    /// When that supervisor started (`sys::process::start_time`): names
    /// it while it exits too, when its command line reads empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supervisor_start: Option<u64>,
    /// Why the platform is not the one asked for (a fallback to ptrace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Whether the container's mounts enforce every path rule (the file
    /// syscalls then stay in the kernel; policy/levels.rs).
    #[serde(default)]
    pub kernel_enforced: bool,
    /// With `kernel_enforced`: renames still go to the supervisor (a mount
    /// protects a path of the rootfs or a volume; `Plan::guards_renames`).
    #[serde(default)]
    pub guard_renames: bool,
    /// With `kernel_enforced`: the Landlock ruleset every process of the
    /// container gets before its execve (level 2), if the plan uses one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landlock: Option<crate::policy::landlock::Landlock>,
    /// The plan's one-line description (`Plan::describe`), as the audit
    /// trail's start record has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<String>,
    /// Trace mode: the filter sends the policy's refusals to the
    /// supervisor, which records them (`cordon --trace`).
    #[serde(default)]
    pub trace: bool,
    /// The container's writable layer (`<data_dir>/containers/<id>`), when
    /// its rootfs is an overlay cordon owns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<PathBuf>,
    /// The overlay's lower layer (the bundle's rootfs, resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower: Option<PathBuf>,
    /// The config's `process.noNewPrivileges`: every process gets
    /// no_new_privs (a container created before this was kept had it).
    #[serde(default = "yes")]
    pub no_new_privs: bool,
    /// CAP_SYS_ADMIN was lent to the set-up of every process (effective
    /// and permitted, never bounding), to install the filters without
    /// no_new_privs, and is dropped before execve
    /// ([`super::executor::lend_sys_admin`]).
    #[serde(default)]
    pub lent_sys_admin: bool,
    /// The enforcement level chosen at create (`kernel` or `supervisor`:
    /// `org.cordon.enforcement`, else `kernel`), which a fork keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// Where `delete` writes the policy learned from the run
    /// (`org.cordon.learn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learn: Option<PathBuf>,
    /// The container's cgroup when cordon chose it instead of the
    /// bundle's `linux.cgroupsPath` (a fork of a container whose bundle
    /// names one: its own cgroup next to the parent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroups_path: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

/// Entry point to the life cycle: one state root.
#[derive(Debug, Clone)]
pub struct Runtime {
    /// State root.
    pub root: PathBuf,
    /// Use the systemd cgroup driver.
    pub systemd_cgroup: bool,
    /// The runtime configuration file's values.
    pub config: RuntimeConfig,
}

fn status_str(s: ContainerStatus) -> String {
    s.to_string().to_lowercase()
}

impl Runtime {
    /// A runtime over state root `root` (created 0700 if missing).
    pub fn new(root: &Path, systemd_cgroup: bool) -> Result<Self> {
        std::fs::create_dir_all(root).map_err(io(format!("create root {}", root.display())))?;
        let root = std::fs::canonicalize(root).map_err(io(format!("root {}", root.display())))?;
        Ok(Self {
            root,
            systemd_cgroup,
            config: RuntimeConfig::load()?,
        })
    }

    /// cordon's own directory for container `id`.
    pub fn cordon_dir(&self, id: &str) -> PathBuf {
        cordon_dir(&self.root, id)
    }

    /// The config.json container `c` was built from: cordon's copy of it
    /// when create changed the config, else the bundle's.
    pub(crate) fn built_config(c: &Container) -> PathBuf {
        c.state.config_dir.as_ref().unwrap_or(c.bundle()).join("config.json")
    }

    /// Loads container `id`'s state, refreshed against the live process.
    pub fn load(&self, id: &str) -> Result<Container> {
        validate::id(id)?;
        let dir = self.root.join(id);
        if !dir.join(crate::layout::STATE).exists() {
            return Err(Error::NotFound(id.to_string()));
        }
        let mut c = Container::load(dir).map_err(lib(format!("load state of {id:?}")))?;
        refresh_status(&mut c).map_err(lib(format!("refresh state of {id:?}")))?;
        Ok(c)
    }

    /// Holds an flock(2) on container `id`'s state directory while an
    /// operation runs: libcontainer rewrites state.json in place, so a
    /// concurrent reader (`kill` racing the delete at the end of `run`)
    /// could read a torn file. `None` when the container does not exist.
    fn lock(&self, id: &str, exclusive: bool) -> Option<nix::fcntl::Flock<std::fs::File>> {
        validate::id(id).ok()?;
        let f = std::fs::File::open(self.root.join(id)).ok()?;
        let arg = if exclusive {
            nix::fcntl::FlockArg::LockExclusive
        } else {
            nix::fcntl::FlockArg::LockShared
        };
        nix::fcntl::Flock::lock(f, arg).ok()
    }

    /// cordon's metadata of container `id` (default if missing).
    pub fn meta(&self, id: &str) -> Meta {
        std::fs::read(self.cordon_dir(id).join(META))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn save_meta(&self, id: &str, meta: &Meta) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(meta)?;
        std::fs::write(self.cordon_dir(id).join(META), bytes).map_err(io("write meta.json"))
    }

    fn cgroup_manager(&self, c: &Container) -> Result<libcgroups::common::AnyCgroupManager> {
        let cfg = c.spec().map_err(lib("read container config"))?;
        libcgroups::common::create_cgroup_manager(libcgroups::common::CgroupConfig {
            cgroup_path: cfg.cgroup_path,
            systemd_cgroup: c.systemd(),
            container_name: c.id().to_string(),
        })
        .map_err(cgroup(format!("cgroup of {:?}", c.id())))
    }

    /// Container `id` (see [`Self::load`]), refused with
    /// [`Error::BadState`] naming `op` when it is stopped.
    fn load_live(&self, id: &str, op: &'static str) -> Result<Container> {
        let c = self.load(id)?;
        if c.status() == ContainerStatus::Stopped {
            return Err(Error::BadState {
                id: id.into(),
                status: "stopped".into(),
                op,
            });
        }
        Ok(c)
    }

    /// Whether container `id` still runs (created, running or paused).
    pub fn is_alive(&self, id: &str) -> bool {
        self.load(id)
            .map(|c| c.status() != ContainerStatus::Stopped)
            .unwrap_or(false)
    }
}

/// cordon's own directory for container `id` under state root `root`.
pub fn cordon_dir(root: &Path, id: &str) -> PathBuf {
    crate::layout::container_dir(root, id)
}

/// The audit trail of container `id` under state root `root`.
pub fn audit_path(root: &Path, id: &str) -> PathBuf {
    crate::layout::audit_path(root, id)
}

/// Checks that the caller passed every fd `--preserve-fds n` names: fds 3
/// to 2+n must all be open. Call before opening any fd of this process's
/// own: one that lands in a gap would otherwise be handed to the container
/// (libcontainer keeps fds 3 to 2+n whatever they are). runc 1.1.5 refuses
/// a gap too ("unable to stat preserved-fd").
pub fn check_preserved_fds(n: i32) -> Result<()> {
    for fd in 3..3i32.saturating_add(n.max(0)) {
        if nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).is_err() {
            return Err(Error::PreservedFdClosed { n, fd, last: 2 + n });
        }
    }
    Ok(())
}

/// `c.refresh_status()`, once more when it fails: libcontainer finds the
/// init's `/proc/PID` and then reads its `stat`, and an init that exits
/// and is reaped in between (by its parent, or an engine's subreaper)
/// fails the second read ("File not found: /proc/PID/stat") where a
/// moment later the first says the container is stopped. `delete --force`
/// hit this right after it killed the init.
fn refresh_status(c: &mut Container) -> std::result::Result<(), libcontainer::error::LibcontainerError> {
    c.refresh_status().or_else(|_| c.refresh_status())
}

#[cfg(test)]
mod tests;
