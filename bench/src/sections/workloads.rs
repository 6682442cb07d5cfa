//! Workloads (section 3) in the python bundle: python3 startup, a stdlib-heavy
//! script, `tar -x` of small files, `python3 -m compileall`, `pip install`
//! and `git clone` over HTTP on the loopback, `make -j2` of a C project;
//! cordon against runc. The time inside the container is taken by `/srv/loop time` (the
//! workload alone); the whole `run` is shown too.

use std::path::Path;
use std::time::Duration;

use anyhow::bail;
use serde::Serialize;
use serde_json::json;

use crate::charts::{self, Bar, Marker};
use crate::env::{Env, Image, Runtime, COMPILEALL_DIRS, C_FILES, TAR_FILES};
use crate::proc;
use crate::report::{num, table, SectionOut, Target};
use crate::stats::{self, Summary};

struct Workload {
    key: &'static str,
    title: String,
    args: Vec<String>,
    env: Vec<&'static str>,
}

fn workloads() -> Vec<Workload> {
    let mut compile = vec!["python3", "-m", "compileall", "-q", "-f"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    compile.extend(COMPILEALL_DIRS.iter().map(|d| format!("/usr/lib/python3.11/{d}")));
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        Workload {
            key: "python-startup",
            title: "python3 -c pass".into(),
            args: v(&["python3", "-c", "pass"]),
            env: vec![],
        },
        Workload {
            key: "python-stdlib",
            title: "python3 script: json, re, sqlite3".into(),
            args: v(&["python3", "/srv/stdlib_work.py"]),
            env: vec![],
        },
        Workload {
            key: "tar-x",
            title: format!("tar -x of {TAR_FILES} small files (regular files, 50 directories) to tmpfs"),
            args: v(&["tar", "-xf", "/srv/files.tar", "-C", "/tmp"]),
            env: vec![],
        },
        Workload {
            key: "compileall",
            title: format!("python3 -m compileall -f ({})", COMPILEALL_DIRS.join(", ")),
            args: compile,
            // .pyc files go to the tmpfs; the rootfs is read-only.
            env: vec!["PYTHONPYCACHEPREFIX=/tmp/pycache"],
        },
        Workload {
            key: "fetch",
            title: "pip install and git clone over HTTP from a server on the loopback".into(),
            args: v(&["python3", "/srv/fetch_work.py"]),
            env: vec![],
        },
        Workload {
            key: "c-build",
            title: format!("make -j2 of a C project of {C_FILES} files (gcc -O1) in tmpfs"),
            args: v(&["sh", "-c", "cp -r /srv/cproj /tmp/c && make -s -j2 -C /tmp/c"]),
            env: vec![],
        },
    ]
}

#[derive(Debug, Default, Serialize)]
struct Row {
    workload: String,
    runtime: String,
    /// Time inside the container (ms).
    inner_ms: Vec<f64>,
    inner: Summary,
    /// Whole `RUNTIME run` (ms).
    outer_ms: Vec<f64>,
    outer: Summary,
    failures: usize,
    errors: Vec<String>,
}

/// Where `cordon learn` of workload `key` writes its policy, which the
/// `cordon-learned` runtime runs under.
fn learned_policy(env: &Env, key: &str) -> std::path::PathBuf {
    env.tmp.join(format!("learned-{key}.toml"))
}

