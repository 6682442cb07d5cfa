//! The supervisor: one process per container that holds the seccomp
//! listeners of the container's processes and decides every syscall the
//! policy sends to it (our Sentry, in gVisor's terms).
//!
//! Life cycle: `cordon create` starts it (`cordon supervise`, internal) before
//! building the container; it binds `<state>/supervisor.sock`, forks a
//! [`watchdog`], then tells `create` it is ready. Container processes attach
//! through [`handshake`] right before they exec; each listener gets a
//! receiver thread ([`notify`]). The supervisor exits when the container's
//! init exits; if it dies for any reason the watchdog kills the container.

mod args;
pub mod ask;
pub mod audit;
mod confine;
mod exec_guard;
mod kernel_audit;
pub use args::SuperviseArgs;
pub use confine::ConfineError;
pub mod callers;
pub mod creds;
pub mod devices;
pub mod dns;
pub mod handshake;
mod lifetime;
mod notify;
mod platform;
mod ptrace;
pub mod relay;
pub mod syscalls;
pub mod update;
pub(crate) mod views;
mod watchdog;

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use nix::poll::PollTimeout;

use crate::policy::Policy;
use crate::supervisor::audit::Decision;
use crate::sys::timings;

pub use crate::layout::{AUDIT, SOCKET};

/// Errors that stop the supervisor from starting.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// The policy did not load.
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    /// A system call failed; `what` names the step.
    #[error("supervisor: {what}: {source}")]
    Io {
        /// The failing step.
        what: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The supervisor could not confine itself ([`confine`]).
    #[error("supervisor: confine: {0}")]
    Confine(#[from] confine::ConfineError),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SupervisorError {
    let what = what.into();
    move |source| SupervisorError::Io { what, source }
}

/// How `cordon supervise` was asked to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Container id.
    pub id: String,
    /// The container's cordon dir (socket, audit trail).
    pub dir: PathBuf,
    /// Policy name or file.
    pub policy: String,
    /// The container's hostname, for the emulated uname.
    pub hostname: String,
    /// Write end of the pipe on which `create` waits for readiness.
    pub ready_fd: Option<RawFd>,
    /// The socket `create` bound for this supervisor (it binds its own
    /// with `None`).
    pub listen_fd: Option<RawFd>,
    /// How container processes reach the supervisor.
    pub platform: crate::config::Platform,
    /// Why `create` fell back to this platform, if it did.
    pub fallback: Option<String>,
    /// Where the path rules are enforced (`kernel (...)` or
    /// `supervisor (why)`), for the audit trail.
    pub enforcement: String,
    /// Whether every path rule is enforced by the container's mounts or
    /// Landlock, so file syscalls never come here.
    pub kernel_paths: bool,
    /// The decision program's socket for `ask` rules (the runtime
    /// config's `[ask] socket`), if one is configured.
    pub ask_socket: Option<PathBuf>,
    /// How long a question waits for its answer, in milliseconds.
    pub ask_timeout_ms: u32,
    /// Whether Landlock's denials are read from the kernel's audit into
    /// the trail ([`kernel_audit`]).
    pub kernel_audit: bool,
}

