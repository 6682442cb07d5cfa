//! The runc commands: thin wrappers that parse, call [`cordon::container`]
//! and print what runc prints.

use std::io::Write;

use anyhow::{bail, Context};
use cordon::container::{foreground, CreateOptions, ExecOptions, Runtime};
use libcontainer::oci_spec::runtime::{
    LinuxBlockIoBuilder, LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResources, LinuxResourcesBuilder,
    Spec,
};

use super::KillArgs;

pub fn create(rt: &Runtime, args: super::CreateArgs) -> anyhow::Result<i32> {
    let a = args.runc;
    let asked = bundle_caps(&a.bundle);
    rt.create(&CreateOptions {
        id: a.container_id,
        bundle: a.bundle,
        pid_file: a.pid_file,
        console_socket: a.console_socket,
        no_pivot: a.no_pivot,
        preserve_fds: a.preserve_fds,
        detach: true,
        stdio: None,
        overlay: args.overlay,
        reuse_layer: None,
        fixed_policy: None,
        inherit: None,
        cgroups_path: None,
    })
    .map_err(|e| name_missing_caps(e.into(), &asked))?;
    Ok(0)
}

pub fn start(rt: &Runtime, a: liboci_cli::Start) -> anyhow::Result<i32> {
    rt.start(&a.container_id)?;
    Ok(0)
}

pub fn state(rt: &Runtime, a: liboci_cli::State) -> anyhow::Result<i32> {
    let s = rt.state(&a.container_id)?;
    println!("{}", serde_json::to_string_pretty(&s)?);
    Ok(0)
}

pub fn kill(rt: &Runtime, a: KillArgs) -> anyhow::Result<i32> {
    let sig = libcontainer::signal::Signal::try_from(a.signal.as_str())
        .map_err(|_| anyhow::anyhow!("invalid signal {:?}", a.signal))?;
    rt.kill(&a.container_id, sig, a.all)?;
    Ok(0)
}

pub fn delete(rt: &Runtime, a: super::DeleteArgs) -> anyhow::Result<i32> {
    let keep = if a.keep_checkpoints {
        cordon::container::Keep::Checkpoints
    } else {
        cordon::container::Keep::Nothing
    };
    rt.delete_with(&a.runc.container_id, a.runc.force, keep)?;
    Ok(0)
}

/// create + start + wait (+ delete unless --keep); exits with the
/// container's status, 128+N when signal N killed it.
pub fn run(rt: &Runtime, args: super::RunArgs) -> anyhow::Result<i32> {
    let a = args.runc;
    let id = a.container_id.clone();
    let asked = bundle_caps(&a.bundle);
    let timing = cordon::sys::timings::step("create");
    let mut c = rt
        .create(&CreateOptions {
            id: id.clone(),
            bundle: a.bundle,
            pid_file: a.pid_file,
            console_socket: a.console_socket,
            no_pivot: a.no_pivot,
            preserve_fds: a.preserve_fds,
            detach: a.detach,
            stdio: None,
            overlay: args.overlay,
            reuse_layer: None,
            fixed_policy: None,
            inherit: None,
            cgroups_path: None,
        })
        .map_err(|e| name_missing_caps(e.into(), &asked))?;
    timing.end();
    // Block signals before the init can exit (it waits for start), so its
    // SIGCHLD stays pending; the container's own mask was set at create.
    let signals = if a.detach {
        None
    } else {
        Some(foreground::block_signals()?)
    };
    let timing = cordon::sys::timings::step("start");
    if let Err(e) = c.start() {
        let _ = rt.delete(&id, true);
        bail!("start {id:?}: {}", cordon::container::chain(&e));
    }
    timing.end();
    let Some(signals) = signals else { return Ok(0) };
    let pid = c.pid().context("container has no init pid")?;
    let timing = cordon::sys::timings::step("wait");
    let code = foreground::wait(pid, &signals)?;
    timing.end();
    if !a.keep {
        let _timing = cordon::sys::timings::step("delete");
        if let Err(e) = rt.delete(&id, true) {
            tracing::error!("delete {id:?} after run: {e}");
            eprintln!("cordon: delete {id:?} after run: {e}");
        }
    }
    Ok(code)
}

