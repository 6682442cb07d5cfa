//! Landlock's own denials in the trail: what the kernel level refuses,
//! read from the kernel's audit, without changing what the caller sees.
//!
//! With the runtime config's `[audit] kernel = true`, each of the
//! container's processes restricts itself with
//! `LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON` (Landlock ABI 7), so the
//! kernel logs the denials of its programs, and this thread reads the
//! audit records from the netlink audit socket's read-only multicast
//! group (`AUDIT_NLGRP_READLOG`, which needs CAP_AUDIT_READ: joined before
//! the supervisor confines itself). The kernel sends them only while its
//! audit is enabled (auditd, or `auditctl -e 1`); cordon never turns it
//! on.
//!
//! An event is several records with one serial (kernel docs:
//! Documentation/userspace-api/landlock.rst, "Logging"):
//!
//! ```text
//! 1423 audit(1796273348.380:6): domain=1c271380d blockers=fs.read_dir path="/data/secret" dev="vda" ino=10018904
//! 1424 audit(1796273348.380:6): domain=1c271380d status=allocated mode=enforcing pid=5109 uid=0 exe="/cordon" comm="..."
//! 1300 audit(1796273348.380:6): arch=c000003e syscall=257 success=no exit=-13 ... pid=5109 ...
//! 1320 audit(1796273348.380:6):
//! ```
//!
//! `AUDIT_LANDLOCK_DOMAIN` (1424) names the process that created a domain,
//! with the event of the domain's first denial: a domain is this
//! container's when that process is its init (every process of the
//! container runs in a domain the init's ruleset or the executor of
//! `exec` created, or in one nested below, whose creator is in the
//! container's pid namespace). Every host receives every record; each
//! supervisor keeps its own.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, OnceLock};

use nix::sys::socket::{bind, recv, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType};

use super::audit::Decision;
use super::Supervisor;

/// `AUDIT_LANDLOCK_ACCESS`: one denied access.
const LANDLOCK_ACCESS: u16 = 1423;
/// `AUDIT_LANDLOCK_DOMAIN`: a domain's creation (with its first denial)
/// or its end.
const LANDLOCK_DOMAIN: u16 = 1424;
/// `AUDIT_SYSCALL`: the call an event happened in.
const SYSCALL: u16 = 1300;
/// `AUDIT_EOE`: the end of an event.
const EOE: u16 = 1320;
/// `AUDIT_NLGRP_READLOG`: the read-only multicast group (bit mask).
const NLGRP_READLOG: u32 = 1;
/// Events held for their last record at most (a process with no audit
/// context sends no SYSCALL and no EOE record: its events are flushed
/// once this many later ones came).
const HELD: usize = 16;

/// Joins the read-only multicast group of the kernel's audit. Errors: no
/// CAP_AUDIT_READ, a kernel without audit.
pub(crate) fn open() -> io::Result<OwnedFd> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkAudit,
    )?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, NLGRP_READLOG))?;
    Ok(fd)
}

/// The stream of this supervisor: its socket and what it has gathered.
struct Stream {
    fd: OwnedFd,
    reader: Mutex<Reader>,
}

/// The one stream, once [`serve`] started it.
static STREAM: OnceLock<Stream> = OnceLock::new();

/// Reads the audit records on `fd` on a thread of its own and writes this
/// container's Landlock denials to the trail.
pub(crate) fn serve(fd: OwnedFd, sup: Arc<Supervisor>) -> io::Result<()> {
    let stream = Stream {
        fd,
        reader: Mutex::new(Reader::default()),
    };
    if STREAM.set(stream).is_err() {
        return Err(io::Error::other("the kernel audit stream is served already"));
    }
    std::thread::Builder::new()
        .name("kernel-audit".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            let mut buf = vec![0u8; BATCH];
            loop {
                if let Err(e) = read(&sup, &mut buf, MsgFlags::empty()) {
                    let what = format!("kernel audit: {e}");
                    sup.audit.record(0, "supervisor", &what, Decision::Event, "error");
                    return;
                }
            }
        })
        .map(drop)
}