/// State shared by every receiver thread.
pub struct Supervisor {
    /// The container's id (in questions to the decision program).
    pub id: String,
    /// The decision program of `ask` rules, and its remembered answers.
    pub asker: ask::Asker,
    /// The compiled policy ([`Supervisor::policy`]); `cordon policy
    /// update` replaces it ([`Supervisor::replace_policy`]).
    policy: std::sync::RwLock<Arc<Policy>>,
    /// The audit trail.
    pub audit: Arc<audit::AuditLog>,
    /// Hostname shown by the emulated uname.
    pub hostname: String,
    /// Kernel release and version shown by the emulated uname (the
    /// policy's `[views]`: virtual, or the host's).
    pub identity: (String, String),
    /// Host pid of the container's init, once it attached (the views are
    /// sized to its cgroups).
    pub init: std::sync::OnceLock<i32>,
    /// The container's cgroup directories, read from its init's
    /// `/proc/<pid>/cgroup` once it attached ([`Supervisor::cgroups`]).
    cgroups: std::sync::OnceLock<crate::views::cgroup::CgroupDirs>,
    /// When the supervisor started, as the container's boot time.
    pub started: Instant,
    /// The container's load averages (1, 5, 15 minutes) and when they
    /// were last updated (`views::load`).
    pub(crate) loads: std::sync::Mutex<(Instant, [f64; 3])>,
    /// Handlers now running on their own thread (calls that may block).
    pub blocking: std::sync::atomic::AtomicUsize,
    /// Answers being sent and recorded now ([`Supervisor::answering`]).
    answering: std::sync::atomic::AtomicUsize,
    /// Addresses the resolver answered, bound to their names ([`dns`]).
    pub names: dns::Names,
    /// What the resolver refuses beyond the rules: internal and host
    /// addresses on names, wildcard budgets ([`dns::Guards`]).
    pub guards: dns::Guards,
    /// Whether file syscalls come here (the path rules are not all enforced
    /// by the container's mounts): the supervisor then creates files for
    /// the container and joins its memory cgroup too ([`join_cgroups`]).
    pub emulates_files: bool,
    /// The exec guard's fanotify group until the init attaches and its
    /// mounts are marked ([`exec_guard`]); `None` when the policy needs
    /// none or it could not be made.
    pub(crate) exec_guard: std::sync::Mutex<Option<exec_guard::ExecGuard>>,
    /// Host pids (thread group ids) whose exec of a file an `ask` rule
    /// covers the exec guard let through after asking, until the ptrace
    /// platform's exec stop takes them ([`exec_guard`]); the oldest go
    /// past [`exec_guard::APPROVED`].
    pub(crate) asked_execs: std::sync::Mutex<std::collections::VecDeque<i32>>,
}

