//! Fault injection: the supervisor killed under a running or created
//! container, `cordon create` killed half way, a full disk under the state
//! root. After each, the container is gone or never ran (fail closed),
//! `cordon list` and `cordon delete` recover, and nothing is left behind:
//! no state directory, mount, cgroup or process (see
//! `cordon_tests::leftovers`).
//!
//! The tests of this suite run one at a time (`serial`), each checking
//! that the calling process has no fd open at its end that it did not have
//! at its start.
//!
//! Needs root, a real kernel and `make bundles`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use cordon_tests::*;
use serde_json::json;

/// Longest any single wait may take (a hang detector).
const TIMEOUT: Duration = Duration::from_secs(30);

/// A FIFO at `dir/name`.
fn mkfifo(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0, "mkfifo {}", p.display());
    p
}

/// `env` with host directory `dir` bind-mounted read-write at /work.
fn with_work(env: &mut Env, dir: &Path) {
    env.config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/work", "type": "bind", "source": dir, "options": ["rbind", "rw"]}));
}

/// The status of `id` in `cordon list --format json`, if listed.
fn listed_status(env: &Env, id: &str) -> Option<String> {
    let out = ok(&env.cordon(&["list", "--format", "json"]));
    let list: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("list {out:?}: {e}"));
    list.as_array()?
        .iter()
        .find(|c| c["id"] == id)
        .map(|c| c["status"].as_str().unwrap_or("").to_string())
}

/// Waits until `cordon state ID` reports `want`.
#[track_caller]
fn wait_status(env: &Env, id: &str, want: &str) {
    wait_until(&format!("{id} to be {want}"), TIMEOUT, || {
        let s = env.state(id);
        if s["status"] == want {
            Ok(())
        } else {
            Err(format!("status {}", s["status"]))
        }
    });
}

/// Waits until `pid` is gone.
#[track_caller]
fn wait_gone(pid: i32, what: &str) {
    wait_until(what, TIMEOUT, || {
        if alive(pid) {
            Err(format!("{pid} alive"))
        } else {
            Ok(())
        }
    });
}

