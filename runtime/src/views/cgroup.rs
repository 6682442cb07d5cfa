//! The numbers the views are sized from, read from a container's cgroups:
//! cgroup v1 (one directory per controller: `memory`, `cpu`, `cpuset`,
//! `cpuacct`) or v2 (one directory with every controller's files). On a
//! hybrid host each controller is read from its v1 directory when it has
//! one, else from the v2 directory. A file that is missing or does not
//! parse counts as "no limit" (the host's value shows), never as an error:
//! a view degrades to the host's numbers, it does not fail the open.
//!
//! Sources: Documentation/admin-guide/cgroup-v1/{memory,cpusets}.rst,
//! scheduler/sched-bwc.rst, cgroup-v2.rst.

use std::path::{Path, PathBuf};

/// The cgroup directories of one container on the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupDirs {
    /// The v2 (unified) directory, if the task has one with files in it.
    pub v2: Option<PathBuf>,
    /// v1 `memory` directory.
    pub memory: Option<PathBuf>,
    /// v1 `cpu` directory (CFS quota).
    pub cpu: Option<PathBuf>,
    /// v1 `cpuset` directory.
    pub cpuset: Option<PathBuf>,
    /// v1 `cpuacct` directory (CPU time used).
    pub cpuacct: Option<PathBuf>,
}

impl CgroupDirs {
    /// The directories of host task `pid`, from `/proc/<pid>/cgroup` and
    /// this process's mountinfo. `None` when the task is gone.
    pub fn of(pid: i32) -> Option<Self> {
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        // Where this process sees the cgroup hierarchies: read once (a
        // host's mountinfo can run to thousands of lines, and the
        // supervisor asks on every emulated sysinfo and view it renders).
        static MOUNTINFO: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        let mountinfo = MOUNTINFO
            .get_or_init(|| std::fs::read_to_string("/proc/self/mountinfo").ok())
            .as_deref()?;
        Some(Self::from_texts(&cgroup, mountinfo))
    }

    /// [`CgroupDirs::of`] on the texts of `/proc/<pid>/cgroup` and
    /// `/proc/self/mountinfo`.
    pub fn from_texts(cgroup: &str, mountinfo: &str) -> Self {
        let v1 = |c: &str| {
            let mount = crate::cgroupv1::mount_point_in(mountinfo, c)?;
            let path = cgroup.lines().find_map(|l| {
                let mut p = l.splitn(3, ':');
                let (_, ctrls, path) = (p.next()?, p.next()?, p.next()?);
                ctrls.split(',').any(|x| x == c).then_some(path)
            })?;
            Some(mount.join(path.trim_start_matches('/')))
        };
        let v2 = cgroup.lines().find_map(|l| l.strip_prefix("0::")).and_then(|path| {
            let mount = mountinfo.lines().find_map(|l| {
                let (pre, post) = l.split_once(" - ")?;
                let mut pre = pre.split_whitespace();
                let (root, point) = (pre.nth(3)?, pre.next()?);
                (post.split_whitespace().next()? == "cgroup2" && root == "/").then(|| PathBuf::from(point))
            })?;
            Some(mount.join(path.trim_start_matches('/')))
        });
        CgroupDirs {
            v2,
            memory: v1("memory"),
            cpu: v1("cpu"),
            cpuset: v1("cpuset"),
            cpuacct: v1("cpuacct"),
        }
    }
}

