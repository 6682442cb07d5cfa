//! What the runtime's snapshot operations (`container/checkpoint.rs`,
//! `restore.rs`, `fork.rs`, `diff.rs`) share: a container's layer found
//! (its own, or an overlay an engine mounted), events in its audit trail,
//! and what a restore or a fork keeps of its create.

use super::*;

impl super::super::Runtime {
    /// The writable layer of container `id` (from its meta.json); errors
    /// when the container does not exist or has none of cordon's.
    pub fn meta_layer(&self, id: &str) -> Result<PathBuf> {
        super::super::validate::id(id)?;
        if !crate::layout::state_file(&self.root, id).exists() {
            return Err(Error::NotFound(id.to_string()));
        }
        self.meta(id).layer.ok_or_else(|| no_layer(id))
    }

    /// Container `id`'s layer and its lower layers (uppermost first): its
    /// own (`--overlay`), else the overlay an engine mounted as its rootfs
    /// (recognised from the mount's `upperdir`), whose checkpoints live in
    /// `<data_dir>/containers/<id>/` (marked by a file `engine-upper`).
    pub(in crate::container) fn layer_of(&self, id: &str) -> Result<(Layer, Vec<PathBuf>)> {
        super::super::validate::id(id)?;
        if !crate::layout::state_file(&self.root, id).exists() {
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
    pub(in crate::container) fn own_layer_of(&self, id: &str, op: &str) -> Result<(Layer, PathBuf)> {
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
    pub(in crate::container) fn audit_event(&self, id: &str, detail: &str) {
        if let Ok(log) = crate::supervisor::audit::AuditLog::open(Some(&super::super::audit_path(&self.root, id))) {
            log.record(0, "supervisor", detail, crate::supervisor::audit::Decision::Event, "ok");
        }
    }
}

/// What a restore or a fork keeps of container `meta`'s create: its
/// platform and enforcement level (a container of an older cordon, with
/// no level recorded, keeps `supervisor` unless all its path rules were
/// in the kernel).
pub(in crate::container) fn inherited(meta: &super::super::Meta) -> Option<super::super::Inherited> {
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
pub(in crate::container) fn null_stdio() -> Result<super::super::StdioFds> {
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