/// Receives one message batch into `buf` (with `flags`) and records what it
/// completes. `Ok(false)`: nothing was there (`MSG_DONTWAIT`).
fn read(sup: &Supervisor, buf: &mut [u8], flags: MsgFlags) -> nix::Result<bool> {
    let Some(s) = STREAM.get() else { return Ok(false) };
    let n = match recv(s.fd.as_raw_fd(), buf, flags) {
        Ok(n) => n,
        // ENOBUFS: the socket's queue overflowed, records were lost.
        Err(nix::errno::Errno::EINTR | nix::errno::Errno::ENOBUFS) => return Ok(true),
        Err(nix::errno::Errno::EAGAIN) => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut reader = s.reader.lock().unwrap_or_else(|e| e.into_inner());
    for (kind, text) in messages(&buf[..n]) {
        for ev in reader.add(kind, text) {
            record(sup, &mut reader.domains, &ev);
        }
    }
    Ok(true)
}

/// Before the supervisor exits: gives the kernel's audit thread
/// [`DRAIN`] to deliver the records of the container's last calls, then
/// records what arrived and every event still open.
pub(crate) fn drain(sup: &Supervisor) {
    let Some(s) = STREAM.get() else { return };
    std::thread::sleep(DRAIN);
    let mut buf = vec![0u8; BATCH];
    while let Ok(true) = read(sup, &mut buf, MsgFlags::MSG_DONTWAIT) {}
    let mut reader = s.reader.lock().unwrap_or_else(|e| e.into_inner());
    let open = std::mem::take(&mut reader.open);
    for ev in open.into_values() {
        record(sup, &mut reader.domains, &ev);
    }
}

/// The most one receive takes (bytes): an audit record is at most
/// `MAX_AUDIT_MESSAGE_LENGTH` (8970), a batch several.
const BATCH: usize = 64 * 1024;

/// How long [`drain`] waits for the kernel's audit thread.
const DRAIN: std::time::Duration = std::time::Duration::from_millis(20);

/// The netlink messages in `buf`: (type, text).
fn messages(mut buf: &[u8]) -> Vec<(u16, String)> {
    let mut out = Vec::new();
    while buf.len() >= 16 {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < 16 || len > buf.len() {
            break;
        }
        let text = String::from_utf8_lossy(&buf[16..len]);
        out.push((kind, text.trim_end_matches('\0').to_string()));
        // Messages are aligned to 4 bytes (NLMSG_ALIGN).
        let next = (len + 3) & !3;
        buf = &buf[next.min(buf.len())..];
    }
    out
}

/// One event's records, by kind.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// `AUDIT_LANDLOCK_ACCESS` records' fields.
    pub accesses: Vec<BTreeMap<String, String>>,
    /// `AUDIT_LANDLOCK_DOMAIN` records' fields.
    pub domains: Vec<BTreeMap<String, String>>,
    /// The `AUDIT_SYSCALL` record's fields.
    pub syscall: Option<BTreeMap<String, String>>,
}

/// Gathers records into events, by serial.
#[derive(Default)]
pub(crate) struct Reader {
    /// Events still open, by serial, in arrival order.
    open: BTreeMap<u64, Event>,
    /// Domains seen allocated, with the host pid of the process that
    /// created each.
    pub domains: HashMap<String, i32>,
}

impl Reader {
    /// Takes one record (`kind`, its text `audit(TIME:SERIAL): fields`);
    /// returns the events it completed.
    pub(crate) fn add(&mut self, kind: u16, text: String) -> Vec<Event> {
        let Some((serial, fields)) = header(&text) else {
            return Vec::new();
        };
        let mut done = Vec::new();
        match kind {
            LANDLOCK_ACCESS | LANDLOCK_DOMAIN | SYSCALL => {
                let ev = self.open.entry(serial).or_default();
                let f = fields_of(fields);
                match kind {
                    LANDLOCK_ACCESS => ev.accesses.push(f),
                    LANDLOCK_DOMAIN => ev.domains.push(f),
                    _ => ev.syscall = Some(f),
                }
            }
            EOE => done.extend(self.open.remove(&serial)),
            _ => {}
        }
        while self.open.len() > HELD {
            let first = *self.open.keys().next().expect("not empty");
            done.extend(self.open.remove(&first));
        }
        done.retain(|e| !e.accesses.is_empty() || !e.domains.is_empty());
        done
    }
}

/// The serial and the fields of a record's text.
fn header(text: &str) -> Option<(u64, &str)> {
    let rest = text.strip_prefix("audit(")?;
    let (stamp, fields) = rest.split_once("):")?;
    let serial = stamp.split_once(':')?.1.parse().ok()?;
    Some((serial, fields.trim_start()))
}

/// `key=value` fields; a quoted value is taken whole, an untrusted string
/// the kernel wrote in hex (it held a space, a quote or a control
/// character) is decoded for `path`, `name` and `exe`.
pub(crate) fn fields_of(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = text.trim_start();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key.trim().to_string();
        let (value, next) = if let Some(q) = after.strip_prefix('"') {
            match q.split_once('"') {
                Some((v, n)) => (v.to_string(), n),
                None => (q.to_string(), ""),
            }
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            let raw = &after[..end];
            let v = if matches!(key.as_str(), "path" | "name" | "exe") {
                unhex(raw).unwrap_or_else(|| raw.to_string())
            } else {
                raw.to_string()
            };
            (v, &after[end..])
        };
        out.insert(key, value);
        rest = next.trim_start();
    }
    out
}

/// `s` decoded from hex, if it is hex.
fn unhex(s: &str) -> Option<String> {
    if s.is_empty() || !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect();
    Some(String::from_utf8_lossy(&bytes?).into_owned())
}

