//! Races on the supervisor: callers that go away (exec, exit, fork) while
//! their call waits in the supervisor, signals hammering pending calls, a
//! container paused with calls in flight. (Threads flipping a path buffer
//! under the open emulation are in the supervisor suite: race-open.)
//!
//! The waiting call is an open of a FIFO that no writer opens: the
//! supervisor performs it on one of its "blocking" handler threads, so the
//! call stays pending for as long as the test wants. The probe subcommands
//! used here (pending, sig-fifo, sig-storm, threads) are in
//! tests/probes/probe.c.
//!
//! The tests of this suite run one at a time (`serial`), each checking
//! that the calling process has no fd open at its end that it did not have
//! at its start.
//!
//! Needs root, a real kernel and `make bundles`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cordon_tests::*;
use serde_json::json;

/// Longest any single wait may take (a hang detector).
const TIMEOUT: Duration = Duration::from_secs(60);

/// A FIFO at `dir/name`.
fn mkfifo(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0, "mkfifo {}", p.display());
    p
}

/// A running busybox container (`probe sleep 600`) with host directory
/// `work` (holding FIFOs) bind-mounted at /work.
fn running(work: &Path) -> (Env, String) {
    let mut env = Env::busybox_supervised(&["probe", "sleep", "600"]);
    env.config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/work", "type": "bind", "source": work, "options": ["rbind", "rw"]}));
    env.write();
    let id = unique("race");
    let b = env.bundle.path().to_string_lossy().into_owned();
    ok(&env.cordon(&["run", "-d", "-b", &b, &id]));
    (env, id)
}

/// The supervisor of container `id` once the container's init is attached
/// (it serves the init's listener on a "notify" thread), and its thread
/// count then.
fn attached_supervisor(env: &Env, id: &str) -> (i32, u64) {
    let sup = env.supervisor_pid(id);
    wait_until("the init to attach to its supervisor", TIMEOUT, || {
        let names = thread_names(sup);
        if names.iter().any(|n| n == "notify") {
            Ok(())
        } else {
            Err(format!("threads {names:?}"))
        }
    });
    (sup, proc_status(sup, "Threads").unwrap())
}

/// The supervisor's handler threads still blocked ("blocking" threads).
fn blocking_threads(sup: i32) -> usize {
    thread_names(sup).iter().filter(|n| *n == "blocking").count()
}

/// Waits until the supervisor has no blocked handler and no more threads
/// than `baseline`.
#[track_caller]
fn wait_released(sup: i32, baseline: u64) {
    wait_until("the supervisor to release every blocked handler", TIMEOUT, || {
        let (blocked, threads) = (blocking_threads(sup), proc_status(sup, "Threads").unwrap_or(0));
        if blocked == 0 && threads <= baseline {
            Ok(())
        } else {
            Err(format!(
                "{blocked} blocking threads, {threads} threads (baseline {baseline})"
            ))
        }
    });
}

#[test]
fn calls_left_pending_by_exec_exit_and_fork_are_released() {
    let _serial = serial();
    let fds = open_fds();
    let work = TempDir::new("pending");
    mkfifo(work.path(), "p");
    let (env, id) = running(work.path());
    let (sup, baseline) = attached_supervisor(&env, &id);

    // Each round leaves an open pending in the supervisor, forks a child
    // that must still be served, then execs (or exits) under the open.
    let out = ok(&env.cordon(&["exec", &id, "probe", "pending", "/work/p", "exec", "20"]));
    assert_eq!(out.trim(), "ok");
    let out = ok(&env.cordon(&["exec", &id, "probe", "pending", "/work/p", "exit", "20"]));
    assert_eq!(out.trim(), "ok");
    // No writer ever came: the supervisor gives up on calls whose caller
    // is gone rather than keeping a thread for each.
    wait_released(sup, baseline);

    // More rounds than the supervisor has slots for blocked calls (256):
    // a slot held by a caller that is gone would make the last ones fail
    // with EAGAIN.
    let out = ok(&env.cordon(&["exec", &id, "probe", "pending", "/work/p", "exit", "300"]));
    assert_eq!(out.trim(), "ok");
    wait_released(sup, baseline);

    // The FIFO still works for a caller that stays.
    let w = work.path().join("p");
    let reader = std::thread::spawn({
        let root = env.root.path().to_path_buf();
        let id = id.clone();
        move || {
            run_captured(
                std::process::Command::new(cordon_bin())
                    .arg("--root")
                    .arg(root)
                    .args(["exec", &id, "probe", "read", "/work/p"]),
            )
        }
    });
    wait_until(
        "the reader to wait in the supervisor",
        TIMEOUT,
        || match blocking_threads(sup) {
            1 => Ok(()),
            n => Err(format!("{n} blocking threads")),
        },
    );
    std::fs::write(&w, "hello\n").unwrap();
    let out = reader.join().unwrap();
    assert_eq!(ok(&out).trim(), "ok hello");
    wait_released(sup, baseline);
    ok(&env.cordon(&["delete", "--force", &id]));
    env.assert_no_leftovers(&[&id]);
    assert_no_new_fds(&fds);
}

