//! `containerd-shim-cordon-v2`: containerd's runtime v2 shim for cordon.
//!
//! containerd picks it for `--runtime io.containerd.cordon.v2` (or a CRI
//! runtime handler with `runtime_type = "io.containerd.cordon.v2"`) and
//! talks to it over ttrpc with the task API
//! (<https://github.com/containerd/containerd/blob/main/runtime/v2/README.md>).
//! The shim serves that API by calling the cordon runtime library in its
//! own process: every container it creates runs under cordon's supervisor
//! and policy, exactly as with `cordon run`.
//!
//! One shim serves one container and its exec processes. Its state lives
//! under `/run/containerd/cordon/<namespace>` (a `cordon --root` that
//! `cordon list`, `cordon audit` and `cordon state` accept).

mod io;
mod serve;
mod service;

use std::path::PathBuf;

/// containerd's runtime name for this shim.
const RUNTIME_ID: &str = "io.containerd.cordon.v2";

fn main() {
    find_cordon_binary();
    if serves() {
        // The container's processes are forked from this process: before
        // their execve, /proc/PID/exe is the shim. Serving from a read-only
        // overlayfs view of the binary (or a sealed memfd copy) makes that
        // unwritable (CVE-2019-5736), as the cordon CLI does for create,
        // run and exec; the view costs no memory per shim, the copy its
        // whole binary.
        // Its empty overlayfs layer: `@` is in no namespace name. Under
        // the state root the environment chose, so a shim moved elsewhere
        // writes nothing to the default one.
        let lower = service::base_root().join("@lower");
        if let Err(e) = cordon::sys::exeseal::ensure_sealed(&lower) {
            eprintln!("{RUNTIME_ID}: re-exec from a sealed copy: {e}");
            std::process::exit(1);
        }
    }
    let config = containerd_shim::Config {
        // The shim reaps the processes it tracks, by pidfd; a reaper of
        // every child would race libcontainer's own waits.
        no_reaper: true,
        ..Default::default()
    };
    if action() == "start" {
        start_plain_address(config);
    } else if serves() {
        if let Err(e) = serve::serve(RUNTIME_ID) {
            eprintln!("{RUNTIME_ID}: {e}");
            std::process::exit(1);
        }
    } else {
        containerd_shim::run::<service::Shim>(RUNTIME_ID, Some(config));
    }
}

/// The shim's action: the last argument for `start` and `delete`.
fn action() -> String {
    std::env::args().next_back().unwrap_or_default()
}

/// The `start` action, answered the way every containerd since 1.6 reads.
///
/// The containerd-shim crate answers a legacy (flag-based) start with JSON
/// (`{"version":3,"address":...,"protocol":"ttrpc"}`), which containerd
/// 1.7+ parses but 1.6 takes for the address itself. The plain address is
/// what 1.6 expects and what 1.7 and 2.x still accept, so the JSON is
/// unwrapped; a bootstrap (protobuf) answer, for containerd 2.3+, is passed
/// through unchanged.
fn start_plain_address(config: containerd_shim::Config) {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let (r, w) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{RUNTIME_ID}: pipe: {e}");
            std::process::exit(1);
        }
    };
    // Close-on-exec: the serving shim spawned below must not hold
    // containerd's end (containerd reads this action's output to EOF).
    let saved = nix::fcntl::fcntl(1, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3)).unwrap_or(-1);
    if saved < 0 || nix::unistd::dup2(w.as_raw_fd(), 1).is_err() {
        eprintln!("{RUNTIME_ID}: redirect stdout");
        std::process::exit(1);
    }
    drop(w);
    // The answer is a few hundred bytes: it fits the pipe's buffer.
    containerd_shim::run::<service::Shim>(RUNTIME_ID, Some(config));
    let _ = std::io::stdout().flush();
    let _ = nix::unistd::dup2(saved, 1);
    let _ = nix::unistd::close(saved);
    let mut answer = Vec::new();
    let _ = std::fs::File::from(r).read_to_end(&mut answer);
    let plain = serde_json::from_slice::<serde_json::Value>(&answer)
        .ok()
        .and_then(|v| v["address"].as_str().map(str::to_string));
    let mut out = std::io::stdout();
    let _ = match plain {
        Some(address) => out.write_all(address.as_bytes()),
        None => out.write_all(&answer),
    };
    let _ = out.flush();
}

/// Whether this invocation serves the task API (neither the `start` nor
/// the `delete` action nor `-info`).
fn serves() -> bool {
    let args: Vec<String> = std::env::args().collect();
    let last = args.last().map(String::as_str).unwrap_or("");
    !(last == "start" || last == "delete" || args.iter().any(|a| a == "-info" || a == "--info" || a == "-v"))
}

/// The supervisor runs from the `cordon` binary, not from the shim: take it
/// from `$CORDON_BINARY`, else beside the shim, else from `$PATH`.
fn find_cordon_binary() {
    if std::env::var_os(cordon::container::BINARY_ENV).is_some() {
        return;
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("cordon")))
        .filter(|p| p.is_file());
    let on_path = || {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("cordon"))
                .find(|p| p.is_file())
        })
    };
    let found: Option<PathBuf> = beside.or_else(on_path);
    if let Some(p) = found {
        // SAFETY: called first thing in main, before any thread exists.
        unsafe { std::env::set_var(cordon::container::BINARY_ENV, p) };
    }
}
