//! `cordon learn -b BUNDLE ID -o FILE`: runs a bundle under an observing
//! policy and writes the tightest policy that still runs it
//! (docs/LEARN.md; the generation is `cordon::policy::learn`).

use cordon::supervisor::audit::Record;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use cordon::container::learn::{exists_at_create, learned_policy, observing_policy, rootfs_of};
use cordon::container::{foreground, CreateOptions, Inherited, Runtime};
use cordon::policy::learn::{self, Observed};
use cordon::policy::Enforcement;

use super::policy::escaped as esc;

/// `learn` arguments.
#[derive(clap::Args, Debug)]
pub struct LearnArgs {
    /// The bundle to run
    #[arg(short, long, default_value = ".")]
    pub bundle: PathBuf,
    /// Container id (used for the learning run and the verifying one)
    #[arg(required_unless_present = "from_audit")]
    pub container_id: Option<String>,
    /// Learn from the audit trails of these containers instead of a run
    /// (live, or kept after their delete): containers run under
    /// `org.cordon.enforcement = "supervisor"` (or `--trace`) and host
    /// rules have every open and destination in their trails
    #[arg(long, num_args = 1.., conflicts_with_all = ["verify", "args", "container_id"])]
    pub from_audit: Vec<String>,
    /// Where to write the policy
    #[arg(short, long)]
    pub output: PathBuf,
    /// The policy whose denials hold while learning, which the learned one
    /// extends (built-in name or file)
    #[arg(long, default_value = "default")]
    pub from: String,
    /// Components a directory grant keeps at most (`/work/venv` with 2)
    #[arg(long, default_value_t = 2)]
    pub collapse: usize,
    /// Run the job again under the learned policy (at the kernel level)
    /// and report any difference
    #[arg(long)]
    pub verify: bool,
    /// The process's arguments instead of the bundle's
    #[arg(last = true)]
    pub args: Vec<String>,
}

/// Learns, writes the policy, optionally verifies; the job's exit status
/// (under the learned policy with `--verify`).
pub fn learn(rt: &mut Runtime, a: LearnArgs) -> anyhow::Result<i32> {
    let from = cordon::filter::load_policy(&a.from)?;
    check_output(&a.output)?;
    if !a.from_audit.is_empty() {
        return from_audit(rt, &a, &from);
    }
    let id = a.container_id.clone().unwrap_or_default();
    cordon::container::validate::id(&id)?;
    let work = rt.root.join(format!(".learn-{id}"));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("create {}", work.display()))?;
    let result = learn_in(rt, &a, &from, &work);
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// Refuses, before any run, an output path that cannot take the policy.
fn check_output(output: &Path) -> anyhow::Result<()> {
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() || output.is_dir() {
        bail!("-o {}: not a file in an existing directory", output.display());
    }
    Ok(())
}

/// `--from-audit ID...`: the policy from the trails of containers already
/// run, checked against the rootfs of `-b` when it names a bundle (else
/// every directory is taken to exist).
fn from_audit(rt: &Runtime, a: &LearnArgs, from: &cordon::policy::Policy) -> anyhow::Result<i32> {
    let mut obs = Observed::default();
    for id in &a.from_audit {
        let (path, _) = super::policy::open_trail(&rt.root, id)?;
        for r in cordon::supervisor::audit::read_all(&path)? {
            if r.syscall == "supervisor" && r.detail.contains(" enforcement kernel") {
                eprintln!(
                    "cordon learn: {}: its path rules were at the kernel level, so its opens are not in its trail",
                    esc(id)
                );
            }
            obs.add(&r.syscall, &r.detail, (&r.action, &r.result), r.destination());
        }
    }
    let config = a.bundle.join("config.json");
    let spec: Option<serde_json::Value> = std::fs::read_to_string(&config)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    match &spec {
        Some(spec) => {
            let rootfs = rootfs_of(&a.bundle, spec);
            write_learned(
                a,
                from,
                &obs,
                |d| exists_at_create(&rootfs, spec, d),
                None,
                &[],
                Some(&rootfs),
            )?;
        }
        None => {
            eprintln!(
                "cordon learn: no bundle at {}: every directory is taken to exist",
                a.bundle.display()
            );
            write_learned(a, from, &obs, |_| true, None, &[], None)?;
        }
    }
    Ok(0)
}

