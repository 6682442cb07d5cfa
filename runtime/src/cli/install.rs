//! `cordon install ENGINE` and `cordon uninstall ENGINE`: the configuration
//! containerd, Docker or podman needs to run containers with cordon (as
//! gVisor's `runsc install`), and taking it out again.
//!
//! `install` merges into the engine's config file (or `--config PATH`) and
//! keeps everything there: containerd's default runtime stays runc (its
//! runc runtime is written out when the file relied on containerd's
//! built-in one, which a `runtimes` table in the file would otherwise
//! replace), the config keeps its `version` (a new file is version 2), and
//! the runtime on the runc shim gets its own `Root` so cordon's state never
//! lands in runc's. Without `--write` it prints the snippet; `--dry-run`
//! prints the unified diff `--write` would apply. Installing twice changes
//! nothing the second time.
//!
//! TOML files (containerd, podman) get cordon's tables appended between two
//! marker comments when that keeps the user's comments and layout and means
//! the same as the merge; otherwise the merged document is written out whole
//! (comments are then lost). daemon.json is JSON: always rewritten whole,
//! keeping every other key. The first write keeps the file as it was beside
//! it, `FILE.before-cordon`.
//!
//! `uninstall` removes exactly what `install` added: the backup comes back
//! byte for byte when the file is what `install` made of it; else cordon's
//! marked block is cut out when what is left means the file without the
//! runtime; else the runtime's entry is removed from the document. It never
//! removes a runtime that is not cordon's, nor the engine's default runtime.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use serde_json::Value as Json;
use toml::{Table, Value as Toml};

/// The engines `install` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// containerd's CRI plugin (Kubernetes): a runtime on the runc shim
    Containerd,
    /// dockerd: a `runtimes` entry in daemon.json
    Docker,
    /// podman: an `[engine.runtimes]` entry in containers.conf
    Podman,
}

/// `options.Root` of a runtime on containerd's runc shim: cordon's
/// containers apart from runc's (`/run/containerd/runc`); the shim passes
/// `--root <Root>/<namespace>`. cordon's own shim uses it by default.
pub const RUNC_SHIM_ROOT: &str = "/run/containerd/cordon";

/// What a containerd runtime of cordon's passes through: every annotation
/// cordon reads (`org.cordon.policy`, `org.cordon.platform`, ...). Also how
/// `uninstall` tells cordon's runtimes from others.
const POD_ANNOTATIONS: &str = "org.cordon.*";

impl Engine {
    /// The engine's system-wide config file.
    fn default_config(self) -> &'static str {
        match self {
            Engine::Containerd => "/etc/containerd/config.toml",
            Engine::Docker => "/etc/docker/daemon.json",
            Engine::Podman => "/etc/containers/containers.conf",
        }
    }

    /// The engine's name on the command line.
    fn arg(self) -> &'static str {
        match self {
            Engine::Containerd => "containerd",
            Engine::Docker => "docker",
            Engine::Podman => "podman",
        }
    }

    /// What to do after writing the file.
    fn next_step(self, name: &str, installed: bool) -> String {
        match (self, installed) {
            (Engine::Containerd, true) => format!(
                "restart containerd to apply it; Kubernetes pods then select it with a RuntimeClass \
                 whose handler is {name:?}"
            ),
            (Engine::Containerd, false) => "restart containerd to apply it".into(),
            (Engine::Docker, true) => format!(
                "reload dockerd to apply it (systemctl reload docker, or SIGHUP); then \
                 `docker run --runtime {name} ...`"
            ),
            (Engine::Docker, false) => "reload dockerd to apply it (systemctl reload docker, or SIGHUP)".into(),
            (Engine::Podman, true) => format!("`podman --runtime {name} run ...` uses it"),
            (Engine::Podman, false) => "podman reads it at its next command".into(),
        }
    }
}

