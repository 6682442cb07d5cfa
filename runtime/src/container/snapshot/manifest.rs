//! Manifests of a layer: what overlayfs stores at each path ([`Entry`]),
//! walked from the layer's root, and what changed between two of them.

use super::*;

/// One entry of an upper layer: what overlayfs stores at a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// `file`, `dir`, `symlink`, `whiteout` or `special` (device, FIFO,
    /// socket).
    pub kind: String,
    /// st_mode (type and permission bits).
    pub mode: u32,
    /// Owner uid and gid, as the host sees them.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Bytes (regular files and symlinks; 0 otherwise).
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Change time, nanoseconds since the epoch: what a checkpoint compares
    /// to its parent's (no process can set it).
    pub ctime_ns: i64,
    /// Device number (devices).
    #[serde(default)]
    pub rdev: u64,
    /// Symlink target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// An opaque directory (hides the lower directory's entries).
    #[serde(default)]
    pub opaque: bool,
    /// Extended attributes but overlayfs' own (`trusted.overlay.*`): name
    /// to value, the value in lowercase hex.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub xattrs: BTreeMap<String, String>,
    /// Inode number in the upper layer (0: a directory, or not recorded).
    /// With `nlink`, what tells the names of one file (hard links) apart
    /// from copies; and what ties a first-pass copy to the file the walk
    /// saw.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ino: u64,
    /// Number of names of the inode (st_nlink; 0: not recorded).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub nlink: u64,
}

pub(super) fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub(super) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(super) fn unhex(s: &str) -> Option<Vec<u8>> {
    s.len()
        .is_multiple_of(2)
        .then(|| {
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
                .collect()
        })
        .flatten()
}

/// The extended attributes of `path` (not followed) but overlayfs' own,
/// values in hex.
pub(super) fn xattrs_of(path: &Path) -> std::io::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for name in xattr::list(path)? {
        let Some(n) = name.to_str() else { continue };
        if n.starts_with(OVERLAY_XATTRS) {
            continue;
        }
        if let Some(v) = xattr::get(path, &name)? {
            out.insert(n.to_string(), hex(&v));
        }
    }
    Ok(out)
}

impl Entry {
    pub(super) fn of(path: &Path) -> std::io::Result<Self> {
        Self::of_since(path, None)
    }

    /// [`Entry::of`], taking the link target and xattrs from `prev` (the
    /// entry at that path in an earlier walk) when the stat, ctime
    /// included, is the same and it is not a directory: changing either
    /// changes ctime. (A directory's ctime also moves with overlayfs' own
    /// xattrs, which is why checkpoints do not compare it; its xattrs are
    /// always read.)
    pub(super) fn of_since(path: &Path, prev: Option<&Entry>) -> std::io::Result<Self> {
        let m = std::fs::symlink_metadata(path)?;
        let ft = m.file_type();
        let kind = if ft.is_dir() {
            "dir"
        } else if ft.is_file() {
            "file"
        } else if ft.is_symlink() {
            "symlink"
        } else if ft.is_char_device() && m.rdev() == 0 {
            "whiteout"
        } else {
            "special"
        };
        let mut e = Self {
            kind: kind.into(),
            mode: m.mode(),
            uid: m.uid(),
            gid: m.gid(),
            size: if ft.is_file() || ft.is_symlink() { m.size() } else { 0 },
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
            rdev: m.rdev(),
            target: None,
            opaque: ft.is_dir() && get_xattr(path, OPAQUE_XATTR).as_deref() == Some(b"y"),
            xattrs: BTreeMap::new(),
            ino: if ft.is_dir() { 0 } else { m.ino() },
            nlink: if ft.is_file() { m.nlink() } else { 0 },
        };
        let same_stat = |p: &Entry| {
            (
                &p.kind, p.mode, p.uid, p.gid, p.size, p.mtime_ns, p.ctime_ns, p.rdev, p.ino, p.nlink,
            ) == (
                &e.kind, e.mode, e.uid, e.gid, e.size, e.mtime_ns, e.ctime_ns, e.rdev, e.ino, e.nlink,
            )
        };
        match prev {
            Some(p) if !ft.is_dir() && same_stat(p) => {
                e.target = p.target.clone();
                e.xattrs = p.xattrs.clone();
            }
            _ => {
                if ft.is_symlink() {
                    e.target = Some(std::fs::read_link(path)?.to_string_lossy().into_owned());
                }
                e.xattrs = xattrs_of(path)?;
            }
        }
        Ok(e)
    }

    /// What a user sees of the entry (for `diff`): everything but ctime.
    pub(super) fn seen(&self) -> (&str, u32, u32, u32, u64, i64, &Option<String>, u64) {
        let size = if self.kind == "dir" { 0 } else { self.size };
        (
            &self.kind,
            self.mode,
            self.uid,
            self.gid,
            size,
            self.mtime_ns,
            &self.target,
            self.rdev,
        )
    }
}

/// Every entry of a layer, by path relative to its root (`etc/passwd`).
pub type Manifest = BTreeMap<String, Entry>;

