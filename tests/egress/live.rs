//! `cordon policy update`: a running container's network rules replaced
//! in place, and what the kernel enforces refused.

use super::*;

/// The container's init: for round N it waits for `/shared/go-N`, connects
/// to the address or name written there (port 8080) and writes `ok` or
/// `err ERRNO` to `/shared/result-N`; `exit` ends it.
pub(super) const LOOP: &str = r#"
import errno, os, socket, time
n = 0
while True:
    n += 1
    go = "/shared/go-%d" % n
    while not os.path.exists(go):
        time.sleep(0.01)
    target = open(go).read().strip()
    if target == "exit":
        break
    try:
        socket.create_connection((target, 8080), timeout=5).close()
        r = "ok"
    except OSError as e:
        r = "err " + errno.errorcode.get(e.errno, str(e.errno))
    open("/shared/result-%d.tmp" % n, "w").write(r)
    os.rename("/shared/result-%d.tmp" % n, "/shared/result-%d" % n)
"#;

/// Host side of the loop: round `n` against `target`, its result.
pub(super) fn round(shared: &std::path::Path, n: usize, target: &str) -> String {
    std::fs::write(shared.join(format!("go-{n}")), target).unwrap();
    let result = shared.join(format!("result-{n}"));
    wait_until(&format!("round {n}"), std::time::Duration::from_secs(60), || {
        std::fs::read_to_string(&result).map_err(|e| e.to_string())
    })
}