/// An answer being sent and recorded: see [`Supervisor::answering`].
pub(crate) struct Answering<'a>(&'a Supervisor);

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        self.0.answering.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Supervisor {
    /// The policy in force now. A handler takes it once per decision: a
    /// live update ([`Supervisor::replace_policy`]) changes what later
    /// calls see, never the answer to a call being decided.
    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Puts `new` in force for every call decided from now on; returns
    /// the policy it replaces. What may change is
    /// [`crate::policy::live::refusal`]'s to say, checked before.
    pub fn replace_policy(&self, new: Policy) -> Arc<Policy> {
        let mut guard = self.policy.write().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *guard, Arc::new(new))
    }

    /// Marks an answer in progress until the guard drops. A caller runs on
    /// as soon as it is answered, before its decision is recorded: the
    /// container's init can exit in between, and the supervisor, which
    /// exits with it, first waits for the answers in progress
    /// ([`Supervisor::settle`]) so that no decision goes unrecorded.
    pub(crate) fn answering(&self) -> Answering<'_> {
        self.answering.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Answering(self)
    }

    /// The container's cgroup directories (the views and the emulated
    /// sysinfo are sized from them): its init's, read once (a process of
    /// the container cannot move to another cgroup: its cgroupfs is
    /// read-only), or before the init attached, `caller`'s. `None` when
    /// the task is gone.
    pub(crate) fn cgroups(&self, caller: i32) -> Option<crate::views::cgroup::CgroupDirs> {
        use crate::views::cgroup::CgroupDirs;
        if let Some(dirs) = self.cgroups.get() {
            return Some(dirs.clone());
        }
        match self.init.get() {
            Some(&init) => {
                let dirs = CgroupDirs::of(init)?;
                Some(self.cgroups.get_or_init(|| dirs).clone())
            }
            None => CgroupDirs::of(caller),
        }
    }

    /// Waits, up to `limit`, until no answer is in progress.
    fn settle(&self, limit: std::time::Duration) {
        let deadline = Instant::now() + limit;
        while self.answering.load(std::sync::atomic::Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// The kernel release and version the emulated uname shows under
/// `views`: the virtual ones, or the host's (`identity = "host"`).
fn identity(views: &crate::policy::model::Views) -> (String, String) {
    match views.identity {
        crate::policy::model::Identity::Virtual => (views.release.clone(), crate::views::VERSION.to_string()),
        crate::policy::model::Identity::Host => nix::sys::utsname::uname()
            .map(|u| {
                (
                    u.release().to_string_lossy().into_owned(),
                    u.version().to_string_lossy().into_owned(),
                )
            })
            .unwrap_or_else(|_| (views.release.clone(), crate::views::VERSION.to_string())),
    }
}

/// At most this many calls may block at once; more get EAGAIN, so a
/// container cannot grow its supervisor without bound.
pub const MAX_BLOCKING: usize = 256;

/// Runs the supervisor until the container's init exits. Never returns on
/// success (the process exits); returns an error only if setup fails.
pub fn run(opts: Options) -> Result<(), SupervisorError> {
    let timing = timings::step("supervisor: load the policy");
    let policy = crate::filter::load_policy(&opts.policy)?;
    let audit = audit::AuditLog::open(Some(&opts.dir.join(AUDIT))).map_err(io_err("open audit log"))?;
    let listener = match opts.listen_fd {
        // `fd` is the bound socket `cordon create` passed us; nothing else in
        // this process owns it.
        Some(fd) => UnixListener::from(crate::sys::process::own_fd(fd).map_err(io_err("take the listening socket"))?),
        None => bind(&opts.dir)?,
    };

    timing.end();
    let timing = timings::step("supervisor: watchdog, watches, confinement");
    let ptrace = opts.platform == crate::config::Platform::Ptrace;
    prepare_process(ptrace)?;
    callers::pin(policy.pins_user_namespace(), policy.pins_root());
    let watchdog = watchdog::spawn(&opts.id).map_err(io_err("start watchdog"))?;
    let dir_watch = lifetime::watch_removal(&opts.dir).map_err(io_err("watch the state directory"))?;
    let identity = identity(&policy.views());
    // fanotify_init and the marks are not in the confined supervisor's
    // allow-list: set up before it confines itself.
    let views = views::Views::open(&opts.dir, &policy.views()).map_err(io_err("watch the views"))?;
    if let Some(wd) = &watchdog {
        // Their last close then happens in the watchdog (watchdog::hold).
        let _ = watchdog::hold(wd, dir_watch.as_fd());
        if let Some(v) = &views {
            let _ = watchdog::hold(wd, v.fanotify());
        }
    }
    // The exec guard's group, likewise made before (its marks wait for
    // the container's mounts: `mark_execs`).
    let exec_guard = open_exec_guard(&opts, &policy, &audit, watchdog.as_ref());
    // Joining the audit's multicast group needs CAP_AUDIT_READ and a
    // netlink bind: before, too.
    let kernel_audit = opts.kernel_audit.then(kernel_audit::open).and_then(|r| {
        r.map_err(|e| {
            let what = format!("kernel audit unavailable (Landlock's denials are not in the trail): {e}");
            audit.record(0, "supervisor", &what, Decision::Event, "error");
        })
        .ok()
    });
    // getifaddrs binds a netlink socket, which the confined supervisor
    // may not: read before.
    let host_addresses = host_addresses();
    confine::confine(ptrace)?;
    timing.end();
    let timing = timings::step("supervisor: threads and audit trail");
    let sup = Arc::new(Supervisor {
        id: opts.id.clone(),
        asker: ask::Asker::new(
            opts.ask_socket.clone(),
            std::time::Duration::from_millis(u64::from(opts.ask_timeout_ms)),
        ),
        policy: std::sync::RwLock::new(Arc::new(policy)),
        audit: Arc::new(audit),
        hostname: opts.hostname.clone(),
        identity,
        init: std::sync::OnceLock::new(),
        cgroups: std::sync::OnceLock::new(),
        started: Instant::now(),
        loads: std::sync::Mutex::new((Instant::now(), [0.0; 3])),
        blocking: std::sync::atomic::AtomicUsize::new(0),
        answering: std::sync::atomic::AtomicUsize::new(0),
        emulates_files: !opts.kernel_paths,
        exec_guard: std::sync::Mutex::new(exec_guard),
        asked_execs: std::sync::Mutex::new(std::collections::VecDeque::new()),
        names: dns::Names::default(),
        guards: dns::Guards::new(host_addresses),
    });
    record_start(&sup, &opts);
    if let Some(fd) = kernel_audit {
        kernel_audit::serve(fd, Arc::clone(&sup)).map_err(io_err("spawn thread"))?;
    }
    lifetime::exit_when_removed(dir_watch, Arc::clone(&sup)).map_err(io_err("spawn thread"))?;
    if let Some(views) = views {
        views::serve(views, Arc::clone(&sup)).map_err(io_err("spawn thread"))?;
    }
    let tracer = if ptrace {
        Some(Arc::new(
            ptrace::Tracer::start(Arc::clone(&sup)).map_err(io_err("start the tracer"))?,
        ))
    } else {
        None
    };

    timing.end();
    if let Some(fd) = opts.ready_fd {
        // `fd` was passed to us by `cordon create` and nothing else in this
        // process owns it.
        let mut ready = std::fs::File::from(crate::sys::process::own_fd(fd).map_err(io_err("signal readiness"))?);
        ready.write_all(b"R").map_err(io_err("signal readiness"))?;
    }
    // Off `create`'s critical path: it goes on as soon as it reads "R".
    // Only the heap: the code pages stay mapped until start-up is over
    // (see `attach`), else the container's first intercepted call waits
    // for the supervisor to fault its code back in.
    trim_heap();

    serve_attachments(&listener, &sup, watchdog, tracer)
}

/// The addresses of this (the host's) network namespace's interfaces:
/// a name may not bind them (see [`dns::Guards`]). Empty if they cannot
/// be read.
fn host_addresses() -> Vec<std::net::IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    addrs
        .filter_map(|a| {
            let a = a.address?;
            a.as_sockaddr_in()
                .map(|v4| std::net::IpAddr::V4(v4.ip()))
                .or_else(|| a.as_sockaddr_in6().map(|v6| std::net::IpAddr::V6(v6.ip())))
        })
        .collect()
}

/// Sets up what every thread inherits, before the first one starts: no
/// umask (handlers apply each caller's), no supplementary groups, and on
/// the ptrace platform (`ptrace`) SIGCHLD blocked.
fn prepare_process(ptrace: bool) -> Result<(), SupervisorError> {
    // Handlers apply each caller's umask themselves.
    crate::sys::process::umask(0);
    // Root with every capability needs no supplementary groups; without
    // them, a caller with none (container root, usually) needs no
    // setgroups(2) around each emulated access (creds.rs). Before any
    // thread starts, so glibc's process-wide call reaches every thread.
    if let Err(e) = nix::unistd::setgroups(&[]) {
        tracing::debug!("drop supplementary groups: {e}");
    }
    if ptrace {
        // The tracer reads SIGCHLD from a signalfd: block it in every
        // thread (they inherit this mask).
        let mut mask = nix::sys::signal::SigSet::empty();
        mask.add(nix::sys::signal::Signal::SIGCHLD);
        mask.thread_block().map_err(|e| io_err("block SIGCHLD")(e.into()))?;
    }
    Ok(())
}

/// The audit trail's first record: the container, its policy, platform
/// (and why it fell back to it) and enforcement level.
fn record_start(sup: &Supervisor, opts: &Options) {
    sup.audit.record(
        0,
        "supervisor",
        &format!(
            "container {} policy {} platform {}{} enforcement {}",
            opts.id,
            sup.policy().name,
            opts.platform.name(),
            opts.fallback
                .as_deref()
                .map(|why| format!(" (fallback: {why})"))
                .unwrap_or_default(),
            opts.enforcement
        ),
        Decision::Event,
        "started",
    );
}

/// Serves every process that connects to `listener`, each on an `attach`
/// thread of its own; the first is the container's init.
fn serve_attachments(
    listener: &UnixListener,
    sup: &Arc<Supervisor>,
    watchdog: Option<UnixStream>,
    tracer: Option<Arc<ptrace::Tracer>>,
) -> Result<(), SupervisorError> {
    let mut first = true;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let sup = Arc::clone(sup);
        let wd = watchdog.as_ref().and_then(|w| w.try_clone().ok());
        let tracer = tracer.clone();
        // The first connection is the init's: attach returns for it only
        // if the init never attached (on success it exits with the init).
        let init = std::mem::replace(&mut first, false);
        std::thread::Builder::new()
            .name("attach".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                attach(Arc::clone(&sup), stream, wd, tracer);
                if init {
                    lifetime::init_never_attached(&sup);
                }
            })
            .map_err(io_err("spawn thread"))?;
    }
    Ok(())
}

