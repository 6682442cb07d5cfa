//! The Kubernetes path: containerd's CRI plugin with a RuntimeClass
//! handler `cordon` (`runtime_type = "io.containerd.cordon.v2"`), driven
//! by a small CRI client (the `k8s-cri` crate, RuntimeService v1 over
//! containerd's socket) the way the kubelet drives it: RunPodSandbox with
//! `runtime_handler: cordon`, CreateContainer, StartContainer, the
//! container's log, then StopContainer, RemoveContainer, StopPodSandbox,
//! RemovePodSandbox.

use std::collections::HashMap;
use std::path::Path;

use hyper_util::rt::TokioIo;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use tonic::transport::{Channel, Endpoint, Uri};

use super::*;

/// The RuntimeClass handler name.
const HANDLER: &str = "cordon";
/// A RuntimeClass handler whose runtime options name a runtime config
/// file (`options.ConfigPath`) choosing the `audit` policy.
const AUDIT_HANDLER: &str = "cordon-audit";
/// That file, in containerd's private directory.
const AUDIT_CONFIG: &str = "cordon-audit.toml";
/// containerd's namespace for CRI.
const K8S_NS: &str = "k8s.io";

/// containerd config for the CRI plugin: the `cordon` handler on cordon's
/// shim (pod annotations `org.cordon.*` passed through, so a pod picks its
/// policy), the local sandbox image, CNI dirs inside `d` (none
/// configured: pods use the host network), `restrict_oom_score_adj` since
/// CAP_SYS_RESOURCE is missing here.
pub(super) fn cri_config(d: &Path) -> String {
    format!(
        r#"[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/cordon-pause:latest"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{HANDLER}]
      runtime_type = "io.containerd.cordon.v2"
      pod_annotations = ["org.cordon.*"]
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{AUDIT_HANDLER}]
      runtime_type = "io.containerd.cordon.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{AUDIT_HANDLER}.options]
        ConfigPath = "{d}/{AUDIT_CONFIG}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/cni/bin"
    conf_dir = "{d}/cni/conf"
"#,
        d = d.display()
    )
}

/// A blocking CRI client: each call runs on a current-thread runtime.
struct Cri {
    rt: tokio::runtime::Runtime,
    client: RuntimeServiceClient<Channel>,
}

impl Cri {
    fn connect(sock: &Path) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let sock = sock.to_path_buf();
        let channel = rt
            .block_on(async move {
                Endpoint::try_from("http://[::]:50051")
                    .expect("endpoint")
                    .connect_with_connector(tower::service_fn(move |_: Uri| {
                        let sock = sock.clone();
                        async move {
                            Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(sock).await?))
                        }
                    }))
                    .await
            })
            .expect("connect to containerd's CRI socket");
        Cri {
            rt,
            client: RuntimeServiceClient::new(channel),
        }
    }
}

/// Runs one CRI call: `cri!(c, method, Request { .. })` → the response
/// message, or a panic naming the call and the status.
macro_rules! cri {
    ($c:expr, $method:ident, $req:expr) => {{
        let c: &mut Cri = &mut $c;
        let fut = c.client.$method($req);
        match c.rt.block_on(async { tokio::time::timeout(CMD_TIMEOUT, fut).await }) {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(status)) => panic!("CRI {}: {}", stringify!($method), status),
            Err(_) => panic!("CRI {}: no answer within {CMD_TIMEOUT:?}", stringify!($method)),
        }
    }};
}

/// A pod with `runtime_handler: cordon` and policy `audit` from a pod
/// annotation: the container's output reaches its CRI log, its syscalls
/// show in cordon's audit trail (execve too, which only the `audit`
/// policy records), cordon's state names the policy, and the teardown
/// leaves nothing behind.
#[test]
fn cri_pod_with_runtime_handler_cordon() {
    cordon_pod(
        HANDLER,
        HashMap::from([("org.cordon.policy".to_string(), "audit".to_string())]),
    );
}

