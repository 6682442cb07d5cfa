//! `exec`: a new process in a running container, under the container's
//! supervisor and policy as they were fixed at create.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use libcontainer::container::builder::ContainerBuilder;
use libcontainer::container::Container;
use libcontainer::syscall::syscall::SyscallType;
use oci_spec::runtime::Spec;

use super::bundle_seccomp::BundleFilter;
use super::create::{compile_bundle_profile, set_up_error, StdioFds, BUNDLE_PROFILE};
use super::executor::CordonExecutor;
use super::{io, lib, Error, Meta, Result, Runtime, POLICY_FILE};
use crate::policy::Policy;
use crate::supervisor::handshake::Role;
use crate::sys::timings;

/// Options of `exec`.
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// Container id.
    pub id: String,
    /// process.json path (replaces args/env/cwd/user).
    pub process: Option<PathBuf>,
    /// Command and arguments.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// uid and optional gid.
    pub user: Option<(u32, Option<u32>)>,
    /// Additional gids.
    pub additional_gids: Vec<u32>,
    /// Allocate a pty.
    pub tty: bool,
    /// Socket for the pty master.
    pub console_socket: Option<PathBuf>,
    /// Don't wait.
    pub detach: bool,
    /// Where to write the process's host pid.
    pub pid_file: Option<PathBuf>,
    /// Extra fds.
    pub preserve_fds: i32,
    /// Capabilities to add.
    pub caps: Vec<String>,
    /// Standard streams of the process (default: the caller's).
    pub stdio: Option<StdioFds>,
    /// `--no-new-privs`: set no_new_privs whatever the container's config
    /// or the process file says.
    pub no_new_privs: bool,
}

impl Runtime {
    /// Starts a process in a running or created container (`runc exec`);
    /// returns its host pid.
    pub fn exec(&self, opts: &ExecOptions) -> Result<nix::unistd::Pid> {
        let _lock = self.lock(&opts.id, false);
        let timing = timings::step("load the state and the policy");
        let c = self.load(&opts.id)?;
        can_exec(&c)?;
        let meta = self.meta(&opts.id);
        let policy = self.exec_policy(&opts.id, &meta)?;
        // As runc's exec: the process file's noNewPrivileges, else the
        // container's.
        let exec_no_new_privs = opts.no_new_privs
            || match opts.process.as_deref() {
                Some(file) => super::executor::process_file_no_new_privs(file).unwrap_or(meta.no_new_privs),
                None => meta.no_new_privs,
            };
        super::resolver::check_exec(&policy, &opts.caps, opts.process.as_deref())?;
        let platform = crate::config::Platform::parse(&meta.platform, "meta.json platform")
            .unwrap_or(crate::config::Platform::SeccompNotify);
        let prog = crate::filter::compile_for(&policy, platform);
        let sock = if policy.needs_supervisor() {
            Some(
                crate::supervisor::connect(&self.cordon_dir(&opts.id))
                    .map_err(io(format!("connect to the supervisor of {:?}", opts.id)))?,
            )
        } else {
            None
        };
        // A process file of the caller's (`docker exec`, `podman exec`)
        // carries its own capabilities: without no_new_privs, CAP_SYS_ADMIN
        // is lent in a copy of it (the container's own process has it from
        // create).
        let lent_file = match opts.process.as_deref() {
            Some(file) if !exec_no_new_privs => self.lend_in_process_file(&opts.id, file)?,
            _ => None,
        };
        let lent_sys_admin = match &opts.process {
            Some(_) => lent_file.is_some(),
            None => meta.lent_sys_admin,
        };
        let executor = CordonExecutor {
            prog,
            supervisor: sock.as_ref().map(|s| s.as_raw_fd()),
            role: Role::Exec,
            platform,
            landlock: meta.landlock.clone(),
            bundle_filter: self.bundle_filter_of(&opts.id)?,
            no_new_privs: exec_no_new_privs,
            lent_sys_admin,
        };
        let env = opts.env.iter().cloned().collect();
        // libcontainer builds a tenant's process from arguments without a
        // terminal; `--tty` goes through a process.json as runc does.
        let tty_process = match (&opts.process, opts.tty) {
            (None, true) => Some(self.tty_process(&c, opts)?),
            _ => None,
        };
        let process = tty_process
            .clone()
            .or_else(|| lent_file.clone())
            .or_else(|| opts.process.clone());
        timing.end();
        let _timing = timings::step("build the process (libcontainer)");
        let capture = super::setup_log::Capture::start();
        let mut builder = ContainerBuilder::new(opts.id.clone(), SyscallType::default());
        if let Some(stdio) = &opts.stdio {
            builder = stdio.apply(builder)?;
        }
        let pid = builder
            .with_executor(executor)
            .with_root_path(&self.root)
            .map_err(lib("state root"))?
            .with_console_socket(opts.console_socket.as_ref())
            .with_pid_file(opts.pid_file.as_ref())
            .map_err(lib("pid file"))?
            .with_preserved_fds(opts.preserve_fds)
            .as_tenant()
            .with_detach(opts.detach)
            .with_cwd(opts.cwd.as_ref())
            .with_env(env)
            .with_process(process.as_ref())
            .with_no_new_privs(exec_no_new_privs)
            .with_container_args(opts.args.clone())
            .with_additional_gids(opts.additional_gids.clone())
            .with_user(opts.user.map(|(u, _)| u))
            .with_group(opts.user.and_then(|(_, g)| g))
            .with_capabilities(opts.caps.clone())
            .build();
        let setup_errors = capture.map(|c| c.finish()).unwrap_or_default();
        let pid = pid.map_err(|e| set_up_error(&format!("exec in {:?}", opts.id), e, &setup_errors));
        for p in [tty_process, lent_file].into_iter().flatten() {
            let _ = std::fs::remove_file(p);
        }
        drop(sock);
        pid
    }

