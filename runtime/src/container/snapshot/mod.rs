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

mod checkpoint;
mod copy;
mod diff;
mod manifest;
mod ops;

pub use self::{copy::*, diff::*, manifest::*};
pub(super) use ops::{inherited, null_stdio};

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

pub(super) fn other(msg: impl Into<String>) -> Error {
    Error::Snapshot(msg.into())
}

pub(super) fn io_at(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
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
    /// moment longer); no error when it is not mounted. The last unmount
    /// of an overlay syncs its upper filesystem (`sync_filesystem` as the
    /// superblock goes): after a checkpoint wrote files, hundreds of
    /// milliseconds of a restore (`--debug` shows the step).
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
