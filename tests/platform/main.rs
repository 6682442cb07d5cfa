//! Platform suite: what is particular to the ptrace platform (the policy
//! matrix itself runs on both platforms: `make test-ptrace` runs the
//! supervisor, security and lifecycle suites with every container on
//! ptrace). Choosing it (annotation, config file), the automatic fallback
//! when no seccomp listener can be created, the exec check at
//! PTRACE_EVENT_EXEC, job control and signals of traced processes, and a
//! multi-threaded exec. Root, a real kernel, `make bundles`.

use std::process::Command;

use cordon_tests::{cordon_bin, ok, run_captured, stderr, stdout, unique, Env, TempDir};

/// A busybox container on the ptrace platform running `sh -c script`.
fn ptrace_env(script: &str) -> Env {
    let mut env = Env::busybox(&["sh", "-c", script]);
    env.annotate("org.cordon.platform", "ptrace");
    // The path rules in the supervisor: the tests see its decisions.
    env.annotate("org.cordon.enforcement", "supervisor");
    env
}

fn lines(o: &std::process::Output) -> Vec<String> {
    stdout(o).lines().map(str::to_string).collect()
}

#[test]
fn ptrace_is_chosen_by_annotation_and_by_the_config_file() {
    let env = ptrace_env("uname -r; cat /proc/kallsyms; echo rc=$?");
    let id = unique("pt-annot");
    let out = env.run_keep(&id);
    assert_eq!(lines(&out), ["6.1.0-cordon", "rc=1"], "{}", stderr(&out));
    assert!(stderr(&out).contains("Permission denied"), "{}", stderr(&out));
    let state = env.state(&id);
    assert_eq!(state["annotations"]["org.cordon.platform"], "ptrace", "{state}");
    let audit = env.audit(&id);
    assert!(
        audit
            .iter()
            .any(|a| a["result"] == "started" && a["detail"].as_str().unwrap_or("").contains("platform ptrace")),
        "{audit:?}"
    );
    assert!(
        audit
            .iter()
            .any(|a| a["action"] == "deny" && a["detail"].as_str().unwrap_or("").starts_with("/proc/kallsyms")),
        "{audit:?}"
    );

    // The runtime config file's `platform`.
    let cfg = TempDir::new("cfg");
    let file = cfg.path().join("config.toml");
    std::fs::write(&file, "platform = \"ptrace\"\n").unwrap();
    let env = Env::busybox(&["uname", "-r"]);
    env.write();
    let id = unique("pt-config");
    let b = env.bundle.path().to_string_lossy().into_owned();
    let out = run_captured(
        Command::new(cordon_bin())
            .env("CORDON_CONFIG", &file)
            .arg("--root")
            .arg(env.root.path())
            .args(["run", "--keep", "-b", &b, &id]),
    );
    assert_eq!(ok(&out).trim(), "6.1.0-cordon");
    assert_eq!(env.state(&id)["annotations"]["org.cordon.platform"], "ptrace");

    // A platform that does not exist: one line naming the annotation.
    let mut env = Env::busybox(&["true"]);
    env.annotate("org.cordon.platform", "kvm");
    let out = env.run(&unique("pt-bad"));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("org.cordon.platform") && err.contains("\"kvm\"") && err.trim().lines().count() == 1,
        "{err}"
    );
}

/// Inside another sandbox whose filter already has a listener, a
/// seccomp-notify container falls back to ptrace, says so in its state and
/// audit trail, and is still policed.
#[test]
fn no_listener_possible_falls_back_to_ptrace() {
    let mut env = Env::busybox(&["sh", "-c", "uname -r; cat /proc/kallsyms; echo rc=$?"]);
    env.annotate("org.cordon.enforcement", "supervisor");
    env.write();
    let id = unique("pt-fallback");
    let b = env.bundle.path().to_string_lossy().into_owned();
    let probe = cordon_tests::repo().join("target/probes/probe");
    let out = run_captured(
        Command::new(&probe)
            .arg("with-listener")
            .arg(cordon_bin())
            .arg("--root")
            .arg(env.root.path())
            .args(["run", "--keep", "-b", &b, &id]),
    );
    assert_eq!(lines(&out), ["6.1.0-cordon", "rc=1"], "{}", stderr(&out));
    let state = env.state(&id);
    assert_eq!(state["annotations"]["org.cordon.platform"], "ptrace", "{state}");
    let why = state["annotations"]["org.cordon.platform-fallback"]
        .as_str()
        .unwrap_or("");
    assert!(why.contains("busy"), "fallback reason: {state}");
    let audit = env.audit(&id);
    assert!(
        audit
            .iter()
            .any(|a| a["detail"].as_str().unwrap_or("").contains("fallback")),
        "{audit:?}"
    );
}

