//! Snapshots (section 6): checkpoint, restore and fork of a container's
//! files (docs/CHECKPOINT.md), with the fleet targets (restore <= 200 ms,
//! fork <= 1.2x `run -d --overlay`, 10 concurrent forks <= 3x one). A busybox `sleep`
//! under `--overlay` writes 1,000 files of 100 KiB (100 MiB); then, each
//! round: `checkpoint` of that change (the pause, `frozen_ms` of
//! `checkpoints --format json`, and the command's wall time), `checkpoint`
//! of nothing new, `restore` to the first checkpoint, `fork` of it next to
//! `run -d --overlay` of a bundle like it, and 10 forks of it at once. sandlock-oci's `checkpoint` and
//! `restore` (process memory, to an image directory) of an idle sandbox
//! are measured next to them when sandlock is there.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

use crate::env::{Env, Image, Runtime};
use crate::proc;
use crate::report::{num, table, SectionOut, Target};
use crate::stats::{self, Summary};

const LONG: Duration = Duration::from_secs(120);

/// The change each round checkpoints: 1,000 files of 100 KiB.
const WRITE_1000: &str = "mkdir -p /bench && head -c 102400 /dev/urandom > /seed && i=0 && \
     while [ $i -lt 1000 ]; do cp /seed /bench/f$i; i=$((i+1)); done && rm /seed";

#[derive(Debug, Default, Serialize)]
struct Times {
    /// Frozen time of the checkpoint of 1,000 changed files (ms).
    pause_ms: Vec<f64>,
    /// Wall time of `cordon checkpoint` of those (ms).
    checkpoint_ms: Vec<f64>,
    /// Wall time of `cordon checkpoint` with nothing changed (ms).
    unchanged_ms: Vec<f64>,
    /// Wall time of `cordon restore` (ms): stop, rebuild, create, start.
    restore_ms: Vec<f64>,
    /// Wall time of `cordon fork` until the fork runs (ms).
    fork_ms: Vec<f64>,
    /// Wall time of `cordon run -d --overlay` of a bundle like it (ms).
    run_ms: Vec<f64>,
    /// Wall time of 10 `cordon fork` of one checkpoint started at once,
    /// until the last fork runs (ms).
    forks10_ms: Vec<f64>,
    /// sandlock-oci `checkpoint` of an idle sandbox (ms).
    sandlock_checkpoint_ms: Vec<f64>,
    /// sandlock-oci `restore` of it (ms).
    sandlock_restore_ms: Vec<f64>,
}

/// cordon with a data directory of the bench's own.
struct Cordon<'a> {
    rt: &'a Runtime,
    config: PathBuf,
}

impl Cordon<'_> {
    fn run(&self, args: &[&str]) -> anyhow::Result<proc::Outcome> {
        let mut c: Command = self.rt.cmd(args);
        c.env("CORDON_CONFIG", &self.config);
        proc::run_ok(&mut c, LONG)
    }

    fn sh(&self, id: &str, script: &str) -> anyhow::Result<proc::Outcome> {
        self.run(&["exec", id, "sh", "-c", script])
    }

    /// `frozen_ms` of the newest checkpoint of `id`.
    fn last_pause(&self, id: &str) -> anyhow::Result<f64> {
        let out = self.run(&["checkpoints", id, "--format", "json"])?;
        let v: Value = serde_json::from_str(&out.stdout)?;
        let last = v.as_array().and_then(|a| a.last()).cloned().unwrap_or_default();
        Ok(last["frozen_ms"].as_f64().unwrap_or(f64::NAN))
    }
}

fn ms(o: &proc::Outcome) -> f64 {
    o.elapsed.as_secs_f64() * 1e3
}

/// A busybox `sleep` bundle for `id` with a writable root.
fn sleeper(env: &Env, rt: &Runtime, id: &str) -> anyhow::Result<PathBuf> {
    let b = env.bundle(rt, id, Image::Busybox, &["sleep", "100000"], &[])?;
    let p = b.join("config.json");
    let mut c: Value = serde_json::from_slice(&std::fs::read(&p)?)?;
    c["root"]["readonly"] = json!(false);
    std::fs::write(&p, serde_json::to_vec_pretty(&c)?)?;
    Ok(b)
}

