//! The views' text, as pure functions of the host's own file (read by the
//! caller) and the container's [`Limits`]. Without a limit a view is the
//! host's text unchanged. Formats follow proc(5) and the kernel's
//! `fs/proc/meminfo.c`, `fs/proc/stat.c`, `fs/proc/loadavg.c`.

use super::cgroup::Limits;

/// Memory as the container sees it, in bytes: one computation for
/// `/proc/meminfo` and the emulated sysinfo(2), so `free` (which takes
/// its totals from sysinfo and `Cached` from meminfo) and the file agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// MemTotal: the cgroup's limit.
    pub total: u64,
    /// MemFree: the limit minus the usage.
    pub free: u64,
    /// MemAvailable: free plus the reclaimable page cache, at most total.
    pub available: u64,
    /// Cached: the cgroup's page cache, at most its usage.
    pub cached: u64,
    /// Shmem (tmpfs, shared memory), at most `cached`.
    pub shmem: u64,
    /// SwapTotal: the cgroup's swap limit (at most the host's), else the host's.
    pub swap_total: u64,
    /// SwapFree.
    pub swap_free: u64,
}

/// `kB` values of a meminfo text by key (`MemTotal`), in bytes.
pub fn meminfo_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, rest) = l.split_once(':')?;
        (k == key).then(|| rest.split_whitespace().next()?.parse::<u64>().ok().map(|v| v * 1024))?
    })
}

/// The container's memory, or `None` when it has no memory limit below
/// the host's total (`host_meminfo`: the host's `/proc/meminfo`).
pub fn memory(l: &Limits, host_meminfo: &str) -> Option<Memory> {
    let host_total = meminfo_value(host_meminfo, "MemTotal")?;
    let total = l.mem_limit.filter(|&m| m < host_total)?;
    let usage = l.mem_usage.min(total);
    let free = total - usage;
    let cached = l.stat("file").min(usage);
    let shmem = l.stat("shmem").min(cached);
    let reclaimable = (cached - shmem).saturating_add(l.stat("slab_reclaimable"));
    let host_swap = meminfo_value(host_meminfo, "SwapTotal").unwrap_or(0);
    let (swap_total, swap_free) = match l.swap_limit {
        Some(s) => {
            let t = s.min(host_swap);
            (t, t - l.swap_usage.min(t))
        }
        None => (host_swap, meminfo_value(host_meminfo, "SwapFree").unwrap_or(0)),
    };
    Some(Memory {
        total,
        free,
        available: free.saturating_add(reclaimable).min(total),
        cached,
        shmem,
        swap_total,
        swap_free,
    })
}

