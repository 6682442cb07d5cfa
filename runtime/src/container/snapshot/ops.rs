//! The runtime's snapshot operations: checkpoint, restore, fork,
//! checkpoints and diff of a container, with their locks and cgroups.

use super::*;

impl super::super::Runtime {
    /// The writable layer of container `id` (from its meta.json); errors
    /// when the container does not exist or has none of cordon's.
    pub fn meta_layer(&self, id: &str) -> Result<PathBuf> {
        super::super::validate::id(id)?;
        if !self.root.join(id).join("state.json").exists() {
            return Err(Error::NotFound(id.to_string()));
        }
        self.meta(id).layer.ok_or_else(|| no_layer(id))
    }

    /// Container `id`'s layer and its lower layers (uppermost first): its
    /// own (`--overlay`), else the overlay an engine mounted as its rootfs
    /// (recognised from the mount's `upperdir`), whose checkpoints live in
    /// `<data_dir>/containers/<id>/` (marked by a file `engine-upper`).
    pub(super) fn layer_of(&self, id: &str) -> Result<(Layer, Vec<PathBuf>)> {
        super::super::validate::id(id)?;
        if !self.root.join(id).join("state.json").exists() {
            return Err(Error::NotFound(id.to_string()));
        }
        let meta = self.meta(id);
        if let Some(base) = meta.layer {
            let layer = Layer::at(base);
            let lowers = layer.lowers(&meta.lower.unwrap_or_default());
            return Ok((layer, lowers));
        }
        let c = self.load(id)?;
        let rootfs = self.state_of(&c).rootfs;
        let rootfs = std::fs::canonicalize(&rootfs).unwrap_or(rootfs);
        let Some((upper, lowers)) = engine_overlay(&rootfs) else {
            return Err(no_layer(id));
        };
        let mut layer = Layer::new(&self.config.data_dir, id);
        layer.engine_upper = Some(upper.clone());
        if !layer.base.join("head.json").exists() {
            let d = layer.checkpoints();
            std::fs::create_dir_all(&d).map_err(io_at("create", &d))?;
            save_json(&layer.base.join("head.json"), &Head::default())?;
        }
        std::fs::write(layer.base.join(ENGINE_MARK), upper.as_os_str().as_bytes())
            .map_err(io_at("write", &layer.base.join(ENGINE_MARK)))?;
        Ok((layer, lowers))
    }

    /// Container `id`'s own layer and lower layer, for `op` (restore, fork):
    /// refused in one line for an overlay an engine mounted.
    pub(super) fn own_layer_of(&self, id: &str, op: &str) -> Result<(Layer, PathBuf)> {
        let (layer, lowers) = self.layer_of(id)?;
        if let Some(upper) = &layer.engine_upper {
            return Err(other(format!(
                "{op} {id:?}: its rootfs is an overlay an engine mounted (upperdir {}): changing a mounted overlay's \
                 layers is undefined, and restarting a task behind an engine's shim breaks the engine's state",
                upper.display()
            )));
        }
        // The rootfs: the bottom lower layer.
        let lower = lowers.into_iter().last().unwrap_or_default();
        Ok((layer, lower))
    }

    /// Appends an event to container `id`'s audit trail (pid 0, syscall
    /// `supervisor`, action `event`), as the supervisor records its own.
    pub(super) fn audit_event(&self, id: &str, detail: &str) {
        if let Ok(log) = crate::supervisor::audit::AuditLog::open(Some(&super::super::audit_path(&self.root, id))) {
            log.record(0, "supervisor", detail, crate::supervisor::audit::Decision::Event, "ok");
        }
    }

