//! `create`: a container from its bundle, its policy fixed and its
//! supervisor started (`exec`, the other way a process enters a
//! container, is in exec.rs).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use libcontainer::container::builder::ContainerBuilder;
use libcontainer::container::Container;
use libcontainer::syscall::syscall::SyscallType;
use oci_spec::runtime::Spec;

use std::sync::Arc;

use super::bundle_seccomp::{self, BundleFilter};
use super::executor::CordonExecutor;
use super::plan::plan_on;
use super::spawn::{choose_platform, spawn_supervisor, Settings, Starting};
use super::validate::is_bind;
use super::{io, lib, validate, Error, Meta, Result, Runtime, POLICY_FILE};
use crate::policy::Policy;
use crate::supervisor::handshake::Role;
use crate::sys::timings;

/// The three standard streams given to a container's process instead of
/// the caller's own: `[stdin, stdout, stderr]`, typically pipes of a shim.
/// Each build duplicates them (`dup(2)`), so the caller keeps its copies
/// and must close them once the process runs for EOF to reach the reader.
#[derive(Debug, Clone)]
pub struct StdioFds(pub std::sync::Arc<[OwnedFd; 3]>);

impl StdioFds {
    pub(super) fn apply(&self, mut b: ContainerBuilder) -> Result<ContainerBuilder> {
        let dup = |i: usize| self.0[i].try_clone().map_err(io("duplicate a stdio fd"));
        b = b.with_stdin(dup(0)?).with_stdout(dup(1)?).with_stderr(dup(2)?);
        Ok(b)
    }
}

/// Options of `create` (and of `run`, which adds start and wait).
#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    /// Container id.
    pub id: String,
    /// Bundle directory.
    pub bundle: PathBuf,
    /// Where to write the init's host pid.
    pub pid_file: Option<PathBuf>,
    /// AF_UNIX socket that receives the pty master (terminal: true).
    pub console_socket: Option<PathBuf>,
    /// Use chroot(2)-like MS_MOVE instead of pivot_root.
    pub no_pivot: bool,
    /// Extra fds (3..3+N) passed to the container.
    pub preserve_fds: i32,
    /// False for a foreground `run`: the caller waits for the init.
    pub detach: bool,
    /// Standard streams of the init (default: the caller's).
    pub stdio: Option<StdioFds>,
    /// Put the rootfs under a writable layer cordon owns (`--overlay`, as
    /// the annotation `org.cordon.rootfs = "overlay"`; docs/CHECKPOINT.md).
    pub overlay: bool,
    /// (restore) The container's existing writable layer (its base
    /// directory) to mount rather than a new one; the audit trail saved in
    /// it (`audit.jsonl`) goes on.
    pub reuse_layer: Option<PathBuf>,
    /// (restore) The policy fixed at the container's first create: its
    /// name and the TOML text of its `policy.toml`, used instead of choosing
    /// and loading one again (a policy file changed since changes nothing).
    pub fixed_policy: Option<(String, String)>,
    /// (fork) The platform and enforcement level of the container forked
    /// from, used instead of what the bundle's annotations or the runtime
    /// config choose: a fork is never weaker than its parent.
    pub inherit: Option<Inherited>,
    /// (fork) The container's cgroup, instead of the bundle's
    /// `linux.cgroupsPath` (which names the parent's).
    pub cgroups_path: Option<PathBuf>,
}

/// What a fork keeps of its parent besides the policy (its admin-gated
/// choices).
#[derive(Debug, Clone)]
pub struct Inherited {
    /// The parent's platform name.
    pub platform: String,
    /// The parent's enforcement level.
    pub enforcement: crate::policy::Enforcement,
    /// Whether the parent runs in trace mode (`--trace`): a fork or a
    /// restore records what the kernel refuses as the parent does.
    pub trace: bool,
}

impl Runtime {
    /// The policy, platform and enforcement level a container runs with:
    /// its annotations where the runtime config's `[annotations]` gate
    /// lets it choose, else the runtime config (and global flags).
    /// A fork's platform and enforcement level are its parent's
    /// (`opts.inherit`).
    fn choose(&self, spec: &Spec, opts: &CreateOptions) -> Result<crate::annotations::Choice> {
        let ann = spec.annotations().clone().unwrap_or_default();
        let mut choice = self.config.annotations.choose(&ann, &self.config)?;
        if let Some(i) = &opts.inherit {
            choice.platform = i.platform.clone();
            choice.enforcement = i.enforcement;
        }
        Ok(choice)
    }

