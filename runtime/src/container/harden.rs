//! What cordon corrects after libcontainer built a container (its init
//! waits for `start`, nothing of the bundle has run), where libcontainer
//! alone gives the container more than runc does. Done on the built
//! container rather than on the config, so hooks and the state still name
//! the user's bundle.
//!
//! - **Device rules start from deny-all.** runc always starts the device
//!   cgroup from "deny everything" and adds the bundle's rules and its
//!   defaults; libcontainer writes only the rules it is given, so a config
//!   whose `linux.resources.devices` does not begin with a deny-all (the
//!   starter config of `cordon spec`, crun's) left the v1 cgroup at
//!   `a *:* rwm`: a container with CAP_MKNOD could open the host's disks.
//!   The list is written again as runc would: deny-all, the bundle's
//!   rules in order (a privileged bundle's allow-all included), then
//!   libcontainer's defaults.
//! - **cgroup v1 hierarchies read-only, the host's root cgroup not shown.**
//!   libcontainer mounts each v1 hierarchy read-write whatever the `cgroup`
//!   mount's options say, and `name=systemd` (which it does not manage,
//!   so the container sits in its root there) shows the host's root
//!   cgroup. Inside the container's mount namespace, every cgroup mount
//!   below the `cgroup` mount's destination is remounted read-only (unless
//!   the mount asks for `rw`), and named hierarchies are unmounted.
//!   (runtime-spec config.md "Mounts"; runc's `mountCgroupV1`.)

use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxDeviceCgroup, Spec};

use crate::policy::levels::{Mount, PlannedMount};

/// Applies both corrections to the container whose init is host pid `pid`,
/// built from `spec`, then the mounts that enforce its policy's path rules
/// (`mounts`, from `Plan::mounts`: masks, then read-only binds). `empty`
/// is an empty regular file of the host's that masks files.
///
/// Last, the container's views (`views`: a host file and the path inside
/// it goes over, from [`crate::views::prepare`]), each a read-only bind.
///
/// Errors: the device cgroup cannot be written, or the mount namespace
/// cannot be entered or a mount fails (the caller removes the container).
pub fn after_build(
    pid: i32,
    spec: &Spec,
    mounts: &[PlannedMount],
    empty: &Path,
    views: &[(PathBuf, &'static str)],
) -> io::Result<()> {
    device_rules(pid, spec)?;
    // Without a mount namespace of its own the container's mounts are the
    // runtime's (the host's): cordon corrects none of them, and `create`
    // refused a policy that needs mounts (container/mount_ns.rs).
    if super::mount_ns::is_own(pid)? {
        return if mounts.is_empty() && views.is_empty() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "{}: refusing to mount in the runtime's own mount namespace",
                super::mount_ns::RUNC_WORDS
            )))
        };
    }
    cgroup_mounts(pid, spec)?;
    if mounts.is_empty() && views.is_empty() {
        return Ok(());
    }
    // One read-only clone of the empty file per mask, made here, in the
    // host's mount namespace, and attached over a file inside.
    let file = std::ffi::CString::new(empty.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    let trees = mounts
        .iter()
        .map(|m| match m.kind {
            Mount::Mask => crate::sys::open_tree_rdonly(&file).map(Some),
            Mount::ReadOnly => Ok(None),
        })
        .collect::<io::Result<Vec<_>>>()?;
    // Read-only clones of the view files, made in the host's namespace.
    let view_trees = views
        .iter()
        .map(|(file, inside)| {
            let c = std::ffi::CString::new(file.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
            let tree = crate::sys::open_tree_rdonly(&c)
                .map_err(|e| io::Error::new(e.kind(), format!("view {}: {e}", file.display())))?;
            Ok((tree, Path::new(*inside)))
        })
        .collect::<io::Result<Vec<_>>>()?;
    in_mount_ns(pid, || {
        mounts
            .iter()
            .zip(&trees)
            .try_for_each(|(m, tree)| enforce(m, tree.as_ref()))?;
        view_trees
            .iter()
            .try_for_each(|(tree, inside)| view(tree.as_fd(), inside))
    })
}

/// Mounts the view `tree` over the file `inside`; nothing when the
/// container has no such file (no `/sys` mount, say).
fn view(tree: std::os::fd::BorrowedFd<'_>, inside: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(inside) {
        Ok(st) if st.is_file() => crate::sys::move_mount_to(tree, inside)
            .map_err(|e| io::Error::new(e.kind(), format!("view over {}: {e}", inside.display()))),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", inside.display()))),
    }
}

