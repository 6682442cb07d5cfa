//! sysinfo(2): memory and uptime as the container sees them (what LXCFS
//! does for /proc/meminfo, without FUSE): total memory is the cgroup's
//! memory limit when one is set, free memory the limit minus the cgroup's
//! usage, uptime the time since the container started.

use super::{Ctx, Outcome, Reply};
use crate::sys;

/// (limit, usage) in bytes of the memory cgroup of process `pid`, read from
/// cgroup v1 (`memory.limit_in_bytes`) or v2 (`memory.max`).
fn cgroup_memory(pid: i32) -> Option<(u64, u64)> {
    let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    for line in cg.lines() {
        let mut it = line.splitn(3, ':');
        let (_, ctrls, path) = (it.next()?, it.next()?, it.next()?);
        if ctrls.split(',').any(|c| c == "memory") {
            let dir = format!("/sys/fs/cgroup/memory{path}");
            let limit = std::fs::read_to_string(format!("{dir}/memory.limit_in_bytes")).ok()?;
            let usage = std::fs::read_to_string(format!("{dir}/memory.usage_in_bytes")).ok()?;
            return Some((limit.trim().parse().ok()?, usage.trim().parse().ok()?));
        }
    }
    for line in cg.lines() {
        if let Some(path) = line.strip_prefix("0::") {
            for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
                let dir = format!("{root}{path}");
                if let Ok(max) = std::fs::read_to_string(format!("{dir}/memory.max")) {
                    let usage = std::fs::read_to_string(format!("{dir}/memory.current")).ok()?;
                    let limit = match max.trim() {
                        "max" => u64::MAX,
                        v => v.parse().ok()?,
                    };
                    return Some((limit, usage.trim().parse().ok()?));
                }
            }
        }
    }
    None
}

/// Emulated sysinfo: host values, narrowed to the container's view.
pub fn sysinfo(ctx: &Ctx<'_>) -> Outcome {
    let Ok(mut si) = sys::sysinfo() else {
        return Outcome::new(Reply::Errno(libc::EFAULT), "emulate", String::new());
    };
    let unit = u64::from(si.mem_unit.max(1));
    let host_total = si.totalram * unit;
    if let Some((limit, usage)) = cgroup_memory(ctx.pid()) {
        if limit < host_total {
            si.mem_unit = 1;
            si.totalram = limit as _;
            si.freeram = limit.saturating_sub(usage) as _;
            si.sharedram = 0;
            si.bufferram = 0;
            si.totalswap = 0;
            si.freeswap = 0;
        }
    }
    si.uptime = ctx.sup.started.elapsed().as_secs() as _;
    si.loads = [0; 3];
    let detail = format!(
        "totalram {} uptime {}",
        si.totalram * u64::from(si.mem_unit.max(1)),
        si.uptime
    );
    let reply = match sys::write_mem(ctx.pid(), ctx.arg(0), sys::pod_bytes(&si)) {
        Ok(()) => Reply::Value(0),
        Err(_) => Reply::Errno(libc::EFAULT),
    };
    Outcome::new(reply, "emulate", detail)
}
