//! A writable layer cordon owns, and checkpoints and diffs of it
//! (docs/CHECKPOINT.md).
//!
//! With `org.cordon.rootfs = "overlay"` (or `cordon create/run --overlay`)
//! the bundle's rootfs is the read-only lower layer of an overlayfs
//! (kernel docs: Documentation/filesystems/overlayfs.rst) and the
//! container writes to an upper layer under the runtime config's
//! `data_dir`:
//!
//! ```text
//! <data_dir>/containers/<id>/
//!     lock                  flock(2): one checkpoint, rm or restore at a time
//!                           (exclusive, its name written in it), or forks
//!                           linking a checkpoint's files (shared)
//!     upper/ work/          overlayfs upperdir and workdir
//!     lower/                (a fork) the checkpoint it started from, as a
//!                           read-only layer of hard links over the rootfs
//!     merged/               the mount; the container's root.path
//!     head.json             the parent of the next checkpoint and the upper
//!                           layer's manifest when it was taken
//!     checkpoints/<name>/   info.json, manifest.json (the whole upper layer
//!                           then), layer/ (what changed since the parent)
//! ```
//!
//! A checkpoint's layer holds the entries of the upper layer that changed
//! since its parent, as overlayfs stores them: a deletion is a whiteout (a
//! character device 0/0), a directory that hides the lower one is opaque
//! (xattr `trusted.overlay.opaque = "y"`). Restoring applies the chain of
//! layers in order onto an empty upper layer.
//!
//! Manifests are JSON, keyed by path: a path's bytes that are not UTF-8
//! are written `\xHH` and a backslash `\\` ([`key_of`], [`rel_of`]), so any
//! name a file system holds is kept.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Error, Result};

/// In `<data_dir>/containers/<id>/` of a container whose overlay an engine
/// mounted: the engine's upper layer (what `delete` removes with it).
pub const ENGINE_MARK: &str = "engine-upper";

fn no_layer(id: &str) -> Error {
    other(format!(
        "container {id:?} has no writable layer of cordon's nor an overlayfs rootfs: create it with --overlay or the \
         annotation org.cordon.rootfs = \"overlay\""
    ))
}

/// The upper and lower layers (uppermost first) of the overlayfs mounted
/// at `mountpoint`, from /proc/self/mountinfo; `None` when it is not one or
/// has no upper layer.
pub fn engine_overlay(mountpoint: &Path) -> Option<(PathBuf, Vec<PathBuf>)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = mountpoint.to_string_lossy();
    // The last mount on the point is the one seen.
    let line = info
        .lines()
        .rfind(|l| l.split(' ').nth(4).map(unescape).as_deref() == Some(&*want))?;
    let (_, post) = line.split_once(" - ")?;
    let mut f = post.split(' ');
    if f.next()? != "overlay" {
        return None;
    }
    let opts = unescape(f.nth(1)?);
    let mut upper = None;
    let mut lowers = Vec::new();
    for o in opts.split(',') {
        if let Some(u) = o.strip_prefix("upperdir=") {
            upper = Some(PathBuf::from(u));
        } else if let Some(l) = o.strip_prefix("lowerdir=") {
            lowers.extend(l.split(':').filter(|x| !x.is_empty()).map(PathBuf::from));
        }
    }
    Some((upper?, lowers))
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

const OPAQUE_XATTR: &str = "trusted.overlay.opaque";
/// overlayfs' own xattrs (`trusted.overlay.*`): its bookkeeping, not the
/// container's; only the opaque flag is kept ([`Entry::opaque`]).
const OVERLAY_XATTRS: &str = "trusted.overlay.";