    /// The bundle's seccomp profile of container `id`, as `create` saved
    /// it, compiled for a process `exec` starts (as runc, which applies the
    /// container's profile to every exec'd process).
    fn bundle_filter_of(&self, id: &str) -> Result<Option<Arc<BundleFilter>>> {
        let path = self.cordon_dir(id).join(BUNDLE_PROFILE);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(format!("read {}", path.display()))(e)),
        };
        let profile: oci_spec::runtime::LinuxSeccomp =
            serde_json::from_slice(&text).map_err(|source| Error::Parse {
                path: path.clone(),
                source,
            })?;
        compile_bundle_profile(&path, Some(&profile))
    }

    /// A process.json for `exec --tty ARGS`: the container's process with
    /// these args, env, cwd and user, and `terminal: true`.
    /// The policy an `exec` into container `id` runs under: the one fixed
    /// at create (a container created by an older cordon has none: its
    /// name, then the runtime's), as the init's filter has it (file
    /// syscalls left to the kernel when its mounts enforce the path rules;
    /// traced under `--trace`).
    fn exec_policy(&self, id: &str, meta: &Meta) -> Result<Policy> {
        let fixed = self.cordon_dir(id).join(POLICY_FILE);
        let policy_name = if fixed.exists() {
            fixed.to_string_lossy().into_owned()
        } else if meta.policy.is_empty() {
            self.config.policy.clone()
        } else {
            meta.policy.clone()
        };
        let policy = crate::filter::load_policy(&policy_name)?;
        let policy = if meta.kernel_enforced {
            policy.kernel_enforced(meta.guard_renames, meta.landlock.is_some())
        } else {
            policy
        };
        Ok(if meta.trace { policy.traced() } else { policy })
    }

    /// A copy of process file `file` with CAP_SYS_ADMIN lent
    /// ([`super::executor::lend_sys_admin_to`]), in container `id`'s cordon
    /// dir; `None` when the file has it already (or cannot be read: the
    /// build then says why).
    fn lend_in_process_file(&self, id: &str, file: &Path) -> Result<Option<PathBuf>> {
        let Ok(text) = std::fs::read_to_string(file) else {
            return Ok(None);
        };
        let Ok(mut p) = serde_json::from_str::<oci_spec::runtime::Process>(&text) else {
            return Ok(None);
        };
        if !super::executor::lend_sys_admin_to(&mut p) {
            return Ok(None);
        }
        let path = self
            .cordon_dir(id)
            .join(format!("exec-lent-{}.json", std::process::id()));
        std::fs::write(&path, serde_json::to_vec(&p)?).map_err(io("write exec process.json"))?;
        Ok(Some(path))
    }

    fn tty_process(&self, c: &Container, opts: &ExecOptions) -> Result<PathBuf> {
        let spec = Spec::load(Self::built_config(c)).map_err(|cause| Error::Spec {
            what: format!("read the config of {:?}", opts.id),
            cause,
        })?;
        let mut p = spec.process().clone().unwrap_or_default();
        if opts.args.is_empty() {
            return Err(Error::NoCommand);
        }
        p.set_args(Some(opts.args.clone()));
        p.set_terminal(Some(true));
        let mut env: Vec<String> = p.env().clone().unwrap_or_default();
        for (k, v) in &opts.env {
            env.retain(|e| !e.starts_with(&format!("{k}=")));
            env.push(format!("{k}={v}"));
        }
        p.set_env(Some(env));
        if let Some(cwd) = &opts.cwd {
            p.set_cwd(cwd.clone());
        }
        if let Some((uid, gid)) = opts.user {
            let mut u = p.user().clone();
            u.set_uid(uid);
            if let Some(g) = gid {
                u.set_gid(g);
            }
            if !opts.additional_gids.is_empty() {
                u.set_additional_gids(Some(opts.additional_gids.clone()));
            }
            p.set_user(u);
        }
        let path = self
            .cordon_dir(&opts.id)
            .join(format!("exec-{}.json", std::process::id()));
        let json = serde_json::to_vec(&p)?;
        std::fs::write(&path, json).map_err(io("write exec process.json"))?;
        Ok(path)
    }
}

/// Whether a process can join container `c`: as runc and crun, a running
/// or a created one (its namespaces, mounts and supervisor exist before
/// `start`); else `BadState`.
fn can_exec(c: &Container) -> Result<()> {
    use libcontainer::container::ContainerStatus::{Created, Running};
    if matches!(c.status(), Running | Created) {
        return Ok(());
    }
    Err(Error::BadState {
        id: c.id().to_string(),
        status: super::status_str(c.status()),
        op: "exec",
    })
}
