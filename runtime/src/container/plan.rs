//! Where each path rule of a container's policy is enforced (the
//! container's mounts, Landlock, or the supervisor), decided from its
//! bundle at create (policy/levels.rs has the rules of the choice).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use oci_spec::runtime::Spec;

use super::validate::is_bind;
use super::{validate, Result};
use crate::policy::Policy;

/// The level of each path rule of `policy` for the bundle at `bundle` (a
/// directory with config.json), as `create` would choose it now: for
/// `cordon policy show --explain --bundle`.
///
/// Errors: the bundle or its config.json is invalid (as for `create`).
pub fn plan_for_bundle(
    policy: &Policy,
    enforcement: crate::policy::Enforcement,
    bundle: &Path,
) -> Result<crate::policy::levels::Plan> {
    let (bundle, spec) = validate::bundle(bundle)?;
    Ok(plan_on(policy, enforcement, &bundle, &spec))
}

pub(super) fn plan_on(
    policy: &Policy,
    enforcement: crate::policy::Enforcement,
    bundle: &Path,
    spec: &Spec,
) -> crate::policy::levels::Plan {
    let mount_points: Vec<String> = spec
        .mounts()
        .iter()
        .flatten()
        .map(|m| m.destination().to_string_lossy().into_owned())
        .collect();
    let site = crate::policy::levels::Site {
        kernel_fs: &kernel_fs(spec),
        mount_points: &mount_points,
        existing: &|p| existing_at_create(spec, bundle, p),
        landlock_abi: crate::sys::landlock_abi(),
    };
    policy.plan_at(enforcement, &site)
}

/// What container path `path` is at create (see
/// [`crate::policy::levels::Policy::plan_with`]), looked up on the host:
/// in the bind mount of the spec that covers it (the longest destination),
/// else in the rootfs. `None` when it is missing, neither a directory nor
/// a regular file, under a mount that is not a bind (tmpfs and the like
/// start empty or change on their own), or reached through a symlink
/// (from the rootfs to the mount's destination, or inside the mount).
fn existing_at_create(spec: &Spec, bundle: &Path, path: &str) -> Option<crate::policy::levels::Existing> {
    use crate::policy::levels::Existing;
    let rootfs = spec.root().as_ref().map(|r| r.path().clone())?;
    let rootfs = if rootfs.is_absolute() {
        rootfs
    } else {
        bundle.join(rootfs)
    };
    let under = |dest: &Path| Path::new(path).starts_with(dest);
    let covering = spec
        .mounts()
        .iter()
        .flatten()
        .filter(|m| under(m.destination()))
        .max_by_key(|m| m.destination().components().count());
    let root_fd = std::fs::File::open(&rootfs).ok()?;
    let rel = |p: &Path| p.strip_prefix("/").unwrap_or(p).to_path_buf();
    let (base, rest) = match covering {
        Some(m) => {
            if !is_bind(m) {
                return None;
            }
            // The destination as libcontainer will find it in the rootfs:
            // no symlink on the way (what is missing, it creates as
            // directories).
            let mut prefix = PathBuf::new();
            for c in rel(m.destination()).components() {
                prefix.push(c);
                match crate::sys::open_beneath_no_symlinks(root_fd.as_fd(), &prefix) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => break,
                    Err(_) => return None,
                }
            }
            let source = m.source().clone()?;
            let source = if source.is_absolute() {
                source
            } else {
                bundle.join(source)
            };
            let rest = Path::new(path).strip_prefix(m.destination()).ok()?.to_path_buf();
            (std::fs::File::open(source).ok()?, rest)
        }
        None => (root_fd, rel(Path::new(path))),
    };
    let fd = if rest.as_os_str().is_empty() {
        OwnedFd::from(base)
    } else {
        crate::sys::open_beneath_no_symlinks(base.as_fd(), &rest).ok()?
    };
    let st = nix::sys::stat::fstat(fd.as_raw_fd()).ok()?;
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => Some(Existing::Dir),
        libc::S_IFREG => Some(Existing::File),
        _ => None,
    }
}

/// Where the bundle mounts the kernel's own filesystems (`proc`, `sysfs`):
/// the paths below them only the kernel creates.
fn kernel_fs(spec: &Spec) -> Vec<String> {
    spec.mounts()
        .iter()
        .flatten()
        .filter(|m| matches!(m.typ().as_deref(), Some("proc") | Some("sysfs")))
        .map(|m| m.destination().to_string_lossy().into_owned())
        .collect()
}
