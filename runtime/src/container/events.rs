//! `events --stats` (`runc events --stats`): the container's resource
//! statistics.

use super::*;

impl Runtime {
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
}
