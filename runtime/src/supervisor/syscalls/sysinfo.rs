//! sysinfo(2): memory and uptime as the container sees them (what LXCFS
//! does for /proc/meminfo, without FUSE): total memory is the cgroup's
//! memory limit when one is set, free memory the limit minus the cgroup's
//! usage, uptime the time since the container started, loads the
//! container's (those of its `/proc/loadavg`). The memory numbers are
//! those of the container's `/proc/meminfo` ([`crate::views::render::memory`]),
//! so `free`, which reads both, agrees with itself.

use super::{Ctx, Outcome, Reply};
use crate::sys;
use crate::views::cgroup::Limits;

/// Emulated sysinfo: host values, narrowed to the container's view.
pub fn sysinfo(ctx: &Ctx<'_>) -> Outcome {
    let Ok(mut si) = sys::sysinfo() else {
        return Outcome::new(Reply::Errno(libc::EFAULT), "emulate", String::new());
    };
    let host = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let dirs = ctx.sup.cgroups(ctx.pid());
    let limits = dirs.as_ref().map(Limits::read_memory).unwrap_or_default();
    if let Some(m) = crate::views::render::memory(&limits, &host) {
        si.mem_unit = 1;
        si.totalram = m.total as _;
        si.freeram = m.free as _;
        si.sharedram = m.shmem as _;
        si.bufferram = 0;
        si.totalswap = m.swap_total as _;
        si.freeswap = m.swap_free as _;
    }
    si.uptime = ctx.sup.started.elapsed().as_secs() as _;
    // The load averages of /proc/loadavg, in sysinfo's fixed point
    // (SI_LOAD_SHIFT: 16 bits of fraction).
    let (loads, _, _) = crate::supervisor::views::load(ctx.sup, dirs.as_ref(), ctx.pid(), false);
    si.loads = loads.map(|l| (l * 65536.0) as _);
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