/// Writes the policy learned from `obs` to `-o` (checked first: it must
/// load), with `is_dir` saying what exists at create, and reports it; the
/// job's exit status `code`, when there was a run, goes in the report,
/// and `seen` (resource suggestions) in both, as comments in the file.
fn write_learned(
    a: &LearnArgs,
    from: &cordon::policy::Policy,
    obs: &Observed,
    is_dir: impl Fn(&str) -> bool,
    code: Option<i32>,
    seen: &[String],
    rootfs: Option<&Path>,
) -> anyhow::Result<()> {
    let cordon::container::learn::Learned {
        text,
        grants,
        dests,
        ungranted,
    } = learned_policy(&a.from, from, obs, a.collapse, is_dir).map_err(anyhow::Error::msg)?;
    let comments: String = seen.iter().map(|s| format!("# {s}\n")).collect();
    std::fs::write(&a.output, format!("{comments}{text}")).with_context(|| format!("write {}", a.output.display()))?;
    report(&grants, &dests, &ungranted, code, rootfs);
    for s in seen {
        eprintln!("cordon learn: {s}");
    }
    if obs.ambiguous > 0 {
        eprintln!(
            "cordon learn: {} renames or links named paths holding \" -> \" and were left out (--verify shows what that costs)",
            obs.ambiguous
        );
    }
    Ok(())
}

fn learn_in(rt: &mut Runtime, a: &LearnArgs, from: &cordon::policy::Policy, work: &Path) -> anyhow::Result<i32> {
    let id = a.container_id.clone().unwrap_or_default();
    let (bundle, spec) = bundle_copy(&a.bundle, work, &a.args)?;
    let observing = work.join("observing.toml");
    std::fs::write(&observing, observing_policy(from, &spec)?).context("write the observing policy")?;
    rt.config.policy = observing.to_string_lossy().into_owned();
    // The platform the bundle would get (its annotation, where the
    // runtime config's gate allows it); every path rule in the supervisor.
    let annotations: std::collections::HashMap<String, String> =
        serde_json::from_value(spec["annotations"].clone()).unwrap_or_default();
    let platform = rt.config.annotations.choose(&annotations, &rt.config)?.platform;
    let inherit = Inherited {
        platform,
        enforcement: Enforcement::Supervisor,
        trace: false,
    };
    let code = run_once(rt, &id, &bundle, Some(inherit))?;
    // Peak memory, from the cgroup before the delete (v1 max_usage; 0
    // where the hierarchy does not keep it).
    let peak = rt
        .stats(&id)
        .ok()
        .and_then(|v| v["data"]["memory"]["memory"]["max_usage"].as_u64())
        .filter(|&b| b > 0);
    // The observing policy sent every syscall but the assumed ones to the
    // supervisor: the trail holds them all.
    let mut obs = Observed::default();
    obs.all_syscalls = true;
    // Lookups the nameservers answered with no address while learning:
    // the learned policy refuses them (no rule names them), and the job
    // gets no address either way.
    let mut unanswered = std::collections::HashSet::new();
    for r in cordon::supervisor::audit::read_all(&cordon::container::audit_path(&rt.root, &id))? {
        obs.add(&r.syscall, &r.detail, (&r.action, &r.result), r.destination());
        if r.syscall == "dns" && r.action == "allow" && !r.result.contains(' ') {
            unanswered.insert(r.detail.clone());
        }
    }
    let _ = rt.delete(&id, true);
    let rootfs = rootfs_of(&a.bundle, &spec);
    let seen = peak
        .map(|b| {
            format!(
                "peak memory {:.1} MiB while learning: a memory limit (linux.resources.memory.limit) of twice that is a start",
                b as f64 / 1048576.0
            )
        })
        .into_iter()
        .collect::<Vec<_>>();
    write_learned(
        a,
        from,
        &obs,
        |d| exists_at_create(&rootfs, &spec, d),
        Some(code),
        &seen,
        Some(&rootfs),
    )?;
    if !a.verify {
        return Ok(code);
    }
    // At the kernel level, as the policy will run. The syscalls it refuses
    // are recorded instead ([`verify_policy`]): the filter refuses them
    // without a trace, and a job that made one is a wrong allow-list.
    let (verify, refused) = verify_policy(&a.output, work)?;
    rt.config.policy = verify.to_string_lossy().into_owned();
    let again = run_once(rt, &id, &bundle, None)?;
    let trail = cordon::supervisor::audit::read_all(&cordon::container::audit_path(&rt.root, &id))?;
    let _ = rt.delete(&id, true);
    let denied = verify_denials(&trail, &refused, &unanswered);
    for r in &denied {
        eprintln!(
            "cordon learn: verify: {} {} -> {} (by {})",
            esc(&r.syscall),
            esc(&r.detail),
            esc(&r.result),
            esc(r.rule.as_deref().unwrap_or("?"))
        );
    }
    if again != code || !denied.is_empty() {
        eprintln!(
            "cordon learn: verify: the job exited {again} under the learned policy ({code} while learning), {} denials recorded",
            denied.len()
        );
        return Ok(if again != 0 { again } else { 1 });
    }
    eprintln!(
        "cordon learn: verify: the job exited {again} under the learned policy, as while learning; nothing denied"
    );
    Ok(again)
}

