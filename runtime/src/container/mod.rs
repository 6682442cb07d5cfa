//! The OCI life cycle (OCI runtime spec, "Runtime and Lifecycle"): create,
//! start, state, kill, delete, exec and the runc extras, on libcontainer.
//! cordon adds, per container, a supervisor and the policy's seccomp filter.
//!
//! The state root's layout (libcontainer's `<root>/<id>/`, cordon's own
//! `<root>/.cordon/<id>/`) is [`crate::layout`]'s.

pub mod bundle_seccomp;
mod create;
mod error;
mod exec;
pub mod executor;
pub mod foreground;
mod harden;
pub mod landlock;
pub mod learn;
pub mod mount_ns;
mod plan;
mod policy_update;
pub mod resolver;
pub mod setup_log;
pub mod snapshot;
mod spawn;
pub mod validate;

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use libcontainer::container::{Container, ContainerStatus};
use serde::{Deserialize, Serialize};

pub use create::{CreateOptions, Inherited, StdioFds};
use error::{cgroup, io, lib};
pub use error::{chain, Error, Result, SupervisorStart};
pub use exec::ExecOptions;
pub use plan::plan_for_bundle;

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

/// The OCI state of a container, as `runc state` prints it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateJson {
    /// OCI runtime spec version.
    pub oci_version: String,
    /// Container id.
    pub id: String,
    /// Host pid of the init (0 once stopped).
    pub pid: i32,
    /// creating, created, running, paused or stopped.
    pub status: String,
    /// Absolute bundle path.
    pub bundle: PathBuf,
    /// Absolute rootfs path.
    pub rootfs: PathBuf,
    /// Creation time, RFC 3339.
    pub created: String,
    /// Owner (empty, as runc prints for root).
    pub owner: String,
    /// The spec's annotations plus `org.cordon.policy` and `org.cordon.platform`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<HashMap<String, String>>,
}