fn once(env: &Env, rt: &Runtime, w: &Workload) -> anyhow::Result<(f64, f64)> {
    let id = env.id(rt, "wl");
    let mut args: Vec<&str> = vec!["/srv/loop", "time"];
    args.extend(w.args.iter().map(String::as_str));
    let bundle = env.bundle(rt, &id, Image::Python, &args, &w.env)?;
    let b = bundle.to_string_lossy().into_owned();
    let timeout = Duration::from_secs(600);
    let learned = learned_policy(env, w.key);
    let out = match rt.label.as_str() {
        // The whole learning run: observed, then the policy written.
        "cordon-learn" => rt.exec(&["learn", "-b", &b, &id, "-o", &learned.to_string_lossy()], timeout)?,
        "cordon-learned" => {
            let mut under = rt.clone();
            under.policy = Some(learned.to_string_lossy().into_owned());
            under.run_bundle(&b, &id, timeout)?
        }
        _ => rt.run_bundle(&b, &id, timeout)?,
    };
    env.drop_bundle(&id);
    let _ = proc::settle_orphans(Duration::from_secs(2));
    if !out.ok() {
        bail!("{}", out.failure(&format!("{} {}", rt.label, w.key)));
    }
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("time "))
        .unwrap_or_default()
        .to_string();
    let mut ns = None;
    let mut status = None;
    for f in line.split_whitespace() {
        if let Some(v) = f.strip_prefix("ns=") {
            ns = v.parse::<f64>().ok();
        } else if let Some(v) = f.strip_prefix("status=") {
            status = v.parse::<i32>().ok();
        }
    }
    match (ns, status) {
        (Some(ns), Some(0)) => Ok((ns / 1e6, out.elapsed.as_secs_f64() * 1e3)),
        (Some(_), Some(s)) => bail!(
            "{} {}: the workload exited {s}: {}",
            rt.label,
            w.key,
            out.stderr.trim().lines().last().unwrap_or("")
        ),
        _ => bail!("{} {}: no timing line in {:?}", rt.label, w.key, out.stdout.trim()),
    }
}

