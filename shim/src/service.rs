//! The task API (containerd `runtime/v2/task/shim.proto`) on the cordon
//! runtime library: one container, its init and its exec processes.
//!
//! Process exits are watched by pidfd (poll, then `waitid(P_PIDFD)`),
//! recorded, woken to `Wait` callers and published as `/tasks/exit`.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use containerd_shim::api;
use containerd_shim::protos::events::task::{
    TaskCreate, TaskDelete, TaskExecAdded, TaskExecStarted, TaskExit, TaskIO, TaskPaused, TaskResumed, TaskStart,
};
use containerd_shim::protos::protobuf::well_known_types::timestamp::Timestamp;
use containerd_shim::protos::protobuf::{Message, MessageDyn, MessageField};
use containerd_shim::protos::topics;
use containerd_shim::protos::ttrpc::{self, Code};
use containerd_shim::publisher::RemotePublisher;
use containerd_shim::{Context, DeleteResponse, ExitSignal, Flags, StartOpts, TtrpcContext, TtrpcResult};
use cordon::container::{CreateOptions, Error as RtError, ExecOptions, Runtime};

use crate::io::{self, ProcessIo, StdioPaths};

/// Where the shim keeps container state: one cordon root per containerd
/// namespace, as containerd-shim-runc-v2 uses /run/containerd/runc/<ns>.
/// The runtime options' `Root` (runc's Options, as CRI's
/// `options.Root`) or `$CORDON_SHIM_ROOT` move it.
pub(crate) const STATE_ROOT: &str = "/run/containerd/cordon";
/// Environment variable replacing [`STATE_ROOT`].
const ROOT_ENV: &str = "CORDON_SHIM_ROOT";

/// The directory that holds the per-namespace roots: `$CORDON_SHIM_ROOT`,
/// else [`STATE_ROOT`].
pub(crate) fn base_root() -> PathBuf {
    std::env::var_os(ROOT_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(STATE_ROOT))
}
/// File in the bundle that remembers the root, for the `delete` action.
const ROOT_FILE: &str = "cordon-root";

fn state_root(namespace: &str, options_root: Option<&str>) -> PathBuf {
    match options_root {
        Some(r) if !r.is_empty() => Path::new(r).join(namespace),
        _ => base_root().join(namespace),
    }
}

/// The runtime config file of this runtime name: `ConfigPath` of
/// containerd's `runtimeoptions.v1.Options` (field 2, a string), which CRI
/// sends for a runtime type it has no options type of, such as
/// `io.containerd.cordon.v2` (a runtime's `options.ConfigPath` in
/// containerd's config). `None` for other options or an empty path.
fn config_path(any: &containerd_shim::protos::protobuf::well_known_types::any::Any) -> Option<PathBuf> {
    use containerd_shim::protos::protobuf::rt::WireType;
    use containerd_shim::protos::protobuf::CodedInputStream;
    if !any.type_url.ends_with("runtimeoptions.v1.Options") {
        return None;
    }
    let mut is = CodedInputStream::from_bytes(&any.value);
    let mut path = None;
    while let Ok(Some(tag)) = is.read_raw_tag_or_eof() {
        let wire = WireType::new(tag & 7)?;
        if tag >> 3 == 2 && wire == WireType::LengthDelimited {
            path = Some(is.read_string().ok()?);
        } else if is.skip_field(wire).is_err() {
            return None;
        }
    }
    path.filter(|p| !p.is_empty()).map(PathBuf::from)
}

fn err(code: Code, msg: impl Into<String>) -> ttrpc::Error {
    ttrpc::Error::RpcStatus(ttrpc::get_status(code, msg.into()))
}

/// Whether a task Checkpoint's options are runc's `CheckpointOptions` with
/// `exit` set (a client that sends runc's options to any runtime; `ctr`
/// sends them only to runc's).
fn exit_asked(options: Option<&containerd_shim::protos::protobuf::well_known_types::any::Any>) -> bool {
    options
        .filter(|a| a.type_url.ends_with("containerd.runc.v1.CheckpointOptions"))
        .and_then(|a| containerd_shim::protos::shim::oci::CheckpointOptions::parse_from_bytes(&a.value).ok())
        .is_some_and(|o| o.exit)
}

/// The file a task Checkpoint writes in containerd's checkpoint
/// directory: the cordon checkpoint's name and figures, as JSON.
pub const CHECKPOINT_RECORD: &str = "cordon-checkpoint.json";

fn rt_err(e: RtError) -> ttrpc::Error {
    let code = match &e {
        RtError::NotFound(_) => Code::NOT_FOUND,
        RtError::Exists(_) => Code::ALREADY_EXISTS,
        RtError::BadState { .. } => Code::FAILED_PRECONDITION,
        RtError::Validate(_) | RtError::Policy(_) | RtError::Config(_) => Code::INVALID_ARGUMENT,
        _ => Code::UNKNOWN,
    };
    err(code, cordon::container::chain(&e))
}