/// What `delete` keeps of a container's writable layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Nothing: the layer and its checkpoints are removed.
    Nothing,
    /// The checkpoints (`delete --keep-checkpoints`).
    Checkpoints,
    /// Everything, unmounted (a restore rebuilds and remounts it).
    Layer,
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
        if !dir.join("state.json").exists() {
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

    /// Starts the user process of a created container (`runc start`).
    pub fn start(&self, id: &str) -> Result<()> {
        let _lock = self.lock(id, true);
        let timing = crate::sys::timings::step("load the state");
        let mut c = self.load(id)?;
        timing.end();
        let _timing = crate::sys::timings::step("start (libcontainer)");
        if c.status() != ContainerStatus::Created {
            return Err(Error::BadState {
                id: id.into(),
                status: status_str(c.status()),
                op: "start",
            });
        }
        c.start().map_err(lib(format!("start {id:?}")))
    }

    /// The OCI state of container `id`.
    pub fn state(&self, id: &str) -> Result<StateJson> {
        let _lock = self.lock(id, false);
        let c = self.load(id)?;
        Ok(self.state_of(&c))
    }

    fn state_of(&self, c: &Container) -> StateJson {
        let meta = self.meta(c.id());
        let bundle = if meta.bundle.as_os_str().is_empty() {
            c.bundle().clone()
        } else {
            meta.bundle.clone()
        };
        let rootfs = libcontainer::oci_spec::runtime::Spec::load(Self::built_config(c))
            .ok()
            .and_then(|s| s.root().as_ref().map(|r| r.path().clone()))
            .map(|p| if p.is_absolute() { p } else { bundle.join(p) })
            .unwrap_or_else(|| bundle.join("rootfs"));
        let mut annotations = c.state.annotations.clone().unwrap_or_default();
        if !meta.policy.is_empty() {
            annotations.insert(crate::annotations::POLICY.into(), meta.policy.clone());
            annotations.insert(crate::annotations::PLATFORM.into(), meta.platform.clone());
            if let Some(why) = &meta.fallback {
                annotations.insert(format!("{}-fallback", crate::annotations::PLATFORM), why.clone());
            }
            let level = if meta.kernel_enforced { "kernel" } else { "supervisor" };
            annotations.insert(crate::annotations::ENFORCEMENT.into(), level.into());
            if let Some(how) = &meta.enforcement {
                annotations.insert(format!("{}-detail", crate::annotations::ENFORCEMENT), how.clone());
            }
        }
        let status = c.status();
        StateJson {
            oci_version: "1.0.2".into(),
            id: c.id().to_string(),
            pid: match status {
                ContainerStatus::Stopped => 0,
                _ => c.pid().map(|p| p.as_raw()).unwrap_or(0),
            },
            status: status_str(status),
            bundle,
            rootfs,
            created: c
                .created()
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
                .unwrap_or_default(),
            owner: String::new(),
            annotations: (!annotations.is_empty()).then_some(annotations),
        }
    }

    /// Sends `signal` to the init, or with `all` to every process (`runc kill`).
    pub fn kill(&self, id: &str, signal: libcontainer::signal::Signal, all: bool) -> Result<()> {
        let _lock = self.lock(id, true);
        let mut c = self.load(id)?;
        if !c.can_kill() && !all {
            return Err(Error::BadState {
                id: id.into(),
                status: status_str(c.status()),
                op: "kill",
            });
        }
        c.kill(signal, all).map_err(lib(format!("kill {id:?}")))
    }

    /// Deletes container `id` (`runc delete`); `force` kills a running one.
    /// Also stops its supervisor and removes cordon's directory and its
    /// writable layer and checkpoints.
    pub fn delete(&self, id: &str, force: bool) -> Result<()> {
        self.delete_with(id, force, Keep::Nothing)
    }

    /// [`Runtime::delete`], keeping what `keep` says of the writable layer.
    pub fn delete_with(&self, id: &str, force: bool, keep: Keep) -> Result<()> {
        let _lock = self.lock(id, true);
        let mut c = match self.load(id) {
            Ok(c) => c,
            Err(Error::NotFound(_)) if force => {
                // A create killed half way leaves a state directory
                // without state.json: remove what there is.
                self.cleanup_cordon(id, keep);
                let _ = std::fs::remove_dir_all(self.root.join(id));
                return Ok(());
            }
            Err(Error::Lib { .. }) if force && validate::id(id).is_ok() && !self.state_parses(id) => {
                // Or one whose state.json libcontainer had only begun to
                // write (empty, or cut short): the same, and its processes
                // (an init waiting for `start` has no watchdog yet) are
                // killed through its cgroup, which goes too.
                self.kill_cgroup_of(id);
                self.cleanup_cordon(id, keep);
                let _ = std::fs::remove_dir_all(self.root.join(id));
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        if !force && !c.can_delete() {
            return Err(Error::BadState {
                id: id.into(),
                status: status_str(c.status()),
                op: "delete (use --force)",
            });
        }
        if force && c.status() != ContainerStatus::Stopped {
            // libcontainer kills and removes the cgroup at once; a process
            // still exiting keeps the cgroup busy (EBUSY). Kill every
            // process and wait for the init to be gone first.
            let _ = c.kill(
                libcontainer::signal::Signal::from(nix::sys::signal::Signal::SIGKILL),
                true,
            );
            if let Some(pid) = c.pid() {
                if let Ok(pidfd) = crate::sys::pidfd_open(pid.as_raw()) {
                    let _ = crate::sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
                    let mut pfd = [nix::poll::PollFd::new(pidfd.as_fd(), nix::poll::PollFlags::POLLIN)];
                    let _ = nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(10_000u16));
                }
            }
            refresh_status(&mut c).map_err(lib(format!("refresh state of {id:?}")))?;
        }
        // The supervisor sits in the container's cpu (and memory) cgroups,
        // charged to it: it must be gone before they are removed (EBUSY).
        // The container is stopped by now: nothing is left for it to do.
        let meta = self.meta(id);
        if let Some(pid) = meta.supervisor_pid {
            let _timing = crate::sys::timings::step("stop the supervisor");
            stop_supervisor(pid, meta.supervisor_start, id);
        }
        // Poststop hooks are cordon's to run, after the container is gone:
        // libcontainer would stop deleting at the first one that fails.
        let poststop = take_poststop_hooks(&c);
        let timing = crate::sys::timings::step("delete (libcontainer)");
        let deleted = match c.delete(force) {
            Ok(()) => Ok(()),
            Err(e) => {
                // The init may vanish while libcontainer inspects it (its
                // /proc/PID/stat gone): once it is stopped, deleting succeeds.
                match refresh_status(&mut c) {
                    Ok(()) if force && c.status() == ContainerStatus::Stopped => c.delete(force),
                    Ok(()) => Err(e),
                    Err(refresh) => Err(refresh),
                }
            }
        };
        if let Err(e) = deleted {
            if let Some((mut config, hooks)) = poststop {
                // Not deleted: a later delete runs them.
                if let Some(h) = config.hooks.as_mut() {
                    h.set_poststop(Some(hooks));
                }
                let _ = config.save(&c.root);
            }
            return Err(lib(format!("delete {id:?}"))(e));
        }
        timing.end();
        if let Some((_, hooks)) = poststop {
            run_poststop_hooks(&c, &hooks);
        }
        let _timing = crate::sys::timings::step("remove cordon's state");
        self.cleanup_cordon(id, keep);
        Ok(())
    }

    /// Kills every process in container `id`'s cgroup and removes it, for
    /// a container whose state cannot be loaded: the cgroup is the one its
    /// bundle names (`linux.cgroupsPath`), or the one `create` gives a
    /// bundle without (`/cordon/<id>`). Best effort.
    fn kill_cgroup_of(&self, id: &str) {
        use libcgroups::common::CgroupManager;
        let meta = self.meta(id);
        let Some(manager) = self.cgroup_manager_of(id, &meta.bundle, meta.cgroups_path.as_deref()) else {
            return;
        };
        for _ in 0..100 {
            let pids = manager.get_all_pids().unwrap_or_default();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = manager.remove();
    }

    /// The cgroup manager of container `id` whose bundle is `bundle`:
    /// `chosen` (cordon's choice, [`Meta::cgroups_path`]), else its
    /// config.json's `linux.cgroupsPath`, else the default path.
    fn cgroup_manager_of(
        &self,
        id: &str,
        bundle: &Path,
        chosen: Option<&Path>,
    ) -> Option<libcgroups::common::AnyCgroupManager> {
        let named = chosen.map(Path::to_path_buf).or_else(|| {
            oci_spec::runtime::Spec::load(bundle.join("config.json"))
                .ok()
                .and_then(|s| s.linux().as_ref().and_then(|l| l.cgroups_path().clone()))
        });
        let path = named.unwrap_or_else(|| {
            PathBuf::from(if self.systemd_cgroup {
                format!("system.slice:cordon:{id}")
            } else {
                format!("/cordon/{id}")
            })
        });
        libcgroups::common::create_cgroup_manager(libcgroups::common::CgroupConfig {
            cgroup_path: path,
            systemd_cgroup: self.systemd_cgroup,
            container_name: id.to_string(),
        })
        .ok()
    }

    /// After a failed create: removes container `id`'s cgroup once the
    /// processes still in it (an init that failed in set-up and is still
    /// exiting; on the ptrace platform its tracer sees it exit first) are
    /// gone, waiting for them up to about 2 s. It kills nothing: the
    /// cgroup may not be the create's own.
    pub(crate) fn remove_cgroup_when_empty(&self, id: &str, bundle: &Path, chosen: Option<&Path>) {
        use libcgroups::common::CgroupManager;
        let Some(manager) = self.cgroup_manager_of(id, bundle, chosen) else {
            return;
        };
        for _ in 0..40 {
            match manager.get_all_pids() {
                Ok(pids) if !pids.is_empty() => std::thread::sleep(std::time::Duration::from_millis(50)),
                // Empty, or not there at all.
                _ => break,
            }
        }
        if manager.get_all_pids().is_ok_and(|p| p.is_empty()) {
            let _ = manager.remove();
        }
    }

    /// Whether container `id`'s state.json is whole JSON, or missing:
    /// `false` only for one that is there but empty or cut short.
    fn state_parses(&self, id: &str) -> bool {
        if !self.root.join(id).join("state.json").exists() {
            return true;
        }
        std::fs::read(self.root.join(id).join("state.json"))
            .is_ok_and(|b| serde_json::from_slice::<serde_json::Value>(&b).is_ok())
    }

    /// Stops the supervisor (if it still runs), unmounts and removes the
    /// writable layer (but what `keep` says), keeps the audit trail
    /// (`[audit]` of the runtime config; not with [`Keep::Layer`], whose
    /// restore continues it) and removes cordon's dir.
    fn cleanup_cordon(&self, id: &str, keep: Keep) {
        let meta = self.meta(id);
        if let Some(pid) = meta.supervisor_pid {
            let _timing = crate::sys::timings::step("kill the supervisor");
            kill_supervisor(pid, id);
        }
        if let Some(base) = &meta.layer {
            let _timing = crate::sys::timings::step("unmount or remove the layer");
            let l = snapshot::Layer::at(base.clone());
            match keep {
                Keep::Nothing => l.remove(false),
                Keep::Checkpoints => l.remove(true),
                Keep::Layer => l.unmount(),
            }
        } else if keep == Keep::Nothing {
            // Checkpoints of an overlay an engine mounted (never its layer).
            let l = snapshot::Layer::new(&self.config.data_dir, id);
            if l.base.join(snapshot::ENGINE_MARK).exists() {
                let _ = std::fs::remove_dir_all(&l.base);
            }
        }
        if keep == Keep::Layer {
            let _ = std::fs::remove_dir_all(self.cordon_dir(id));
            return;
        }
        if let Some(file) = &meta.learn {
            self.write_learned(id, &meta, file);
        }
        let _timing = crate::sys::timings::step("keep the audit trail");
        if let Err(e) = self.config.audit.archive(&audit_path(&self.root, id), id) {
            tracing::warn!(
                "keeping the audit trail of {id:?} in {}: {e}",
                self.config.audit.dir.display()
            );
        }
        let _ = std::fs::remove_dir_all(self.cordon_dir(id));
    }

    /// Every container under the root, sorted by id.
    pub fn list(&self) -> Result<Vec<StateJson>> {
        let mut out = Vec::new();
        let entries = std::fs::read_dir(&self.root).map_err(io(format!("read {}", self.root.display())))?;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let _lock = self.lock(&name, false);
            if let Ok(c) = self.load(&name) {
                out.push(self.state_of(&c));
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Freezes the container (`runc pause`).
    pub fn pause(&self, id: &str) -> Result<()> {
        let _lock = self.lock(id, true);
        let mut c = self.load(id)?;
        let Err(e) = c.pause() else { return Ok(()) };
        let e = lib(format!("pause {id:?}"))(e);
        // A call the supervisor has received waits killable
        // (WAIT_KILLABLE_RECV), and the freezer cannot freeze it until the
        // supervisor answers: say so rather than leave "unable to freeze".
        match self.calls_in_supervisor(&c) {
            0 => Err(e),
            calls => Err(Error::CallsInSupervisor {
                source: Box::new(e),
                calls,
            }),
        }
    }

    /// How many threads of container `c` wait for their supervisor's answer.
    fn calls_in_supervisor(&self, c: &Container) -> usize {
        use libcgroups::common::CgroupManager;
        let Ok(pids) = self
            .cgroup_manager(c)
            .and_then(|m| m.get_all_pids().map_err(cgroup("list processes")))
        else {
            return 0;
        };
        pids.iter()
            .flat_map(|p| {
                std::fs::read_dir(format!("/proc/{p}/task"))
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .filter(|t| std::fs::read_to_string(t.path().join("wchan")).is_ok_and(|w| w.starts_with("seccomp")))
            .count()
    }

    /// Thaws the container (`runc resume`).
    pub fn resume(&self, id: &str) -> Result<()> {
        let _lock = self.lock(id, true);
        self.load(id)?.resume().map_err(lib(format!("resume {id:?}")))
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

    /// Host pids of every process in the container's cgroup.
    pub fn pids(&self, id: &str) -> Result<Vec<i32>> {
        let _lock = self.lock(id, false);
        use libcgroups::common::CgroupManager;
        let c = self.load(id)?;
        let m = self.cgroup_manager(&c)?;
        let mut pids: Vec<i32> = m
            .get_all_pids()
            .map_err(cgroup(format!("list processes of {id:?}")))?
            .into_iter()
            .map(|p| p.as_raw())
            .collect();
        pids.sort_unstable();
        Ok(pids)
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

    /// Applies new resource limits (`runc update`).
    pub fn update(&self, id: &str, resources: &libcontainer::oci_spec::runtime::LinuxResources) -> Result<()> {
        let _lock = self.lock(id, true);
        use libcgroups::common::{CgroupManager, ControllerOpt};
        let c = self.load_live(id, "update")?;
        let m = self.cgroup_manager(&c)?;
        m.apply(&ControllerOpt {
            resources,
            disable_oom_killer: false,
            oom_score_adj: None,
            freezer_state: None,
        })
        .map_err(cgroup(format!("update {id:?}")))
    }

    /// Resource statistics of container `id` (`runc events --stats`):
    /// `{"type":"stats","id":ID,"data":{cpu, memory, pids, blkio, hugetlb}}`.
    pub fn stats(&self, id: &str) -> Result<serde_json::Value> {
        use libcgroups::common::CgroupManager;
        let _lock = self.lock(id, false);
        let c = self.load(id)?;
        let m = self.cgroup_manager(&c)?;
        let stats = m.stats().map_err(cgroup(format!("stats of {id:?}")))?;
        let data = serde_json::to_value(stats)?;
        Ok(serde_json::json!({"type": "stats", "id": id, "data": data}))
    }

    /// Whether container `id` still runs (created, running or paused).
    pub fn is_alive(&self, id: &str) -> bool {
        self.load(id)
            .map(|c| c.status() != ContainerStatus::Stopped)
            .unwrap_or(false)
    }
}

/// Removes the poststop hooks from the config libcontainer saved for
/// container `c` (so its delete does not run them) and returns that config
/// and the hooks; `None` when it has none.
fn take_poststop_hooks(c: &Container) -> Option<(libcontainer::config::YoukiConfig, Vec<oci_spec::runtime::Hook>)> {
    let mut config = libcontainer::config::YoukiConfig::load(&c.root).ok()?;
    let hooks = config.hooks.as_mut()?.poststop().clone().filter(|h| !h.is_empty())?;
    if let Some(h) = config.hooks.as_mut() {
        h.set_poststop(None);
    }
    config.save(&c.root).ok()?;
    Some((config, hooks))
}

/// Runs the poststop hooks of deleted container `c`, each with the
/// container's state on stdin. As the runtime spec asks, one that fails is
/// logged as a warning and the rest run: the container is gone either way.
fn run_poststop_hooks(c: &Container, hooks: &[oci_spec::runtime::Hook]) {
    for hook in hooks {
        if let Err(e) = libcontainer::hooks::run_hooks(Some(&vec![hook.clone()]), Some(&c.state), None, None, None) {
            tracing::warn!(
                "container {:?}: poststop hook {}: {}",
                c.id(),
                hook.path().display(),
                chain(&e)
            );
        }
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

/// [`kill_supervisor`], then waits (up to 10 s) until it has exited, so
/// that it has left the container's cgroups. A supervisor already exiting
/// (the init is gone; its command line reads empty) is known by its pid
/// and `start` time ([`Meta::supervisor_start`]) and waited for too: its
/// exit is what the removal of the cgroups waits for, and a poll on its
/// pidfd ends the moment it is gone, where libcgroups's retries would
/// sleep 10, 10 and 20 ms.
fn stop_supervisor(pid: i32, start: Option<u64>, id: &str) {
    let Ok(pidfd) = crate::sys::pidfd_open(pid) else { return };
    let exiting = start.is_some() && crate::sys::process::start_time(pid).ok() == start;
    if !kill_supervisor(pid, id) && !exiting {
        return;
    }
    let mut pfd = [nix::poll::PollFd::new(pidfd.as_fd(), nix::poll::PollFlags::POLLIN)];
    let _ = nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(10_000u16));
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

/// Sends SIGKILL to supervisor `pid` of container `id` if the process is
/// still that supervisor (its command line names `supervise` and the id);
/// whether it did.
fn kill_supervisor(pid: i32, id: &str) -> bool {
    let Ok(pidfd) = crate::sys::pidfd_open(pid) else {
        return false;
    };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let ours = args.iter().any(|a| *a == b"supervise") && args.contains(&id.as_bytes());
    ours && crate::sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL).is_ok()
}

#[cfg(test)]
mod tests;