/// `/proc/meminfo`: the host's lines, with the memory lines the cgroup
/// accounts for replaced by its numbers and every other `kB` line capped
/// at MemTotal (host-wide counters larger than the container's memory
/// would make tools compute negative usage).
pub fn meminfo(host: &str, l: &Limits) -> String {
    let Some(m) = memory(l, host) else {
        return host.to_string();
    };
    let s = |k: &str| l.stat(k);
    let over: [(&str, u64); 19] = [
        ("MemTotal", m.total),
        ("MemFree", m.free),
        ("MemAvailable", m.available),
        ("Buffers", 0),
        ("Cached", m.cached),
        ("SwapCached", 0),
        ("Active", s("active_anon") + s("active_file")),
        ("Inactive", s("inactive_anon") + s("inactive_file")),
        ("Active(anon)", s("active_anon")),
        ("Inactive(anon)", s("inactive_anon")),
        ("Active(file)", s("active_file")),
        ("Inactive(file)", s("inactive_file")),
        ("Unevictable", s("unevictable")),
        ("SwapTotal", m.swap_total),
        ("SwapFree", m.swap_free),
        ("AnonPages", s("anon")),
        ("Shmem", m.shmem),
        ("SReclaimable", s("slab_reclaimable")),
        ("SUnreclaim", s("slab_unreclaimable")),
    ];
    let mut out = String::with_capacity(host.len());
    for line in host.lines() {
        let parsed = line.split_once(':').and_then(|(k, rest)| {
            let mut f = rest.split_whitespace();
            let v = f.next()?.parse::<u64>().ok()?;
            (f.next() == Some("kB")).then_some((k, v * 1024))
        });
        let new = parsed.and_then(|(k, old)| {
            let v = match over.iter().find(|(o, _)| *o == k) {
                Some((_, v)) if k.starts_with("Swap") => *v,
                Some((_, v)) => (*v).min(m.total),
                None if k == "Slab" => (s("slab_reclaimable") + s("slab_unreclaimable")).min(m.total),
                None if !k.starts_with("Swap") => old.min(m.total),
                None => old,
            };
            (v != old).then(|| format!("{:<16}{:>8} kB", format!("{k}:"), v / 1024))
        });
        out.push_str(new.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// The CPUs the container is shown, in host numbering: those of its
/// cpuset (every online CPU without one), the first `ceil(quota/period)`
/// of them under a CPU quota. `online`: the host's online CPUs.
pub fn cpus(l: &Limits, online: &[u32]) -> Vec<u32> {
    let mut set: Vec<u32> = match &l.cpuset {
        Some(c) if !c.is_empty() => online.iter().copied().filter(|n| c.contains(n)).collect(),
        _ => online.to_vec(),
    };
    if set.is_empty() {
        set = online.to_vec();
    }
    if let Some((q, p)) = l.quota {
        set.truncate(q.div_ceil(p).max(1) as usize);
    }
    set
}

/// `/sys/devices/system/cpu/online` for `n` CPUs: `0-{n-1}` (`0` for one).
pub fn online(n: usize) -> String {
    match n {
        0 | 1 => "0\n".into(),
        n => format!("0-{}\n", n - 1),
    }
}

/// `/proc/cpuinfo`: the host's blocks of the CPUs in `cpus` (host
/// numbering), renumbered from 0, with `siblings` and `cpu cores` at most
/// their count. The host's text when `cpus` holds every CPU it lists.
pub fn cpuinfo(host: &str, cpus: &[u32]) -> String {
    let blocks: Vec<&str> = host.split("\n\n").filter(|b| !b.trim().is_empty()).collect();
    let number = |b: &str| {
        b.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "processor").then(|| v.trim().parse::<u32>().ok())?
        })
    };
    if blocks.iter().all(|b| number(b).is_some_and(|n| cpus.contains(&n))) {
        return host.to_string();
    }
    let n = cpus.len();
    let mut out = String::new();
    for (i, b) in blocks
        .iter()
        .filter(|b| number(b).is_some_and(|n| cpus.contains(&n)))
        .enumerate()
    {
        for line in b.lines() {
            let (k, v) = line.split_once(':').unwrap_or((line, ""));
            let key = k.trim();
            match key {
                "processor" => out.push_str(&format!("{k}: {i}")),
                "siblings" | "cpu cores" => {
                    let v = v.trim().parse::<usize>().map_or(n, |v| v.min(n));
                    out.push_str(&format!("{k}: {v}"));
                }
                _ => out.push_str(line),
            }
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// `/proc/stat`: the host's `cpuN` lines of the CPUs in `cpus`,
/// renumbered from 0, and the `cpu` line their sum; every other line as
/// the host's. The host's text when `cpus` holds every CPU it lists.
pub fn stat(host: &str, cpus: &[u32]) -> String {
    let per_cpu = |l: &str| {
        let first = l.split_whitespace().next()?;
        first.strip_prefix("cpu")?.parse::<u32>().ok()
    };
    if host.lines().filter_map(per_cpu).all(|n| cpus.contains(&n)) {
        return host.to_string();
    }
    let mut sum: Vec<u64> = Vec::new();
    let mut lines = Vec::new();
    let mut i = 0;
    for l in host.lines() {
        if let Some(n) = per_cpu(l) {
            if !cpus.contains(&n) {
                continue;
            }
            let fields: Vec<u64> = l.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
            sum.resize(sum.len().max(fields.len()), 0);
            for (s, f) in sum.iter_mut().zip(&fields) {
                *s += f;
            }
            lines.push(format!(
                "cpu{i} {}",
                fields.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
            ));
            i += 1;
        } else {
            lines.push(l.to_string());
        }
    }
    let mut out = String::new();
    for l in lines {
        if l.split_whitespace().next() == Some("cpu") {
            out.push_str(&format!(
                "cpu  {}",
                sum.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
            ));
        } else {
            out.push_str(&l);
        }
        out.push('\n');
    }
    out
}

/// `/proc/uptime`: seconds since the container started and the idle
/// seconds summed over its `ncpus` CPUs (their time minus what the
/// cgroup used, `cpu_used` seconds; 0 at least).
pub fn uptime(secs: f64, ncpus: usize, cpu_used: Option<f64>) -> String {
    let idle = (secs * ncpus as f64 - cpu_used.unwrap_or(0.0)).max(0.0);
    format!("{secs:.2} {idle:.2}\n")
}

/// The 1, 5 and 15 minute load averages `loads`, `dt` seconds later,
/// with `active` tasks runnable or in uninterruptible sleep throughout
/// (the kernel's exponential decay, `kernel/sched/loadavg.c`).
pub fn decay(loads: [f64; 3], active: usize, dt: f64) -> [f64; 3] {
    let mut out = loads;
    for (l, period) in out.iter_mut().zip([60.0, 300.0, 900.0]) {
        let e = (-dt.max(0.0) / period).exp();
        *l = *l * e + active as f64 * (1.0 - e);
    }
    out
}

/// `/proc/loadavg`: the load averages, `running`/`total` threads of the
/// container, and the last pid (the container's own numbering is not
/// known to the host: 0).
pub fn loadavg(loads: [f64; 3], running: usize, total: usize) -> String {
    format!("{:.2} {:.2} {:.2} {running}/{total} 0\n", loads[0], loads[1], loads[2])
}

/// `/proc/swaps`: under a memory limit, one `none virtual` line of the
/// container's swap (none when it has none); the host's text otherwise
/// (the host's swap devices' names are not shown under a limit).
pub fn swaps(host: &str, mem: Option<&Memory>) -> String {
    let Some(m) = mem else {
        return host.to_string();
    };
    let mut out = String::from("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n");
    if m.swap_total > 0 {
        out.push_str(&format!(
            "none                                    virtual\t\t{}\t\t{}\t\t0\n",
            m.swap_total / 1024,
            (m.swap_total - m.swap_free) / 1024
        ));
    }
    out
}

/// `/proc/version` of a kernel whose release is `release` and version
/// string `version`.
pub fn version(release: &str, version: &str) -> String {
    format!("Linux version {release} (cordon@cordon) (gcc, GNU ld) {version}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST_MEMINFO: &str = "MemTotal:        8000000 kB\n\
        MemFree:         4000000 kB\n\
        MemAvailable:    6000000 kB\n\
        Buffers:          100000 kB\n\
        Cached:          2000000 kB\n\
        SwapCached:            0 kB\n\
        Active:          1000000 kB\n\
        SwapTotal:       1048576 kB\n\
        SwapFree:        1048576 kB\n\
        Slab:             500000 kB\n\
        Committed_AS:    9000000 kB\n\
        HugePages_Total:       0\n";

    fn limited(mb: u64, used_mb: u64, cache_mb: u64) -> Limits {
        Limits {
            mem_limit: Some(mb << 20),
            mem_usage: used_mb << 20,
            mem_stat: vec![("file".into(), cache_mb << 20), ("shmem".into(), 1 << 20)],
            ..Default::default()
        }
    }

    #[test]
    fn meminfo_under_a_limit() {
        let text = meminfo(HOST_MEMINFO, &limited(256, 100, 40));
        let kb = |k| meminfo_value(&text, k).unwrap() / 1024;
        assert_eq!(kb("MemTotal"), 262144);
        assert_eq!(kb("MemFree"), 156 * 1024);
        assert_eq!(kb("Cached"), 40 * 1024);
        assert_eq!(kb("Buffers"), 0);
        assert_eq!(kb("MemAvailable"), (156 + 39) * 1024);
        assert_eq!(kb("Committed_AS"), 262144, "capped at MemTotal");
        assert_eq!(kb("Slab"), 0);
        assert_eq!(kb("SwapTotal"), 1048576, "no swap limit: the host's");
        assert!(text.contains("MemTotal:         262144 kB\n"), "{text}");
        assert!(text.contains("HugePages_Total:       0\n"));
        // free(1)'s used = total - free - buffers - cached stays >= 0.
        assert!(kb("MemTotal") >= kb("MemFree") + kb("Buffers") + kb("Cached"));
    }

    #[test]
    fn meminfo_cache_above_usage_and_swap_limit() {
        let mut l = limited(256, 10, 64);
        l.swap_limit = Some(0);
        let text = meminfo(HOST_MEMINFO, &l);
        let kb = |k| meminfo_value(&text, k).unwrap() / 1024;
        assert_eq!(kb("Cached"), 10 * 1024, "at most the usage");
        assert_eq!((kb("SwapTotal"), kb("SwapFree")), (0, 0));
        assert_eq!(
            swaps("host swaps\n", memory(&l, HOST_MEMINFO).as_ref()).lines().count(),
            1
        );
    }

    #[test]
    fn meminfo_without_a_limit_is_the_hosts() {
        assert_eq!(meminfo(HOST_MEMINFO, &Limits::default()), HOST_MEMINFO);
        assert_eq!(
            meminfo(HOST_MEMINFO, &limited(1 << 20, 1, 1)),
            HOST_MEMINFO,
            "above the host's"
        );
        assert_eq!(swaps("host swaps\n", None), "host swaps\n");
    }

    #[test]
    fn cpus_of_cpuset_and_quota() {
        let online = [0, 1, 2, 3];
        let l = |cpuset: Option<Vec<u32>>, quota| Limits {
            cpuset,
            quota,
            ..Default::default()
        };
        assert_eq!(cpus(&l(None, None), &online), online);
        assert_eq!(cpus(&l(Some(vec![2, 3]), None), &online), [2, 3]);
        assert_eq!(cpus(&l(None, Some((100_000, 100_000))), &online), [0]);
        assert_eq!(cpus(&l(None, Some((150_000, 100_000))), &online), [0, 1], "rounded up");
        assert_eq!(cpus(&l(Some(vec![3]), Some((400_000, 100_000))), &online), [3]);
        assert_eq!(cpus(&l(None, Some((1, 100_000))), &online), [0]);
        assert_eq!(super::online(1), "0\n");
        assert_eq!(super::online(3), "0-2\n");
    }

    const CPUINFO: &str = "processor\t: 0\nmodel name\t: X\nsiblings\t: 4\ncpu cores\t: 4\n\n\
                           processor\t: 1\nmodel name\t: X\nsiblings\t: 4\ncpu cores\t: 4\n\n\
                           processor\t: 2\nmodel name\t: X\nsiblings\t: 4\ncpu cores\t: 4\n\n";

    #[test]
    fn cpuinfo_of_some_cpus() {
        assert_eq!(cpuinfo(CPUINFO, &[0, 1, 2]), CPUINFO);
        let one = cpuinfo(CPUINFO, &[2]);
        assert_eq!(
            one,
            "processor\t: 0\nmodel name\t: X\nsiblings\t: 1\ncpu cores\t: 1\n\n"
        );
        assert_eq!(cpuinfo(CPUINFO, &[1, 2]).matches("processor").count(), 2);
    }

    #[test]
    fn stat_of_some_cpus() {
        let host = "cpu  10 0 10 100\ncpu0 1 0 2 30\ncpu1 4 0 3 40\ncpu2 5 0 5 30\nintr 5\nbtime 7\n";
        assert_eq!(stat(host, &[0, 1, 2]), host);
        assert_eq!(
            stat(host, &[1, 2]),
            "cpu  9 0 8 70\ncpu0 4 0 3 40\ncpu1 5 0 5 30\nintr 5\nbtime 7\n"
        );
    }

    #[test]
    fn uptime_and_loadavg() {
        assert_eq!(uptime(12.345, 2, Some(4.0)), "12.35 20.69\n");
        assert_eq!(uptime(1.0, 1, Some(5.0)), "1.00 0.00\n");
        let l = decay([0.0; 3], 2, 60.0);
        assert!((l[0] - 2.0 * (1.0 - (-1.0f64).exp())).abs() < 1e-9);
        assert!(l[0] > l[1] && l[1] > l[2]);
        assert_eq!(decay([1.0, 1.0, 1.0], 1, 1000.0), [1.0, 1.0, 1.0]);
        assert_eq!(loadavg([0.5, 0.25, 0.0], 1, 3), "0.50 0.25 0.00 1/3 0\n");
    }

    #[test]
    fn version_text() {
        assert!(version("6.1.0-cordon", "#1 SMP").starts_with("Linux version 6.1.0-cordon "));
    }
}