/// Moves the supervisor into the cgroup v1 `controllers` cgroups of the
/// container whose init is host pid `init`, so its work for the container
/// is charged to the container:
/// - `cpu` and `cpuacct`, always: the CPU it spends on the container's
///   calls (rendering views, emulating opens and connects) counts against
///   the container's quota (`cpu.cfs_quota_us`) and usage, so a container
///   limited to 0.1 CPU cannot make its supervisor burn a core;
/// - `memory`, when file syscalls come to it: what the kernel allocates
///   for the files it creates on the container's behalf (inodes, dentries)
///   is charged to the container's limit, not to the host.
///
/// Never `freezer` (the supervisor would freeze with the container and
/// could not answer a pause) nor `pids` (its threads are not the
/// container's processes). A cgroup v2 host has no separate hierarchies
/// and is left as it is (docs/SECURITY.md).
///
/// Made by the supervisor itself once the init attaches, on a thread of
/// its own: a v1 migration waits for an RCU grace period (about 13 ms
/// here), which would otherwise sit on `create`'s path. The init makes no
/// call before it attaches, so nothing is done for it before the move
/// starts; a failure is recorded in the audit trail.
fn join_cgroups(sup: &Arc<Supervisor>, init: i32, controllers: Vec<&'static str>) {
    let mover = Arc::clone(sup);
    let moved = std::thread::Builder::new()
        .name("cgroups".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            for controller in controllers {
                let r = crate::cgroupv1::dir_of(init, controller).and_then(|dir| match dir {
                    Some(dir) => std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()),
                    None => Ok(()),
                });
                if let Err(e) = r {
                    let what = format!("cannot join the container's {controller} cgroup: {e}");
                    mover.audit.record(0, "supervisor", &what, Decision::Event, "error");
                }
            }
        });
    if moved.is_err() {
        sup.audit.record(
            0,
            "supervisor",
            "cannot start the cgroup thread",
            Decision::Event,
            "error",
        );
    }
}