/// The same pod without annotations under the handler `cordon-audit`,
/// whose runtime options' `ConfigPath` is a runtime config file with
/// `policy = "audit"`: one node, two runtime names, two policies.
#[test]
fn cri_runtime_options_choose_the_policy() {
    cordon_pod(AUDIT_HANDLER, HashMap::new());
}

/// Runs a pod under `handler` with pod `annotations` and checks it ran
/// under the `audit` policy.
fn cordon_pod(handler: &str, annotations: HashMap<String, String>) {
    let _g = serial();
    let c = Containerd::start_with(true);
    std::fs::write(
        c.dir.as_ref().unwrap().path().join(AUDIT_CONFIG),
        "policy = \"audit\"\n",
    )
    .unwrap();
    require_shim(&c);
    c.import_image(K8S_NS, "cordon-pause");
    c.import_image(K8S_NS, "cordon-busybox");
    let mut cri = Cri::connect(&c.sock);

    let v = cri!(cri, version, VersionRequest { version: "v1".into() });
    assert_eq!(v.runtime_name, "containerd", "CRI version: {v:?}");

    let (pod, ctr, text) = run_pod(&c, &mut cri, handler, annotations);
    let st = cri!(
        cri,
        pod_sandbox_status,
        PodSandboxStatusRequest {
            pod_sandbox_id: pod.clone(),
            verbose: false,
        }
    );
    let status = st.status.expect("sandbox status");
    assert_eq!(
        status.state,
        PodSandboxState::SandboxReady as i32,
        "sandbox: {status:?}"
    );
    assert_eq!(status.runtime_handler, handler, "sandbox: {status:?}");
    // The CRI log ("<time> stdout F <line>") shows the emulated uname.
    assert!(
        text.lines().any(|l| l.ends_with(&format!("stdout F {CORDON_RELEASE}"))),
        "expected the log to show {CORDON_RELEASE}:\n{text}"
    );

    // cordon ran it, under the pod's policy, and audited its syscalls.
    let root = c.shim_root().with_file_name(K8S_NS);
    let st = c.cordon_in(&root, &["state", &ctr]);
    assert!(st.success(), "cordon state {ctr}\n{st}\n{}", c.diagnostics());
    let state: Value = serde_json::from_str(&st.stdout).expect("state JSON");
    assert_eq!(
        state["annotations"]["org.cordon.policy"], "audit",
        "cordon state: {state}"
    );
    let audit = c.cordon_in(&root, &["audit", "--json", &ctr]);
    assert!(
        audit.success() && audit.stdout.contains("\"uname\"") && audit.stdout.contains("\"execve\""),
        "expected the audit trail to record uname and execve\n{audit}\n{}",
        c.diagnostics()
    );

    remove_pod(&mut cri, &pod, &ctr);
    let left = cri!(cri, list_pod_sandbox, ListPodSandboxRequest { filter: None });
    assert!(left.items.iter().all(|p| p.id != pod), "sandbox still listed: {left:?}");
    let res = poll(|| {
        let ids = c
            .cordon_in(&root, &["list", "-q"])
            .stdout
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>();
        let mut leaked: Vec<String> = ids.into_iter().filter(|i| *i == ctr || *i == pod).collect();
        leaked.extend(
            [&ctr, &pod]
                .iter()
                .filter(|i| cgroup_leaked(i))
                .map(|i| format!("cgroup of {i}")),
        );
        if leaked.is_empty() {
            Ok(())
        } else {
            Err(format!("left behind: {leaked:?}"))
        }
    });
    if let Err(e) = res {
        panic!("{e}\n{}", c.diagnostics());
    }
}

/// containerd's CRI plugin as a node has it before cordon (as Debian's
/// config.toml: a CRI section without runtimes, so containerd's built-in
/// runc is the default), with the local sandbox image and no CNI.
fn stock_cri_config(d: &Path) -> String {
    format!(
        r#"[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/cordon-pause:latest"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/cni/bin"
    conf_dir = "{d}/cni/conf"
"#,
        d = d.display()
    )
}

