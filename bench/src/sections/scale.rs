//! Scale (section 5): N containers started at once (`run --detach`, one thread
//! each) under cordon, and under runc and crun for comparison; then all
//! deleted at once.

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use crate::charts::{self, Line};
use crate::env::{Env, Image, Runtime};
use crate::report::{num, table, SectionOut, Target};
use crate::stats::{self, Summary};
use crate::{cleanup, proc};

#[derive(Debug, Default, Serialize)]
struct Row {
    runtime: String,
    containers: usize,
    start_wall_seconds: f64,
    /// Per container: seconds from the common start to its `run -d` exit.
    start_latency_s: Vec<f64>,
    start_latency: Summary,
    start_failures: usize,
    running_after: usize,
    delete_wall_seconds: f64,
    delete_failures: usize,
    left_after_delete: usize,
    /// What was found about containers left after delete.
    leftovers: Vec<String>,
    errors: Vec<String>,
}

/// Runs `f(i)` on `n` threads released together by a barrier; returns the
/// results and the moment of the release.
fn burst<T: Send + 'static>(n: usize, f: Arc<dyn Fn(usize) -> T + Send + Sync>) -> (Vec<T>, Instant) {
    let barrier = Arc::new(Barrier::new(n + 1));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (b, f) = (Arc::clone(&barrier), Arc::clone(&f));
            std::thread::spawn(move || {
                b.wait();
                f(i)
            })
        })
        .collect();
    barrier.wait();
    let released = Instant::now();
    (handles.into_iter().filter_map(|h| h.join().ok()).collect(), released)
}

fn measure(env: &Env, rt: &Runtime, n: usize) -> anyhow::Result<Row> {
    let mut row = Row {
        runtime: rt.label.clone(),
        containers: n,
        ..Default::default()
    };
    let mut ids = Vec::new();
    let mut bundles = Vec::new();
    for _ in 0..n {
        let id = env.id(rt, "scale");
        let b = env.bundle(rt, &id, Image::Busybox, &["sleep", "3600"], &[])?;
        bundles.push(b.to_string_lossy().into_owned());
        ids.push(id);
    }
    let (ids, bundles) = (Arc::new(ids), Arc::new(bundles));
    let start = {
        let (rt, ids, bundles) = (rt.clone(), Arc::clone(&ids), Arc::clone(&bundles));
        Arc::new(move |i: usize| -> (Instant, Result<proc::Outcome, String>) {
            let r = rt
                .exec(
                    &["run", "--detach", "-b", &bundles[i], &ids[i]],
                    Duration::from_secs(120),
                )
                .map_err(|e| format!("{e:#}"));
            (Instant::now(), r)
        })
    };
    let (results, t0) = burst(n, start);
    let mut last = t0;
    for (done, r) in &results {
        last = last.max(*done);
        row.start_latency_s.push(done.duration_since(t0).as_secs_f64());
        match r {
            Ok(o) if o.ok() => {}
            Ok(o) => {
                row.start_failures += 1;
                if row.errors.len() < 3 {
                    row.errors.push(o.failure(&format!("{} run --detach", rt.label)));
                }
            }
            Err(e) => {
                row.start_failures += 1;
                if row.errors.len() < 3 {
                    row.errors.push(e.clone());
                }
            }
        }
    }
    row.start_wall_seconds = last.duration_since(t0).as_secs_f64();
    row.start_latency_s.sort_by(|a, b| a.total_cmp(b));
    row.start_latency = stats::summary(&row.start_latency_s);

    for id in ids.iter() {
        let out = rt.exec(&["state", id], Duration::from_secs(30))?;
        let st: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        if st["status"] == "running" {
            row.running_after += 1;
        }
    }

    let del = {
        let (rt, ids) = (rt.clone(), Arc::clone(&ids));
        Arc::new(move |i: usize| {
            rt.exec(&["delete", "--force", &ids[i]], Duration::from_secs(120))
                .map(|o| o.ok())
                .unwrap_or(false)
        })
    };
    let (results, t1) = burst(n, del);
    row.delete_wall_seconds = t1.elapsed().as_secs_f64();
    row.delete_failures = results.iter().filter(|ok| !**ok).count() + (n - results.len());
    row.left_after_delete = cleanup::container_ids(&rt.root).len();
    row.leftovers = rt.diagnose_leftovers();
    for id in ids.iter() {
        env.drop_bundle(id);
    }
    let _ = proc::settle_orphans(Duration::from_secs(5));
    Ok(row)
}