/// What the views need of a cgroup. Byte counts are bytes; `None` means
/// no limit (or an unreadable file): the host's value applies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// Memory limit (v1 `memory.limit_in_bytes`, v2 `memory.max`).
    pub mem_limit: Option<u64>,
    /// Memory in use, page cache included (v1 `memory.usage_in_bytes`,
    /// v2 `memory.current`).
    pub mem_usage: u64,
    /// Counters of `memory.stat` the views use, named as in v2 (`file`,
    /// `anon`, `shmem`, `active_anon`, `inactive_anon`, `active_file`,
    /// `inactive_file`, `slab_reclaimable`, `slab_unreclaimable`); v1's
    /// hierarchical `total_cache`, `total_rss`... are read as those.
    pub mem_stat: Vec<(String, u64)>,
    /// Swap the cgroup may use (v1 `memory.memsw.limit_in_bytes` minus the
    /// memory limit, v2 `memory.swap.max`).
    pub swap_limit: Option<u64>,
    /// Swap in use (v1 memsw usage minus memory usage, v2
    /// `memory.swap.current`).
    pub swap_usage: u64,
    /// The CPUs of the cpuset (v1 `cpuset.effective_cpus`, v2
    /// `cpuset.cpus.effective`), host numbering.
    pub cpuset: Option<Vec<u32>>,
    /// CFS bandwidth: (quota, period) in microseconds (v1
    /// `cpu.cfs_quota_us`/`cpu.cfs_period_us`, v2 `cpu.max`).
    pub quota: Option<(u64, u64)>,
    /// CPU time the cgroup used, in nanoseconds (v1 `cpuacct.usage`, v2
    /// `cpu.stat` `usage_usec`).
    pub cpu_usage_ns: Option<u64>,
}

impl Limits {
    /// A counter of `memory.stat` by its v2 name; 0 when absent.
    pub fn stat(&self, key: &str) -> u64 {
        self.mem_stat.iter().find(|(k, _)| k == key).map_or(0, |(_, v)| *v)
    }

    /// Reads the limits of `dirs`: memory, CPUs and CPU time.
    pub fn read(dirs: &CgroupDirs) -> Self {
        let mut l = Self::read_memory(dirs);
        l.read_cpu(dirs);
        l
    }

    /// Reads the memory fields of `dirs` only (limit, usage, `memory.stat`,
    /// swap): what sysinfo(2) and `/proc/meminfo` need. The CPU fields are
    /// left `None`.
    pub fn read_memory(dirs: &CgroupDirs) -> Self {
        let mut l = Limits::default();
        let text = |dir: &Path, f: &str| std::fs::read_to_string(dir.join(f)).ok();
        let num = |dir: &Path, f: &str| text(dir, f).and_then(|t| t.trim().parse::<u64>().ok());
        // A v1 "no limit" is a huge page-aligned number: anything at or
        // above 2^62 is none.
        let limit = |v: Option<u64>| v.filter(|&v| v < 1 << 62);
        if let Some(m) = &dirs.memory {
            l.mem_limit = limit(num(m, "memory.limit_in_bytes"));
            l.mem_usage = num(m, "memory.usage_in_bytes").unwrap_or(0);
            l.mem_stat = v1_stat(&text(m, "memory.stat").unwrap_or_default());
            let sw = limit(num(m, "memory.memsw.limit_in_bytes"));
            l.swap_limit = match (sw, l.mem_limit) {
                (Some(sw), Some(mem)) => Some(sw.saturating_sub(mem)),
                _ => None,
            };
            l.swap_usage = num(m, "memory.memsw.usage_in_bytes").map_or(0, |u| u.saturating_sub(l.mem_usage));
        } else if let Some(d) = dirs.v2.as_deref().filter(|d| d.join("memory.max").exists()) {
            l.mem_limit = max_or(&text(d, "memory.max").unwrap_or_default());
            l.mem_usage = num(d, "memory.current").unwrap_or(0);
            l.mem_stat = parse_pairs(&text(d, "memory.stat").unwrap_or_default());
            l.swap_limit = text(d, "memory.swap.max").and_then(|t| max_or(&t));
            l.swap_usage = num(d, "memory.swap.current").unwrap_or(0);
        }
        l
    }

