//! The state directory's layout: every name cordon keeps under its state
//! root (default `/run/cordon`, `--root`), in one place.
//!
//! ```text
//! <root>/<id>/                  libcontainer's state (state.json: state_file; notify socket)
//! <root>/.cordon/               cordon's own (CORDON_DIR)
//! <root>/.cordon/@lower         the sealed copy of the cordon binary (SEALED_BINARY)
//! <root>/.cordon/@fanotify      whether fanotify works, per boot (FANOTIFY_PROBE)
//! <root>/.cordon/<id>/          one container's (container_dir):
//!     meta.json                 what cordon records beside libcontainer (META)
//!     policy.toml               the policy fixed at create (POLICY_FILE)
//!     supervisor.sock           the supervisor's socket (SOCKET)
//!     supervisor.log            the supervisor's stderr (SUPERVISOR_LOG)
//!     audit.jsonl[.1]           the audit trail (AUDIT)
//!     bundle/config.json        the shadow bundle libcontainer builds from (SHADOW_BUNDLE)
//!     views/                    the view files (VIEWS)
//! <root>/.learn-<id>/           `cordon learn`'s working copy of a bundle
//! ```
//!
//! A kept trail's directory (`[audit] dir`) holds `.prune` (PRUNE_STAMP),
//! the time of its last pruning; a writable layer's base
//! (`<data_dir>/containers/<id>/`) holds the trail while a restore
//! recreates the container (AUDIT).

use std::path::{Path, PathBuf};

/// cordon's own directory under the state root.
pub const CORDON_DIR: &str = ".cordon";
/// libcontainer's state of a container, in `<root>/<id>/`.
pub const STATE: &str = "state.json";
/// What cordon records about a container beside libcontainer's state.
pub const META: &str = "meta.json";
/// The policy a container was created with (TOML, as `policy show`
/// prints it): what its supervisor and every `exec` load.
pub const POLICY_FILE: &str = "policy.toml";
/// The supervisor's socket.
pub const SOCKET: &str = "supervisor.sock";
/// The supervisor's log (its stderr).
pub const SUPERVISOR_LOG: &str = "supervisor.log";
/// The audit trail (`AUDIT.1` is the rotated part).
pub const AUDIT: &str = "audit.jsonl";
/// The shadow bundle's directory.
pub const SHADOW_BUNDLE: &str = "bundle";
/// The views' directory.
pub const VIEWS: &str = "views";
/// The sealed copy of the cordon binary, in [`CORDON_DIR`].
pub const SEALED_BINARY: &str = "@lower";
/// Whether fanotify works on this boot, in [`CORDON_DIR`].
pub const FANOTIFY_PROBE: &str = "@fanotify";
/// When a kept trails' directory was last pruned.
pub const PRUNE_STAMP: &str = ".prune";

/// cordon's own directory under state root `root`.
pub fn cordon_root(root: &Path) -> PathBuf {
    root.join(CORDON_DIR)
}

/// Container `id`'s directory of cordon's own under state root `root`.
pub fn container_dir(root: &Path, id: &str) -> PathBuf {
    cordon_root(root).join(id)
}

/// libcontainer's state of container `id` under state root `root`
/// (`<root>/<id>/state.json`): there once its create began.
pub fn state_file(root: &Path, id: &str) -> PathBuf {
    root.join(id).join(STATE)
}

/// Container `id`'s audit trail under state root `root`.
pub fn audit_path(root: &Path, id: &str) -> PathBuf {
    container_dir(root, id).join(AUDIT)
}