fn now() -> Timestamp {
    containerd_shim::util::timestamp().unwrap_or_default()
}

/// The shim's life cycle part (`start`, `delete`, serve).
pub struct Shim {
    exit: Arc<ExitSignal>,
    namespace: String,
    id: String,
}

impl containerd_shim::Shim for Shim {
    type T = Service;

    fn new(_runtime_id: &str, args: &Flags, _config: &mut containerd_shim::Config) -> Self {
        Shim {
            exit: Arc::new(ExitSignal::default()),
            namespace: args.namespace.clone(),
            id: args.id.clone(),
        }
    }

    fn start_shim(&mut self, opts: StartOpts) -> containerd_shim::Result<String> {
        // One shim per container.
        let grouping = opts.id.clone();
        let (_pid, address) = containerd_shim::spawn(opts, &grouping, Vec::new())?;
        containerd_shim::util::write_address(&address)?;
        Ok(address)
    }

    /// The `delete` action: containerd cleans up after a shim that died.
    /// Kills and deletes the container and unmounts its rootfs (cwd is the
    /// bundle).
    fn delete_shim(&mut self) -> containerd_shim::Result<DeleteResponse> {
        let cwd = std::env::current_dir().unwrap_or_default();
        let root = std::fs::read_to_string(cwd.join(ROOT_FILE))
            .map(|r| PathBuf::from(r.trim()))
            .unwrap_or_else(|_| state_root(&self.namespace, None));
        if let Ok(rt) = Runtime::new(&root, false) {
            let _ = rt.delete(&self.id, true);
        }
        unmount_rootfs(&cwd.join("rootfs"));
        // The killed shim's socket (its `address` file names it).
        if let Ok(addr) = std::fs::read_to_string(cwd.join("address")) {
            let path = addr.trim().trim_start_matches("unix://").to_string();
            use std::os::unix::fs::FileTypeExt;
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket()) {
                let _ = std::fs::remove_file(&path);
            }
        }
        Ok(DeleteResponse {
            exit_status: 128 + libc::SIGKILL as u32,
            exited_at: MessageField::some(now()),
            ..Default::default()
        })
    }

    fn wait(&mut self) {
        self.exit.wait();
    }

    fn create_task_service(&self, publisher: RemotePublisher) -> Service {
        Service {
            inner: Arc::new(Inner {
                namespace: self.namespace.clone(),
                exit: self.exit.clone(),
                publisher,
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
            }),
        }
    }
}

/// The task service.
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

struct Inner {
    namespace: String,
    exit: Arc<ExitSignal>,
    publisher: RemotePublisher,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    container: Option<Task>,
}

struct Task {
    id: String,
    bundle: PathBuf,
    rt: Runtime,
    /// Whether the shim mounted the rootfs (and unmounts it at delete).
    mounted_rootfs: bool,
    init: Proc,
    execs: HashMap<String, Proc>,
}

#[derive(Default)]
struct Proc {
    pid: i32,
    pidfd: Option<Arc<OwnedFd>>,
    stdio: StdioPaths,
    started: bool,
    exit: Option<(u32, Timestamp)>,
    io: Option<ProcessIo>,
    /// An exec's process (runtime-spec Process JSON) until it starts.
    spec: Option<Vec<u8>>,
}