/// The parent of the next checkpoint and the upper layer's manifest when
/// the parent was taken or restored (`head.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Head {
    /// Name of the last checkpoint taken or restored; `None` before any.
    pub parent: Option<String>,
    /// The upper layer then.
    pub manifest: Manifest,
}

/// A checkpoint's `info.json`, as `cordon checkpoints` lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Info {
    /// Name (`cp1`, `cp2`, ... by default).
    pub name: String,
    /// When it was taken, RFC 3339 UTC.
    pub created: String,
    /// The checkpoint it holds the changes since; `None` for the first.
    pub parent: Option<String>,
    /// Bytes of file content in its layer.
    pub size: u64,
    /// Entries in its layer (files, directories, links, whiteouts).
    pub files: u64,
    /// How long the container was frozen while its changes were copied,
    /// milliseconds (0 when it was paused already).
    pub frozen_ms: u64,
}

/// Walks the upper layer `root`; errors name the path. Keys are
/// [`key_of`] the relative paths.
pub fn scan(root: &Path) -> Result<Manifest> {
    scan_since(root, None)
}

/// [`scan`], reusing what `prev` (an earlier walk of `root`) read of
/// entries whose stat is unchanged ([`Entry::of_since`]).
///
/// The layer can change while the container runs (`diff`, a checkpoint's
/// first pass): a directory swapped for a symlink to a host directory
/// between its stat and its listing must not make the walk list or stat
/// the host's files. So each directory is opened from `root` with no
/// symlink anywhere on its path (openat2 `RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS`), listed and its entries stat'ed through that fd
/// (`/proc/self/fd/N/NAME`, the last component never followed); one that
/// is no longer a directory there is skipped (the frozen pass sees the
/// layer as it is).
pub(super) fn scan_since(root: &Path, prev: Option<&Manifest>) -> Result<Manifest> {
    use std::os::fd::{AsFd, AsRawFd};
    let mut out = Manifest::new();
    let root_fd: OwnedFd = std::fs::File::open(root).map_err(io_at("open", root))?.into();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let shown = root.join(&rel);
        let fd = if rel.as_os_str().is_empty() {
            root_fd.try_clone().map_err(io_at("open", &shown))?
        } else {
            match crate::sys::open_beneath_no_symlinks(root_fd.as_fd(), &rel) {
                Ok(fd) => fd,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOENT | libc::ENOTDIR)) => continue,
                Err(e) => return Err(io_at("open", &shown)(e)),
            }
        };
        let dir = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => continue,
            Err(e) => return Err(io_at("read", &shown)(e)),
        };
        for e in rd {
            let e = e.map_err(io_at("read", &shown))?;
            let rel = rel.join(e.file_name());
            let p = dir.join(e.file_name());
            let key = key_of(&rel);
            let entry = Entry::of_since(&p, prev.and_then(|m| m.get(&key))).map_err(io_at("stat", &root.join(&rel)))?;
            if entry.kind == "dir" {
                stack.push(rel);
            }
            out.insert(key, entry);
        }
    }
    Ok(out)
}

pub(super) fn parent_of(p: &str) -> Option<&str> {
    p.rsplit_once('/').map(|(a, _)| a)
}

/// The paths of `now` a layer on top of `before` must hold: new or changed
/// entries (any stat field, ctime included, or the opaque flag), the
/// directories above them, and whiteouts for what vanished from the upper
/// layer beneath a directory that is still there.
pub(super) fn changes(before: &Manifest, now: &Manifest) -> (BTreeSet<String>, BTreeSet<String>) {
    // overlayfs links every whiteout to one shared inode (the workdir's
    // whiteout, kernel 5.8+): making one changes the ctime of all. A
    // whiteout has nothing else that can change. overlayfs also sets its
    // own xattrs on upper directories (which changes their ctime): a
    // directory is compared by everything but ctime (its entries are
    // compared one by one).
    let same = |a: &Entry, b: &Entry| match (a.kind.as_str(), b.kind.as_str()) {
        ("whiteout", "whiteout") => true,
        ("dir", "dir") => a.seen() == b.seen() && a.opaque == b.opaque,
        _ => a == b,
    };
    let mut keep = BTreeSet::new();
    for (p, e) in now {
        if !before.get(p).is_some_and(|b| same(b, e)) {
            keep.insert(p.clone());
            let mut q = p.as_str();
            while let Some(up) = parent_of(q) {
                keep.insert(up.to_string());
                q = up;
            }
        }
    }
    let mut gone = BTreeSet::new();
    for p in before.keys() {
        if now.contains_key(p) {
            continue;
        }
        let parent_is_dir = match parent_of(p) {
            None => true,
            Some(up) => now.get(up).is_some_and(|e| e.kind == "dir"),
        };
        if parent_is_dir {
            gone.insert(p.clone());
            let mut q = p.as_str();
            while let Some(up) = parent_of(q) {
                keep.insert(up.to_string());
                q = up;
            }
        }
    }
    (keep, gone)
}