/// Runs the section.
pub fn run(env: &Env, out: &Path) -> anyhow::Result<SectionOut> {
    let rts = vec![
        env.runtime("cordon", Some("default")),
        env.runtime("cordon-ptrace", Some("default")),
        env.runtime("cordon-permissive", Some("permissive")),
        env.runtime("runc", None),
        env.runtime("cordon-user", Some(&env.user_policy.to_string_lossy())),
    ];
    let mut rts = rts;
    // `cordon learn` of each workload (under `default`), and the policy it
    // wrote, run (issue #30's targets: learning <= 2x runc, the learned
    // policy <= 1.10x).
    rts.push(env.runtime("cordon-learn", None));
    rts.push(env.runtime("cordon-learned", None));
    // What any seccomp filter costs these workloads: runc with a one-rule
    // filter (every syscall on the kernel's slower entry path).
    rts.push(env.runc_with_filter());
    if env.sandlock.is_some() {
        rts.push(env.runtime("sandlock", None));
    }
    let ws = workloads();
    let reps = env.sizes.workload_reps;
    let mut so = SectionOut::default();
    let mut rows: Vec<Row> = Vec::new();
    for w in &ws {
        for rt in &rts {
            rows.push(Row {
                workload: w.key.into(),
                runtime: rt.label.clone(),
                ..Default::default()
            });
        }
    }
    // Warm the page cache (rootfs, tarball) once, under runc, and learn
    // each workload's policy once: not measured.
    let learn = rts.iter().position(|r| r.label == "cordon-learn");
    for w in &ws {
        for k in [Some(3), learn].into_iter().flatten() {
            if let Err(e) = once(env, &rts[k], w) {
                so.warnings.push(format!("warm-up: {e:#}"));
            }
        }
    }
    for rep in 0..reps {
        for (wi, w) in ws.iter().enumerate() {
            for k in 0..rts.len() {
                let ri = (rep + wi + k) % rts.len();
                let row = &mut rows[wi * rts.len() + ri];
                match once(env, &rts[ri], w) {
                    Ok((inner, outer)) => {
                        row.inner_ms.push(inner);
                        row.outer_ms.push(outer);
                    }
                    Err(e) => {
                        row.failures += 1;
                        if row.errors.len() < 2 {
                            row.errors.push(format!("{e:#}"));
                        }
                    }
                }
            }
        }
    }
    for r in &mut rows {
        r.inner = stats::summary(&r.inner_ms);
        r.outer = stats::summary(&r.outer_ms);
        if r.inner_ms.is_empty() && r.runtime == "runc" {
            // The baseline failing is the harness's (or the machine's) problem.
            so.problems.push(format!(
                "{} under {}: every run failed: {}",
                r.workload,
                r.runtime,
                r.errors.join("; ")
            ));
        } else if r.inner_ms.is_empty() {
            so.warnings.push(format!(
                "**{} failed {}** (every run; runc ran it): {}",
                r.runtime,
                r.workload,
                r.errors.join("; ")
            ));
        } else if r.failures > 0 {
            so.warnings.push(format!(
                "{} under {}: {} runs failed: {}",
                r.workload,
                r.runtime,
                r.failures,
                r.errors.join("; ")
            ));
        }
    }
    let med = |w: &str, rt: &str| {
        rows.iter()
            .find(|r| r.workload == w && r.runtime == rt && !r.inner_ms.is_empty())
            .map(|r| r.inner.median)
    };
    let outer = |w: &str, rt: &str| {
        rows.iter()
            .find(|r| r.workload == w && r.runtime == rt && !r.outer_ms.is_empty())
            .map(|r| r.outer.median)
    };
    let mut trows = Vec::new();
    let mut bars = Vec::new();
    for w in &ws {
        let base = med(w.key, "runc");
        let c = med(w.key, "cordon");
        let p = med(w.key, "cordon-permissive");
        let u = med(w.key, "cordon-user");
        let sl = med(w.key, "sandlock");
        let rf = med(w.key, "runc-filter");
        let (l, ld) = (med(w.key, "cordon-learn"), med(w.key, "cordon-learned"));
        so.targets.push(Target::at_most(
            &format!("workload {}: cordon learn vs runc", w.key),
            "≤ 2× runc",
            stats::ratio(l, base),
            2.0,
            "x",
            format!(
                "{}: median time inside the container while `cordon learn` observes it (every call no rule decides \
                 recorded, every path rule in the supervisor) {} ms / runc {} ms",
                w.title,
                num(l, 1),
                num(base, 1)
            ),
        )
        .because(
            "while learning every open, metadata read and change of a file is a round trip to the supervisor, which \
             records it (the observing run keeps every path rule at the supervisor level, where each open is seen): \
             a job that touches thousands of small files pays that many round trips (the syscall section gives one's cost)",
        ));
        so.targets.push(Target::at_most(
            &format!("workload {}: cordon under its learned policy vs runc", w.key),
            "≤ 1.10× runc",
            stats::ratio(ld, base),
            1.10,
            "x",
            format!(
                "{}: median time inside the container under the policy `cordon learn` wrote for it {} ms / runc {} ms",
                w.title,
                num(ld, 1),
                num(base, 1)
            ),
        )
        .because(
            "the learned policy is an allow-list ending in `/** deny`, enforced by Landlock and the mounts, but Landlock \
             has no access right for metadata changes (chmod, chown, utimensat, xattrs): under it each of those is a \
             round trip to the supervisor, which checks the path (tar -x makes three per file it writes)",
        ));
        let name = format!("workload {}: cordon vs runc", w.key);
        if env.sandlock.is_some() {
            so.targets.push(Target::at_most(
                &format!("workload {}: cordon vs sandlock", w.key),
                "≤ 1.05× sandlock (beat it or tie)",
                stats::ratio(c, sl),
                1.05,
                "x",
                format!(
                    "{}: median time inside the container, cordon (default) {} ms / sandlock-oci {} ms",
                    w.title,
                    num(c, 1),
                    num(sl, 1)
                ),
            ));
        }
        so.targets.push(Target::at_most(
            &format!("workload {}: cordon with a user policy vs runc", w.key),
            "≤ 1.10× runc",
            stats::ratio(u, base),
            1.10,
            "x",
            format!(
                "{}: median time inside the container, cordon (default plus /root denied, /srv read-only) {} ms / runc {} ms",
                w.title,
                num(u, 1),
                num(base, 1)
            ),
        ));
        so.targets.push(if c.is_none() && base.is_some() {
            Target::cordon_failed(
                &name,
                "≤ 1.05× runc",
                1.05,
                "x",
                format!("{}: cordon failed every run", w.title),
            )
        } else {
            Target::at_most(
                &name,
                "≤ 1.05× runc",
                stats::ratio(c, base),
                1.05,
                "x",
                format!(
                    "{}: median time inside the container, cordon (default) {} ms / runc {} ms",
                    w.title,
                    num(c, 1),
                    num(base, 1)
                ),
            )
            .because(obstacle(w.key, stats::ratio(p, base), stats::ratio(rf, base)))
        });
        trows.push(vec![
            format!("{} (`{}`)", w.title, w.key),
            num(base, 1),
            num(c, 1),
            num(p, 1),
            num(stats::ratio(c, base), 3),
            num(stats::ratio(p, base), 3),
            num(stats::ratio(u, base), 3),
            num(stats::ratio(rf, base), 3),
            num(sl, 1),
            num(stats::ratio(sl, base), 3),
            num(stats::ratio(l, base), 3),
            num(stats::ratio(ld, base), 3),
            num(outer(w.key, "runc"), 1),
            num(outer(w.key, "cordon"), 1),
        ]);
        for (label, v) in [
            ("cordon", c),
            ("cordon-permissive", p),
            ("cordon-user", u),
            ("sandlock", sl),
            ("cordon-learned", ld),
        ] {
            if let Some(r) = stats::ratio(v, base) {
                bars.push(Bar {
                    label: format!("{} · {label}", w.key),
                    value: r,
                    color: charts::color_of(label),
                    note: format!("{r:.3}x"),
                });
            }
        }
    }
    let mut md = format!(
        "bundles/python (Debian, python3.11; root read-only, a tmpfs on /tmp for writes, the harness's files \
         read-only on /srv). `/srv/loop time CMD` times the workload inside the container (fork+exec+wait); \
         \"whole run\" is the `RUNTIME run` around it. {reps} repetitions per runtime, interleaved, after one \
         warm-up pass under runc (page cache); medians in ms. `cordon-learn` is `cordon learn -b BUNDLE ID -o FILE` \
         of the workload (from `default`: every call no rule decides recorded, every path rule in the supervisor), \
         `cordon-learned` the workload under the policy that wrote (learned once in the warm-up pass).\n\n"
    );
    md.push_str(&table(
        &[
            "workload",
            "runc ms",
            "cordon ms",
            "cordon-permissive ms",
            "cordon / runc",
            "permissive / runc",
            "user policy / runc",
            "runc + filter / runc",
            "sandlock ms",
            "sandlock / runc",
            "learning / runc",
            "learned policy / runc",
            "whole run: runc ms",
            "whole run: cordon ms",
        ],
        &trows,
    ));
    let chart = "workloads.png";
    match charts::hbars(
        &out.join(chart),
        "Workloads: time inside the container relative to runc (median)",
        "× runc",
        &bars,
        false,
        &[Marker {
            at: 1.05,
            label: "target 1.05× runc".into(),
        }],
    ) {
        Ok(()) => so.charts.push(chart.into()),
        Err(e) => so.problems.push(format!("chart {chart}: {e}")),
    }
    so.markdown = md;
    so.data = json!({ "repetitions": reps, "rows": rows });
    Ok(so)
}

/// What makes workload `key` slower under the default policy than under
/// runc (the emulated calls it makes; see the syscall section's costs).
fn obstacle(key: &str, permissive: Option<f64>, filtered: Option<f64>) -> String {
    // Under the default policy the path rules are enforced by the
    // container's mounts: no file call reaches the supervisor.
    let what = match key {
        "python-startup" | "tar-x" | "compileall" | "c-build" => {
            "no file call of it reaches the supervisor under the default policy (its path rules are enforced by \
             the container's mounts): what remains is every syscall's pass through a seccomp filter, and noise"
        }
        _ => "no file call reaches the supervisor under the default policy",
    };
    format!(
        "{what}. In this run runc with a one-rule seccomp filter measured {}× runc (the cost of any filter: every \
         syscall takes the kernel's slower entry path), and cordon-permissive (the same runtime, nothing \
         intercepted) {}× runc: the rest of the gap is the intercepted calls",
        num(filtered, 2),
        num(permissive, 2)
    )
}
