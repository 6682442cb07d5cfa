//! The runtime configuration file, `/etc/cordon/config.toml` (or the path in
//! `$CORDON_CONFIG`). Every key is optional:
//!
//! ```toml
//! policy = "default"          # built-in name or policy file, for containers without an annotation
//! platform = "seccomp-notify" # or "ptrace" (see `Platform`)
//!
//! trace = false               # record what the kernel refuses too (slower)
//! data_dir = "/var/lib/cordon" # writable layers and checkpoints (docs/CHECKPOINT.md)
//!
//! [audit]                     # trails of deleted containers (see `Retention`)
//! dir = "/var/log/cordon"
//!
//! [annotations]               # what containers may choose (see `AnnotationGate`)
//! allow = true
//! policies = ["default", "audit", "agent", "/etc/cordon/policies/"]
//!
//! [ask]                       # the decision program of `ask` rules (see `Ask`)
//! socket = "/run/cordon-ask.sock"
//! timeout_ms = 30000
//! ```
//!
//! The global flags `--policy` and `--platform` override `policy` and
//! `platform` for one invocation (an engine's runtime entry).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::policy::Enforcement;

/// Default location of the configuration file.
pub const DEFAULT_PATH: &str = "/etc/cordon/config.toml";
/// Default persistent directory of writable layers and checkpoints (the
/// `data_dir` key).
pub const DEFAULT_DATA_DIR: &str = "/var/lib/cordon";
/// Environment variable `create` gives the supervisor: the container's NIS
/// domain name (config.json's `domainname`, else the host's), for the
/// emulated uname.
pub const DOMAINNAME_ENV: &str = "CORDON_DOMAINNAME";

/// Errors reading the configuration file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Unreadable file.
    #[error("config {}: {source}", path.display())]
    Read {
        /// File path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Malformed file; the message names the key.
    #[error("config {}: {msg}", path.display())]
    Parse {
        /// File path.
        path: PathBuf,
        /// Parser message.
        msg: String,
    },
    /// A value that is not supported.
    #[error("{0}")]
    Unsupported(String),
}

/// The runtime configuration.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Policy for containers without an `org.cordon.policy` annotation.
    #[serde(default = "default_policy")]
    pub policy: String,
    /// Platform for containers without an `org.cordon.platform` annotation.
    #[serde(default = "default_platform")]
    pub platform: String,
    /// Trace mode (`cordon --trace`, like `runsc --strace`): what the
    /// kernel would refuse goes to the supervisor and is recorded, and every
    /// path rule is enforced (and every open recorded) by the supervisor.
    /// Slower; for explaining denials, not for production.
    #[serde(default)]
    pub trace: bool,
    /// Persistent directory of cordon's writable layers and checkpoints
    /// (`org.cordon.rootfs = "overlay"`, `--overlay`; docs/CHECKPOINT.md):
    /// `<data_dir>/containers/<id>/`. Not the tmpfs state root, which a
    /// reboot empties.
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// Where audit trails of deleted containers are kept.
    #[serde(default)]
    pub audit: Retention,
    /// What containers may choose through `org.cordon.*` annotations.
    #[serde(default)]
    pub annotations: AnnotationGate,
    /// The decision program `ask` rules ask.
    #[serde(default)]
    pub ask: Ask,
}

/// How long a question of an `ask` rule waits for its answer by default,
/// in milliseconds.
pub const DEFAULT_ASK_TIMEOUT_MS: u32 = 30_000;

/// The `[ask]` table: the decision program the supervisor asks about
/// calls an `action = "ask"` rule holds (docs/POLICY.md, "Ask").
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ask {
    /// The program's unix stream socket; none: every question is denied.
    #[serde(default)]
    pub socket: Option<PathBuf>,
    /// How long a question waits for its answer (1 to 600000 ms); then
    /// the call is denied.
    #[serde(default = "default_ask_timeout")]
    pub timeout_ms: u32,
}

impl Default for Ask {
    fn default() -> Self {
        Ask {
            socket: None,
            timeout_ms: DEFAULT_ASK_TIMEOUT_MS,
        }
    }
}

fn default_ask_timeout() -> u32 {
    DEFAULT_ASK_TIMEOUT_MS
}

fn default_policy() -> String {
    "default".into()
}
fn default_platform() -> String {
    "seccomp-notify".into()
}
fn default_data_dir() -> PathBuf {
    DEFAULT_DATA_DIR.into()
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            policy: default_policy(),
            platform: default_platform(),
            trace: false,
            data_dir: default_data_dir(),
            audit: Default::default(),
            annotations: Default::default(),
            ask: Default::default(),
        }
    }
}

