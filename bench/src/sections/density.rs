//! Density (section 4): N idle containers (`sleep`) under runc, then under cordon;
//! memory per container: the containers' cgroups, and cordon's supervisor
//! processes (`cordon supervise`: the supervisor and its watchdog).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use crate::charts::{self, Bar, Marker};
use crate::env::{Env, Image, Runtime};
use crate::report::{num, table, SectionOut, Target};
use crate::{proc, procfs};

#[derive(Debug, Default, Serialize)]
struct Row {
    runtime: String,
    containers: usize,
    running: usize,
    start_seconds: f64,
    /// Sum of the containers' memory cgroups (usage, KiB).
    cgroup_kib: u64,
    /// Host-side processes per runtime that outlive `create`/`start`.
    helper_processes: usize,
    supervisors: usize,
    watchdogs: usize,
    /// Sum of VmRSS / Pss of those processes (KiB).
    helper_rss_kib: u64,
    helper_pss_kib: u64,
    /// Sum of their anonymous (private) memory, RssAnon (KiB).
    helper_anon_kib: u64,
    /// MemAvailable before minus after starting them (KiB; noisy).
    mem_available_drop_kib: i64,
    /// Per container (KiB).
    per_container_cgroup_kib: f64,
    per_container_helper_rss_kib: f64,
    per_container_helper_pss_kib: f64,
    per_container_helper_anon_kib: f64,
    per_container_total_kib: f64,
    delete_seconds: f64,
    errors: Vec<String>,
}

fn measure(env: &Env, rt: &Runtime, n: usize, so: &mut SectionOut) -> anyhow::Result<Row> {
    let mut row = Row {
        runtime: rt.label.clone(),
        containers: n,
        ..Default::default()
    };
    let avail0 = procfs::mem_available_kib().unwrap_or(0);
    let t0 = Instant::now();
    let mut ids = Vec::new();
    for _ in 0..n {
        let id = env.id(rt, "idle");
        let bundle = env.bundle(rt, &id, Image::Busybox, &["sleep", "3600"], &[])?;
        let b = bundle.to_string_lossy().into_owned();
        let out = rt.exec(&["create", "-b", &b, &id], Duration::from_secs(60))?;
        if !out.ok() {
            row.errors.push(out.failure(&format!("{} create", rt.label)));
            continue;
        }
        let out = rt.exec(&["start", &id], Duration::from_secs(60))?;
        if !out.ok() {
            row.errors.push(out.failure(&format!("{} start", rt.label)));
        }
        ids.push(id);
    }
    row.start_seconds = t0.elapsed().as_secs_f64();
    // Let them settle (lazy allocations, exited helpers).
    std::thread::sleep(Duration::from_secs(1));
    let _ = proc::take_orphans();

    for id in &ids {
        let out = rt.exec(&["state", id], Duration::from_secs(30))?;
        let st: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        let pid = st["pid"].as_i64().unwrap_or(0) as i32;
        if st["status"] == "running" && pid > 0 {
            row.running += 1;
            if let Some(cg) = procfs::memory_cgroup(pid) {
                row.cgroup_kib += procfs::cgroup_memory_bytes(&cg).unwrap_or(0) / 1024;
            }
        }
    }
    // Processes of this runtime that stay: supervisors (their command line
    // names our root) and their children (the watchdogs).
    let root = format!("{}/", rt.root.to_string_lossy());
    let all = procfs::processes();
    let sup_pids: Vec<i32> = all
        .iter()
        .filter(|p| p.cmdline.iter().any(|a| a.contains(&root)))
        .filter(|p| p.cmdline.get(1).map(String::as_str) == Some("supervise"))
        .map(|p| p.pid)
        .collect();
    let procs: Vec<&procfs::Proc> = all
        .iter()
        .filter(|p| p.cmdline.iter().any(|a| a.contains(&root)) || sup_pids.contains(&p.ppid))
        .collect();
    for p in &procs {
        row.helper_processes += 1;
        if sup_pids.contains(&p.ppid) {
            row.watchdogs += 1;
        } else if sup_pids.contains(&p.pid) {
            row.supervisors += 1;
        }
        row.helper_rss_kib += procfs::rss_kib(p.pid).unwrap_or(0);
        row.helper_pss_kib += procfs::pss_kib(p.pid).unwrap_or(0);
        row.helper_anon_kib += procfs::status_field(p.pid, "RssAnon:").unwrap_or(0);
    }
    let avail1 = procfs::mem_available_kib().unwrap_or(0);
    row.mem_available_drop_kib = avail0 as i64 - avail1 as i64;
    let k = n.max(1) as f64;
    row.per_container_cgroup_kib = row.cgroup_kib as f64 / k;
    row.per_container_helper_rss_kib = row.helper_rss_kib as f64 / k;
    row.per_container_helper_pss_kib = row.helper_pss_kib as f64 / k;
    row.per_container_helper_anon_kib = row.helper_anon_kib as f64 / k;
    row.per_container_total_kib = (row.cgroup_kib + row.helper_pss_kib) as f64 / k;

    let t1 = Instant::now();
    for id in &ids {
        let out = rt.exec(&["delete", "--force", id], Duration::from_secs(60))?;
        if !out.ok() {
            row.errors.push(out.failure(&format!("{} delete", rt.label)));
        }
        env.drop_bundle(id);
    }
    row.delete_seconds = t1.elapsed().as_secs_f64();
    for e in row.errors.iter().filter(|e| e.contains(" delete")) {
        so.warnings.push(e.clone());
    }
    for d in rt.diagnose_leftovers() {
        let msg = format!(
            "{}: a container was still there after `delete --force` returned: {d}",
            rt.label
        );
        if rt.is_cordon() {
            so.warnings.push(format!("**{msg}**"));
        } else {
            so.problems.push(msg);
        }
    }
    let (_, alive) = proc::settle_orphans(Duration::from_secs(5));
    if !alive.is_empty() {
        so.warnings.push(format!(
            "{}: {} processes still alive 5 s after the containers were deleted",
            rt.label,
            alive.len()
        ));
    }
    Ok(row)
}

