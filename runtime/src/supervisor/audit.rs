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
    /// The policy rule that decided (`path[3] "/proc/kcore" deny: note`,
    /// `net[0] 10.0.0.0/8`, `syscall[5]: note`, `net_default`,
    /// `default_action`); absent when no rule did (an emulation, an event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
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
        self.record_by(pid, syscall, detail, action, result, None);
    }

    /// [`Self::record`], naming the policy rule that decided.
    pub fn record_by(&self, pid: i32, syscall: &str, detail: &str, action: &str, result: &str, rule: Option<&str>) {
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let Some(f) = guard.as_mut() else { return };
        let line = line(std::time::SystemTime::now(), pid, syscall, detail, action, result, rule);
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

/// One record as a JSON line (a [`Record`] with `time` at `at`), written
/// straight from the borrowed fields: this runs once per intercepted call.
fn line(
    at: std::time::SystemTime,
    pid: i32,
    syscall: &str,
    detail: &str,
    action: &str,
    result: &str,
    rule: Option<&str>,
) -> Vec<u8> {
    let time = chrono::DateTime::<chrono::Utc>::from(at).to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let mut out = Vec::with_capacity(96 + syscall.len() + detail.len() + action.len() + result.len());
    out.extend_from_slice(b"{\"time\":\"");
    out.extend_from_slice(time.as_bytes());
    let _ = write!(out, "\",\"pid\":{pid},\"syscall\":");
    let string = |out: &mut Vec<u8>, v: &str| {
        // serde_json escapes strings without allocating.
        let _ = serde_json::to_writer(&mut *out, v);
    };
    string(&mut out, syscall);
    out.extend_from_slice(b",\"detail\":");
    string(&mut out, detail);
    out.extend_from_slice(b",\"action\":");
    string(&mut out, action);
    out.extend_from_slice(b",\"result\":");
    string(&mut out, result);
    if let Some(rule) = rule {
        out.extend_from_slice(b",\"rule\":");
        string(&mut out, rule);
    }
    out.extend_from_slice(b"}\n");
    out
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
    fn lines_are_records() {
        use std::time::{Duration, UNIX_EPOCH};
        let at = UNIX_EPOCH + Duration::from_secs(1_795_997_999);
        let l = line(
            at,
            42,
            "openat",
            "/etc/\"x\"\n\u{1}",
            "deny",
            "EACCES",
            Some("path[0] \"/etc/**\" deny"),
        );
        assert_eq!(*l.last().unwrap(), b'\n');
        let r: Record = serde_json::from_slice(&l).unwrap();
        assert_eq!(
            r,
            Record {
                time: "2026-11-30T00:19:59.000000Z".into(),
                pid: 42,
                syscall: "openat".into(),
                detail: "/etc/\"x\"\n\u{1}".into(),
                action: "deny".into(),
                result: "EACCES".into(),
                rule: Some("path[0] \"/etc/**\" deny".into()),
            }
        );
    }

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