/// The exec guard's fanotify group ([`exec_guard`]) when the policy has
/// supervisor-level `deny` or `ask` path rules; its fd is held by the
/// watchdog (its last close happens there). A failure is recorded.
fn open_exec_guard(
    opts: &Options,
    policy: &Policy,
    audit: &audit::AuditLog,
    watchdog: Option<&UnixStream>,
) -> Option<exec_guard::ExecGuard> {
    if opts.kernel_paths || !policy.paths.refuses_some() {
        return None;
    }
    match exec_guard::ExecGuard::init() {
        Ok(g) => {
            if let Some(wd) = watchdog {
                let _ = watchdog::hold(wd, g.fanotify());
            }
            Some(g)
        }
        Err(e) => {
            let what = format!("exec guard unavailable (an exec of a denied path is not refused): {e}");
            audit.record(0, "supervisor", &what, Decision::Event, "error");
            None
        }
    }
}

/// Marks the mounts of the container whose init is host pid `init` in the
/// exec guard's group and serves it ([`exec_guard`]); a failure is
/// recorded in the audit trail.
fn mark_execs(sup: &Arc<Supervisor>, init: i32) {
    let Some(guard) = sup.exec_guard.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    if let Err(e) = guard.mark(init).and_then(|_| guard.serve(Arc::clone(sup))) {
        let what = format!("exec guard unavailable (an exec of a denied path is not refused): {e}");
        sup.audit.record(0, "supervisor", &what, Decision::Event, "error");
    }
}