impl RuntimeConfig {
    /// Reads `$CORDON_CONFIG`, else [`DEFAULT_PATH`]; a missing file gives the defaults.
    pub fn load() -> Result<Self, ConfigError> {
        let path = std::env::var_os("CORDON_CONFIG")
            .map(PathBuf::from)
            .unwrap_or_else(|| DEFAULT_PATH.into());
        Self::load_from(&path)
    }

    /// Reads `path`; a missing file gives the defaults.
    pub fn load_from(path: &Path) -> Result<Self, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.into(),
                    source,
                })
            }
        };
        let cfg: Self = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.into(),
            msg: crate::policy::toml_message(&text, &e),
        })?;
        let at = |field: &str| format!("config {}: {field}", path.display());
        check_platform(&cfg.platform, &at("platform"))?;
        if !cfg.data_dir.is_absolute() {
            return Err(ConfigError::Unsupported(format!(
                "{}: {:?} is not an absolute path",
                at("data_dir"),
                cfg.data_dir
            )));
        }
        if cfg.ask.socket.as_ref().is_some_and(|s| !s.is_absolute()) {
            return Err(ConfigError::Unsupported(format!(
                "{}: not an absolute path",
                at("ask.socket")
            )));
        }
        if !(1..=600_000).contains(&cfg.ask.timeout_ms) {
            return Err(ConfigError::Unsupported(format!(
                "{}: {} is not between 1 and 600000",
                at("ask.timeout_ms"),
                cfg.ask.timeout_ms
            )));
        }
        let gate = &cfg.annotations;
        for (i, p) in gate.platforms.iter().enumerate() {
            if p != "*" {
                check_platform(p, &at(&format!("annotations.platforms[{i}]")))?;
            }
        }
        for (i, e) in gate.enforcement.iter().enumerate() {
            if e != "*" {
                Enforcement::parse(e, &at(&format!("annotations.enforcement[{i}]")))
                    .map_err(ConfigError::Unsupported)?;
            }
        }
        for (i, p) in gate.policies.iter().enumerate() {
            let builtin = crate::policy::BUILTIN.iter().any(|(n, _)| n == p);
            if !(builtin || p == "*" || p.starts_with('/')) {
                return Err(ConfigError::Unsupported(format!(
                    "{}: {p:?} is neither a built-in policy, an absolute path nor \"*\"",
                    at(&format!("annotations.policies[{i}]"))
                )));
            }
        }
        Ok(cfg)
    }
}

/// Where audit trails of deleted containers are kept, and for how long:
/// the `[audit]` table of the runtime configuration (the supervisor's
/// audit trail, `supervisor/audit.rs`, keeps and prunes them).
///
/// ```toml
/// [audit]
/// keep = true                 # false: a trail goes with its container
/// dir = "/var/log/cordon"
/// max_total_mb = 256          # the oldest trails go first beyond this (checked
///                             # when an eighth of it was kept since, or after 10 s)
/// max_age_days = 7
/// kernel = false              # true: Landlock's own denials, from the kernel's
///                             # audit (which must be on), in the trail too
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    /// Whether `delete` keeps the trail.
    #[serde(default = "yes")]
    pub keep: bool,
    /// Directory of kept trails, `<id>@<unix nanoseconds>.jsonl` each.
    #[serde(default = "default_audit_dir")]
    pub dir: PathBuf,
    /// Total size of the kept trails, in MiB.
    #[serde(default = "default_audit_mb")]
    pub max_total_mb: u64,
    /// Age after which a kept trail is removed, in days.
    #[serde(default = "default_audit_days")]
    pub max_age_days: u64,
    /// Whether the denials Landlock makes (the kernel level) reach the
    /// trail: each process of a container under Landlock asks the kernel
    /// to log them (`LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON`, ABI 7) and
    /// the supervisor reads them from the kernel's audit
    /// (`supervisor/kernel_audit.rs`). The kernel sends them only while
    /// its audit is enabled (auditd, `auditctl -e 1`), and then to the
    /// host's audit log too.
    #[serde(default)]
    pub kernel: bool,
}

fn default_audit_dir() -> PathBuf {
    PathBuf::from("/var/log/cordon")
}
fn default_audit_mb() -> u64 {
    256
}
fn default_audit_days() -> u64 {
    7
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            keep: true,
            dir: default_audit_dir(),
            max_total_mb: default_audit_mb(),
            max_age_days: default_audit_days(),
            kernel: false,
        }
    }
}

