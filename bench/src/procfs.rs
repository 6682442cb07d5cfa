//! Small /proc readers: processes, their memory and cgroups, meminfo.

use std::path::Path;

/// A process seen in /proc.
#[derive(Debug, Clone)]
pub struct Proc {
    /// Pid.
    pub pid: i32,
    /// Parent pid.
    pub ppid: i32,
    /// Argument vector.
    pub cmdline: Vec<String>,
}

/// Every process (racy by nature: processes come and go while we read).
pub fn processes() -> Vec<Proc> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = raw
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect();
        out.push(Proc {
            pid,
            ppid: status_field(pid, "PPid:").unwrap_or(0) as i32,
            cmdline,
        });
    }
    out
}

/// A numeric field of /proc/PID/status (the first number after `key`).
pub fn status_field(pid: i32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    field(&text, key)
}

fn field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l[key.len()..].split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// VmRSS in KiB.
pub fn rss_kib(pid: i32) -> Option<u64> {
    status_field(pid, "VmRSS:")
}

/// Proportional set size in KiB (shared pages divided among their users).
pub fn pss_kib(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    field(&text, "Pss:")
}

/// The memory cgroup path of `pid` (v1 `memory` controller, else the v2
/// unified path).
pub fn memory_cgroup(pid: i32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mut unified = None;
    for l in text.lines() {
        let mut parts = l.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        if ctrls.split(',').any(|c| c == "memory") {
            return Some(format!("memory{path}"));
        }
        if ctrls.is_empty() {
            unified = Some(format!("unified{path}"));
        }
    }
    unified
}

/// Memory charged to a cgroup (bytes): v1 `memory.usage_in_bytes` or v2
/// `memory.current`. `cg` is what [`memory_cgroup`] returned.
pub fn cgroup_memory_bytes(cg: &str) -> Option<u64> {
    let (kind, path) = cg.split_once('/')?;
    let base = Path::new("/sys/fs/cgroup");
    let candidates = if kind == "memory" {
        vec![base.join("memory").join(path).join("memory.usage_in_bytes")]
    } else {
        vec![
            base.join("unified").join(path).join("memory.current"),
            base.join(path).join("memory.current"),
        ]
    };
    candidates
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .and_then(|s| s.trim().parse().ok())
}

/// MemAvailable in KiB.
pub fn mem_available_kib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    field(&text, "MemAvailable:")
}

/// The 1-minute load average.
pub fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

/// Whether `pid`'s cgroups mention `needle` (a path component we own).
pub fn in_cgroup(pid: i32, needle: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map(|t| t.contains(needle))
        .unwrap_or(false)
}
