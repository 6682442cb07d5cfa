//! Start-up timings: where `run`, `create`, `start`, `exec` and `delete`
//! spend their time, step by step, across the processes they start.
//!
//! Off unless the environment names a file: `CORDON_TIMINGS=/abs/path`
//! appends one line per finished step to that file (`O_APPEND`, one
//! `write` per line, so the CLI, its re-exec, the supervisor and the
//! container's init before it execs can share it). `CORDON_TIMINGS=1`
//! writes the lines to the process's stderr instead. Each line is
//!
//! ```text
//! cordon-timing <pid> <process> <step> <start ms> <duration ms>
//! ```
//!
//! tab-separated, times in milliseconds with microsecond digits, `start`
//! counted from `CORDON_TIMINGS_T0` (CLOCK_MONOTONIC nanoseconds, which a
//! caller may set just before it starts cordon so that the exec of the
//! binary is counted; the first cordon process sets it when it is
//! absent, and every process it starts inherits it). Steps nest: a step
//! that contains others is written after them. bench/README.md explains
//! them; the bench's startup section reads them.
//!
//! Source: clock_gettime(2) CLOCK_MONOTONIC (the same clock in every
//! process of the machine).

use std::io::Write;
use std::sync::OnceLock;

/// The variable that turns timings on (a file path, or `1` for stderr).
pub const ENV: &str = "CORDON_TIMINGS";
/// The variable that carries the time origin (CLOCK_MONOTONIC ns).
pub const T0_ENV: &str = "CORDON_TIMINGS_T0";
/// The variable a process sets just before it execs a cordon process
/// (CLOCK_MONOTONIC ns), so that the new process can time its own exec.
pub const MARK_ENV: &str = "CORDON_TIMINGS_MARK";

struct Sink {
    /// Where lines go: the file, or None for stderr.
    file: Option<std::fs::File>,
    t0: u64,
    process: &'static str,
}

static SINK: OnceLock<Option<Sink>> = OnceLock::new();

/// CLOCK_MONOTONIC now, in nanoseconds.
pub fn now_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a timespec we own, which the kernel (vDSO) fills; the
    // monotonic clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

/// Turns timings on for this process when [`ENV`] is set, naming it
/// `process` in its lines (`run`, `supervise`, ...). Call it early in
/// `main`, before any thread starts (it may set [`T0_ENV`]); later calls do
/// nothing. Returns whether timings are on.
pub fn init(process: &'static str) -> bool {
    SINK.get_or_init(|| {
        let target = std::env::var_os(ENV)?;
        let t0 = match std::env::var(T0_ENV).ok().and_then(|v| v.parse().ok()) {
            Some(t) => t,
            None => {
                let t = now_ns();
                // Single-threaded, as the caller promises.
                let _ = super::process::set_env_single_threaded(T0_ENV, t.to_string());
                t
            }
        };
        let file = if target == "1" {
            None
        } else {
            let f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&target)
                .ok()?;
            Some(f)
        };
        Some(Sink { file, t0, process })
    })
    .is_some()
}

/// Whether timings are on in this process.
pub fn enabled() -> bool {
    matches!(SINK.get(), Some(Some(_)))
}

/// Writes the line of a step that ran from `start_ns` until now.
fn emit(step: &str, start_ns: u64) {
    let Some(Some(sink)) = SINK.get() else { return };
    let end = now_ns();
    let ms = |ns: u64| ns as f64 / 1e6;
    let line = format!(
        "cordon-timing\t{}\t{}\t{}\t{:.3}\t{:.3}\n",
        std::process::id(),
        sink.process,
        step,
        ms(start_ns.saturating_sub(sink.t0)),
        ms(end.saturating_sub(start_ns)),
    );
    match sink.file.as_ref() {
        Some(mut f) => {
            let _ = f.write_all(line.as_bytes());
        }
        None => {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}

/// A step being timed: its line is written when it is dropped (or
/// [`Step::end`]ed), and with `--debug` (a tracing subscriber at debug
/// level) it is logged too, with its duration. Costs nothing more than a
/// check when neither is on.
#[must_use = "a step is timed until it is dropped"]
pub struct Step {
    name: &'static str,
    start: u64,
    on: bool,
    debug: bool,
}

/// Starts timing step `name`.
pub fn step(name: &'static str) -> Step {
    let on = enabled();
    let debug = tracing::enabled!(tracing::Level::DEBUG);
    Step {
        name,
        start: if on || debug { now_ns() } else { 0 },
        on,
        debug,
    }
}

impl Step {
    /// Ends the step now.
    pub fn end(self) {}
}

impl Drop for Step {
    fn drop(&mut self) {
        if self.on {
            emit(self.name, self.start);
        }
        if self.debug {
            let ms = now_ns().saturating_sub(self.start) as f64 / 1e6;
            tracing::debug!("step {:?}: {ms:.3} ms", self.name);
        }
    }
}

/// Writes step `name` as running from the time origin (or from
/// `since_ns`) until now: for what happened before this process could
/// time it (its exec, the re-exec of the sealed binary).
pub fn since(name: &'static str, since_ns: Option<u64>) {
    if let Some(Some(sink)) = SINK.get() {
        emit(name, since_ns.unwrap_or(sink.t0));
    }
}

/// The time [`MARK_ENV`] carries, if a parent set it before exec.
pub fn mark() -> Option<u64> {
    std::env::var(MARK_ENV).ok().and_then(|v| v.parse().ok())
}

/// Sets [`MARK_ENV`] to now in this process's environment, before it
/// re-execs itself (single-threaded only; does nothing when timings are
/// off or other threads run).
pub fn set_mark() {
    if enabled() {
        let _ = super::process::set_env_single_threaded(MARK_ENV, now_ns().to_string());
    }
}

/// The variables a process that starts a cordon process with a cleared
/// environment passes on when timings are on: [`ENV`], [`T0_ENV`] and
/// [`MARK_ENV`] set to now.
pub fn env_for_child() -> Vec<(&'static str, String)> {
    if !enabled() {
        return Vec::new();
    }
    let mut v = Vec::new();
    if let Some(e) = std::env::var_os(ENV) {
        v.push((ENV, e.to_string_lossy().into_owned()));
    }
    if let Some(Some(sink)) = SINK.get() {
        v.push((T0_ENV, sink.t0.to_string()));
    }
    v.push((MARK_ENV, now_ns().to_string()));
    v
}