/// The denials of the verifying run's `trail` that say the learned
/// policy is wrong: its refusals, and the calls of the syscalls it
/// refuses (`refused`, recorded instead); not a lookup that had no answer
/// while learning (`unanswered`) either, nor a connect to port 0 (a
/// resolver sorting its answers: c-ares, glibc), which sends nothing and
/// which the policy names no port for: those are counted on a line of
/// their own.
fn verify_denials<'a>(
    trail: &'a [Record],
    refused: &[String],
    unanswered: &std::collections::HashSet<String>,
) -> Vec<&'a Record> {
    let sorting = |r: &&Record| r.syscall == "connect" && r.destination().is_some_and(|(_, _, port)| port == 0);
    let sorted = trail.iter().filter(|r| r.action == "deny").filter(sorting).count();
    if sorted > 0 {
        eprintln!(
            "cordon learn: verify: {sorted} connects to port 0 refused (a resolver sorting its answers: nothing is sent there)"
        );
    }
    trail
        .iter()
        .filter(|r| r.action == "deny" || (r.action == "audit" && refused.contains(&r.syscall)))
        .filter(|r| !(r.syscall == "dns" && unanswered.contains(&r.detail)))
        .filter(|r| !sorting(r))
        .collect()
}

/// The policy `--verify` runs: the learned one at `learned`, its rule
/// refusing the syscalls the run never made turned to `audit` (recorded,
/// then run), written to `work/verify.toml`; and those syscalls' names.
fn verify_policy(learned: &Path, work: &Path) -> anyhow::Result<(PathBuf, Vec<String>)> {
    let text = std::fs::read_to_string(learned).with_context(|| format!("read {}", learned.display()))?;
    let mut file: cordon::policy::PolicyFile =
        toml::from_str(&text).with_context(|| format!("{}: not a policy", learned.display()))?;
    let mut refused = Vec::new();
    for r in file.syscalls.iter_mut() {
        if r.errno.as_deref() == Some("ENOSYS") && r.note.as_deref().is_some_and(|n| n.starts_with("learned:")) {
            r.action = cordon::policy::Action::Audit;
            r.errno = None;
            refused.extend(r.names.iter().cloned());
        }
    }
    let path = work.join("verify.toml");
    std::fs::write(&path, toml::to_string_pretty(&file)?).context("write the verifying policy")?;
    Ok((path, refused))
}