    /// Whether container `opts.id` runs in trace mode: the runtime's
    /// `--trace`, its parent's (a fork's, a restore's), or its
    /// `org.cordon.trace` annotation (which [`Self::choose`] checked).
    fn traced(&self, spec: &Spec, opts: &CreateOptions) -> bool {
        let annotated = spec
            .annotations()
            .as_ref()
            .and_then(|a| a.get(crate::annotations::TRACE))
            .is_some_and(|v| v == "true");
        self.config.trace || opts.inherit.as_ref().is_some_and(|i| i.trace) || annotated
    }

    /// Creates container `opts.id` (`runc create`): validates the input,
    /// starts the supervisor, and builds the container with libcontainer.
    /// On any failure nothing is left behind.
    pub fn create(&self, opts: &CreateOptions) -> Result<Container> {
        let timing = timings::step("read the bundle");
        validate::id(&opts.id)?;
        let (bundle, spec) = validate::bundle(&opts.bundle)?;
        timing.end();
        let timing = timings::step("load and compile the policy");
        // As runc (systemd.IsRunningSystemd): without a running systemd
        // there is no one to ask for a scope, and the cgroupsPath
        // `slice:prefix:name` would become a directory of that name.
        if self.systemd_cgroup && !Path::new("/run/systemd/system").is_dir() {
            return Err(Error::NoSystemd);
        }
        if self.root.join(&opts.id).exists() {
            return Err(Error::Exists(opts.id.clone()));
        }
        let crate::annotations::Choice {
            policy: policy_name,
            platform,
            enforcement,
            overlay,
            policy_from_annotation,
            learn,
            ..
        } = self.choose(&spec, opts)?;
        let overlay = overlay || opts.overlay || opts.reuse_layer.is_some();
        let (policy_name, full) = match &opts.fixed_policy {
            Some((name, text)) => (name.clone(), crate::filter::policy_from_toml(text, name)?),
            None => {
                let full = crate::filter::load_policy(&policy_name).map_err(|e| {
                    if policy_from_annotation {
                        crate::annotations::quiet(e)
                    } else {
                        e
                    }
                })?;
                (policy_name, full)
            }
        };
        // Learned (org.cordon.learn): observed, every path rule in the
        // supervisor and lookups through its resolver (container/learn.rs).
        let (full, enforcement) = match &learn {
            Some(_) => (
                super::learn::observing(&full, &spec, &policy_name)?,
                crate::policy::Enforcement::Supervisor,
            ),
            None => (full, enforcement),
        };
        // The policy as it is now, for the supervisor and every later
        // `exec`: a policy file changed after create changes nothing.
        let fixed = toml::to_string_pretty(&full.source).map_err(Error::RenderPolicy)?;
        // Trace mode sees every open: path rules stay in the supervisor.
        // A fork or a restore of a traced container is traced too.
        let trace = self.traced(&spec, opts);
        let enforcement = if trace {
            crate::policy::Enforcement::Supervisor
        } else {
            enforcement
        };
        // Path rules the container's mounts enforce leave the file
        // syscalls in the kernel (policy/levels.rs).
        let mut plan = plan_on(&full, enforcement, &bundle, &spec);
        if let Some(l) = plan.landlock.as_mut() {
            l.log = self.config.audit.kernel;
        }
        let policy = if plan.all_kernel {
            full.kernel_enforced(plan.guards_renames(), plan.landlock.is_some())
        } else {
            full
        };
        // What the filter sends to the supervisor; the supervisor decides
        // from the policy itself.
        let policy = if trace { policy.traced() } else { policy };
        let (platform, fallback) = choose_platform(&platform, &policy)?;
        super::resolver::check_network(&spec, &policy)?;
        // Before anything is written: a refusal leaves nothing behind.
        super::mount_ns::check(&spec, &policy_name, &policy, &plan)?;
        let prog = crate::filter::compile_for(&policy, platform);
        let bundle_filter = compile_bundle_profile(&bundle, spec.linux().as_ref().and_then(|l| l.seccomp().as_ref()))?;
        timing.end();

        let timing = timings::step("write the state directory");
        let layer = self.write_state(opts, &fixed, overlay, &bundle, &spec)?;
        timing.end();
        let result = self.create_inner(
            opts,
            &bundle,
            spec,
            layer.as_ref(),
            &policy,
            &policy_name,
            &plan,
            (platform, fallback),
            (prog, bundle_filter),
        );
        match &result {
            Ok(_) => self.record_level(&opts.id, enforcement, learn),
            Err(_) => self.undo_create(opts, layer.as_ref().map(|(l, _)| l)),
        }
        result
    }

