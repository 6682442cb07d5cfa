//! Soak: many containers run and deleted one after the other and side by
//! side, and many `exec`s into one container, each leaving nothing behind
//! (see `cordon_tests::leftovers`): no state directory, mount, cgroup or
//! process, no fd of the calling process, no thread or fd of a long-lived
//! supervisor.
//!
//! Short by default (100 sequential cycles, 50 concurrent, 100 execs);
//! `CORDON_SOAK=full` (`make soak`) runs 1,000, 200 and 1,000. The tests of
//! this suite run one at a time (their fds must not mix).
//!
//! Needs root, a real kernel and `make bundles`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use cordon_tests::*;

/// Whether the long form was asked for.
fn full() -> bool {
    std::env::var("CORDON_SOAK").as_deref() == Ok("full")
}

/// `short` normally, `long` under `CORDON_SOAK=full`.
fn count(short: usize, long: usize) -> usize {
    if full() {
        long
    } else {
        short
    }
}

/// How many `cordon run`s go on at once in the concurrent soak.
const WORKERS: usize = 8;

/// How often the sequential soak checks for leftovers.
const CHECK_EVERY: usize = 25;

#[test]
fn sequential_run_and_delete_cycles_leave_nothing_behind() {
    let _serial = serial();
    let fds = open_fds();
    let mut env = Env::busybox(&["probe", "uname"]);
    let b = env.bundle.path().to_string_lossy().into_owned();
    let mut batch = Vec::new();
    for i in 0..count(100, 1000) {
        let id = unique("seq");
        if i % 2 == 0 {
            // Foreground: the init exits by itself, `run` deletes it.
            env.config["process"]["args"] = serde_json::json!(["probe", "uname"]);
            let out = env.run(&id);
            assert!(ok(&out).contains("|6.1.0-cordon|"), "cycle {i}: {}", stdout(&out));
        } else {
            // Detached, then deleted while it runs: the kill path.
            env.config["process"]["args"] = serde_json::json!(["probe", "sleep", "600"]);
            env.write();
            ok(&env.cordon(&["run", "-d", "-b", &b, &id]));
            ok(&env.cordon(&["delete", "--force", &id]));
        }
        batch.push(id);
        if batch.len() == CHECK_EVERY {
            env.assert_no_leftovers(&batch);
            batch.clear();
        }
    }
    env.assert_no_leftovers(&batch);
    assert_no_new_fds(&fds);
}

#[test]
fn concurrent_run_and_delete_cycles_leave_nothing_behind() {
    let _serial = serial();
    let fds = open_fds();
    let env = Env::busybox(&["probe", "threads", "2", "10"]);
    env.write();
    let b = env.bundle.path().to_string_lossy().into_owned();
    let total = count(50, 200);
    let next = AtomicUsize::new(0);
    let ids = Mutex::new(Vec::new());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                while next.fetch_add(1, Ordering::SeqCst) < total {
                    let id = unique("conc");
                    ids.lock().unwrap().push(id.clone());
                    let out = env.cordon(&["run", "-b", &b, &id]);
                    if !out.status.success() || stdout(&out).trim() != "ok 20" {
                        failures.lock().unwrap().push(format!(
                            "{id}: exit {:?}, stdout {:?}, stderr {:?}",
                            out.status.code(),
                            stdout(&out),
                            stderr(&out)
                        ));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {total} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    env.assert_no_leftovers(&ids.into_inner().unwrap());
    assert_no_new_fds(&fds);
}

/// The supervisor's thread and fd counts.
fn threads_and_fds(sup: i32) -> (u64, usize) {
    (
        proc_status(sup, "Threads").unwrap_or(0),
        std::fs::read_dir(format!("/proc/{sup}/fd"))
            .map(|d| d.count())
            .unwrap_or(0),
    )
}

#[test]
fn exec_cycles_leave_the_supervisor_as_it_was() {
    let _serial = serial();
    let fds = open_fds();
    let env = Env::busybox(&["probe", "sleep", "600"]);
    let id = unique("execs");
    env.write();
    let b = env.bundle.path().to_string_lossy().into_owned();
    ok(&env.cordon(&["run", "-d", "-b", &b, &id]));
    let sup = env.supervisor_pid(&id);
    // The init attached: its listener is served on a "notify" thread.
    wait_until("the init to attach", Duration::from_secs(30), || {
        let names = thread_names(sup);
        if names.iter().any(|n| n == "notify") {
            Ok(())
        } else {
            Err(format!("{names:?}"))
        }
    });
    let before = threads_and_fds(sup);
    for i in 0..count(100, 1000) {
        // Each exec attaches a new listener to the supervisor; each
        // intercepted call is answered on it.
        let out = ok(&env.cordon(&["exec", &id, "sh", "-c", "probe uname && probe read /etc/hostname"]));
        assert!(out.ends_with("ok cordon\n"), "exec {i}: {out}");
    }
    // The exec'd processes are gone: so are their listeners and threads.
    wait_until("the supervisor to be back to its size", Duration::from_secs(30), || {
        let now = threads_and_fds(sup);
        if now.0 <= before.0 && now.1 <= before.1 {
            Ok(())
        } else {
            Err(format!("(threads, fds) {now:?}, before {before:?}"))
        }
    });
    let rss = proc_status(sup, "VmRSS").unwrap();
    assert!(rss < 64 * 1024, "supervisor RSS {rss} kB after the execs");
    ok(&env.cordon(&["delete", "--force", &id]));
    env.assert_no_leftovers(&[&id]);
    assert_no_new_fds(&fds);
}
