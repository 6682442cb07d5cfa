//! `delete` (`runc delete`): the container, its supervisor, its cgroup and
//! cordon's state removed (what `Keep` says of its writable layer kept),
//! its poststop hooks run, its audit trail kept.

use super::*;

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

impl Runtime {
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
        if !crate::layout::state_file(&self.root, id).exists() {
            return true;
        }
        std::fs::read(crate::layout::state_file(&self.root, id))
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

/// [`kill_supervisor`], then waits (up to 10 s) until it has exited, so
/// that it has left the container's cgroups. A supervisor already exiting
/// (the init is gone; its command line reads empty) is known by its pid
/// and `start` time ([`Meta::supervisor_start`]) and waited for too: its
/// exit is what the removal of the cgroups waits for, and a poll on its
/// pidfd ends the moment it is gone, where libcgroups's retries would
/// sleep 10, 10 and 20 ms.
///
/// The container is stopped by then, so the supervisor is exiting on its
/// own: it records the answers it sent last, then leaves
/// ([`SETTLE_MS`]). It is given that long before the SIGKILL, so that a
/// decision the container saw the answer of is in the trail when `run`
/// (which deletes) returns.
fn stop_supervisor(pid: i32, start: Option<u64>, id: &str) {
    let Ok(pidfd) = crate::sys::pidfd_open(pid) else { return };
    let wait = |ms: u16| {
        let mut pfd = [nix::poll::PollFd::new(pidfd.as_fd(), nix::poll::PollFlags::POLLIN)];
        nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(ms)).is_ok_and(|n| n > 0)
    };
    if wait(SETTLE_MS) {
        return;
    }
    let exiting = start.is_some() && crate::sys::process::start_time(pid).ok() == start;
    if !kill_supervisor(pid, id) && !exiting {
        return;
    }
    wait(10_000);
}

/// How long (ms) `delete` lets a stopped container's supervisor finish on
/// its own before it kills it: its own wait for the answers in progress
/// is at most 1 s.
const SETTLE_MS: u16 = 1_000;

/// Sends SIGKILL to supervisor `pid` of container `id` if the process is
/// still that supervisor (its command line names `supervise` and the id);
/// whether it did.
pub(super) fn kill_supervisor(pid: i32, id: &str) -> bool {
    let Ok(pidfd) = crate::sys::pidfd_open(pid) else {
        return false;
    };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let ours = args.iter().any(|a| *a == b"supervise") && args.contains(&id.as_bytes());
    ours && crate::sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL).is_ok()
}
