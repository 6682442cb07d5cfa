//! Hostile load: a container flooding its supervisor with intercepted
//! calls next to a quiet one, and a container blocking more calls in its
//! supervisor than the supervisor takes on. Each container has its own
//! supervisor, so the quiet one is served whatever its neighbour does
//! (fairness by structure); a flooding container's supervisor stays small.
//!
//! Timeouts here are hang detectors only: nothing is asserted about speed.
//!
//! The tests of this suite run one at a time (`serial`), each checking
//! that the calling process has no fd open at its end that it did not have
//! at its start.
//!
//! Needs root, a real kernel and `make bundles`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use cordon_tests::*;
use serde_json::json;

/// Longest any single wait may take (a hang detector).
const TIMEOUT: Duration = Duration::from_secs(180);

/// What a supervisor may use at most, flood or not (VmRSS, kB).
const MAX_RSS_KB: u64 = 64 * 1024;

/// `env` with host directory `dir` bind-mounted read-write at /work.
fn with_work(env: &mut Env, dir: &Path) {
    env.config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/work", "type": "bind", "source": dir, "options": ["rbind", "rw"]}));
}

/// Starts `env` detached as `id`.
fn start(env: &Env, id: &str) {
    env.write();
    let b = env.bundle.path().to_string_lossy().into_owned();
    ok(&env.cordon(&["run", "-d", "-b", &b, id]));
}

/// The last complete line of `path` (empty if none yet).
fn last_line(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // Up to the last newline: a line being written is not complete yet.
    let complete = &text[..text.rfind('\n').unwrap_or(0)];
    complete.rsplit('\n').next().unwrap_or("").to_string()
}

/// `rounds=N failed=M` from the flood's output.
fn flood_counts(line: &str) -> Option<(u64, u64)> {
    let (r, f) = line.strip_prefix("rounds=")?.split_once(" failed=")?;
    Some((r.parse().ok()?, f.parse().ok()?))
}