/// The exec check: a program the path rules deny never runs. The exec
/// guard refuses its exec first (EPERM: fanotify's question on the file
/// the kernel opened, not the caller's memory); PTRACE_EVENT_EXEC, before
/// the first instruction, would kill it if it got that far.
#[test]
fn a_denied_program_is_killed_at_exec() {
    let host = TempDir::new("policy");
    let policy = host.path().join("noprobe.toml");
    std::fs::write(
        &policy,
        "name = \"noprobe\"\nextends = \"default\"\n\
         [[path]]\npattern = \"/usr/local/bin/probe\"\naccess = \"deny\"\n",
    )
    .unwrap();
    let mut env = ptrace_env("/usr/local/bin/probe uname; echo rc=$?; uname -r");
    env.set_policy(&policy.to_string_lossy());
    let id = unique("pt-exec");
    let out = env.run_keep(&id);
    assert_eq!(lines(&out), ["rc=126", "6.1.0-cordon"], "{}", stderr(&out));
    let audit = env.audit(&id);
    assert!(
        audit
            .iter()
            .any(|a| a["syscall"] == "execve" && a["action"] == "deny" && a["detail"] == "/usr/local/bin/probe"),
        "{audit:?}"
    );
}

/// Job control and signals of traced processes: SIGSTOP/SIGCONT, a tracee
/// killed while stopped, and `cordon kill` from outside.
#[test]
fn job_control_and_signals_under_ptrace() {
    let env = ptrace_env(
        "sleep 3 & p=$!; sleep 0.2; kill -STOP $p; sleep 0.3; grep State /proc/$p/status; \
         kill -CONT $p; sleep 0.3; grep State /proc/$p/status; kill $p; wait $p; echo term=$?; \
         sleep 3 & q=$!; sleep 0.2; kill -STOP $q; kill -KILL $q; wait $q; echo killed=$?",
    );
    let id = unique("pt-jobs");
    let out = env.run_keep(&id);
    let l = lines(&out);
    assert!(l.len() >= 4, "{l:?} {}", stderr(&out));
    // Stopped: a traced process in group-stop shows as "t (tracing stop)"
    // (the tracer holds it with PTRACE_LISTEN), an untraced one as "T".
    assert!(l[0].contains("(stopped)") || l[0].contains("(tracing stop)"), "{l:?}");
    assert!(l[1].contains("S (sleeping)"), "{l:?}");
    assert_eq!(l[2], "term=143", "{l:?}");
    assert_eq!(l[3], "killed=137", "{l:?}");

    // From outside: a detached container dies of `cordon kill`.
    let mut env = Env::busybox(&["sleep", "1000"]);
    env.annotate("org.cordon.platform", "ptrace");
    let id = unique("pt-kill");
    env.write();
    let b = env.bundle.path().to_string_lossy().into_owned();
    ok(&env.cordon(&["run", "-d", "-b", &b, &id]));
    ok(&env.cordon(&["kill", &id, "KILL"]));
    cordon_tests::wait_until(
        "the container stops",
        std::time::Duration::from_secs(10),
        || match env.state(&id)["status"].as_str() {
            Some("stopped") => Ok(()),
            s => Err(format!("{s:?}")),
        },
    );
    ok(&env.cordon(&["delete", &id]));
}

/// A thread other than the leader execs: the kernel ends the others and the
/// new program (still traced) takes the pid.
#[test]
fn a_multithreaded_exec_stays_traced() {
    let env = ptrace_env("probe thread-exec probe uname");
    let id = unique("pt-thexec");
    let out = env.run_keep(&id);
    assert!(
        stdout(&out).starts_with("Linux|6.1.0-cordon|"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}

/// No way out of tracing: clone(CLONE_UNTRACED) is refused (EPERM) and
/// clone3 gets ENOSYS (libc falls back to clone). (A listener of the
/// container's own, which would outrank TRACE, is the security suite's
/// `a_container_cannot_install_its_own_listener_or_relax_its_filter`, run
/// on ptrace by `make test-ptrace`.)
#[test]
fn children_cannot_escape_the_tracer() {
    // clone(CLONE_UNTRACED | SIGCHLD) is 56(0x800011); clone3 is 435.
    let env = ptrace_env("probe syscall 56 0x800011; probe syscall 435 0 0");
    let id = unique("pt-untraced");
    let out = env.run_keep(&id);
    let l = lines(&out);
    assert_eq!(
        l.first().map(String::as_str),
        Some("err EPERM"),
        "{l:?} {}",
        stderr(&out)
    );
    assert_eq!(l.get(1).map(String::as_str), Some("err ENOSYS"), "{l:?}");
}
