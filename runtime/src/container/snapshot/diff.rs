//! What changed in a container's files against the layers under it
//! (`cordon diff`).

use super::*;

/// One line of `cordon diff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// `A` added, `C` changed, `D` deleted (as `docker diff`).
    pub kind: char,
    /// Absolute path inside the container.
    pub path: String,
    /// With `--content`, for a regular file: its contents' digests and
    /// their differences ([`Content`]).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
}

/// What `cordon diff --content` adds to a change of a regular file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Content {
    /// SHA-256 (hex) of the file before; `None` where it was no regular
    /// file (added).
    pub old_sha256: Option<String>,
    /// SHA-256 (hex) of the file now; `None` where it is no regular file
    /// (deleted).
    pub new_sha256: Option<String>,
    /// A unified diff (`--- a/PATH`, `+++ b/PATH`, three lines of
    /// context) when both sides are text (UTF-8 without NUL) of at most
    /// [`MAX_TEXT`] bytes; a missing side counts as empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Why a side has no digest although it is a file (larger than
    /// [`MAX_DIGEST`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Largest file (bytes) `diff --content` shows a unified diff of.
pub const MAX_TEXT: u64 = 1 << 20;

/// Largest file (bytes) `diff --content` reads for its digest: a
/// container could otherwise make a diff hash a sparse file of any size.
pub const MAX_DIGEST: u64 = 256 << 20;

/// One side of a file: its size, its digest (not above [`MAX_DIGEST`]),
/// and its text when it is text of at most [`MAX_TEXT`] bytes.
struct Side {
    size: u64,
    sha256: Option<String>,
    text: Option<String>,
}

/// The regular file at `rel` in the layer stack `layers` (uppermost
/// first): the first layer holding one, reached from the layer's root
/// with no symlink followed (a container cannot make this read a host
/// file by swapping a directory for a symlink). `None` when no layer
/// holds a regular file there (or a whiteout hides it first).
fn read_side(layers: &[PathBuf], rel: &str) -> Option<Side> {
    use sha2::Digest;
    use std::io::Read;
    for l in layers {
        let Ok(root) = std::fs::File::open(l) else { continue };
        let fd = match crate::sys::open_beneath_no_symlinks(std::os::fd::AsFd::as_fd(&root), &rel_of(rel)) {
            Ok(fd) => fd,
            // Not in this layer: the next one down shows it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            // A symlink or a file on the way: no regular file there.
            Err(_) => return None,
        };
        let Ok(st) = nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd)) else {
            continue;
        };
        let kind = st.st_mode & libc::S_IFMT;
        if kind == libc::S_IFCHR && st.st_rdev == 0 {
            return None; // a whiteout
        }
        if kind != libc::S_IFREG {
            return None;
        }
        let size = st.st_size as u64;
        if size > MAX_DIGEST {
            return Some(Side {
                size,
                sha256: None,
                text: None,
            });
        }
        let proc = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
        let mut f = std::fs::File::open(proc).ok()?;
        let mut hash = sha2::Sha256::new();
        let mut kept = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = f.read(&mut buf).ok()?;
            if n == 0 {
                break;
            }
            hash.update(&buf[..n]);
            if kept.len() as u64 <= MAX_TEXT {
                kept.extend_from_slice(&buf[..n]);
            }
        }
        let text = (kept.len() as u64 <= MAX_TEXT && !kept.contains(&0))
            .then(|| String::from_utf8(kept).ok())
            .flatten();
        let sha256 = Some(hash.finalize().iter().map(|b| format!("{b:02x}")).collect());
        return Some(Side { size, sha256, text });
    }
    None
}

