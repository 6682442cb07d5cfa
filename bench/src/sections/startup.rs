//! Start-up (section 7): where `cordon run` of busybox `true` spends its
//! time, step by step, under `permissive`, `default`, `agent` and a
//! Landlock allow-list, beside runc's and crun's totals; then `create`,
//! `start`, `exec` and `delete` one by one, cordon against runc and crun.
//!
//! The steps come from cordon itself: `CORDON_TIMINGS=FILE` makes every
//! cordon process of a run (the CLI, its sealed re-exec, the supervisor,
//! the init before it execs) append one line per step to FILE, and
//! `CORDON_TIMINGS_T0` (CLOCK_MONOTONIC, set here just before the spawn)
//! lets the first step count the exec of the binary (runtime/src/sys/timings.rs).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use crate::charts::{self, Stack};
use crate::env::{Env, Image, Runtime};
use crate::report::{num, table, SectionOut, Target};
use crate::stats;

/// The stacked bar's segments: a name and the `run` steps it sums.
const SEGMENTS: &[(&str, &[&str])] = &[
    ("exec of cordon (fork, exec, dynamic linking)", &["exec"]),
    ("re-exec from the sealed binary", &["exec (sealed binary)"]),
    (
        "read the bundle, write the state",
        &[
            "read the bundle",
            "write the state directory",
            "write the shadow bundle",
            "write the views",
        ],
    ),
    ("load and compile the policy", &["load and compile the policy"]),
    (
        "spawn the supervisor, wait until ready",
        &["spawn the supervisor", "wait for the supervisor"],
    ),
    (
        "build: libcontainer (cgroups, namespaces, mounts)",
        &["build (libcontainer)"],
    ),
    (
        "finish the build (cordon's mounts, lo, resolver)",
        &["finish the build"],
    ),
    ("start", &["start"]),
    ("wait: handshake, payload, its exit", &["wait"]),
    ("delete", &["delete"]),
];

/// What is left of the wall time: the CLI's exit, what no step covers.
const OTHER: &str = "other (process exit, between steps)";

#[derive(Debug, Default, Serialize)]
struct Column {
    label: String,
    policy: String,
    /// Wall time of each successful run (ms).
    wall_ms: Vec<f64>,
    /// Each step's duration (ms) in each run that had it.
    steps_ms: HashMap<String, Vec<f64>>,
    failures: usize,
    errors: Vec<String>,
}

impl Column {
    fn median(&self, step: &str) -> f64 {
        self.steps_ms.get(step).map(|v| stats::summary(v).median).unwrap_or(0.0)
    }