    /// Takes checkpoint `name` (default `cpN`) of running or paused
    /// container `id`: freezes it (cgroup freezer: v1 `freezer.state`
    /// FROZEN, v2 `cgroup.freeze`; libcgroups retries for a bounded time,
    /// then thaws and fails), copies what changed in its upper layer since
    /// the previous checkpoint, thaws it. A paused container stays paused.
    pub fn checkpoint(&self, id: &str, name: Option<&str>) -> Result<Info> {
        use libcgroups::common::{CgroupManager, FreezerState};
        let (layer, _) = self.layer_of(id)?;
        let _guard = layer.lock(id, "checkpoint", true)?;
        let _lock = self.lock(id, false);
        let c = self.load(id)?;
        let status = c.status();
        let paused = status == libcontainer::container::ContainerStatus::Paused;
        if status != libcontainer::container::ContainerStatus::Running && !paused {
            return Err(Error::BadState {
                id: id.into(),
                status: super::super::status_str(status),
                op: "checkpoint (it must be running or paused)",
            });
        }
        let m = self.cgroup_manager(&c)?;
        let freeze = || {
            if paused {
                return Ok(false);
            }
            m.freeze(FreezerState::Frozen).map_err(|e| {
                let pending = self.calls_in_supervisor(&c);
                let why = if pending > 0 {
                    format!(
                        "{pending} call(s) of the container wait in its supervisor (an open of a FIFO, a blocking \
                         connect) and cannot be frozen; it was thawed, try again once they return"
                    )
                } else {
                    format!("{}; it was thawed", super::super::chain(&e))
                };
                other(format!("checkpoint of {id:?}: cannot freeze it: {why}"))
            })?;
            Ok(true)
        };
        let thaw = || {
            if !paused {
                let _ = m.freeze(FreezerState::Thawed);
            }
        };
        let info = layer.checkpoint(id, name, freeze, thaw)?;
        self.audit_event(
            id,
            &format!(
                "checkpoint {} (parent {}, {} entries, {} bytes)",
                info.name,
                info.parent.as_deref().unwrap_or("none"),
                info.files,
                info.size
            ),
        );
        Ok(info)
    }

    /// The checkpoints of container `id`, oldest first.
    pub fn checkpoints(&self, id: &str) -> Result<Vec<Info>> {
        self.layer_of(id)?.0.list()
    }

    /// Removes checkpoint `name` of container `id`.
    pub fn checkpoint_rm(&self, id: &str, name: &str) -> Result<()> {
        let (layer, _) = self.layer_of(id)?;
        let _guard = layer.lock(id, "checkpoint rm", true)?;
        layer.remove_checkpoint(id, name)
    }

    /// The changes of container `id`'s files since checkpoint `name`, or
    /// since it started; with `content`, each regular file's digests
    /// before and now and, for text, a unified diff ([`Content`]).
    pub fn diff(&self, id: &str, name: Option<&str>, content: bool) -> Result<Vec<Change>> {
        let (layer, lowers) = self.layer_of(id)?;
        let points = self.mount_points(id);
        let mut changes = layer.diff(id, name, &lowers)?;
        if content {
            layer.with_content(id, name, &lowers, &mut changes)?;
        }
        // The mount points the runtime made for volumes, and the
        // directories above them it made or changed on the way, are not
        // the container's changes (what the container adds beneath them
        // still is).
        changes.retain(|c| !(matches!(c.kind, 'A' | 'C') && points.contains(&c.path)));
        Ok(changes)
    }

    /// The destinations of container `id`'s mounts (its bundle's, and the
    /// ones cordon added in its shadow bundle) and every directory above
    /// them, as absolute paths inside the container.
    fn mount_points(&self, id: &str) -> std::collections::BTreeSet<String> {
        let meta = self.meta(id);
        let configs = [
            meta.bundle.join("config.json"),
            self.cordon_dir(id)
                .join(crate::layout::SHADOW_BUNDLE)
                .join("config.json"),
        ];
        let mut out = std::collections::BTreeSet::new();
        for spec in configs.iter().filter_map(|c| oci_spec::runtime::Spec::load(c).ok()) {
            for m in spec.mounts().iter().flatten() {
                let mut p = m.destination().as_path();
                while p.parent().is_some() {
                    out.insert(p.to_string_lossy().trim_end_matches('/').to_string());
                    p = p.parent().unwrap_or(Path::new("/"));
                }
            }
        }
        out
    }

