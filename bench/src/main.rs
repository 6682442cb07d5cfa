//! cordon-bench: cordon side by side with runc and crun, and the cost of
//! interception. Writes report.md, results.json and PNG charts.
//!
//! ```text
//! cordon-bench [--smoke] [--out DIR] [--cordon BIN] [--repo DIR] [--only SECTION,...]
//! ```
//!
//! Exit status: 0 when every section ran (targets met or not), 1 when a
//! section failed to run, 2 when the set-up failed.

mod charts;
mod cleanup;
mod env;
mod proc;
mod procfs;
mod report;
mod sections;
mod stats;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use serde_json::json;

use env::{Env, Sizes};
use report::{SectionOut, SectionRecord};

type SectionFn = fn(&Env, &Path) -> anyhow::Result<SectionOut>;

const SECTIONS: &[(&str, &str, SectionFn)] = &[
    ("lifecycle", "1. Lifecycle", sections::lifecycle::run),
    (
        "syscalls",
        "2. Syscall cost inside the container",
        sections::syscalls::run,
    ),
    ("workloads", "3. Workloads", sections::workloads::run),
    ("density", "4. Density: idle containers", sections::density::run),
    ("scale", "5. Scale: concurrent starts", sections::scale::run),
    (
        "snapshots",
        "6. Snapshots: checkpoint, restore, fork",
        sections::snapshots::run,
    ),
    ("startup", "7. Start-up, step by step", sections::startup::run),
];

struct Args {
    smoke: bool,
    out: PathBuf,
    cordon: Option<PathBuf>,
    repo: PathBuf,
    only: Option<Vec<String>>,
    sandlock: Option<PathBuf>,
}

fn parse_args() -> anyhow::Result<Args> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut a = Args {
        smoke: false,
        out: repo.join("target/bench"),
        cordon: None,
        repo,
        only: None,
        sandlock: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = |name: &str| it.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--smoke" => a.smoke = true,
            "--out" => a.out = PathBuf::from(val("--out")?),
            "--cordon" => a.cordon = Some(PathBuf::from(val("--cordon")?)),
            "--repo" => a.repo = PathBuf::from(val("--repo")?),
            "--sandlock" => a.sandlock = Some(PathBuf::from(val("--sandlock")?)),
            "--only" => {
                let v = val("--only")?;
                let names: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
                for n in &names {
                    if !SECTIONS.iter().any(|(k, _, _)| k == n) {
                        bail!(
                            "--only: unknown section {n:?} (one of: {})",
                            SECTIONS.iter().map(|s| s.0).collect::<Vec<_>>().join(", ")
                        );
                    }
                }
                a.only = Some(names);
            }
            "-h" | "--help" => {
                println!(
                    "usage: cordon-bench [--smoke] [--out DIR] [--cordon BIN] [--repo DIR] [--sandlock BIN] [--only SECTION,...]\n\
                     sections: {}",
                    SECTIONS.iter().map(|s| s.0).collect::<Vec<_>>().join(", ")
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (see --help)"),
        }
    }
    Ok(a)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("cordon-bench: {e:#}");
            std::process::exit(2);
        }
    };
    let out = args.out.clone();
    let code = match run(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cordon-bench: {e:#}");
            // Leave a report that says so rather than a stale one.
            if std::fs::create_dir_all(&out).is_ok() {
                let _ = std::fs::write(
                    out.join("report.md"),
                    format!("# cordon benchmark\n\n**The set-up failed; nothing was measured:** {e:#}\n"),
                );
                let _ = std::fs::write(
                    out.join("results.json"),
                    serde_json::to_vec_pretty(&json!({ "error": format!("{e:#}") })).unwrap_or_default(),
                );
            }
            for p in cleanup::cleanup_all() {
                eprintln!("cordon-bench: cleanup: {p}");
            }
            2
        }
    };
    std::process::exit(code);
}

