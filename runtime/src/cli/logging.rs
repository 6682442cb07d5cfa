//! runc-compatible logging: `--log FILE` (default stderr) and
//! `--log-format text|json`. JSON lines are `{"level","msg","time"}`, the
//! shape containerd-shim-runc-v2 parses; it shows the last `error` line to
//! its user, so the final error of a failed command is always logged last.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `time="..." level=error msg="..."` (logrus text, as runc).
    Text,
    /// `{"level":"error","msg":"...","time":"..."}`.
    Json,
}

struct Sink {
    out: Mutex<Box<dyn Write + Send>>,
    format: Format,
    max: Level,
}

struct MsgVisitor(String);

impl Visit for MsgVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}"));
        } else {
            self.0.push_str(&format!(" {}={:?}", field.name(), value));
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.insert_str(0, value);
        } else {
            self.0.push_str(&format!(" {}={:?}", field.name(), value));
        }
    }
}

impl Sink {
    fn write(&self, level: &Level, msg: &str) {
        let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
        let lvl = level.as_str().to_lowercase();
        let lvl = if lvl == "warn" { "warning".to_string() } else { lvl };
        let line = match self.format {
            Format::Json => serde_json::json!({"level": lvl, "msg": msg, "time": time}).to_string(),
            Format::Text => format!("time={time:?} level={lvl} msg={msg:?}"),
        };
        if let Ok(mut o) = self.out.lock() {
            let _ = writeln!(o, "{line}");
            let _ = o.flush();
        }
    }
}

impl<S: Subscriber> Layer<S> for &'static Sink {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if *event.metadata().level() > self.max {
            return;
        }
        let mut v = MsgVisitor(String::new());
        event.record(&mut v);
        self.write(event.metadata().level(), &v.0);
    }
}

static SINK: std::sync::OnceLock<Sink> = std::sync::OnceLock::new();

/// Sets up logging. Without `--log`, only `--debug` output goes to stderr
/// (errors are printed once by the caller); with it, warnings and errors
/// (everything with `--debug`) go to the file.
pub fn init(log: Option<&Path>, format: Format, debug: bool) -> std::io::Result<()> {
    let (out, max): (Box<dyn Write + Send>, Option<Level>) = match log {
        Some(p) => {
            let f = OpenOptions::new().create(true).append(true).open(p)?;
            (Box::new(f), Some(if debug { Level::DEBUG } else { Level::WARN }))
        }
        None => (Box::new(std::io::stderr()), debug.then_some(Level::DEBUG)),
    };
    // Errors of the container's set-up reach `create` through this layer
    // (cordon::container::setup_log), with or without a log.
    let setup = cordon::container::setup_log::SetupErrors;
    let Some(max) = max else {
        let _ = tracing_subscriber::registry().with(setup).try_init();
        return Ok(());
    };
    let sink = SINK.get_or_init(|| Sink {
        out: Mutex::new(out),
        format,
        max,
    });
    let _ = tracing_subscriber::registry().with(sink).with(setup).try_init();
    Ok(())
}

/// Writes the command's final error to the log (if any) as the last line.
pub fn final_error(msg: &str) {
    if let Some(s) = SINK.get() {
        s.write(&Level::ERROR, msg);
    }
}
