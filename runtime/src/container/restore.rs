//! `restore` (docs/CHECKPOINT.md): a container stopped, its writable layer
//! rebuilt as a checkpoint's, and its process created and started again
//! with a fresh supervisor.

use super::snapshot::*;
use super::*;

impl Runtime {
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
            .map_err(|e| other(format!("restore {id:?}: bundle config: {}", super::chain(&e))))?;
        if spec.process().as_ref().is_some_and(|p| p.terminal() == Some(true)) {
            return Err(other(format!(
                "restore {id:?}: its process has a terminal (process.terminal), which a restore cannot hand to \
                 anyone"
            )));
        }
        // The policy fixed at create stays the container's.
        let fixed_policy = std::fs::read_to_string(self.cordon_dir(id).join(super::POLICY_FILE))
            .ok()
            .map(|text| (meta.policy.clone(), text));
        self.audit_event(id, &format!("restore {name}: stopping the container"));
        let trail = layer.base.join(crate::layout::AUDIT);
        let _ = std::fs::rename(super::audit_path(&self.root, id), &trail);
        let timing = crate::sys::timings::step("restore: stop the container");
        self.delete_with(id, true, super::Keep::Layer)?;
        timing.end();
        let timing = crate::sys::timings::step("restore: rebuild the layer");
        layer.rebuild(id, name, &lower)?;
        timing.end();
        let timing = crate::sys::timings::step("restore: create");
        let mut c = self
            .create(&super::CreateOptions {
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
            let why = super::chain(&e);
            self.audit_event(id, &format!("restore {name}: failed: start: {why}"));
            let _ = self.delete_with(id, true, super::Keep::Checkpoints);
            return Err(other(format!("restore {id:?}: start: {why}")));
        }
        self.audit_event(id, &format!("restore {name}: restarted with a fresh supervisor"));
        Ok(())
    }
}