/// [`Content`] of the change at `path` between the layer stacks `before`
/// and `now`; `None` when neither side is a regular file.
pub(super) fn content(before: &[PathBuf], now: &[PathBuf], kind: char, path: &str) -> Option<Content> {
    let rel = path.trim_start_matches('/');
    let old = if kind == 'A' { None } else { read_side(before, rel) };
    let new = if kind == 'D' { None } else { read_side(now, rel) };
    if old.is_none() && new.is_none() {
        return None;
    }
    let text = |s: &Option<Side>| match s {
        None => Some(String::new()),
        Some(s) => s.text.clone(),
    };
    let diff = match (text(&old), text(&new)) {
        (Some(a), Some(b)) if a != b => Some(
            similar::TextDiff::from_lines(&a, &b)
                .unified_diff()
                .context_radius(3)
                .header(&format!("a{path}"), &format!("b{path}"))
                .to_string(),
        ),
        _ => None,
    };
    let large: Vec<String> = [&old, &new]
        .iter()
        .filter_map(|s| s.as_ref().filter(|s| s.sha256.is_none()).map(|s| s.size.to_string()))
        .collect();
    let note = (!large.is_empty()).then(|| {
        format!(
            "not hashed: {} bytes (over {} MiB)",
            large.join(" and "),
            MAX_DIGEST >> 20
        )
    });
    Some(Content {
        old_sha256: old.and_then(|s| s.sha256),
        new_sha256: new.and_then(|s| s.sha256),
        diff,
        note,
    })
}

/// What the container sees at `rel` with upper layer `m` over `lower`:
/// the entry (from the upper or the lower layer), `None` when absent.
pub(super) fn visible(m: &Manifest, lowers: &[PathBuf], rel: &str) -> Option<Entry> {
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
pub(super) fn lower_entry(lowers: &[PathBuf], rel: &str) -> Option<Entry> {
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
            content: None,
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

    /// Fills in each change's [`Content`]: the files as checkpoint `name`
    /// had them (its chain of layers over `lowers`), or as the container
    /// started with `None`, against the files now (the upper layer over
    /// `lowers`).
    pub fn with_content(&self, id: &str, name: Option<&str>, lowers: &[PathBuf], changes: &mut [Change]) -> Result<()> {
        let mut before: Vec<PathBuf> = match name {
            Some(n) => self
                .chain(id, n)?
                .iter()
                .rev()
                .map(|i| self.checkpoints().join(&i.name).join("layer"))
                .collect(),
            None => Vec::new(),
        };
        before.extend(lowers.iter().cloned());
        let mut now = vec![self.upper()];
        now.extend(lowers.iter().cloned());
        for c in changes.iter_mut() {
            c.content = content(&before, &now, c.kind, &c.path);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_never_follows_a_symlink_out_of_the_layer() {
        let dir = std::env::temp_dir().join(format!("cordon-diff-{}", std::process::id()));
        let (upper, lower) = (dir.join("upper"), dir.join("lower"));
        std::fs::create_dir_all(lower.join("etc")).unwrap();
        std::fs::create_dir_all(&upper).unwrap();
        std::fs::write(lower.join("etc/passwd"), "root:x:0:0\n").unwrap();
        // The container swapped /etc for a symlink to the host's /etc.
        std::os::unix::fs::symlink("/etc", upper.join("etc")).unwrap();
        let layers = [upper.clone(), lower.clone()];
        assert!(
            read_side(&layers, "etc/passwd").is_none(),
            "neither the host's file nor the hidden one"
        );
        let c = content(std::slice::from_ref(&lower), &layers, 'C', "/etc/passwd").expect("the old side is a file");
        assert_eq!(c.new_sha256, None);
        assert_eq!(
            c.diff.as_deref(),
            Some("--- a/etc/passwd\n+++ b/etc/passwd\n@@ -1 +0,0 @@\n-root:x:0:0\n")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_past_the_digest_limit_is_noted_not_read() {
        let dir = std::env::temp_dir().join(format!("cordon-diff-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = std::fs::File::create(dir.join("big")).unwrap();
        f.set_len(MAX_DIGEST + 1).unwrap(); // sparse
        let c = content(&[], std::slice::from_ref(&dir), 'A', "/big").expect("a file");
        assert_eq!(c.new_sha256, None);
        assert_eq!(c.diff, None);
        assert_eq!(c.note.as_deref(), Some("not hashed: 268435457 bytes (over 256 MiB)"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