/// Host pids of processes in container `id` whose command line is `args`.
fn container_processes(id: &str, args: &str) -> Vec<i32> {
    processes_of(id)
        .iter()
        .filter(|p| p.ends_with(&format!("({args})")))
        .map(|p| p.split(' ').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn killing_the_supervisor_with_a_call_pending_kills_the_container() {
    let _serial = serial();
    let fds = open_fds();
    let host = TempDir::new("fifo");
    mkfifo(host.path(), "p");
    let mut env = Env::busybox_supervised(&[
        "sh",
        "-c",
        "probe read /work/p; echo survived > /work/after; exec probe sleep 600",
    ]);
    with_work(&mut env, host.path());
    let id = unique("supkill");
    env.write();
    let b = env.bundle.path().to_string_lossy().into_owned();
    ok(&env.cordon(&["run", "-d", "-b", &b, &id]));
    // The FIFO open is pending in the supervisor (no writer comes): the
    // caller waits in its seccomp notification, or on ptrace in its
    // syscall stop.
    let reader = wait_until("the probe to wait on the FIFO", TIMEOUT, || {
        let p = container_processes(&id, "probe read /work/p");
        let wchan = p
            .first()
            .and_then(|p| std::fs::read_to_string(format!("/proc/{p}/wchan")).ok());
        match (p.first(), wchan) {
            (Some(&p), Some(w)) if w.contains("seccomp") || w.contains("ptrace_stop") => Ok(p),
            (p, w) => Err(format!("{p:?} in {w:?}")),
        }
    });
    let sup = env.supervisor_pid(&id);
    // The watchdog is the supervisor's child: the small static program
    // (runtime/watchdog/watchdog.c), named after the container.
    let children = std::fs::read_to_string(format!("/proc/{sup}/task/{sup}/children")).unwrap();
    let watchdog: i32 = children.split_whitespace().next().expect("a watchdog").parse().unwrap();
    let cmdline = std::fs::read(format!("/proc/{watchdog}/cmdline")).unwrap();
    assert_eq!(cmdline, format!("cordon-watchdog\0{id}\0").into_bytes());
    let rss = proc_status(watchdog, "VmRSS").unwrap();
    assert!(rss < 256, "the watchdog keeps {rss} kB resident");
    signal(sup, libc::SIGKILL);

    // Fail closed: the whole container dies with its supervisor.
    wait_gone(reader, "the pending caller to die");
    wait_gone(watchdog, "the watchdog to exit after killing the container");
    wait_status(&env, &id, "stopped");
    assert!(
        !host.path().join("after").exists(),
        "the container went on running without its supervisor"
    );
    assert_eq!(listed_status(&env, &id).as_deref(), Some("stopped"));
    ok(&env.cordon(&["delete", &id]));
    env.assert_no_leftovers(&[&id]);
    assert_no_new_fds(&fds);
}

#[test]
fn killing_the_supervisor_of_a_created_container_means_it_never_runs() {
    let _serial = serial();
    let fds = open_fds();
    let host = TempDir::new("ran");
    let mut env = Env::busybox_supervised(&["sh", "-c", "echo ran > /work/ran"]);
    with_work(&mut env, host.path());
    let id = unique("supkill-created");
    ok(&env.create(&id));
    let sup = env.supervisor_pid(&id);
    signal(sup, libc::SIGKILL);
    wait_gone(sup, "the supervisor to die");

    // `start` itself goes through (as runc's does: the init fails after
    // it); the payload never runs unsupervised.
    let _ = env.cordon(&["start", &id]);
    wait_status(&env, &id, "stopped");
    assert!(
        !host.path().join("ran").exists(),
        "the payload ran without its supervisor"
    );
    ok(&env.cordon(&["delete", &id]));
    env.assert_no_leftovers(&[&id]);
    assert_no_new_fds(&fds);
}

/// Starts `cordon create` of `env` as `id` in the background (stdio in
/// files under `logs`), with `extra_env` set.
fn spawn_create(env: &Env, id: &str, logs: &Path, extra_env: &[(&str, &Path)]) -> std::process::Child {
    env.write();
    let mut cmd = Command::new(cordon_bin());
    cmd.arg("--root")
        .arg(env.root.path())
        .args(["create", "-b"])
        .arg(env.bundle.path())
        .arg(id)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(logs.join("stdout")).unwrap())
        .stderr(std::fs::File::create(logs.join("stderr")).unwrap());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn cordon create")
}

/// A shell command that marks `marker`, then waits until its parent (the
/// `cordon create` that started it) is gone.
fn mark_and_wait_for_parent(marker: &Path) -> String {
    format!(
        "touch {}; while kill -0 $PPID 2>/dev/null; do sleep 0.05; done",
        marker.display()
    )
}

/// Kills `create` once `marker` exists, and reaps it.
#[track_caller]
fn kill_create_at(mut create: std::process::Child, marker: &Path, logs: &Path) {
    wait_until("create to reach the kill point", TIMEOUT, || {
        if marker.exists() {
            return Ok(());
        }
        match create.try_wait().unwrap() {
            Some(st) => panic!(
                "create exited ({st}) before the kill point: {}",
                std::fs::read_to_string(logs.join("stderr")).unwrap_or_default()
            ),
            None => Err("no marker yet".to_string()),
        }
    });
    create.kill().unwrap();
    create.wait().unwrap();
}

#[test]
fn killing_create_during_a_create_runtime_hook() {
    let _serial = serial();
    let fds = open_fds();
    let dir = TempDir::new("hook");
    let marker = dir.path().join("hook-started");
    let mut env = Env::busybox_supervised(&["probe", "sleep", "600"]);
    env.config["hooks"] = json!({"createRuntime": [{
        "path": "/bin/sh",
        "args": ["sh", "-c", mark_and_wait_for_parent(&marker)],
        "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
    }]});
    let id = unique("createkill-hook");
    let create = spawn_create(&env, &id, dir.path(), &[]);
    kill_create_at(create, &marker, dir.path());

    // The container is listed, never runs, and `delete` removes it with
    // its supervisor, cgroups and state.
    wait_until(
        "the half-created container to be stopped",
        TIMEOUT,
        || match listed_status(&env, &id).as_deref() {
            Some("stopped") => Ok(()),
            s => Err(format!("listed as {s:?}")),
        },
    );
    ok(&env.cordon(&["delete", &id]));
    env.assert_no_leftovers(&[&id]);
    assert_no_new_fds(&fds);
}

#[test]
fn killing_create_while_the_supervisor_starts() {
    let _serial = serial();
    let fds = open_fds();
    // The supervisor is started from $CORDON_BINARY: a wrapper that stops
    // there until `create` is gone, then starts the real supervisor.
    let dir = TempDir::new("supstart");
    let marker = dir.path().join("supervisor-starting");
    let wrapper = dir.path().join("cordon-wrapper");
    let real = std::fs::canonicalize(cordon_bin()).unwrap();
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n{}\nexec {} \"$@\"\n",
            mark_and_wait_for_parent(&marker),
            real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let env = Env::busybox_supervised(&["probe", "sleep", "600"]);
    let id = unique("createkill-sup");
    let create = spawn_create(&env, &id, dir.path(), &[("CORDON_BINARY", &wrapper)]);
    kill_create_at(create, &marker, dir.path());

    // `create` builds the container while its supervisor starts, so it
    // died somewhere in libcontainer's build or waiting for the supervisor
    // to be ready: the container is not listed, or listed as created (an
    // init waiting for `start`, as runc leaves one), never running; the
    // supervisor is recorded in its state from the start. `delete --force`
    // removes all of it, the supervisor included.
    let status = listed_status(&env, &id);
    assert!(
        matches!(status.as_deref(), None | Some("created") | Some("stopped")),
        "listed as {status:?}"
    );
    ok(&env.cordon(&["delete", "--force", &id]));
    wait_until("every process of the container to be gone", TIMEOUT, || {
        let p = processes_of(&id);
        if p.is_empty() {
            Ok(())
        } else {
            Err(format!("{p:?}"))
        }
    });
    env.assert_no_leftovers(&[&id]);
    assert_no_new_fds(&fds);
}

/// A tmpfs mounted on a temporary directory, unmounted on drop.
struct SmallFs {
    dir: TempDir,
}

impl SmallFs {
    fn new(size: &str) -> Self {
        let dir = TempDir::new("smallfs");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0755"), "tmpfs"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "mount tmpfs: {}", stderr(&out));
        SmallFs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the file system, then frees `pages` pages of the filler.
    fn fill_leaving(&self, pages: u64) {
        use std::io::Write;
        let filler = self.path().join("filler");
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 4096];
        loop {
            match f.write_all(&chunk) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("fill {}: {e}", filler.display()),
            }
        }
        let len = f.metadata().unwrap().len();
        f.set_len(len.saturating_sub(pages * 4096) / 4096 * 4096).unwrap();
    }

    fn free_all(&self) {
        let _ = std::fs::remove_file(self.path().join("filler"));
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let c = std::ffi::CString::new(self.path().to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
}

#[test]
fn a_full_state_disk_fails_create_cleanly() {
    let _serial = serial();
    let fds = open_fds();
    let fs = SmallFs::new("64k");
    let mut env = Env::busybox_supervised(&["probe", "sleep", "600"]);
    env.root = TempDir(fs.path().join("root"));
    // With no space at all, then one page more each time, until create
    // fits: every failure is one clear line and leaves nothing behind.
    let mut created = None;
    let mut errors = Vec::new();
    for pages in 0..16 {
        fs.fill_leaving(pages);
        let id = unique("full");
        let out = env.create(&id);
        if out.status.success() {
            created = Some(id);
            break;
        }
        let err = stderr(&out);
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{pages} free pages: one line on stderr, got:\n{err}");
        assert!(
            lines[0].starts_with("cordon: ") && lines[0].contains("No space left on device"),
            "{pages} free pages: the error names the cause: {}",
            lines[0]
        );
        env.assert_no_leftovers(&[&id]);
        errors.push(format!("{pages} free pages: {}", lines[0]));
        fs.free_all();
    }
    let id = created.expect("create never fitted in 64 KiB");
    assert!(!errors.is_empty(), "create fitted even in a full disk");
    eprintln!("{}", errors.join("\n"));

    // A running container whose disk fills up: its supervisor cannot write
    // the audit trail, and still answers every call.
    ok(&env.cordon(&["start", &id]));
    fs.free_all();
    fs.fill_leaving(0);
    let out = ok(&env.cordon(&[
        "exec",
        &id,
        "sh",
        "-c",
        "probe uname; probe read /etc/hostname; probe threads 4 20",
    ]));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].contains("6.1.0-cordon"), "{out}");
    assert_eq!(lines[1..], ["ok cordon", "ok 80"], "{out}");
    ok(&env.cordon(&["delete", "--force", &id]));
    env.assert_no_leftovers(&[&id]);
    fs.free_all();
    assert_no_new_fds(&fds);
}
