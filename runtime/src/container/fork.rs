//! `fork` (docs/CHECKPOINT.md): a new container whose files start as
//! another's checkpoint, copy-on-write, under that container's policy or a
//! narrower one.

use super::snapshot::*;
use super::*;

impl Runtime {
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
        super::validate::id(new_id)?;
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
        let spec = oci_spec::runtime::Spec::load(bundle.join("config.json"))
            .map_err(|e| other(format!("fork: {}/config.json: {}", bundle.display(), super::chain(&e))))?;
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
        let created = self.create(&super::CreateOptions {
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
            return Err(other(format!("fork {new_id:?}: start: {}", super::chain(&e))));
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
    pub(super) fn fork_policy(&self, id: &str, meta: &super::Meta, asked: Option<&str>) -> Result<(String, String)> {
        let parent_name = if meta.policy.is_empty() {
            self.config.policy.clone()
        } else {
            meta.policy.clone()
        };
        let parent_text = match std::fs::read_to_string(self.cordon_dir(id).join(super::POLICY_FILE)) {
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
pub(super) fn fork_cgroup(spec: &oci_spec::runtime::Spec, meta: &super::Meta, new_id: &str) -> Option<PathBuf> {
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
