//! Lifecycle (section 1): `RUNTIME run` (create + start + wait + delete) of a busybox
//! `true`, runtimes interleaved every round.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use crate::charts::{self, Bar};
use crate::env::{Env, Image, Runtime};
use crate::report::{num, table, SectionOut, Target};
use crate::stats::{self, Summary};
use crate::{cleanup, proc};

const WARMUP: usize = 2;

#[derive(Debug, Default, Serialize)]
struct Row {
    runtime: String,
    runs: usize,
    failures: usize,
    /// Wall time of successful runs (ms), in run order.
    samples_ms: Vec<f64>,
    time_ms: Summary,
    /// Peak RSS (KiB) of the runtime's process tree: the largest process
    /// among the runtime command, what it reaped and what was orphaned to us.
    peak_rss_kib: Summary,
    /// Peak RSS (KiB) of the processes orphaned to the harness (cordon: its
    /// supervisor and watchdog, and the container's init if `run` does not
    /// reap it).
    orphans_peak_rss_kib: Option<Summary>,
    /// Containers still present after `run` returned (then force-deleted).
    leaked_containers: usize,
    /// cgroups still present after `run` returned.
    leaked_cgroups: usize,
    /// Runs after which runtime processes were still alive 2 s later.
    lingering_processes: usize,
    errors: Vec<String>,
}

struct Sample {
    ms: f64,
    ok: bool,
    rss: u64,
    orphan_rss: Option<u64>,
    leaked: bool,
    cgroup_leaked: bool,
    lingering: bool,
    error: Option<String>,
}

fn one(env: &Env, rt: &Runtime) -> anyhow::Result<Sample> {
    let id = env.id(rt, "lc");
    let bundle = env.bundle(rt, &id, Image::Busybox, &["true"], &[])?;
    let b = bundle.to_string_lossy().into_owned();
    let out = rt.run_bundle(&b, &id, Duration::from_secs(60))?;
    let (orphans, alive) = proc::settle_orphans(Duration::from_secs(2));
    let orphan_rss = orphans.iter().map(|(_, e)| e.maxrss_kib).max();
    let leaked = cleanup::container_ids(&rt.root).contains(&id);
    if leaked {
        let _ = rt.exec(&["delete", "--force", &id], Duration::from_secs(30));
    }
    let cgroup_leaked = cgroup_exists(env, &id);
    env.drop_bundle(&id);
    Ok(Sample {
        ms: out.elapsed.as_secs_f64() * 1e3,
        ok: out.ok(),
        rss: out.maxrss_kib.max(orphan_rss.unwrap_or(0)),
        orphan_rss,
        leaked,
        cgroup_leaked,
        lingering: !alive.is_empty(),
        error: (!out.ok()).then(|| out.failure(&format!("{} run", rt.label))),
    })
}

/// Whether a cgroup directory of container `id` exists in any hierarchy.
pub fn cgroup_exists(env: &Env, id: &str) -> bool {
    let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") else {
        return false;
    };
    rd.flatten()
        .any(|h| h.path().join(&env.cgroup_parent).join(id).exists())
}