/// Runs `f` on a thread of its own in the mount namespace of host pid
/// `pid` (its root and cwd become the namespace's root).
///
/// Refuses the runtime's own namespace: nothing cordon mounts may land on
/// the host.
fn in_mount_ns(pid: i32, f: impl FnOnce() -> io::Result<()> + Send) -> io::Result<()> {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/mnt"))?;
    {
        use std::os::unix::fs::MetadataExt;
        let (theirs, ours) = (ns.metadata()?, std::fs::metadata("/proc/self/ns/mnt")?);
        if (theirs.dev(), theirs.ino()) == (ours.dev(), ours.ino()) {
            return Err(io::Error::other(format!(
                "pid {pid} shares the runtime's mount namespace: {}",
                super::mount_ns::RUNC_WORDS
            )));
        }
    }
    std::thread::scope(|s| {
        s.spawn(|| -> io::Result<()> {
            // A private fs_struct, then the container's mount namespace:
            // this thread only.
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS)?;
            nix::sched::setns(ns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNS)?;
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("mount thread panicked")))
    })
}

/// One mount of the policy's kernel level, inside the container's mount
/// namespace. A path that does not exist needs none (below a kernel
/// filesystem nothing inside can create it). A mask hides what is there:
/// an empty read-only tmpfs over a directory, `tree` (a read-only clone
/// of an empty file) over a file, so reads are empty and writes fail
/// with EROFS (OCI `maskedPaths` binds `/dev/null`, which takes writes
/// silently). A read-only path is bound over itself with everything
/// mounted below it, and the whole tree made read-only (mount_setattr(2)
/// `AT_RECURSIVE`).
///
/// A `required` path (a rule outside the kernel filesystems) must exist and
/// be reached without a symlink, as when the plan was made; else the
/// container is not created (fail closed: the rule's object changed).
fn enforce(m: &PlannedMount, tree: Option<&std::os::fd::OwnedFd>) -> io::Result<()> {
    use nix::mount::{mount, MsFlags};
    let (kind, path) = (m.kind, Path::new(&m.path));
    let ctx = |what: &'static str| move |e: nix::Error| io::Error::other(format!("{what} {}: {e}", path.display()));
    if m.required {
        crate::sys::open_path_no_symlinks(path).map_err(|e| {
            io::Error::other(format!(
                "{}: {e}: the path a rule protects changed since create looked at it",
                path.display()
            ))
        })?;
    }
    let st = match std::fs::symlink_metadata(path) {
        Ok(st) => st,
        Err(e) if e.kind() == io::ErrorKind::NotFound && !m.required => return Ok(()),
        Err(e) => return Err(e),
    };
    match (kind, tree) {
        (Mount::Mask, _) if st.is_dir() => mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("size=0,mode=555"),
        )
        .map_err(ctx("mask")),
        (Mount::Mask, Some(tree)) => crate::sys::move_mount_to(tree.as_fd(), path)
            .map_err(|e| io::Error::other(format!("mask {}: {e}", path.display()))),
        (Mount::Mask, None) => Err(io::Error::other(format!("mask {}: no empty file", path.display()))),
        (Mount::ReadOnly, _) => {
            mount(
                Some(path),
                path,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )
            .map_err(ctx("bind"))?;
            crate::sys::mount_setattr_rdonly_recursive(path)
                .map_err(|e| io::Error::other(format!("make {} read-only: {e}", path.display())))
        }
    }
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

/// The v1 device-cgroup lines (`TYPE MAJOR:MINOR ACCESS`, allow or deny)
/// runc would leave: deny-all, the bundle's rules, libcontainer's defaults
/// (libcgroups `default_devices` and `default_allow_devices`). `None` when
/// the bundle's rules already begin with a deny-all (nothing to correct).
pub fn device_lines(rules: &[LinuxDeviceCgroup]) -> Option<Vec<(bool, String)>> {
    if rules.first().is_some_and(is_deny_all) {
        return None;
    }
    let mut out = vec![(false, "a *:* rwm".to_string())];
    for r in rules {
        let num = |n: Option<i64>| n.map_or("*".to_string(), |n| n.to_string());
        let typ = r.typ().map_or("a".to_string(), |t| t.as_str().to_string());
        let access = r.access().clone().unwrap_or_else(|| "rwm".into());
        out.push((
            r.allow(),
            format!("{typ} {}:{} {access}", num(r.major()), num(r.minor())),
        ));
    }
    for dev in ["c 1:3", "c 1:5", "c 1:7", "c 5:0", "c 1:9", "c 1:8"] {
        out.push((true, format!("{dev} rwm")));
    }
    for line in [
        "c *:* m",
        "b *:* m",
        "c 5:1 rwm",
        "c 136:* rwm",
        "c 5:2 rwm",
        "c 10:200 rwm",
    ] {
        out.push((true, line.to_string()));
    }
    Some(out)
}

