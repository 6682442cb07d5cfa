//! cordon's own mounts (the policy's masks and read-only binds, the
//! `/proc` views, the resolver's `/etc/resolv.conf`) are made only in a
//! mount namespace created for the container. A config whose
//! `linux.namespaces` has no `mount` entry runs in the runtime's own mount
//! namespace, and one that joins a namespace by `path` shares it with
//! whatever else lives there: a mount made there lands on the host (or on
//! another container). runc refuses `maskedPaths`/`readonlyPaths` without
//! a private mount namespace ("unable to restrict sys entries without a
//! private MNT namespace", libcontainer/configs/validate); `create` refuses
//! a policy that needs mounts the same way, before it writes anything, and
//! names the first rule or view that cannot be enforced.
//!
//! A container in the runtime's own mount namespace (no `mount` entry, or
//! one that joins that very namespace) is refused whatever the policy:
//! libcontainer's set-up runs there too (as runc's does), making `/`
//! rslave, binding the rootfs over itself and mounting the bundle's
//! `mounts` below it, and those mounts outlive the container. A container
//! that joins another mount namespace runs when its policy needs no
//! mount of cordon's.

use std::path::Path;

use oci_spec::runtime::{LinuxNamespaceType, Spec};

use crate::policy::levels::{Mount, Plan};
use crate::policy::Policy;

/// runc's words for the same refusal.
pub const RUNC_WORDS: &str = "unable to restrict sys entries without a private MNT namespace";

/// How the container gets its mount namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountNs {
    /// A new one, created for the container.
    Private,
    /// None: the runtime's own.
    Runtime,
    /// An existing one, joined by this path.
    Joined(String),
}

impl MountNs {
    /// What `spec`'s `linux.namespaces` asks for.
    pub fn of(spec: &Spec) -> Self {
        let entry = spec
            .linux()
            .as_ref()
            .and_then(|l| l.namespaces().as_ref())
            .and_then(|ns| ns.iter().find(|n| n.typ() == LinuxNamespaceType::Mount).cloned());
        match entry {
            None => Self::Runtime,
            Some(n) => match n.path() {
                None => Self::Private,
                Some(p) => Self::Joined(p.display().to_string()),
            },
        }
    }

    fn why(&self) -> String {
        match self {
            Self::Private => String::new(),
            Self::Runtime => "linux.namespaces has no \"mount\" entry, so the container shares the runtime's".into(),
            Self::Joined(p) => {
                format!("linux.namespaces joins the mount namespace {p}, which the container does not own")
            }
        }
    }
}

/// The first of cordon's mounts for `policy` (after `plan`) that needs a
/// private mount namespace, described for an error: a path rule the
/// mounts enforce, the `/proc` views, or the resolver's resolv.conf.
/// `None`: the policy needs no mount.
pub fn first_mount(spec: &Spec, policy: &Policy, plan: &Plan) -> Option<String> {
    if plan.all_kernel {
        let rule = plan.choices.iter().find_map(|c| {
            c.mount.as_ref().map(|(kind, path)| {
                let how = match kind {
                    Mount::Mask => "a mask of",
                    Mount::ReadOnly => "a read-only bind of",
                };
                format!("path[{}] {} (enforced by {how} {})", c.rule, c.pattern, path)
            })
        });
        if rule.is_some() {
            return rule;
        }
    }
    if policy.needs_supervisor() && policy.views().proc {
        return Some("[views] proc (the /proc views are bind mounts over /proc/meminfo and the others)".into());
    }
    if policy.net.has_names() && policy.needs_supervisor() && !super::resolver::is_pod_sandbox(spec) {
        return Some("the host rules' resolver (a bind mount over /etc/resolv.conf)".into());
    }
    None
}

/// Refuses `policy` for `spec` when cordon would have to mount and the
/// container gets no mount namespace of its own, and any container in
/// the runtime's own mount namespace (see the module note). The error is
/// one line: the policy, the rule or view, runc's words and why the
/// namespace is not private.
pub fn check(spec: &Spec, policy_name: &str, policy: &Policy, plan: &Plan) -> super::Result<()> {
    let ns = MountNs::of(spec);
    let runtime_ns = match &ns {
        MountNs::Private => return Ok(()),
        MountNs::Runtime => true,
        // A path that does not name a namespace fails libcontainer's build.
        MountNs::Joined(p) => same_file(Path::new(p), Path::new("/proc/self/ns/mnt")).unwrap_or(false),
    };
    match first_mount(spec, policy, plan) {
        Some(what) => Err(super::Error::NoPrivateMountNs {
            policy: policy_name.to_string(),
            what,
            why: ns.why(),
        }),
        None if runtime_ns => Err(super::Error::RuntimeMountNs { why: ns.why() }),
        None => Ok(()),
    }
}

/// Whether `a` and `b` are the same file (followed).
fn same_file(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let (a, b) = (std::fs::metadata(a)?, std::fs::metadata(b)?);
    Ok((a.dev(), a.ino()) == (b.dev(), b.ino()))
}

/// Whether the mount namespace of host pid `pid` is the calling process's
/// own (its `ns/mnt` links name the same namespace).
pub fn is_own(pid: i32) -> std::io::Result<bool> {
    same_file(
        Path::new(&format!("/proc/{pid}/ns/mnt")),
        Path::new("/proc/self/ns/mnt"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(ns: serde_json::Value) -> Spec {
        serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "root": {"path": "rootfs"},
            "process": {"args": ["true"], "cwd": "/", "user": {"uid": 0, "gid": 0}},
            "linux": {"namespaces": ns}
        }))
        .unwrap()
    }

    #[test]
    fn mount_namespace_of_a_spec() {
        assert_eq!(
            MountNs::of(&spec(serde_json::json!([{"type": "mount"}]))),
            MountNs::Private
        );
        assert_eq!(
            MountNs::of(&spec(serde_json::json!([{"type": "pid"}]))),
            MountNs::Runtime
        );
        assert_eq!(
            MountNs::of(&spec(serde_json::json!([{"type": "mount", "path": "/proc/1/ns/mnt"}]))),
            MountNs::Joined("/proc/1/ns/mnt".into())
        );
    }

    #[test]
    fn own_namespace_is_recognised() {
        assert!(is_own(std::process::id() as i32).unwrap());
    }
}
