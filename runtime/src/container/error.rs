//! Errors of the life cycle operations, each a one-line message naming
//! the id, path or field.

use std::path::PathBuf;

use super::{bundle_seccomp, mount_ns, validate};

/// Errors of life cycle operations. Messages name the id, path or field.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad user input.
    #[error(transparent)]
    Validate(#[from] validate::ValidateError),
    /// The policy did not load.
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    /// The runtime configuration did not load.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// No container with this id.
    #[error("container {0:?} does not exist")]
    NotFound(String),
    /// The id is taken.
    #[error("container {0:?} already exists")]
    Exists(String),
    /// The container is in the wrong state for the operation.
    #[error("container {id:?} is {status}: cannot {op}")]
    BadState {
        /// Container id.
        id: String,
        /// Its status.
        status: String,
        /// The refused operation.
        op: &'static str,
    },
    /// The supervisor could not be started.
    #[error("supervisor for {id:?} failed to start: {reason}")]
    Supervisor {
        /// Container id.
        id: String,
        /// Why.
        reason: SupervisorStart,
    },
    /// A libcontainer step failed.
    #[error("{what}: {}", chain(source.as_ref()))]
    Lib {
        /// The step.
        what: String,
        /// Cause.
        source: Box<libcontainer::error::LibcontainerError>,
    },
    /// An I/O step failed.
    #[error("{what}: {source}")]
    Io {
        /// The step.
        what: String,
        /// Cause.
        source: std::io::Error,
    },
    /// `--systemd-cgroup` on a host without systemd.
    #[error("--systemd-cgroup: systemd not running on this host, cannot use systemd cgroups manager")]
    NoSystemd,
    /// `exec` without a command.
    #[error("exec: no command given")]
    NoCommand,
    /// `--preserve-fds n`, but fd `fd` (below `3 + n`) is not open.
    #[error("--preserve-fds {n}: fd {fd} is not open (fds 3 to {last} are passed to the container)")]
    PreservedFdClosed {
        /// The number of fds to pass.
        n: i32,
        /// The first one not open.
        fd: i32,
        /// The last fd to pass (`2 + n`).
        last: i32,
    },
    /// `cordon policy update` refused or failed, and why.
    #[error("policy update of {id:?}: {why}")]
    PolicyUpdate {
        /// Container id.
        id: String,
        /// Why, in one line.
        why: String,
    },
    /// The policy could not be rendered as TOML for the container's dir.
    #[error("render the policy: {0}")]
    RenderPolicy(#[source] toml::ser::Error),
    /// A record of cordon's could not be encoded as JSON.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A JSON file (a saved seccomp profile, a process.json) does not parse.
    #[error("{}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: serde_json::Error,
    },
    /// A container's config.json could not be read.
    #[error("{what}: {cause}")]
    Spec {
        /// The step.
        what: String,
        /// Cause; not an error source: the one-line message ([`chain`])
        /// shows its own text only ("io operation failed"), as it always
        /// has.
        cause: oci_spec::OciSpecError,
    },
    /// The shadow bundle's config.json could not be written.
    #[error("write shadow config.json: {}", chain(.0))]
    WriteShadow(#[source] oci_spec::OciSpecError),
    /// A bundle's seccomp profile cannot be compiled.
    #[error("{}: {source}", at.display())]
    BundleProfile {
        /// The bundle's config.json or the saved profile.
        at: PathBuf,
        /// The field and what is wrong with it.
        source: bundle_seccomp::ProfileError,
    },
    /// Building the container failed at a step its processes logged.
    #[error("{what}: {step}: {detail}")]
    SetUp {
        /// The operation (`create`, `exec`...).
        what: String,
        /// libcontainer's last step ("failed to prepare rootfs").
        step: String,
        /// What the container's processes logged about it.
        detail: String,
    },
    /// The policy needs cordon's own mounts and the container gets no
    /// mount namespace of its own (container/mount_ns.rs).
    #[error("policy {policy:?}: {what} cannot be enforced: {}: {why}", mount_ns::RUNC_WORDS)]
    NoPrivateMountNs {
        /// The policy's name.
        policy: String,
        /// The first rule or view that needs a mount.
        what: String,
        /// Why the container's mount namespace is not private.
        why: String,
    },
    /// The container would run in the runtime's own mount namespace
    /// (container/mount_ns.rs).
    #[error(
        "unable to create a container in the runtime's own mount namespace: {why}: its set-up would make / \
         rslave and mount the rootfs and the bundle's mounts there, where they outlive the container"
    )]
    RuntimeMountNs {
        /// Why the container's mount namespace is the runtime's.
        why: String,
    },
    /// A cgroup operation failed.
    #[error("{what}: {}", chain(source.as_ref()))]
    Cgroup {
        /// The step, naming the container.
        what: String,
        /// Cause.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A freeze failed while calls of the container wait in its
    /// supervisor.
    #[error(
        "{source}: {calls} call(s) of the container wait in its supervisor (an open of a FIFO, a blocking \
         connect) and cannot be frozen until they return"
    )]
    CallsInSupervisor {
        /// The freeze's error.
        source: Box<Error>,
        /// How many calls wait.
        calls: usize,
    },
    /// A policy with `host` rules for a container sharing the host's
    /// network namespace.
    #[error(
        "policy {policy}: net[{at}].host needs the container in a network namespace of its own (linux.namespaces has no \"network\": it shares the host's network, where cordon cannot answer its lookups)"
    )]
    HostRulesNeedNetns {
        /// The policy's name.
        policy: String,
        /// Index of the first `host` rule.
        at: usize,
    },
    /// A policy with `host` rules for a container whose process holds a
    /// capability that redirects lookups.
    #[error(
        "policy {policy}: net[{at}].host cannot hold for a process with {cap} (process.capabilities): it could send the resolver's queries to a nameserver of its own and have any address answered for an allowed name; drop it, or use cidr rules"
    )]
    HostRulesCapability {
        /// The policy's name.
        policy: String,
        /// Index of the first `host` rule.
        at: usize,
        /// The capability.
        cap: &'static str,
    },
    /// `exec` of a process holding a capability that redirects lookups,
    /// under `host` rules.
    #[error(
        "policy {policy}: a process with {cap} cannot join a container under host rules: it could send the resolver's queries to a nameserver of its own"
    )]
    ExecCapability {
        /// The policy's name.
        policy: String,
        /// The capability.
        cap: &'static str,
    },
    /// The thread making the resolver's sockets panicked.
    #[error("the resolver's socket thread panicked")]
    ResolverThread,
    /// A snapshot step failed, already phrased for the user.
    #[error("{0}")]
    Snapshot(String),
}

/// Why a supervisor did not start ([`Error::Supervisor`]).
#[derive(Debug, thiserror::Error)]
pub enum SupervisorStart {
    /// It did not signal readiness: the last line of its log (its own
    /// error, printed by the `cordon supervise` process).
    #[error("{0}")]
    Log(String),
    /// Its socket could not be bound.
    #[error(transparent)]
    Bind(#[from] crate::supervisor::SupervisorError),
}

/// The error and its sources on one line.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// Result alias for this module.
pub type Result<T> = std::result::Result<T, Error>;

pub(super) fn lib(what: impl Into<String>) -> impl FnOnce(libcontainer::error::LibcontainerError) -> Error {
    let what = what.into();
    move |source| Error::Lib {
        what,
        source: Box::new(source),
    }
}

pub(super) fn cgroup<E: std::error::Error + Send + Sync + 'static>(what: impl Into<String>) -> impl FnOnce(E) -> Error {
    let what = what.into();
    move |e| Error::Cgroup {
        what,
        source: Box::new(e),
    }
}

pub(super) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}