/// Runs the section.
pub fn run(env: &Env, out: &Path) -> anyhow::Result<SectionOut> {
    let n = env.sizes.scale;
    let mut so = SectionOut::default();
    let mut rows = Vec::new();
    for rt in [
        env.runtime("cordon", Some("default")),
        env.runtime("runc", None),
        env.runtime("crun", None),
    ] {
        let row = measure(env, &rt, n)?;
        if row.left_after_delete > 0 {
            let msg = format!(
                "{}: {} containers left after concurrent delete --force returned: {}",
                row.runtime,
                row.left_after_delete,
                row.leftovers.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
            );
            if rt.is_cordon() {
                so.warnings.push(format!("**{msg}**"));
            } else {
                so.problems.push(msg);
            }
        }
        if row.start_failures > 0 || row.running_after < n {
            so.warnings.push(format!(
                "{}: {} of {n} starts failed, {} running afterwards: {}",
                row.runtime,
                row.start_failures,
                row.running_after,
                row.errors.join("; ")
            ));
        }
        rows.push(row);
    }
    let cordon = rows.iter().find(|r| r.runtime == "cordon");
    let failures = cordon.map(|r| (r.start_failures.max(n - r.running_after.min(n))) as f64);
    so.targets.push(Target::at_most(
        &format!("{n} concurrent starts under cordon"),
        "no failure",
        failures,
        0.0,
        "failures",
        format!(
            "{n} × `cordon run --detach` released together; wall {} s; failures = failed starts or containers \
             not running afterwards",
            num(cordon.map(|r| r.start_wall_seconds), 2)
        ),
    ));
    let wall = |label: &str| {
        rows.iter()
            .find(|r| r.runtime == label && r.start_failures == 0)
            .map(|r| r.start_wall_seconds)
    };
    so.targets.push(
        Target::at_most(
            &format!("{n} concurrent starts: cordon vs crun"),
            "≤ 1.0× crun's wall time",
            stats::ratio(wall("cordon"), wall("crun")),
            1.0,
            "x",
            format!(
                "wall time until the last of {n} concurrent `run --detach` returned: cordon {} s / crun {} s",
                num(wall("cordon"), 2),
                num(wall("crun"), 2)
            ),
        )
        .because(
            "on 2 cores every start's CPU adds up: cordon's is libcontainer's set-up plus a supervisor per \
             container (an exec, its policy, its watchdog), where crun's is one C process (section 7 has the \
             steps of one start)"
                .to_string(),
        ),
    );
    let trows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.runtime.clone(),
                r.containers.to_string(),
                format!("{:.2}", r.start_wall_seconds),
                format!("{:.2}", r.start_latency.median),
                format!("{:.2}", r.start_latency.p95),
                r.start_failures.to_string(),
                r.running_after.to_string(),
                format!("{:.2}", r.delete_wall_seconds),
                r.delete_failures.to_string(),
            ]
        })
        .collect();
    let mut md = format!(
        "{n} busybox `sleep 3600` containers started at once, one thread per `RUNTIME run --detach` (released \
         by a barrier), then `state` of each, then {n} concurrent `delete --force`. Latency is from the release \
         to that container's `run --detach` returning.\n\n"
    );
    md.push_str(&table(
        &[
            "runtime",
            "containers",
            "start wall s",
            "latency median s",
            "latency p95 s",
            "start failures",
            "running after",
            "delete wall s",
            "delete failures",
        ],
        &trows,
    ));
    let lines: Vec<Line> = rows
        .iter()
        .map(|r| Line {
            label: r.runtime.clone(),
            points: r
                .start_latency_s
                .iter()
                .enumerate()
                .map(|(i, s)| ((i + 1) as f64, *s))
                .collect(),
            color: charts::color_of(&r.runtime),
        })
        .collect();
    let chart = "scale.png";
    match charts::lines(
        &out.join(chart),
        &format!("Scale: {n} concurrent starts, when each container was up"),
        "containers started (sorted)",
        "seconds since the release",
        &lines,
    ) {
        Ok(()) => so.charts.push(chart.into()),
        Err(e) => so.problems.push(format!("chart {chart}: {e}")),
    }
    so.markdown = md;
    so.data = json!({ "containers": n, "rows": rows });
    Ok(so)
}
