//! `start` (OCI runtime spec, "Operations"; `runc start`): runs the user
//! process of a created container.

use super::*;

impl Runtime {
    /// Starts the user process of a created container (`runc start`).
    pub fn start(&self, id: &str) -> Result<()> {
        let _lock = self.lock(id, true);
        let timing = crate::sys::timings::step("load the state");
        let mut c = self.load(id)?;
        timing.end();
        let _timing = crate::sys::timings::step("start (libcontainer)");
        if c.status() != ContainerStatus::Created {
            return Err(Error::BadState {
                id: id.into(),
                status: status_str(c.status()),
                op: "start",
            });
        }
        c.start().map_err(lib(format!("start {id:?}")))
    }
}