#[test]
fn signals_never_interrupt_a_pending_call() {
    let _serial = serial();
    let fds = open_fds();
    let work = TempDir::new("signals");
    mkfifo(work.path(), "q");
    let (env, id) = running(work.path());

    // A blocked open, hammered with signals (SA_RESTART handler) before and
    // after the supervisor received it, completes with its fd: no EINTR.
    let out = ok(&env.cordon(&["exec", &id, "probe", "sig-fifo", "/work/q", "200"]));
    let handled: u64 = out
        .trim()
        .strip_prefix("ok signals=")
        .unwrap_or_else(|| panic!("sig-fifo: {out}"))
        .parse()
        .unwrap();
    assert!(handled >= 1, "the signals were delivered once the open returned: {out}");

    // Threads making intercepted calls while being signalled: every call
    // completes, none sees EINTR, nothing hangs.
    let out = ok(&env.cordon(&["exec", &id, "probe", "sig-storm", "8", "200"]));
    let rest = out
        .trim()
        .strip_prefix("ok 1600 signals=")
        .unwrap_or_else(|| panic!("sig-storm: {out}"));
    assert!(rest.parse::<u64>().unwrap() >= 1, "{out}");
    ok(&env.cordon(&["delete", "--force", &id]));
    env.assert_no_leftovers(&[&id]);
    assert_no_new_fds(&fds);
}

#[test]
fn pausing_with_calls_in_flight_then_resuming_completes() {
    let _serial = serial();
    let fds = open_fds();
    let work = TempDir::new("pause");
    let mut env = Env::busybox_supervised(&[
        "sh",
        "-c",
        "probe threads 16 400 > /work/out.tmp; mv /work/out.tmp /work/out",
    ]);
    env.config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/work", "type": "bind", "source": work.path(), "options": ["rbind", "rw"]}));
    env.write();
    let id = unique("pause");
    let b = env.bundle.path().to_string_lossy().into_owned();
    ok(&env.cordon(&["run", "-d", "-b", &b, &id]));
    // 16 threads keep the supervisor busy: calls are in flight (sent,
    // received, being answered) whenever the freezer strikes.
    wait_until("the workers to start", TIMEOUT, || {
        let pids = processes_of(&id);
        if pids.iter().any(|p| p.contains("probe threads")) {
            Ok(())
        } else {
            Err(format!("{pids:?}"))
        }
    });
    for round in 0..3 {
        ok(&env.cordon(&["pause", &id]));
        assert_eq!(env.state(&id)["status"], "paused", "round {round}");
        ok(&env.cordon(&["resume", &id]));
        assert_eq!(env.state(&id)["status"], "running", "round {round}");
    }
    let out = wait_until("the workers to finish", TIMEOUT, || {
        std::fs::read_to_string(work.path().join("out")).map_err(|e| e.to_string())
    });
    assert_eq!(out.trim(), "ok 6400", "every call completed, none failed");
    ok(&env.cordon(&["delete", "--force", &id]));
    env.assert_no_leftovers(&[&id]);
    assert_no_new_fds(&fds);
}

#[test]
fn pausing_with_a_call_blocked_in_the_supervisor() {
    let _serial = serial();
    let fds = open_fds();
    let work = TempDir::new("pausefifo");
    let fifo = mkfifo(work.path(), "p");
    let (env, id) = running(work.path());
    let sup = env.supervisor_pid(&id);
    let reader = std::thread::spawn({
        let root = env.root.path().to_path_buf();
        let id = id.clone();
        move || {
            run_captured(
                std::process::Command::new(cordon_bin())
                    .arg("--root")
                    .arg(root)
                    .args(["exec", &id, "probe", "read", "/work/p"]),
            )
        }
    });
    wait_until(
        "the reader to wait in the supervisor",
        TIMEOUT,
        || match blocking_threads(sup) {
            1 => Ok(()),
            n => Err(format!("{n} blocking threads")),
        },
    );
    // A call the supervisor received sleeps killable (WAIT_KILLABLE_RECV)
    // and the freezer cannot freeze it until it is answered (a known
    // limit): pause fails, says why, and leaves the container running; the
    // call completes once a writer comes.
    let paused = env.cordon(&["pause", &id]);
    let err = stderr(&paused);
    assert!(!paused.status.success(), "pause with a call held by the supervisor");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("unable to freeze") && err.contains("1 call(s) of the container wait in its supervisor"),
        "{err}"
    );
    assert_eq!(
        env.state(&id)["status"],
        "running",
        "a failed pause leaves the container running"
    );
    std::fs::write(&fifo, "hello\n").unwrap();
    let out = reader.join().unwrap();
    assert_eq!(ok(&out).trim(), "ok hello");
    // And once nothing is blocked, pause and resume work.
    ok(&env.cordon(&["pause", &id]));
    assert_eq!(env.state(&id)["status"], "paused");
    ok(&env.cordon(&["resume", &id]));
    assert_eq!(env.state(&id)["status"], "running");
    ok(&env.cordon(&["delete", "--force", &id]));
    env.assert_no_leftovers(&[&id]);
    assert_no_new_fds(&fds);
}
