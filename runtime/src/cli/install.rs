//! `cordon install ENGINE`: the configuration containerd, Docker or podman
//! needs to run containers with cordon (as gVisor's `runsc install`).
//! Without `--write` it prints the snippet; with `--write` it merges it into
//! the engine's config file (or `--config PATH`), keeping everything else.
//!
//! TOML files (containerd, podman) get the snippet appended when that keeps
//! the user's comments and layout and means the same as the merge; otherwise
//! the merged document is written out whole (comments are then lost, and the
//! old file is kept beside it as `FILE.before-cordon`). daemon.json is JSON:
//! always rewritten whole, keeping every other key.

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

impl Engine {
    /// The engine's system-wide config file.
    fn default_config(self) -> &'static str {
        match self {
            Engine::Containerd => "/etc/containerd/config.toml",
            Engine::Docker => "/etc/docker/daemon.json",
            Engine::Podman => "/etc/containers/containers.conf",
        }
    }

    /// What to do after writing the file.
    fn next_step(self, name: &str) -> String {
        match self {
            Engine::Containerd => format!(
                "restart containerd to apply it; Kubernetes pods then select it with a RuntimeClass \
                 whose handler is {name:?}"
            ),
            Engine::Docker => format!(
                "reload dockerd to apply it (systemctl reload docker, or SIGHUP); then \
                 `docker run --runtime {name} ...`"
            ),
            Engine::Podman => format!("`podman --runtime {name} run ...` uses it"),
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
    /// Config file to read and write (default: /etc/containerd/config.toml,
    /// /etc/docker/daemon.json or /etc/containers/containers.conf)
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Name the engine knows the runtime by
    #[arg(long, default_value = "cordon")]
    pub runtime: String,
    /// containerd: use cordon's own shim (runtime_type
    /// io.containerd.cordon.v2; containerd-shim-cordon-v2 must be on
    /// containerd's PATH) instead of the runc shim with BinaryName
    #[arg(long)]
    pub shim: bool,
}

/// Runs `cordon install`.
pub fn install(a: InstallArgs) -> anyhow::Result<i32> {
    check_name(&a.runtime)?;
    let exe = std::env::current_exe().context("find this cordon binary")?;
    let binary = fs::canonicalize(&exe).with_context(|| format!("find this cordon binary ({})", exe.display()))?;
    let binary = binary
        .to_str()
        .with_context(|| format!("this cordon binary's path is not UTF-8: {}", binary.display()))?;
    let path = a.config.unwrap_or_else(|| PathBuf::from(a.engine.default_config()));
    let old = match fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    };
    if a.shim && a.engine != Engine::Containerd {
        bail!("--shim: only containerd has shims (got {:?})", a.engine);
    }
    let plan = plan_with(a.engine, old.as_deref().unwrap_or(""), &a.runtime, binary, a.shim)
        .with_context(|| format!("{}", path.display()))?;
    if !a.write {
        eprintln!("# for {} (or run with --write to merge it there)", path.display());
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
        Some(old) if !plan.appended && !old.trim().is_empty() => Some(old.as_str()),
        _ => None,
    };
    let written = write_file(&path, &text, backup)?;
    println!(
        "{}: runtime {:?} set to {binary}{}",
        written.display(),
        a.runtime,
        if backup.is_some() {
            format!(" (the previous file is {})", backup_path(&written).display())
        } else {
            String::new()
        }
    );
    println!("{}", a.engine.next_step(&a.runtime));
    Ok(0)
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

/// What `install` would do to one config file.
#[derive(Debug)]
struct Plan {
    /// The configuration to add, as the user would write it.
    snippet: String,
    /// The file's new text; `None` when it already says all of it.
    text: Option<String>,
    /// Whether `text` is the old text with the snippet appended.
    appended: bool,
}

/// Plans adding runtime `name` running `binary` to `engine`'s config file
/// whose current text is `old` (empty when it does not exist).
#[cfg(test)]
fn plan(engine: Engine, old: &str, name: &str, binary: &str) -> anyhow::Result<Plan> {
    plan_with(engine, old, name, binary, false)
}

/// [`plan`], with `shim`: containerd gets cordon's own shim.
fn plan_with(engine: Engine, old: &str, name: &str, binary: &str, shim: bool) -> anyhow::Result<Plan> {
    match engine {
        Engine::Docker => merge_json(old, &docker_edits(name, binary)),
        Engine::Containerd => {
            let doc = parse_toml(old)?;
            merge_toml(old, &containerd_edits(&doc, name, binary, shim)?)
        }
        Engine::Podman => merge_toml(old, &podman_edits(name, binary)),
    }
}

/// daemon.json: `{"runtimes": {NAME: {"path": BINARY}}}`.
fn docker_edits(name: &str, binary: &str) -> Json {
    serde_json::json!({"runtimes": {name: {"path": binary}}})
}

/// containerd: runtime NAME of the CRI plugin on the runc shim, with cordon
/// as its runc binary (or with `shim`, on cordon's own shim
/// `io.containerd.cordon.v2`); either way pod annotations `org.cordon.*`
/// pass through to the containers, so a pod can pick its policy. The
/// plugin's name depends on the config's version (1: `cri`, 2:
/// `io.containerd.grpc.v1.cri`, 3: `io.containerd.cri.v1.runtime`); an
/// empty file becomes a version 2 config.
fn containerd_edits(doc: &Table, name: &str, binary: &str, shim: bool) -> anyhow::Result<Table> {
    let version = match doc.get("version") {
        None => None,
        Some(Toml::Integer(v)) => Some(*v),
        Some(other) => bail!("version: expected an integer, found {}", other.type_str()),
    };
    let (plugin, set_version) = match version {
        // A config without `version` is version 1 to containerd.
        None if doc.is_empty() => ("io.containerd.grpc.v1.cri", true),
        None | Some(1) => ("cri", false),
        Some(2) => ("io.containerd.grpc.v1.cri", false),
        Some(3) => ("io.containerd.cri.v1.runtime", false),
        Some(v) => bail!("version = {v}: not a containerd config version cordon knows (1, 2 or 3)"),
    };
    let mut runtime = Table::new();
    if shim {
        runtime.insert("runtime_type".into(), "io.containerd.cordon.v2".into());
    } else {
        let mut options = Table::new();
        options.insert("BinaryName".into(), binary.into());
        runtime.insert("runtime_type".into(), "io.containerd.runc.v2".into());
        runtime.insert("options".into(), Toml::Table(options));
    }
    // cordon's annotations (org.cordon.policy, org.cordon.platform).
    runtime.insert("pod_annotations".into(), Toml::Array(vec!["org.cordon.*".into()]));
    let mut edits = nest(&["plugins", plugin, "containerd", "runtimes", name], runtime);
    if set_version {
        edits.insert("version".into(), Toml::Integer(2));
    }
    Ok(edits)
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

fn parse_toml(text: &str) -> anyhow::Result<Table> {
    text.parse::<Table>().context("not valid TOML")
}

/// Merges `edits` into the TOML document `old`.
fn merge_toml(old: &str, edits: &Table) -> anyhow::Result<Plan> {
    let before = parse_toml(old)?;
    let mut doc = before.clone();
    merge_toml_table(&mut doc, edits, "")?;
    let snippet = toml::to_string(edits).context("render the TOML snippet")?;
    if doc == before {
        return Ok(Plan {
            snippet,
            text: None,
            appended: false,
        });
    }
    // Appending keeps the user's comments and layout; it is only right when
    // the result means the same as the merge (not when it repeats a table
    // header, or lands inside an inline table, ...).
    let sep = if old.is_empty() || old.ends_with("\n\n") {
        ""
    } else if old.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    };
    let appended = format!("{old}{sep}{snippet}");
    if appended.parse::<Table>().is_ok_and(|t| t == doc) {
        return Ok(Plan {
            snippet,
            text: Some(appended),
            appended: true,
        });
    }
    let text = toml::to_string(&doc).context("render the merged TOML")?;
    Ok(Plan {
        snippet,
        text: Some(text),
        appended: false,
    })
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
    let before: Json = if old.trim().is_empty() {
        Json::Object(Default::default())
    } else {
        serde_json::from_str(old).context("not valid JSON")?
    };
    if !before.is_object() {
        bail!("expected a JSON object, found {}", json_type(&before));
    }
    let mut doc = before.clone();
    merge_json_value(&mut doc, edits, "")?;
    let snippet = format!("{}\n", serde_json::to_string_pretty(edits)?);
    let text = (doc != before).then(|| format!("{}\n", serde_json::to_string_pretty(&doc).unwrap_or_default()));
    Ok(Plan {
        snippet,
        text,
        appended: false,
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

#[cfg(test)]
mod tests {
    use super::*;

    const BIN: &str = "/usr/local/bin/cordon";

    fn get<'a>(t: &'a Table, keys: &[&str]) -> Option<&'a Toml> {
        let (last, parents) = keys.split_last()?;
        let mut cur = t;
        for k in parents {
            cur = cur.get(*k)?.as_table()?;
        }
        cur.get(*last)
    }

    fn cri_runtime<'a>(t: &'a Table, plugin: &str, name: &str) -> &'a Table {
        get(t, &["plugins", plugin, "containerd", "runtimes", name])
            .and_then(Toml::as_table)
            .unwrap_or_else(|| panic!("no runtime {name} in plugin {plugin}: {t:#?}"))
    }

    fn assert_cordon_runtime(runtime: &Table, binary: &str) {
        assert_eq!(runtime["runtime_type"].as_str(), Some("io.containerd.runc.v2"));
        assert_eq!(
            get(runtime, &["options", "BinaryName"]).and_then(Toml::as_str),
            Some(binary)
        );
    }

    fn written(p: &Plan) -> &str {
        p.text.as_deref().expect("the file should change")
    }

    // ----- docker -----

    #[test]
    fn docker_into_a_new_file() {
        let p = plan(Engine::Docker, "", "cordon", BIN).unwrap();
        let doc: Json = serde_json::from_str(written(&p)).unwrap();
        assert_eq!(doc, serde_json::json!({"runtimes": {"cordon": {"path": BIN}}}));
        let snippet: Json = serde_json::from_str(&p.snippet).unwrap();
        assert_eq!(snippet, doc);
    }

    #[test]
    fn docker_keeps_other_keys_and_runtimes() {
        let old = r#"{
            "log-level": "warn",
            "default-runtime": "runc",
            "runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=kvm"]}},
            "storage-opts": ["a", "b"]
        }"#;
        let p = plan(Engine::Docker, old, "cordon", BIN).unwrap();
        let doc: Json = serde_json::from_str(written(&p)).unwrap();
        assert_eq!(doc["log-level"], "warn");
        assert_eq!(doc["default-runtime"], "runc");
        assert_eq!(doc["storage-opts"], serde_json::json!(["a", "b"]));
        assert_eq!(
            doc["runtimes"]["runsc"]["runtimeArgs"],
            serde_json::json!(["--platform=kvm"])
        );
        assert_eq!(doc["runtimes"]["cordon"]["path"], BIN);
    }

    #[test]
    fn docker_updates_the_path_keeping_runtime_args() {
        let old = r#"{"runtimes": {"cordon": {"path": "/old/cordon", "runtimeArgs": ["--debug"]}}}"#;
        let p = plan(Engine::Docker, old, "cordon", BIN).unwrap();
        let doc: Json = serde_json::from_str(written(&p)).unwrap();
        assert_eq!(
            doc,
            serde_json::json!({"runtimes": {"cordon": {"path": BIN, "runtimeArgs": ["--debug"]}}})
        );
    }

    #[test]
    fn docker_already_configured_is_left_alone() {
        let old = format!(r#"{{"runtimes": {{"cordon": {{"path": "{BIN}"}}}}, "debug": true}}"#);
        let p = plan(Engine::Docker, &old, "cordon", BIN).unwrap();
        assert!(p.text.is_none(), "{p:?}");
    }

    #[test]
    fn docker_bad_files_are_refused_with_the_key() {
        let e = plan(Engine::Docker, "{", "cordon", BIN).unwrap_err();
        assert!(format!("{e:#}").contains("not valid JSON"), "{e:#}");
        let e = plan(Engine::Docker, "[1]", "cordon", BIN).unwrap_err();
        assert!(
            format!("{e:#}").contains("expected a JSON object, found an array"),
            "{e:#}"
        );
        let e = plan(Engine::Docker, r#"{"runtimes": "runc"}"#, "cordon", BIN).unwrap_err();
        assert!(
            format!("{e:#}").contains("runtimes: expected an object, found a string"),
            "{e:#}"
        );
        let e = plan(Engine::Docker, r#"{"runtimes": {"cordon": "/x"}}"#, "cordon", BIN).unwrap_err();
        assert!(
            format!("{e:#}").contains("runtimes.cordon: expected an object"),
            "{e:#}"
        );
    }

    // ----- containerd -----

    #[test]
    fn containerd_with_the_own_shim() {
        let p = plan_with(Engine::Containerd, "", "cordon", BIN, true).unwrap();
        let doc = parse_toml(written(&p)).unwrap();
        let rt = cri_runtime(&doc, "io.containerd.grpc.v1.cri", "cordon");
        assert_eq!(rt["runtime_type"].as_str(), Some("io.containerd.cordon.v2"));
        assert!(rt.get("options").is_none(), "no BinaryName with the own shim: {rt:?}");
        assert_eq!(rt["pod_annotations"].as_array().map(Vec::len), Some(1));
        assert_eq!(rt["pod_annotations"][0].as_str(), Some("org.cordon.*"));
    }

    #[test]
    fn containerd_into_a_new_file_is_a_version_2_config() {
        let p = plan(Engine::Containerd, "", "cordon", BIN).unwrap();
        let doc = parse_toml(written(&p)).unwrap();
        assert_eq!(doc["version"].as_integer(), Some(2));
        assert_cordon_runtime(cri_runtime(&doc, "io.containerd.grpc.v1.cri", "cordon"), BIN);
        assert!(
            p.snippet
                .contains(r#"[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.cordon]"#),
            "{}",
            p.snippet
        );
        assert!(p.snippet.contains(&format!(r#"BinaryName = "{BIN}""#)), "{}", p.snippet);
    }

    const CONTAINERD_V2: &str = r#"# containerd config, by hand
version = 2
root = "/var/lib/containerd"

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.9"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
          runtime_type = "io.containerd.runc.v2"
          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
            SystemdCgroup = true # keep me
"#;

    #[test]
    fn containerd_appends_keeping_comments_and_other_runtimes() {
        let p = plan(Engine::Containerd, CONTAINERD_V2, "cordon", BIN).unwrap();
        assert!(p.appended, "{p:?}");
        let text = written(&p);
        assert!(text.starts_with(CONTAINERD_V2), "{text}");
        assert!(text.contains("# keep me"));
        let doc = parse_toml(text).unwrap();
        assert_eq!(doc["version"].as_integer(), Some(2));
        assert_eq!(doc["root"].as_str(), Some("/var/lib/containerd"));
        let runc = cri_runtime(&doc, "io.containerd.grpc.v1.cri", "runc");
        assert_eq!(
            get(runc, &["options", "SystemdCgroup"]).and_then(Toml::as_bool),
            Some(true)
        );
        assert_cordon_runtime(cri_runtime(&doc, "io.containerd.grpc.v1.cri", "cordon"), BIN);
        assert_eq!(
            get(&doc, &["plugins", "io.containerd.grpc.v1.cri", "sandbox_image"]).and_then(Toml::as_str),
            Some("registry.k8s.io/pause:3.9")
        );
    }

    #[test]
    fn containerd_updates_an_old_binary_keeping_its_other_options() {
        let old = format!(
            "{CONTAINERD_V2}\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.cordon]\n  \
             runtime_type = \"io.containerd.runc.v2\"\n  \
             [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.cordon.options]\n    \
             BinaryName = \"/old/cordon\"\n    SystemdCgroup = true\n"
        );
        let p = plan(Engine::Containerd, &old, "cordon", BIN).unwrap();
        assert!(!p.appended, "a second [..cordon] header would be invalid: {p:?}");
        let doc = parse_toml(written(&p)).unwrap();
        let cordon = cri_runtime(&doc, "io.containerd.grpc.v1.cri", "cordon");
        assert_cordon_runtime(cordon, BIN);
        assert_eq!(
            get(cordon, &["options", "SystemdCgroup"]).and_then(Toml::as_bool),
            Some(true)
        );
        assert!(cri_runtime(&doc, "io.containerd.grpc.v1.cri", "runc").contains_key("options"));
        assert_eq!(doc["version"].as_integer(), Some(2));
    }

    #[test]
    fn containerd_already_configured_is_left_alone() {
        let once = written(&plan(Engine::Containerd, CONTAINERD_V2, "cordon", BIN).unwrap()).to_string();
        let p = plan(Engine::Containerd, &once, "cordon", BIN).unwrap();
        assert!(p.text.is_none(), "{p:?}");
        // Another binary, or another name, is a change.
        assert!(plan(Engine::Containerd, &once, "cordon", "/opt/cordon")
            .unwrap()
            .text
            .is_some());
        let p = plan(Engine::Containerd, &once, "cordon-audit", BIN).unwrap();
        let doc = parse_toml(written(&p)).unwrap();
        assert_cordon_runtime(cri_runtime(&doc, "io.containerd.grpc.v1.cri", "cordon"), BIN);
        assert_cordon_runtime(cri_runtime(&doc, "io.containerd.grpc.v1.cri", "cordon-audit"), BIN);
    }

    #[test]
    fn containerd_plugin_name_follows_the_config_version() {
        let v3 = "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd]\n  default_runtime_name = 'runc'\n";
        let doc = parse_toml(written(&plan(Engine::Containerd, v3, "cordon", BIN).unwrap())).unwrap();
        assert_cordon_runtime(cri_runtime(&doc, "io.containerd.cri.v1.runtime", "cordon"), BIN);
        assert!(get(&doc, &["plugins", "io.containerd.grpc.v1.cri"]).is_none());

        // No `version` in a non-empty file: version 1, plugin "cri".
        let v1 = "root = \"/var/lib/containerd\"\n";
        let doc = parse_toml(written(&plan(Engine::Containerd, v1, "cordon", BIN).unwrap())).unwrap();
        assert_cordon_runtime(cri_runtime(&doc, "cri", "cordon"), BIN);
        assert!(doc.get("version").is_none());

        // Only comments: as good as empty.
        let p = plan(Engine::Containerd, "# nothing yet\n", "cordon", BIN).unwrap();
        assert!(p.appended);
        let doc = parse_toml(written(&p)).unwrap();
        assert_eq!(doc["version"].as_integer(), Some(2));

        let e = plan(Engine::Containerd, "version = 9\n", "cordon", BIN).unwrap_err();
        assert!(format!("{e:#}").contains("version = 9"), "{e:#}");
        let e = plan(Engine::Containerd, "version = \"2\"\n", "cordon", BIN).unwrap_err();
        assert!(format!("{e:#}").contains("expected an integer"), "{e:#}");
    }

    #[test]
    fn containerd_inline_tables_are_merged_not_appended_to() {
        let old = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n\
                   runtimes = { runc = { runtime_type = \"io.containerd.runc.v2\" } }\n";
        let p = plan(Engine::Containerd, old, "cordon", BIN).unwrap();
        assert!(!p.appended);
        let doc = parse_toml(written(&p)).unwrap();
        assert_cordon_runtime(cri_runtime(&doc, "io.containerd.grpc.v1.cri", "cordon"), BIN);
        assert!(cri_runtime(&doc, "io.containerd.grpc.v1.cri", "runc").contains_key("runtime_type"));
    }

    #[test]
    fn containerd_bad_files_are_refused_with_the_key() {
        let e = plan(Engine::Containerd, "version = 2\n[plugins\n", "cordon", BIN).unwrap_err();
        assert!(format!("{e:#}").contains("not valid TOML"), "{e:#}");
        let e = plan(Engine::Containerd, "version = 2\nplugins = 3\n", "cordon", BIN).unwrap_err();
        assert!(
            format!("{e:#}").contains("plugins: expected a table, found integer"),
            "{e:#}"
        );
    }

    // ----- podman -----

    #[test]
    fn podman_into_a_new_file() {
        let p = plan(Engine::Podman, "", "cordon", BIN).unwrap();
        let doc = parse_toml(written(&p)).unwrap();
        let runtimes = get(&doc, &["engine", "runtimes"]).and_then(Toml::as_table).unwrap();
        assert_eq!(runtimes["cordon"], Toml::Array(vec![BIN.into()]));
        assert!(p.snippet.contains("[engine.runtimes]"), "{}", p.snippet);
    }

    #[test]
    fn podman_keeps_the_engine_table_and_other_runtimes() {
        let old = "# mine\n[containers]\nlog_size_max = -1\n\n[engine]\nruntime = \"crun\"\n\n\
                   [engine.runtimes]\ncrun = [\"/usr/bin/crun\"]\n";
        let p = plan(Engine::Podman, old, "cordon", BIN).unwrap();
        let doc = parse_toml(written(&p)).unwrap();
        assert_eq!(get(&doc, &["engine", "runtime"]).and_then(Toml::as_str), Some("crun"));
        assert_eq!(
            get(&doc, &["containers", "log_size_max"]).and_then(Toml::as_integer),
            Some(-1)
        );
        assert_eq!(
            get(&doc, &["engine", "runtimes", "crun"]),
            Some(&Toml::Array(vec!["/usr/bin/crun".into()]))
        );
        assert_eq!(
            get(&doc, &["engine", "runtimes", "cordon"]),
            Some(&Toml::Array(vec![BIN.into()]))
        );

        // Without an [engine.runtimes] table yet, the snippet is appended.
        let old = "# mine\n[engine]\nruntime = \"crun\"\n";
        let p = plan(Engine::Podman, old, "cordon", BIN).unwrap();
        assert!(p.appended);
        assert!(written(&p).starts_with(old));
        let doc = parse_toml(written(&p)).unwrap();
        assert_eq!(get(&doc, &["engine", "runtime"]).and_then(Toml::as_str), Some("crun"));
        assert_eq!(
            get(&doc, &["engine", "runtimes", "cordon"]),
            Some(&Toml::Array(vec![BIN.into()]))
        );
    }

    // ----- names and files -----

    #[test]
    fn runtime_names() {
        for ok in ["cordon", "cordon-audit", "c_1.x"] {
            check_name(ok).unwrap();
        }
        for bad in ["", "-x", "a b", "a\"b", "a]b", "ä"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn write_file_is_atomic_keeps_mode_and_backs_up() {
        let dir = std::env::temp_dir().join(format!("cordon-install-unit-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let path = dir.join("etc/docker/daemon.json");

        // A new file in a new directory.
        assert_eq!(write_file(&path, "{}\n", None).unwrap(), path);
        assert_eq!(fs::read_to_string(&path).unwrap(), "{}\n");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);

        // A rewrite keeps the mode and the old text.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        write_file(&path, "{\"a\": 1}\n", Some("{}\n")).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\"a\": 1}\n");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_to_string(backup_path(&path)).unwrap(), "{}\n");

        // Through a symlink: the target changes, the link stays.
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        write_file(&link, "{\"b\": 2}\n", None).unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\"b\": 2}\n");

        // No temporary file left.
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
