//! sysinfo(2): memory and uptime as the container sees them (what LXCFS
//! does for /proc/meminfo, without FUSE): total memory is the cgroup's
//! memory limit when one is set, free memory the limit minus the cgroup's
//! usage, uptime the time since the container started, loads the
//! container's (those of its `/proc/loadavg`). The memory numbers are
//! those of the container's `/proc/meminfo` ([`crate::views::render::memory`]),
//! so `free`, which reads both, agrees with itself.

use super::{Outcome, Reply, Task};
use crate::supervisor::audit::Decision;
use crate::sys;
use crate::views::cgroup::Limits;

/// Emulated sysinfo: host values, narrowed to the container's view.
pub fn sysinfo(t: &(impl Task + ?Sized)) -> Outcome {
    let Ok(mut si) = sys::sysinfo() else {
        return Outcome::new(Reply::Errno(libc::EFAULT), Decision::Emulate, String::new());
    };
    let host = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let dirs = t.cgroups();
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
    si.uptime = t.sup().started.elapsed().as_secs() as _;
    // The load averages of /proc/loadavg, in sysinfo's fixed point
    // (SI_LOAD_SHIFT: 16 bits of fraction).
    let (loads, _, _) = crate::supervisor::views::load(t.sup(), dirs.as_ref(), t.pid(), false);
    si.loads = loads.map(|l| (l * 65536.0) as _);
    let detail = format!(
        "totalram {} uptime {}",
        si.totalram * u64::from(si.mem_unit.max(1)),
        si.uptime
    );
    let reply = match t.write_mem(t.arg(0), sys::pod_bytes(&si)) {
        Ok(()) => Reply::Value(0),
        Err(_) => Reply::Errno(libc::EFAULT),
    };
    Outcome::new(reply, Decision::Emulate, detail)
}

#[cfg(test)]
mod tests {
    use super::super::task::fake::Fake;
    use super::*;

    #[test]
    fn uptime_is_the_containers_and_a_bad_buffer_gets_efault() {
        let mut t = Fake::new("name = 't'\n", std::mem::size_of::<libc::sysinfo>());
        // The container started two hours ago; the host, as a rule, longer
        // or later (either way not at the same second).
        t.sup.started = std::time::Instant::now() - std::time::Duration::from_secs(7200);
        t.args[0] = Fake::BASE;
        let out = sysinfo(&t);
        assert!(matches!(out.reply, Reply::Value(0)));
        let off = std::mem::offset_of!(libc::sysinfo, uptime);
        let uptime = libc::c_long::from_ne_bytes(t.mem.borrow()[off..off + 8].try_into().unwrap());
        assert!((7200..7200 + 600).contains(&uptime), "{uptime}");
        assert!(out.detail.ends_with(&format!("uptime {uptime}")), "{}", out.detail);
        t.args[0] = 0;
        assert!(matches!(sysinfo(&t).reply, Reply::Errno(libc::EFAULT)));
    }
}