    /// Restores container `id` to checkpoint `name`: stops its processes,
    /// rebuilds its upper layer as the checkpoint's, and creates and starts
    /// its process again from its bundle's config, with the policy fixed at
    /// its create (its `policy.toml`, not the policy file again) and a fresh
    /// supervisor, standard streams on /dev/null. The audit trail goes on,
    /// with both events.
    pub fn restore(&self, id: &str, name: &str) -> Result<()> {
        let (layer, lower) = self.own_layer_of(id, "restore")?;
        let _guard = layer.lock(id, "restore", true)?;
        layer.info(id, name)?;
        let meta = self.meta(id);
        let spec = oci_spec::runtime::Spec::load(meta.bundle.join("config.json"))
            .map_err(|e| other(format!("restore {id:?}: bundle config: {}", super::super::chain(&e))))?;
        if spec.process().as_ref().is_some_and(|p| p.terminal() == Some(true)) {
            return Err(other(format!(
                "restore {id:?}: its process has a terminal (process.terminal), which a restore cannot hand to \
                 anyone"
            )));
        }
        // The policy fixed at create stays the container's.
        let fixed_policy = std::fs::read_to_string(self.cordon_dir(id).join(super::super::POLICY_FILE))
            .ok()
            .map(|text| (meta.policy.clone(), text));
        self.audit_event(id, &format!("restore {name}: stopping the container"));
        let trail = layer.base.join(crate::layout::AUDIT);
        let _ = std::fs::rename(super::super::audit_path(&self.root, id), &trail);
        let timing = crate::sys::timings::step("restore: stop the container");
        self.delete_with(id, true, super::super::Keep::Layer)?;
        timing.end();
        let timing = crate::sys::timings::step("restore: rebuild the layer");
        layer.rebuild(id, name, &lower)?;
        timing.end();
        let timing = crate::sys::timings::step("restore: create");
        let mut c = self
            .create(&super::super::CreateOptions {
                id: id.into(),
                bundle: meta.bundle.clone(),
                detach: true,
                stdio: Some(null_stdio()?),
                overlay: true,
                reuse_layer: Some(layer.base.clone()),
                fixed_policy,
                inherit: inherited(&meta),
                cgroups_path: meta.cgroups_path.clone(),
                ..Default::default()
            })
            .map_err(|e| {
                // Where the trail is now: `audit --follow` ends on this.
                if let Ok(log) = crate::supervisor::audit::AuditLog::open(Some(&trail)) {
                    log.record(
                        0,
                        "supervisor",
                        &format!("restore {name}: failed: {e}"),
                        crate::supervisor::audit::Decision::Event,
                        "error",
                    );
                }
                other(format!(
                    "restore {id:?}: create: {e} (the container is gone; its files and checkpoints stay in {})",
                    layer.base.display()
                ))
            })?;
        timing.end();
        let _timing = crate::sys::timings::step("restore: start");
        if let Err(e) = c.start() {
            let why = super::super::chain(&e);
            self.audit_event(id, &format!("restore {name}: failed: start: {why}"));
            let _ = self.delete_with(id, true, super::super::Keep::Checkpoints);
            return Err(other(format!("restore {id:?}: start: {why}")));
        }
        self.audit_event(id, &format!("restore {name}: restarted with a fresh supervisor"));
        Ok(())
    }