/// Runs a pod with `handler` ("": containerd's default runtime) whose
/// container prints `uname -r` and `pod-ok`: the ids of the pod and its
/// container, and the container's CRI log.
fn run_uname_pod(c: &Containerd, cri: &mut Cri, handler: &str) -> (String, String, String) {
    run_pod(c, cri, handler, HashMap::new())
}

/// [`run_uname_pod`] with pod `annotations`.
fn run_pod(
    c: &Containerd,
    cri: &mut Cri,
    handler: &str,
    annotations: HashMap<String, String>,
) -> (String, String, String) {
    let command = ["sh", "-c", "uname -r; echo pod-ok; exec sleep 1000"];
    let app = App {
        image: "docker.io/library/cordon-busybox:latest",
        command: &command,
        done: "pod-ok",
    };
    run_pod_with(c, cri, handler, annotations, &app)
}

/// A pod's one container: its image, its command, and the line its log
/// has once it is done.
struct App<'a> {
    image: &'a str,
    command: &'a [&'a str],
    done: &'a str,
}

/// Runs a pod (the node's network) with `handler` and pod `annotations`
/// whose container is `app`, until its log shows `app.done`: the ids of
/// the pod and its container, and the container's CRI log.
fn run_pod_with(
    c: &Containerd,
    cri: &mut Cri,
    handler: &str,
    annotations: HashMap<String, String>,
    app: &App,
) -> (String, String, String) {
    let logs = c.dir.as_ref().unwrap().path().join("pod-logs").join(unique("logs"));
    fs::create_dir_all(&logs).unwrap();
    let name = unique("pod");
    let sandbox_config = PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: name.clone(),
            uid: format!("uid-{name}"),
            namespace: "default".into(),
            attempt: 0,
        }),
        log_directory: logs.to_string_lossy().into_owned(),
        annotations,
        linux: Some(LinuxPodSandboxConfig {
            security_context: Some(LinuxSandboxSecurityContext {
                namespace_options: Some(NamespaceOption {
                    network: NamespaceMode::Node as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod = cri!(
        *cri,
        run_pod_sandbox,
        RunPodSandboxRequest {
            config: Some(sandbox_config.clone()),
            runtime_handler: handler.into(),
        }
    )
    .pod_sandbox_id;
    let ctr = cri!(
        *cri,
        create_container,
        CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(ContainerConfig {
                metadata: Some(ContainerMetadata {
                    name: "app".into(),
                    attempt: 0,
                }),
                image: Some(ImageSpec {
                    image: app.image.into(),
                    ..Default::default()
                }),
                command: app.command.iter().map(|a| a.to_string()).collect(),
                log_path: "app.log".into(),
                ..Default::default()
            }),
            sandbox_config: Some(sandbox_config),
        }
    )
    .container_id;
    cri!(
        *cri,
        start_container,
        StartContainerRequest {
            container_id: ctr.clone(),
        }
    );
    let log = logs.join("app.log");
    let seen = poll(|| {
        let text = fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        if text.contains(app.done) {
            Ok(text)
        } else {
            Err(format!("log so far: {text:?}"))
        }
    });
    let text = seen.unwrap_or_else(|e| panic!("handler {handler:?}: container log: {e}\n{}", c.diagnostics()));
    (pod, ctr, text)
}

/// Stops and removes a pod and its container through CRI.
fn remove_pod(cri: &mut Cri, pod: &str, ctr: &str) {
    cri!(
        *cri,
        stop_container,
        StopContainerRequest {
            container_id: ctr.into(),
            timeout: 1,
        }
    );
    cri!(
        *cri,
        remove_container,
        RemoveContainerRequest {
            container_id: ctr.into(),
        }
    );
    cri!(
        *cri,
        stop_pod_sandbox,
        StopPodSandboxRequest {
            pod_sandbox_id: pod.into(),
        }
    );
    cri!(
        *cri,
        remove_pod_sandbox,
        RemovePodSandboxRequest {
            pod_sandbox_id: pod.into(),
        }
    );
}

/// The plugins of `containerd config default` (containerd 1.6, the
/// installer's unit-test fixture), with this machine's needs: the local
/// sandbox image, `restrict_oom_score_adj`, CNI dirs inside `d`, and
/// without the opt plugin's /opt path (the test's config sets its own).
fn default_cri_config(d: &Path) -> String {
    let default = include_str!("../../runtime/tests/fixtures/install/containerd-1.6-default.toml");
    let start = default.find("\n[plugins]\n").expect("[plugins] in the default config") + 1;
    let end = default
        .find("\n[proxy_plugins]")
        .expect("[proxy_plugins] in the default config");
    let plugins = default[start..end]
        .replace(
            "  [plugins.\"io.containerd.internal.v1.opt\"]\n    path = \"/opt/containerd\"\n",
            "",
        )
        .replace(
            "sandbox_image = \"registry.k8s.io/pause:3.6\"",
            "sandbox_image = \"docker.io/library/cordon-pause:latest\"",
        )
        .replace("restrict_oom_score_adj = false", "restrict_oom_score_adj = true")
        .replace(
            "bin_dir = \"/opt/cni/bin\"",
            &format!("bin_dir = \"{}/cni/bin\"", d.display()),
        )
        .replace(
            "conf_dir = \"/etc/cni/net.d\"",
            &format!("conf_dir = \"{}/cni/conf\"", d.display()),
        );
    assert!(!plugins.contains("/opt/containerd") && plugins.contains("cordon-pause"));
    plugins
}

/// `cordon install containerd --write` on a node's config (Debian's: a
/// CRI section without runtimes), then a restart of containerd: CRI still
/// runs a pod on runc, the default runtime, and runs one with
/// `runtime_handler: cordon` through the runc shim with cordon as its
/// binary and its own Root; `cordon uninstall containerd --write` gives
/// the file back byte for byte.
#[test]
fn cri_runc_and_cordon_pods_after_cordon_install() {
    pods_after_install(stock_cri_config);
}

/// The same on `containerd config default`, runc's runtime spelled out.
#[test]
fn cri_runc_and_cordon_pods_after_cordon_install_on_the_default_config() {
    pods_after_install(default_cri_config);
}

fn pods_after_install(plugins: fn(&Path) -> String) {
    let _g = serial();
    let mut c = Containerd::start_config(plugins);
    let config = c.config_path();
    let cfg = config.to_string_lossy().into_owned();
    let before = fs::read_to_string(&config).unwrap();

    // cordon's state apart from runc's (default /run/containerd/cordon):
    // in this test, inside the temp dir.
    let root = c.runc_shim_root().to_string_lossy().into_owned();
    let install = [
        "install",
        "containerd",
        "--write",
        "--config",
        &cfg,
        "--state-root",
        &root,
    ];
    let w = cordon_cli(&install);
    assert!(w.success(), "{w}");
    let again = cordon_cli(&install);
    assert!(
        again.success() && again.stdout.contains("already configured"),
        "a second install should change nothing\n{again}"
    );
    let text = fs::read_to_string(&config).unwrap();
    assert!(
        text.starts_with(&before),
        "install should keep the file and append\n{text}"
    );
    let root_line = format!("Root = \"{root}\"");
    assert!(text.contains(&root_line), "expected {root_line}\n{text}");
    c.restart();
    c.import_image(K8S_NS, "cordon-pause");
    c.import_image(K8S_NS, "cordon-busybox");
    let mut cri = Cri::connect(&c.sock);

    // runc is still the default runtime.
    let host = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let (pod, ctr, log) = run_uname_pod(&c, &mut cri, "");
    assert!(
        log.lines().any(|l| l.ends_with(&format!("stdout F {}", host.trim()))),
        "expected the runc pod to print the host's release {}:\n{log}",
        host.trim()
    );
    remove_pod(&mut cri, &pod, &ctr);

    // The cordon handler runs cordon, with its state under its own Root.
    let (pod, ctr, log) = run_uname_pod(&c, &mut cri, "cordon");
    assert!(
        log.lines().any(|l| l.ends_with(&format!("stdout F {CORDON_RELEASE}"))),
        "expected the cordon pod to print {CORDON_RELEASE}:\n{log}"
    );
    let root = c.runc_shim_root().join(K8S_NS);
    let st = c.cordon_in(&root, &["state", &ctr]);
    assert!(
        st.success(),
        "cordon state {ctr} in {}\n{st}\n{}",
        root.display(),
        c.diagnostics()
    );
    remove_pod(&mut cri, &pod, &ctr);

    let u = cordon_cli(&["uninstall", "containerd", "--write", "--config", &cfg]);
    assert!(u.success(), "{u}");
    assert_eq!(
        fs::read_to_string(&config).unwrap(),
        before,
        "uninstall should give back the file as it was\n{u}"
    );
}

/// deploy/scripts/cordon-deploy.sh (what the cordon-deploy DaemonSet runs)
/// on a node's containerd config, the node's / being "" here: `install`
/// copies the binaries, writes the cordon-audit wrapper, merges both
/// runtimes and restarts containerd (once: a second install changes
/// nothing); CRI then runs a pod under each (cordon-audit's under the
/// audit policy) and still a runc pod; `cleanup`
/// gives the config back byte for byte and removes the binaries.
#[test]
fn cri_deploy_script_installs_and_cleans_up() {
    let _g = serial();
    let mut c = Containerd::start_config(stock_cri_config);
    let d = c.dir.as_ref().unwrap().path().to_path_buf();
    let config = c.config_path();
    let before = fs::read_to_string(&config).unwrap();
    let install_dir = d.join("node/opt/cordon/bin");
    let restarts = d.join("restarts");
    let (artifacts, state_root) = (c.cordon.parent().unwrap().to_path_buf(), c.runc_shim_root());
    let script = |mode: &str| {
        run_timeout(
            Command::new("sh")
                .arg(cordon_tests::repo().join("deploy/scripts/cordon-deploy.sh"))
                .arg(mode)
                .env("HOST_ROOT", "")
                .env("CORDON_INSTALL_DIR", &install_dir)
                .env("CORDON_ARTIFACTS", &artifacts)
                .env("CONTAINERD_CONFIG", &config)
                .env("CORDON_STATE_ROOT", &state_root)
                .env("CORDON_RESTART_CMD", format!("echo restart >> {}", restarts.display()))
                .env_remove("NODE_NAME"),
            CMD_TIMEOUT,
        )
    };
    let restart_count = || fs::read_to_string(&restarts).unwrap_or_default().lines().count();

    let r = script("install");
    assert!(r.success(), "cordon-deploy.sh install\n{r}");
    assert_eq!(restart_count(), 1, "install should restart containerd once\n{r}");
    assert!(r.stdout.contains("NODE_NAME is not set: not labelling the node"), "{r}");
    let wrapper = fs::read_to_string(install_dir.join("cordon-audit")).unwrap();
    assert!(
        wrapper.contains(&format!("exec {}/cordon --policy audit \"$@\"", install_dir.display())),
        "cordon-audit wrapper:\n{wrapper}"
    );
    let text = fs::read_to_string(&config).unwrap();
    for rt in ["cordon", "cordon-audit"] {
        let line = format!("BinaryName = \"{}/{rt}\"", install_dir.display());
        assert!(text.contains(&line), "expected {line} in\n{text}");
    }
    c.restart();
    c.import_image(K8S_NS, "cordon-pause");
    c.import_image(K8S_NS, "cordon-busybox");
    let mut cri = Cri::connect(&c.sock);
    // cordon under the default policy (no execve recorded), cordon-audit
    // through its wrapper under `audit` (every execve recorded).
    let root = state_root.join(K8S_NS);
    for (handler, records_execve) in [("cordon", false), ("cordon-audit", true)] {
        let (pod, ctr, log) = run_uname_pod(&c, &mut cri, handler);
        assert!(
            log.lines().any(|l| l.ends_with(&format!("stdout F {CORDON_RELEASE}"))),
            "expected the {handler} pod to print {CORDON_RELEASE}:\n{log}"
        );
        let audit = c.cordon_in(&root, &["audit", "--json", &ctr]);
        assert!(
            audit.success() && audit.stdout.contains("\"uname\""),
            "{handler}: cordon audit {ctr}\n{audit}\n{}",
            c.diagnostics()
        );
        assert_eq!(
            audit.stdout.contains("\"execve\""),
            records_execve,
            "{handler}: execve in the audit trail should be {records_execve}\n{audit}"
        );
        remove_pod(&mut cri, &pod, &ctr);
    }
    let (pod, ctr, log) = run_uname_pod(&c, &mut cri, "");
    assert!(
        !log.contains(CORDON_RELEASE),
        "the default runtime should still be runc:\n{log}"
    );
    remove_pod(&mut cri, &pod, &ctr);

    let r = script("install");
    assert!(r.success(), "cordon-deploy.sh install again\n{r}");
    assert_eq!(
        restart_count(),
        1,
        "a second install should not restart containerd\n{r}"
    );

    let r = script("cleanup");
    assert!(r.success(), "cordon-deploy.sh cleanup\n{r}");
    assert_eq!(restart_count(), 2, "cleanup should restart containerd\n{r}");
    assert_eq!(
        fs::read_to_string(&config).unwrap(),
        before,
        "cleanup should give back containerd's config as it was\n{r}"
    );
    assert!(!install_dir.exists(), "{} is left\n{r}", install_dir.display());
}

/// The engines' lookup, pip and git jobs ([`super::workloads::JOB`]) in a CRI
/// pod on the node's network, under runc (the default handler) and then
/// under `cordon`: the same log lines.
#[test]
fn cri_pod_runs_the_lookup_pip_and_git_jobs() {
    let _g = serial();
    let c = Containerd::start_with(true);
    require_shim(&c);
    c.import_image(K8S_NS, "cordon-pause");
    c.import_image(K8S_NS, "cordon-python");
    let mut cri = Cri::connect(&c.sock);
    let command = ["python3", "-c", super::workloads::JOB, "pip", "quiet"];
    let app = App {
        image: "docker.io/library/cordon-python:latest",
        command: &command,
        done: "stdout F done",
    };
    let mut logs = Vec::new();
    for handler in ["", HANDLER] {
        let (pod, ctr, text) = run_pod_with(&c, &mut cri, handler, HashMap::new(), &app);
        remove_pod(&mut cri, &pod, &ctr);
        // "<time> stdout F <line>": the lines, without their times.
        let lines: Vec<String> = text
            .lines()
            .filter_map(|l| l.split_once(' ').map(|(_, rest)| rest.to_string()))
            .collect();
        logs.push(lines);
    }
    assert_eq!(
        logs[0],
        [
            "stdout F ['192.0.2.10', '2001:db8::10']",
            "stdout F ['192.0.2.10']",
            "stdout F ['2001:db8::10']",
            "stdout F pip 0 0 ",
            "stdout F cordon",
            "stdout F git [0, 0, 0, 0] 0  True",
            "stdout F done"
        ],
        "runc's run"
    );
    assert_eq!(
        logs[1],
        logs[0],
        "cordon's run differs from runc's\n{}",
        c.diagnostics()
    );
}