pub fn exec(rt: &Runtime, a: liboci_cli::Exec) -> anyhow::Result<i32> {
    refuse_unsupported_exec_flags(&a)?;
    let detach = a.detach;
    let asked = asked_caps(&a);
    let timing = cordon::sys::timings::step("exec the process");
    let pid = rt
        .exec(&ExecOptions {
            id: a.container_id,
            process: a.process,
            args: a.command,
            env: a.env,
            cwd: a.cwd,
            user: a.user,
            additional_gids: a.additional_gids,
            tty: a.tty,
            console_socket: a.console_socket,
            detach: a.detach,
            pid_file: a.pid_file,
            preserve_fds: a.preserve_fds,
            caps: a.cap,
            stdio: None,
            no_new_privs: a.no_new_privs,
        })
        .map_err(|e| name_missing_caps(e.into(), &asked))?;
    timing.end();
    if detach {
        return Ok(0);
    }
    // The process may already have exited: `wait` reaps before it sleeps.
    let signals = foreground::block_signals()?;
    let _timing = cordon::sys::timings::step("wait");
    Ok(foreground::wait(pid, &signals)?)
}

/// The capabilities a bundle's process asks for (every set; none when
/// the config cannot be read: create says why).
fn bundle_caps(bundle: &std::path::Path) -> Vec<String> {
    let config = std::fs::read(bundle.join("config.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
    config.map(|c| caps_of(&c["process"])).unwrap_or_default()
}

/// The capabilities of an OCI process object, every set.
fn caps_of(process: &serde_json::Value) -> Vec<String> {
    let mut caps: Vec<String> = process["capabilities"]
        .as_object()
        .into_iter()
        .flat_map(|sets| sets.values())
        .flat_map(|s| s.as_array().into_iter().flatten())
        .filter_map(|c| c.as_str().map(String::from))
        .collect();
    caps.sort();
    caps.dedup();
    caps
}

/// `e`, with the capabilities of `asked` that the runtime's bounding set
/// lacks named when applying capabilities failed (as runc's "unable to
/// apply caps", which does not say which).
fn name_missing_caps(e: anyhow::Error, asked: &[String]) -> anyhow::Error {
    let msg = cordon::container::chain(e.as_ref());
    let missing = missing_caps(asked);
    if !msg.contains("unable to apply caps") || missing.is_empty() {
        return e;
    }
    let verb = if missing.len() == 1 { "is" } else { "are" };
    anyhow::anyhow!("{msg}; {} {verb} not in the runtime's bounding set", missing.join(", "))
}

/// The capabilities an exec asks for: `--cap`, and every set of
/// `--process`'s `capabilities`.
fn asked_caps(a: &liboci_cli::Exec) -> Vec<String> {
    let process = a
        .process
        .as_ref()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
    let mut caps = process.map(|p| caps_of(&p)).unwrap_or_default();
    caps.extend(a.cap.iter().cloned());
    caps.sort();
    caps.dedup();
    caps
}

/// Those of `caps` (names, with or without `CAP_`) that this process's
/// bounding set lacks: no process it starts can have them.
fn missing_caps(caps: &[String]) -> Vec<String> {
    let Ok(bounding) = caps::read(None, caps::CapSet::Bounding) else {
        return Vec::new();
    };
    caps.iter()
        .filter_map(|name| {
            let full = if name.starts_with("CAP_") {
                name.clone()
            } else {
                format!("CAP_{name}")
            };
            let cap: caps::Capability = full.parse().ok()?;
            (!bounding.contains(&cap)).then_some(full)
        })
        .collect()
}

/// runc's exec flags cordon cannot honour: refused in one line rather than
/// ignored.
fn refuse_unsupported_exec_flags(a: &liboci_cli::Exec) -> anyhow::Result<()> {
    if let Some(p) = &a.apparmor {
        bail!("exec --apparmor {p:?}: AppArmor profiles are not supported by cordon");
    }
    if let Some(l) = &a.process_label {
        bail!("exec --process-label {l:?}: SELinux labels are not supported by cordon");
    }
    if let Some(c) = &a.cgroup {
        bail!("exec --cgroup {c:?}: running a process in a sub-cgroup is not supported by cordon");
    }
    if a.ignore_paused {
        bail!("exec --ignore-paused: exec in a paused container is not supported by cordon");
    }
    Ok(())
}

pub fn ps(rt: &Runtime, a: liboci_cli::Ps) -> anyhow::Result<i32> {
    let pids = rt.pids(&a.container_id)?;
    match a.format.as_str() {
        "json" => println!("{}", serde_json::to_string(&pids)?),
        "table" => {
            let opts = if a.ps_options.is_empty() {
                vec!["-ef".to_string()]
            } else {
                a.ps_options
            };
            let out = std::process::Command::new("ps")
                .args(&opts)
                .output()
                .context("run ps")?;
            let text = String::from_utf8_lossy(&out.stdout);
            let mut lines = text.lines();
            let header = lines.next().unwrap_or_default();
            let col = header
                .split_whitespace()
                .position(|h| h == "PID")
                .context("ps output has no PID column")?;
            println!("{header}");
            for l in lines {
                if let Some(p) = l.split_whitespace().nth(col).and_then(|p| p.parse::<i32>().ok()) {
                    if pids.contains(&p) {
                        println!("{l}");
                    }
                }
            }
        }
        f => bail!("--format: invalid value {f:?} (table or json)"),
    }
    Ok(0)
}

pub fn list(rt: &Runtime, a: liboci_cli::List) -> anyhow::Result<i32> {
    let all = rt.list()?;
    if a.quiet {
        for s in &all {
            println!("{}", s.id);
        }
        return Ok(0);
    }
    match a.format.as_str() {
        "json" => println!("{}", serde_json::to_string(&all)?),
        "table" => {
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "{:<20} {:<8} {:<10} {:<40} {:<32} OWNER",
                "ID", "PID", "STATUS", "BUNDLE", "CREATED"
            )?;
            for s in &all {
                writeln!(
                    out,
                    "{:<20} {:<8} {:<10} {:<40} {:<32} {}",
                    s.id,
                    s.pid,
                    s.status,
                    s.bundle.display(),
                    s.created,
                    if s.owner.is_empty() { "root" } else { &s.owner }
                )?;
            }
        }
        f => bail!("--format: invalid value {f:?} (table or json)"),
    }
    Ok(0)
}

pub fn pause(rt: &Runtime, a: liboci_cli::Pause) -> anyhow::Result<i32> {
    rt.pause(&a.container_id)?;
    Ok(0)
}

pub fn resume(rt: &Runtime, a: liboci_cli::Resume) -> anyhow::Result<i32> {
    rt.resume(&a.container_id)?;
    Ok(0)
}

pub fn update(rt: &Runtime, a: liboci_cli::Update) -> anyhow::Result<i32> {
    let res: LinuxResources = match &a.resources {
        Some(p) if p.as_os_str() == "-" => {
            serde_json::from_reader(std::io::stdin()).context("--resources: invalid JSON on stdin")?
        }
        Some(p) => {
            serde_json::from_reader(std::fs::File::open(p).with_context(|| format!("--resources {}", p.display()))?)
                .with_context(|| format!("--resources {}: invalid JSON", p.display()))?
        }
        None => {
            if a.l3_cache_schema.is_some() || a.mem_bw_schema.is_some() {
                let flag = if a.l3_cache_schema.is_some() {
                    "--l3-cache-schema"
                } else {
                    "--mem-bw-schema"
                };
                bail!("update {flag}: Intel RDT is not supported by cordon");
            }
            let mut b = LinuxResourcesBuilder::default();
            if let Some(w) = a.blkio_weight {
                let w = u16::try_from(w).map_err(|_| anyhow::anyhow!("--blkio-weight {w}: out of range"))?;
                b = b.block_io(LinuxBlockIoBuilder::default().weight(w).build()?);
            }
            if let Some(n) = a.pids_limit {
                b = b.pids(LinuxPidsBuilder::default().limit(n).build()?);
            }
            if a.memory.is_some() || a.memory_reservation.is_some() || a.memory_swap.is_some() {
                let mut m = LinuxMemoryBuilder::default();
                if let Some(v) = a.memory {
                    m = m.limit(v as i64);
                }
                if let Some(v) = a.memory_reservation {
                    m = m.reservation(v as i64);
                }
                if let Some(v) = a.memory_swap {
                    m = m.swap(v);
                }
                b = b.memory(m.build()?);
            }
            if a.cpu_period.is_some()
                || a.cpu_quota.is_some()
                || a.cpu_share.is_some()
                || a.cpuset_cpus.is_some()
                || a.cpuset_mems.is_some()
                || a.cpu_rt_period.is_some()
                || a.cpu_rt_runtime.is_some()
            {
                let mut c = LinuxCpuBuilder::default();
                if let Some(v) = a.cpu_rt_period {
                    c = c.realtime_period(v);
                }
                if let Some(v) = a.cpu_rt_runtime {
                    c = c.realtime_runtime(v as i64);
                }
                if let Some(v) = a.cpu_period {
                    c = c.period(v);
                }
                if let Some(v) = a.cpu_quota {
                    c = c.quota(v as i64);
                }
                if let Some(v) = a.cpu_share {
                    c = c.shares(v);
                }
                if let Some(v) = &a.cpuset_cpus {
                    c = c.cpus(v.clone());
                }
                if let Some(v) = &a.cpuset_mems {
                    c = c.mems(v.clone());
                }
                b = b.cpu(c.build()?);
            }
            b.build()?
        }
    };
    rt.update(&a.container_id, &res)?;
    Ok(0)
}

/// `runc events`: one stats object with `--stats`, else one every
/// `--interval` seconds while the container runs.
pub fn events(rt: &Runtime, a: liboci_cli::Events) -> anyhow::Result<i32> {
    loop {
        println!("{}", rt.stats(&a.container_id)?);
        if a.stats || !rt.is_alive(&a.container_id) {
            return Ok(0);
        }
        std::thread::sleep(std::time::Duration::from_secs(u64::from(a.interval.max(1))));
    }
}

/// The OCI features document (runtime-spec features.md).
pub fn features() -> anyhow::Result<i32> {
    let f = serde_json::json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": "1.2.0",
        "hooks": ["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"],
        "mountOptions": ["ro", "rw", "bind", "rbind", "nosuid", "nodev", "noexec", "relatime", "strictatime",
                         "private", "rprivate", "shared", "rshared", "slave", "rslave"],
        "linux": {
            "namespaces": ["cgroup", "ipc", "mount", "network", "pid", "user", "uts", "time"],
            "capabilities": caps::all().iter().map(|c| format!("CAP_{c:?}").to_uppercase()).collect::<Vec<_>>(),
            "cgroup": {"v1": true, "v2": true, "systemd": true, "systemdUser": false},
            "seccomp": {"enabled": true, "actions": ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL",
                        "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG", "SCMP_ACT_TRACE", "SCMP_ACT_TRAP"]},
            "apparmor": {"enabled": false},
            "selinux": {"enabled": false}
        },
        "annotations": features_annotations(),
    });
    println!("{}", serde_json::to_string_pretty(&f)?);
    Ok(0)
}