    /// Creates and starts container `new_id` whose files start as
    /// checkpoint `name` of container `id`, copy-on-write: the checkpoint's
    /// files hard-linked into a read-only `lower/` over the rootfs (see
    /// [`Layer::fork_into`]), an empty writable layer of its own, its own
    /// supervisor, the config of `bundle` (default: `id`'s bundle), whose
    /// rootfs must be `id`'s. It runs under `id`'s policy fixed at create,
    /// platform and enforcement level, or under `policy` when that only
    /// narrows `id`'s ([`Self::fork_policy`]). Standard streams on
    /// /dev/null. `id`'s lock is held, shared, only while the checkpoint's
    /// files are linked: forks of one checkpoint run at once. With
    /// `new_netns`, the fork gets a network namespace of its own instead of
    /// the one the bundle names ([`own_netns_bundle`]). Nothing of `new_id`
    /// is left on error.
    pub fn fork(
        &self,
        id: &str,
        name: &str,
        new_id: &str,
        bundle: Option<&Path>,
        policy: Option<&str>,
        new_netns: bool,
    ) -> Result<()> {
        super::super::validate::id(new_id)?;
        let (layer, lower) = self.own_layer_of(id, "fork")?;
        let meta = self.meta(id);
        let fixed_policy = self.fork_policy(id, &meta, policy)?;
        if self.root.join(new_id).exists() {
            return Err(Error::Exists(new_id.to_string()));
        }
        let bundle = match bundle {
            Some(b) => std::fs::canonicalize(b).map_err(|e| other(format!("fork: bundle {}: {e}", b.display())))?,
            None => meta.bundle.clone(),
        };
        let spec = oci_spec::runtime::Spec::load(bundle.join("config.json")).map_err(|e| {
            other(format!(
                "fork: {}/config.json: {}",
                bundle.display(),
                super::super::chain(&e)
            ))
        })?;
        let root = spec
            .root()
            .as_ref()
            .map(|r| r.path().clone())
            .unwrap_or_else(|| "rootfs".into());
        let root = if root.is_absolute() { root } else { bundle.join(root) };
        if std::fs::canonicalize(&root).ok().as_deref() != Some(lower.as_path()) {
            return Err(other(format!(
                "fork: the bundle's rootfs {} is not the lower layer of {id:?} ({}): a checkpoint's layers only \
                 make sense over their own lower layer",
                root.display(),
                lower.display()
            )));
        }
        let cgroups_path = fork_cgroup(&spec, &meta, new_id);
        let new = Layer::new(&self.config.data_dir, new_id);
        {
            let _timing = crate::sys::timings::step("fork: link the checkpoint's files");
            let _guard = layer.lock(id, "fork", false)?;
            layer.info(id, name)?;
            layer.fork_into(id, name, &lower, &new)?;
        }
        let bundle = if new_netns {
            own_netns_bundle(&spec, &root, &new.base).inspect_err(|_| new.remove(false))?
        } else {
            bundle
        };
        let timing = crate::sys::timings::step("fork: create");
        let created = self.create(&super::super::CreateOptions {
            id: new_id.into(),
            bundle: bundle.clone(),
            detach: true,
            stdio: Some(null_stdio()?),
            overlay: true,
            reuse_layer: Some(new.base.clone()),
            fixed_policy: Some(fixed_policy),
            inherit: inherited(&meta),
            cgroups_path,
            ..Default::default()
        });
        let mut c = match created {
            Ok(c) => c,
            Err(e) => {
                new.remove(false);
                return Err(e);
            }
        };
        timing.end();
        let timing = crate::sys::timings::step("fork: start");
        if let Err(e) = c.start() {
            let _ = self.delete(new_id, true);
            return Err(other(format!("fork {new_id:?}: start: {}", super::super::chain(&e))));
        }
        timing.end();
        self.audit_event(id, &format!("fork {name}: container {new_id} started from it"));
        self.audit_event(new_id, &format!("forked from checkpoint {name} of container {id}"));
        Ok(())
    }

    /// The policy a fork of container `id` runs under (its name and TOML
    /// text): `id`'s own, fixed at its create (`policy.toml`), or
    /// `asked` (`fork --policy`) when it only narrows `id`'s
    /// ([`crate::policy::narrow::only_narrows`]); refused in one line
    /// naming the rule otherwise.
    pub(super) fn fork_policy(
        &self,
        id: &str,
        meta: &super::super::Meta,
        asked: Option<&str>,
    ) -> Result<(String, String)> {
        let parent_name = if meta.policy.is_empty() {
            self.config.policy.clone()
        } else {
            meta.policy.clone()
        };
        let parent_text = match std::fs::read_to_string(self.cordon_dir(id).join(super::super::POLICY_FILE)) {
            Ok(text) => text,
            Err(_) => toml::to_string_pretty(&crate::filter::load_policy(&parent_name)?.source)
                .map_err(Error::RenderPolicy)?,
        };
        let Some(asked) = asked else {
            return Ok((parent_name, parent_text));
        };
        let parent = crate::filter::policy_from_toml(&parent_text, &parent_name)?;
        let candidate = crate::filter::load_policy(asked)?;
        crate::policy::narrow::only_narrows(&parent.source, &candidate.source).map_err(|why| {
            other(format!(
                "fork --policy {asked}: refused: {why} (a fork may only narrow the policy of {id:?}, {parent_name})"
            ))
        })?;
        let text = toml::to_string_pretty(&candidate.source).map_err(Error::RenderPolicy)?;
        Ok((asked.to_string(), text))
    }
}

