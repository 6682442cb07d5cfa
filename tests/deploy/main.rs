//! deploy/: every manifest parses into typed Kubernetes objects
//! (`k8s-openapi`, API v1.33) with no field the types do not know (a
//! misspelled field is lost on the way through the types and fails the
//! test), and the objects fit together: the RuntimeClasses select the label
//! the deploy script sets, their handlers are the runtimes it adds, the
//! DaemonSets run the script with the service account the RBAC manifest
//! grants node patching, and mount what the script writes. No cluster is
//! needed; the script itself runs against a private containerd in the
//! engines suite (`cri_deploy_script_installs_and_cleans_up`).

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_yaml::Value;

/// Every object of deploy/, typed.
#[derive(Default)]
struct Manifests {
    daemon_sets: Vec<DaemonSet>,
    runtime_classes: Vec<RuntimeClass>,
    service_accounts: Vec<ServiceAccount>,
    cluster_roles: Vec<ClusterRole>,
    bindings: Vec<ClusterRoleBinding>,
}

fn deploy_dir() -> PathBuf {
    cordon_tests::repo().join("deploy")
}

/// `doc` as a `T`, and back: the round trip must give the same document.
fn typed<T: DeserializeOwned + Serialize>(file: &str, doc: &Value) -> T {
    let obj: T = serde_yaml::from_value(doc.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
    let back = serde_yaml::to_value(&obj).unwrap();
    if let Some(path) = lost(doc, &back, "") {
        panic!("{file}: {path}: a field the Kubernetes types do not know (misspelled or misplaced?)");
    }
    obj
}

/// The path of the first value of `doc` that `back` lacks or has otherwise.
fn lost(doc: &Value, back: &Value, at: &str) -> Option<String> {
    match (doc, back) {
        (Value::Mapping(d), Value::Mapping(b)) => d.iter().find_map(|(k, v)| {
            let key = format!("{at}.{}", k.as_str().unwrap_or("?"));
            match b.get(k) {
                Some(w) => lost(v, w, &key),
                None => Some(key),
            }
        }),
        (Value::Sequence(d), Value::Sequence(b)) if d.len() == b.len() => d
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (v, w))| lost(v, w, &format!("{at}[{i}]"))),
        _ => (doc != back).then(|| at.to_string()),
    }
}

/// Parses every `deploy/*.yaml`; an unknown kind fails.
fn manifests() -> Manifests {
    let mut m = Manifests::default();
    let mut files: Vec<PathBuf> = fs::read_dir(deploy_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "deploy/ manifests: {files:?}");
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(&path).unwrap();
        for de in serde_yaml::Deserializer::from_str(&text) {
            let doc: Value = serde::Deserialize::deserialize(de).unwrap_or_else(|e| panic!("{file}: {e}"));
            if doc.is_null() {
                continue;
            }
            let kind = doc["kind"]
                .as_str()
                .unwrap_or_else(|| panic!("{file}: a document without kind"));
            match kind {
                "DaemonSet" => m.daemon_sets.push(typed(&file, &doc)),
                "RuntimeClass" => m.runtime_classes.push(typed(&file, &doc)),
                "ServiceAccount" => m.service_accounts.push(typed(&file, &doc)),
                "ClusterRole" => m.cluster_roles.push(typed(&file, &doc)),
                "ClusterRoleBinding" => m.bindings.push(typed(&file, &doc)),
                other => panic!("{file}: kind {other} is not one this test checks"),
            }
        }
    }
    m
}

/// The deploy script's default for variable `name` (`NAME=${NAME:-value}`
/// or `NAME=${NAME-value}`).
fn script_default(name: &str) -> String {
    let script = fs::read_to_string(deploy_dir().join("scripts/cordon-deploy.sh")).unwrap();
    script
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix(&format!("{name}=${{{name}"))?;
            let value = rest.strip_prefix(":-").or_else(|| rest.strip_prefix('-'))?;
            Some(value.trim_end_matches('}').to_string())
        })
        .unwrap_or_else(|| panic!("cordon-deploy.sh sets no default for {name}"))
}

