//! The runc commands: thin wrappers that parse, call [`cordon::container`]
//! and print what runc prints.

use std::io::Write;

use anyhow::{bail, Context};
use cordon::container::{foreground, CreateOptions, ExecOptions, Runtime};
use libcontainer::oci_spec::runtime::{
    LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResources, LinuxResourcesBuilder, Spec,
};

use super::KillArgs;

pub fn create(rt: &Runtime, a: liboci_cli::Create) -> anyhow::Result<i32> {
    rt.create(&CreateOptions {
        id: a.container_id,
        bundle: a.bundle,
        pid_file: a.pid_file,
        console_socket: a.console_socket,
        no_pivot: a.no_pivot,
        preserve_fds: a.preserve_fds,
        detach: true,
        stdio: None,
    })?;
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

pub fn delete(rt: &Runtime, a: liboci_cli::Delete) -> anyhow::Result<i32> {
    rt.delete(&a.container_id, a.force)?;
    Ok(0)
}

/// create + start + wait (+ delete unless --keep); exits with the
/// container's status, 128+N when signal N killed it.
pub fn run(rt: &Runtime, a: liboci_cli::Run) -> anyhow::Result<i32> {
    let id = a.container_id.clone();
    let mut c = rt.create(&CreateOptions {
        id: id.clone(),
        bundle: a.bundle,
        pid_file: a.pid_file,
        console_socket: a.console_socket,
        no_pivot: a.no_pivot,
        preserve_fds: a.preserve_fds,
        detach: a.detach,
        stdio: None,
    })?;
    // Block signals before the init can exit (it waits for start), so its
    // SIGCHLD stays pending; the container's own mask was set at create.
    let signals = if a.detach {
        None
    } else {
        Some(foreground::block_signals()?)
    };
    if let Err(e) = c.start() {
        let _ = rt.delete(&id, true);
        bail!("start {id:?}: {}", cordon::container::chain(&e));
    }
    let Some(signals) = signals else { return Ok(0) };
    let pid = c.pid().context("container has no init pid")?;
    let code = foreground::wait(pid, &signals)?;
    if !a.keep {
        if let Err(e) = rt.delete(&id, true) {
            tracing::error!("delete {id:?} after run: {e}");
            eprintln!("cordon: delete {id:?} after run: {e}");
        }
    }
    Ok(code)
}

pub fn exec(rt: &Runtime, a: liboci_cli::Exec) -> anyhow::Result<i32> {
    let detach = a.detach;
    let pid = rt.exec(&ExecOptions {
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
    })?;
    if detach {
        return Ok(0);
    }
    // The process may already have exited: `wait` reaps before it sleeps.
    let signals = foreground::block_signals()?;
    Ok(foreground::wait(pid, &signals)?)
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
            let mut b = LinuxResourcesBuilder::default();
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
            if a.cpu_period.is_some() || a.cpu_quota.is_some() || a.cpu_share.is_some() || a.cpuset_cpus.is_some() {
                let mut c = LinuxCpuBuilder::default();
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
        "annotations": {
            "org.cordon.version": env!("CARGO_PKG_VERSION"),
            "org.cordon.policy": "policy for this container: a built-in name or a policy file",
        }
    });
    println!("{}", serde_json::to_string_pretty(&f)?);
    Ok(0)
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