/// A copy of the bundle's config.json in `work` (the rootfs path made
/// absolute, the process's args replaced by `args` when given): the
/// bundle to run and its config.
fn bundle_copy(bundle: &Path, work: &Path, args: &[String]) -> anyhow::Result<(PathBuf, serde_json::Value)> {
    let config = bundle.join("config.json");
    let text = std::fs::read_to_string(&config).with_context(|| format!("read {}", config.display()))?;
    let mut spec: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", config.display()))?;
    let root = spec["root"]["path"].as_str().unwrap_or("rootfs").to_string();
    let root = if Path::new(&root).is_absolute() {
        PathBuf::from(root)
    } else {
        std::fs::canonicalize(bundle)
            .with_context(|| format!("bundle {}", bundle.display()))?
            .join(root)
    };
    spec["root"]["path"] = root.to_string_lossy().into_owned().into();
    if !args.is_empty() {
        spec["process"]["args"] = args.to_vec().into();
    }
    let out = work.join("bundle");
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("config.json"), serde_json::to_vec_pretty(&spec)?)?;
    Ok((out, spec))
}

/// Runs the bundle at `bundle` as container `id` to its end (stdio
/// passed on, as `cordon run`); its exit status. The container stays
/// (stopped) for its trail.
fn run_once(rt: &Runtime, id: &str, bundle: &Path, inherit: Option<Inherited>) -> anyhow::Result<i32> {
    let mut c = rt.create(&CreateOptions {
        id: id.to_string(),
        bundle: bundle.to_path_buf(),
        inherit,
        ..Default::default()
    })?;
    let signals = foreground::block_signals()?;
    if let Err(e) = c.start() {
        let _ = rt.delete(id, true);
        bail!("start {id:?}: {}", cordon::container::chain(&e));
    }
    let pid = c.pid().context("container has no init pid")?;
    Ok(foreground::wait(pid, &signals)?)
}

/// At most this many files are counted below one grant.
const MAX_COUNT: u64 = 100_000;

/// The files (of any kind) below container directory `dir` of `rootfs`,
/// symlinks not followed, at most [`MAX_COUNT`].
fn files_below(rootfs: &Path, dir: &str) -> u64 {
    let mut count = 0;
    let mut todo = vec![rootfs.join(dir.trim_start_matches('/'))];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            count += 1;
            if count >= MAX_COUNT {
                return count;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(e.path());
            }
        }
    }
    count
}

/// What was learned, on stderr: each rule with what it was learned from,
/// sorted by what it grants beyond use (the directories granted whole
/// first), and what no rule could take.
fn report(
    grants: &[learn::Grant],
    dests: &[learn::Destination],
    ungranted: &[String],
    code: Option<i32>,
    rootfs: Option<&Path>,
) {
    match code {
        Some(code) => {
            eprintln!("cordon learn: the job exited {code}; what the policy grants beyond use, widest first:")
        }
        None => eprintln!("cordon learn: what the policy grants beyond use, widest first:"),
    }
    // Files each grant covers in the rootfs (a mount's are not counted).
    let mut sorted: Vec<(u64, &learn::Grant)> = grants
        .iter()
        .map(|g| (rootfs.map(|r| files_below(r, &g.dir)).unwrap_or(0), g))
        .collect();
    sorted.sort_by_key(|(n, g)| std::cmp::Reverse(n.saturating_sub(g.files as u64)));
    for (n, g) in sorted {
        let access = if g.write { "allow" } else { "read-only" };
        let covers = if n > 0 {
            format!("{n}{} files in the rootfs", if n >= MAX_COUNT { "+" } else { "" })
        } else {
            "every file below (a mount, or not counted)".into()
        };
        if g.files == 0 {
            eprintln!(
                "  {}/** {access}: {covers}, a system directory granted whole",
                esc(&g.dir)
            );
        } else {
            eprintln!(
                "  {}/** {access}: {covers}, {} of them used ({} opens or changes)",
                esc(&g.dir),
                g.files,
                g.uses
            );
        }
    }
    for d in dests {
        let target = d
            .host
            .clone()
            .unwrap_or_else(|| d.addresses.iter().next().map(ToString::to_string).unwrap_or_default());
        let ports: Vec<String> = d.ports.iter().map(u16::to_string).collect();
        eprintln!("  {} ports {}: {} calls", esc(&target), ports.join(","), d.uses);
    }
    for p in ungranted {
        eprintln!("  not granted: {} (a grant there would cover every file)", esc(p));
    }
}
