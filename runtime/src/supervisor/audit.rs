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
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Size (bytes) at which the audit file is rotated: 16 MiB.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

use serde::{Deserialize, Serialize};

use crate::config::Retention;

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

impl Record {
    /// The host name a network decision was about: the queried name of a
    /// `dns` record (`pypi.org A`), or the name the resolver answered the
    /// destination for in a connect/sendto/sendmsg record
    /// (`pypi.org (151.101.0.223):443`). `None` for other records.
    pub fn host(&self) -> Option<&str> {
        match self.syscall.as_str() {
            "dns" => self.detail.split(' ').next().filter(|_| self.detail.contains(' ')),
            "connect" | "sendto" | "sendmsg" => {
                let (name, rest) = self.detail.split_once(" (")?;
                (!name.contains(' ') && !name.contains(':') && rest.contains(')')).then_some(name)
            }
            _ => None,
        }
    }

    /// The destination of a connect/sendto/sendmsg record: the host name
    /// the resolver answered it for (if any), the address and the port,
    /// read from `detail` (`pypi.org (151.101.0.223):443`, `10.0.0.1:80`,
    /// `[::1]:53`, with ` N bytes` after it for a send). `None` for other
    /// records and other families.
    pub fn destination(&self) -> Option<(Option<&str>, std::net::IpAddr, u16)> {
        if !matches!(self.syscall.as_str(), "connect" | "sendto" | "sendmsg") {
            return None;
        }
        let mut d = self.detail.strip_prefix("resolver ").unwrap_or(&self.detail);
        if let Some(head) = d
            .strip_suffix(" bytes")
            .and_then(|h| h.rsplit_once(' '))
            .map(|(h, _)| h)
        {
            d = head;
        }
        let (name, at) = match d.split_once(" (") {
            Some((name, rest)) => {
                let (ip, port) = rest.rsplit_once("):")?;
                (Some(name), (ip, port))
            }
            None if d.starts_with('[') => {
                let (ip, port) = d[1..].rsplit_once("]:")?;
                (None, (ip, port))
            }
            None => (None, d.rsplit_once(':')?),
        };
        Some((name, at.0.parse().ok()?, at.1.parse().ok()?))
    }
}

/// What the supervisor did with a call, or an event of its own: the
/// trail's `action` field, written as the lower-case name (`allow`,
/// `deny`, `emulate`, `audit`, `kill`, `ask`, `event`), as trails always
/// had it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The call ran as asked (by the kernel, or by the supervisor for the
    /// caller).
    Allow,
    /// The policy refused it.
    Deny,
    /// The supervisor answered it itself (uname, sysinfo, ...).
    Emulate,
    /// Recorded, then run by the kernel.
    Audit,
    /// The caller was killed.
    Kill,
    /// Held for the decision program (an `ask` rule), answered later.
    Ask,
    /// A supervisor event (start, exit, error, policy update).
    Event,
}