/// Runs the section.
pub fn run(env: &Env, out: &Path) -> anyhow::Result<SectionOut> {
    let n = env.sizes.density;
    let mut so = SectionOut::default();
    let mut rows = Vec::new();
    for rt in [env.runtime("runc", None), env.runtime("cordon", Some("default"))] {
        let row = measure(env, &rt, n, &mut so)?;
        if row.running < n && !rt.is_cordon() {
            so.problems.push(format!(
                "{}: only {} of {n} containers were running: {}",
                row.runtime,
                row.running,
                row.errors.iter().take(2).cloned().collect::<Vec<_>>().join("; ")
            ));
        } else if row.running < n {
            so.warnings.push(format!(
                "**cordon: only {} of {n} containers were running**: {}",
                row.running,
                row.errors.iter().take(2).cloned().collect::<Vec<_>>().join("; ")
            ));
        }
        rows.push(row);
    }
    let cordon = rows.iter().find(|r| r.runtime == "cordon");
    let runc = rows.iter().find(|r| r.runtime == "runc");
    let sup_rss = cordon.map(|r| r.per_container_helper_rss_kib / 1024.0);
    so.targets.push(
        Target::at_most(
            "supervisor RSS per container",
            "≤ 2 MiB",
            sup_rss,
            2.0,
            "MiB",
            format!(
                "sum of VmRSS of every supervisor and watchdog process ({} supervisors + {} watchdogs) / {n} idle \
             containers; PSS {} MiB, anonymous (RssAnon) {} MiB",
                cordon.map(|r| r.supervisors).unwrap_or(0),
                cordon.map(|r| r.watchdogs).unwrap_or(0),
                num(cordon.map(|r| r.per_container_helper_pss_kib / 1024.0), 2),
                num(cordon.map(|r| r.per_container_helper_anon_kib / 1024.0), 2)
            ),
        )
        .because(
            "what an idle supervisor keeps: its private memory (RssAnon, about 1 MiB: the relocated read-only data \
         of an 11 MB dynamically linked Rust binary, about 0.5 MiB that every process of that binary relocates \
         for itself at load; its heap with the compiled policy; three thread stacks) and the libc and program \
         pages its threads touched since start-up (shared with every other cordon process, but counted in full \
         by each VmRSS; the rest is dropped from its page tables after start-up). The watchdog is a 16 kB \
         static program. Below 2 MiB needs a smaller supervisor binary (no libcontainer, no CLI) or a \
         position-dependent build with no load-time relocations",
        ),
    );
    let mib = |v: f64| v / 1024.0;
    let trows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.runtime.clone(),
                format!("{}/{}", r.running, r.containers),
                format!("{:.1}", r.start_seconds),
                format!("{:.2}", mib(r.per_container_cgroup_kib)),
                format!("{} ({} sup + {} wd)", r.helper_processes, r.supervisors, r.watchdogs),
                format!("{:.2}", mib(r.per_container_helper_rss_kib)),
                format!("{:.2}", mib(r.per_container_helper_pss_kib)),
                format!("{:.2}", mib(r.per_container_helper_anon_kib)),
                format!("{:.2}", mib(r.per_container_total_kib)),
                format!(
                    "{:.1}",
                    r.mem_available_drop_kib as f64 / 1024.0 / r.containers.max(1) as f64
                ),
                format!("{:.1}", r.delete_seconds),
            ]
        })
        .collect();
    let mut md = format!(
        "{n} idle busybox `sleep 3600` containers (`create` + `start`) under runc, deleted, then {n} under \
         cordon (default policy). Memory per container: the container's memory cgroup \
         (`memory.usage_in_bytes`, includes kernel memory), plus the host processes the runtime leaves \
         running per container (cordon: `cordon supervise` and its `cordon-watchdog`; runc: none), as VmRSS, \
         as PSS (shared pages split among sharers) and as anonymous \
         memory (RssAnon: what each process really owns; VmRSS also counts the runtime binary's pages, shared \
         by every supervisor). Total = cgroup + PSS. The MemAvailable drop is system-wide and noisy.\n\n"
    );
    md.push_str(&table(
        &[
            "runtime",
            "running",
            "start s",
            "cgroup MiB/ctr",
            "helper processes",
            "helper RSS MiB/ctr",
            "helper PSS MiB/ctr",
            "helper anon MiB/ctr",
            "total MiB/ctr",
            "MemAvailable drop MiB/ctr",
            "delete s",
        ],
        &trows,
    ));
    if let (Some(c), Some(r)) = (cordon, runc) {
        md.push_str(&format!(
            "\nTotal for {n} containers: cordon {:.1} MiB, runc {:.1} MiB ({}×).\n",
            mib(c.per_container_total_kib * n as f64),
            mib(r.per_container_total_kib * n as f64),
            num(
                crate::stats::ratio(Some(c.per_container_total_kib), Some(r.per_container_total_kib)),
                2
            ),
        ));
    }
    let mut bars = Vec::new();
    for r in &rows {
        bars.push(Bar {
            label: format!("{} · container cgroup", r.runtime),
            value: mib(r.per_container_cgroup_kib),
            color: charts::color_of(&r.runtime),
            note: format!("{:.2} MiB", mib(r.per_container_cgroup_kib)),
        });
        if r.helper_processes > 0 {
            bars.push(Bar {
                label: format!("{} · supervisor+watchdog RSS", r.runtime),
                value: mib(r.per_container_helper_rss_kib),
                color: charts::color_of(&r.runtime),
                note: format!("{:.2} MiB", mib(r.per_container_helper_rss_kib)),
            });
            bars.push(Bar {
                label: format!("{} · supervisor+watchdog PSS", r.runtime),
                value: mib(r.per_container_helper_pss_kib),
                color: charts::color_of(&r.runtime),
                note: format!("{:.2} MiB", mib(r.per_container_helper_pss_kib)),
            });
        }
        bars.push(Bar {
            label: format!("{} · total (cgroup + PSS)", r.runtime),
            value: mib(r.per_container_total_kib),
            color: charts::color_of(&r.runtime),
            note: format!("{:.2} MiB", mib(r.per_container_total_kib)),
        });
    }
    let chart = "density.png";
    match charts::hbars(
        &out.join(chart),
        &format!("Density: memory per idle container ({n} containers)"),
        "MiB per container",
        &bars,
        false,
        &[Marker {
            at: 2.0,
            label: "target: supervisor RSS 2 MiB".into(),
        }],
    ) {
        Ok(()) => so.charts.push(chart.into()),
        Err(e) => so.problems.push(format!("chart {chart}: {e}")),
    }
    so.markdown = md;
    so.data = json!({ "containers": n, "rows": rows });
    Ok(so)
}