/// Samples the VmRSS and thread count of process `pid` until `stop`;
/// keeps the largest of each.
fn sample(pid: i32, stop: &AtomicBool, rss: &AtomicU64, threads: &AtomicU64) {
    while !stop.load(Ordering::SeqCst) {
        if let Some(r) = proc_status(pid, "VmRSS") {
            rss.fetch_max(r, Ordering::SeqCst);
        }
        if let Some(t) = proc_status(pid, "Threads") {
            threads.fetch_max(t, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_flood_of_intercepted_calls_does_not_starve_a_quiet_neighbour() {
    let _serial = serial();
    let fds = open_fds();
    let work = TempDir::new("flood");
    let out = work.path().join("flood.out");
    let mut flood = Env::busybox_supervised(&["sh", "-c", "exec probe flood 64 > /work/flood.out"]);
    with_work(&mut flood, work.path());
    let flood_id = unique("flood");
    start(&flood, &flood_id);
    // Started means counting: its first `rounds=` line (100 ms after
    // "flooding"), which the comparison below starts from.
    wait_until("the flood to report its first rounds", TIMEOUT, || {
        flood_counts(&last_line(&out)).ok_or_else(|| std::fs::read_to_string(&out).unwrap_or_default())
    });
    let sup = flood.supervisor_pid(&flood_id);
    let stop = Arc::new(AtomicBool::new(false));
    let (rss, threads) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let sampler = {
        let (stop, rss, threads) = (stop.clone(), rss.clone(), threads.clone());
        std::thread::spawn(move || sample(sup, &stop, &rss, &threads))
    };

    // The quiet neighbour: 500 rounds of uname + open/read/close, under its
    // own supervisor, while the flood goes on.
    let quiet = Env::busybox_supervised(&["probe", "threads", "1", "500"]);
    let quiet_id = unique("quiet");
    quiet.write();
    let (tx, rx) = mpsc::channel();
    let mut cmd = Command::new(cordon_bin());
    cmd.arg("--root")
        .arg(quiet.root.path())
        .args(["run", "-b"])
        .arg(quiet.bundle.path())
        .arg(&quiet_id);
    std::thread::spawn(move || {
        let _ = tx.send(run_captured(&mut cmd));
    });
    let done = rx.recv_timeout(TIMEOUT);
    let (then, _) = flood_counts(&last_line(&out)).unwrap_or_else(|| panic!("flood output: {}", last_line(&out)));
    stop.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    let done = done.unwrap_or_else(|_| panic!("the quiet container hung next to the flood"));
    assert_eq!(ok(&done).trim(), "ok 500", "every call of the quiet container answered");
    quiet.assert_no_leftovers(&[&quiet_id]);

    // The flood was on all along: it is still running and still makes
    // progress after the quiet container finished.
    assert_eq!(flood.state(&flood_id)["status"], "running");
    let (now, failed) = wait_until("the flood to go on", TIMEOUT, || match flood_counts(&last_line(&out)) {
        Some((r, f)) if r > then => Ok((r, f)),
        c => Err(format!("{c:?} (had {then} rounds)")),
    });
    assert_eq!(failed, 0, "every call of the flood answered too ({now} rounds)");

    let (rss, threads) = (rss.load(Ordering::SeqCst), threads.load(Ordering::SeqCst));
    assert!(rss > 0, "the supervisor was sampled");
    assert!(rss < MAX_RSS_KB, "flooded supervisor RSS {rss} kB");
    assert!(threads < 16, "a flood of quick calls needs no extra threads: {threads}");
    let audit = std::fs::metadata(flood.root.path().join(".cordon").join(&flood_id).join("audit.jsonl"))
        .map(|m| m.len())
        .unwrap_or(0);
    eprintln!("flooded supervisor: max VmRSS {rss} kB, max {threads} threads, audit trail {audit} bytes");
    ok(&flood.cordon(&["delete", "--force", &flood_id]));
    flood.assert_no_leftovers(&[&flood_id]);
    assert_no_new_fds(&fds);
}

/// The supervisor rotates the audit trail at 16 MiB (supervisor/audit.rs):
/// under a flood of recorded calls the state directory holds the current
/// file and one rotated file, each about 16 MiB, and `cordon audit` reads
/// across both.
#[test]
fn a_flood_of_recorded_calls_rotates_the_audit_trail() {
    const MAX: u64 = 16 << 20;
    let _serial = serial();
    let fds = open_fds();
    // Every round of the flood is an emulated uname and an emulated open,
    // both recorded by the default policy.
    let env = Env::busybox_supervised(&["probe", "flood", "4"]);
    let id = unique("rotate");
    start(&env, &id);
    let dir = env.root.path().join(".cordon").join(&id);
    let (cur, old) = (dir.join("audit.jsonl"), dir.join("audit.jsonl.1"));
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    wait_until("the audit trail to rotate", TIMEOUT, || match old.exists() {
        true => Ok(()),
        false => Err(format!("audit.jsonl at {} bytes", size(&cur))),
    });
    // The rotated file is one full trail; the current one starts again.
    let rotated = size(&old);
    assert!((MAX..MAX + 4096).contains(&rotated), "rotated trail: {rotated} bytes");
    assert!(size(&cur) < MAX, "current trail: {} bytes", size(&cur));
    // Still recording after the rotation, into the new file.
    wait_until("records in the new trail", TIMEOUT, || match size(&cur) {
        0 => Err("empty".to_string()),
        _ => Ok(()),
    });
    ok(&env.cordon(&["kill", &id, "KILL"]));
    let records = env.audit(&id);
    assert!(
        records.len() as u64 > MAX / 200,
        "cordon audit reads the rotated trail too: {} records",
        records.len()
    );
    assert!(records.iter().any(|r| r["syscall"] == "uname"), "uname recorded");
    assert!(
        size(&old) < MAX + 4096 && size(&cur) < MAX + 4096,
        "bounded after the kill"
    );
    ok(&env.cordon(&["delete", "--force", &id]));
    env.assert_no_leftovers(&[&id]);
    assert_no_new_fds(&fds);
}

/// A FIFO at `dir/name`.
fn mkfifo(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0, "mkfifo {}", p.display());
    p
}

#[test]
fn blocked_calls_are_capped_at_256_per_supervisor() {
    let _serial = serial();
    let fds = open_fds();
    // 300 threads open a FIFO no writer has opened: each open blocks in the
    // supervisor, on a thread of its own, up to the cap; the rest get EAGAIN.
    const THREADS: u64 = 300;
    const CAP: u64 = 256;
    let work = TempDir::new("cap");
    let fifo = mkfifo(work.path(), "p");
    let out = work.path().join("cap.out");
    let mut env = Env::busybox_supervised(&["sh", "-c", "exec probe fifo-flood /work/p 300 > /work/cap.out"]);
    with_work(&mut env, work.path());
    let id = unique("cap");
    start(&env, &id);
    let sup = env.supervisor_pid(&id);
    let bounced = format!("ok=0 eagain={} other=0", THREADS - CAP);
    wait_until("the calls over the cap to bounce", TIMEOUT, || {
        let l = last_line(&out);
        if l == bounced {
            Ok(())
        } else {
            Err(l)
        }
    });
    let blocking = thread_names(sup).iter().filter(|n| *n == "blocking").count() as u64;
    assert_eq!(blocking, CAP, "one handler thread per blocked call, up to the cap");
    let threads = proc_status(sup, "Threads").unwrap();
    assert!(threads <= CAP + 8, "supervisor threads: {threads}");
    let rss = proc_status(sup, "VmRSS").unwrap();
    assert!(rss < MAX_RSS_KB, "supervisor RSS with {CAP} blocked calls: {rss} kB");

    // A writer comes (an open is enough): every blocked open completes.
    drop(std::fs::OpenOptions::new().write(true).open(&fifo).unwrap());
    wait_until("every open to return", TIMEOUT, || {
        let l = last_line(&out);
        if l.starts_with(&format!("ok={CAP} ")) {
            Ok(())
        } else {
            Err(l)
        }
    });
    assert_eq!(last_line(&out), format!("ok={CAP} eagain={} other=0", THREADS - CAP));
    eprintln!("{CAP} blocked calls: supervisor VmRSS {rss} kB, {threads} threads");
    ok(&env.cordon(&["delete", "--force", &id]));
    env.assert_no_leftovers(&[&id]);
    assert_no_new_fds(&fds);
}