/// Drops this process's page-table entries for file pages it never
/// modified (program text and read-only data of cordon and libc), so an
/// idle supervisor's resident set is what it uses, not what starting up
/// touched: the pages stay in the page cache, shared with every other
/// cordon process, and the few the serving loop needs fault back in on
/// first use (minor faults). Mappings holding any private copy of a page
/// (relocated data, "Anonymous:" in smaps) are left alone, since
/// MADV_DONTNEED would revert those to the file's contents.
///
/// Source: madvise(2) MADV_DONTNEED; proc(5) /proc/pid/smaps.
fn trim_file_pages() {
    trim_heap();
    crate::sys::process::drop_clean_file_pages();
}

/// Parsing and compiling the policy freed far more heap than the
/// supervisor keeps; glibc returns free pages to the kernel on request
/// (malloc_trim(3)).
fn trim_heap() {
    crate::sys::process::malloc_trim();
}

/// Serves one attaching process: takes its listener and starts a receiver
/// (seccomp-notify), or has the tracer seize it (ptrace).
fn attach(
    sup: Arc<Supervisor>,
    mut stream: UnixStream,
    watchdog: Option<UnixStream>,
    tracer: Option<Arc<ptrace::Tracer>>,
) {
    let Some(att) = accept_process(&sup, &mut stream) else {
        return;
    };
    let traced = match (att.listener, &tracer) {
        (Some(listener), _) => {
            if let Err(e) = sys_set_sync_wakeup(&listener) {
                tracing::debug!("SYNC_WAKE_UP unavailable: {e}");
            }
            let listener = Arc::new(listener);
            let sup = Arc::clone(&sup);
            if std::thread::Builder::new()
                .name("notify".into())
                .stack_size(512 * 1024)
                .spawn(move || notify::serve(&sup, &listener))
                .is_err()
            {
                return;
            }
            false
        }
        (None, Some(tracer)) => {
            let seized = crate::sys::ptrace::pidfd_pid(att.pidfd.as_fd()).and_then(|pid| tracer.seize(pid));
            if let Err(e) = seized {
                sup.audit
                    .record(0, "supervisor", &format!("seize failed: {e}"), Decision::Event, "error");
                return;
            }
            true
        }
        (None, None) => {
            sup.audit.record(
                0,
                "supervisor",
                "a process asked for the ptrace platform of a seccomp-notify container",
                Decision::Event,
                "error",
            );
            return;
        }
    };
    if att.role == handshake::Role::Init {
        if let Ok(pid) = crate::sys::ptrace::pidfd_pid(att.pidfd.as_fd()) {
            let _ = sup.init.set(pid);
        }
        if let Some(wd) = watchdog {
            let _ = watchdog::arm(&wd, att.pidfd.as_fd());
            // Keep the watchdog connection open for the process lifetime.
            std::mem::forget(wd);
        }
        if let Ok(pid) = crate::sys::ptrace::pidfd_pid(att.pidfd.as_fd()) {
            let mut controllers = vec!["cpu", "cpuacct"];
            if sup.emulates_files {
                controllers.push("memory");
            }
            join_cgroups(&sup, pid, controllers);
            // Before the ack: the init's own exec is the first one held.
            mark_execs(&sup, pid);
        }
    }
    let acked = if traced {
        handshake::ack_traced(&mut stream)
    } else {
        handshake::ack(&mut stream)
    };
    if acked.is_err() {
        return;
    }
    drop(stream);
    if att.role == handshake::Role::Init {
        // While the init starts (off its path: it runs on once acked):
        // what the views and sysinfo read first.
        let _ = sup.cgroups(0);
        // Start-up is over once the init has run a moment (its first calls
        // served, every thread started): what the serving threads need from
        // then on faults back in.
        if !exited_within(att.pidfd.as_fd(), PollTimeout::from(300u16)) {
            trim_file_pages();
            exited_within(att.pidfd.as_fd(), PollTimeout::NONE);
        }
        sup.settle(std::time::Duration::from_secs(1));
        relay::settle(std::time::Duration::from_secs(2));
        kernel_audit::drain(&sup);
        sup.audit
            .record(0, "supervisor", "container init exited", Decision::Event, "exit");
        std::process::exit(0);
    }
}

