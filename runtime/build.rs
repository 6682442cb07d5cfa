//! Builds the supervisor's watchdog (watchdog/watchdog.c): a static x86-64
//! program with no libc that `cordon supervise` execs from a sealed memfd
//! (src/supervisor/watchdog.rs). It is a few KiB, so a watchdog costs a
//! few pages per container instead of a forked copy of the runtime.
//!
//! Needs a C compiler (`$CC`, else `cc`); without one the build goes on
//! with a warning and the watchdog runs as a fork of the supervisor.
//!
//! Also sets what `cordon --version` prints besides the package version:
//! `CORDON_COMMIT` (`git rev-parse --short HEAD`, "unknown" outside a git
//! checkout or without git) and `CORDON_LIBCONTAINER_VERSION` (from
//! Cargo.lock).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    versions();
    println!("cargo:rerun-if-changed=watchdog/watchdog.c");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("watchdog");
    let x86_64 = std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = x86_64
        && Command::new(&cc)
            .args([
                "-Os",
                "-static",
                "-nostdlib",
                "-ffreestanding",
                "-fno-stack-protector",
                "-fno-asynchronous-unwind-tables",
                "-fno-pie",
                "-no-pie",
                "-Wl,--build-id=none",
                "-s",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-o",
            ])
            .arg(&out)
            .arg("watchdog/watchdog.c")
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
    if !built {
        println!(
            "cargo:warning=could not build watchdog/watchdog.c with {cc}: the watchdog will be a fork of the \
             supervisor (apt-get install gcc)"
        );
        std::fs::write(&out, b"").expect("write OUT_DIR/watchdog");
    }
}

/// `git ARGS` in this package's directory: its trimmed output, if it ran.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The commit and libcontainer's version, for `--version`.
fn versions() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CORDON_COMMIT={commit}");
    // A new commit or checkout moves HEAD or its log (worktrees included).
    for path in ["HEAD", "logs/HEAD"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    let lock = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).unwrap_or_default();
    let version = text
        .split("[[package]]")
        .find(|p| p.contains("\nname = \"libcontainer\"\n"))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
        .map(|v| v.trim_end_matches('"').to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CORDON_LIBCONTAINER_VERSION={version}");
}
