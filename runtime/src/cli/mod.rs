//! The `cordon` command line: runc's commands and global flags (parsed with
//! liboci-cli's definitions where they match runc), plus cordon's own
//! (`policy`, `audit`, `syscalls`) and the internal `supervise`.

mod ask;
pub mod docs;
mod install;
mod learn;
mod lifecycle;
pub mod logging;
mod policy;
mod snapshots;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// An OCI container runtime that puts every container behind a syscall supervisor.
#[derive(Parser, Debug)]
#[command(name = "cordon", disable_version_flag = true)]
pub struct Cli {
    /// Root directory for container state
    #[arg(long, default_value = cordon::container::DEFAULT_ROOT)]
    pub root: PathBuf,
    /// Log file (default: errors go to stderr)
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Log format: text or json
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// Debug logging
    #[arg(long)]
    pub debug: bool,
    /// Use the systemd cgroup driver
    #[arg(long)]
    pub systemd_cgroup: bool,
    /// Rootless mode: only "false" (or "auto" as root) is supported
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub rootless: Option<String>,
    /// Policy for containers whose annotations do not choose one: a built-in
    /// name or a policy file (overrides the runtime config's `policy`)
    #[arg(long)]
    pub policy: Option<String>,
    /// Platform for containers whose annotations do not choose one
    /// (overrides the runtime config's `platform`)
    #[arg(long, value_parser = ["seccomp-notify", "ptrace"])]
    pub platform: Option<String>,
    /// Trace mode: also record what the kernel would refuse (the BPF
    /// filter's refusals) and enforce every path rule in the supervisor,
    /// at the cost of a round trip each (like runsc --strace)
    #[arg(long)]
    pub trace: bool,
    /// Print the version
    #[arg(short = 'v', long)]
    pub version: bool,
    /// Command
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
}

/// The name a command's timing lines carry (`sys::timings`).
pub fn process_name(cli: &Cli) -> &'static str {
    match &cli.cmd {
        Some(Cmd::Create(_)) => "create",
        Some(Cmd::Start(_)) => "start",
        Some(Cmd::Run(_)) => "run",
        Some(Cmd::Exec(_)) => "exec",
        Some(Cmd::Delete(_)) => "delete",
        Some(Cmd::Kill(_)) => "kill",
        Some(Cmd::State(_)) => "state",
        Some(Cmd::Supervise(_)) => "supervise",
        Some(Cmd::Fork(_)) => "fork",
        Some(Cmd::Restore(_)) => "restore",
        Some(Cmd::Checkpoint(_)) => "checkpoint",
        _ => "cordon",
    }
}

/// Every command.
#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Create a container
    Create(CreateArgs),
    /// Start a created container
    Start(liboci_cli::Start),
    /// Output the state of a container
    State(liboci_cli::State),
    /// Send a signal to a container's init (default SIGTERM)
    Kill(KillArgs),
    /// Delete a container
    Delete(DeleteArgs),
    /// Create and start a container, and wait for it
    Run(RunArgs),
    /// Execute a process in a running container
    Exec(liboci_cli::Exec),
    /// List the processes of a container
    Ps(liboci_cli::Ps),
    /// List containers
    List(liboci_cli::List),
    /// Freeze every process of a container
    Pause(liboci_cli::Pause),
    /// Thaw a paused container
    Resume(liboci_cli::Resume),
    /// Change a running container's resource limits
    Update(liboci_cli::Update),
    /// Show a container's resource statistics, or with --audit its audit trail as events
    Events(EventsArgs),
    /// Print what this runtime supports (OCI features document)
    Features(liboci_cli::Features),
    /// Write a starter config.json
    Spec(liboci_cli::Spec),
    /// Take a checkpoint of a container's files (a container with --overlay), or `checkpoint rm ID NAME`
    Checkpoint(snapshots::CheckpointArgs),
    /// List a container's checkpoints
    Checkpoints(snapshots::CheckpointsArgs),
    /// Files added (A), changed (C) and deleted (D) since a checkpoint or since the start
    Diff(snapshots::DiffArgs),
    /// Make a container's files those of a checkpoint and start its process again
    Restore(snapshots::RestoreArgs),
    /// Start a new container whose files are those of a checkpoint
    Fork(snapshots::ForkArgs),
    /// Show or check policies
    #[command(subcommand)]
    Policy(PolicyCmd),
    /// Show a container's audit trail: what the supervisor decided
    Audit(AuditArgs),
    /// Answer the questions of `ask` rules from this terminal (listens on SOCKET)
    Ask(ask::AskArgs),
    /// Run a bundle under an observing policy and write the tightest policy that still runs it
    Learn(learn::LearnArgs),
    /// Print the syscall table and what a policy does with each syscall
    Syscalls(SyscallsArgs),
    /// Print, or with --write merge, the configuration an engine needs to use cordon
    Install(install::InstallArgs),
    /// Remove what install added to an engine's configuration (--write; without it, print the diff)
    Uninstall(install::UninstallArgs),
    /// (internal) Run a container's supervisor
    #[command(hide = true)]
    Supervise(cordon::supervisor::SuperviseArgs),
    /// (build) Write the man pages and shell completions under DIR
    #[command(hide = true)]
    GenerateDocs {
        /// Directory for man1/ and completions/
        dir: PathBuf,
    },
}

