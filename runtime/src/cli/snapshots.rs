//! `checkpoint`, `checkpoints`, `diff` and `restore`: checkpoints of a
//! container's files (docs/CHECKPOINT.md). runc's verbs of the same names
//! checkpoint process memory with CRIU; their flags are recognised and
//! refused in one line.

use anyhow::bail;
use clap::{Args, Subcommand};
use cordon::container::Runtime;

const NO_CRIU: &str = "checkpoints of process memory (runc's CRIU checkpoint/restore) are not supported: cordon \
                       checkpoints a container's files (cordon checkpoint ID, cordon restore ID NAME; \
                       docs/CHECKPOINT.md)";

/// runc's CRIU flags, accepted only to be refused with [`NO_CRIU`].
#[derive(Args, Debug, Default)]
pub struct CriuFlags {
    #[arg(long, hide = true)]
    image_path: Option<String>,
    #[arg(long, hide = true)]
    work_path: Option<String>,
    #[arg(long, hide = true)]
    parent_path: Option<String>,
    #[arg(long, hide = true)]
    leave_running: bool,
    #[arg(long, hide = true)]
    tcp_established: bool,
    #[arg(long, hide = true)]
    ext_unix_sk: bool,
    #[arg(long, hide = true)]
    shell_job: bool,
    #[arg(long, hide = true)]
    file_locks: bool,
    #[arg(long, hide = true)]
    pre_dump: bool,
    #[arg(long, hide = true)]
    lazy_pages: bool,
    #[arg(long, hide = true)]
    manage_cgroups_mode: Option<String>,
}

impl CriuFlags {
    fn refuse(&self) -> anyhow::Result<()> {
        let any = self.image_path.is_some()
            || self.work_path.is_some()
            || self.parent_path.is_some()
            || self.leave_running
            || self.tcp_established
            || self.ext_unix_sk
            || self.shell_job
            || self.file_locks
            || self.pre_dump
            || self.lazy_pages
            || self.manage_cgroups_mode.is_some();
        if any {
            bail!("{NO_CRIU}");
        }
        Ok(())
    }
}

/// `checkpoint` arguments.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CheckpointArgs {
    /// Container id
    pub container_id: Option<String>,
    /// Checkpoint name (default: cp1, cp2, ... in order)
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    criu: CriuFlags,
    #[command(subcommand)]
    cmd: Option<CheckpointCmd>,
}

/// `checkpoint` subcommands.
#[derive(Subcommand, Debug)]
enum CheckpointCmd {
    /// Remove a checkpoint
    Rm {
        /// Container id
        container_id: String,
        /// Checkpoint name
        name: String,
    },
}

/// `checkpoints` arguments.
#[derive(Args, Debug)]
pub struct CheckpointsArgs {
    /// Container id
    pub container_id: String,
    /// Output format: table or json
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    pub format: String,
}

/// `diff` arguments.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// Container id
    pub container_id: String,
    /// Checkpoint to compare with (default: the container's start)
    pub name: Option<String>,
    /// Output format: text or json
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// Each changed file's sha256 before and now, and for text files up
    /// to 1 MiB a unified diff
    #[arg(long)]
    pub content: bool,
}

/// `restore` arguments.
#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// Container id
    pub container_id: String,
    /// Checkpoint name
    pub name: Option<String>,
    #[command(flatten)]
    criu: CriuFlags,
    #[arg(short, long, hide = true)]
    bundle: Option<String>,
    #[arg(short, long, hide = true)]
    detach: bool,
}

/// `fork` arguments. The fork runs under its parent's policy fixed at
/// create; the global `--policy` is taken only when it narrows that.
#[derive(Args, Debug)]
pub struct ForkArgs {
    /// Container id
    pub container_id: String,
    /// Checkpoint name
    pub name: String,
    /// Id of the new container
    pub new_id: String,
    /// Bundle of the new container (default: the container's); its rootfs
    /// must be the same
    #[arg(short, long)]
    pub bundle: Option<std::path::PathBuf>,
    /// `new`: the fork gets a network namespace of its own (only its
    /// loopback) instead of the one its bundle names, so a parent's
    /// namespace with a resolver in it does not refuse the fork
    #[arg(long, value_parser = ["new"])]
    pub netns: Option<String>,
}

/// `policy`: the global `--policy`, which for a fork may only narrow the
/// parent's policy.
pub fn fork(rt: &Runtime, a: ForkArgs, policy: Option<&str>) -> anyhow::Result<i32> {
    let new_netns = a.netns.as_deref() == Some("new");
    rt.fork(
        &a.container_id,
        &a.name,
        &a.new_id,
        a.bundle.as_deref(),
        policy,
        new_netns,
    )?;
    Ok(0)
}

pub fn checkpoint(rt: &Runtime, a: CheckpointArgs) -> anyhow::Result<i32> {
    a.criu.refuse()?;
    if let Some(CheckpointCmd::Rm { container_id, name }) = a.cmd {
        rt.checkpoint_rm(&container_id, &name)?;
        return Ok(0);
    }
    let Some(id) = a.container_id else {
        bail!("checkpoint: the container id is missing (cordon checkpoint ID [--name NAME])");
    };
    let info = rt.checkpoint(&id, a.name.as_deref())?;
    println!("{}", info.name);
    Ok(0)
}

pub fn checkpoints(rt: &Runtime, a: CheckpointsArgs) -> anyhow::Result<i32> {
    let list = rt.checkpoints(&a.container_id)?;
    if a.format == "json" {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(0);
    }
    println!(
        "{:<20} {:<28} {:<20} {:>12} {:>8}",
        "NAME", "CREATED", "PARENT", "SIZE", "FILES"
    );
    for i in list {
        println!(
            "{:<20} {:<28} {:<20} {:>12} {:>8}",
            i.name,
            i.created,
            i.parent.as_deref().unwrap_or("-"),
            i.size,
            i.files
        );
    }
    Ok(0)
}

pub fn diff(rt: &Runtime, a: DiffArgs) -> anyhow::Result<i32> {
    let changes = rt.diff(&a.container_id, a.name.as_deref(), a.content)?;
    // Paths and contents are the container's: control characters are
    // shown escaped (in JSON too, where serde leaves DEL and C1 raw).
    if a.format == "json" {
        let json = serde_json::to_string_pretty(&changes)?;
        println!("{}", cordon::supervisor::audit::escape_c1(&json));
        return Ok(0);
    }
    let esc = super::policy::escaped;
    for c in changes {
        println!("{} {}", c.kind, esc(&c.path));
        let Some(content) = c.content else { continue };
        let sha = |s: Option<String>| s.unwrap_or_else(|| "-".into());
        println!("  sha256 {} -> {}", sha(content.old_sha256), sha(content.new_sha256));
        if let Some(note) = content.note {
            println!("  {}", esc(&note));
        }
        if let Some(d) = content.diff {
            for line in d.lines() {
                println!("  {}", esc(line));
            }
        }
    }
    Ok(0)
}

pub fn restore(rt: &Runtime, a: RestoreArgs) -> anyhow::Result<i32> {
    a.criu.refuse()?;
    if a.bundle.is_some() || a.detach {
        bail!("{NO_CRIU}");
    }
    let Some(name) = a.name else {
        bail!("restore: the checkpoint name is missing (cordon restore ID NAME; {NO_CRIU})");
    };
    rt.restore(&a.container_id, &name)?;
    Ok(0)
}
