//! `checkpoint` (docs/CHECKPOINT.md): a running or paused container's
//! writable layer copied while its cgroup is frozen; the list of its
//! checkpoints, and their removal.

use super::snapshot::*;
use super::*;

impl Runtime {
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
                status: super::status_str(status),
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
                    format!("{}; it was thawed", super::chain(&e))
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
}