    /// Writes container `opts.id`'s cordon dir with its `fixed` policy,
    /// moves a restored audit trail in, and (with `overlay`) mounts and
    /// records its writable layer. On error nothing of it is left.
    fn write_state(
        &self,
        opts: &CreateOptions,
        fixed: &str,
        overlay: bool,
        bundle: &Path,
        spec: &Spec,
    ) -> Result<Option<(super::snapshot::Layer, PathBuf)>> {
        let dir = self.cordon_dir(&opts.id);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
        if let Err(e) = write_private(&dir.join(POLICY_FILE), fixed.as_bytes()) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(io(format!("write {POLICY_FILE}"))(e));
        }
        if let Some(base) = &opts.reuse_layer {
            // A restore continues the container's audit trail.
            let _ = std::fs::rename(base.join(crate::layout::AUDIT), super::audit_path(&self.root, &opts.id));
        }
        if !overlay {
            return Ok(None);
        }
        self.recorded_layer(opts, bundle, spec).map(Some).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&dir);
        })
    }

    /// Records the enforcement level chosen for container `id`, which a
    /// fork or a restore keeps.
    fn record_level(&self, id: &str, level: crate::policy::Enforcement, learn: Option<PathBuf>) {
        let mut meta = self.meta(id);
        meta.level = Some(level.name().to_string());
        meta.learn = learn;
        let _ = self.save_meta(id, &meta);
    }

    /// [`Self::prepare_layer`], recorded in meta.json at once: a create
    /// killed from here on leaves a mount `delete --force` finds and
    /// removes. On error nothing of the layer is left.
    fn recorded_layer(
        &self,
        opts: &CreateOptions,
        bundle: &Path,
        spec: &Spec,
    ) -> Result<(super::snapshot::Layer, PathBuf)> {
        let l = self.prepare_layer(opts, bundle, spec)?;
        let meta = Meta {
            bundle: bundle.to_path_buf(),
            layer: Some(l.0.base.clone()),
            lower: Some(l.1.clone()),
            cgroups_path: opts.cgroups_path.clone(),
            ..Default::default()
        };
        if let Err(e) = self.save_meta(&opts.id, &meta) {
            if opts.reuse_layer.is_some() {
                l.0.unmount();
            } else {
                l.0.remove(false);
            }
            return Err(e);
        }
        Ok(l)
    }

    /// Removes what a failed create of `opts.id` left: its supervisor,
    /// cordon dir, libcontainer state and writable `layer` (unmounted
    /// only, when a restore reuses it).
    fn undo_create(&self, opts: &CreateOptions, layer: Option<&super::snapshot::Layer>) {
        if let Some(pid) = self.meta(&opts.id).supervisor_pid {
            super::kill_supervisor(pid, &opts.id);
        }
        let _ = std::fs::remove_dir_all(self.cordon_dir(&opts.id));
        // libcontainer removes its own directory on a failed build; make
        // sure of it for failures before the build too.
        if let Ok(mut c) = Container::load(self.root.join(&opts.id)) {
            let _ = c.delete(true);
        }
        let _ = std::fs::remove_dir_all(self.root.join(&opts.id));
        self.remove_cgroup_when_empty(&opts.id, &opts.bundle, opts.cgroups_path.as_deref());
        if let Some(l) = layer {
            if opts.reuse_layer.is_some() {
                l.unmount();
            } else {
                l.remove(false);
            }
        }
    }

    /// Mounts container `opts.id`'s writable layer over the bundle's rootfs
    /// (a new one, or with `reuse_layer` the one a restore rebuilt);
    /// returns it and the lower layer.
    fn prepare_layer(
        &self,
        opts: &CreateOptions,
        bundle: &Path,
        spec: &Spec,
    ) -> Result<(super::snapshot::Layer, PathBuf)> {
        let root = spec
            .root()
            .as_ref()
            .map(|r| r.path().clone())
            .unwrap_or_else(|| "rootfs".into());
        let lower = if root.is_absolute() { root } else { bundle.join(root) };
        let lower = std::fs::canonicalize(&lower).map_err(io(format!("rootfs {}", lower.display())))?;
        if let Some(base) = &opts.reuse_layer {
            let l = super::snapshot::Layer::at(base.clone());
            l.mount(&lower)?;
            return Ok((l, lower));
        }
        let l = super::snapshot::Layer::new(&self.config.data_dir, &opts.id);
        l.create(&lower)?;
        Ok((l, lower))
    }

    #[allow(clippy::too_many_arguments)]
    fn create_inner(
        &self,
        opts: &CreateOptions,
        bundle: &Path,
        spec: Spec,
        layer: Option<&(super::snapshot::Layer, PathBuf)>,
        policy: &Policy,
        policy_name: &str,
        plan: &crate::policy::levels::Plan,
        (platform, fallback): (crate::config::Platform, Option<String>),
        (prog, bundle_filter): (Vec<libc::sock_filter>, Option<Arc<BundleFilter>>),
    ) -> Result<Container> {
        let dir = self.cordon_dir(&opts.id);
        if let Some(profile) = spec.linux().as_ref().and_then(|l| l.seccomp().as_ref()) {
            // `exec` installs the same profile in every process it starts.
            let json = serde_json::to_vec(profile)?;
            std::fs::write(dir.join(BUNDLE_PROFILE), json).map_err(io(format!("write {BUNDLE_PROFILE}")))?;
        }
        // Host rules: the container's lookups go to the supervisor's
        // resolver (container/resolver.rs).
        let resolver = if policy.net.has_names() && policy.needs_supervisor() && !super::resolver::is_pod_sandbox(&spec)
        {
            Some(super::resolver::prepare(&dir, bundle, &spec)?)
        } else {
            None
        };
        // Without no_new_privs a process may install a seccomp filter only
        // with CAP_SYS_ADMIN (seccomp(2)): lent to the set-up for that.
        let timing = timings::step("write the shadow bundle");
        let (build_spec, lent_sys_admin) = super::executor::lend_sys_admin(spec.clone());
        let no_new_privs = super::executor::asks_no_new_privs(&spec);
        let build_bundle = self.shadow_bundle(
            opts,
            bundle,
            (build_spec, lent_sys_admin),
            resolver.as_ref().map(|(_, m)| m.clone()),
            layer.map(|(l, _)| l.merged()),
        )?;
        timing.end();
        let mut meta = Meta {
            bundle: bundle.to_path_buf(),
            policy: policy_name.to_string(),
            platform: platform.name().to_string(),
            supervisor_pid: None,
            supervisor_start: None,
            fallback: fallback.clone(),
            kernel_enforced: plan.all_kernel,
            guard_renames: plan.guards_renames(),
            landlock: plan.landlock.clone(),
            enforcement: Some(plan.describe()),
            trace: self.traced(&spec, opts),
            layer: layer.map(|(l, _)| l.base.clone()),
            lower: layer.map(|(_, lower)| lower.clone()),
            no_new_privs,
            lent_sys_admin,
            level: None,
            learn: None,
            cgroups_path: opts.cgroups_path.clone(),
        };
        let (views, sock) =
            self.views_and_supervisor(&opts.id, &spec, policy, &mut meta, (platform, fallback), plan)?;
        let timing = timings::step("build (libcontainer)");
        let executor = CordonExecutor {
            prog,
            supervisor: sock.as_ref().map(|(s, _)| s.as_raw_fd()),
            role: Role::Init,
            platform,
            bundle_filter,
            landlock: plan.landlock.clone(),
            no_new_privs,
            lent_sys_admin,
        };
        let container = self.build(opts, executor, (bundle, &build_bundle))?;
        timing.end();
        if let Some((sock, starting)) = sock {
            drop(sock);
            // The supervisor started while libcontainer built the
            // container; the container is created only once it is ready.
            let _timing = timings::step("wait for the supervisor");
            starting.wait_ready(&opts.id)?;
        }
        let _timing = timings::step("finish the build");
        if let Some(pid) = container.pid() {
            finish_build(
                pid.as_raw(),
                &dir,
                &spec,
                resolver.as_ref().map(|(p, _)| p),
                plan,
                &views,
            )?;
        }
        Ok(container)
    }

    /// Writes container `id`'s views and starts its supervisor (when
    /// `policy` needs one; else only saves `meta`): the view files exist
    /// before the supervisor starts, which marks the dynamic ones as it
    /// starts up. Returns the views and the connection to the supervisor.
    #[allow(clippy::type_complexity)]
    fn views_and_supervisor(
        &self,
        id: &str,
        spec: &Spec,
        policy: &Policy,
        meta: &mut Meta,
        (platform, fallback): (crate::config::Platform, Option<String>),
        plan: &crate::policy::levels::Plan,
    ) -> Result<(
        Vec<(PathBuf, &'static str)>,
        Option<(std::os::unix::net::UnixStream, Starting)>,
    )> {
        if !policy.needs_supervisor() {
            self.save_meta(id, meta)?;
            return Ok((Vec::new(), None));
        }
        let timing = timings::step("write the views");
        let views =
            crate::views::prepare(&self.cordon_dir(id), &policy.views()).map_err(io("write the container's views"))?;
        timing.end();
        let _timing = timings::step("spawn the supervisor");
        let sock = self.start_supervisor(id, spec, meta, (platform, fallback.as_deref()), plan)?;
        Ok((views, Some(sock)))
    }

    /// Builds container `opts.id` with libcontainer from the config.json in
    /// `build_bundle` (the user's `bundle` or cordon's copy of its config),
    /// `executor` running last in its init; the state and every hook name
    /// `bundle`. A failure names the step its processes logged.
    fn build(
        &self,
        opts: &CreateOptions,
        executor: CordonExecutor,
        (bundle, build_bundle): (&Path, &Path),
    ) -> Result<Container> {
        let mut builder = ContainerBuilder::new(opts.id.clone(), SyscallType::default());
        if let Some(stdio) = &opts.stdio {
            builder = stdio.apply(builder)?;
        }
        let capture = super::setup_log::Capture::start();
        let built = builder
            .with_executor(executor)
            .with_root_path(&self.root)
            .map_err(lib("state root"))?
            .with_pid_file(opts.pid_file.as_ref())
            .map_err(lib("pid file"))?
            .with_console_socket(opts.console_socket.as_ref())
            .with_preserved_fds(opts.preserve_fds)
            .as_init(bundle)
            .with_config_dir(build_bundle)
            .with_systemd(self.systemd_cgroup)
            .with_detach(opts.detach)
            .with_no_pivot(opts.no_pivot)
            .build();
        let setup_errors = capture.map(|c| c.finish()).unwrap_or_default();
        built.map_err(|e| set_up_error(&format!("create {:?}", opts.id), e, &setup_errors))
    }

    /// Starts the supervisor of container `id` (its policy is in the
    /// container's cordon dir) and connects to it; records its pid in
    /// `meta`, saved before this returns. `platform`: the platform and why
    /// `create` fell back to it.
    fn start_supervisor(
        &self,
        id: &str,
        spec: &Spec,
        meta: &mut Meta,
        (platform, fallback): (crate::config::Platform, Option<&str>),
        plan: &crate::policy::levels::Plan,
    ) -> Result<(std::os::unix::net::UnixStream, Starting)> {
        let dir = self.cordon_dir(id);
        // Without a hostname in the spec the container's nodename is the
        // one its UTS namespace started with: the host's.
        let hostname = spec
            .hostname()
            .clone()
            .filter(|h| !h.is_empty())
            .or_else(|| {
                nix::unistd::gethostname()
                    .ok()
                    .map(|h| h.to_string_lossy().into_owned())
            })
            .unwrap_or_default();
        // The same for the domain name (libcontainer sets the spec's).
        let domainname = spec
            .domainname()
            .clone()
            .filter(|d| !d.is_empty())
            .or_else(|| {
                nix::sys::utsname::uname()
                    .ok()
                    .map(|u| u.domainname().to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "(none)".into());
        let given = Settings {
            hostname: &hostname,
            domainname: &domainname,
            platform,
            fallback,
            plan,
            ask: &self.config.ask,
        };
        let fixed_policy = dir.join(POLICY_FILE);
        let starting = spawn_supervisor(id, &dir, &fixed_policy.to_string_lossy(), given)?;
        meta.supervisor_pid = Some(starting.pid);
        meta.supervisor_start = crate::sys::process::start_time(starting.pid).ok();
        if let Err(e) = self.save_meta(id, meta) {
            // meta.json is what `create`'s cleanup and `delete` find the
            // supervisor by: without it, stop the supervisor here.
            super::kill_supervisor(starting.pid, id);
            return Err(e);
        }
        // The socket is bound already: the connection waits in its
        // backlog until the supervisor accepts it.
        let sock = crate::supervisor::connect(&dir).map_err(io("connect to the supervisor"))?;
        Ok((sock, starting))
    }

    /// libcontainer reads config.json from the bundle it is given; when
    /// cordon must change the config it builds from a copy in its own
    /// directory, with absolute paths. Changes: a default cgroupsPath (so
    /// cgroups are named `cordon/<id>` rather than libcontainer's
    /// `:youki:<id>`); an empty `source` for mounts without one (optional
    /// in the runtime spec; runc passes an empty source to mount(2), so
    /// /proc/mounts shows the same); and no `linux.seccomp`, which cordon's
    /// Executor installs itself after its handshake ([`super::bundle_seccomp`]);
    /// and `extra`, a mount added after the bundle's own (the resolver's
    /// /etc/resolv.conf); with `rootfs`, root.path (the writable layer's
    /// mount); and when `lent`, the process's capabilities with
    /// CAP_SYS_ADMIN lent ([`super::executor::lend_sys_admin`]).
    fn shadow_bundle(
        &self,
        opts: &CreateOptions,
        bundle: &Path,
        (mut spec, lent): (Spec, bool),
        extra: Option<oci_spec::runtime::Mount>,
        rootfs: Option<PathBuf>,
    ) -> Result<PathBuf> {
        let Some(linux) = spec.linux().as_ref() else {
            return Ok(bundle.to_path_buf());
        };
        let no_cgroups_path = linux.cgroups_path().is_none();
        let has_seccomp = linux.seccomp().is_some();
        let sourceless = spec.mounts().iter().flatten().any(|m| m.source().is_none());
        let own_cgroup = opts.cgroups_path.is_some();
        if !no_cgroups_path
            && !has_seccomp
            && !sourceless
            && !lent
            && extra.is_none()
            && rootfs.is_none()
            && !own_cgroup
        {
            return Ok(bundle.to_path_buf());
        }
        let id = opts.id.as_str();
        let mut linux = linux.clone();
        if let Some(cg) = &opts.cgroups_path {
            linux.set_cgroups_path(Some(cg.clone()));
        } else if no_cgroups_path {
            let cg = if self.systemd_cgroup {
                format!("system.slice:cordon:{id}")
            } else {
                format!("/cordon/{id}")
            };
            linux.set_cgroups_path(Some(cg.into()));
        }
        linux.set_seccomp(None);
        spec.set_linux(Some(linux));
        if let Some(root) = spec.root().clone() {
            let mut root = root;
            if !root.path().is_absolute() {
                root.set_path(bundle.join(root.path()));
            }
            if let Some(p) = &rootfs {
                root.set_path(p.clone());
            }
            spec.set_root(Some(root));
        }
        if let Some(mounts) = spec.mounts().clone() {
            let mounts = mounts
                .into_iter()
                .map(|mut m| {
                    match m.source().clone() {
                        Some(src) => {
                            if is_bind(&m) && src.is_relative() {
                                m.set_source(Some(bundle.join(src)));
                            }
                        }
                        None => {
                            m.set_source(Some(PathBuf::new()));
                        }
                    }
                    m
                })
                .collect();
            spec.set_mounts(Some(mounts));
        }
        if let Some(m) = extra {
            let mut mounts = spec.mounts().clone().unwrap_or_default();
            mounts.push(m);
            spec.set_mounts(Some(mounts));
        }
        let shadow = self.cordon_dir(id).join(crate::layout::SHADOW_BUNDLE);
        std::fs::create_dir_all(&shadow).map_err(io("create shadow bundle"))?;
        spec.save(shadow.join("config.json")).map_err(Error::WriteShadow)?;
        Ok(shadow)
    }
}

/// Writes `bytes` to a new file at `path`, readable by root only.
pub(super) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

/// A failed build as one line: libcontainer's error, and when its forked
/// processes logged what failed, its last step ("failed to prepare
/// rootfs") with that detail (the mount destination or step, the errno).
pub(super) fn set_up_error(what: &str, e: libcontainer::error::LibcontainerError, logged: &[String]) -> Error {
    match super::setup_log::describe(logged) {
        Some(detail) => {
            let chain = super::chain(&e);
            let step = chain.rsplit(" : ").next().unwrap_or(&chain).to_string();
            Error::SetUp {
                what: what.to_string(),
                step,
                detail,
            }
        }
        None => lib(what)(e),
    }
}

/// What follows libcontainer's build of the container whose init is host
/// pid `pid` (cordon dir `dir`): its loopback up in a network namespace of
/// its own, the resolver's sockets handed to the supervisor (`resolver`),
/// and the hardening after the build (the path rules' mounts of `plan`
/// when the kernel enforces them all, and the `views`).
fn finish_build(
    pid: i32,
    dir: &Path,
    spec: &Spec,
    resolver: Option<&super::resolver::Plan>,
    plan: &crate::policy::levels::Plan,
    views: &[(PathBuf, &'static str)],
) -> Result<()> {
    if new_netns(spec) {
        loopback_up(pid).map_err(io("bring up lo in the container's network namespace"))?;
    }
    if let Some(resolver) = resolver {
        super::resolver::hand_over(dir, pid, resolver)?;
    }
    let mounts = if plan.all_kernel { plan.mounts() } else { Vec::new() };
    let empty = dir.join("masked");
    if !mounts.is_empty() {
        std::fs::write(&empty, b"").map_err(io(format!("create {}", empty.display())))?;
        std::fs::set_permissions(&empty, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .map_err(io(format!("chmod {}", empty.display())))?;
    }
    super::harden::after_build(pid, spec, &mounts, &empty, views).map_err(io("harden the container"))
}

/// Where `create` keeps the bundle's seccomp profile for `exec`.
pub(super) const BUNDLE_PROFILE: &str = "seccomp.json";

/// Compiles a bundle's seccomp profile (`None` without one); errors name
/// `at` (the bundle or the saved profile) and the field.
pub(super) fn compile_bundle_profile(
    at: &Path,
    profile: Option<&oci_spec::runtime::LinuxSeccomp>,
) -> Result<Option<Arc<BundleFilter>>> {
    let Some(profile) = profile else { return Ok(None) };
    let f = bundle_seccomp::compile(profile).map_err(|source| Error::BundleProfile {
        at: if at.is_dir() {
            at.join("config.json")
        } else {
            at.to_path_buf()
        },
        source,
    })?;
    Ok(Some(Arc::new(f)))
}

/// Whether the spec asks for a new network namespace (no path to join).
fn new_netns(spec: &Spec) -> bool {
    spec.linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .map(|ns| {
            ns.iter()
                .any(|n| n.typ() == oci_spec::runtime::LinuxNamespaceType::Network && n.path().is_none())
        })
        .unwrap_or(false)
}

/// Sets `lo` up in the network namespace of `pid`, as runc does for a new
/// network namespace (its "loopback" strategy). Runs in a short-lived
/// thread that joins the namespace, so the runtime's own stays untouched.
fn loopback_up(pid: i32) -> std::io::Result<()> {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    std::thread::spawn(move || -> std::io::Result<()> {
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)?;
        crate::sys::set_link_up("lo")
    })
    .join()
    .map_err(|_| std::io::Error::other("loopback thread panicked"))?
}
