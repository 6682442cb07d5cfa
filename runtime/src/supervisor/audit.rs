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
        let line = line(std::time::SystemTime::now(), pid, syscall, detail, action, result);
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

/// One record as a JSON line (a [`Record`] with `time` at `at`), built
/// without intermediate strings: this runs once per intercepted call.
fn line(at: std::time::SystemTime, pid: i32, syscall: &str, detail: &str, action: &str, result: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + syscall.len() + detail.len() + action.len() + result.len());
    out.extend_from_slice(b"{\"time\":\"");
    out.extend_from_slice(&rfc3339_micros(at));
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
    out.extend_from_slice(b"}\n");
    out
}

/// `at` as RFC 3339 in UTC with microseconds (`2026-11-29T23:59:59.123456Z`).
/// Civil date from days since the epoch: H. Hinnant, "chrono-Compatible
/// Low-Level Date Algorithms" (days_from_civil, inverted).
fn rfc3339_micros(at: std::time::SystemTime) -> [u8; 27] {
    let d = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mut out = [0u8; 27];
    let mut put = |at: usize, v: u64, width: usize| {
        let mut v = v;
        for i in (0..width).rev() {
            out[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, year.clamp(0, 9999) as u64, 4);
    put(5, month as u64, 2);
    put(8, day as u64, 2);
    put(11, rem / 3600, 2);
    put(14, rem / 60 % 60, 2);
    put(17, rem % 60, 2);
    put(20, u64::from(d.subsec_micros()), 6);
    for (i, c) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (26, b'Z'),
    ] {
        out[i] = c;
    }
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
    fn lines_are_records_with_chrono_s_time() {
        use std::time::{Duration, UNIX_EPOCH};
        for secs in [0u64, 951_782_400, 1_700_000_000, 1_795_997_999, 4_102_444_800] {
            let at = UNIX_EPOCH + Duration::new(secs, 123_456_789);
            let want = chrono::DateTime::<chrono::Utc>::from(at).to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            assert_eq!(std::str::from_utf8(&rfc3339_micros(at)).unwrap(), want);
        }
        let at = UNIX_EPOCH + Duration::from_secs(1_795_997_999);
        let l = line(at, 42, "openat", "/etc/\"x\"\n\u{1}", "deny", "EACCES");
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
