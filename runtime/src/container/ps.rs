//! `ps` (`runc ps`): the host pids of the container's processes.

use super::*;

impl Runtime {
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
}
