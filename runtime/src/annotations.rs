//! The `org.cordon.*` annotations of a container's config.json, and the
//! admin's gate on them.
//!
//! Whoever writes a container's config.json (a pod author, through an
//! engine's `pod_annotations`) is not whoever runs the node. An annotation
//! may therefore only choose among what the runtime configuration
//! (`[annotations]` in `/etc/cordon/config.toml`, see [`AnnotationGate`])
//! allows; by default the built-in policies other than `permissive` and
//! policy files beneath `/etc/cordon/policies/`. The runtime's own
//! settings (the config file, the global `--policy` and `--platform`
//! flags) are the admin's and are not gated.
//!
//! Every key cordon reads is listed in [`KEYS`]; any other key starting
//! with [`PREFIX`] is refused, so a misspelt key cannot be ignored
//! silently. Errors are one line and never quote a file's content.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::config::{AnnotationGate, ConfigError, Platform, RuntimeConfig};
use crate::policy::Enforcement;

/// The prefix of every annotation cordon owns.
pub const PREFIX: &str = "org.cordon.";
/// Chooses the container's policy: a built-in name or a policy file.
pub const POLICY: &str = "org.cordon.policy";
/// Chooses the container's platform (`seccomp-notify` or `ptrace`).
pub const PLATFORM: &str = "org.cordon.platform";
/// Chooses where path rules are enforced (`kernel` or `supervisor`).
pub const ENFORCEMENT: &str = "org.cordon.enforcement";
/// Chooses the container's root filesystem: `bundle` (the bundle's rootfs,
/// as runc) or `overlay` (the bundle's rootfs as a read-only lower layer
/// under a writable layer cordon owns; docs/CHECKPOINT.md).
pub const ROOTFS: &str = "org.cordon.rootfs";
/// Learns a policy from the container's run: it runs observed (every path
/// rule in the supervisor), and `delete` writes the learned policy to the
/// file the annotation names (docs/LEARN.md), beneath a directory
/// `[annotations] learn` lists.
pub const LEARN: &str = "org.cordon.learn";
/// Runs the container in trace mode (`"true"`), as the global `--trace`:
/// every refusal of the policy and every open recorded with its rule, the
/// caller seeing the same errno (docs/POLICY.md, "Trace mode").
pub const TRACE: &str = "org.cordon.trace";

/// One annotation cordon reads from config.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// The annotation's name.
    pub name: &'static str,
    /// What it chooses, for `features` and error messages.
    pub doc: &'static str,
}

/// Every annotation cordon reads from a container's config.json. A feature
/// that reads a new key adds it here (and a list to [`AnnotationGate`]).
pub const KEYS: &[Key] = &[
    Key {
        name: POLICY,
        doc: "policy for this container: a built-in name or a policy file, among those [annotations] policies allows",
    },
    Key {
        name: PLATFORM,
        doc: "platform for this container: seccomp-notify or ptrace, among those [annotations] platforms allows",
    },
    Key {
        name: ENFORCEMENT,
        doc: "where path rules are enforced: kernel or supervisor, among those [annotations] enforcement allows",
    },
    Key {
        name: ROOTFS,
        doc: "root filesystem: bundle, or overlay (a writable layer cordon owns, for checkpoints), among those [annotations] rootfs allows",
    },
    Key {
        name: LEARN,
        doc: "learn a policy from this container's run, written to this file at delete, beneath a directory [annotations] learn lists",
    },
    Key {
        name: TRACE,
        doc: "trace mode: true records every refusal and every open with its rule (same errno), if [annotations] trace allows",
    },
];

/// What a container runs with: from its annotations where the gate lets
/// them choose, else from the runtime configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Built-in policy name or policy file (a file chosen by annotation is
    /// given as its resolved path).
    pub policy: String,
    /// Platform name (checked).
    pub platform: String,
    /// Enforcement level.
    pub enforcement: Enforcement,
    /// Whether the rootfs is an overlay cordon owns (`org.cordon.rootfs =
    /// "overlay"`).
    pub overlay: bool,
    /// Whether the policy came from the container's annotation (its
    /// errors are then told without the file's words: [`quiet`]).
    pub policy_from_annotation: bool,
    /// Where `delete` writes the policy learned from the run
    /// (`org.cordon.learn`), if the container is learned.
    pub learn: Option<PathBuf>,
    /// Whether the container runs in trace mode (`org.cordon.trace`).
    pub trace: bool,
}