fn device_rules(pid: i32, spec: &Spec) -> io::Result<()> {
    let rules = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.devices().clone())
        .unwrap_or_default();
    let Some(lines) = device_lines(&rules) else {
        return Ok(());
    };
    // The init's devices cgroup (v1); a v2 host has none to correct here.
    let Some(dir) = crate::cgroupv1::dir_of(pid, "devices")? else {
        return Ok(());
    };
    for (allow, line) in lines {
        let file = dir.join(if allow { "devices.allow" } else { "devices.deny" });
        std::fs::write(&file, &line)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {line}: {e}", file.display())))?;
    }
    Ok(())
}

/// One cgroup v1 mount of the container: (mount point, named hierarchy).
pub fn cgroup_v1_mounts(mountinfo: &str, below: &Path) -> Vec<(PathBuf, bool)> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mut post = post.split_whitespace();
            let (fstype, _src, opts) = (post.next()?, post.next()?, post.next()?);
            let point = PathBuf::from(pre.split_whitespace().nth(4)?);
            (fstype == "cgroup" && point.starts_with(below))
                .then(|| (point, opts.split(',').any(|o| o.starts_with("name="))))
        })
        .collect()
}

fn cgroup_mounts(pid: i32, spec: &Spec) -> io::Result<()> {
    let targets: Vec<(PathBuf, bool)> = spec
        .mounts()
        .iter()
        .flatten()
        .filter(|m| m.typ().as_deref() == Some("cgroup"))
        .map(|m| (m.destination().clone(), m.options().iter().flatten().any(|o| o == "rw")))
        .collect();
    if targets.is_empty() {
        return Ok(());
    }
    in_mount_ns(pid, || {
        use nix::mount::{mount, umount2, MntFlags, MsFlags};
        // Its own pid 1 is the init (this thread is not in its pid
        // namespace, so /proc/self would not resolve there).
        let info = std::fs::read_to_string("/proc/1/mountinfo")?;
        for (dest, rw) in &targets {
            for (point, named) in cgroup_v1_mounts(&info, dest) {
                if named {
                    umount2(&point, MntFlags::MNT_DETACH)?;
                } else if !rw {
                    let flags = MsFlags::MS_REMOUNT
                        | MsFlags::MS_BIND
                        | MsFlags::MS_RDONLY
                        | MsFlags::MS_NOSUID
                        | MsFlags::MS_NODEV
                        | MsFlags::MS_NOEXEC;
                    mount(None::<&str>, &point, None::<&str>, flags, None::<&str>)
                        .map_err(|e| io::Error::other(format!("remount {} read-only: {e}", point.display())))?;
                }
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(json: serde_json::Value) -> Vec<LinuxDeviceCgroup> {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn device_rules_start_from_deny_all() {
        let lines = device_lines(&[]).unwrap();
        assert_eq!(lines[0], (false, "a *:* rwm".to_string()));
        assert!(
            lines.contains(&(true, "c 1:3 rwm".to_string())),
            "/dev/null stays usable"
        );
        assert!(
            !lines.iter().any(|(a, l)| *a && l.starts_with("b 7")),
            "no block device opens"
        );
        assert_eq!(
            device_lines(&rules(serde_json::json!([{"allow": false, "access": "rwm"}]))),
            None
        );
        // A privileged bundle's allow-all comes after the deny-all.
        let p = device_lines(&rules(serde_json::json!([{"allow": true, "access": "rwm"}]))).unwrap();
        assert_eq!(p[1], (true, "a *:* rwm".to_string()));
        let one = device_lines(&rules(
            serde_json::json!([{"allow": true, "type": "c", "major": 10, "access": "rw"}]),
        ));
        assert_eq!(one.unwrap()[1], (true, "c 10:* rw".to_string()));
    }

    #[test]
    fn cgroup_mounts_below_a_destination() {
        let info = "110 109 0:64 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
                    111 110 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                    119 110 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n\
                    120 1 0:38 / /other rw - cgroup cgroup rw,pids\n";
        let m = cgroup_v1_mounts(info, Path::new("/sys/fs/cgroup"));
        assert_eq!(
            m,
            [
                (PathBuf::from("/sys/fs/cgroup/cpu"), false),
                (PathBuf::from("/sys/fs/cgroup/systemd"), true)
            ]
        );
    }
}
