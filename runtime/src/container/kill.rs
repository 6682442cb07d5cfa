//! `kill` (`runc kill`): a signal to the init, or with `--all` to every
//! process of the container.

use super::*;

impl Runtime {
    /// Sends `signal` to the init, or with `all` to every process (`runc kill`).
    pub fn kill(&self, id: &str, signal: libcontainer::signal::Signal, all: bool) -> Result<()> {
        let _lock = self.lock(id, true);
        let mut c = self.load(id)?;
        if !c.can_kill() && !all {
            return Err(Error::BadState {
                id: id.into(),
                status: status_str(c.status()),
                op: "kill",
            });
        }
        c.kill(signal, all).map_err(lib(format!("kill {id:?}")))
    }
}