    /// Reads the CPU fields of `dirs` into `self`: cpuset, quota, usage.
    fn read_cpu(&mut self, dirs: &CgroupDirs) {
        let l = self;
        let text = |dir: &Path, f: &str| std::fs::read_to_string(dir.join(f)).ok();
        let num = |dir: &Path, f: &str| text(dir, f).and_then(|t| t.trim().parse::<u64>().ok());
        let v2 = dirs.v2.as_deref();
        l.cpuset = match (&dirs.cpuset, v2) {
            (Some(c), _) => text(c, "cpuset.effective_cpus").or_else(|| text(c, "cpuset.cpus")),
            (None, Some(d)) => text(d, "cpuset.cpus.effective"),
            _ => None,
        }
        .and_then(|t| parse_cpu_list(&t));
        l.quota = match (&dirs.cpu, v2) {
            (Some(c), _) => {
                let q = text(c, "cpu.cfs_quota_us").and_then(|t| t.trim().parse::<i64>().ok());
                match (q, num(c, "cpu.cfs_period_us")) {
                    (Some(q), Some(p)) if q > 0 && p > 0 => Some((q as u64, p)),
                    _ => None,
                }
            }
            (None, Some(d)) => text(d, "cpu.max").and_then(|t| {
                let mut f = t.split_whitespace();
                let q = f.next()?.parse::<u64>().ok()?;
                let p = f.next()?.parse::<u64>().ok()?;
                (q > 0 && p > 0).then_some((q, p))
            }),
            _ => None,
        };
        l.cpu_usage_ns = match (&dirs.cpuacct, v2) {
            (Some(c), _) => num(c, "cpuacct.usage"),
            (None, Some(d)) => text(d, "cpu.stat").and_then(|t| {
                parse_pairs(&t)
                    .into_iter()
                    .find(|(k, _)| k == "usage_usec")
                    .map(|(_, v)| v.saturating_mul(1000))
            }),
            _ => None,
        };
    }
}

