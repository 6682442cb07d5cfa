//! The audit trail: one JSON object per decision, appended to
//! `<state dir>/audit.jsonl`.
//!
//! ```json
//! {"time":"2026-11-29T23:59:59.123456Z","pid":4242,"syscall":"openat",
//!  "detail":"/etc/shadow O_RDONLY","action":"deny","result":"EACCES"}
//! ```
//! `pid` is the host pid of the calling thread. Each record is one write(2)
//! on an O_APPEND file, so records from concurrent threads never interleave.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One decision of the supervisor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Record {
    /// RFC 3339 time, microseconds, UTC.
    pub time: String,
    /// Host pid (thread id) of the caller; 0 for supervisor events.
    pub pid: i32,
    /// Syscall name, or `supervisor` for lifecycle events.
    pub syscall: String,
    /// Argument summary: the path, the address, the flags.
    pub detail: String,
    /// `allow`, `deny`, `emulate`, `audit` or `event`.
    pub action: String,
    /// What the caller got: a value, an errno name, or `continue`.
    pub result: String,
}

/// Appends records to the audit file.
#[derive(Debug)]
pub struct AuditLog {
    file: Option<File>,
}

impl AuditLog {
    /// Opens (creating) the audit file at `path`; `None` disables auditing.
    pub fn open(path: Option<&Path>) -> std::io::Result<Self> {
        let file = match path {
            Some(p) => Some(OpenOptions::new().create(true).append(true).open(p)?),
            None => None,
        };
        Ok(Self { file })
    }

    /// Appends one record. Failures are ignored: a full disk must not turn
    /// into a denied syscall, and the decision itself was already taken.
    pub fn record(&self, pid: i32, syscall: &str, detail: &str, action: &str, result: &str) {
        let Some(mut f) = self.file.as_ref() else { return };
        let rec = Record {
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            pid,
            syscall: syscall.to_string(),
            detail: detail.to_string(),
            action: action.to_string(),
            result: result.to_string(),
        };
        if let Ok(mut line) = serde_json::to_vec(&rec) {
            line.push(b'\n');
            let _ = f.write_all(&line);
        }
    }
}

/// Reads every record of an audit file (lines that do not parse are skipped).
pub fn read_all(path: &Path) -> std::io::Result<Vec<Record>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
}
