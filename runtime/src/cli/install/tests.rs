use super::*;

const BIN: &str = "/usr/local/bin/cordon";

/// `containerd config default` of Debian 12's containerd 1.6.20.
const CONTAINERD_DEFAULT: &str = include_str!("../../../tests/fixtures/install/containerd-1.6-default.toml");
/// Debian 12's /etc/containerd/config.toml (package containerd).
const CONTAINERD_DEBIAN: &str = include_str!("../../../tests/fixtures/install/containerd-debian12.toml");
/// The /etc/containerd/config.toml of Docker's containerd.io package: the
/// CRI plugin disabled, everything else commented out (a version 1 file).
const CONTAINERD_IO: &str = include_str!("../../../tests/fixtures/install/containerd-io-disabled-cri.toml");
/// A containers.conf with an admin's settings.
const CONTAINERS_CONF: &str = include_str!("../../../tests/fixtures/install/containers.conf");

const CRI: &str = "io.containerd.grpc.v1.cri";

fn target(engine: Engine, name: &'static str) -> Target<'static> {
    Target {
        engine,
        name,
        binary: BIN,
        shim: false,
        state_root: RUNC_SHIM_ROOT,
    }
}

fn plan_of(engine: Engine, old: &str, name: &'static str) -> Plan {
    plan(&target(engine, name), old).unwrap()
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
    assert_eq!(
        get(runtime, &["options", "Root"]).and_then(Toml::as_str),
        Some(RUNC_SHIM_ROOT),
        "cordon's state must not land in runc's root: {runtime:?}"
    );
    assert_eq!(runtime["pod_annotations"], Toml::Array(vec!["org.cordon.*".into()]));
}

fn written(p: &Plan) -> &str {
    p.text.as_deref().expect("the file should change")
}

/// Installs runtime `name` into `old` as `--write` would: the new text, and
/// the backup it keeps.
fn install_text(engine: Engine, old: &str, name: &'static str) -> String {
    written(&plan_of(engine, old, name)).to_string()
}

fn undo(engine: Engine, name: &str, current: &str, backup: Option<&str>) -> Undo {
    plan_uninstall(engine, name, current, backup).unwrap()
}

fn undo_text(u: Undo) -> String {
    match u {
        Undo::Restore(t) | Undo::Text(t) => t,
        other => panic!("expected a new text, got {other:?}"),
    }
}

// ----- docker -----

#[test]
fn docker_into_a_new_file() {
    let p = plan_of(Engine::Docker, "", "cordon");
    let doc: Json = serde_json::from_str(written(&p)).unwrap();
    assert_eq!(doc, serde_json::json!({"runtimes": {"cordon": {"path": BIN}}}));
    let snippet: Json = serde_json::from_str(&p.snippet).unwrap();
    assert_eq!(snippet, doc);
    // Uninstall of a file cordon created removes it.
    assert_eq!(undo(Engine::Docker, "cordon", written(&p), None), Undo::RemoveFile);
}

const DAEMON_JSON: &str = r#"{
    "log-level": "warn",
    "default-runtime": "runc",
    "runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=kvm"]}},
    "storage-opts": ["a", "b"]
}
"#;

#[test]
fn docker_keeps_other_keys_and_runtimes() {
    let p = plan_of(Engine::Docker, DAEMON_JSON, "cordon");
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
fn docker_uninstall_restores_the_file_or_removes_only_cordon() {
    let after = install_text(Engine::Docker, DAEMON_JSON, "cordon");
    // With the backup install kept: the file byte for byte.
    assert_eq!(
        undo(Engine::Docker, "cordon", &after, Some(DAEMON_JSON)),
        Undo::Restore(DAEMON_JSON.into())
    );
    // Without it (or after other edits): only cordon's entry goes.
    let text = undo_text(undo(Engine::Docker, "cordon", &after, None));
    let doc: Json = serde_json::from_str(&text).unwrap();
    let before: Json = serde_json::from_str(DAEMON_JSON).unwrap();
    assert_eq!(doc, before);
    let mut edited: Json = serde_json::from_str(&after).unwrap();
    edited["debug"] = true.into();
    let text = undo_text(undo(
        Engine::Docker,
        "cordon",
        &serde_json::to_string(&edited).unwrap(),
        Some(DAEMON_JSON),
    ));
    let doc: Json = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["debug"], true);
    assert!(doc["runtimes"].get("cordon").is_none(), "{doc}");
    assert_eq!(doc["runtimes"]["runsc"]["path"], "/usr/bin/runsc");
    // Nothing to do when it is not there.
    assert_eq!(undo(Engine::Docker, "cordon", DAEMON_JSON, None), Undo::Nothing);
}

