//! Builds the supervisor's watchdog (watchdog/watchdog.c): a static x86-64
//! program with no libc that `cordon supervise` execs from a sealed memfd
//! (src/supervisor/watchdog.rs). It is a few KiB, so a watchdog costs a
//! few pages per container instead of a forked copy of the runtime.
//!
//! Needs a C compiler (`$CC`, else `cc`); without one the build goes on
//! with a warning and the watchdog runs as a fork of the supervisor.

use std::path::PathBuf;
use std::process::Command;

fn main() {
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