/// What containers may choose through annotations: the `[annotations]`
/// table of the runtime configuration (`annotations.rs` holds a container's
/// annotations to it).
///
/// ```toml
/// [annotations]
/// allow = true                                         # false: every org.cordon.* annotation is refused
/// policies = ["default", "audit", "agent", "/etc/cordon/policies/"]
/// platforms = ["seccomp-notify", "ptrace"]
/// enforcement = ["kernel", "supervisor"]
/// rootfs = ["bundle", "overlay"]
/// learn = ["/var/lib/cordon/learned"]                  # where org.cordon.learn may write; none by default
/// trace = true                                         # whether org.cordon.trace = "true" is allowed
/// ```
///
/// An entry of `policies` is a built-in name, an absolute path (a policy
/// file, or a directory whose files, at any depth, are allowed; symlinks
/// are resolved first, so a link out of the directory is refused), or `*`
/// (anything, the runtime's own choice included).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnnotationGate {
    /// Whether containers may set `org.cordon.*` annotations at all.
    #[serde(default = "yes")]
    pub allow: bool,
    /// What `org.cordon.policy` may name.
    #[serde(default = "default_policies")]
    pub policies: Vec<String>,
    /// What `org.cordon.platform` may name.
    #[serde(default = "default_platforms")]
    pub platforms: Vec<String>,
    /// What `org.cordon.enforcement` may name.
    #[serde(default = "default_enforcement")]
    pub enforcement: Vec<String>,
    /// What `org.cordon.rootfs` may name. Both by default: an overlay
    /// only adds isolation (the bundle's files are never written).
    #[serde(default = "default_rootfs")]
    pub rootfs: Vec<String>,
    /// The directories `org.cordon.learn` may write a learned policy
    /// beneath (absolute paths). None by default: a container cannot make
    /// `delete` write a file unless the admin names where.
    #[serde(default)]
    pub learn: Vec<String>,
    /// Whether `org.cordon.trace = "true"` is allowed. Yes by default: trace
    /// mode refuses what the policy refuses, with the same errno, and only
    /// records more (at the cost of a round trip per refusal and open).
    #[serde(default = "yes")]
    pub trace: bool,
}

fn default_policies() -> Vec<String> {
    // `agent` only narrows the default's egress: a container may ask for it.
    vec![
        "default".into(),
        "audit".into(),
        "agent".into(),
        "/etc/cordon/policies/".into(),
    ]
}
fn default_platforms() -> Vec<String> {
    vec![Platform::SeccompNotify.name().into(), Platform::Ptrace.name().into()]
}
fn default_rootfs() -> Vec<String> {
    vec!["bundle".into(), "overlay".into()]
}
fn default_enforcement() -> Vec<String> {
    vec![Enforcement::Kernel.name().into(), Enforcement::Supervisor.name().into()]
}

impl Default for AnnotationGate {
    fn default() -> Self {
        Self {
            allow: true,
            policies: default_policies(),
            platforms: default_platforms(),
            enforcement: default_enforcement(),
            rootfs: default_rootfs(),
            learn: Vec::new(),
            trace: true,
        }
    }
}

fn yes() -> bool {
    true
}

/// How the supervisor receives the syscalls a policy sends it (gVisor
/// calls these platforms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// seccomp user notification (`SECCOMP_RET_USER_NOTIF`, a listener fd
    /// per process; ADDFD installs emulated fds). The default.
    SeccompNotify,
    /// ptrace (`SECCOMP_RET_TRACE` stops of seized processes): for kernels
    /// or sandboxes where a notify listener cannot be created.
    Ptrace,
}

impl Platform {
    /// The name used in config files and annotations.
    pub fn name(self) -> &'static str {
        match self {
            Platform::SeccompNotify => "seccomp-notify",
            Platform::Ptrace => "ptrace",
        }
    }

    /// Parses a platform name; `origin` says where it came from.
    pub fn parse(name: &str, origin: &str) -> Result<Self, ConfigError> {
        match name {
            "seccomp-notify" => Ok(Platform::SeccompNotify),
            "ptrace" => Ok(Platform::Ptrace),
            other => Err(ConfigError::Unsupported(format!(
                "{origin}: platform {other:?} is not supported (supported: seccomp-notify, ptrace)"
            ))),
        }
    }
}

/// Checks a platform name; `origin` says where it came from.
pub fn check_platform(name: &str, origin: &str) -> Result<(), ConfigError> {
    Platform::parse(name, origin).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<RuntimeConfig, String> {
        let dir = std::env::temp_dir().join(format!("cordon-config-{}-{}", std::process::id(), text.len()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("config.toml");
        std::fs::write(&p, text).unwrap();
        let r = RuntimeConfig::load_from(&p).map_err(|e| e.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    #[test]
    fn data_dir_defaults_to_var_lib_cordon_and_must_be_absolute() {
        assert_eq!(RuntimeConfig::default().data_dir, Path::new("/var/lib/cordon"));
        assert_eq!(load("data_dir = \"/srv/c\"\n").unwrap().data_dir, Path::new("/srv/c"));
        let e = load("data_dir = \"rel/dir\"\n").unwrap_err();
        assert!(e.contains("data_dir") && e.contains("not an absolute path"), "{e}");
    }
}