fn round(env: &Env, cordon: &Cordon<'_>, t: &mut Times) -> anyhow::Result<()> {
    let id = env.id(cordon.rt, "snap");
    let b = sleeper(env, cordon.rt, &id)?;
    let b = b.to_string_lossy().into_owned();
    cordon.run(&["run", "-d", "--overlay", "-b", &b, &id])?;
    let result = (|| -> anyhow::Result<()> {
        cordon.run(&["checkpoint", &id, "--name", "empty"])?;
        cordon.sh(&id, WRITE_1000)?;
        let cp = cordon.run(&["checkpoint", &id, "--name", "files"])?;
        t.checkpoint_ms.push(ms(&cp));
        t.pause_ms.push(cordon.last_pause(&id)?);
        t.unchanged_ms
            .push(ms(&cordon.run(&["checkpoint", &id, "--name", "again"])?));
        cordon.sh(&id, "rm -rf /bench")?;
        t.restore_ms.push(ms(&cordon.run(&["restore", &id, "files"])?));
        let fork = env.id(cordon.rt, "fork");
        t.fork_ms.push(ms(&cordon.run(&["fork", &id, "files", &fork])?));
        let _ = cordon.run(&["delete", "--force", &fork]);
        t.forks10_ms.push(concurrent_forks(env, cordon, &id, 10)?);
        // A bundle of its own: the bundle names its cgroup (`cgroupsPath`
        // ends in the container's id), and `run` of `id`'s bundle would put
        // `plain` in `id`'s cgroup, where `delete --force` of either kills
        // both (this left `plain` behind).
        let plain = env.id(cordon.rt, "plain");
        let pb = sleeper(env, cordon.rt, &plain)?.to_string_lossy().into_owned();
        let ran = cordon.run(&["run", "-d", "--overlay", "-b", &pb, &plain]);
        let _ = cordon.run(&["delete", "--force", &plain]);
        env.drop_bundle(&plain);
        t.run_ms.push(ms(&ran?));
        Ok(())
    })();
    let _ = cordon.run(&["delete", "--force", &id]);
    env.drop_bundle(&id);
    result
}

/// Starts `n` `cordon fork ID files` at once and waits for them all: the
/// wall time (ms) until the last fork runs. Every fork is deleted after.
fn concurrent_forks(env: &Env, cordon: &Cordon<'_>, id: &str, n: usize) -> anyhow::Result<f64> {
    let ids: Vec<String> = (0..n).map(|_| env.id(cordon.rt, "fork")).collect();
    let start = std::time::Instant::now();
    // One thread per fork (the bench's reaper owns every child's exit).
    let results: Vec<anyhow::Result<proc::Outcome>> = std::thread::scope(|s| {
        let handles: Vec<_> = ids
            .iter()
            .map(|f| s.spawn(move || cordon.run(&["fork", id, "files", f])))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("fork thread panicked")))
            })
            .collect()
    });
    let failed: Vec<String> = results
        .into_iter()
        .filter_map(|r| r.err().map(|e| format!("{e:#}")))
        .collect();
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    for f in &ids {
        let _ = cordon.run(&["delete", "--force", f]);
    }
    if let Some(e) = failed.first() {
        anyhow::bail!("{} of {n} concurrent forks failed: {e}", failed.len());
    }
    Ok(elapsed)
}

