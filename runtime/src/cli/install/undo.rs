//! `cordon uninstall ENGINE`: removes exactly what `install` added (see
//! the parent module): the backup byte for byte when the file is what
//! `install` made of it, else cordon's marked block, else the runtime's
//! entry in place; never a runtime that is not cordon's, nor the engine's
//! default runtime.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_json::Value as Json;
use toml::{Table, Value as Toml};

use super::{
    backup_path, check_name, diff, dotted, get, markers, plan, read_if_exists, runc_runtime, write_file,
    ContainerdLayout, Doc, Engine, Target, UninstallArgs, POD_ANNOTATIONS,
};

/// Runs `cordon uninstall`.
pub fn uninstall(a: UninstallArgs) -> anyhow::Result<i32> {
    check_name(&a.runtime)?;
    let path = a.config.unwrap_or_else(|| PathBuf::from(a.engine.default_config()));
    let Some(current) = read_if_exists(&path)? else {
        println!("{}: no such file: nothing to remove", path.display());
        return Ok(0);
    };
    let backup_file = backup_path(&fs::canonicalize(&path).unwrap_or_else(|_| path.clone()));
    let backup = read_if_exists(&backup_file)?;
    let undo = plan_uninstall(a.engine, &a.runtime, &current, backup.as_deref())
        .with_context(|| format!("{}", path.display()))?;
    let new = match &undo {
        Undo::Nothing => {
            println!("{}: no runtime {:?}: nothing to remove", path.display(), a.runtime);
            return Ok(0);
        }
        Undo::Restore(text) | Undo::Text(text) => Some(text.as_str()),
        Undo::RemoveFile => None,
    };
    if !a.write {
        print!("{}", diff(&path, Some(&current), new));
        if !a.dry_run {
            eprintln!("# --write applies it");
        }
        return Ok(0);
    }
    match &undo {
        Undo::Nothing => {}
        Undo::Restore(text) => {
            write_file(&path, text, None)?;
            fs::remove_file(&backup_file).with_context(|| format!("remove {}", backup_file.display()))?;
            println!(
                "{}: runtime {:?} removed (restored from {})",
                path.display(),
                a.runtime,
                backup_file.display()
            );
        }
        Undo::Text(text) => {
            write_file(&path, text, None)?;
            println!("{}: runtime {:?} removed", path.display(), a.runtime);
        }
        Undo::RemoveFile => {
            fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))?;
            println!(
                "{}: removed (cordon created it and it held nothing else)",
                path.display()
            );
        }
    }
    println!("{}", a.engine.next_step(&a.runtime, false));
    Ok(0)
}

/// What `uninstall` does to the file.
#[derive(Debug, PartialEq)]
pub(super) enum Undo {
    /// The runtime is not there.
    Nothing,
    /// Put back the backup's text (the file is what install made of it).
    Restore(String),
    /// Write this text.
    Text(String),
    /// Remove the file (cordon created it and it is as cordon wrote it).
    RemoveFile,
}

/// A cordon runtime found in a config: how to install it again.
#[derive(Debug)]
pub(super) struct Entry {
    /// The binary the engine runs (empty with cordon's own shim).
    binary: String,
    /// containerd: on cordon's own shim.
    shim: bool,
    /// containerd, runc shim: `options.Root`.
    state_root: String,
}

/// The names of the runtimes in `doc` that are cordon's.
pub(super) fn cordon_runtimes(engine: Engine, doc: &Doc) -> anyhow::Result<Vec<String>> {
    let names: Vec<String> = match (engine, doc) {
        (Engine::Docker, Doc::Json(j)) => j
            .get("runtimes")
            .and_then(Json::as_object)
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default(),
        (_, Doc::Toml(t)) => {
            let path: Vec<&str> = runtimes_path(engine, t)?;
            get(t, &path)
                .and_then(Toml::as_table)
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let mut mine = Vec::new();
    for n in names {
        if cordon_entry(engine, doc, &n).is_ok_and(|e| e.is_some()) {
            mine.push(n);
        }
    }
    Ok(mine)
}

/// Where a TOML engine keeps its runtimes.
pub(super) fn runtimes_path(engine: Engine, t: &Table) -> anyhow::Result<Vec<&'static str>> {
    Ok(match engine {
        Engine::Containerd => ContainerdLayout::of(t)?.runtimes().to_vec(),
        _ => vec!["engine", "runtimes"],
    })
}

/// Whether `binary` is a cordon binary (or a wrapper named after it, such
/// as `cordon-audit`).
pub(super) fn is_cordon_binary(binary: &str) -> bool {
    Path::new(binary)
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("cordon"))
}