/// `max` or a number (v2 limit files).
fn max_or(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// `key value` lines.
fn parse_pairs(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// v1 `memory.stat`, its hierarchical `total_*` counters renamed to the
/// v2 names the views use (`total_cache` is v2's `file`, `total_rss`
/// `anon`).
fn v1_stat(text: &str) -> Vec<(String, u64)> {
    parse_pairs(text)
        .into_iter()
        .filter_map(|(k, v)| {
            let k = k.strip_prefix("total_")?;
            let k = match k {
                "cache" => "file",
                "rss" => "anon",
                k => k,
            };
            Some((k.to_string(), v))
        })
        .collect()
}

/// A kernel CPU list (`0-3,8,10-11`) as CPU numbers, ascending. `None`
/// when it does not parse.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 65536 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(files: &[(&str, &str)]) -> PathBuf {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("cordon-views-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list("\n"), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn reads_a_v2_cgroup() {
        let d = fixture(&[
            ("memory.max", "268435456\n"),
            ("memory.current", "10485760\n"),
            (
                "memory.stat",
                "anon 4194304\nfile 6291456\nshmem 0\nactive_file 2097152\n",
            ),
            ("memory.swap.max", "0\n"),
            ("memory.swap.current", "0\n"),
            ("cpuset.cpus.effective", "1\n"),
            ("cpu.max", "100000 100000\n"),
            ("cpu.stat", "usage_usec 2500000\nuser_usec 2000000\n"),
        ]);
        let l = Limits::read(&CgroupDirs {
            v2: Some(d.clone()),
            ..Default::default()
        });
        assert_eq!(l.mem_limit, Some(256 << 20));
        assert_eq!(l.mem_usage, 10 << 20);
        assert_eq!(l.stat("file"), 6 << 20);
        assert_eq!(l.stat("active_file"), 2 << 20);
        assert_eq!(l.swap_limit, Some(0));
        assert_eq!(l.cpuset, Some(vec![1]));
        assert_eq!(l.quota, Some((100_000, 100_000)));
        assert_eq!(l.cpu_usage_ns, Some(2_500_000_000));
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn a_v2_cgroup_without_limits_is_the_host() {
        let d = fixture(&[
            ("memory.max", "max\n"),
            ("memory.current", "1048576\n"),
            ("memory.swap.max", "max\n"),
            ("cpu.max", "max 100000\n"),
            ("cpuset.cpus.effective", "0-3\n"),
        ]);
        let l = Limits::read(&CgroupDirs {
            v2: Some(d.clone()),
            ..Default::default()
        });
        assert_eq!((l.mem_limit, l.swap_limit, l.quota), (None, None, None));
        assert_eq!(l.cpuset, Some(vec![0, 1, 2, 3]));
        std::fs::remove_dir_all(d).unwrap();
    }

    /// A v2 cgroup of 256 MiB and one CPU's quota, through the views the
    /// container sees: the same path a hybrid v1 host takes live.
    #[test]
    fn a_v2_cgroup_through_the_views() {
        let d = fixture(&[
            ("memory.max", "268435456\n"),
            ("memory.current", "8388608\n"),
            ("memory.stat", "anon 4194304\nfile 4194304\nshmem 0\n"),
            ("cpu.max", "100000 100000\n"),
            ("cpuset.cpus.effective", "0-3\n"),
        ]);
        let l = Limits::read(&CgroupDirs {
            v2: Some(d.clone()),
            ..Default::default()
        });
        let host = "MemTotal:        8000000 kB\nMemFree:         4000000 kB\nCached:          2000000 kB\n";
        let text = super::super::render::meminfo(host, &l);
        assert!(
            text.starts_with("MemTotal:         262144 kB\nMemFree:          253952 kB\n"),
            "{text}"
        );
        let cpus = super::super::render::cpus(&l, &[0, 1, 2, 3]);
        assert_eq!(super::super::render::online(cpus.len()), "0\n");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn reads_v1_cgroups() {
        let mem = fixture(&[
            ("memory.limit_in_bytes", "268435456\n"),
            ("memory.usage_in_bytes", "20971520\n"),
            ("memory.memsw.limit_in_bytes", "536870912\n"),
            ("memory.memsw.usage_in_bytes", "22020096\n"),
            (
                "memory.stat",
                "cache 1\nrss 2\ntotal_cache 8388608\ntotal_rss 12582912\n",
            ),
        ]);
        let cpu = fixture(&[("cpu.cfs_quota_us", "150000\n"), ("cpu.cfs_period_us", "100000\n")]);
        let unlimited = fixture(&[
            ("memory.limit_in_bytes", "9223372036854771712\n"),
            ("cpu.cfs_quota_us", "-1\n"),
            ("cpu.cfs_period_us", "100000\n"),
        ]);
        let l = Limits::read(&CgroupDirs {
            memory: Some(mem.clone()),
            cpu: Some(cpu.clone()),
            ..Default::default()
        });
        assert_eq!(l.mem_limit, Some(256 << 20));
        assert_eq!(l.stat("file"), 8 << 20, "hierarchical counters");
        assert_eq!(l.stat("anon"), 12 << 20);
        assert_eq!(l.swap_limit, Some(256 << 20));
        assert_eq!(l.swap_usage, 1 << 20);
        assert_eq!(l.quota, Some((150_000, 100_000)));
        let u = Limits::read(&CgroupDirs {
            memory: Some(unlimited.clone()),
            cpu: Some(unlimited.clone()),
            ..Default::default()
        });
        assert_eq!((u.mem_limit, u.quota), (None, None));
        for d in [mem, cpu, unlimited] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn dirs_of_a_hybrid_and_a_v2_host() {
        let hybrid = "36 31 0:33 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                      37 31 0:34 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                      38 31 0:35 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let cg = "5:memory:/cordon/c1\n4:cpu,cpuacct:/cordon/c1\n0::/cordon/c1\n";
        let d = CgroupDirs::from_texts(cg, hybrid);
        assert_eq!(d.memory, Some("/sys/fs/cgroup/memory/cordon/c1".into()));
        assert_eq!(d.cpu, Some("/sys/fs/cgroup/cpu,cpuacct/cordon/c1".into()));
        assert_eq!(d.cpuacct, d.cpu);
        assert_eq!(d.cpuset, None);
        assert_eq!(d.v2, Some("/sys/fs/cgroup/unified/cordon/c1".into()));
        let v2 = "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let d = CgroupDirs::from_texts("0::/k8s/pod1\n", v2);
        assert_eq!(d.v2, Some("/sys/fs/cgroup/k8s/pod1".into()));
        assert_eq!(d.memory, None);
    }
}