/// sandlock-oci's checkpoint and restore of an idle `sleep` sandbox.
fn sandlock_round(env: &Env, rt: &Runtime, t: &mut Times) -> anyhow::Result<()> {
    let id = env.id(rt, "snap");
    let b = env.bundle(rt, &id, Image::Busybox, &["sleep", "100000"], &[])?;
    let b = b.to_string_lossy().into_owned();
    let image = env.tmp.join("sandlock-images").join(&id);
    std::fs::create_dir_all(&image)?;
    let img = image.to_string_lossy().into_owned();
    let restored = format!("{id}-r");
    let result = (|| -> anyhow::Result<()> {
        proc::run_ok(&mut rt.cmd(&["create", "-b", &b, &id]), LONG)?;
        proc::run_ok(&mut rt.cmd(&["start", &id]), LONG)?;
        let cp = proc::run_ok(&mut rt.cmd(&["checkpoint", "--image-path", &img, &id]), LONG)?;
        t.sandlock_checkpoint_ms.push(ms(&cp));
        let _ = rt.exec(&["delete", "--force", &id], LONG);
        let r = proc::run_ok(
            &mut rt.cmd(&["restore", "--image-path", &img, "--bundle", &b, &restored]),
            LONG,
        )?;
        t.sandlock_restore_ms.push(ms(&r));
        Ok(())
    })();
    let _ = rt.exec(&["delete", "--force", &id], LONG);
    let _ = rt.exec(&["delete", "--force", &restored], LONG);
    let _ = std::fs::remove_dir_all(&image);
    env.drop_bundle(&id);
    result
}