/// A manifest key for relative path `rel`: its bytes, with those that are
/// not UTF-8 written `\xHH` and a backslash written `\\` (undone by
/// [`rel_of`]). `/` stays itself, so a key's parent is its text up to the
/// last `/`.
pub fn key_of(rel: &Path) -> String {
    let mut out = String::new();
    for chunk in rel.as_os_str().as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// The relative path a [`key_of`] key stands for.
pub fn rel_of(key: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let b = key.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && i + 4 <= b.len() {
            match std::str::from_utf8(&b[i + 2..i + 4])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                Some(v) => {
                    out.push(v);
                    i += 4;
                }
                None => {
                    out.push(b[i]);
                    i += 1;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// `root` joined with the path manifest key `key` stands for.
fn at(root: &Path, key: &str) -> PathBuf {
    root.join(rel_of(key))
}

fn other(msg: impl Into<String>) -> Error {
    Error::Snapshot(msg.into())
}

fn io_at(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.to_string();
    let path = path.to_path_buf();
    move |e| other(format!("{what} {}: {e}", path.display()))
}

/// The directories of one container's writable layer.
#[derive(Debug, Clone)]
pub struct Layer {
    /// `<data_dir>/containers/<id>`.
    pub base: PathBuf,
    /// The upper layer of an overlay an engine mounted (containerd's
    /// snapshotter, Docker's overlay2, podman), when the layer is not
    /// cordon's own: then only its checkpoints live under `base`.
    pub engine_upper: Option<PathBuf>,
}

impl Layer {
    /// The layer of container `id` under `data_dir`.
    pub fn new(data_dir: &Path, id: &str) -> Self {
        Self::at(data_dir.join("containers").join(id))
    }
    /// cordon's own layer at `base`.
    pub fn at(base: PathBuf) -> Self {
        Self {
            base,
            engine_upper: None,
        }
    }
    /// overlayfs `upperdir`.
    pub fn upper(&self) -> PathBuf {
        match &self.engine_upper {
            Some(u) => u.clone(),
            None => self.base.join("upper"),
        }
    }
    /// overlayfs `workdir`.
    pub fn work(&self) -> PathBuf {
        self.base.join("work")
    }
    /// The mount point (the container's root.path).
    pub fn merged(&self) -> PathBuf {
        self.base.join("merged")
    }
    /// The checkpoints' directory.
    pub fn checkpoints(&self) -> PathBuf {
        self.base.join("checkpoints")
    }
    /// A fork's read-only layer of the checkpoint it started from
    /// (`lower/`, hard links to that checkpoint's files), when there is one.
    pub fn own_lower(&self) -> Option<PathBuf> {
        let l = self.base.join("lower");
        (self.engine_upper.is_none() && l.is_dir()).then_some(l)
    }
    /// The lower layers beneath the upper one, uppermost first, as
    /// overlayfs' `lowerdir` lists them: [`Layer::own_lower`] (a fork's),
    /// then `rootfs`.
    pub fn lowers(&self, rootfs: &Path) -> Vec<PathBuf> {
        self.own_lower().into_iter().chain([rootfs.to_path_buf()]).collect()
    }

    /// Creates the directories and mounts the overlay with `lower` (an
    /// absolute directory) read-only beneath. Errors: `base` exists (a
    /// container of this id kept its checkpoints, or another state root
    /// uses the id), a lower path overlayfs options cannot carry (`,` `:`
    /// `\`), the mount fails. Nothing is left on error.
    pub fn create(&self, lower: &Path) -> Result<()> {
        let l = lower.to_string_lossy();
        if l.contains([',', ':', '\\']) || !lower.is_absolute() {
            return Err(other(format!(
                "overlay rootfs: lower layer {:?} must be an absolute path without ',', ':' or '\\'",
                lower
            )));
        }
        if self.base.exists() {
            return Err(other(format!(
                "overlay rootfs: {} exists (checkpoints kept by `delete --keep-checkpoints`, or the id is used \
                 under another state root): remove it first",
                self.base.display()
            )));
        }
        let r = (|| {
            for d in [self.upper(), self.work(), self.merged(), self.checkpoints()] {
                std::fs::create_dir_all(&d).map_err(io_at("create", &d))?;
            }
            std::fs::set_permissions(&self.base, std::fs::Permissions::from_mode(0o700))
                .map_err(io_at("chmod", &self.base))?;
            let top = self.base.parent().expect("containers dir");
            std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o700)).map_err(io_at("chmod", top))?;
            save_json(&self.base.join("head.json"), &Head::default())?;
            self.mount(lower)
        })();
        if r.is_err() {
            let _ = std::fs::remove_dir_all(&self.base);
        }
        r
    }

    /// Mounts the overlay on `merged/` (after [`Layer::create`], or after
    /// a restore rebuilt `upper/`). `redirect_dir`, `index` and `metacopy`
    /// are off: every change stays in the upper layer as plain files,
    /// whiteouts and opaque directories, which is what checkpoints copy.
    pub fn mount(&self, lower: &Path) -> Result<()> {
        let lowers = self.lowers(lower);
        for l in &lowers {
            let t = l.to_string_lossy();
            if t.contains([',', ':', '\\']) || !l.is_absolute() {
                return Err(other(format!(
                    "overlay rootfs: lower layer {l:?} must be an absolute path without ',', ':' or '\\'"
                )));
            }
        }
        let lowerdir: Vec<_> = lowers.iter().map(|l| l.to_string_lossy()).collect();
        let data = format!(
            "lowerdir={},upperdir={},workdir={},redirect_dir=off,index=off,metacopy=off",
            lowerdir.join(":"),
            self.upper().display(),
            self.work().display()
        );
        nix::mount::mount(
            Some("overlay"),
            &self.merged(),
            Some("overlay"),
            nix::mount::MsFlags::empty(),
            Some(data.as_str()),
        )
        .map_err(|e| other(format!("mount overlay on {}: {e}", self.merged().display())))
    }

    /// Whether `merged/` is a mount point now.
    pub fn mounted(&self) -> bool {
        let m = self.merged();
        std::fs::read_to_string("/proc/self/mountinfo")
            .map(|t| t.lines().any(|l| l.split(' ').nth(4) == Some(&*m.to_string_lossy())))
            .unwrap_or(false)
    }

    /// Unmounts `merged/` (lazily: the container's processes may hold it a
    /// moment longer); no error when it is not mounted.
    pub fn unmount(&self) {
        while self.mounted() {
            if nix::mount::umount2(&self.merged(), nix::mount::MntFlags::MNT_DETACH).is_err() {
                break;
            }
        }
    }

    /// Unmounts and removes everything, or with `keep_checkpoints` only the
    /// writable layer (the checkpoints, a fork's `lower/`, head.json and
    /// lock stay).
    pub fn remove(&self, keep_checkpoints: bool) {
        self.unmount();
        if keep_checkpoints && self.checkpoints().exists() {
            for d in [self.upper(), self.work(), self.merged()] {
                let _ = std::fs::remove_dir_all(d);
            }
        } else {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }

    /// Takes the layer's lock for `op` (non-blocking): exclusive for what
    /// changes the layer or its checkpoints (`checkpoint`, `checkpoint rm`,
    /// `restore`), shared for what only reads a checkpoint's files
    /// (`fork`, while it links them), so forks of one container run at
    /// once. The error names the container and the operation that holds
    /// the lock: an exclusive holder writes its name in the lock file, and
    /// shared holders are forks.
    pub fn lock(&self, id: &str, op: &str, exclusive: bool) -> Result<nix::fcntl::Flock<std::fs::File>> {
        use nix::fcntl::{Flock, FlockArg};
        let p = self.base.join("lock");
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&p)
                .map_err(io_at("open", &p))
        };
        let arg = if exclusive {
            FlockArg::LockExclusiveNonblock
        } else {
            FlockArg::LockSharedNonblock
        };
        match Flock::lock(open()?, arg) {
            Ok(mut f) => {
                if exclusive {
                    use std::io::{Seek, Write};
                    let _ = f.set_len(0);
                    let _ = f.seek(std::io::SeekFrom::Start(0));
                    let _ = f.write_all(op.as_bytes());
                }
                Ok(f)
            }
            Err(_) => {
                // Shared holders only (forks) when a shared lock can be had.
                let holder = match Flock::lock(open()?, FlockArg::LockSharedNonblock) {
                    Ok(_) => "fork".to_string(),
                    Err(_) => std::fs::read_to_string(&p)
                        .ok()
                        .filter(|s| !s.is_empty() && s.len() < 32)
                        .unwrap_or_else(|| "checkpoint, checkpoint rm or restore".into()),
                };
                Err(other(format!(
                    "{op} of container {id:?}: refused while a {holder} of it is running (try again once it ends)"
                )))
            }
        }
    }
}

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

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
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
fn xattrs_of(path: &Path) -> std::io::Result<BTreeMap<String, String>> {
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
    fn of(path: &Path) -> std::io::Result<Self> {
        Self::of_since(path, None)
    }

    /// [`Entry::of`], taking the link target and xattrs from `prev` (the
    /// entry at that path in an earlier walk) when the stat, ctime
    /// included, is the same and it is not a directory: changing either
    /// changes ctime. (A directory's ctime also moves with overlayfs' own
    /// xattrs, which is why checkpoints do not compare it; its xattrs are
    /// always read.)
    fn of_since(path: &Path, prev: Option<&Entry>) -> std::io::Result<Self> {
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
    fn seen(&self) -> (&str, u32, u32, u32, u64, i64, &Option<String>, u64) {
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
fn scan_since(root: &Path, prev: Option<&Manifest>) -> Result<Manifest> {
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

fn parent_of(p: &str) -> Option<&str> {
    p.rsplit_once('/').map(|(a, _)| a)
}

/// The paths of `now` a layer on top of `before` must hold: new or changed
/// entries (any stat field, ctime included, or the opaque flag), the
/// directories above them, and whiteouts for what vanished from the upper
/// layer beneath a directory that is still there.
fn changes(before: &Manifest, now: &Manifest) -> (BTreeSet<String>, BTreeSet<String>) {
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

/// How [`copy_entry`] makes a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Files {
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
fn copy_entry(src: &Path, dst: &Path, e: &Entry, files: Files) -> Result<u64> {
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
fn copy_file(src: &Path, dst: &Path, e: &Entry) -> Result<u64> {
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

fn mknod(dst: &Path, mode: u32, rdev: u64) -> Result<()> {
    let c = CString::new(dst.as_os_str().as_bytes()).map_err(|_| other("NUL in path"))?;
    if let Err(e) = crate::sys::fs::mknod(&c, mode, rdev) {
        return Err(other(format!("mknod {}: {}", dst.display(), e)));
    }
    Ok(())
}

fn set_attrs(dst: &Path, e: &Entry) -> Result<()> {
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

fn get_xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let p = CString::new(path.as_os_str().as_bytes()).ok()?;
    let n = CString::new(name).ok()?;
    let mut buf = [0u8; 16];
    let r = crate::sys::fs::lgetxattr(&p, &n, &mut buf).ok()?;
    Some(buf[..r].to_vec())
}

fn set_xattr(path: &Path, name: &str, value: &[u8]) -> Result<()> {
    let p = CString::new(path.as_os_str().as_bytes()).map_err(|_| other("NUL in path"))?;
    let n = CString::new(name).map_err(|_| other("NUL in xattr name"))?;
    if let Err(e) = crate::sys::fs::lsetxattr(&p, &n, value) {
        return Err(other(format!("set {name} on {}: {}", path.display(), e)));
    }
    Ok(())
}

fn save_json<T: Serialize>(path: &Path, v: &T) -> Result<()> {
    let bytes = serde_json::to_vec(v).map_err(|e| other(e.to_string()))?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(io_at("write", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io_at("rename into", path))
}

fn load_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
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

impl Layer {
    /// The checkpoints, oldest first.
    pub fn list(&self) -> Result<Vec<Info>> {
        let dir = self.checkpoints();
        let mut out = Vec::new();
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io_at("read", &dir)(e)),
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            out.push(load_json::<Info>(&e.path().join("info.json"))?);
        }
        out.sort_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
        Ok(out)
    }

    /// Checkpoint `name`'s info; the error names it and the container.
    pub fn info(&self, id: &str, name: &str) -> Result<Info> {
        check_name(name)?;
        let p = self.checkpoints().join(name).join("info.json");
        if !p.exists() {
            return Err(other(format!("container {id:?} has no checkpoint {name:?}")));
        }
        load_json(&p)
    }

    /// The next default name: `cp<N>` one past the highest taken.
    fn next_name(&self) -> Result<String> {
        let n = self
            .list()?
            .iter()
            .filter_map(|i| i.name.strip_prefix("cp")?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        Ok(format!("cp{}", n + 1))
    }

    /// Captures what changed in the upper layer since the head checkpoint
    /// into checkpoint `name` (default: the next `cpN`). `freeze` is called
    /// before the upper layer is read and `thaw` after (also on error).
    /// Written into `checkpoints/.tmp-NAME` and renamed into place: a
    /// checkpoint is complete or absent. The caller holds [`Layer::lock`].
    pub fn checkpoint(
        &self,
        id: &str,
        name: Option<&str>,
        freeze: impl FnOnce() -> Result<bool>,
        thaw: impl FnOnce(),
    ) -> Result<Info> {
        let name = match name {
            Some(n) => {
                check_name(n)?;
                n.to_string()
            }
            None => self.next_name()?,
        };
        let dst = self.checkpoints().join(&name);
        if dst.exists() {
            return Err(other(format!("container {id:?} has a checkpoint {name:?} already")));
        }
        // Leftovers of a checkpoint that failed half way (a crash, a full
        // disk): never renamed into place, so never listed.
        if let Ok(rd) = std::fs::read_dir(self.checkpoints()) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with(".tmp-") {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let head: Head = load_json(&self.base.join("head.json"))?;
        let tmp = self.checkpoints().join(format!(".tmp-{name}"));
        let layer = tmp.join("layer");
        std::fs::create_dir_all(&layer).map_err(io_at("create", &layer))?;
        // A first pass while the container runs copies most of the change;
        // the frozen pass then copies what changed since. A first pass
        // that fails (a file removed under it) leaves it all to the
        // frozen one.
        let pre = match self.capture(&head, &layer, None) {
            Ok((m, _, _)) => Some(m),
            Err(_) => {
                let _ = std::fs::remove_dir_all(&layer);
                std::fs::create_dir_all(&layer).map_err(io_at("create", &layer))?;
                None
            }
        };
        let froze = std::time::Instant::now();
        let was_frozen = match freeze() {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        let captured = self.capture(&head, &layer, pre.as_ref());
        thaw();
        let frozen_ms = if was_frozen {
            froze.elapsed().as_millis() as u64
        } else {
            0
        };
        let r = captured.and_then(|(now, size, files)| {
            let info = Info {
                name: name.clone(),
                created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                parent: head.parent.clone(),
                size,
                files,
                frozen_ms,
            };
            save_json(&tmp.join("manifest.json"), &now)?;
            save_json(&tmp.join("info.json"), &info)?;
            std::fs::rename(&tmp, &dst).map_err(io_at("rename into", &dst))?;
            save_json(
                &self.base.join("head.json"),
                &Head {
                    parent: Some(name.clone()),
                    manifest: now,
                },
            )?;
            Ok(info)
        });
        if r.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        r
    }

    /// Copies the changes of the upper layer since `head` into `layer`;
    /// returns the upper layer's manifest, the bytes of file content the
    /// layer holds and its entries.
    ///
    /// With `pre`, `layer` already holds the changes as a first pass saw
    /// them while the container ran (`pre` is the upper layer's manifest
    /// then): only what differs from it is copied again (an entry whose
    /// stat, inode and ctime included, and xattrs are the same holds the
    /// same content: every write changes ctime, and since Linux 6.13 a
    /// ctime that was read is followed by a fine-grained one), and what is
    /// no longer a change is removed. That second pass is what runs frozen.
    /// What the first pass read through a directory the container swapped
    /// for a symlink meanwhile (a host file) never stands: its inode is not
    /// the one the frozen walk finds, or its path is not there; and a file
    /// is only copied from the inode the walk saw ([`copy_file`]).
    fn capture(&self, head: &Head, layer: &Path, pre: Option<&Manifest>) -> Result<(Manifest, u64, u64)> {
        let upper = self.upper();
        let now = scan_since(&upper, Some(pre.unwrap_or(&head.manifest)))?;
        let (keep, gone) = changes(&head.manifest, &now);
        // What the first pass left in the layer that still stands.
        let mut held = BTreeSet::new();
        if let Some(pre) = pre {
            let (pre_keep, pre_gone) = changes(&head.manifest, pre);
            let mut stale = Vec::new();
            for p in &pre_keep {
                let (was, is) = (&pre[p], now.get(p));
                let stands = keep.contains(p)
                    && is.is_some_and(|is| if was.kind == "dir" { is.kind == "dir" } else { is == was });
                if stands {
                    held.insert(p.clone());
                } else {
                    stale.push(p.clone());
                }
            }
            for p in &pre_gone {
                if gone.contains(p) {
                    held.insert(p.clone());
                } else {
                    stale.push(p.clone());
                }
            }
            // Children before their parents; a removed directory takes
            // its children with it.
            stale.sort();
            for p in stale.iter().rev() {
                let dst = at(layer, p);
                match std::fs::symlink_metadata(&dst) {
                    Ok(m) if m.is_dir() => std::fs::remove_dir_all(&dst).map_err(io_at("remove", &dst))?,
                    Ok(_) => std::fs::remove_file(&dst).map_err(io_at("remove", &dst))?,
                    Err(_) => {}
                }
                held.retain(|h| !(h.starts_with(p.as_str()) && h.as_bytes().get(p.len()) == Some(&b'/')));
            }
        }
        let (mut size, mut files) = (0, 0);
        // The names of one file in this layer are one file here too.
        let mut linked: BTreeMap<u64, PathBuf> = BTreeMap::new();
        // Parents sort before their children.
        for p in &keep {
            let e = &now[p];
            let dst = at(layer, p);
            files += 1;
            let first_name = e.kind == "file" && e.nlink > 1 && e.ino != 0;
            if first_name {
                if let Some(first) = linked.get(&e.ino) {
                    if !held.contains(p) {
                        std::fs::hard_link(first, &dst).map_err(io_at("link to", &dst))?;
                    }
                    continue;
                }
                linked.insert(e.ino, dst.clone());
            }
            if e.kind == "file" {
                size += e.size;
            }
            if !held.contains(p) {
                copy_entry(&at(&upper, p), &dst, e, Files::Copy)?;
            }
        }
        for p in &gone {
            if !held.contains(p) {
                mknod(&at(layer, p), libc::S_IFCHR, 0)?;
            }
            files += 1;
        }
        // Directory times last: creating their children changed them.
        for p in keep.iter().rev() {
            let e = &now[p];
            if e.kind == "dir" {
                set_attrs(&at(layer, p), e)?;
            }
        }
        Ok((now, size, files))
    }

    /// Removes checkpoint `name`. Refused when another checkpoint's parent
    /// is `name` (its layer is part of theirs). When `name` is the head,
    /// the next checkpoint's parent becomes `name`'s parent. The caller
    /// holds [`Layer::lock`].
    pub fn remove_checkpoint(&self, id: &str, name: &str) -> Result<()> {
        let info = self.info(id, name)?;
        if let Some(child) = self.list()?.iter().find(|i| i.parent.as_deref() == Some(name)) {
            return Err(other(format!(
                "checkpoint {name:?} of {id:?} is the parent of {:?}: remove that one first",
                child.name
            )));
        }
        let head_path = self.base.join("head.json");
        let head: Head = load_json(&head_path)?;
        if head.parent.as_deref() == Some(name) {
            let manifest = match &info.parent {
                Some(p) => load_json(&self.checkpoints().join(p).join("manifest.json"))?,
                None => Manifest::new(),
            };
            save_json(
                &head_path,
                &Head {
                    parent: info.parent.clone(),
                    manifest,
                },
            )?;
        }
        // Out of the listing at once, then removed.
        let dir = self.checkpoints().join(name);
        let doomed = self.checkpoints().join(format!(".tmp-rm-{name}"));
        std::fs::rename(&dir, &doomed).map_err(io_at("rename", &dir))?;
        std::fs::remove_dir_all(&doomed).map_err(io_at("remove", &doomed))
    }

    /// The chain of checkpoints from the first to `name`.
    fn chain(&self, id: &str, name: &str) -> Result<Vec<Info>> {
        let mut out = vec![self.info(id, name)?];
        while let Some(p) = out.last().and_then(|i| i.parent.clone()) {
            out.push(self.info(id, &p)?);
        }
        out.reverse();
        Ok(out)
    }

    /// Rebuilds `upper/` (and an empty `work/`) as checkpoint `name` had
    /// it: its chain of layers applied in order onto an empty directory.
    /// `rootfs` is the bottom lower layer (whiteouts are only made where a
    /// lower layer has an entry to hide). The overlay must be unmounted.
    /// The caller holds [`Layer::lock`].
    pub fn rebuild(&self, id: &str, name: &str, rootfs: &Path) -> Result<()> {
        let fresh = self.base.join(".upper-new");
        self.materialize(id, name, &self.lowers(rootfs), &fresh, Files::Copy, None)?;
        for d in [self.upper(), self.work()] {
            std::fs::remove_dir_all(&d).map_err(io_at("remove", &d))?;
        }
        std::fs::rename(&fresh, self.upper()).map_err(io_at("rename into", &self.upper()))?;
        std::fs::create_dir(self.work()).map_err(io_at("create", &self.work()))?;
        let manifest = scan(&self.upper())?;
        save_json(
            &self.base.join("head.json"),
            &Head {
                parent: Some(name.to_string()),
                manifest,
            },
        )
    }

    /// Writes checkpoint `name`'s upper layer (its chain applied in order)
    /// into the new directory `fresh`, over the lower layers `beneath`
    /// (uppermost first), starting from a hard-linked copy of `start` when
    /// given (a fork of a fork: its parent's own lower layer). Files are
    /// copied or hard-linked (`files`); the names one file had at the
    /// checkpoint are one file again. Removes `fresh` on error.
    fn materialize(
        &self,
        id: &str,
        name: &str,
        beneath: &[PathBuf],
        fresh: &Path,
        files: Files,
        start: Option<&Path>,
    ) -> Result<()> {
        let chain = self.chain(id, name)?;
        let _ = std::fs::remove_dir_all(fresh);
        std::fs::create_dir(fresh).map_err(io_at("create", fresh))?;
        let layer_onto = |src: &Path, files: Files| -> Result<()> {
            let m = scan(src)?;
            for (p, e) in &m {
                apply(&at(src, p), fresh, p, e, beneath, files)?;
            }
            for (p, e) in m.iter().rev() {
                if e.kind == "dir" {
                    set_attrs(&at(fresh, p), e)?;
                }
            }
            Ok(())
        };
        let r = (|| {
            if let Some(start) = start {
                layer_onto(start, Files::Link)?;
            }
            for info in &chain {
                layer_onto(&self.checkpoints().join(&info.name).join("layer"), files)?;
            }
            let manifest: Manifest = load_json(&self.checkpoints().join(name).join("manifest.json"))?;
            relink(fresh, &manifest)
        })();
        if let Err(e) = r {
            let _ = std::fs::remove_dir_all(fresh);
            return Err(e);
        }
        Ok(())
    }

    /// Makes `new` (a layer that does not exist yet) start from checkpoint
    /// `name`'s files, copy-on-write: its `lower/` is the checkpoint's upper
    /// layer made of hard links to the checkpoint's files (no file content
    /// is copied; overlayfs copies a file up when the fork writes it), over
    /// `rootfs`; its upper layer starts empty, with no checkpoints. A hard
    /// link rather than the checkpoint's own directory as a lower layer:
    /// the fork does not depend on the parent's checkpoints staying (a
    /// `checkpoint rm` or `delete` of the parent leaves it whole). Nothing
    /// of `new` is left on error.
    pub fn fork_into(&self, id: &str, name: &str, rootfs: &Path, new: &Layer) -> Result<()> {
        if new.base.exists() {
            return Err(other(format!(
                "fork: {} exists (checkpoints kept by `delete --keep-checkpoints`, or the id is used under \
                 another state root): remove it first",
                new.base.display()
            )));
        }
        let r = (|| {
            std::fs::create_dir_all(&new.base).map_err(io_at("create", &new.base))?;
            std::fs::set_permissions(&new.base, std::fs::Permissions::from_mode(0o700))
                .map_err(io_at("chmod", &new.base))?;
            let lower = new.base.join("lower");
            let start = self.own_lower();
            self.materialize(id, name, &[rootfs.to_path_buf()], &lower, Files::Link, start.as_deref())?;
            for d in [new.upper(), new.work(), new.merged(), new.checkpoints()] {
                std::fs::create_dir(&d).map_err(io_at("create", &d))?;
            }
            save_json(&new.base.join("head.json"), &Head::default())
        })();
        if r.is_err() {
            let _ = std::fs::remove_dir_all(&new.base);
        }
        r
    }
}

/// Makes the names each file had in `manifest` (entries of one inode)
/// one file again in `tree`, which holds them as separate files (layers
/// apply name by name), and gives their directories back their times.
fn relink(tree: &Path, manifest: &Manifest) -> Result<()> {
    let mut groups: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (k, e) in manifest {
        if e.kind == "file" && e.nlink > 1 && e.ino != 0 {
            groups.entry(e.ino).or_default().push(k);
        }
    }
    let mut dirs = BTreeSet::new();
    for names in groups.values().filter(|g| g.len() > 1) {
        let first = at(tree, names[0]);
        for k in &names[1..] {
            let dst = at(tree, k);
            std::fs::remove_file(&dst).map_err(io_at("remove", &dst))?;
            std::fs::hard_link(&first, &dst).map_err(io_at("link to", &dst))?;
            if let Some(up) = parent_of(k) {
                dirs.insert(up);
            }
        }
    }
    for d in dirs {
        if let Some(e) = manifest.get(d) {
            set_attrs(&at(tree, d), e)?;
        }
    }
    Ok(())
}

/// Applies one entry of a checkpoint layer to the upper layer being
/// rebuilt at `upper`, over the lower layers `beneath`.
fn apply(src: &Path, upper: &Path, rel: &str, e: &Entry, beneath: &[PathBuf], files: Files) -> Result<()> {
    let dst = at(upper, rel);
    let existing = std::fs::symlink_metadata(&dst).ok();
    if e.kind == "dir" {
        match existing {
            Some(m) if m.is_dir() => {
                if e.opaque {
                    // An opaque directory replaced what was there.
                    std::fs::remove_dir_all(&dst).map_err(io_at("remove", &dst))?;
                    copy_entry(src, &dst, e, files)?;
                } else {
                    set_attrs(&dst, e)?;
                }
            }
            Some(_) => {
                std::fs::remove_file(&dst).map_err(io_at("remove", &dst))?;
                copy_entry(src, &dst, e, files)?;
            }
            None => {
                copy_entry(src, &dst, e, files)?;
            }
        }
        return Ok(());
    }
    if let Some(m) = existing {
        if m.is_dir() {
            std::fs::remove_dir_all(&dst).map_err(io_at("remove", &dst))?;
        } else {
            std::fs::remove_file(&dst).map_err(io_at("remove", &dst))?;
        }
    }
    if e.kind == "whiteout" {
        // Only where there is something beneath to hide: a whiteout of a
        // file the container created and removed is just its absence.
        let hidden_by_opaque = {
            let mut q = rel;
            let mut hidden = false;
            while let Some(up) = parent_of(q) {
                if get_xattr(&at(upper, up), OPAQUE_XATTR).as_deref() == Some(b"y") {
                    hidden = true;
                }
                q = up;
            }
            hidden
        };
        if lower_entry(beneath, rel).is_some() && !hidden_by_opaque {
            copy_entry(src, &dst, e, files)?;
        }
        return Ok(());
    }
    copy_entry(src, &dst, e, files)?;
    Ok(())
}

/// One line of `cordon diff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// `A` added, `C` changed, `D` deleted (as `docker diff`).
    pub kind: char,
    /// Absolute path inside the container.
    pub path: String,
}

/// What the container sees at `rel` with upper layer `m` over `lower`:
/// the entry (from the upper or the lower layer), `None` when absent.
fn visible(m: &Manifest, lowers: &[PathBuf], rel: &str) -> Option<Entry> {
    if let Some(e) = m.get(rel) {
        return (e.kind != "whiteout").then(|| e.clone());
    }
    let mut q = rel;
    while let Some(up) = parent_of(q) {
        match m.get(up) {
            Some(e) if e.kind != "dir" || e.opaque => return None,
            _ => {}
        }
        q = up;
    }
    lower_entry(lowers, rel)
}

/// What the lower layers `lowers` (uppermost first, as overlayfs'
/// `lowerdir`) show at `rel`: each layer's whiteouts and opaque
/// directories hide what is beneath them.
fn lower_entry(lowers: &[PathBuf], rel: &str) -> Option<Entry> {
    for l in lowers {
        let mut q = rel;
        let mut opaque_above = false;
        while let Some(up) = parent_of(q) {
            match Entry::of(&at(l, up)) {
                Ok(e) if e.kind != "dir" => return None,
                Ok(e) if e.opaque => opaque_above = true,
                _ => {}
            }
            q = up;
        }
        if let Ok(e) = Entry::of(&at(l, rel)) {
            return (e.kind != "whiteout").then_some(e);
        }
        if opaque_above {
            return None;
        }
    }
    None
}

/// The changes from upper layer `before` to upper layer `now`, both over
/// `lower` (`before` empty: since the container started). Every path that
/// appeared is `A`, every path that disappeared `D` (a removed directory's
/// entries too). An entry is changed when its type, mode, owner, size (not of directories), mtime,
/// link target or device number differ.
pub fn diff(before: &Manifest, now: &Manifest, lowers: &[PathBuf]) -> Vec<Change> {
    let mut paths: BTreeSet<&str> = before.keys().chain(now.keys()).map(String::as_str).collect();
    let mut beneath = BTreeSet::new();
    for (p, e) in before.iter().chain(now.iter()) {
        if e.opaque || e.kind != "dir" {
            // What an opaque directory, a whiteout or a file hides of a
            // lower directory.
            for lower in lowers {
                if let Ok(m) = scan(&at(lower, p)) {
                    beneath.extend(m.into_keys().map(|k| format!("{p}/{k}")));
                }
            }
        }
    }
    paths.extend(beneath.iter().map(String::as_str));
    let mut out = Vec::new();
    for p in paths {
        let kind = match (visible(before, lowers, p), visible(now, lowers, p)) {
            (None, Some(_)) => 'A',
            (Some(_), None) => 'D',
            (Some(a), Some(b)) if a.seen() != b.seen() => 'C',
            _ => continue,
        };
        out.push(Change {
            kind,
            path: format!("/{p}"),
        });
    }
    out
}

impl Layer {
    /// The changes since checkpoint `name`, or since the start with `None`.
    pub fn diff(&self, id: &str, name: Option<&str>, lowers: &[PathBuf]) -> Result<Vec<Change>> {
        let before = match name {
            Some(n) => {
                self.info(id, n)?;
                load_json(&self.checkpoints().join(n).join("manifest.json"))?
            }
            None => Manifest::new(),
        };
        Ok(diff(&before, &scan(&self.upper())?, lowers))
    }
}

impl super::Runtime {
    /// The writable layer of container `id` (from its meta.json); errors
    /// when the container does not exist or has none of cordon's.
    pub fn meta_layer(&self, id: &str) -> Result<PathBuf> {
        super::validate::id(id)?;
        if !self.root.join(id).join("state.json").exists() {
            return Err(Error::NotFound(id.to_string()));
        }
        self.meta(id).layer.ok_or_else(|| no_layer(id))
    }

    /// Container `id`'s layer and its lower layers (uppermost first): its
    /// own (`--overlay`), else the overlay an engine mounted as its rootfs
    /// (recognised from the mount's `upperdir`), whose checkpoints live in
    /// `<data_dir>/containers/<id>/` (marked by a file `engine-upper`).
    fn layer_of(&self, id: &str) -> Result<(Layer, Vec<PathBuf>)> {
        super::validate::id(id)?;
        if !self.root.join(id).join("state.json").exists() {
            return Err(Error::NotFound(id.to_string()));
        }
        let meta = self.meta(id);
        if let Some(base) = meta.layer {
            let layer = Layer::at(base);
            let lowers = layer.lowers(&meta.lower.unwrap_or_default());
            return Ok((layer, lowers));
        }
        let c = self.load(id)?;
        let rootfs = self.state_of(&c).rootfs;
        let rootfs = std::fs::canonicalize(&rootfs).unwrap_or(rootfs);
        let Some((upper, lowers)) = engine_overlay(&rootfs) else {
            return Err(no_layer(id));
        };
        let mut layer = Layer::new(&self.config.data_dir, id);
        layer.engine_upper = Some(upper.clone());
        if !layer.base.join("head.json").exists() {
            let d = layer.checkpoints();
            std::fs::create_dir_all(&d).map_err(io_at("create", &d))?;
            save_json(&layer.base.join("head.json"), &Head::default())?;
        }
        std::fs::write(layer.base.join(ENGINE_MARK), upper.as_os_str().as_bytes())
            .map_err(io_at("write", &layer.base.join(ENGINE_MARK)))?;
        Ok((layer, lowers))
    }

    /// Container `id`'s own layer and lower layer, for `op` (restore, fork):
    /// refused in one line for an overlay an engine mounted.
    fn own_layer_of(&self, id: &str, op: &str) -> Result<(Layer, PathBuf)> {
        let (layer, lowers) = self.layer_of(id)?;
        if let Some(upper) = &layer.engine_upper {
            return Err(other(format!(
                "{op} {id:?}: its rootfs is an overlay an engine mounted (upperdir {}): changing a mounted overlay's \
                 layers is undefined, and restarting a task behind an engine's shim breaks the engine's state",
                upper.display()
            )));
        }
        // The rootfs: the bottom lower layer.
        let lower = lowers.into_iter().last().unwrap_or_default();
        Ok((layer, lower))
    }

    /// Appends an event to container `id`'s audit trail (pid 0, syscall
    /// `supervisor`, action `event`), as the supervisor records its own.
    fn audit_event(&self, id: &str, detail: &str) {
        if let Ok(log) = crate::supervisor::audit::AuditLog::open(Some(&super::audit_path(&self.root, id))) {
            log.record(0, "supervisor", detail, "event", "ok");
        }
    }

    /// Takes checkpoint `name` (default `cpN`) of running or paused
    /// container `id`: freezes it (cgroup freezer: v1 `freezer.state`
    /// FROZEN, v2 `cgroup.freeze`; libcgroups retries for a bounded time,
    /// then thaws and fails), copies what changed in its upper layer since
    /// the previous checkpoint, thaws it. A paused container stays paused.
    pub fn checkpoint(&self, id: &str, name: Option<&str>) -> Result<Info> {
        use libcgroups::common::{CgroupManager, FreezerState};
        let (layer, _) = self.layer_of(id)?;
        let _guard = layer.lock(id, "checkpoint", true)?;
        let _lock = self.lock(id, false);
        let c = self.load(id)?;
        let status = c.status();
        let paused = status == libcontainer::container::ContainerStatus::Paused;
        if status != libcontainer::container::ContainerStatus::Running && !paused {
            return Err(Error::BadState {
                id: id.into(),
                status: super::status_str(status),
                op: "checkpoint (it must be running or paused)",
            });
        }
        let m = self.cgroup_manager(&c)?;
        let freeze = || {
            if paused {
                return Ok(false);
            }
            m.freeze(FreezerState::Frozen).map_err(|e| {
                let pending = self.calls_in_supervisor(&c);
                let why = if pending > 0 {
                    format!(
                        "{pending} call(s) of the container wait in its supervisor (an open of a FIFO, a blocking \
                         connect) and cannot be frozen; it was thawed, try again once they return"
                    )
                } else {
                    format!("{}; it was thawed", super::chain(&e))
                };
                other(format!("checkpoint of {id:?}: cannot freeze it: {why}"))
            })?;
            Ok(true)
        };
        let thaw = || {
            if !paused {
                let _ = m.freeze(FreezerState::Thawed);
            }
        };
        let info = layer.checkpoint(id, name, freeze, thaw)?;
        self.audit_event(
            id,
            &format!(
                "checkpoint {} (parent {}, {} entries, {} bytes)",
                info.name,
                info.parent.as_deref().unwrap_or("none"),
                info.files,
                info.size
            ),
        );
        Ok(info)
    }

    /// The checkpoints of container `id`, oldest first.
    pub fn checkpoints(&self, id: &str) -> Result<Vec<Info>> {
        self.layer_of(id)?.0.list()
    }

    /// Removes checkpoint `name` of container `id`.
    pub fn checkpoint_rm(&self, id: &str, name: &str) -> Result<()> {
        let (layer, _) = self.layer_of(id)?;
        let _guard = layer.lock(id, "checkpoint rm", true)?;
        layer.remove_checkpoint(id, name)
    }

    /// The changes of container `id`'s files since checkpoint `name`, or
    /// since it started.
    pub fn diff(&self, id: &str, name: Option<&str>) -> Result<Vec<Change>> {
        let (layer, lowers) = self.layer_of(id)?;
        layer.diff(id, name, &lowers)
    }

    /// Restores container `id` to checkpoint `name`: stops its processes,
    /// rebuilds its upper layer as the checkpoint's, and creates and starts
    /// its process again from its bundle's config, with the policy fixed at
    /// its create (its `policy.toml`, not the policy file again) and a fresh
    /// supervisor, standard streams on /dev/null. The audit trail goes on,
    /// with both events.
    pub fn restore(&self, id: &str, name: &str) -> Result<()> {
        let (layer, lower) = self.own_layer_of(id, "restore")?;
        let _guard = layer.lock(id, "restore", true)?;
        layer.info(id, name)?;
        let meta = self.meta(id);
        let spec = oci_spec::runtime::Spec::load(meta.bundle.join("config.json"))
            .map_err(|e| other(format!("restore {id:?}: bundle config: {}", super::chain(&e))))?;
        if spec.process().as_ref().is_some_and(|p| p.terminal() == Some(true)) {
            return Err(other(format!(
                "restore {id:?}: its process has a terminal (process.terminal), which a restore cannot hand to \
                 anyone"
            )));
        }
        // The policy fixed at create stays the container's.
        let fixed_policy = std::fs::read_to_string(self.cordon_dir(id).join(super::POLICY_FILE))
            .ok()
            .map(|text| (meta.policy.clone(), text));
        self.audit_event(id, &format!("restore {name}: stopping the container"));
        let trail = layer.base.join("audit.jsonl");
        let _ = std::fs::rename(super::audit_path(&self.root, id), &trail);
        self.delete_with(id, true, super::Keep::Layer)?;
        layer.rebuild(id, name, &lower)?;
        let mut c = self
            .create(&super::CreateOptions {
                id: id.into(),
                bundle: meta.bundle.clone(),
                detach: true,
                stdio: Some(null_stdio()?),
                overlay: true,
                reuse_layer: Some(layer.base.clone()),
                fixed_policy,
                inherit: inherited(&meta),
                cgroups_path: meta.cgroups_path.clone(),
                ..Default::default()
            })
            .map_err(|e| {
                other(format!(
                    "restore {id:?}: create: {e} (the container is gone; its files and checkpoints stay in {})",
                    layer.base.display()
                ))
            })?;
        if let Err(e) = c.start() {
            let _ = self.delete_with(id, true, super::Keep::Checkpoints);
            return Err(other(format!("restore {id:?}: start: {}", super::chain(&e))));
        }
        self.audit_event(id, &format!("restore {name}: restarted with a fresh supervisor"));
        Ok(())
    }

    /// Creates and starts container `new_id` whose files start as
    /// checkpoint `name` of container `id`, copy-on-write: the checkpoint's
    /// files hard-linked into a read-only `lower/` over the rootfs (see
    /// [`Layer::fork_into`]), an empty writable layer of its own, its own
    /// supervisor, the config of `bundle` (default: `id`'s bundle), whose
    /// rootfs must be `id`'s. It runs under `id`'s policy fixed at create,
    /// platform and enforcement level, or under `policy` when that only
    /// narrows `id`'s ([`Self::fork_policy`]). Standard streams on
    /// /dev/null. `id`'s lock is held, shared, only while the checkpoint's
    /// files are linked: forks of one checkpoint run at once. Nothing of
    /// `new_id` is left on error.
    pub fn fork(&self, id: &str, name: &str, new_id: &str, bundle: Option<&Path>, policy: Option<&str>) -> Result<()> {
        super::validate::id(new_id)?;
        let (layer, lower) = self.own_layer_of(id, "fork")?;
        let meta = self.meta(id);
        let fixed_policy = self.fork_policy(id, &meta, policy)?;
        if self.root.join(new_id).exists() {
            return Err(Error::Exists(new_id.to_string()));
        }
        let bundle = match bundle {
            Some(b) => std::fs::canonicalize(b).map_err(|e| other(format!("fork: bundle {}: {e}", b.display())))?,
            None => meta.bundle.clone(),
        };
        let spec = oci_spec::runtime::Spec::load(bundle.join("config.json"))
            .map_err(|e| other(format!("fork: {}/config.json: {}", bundle.display(), super::chain(&e))))?;
        let root = spec
            .root()
            .as_ref()
            .map(|r| r.path().clone())
            .unwrap_or_else(|| "rootfs".into());
        let root = if root.is_absolute() { root } else { bundle.join(root) };
        if std::fs::canonicalize(&root).ok().as_deref() != Some(lower.as_path()) {
            return Err(other(format!(
                "fork: the bundle's rootfs {} is not the lower layer of {id:?} ({}): a checkpoint's layers only \
                 make sense over their own lower layer",
                root.display(),
                lower.display()
            )));
        }
        let cgroups_path = fork_cgroup(&spec, &meta, new_id);
        let new = Layer::new(&self.config.data_dir, new_id);
        {
            let _guard = layer.lock(id, "fork", false)?;
            layer.info(id, name)?;
            layer.fork_into(id, name, &lower, &new)?;
        }
        let created = self.create(&super::CreateOptions {
            id: new_id.into(),
            bundle: bundle.clone(),
            detach: true,
            stdio: Some(null_stdio()?),
            overlay: true,
            reuse_layer: Some(new.base.clone()),
            fixed_policy: Some(fixed_policy),
            inherit: inherited(&meta),
            cgroups_path,
            ..Default::default()
        });
        let mut c = match created {
            Ok(c) => c,
            Err(e) => {
                new.remove(false);
                return Err(e);
            }
        };
        if let Err(e) = c.start() {
            let _ = self.delete(new_id, true);
            return Err(other(format!("fork {new_id:?}: start: {}", super::chain(&e))));
        }
        self.audit_event(id, &format!("fork {name}: container {new_id} started from it"));
        self.audit_event(new_id, &format!("forked from checkpoint {name} of container {id}"));
        Ok(())
    }

    /// The policy a fork of container `id` runs under (its name and TOML
    /// text): `id`'s own, fixed at its create (`policy.toml`), or
    /// `asked` (`fork --policy`) when it only narrows `id`'s
    /// ([`crate::policy::narrow::only_narrows`]); refused in one line
    /// naming the rule otherwise.
    fn fork_policy(&self, id: &str, meta: &super::Meta, asked: Option<&str>) -> Result<(String, String)> {
        let parent_name = if meta.policy.is_empty() {
            self.config.policy.clone()
        } else {
            meta.policy.clone()
        };
        let parent_text = match std::fs::read_to_string(self.cordon_dir(id).join(super::POLICY_FILE)) {
            Ok(text) => text,
            Err(_) => toml::to_string_pretty(&crate::filter::load_policy(&parent_name)?.source)
                .map_err(Error::RenderPolicy)?,
        };
        let Some(asked) = asked else {
            return Ok((parent_name, parent_text));
        };
        let parent = crate::filter::policy_from_toml(&parent_text, &parent_name)?;
        let candidate = crate::filter::load_policy(asked)?;
        crate::policy::narrow::only_narrows(&parent.source, &candidate.source).map_err(|why| {
            other(format!(
                "fork --policy {asked}: refused: {why} (a fork may only narrow the policy of {id:?}, {parent_name})"
            ))
        })?;
        let text = toml::to_string_pretty(&candidate.source).map_err(Error::RenderPolicy)?;
        Ok((asked.to_string(), text))
    }
}

/// The cgroup of fork `new_id` whose bundle's config is `spec`, when
/// that names its parent's cgroup (the parent's bundle's
/// `linux.cgroupsPath`, or the cgroup cordon chose for a parent that is
/// a fork itself): a cgroup of its own next to it, named by the fork's
/// id (`/p/parent` gives `/p/new_id`, systemd's `slice:prefix:parent`
/// gives `slice:prefix:new_id`). Two containers in one cgroup would
/// share their limits, and `delete --force` of one would kill the other.
/// `None` (the bundle's own, or the default `/cordon/<id>`) otherwise.
fn fork_cgroup(spec: &oci_spec::runtime::Spec, meta: &super::Meta, new_id: &str) -> Option<PathBuf> {
    let named = |s: &oci_spec::runtime::Spec| s.linux().as_ref().and_then(|l| l.cgroups_path().clone());
    let cg = named(spec)?;
    let parents = oci_spec::runtime::Spec::load(meta.bundle.join("config.json"))
        .ok()
        .and_then(|s| named(&s));
    if parents.as_ref() != Some(&cg) && meta.cgroups_path.as_ref() != Some(&cg) {
        return None;
    }
    let text = cg.to_string_lossy();
    if !text.starts_with('/') {
        if let Some((head, _)) = text.rsplit_once(':') {
            return Some(format!("{head}:{new_id}").into());
        }
    }
    Some(cg.parent().unwrap_or(Path::new("/")).join(new_id))
}

/// What a restore or a fork keeps of container `meta`'s create: its
/// platform and enforcement level (a container of an older cordon, with
/// no level recorded, keeps `supervisor` unless all its path rules were
/// in the kernel).
fn inherited(meta: &super::Meta) -> Option<super::Inherited> {
    use crate::policy::Enforcement;
    if meta.platform.is_empty() {
        return None;
    }
    let enforcement = match meta.level.as_deref() {
        Some(l) => Enforcement::parse(l, "level").unwrap_or(Enforcement::Supervisor),
        None if meta.kernel_enforced => Enforcement::Kernel,
        None => Enforcement::Supervisor,
    };
    Some(super::Inherited {
        platform: meta.platform.clone(),
        enforcement,
    })
}

/// Three fds on /dev/null: the standard streams of a process a restore or
/// a fork starts (there is no caller to talk to).
fn null_stdio() -> Result<super::StdioFds> {
    let null = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map(OwnedFd::from)
            .map_err(|e| other(format!("open /dev/null: {e}")))
    };
    Ok(super::StdioFds(std::sync::Arc::new([null()?, null()?, null()?])))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(kind: &str, mtime: i64) -> Entry {
        Entry {
            kind: kind.into(),
            mode: 0o644,
            uid: 0,
            gid: 0,
            size: 1,
            mtime_ns: mtime,
            ctime_ns: mtime,
            rdev: 0,
            target: None,
            opaque: false,
            xattrs: BTreeMap::new(),
            ino: 0,
            nlink: 0,
        }
    }

    /// A layer as [`scan`] sees it, without inode numbers and ctimes (a
    /// copy has its own) and whiteouts' times.
    /// Path, kind, mode, size, mtime, link target, opaque, content.
    type View = (String, String, u32, u64, i64, Option<String>, bool, Vec<u8>);

    fn layer_view(dir: &Path) -> Vec<View> {
        scan(dir)
            .unwrap()
            .into_iter()
            .map(|(k, e)| {
                let content = if e.kind == "file" {
                    std::fs::read(at(dir, &k)).unwrap()
                } else {
                    Vec::new()
                };
                // A whiteout's time is when it was made.
                let mtime = if e.kind == "whiteout" { 0 } else { e.mtime_ns };
                (k, e.kind, e.mode, e.size, mtime, e.target, e.opaque, content)
            })
            .collect()
    }

    #[test]
    fn a_second_pass_over_a_first_one_equals_one_pass() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: whiteouts need CAP_MKNOD");
            return;
        }
        let tmp = std::env::temp_dir().join(format!("cordon-capture-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let layer = Layer::at(tmp.join("base"));
        let up = layer.upper();
        std::fs::create_dir_all(up.join("d/sub")).unwrap();
        std::fs::write(up.join("d/sub/a"), "a").unwrap();
        std::fs::write(up.join("same"), "same").unwrap();
        std::fs::write(up.join("changes"), "one").unwrap();
        std::fs::write(up.join("goes"), "goes").unwrap();
        std::fs::write(up.join("link1"), "linked").unwrap();
        let head = Head {
            parent: None,
            manifest: [("gone-before".to_string(), e("file", 1))].into(),
        };
        let first = tmp.join("first");
        std::fs::create_dir_all(&first).unwrap();
        let (pre, _, _) = layer.capture(&head, &first, None).unwrap();
        // What changes between the passes: content, a removal, a directory
        // turned into a file, a new name of a file, a new file.
        std::fs::write(up.join("changes"), "two, longer").unwrap();
        std::fs::remove_file(up.join("goes")).unwrap();
        std::fs::remove_dir_all(up.join("d")).unwrap();
        std::fs::write(up.join("d"), "now a file").unwrap();
        std::fs::hard_link(up.join("link1"), up.join("link2")).unwrap();
        std::fs::write(up.join("new"), "new").unwrap();
        let (now, size, files) = layer.capture(&head, &first, Some(&pre)).unwrap();
        let once = tmp.join("once");
        std::fs::create_dir_all(&once).unwrap();
        let (now2, size2, files2) = layer.capture(&head, &once, None).unwrap();
        assert_eq!(now, now2);
        assert_eq!((size, files), (size2, files2));
        assert_eq!(layer_view(&first), layer_view(&once));
        let m = |p: &str| std::fs::metadata(first.join(p)).unwrap();
        assert_eq!(
            m("link1").ino(),
            m("link2").ino(),
            "the two names are one file in the layer"
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_copy_reads_only_the_inode_the_walk_saw() {
        let tmp = std::env::temp_dir().join(format!("cordon-swap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let (upper, host) = (tmp.join("upper"), tmp.join("host"));
        std::fs::create_dir_all(upper.join("d")).unwrap();
        std::fs::create_dir_all(&host).unwrap();
        std::fs::write(upper.join("d/x"), "container").unwrap();
        std::fs::write(host.join("x"), "host secret").unwrap();
        let seen = scan(&upper).unwrap()["d/x"].clone();
        // The container swaps the directory for a symlink to the host's.
        std::fs::rename(upper.join("d"), upper.join("d2")).unwrap();
        std::os::unix::fs::symlink(&host, upper.join("d")).unwrap();
        let err = copy_file(&upper.join("d/x"), &tmp.join("copy"), &seen).unwrap_err();
        assert!(err.to_string().contains("replaced while being read"), "{err}");
        assert!(!tmp.join("copy").exists(), "nothing of the host file is copied");
        // The file the walk saw copies.
        copy_file(&upper.join("d2/x"), &tmp.join("copy"), &seen).unwrap();
        assert_eq!(std::fs::read(tmp.join("copy")).unwrap(), b"container");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn keys_keep_any_name() {
        use std::os::unix::ffi::OsStrExt;
        for name in [
            &b"plain/a b"[..],
            b"odd\xffname",
            b"back\\x41slash",
            b"\\",
            b"a\\xzz",
            b"\xc3\xa9t\xc3\xa9",
        ] {
            let rel = Path::new(std::ffi::OsStr::from_bytes(name));
            let key = key_of(rel);
            assert_eq!(rel_of(&key), rel, "{key}");
        }
        assert_eq!(
            key_of(Path::new(std::ffi::OsStr::from_bytes(b"d/odd\xffx"))),
            "d/odd\\xffx"
        );
        assert_eq!(key_of(Path::new("back\\slash")), "back\\\\slash");
        assert_eq!(key_of(Path::new("été")), "été");
    }

    #[test]
    fn xattr_values_round_trip_through_hex() {
        assert_eq!(hex(b"\x00\xffa"), "00ff61");
        assert_eq!(unhex("00ff61").unwrap(), b"\x00\xffa");
        assert!(unhex("0").is_none() && unhex("zz").is_none());
    }

    #[test]
    fn changes_hold_parents_and_whiteouts_only_under_live_directories() {
        let before: Manifest = [
            ("d".to_string(), e("dir", 1)),
            ("d/a".to_string(), e("file", 1)),
            ("x".to_string(), e("dir", 1)),
            ("x/y".to_string(), e("file", 1)),
        ]
        .into();
        // d/a removed; x replaced by a file (x/y went with it).
        let now: Manifest = [("d".to_string(), e("dir", 2)), ("x".to_string(), e("file", 2))].into();
        let (keep, gone) = changes(&before, &now);
        assert_eq!(keep.into_iter().collect::<Vec<_>>(), ["d", "x"]);
        assert_eq!(gone.into_iter().collect::<Vec<_>>(), ["d/a"]);
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/a\040b/c\134d"), "/a b/c\\d");
        assert_eq!(unescape(r"/x\04"), r"/x\04", "a short escape stays");
        assert_eq!(unescape("plain"), "plain");
    }

    #[test]
    fn names_are_checked() {
        for ok in ["cp1", "before-pip", "a.b_c"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".tmp-x", "-x", "a/b", "..", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