/// A bundle for a fork with a network namespace of its own: `spec` with
/// its network namespace made new (the path it joined dropped) and its
/// rootfs `root` absolute, written to `base/bundle/config.json` (the
/// fork's layer directory, which lives and goes with the fork). The
/// namespace has only its loopback: the fork reaches no network until
/// something (a CNI plugin, `ip link`) gives it one.
fn own_netns_bundle(spec: &oci_spec::runtime::Spec, root: &Path, base: &Path) -> Result<PathBuf> {
    let mut value = serde_json::to_value(spec)?;
    value["root"]["path"] = root.to_string_lossy().into_owned().into();
    if let Some(ns) = value["linux"]["namespaces"].as_array_mut() {
        ns.retain(|n| n["type"] != "network");
        ns.push(serde_json::json!({"type": "network"}));
    }
    let dir = base.join("bundle");
    std::fs::create_dir_all(&dir).map_err(io_at("create", &dir))?;
    let config = dir.join("config.json");
    std::fs::write(&config, serde_json::to_vec_pretty(&value)?).map_err(io_at("write", &config))?;
    Ok(dir)
}

/// The cgroup of fork `new_id` whose bundle's config is `spec`, when
/// that names its parent's cgroup (the parent's bundle's
/// `linux.cgroupsPath`, or the cgroup cordon chose for a parent that is
/// a fork itself): a cgroup of its own next to it, named by the fork's
/// id (`/p/parent` gives `/p/new_id`, systemd's `slice:prefix:parent`
/// gives `slice:prefix:new_id`). Two containers in one cgroup would
/// share their limits, and `delete --force` of one would kill the other.
/// `None` (the bundle's own, or the default `/cordon/<id>`) otherwise.
pub(super) fn fork_cgroup(spec: &oci_spec::runtime::Spec, meta: &super::super::Meta, new_id: &str) -> Option<PathBuf> {
    let named = |s: &oci_spec::runtime::Spec| s.linux().as_ref().and_then(|l| l.cgroups_path().clone());
    let cg = named(spec)?;
    let parents = oci_spec::runtime::Spec::load(meta.bundle.join("config.json"))
        .ok()
        .and_then(|s| named(&s));
    if parents.as_ref() != Some(&cg) && meta.cgroups_path.as_ref() != Some(&cg) {
        return None;
    }
    let text = cg.to_string_lossy();
    if !text.starts_with('/') {
        if let Some((head, _)) = text.rsplit_once(':') {
            return Some(format!("{head}:{new_id}").into());
        }
    }
    Some(cg.parent().unwrap_or(Path::new("/")).join(new_id))
}

/// What a restore or a fork keeps of container `meta`'s create: its
/// platform and enforcement level (a container of an older cordon, with
/// no level recorded, keeps `supervisor` unless all its path rules were
/// in the kernel).
pub(super) fn inherited(meta: &super::super::Meta) -> Option<super::super::Inherited> {
    use crate::policy::Enforcement;
    if meta.platform.is_empty() {
        return None;
    }
    let enforcement = match meta.level.as_deref() {
        Some(l) => Enforcement::parse(l, "level").unwrap_or(Enforcement::Supervisor),
        None if meta.kernel_enforced => Enforcement::Kernel,
        None => Enforcement::Supervisor,
    };
    Some(super::super::Inherited {
        platform: meta.platform.clone(),
        enforcement,
        trace: meta.trace,
    })
}

/// Three fds on /dev/null: the standard streams of a process a restore or
/// a fork starts (there is no caller to talk to).
pub(super) fn null_stdio() -> Result<super::super::StdioFds> {
    let null = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map(OwnedFd::from)
            .map_err(|e| other(format!("open /dev/null: {e}")))
    };
    Ok(super::super::StdioFds(std::sync::Arc::new([null()?, null()?, null()?])))
}
