//! When a supervisor has nothing left to supervise, it exits (and its
//! watchdog, seeing it gone, kills whatever of the container still runs):
//! - its container's init exits (`attach` in this module's parent);
//! - the first connection, which is always the init's (`create` connects
//!   before it builds the container), ends without an attached init: the
//!   init died before `start` or failed its handshake, so no process of the
//!   container can run again. A created container waiting for `start`
//!   keeps its supervisor: its init holds that connection open;
//! - its state directory is removed (`rm -rf` of the runtime's `--root`):
//!   no command can reach the container any more. Seen as the removal of
//!   its socket from the directory: the directory itself is reported
//!   deleted (IN_DELETE_SELF) only once nothing holds it, and the
//!   supervisor holds files in it (its bound socket, the audit trail).

use std::path::Path;
use std::sync::Arc;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

use super::Supervisor;
use crate::supervisor::audit::Decision;

/// Watches `dir` for its removal. Call before the supervisor confines
/// itself (inotify_init1 and inotify_add_watch are not in its allow list).
pub(crate) fn watch_removal(dir: &Path) -> std::io::Result<Inotify> {
    let ino = Inotify::init(InitFlags::IN_CLOEXEC)?;
    ino.add_watch(dir, AddWatchFlags::IN_DELETE | AddWatchFlags::IN_DELETE_SELF)?;
    Ok(ino)
}

/// Whether an event of the watched directory says it is being removed.
fn removed(e: &nix::sys::inotify::InotifyEvent) -> bool {
    e.mask.contains(AddWatchFlags::IN_DELETE_SELF)
        || (e.mask.contains(AddWatchFlags::IN_DELETE) && e.name.as_deref() == Some(std::ffi::OsStr::new(super::SOCKET)))
}

/// Exits the process once the directory `ino` watches is removed (on a
/// thread of its own, blocked in read(2) until then).
pub(crate) fn exit_when_removed(ino: Inotify, sup: Arc<Supervisor>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("dir-watch".into())
        .stack_size(64 * 1024)
        .spawn(move || loop {
            match ino.read_events() {
                Ok(events) if events.iter().any(removed) => {
                    sup.audit
                        .record(0, "supervisor", "state directory removed", Decision::Event, "exit");
                    std::process::exit(0);
                }
                Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
                // Nothing to watch with: keep serving.
                Err(_) => return,
            }
        })
        .map(drop)
}

/// Exits the process when the init's connection (the first one) ended
/// without an attached init: see the module documentation.
pub(crate) fn init_never_attached(sup: &Supervisor) -> ! {
    sup.audit.record(
        0,
        "supervisor",
        "the container's init did not attach",
        Decision::Event,
        "exit",
    );
    std::process::exit(0);
}