/// A policy file in `dir`: the allowed name, the egress base, `extra`.
pub(super) fn policy_file(dir: &std::path::Path, file: &str, extra: &str) -> String {
    let path = dir.join(file);
    std::fs::write(
        &path,
        format!(
            "name = \"{}\"\nextends = \"default\"\nnet_default = \"deny\"\n{extra}\n\
             [[net]]\nhost = \"allowed.test\"\naction = \"allow\"\n",
            file.trim_end_matches(".toml")
        ),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

/// A running process sees an allowed address once the update is in
/// force and refused again once it is undone; `exec` after an update runs
/// under it; the trail and `state` name the new policy; a change to what
/// the kernel enforces is refused whole, naming the rule.
#[test]
fn policy_update_changes_network_rules_of_a_running_container() {
    let net = TestNet::new();
    let mut env = Env::python(&["python3", "-c", LOOP]);
    net.configure(&mut env, "[[net]]\nhost = \"allowed.test\"\naction = \"allow\"\n");
    let shared = TempDir::new("live");
    env.config["mounts"].as_array_mut().unwrap().push(serde_json::json!({
        "destination": "/shared", "type": "bind", "source": shared.path(), "options": ["rbind", "rw"]
    }));
    let dir = TempDir::new("live-policies");
    let opened = policy_file(
        dir.path(),
        "opened.toml",
        "[[net]]\ncidr = \"192.0.2.3/32\"\naction = \"allow\"\n",
    );
    let closed = policy_file(dir.path(), "closed.toml", "");
    // What the update will grant, as `policy diff` says it.
    let d = env.cordon(&["policy", "diff", &closed, &opened]);
    assert_eq!(d.status.code(), Some(1), "they differ");
    assert!(
        stdout(&d).lines().any(|l| l == "+ net 192.0.2.3:1: deny -> allow"),
        "{}",
        stdout(&d)
    );
    let id = unique("live");
    ok(&env.create(&id));
    ok(&env.cordon(&["start", &id]));

    assert_eq!(round(shared.path(), 1, "192.0.2.3"), "err EPERM");
    ok(&env.cordon(&["policy", "update", &id, &opened]));
    assert_eq!(
        round(shared.path(), 2, "192.0.2.3"),
        "ok",
        "the same process, after the update"
    );
    assert_eq!(env.state(&id)["annotations"]["org.cordon.policy"], opened.as_str());
    let exec = env.cordon(&[
        "exec",
        &id,
        "python3",
        "-c",
        "import socket; s = socket.create_connection(('192.0.2.3', 8080), timeout=5); print('exec ok')",
    ]);
    assert_eq!(ok(&exec).trim(), "exec ok", "exec after the update runs under it");

    ok(&env.cordon(&["policy", "update", &id, &closed]));
    assert_eq!(round(shared.path(), 3, "192.0.2.3"), "err EPERM", "the update undone");

    let syscall = policy_file(
        dir.path(),
        "syscall.toml",
        "[[syscall]]\nnames = [\"mkdir\"]\naction = \"deny\"\nerrno = \"EPERM\"\n",
    );
    let out = env.cordon(&["policy", "update", &id, &syscall]);
    assert!(!out.status.success());
    let why = stderr(&out);
    assert!(
        why.contains("syscall[0] (mkdir)") && why.contains("needs a restart"),
        "{why}"
    );
    assert_eq!(why.trim().lines().count(), 1, "one line: {why}");

    let path = policy_file(
        dir.path(),
        "path.toml",
        "[[path]]\npattern = \"/shared/**\"\naccess = \"read-only\"\n",
    );
    let out = env.cordon(&["policy", "update", &id, &path]);
    let level = env.state(&id)["annotations"]["org.cordon.enforcement"].clone();
    if level == "kernel" {
        let why = stderr(&out);
        assert!(!out.status.success() && why.contains("path[0] (/shared/**"), "{why}");
        assert_eq!(
            round(shared.path(), 4, "192.0.2.3"),
            "err EPERM",
            "a refused update changes nothing"
        );
    } else {
        ok(&out);
        // The path rule is the supervisor's: the loop's next result file
        // cannot be written.
        std::fs::write(shared.path().join("go-4"), "192.0.2.3").unwrap();
        wait_until(
            "the trail records the refused write",
            std::time::Duration::from_secs(60),
            || {
                let trail = env.audit(&id);
                trail
                    .iter()
                    .any(|r| {
                        r["action"] == "deny" && r["detail"].as_str().unwrap_or("").starts_with("/shared/result-4")
                    })
                    .then_some(())
                    .ok_or_else(|| format!("{trail:?}"))
            },
        );
    }
    let trail = env.audit(&id);
    let updates: Vec<&str> = trail
        .iter()
        .filter(|r| r["result"] == "policy")
        .filter_map(|r| r["detail"].as_str())
        .collect();
    assert!(
        updates.len() >= 2
            && updates[0].starts_with("policy egress (sha256 ")
            && updates[0].contains("replaced by opened"),
        "{updates:?}"
    );
    let _ = env.cordon(&["delete", "--force", &id]);
    let out = env.cordon(&["policy", "update", &id, &opened]);
    assert!(
        !out.status.success() && stderr(&out).contains("does not exist"),
        "{}",
        stderr(&out)
    );
}

/// A fork of a container whose network namespace holds its resolver
/// (host rules, a namespace joined by path) cannot have a second resolver
/// there: the refusal says what to do, and `fork --netns new` gives the
/// fork a namespace of its own (only its loopback), under its parent's
/// policy.
#[test]
fn a_fork_of_a_container_with_host_rules_gets_a_namespace_of_its_own() {
    let net = TestNet::new();
    let mut env = Env::python(&["sleep", "1000"]);
    net.configure(&mut env, "[[net]]\nhost = \"allowed.test\"\naction = \"allow\"\n");
    env.config["root"]["readonly"] = false.into();
    let data = TempDir::new("fork-data");
    let config = data.path().join("config.toml");
    std::fs::write(&config, format!("data_dir = {:?}\n", data.path().join("lib"))).unwrap();
    env.config_file = Some(config);
    env.write();
    let id = unique("fork-ns");
    let b = env.bundle.path().to_string_lossy().into_owned();
    ok(&env.cordon(&["run", "-d", "--overlay", "-b", &b, &id]));
    assert_eq!(ok(&env.cordon(&["checkpoint", &id, "--name", "base"])).trim(), "base");
    let (same, own) = (format!("{id}-same"), format!("{id}-own"));
    let refused = env.cordon(&["fork", &id, "base", &same]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("cordon fork --netns new"),
        "{}",
        stderr(&refused)
    );
    ok(&env.cordon(&["fork", "--netns", "new", &id, "base", &own]));
    let state = env.state(&own);
    assert_eq!(
        state["annotations"]["org.cordon.policy"],
        env.state(&id)["annotations"]["org.cordon.policy"]
    );
    let lookup = env.cordon(&[
        "exec",
        &own,
        "python3",
        "-c",
        "import socket\ntry:\n    socket.getaddrinfo('allowed.test', 80)\n    print('resolved')\nexcept socket.gaierror as e:\n    print('gaierror')\nprint(open('/proc/net/dev').read().count(':'))",
    ]);
    assert_eq!(
        ok(&lookup),
        "gaierror\n1\n",
        "its own namespace: only lo, no nameserver"
    );
    for c in [&own, &id] {
        ok(&env.cordon(&["delete", "--force", c]));
    }
}