/// `install` arguments.
#[derive(Args, Debug)]
pub struct InstallArgs {
    /// Engine to configure
    #[arg(value_enum)]
    pub engine: Engine,
    /// Merge the configuration into the engine's config file instead of
    /// printing it
    #[arg(long)]
    pub write: bool,
    /// Print the unified diff --write would apply, and change nothing
    #[arg(long, conflicts_with = "write")]
    pub dry_run: bool,
    /// Config file to read and write (default: /etc/containerd/config.toml,
    /// /etc/docker/daemon.json or /etc/containers/containers.conf)
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Name the engine knows the runtime by
    #[arg(long, default_value = "cordon")]
    pub runtime: String,
    /// Absolute path of the cordon binary the engine runs (default: this
    /// binary), e.g. its path on the host when installing from a container
    #[arg(long)]
    pub binary: Option<PathBuf>,
    /// For containerd's runc shim: options.Root, the directory under which
    /// cordon keeps the containers (per namespace), apart from runc's
    #[arg(long, default_value = RUNC_SHIM_ROOT)]
    pub state_root: PathBuf,
    /// For containerd: use cordon's own shim (runtime_type
    /// io.containerd.cordon.v2; containerd-shim-cordon-v2 must be on
    /// containerd's PATH) instead of the runc shim with BinaryName
    #[arg(long)]
    pub shim: bool,
}

/// `uninstall` arguments.
#[derive(Args, Debug)]
pub struct UninstallArgs {
    /// Engine whose configuration to take cordon out of
    #[arg(value_enum)]
    pub engine: Engine,
    /// Change the engine's config file (without it, print the diff and
    /// change nothing)
    #[arg(long)]
    pub write: bool,
    /// Print the unified diff --write would apply, and change nothing (the
    /// default)
    #[arg(long, conflicts_with = "write")]
    pub dry_run: bool,
    /// Config file (default: the engine's, as for install)
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Name of the runtime to remove
    #[arg(long, default_value = "cordon")]
    pub runtime: String,
}

/// The runtime `install` configures.
#[derive(Clone, Copy, Debug)]
struct Target<'a> {
    engine: Engine,
    name: &'a str,
    binary: &'a str,
    /// containerd: cordon's own shim instead of the runc shim.
    shim: bool,
    /// containerd, runc shim: `options.Root`.
    state_root: &'a str,
}

/// Runs `cordon install`.
pub fn install(a: InstallArgs) -> anyhow::Result<i32> {
    check_name(&a.runtime)?;
    if a.shim && a.engine != Engine::Containerd {
        bail!("--shim: only containerd has shims (got {})", a.engine.arg());
    }
    let binary = match a.binary {
        Some(b) if b.is_absolute() => b,
        Some(b) => bail!(
            "--binary {}: must be an absolute path (the engine runs it)",
            b.display()
        ),
        None => {
            let exe = std::env::current_exe().context("find this cordon binary")?;
            fs::canonicalize(&exe).with_context(|| format!("find this cordon binary ({})", exe.display()))?
        }
    };
    let binary = binary
        .to_str()
        .with_context(|| format!("--binary {}: not UTF-8", binary.display()))?;
    let state_root = a
        .state_root
        .to_str()
        .filter(|_| a.state_root.is_absolute())
        .with_context(|| {
            format!(
                "--state-root {}: must be an absolute UTF-8 path",
                a.state_root.display()
            )
        })?;
    let path = a.config.unwrap_or_else(|| PathBuf::from(a.engine.default_config()));
    let old = read_if_exists(&path)?;
    let target = Target {
        engine: a.engine,
        name: &a.runtime,
        binary,
        shim: a.shim,
        state_root,
    };
    let plan = plan(&target, old.as_deref().unwrap_or("")).with_context(|| format!("{}", path.display()))?;
    for w in &plan.warnings {
        eprintln!("cordon: warning: {}: {w}", path.display());
    }
    if a.dry_run {
        match &plan.text {
            Some(text) => print!("{}", diff(&path, old.as_deref(), Some(text))),
            None => println!(
                "{}: runtime {:?} is already configured: nothing to change",
                path.display(),
                a.runtime
            ),
        }
        return Ok(0);
    }
    if !a.write {
        eprintln!(
            "# for {} (--write merges it there, --dry-run shows the diff)",
            path.display()
        );
        print!("{}", plan.snippet);
        return Ok(0);
    }
    let Some(text) = plan.text else {
        println!(
            "{}: runtime {:?} is already configured ({binary})",
            path.display(),
            a.runtime
        );
        return Ok(0);
    };
    let backup = match &old {
        Some(old) if keep_as_backup(a.engine, &path, old)? => Some(old.as_str()),
        _ => None,
    };
    let written = write_file(&path, &text, backup)?;
    let via = if a.shim {
        "cordon's shim".to_string()
    } else {
        binary.to_string()
    };
    println!(
        "{}: runtime {:?} added ({via}){}{}",
        written.display(),
        a.runtime,
        if plan.appended || old.is_none() {
            ""
        } else {
            "; the file was rewritten whole (its comments are not kept)"
        },
        if backup.is_some() {
            format!("; the previous file is {}", backup_path(&written).display())
        } else {
            String::new()
        }
    );
    println!("{}", a.engine.next_step(&a.runtime, true));
    Ok(0)
}