impl Proc {
    fn status(&self) -> api::Status {
        if self.exit.is_some() {
            api::Status::STOPPED
        } else if self.started {
            api::Status::RUNNING
        } else {
            api::Status::CREATED
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, topic: &str, event: Box<dyn MessageDyn>) {
        if let Err(e) = self
            .publisher
            .publish(Context::default(), topic, &self.namespace, event)
        {
            log::warn!("publish {topic}: {e}");
        }
    }

    /// Watches `pid` (already a child of the shim, by the subreaper) and
    /// records its exit status (128+N for signal N, as runc reports).
    fn watch(self: &Arc<Self>, exec_id: String, pid: i32, pidfd: Arc<OwnedFd>) {
        let inner = self.clone();
        std::thread::spawn(move || {
            let mut pfd = [nix::poll::PollFd::new(pidfd.as_fd(), nix::poll::PollFlags::POLLIN)];
            while let Err(nix::errno::Errno::EINTR) = nix::poll::poll(&mut pfd, nix::poll::PollTimeout::NONE) {}
            use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
            let code = match waitid(Id::PIDFd(pidfd.as_fd()), WaitPidFlag::WEXITED) {
                Ok(WaitStatus::Exited(_, c)) => c as u32,
                Ok(WaitStatus::Signaled(_, s, _)) => 128 + s as u32,
                // Not our child after all: the status is lost.
                _ => 255,
            };
            let at = now();
            let cid = {
                let mut st = inner.lock();
                let Some(t) = st.container.as_mut() else { return };
                let p = if exec_id.is_empty() {
                    Some(&mut t.init)
                } else {
                    t.execs.get_mut(&exec_id)
                };
                if let Some(p) = p {
                    p.exit = Some((code, at.clone()));
                }
                t.id.clone()
            };
            inner.changed.notify_all();
            let id = if exec_id.is_empty() { cid.clone() } else { exec_id };
            inner.publish(
                topics::TASK_EXIT_EVENT_TOPIC,
                Box::new(TaskExit {
                    container_id: cid,
                    id,
                    pid: pid as u32,
                    exit_status: code,
                    exited_at: MessageField::some(at),
                    ..Default::default()
                }),
            );
        });
    }
}

/// Mounts one of containerd's rootfs mounts (`types.Mount`: overlay from
/// the snapshotter, or a bind) on `target`, as mount(8) would from its
/// options. The containerd-shim crate's helper forks and waits through
/// its reaper, which this shim does not run.
fn mount_one(typ: &str, source: &str, options: &[String], target: &Path) -> nix::Result<()> {
    use nix::mount::MsFlags as F;
    let mut flags = F::empty();
    let mut data = Vec::new();
    for o in options {
        match o.as_str() {
            "ro" => flags |= F::MS_RDONLY,
            "rw" => flags &= !F::MS_RDONLY,
            "nosuid" => flags |= F::MS_NOSUID,
            "nodev" => flags |= F::MS_NODEV,
            "noexec" => flags |= F::MS_NOEXEC,
            "bind" => flags |= F::MS_BIND,
            "rbind" => flags |= F::MS_BIND | F::MS_REC,
            "noatime" => flags |= F::MS_NOATIME,
            "relatime" => flags |= F::MS_RELATIME,
            "sync" => flags |= F::MS_SYNCHRONOUS,
            "suid" | "dev" | "exec" | "async" | "defaults" => {}
            other => data.push(other.to_string()),
        }
    }
    let data = data.join(",");
    let fstype = (!typ.is_empty() && typ != "bind").then_some(typ);
    let src = (!source.is_empty()).then_some(source);
    let dat = (!data.is_empty()).then_some(data.as_str());
    nix::mount::mount(src, target, fstype, flags, dat)?;
    // A read-only bind needs a remount to take effect.
    if flags.contains(F::MS_BIND) && flags.contains(F::MS_RDONLY) {
        nix::mount::mount(None::<&str>, target, None::<&str>, flags | F::MS_REMOUNT, None::<&str>)?;
    }
    Ok(())
}

fn unmount_rootfs(rootfs: &Path) {
    while nix::mount::umount2(rootfs, nix::mount::MntFlags::MNT_DETACH).is_ok() {}
}

/// Reaps the shim's zombie children that no watcher tracks: the shim does
/// not reap every child (libcontainer waits for its own), but processes
/// libcontainer forked for a create or exec that failed are left to the
/// subreaper, and a zombie of the container's pid namespace keeps its init
/// from ever finishing its exit. Runs under the state lock, so no build
/// is in progress.
fn reap_strays(tracked: &[i32]) {
    let me = std::process::id();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{me}/task")) else {
        return;
    };
    let children: Vec<i32> = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect();
    for pid in children {
        if tracked.contains(&pid) {
            continue;
        }
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
            .unwrap_or(false);
        if zombie {
            let _ = nix::sys::wait::waitpid(
                nix::unistd::Pid::from_raw(pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
    }
}

impl Task {
    /// Pids a watcher waits for (never reaped by [`reap_strays`]).
    fn tracked(&self) -> Vec<i32> {
        let mut v = vec![self.init.pid];
        v.extend(self.execs.values().map(|p| p.pid));
        v
    }
}

fn watch_pid(pid: i32) -> ttrpc::Result<Arc<OwnedFd>> {
    cordon::sys::pidfd_open(pid)
        .map(Arc::new)
        .map_err(|e| err(Code::INTERNAL, format!("pidfd_open {pid}: {e}")))
}

impl Service {
    fn with_task<T>(&self, id: &str, f: impl FnOnce(&mut Task) -> ttrpc::Result<T>) -> ttrpc::Result<T> {
        let mut st = self.inner.lock();
        match st.container.as_mut() {
            Some(t) if t.id == id => f(t),
            _ => Err(err(Code::NOT_FOUND, format!("container {id:?} not found in this shim"))),
        }
    }

    fn create_task(&self, req: &api::CreateTaskRequest) -> ttrpc::Result<api::CreateTaskResponse> {
        let mut st = self.inner.lock();
        if st.container.is_some() {
            return Err(err(Code::ALREADY_EXISTS, "this shim already has a container"));
        }
        if !req.checkpoint.is_empty() {
            return Err(err(Code::UNIMPLEMENTED, "cordon does not restore checkpoints"));
        }
        let options = req
            .options
            .as_ref()
            .filter(|a| a.type_url.ends_with("containerd.runc.v1.Options"))
            .and_then(|a| api::Options::parse_from_bytes(&a.value).ok())
            .unwrap_or_default();
        let root = state_root(&self.inner.namespace, Some(&options.root));
        let mut rt = Runtime::new(&root, options.systemd_cgroup).map_err(rt_err)?;
        if let Some(path) = req.options.as_ref().and_then(config_path) {
            rt.config = cordon::config::RuntimeConfig::load_from(&path).map_err(|e| rt_err(e.into()))?;
        }
        let bundle = PathBuf::from(&req.bundle);
        let _ = std::fs::write(bundle.join(ROOT_FILE), rt.root.display().to_string());
        let rootfs = bundle.join("rootfs");
        let mut mounted = false;
        for m in &req.rootfs {
            std::fs::create_dir_all(&rootfs).map_err(|e| err(Code::INTERNAL, format!("mkdir rootfs: {e}")))?;
            if let Err(e) = mount_one(&m.type_, &m.source, &m.options, &rootfs) {
                unmount_rootfs(&rootfs);
                return Err(err(Code::INTERNAL, format!("mount rootfs ({}): {e}", m.type_)));
            }
            mounted = true;
        }
        let stdio = StdioPaths {
            stdin: req.stdin.clone(),
            stdout: req.stdout.clone(),
            stderr: req.stderr.clone(),
            terminal: req.terminal,
        };
        let fail = |e: ttrpc::Error| {
            if mounted {
                unmount_rootfs(&rootfs);
            }
            e
        };
        let prepared =
            io::prepare(&stdio, &root, &req.id).map_err(|e| fail(err(Code::INTERNAL, format!("set up stdio: {e}"))))?;
        let created = rt.create(&CreateOptions {
            id: req.id.clone(),
            bundle: bundle.clone(),
            console_socket: prepared.console.as_ref().map(|c| c.path.clone()),
            detach: true,
            stdio: prepared.stdio.clone(),
            ..Default::default()
        });
        let container = created.map_err(|e| {
            reap_strays(&[]);
            fail(rt_err(e))
        })?;
        let pid = container.pid().map(|p| p.as_raw()).unwrap_or(0);
        let io = match prepared.connect() {
            Ok(io) => io,
            Err(e) => {
                let _ = rt.delete(&req.id, true);
                return Err(fail(err(Code::INTERNAL, format!("connect stdio: {e}"))));
            }
        };
        let pidfd = match watch_pid(pid) {
            Ok(fd) => fd,
            Err(e) => {
                let _ = rt.delete(&req.id, true);
                return Err(fail(e));
            }
        };
        st.container = Some(Task {
            id: req.id.clone(),
            bundle,
            rt,
            mounted_rootfs: mounted,
            init: Proc {
                pid,
                pidfd: Some(pidfd.clone()),
                stdio,
                io: Some(io),
                ..Default::default()
            },
            execs: HashMap::new(),
        });
        drop(st);
        self.inner.watch(String::new(), pid, pidfd);
        self.inner.publish(
            topics::TASK_CREATE_EVENT_TOPIC,
            Box::new(TaskCreate {
                container_id: req.id.clone(),
                bundle: req.bundle.clone(),
                rootfs: req.rootfs.clone(),
                io: MessageField::some(TaskIO {
                    stdin: req.stdin.clone(),
                    stdout: req.stdout.clone(),
                    stderr: req.stderr.clone(),
                    terminal: req.terminal,
                    ..Default::default()
                }),
                pid: pid as u32,
                ..Default::default()
            }),
        );
        Ok(api::CreateTaskResponse {
            pid: pid as u32,
            ..Default::default()
        })
    }

    fn start_exec(&self, t: &mut Task, exec_id: &str) -> ttrpc::Result<(i32, Arc<OwnedFd>)> {
        let p = t
            .execs
            .get_mut(exec_id)
            .ok_or_else(|| err(Code::NOT_FOUND, format!("exec {exec_id:?} not found")))?;
        if p.started {
            return Err(err(
                Code::FAILED_PRECONDITION,
                format!("exec {exec_id:?} already started"),
            ));
        }
        let spec = p.spec.take().unwrap_or_default();
        let dir = t.rt.cordon_dir(&t.id);
        let file = dir.join(format!("exec-{exec_id}.json"));
        std::fs::write(&file, &spec).map_err(|e| err(Code::INTERNAL, format!("write exec process: {e}")))?;
        let prepared = io::prepare(&p.stdio, &dir, exec_id);
        let prepared = match prepared {
            Ok(x) => x,
            Err(e) => {
                let _ = std::fs::remove_file(&file);
                return Err(err(Code::INTERNAL, format!("set up stdio: {e}")));
            }
        };
        let res = t.rt.exec(&ExecOptions {
            id: t.id.clone(),
            process: Some(file.clone()),
            console_socket: prepared.console.as_ref().map(|c| c.path.clone()),
            detach: true,
            stdio: prepared.stdio.clone(),
            ..Default::default()
        });
        let _ = std::fs::remove_file(&file);
        let pid = res.map_err(rt_err)?.as_raw();
        let pidfd = watch_pid(pid)?;
        p.io = Some(
            prepared
                .connect()
                .map_err(|e| err(Code::INTERNAL, format!("connect stdio: {e}")))?,
        );
        p.pid = pid;
        p.pidfd = Some(pidfd.clone());
        p.started = true;
        Ok((pid, pidfd))
    }
}

fn proc_mut<'a>(t: &'a mut Task, exec_id: &str) -> ttrpc::Result<&'a mut Proc> {
    if exec_id.is_empty() {
        Ok(&mut t.init)
    } else {
        t.execs
            .get_mut(exec_id)
            .ok_or_else(|| err(Code::NOT_FOUND, format!("exec {exec_id:?} not found")))
    }
}

fn status_of(t: &Task) -> api::Status {
    if t.init.exit.is_some() {
        return api::Status::STOPPED;
    }
    match t.rt.state(&t.id).map(|s| s.status) {
        Ok(s) if s == "created" => api::Status::CREATED,
        Ok(s) if s == "running" => api::Status::RUNNING,
        Ok(s) if s == "paused" => api::Status::PAUSED,
        Ok(s) if s == "pausing" => api::Status::PAUSING,
        Ok(_) => api::Status::STOPPED,
        Err(_) => api::Status::UNKNOWN,
    }
}

/// cgroup statistics (`cordon events --stats` data) as containerd's
/// cgroups v1 Metrics message.
fn metrics(stats: &serde_json::Value) -> containerd_shim::protos::cgroups::metrics::Metrics {
    use containerd_shim::protos::cgroups::metrics::*;
    let d = &stats["data"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    Metrics {
        pids: MessageField::some(PidsStat {
            current: n(&d["pids"]["current"]),
            limit: n(&d["pids"]["limit"]),
            ..Default::default()
        }),
        cpu: MessageField::some(CPUStat {
            usage: MessageField::some(CPUUsage {
                total: n(&d["cpu"]["usage"]["usage_total"]),
                kernel: n(&d["cpu"]["usage"]["usage_kernel"]),
                user: n(&d["cpu"]["usage"]["usage_user"]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        memory: MessageField::some(MemoryStat {
            cache: n(&d["memory"]["cache"]),
            usage: MessageField::some(MemoryEntry {
                usage: n(&d["memory"]["memory"]["usage"]),
                max: n(&d["memory"]["memory"]["max_usage"]),
                limit: n(&d["memory"]["memory"]["limit"]),
                failcnt: n(&d["memory"]["memory"]["fail_count"]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl containerd_shim::Task for Service {
    fn state(&self, _ctx: &TtrpcContext, req: api::StateRequest) -> TtrpcResult<api::StateResponse> {
        self.with_task(&req.id, |t| {
            let status = if req.exec_id.is_empty() {
                status_of(t)
            } else {
                proc_mut(t, &req.exec_id)?.status()
            };
            let bundle = t.bundle.display().to_string();
            let p = proc_mut(t, &req.exec_id)?;
            let (exit_status, exited_at) = p
                .exit
                .clone()
                .map(|(c, at)| (c, MessageField::some(at)))
                .unwrap_or_default();
            Ok(api::StateResponse {
                id: req.id.clone(),
                exec_id: req.exec_id.clone(),
                bundle,
                pid: p.pid as u32,
                status: status.into(),
                stdin: p.stdio.stdin.clone(),
                stdout: p.stdio.stdout.clone(),
                stderr: p.stdio.stderr.clone(),
                terminal: p.stdio.terminal,
                exit_status,
                exited_at,
                ..Default::default()
            })
        })
    }

    fn create(&self, _ctx: &TtrpcContext, req: api::CreateTaskRequest) -> TtrpcResult<api::CreateTaskResponse> {
        log::info!("create {} in {}", req.id, req.bundle);
        self.create_task(&req)
    }

    fn start(&self, _ctx: &TtrpcContext, req: api::StartRequest) -> TtrpcResult<api::StartResponse> {
        if req.exec_id.is_empty() {
            let pid = self.with_task(&req.id, |t| {
                t.rt.start(&t.id).map_err(rt_err)?;
                t.init.started = true;
                Ok(t.init.pid)
            })?;
            self.inner.publish(
                topics::TASK_START_EVENT_TOPIC,
                Box::new(TaskStart {
                    container_id: req.id.clone(),
                    pid: pid as u32,
                    ..Default::default()
                }),
            );
            return Ok(api::StartResponse {
                pid: pid as u32,
                ..Default::default()
            });
        }
        let (pid, pidfd) = self.with_task(&req.id, |t| {
            let r = self.start_exec(t, &req.exec_id);
            reap_strays(&t.tracked());
            r
        })?;
        self.inner.watch(req.exec_id.clone(), pid, pidfd);
        self.inner.publish(
            topics::TASK_EXEC_STARTED_EVENT_TOPIC,
            Box::new(TaskExecStarted {
                container_id: req.id.clone(),
                exec_id: req.exec_id.clone(),
                pid: pid as u32,
                ..Default::default()
            }),
        );
        Ok(api::StartResponse {
            pid: pid as u32,
            ..Default::default()
        })
    }

    fn delete(&self, _ctx: &TtrpcContext, req: api::DeleteRequest) -> TtrpcResult<api::DeleteResponse> {
        let mut st = self.inner.lock();
        let Some(t) = st.container.as_mut().filter(|t| t.id == req.id) else {
            return Err(err(
                Code::NOT_FOUND,
                format!("container {:?} not found in this shim", req.id),
            ));
        };
        let grace = std::time::Duration::from_secs(2);
        if !req.exec_id.is_empty() {
            let p = proc_mut(t, &req.exec_id)?;
            if p.started && p.exit.is_none() {
                return Err(err(
                    Code::FAILED_PRECONDITION,
                    format!("exec {:?} is running", req.exec_id),
                ));
            }
            let mut p = t.execs.remove(&req.exec_id).unwrap_or_default();
            if let Some(io) = p.io.as_mut() {
                io.wait_output(grace);
            }
            let (code, at) = p.exit.unwrap_or_default();
            return Ok(api::DeleteResponse {
                pid: p.pid as u32,
                exit_status: code,
                exited_at: MessageField::some(at),
                ..Default::default()
            });
        }
        if t.init.started && t.init.exit.is_none() && t.rt.is_alive(&t.id) {
            return Err(err(
                Code::FAILED_PRECONDITION,
                format!("container {:?} is running", req.id),
            ));
        }
        let supervisor = t.rt.meta(&t.id).supervisor_pid;
        t.rt.delete(&t.id, true).map_err(rt_err)?;
        if let Some(pid) = supervisor {
            // The supervisor is the shim's child: reap it.
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        }
        if let Some(io) = t.init.io.as_mut() {
            io.wait_output(grace);
        }
        if t.mounted_rootfs {
            unmount_rootfs(&t.bundle.join("rootfs"));
        }
        let t = st.container.take().expect("checked above");
        drop(st);
        // An init deleted before it ran has no exit status: it was killed.
        let (code, at) = t
            .init
            .exit
            .clone()
            .unwrap_or_else(|| (128 + libc::SIGKILL as u32, now()));
        self.inner.changed.notify_all();
        self.inner.publish(
            topics::TASK_DELETE_EVENT_TOPIC,
            Box::new(TaskDelete {
                container_id: t.id.clone(),
                pid: t.init.pid as u32,
                exit_status: code,
                exited_at: MessageField::some(at.clone()),
                ..Default::default()
            }),
        );
        Ok(api::DeleteResponse {
            pid: t.init.pid as u32,
            exit_status: code,
            exited_at: MessageField::some(at),
            ..Default::default()
        })
    }

    fn pids(&self, _ctx: &TtrpcContext, req: api::PidsRequest) -> TtrpcResult<api::PidsResponse> {
        self.with_task(&req.id, |t| {
            let pids = t.rt.pids(&t.id).map_err(rt_err)?;
            Ok(api::PidsResponse {
                processes: pids
                    .into_iter()
                    .map(|pid| containerd_shim::protos::types::task::ProcessInfo {
                        pid: pid as u32,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
        })
    }

    fn pause(&self, _ctx: &TtrpcContext, req: api::PauseRequest) -> TtrpcResult<api::Empty> {
        self.with_task(&req.id, |t| t.rt.pause(&t.id).map_err(rt_err))?;
        self.inner.publish(
            topics::TASK_PAUSED_EVENT_TOPIC,
            Box::new(TaskPaused {
                container_id: req.id.clone(),
                ..Default::default()
            }),
        );
        Ok(api::Empty::new())
    }

    fn resume(&self, _ctx: &TtrpcContext, req: api::ResumeRequest) -> TtrpcResult<api::Empty> {
        self.with_task(&req.id, |t| t.rt.resume(&t.id).map_err(rt_err))?;
        self.inner.publish(
            topics::TASK_RESUMED_EVENT_TOPIC,
            Box::new(TaskResumed {
                container_id: req.id.clone(),
                ..Default::default()
            }),
        );
        Ok(api::Empty::new())
    }

    /// containerd's task Checkpoint (`ctr task checkpoint`, the CRI's
    /// checkpoint): a cordon checkpoint of the container's writable layer
    /// (docs/CHECKPOINT.md: files, not process memory), whose name and
    /// figures go to `path/cordon-checkpoint.json`, which containerd packs
    /// into the checkpoint's content (its `MediaTypeContainerd1Checkpoint`
    /// descriptor). runc's `CheckpointOptions.exit`, from a client that
    /// sends it, stops the container afterwards as runc does; its CRIU
    /// options do not apply.
    fn checkpoint(&self, _ctx: &TtrpcContext, req: api::CheckpointTaskRequest) -> TtrpcResult<api::Empty> {
        let exit = exit_asked(req.options.as_ref());
        let info = self.with_task(&req.id, |t| {
            let info = t.rt.checkpoint(&t.id, None).map_err(rt_err)?;
            if exit {
                t.rt.kill(
                    &t.id,
                    libcontainer::signal::Signal::try_from(libc::SIGKILL)
                        .map_err(|e| err(Code::INTERNAL, e.to_string()))?,
                    true,
                )
                .map_err(rt_err)?;
            }
            Ok(info)
        })?;
        if !req.path.is_empty() {
            let record = serde_json::json!({
                "container": req.id,
                "checkpoint": info.name,
                "created": info.created,
                "parent": info.parent,
                "size": info.size,
                "files": info.files,
                "frozen_ms": info.frozen_ms,
            });
            let file = Path::new(&req.path).join(CHECKPOINT_RECORD);
            std::fs::create_dir_all(&req.path)
                .and_then(|()| std::fs::write(&file, serde_json::to_vec_pretty(&record).unwrap_or_default()))
                .map_err(|e| err(Code::INTERNAL, format!("write {}: {e}", file.display())))?;
        }
        Ok(api::Empty::new())
    }

    fn kill(&self, _ctx: &TtrpcContext, req: api::KillRequest) -> TtrpcResult<api::Empty> {
        self.with_task(&req.id, |t| {
            reap_strays(&t.tracked());
            if req.exec_id.is_empty() {
                if t.init.exit.is_some() && !req.all {
                    return Err(err(Code::NOT_FOUND, "process already finished"));
                }
                let sig = libcontainer::signal::Signal::try_from(req.signal as i32)
                    .map_err(|_| err(Code::INVALID_ARGUMENT, format!("invalid signal {}", req.signal)))?;
                return t.rt.kill(&t.id, sig, req.all).map_err(rt_err);
            }
            let p = proc_mut(t, &req.exec_id)?;
            match (&p.pidfd, &p.exit) {
                (Some(fd), None) => cordon::sys::pidfd_send_signal(fd.as_fd(), req.signal as i32)
                    .map_err(|e| err(Code::UNKNOWN, format!("kill exec {:?}: {e}", req.exec_id))),
                _ => Err(err(Code::NOT_FOUND, "process already finished")),
            }
        })?;
        Ok(api::Empty::new())
    }

    fn exec(&self, _ctx: &TtrpcContext, req: api::ExecProcessRequest) -> TtrpcResult<api::Empty> {
        self.with_task(&req.id, |t| {
            if t.execs.contains_key(&req.exec_id) {
                return Err(err(
                    Code::ALREADY_EXISTS,
                    format!("exec {:?} already exists", req.exec_id),
                ));
            }
            if t.init.exit.is_some() {
                return Err(err(
                    Code::FAILED_PRECONDITION,
                    format!("container {:?} is stopped", req.id),
                ));
            }
            let spec = req.spec.as_ref().map(|a| a.value.clone()).unwrap_or_default();
            t.execs.insert(
                req.exec_id.clone(),
                Proc {
                    stdio: StdioPaths {
                        stdin: req.stdin.clone(),
                        stdout: req.stdout.clone(),
                        stderr: req.stderr.clone(),
                        terminal: req.terminal,
                    },
                    spec: Some(spec),
                    ..Default::default()
                },
            );
            Ok(())
        })?;
        self.inner.publish(
            topics::TASK_EXEC_ADDED_EVENT_TOPIC,
            Box::new(TaskExecAdded {
                container_id: req.id.clone(),
                exec_id: req.exec_id.clone(),
                ..Default::default()
            }),
        );
        Ok(api::Empty::new())
    }

    fn resize_pty(&self, _ctx: &TtrpcContext, req: api::ResizePtyRequest) -> TtrpcResult<api::Empty> {
        self.with_task(&req.id, |t| {
            let p = proc_mut(t, &req.exec_id)?;
            if let Some(io) = &p.io {
                io.resize(req.width, req.height)
                    .map_err(|e| err(Code::UNKNOWN, format!("resize pty: {e}")))?;
            }
            Ok(())
        })?;
        Ok(api::Empty::new())
    }

    fn close_io(&self, _ctx: &TtrpcContext, req: api::CloseIORequest) -> TtrpcResult<api::Empty> {
        self.with_task(&req.id, |t| {
            let p = proc_mut(t, &req.exec_id)?;
            if req.stdin {
                if let Some(io) = &p.io {
                    io.close_stdin();
                }
            }
            Ok(())
        })?;
        Ok(api::Empty::new())
    }

    /// containerd's task Update: new resource limits (`resources`), and a
    /// live policy update when the annotations carry `org.cordon.policy`
    /// (the runtime config's annotation gate decides, as at create;
    /// docs/POLICY.md, "Live policy").
    fn update(&self, _ctx: &TtrpcContext, req: api::UpdateTaskRequest) -> TtrpcResult<api::Empty> {
        let bytes = req.resources.as_ref().map(|a| a.value.clone()).unwrap_or_default();
        let policy = req.annotations.get(cordon::annotations::POLICY).cloned();
        if !bytes.is_empty() || policy.is_none() {
            let resources: oci_spec::runtime::LinuxResources =
                serde_json::from_slice(&bytes).map_err(|e| err(Code::INVALID_ARGUMENT, format!("resources: {e}")))?;
            self.with_task(&req.id, |t| t.rt.update(&t.id, &resources).map_err(rt_err))?;
        }
        if let Some(policy) = policy {
            let asked = std::collections::HashMap::from([(cordon::annotations::POLICY.to_string(), policy)]);
            self.with_task(&req.id, |t| {
                let choice =
                    t.rt.config
                        .annotations
                        .choose(&asked, &t.rt.config)
                        .map_err(|e| err(Code::PERMISSION_DENIED, e.to_string()))?;
                t.rt.update_policy(&t.id, &choice.policy).map_err(rt_err)
            })?;
        }
        Ok(api::Empty::new())
    }

    fn wait(&self, _ctx: &TtrpcContext, req: api::WaitRequest) -> TtrpcResult<api::WaitResponse> {
        let mut st = self.inner.lock();
        loop {
            let Some(t) = st.container.as_mut().filter(|t| t.id == req.id) else {
                return Err(err(
                    Code::NOT_FOUND,
                    format!("container {:?} not found in this shim", req.id),
                ));
            };
            let p = proc_mut(t, &req.exec_id)?;
            if let Some((code, at)) = p.exit.clone() {
                return Ok(api::WaitResponse {
                    exit_status: code,
                    exited_at: MessageField::some(at),
                    ..Default::default()
                });
            }
            st = self.inner.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn stats(&self, _ctx: &TtrpcContext, req: api::StatsRequest) -> TtrpcResult<api::StatsResponse> {
        let stats = self.with_task(&req.id, |t| t.rt.stats(&t.id).map_err(rt_err))?;
        let any = containerd_shim::util::convert_to_any(Box::new(metrics(&stats)))
            .map_err(|e| err(Code::INTERNAL, format!("encode stats: {e}")))?;
        Ok(api::StatsResponse {
            stats: MessageField::some(any),
            ..Default::default()
        })
    }

    fn connect(&self, _ctx: &TtrpcContext, _req: api::ConnectRequest) -> TtrpcResult<api::ConnectResponse> {
        let task_pid = self.inner.lock().container.as_ref().map(|t| t.init.pid).unwrap_or(0);
        Ok(api::ConnectResponse {
            shim_pid: std::process::id(),
            task_pid: task_pid as u32,
            version: env!("CARGO_PKG_VERSION").to_string(),
            ..Default::default()
        })
    }

    fn shutdown(&self, _ctx: &TtrpcContext, _req: api::ShutdownRequest) -> TtrpcResult<api::Empty> {
        if self.inner.lock().container.is_none() {
            self.inner.exit.signal();
        }
        Ok(api::Empty::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use containerd_shim::protos::protobuf::well_known_types::any::Any;

    /// `runtimeoptions.v1.Options { type_url = "t", config_path = path }`,
    /// encoded as containerd does.
    fn options(type_url: &str, path: &str) -> Any {
        let mut value = vec![0x0a, 1, b't'];
        value.extend([0x12, path.len() as u8]);
        value.extend(path.as_bytes());
        Any {
            type_url: type_url.into(),
            value,
            ..Default::default()
        }
    }

    #[test]
    fn checkpoint_exit_comes_from_runcs_options() {
        let runc = "type.googleapis.com/containerd.runc.v1.CheckpointOptions";
        let any = |t: &str, v: Vec<u8>| Any {
            type_url: t.into(),
            value: v,
            ..Default::default()
        };
        assert!(exit_asked(Some(&any(runc, vec![0x08, 1]))), "field 1 (exit) true");
        assert!(!exit_asked(Some(&any(runc, vec![0x10, 1]))), "open_tcp only");
        assert!(!exit_asked(Some(&any("other.Options", vec![0x08, 1]))));
        assert!(!exit_asked(Some(&any(runc, vec![0x08]))), "truncated");
        assert!(!exit_asked(None));
    }

    #[test]
    fn config_path_comes_from_cri_runtime_options_only() {
        let cri = "type.googleapis.com/runtimeoptions.v1.Options";
        assert_eq!(
            config_path(&options(cri, "/etc/cordon/audit.toml")),
            Some(PathBuf::from("/etc/cordon/audit.toml"))
        );
        assert_eq!(config_path(&options(cri, "")), None);
        assert_eq!(
            config_path(&options("containerd.runc.v1.Options", "/x")),
            None,
            "runc's options have no config path"
        );
        let mut broken = options(cri, "/x");
        broken.value.truncate(5);
        assert_eq!(config_path(&broken), None);
    }
}