/// Records `ev`'s denials when its domain is this container's; keeps
/// `domains` (creator pids) up to date.
fn record(sup: &Supervisor, domains: &mut HashMap<String, i32>, ev: &Event) {
    for d in &ev.domains {
        let Some(id) = d.get("domain") else { continue };
        match d.get("status").map(String::as_str) {
            Some("allocated") => {
                if let Some(pid) = d.get("pid").and_then(|p| p.parse().ok()) {
                    domains.insert(id.clone(), pid);
                }
            }
            Some("deallocated") => {
                domains.remove(id);
            }
            _ => {}
        }
    }
    for a in &ev.accesses {
        let Some(&creator) = a.get("domain").and_then(|d| domains.get(d)) else {
            continue;
        };
        if !ours(sup, creator) {
            continue;
        }
        let sc = ev.syscall.as_ref();
        let pid = sc.and_then(|s| s.get("pid")).and_then(|p| p.parse().ok()).unwrap_or(0);
        let syscall = sc
            .and_then(|s| s.get("syscall"))
            .and_then(|n| n.parse::<u32>().ok())
            .and_then(crate::abi::table::name)
            .unwrap_or("landlock");
        let result = sc
            .and_then(|s| s.get("exit"))
            .and_then(|e| e.parse::<i32>().ok())
            .filter(|e| *e < 0)
            .map(|e| crate::errno::name(-e))
            .unwrap_or_else(|| "denied".into());
        let path = a.get("path").cloned();
        let object = path.clone().or_else(|| a.get("name").cloned()).unwrap_or_default();
        let blockers = a.get("blockers").map(String::as_str).unwrap_or("?");
        let detail = format!("{object} (landlock: {blockers})");
        let rule = path
            .as_deref()
            .and_then(|p| sup.policy().explain_path(p))
            .unwrap_or_else(|| "landlock".into());
        sup.audit
            .record_by(pid, syscall, &detail, Decision::Deny, &result, Some(&rule));
    }
}

/// Whether host pid `creator` (a Landlock domain's creator) is this
/// container's: its init, or a process in the init's pid namespace.
fn ours(sup: &Supervisor, creator: i32) -> bool {
    let Some(&init) = sup.init.get() else {
        return false;
    };
    if creator == init {
        return true;
    }
    let ns = |pid: i32| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok();
    ns(creator).is_some_and(|n| Some(n) == ns(init))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_gather_into_events_by_serial() {
        let mut r = Reader::default();
        let lines = [
            (
                1423,
                r#"audit(1796273348.380:6): domain=1c271380d blockers=fs.read_dir path="/data/secret" dev="vda" ino=10018904"#,
            ),
            (
                1424,
                r#"audit(1796273348.380:6): domain=1c271380d status=allocated mode=enforcing pid=5109 uid=0 exe="/cordon" comm="youki:[2:INIT]""#,
            ),
            (
                1300,
                r#"audit(1796273348.380:6): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c pid=5109 comm="python3""#,
            ),
        ];
        for (k, t) in lines {
            assert!(r.add(k, t.to_string()).is_empty(), "open until its end");
        }
        let done = r.add(1320, "audit(1796273348.380:6): ".into());
        assert_eq!(done.len(), 1);
        let ev = &done[0];
        assert_eq!(ev.accesses[0]["path"], "/data/secret");
        assert_eq!(ev.accesses[0]["blockers"], "fs.read_dir");
        assert_eq!(ev.domains[0]["pid"], "5109");
        assert_eq!(ev.syscall.as_ref().unwrap()["exit"], "-13");
    }

    #[test]
    fn an_event_without_an_end_is_flushed_later() {
        let mut r = Reader::default();
        let first = r#"audit(1.0:1): domain=a blockers=fs.read_file path="/x""#;
        assert!(r.add(1423, first.to_string()).is_empty());
        let mut done = Vec::new();
        for serial in 2..=(HELD as u64 + 1) {
            done.extend(r.add(1300, format!("audit(1.0:{serial}): syscall=2 pid=1")));
        }
        assert_eq!(done.len(), 1, "the first event, flushed; the others hold no denial");
        assert_eq!(done[0].accesses[0]["path"], "/x");
    }

    #[test]
    fn hex_paths_are_decoded() {
        let f = fields_of("domain=a blockers=fs.read_file path=2F746D702F6120622E747874 dev=\"vda\"");
        assert_eq!(f["path"], "/tmp/a b.txt");
        assert_eq!(f["dev"], "vda");
        assert_eq!(f["blockers"], "fs.read_file");
    }

    #[test]
    fn netlink_messages_are_split() {
        let mut buf = Vec::new();
        for (kind, text) in [(1423u16, "audit(1.0:1): a=b"), (1320, "audit(1.0:1): ")] {
            let len = 16 + text.len();
            buf.extend_from_slice(&(len as u32).to_ne_bytes());
            buf.extend_from_slice(&kind.to_ne_bytes());
            buf.extend_from_slice(&[0; 10]);
            buf.extend_from_slice(text.as_bytes());
            while buf.len() % 4 != 0 {
                buf.push(0);
            }
        }
        let m = messages(&buf);
        assert_eq!(
            m,
            [
                (1423, "audit(1.0:1): a=b".to_string()),
                (1320, "audit(1.0:1): ".to_string())
            ]
        );
    }
}