/// Runs the section.
pub fn run(env: &Env, _out: &Path) -> anyhow::Result<SectionOut> {
    let rt = env.runtime("cordon", Some("default"));
    let data = env.tmp.join("snapshots-data");
    std::fs::create_dir_all(&data)?;
    let config = env.tmp.join("snapshots-config.toml");
    std::fs::write(&config, format!("data_dir = {:?}\n", data.join("lib")))?;
    let cordon = Cordon { rt: &rt, config };
    let rounds = if env.sizes.smoke { 1 } else { 5 };
    let mut t = Times::default();
    let mut so = SectionOut::default();
    for _ in 0..rounds {
        if let Err(e) = round(env, &cordon, &mut t) {
            so.problems.push(format!("cordon: {e:#}"));
            break;
        }
    }
    let sandlock = env.sandlock.as_ref().map(|_| env.runtime("sandlock", None));
    let mut sandlock_error = None;
    if let Some(sl) = &sandlock {
        for _ in 0..rounds {
            if let Err(e) = sandlock_round(env, sl, &mut t) {
                sandlock_error = Some(format!("{e:#}"));
                break;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&data);

    let s = |v: &[f64]| stats::summary(v);
    let med = |v: &[f64]| (!v.is_empty()).then(|| s(v).median);
    let (pause, checkpoint, unchanged, restore, fork, run) = (
        med(&t.pause_ms),
        med(&t.checkpoint_ms),
        med(&t.unchanged_ms),
        med(&t.restore_ms),
        med(&t.fork_ms),
        med(&t.run_ms),
    );
    let forks10 = med(&t.forks10_ms);
    let detail = |what: &str| format!("{what}, median of {rounds} rounds, 1,000 files of 100 KiB changed");
    so.targets.push(Target::at_most(
        "checkpoint: pause",
        "≤ 100 ms",
        pause,
        100.0,
        "ms",
        detail("frozen time (`frozen_ms`)"),
    ));
    so.targets.push(Target::at_most(
        "checkpoint: total",
        "≤ 300 ms",
        checkpoint,
        300.0,
        "ms",
        detail("wall time of `cordon checkpoint`"),
    ));
    so.targets.push(Target::at_most(
        "checkpoint: unchanged",
        "≤ 20 ms",
        unchanged,
        20.0,
        "ms",
        format!("wall time of `cordon checkpoint` with nothing changed, median of {rounds} rounds"),
    ));
    so.targets.push(
        Target::at_most(
            "restore",
            "≤ 200 ms",
            restore,
            200.0,
            "ms",
            detail("wall time of `cordon restore` (stop, rebuild the layer, create, start)"),
        )
        .because(
            "restore copies the checkpoint's files back into a new upper layer (a restored file must not share \
             its inode with the checkpoint's, which a write in place would change): 100 MiB of copies, then a \
             create and start like `run -d`; `--debug` times each step",
        ),
    );
    so.targets.push(
        Target::at_most(
            "fork vs run",
            "≤ 1.2× `cordon run -d --overlay`",
            stats::ratio(fork, run),
            1.2,
            "x",
            format!(
                "`cordon fork` until the fork runs {} ms / `cordon run -d --overlay` of a bundle like it {} ms",
                num(fork, 1),
                num(run, 1)
            ),
        )
        .because(
            "a fork's lower layer is the checkpoint's files hard-linked into a tree of its own (so removing the \
             checkpoint or its container never takes the fork's files away): one link per file, about 36 µs \
             each here (`--debug`: step \"fork: link the checkpoint's files\"), 36 ms for the 1,000 files",
        ),
    );
    so.targets.push(
        Target::at_most(
            "10 concurrent forks vs one",
            "≤ 3× one fork",
            stats::ratio(forks10, fork),
            3.0,
            "x",
            format!(
                "10 `cordon fork` of one checkpoint started at once, until the last runs {} ms / one fork {} ms",
                num(forks10, 1),
                num(fork, 1)
            ),
        )
        .because(
            "each fork links the checkpoint's files into a tree of its own and starts a container: CPU work, not \
         waiting, so 10 forks on this machine's cores cost about 10 forks' CPU time divided by the cores; the \
         link step is the part that grows with the checkpoint (see fork vs run)",
        ),
    );

    let row = |name: &str, v: &[f64], sl: Option<&[f64]>| {
        let sum = s(v);
        vec![
            name.to_string(),
            num((!v.is_empty()).then_some(sum.median), 1),
            num((!v.is_empty()).then_some(sum.min), 1),
            num((!v.is_empty()).then_some(sum.max), 1),
            match sl {
                Some(x) if !x.is_empty() => num(Some(s(x).median), 1),
                _ => "–".into(),
            },
        ]
    };
    let rows = vec![
        row("checkpoint of 1,000 changed files: pause (frozen)", &t.pause_ms, None),
        row(
            "checkpoint of 1,000 changed files: total",
            &t.checkpoint_ms,
            Some(&t.sandlock_checkpoint_ms),
        ),
        row("checkpoint, nothing changed", &t.unchanged_ms, None),
        row("restore", &t.restore_ms, Some(&t.sandlock_restore_ms)),
        row("fork (until the fork runs)", &t.fork_ms, None),
        row("run -d --overlay (a bundle like it)", &t.run_ms, None),
        row("10 forks at once (until the last runs)", &t.forks10_ms, None),
    ];
    let mut md = table(
        &["operation (ms)", "cordon median", "min", "max", "sandlock-oci median"],
        &rows,
    );
    md.push_str(&format!(
        "\n{rounds} rounds. cordon checkpoints files (incremental, copy-on-write where the file system can) and \
         restarts the process on restore; sandlock-oci's `checkpoint`/`restore` save and restore an idle sandbox's \
         process memory to an image directory, a different operation, shown because it is the one it has. \
         sandlock-oci has no fork verb and no diff.\n"
    ));
    match (&sandlock, &sandlock_error) {
        (None, _) => md.push_str("\nsandlock was not installed: its column is empty.\n"),
        (Some(_), Some(e)) => {
            md.push_str(&format!("\nsandlock-oci's checkpoint/restore failed: {e}\n"));
            so.warnings.push(format!("sandlock-oci checkpoint/restore failed: {e}"));
        }
        _ => {}
    }
    so.markdown = md;
    let sum = |v: &[f64]| -> Summary { s(v) };
    so.data = json!({
        "rounds": rounds,
        "samples": t,
        "median_ms": {
            "pause": pause, "checkpoint": checkpoint, "unchanged": unchanged,
            "restore": restore, "fork": fork, "run": run, "forks10": forks10,
        },
        "summary": {
            "checkpoint": sum(&t.checkpoint_ms),
            "restore": sum(&t.restore_ms),
        },
        "sandlock_error": sandlock_error,
    });
    Ok(so)
}
