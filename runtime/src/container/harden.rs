//! What cordon changes in a bundle's config before libcontainer builds
//! from it, where libcontainer would give the container more than runc
//! does:
//!
//! - **Device rules start from deny-all.** runc always starts the device
//!   cgroup from "deny everything" and adds the bundle's rules and its
//!   defaults; libcontainer writes only the rules it is given, so a config
//!   whose `linux.resources.devices` does not begin with a deny-all (the
//!   starter config of `cordon spec`, crun's) left the cgroup at
//!   `a *:* rwm`: a container with CAP_MKNOD could open the host's disks.
//!   A deny-all rule is put first; later rules (a privileged bundle's
//!   allow-all included) still apply after it.
//! - **cgroup v1 hierarchies are the container's own, read-only.**
//!   libcontainer bind-mounts each v1 hierarchy read-write whatever the
//!   mount's options say, and for `name=systemd` (which it does not
//!   manage) the host's root cgroup. A `cgroup` mount on a v1 host becomes
//!   a tmpfs with a bind of the container's own cgroup of each controller
//!   hierarchy, read-only unless the mount asks for `rw`; named
//!   hierarchies (`name=systemd`) are left out, since the container has no
//!   cgroup of its own there. (runtime-spec config.md "Mounts"; runc's
//!   `mountCgroupV1`.)

use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxDeviceCgroup, LinuxDeviceCgroupBuilder, Mount, MountBuilder, Spec};

/// Applies the changes above to `spec`; returns whether anything changed.
/// `cgroups_path` is the container's cgroup path (`linux.cgroupsPath`, as
/// cordon will pass it).
pub fn harden(spec: &mut Spec, cgroups_path: &str) -> bool {
    let devices = deny_all_devices_first(spec);
    let cgroups = own_cgroup_mounts(spec, cgroups_path, &v1_hierarchies());
    devices || cgroups
}

fn is_deny_all(r: &LinuxDeviceCgroup) -> bool {
    !r.allow()
        && r.major().is_none()
        && r.minor().is_none()
        && matches!(r.typ(), None | Some(oci_spec::runtime::LinuxDeviceType::A))
        && r.access()
            .as_deref()
            .is_none_or(|a| ['r', 'w', 'm'].iter().all(|c| a.contains(*c)))
}

fn deny_all_devices_first(spec: &mut Spec) -> bool {
    let Some(mut linux) = spec.linux().clone() else {
        return false;
    };
    let mut resources = linux.resources().clone().unwrap_or_default();
    let mut rules = resources.devices().clone().unwrap_or_default();
    if rules.first().is_some_and(is_deny_all) {
        return false;
    }
    let deny = LinuxDeviceCgroupBuilder::default()
        .allow(false)
        .access("rwm")
        .build()
        .expect("a literal device rule builds");
    rules.insert(0, deny);
    resources.set_devices(Some(rules));
    linux.set_resources(Some(resources));
    spec.set_linux(Some(linux));
    true
}

/// The host's cgroup v1 controller hierarchies: (mount point, whether it
/// is a named hierarchy such as `name=systemd`), from
/// `/proc/self/mountinfo`. Empty on a cgroup v2 host.
pub fn v1_hierarchies() -> Vec<(PathBuf, bool)> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    info.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mut post = post.split_whitespace();
            let (fstype, _src, opts) = (post.next()?, post.next()?, post.next()?);
            let point = pre.split_whitespace().nth(4)?;
            (fstype == "cgroup").then(|| (PathBuf::from(point), opts.split(',').any(|o| o.starts_with("name="))))
        })
        .collect()
}