fn run(args: Args) -> anyhow::Result<i32> {
    let t0 = Instant::now();
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    // Both need a single-threaded process: first.
    let mut notes = Vec::new();
    if let Some(n) = env::hybrid_cgroup_workaround()? {
        notes.push(n);
    }
    cleanup::install_signal_handler()?;
    proc::init_reaper()?;

    let sizes = if args.smoke { Sizes::smoke() } else { Sizes::full() };
    eprintln!(
        "cordon-bench: {} run, output in {}",
        if args.smoke { "smoke" } else { "full" },
        args.out.display()
    );
    let env = Env::setup(&args.repo, args.cordon.clone(), args.sandlock.clone(), sizes, notes)?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("create {}", args.out.display()))?;
    // Charts of an earlier run must not pass for this run's.
    if let Ok(rd) = std::fs::read_dir(&args.out) {
        for e in rd.flatten() {
            if e.path().extension().is_some_and(|x| x == "png") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    let mut records = Vec::new();
    for (key, title, f) in SECTIONS {
        if let Some(only) = &args.only {
            if !only.iter().any(|o| o == key) {
                continue;
            }
        }
        if cleanup::STOP.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        eprintln!("cordon-bench: {title}...");
        let load_before = procfs::loadavg();
        let ts = Instant::now();
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| f(&env, &args.out)));
        let (mut so, error) = match result {
            Ok(Ok(so)) => (so, None),
            Ok(Err(e)) => (SectionOut::default(), Some(format!("{e:#}"))),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into());
                (SectionOut::default(), Some(format!("panic: {msg}")))
            }
        };
        // Whatever the section left: containers in every root.
        for rt in all_runtimes(&env) {
            let left = rt.clean();
            if !left.is_empty() {
                so.problems.push(format!(
                    "{}: the section left {} containers behind (force-deleted): {:?}",
                    rt.label,
                    left.len(),
                    left.iter().take(5).collect::<Vec<_>>()
                ));
            }
        }
        let _ = proc::settle_orphans(std::time::Duration::from_secs(3));
        let seconds = ts.elapsed().as_secs_f64();
        let ok = error.is_none() && so.problems.is_empty();
        eprintln!(
            "cordon-bench: {title}: {} in {seconds:.1} s",
            if ok { "ok" } else { "FAILED" }
        );
        if let Some(e) = &error {
            eprintln!("cordon-bench:   error: {e}");
        }
        for p in &so.problems {
            eprintln!("cordon-bench:   problem: {p}");
        }
        records.push(SectionRecord {
            name: title.to_string(),
            ok,
            error,
            problems: so.problems,
            warnings: so.warnings,
            seconds,
            load: (load_before, procfs::loadavg()),
            charts: so.charts,
            data: so.data,
            targets: so.targets,
            markdown: so.markdown,
        });
    }

    let cleanup_problems = cleanup::cleanup_all();
    let meta = json!({
        "mode": if args.smoke { "smoke" } else { "full" },
        "started_unix": started,
        "started": iso8601(started),
        "seconds": t0.elapsed().as_secs_f64(),
        "hostname": std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim(),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "mem_total_kib": procfs_mem_total(),
        "sizes": env.sizes,
        "versions": env.versions.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
    });
    report::write(&args.out, &meta, &records, &env.notes, &cleanup_problems)?;

    println!("\ncordon-bench: targets");
    for t in records.iter().flat_map(|r| r.targets.iter()) {
        println!(
            "  {:<7} {:<45} {:>16}  (goal {})",
            t.verdict(),
            t.name,
            t.value_str(),
            t.goal
        );
    }
    let failed: Vec<&str> = records.iter().filter(|r| !r.ok).map(|r| r.name.as_str()).collect();
    println!(
        "cordon-bench: report {} ({:.0} s)",
        args.out.join("report.md").display(),
        t0.elapsed().as_secs_f64()
    );
    for p in &cleanup_problems {
        eprintln!("cordon-bench: cleanup: {p}");
    }
    if failed.is_empty() && cleanup_problems.is_empty() {
        Ok(0)
    } else {
        if !failed.is_empty() {
            eprintln!("cordon-bench: sections that failed to run: {}", failed.join(", "));
        }
        Ok(1)
    }
}

/// Every runtime root a section may have used.
fn all_runtimes(env: &Env) -> Vec<env::Runtime> {
    let mut v = env.contenders();
    v.push(env.runtime("cordon-audit", Some("audit-getppid")));
    v.push(env.runc_with_filter());
    v
}

fn procfs_mem_total() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// UTC date and time of a Unix timestamp (civil-from-days, no dependency).
fn iso8601(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