impl Decision {
    /// The name the trail shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Emulate => "emulate",
            Decision::Audit => "audit",
            Decision::Kill => "kill",
            Decision::Ask => "ask",
            Decision::Event => "event",
        }
    }
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
    pub fn record(&self, pid: i32, syscall: &str, detail: &str, action: Decision, result: &str) {
        self.record_by(pid, syscall, detail, action, result, None);
    }

    /// [`Self::record`], naming the policy rule that decided.
    pub fn record_by(&self, pid: i32, syscall: &str, detail: &str, action: Decision, result: &str, rule: Option<&str>) {
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let Some(f) = guard.as_mut() else { return };
        let line = line(
            std::time::SystemTime::now(),
            pid,
            syscall,
            detail,
            action.as_str(),
            result,
            rule,
        );
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

/// DEL and the C1 controls (U+007F to U+009F).
fn is_c1(c: char) -> bool {
    ('\u{7f}'..='\u{9f}').contains(&c)
}

/// `json` (JSON text) with DEL and the C1 control characters written as
/// `\u00XX`. JSON allows them raw inside strings and serde_json leaves them
/// so, but a terminal acts on them (U+009B is CSI): a record's fields come
/// from the container and must not drive the terminal of whoever reads
/// `cordon audit --json`. Outside strings valid JSON has none, so every
/// one is replaced.
pub fn escape_c1(json: &str) -> std::borrow::Cow<'_, str> {
    if !json.chars().any(is_c1) {
        return json.into();
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_c1(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out.into()
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
        // serde_json escapes strings without allocating; DEL and the C1
        // controls it leaves raw are escaped too (see [`escape_c1`]).
        if v.chars().any(is_c1) {
            let json = serde_json::to_string(v).unwrap_or_default();
            out.extend_from_slice(escape_c1(&json).as_bytes());
            return;
        }
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

/// The part of a kept trail's file name that names container `id`: the id
/// itself, or for an id too long for a file name with the time beside it
/// (ids go up to 255 bytes), its first 180 bytes and a hash of the whole.
fn stem(id: &str) -> String {
    if id.len() <= 200 {
        return id.to_string();
    }
    // FNV-1a (64 bits): stable across builds, unlike std's hasher.
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{}~{hash:016x}", &id[..180])
}

/// The longest [`Retention::archive`] goes without a prune.
pub const PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

impl Retention {
    /// Keeps the trail at `trail` (and its rotated part) of container `id`
    /// as one file in [`Self::dir`], then removes kept trails beyond the
    /// age and size limits, oldest first ([`Self::prune`], when due: see
    /// [`Self::prune_due`]). Errors are returned for the caller to log: a
    /// trail that cannot be kept never stops a delete.
    pub fn archive(&self, trail: &Path, id: &str) -> std::io::Result<Option<PathBuf>> {
        if !self.keep || !trail.exists() {
            return Ok(None);
        }
        std::fs::create_dir_all(&self.dir)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let dest = self.dir.join(format!("{}@{now}.jsonl", stem(id)));
        let mut out = OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(&dest)?;
        let mut bytes = 0;
        for part in [rotated(trail), trail.to_path_buf()] {
            if let Ok(mut f) = File::open(&part) {
                bytes += std::io::copy(&mut f, &mut out)?;
            }
        }
        if self.prune_due(bytes)? {
            self.prune()?;
        }
        Ok(Some(dest))
    }

    /// Whether [`Self::archive`] should prune now, having just kept
    /// `bytes`. A prune reads the metadata of every kept trail (a few
    /// milliseconds with thousands of them, on every `delete`), so it runs
    /// only when the trails kept since the last one add up to more than an
    /// eighth of `max_total_mb`, or the last one is [`PRUNE_EVERY`] old:
    /// the directory exceeds its size limit by at most that eighth. The
    /// count lives in `.prune` in [`Self::dir`] (under an exclusive
    /// flock(2), so concurrent deletes add up), its mtime is the last prune.
    pub fn prune_due(&self, bytes: u64) -> std::io::Result<bool> {
        use std::io::{Read, Seek};
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(self.dir.join(crate::layout::PRUNE_STAMP))?;
        let mut f = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| std::io::Error::from(e))?;
        let mut text = String::new();
        f.read_to_string(&mut text)?;
        let since: u64 = text.trim().parse().unwrap_or(u64::MAX);
        let last = f.metadata()?.modified()?;
        let old = last.elapsed().map_or(true, |age| age > PRUNE_EVERY);
        let total = since.saturating_add(bytes);
        let due = old || total > self.max_total_mb.saturating_mul(1 << 20) / 8;
        f.set_len(0)?;
        f.rewind()?;
        write!(f, "{}", if due { 0 } else { total })?;
        if !due {
            // The mtime stays the last prune's.
            f.set_modified(last)?;
        }
        Ok(due)
    }

    /// Removes kept trails older than `max_age_days`, then the oldest until
    /// the rest fit in `max_total_mb`.
    pub fn prune(&self) -> std::io::Result<()> {
        let mut kept: Vec<(u128, u64, PathBuf)> = std::fs::read_dir(&self.dir)?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let stamp = name.strip_suffix(".jsonl")?.rsplit_once('@')?.1.parse().ok()?;
                Some((stamp, e.metadata().ok()?.len(), e.path()))
            })
            .collect();
        kept.sort();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let max_age = u128::from(self.max_age_days) * 86_400 * 1_000_000_000;
        let mut total: u64 = kept.iter().map(|k| k.1).sum();
        for (stamp, len, path) in kept {
            if now.saturating_sub(stamp) > max_age || total > self.max_total_mb.saturating_mul(1 << 20) {
                std::fs::remove_file(&path)?;
                total -= len;
            }
        }
        Ok(())
    }

    /// The newest kept trail of container `id`, if any.
    pub fn find(&self, id: &str) -> Option<PathBuf> {
        let prefix = format!("{}@", stem(id));
        std::fs::read_dir(&self.dir)
            .ok()?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let stamp: u128 = name.strip_prefix(&prefix)?.strip_suffix(".jsonl")?.parse().ok()?;
                Some((stamp, e.path()))
            })
            .max()
            .map(|(_, p)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c1_controls_are_escaped_and_read_back() {
        let detail = "/tmp/\u{9b}31mred\u{7f}\u{85}é";
        let l = line(
            std::time::SystemTime::now(),
            1,
            "openat",
            detail,
            "deny",
            "EACCES",
            None,
        );
        let text = String::from_utf8(l.clone()).unwrap();
        assert!(!text.chars().any(is_c1), "{text:?}");
        assert!(text.contains("\\u009b31mred\\u007f\\u0085é"), "{text}");
        let r: Record = serde_json::from_slice(&l).unwrap();
        assert_eq!(r.detail, detail, "the same string once read");
        assert_eq!(escape_c1("{\"a\":\"b\"}"), "{\"a\":\"b\"}");
    }

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
    fn kept_trails_are_found_and_pruned_by_age_and_size() {
        let dir = std::env::temp_dir().join(format!("cordon-keep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("state")).unwrap();
        let trail = dir.join("state/audit.jsonl");
        std::fs::write(rotated(&trail), "old\n").unwrap();
        std::fs::write(&trail, "new\n").unwrap();
        let r = Retention {
            dir: dir.join("kept"),
            max_total_mb: 1,
            ..Default::default()
        };
        let kept = r.archive(&trail, "c1").unwrap().unwrap();
        assert_eq!(
            std::fs::read_to_string(&kept).unwrap(),
            "old\nnew\n",
            "rotated part first"
        );
        assert_eq!(r.find("c1"), Some(kept.clone()));
        assert_eq!(r.find("c"), None, "ids are matched whole");
        // Beyond the size limit the oldest goes first.
        std::fs::write(&trail, vec![b'x'; 700 << 10]).unwrap();
        let second = r.archive(&trail, "c2").unwrap().unwrap();
        let third = r.archive(&trail, "c3").unwrap().unwrap();
        assert!(!kept.exists() && !second.exists() && third.exists());
        // Beyond the age limit everything goes.
        let old = dir.join("kept/c4@1.jsonl");
        std::fs::write(&old, "x\n").unwrap();
        r.prune().unwrap();
        assert!(!old.exists());
        // An id of 255 bytes is kept and found too.
        let long = "L".repeat(255);
        let kept_long = r.archive(&trail, &long).unwrap().unwrap();
        assert_eq!(r.find(&long), Some(kept_long));
        assert_eq!(r.find(&"L".repeat(254)), None);
        // Not kept when the config says so, or without a trail.
        let off = Retention {
            keep: false,
            ..r.clone()
        };
        assert_eq!(off.archive(&trail, "c5").unwrap(), None);
        assert_eq!(r.archive(&dir.join("none.jsonl"), "c6").unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn prunes_come_when_an_eighth_of_the_budget_or_their_time_has_passed() {
        let dir = std::env::temp_dir().join(format!("cordon-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let r = Retention {
            dir: dir.clone(),
            max_total_mb: 8,
            ..Default::default()
        };
        assert!(r.prune_due(10).unwrap(), "never pruned: due");
        assert!(!r.prune_due(512 << 10).unwrap(), "half an eighth since");
        assert!(r.prune_due(600 << 10).unwrap(), "past an eighth (1 MiB) since");
        assert!(!r.prune_due(10).unwrap(), "counting again from 0");
        // The count survives; the time of the last prune is the mtime.
        let stamp = dir.join(".prune");
        assert_eq!(std::fs::read_to_string(&stamp).unwrap(), "10");
        let old = std::time::SystemTime::now() - PRUNE_EVERY - std::time::Duration::from_secs(1);
        std::fs::File::options()
            .write(true)
            .open(&stamp)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(r.prune_due(10).unwrap(), "the last prune is old: due");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_trail_is_rotated_and_bounded() {
        let dir = std::env::temp_dir().join(format!("cordon-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.jsonl");
        let log = AuditLog::open_with_limit(Some(&path), 4096).unwrap();
        for i in 0..1000 {
            log.record(i, "openat", "/etc/hostname O_RDONLY", Decision::Allow, "fd 3");
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