/// Replaces every `cgroup` mount with a tmpfs and read-only binds of the
/// container's cgroup in each controller hierarchy of `hierarchies`.
/// Nothing changes on a v2 host (no hierarchies) or with a systemd-style
/// cgroups path (`slice:prefix:name`), whose directories libcontainer names.
fn own_cgroup_mounts(spec: &mut Spec, cgroups_path: &str, hierarchies: &[(PathBuf, bool)]) -> bool {
    let Some(mounts) = spec.mounts().clone() else {
        return false;
    };
    if hierarchies.is_empty() || cgroups_path.contains(':') || !mounts.iter().any(is_cgroup) {
        return false;
    }
    let rel = cgroups_path.trim_start_matches('/');
    let mut out = Vec::with_capacity(mounts.len() + hierarchies.len());
    for m in mounts {
        if !is_cgroup(&m) {
            out.push(m);
            continue;
        }
        let rw = m.options().iter().flatten().any(|o| o == "rw");
        let dest = m.destination().clone();
        out.push(mount(
            &dest,
            "tmpfs",
            Path::new("tmpfs"),
            &["nosuid", "noexec", "nodev", "mode=755"],
        ));
        for (point, named) in hierarchies {
            let Some(name) = point.file_name() else { continue };
            if *named {
                continue;
            }
            let access = if rw { "rw" } else { "ro" };
            out.push(mount(
                &dest.join(name),
                "bind",
                &point.join(rel),
                &["rbind", "nosuid", "noexec", "nodev", access],
            ));
        }
    }
    spec.set_mounts(Some(out));
    true
}

fn is_cgroup(m: &Mount) -> bool {
    m.typ().as_deref() == Some("cgroup")
}

fn mount(dest: &Path, typ: &str, source: &Path, options: &[&str]) -> Mount {
    MountBuilder::default()
        .destination(dest)
        .typ(typ)
        .source(source)
        .options(options.iter().map(|o| o.to_string()).collect::<Vec<_>>())
        .build()
        .expect("a mount with every field set builds")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> Spec {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn device_rules_start_from_deny_all() {
        let mut s = spec(serde_json::json!({"ociVersion": "1.0.2", "linux": {"resources": {"devices": []}}}));
        assert!(deny_all_devices_first(&mut s));
        let rules = s
            .linux()
            .as_ref()
            .unwrap()
            .resources()
            .as_ref()
            .unwrap()
            .devices()
            .clone()
            .unwrap();
        assert!(is_deny_all(&rules[0]));
        assert!(!deny_all_devices_first(&mut s), "already first: unchanged");
        // A privileged bundle's allow-all stays after it.
        let mut p = spec(
            serde_json::json!({"ociVersion": "1.0.2", "linux": {"resources": {"devices": [
            {"allow": true, "access": "rwm"}]}}}),
        );
        assert!(deny_all_devices_first(&mut p));
        let rules = p
            .linux()
            .as_ref()
            .unwrap()
            .resources()
            .as_ref()
            .unwrap()
            .devices()
            .clone()
            .unwrap();
        assert!(rules.len() == 2 && rules[1].allow());
    }

    #[test]
    fn cgroup_mounts_become_own_read_only_binds() {
        let hier = [
            (PathBuf::from("/sys/fs/cgroup/memory"), false),
            (PathBuf::from("/sys/fs/cgroup/systemd"), true),
        ];
        let mut s = spec(serde_json::json!({"ociVersion": "1.0.2", "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["ro"]}]}));
        assert!(own_cgroup_mounts(&mut s, "/cordon/c1", &hier));
        let m = s.mounts().clone().unwrap();
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(m[1].typ().as_deref(), Some("tmpfs"));
        assert_eq!(
            m[2].source().as_deref(),
            Some(Path::new("/sys/fs/cgroup/memory/cordon/c1"))
        );
        assert_eq!(m[2].destination(), Path::new("/sys/fs/cgroup/memory"));
        assert!(m[2].options().as_ref().unwrap().contains(&"ro".to_string()));
        // systemd-style paths and v2 hosts: unchanged.
        let mut t = spec(serde_json::json!({"ociVersion": "1.0.2", "mounts": [
            {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup"}]}));
        assert!(!own_cgroup_mounts(&mut t, "system.slice:x:y", &hier));
        assert!(!own_cgroup_mounts(&mut t, "/x", &[]));
    }
}