/// `features`' annotations: what this runtime is (as runc gives its
/// libseccomp version), then every annotation cordon reads from a
/// container's config ([`cordon::annotations::KEYS`]), with what it does.
fn features_annotations() -> serde_json::Value {
    let seccomp = libseccomp::ScmpVersion::current()
        .map(|v| v.to_string())
        .unwrap_or_else(|_| "unknown".into());
    let mut a = serde_json::json!({
        "org.cordon.version": env!("CARGO_PKG_VERSION"),
        "org.cordon.commit": env!("CORDON_COMMIT"),
        "io.github.seccomp.libseccomp.version": seccomp,
    });
    for key in cordon::annotations::KEYS {
        a[key.name] = key.doc.into();
    }
    a
}

/// Writes a starter config.json, as `runc spec` does (fails if one exists).
pub fn spec(a: liboci_cli::Spec) -> anyhow::Result<i32> {
    if a.rootless {
        bail!("--rootless: rootless containers are not supported");
    }
    let dir = a.bundle.unwrap_or_else(|| ".".into());
    let path = dir.join("config.json");
    if path.exists() {
        bail!("{}: file exists; remove it first", path.display());
    }
    let mut spec = Spec::default();
    spec.set_hostname(Some("cordon".into()));
    spec.set_version("1.0.2".into());
    if let Some(mut root) = spec.root().clone() {
        root.set_readonly(Some(true));
        spec.set_root(Some(root));
    }
    let json = serde_json::to_string_pretty(&spec)?;
    std::fs::write(&path, json + "\n").with_context(|| format!("write {}", path.display()))?;
    Ok(0)
}