/// `create` with cordon's flags.
#[derive(Args, Debug)]
pub struct CreateArgs {
    /// runc's flags
    #[command(flatten)]
    pub runc: liboci_cli::Create,
    /// The bundle's rootfs becomes the read-only lower layer of an overlay
    /// whose writable layer cordon owns (for checkpoints; docs/CHECKPOINT.md)
    #[arg(long)]
    pub overlay: bool,
}

/// `run` with cordon's flags.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// runc's flags
    #[command(flatten)]
    pub runc: liboci_cli::Run,
    /// The bundle's rootfs becomes the read-only lower layer of an overlay
    /// whose writable layer cordon owns (for checkpoints; docs/CHECKPOINT.md)
    #[arg(long)]
    pub overlay: bool,
}

/// `events` with cordon's flags.
#[derive(Args, Debug)]
pub struct EventsArgs {
    /// runc's flags
    #[command(flatten)]
    pub runc: liboci_cli::Events,
    /// Stream the audit trail instead, one `{"type":"audit","id":ID,"data":RECORD}`
    /// line per decision, until the container's init exits
    #[arg(long, conflicts_with = "stats")]
    pub audit: bool,
}

/// `delete` with cordon's flags.
#[derive(Args, Debug)]
pub struct DeleteArgs {
    /// runc's flags
    #[command(flatten)]
    pub runc: liboci_cli::Delete,
    /// Keep the container's checkpoints (under the runtime config's data_dir)
    #[arg(long)]
    pub keep_checkpoints: bool,
}

/// `kill` with runc's defaults (the signal is optional).
#[derive(Args, Debug)]
pub struct KillArgs {
    /// Container id
    pub container_id: String,
    /// Signal name or number (default SIGTERM)
    #[arg(default_value = "SIGTERM")]
    pub signal: String,
    /// Send the signal to every process of the container
    #[arg(short, long)]
    pub all: bool,
}

/// `policy` subcommands.
#[derive(Subcommand, Debug)]
pub enum PolicyCmd {
    /// Print a policy (built-in name or file; default: the configured one)
    Show {
        /// Policy name or file
        policy: Option<String>,
        /// As JSON
        #[arg(long)]
        json: bool,
        /// Say, per path rule, what enforces it (the container's mounts or the
        /// supervisor) and why, for a bundle that mounts proc at /proc and
        /// sysfs at /sys
        #[arg(long)]
        explain: bool,
        /// With --explain: decide for this bundle (its mounts, and the paths
        /// that exist in its rootfs and volumes now)
        #[arg(long, requires = "explain")]
        bundle: Option<PathBuf>,
    },
    /// Validate a policy file; errors name the rule and field
    Check {
        /// Policy file
        file: String,
    },
    /// What policy B grants that A does not (`+`), and the reverse (`-`),
    /// per rule kind; exits 1 when they differ, as diff(1)
    Diff {
        /// Policy name or file
        a: String,
        /// Policy name or file
        b: String,
    },
    /// Put a policy in force in a running container: its network, host
    /// and (where the supervisor enforces them) path rules change at once;
    /// a change to what the kernel enforces is refused (docs/POLICY.md,
    /// "Live policy")
    Update {
        /// Container id
        container_id: String,
        /// Policy name or file
        policy: String,
    },
}

/// `audit` arguments.
#[derive(Args, Debug)]
pub struct AuditArgs {
    /// Container id
    pub container_id: String,
    /// Keep printing new records until the container's init exits
    #[arg(short, long)]
    pub follow: bool,
    /// Print raw JSON lines
    #[arg(long)]
    pub json: bool,
    /// Print counts per syscall, action and host name instead of records
    #[arg(long)]
    pub stats: bool,
    /// Print only the last denial, with the `message` of the rule that
    /// refused it (what a platform feeds back to the agent)
    #[arg(long, conflicts_with_all = ["follow", "stats"])]
    pub last: bool,
}

