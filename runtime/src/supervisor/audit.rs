//! The audit trail: one JSON object per decision, appended to
//! `<state dir>/audit.jsonl`.
//!
//! ```json
//! {"time":"2026-11-29T23:59:59.123456Z","pid":4242,"syscall":"openat",
//!  "detail":"/etc/shadow O_RDONLY","action":"deny","result":"EACCES"}
//! ```
//! `pid` is the host pid of the calling thread. Each record is one write(2)
//! on an O_APPEND file, so records from concurrent threads never interleave.
//!
//! The trail is bounded: past [`MAX_FILE_BYTES`] the file is renamed to
//! `audit.jsonl.1` (replacing the previous one) and a new one starts, so a
//! container flooding intercepted calls cannot fill the state directory
//! (often a tmpfs, /run) beyond twice that.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Size (bytes) at which the audit file is rotated: 16 MiB.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

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
    path: Option<PathBuf>,
    file: Mutex<Option<File>>,
    /// Bytes in the current file.
    written: AtomicU64,
    /// Rotation threshold.
    max: u64,
}

/// The previous (rotated) audit file of `path`: `path.1`.
pub fn rotated(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".1");
    PathBuf::from(p)
}

impl AuditLog {
    /// Opens (creating) the audit file at `path`; `None` disables auditing.
    pub fn open(path: Option<&Path>) -> std::io::Result<Self> {
        Self::open_with_limit(path, MAX_FILE_BYTES)
    }

    /// [`AuditLog::open`] rotating at `max` bytes.
    pub fn open_with_limit(path: Option<&Path>, max: u64) -> std::io::Result<Self> {
        let file = match path {
            Some(p) => Some(OpenOptions::new().create(true).append(true).open(p)?),
            None => None,
        };
        let written = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| m.len())
            .unwrap_or(0);
        Ok(Self {
            path: path.map(Path::to_path_buf),
            file: Mutex::new(file),
            written: AtomicU64::new(written),
            max,
        })
    }

    /// Appends one record. Failures are ignored: a full disk must not turn
    /// into a denied syscall, and the decision itself was already taken.
    pub fn record(&self, pid: i32, syscall: &str, detail: &str, action: &str, result: &str) {
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let Some(f) = guard.as_mut() else { return };
        let rec = Record {
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            pid,
            syscall: syscall.to_string(),
            detail: detail.to_string(),
            action: action.to_string(),
            result: result.to_string(),
        };
        let Ok(mut line) = serde_json::to_vec(&rec) else { return };
        line.push(b'\n');
        if f.write_all(&line).is_err() {
            return;
        }
        let total = self.written.fetch_add(line.len() as u64, Ordering::Relaxed) + line.len() as u64;
        if total > self.max {
            if let Some(p) = &self.path {
                if std::fs::rename(p, rotated(p)).is_ok() {
                    if let Ok(nf) = OpenOptions::new().create(true).append(true).open(p) {
                        *guard = Some(nf);
                        self.written.store(0, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}

/// Reads every record of an audit trail: the rotated file (if any), then
/// `path` (lines that do not parse are skipped).
pub fn read_all(path: &Path) -> std::io::Result<Vec<Record>> {
    let old = std::fs::read_to_string(rotated(path)).unwrap_or_default();
    let text = std::fs::read_to_string(path)?;
    Ok(old
        .lines()
        .chain(text.lines())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trail_is_rotated_and_bounded() {
        let dir = std::env::temp_dir().join(format!("cordon-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.jsonl");
        let log = AuditLog::open_with_limit(Some(&path), 4096).unwrap();
        for i in 0..1000 {
            log.record(i, "openat", "/etc/hostname O_RDONLY", "allow", "fd 3");
        }
        let (cur, old) = (
            std::fs::metadata(&path).unwrap().len(),
            std::fs::metadata(rotated(&path)).unwrap().len(),
        );
        assert!(cur <= 4096 + 200 && old <= 4096 + 200, "{cur} {old}");
        let all = read_all(&path).unwrap();
        assert!(!all.is_empty() && all.len() < 1000);
        // The newest record is last, and records are in order.
        assert_eq!(all.last().unwrap().pid, 999);
        assert!(all.windows(2).all(|w| w[0].pid < w[1].pid));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