#[test]
fn runtime_classes_select_the_nodes_cordon_deploy_labels() {
    let m = manifests();
    let label = script_default("CORDON_NODE_LABEL");
    let mut names: Vec<&str> = Vec::new();
    for rc in &m.runtime_classes {
        let name = rc.metadata.name.as_deref().expect("RuntimeClass name");
        names.push(name);
        // The handler is the runtime cordon-deploy.sh installs under that name.
        assert_eq!(rc.handler, name, "RuntimeClass {name}: handler");
        let overhead = rc
            .overhead
            .as_ref()
            .and_then(|o| o.pod_fixed.as_ref())
            .unwrap_or_else(|| panic!("RuntimeClass {name}: no overhead.podFixed"));
        assert!(
            overhead.contains_key("cpu") && overhead.contains_key("memory"),
            "RuntimeClass {name}: overhead {overhead:?}"
        );
        let selector = rc
            .scheduling
            .as_ref()
            .and_then(|s| s.node_selector.as_ref())
            .unwrap_or_else(|| panic!("RuntimeClass {name}: no scheduling.nodeSelector"));
        assert_eq!(
            selector,
            &BTreeMap::from([(label.clone(), "true".to_string())]),
            "RuntimeClass {name}: nodeSelector"
        );
    }
    names.sort();
    assert_eq!(names, ["cordon", "cordon-audit"]);
    let script = fs::read_to_string(deploy_dir().join("scripts/cordon-deploy.sh")).unwrap();
    assert!(
        script.contains("for rt in cordon cordon-audit; do"),
        "cordon-deploy.sh should install both runtimes"
    );
}

#[test]
fn daemon_sets_run_the_script_with_what_it_needs() {
    let m = manifests();
    let mut seen = Vec::new();
    for ds in &m.daemon_sets {
        let name = ds.metadata.name.clone().expect("DaemonSet name");
        let ns = ds.metadata.namespace.clone().expect("DaemonSet namespace");
        let spec = ds.spec.as_ref().expect("DaemonSet spec");
        let selector = spec.selector.match_labels.as_ref().expect("matchLabels");
        let labels = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref())
            .expect("pod labels");
        assert!(
            selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
            "{name}: the selector {selector:?} does not select the pods {labels:?}"
        );
        let pod = spec.template.spec.as_ref().expect("pod spec");
        assert_eq!(
            pod.host_pid,
            Some(true),
            "{name}: hostPID (nsenter to restart containerd)"
        );

        // The service account exists and may label nodes.
        let sa = pod.service_account_name.as_deref().expect("serviceAccountName");
        assert!(
            m.service_accounts
                .iter()
                .any(|s| s.metadata.name.as_deref() == Some(sa) && s.metadata.namespace.as_deref() == Some(&ns)),
            "{name}: no ServiceAccount {ns}/{sa}"
        );
        let binding = m
            .bindings
            .iter()
            .find(|b| {
                b.subjects
                    .iter()
                    .flatten()
                    .any(|s| s.kind == "ServiceAccount" && s.name == sa && s.namespace.as_deref() == Some(&ns))
            })
            .unwrap_or_else(|| panic!("{name}: no ClusterRoleBinding for {ns}/{sa}"));
        let role = m
            .cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(&binding.role_ref.name))
            .expect("the binding's ClusterRole");
        assert!(
            role.rules.iter().flatten().any(|r| {
                r.resources.iter().flatten().any(|x| x == "nodes") && r.verbs.iter().any(|v| v == "patch")
            }),
            "{name}: ClusterRole {:?} cannot patch nodes",
            role.metadata.name
        );

        let [c] = pod.containers.as_slice() else {
            panic!("{name}: one container expected")
        };
        assert_eq!(
            c.security_context.as_ref().and_then(|s| s.privileged),
            Some(true),
            "{name}: privileged"
        );
        let command = c.command.clone().unwrap_or_default().join(" ");
        let mode = if command.contains("cordon-deploy.sh install") {
            "install"
        } else if command.contains("cordon-deploy.sh cleanup") {
            "cleanup"
        } else {
            panic!("{name}: does not run cordon-deploy.sh: {command}")
        };
        seen.push(mode);
        let env = c.env.clone().unwrap_or_default();
        let node = env.iter().find(|e| e.name == "NODE_NAME").expect("NODE_NAME");
        assert_eq!(
            node.value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.as_str()),
            Some("spec.nodeName"),
            "{name}: NODE_NAME"
        );
        let host_root = env
            .iter()
            .find(|e| e.name == "HOST_ROOT")
            .and_then(|e| e.value.clone())
            .unwrap_or_else(|| script_default("HOST_ROOT"));

        // What the script writes on the node is mounted from the node.
        let volumes = pod.volumes.clone().unwrap_or_default();
        let mounted = |node_path: &str| {
            c.volume_mounts.iter().flatten().any(|vm| {
                let host = volumes
                    .iter()
                    .find(|v| v.name == vm.name)
                    .and_then(|v| v.host_path.as_ref())
                    .map(|h| h.path.clone());
                host.is_some_and(|h| {
                    vm.mount_path == format!("{host_root}{h}") && node_path.starts_with(&format!("{h}/"))
                })
            })
        };
        for node_path in [
            script_default("CONTAINERD_CONFIG"),
            script_default("CORDON_INSTALL_DIR"),
        ] {
            assert!(
                mounted(&node_path),
                "{name}: {node_path} is not mounted from the node under {host_root}"
            );
        }
    }
    seen.sort();
    assert_eq!(seen, ["cleanup", "install"]);
    assert_eq!(script_default("HOST_ROOT"), "/host");
}