#[test]
fn docker_uninstall_refuses_other_runtimes_and_the_default() {
    let e = plan_uninstall(Engine::Docker, "runsc", DAEMON_JSON, None).unwrap_err();
    assert_eq!(
        format!("{e:#}"),
        "runtime \"runsc\" is not cordon's (runtimes.runsc.path is \"/usr/bin/runsc\"): not removing it"
    );
    let old = format!(r#"{{"default-runtime": "cordon", "runtimes": {{"cordon": {{"path": "{BIN}"}}}}}}"#);
    let e = plan_uninstall(Engine::Docker, "cordon", &old, None).unwrap_err();
    assert!(
        format!("{e:#}").contains("default-runtime is \"cordon\": make another runtime the default first"),
        "{e:#}"
    );
}

#[test]
fn docker_updates_the_path_keeping_runtime_args() {
    let old = r#"{"runtimes": {"cordon": {"path": "/old/cordon", "runtimeArgs": ["--debug"]}}}"#;
    let p = plan_of(Engine::Docker, old, "cordon");
    let doc: Json = serde_json::from_str(written(&p)).unwrap();
    assert_eq!(
        doc,
        serde_json::json!({"runtimes": {"cordon": {"path": BIN, "runtimeArgs": ["--debug"]}}})
    );
}

#[test]
fn docker_already_configured_is_left_alone() {
    let old = format!(r#"{{"runtimes": {{"cordon": {{"path": "{BIN}"}}}}, "debug": true}}"#);
    let p = plan_of(Engine::Docker, &old, "cordon");
    assert!(p.text.is_none(), "{p:?}");
}

#[test]
fn docker_bad_files_are_refused_with_the_key() {
    let t = target(Engine::Docker, "cordon");
    let e = plan(&t, "{").unwrap_err();
    assert!(format!("{e:#}").contains("not valid JSON"), "{e:#}");
    let e = plan(&t, "[1]").unwrap_err();
    assert!(
        format!("{e:#}").contains("expected a JSON object, found an array"),
        "{e:#}"
    );
    let e = plan(&t, r#"{"runtimes": "runc"}"#).unwrap_err();
    assert!(
        format!("{e:#}").contains("runtimes: expected an object, found a string"),
        "{e:#}"
    );
    let e = plan(&t, r#"{"runtimes": {"cordon": "/x"}}"#).unwrap_err();
    assert!(
        format!("{e:#}").contains("runtimes.cordon: expected an object"),
        "{e:#}"
    );
}

// ----- containerd -----

#[test]
fn containerd_default_config_keeps_runc_the_default() {
    let p = plan_of(Engine::Containerd, CONTAINERD_DEFAULT, "cordon");
    assert!(p.appended, "the default config takes an appended block: {p:?}");
    let text = written(&p);
    assert!(text.starts_with(CONTAINERD_DEFAULT));
    let doc = parse_toml(text).unwrap();
    let before = parse_toml(CONTAINERD_DEFAULT).unwrap();
    assert_eq!(doc["version"].as_integer(), Some(2));
    assert_eq!(
        get(&doc, &["plugins", CRI, "containerd", "default_runtime_name"]).and_then(Toml::as_str),
        Some("runc")
    );
    assert_eq!(
        cri_runtime(&doc, CRI, "runc"),
        cri_runtime(&before, CRI, "runc"),
        "runc's runtime must not change"
    );
    assert_cordon_runtime(cri_runtime(&doc, CRI, "cordon"), BIN);
    // Everything else is as it was.
    let mut without = doc.clone();
    remove_at(&mut without, &["plugins", CRI, "containerd", "runtimes"], &|rts| {
        rts.remove("cordon");
    });
    assert_eq!(without, before);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn containerd_install_twice_changes_nothing_the_second_time() {
    for fixture in [CONTAINERD_DEFAULT, CONTAINERD_DEBIAN, "", CONTAINERD_IO] {
        let once = install_text(Engine::Containerd, fixture, "cordon");
        let again = plan_of(Engine::Containerd, &once, "cordon");
        assert!(again.text.is_none(), "{fixture}\n---\n{once}\n---\n{again:?}");
    }
}

#[test]
fn containerd_debian_config_gets_runc_written_out() {
    // Debian's file has a CRI section but no runtimes: a runtimes table with
    // only cordon would replace containerd's built-in runc, the default.
    let p = plan_of(Engine::Containerd, CONTAINERD_DEBIAN, "cordon");
    assert!(p.appended, "{p:?}");
    let text = written(&p);
    assert!(text.starts_with(CONTAINERD_DEBIAN), "{text}");
    let doc = parse_toml(text).unwrap();
    assert_eq!(doc["version"].as_integer(), Some(2));
    assert_eq!(
        cri_runtime(&doc, CRI, "runc")["runtime_type"].as_str(),
        Some("io.containerd.runc.v2")
    );
    assert_cordon_runtime(cri_runtime(&doc, CRI, "cordon"), BIN);
    assert_eq!(
        get(&doc, &["plugins", CRI, "cni", "bin_dir"]).and_then(Toml::as_str),
        Some("/usr/lib/cni")
    );
    assert_eq!(
        get(&doc, &["plugins", "io.containerd.internal.v1.opt", "path"]).and_then(Toml::as_str),
        Some("/var/lib/containerd/opt")
    );
}

#[test]
fn containerd_uninstall_gives_back_the_file_byte_for_byte() {
    for fixture in [CONTAINERD_DEFAULT, CONTAINERD_DEBIAN, CONTAINERD_IO] {
        let after = install_text(Engine::Containerd, fixture, "cordon");
        // From the backup.
        assert_eq!(
            undo(Engine::Containerd, "cordon", &after, Some(fixture)),
            Undo::Restore(fixture.into())
        );
        // Without a backup: the marked block is cut out.
        assert_eq!(
            undo_text(undo(Engine::Containerd, "cordon", &after, None)),
            fixture,
            "{after}"
        );
    }
    // A new file: removed again.
    let after = install_text(Engine::Containerd, "", "cordon");
    assert_eq!(undo(Engine::Containerd, "cordon", &after, None), Undo::RemoveFile);
}

#[test]
fn containerd_uninstall_keeps_later_edits() {
    let after = install_text(Engine::Containerd, CONTAINERD_DEBIAN, "cordon");
    let edited = after.replace("bin_dir = \"/usr/lib/cni\"", "bin_dir = \"/opt/cni/bin\"");
    let text = undo_text(undo(Engine::Containerd, "cordon", &edited, Some(CONTAINERD_DEBIAN)));
    assert_eq!(text, edited_debian(), "{text}");

    fn edited_debian() -> String {
        CONTAINERD_DEBIAN.replace("bin_dir = \"/usr/lib/cni\"", "bin_dir = \"/opt/cni/bin\"")
    }
}

#[test]
fn containerd_several_runtimes_come_out_one_by_one() {
    let one = install_text(Engine::Containerd, CONTAINERD_DEBIAN, "cordon");
    let two = install_text(Engine::Containerd, &one, "cordon-audit");
    let doc = parse_toml(&two).unwrap();
    assert_cordon_runtime(cri_runtime(&doc, CRI, "cordon"), BIN);
    assert_cordon_runtime(cri_runtime(&doc, CRI, "cordon-audit"), BIN);
    // The backup is the file before the first install.
    let back = undo_text(undo(Engine::Containerd, "cordon-audit", &two, Some(CONTAINERD_DEBIAN)));
    assert_eq!(back, one);
    assert_eq!(
        undo(Engine::Containerd, "cordon", &back, Some(CONTAINERD_DEBIAN)),
        Undo::Restore(CONTAINERD_DEBIAN.into())
    );
    // The other order: cordon's block also holds runc, which cordon-audit
    // still needs; the document is rewritten without cordon only.
    let text = undo_text(undo(Engine::Containerd, "cordon", &two, Some(CONTAINERD_DEBIAN)));
    let doc = parse_toml(&text).unwrap();
    assert!(get(&doc, &["plugins", CRI, "containerd", "runtimes", "cordon"]).is_none());
    assert!(get(&doc, &["plugins", CRI, "containerd", "runtimes", "runc"]).is_some());
    assert_cordon_runtime(cri_runtime(&doc, CRI, "cordon-audit"), BIN);
}

#[test]
fn containerd_uninstall_refuses_runc_and_the_default() {
    let e = plan_uninstall(Engine::Containerd, "runc", CONTAINERD_DEFAULT, None).unwrap_err();
    assert!(
        format!("{e:#}").starts_with("runtime \"runc\" is not cordon's"),
        "{e:#}"
    );
    let after = install_text(Engine::Containerd, CONTAINERD_DEFAULT, "cordon")
        .replace("default_runtime_name = \"runc\"", "default_runtime_name = \"cordon\"");
    let e = plan_uninstall(Engine::Containerd, "cordon", &after, None).unwrap_err();
    assert_eq!(
        format!("{e:#}"),
        "plugins.\"io.containerd.grpc.v1.cri\".containerd.default_runtime_name is \"cordon\": make another \
         runtime the default first"
    );
}

#[test]
fn containerd_with_the_own_shim() {
    let t = Target {
        shim: true,
        ..target(Engine::Containerd, "cordon")
    };
    let p = plan(&t, "").unwrap();
    let doc = parse_toml(written(&p)).unwrap();
    let rt = cri_runtime(&doc, CRI, "cordon");
    assert_eq!(rt["runtime_type"].as_str(), Some("io.containerd.cordon.v2"));
    assert!(rt.get("options").is_none(), "no BinaryName with the own shim: {rt:?}");
    assert_eq!(rt["pod_annotations"].as_array().map(Vec::len), Some(1));
    assert_eq!(rt["pod_annotations"][0].as_str(), Some("org.cordon.*"));
    assert_eq!(undo(Engine::Containerd, "cordon", written(&p), None), Undo::RemoveFile);
}

#[test]
fn containerd_new_file_is_a_version_2_config_and_the_snippet_says_so() {
    let p = plan_of(Engine::Containerd, "", "cordon");
    let doc = parse_toml(written(&p)).unwrap();
    assert_eq!(doc["version"].as_integer(), Some(2));
    assert_cordon_runtime(cri_runtime(&doc, CRI, "cordon"), BIN);
    assert!(cri_runtime(&doc, CRI, "runc").contains_key("runtime_type"));
    assert!(p.snippet.starts_with("version = 2\n"), "{}", p.snippet);
    assert!(
        p.snippet
            .contains(r#"[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.cordon]"#),
        "{}",
        p.snippet
    );
    assert!(p.snippet.contains(&format!(r#"BinaryName = "{BIN}""#)), "{}", p.snippet);
    // The snippet for an existing version 2 file says version 2 too.
    let p = plan_of(Engine::Containerd, CONTAINERD_DEFAULT, "cordon");
    assert!(p.snippet.starts_with("version = 2\n"), "{}", p.snippet);
}

#[test]
fn containerd_version_3_uses_the_v3_plugin_name() {
    let v3 = "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd]\n  default_runtime_name = 'runc'\n";
    let p = plan_of(Engine::Containerd, v3, "cordon");
    assert!(p.snippet.starts_with("version = 3\n"), "{}", p.snippet);
    let text = written(&p);
    let doc = parse_toml(text).unwrap();
    assert_eq!(doc["version"].as_integer(), Some(3));
    assert_cordon_runtime(cri_runtime(&doc, "io.containerd.cri.v1.runtime", "cordon"), BIN);
    assert!(cri_runtime(&doc, "io.containerd.cri.v1.runtime", "runc").contains_key("runtime_type"));
    assert!(get(&doc, &["plugins", CRI]).is_none());
    assert_eq!(undo_text(undo(Engine::Containerd, "cordon", text, None)), v3);
}

#[test]
fn containerd_version_1_file_keeps_its_version_and_warns_about_a_disabled_cri() {
    let p = plan_of(Engine::Containerd, CONTAINERD_IO, "cordon");
    let doc = parse_toml(written(&p)).unwrap();
    assert!(doc.get("version").is_none(), "a version 1 file stays version 1");
    assert_cordon_runtime(cri_runtime(&doc, "cri", "cordon"), BIN);
    assert!(cri_runtime(&doc, "cri", "runc").contains_key("runtime_type"));
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(p.warnings[0].starts_with("disabled_plugins turns containerd's CRI plugin off"));

    // Only comments: as good as empty.
    let p = plan_of(Engine::Containerd, "# nothing yet\n", "cordon");
    assert!(p.appended);
    let doc = parse_toml(written(&p)).unwrap();
    assert_eq!(doc["version"].as_integer(), Some(2));

    let t = target(Engine::Containerd, "cordon");
    let e = plan(&t, "version = 9\n").unwrap_err();
    assert!(format!("{e:#}").contains("version = 9"), "{e:#}");
    let e = plan(&t, "version = \"2\"\n").unwrap_err();
    assert!(format!("{e:#}").contains("expected an integer"), "{e:#}");
}

#[test]
fn containerd_copies_runcs_systemd_cgroup() {
    let old = CONTAINERD_DEFAULT.replace("SystemdCgroup = false", "SystemdCgroup = true");
    let doc = parse_toml(&install_text(Engine::Containerd, &old, "cordon")).unwrap();
    assert_eq!(
        get(cri_runtime(&doc, CRI, "cordon"), &["options", "SystemdCgroup"]).and_then(Toml::as_bool),
        Some(true)
    );
    let doc = parse_toml(&install_text(Engine::Containerd, CONTAINERD_DEFAULT, "cordon")).unwrap();
    assert!(get(cri_runtime(&doc, CRI, "cordon"), &["options", "SystemdCgroup"]).is_none());
}

#[test]
fn containerd_updates_an_old_binary_keeping_its_other_options() {
    let old = format!(
        "{CONTAINERD_DEBIAN}\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.cordon]\n  \
         runtime_type = \"io.containerd.runc.v2\"\n  \
         [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.cordon.options]\n    \
         BinaryName = \"/old/cordon\"\n    SystemdCgroup = true\n"
    );
    let p = plan_of(Engine::Containerd, &old, "cordon");
    assert!(!p.appended, "a second [..cordon] header would be invalid: {p:?}");
    let doc = parse_toml(written(&p)).unwrap();
    let cordon = cri_runtime(&doc, CRI, "cordon");
    assert_cordon_runtime(cordon, BIN);
    assert_eq!(
        get(cordon, &["options", "SystemdCgroup"]).and_then(Toml::as_bool),
        Some(true)
    );
    assert_eq!(doc["version"].as_integer(), Some(2));
}

#[test]
fn containerd_inline_tables_are_merged_not_appended_to() {
    let old = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n\
               runtimes = { runc = { runtime_type = \"io.containerd.runc.v2\" } }\n";
    let p = plan_of(Engine::Containerd, old, "cordon");
    assert!(!p.appended);
    let doc = parse_toml(written(&p)).unwrap();
    assert_cordon_runtime(cri_runtime(&doc, CRI, "cordon"), BIN);
    assert!(cri_runtime(&doc, CRI, "runc").contains_key("runtime_type"));
    // No marked block to cut: the document is rewritten without cordon.
    let text = undo_text(undo(Engine::Containerd, "cordon", written(&p), None));
    assert_eq!(parse_toml(&text).unwrap(), parse_toml(old).unwrap());
}

#[test]
fn containerd_bad_files_are_refused_with_the_key() {
    let t = target(Engine::Containerd, "cordon");
    let e = plan(&t, "version = 2\n[plugins\nsecret = \"s3cr3t\"\n").unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.starts_with("not valid TOML at line 2, column 9: "), "{msg}");
    assert!(
        !msg.contains('\n') && !msg.contains("s3cr3t") && !msg.contains("[plugins"),
        "{msg}"
    );
    let e = plan(&t, "version = 2\nplugins = 3\n").unwrap_err();
    assert!(
        format!("{e:#}").contains("plugins: expected a table, found integer"),
        "{e:#}"
    );
}

#[test]
fn dry_run_diff_shows_the_added_lines() {
    let p = plan_of(Engine::Containerd, CONTAINERD_DEBIAN, "cordon");
    let d = diff(
        Path::new("/etc/containerd/config.toml"),
        Some(CONTAINERD_DEBIAN),
        p.text.as_deref(),
    );
    assert!(
        d.starts_with("--- /etc/containerd/config.toml\n+++ /etc/containerd/config.toml\n@@ "),
        "{d}"
    );
    assert!(
        d.contains("\n+[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.cordon]\n"),
        "{d}"
    );
    assert!(d.contains("\n+BinaryName = \"/usr/local/bin/cordon\"\n"), "{d}");
    assert!(!d.lines().any(|l| l.starts_with('-') && !l.starts_with("---")), "{d}");
    let d = diff(Path::new("/x/daemon.json"), None, Some("{}\n"));
    assert!(d.starts_with("--- /dev/null\n+++ /x/daemon.json\n"), "{d}");
}

// ----- podman -----

#[test]
fn podman_into_a_new_file() {
    let p = plan_of(Engine::Podman, "", "cordon");
    let doc = parse_toml(written(&p)).unwrap();
    let runtimes = get(&doc, &["engine", "runtimes"]).and_then(Toml::as_table).unwrap();
    assert_eq!(runtimes["cordon"], Toml::Array(vec![BIN.into()]));
    assert!(p.snippet.contains("[engine.runtimes]"), "{}", p.snippet);
    assert_eq!(undo(Engine::Podman, "cordon", written(&p), None), Undo::RemoveFile);
}

#[test]
fn podman_keeps_the_engine_table_and_other_runtimes() {
    let p = plan_of(Engine::Podman, CONTAINERS_CONF, "cordon");
    // In place, comments kept.
    assert!(
        written(&p).contains("# Default OCI runtime\nruntime = \"crun\""),
        "{}",
        written(&p)
    );
    let doc = parse_toml(written(&p)).unwrap();
    assert_eq!(get(&doc, &["engine", "runtime"]).and_then(Toml::as_str), Some("crun"));
    assert_eq!(
        get(&doc, &["containers", "log_size_max"]).and_then(Toml::as_integer),
        Some(-1)
    );
    assert_eq!(
        get(&doc, &["engine", "runtimes", "runc"]),
        Some(&Toml::Array(vec!["/usr/bin/runc".into()]))
    );
    assert_eq!(
        get(&doc, &["engine", "runtimes", "cordon"]),
        Some(&Toml::Array(vec![BIN.into()]))
    );
    // Uninstall: the file as it was, with or without the backup.
    let text = written(&p);
    assert_eq!(undo_text(undo(Engine::Podman, "cordon", text, None)), CONTAINERS_CONF);
    assert_eq!(
        undo(Engine::Podman, "cordon", text, Some(CONTAINERS_CONF)),
        Undo::Restore(CONTAINERS_CONF.into())
    );
    // Not runc, not the default.
    let e = plan_uninstall(Engine::Podman, "runc", text, None).unwrap_err();
    assert!(format!("{e:#}").contains("is not cordon's"), "{e:#}");
    let default = text.replace("runtime = \"crun\"", "runtime = \"cordon\"");
    let e = plan_uninstall(Engine::Podman, "cordon", &default, None).unwrap_err();
    assert!(format!("{e:#}").contains("engine.runtime is \"cordon\""), "{e:#}");
}

#[test]
fn podman_without_a_runtimes_table_gets_it_appended() {
    let old = "# mine\n[engine]\nruntime = \"crun\"\n";
    let p = plan_of(Engine::Podman, old, "cordon");
    assert!(p.appended);
    assert!(written(&p).starts_with(old));
    let doc = parse_toml(written(&p)).unwrap();
    assert_eq!(get(&doc, &["engine", "runtime"]).and_then(Toml::as_str), Some("crun"));
    assert_eq!(
        get(&doc, &["engine", "runtimes", "cordon"]),
        Some(&Toml::Array(vec![BIN.into()]))
    );
    assert_eq!(undo_text(undo(Engine::Podman, "cordon", written(&p), None)), old);
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
