//! `pause` and `resume` (`runc pause`, `runc resume`): the container's
//! cgroup frozen and thawed.

use super::*;

impl Runtime {
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
    pub(super) fn calls_in_supervisor(&self, c: &Container) -> usize {
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
}