    /// Median of each segment, then what the medians leave of the median wall time.
    fn parts(&self) -> Vec<f64> {
        let mut parts: Vec<f64> = SEGMENTS
            .iter()
            .map(|(_, steps)| steps.iter().map(|s| self.median(s)).sum())
            .collect();
        let wall = stats::summary(&self.wall_ms).median;
        let sum: f64 = parts.iter().sum();
        parts.push((wall - sum).max(0.0));
        parts
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds (the clock cordon's timings use).
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a timespec we own, filled by the kernel (vDSO).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The steps of `run` in a timings file: step name -> duration (ms),
/// summed when a step appears more than once.
fn parse(text: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() == 6 && f[0] == "cordon-timing" && f[2] == "run" {
            if let Ok(ms) = f[5].parse::<f64>() {
                *out.entry(f[3].to_string()).or_insert(0.0) += ms;
            }
        }
    }
    out
}

/// One timed `run` of busybox `true` under `rt` into `col`.
fn one_run(env: &Env, rt: &Runtime, col: &mut Column) -> anyhow::Result<()> {
    let id = env.id(rt, "su");
    let bundle = env.bundle(rt, &id, Image::Busybox, &["true"], &[])?;
    let file = env.tmp.join(format!("timings-{id}"));
    let mut cmd = rt.cmd(&["run", "-b", &bundle.to_string_lossy(), &id]);
    if rt.is_cordon() {
        cmd.env("CORDON_TIMINGS", &file)
            .env("CORDON_TIMINGS_T0", monotonic_ns().to_string());
    }
    let out = crate::proc::run(&mut cmd, Duration::from_secs(60))?;
    let _ = crate::proc::settle_orphans(Duration::from_secs(2));
    if crate::cleanup::container_ids(&rt.root).contains(&id) {
        let _ = rt.exec(&["delete", "--force", &id], Duration::from_secs(30));
    }
    env.drop_bundle(&id);
    if out.ok() {
        col.wall_ms.push(out.elapsed.as_secs_f64() * 1e3);
        for (step, ms) in parse(&std::fs::read_to_string(&file).unwrap_or_default()) {
            col.steps_ms.entry(step).or_default().push(ms);
        }
    } else {
        col.failures += 1;
        if col.errors.len() < 3 {
            col.errors.push(out.failure(&format!("{} run", rt.label)));
        }
    }
    let _ = std::fs::remove_file(&file);
    Ok(())
}

#[derive(Debug, Default, Serialize)]
struct Commands {
    label: String,
    create_ms: Vec<f64>,
    start_ms: Vec<f64>,
    exec_ms: Vec<f64>,
    delete_ms: Vec<f64>,
    errors: Vec<String>,
}

/// `create`, `start` and `delete --force` of busybox `true`, each timed.
fn one_lifecycle(env: &Env, rt: &Runtime, row: &mut Commands) -> anyhow::Result<()> {
    let id = env.id(rt, "cs");
    let bundle = env.bundle(rt, &id, Image::Busybox, &["true"], &[])?;
    let b = bundle.to_string_lossy().into_owned();
    let t = Duration::from_secs(60);
    let created = rt.exec(&["create", "-b", &b, &id], t)?;
    let started = if created.ok() {
        Some(rt.exec(&["start", &id], t)?)
    } else {
        None
    };
    let deleted = rt.exec(&["delete", "--force", &id], t)?;
    let _ = crate::proc::settle_orphans(Duration::from_secs(2));
    env.drop_bundle(&id);
    match (&created, &started) {
        (c, Some(s)) if c.ok() && s.ok() && deleted.ok() => {
            row.create_ms.push(c.elapsed.as_secs_f64() * 1e3);
            row.start_ms.push(s.elapsed.as_secs_f64() * 1e3);
            row.delete_ms.push(deleted.elapsed.as_secs_f64() * 1e3);
        }
        _ => {
            let why = [Some(&created), started.as_ref(), Some(&deleted)]
                .into_iter()
                .flatten()
                .find(|o| !o.ok())
                .map(|o| o.failure(&format!("{} create/start/delete", rt.label)))
                .unwrap_or_default();
            if row.errors.len() < 3 {
                row.errors.push(why);
            }
        }
    }
    Ok(())
}

/// The runtimes of the breakdown: cordon under each policy, runc, crun.
fn breakdown_runtimes(env: &Env) -> anyhow::Result<Vec<(Runtime, String)>> {
    let landlock = env.tmp.join("landlock.toml");
    std::fs::write(
        &landlock,
        "name = \"bench-landlock\"\n\
         description = \"cordon-bench: writable only beneath /work and /tmp (a Landlock allow-list)\"\n\
         [[path]]\npattern = \"/work/**\"\naccess = \"allow\"\n\
         [[path]]\npattern = \"/tmp/**\"\naccess = \"allow\"\n\
         [[path]]\npattern = \"/**\"\naccess = \"read-only\"\n",
    )?;
    let landlock = landlock.to_string_lossy().into_owned();
    Ok(vec![
        (
            env.runtime("cordon-permissive", Some("permissive")),
            "permissive".into(),
        ),
        (env.runtime("cordon", Some("default")), "default".into()),
        (env.runtime("cordon-agent", Some("agent")), "agent".into()),
        (
            env.runtime("cordon-landlock", Some(&landlock)),
            "Landlock allow-list".into(),
        ),
        (env.runtime("runc", None), "–".into()),
        (env.runtime("crun", None), "–".into()),
    ])
}

/// Runs the section.
pub fn run(env: &Env, out: &Path) -> anyhow::Result<SectionOut> {
    let n = (env.sizes.lifecycle_runs / 2).max(3);
    let rts = breakdown_runtimes(env)?;
    let mut cols: Vec<Column> = rts
        .iter()
        .map(|(rt, policy)| Column {
            label: rt.label.clone(),
            policy: policy.clone(),
            ..Default::default()
        })
        .collect();
    for (rt, _) in &rts {
        // Warm-up: page cache, the per-boot probes.
        one_run(env, rt, &mut Column::default())?;
    }
    for round in 0..n {
        for k in 0..rts.len() {
            let i = (round + k) % rts.len();
            one_run(env, &rts[i].0, &mut cols[i])?;
        }
    }

    let cmd_rts = [
        env.runtime("cordon-cmds", Some("default")),
        env.runtime("runc-cmds", None),
        env.runtime("crun-cmds", None),
    ];
    let mut cmds: Vec<Commands> = cmd_rts
        .iter()
        .map(|r| Commands {
            label: r.label.trim_end_matches("-cmds").to_string(),
            ..Default::default()
        })
        .collect();
    for round in 0..n {
        for k in 0..cmd_rts.len() {
            let i = (round + k) % cmd_rts.len();
            one_lifecycle(env, &cmd_rts[i], &mut cmds[i])?;
        }
    }
    exec_rounds(env, &cmd_rts, &mut cmds, n)?;

    let mut so = SectionOut::default();
    for c in &cols {
        if c.failures > 0 {
            so.warnings.push(format!(
                "{}: {} of {} runs failed: {}",
                c.label,
                c.failures,
                c.failures + c.wall_ms.len(),
                c.errors.join("; ")
            ));
        }
    }
    for c in &cmds {
        if !c.errors.is_empty() {
            so.warnings.push(format!("{}: {}", c.label, c.errors.join("; ")));
        }
    }
    targets(&mut so, &cols, &cmds, n);
    so.markdown = markdown(&cols, &cmds, n);
    chart(&mut so, out, &cols, n);
    so.data = json!({ "runs": n, "columns": cols, "commands": cmds });
    Ok(so)
}

/// `exec ID true` into a running container (`sleep 3600`) of each runtime,
/// `n` rounds, runtimes interleaved.
fn exec_rounds(env: &Env, rts: &[Runtime], cmds: &mut [Commands], n: usize) -> anyhow::Result<()> {
    let t = Duration::from_secs(60);
    let mut ids = Vec::new();
    for rt in rts {
        let id = env.id(rt, "ex");
        let bundle = env.bundle(rt, &id, Image::Busybox, &["sleep", "3600"], &[])?;
        let up = rt.exec(&["run", "--detach", "-b", &bundle.to_string_lossy(), &id], t)?;
        ids.push(up.ok().then_some(id.clone()));
        if !up.ok() {
            cmds[ids.len() - 1]
                .errors
                .push(up.failure(&format!("{} run --detach", rt.label)));
        }
    }
    for round in 0..n {
        for k in 0..rts.len() {
            let i = (round + k) % rts.len();
            let Some(id) = &ids[i] else { continue };
            let o = rts[i].exec(&["exec", id, "true"], t)?;
            if o.ok() {
                cmds[i].exec_ms.push(o.elapsed.as_secs_f64() * 1e3);
            } else if cmds[i].errors.len() < 3 {
                cmds[i].errors.push(o.failure(&format!("{} exec", rts[i].label)));
            }
        }
    }
    for (rt, id) in rts.iter().zip(&ids) {
        if let Some(id) = id {
            let _ = rt.exec(&["delete", "--force", id], t);
            env.drop_bundle(id);
        }
    }
    let _ = crate::proc::settle_orphans(Duration::from_secs(2));
    Ok(())
}

fn med(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| stats::summary(v).median)
}

/// The largest steps of `col`'s run, for a missed target's obstacle.
fn largest_steps(col: &Column) -> String {
    let mut parts: Vec<(String, f64)> = SEGMENTS
        .iter()
        .map(|(n, _)| n.to_string())
        .chain(std::iter::once(OTHER.to_string()))
        .zip(col.parts())
        .collect();
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    parts
        .iter()
        .take(4)
        .map(|(n, ms)| format!("{n} {ms:.1} ms"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn targets(so: &mut SectionOut, cols: &[Column], cmds: &[Commands], n: usize) {
    let wall = |label: &str| cols.iter().find(|c| c.label == label).and_then(|c| med(&c.wall_ms));
    let crun = wall("crun");
    if let Some(agent) = cols.iter().find(|c| c.label == "cordon-agent") {
        so.targets.push(
            Target::at_most(
                "start-up: run under agent vs crun",
                "≤ 1.2× crun",
                stats::ratio(med(&agent.wall_ms), crun),
                1.2,
                "x",
                format!(
                    "median `run` of busybox `true`, cordon (agent) {} ms / crun {} ms, {n} runs each",
                    num(med(&agent.wall_ms), 2),
                    num(crun, 2)
                ),
            )
            .because(format!(
                "the largest steps of cordon's run under agent (medians): {}; crun's whole run takes {} ms",
                largest_steps(agent),
                num(crun, 1)
            )),
        );
    }
    let cmd =
        |label: &str, f: fn(&Commands) -> &Vec<f64>| cmds.iter().find(|c| c.label == label).and_then(|c| med(f(c)));
    let (cs, rs) = (cmd("cordon", |c| &c.start_ms), cmd("crun", |c| &c.start_ms));
    so.targets.push(
        Target::at_most(
            "start-up: start after create vs crun",
            "≤ 1.0× crun",
            stats::ratio(cs, rs),
            1.0,
            "x",
            format!(
                "median `start` of a created busybox `true`, cordon (default) {} ms / crun {} ms, {n} each",
                num(cs, 2),
                num(rs, 2)
            ),
        )
        .because(
            "`start` is a new process of the runtime's binary that loads the state and writes to the init's \
             exec fifo: for cordon an exec of an 11 MB dynamically linked binary, its sealed re-exec is not \
             needed (start forks nothing into the container), libcontainer's state load, and the lock of the \
             container's state directory"
                .to_string(),
        ),
    );
    let (ce, re) = (cmd("cordon", |c| &c.exec_ms), cmd("runc", |c| &c.exec_ms));
    so.targets.push(
        Target::at_most(
            "start-up: exec vs runc",
            "≤ 1.0× runc",
            stats::ratio(ce, re),
            1.0,
            "x",
            format!(
                "median `exec ID true` into a running busybox, cordon (default) {} ms / runc {} ms, {n} each",
                num(ce, 2),
                num(re, 2)
            ),
        )
        .because(
            "exec re-executes cordon from its sealed binary (CVE-2019-5736), loads the container's fixed policy \
             and attaches the new process to the supervisor before its execve"
                .to_string(),
        ),
    );
}

fn markdown(cols: &[Column], cmds: &[Commands], n: usize) -> String {
    let mut md = format!(
        "`RUNTIME run` of busybox `true`, {n} runs per column after one warm-up, columns interleaved. cordon's \
         steps are its own (`CORDON_TIMINGS`, runtime/src/sys/timings.rs): each row is the median of that \
         step over the runs, and \"{OTHER}\" is what those medians leave of the median wall time. The \
         supervisor starts beside libcontainer's build (its own exec, policy load, watchdog and confinement \
         overlap the build) and shows only where `create` waits for it. runc and crun are measured whole.\n\n"
    );
    let mut header = vec!["step (ms, median)".to_string()];
    header.extend(cols.iter().map(|c| {
        if c.policy == "–" {
            c.label.clone()
        } else {
            format!("{} ({})", c.label, c.policy)
        }
    }));
    let mut rows: Vec<Vec<String>> = Vec::new();
    let parts: Vec<Vec<f64>> = cols.iter().map(Column::parts).collect();
    for (k, name) in SEGMENTS
        .iter()
        .map(|(n, _)| *n)
        .chain(std::iter::once(OTHER))
        .enumerate()
    {
        let mut row = vec![name.to_string()];
        for (c, p) in cols.iter().zip(&parts) {
            row.push(if c.policy == "–" {
                "".into()
            } else {
                format!("{:.2}", p[k])
            });
        }
        rows.push(row);
    }
    let mut total = vec!["**total (median wall)**".to_string()];
    total.extend(cols.iter().map(|c| format!("**{}**", num(med(&c.wall_ms), 2))));
    rows.push(total);
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    md.push_str(&table(&header, &rows));
    md.push_str(&format!(
        "\nThe commands one by one (median ms, {n} each; `delete --force` right after `start`; `exec ID true` \
         into a running `sleep`):\n\n"
    ));
    let rows: Vec<Vec<String>> = cmds
        .iter()
        .map(|c| {
            vec![
                c.label.clone(),
                num(med(&c.create_ms), 2),
                num(med(&c.start_ms), 2),
                num(med(&c.exec_ms), 2),
                num(med(&c.delete_ms), 2),
            ]
        })
        .collect();
    md.push_str(&table(&["runtime", "create", "start", "exec", "delete --force"], &rows));
    md
}

fn chart(so: &mut SectionOut, out: &Path, cols: &[Column], n: usize) {
    let names: Vec<String> = SEGMENTS
        .iter()
        .map(|(n, _)| n.to_string())
        .chain([OTHER.to_string(), "runc / crun (whole run)".to_string()])
        .collect();
    let bars: Vec<Stack> = cols
        .iter()
        .filter(|c| !c.wall_ms.is_empty())
        .map(|c| {
            let wall = stats::summary(&c.wall_ms).median;
            let parts = if c.policy == "–" {
                let mut p = vec![0.0; SEGMENTS.len() + 1];
                p.push(wall);
                p
            } else {
                c.parts()
            };
            Stack {
                label: if c.policy == "–" {
                    c.label.clone()
                } else {
                    format!("{} ({})", c.label, c.policy)
                },
                parts,
                note: format!("{wall:.1} ms"),
            }
        })
        .collect();
    let file = "startup.png";
    match charts::stacked_hbars(
        &out.join(file),
        &format!("Start-up: run busybox `true`, step by step (medians of {n})"),
        "milliseconds",
        &names,
        &bars,
    ) {
        Ok(()) => so.charts.push(file.into()),
        Err(e) => so.problems.push(format!("chart {file}: {e}")),
    }
}
