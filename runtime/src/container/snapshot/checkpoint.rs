//! Checkpoints of a layer: taking one, listing, removing, restoring the
//! chain onto an empty upper layer, and the lower layer of a fork.

use super::*;

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
    pub(super) fn next_name(&self) -> Result<String> {
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
    pub(super) fn capture(&self, head: &Head, layer: &Path, pre: Option<&Manifest>) -> Result<(Manifest, u64, u64)> {
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
    pub(super) fn chain(&self, id: &str, name: &str) -> Result<Vec<Info>> {
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
    pub(super) fn materialize(
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
pub(super) fn relink(tree: &Path, manifest: &Manifest) -> Result<()> {
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
pub(super) fn apply(src: &Path, upper: &Path, rel: &str, e: &Entry, beneath: &[PathBuf], files: Files) -> Result<()> {
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