/// Runs the section.
pub fn run(env: &Env, out: &Path) -> anyhow::Result<SectionOut> {
    let rts = env.contenders();
    let n = env.sizes.lifecycle_runs;
    let mut rows: Vec<Row> = rts
        .iter()
        .map(|r| Row {
            runtime: r.label.clone(),
            ..Default::default()
        })
        .collect();
    let mut rss: Vec<Vec<f64>> = vec![Vec::new(); rts.len()];
    let mut sup: Vec<Vec<f64>> = vec![Vec::new(); rts.len()];
    let mut warm_errors = Vec::new();
    for rt in &rts {
        for _ in 0..WARMUP {
            let s = one(env, rt)?;
            if let Some(e) = s.error {
                warm_errors.push(format!("warm-up: {e}"));
            }
        }
    }
    for round in 0..n {
        for k in 0..rts.len() {
            let i = (round + k) % rts.len();
            let s = one(env, &rts[i])?;
            let row = &mut rows[i];
            row.runs += 1;
            if s.ok {
                row.samples_ms.push(s.ms);
                rss[i].push(s.rss as f64);
                if let Some(o) = s.orphan_rss {
                    sup[i].push(o as f64);
                }
            } else {
                row.failures += 1;
                if row.errors.len() < 3 {
                    row.errors.extend(s.error);
                }
            }
            row.leaked_containers += s.leaked as usize;
            row.leaked_cgroups += s.cgroup_leaked as usize;
            row.lingering_processes += s.lingering as usize;
        }
    }
    let mut so = SectionOut::default();
    for (i, row) in rows.iter_mut().enumerate() {
        row.time_ms = stats::summary(&row.samples_ms);
        row.peak_rss_kib = stats::summary(&rss[i]);
        if !sup[i].is_empty() {
            row.orphans_peak_rss_kib = Some(stats::summary(&sup[i]));
        }
        if row.failures == row.runs && !rts[i].is_cordon() {
            so.problems
                .push(format!("{}: every run failed: {}", row.runtime, row.errors.join("; ")));
        } else if row.failures == row.runs {
            so.warnings.push(format!(
                "**{} failed every run** (runc and crun did not): {}",
                row.runtime,
                row.errors.join("; ")
            ));
        } else if row.failures > 0 {
            so.warnings.push(format!(
                "{}: {} of {} runs failed: {}",
                row.runtime,
                row.failures,
                row.runs,
                row.errors.join("; ")
            ));
        }
        if row.leaked_containers + row.leaked_cgroups > 0 {
            so.warnings.push(format!(
                "{}: after `run` returned, {} containers and {} cgroups were left behind (then removed)",
                row.runtime, row.leaked_containers, row.leaked_cgroups
            ));
        }
        if row.lingering_processes > 0 {
            so.warnings.push(format!(
                "{}: after {} runs, processes of the runtime were still alive 2 s after `run` returned",
                row.runtime, row.lingering_processes
            ));
        }
    }
    so.warnings.extend(warm_errors.into_iter().take(3));

    let med = |label: &str| {
        rows.iter()
            .find(|r| r.runtime == label && !r.samples_ms.is_empty())
            .map(|r| r.time_ms.median)
    };
    let (cordon, permissive, runc, crun) = (med("cordon"), med("cordon-permissive"), med("runc"), med("crun"));
    so.targets.push(if cordon.is_none() && crun.is_some() {
        Target::cordon_failed(
            "lifecycle: cordon vs crun",
            "≤ 1.0× crun",
            1.0,
            "x",
            "cordon failed every run".into(),
        )
    } else {
        Target::at_most(
            "lifecycle: cordon vs crun",
            "≤ 1.0× crun",
            stats::ratio(cordon, crun),
            1.0,
            "x",
            format!(
                "median `run` of busybox `true`, cordon (default policy) {} ms / crun {} ms, {n} runs each",
                num(cordon, 2),
                num(crun, 2)
            ),
        )
        .because(format!(
            "with no supervisor at all (cordon-permissive, {} ms) cordon is already {}× crun, and runc is {}×: \
             the container set-up is libcontainer's (youki's: namespaces, cgroups, mounts, as runc does them in \
             Go and crun in C), and `cordon run` first re-executes itself from a read-only overlayfs view of \
             its binary, as runc 1.2 does, so that a container cannot overwrite it through /proc/self/exe \
             (CVE-2019-5736): a second exec of an 11 MB dynamically linked binary. The supervisor adds the \
             other {} ms: a third start of that binary (`cordon supervise`, overlapped with libcontainer's \
             build), the policy loaded again there, its confinement filters, its watchdog, and the handshake \
             in which the container's init hands over its listener before it execs (section 7 has every \
             step of a run, measured)",
            num(permissive, 1),
            num(stats::ratio(permissive, crun), 2),
            num(stats::ratio(runc, crun), 2),
            num(cordon.zip(permissive).map(|(c, p)| c - p), 1),
        ))
    });

    if env.sandlock.is_some() {
        let sandlock = med("sandlock");
        so.targets.push(
            Target::at_most(
                "lifecycle: cordon vs sandlock",
                "≤ 1.0× sandlock (beat it or tie)",
                stats::ratio(cordon, sandlock),
                1.0,
                "x",
                format!(
                    "median start-to-delete of busybox `true`, cordon (default policy) {} ms / sandlock-oci {} ms \
                     (create, start, `state` until stopped, delete), {n} runs each",
                    num(cordon, 2),
                    num(sandlock, 2)
                ),
            )
            .because(
                "sandlock-oci makes no namespaces, cgroups or mounts (it confines the workload with Landlock and \
                 seccomp in the host's namespaces), so it skips what libcontainer's set-up costs cordon (see \
                 \"cordon vs crun\"); cordon-permissive, which does that set-up with no supervisor, shows the \
                 share of it"
                    .to_string(),
            ),
        );
    }

    let mib = |k: f64| k / 1024.0;
    let trows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.runtime.clone(),
                format!("{}/{}", r.runs - r.failures, r.runs),
                num(Some(r.time_ms.median), 2),
                num(Some(r.time_ms.p95), 2),
                num(Some(r.time_ms.min), 2),
                num(Some(r.time_ms.max), 2),
                num(Some(mib(r.peak_rss_kib.median)), 1),
                r.orphans_peak_rss_kib
                    .map(|s| num(Some(mib(s.median)), 1))
                    .unwrap_or_else(|| "–".into()),
            ]
        })
        .collect();
    let mut md = String::new();
    md.push_str(&format!(
        "`RUNTIME --root PRIVATE run -b BUNDLE ID` of busybox `true` (the runtime deletes the container when \
         it exits, like `run --rm`), {n} runs per runtime after {WARMUP} warm-up runs, runtimes interleaved \
         (the order rotates every round). Every bundle has an explicit `linux.cgroupsPath` (as engines set) and \
         no `linux.seccomp`. Peak RSS is the largest `ru_maxrss` in the runtime's process tree: the runtime \
         command and what it reaped (wait4), plus processes orphaned to the harness (a child subreaper, like \
         an engine's shim): for cordon its supervisor and watchdog; \"orphans\" shows those alone.\n\n"
    ));
    md.push_str(&table(
        &[
            "runtime",
            "ok",
            "median ms",
            "p95 ms",
            "min ms",
            "max ms",
            "peak RSS MiB (median)",
            "orphans' peak RSS MiB",
        ],
        &trows,
    ));
    md.push_str(&format!(
        "\nRatios of medians: cordon/crun {}, cordon/runc {}, cordon-permissive/crun {}, runc/crun {}, \
         cordon/cordon-permissive {} (the cost of the supervisor).\n",
        num(stats::ratio(cordon, crun), 2),
        num(stats::ratio(cordon, runc), 2),
        num(stats::ratio(permissive, crun), 2),
        num(stats::ratio(runc, crun), 2),
        num(stats::ratio(cordon, permissive), 2),
    ));

    let bars: Vec<Bar> = rows
        .iter()
        .filter(|r| !r.samples_ms.is_empty())
        .map(|r| Bar {
            label: r.runtime.clone(),
            value: r.time_ms.median,
            color: charts::color_of(&r.runtime),
            note: format!("median {:.1} ms, p95 {:.1} ms", r.time_ms.median, r.time_ms.p95),
        })
        .collect();
    let chart = "lifecycle.png";
    match charts::hbars(
        &out.join(chart),
        &format!("Lifecycle: run busybox `true` (create+start+wait+delete), median of {n}"),
        "milliseconds",
        &bars,
        false,
        &[],
    ) {
        Ok(()) => so.charts.push(chart.into()),
        Err(e) => so.problems.push(format!("chart {chart}: {e}")),
    }
    so.markdown = md;
    so.data = json!({ "runs_per_runtime": n, "warmup": WARMUP, "rows": rows });
    Ok(so)
}
