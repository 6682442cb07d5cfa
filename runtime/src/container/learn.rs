//! Learning a policy from what a container did (docs/LEARN.md): the
//! observing policy a learning run gets, the learned policy's text, and
//! `org.cordon.learn`, which writes it when the container is deleted (the
//! way to learn under an engine). The generation itself is
//! [`crate::policy::learn`].

use std::path::{Path, PathBuf};

use crate::policy::learn::{self, Observed};
use crate::policy::Policy;

use super::{Meta, Runtime};

/// The observing policy: `from` as it is (its denials hold), plus, when
/// the container has a network namespace (not the host's) and `from` has no
/// host rule, one host rule that matches no real name, so that lookups
/// go through the supervisor's resolver and connects are recorded by name.
pub fn observing_policy(from: &Policy, spec: &serde_json::Value) -> Result<String, toml::ser::Error> {
    let mut src = from.source.clone();
    src.extends = Some("none".into());
    src.name = format!("learn-{}", from.name);
    let own_netns = spec["linux"]["namespaces"]
        .as_array()
        .is_some_and(|ns| ns.iter().any(|n| n["type"] == "network"));
    if own_netns && !from.net.has_names() {
        src.net.push(crate::policy::model::NetRule {
            cidr: None,
            host: Some("learn.cordon.invalid".into()),
            family: None,
            ports: Vec::new(),
            action: crate::policy::NetAction::Deny,
            max_names: None,
            note: Some("cordon learn: brings lookups through the supervisor's resolver".into()),
            message: None,
        });
    }
    toml::to_string_pretty(&src)
}

/// The learned policy's text: extending `from_name` when it is built in,
/// else with `from`'s rules after the learned ones.
pub fn learned_text(
    from_name: &str,
    from: &crate::policy::Policy,
    grants: &[learn::Grant],
    dests: &[learn::Destination],
) -> Result<String, String> {
    let builtin = crate::policy::BUILTIN.iter().any(|(n, _)| *n == from_name);
    if builtin {
        return Ok(learn::policy_text("learned", from_name, grants, dests));
    }
    // A policy file: its own rules after the learned ones, and its base as
    // the learned policy's base, so the base's floor (the default's masks
    // of kernel files) stays before every learned grant, as it does for a
    // built-in.
    let own = own_rules(from_name).unwrap_or_else(|| from.source.clone());
    let base = own.extends.clone().unwrap_or_else(|| "default".into());
    let text = learn::policy_text("learned", &base, grants, dests);
    let mut file: crate::policy::PolicyFile = toml::from_str(&text).map_err(|e| e.to_string())?;
    file.default_action = own.default_action;
    file.default_errno = own.default_errno.clone();
    file.syscalls.extend(own.syscalls.iter().cloned());
    file.paths.extend(own.paths.iter().cloned());
    file.net.extend(own.net.iter().cloned());
    file.dns = own.dns.clone();
    file.views = own.views.clone();
    Ok(format!(
        "# Written by `cordon learn` from what one run did, then the rules of {from_name}; check it, then use it.\n{}",
        toml::to_string_pretty(&file).map_err(|e| e.to_string())?
    ))
}

/// A policy file's own rules and base, as written (not merged with its
/// base): TOML, or JSON for a `.json` file.
fn own_rules(path: &str) -> Option<crate::policy::PolicyFile> {
    let text = std::fs::read_to_string(path).ok()?;
    if path.ends_with(".json") {
        serde_json::from_str(&text).ok()
    } else {
        toml::from_str(&text).ok()
    }
}

/// The bundle's rootfs on the host.
pub fn rootfs_of(bundle: &Path, spec: &serde_json::Value) -> PathBuf {
    let root = spec["root"]["path"].as_str().unwrap_or("rootfs");
    bundle.join(root)
}

/// Whether `dir` (a container path) is a directory when the container
/// starts: a mount's destination (or above one), or a directory of the
/// rootfs reached without a symlink.
pub fn exists_at_create(rootfs: &Path, spec: &serde_json::Value, dir: &str) -> bool {
    let mounted = spec["mounts"].as_array().is_some_and(|ms| {
        ms.iter().filter_map(|m| m["destination"].as_str()).any(|d| {
            let d = d.trim_end_matches('/');
            d == dir || d.starts_with(&format!("{dir}/"))
        })
    });
    if mounted {
        return true;
    }
    let Ok(fd) = crate::sys::open_path_no_symlinks(&rootfs.join(dir.trim_start_matches('/'))) else {
        return false;
    };
    nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd))
        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