/// Runtime `name` of `doc`: `None` when there is none; an error naming the
/// key when there is one that is not cordon's.
pub(super) fn cordon_entry(engine: Engine, doc: &Doc, name: &str) -> anyhow::Result<Option<Entry>> {
    let not_ours = |what: &str| anyhow::anyhow!("runtime {name:?} is not cordon's ({what}): not removing it");
    match (engine, doc) {
        (Engine::Docker, Doc::Json(j)) => {
            let Some(rt) = j.get("runtimes").and_then(|r| r.get(name)) else {
                return Ok(None);
            };
            let path = rt.get("path").and_then(Json::as_str).unwrap_or_default();
            if !is_cordon_binary(path) {
                return Err(not_ours(&format!("runtimes.{name}.path is {path:?}")));
            }
            Ok(Some(Entry {
                binary: path.into(),
                shim: false,
                state_root: String::new(),
            }))
        }
        (Engine::Containerd, Doc::Toml(t)) => {
            let mut path = ContainerdLayout::of(t)?.runtimes().to_vec();
            path.push(name);
            let Some(rt) = get(t, &path) else {
                return Ok(None);
            };
            let rt = rt
                .as_table()
                .ok_or_else(|| not_ours(&format!("{} is not a table", dotted(&path))))?;
            let annotated = rt
                .get("pod_annotations")
                .and_then(Toml::as_array)
                .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(POD_ANNOTATIONS)));
            if !annotated {
                return Err(not_ours(&format!(
                    "{} has no pod_annotations {POD_ANNOTATIONS:?}",
                    dotted(&path)
                )));
            }
            let shim = rt.get("runtime_type").and_then(Toml::as_str) == Some("io.containerd.cordon.v2");
            let option = |key| get(rt, &["options", key]).and_then(Toml::as_str).unwrap_or_default();
            Ok(Some(Entry {
                binary: option("BinaryName").into(),
                shim,
                state_root: option("Root").into(),
            }))
        }
        (Engine::Podman, Doc::Toml(t)) => {
            let Some(rt) = get(t, &["engine", "runtimes", name]) else {
                return Ok(None);
            };
            let binary = rt
                .as_array()
                .and_then(|a| a.first())
                .and_then(Toml::as_str)
                .unwrap_or_default();
            if !is_cordon_binary(binary) {
                return Err(not_ours(&format!("engine.runtimes.{name} runs {binary:?}")));
            }
            Ok(Some(Entry {
                binary: binary.into(),
                shim: false,
                state_root: String::new(),
            }))
        }
        _ => Ok(None),
    }
}

/// `doc` without runtime `name` (which is there and cordon's): the entry
/// goes, then tables left empty on its path; with `drop_runc`, in
/// containerd's config, a runc runtime left alone as install writes it
/// goes too (containerd's built-in one is the same). Refuses to remove the
/// engine's default runtime.
pub(super) fn remove_runtime(engine: Engine, doc: &Doc, name: &str, drop_runc: bool) -> anyhow::Result<Doc> {
    match doc {
        Doc::Json(j) => {
            if j.get("default-runtime").and_then(Json::as_str) == Some(name) {
                bail!("default-runtime is {name:?}: make another runtime the default first");
            }
            let mut j = j.clone();
            if let Some(rts) = j.get_mut("runtimes").and_then(Json::as_object_mut) {
                rts.remove(name);
                if rts.is_empty() {
                    j.as_object_mut().map(|o| o.remove("runtimes"));
                }
            }
            Ok(Doc::Json(j))
        }
        Doc::Toml(t) => {
            let path = runtimes_path(engine, t)?;
            let default = match engine {
                Engine::Containerd => {
                    let mut p = path[..3].to_vec();
                    p.push("default_runtime_name");
                    (get(t, &p).and_then(Toml::as_str), dotted(&p))
                }
                _ => (
                    get(t, &["engine", "runtime"]).and_then(Toml::as_str),
                    "engine.runtime".into(),
                ),
            };
            if default.0 == Some(name) {
                bail!("{} is {name:?}: make another runtime the default first", default.1);
            }
            let mut t = t.clone();
            remove_at(&mut t, &path, &|rts: &mut Table| {
                rts.remove(name);
                if drop_runc
                    && engine == Engine::Containerd
                    && rts.len() == 1
                    && rts.get("runc").and_then(Toml::as_table) == Some(&runc_runtime())
                {
                    rts.remove("runc");
                }
            });
            Ok(Doc::Toml(t))
        }
    }
}

