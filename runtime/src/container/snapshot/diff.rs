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
