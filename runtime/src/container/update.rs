//! `update` (`runc update`): new resource limits for a live container.

use super::*;

impl Runtime {
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
}