/// The file's text, or `None` when it does not exist.
fn read_if_exists(path: &Path) -> anyhow::Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("read {}", path.display())),
    }
}

/// Whether `install` should keep `old` (the file's text before this write)
/// as the backup: yes unless a backup of an earlier install is there and
/// the file still holds a cordon runtime (installs of several runtimes keep
/// the file as it was before the first).
fn keep_as_backup(engine: Engine, path: &Path, old: &str) -> anyhow::Result<bool> {
    let real = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if !backup_path(&real).exists() {
        return Ok(true);
    }
    let doc = Doc::parse(engine, old)?;
    Ok(undo::cordon_runtimes(engine, &doc)?.is_empty())
}

/// A unified diff of the file's text before (`None`: it does not exist) and
/// after (`None`: removed).
fn diff(path: &Path, old: Option<&str>, new: Option<&str>) -> String {
    let name = path.display().to_string();
    let (a, b) = (
        if old.is_some() { name.as_str() } else { "/dev/null" },
        if new.is_some() { name.as_str() } else { "/dev/null" },
    );
    similar::TextDiff::from_lines(old.unwrap_or(""), new.unwrap_or(""))
        .unified_diff()
        .context_radius(3)
        .header(a, b)
        .to_string()
}

/// A runtime name every engine takes as a key.
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if !ok {
        bail!(
            "--runtime {name:?}: a runtime name is letters, digits, '_', '.' and '-', starting with a letter or digit"
        );
    }
    Ok(())
}

/// An engine's config document.
#[derive(Clone, Debug, PartialEq)]
enum Doc {
    /// containerd's config.toml, podman's containers.conf.
    Toml(Table),
    /// Docker's daemon.json (an object).
    Json(Json),
}

impl Doc {
    /// Parses `engine`'s config text (empty: an empty document).
    fn parse(engine: Engine, text: &str) -> anyhow::Result<Doc> {
        match engine {
            Engine::Docker => {
                let doc: Json = if text.trim().is_empty() {
                    Json::Object(Default::default())
                } else {
                    serde_json::from_str(text).context("not valid JSON")?
                };
                if !doc.is_object() {
                    bail!("expected a JSON object, found {}", json_type(&doc));
                }
                Ok(Doc::Json(doc))
            }
            Engine::Containerd | Engine::Podman => Ok(Doc::Toml(parse_toml(text)?)),
        }
    }

    /// The document as a file's text.
    fn render(&self) -> anyhow::Result<String> {
        match self {
            Doc::Toml(t) => toml::to_string(t).context("render the TOML"),
            Doc::Json(j) => Ok(format!("{}\n", serde_json::to_string_pretty(j)?)),
        }
    }
}

/// What `install` would do to one config file.
#[derive(Debug)]
struct Plan {
    /// The configuration to add, as the user would write it.
    snippet: String,
    /// The file's new text; `None` when it already says all of it.
    text: Option<String>,
    /// Whether `text` is the old text with cordon's block appended.
    appended: bool,
    /// What the user should know (the CRI plugin disabled, ...).
    warnings: Vec<String>,
}

/// Plans adding `t` to its engine's config file whose current text is `old`
/// (empty when it does not exist).
fn plan(t: &Target, old: &str) -> anyhow::Result<Plan> {
    match t.engine {
        Engine::Docker => merge_json(old, &docker_edits(t.name, t.binary)),
        Engine::Containerd => {
            let doc = parse_toml(old)?;
            let layout = ContainerdLayout::of(&doc)?;
            let edits = containerd_edits(&doc, &layout, t)?;
            let mut printed = edits.clone();
            if let Some(v) = layout.version {
                printed.insert("version".into(), Toml::Integer(v));
            }
            let mut plan = merge_toml(old, &edits, &printed, t.name)?;
            plan.warnings = layout.warnings(&doc);
            Ok(plan)
        }
        Engine::Podman => {
            let edits = podman_edits(t.name, t.binary);
            merge_toml(old, &edits, &edits, t.name)
        }
    }
}