/// `syscalls` arguments.
#[derive(Args, Debug)]
pub struct SyscallsArgs {
    /// Policy whose dispositions to show
    #[arg(long, default_value = "default")]
    pub policy: String,
    /// Output format: table, csv or json
    #[arg(long, default_value = "table", value_parser = ["table", "csv", "json"])]
    pub format: String,
    /// Add each syscall's disposition in cordon's table and its note
    #[arg(long)]
    pub notes: bool,
}

/// What `--version` prints, as runc does: the version, the commit, the
/// runtime spec, and the libraries that decide what cordon can do.
fn version_text() -> String {
    let seccomp = libseccomp::ScmpVersion::current()
        .map(|v| v.to_string())
        .unwrap_or_else(|_| "unknown".into());
    format!(
        "cordon version {}\ncommit: {}\nspec: 1.0.2\nlibcontainer: {}\nlibseccomp: {seccomp}\n",
        env!("CARGO_PKG_VERSION"),
        env!("CORDON_COMMIT"),
        env!("CORDON_LIBCONTAINER_VERSION"),
    )
}

/// Runs the parsed command; returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    if cli.version {
        print!("{}", version_text());
        return Ok(0);
    }
    match cli.rootless.as_deref() {
        None | Some("false") | Some("auto") => {}
        Some("true") => anyhow::bail!("--rootless: rootless containers are not supported"),
        Some(other) => anyhow::bail!("--rootless: invalid value {other:?} (true, false or auto)"),
    }
    let Some(cmd) = cli.cmd else {
        docs::command().print_help()?;
        return Ok(0);
    };
    let rt = || -> anyhow::Result<cordon::container::Runtime> {
        let mut rt = cordon::container::Runtime::new(&cli.root, cli.systemd_cgroup)?;
        if let Some(p) = &cli.policy {
            rt.config.policy = p.clone();
        }
        if let Some(p) = &cli.platform {
            rt.config.platform = p.clone();
        }
        if cli.trace {
            rt.config.trace = true;
        }
        Ok(rt)
    };
    match cmd {
        Cmd::Create(a) => lifecycle::create(&rt()?, a),
        Cmd::Start(a) => lifecycle::start(&rt()?, a),
        Cmd::State(a) => lifecycle::state(&rt()?, a),
        Cmd::Kill(a) => lifecycle::kill(&rt()?, a),
        Cmd::Delete(a) => lifecycle::delete(&rt()?, a),
        Cmd::Run(a) => lifecycle::run(&rt()?, a),
        Cmd::Exec(a) => lifecycle::exec(&rt()?, a),
        Cmd::Ps(a) => lifecycle::ps(&rt()?, a),
        Cmd::List(a) => lifecycle::list(&rt()?, a),
        Cmd::Pause(a) => lifecycle::pause(&rt()?, a),
        Cmd::Resume(a) => lifecycle::resume(&rt()?, a),
        Cmd::Update(a) => lifecycle::update(&rt()?, a),
        Cmd::Events(a) if a.audit => policy::audit_events(&cli.root, &a.runc.container_id),
        Cmd::Events(a) => lifecycle::events(&rt()?, a.runc),
        Cmd::Features(_) => lifecycle::features(),
        Cmd::Spec(a) => lifecycle::spec(a),
        Cmd::Checkpoint(a) => snapshots::checkpoint(&rt()?, a),
        Cmd::Checkpoints(a) => snapshots::checkpoints(&rt()?, a),
        Cmd::Diff(a) => snapshots::diff(&rt()?, a),
        Cmd::Restore(a) => snapshots::restore(&rt()?, a),
        Cmd::Fork(a) => snapshots::fork(&rt()?, a, cli.policy.as_deref()),
        Cmd::Policy(p) => policy::policy(p, cli.policy.as_deref(), rt),
        Cmd::Audit(a) => policy::audit(&cli.root, a),
        Cmd::Syscalls(a) => policy::syscalls(a),
        Cmd::Ask(a) => ask::ask(a),
        Cmd::Learn(a) => learn::learn(&mut rt()?, a),
        Cmd::Install(a) => install::install(a),
        Cmd::Uninstall(a) => install::uninstall(a),
        Cmd::GenerateDocs { dir } => docs::generate(&dir),
        Cmd::Supervise(a) => {
            cordon::supervisor::run(a.into_options()?)?;
            Ok(0)
        }
    }
}