/// Reads what arrives on `stream`: a process attaching (returned), or
/// served here: the resolver's sockets, a policy update; an error is
/// recorded.
fn accept_process(sup: &Arc<Supervisor>, stream: &mut UnixStream) -> Option<handshake::Attached> {
    match handshake::accept(stream) {
        Ok(handshake::Incoming::Process(a)) => Some(a),
        Ok(handshake::Incoming::Resolver(h)) => {
            start_resolver(sup, h, stream);
            None
        }
        Ok(handshake::Incoming::Update(name, text)) => {
            update::serve(sup, &name, &text, stream);
            None
        }
        Err(e) => {
            sup.audit.record(
                0,
                "supervisor",
                &format!("attach failed: {e}"),
                Decision::Event,
                "error",
            );
            None
        }
    }
}

/// Starts the resolver on the sockets `create` handed over (once, and
/// only under a policy with `host` rules), then answers `create`.
fn start_resolver(sup: &Arc<Supervisor>, h: dns::Handover, stream: &mut UnixStream) {
    static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !sup.policy().net.has_names() || STARTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        sup.audit.record(
            0,
            "supervisor",
            "unexpected resolver handover refused",
            Decision::Event,
            "error",
        );
        return;
    }
    let what = format!(
        "resolver at {} for nameservers {}",
        h.address,
        h.nameservers
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
    match dns::serve(sup, h) {
        Ok(()) => {
            sup.audit.record(0, "supervisor", &what, Decision::Event, "started");
            let _ = handshake::ack(stream);
        }
        Err(e) => sup
            .audit
            .record(0, "supervisor", &format!("{what}: {e}"), Decision::Event, "error"),
    }
}

fn sys_set_sync_wakeup(listener: &OwnedFd) -> std::io::Result<()> {
    crate::sys::notif_set_sync_wakeup(listener.as_fd())
}

/// Whether the process behind `pidfd` exits (the pidfd polls readable)
/// within `timeout`; with [`PollTimeout::NONE`], waits until it does.
fn exited_within(pidfd: std::os::fd::BorrowedFd<'_>, timeout: PollTimeout) -> bool {
    let mut pfd = [nix::poll::PollFd::new(pidfd, nix::poll::PollFlags::POLLIN)];
    loop {
        match nix::poll::poll(&mut pfd, timeout) {
            Err(nix::errno::Errno::EINTR) => continue,
            r => return matches!(r, Ok(n) if n > 0),
        }
    }
}

/// The socket path of container dir `dir`.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET)
}

/// Runs `f` with a short path to `dir/<SOCKET>`: `/proc/self/fd/<dirfd>/...`.
/// A unix socket path holds at most 107 bytes, and engines use long state
/// roots and 64-character ids (Docker: `/var/run/docker/runtime-runc/moby/<id>`).
fn via_short_path<T>(dir: &Path, f: impl FnOnce(&Path) -> std::io::Result<T>) -> std::io::Result<T> {
    let d = std::fs::File::open(dir)?;
    f(&socket_path(Path::new(&format!("/proc/self/fd/{}", d.as_raw_fd()))))
}

/// Binds the supervisor's socket in container dir `dir` (replacing a stale
/// one), readable by root only.
///
/// Errors: [`SupervisorError::Io`] naming the step.
pub fn bind(dir: &Path) -> Result<UnixListener, SupervisorError> {
    let sock_path = socket_path(dir);
    let _ = std::fs::remove_file(&sock_path);
    let listener =
        via_short_path(dir, |p| UnixListener::bind(p)).map_err(io_err(format!("bind {}", sock_path.display())))?;
    std::fs::set_permissions(&sock_path, std::fs::Permissions::from_mode(0o600)).map_err(io_err("chmod socket"))?;
    Ok(listener)
}

/// Connects to the supervisor of container dir `dir`.
pub fn connect(dir: &Path) -> std::io::Result<UnixStream> {
    via_short_path(dir, |p| UnixStream::connect(p))
}