/// A learned policy: its text, and what it was made of (for the report).
pub struct Learned {
    /// The policy file's text.
    pub text: String,
    /// The directory grants, most specific first.
    pub grants: Vec<learn::Grant>,
    /// The network rules.
    pub dests: Vec<learn::Destination>,
    /// The paths no grant could take (below the root itself).
    pub ungranted: Vec<String>,
}

/// The directory grants and network rules `obs` gives, as the learned
/// policy's text extending `from_name` (`from`), checked to load.
pub fn learned_policy(
    from_name: &str,
    from: &Policy,
    obs: &Observed,
    collapse: usize,
    is_dir: impl Fn(&str) -> bool,
) -> Result<Learned, String> {
    let (grants, ungranted) = learn::grants(obs, collapse, is_dir);
    let dests = learn::destinations(obs);
    let text = learned_text(from_name, from, &grants, &dests)?;
    crate::filter::policy_from_toml(&text, "learned")
        .map_err(|e| format!("the learned policy does not load (please report it with the trail): {e}"))?;
    Ok(Learned {
        text,
        grants,
        dests,
        ungranted,
    })
}

/// The policy a learned container (`org.cordon.learn`) runs under:
/// `full` with, when the container has a network namespace and `full`
/// no host rule, the host rule that brings lookups through the
/// supervisor's resolver ([`observing_policy`]).
///
/// Errors: [`super::Error::Policy`], [`super::Error::RenderPolicy`].
pub(super) fn observing(full: &Policy, spec: &oci_spec::runtime::Spec, name: &str) -> super::Result<Policy> {
    let spec = serde_json::to_value(spec)?;
    let text = observing_policy(full, &spec).map_err(super::Error::RenderPolicy)?;
    let mut observed = crate::filter::policy_from_toml(&text, name)?;
    observed.name = full.name.clone();
    Ok(observed)
}

impl Runtime {
    /// `org.cordon.learn`: writes the policy learned from container
    /// `id`'s trail to `file` (created, or replaced whole), extending the
    /// policy it was created with. Called by `delete` before the trail
    /// goes; a failure is logged, the delete goes on.
    pub(super) fn write_learned(&self, id: &str, meta: &Meta, file: &Path) {
        if let Err(e) = self.learned_for(id, meta, file) {
            tracing::warn!("org.cordon.learn of {id:?}: {e}");
            eprintln!("cordon: org.cordon.learn of {id:?}: {e}");
        }
    }

    fn learned_for(&self, id: &str, meta: &Meta, file: &Path) -> Result<(), String> {
        let trail =
            crate::supervisor::audit::read_all(&super::audit_path(&self.root, id)).map_err(|e| e.to_string())?;
        let mut obs = Observed::default();
        for r in &trail {
            obs.add(&r.syscall, &r.detail, &r.action, r.destination());
        }
        let from = crate::filter::load_policy(&meta.policy).map_err(|e| e.to_string())?;
        let spec: serde_json::Value = std::fs::read_to_string(meta.bundle.join("config.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let rootfs = rootfs_of(&meta.bundle, &spec);
        let learned = learned_policy(&meta.policy, &from, &obs, 2, |d| exists_at_create(&rootfs, &spec, d))?;
        let tmp = PathBuf::from(format!("{}.tmp-{}", file.display(), std::process::id()));
        std::fs::write(&tmp, learned.text).map_err(|e| format!("write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, file).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("write {}: {e}", file.display())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A learned policy keeps the default's floor (its masks of kernel
    /// files) whatever it grants, from a built-in or from a policy file.
    #[test]
    fn a_learned_grant_never_lifts_the_floor() {
        let grants = [learn::Grant {
            dir: "/proc".into(),
            write: false,
            uses: 1,
            files: 1,
            first: "/proc/self/status".into(),
        }];
        let dir = std::env::temp_dir().join(format!("cordon-learn-floor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("from.toml");
        std::fs::write(
            &file,
            "name = \"mine\"\nextends = \"default\"\n[[net]]\ncidr = \"10.0.0.0/8\"\naction = \"deny\"\n",
        )
        .unwrap();
        let file = file.to_string_lossy().into_owned();
        for from_name in ["default", file.as_str()] {
            let from = crate::filter::load_policy(from_name).unwrap();
            let text = learned_text(from_name, &from, &grants, &[]).unwrap();
            let p = crate::filter::policy_from_toml(&text, "learned").unwrap();
            assert_eq!(
                p.paths.access("/proc/self/status"),
                crate::policy::PathAccess::ReadOnly,
                "{from_name}"
            );
            assert_ne!(
                p.paths.access("/proc/kallsyms"),
                crate::policy::PathAccess::ReadOnly,
                "{from_name}: {text}"
            );
            assert_eq!(
                p.paths.access("/etc/passwd"),
                crate::policy::PathAccess::Deny,
                "{from_name}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
