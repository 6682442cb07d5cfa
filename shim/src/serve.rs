//! The shim's serving mode: the ttrpc task service on the socket
//! containerd named (`-socket`), answering both task API versions.
//!
//! The containerd-shim crate's own serving loop registers the task service
//! as `containerd.task.v3.Task` only (containerd 2.x); containerd 1.6 and
//! 1.7 call `containerd.task.v2.Task`. The two versions carry the same
//! messages, so this loop registers the one service under both names and
//! otherwise does what the crate's does: logger on the `log` fifo, event
//! publisher on `$TTRPC_ADDRESS`, child subreaper, stdout handed back to
//! stderr once serving (containerd's `start` waits for that EOF).

use std::collections::HashMap;
use std::os::fd::IntoRawFd;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::Arc;

use containerd_shim::protos::shim::shim_ttrpc::create_task;
use containerd_shim::protos::ttrpc::{MethodHandler, Server};
use containerd_shim::publisher::RemotePublisher;
use containerd_shim::Shim as _;

use crate::service::Shim;

type Methods = HashMap<String, Box<dyn MethodHandler + Send + Sync>>;

/// Serves until containerd's Shutdown; returns a one-line error.
pub fn serve(runtime_id: &str) -> Result<(), String> {
    let args: Vec<_> = std::env::args_os().collect();
    let flags = containerd_shim::parse(&args[1..]).map_err(|e| format!("arguments: {e}"))?;
    if flags.namespace.is_empty() {
        return Err("-namespace is required".into());
    }
    if flags.socket.is_empty() {
        return Err("-socket is required".into());
    }
    // SAFETY: prctl(2) with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } < 0 {
        return Err(format!("set child subreaper: {}", std::io::Error::last_os_error()));
    }
    ignore_sigpipe();
    containerd_shim::logger::init(flags.debug, "info", &flags.namespace, &flags.id)
        .map_err(|e| format!("logger: {e}"))?;
    let ttrpc_address = std::env::var("TTRPC_ADDRESS").map_err(|_| "$TTRPC_ADDRESS is not set".to_string())?;
    let publisher = RemotePublisher::new(&ttrpc_address).map_err(|e| format!("connect to {ttrpc_address}: {e}"))?;

    let mut config = containerd_shim::Config::default();
    let mut shim = Shim::new(runtime_id, &flags, &mut config);
    let task: Arc<dyn containerd_shim::Task + Send + Sync> = Arc::new(shim.create_task_service(publisher));
    let v3: Methods = create_task(task.clone());
    let v2: Methods = create_task(task)
        .into_iter()
        .map(|(k, v)| (k.replacen("/containerd.task.v3.", "/containerd.task.v2.", 1), v))
        .collect();

    let path = flags
        .socket
        .strip_prefix("unix://")
        .unwrap_or(&flags.socket)
        .to_string();
    if let Some(parent) = Path::new(&path).parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
    }
    let listener = UnixListener::bind(&path).map_err(|e| format!("listen on {path}: {e}"))?;
    let mut server = Server::new()
        .add_listener(listener.into_raw_fd())
        .map_err(|e| format!("ttrpc listener: {e}"))?
        .register_service(v3)
        .register_service(v2);
    server.start().map_err(|e| format!("start ttrpc server: {e}"))?;
    // Tells the `start` action (reading our stdout) that we serve.
    // SAFETY: dup2(2) on the process's own standard fds.
    unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) };
    log::info!("serving {runtime_id} on {path}");
    shim.wait();
    server.shutdown();
    let _ = std::fs::remove_file(&path);
    Ok(())
}

fn ignore_sigpipe() {
    // SAFETY: installs SIG_IGN for SIGPIPE; a closed fifo then gives EPIPE.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}