/// A policy error for whoever wrote the annotation that chose the file:
/// where (the rule, or the line and column) but none of the file's words,
/// which a parser's message may quote (an unknown key, a value).
pub fn quiet(e: crate::policy::PolicyError) -> crate::policy::PolicyError {
    use crate::policy::PolicyError;
    const HINT: &str = "not a valid policy (`cordon policy check` on the node tells more)";
    match e {
        PolicyError::Parse { path, msg } => {
            let at = msg
                .strip_prefix("line ")
                .and_then(|m| m.split_once(':'))
                .map(|(pos, _)| format!("line {pos}: "))
                .unwrap_or_default();
            PolicyError::Parse {
                path,
                msg: format!("{at}{HINT}"),
            }
        }
        PolicyError::Invalid { policy, rule, .. } => PolicyError::Invalid {
            policy,
            rule,
            msg: HINT.into(),
        },
        other => other,
    }
}

fn refused(msg: String) -> ConfigError {
    ConfigError::Unsupported(msg)
}

impl AnnotationGate {
    /// Checks a container's annotations and returns what it runs with.
    ///
    /// Errors (one line, naming the annotation): an unknown `org.cordon.*`
    /// key (with the list of known ones), any `org.cordon.*` key when
    /// `allow = false`, a value the gate does not list, a malformed value.
    pub fn choose(&self, annotations: &HashMap<String, String>, config: &RuntimeConfig) -> Result<Choice, ConfigError> {
        let mut ours: Vec<(&String, &String)> = annotations.iter().filter(|(k, _)| k.starts_with(PREFIX)).collect();
        ours.sort();
        for (k, _) in &ours {
            if !KEYS.iter().any(|key| key.name == k.as_str()) {
                let known: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
                return Err(refused(format!(
                    "annotation {k:?}: unknown key (cordon reads {})",
                    known.join(", ")
                )));
            }
            if !self.allow {
                return Err(refused(format!(
                    "annotation {k}: containers may not choose cordon's settings on this node ([annotations] allow = false in the runtime config)"
                )));
            }
        }
        let policy_from_annotation = annotations.contains_key(POLICY);
        let policy = match annotations.get(POLICY) {
            None => config.policy.clone(),
            Some(v) => self.policy(v)?,
        };
        let platform = match annotations.get(PLATFORM) {
            None => config.platform.clone(),
            Some(v) => {
                Platform::parse(v, &format!("annotation {PLATFORM}"))?;
                listed(&self.platforms, v, PLATFORM, "platforms")?;
                v.clone()
            }
        };
        Platform::parse(&platform, "platform")?;
        let enforcement = match annotations.get(ENFORCEMENT) {
            None => Enforcement::Kernel,
            Some(v) => {
                let e = Enforcement::parse(v, &format!("annotation {ENFORCEMENT}")).map_err(refused)?;
                listed(&self.enforcement, v, ENFORCEMENT, "enforcement")?;
                e
            }
        };
        let overlay = match annotations.get(ROOTFS).map(String::as_str) {
            None | Some("bundle") => {
                if let Some(v) = annotations.get(ROOTFS) {
                    listed(&self.rootfs, v, ROOTFS, "rootfs")?;
                }
                false
            }
            Some("overlay") => {
                listed(&self.rootfs, "overlay", ROOTFS, "rootfs")?;
                true
            }
            Some(other) => {
                return Err(refused(format!(
                    "annotation {ROOTFS}: {other:?} is not a root filesystem kind (bundle or overlay)"
                )))
            }
        };
        let learn = annotations.get(LEARN).map(|v| self.learn(v)).transpose()?;
        let trace = match annotations.get(TRACE).map(String::as_str) {
            None | Some("false") => false,
            Some("true") if self.trace => true,
            Some("true") => {
                return Err(refused(format!(
                    "annotation {TRACE}: trace mode is not allowed on this node ([annotations] trace = false in the runtime config)"
                )))
            }
            Some(other) => return Err(refused(format!("annotation {TRACE}: {other:?} is not true or false"))),
        };
        Ok(Choice {
            policy,
            platform,
            enforcement,
            overlay,
            policy_from_annotation,
            learn,
            trace,
        })
    }