/// daemon.json: `{"runtimes": {NAME: {"path": BINARY}}}`.
fn docker_edits(name: &str, binary: &str) -> Json {
    serde_json::json!({"runtimes": {name: {"path": binary}}})
}

/// Where the CRI plugin's settings are in one containerd config.
#[derive(Debug)]
struct ContainerdLayout {
    /// The CRI plugin's name: 1 `cri`, 2 `io.containerd.grpc.v1.cri`,
    /// 3 `io.containerd.cri.v1.runtime`.
    plugin: &'static str,
    /// The config's version, explicit or to be written (`None`: a version 1
    /// file, which has no `version` key).
    version: Option<i64>,
    /// Whether `install` writes `version` (an empty or new file).
    set_version: bool,
}

impl ContainerdLayout {
    /// The layout of `doc`: a config without `version` is version 1 to
    /// containerd, unless it is empty (then it becomes version 2).
    fn of(doc: &Table) -> anyhow::Result<Self> {
        let version = match doc.get("version") {
            None => None,
            Some(Toml::Integer(v)) => Some(*v),
            Some(other) => bail!("version: expected an integer, found {}", other.type_str()),
        };
        let (plugin, version, set_version) = match version {
            None if doc.is_empty() => ("io.containerd.grpc.v1.cri", Some(2), true),
            None | Some(1) => ("cri", version, false),
            Some(2) => ("io.containerd.grpc.v1.cri", version, false),
            Some(3) => ("io.containerd.cri.v1.runtime", version, false),
            Some(v) => bail!("version = {v}: not a containerd config version cordon knows (1, 2 or 3)"),
        };
        Ok(ContainerdLayout {
            plugin,
            version,
            set_version,
        })
    }

    /// The path of the CRI plugin's runtimes table.
    fn runtimes(&self) -> [&'static str; 4] {
        ["plugins", self.plugin, "containerd", "runtimes"]
    }

    /// Warnings about `doc` for a user who wants Kubernetes to use cordon.
    fn warnings(&self, doc: &Table) -> Vec<String> {
        let disabled = doc
            .get("disabled_plugins")
            .and_then(Toml::as_array)
            .into_iter()
            .flatten()
            .filter_map(Toml::as_str)
            .any(|p| p == self.plugin || p == "cri" || p == "io.containerd.grpc.v1.cri");
        if disabled {
            vec![
                "disabled_plugins turns containerd's CRI plugin off: Kubernetes cannot use any runtime on this \
                  node until it is taken out of that list"
                    .to_string(),
            ]
        } else {
            Vec::new()
        }
    }
}

/// containerd: runtime NAME of the CRI plugin on the runc shim, with cordon
/// as its runc binary and its own `Root` (or with `shim`, on cordon's own
/// shim `io.containerd.cordon.v2`); either way pod annotations
/// `org.cordon.*` pass through to the containers, so a pod can pick its
/// policy, and `SystemdCgroup = true` is copied from the runc runtime (the
/// kubelet's cgroup driver). When the file defines no runtimes, runc is
/// written out as containerd's defaults have it: a `runtimes` table in the
/// file replaces the built-in one, and runc (the default runtime) would be
/// gone.
fn containerd_edits(doc: &Table, layout: &ContainerdLayout, t: &Target) -> anyhow::Result<Table> {
    let existing = match get(doc, &layout.runtimes()) {
        None => None,
        Some(Toml::Table(rts)) => Some(rts),
        Some(other) => bail!(
            "{}: expected a table, found {}",
            dotted(&layout.runtimes()),
            other.type_str()
        ),
    };
    let mut runtimes = Table::new();
    if existing.is_none_or(Table::is_empty) {
        runtimes.insert("runc".into(), Toml::Table(runc_runtime()));
    }
    let systemd = existing
        .and_then(|rts| get(rts, &["runc", "options", "SystemdCgroup"]))
        .and_then(Toml::as_bool)
        == Some(true);
    let mut runtime = Table::new();
    let mut options = Table::new();
    if t.shim {
        runtime.insert("runtime_type".into(), "io.containerd.cordon.v2".into());
    } else {
        runtime.insert("runtime_type".into(), "io.containerd.runc.v2".into());
        options.insert("BinaryName".into(), t.binary.into());
        options.insert("Root".into(), t.state_root.into());
    }
    if systemd {
        options.insert("SystemdCgroup".into(), Toml::Boolean(true));
    }
    runtime.insert("pod_annotations".into(), Toml::Array(vec![POD_ANNOTATIONS.into()]));
    if !options.is_empty() {
        runtime.insert("options".into(), Toml::Table(options));
    }
    runtimes.insert(t.name.into(), Toml::Table(runtime));
    let mut edits = nest(&layout.runtimes(), runtimes);
    if layout.set_version {
        edits.insert("version".into(), Toml::Integer(2));
    }
    Ok(edits)
}

