//! Copying entries between layers with their metadata (mode, owner,
//! times, xattrs), and the JSON files of the layer's state.

use super::*;

/// How [`copy_entry`] makes a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Files {
    /// A copy, through copy_file_range(2) (`std::fs::copy`), which shares
    /// blocks where the filesystem can (XFS, btrfs).
    Copy,
    /// A hard link to the source (for a read-only lower layer: the
    /// source, a checkpoint's file, is never written).
    Link,
}

/// Copies one entry `src` to `dst` (which must not exist): content,
/// mode, owner, mtime, xattrs, the opaque flag. A regular file is copied
/// or, with [`Files::Link`], hard-linked (its attributes are then the
/// source's, already right). Returns the bytes copied.
pub(super) fn copy_entry(src: &Path, dst: &Path, e: &Entry, files: Files) -> Result<u64> {
    let mut bytes = 0;
    match e.kind.as_str() {
        "dir" => std::fs::create_dir(dst).map_err(io_at("create", dst))?,
        "file" if files == Files::Link => {
            std::fs::hard_link(src, dst).map_err(io_at("link to", dst))?;
            return Ok(0);
        }
        "file" => bytes = copy_file(src, dst, e)?,
        "symlink" => {
            std::os::unix::fs::symlink(e.target.as_deref().unwrap_or(""), dst).map_err(io_at("create symlink", dst))?
        }
        _ => mknod(dst, e.mode, e.rdev)?,
    }
    set_attrs(dst, e)?;
    Ok(bytes)
}

/// Copies the regular file `src`, which must be the inode `e` names, to
/// the new file `dst`. The first pass of a checkpoint reads the upper layer
/// while the container runs: a directory on the way to `src` may have
/// become a symlink (to a host directory) since the walk. The last
/// component is not followed (O_NOFOLLOW) and the file opened must be the
/// inode the walk saw; otherwise the copy fails (and the frozen pass,
/// which nothing races, copies it). The content goes through
/// copy_file_range(2) (`std::io::copy` of two files).
pub(super) fn copy_file(src: &Path, dst: &Path, e: &Entry) -> Result<u64> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut from = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(src)
        .map_err(io_at("open", src))?;
    let m = from.metadata().map_err(io_at("stat", src))?;
    if e.ino != 0 && (m.ino() != e.ino || !m.is_file()) {
        return Err(other(format!("{}: replaced while being read", src.display())));
    }
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dst)
        .map_err(io_at("create", dst))?;
    std::io::copy(&mut from, &mut to).map_err(io_at("copy to", dst))
}

pub(super) fn mknod(dst: &Path, mode: u32, rdev: u64) -> Result<()> {
    let c = CString::new(dst.as_os_str().as_bytes()).map_err(|_| other("NUL in path"))?;
    if let Err(e) = crate::sys::fs::mknod(&c, mode, rdev) {
        return Err(other(format!("mknod {}: {}", dst.display(), e)));
    }
    Ok(())
}

pub(super) fn set_attrs(dst: &Path, e: &Entry) -> Result<()> {
    use nix::sys::stat::{utimensat, UtimensatFlags};
    use nix::sys::time::TimeSpec;
    nix::unistd::fchownat(
        None,
        dst,
        Some(e.uid.into()),
        Some(e.gid.into()),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(|err| other(format!("chown {}: {err}", dst.display())))?;
    if e.kind != "symlink" {
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(e.mode & 0o7777)).map_err(io_at("chmod", dst))?;
    }
    // After chown, which clears security.capability. A directory kept from
    // an earlier layer loses the xattrs this entry no longer has.
    let had = xattrs_of(dst).map_err(io_at("list xattrs of", dst))?;
    for name in had.keys().filter(|n| !e.xattrs.contains_key(*n)) {
        xattr::remove(dst, name).map_err(|err| other(format!("remove {name} from {}: {err}", dst.display())))?;
    }
    for (name, value) in &e.xattrs {
        if had.get(name) == Some(value) {
            continue;
        }
        let v = unhex(value).ok_or_else(|| other(format!("xattr {name} of {}: value is not hex", dst.display())))?;
        xattr::set(dst, name, &v).map_err(|err| other(format!("set {name} on {}: {err}", dst.display())))?;
    }
    if e.opaque {
        set_xattr(dst, OPAQUE_XATTR, b"y")?;
    }
    let t = TimeSpec::new(
        e.mtime_ns.div_euclid(1_000_000_000),
        e.mtime_ns.rem_euclid(1_000_000_000),
    );
    utimensat(None, dst, &t, &t, UtimensatFlags::NoFollowSymlink)
        .map_err(|err| other(format!("set times of {}: {err}", dst.display())))?;
    Ok(())
}

pub(super) fn get_xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let p = CString::new(path.as_os_str().as_bytes()).ok()?;
    let n = CString::new(name).ok()?;
    let mut buf = [0u8; 16];
    let r = crate::sys::fs::lgetxattr(&p, &n, &mut buf).ok()?;
    Some(buf[..r].to_vec())
}

pub(super) fn set_xattr(path: &Path, name: &str, value: &[u8]) -> Result<()> {
    let p = CString::new(path.as_os_str().as_bytes()).map_err(|_| other("NUL in path"))?;
    let n = CString::new(name).map_err(|_| other("NUL in xattr name"))?;
    if let Err(e) = crate::sys::fs::lsetxattr(&p, &n, value) {
        return Err(other(format!("set {name} on {}: {}", path.display(), e)));
    }
    Ok(())
}

pub(super) fn save_json<T: Serialize>(path: &Path, v: &T) -> Result<()> {
    let bytes = serde_json::to_vec(v).map_err(|e| other(e.to_string()))?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(io_at("write", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io_at("rename into", path))
}

pub(super) fn load_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let b = std::fs::read(path).map_err(io_at("read", path))?;
    serde_json::from_slice(&b).map_err(|e| other(format!("{}: {e}", path.display())))
}

/// Checks a checkpoint name: 1 to 64 of `[A-Za-z0-9_.-]`, not starting
/// with `.` or `-`.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(other(format!(
            "checkpoint name {name:?}: use 1 to 64 of A-Z a-z 0-9 _ . - (not starting with . or -)"
        )))
    }
}