    /// The file `value` (an `org.cordon.learn` annotation) names, if it is
    /// a normalised absolute path whose directory exists beneath one the
    /// gate's `learn` lists (resolved, so a symlink cannot lead out).
    fn learn(&self, value: &str) -> Result<PathBuf, ConfigError> {
        let path = Path::new(value);
        let dir = path
            .parent()
            .filter(|_| normalised(value) && path.file_name().is_some());
        let real = dir.and_then(|d| std::fs::canonicalize(d).ok());
        match real {
            Some(real) if self.learn.iter().any(|entry| beneath(&real, Path::new(entry))) => {
                Ok(real.join(path.file_name().unwrap_or_default()))
            }
            _ => Err(refused(format!(
                "annotation {LEARN}: {value:?} is not allowed on this node (allowed: a file beneath {}; see [annotations] learn in the runtime config)",
                describe(&self.learn)
            ))),
        }
    }

    /// The policy `value` (an `org.cordon.policy` annotation) names, if the
    /// gate allows it: the built-in name, or the file's resolved path.
    fn policy(&self, value: &str) -> Result<String, ConfigError> {
        let builtin = crate::policy::BUILTIN.iter().any(|(n, _)| *n == value);
        if self.policies.iter().any(|p| p == "*") {
            return Ok(value.to_string());
        }
        if builtin {
            if self.policies.iter().any(|p| p == value) {
                return Ok(value.to_string());
            }
        } else if normalised(value) {
            // Only a normalised path (no `.`, `..`, `//`, trailing `/`) that
            // names an allowed place as written is looked up at all, so no
            // answer depends on what exists elsewhere on the host. It is
            // then resolved (symlinks) and compared again, so no link leads
            // out of an allowed directory.
            let allowed = |p: &Path| {
                self.policies
                    .iter()
                    .filter(|e| e.starts_with('/'))
                    .any(|e| beneath(p, Path::new(e)))
            };
            if allowed(Path::new(value)) {
                if let Ok(real) = std::fs::canonicalize(value) {
                    if allowed(&real) {
                        return Ok(real.to_string_lossy().into_owned());
                    }
                }
            }
        }
        Err(refused(format!(
            "annotation {POLICY}: {value:?} is not a policy containers may choose on this node (allowed: {}; see [annotations] policies in the runtime config)",
            describe(&self.policies)
        )))
    }
}

/// Whether `path` is absolute and normalised: no empty, `.` or `..`
/// component, no trailing `/`, no control character.
fn normalised(path: &str) -> bool {
    path.len() > 1
        && path.starts_with('/')
        && path[1..].split('/').all(|c| !c.is_empty() && c != "." && c != "..")
        && !path.chars().any(char::is_control)
}

/// Whether `real` (resolved) is the file `entry` or lies beneath the
/// directory `entry` (resolved too when it exists).
fn beneath(real: &Path, entry: &Path) -> bool {
    let entry: PathBuf = std::fs::canonicalize(entry).unwrap_or_else(|_| entry.to_path_buf());
    real.starts_with(&entry)
}

fn listed(list: &[String], value: &str, key: &str, field: &str) -> Result<(), ConfigError> {
    if list.iter().any(|v| v == value || v == "*") {
        return Ok(());
    }
    Err(refused(format!(
        "annotation {key}: {value:?} is not allowed on this node (allowed: {}; see [annotations] {field} in the runtime config)",
        describe(list)
    )))
}