/// Applies `f` to the table at `path` under `t`, then removes the tables on
/// the path that were left empty.
pub(super) fn remove_at(t: &mut Table, path: &[&str], f: &dyn Fn(&mut Table)) {
    let Some((first, rest)) = path.split_first() else {
        f(t);
        return;
    };
    if let Some(Toml::Table(inner)) = t.get_mut(*first) {
        remove_at(inner, rest, f);
        if inner.is_empty() {
            t.remove(*first);
        }
    }
}

/// `text` without the block `install` appended for runtime `name` (and the
/// blank line before it), if there is one.
pub(super) fn strip_block(text: &str, name: &str) -> Option<String> {
    let (begin, end) = markers(name);
    let start = if text.starts_with(&format!("{begin}\n")) {
        0
    } else {
        text.find(&format!("\n{begin}\n"))? + 1
    };
    let end_line = format!("\n{end}\n");
    let stop = start + text[start..].find(&end_line)? + end_line.len();
    let mut prefix = &text[..start];
    if prefix.ends_with("\n\n") {
        prefix = &prefix[..prefix.len() - 1];
    }
    Some(format!("{prefix}{}", &text[stop..]))
}

/// Plans removing runtime `name` from `engine`'s config file whose text is
/// `current`; `backup` is `FILE.before-cordon`, if there is one.
pub(super) fn plan_uninstall(engine: Engine, name: &str, current: &str, backup: Option<&str>) -> anyhow::Result<Undo> {
    let doc = Doc::parse(engine, current)?;
    let Some(entry) = cordon_entry(engine, &doc, name)? else {
        return Ok(Undo::Nothing);
    };
    let removed = remove_runtime(engine, &doc, name, false)?;
    let target = Target {
        engine,
        name,
        binary: &entry.binary,
        shim: entry.shim,
        state_root: &entry.state_root,
    };
    // What install would make of `before`, if it changed it.
    let installed = |before: &str| -> Option<Doc> {
        let text = plan(&target, before).ok()?.text?;
        Doc::parse(engine, &text).ok()
    };
    if let Some(b) = backup {
        if installed(b).as_ref() == Some(&doc) {
            return Ok(Undo::Restore(b.to_string()));
        }
    }
    if backup.is_none() && plan(&target, "").ok().and_then(|p| p.text).as_deref() == Some(current) {
        return Ok(Undo::RemoveFile);
    }
    // cordon's block holds runc's runtime when install added it.
    let without_runc = remove_runtime(engine, &doc, name, true)?;
    if let Some(text) = strip_block(current, name) {
        if Doc::parse(engine, &text).is_ok_and(|d| d == removed || d == without_runc) {
            return Ok(Undo::Text(text));
        }
    }
    if let Doc::Toml(target) = &removed {
        if let Some(text) = prune_in_place(current, target) {
            if Doc::parse(engine, &text).is_ok_and(|d| d == removed) {
                return Ok(Undo::Text(text));
            }
        }
    }
    Ok(Undo::Text(removed.render()?))
}

/// `current` without every key that `target` (a document with keys of
/// `current` removed) lacks, comments and layout kept.
pub(super) fn prune_in_place(current: &str, target: &Table) -> Option<String> {
    let mut doc = current.parse::<toml_edit::DocumentMut>().ok()?;
    prune_edit(doc.as_table_mut(), target)?;
    Some(doc.to_string())
}

/// Removes from `t` the keys `target` lacks, descending into tables.
pub(super) fn prune_edit(t: &mut dyn toml_edit::TableLike, target: &Table) -> Option<()> {
    let keys: Vec<String> = t.iter().map(|(k, _)| k.to_string()).collect();
    for key in keys {
        match target.get(&key) {
            None => {
                t.remove(&key);
            }
            Some(Toml::Table(inner)) => {
                if let Some(child) = t.get_mut(&key).and_then(|i| i.as_table_like_mut()) {
                    prune_edit(child, inner)?;
                }
            }
            Some(_) => {}
        }
    }
    Some(())
}
