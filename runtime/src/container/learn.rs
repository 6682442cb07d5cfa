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
    learn::observe_syscalls(&mut src);
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
            sni: None,
            methods: Vec::new(),
            paths: Vec::new(),
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
    obs: &Observed,
    grants: &[learn::Grant],
    dests: &[learn::Destination],
) -> Result<String, String> {
    let refused = learn::unused_syscalls(obs, from);
    let notes = learn::suggestions(obs);
    let builtin = crate::policy::BUILTIN.iter().any(|(n, _)| *n == from_name);
    if builtin {
        return Ok(learn::policy_text(
            "learned",
            from_name,
            (grants, dests),
            &refused,
            &notes,
        ));
    }
    // A policy file: its own rules after the learned ones, and its base as
    // the learned policy's base, so the base's floor (the default's masks
    // of kernel files) stays before every learned grant, as it does for a
    // built-in.
    let own = own_rules(from_name).unwrap_or_else(|| from.source.clone());
    let base = own.extends.clone().unwrap_or_else(|| "default".into());
    let text = learn::policy_text("learned", &base, (grants, dests), &refused, &notes);
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
    let text = learned_text(from_name, from, obs, &grants, &dests)?;
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
        // The container ran under the observing policy (`create` gives it
        // to a learned container): its trail holds every syscall.
        obs.all_syscalls = true;
        for r in &trail {
            obs.add(&r.syscall, &r.detail, (&r.action, &r.result), r.destination());
        }
        let from = crate::filter::load_policy(&meta.policy).map_err(|e| e.to_string())?;
        let spec: serde_json::Value = std::fs::read_to_string(meta.bundle.join("config.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let rootfs = rootfs_of(&meta.bundle, &spec);
        let learned = learned_policy(&meta.policy, &from, &obs, 2, |d| exists_at_create(&rootfs, &spec, d))?;
        write_beneath(&self.config.annotations.learn, file, &learned.text)
    }
}

/// Writes `text` to `file`, which lies beneath one of the `allowed`
/// directories (`[annotations] learn`), following nothing anyone may have
/// changed since create: the file's directory is reached from the
/// allowed one with no symlink on the way (`RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS`), the text goes to a new file of a random name
/// made there exclusively (`O_CREAT | O_EXCL`, never a planted link), and
/// that is renamed over the name (a rename replaces a link, never
/// follows it).
fn write_beneath(allowed: &[String], file: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::fd::{AsFd, AsRawFd};
    let refused = |why: &str| format!("write {}: {why}", file.display());
    let entry = allowed
        .iter()
        .filter_map(|e| std::fs::canonicalize(e).ok())
        .find(|e| file.starts_with(e))
        .ok_or_else(|| refused("not beneath a directory [annotations] learn lists"))?;
    let name = file.file_name().ok_or_else(|| refused("no file name"))?;
    let rel = file
        .parent()
        .and_then(|p| p.strip_prefix(&entry).ok())
        .ok_or_else(|| refused("not beneath its directory"))?;
    let base = std::fs::File::open(&entry).map_err(|e| refused(&e.to_string()))?;
    let dir = if rel.as_os_str().is_empty() {
        base.as_fd().try_clone_to_owned().map_err(|e| refused(&e.to_string()))?
    } else {
        crate::sys::open_beneath_no_symlinks(base.as_fd(), rel)
            .map_err(|e| refused(&format!("its directory, reached without a symlink: {e}")))?
    };
    for _ in 0..8 {
        let tmp = format!(
            ".{}.learn-{:04x}{:04x}",
            name.to_string_lossy(),
            crate::sys::random_u16(),
            crate::sys::random_u16()
        );
        let c = std::ffi::CString::new(tmp.clone()).map_err(|e| refused(&e.to_string()))?;
        let flags = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let how = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
        let fd = match crate::sys::openat2(dir.as_fd(), &c, flags as u64, 0o644, how) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
            Err(e) => return Err(refused(&e.to_string())),
        };
        let mut f = std::fs::File::from(fd);
        let renamed = f.write_all(text.as_bytes()).map_err(|e| e.to_string()).and_then(|()| {
            nix::fcntl::renameat(Some(dir.as_raw_fd()), tmp.as_str(), Some(dir.as_raw_fd()), name)
                .map_err(|e| e.to_string())
        });
        if let Err(e) = renamed {
            let _ = nix::unistd::unlinkat(
                Some(dir.as_raw_fd()),
                tmp.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
            return Err(refused(&e.to_string()));
        }
        return Ok(());
    }
    Err(refused("no free temporary name"))
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
            let text = learned_text(from_name, &from, &Observed::default(), &grants, &[]).unwrap();
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

    /// The learned policy's file is written beneath its allowed directory
    /// only: a directory swapped for a symlink since create is refused, and
    /// a symlink at the file's name is replaced, never followed.
    #[test]
    fn the_learned_file_never_follows_a_link() {
        let dir = std::env::temp_dir().join(format!("cordon-learn-write-{}", std::process::id()));
        let (allowed, victim) = (dir.join("learned"), dir.join("victim"));
        std::fs::create_dir_all(allowed.join("sub")).unwrap();
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(victim.join("secret"), "ORIGINAL").unwrap();
        let list = [allowed.to_string_lossy().into_owned()];
        // A link at the name: replaced.
        std::os::unix::fs::symlink(victim.join("secret"), allowed.join("p.toml")).unwrap();
        write_beneath(&list, &allowed.join("p.toml"), "learned").unwrap();
        assert_eq!(std::fs::read_to_string(victim.join("secret")).unwrap(), "ORIGINAL");
        assert_eq!(std::fs::read_to_string(allowed.join("p.toml")).unwrap(), "learned");
        assert!(!std::fs::symlink_metadata(allowed.join("p.toml"))
            .unwrap()
            .file_type()
            .is_symlink());
        // The directory swapped for a link: refused.
        std::fs::remove_dir(allowed.join("sub")).unwrap();
        std::os::unix::fs::symlink(&victim, allowed.join("sub")).unwrap();
        assert!(write_beneath(&list, &allowed.join("sub/evil.sh"), "x").is_err());
        assert!(!victim.join("evil.sh").exists());
        // Not beneath an allowed directory: refused.
        assert!(write_beneath(&list, &victim.join("x"), "x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