fn describe(list: &[String]) -> String {
    if list.is_empty() {
        return "none".into();
    }
    list.iter()
        .map(|p| {
            if p.starts_with('/') && p.ends_with('/') {
                format!("files under {p}")
            } else {
                p.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn choose(gate: &AnnotationGate, pairs: &[(&str, &str)]) -> Result<Choice, String> {
        gate.choose(&ann(pairs), &RuntimeConfig::default())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn without_annotations_the_runtime_config_decides() {
        let cfg = RuntimeConfig {
            policy: "permissive".into(),
            ..Default::default()
        };
        let c = AnnotationGate::default().choose(&HashMap::new(), &cfg).unwrap();
        assert_eq!(c.policy, "permissive", "the admin's own choice is not gated");
        assert_eq!(c.platform, "seccomp-notify");
        assert_eq!(c.enforcement, Enforcement::Kernel);
    }

    #[test]
    fn by_default_only_builtins_other_than_permissive() {
        let g = AnnotationGate::default();
        assert_eq!(choose(&g, &[(POLICY, "audit")]).unwrap().policy, "audit");
        assert_eq!(choose(&g, &[(POLICY, "default")]).unwrap().policy, "default");
        assert_eq!(choose(&g, &[(POLICY, "agent")]).unwrap().policy, "agent");
        let e = choose(&g, &[(POLICY, "permissive")]).unwrap_err();
        assert!(e.contains("org.cordon.policy") && e.contains("\"permissive\""), "{e}");
        assert!(e.contains("files under /etc/cordon/policies/"), "{e}");
    }

    #[test]
    fn host_files_are_refused_without_a_word_of_them() {
        let dir = std::env::temp_dir().join(format!("cordon-gate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("secrets.env");
        std::fs::write(&secret, "AWS_SECRET_ACCESS_KEY = \"abc\"\n").unwrap();
        let g = AnnotationGate::default();
        let e = choose(&g, &[(POLICY, secret.to_str().unwrap())]).unwrap_err();
        assert!(!e.contains("AWS") && !e.contains("abc"), "{e}");
        assert_eq!(e.lines().count(), 1);
        // A missing file reads the same as an existing one outside.
        let e2 = choose(&g, &[(POLICY, dir.join("nope").to_str().unwrap())]).unwrap_err();
        assert!(e2.contains("is not a policy containers may choose"), "{e2}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn allowed_directories_are_matched_after_resolving() {
        let dir = std::env::temp_dir().join(format!("cordon-gate-dir-{}", std::process::id()));
        let allowed = dir.join("policies");
        std::fs::create_dir_all(allowed.join("team")).unwrap();
        std::fs::write(allowed.join("team/p.toml"), "").unwrap();
        std::fs::write(dir.join("outside.toml"), "").unwrap();
        std::os::unix::fs::symlink(dir.join("outside.toml"), allowed.join("link.toml")).unwrap();
        let g = AnnotationGate {
            policies: vec![format!("{}/", allowed.display())],
            ..Default::default()
        };
        let inside = allowed.join("team/p.toml");
        assert_eq!(
            choose(&g, &[(POLICY, inside.to_str().unwrap())]).unwrap().policy,
            inside.to_str().unwrap()
        );
        let dotdot = format!("{}/../outside.toml", allowed.display());
        assert!(choose(&g, &[(POLICY, &dotdot)]).is_err(), "`..` out of the directory");
        assert!(
            choose(&g, &[(POLICY, allowed.join("link.toml").to_str().unwrap())]).is_err(),
            "a symlink out of the directory"
        );
        assert!(choose(&g, &[(POLICY, "default")]).is_err(), "not listed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn errors_of_an_annotated_policy_keep_the_place_not_the_words() {
        let e = crate::policy::Policy::from_toml("name = \"p\"\nTOPSECRET_KEY = 1\n", "/p.toml").unwrap_err();
        assert!(e.to_string().contains("TOPSECRET_KEY"), "the parser names it: {e}");
        let q = quiet(e).to_string();
        assert!(q.contains("line 2, column 1") && !q.contains("TOPSECRET"), "{q}");
        let e = crate::policy::Policy::from_toml(
            "name = \"p\"\n[[syscall]]\nnames = [\"TOPSECRET\"]\naction = \"deny\"\n",
            "/p.toml",
        )
        .unwrap_err();
        let q = quiet(e).to_string();
        assert!(q.contains("syscall[0].names[0]") && !q.contains("TOPSECRET"), "{q}");
    }

    #[test]
    fn nothing_outside_an_allowed_place_is_looked_up() {
        let dir = std::env::temp_dir().join(format!("cordon-gate-oracle-{}", std::process::id()));
        let allowed = dir.join("policies");
        std::fs::create_dir_all(allowed.join("team")).unwrap();
        std::fs::write(allowed.join("team/p.toml"), "").unwrap();
        let g = AnnotationGate {
            policies: vec![format!("{}/", allowed.display())],
            ..Default::default()
        };
        // `..` through a directory that exists, and through one that does
        // not: the same refusal, so the answer says nothing of either.
        let through = |d: &str| format!("{d}/../../{}", allowed.join("team/p.toml").display());
        let exists = choose(&g, &[(POLICY, &through("/tmp/x"))]).unwrap_err();
        let missing = choose(&g, &[(POLICY, &through("/no-such-dir/x"))]).unwrap_err();
        assert_eq!(exists.replace("/tmp/x", "D"), missing.replace("/no-such-dir/x", "D"));
        for odd in ["//x", "/a/./b", "/a/", "/a\nb"] {
            assert!(choose(&g, &[(POLICY, odd)]).is_err(), "{odd:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unknown_keys_are_refused_with_the_known_ones() {
        let e = choose(&AnnotationGate::default(), &[("org.cordon.polcy", "audit")]).unwrap_err();
        assert!(e.contains("org.cordon.polcy") && e.contains("org.cordon.policy"), "{e}");
        // A key is quoted, so a newline or an escape sequence in it stays in
        // its one line.
        let e = choose(
            &AnnotationGate::default(),
            &[("org.cordon.x\nfake: line\u{1b}[31m", "1")],
        )
        .unwrap_err();
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(!e.contains('\u{1b}'), "{e}");
        // Other prefixes are not cordon's business.
        assert!(choose(&AnnotationGate::default(), &[("org.cordonx", "1"), ("io.k8s.x", "y")]).is_ok());
    }

    #[test]
    fn allow_false_refuses_every_key() {
        let g = AnnotationGate {
            allow: false,
            ..Default::default()
        };
        let e = choose(&g, &[(POLICY, "default")]).unwrap_err();
        assert!(e.contains("allow = false"), "{e}");
        assert!(choose(&g, &[]).is_ok());
    }

    #[test]
    fn trace_is_gated_and_checked() {
        let d = AnnotationGate::default();
        assert!(choose(&d, &[(TRACE, "true")]).unwrap().trace);
        assert!(!choose(&d, &[(TRACE, "false")]).unwrap().trace);
        assert!(!choose(&d, &[]).unwrap().trace);
        assert!(choose(&d, &[(TRACE, "yes")]).unwrap_err().contains("not true or false"));
        let g = AnnotationGate {
            trace: false,
            ..Default::default()
        };
        assert!(choose(&g, &[(TRACE, "true")])
            .unwrap_err()
            .contains("[annotations] trace = false"));
        assert!(choose(&g, &[(TRACE, "false")]).is_ok());
    }

    #[test]
    fn platform_and_enforcement_are_gated_and_checked() {
        let g = AnnotationGate {
            platforms: vec!["seccomp-notify".into()],
            enforcement: vec!["kernel".into()],
            ..Default::default()
        };
        assert!(choose(&g, &[(PLATFORM, "ptrace")])
            .unwrap_err()
            .contains("[annotations] platforms"));
        assert!(choose(&g, &[(ENFORCEMENT, "supervisor")])
            .unwrap_err()
            .contains("[annotations] enforcement"));
        assert!(choose(&g, &[(PLATFORM, "kvm")]).unwrap_err().contains("not supported"));
        assert!(choose(&g, &[(ENFORCEMENT, "fast")])
            .unwrap_err()
            .contains("not an enforcement level"));
        let d = AnnotationGate::default();
        assert_eq!(choose(&d, &[(PLATFORM, "ptrace")]).unwrap().platform, "ptrace");
        assert_eq!(
            choose(&d, &[(ENFORCEMENT, "supervisor")]).unwrap().enforcement,
            Enforcement::Supervisor
        );
    }

    #[test]
    fn rootfs_overlay_is_allowed_by_default_and_gated() {
        let d = AnnotationGate::default();
        assert!(choose(&d, &[(ROOTFS, "overlay")]).unwrap().overlay);
        assert!(!choose(&d, &[(ROOTFS, "bundle")]).unwrap().overlay);
        assert!(!choose(&d, &[]).unwrap().overlay);
        let e = choose(&d, &[(ROOTFS, "zfs")]).unwrap_err();
        assert!(e.contains("org.cordon.rootfs") && e.contains("\"zfs\""), "{e}");
        let g = AnnotationGate {
            rootfs: vec!["bundle".into()],
            ..Default::default()
        };
        assert!(choose(&g, &[(ROOTFS, "overlay")])
            .unwrap_err()
            .contains("[annotations] rootfs"));
    }

    #[test]
    fn a_wildcard_allows_anything() {
        let g = AnnotationGate {
            policies: vec!["*".into()],
            ..Default::default()
        };
        assert_eq!(choose(&g, &[(POLICY, "permissive")]).unwrap().policy, "permissive");
        assert_eq!(choose(&g, &[(POLICY, "/x/y.toml")]).unwrap().policy, "/x/y.toml");
    }
}