/// containerd's built-in runc runtime, as `containerd config default`
/// writes it (without the options that are all defaults).
fn runc_runtime() -> Table {
    let mut runc = Table::new();
    runc.insert("runtime_type".into(), "io.containerd.runc.v2".into());
    runc
}

/// containers.conf: `[engine.runtimes] NAME = [BINARY]`.
fn podman_edits(name: &str, binary: &str) -> Table {
    let mut runtimes = Table::new();
    runtimes.insert(name.into(), Toml::Array(vec![binary.into()]));
    nest(&["engine", "runtimes"], runtimes)
}

/// `leaf` under the tables named by `keys`.
fn nest(keys: &[&str], leaf: Table) -> Table {
    keys.iter().rev().fold(leaf, |inner, key| {
        let mut t = Table::new();
        t.insert(key.to_string(), Toml::Table(inner));
        t
    })
}

/// The value at `keys` under `t`.
fn get<'a>(t: &'a Table, keys: &[&str]) -> Option<&'a Toml> {
    let (last, parents) = keys.split_last()?;
    let mut cur = t;
    for k in parents {
        cur = cur.get(*k)?.as_table()?;
    }
    cur.get(*last)
}

/// `keys` as a TOML dotted key (quoted where needed).
fn dotted(keys: &[&str]) -> String {
    keys.iter()
        .map(|k| {
            if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                k.to_string()
            } else {
                format!("{k:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Parses a TOML config; the error is one line with the position, and
/// never quotes the file.
fn parse_toml(text: &str) -> anyhow::Result<Table> {
    toml::from_str::<Table>(text).map_err(|e| {
        let at = e
            .span()
            .map(|span| {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!(" at line {line}, column {column}")
            })
            .unwrap_or_default();
        let what = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(", ");
        anyhow::anyhow!("not valid TOML{at}: {what}")
    })
}

/// The comment lines around the tables `install` appends for runtime
/// `name`; `uninstall` cuts out what is between them.
fn markers(name: &str) -> (String, String) {
    (
        format!("# cordon install --runtime {name}: added by cordon, `cordon uninstall` removes it"),
        format!("# end of cordon install --runtime {name}"),
    )
}

/// Merges `edits` into the TOML document `old`; `printed` is the snippet
/// shown without `--write`, `name` the runtime (for the markers).
fn merge_toml(old: &str, edits: &Table, printed: &Table, name: &str) -> anyhow::Result<Plan> {
    let before = parse_toml(old)?;
    let mut doc = before.clone();
    merge_toml_table(&mut doc, edits, "")?;
    let snippet = toml::to_string(printed).context("render the TOML snippet")?;
    if doc == before {
        return Ok(Plan {
            snippet,
            text: None,
            appended: false,
            warnings: Vec::new(),
        });
    }
    // Appending keeps the user's comments and layout; it is only right when
    // the result means the same as the merge (not when it repeats a table
    // header, or lands inside an inline table, ...).
    let sep = if old.is_empty() {
        ""
    } else if old.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    };
    let (begin, end) = markers(name);
    let fragment = toml::to_string(edits).context("render the TOML snippet")?;
    let appended = format!("{old}{sep}{begin}\n{fragment}{end}\n");
    if appended.parse::<Table>().is_ok_and(|t| t == doc) {
        return Ok(Plan {
            snippet,
            text: Some(appended),
            appended: true,
            warnings: Vec::new(),
        });
    }
    // Else the tables go where they belong, in place.
    if let Some(text) = merge_in_place(old, edits).filter(|t| t.parse::<Table>().is_ok_and(|t| t == doc)) {
        return Ok(Plan {
            snippet,
            text: Some(text),
            appended: false,
            warnings: Vec::new(),
        });
    }
    let text = toml::to_string(&doc).context("render the merged TOML")?;
    Ok(Plan {
        snippet,
        text: Some(text),
        appended: false,
        warnings: Vec::new(),
    })
}

/// `old` with `edits` merged in place, comments and layout kept (`None`
/// when `old` does not parse or has a value where `edits` has a table).
fn merge_in_place(old: &str, edits: &Table) -> Option<String> {
    let mut doc = old.parse::<toml_edit::DocumentMut>().ok()?;
    merge_edit(doc.as_table_mut(), edits, false)?;
    Some(doc.to_string())
}

/// Sets every value of `edits` in `t` (`inline`: an inline table).
fn merge_edit(t: &mut dyn toml_edit::TableLike, edits: &Table, inline: bool) -> Option<()> {
    for (key, value) in edits {
        match (t.get_mut(key), value) {
            (Some(item), Toml::Table(e)) => {
                let inline = item.is_inline_table();
                merge_edit(item.as_table_like_mut()?, e, inline)?
            }
            (None, Toml::Table(e)) if !inline => {
                // A new [header] table (implicit while it only holds tables).
                let mut new = toml_edit::Table::new();
                new.set_implicit(true);
                merge_edit(&mut new, e, false)?;
                t.insert(key, toml_edit::Item::Table(new));
            }
            (_, v) => {
                t.insert(key, toml_edit::value(v.to_string().parse::<toml_edit::Value>().ok()?));
            }
        }
    }
    Some(())
}

/// Sets every value of `edits` in `doc`, descending into tables.
fn merge_toml_table(doc: &mut Table, edits: &Table, at: &str) -> anyhow::Result<()> {
    for (key, value) in edits {
        let path = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        match (doc.get_mut(key), value) {
            (Some(Toml::Table(d)), Toml::Table(e)) => merge_toml_table(d, e, &path)?,
            (Some(other), Toml::Table(_)) => {
                bail!("{path}: expected a table, found {}", other.type_str())
            }
            (_, v) => {
                doc.insert(key.clone(), v.clone());
            }
        }
    }
    Ok(())
}

/// Merges `edits` into the JSON document `old` (daemon.json).
fn merge_json(old: &str, edits: &Json) -> anyhow::Result<Plan> {
    let Doc::Json(before) = Doc::parse(Engine::Docker, old)? else {
        unreachable!("daemon.json parses to JSON")
    };
    let mut doc = before.clone();
    merge_json_value(&mut doc, edits, "")?;
    let snippet = format!("{}\n", serde_json::to_string_pretty(edits)?);
    let text = (doc != before).then(|| format!("{}\n", serde_json::to_string_pretty(&doc).unwrap_or_default()));
    Ok(Plan {
        snippet,
        text,
        appended: false,
        warnings: Vec::new(),
    })
}

/// Sets every value of `edits` in the object `doc`, descending into objects.
fn merge_json_value(doc: &mut Json, edits: &Json, at: &str) -> anyhow::Result<()> {
    let (Some(d), Some(e)) = (doc.as_object_mut(), edits.as_object()) else {
        return Ok(());
    };
    for (key, value) in e {
        let path = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        match (d.get_mut(key), value) {
            (Some(inner @ Json::Object(_)), Json::Object(_)) => merge_json_value(inner, value, &path)?,
            (Some(other), Json::Object(_)) => {
                bail!("{path}: expected an object, found {}", json_type(other))
            }
            (_, v) => {
                d.insert(key.clone(), v.clone());
            }
        }
    }
    Ok(())
}

fn json_type(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// Where the previous text of a rewritten file is kept.
fn backup_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".before-cordon");
    PathBuf::from(p)
}

/// Replaces the file at `path` (through a symlink, keeping its mode) with
/// `text` atomically; keeps `backup` beside it first. Returns the path
/// written.
fn write_file(path: &Path, text: &str, backup: Option<&str>) -> anyhow::Result<PathBuf> {
    let path = match fs::canonicalize(path) {
        Ok(real) => real,
        Err(_) => path.to_path_buf(),
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let mode = fs::metadata(&path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o644);
    if let Some(old) = backup {
        let b = backup_path(&path);
        fs::write(&b, old).with_context(|| format!("write {}", b.display()))?;
        fs::set_permissions(&b, fs::Permissions::from_mode(mode)).with_context(|| format!("chmod {}", b.display()))?;
    }
    let mut tmp_name = path.file_name().unwrap_or_default().to_owned();
    tmp_name.push(format!(".cordon-{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    let res = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)
    })();
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("write {}", path.display()));
    }
    Ok(path)
}

mod undo;
pub use undo::uninstall;
#[cfg(test)]
use undo::*;

#[cfg(test)]
mod tests;
