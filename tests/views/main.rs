//! Views suite: what a container sees of the machine (docs/POLICY.md,
//! "Views"). Under a memory limit and a CPU quota or cpuset, the tools
//! report the container's limits; the kernel identity is the virtual one
//! everywhere (`uname`, `/proc/version`, `/proc/sys/kernel/*`); without a
//! limit the host's numbers show; a policy turns the views off or shows
//! the host's identity. Runs on both platforms (`CORDON_TEST_PLATFORM`).
//! Root, a real kernel, `make bundles`.

use std::time::Instant;

use cordon_tests::{ok, stderr, unique, Env, TempDir};
use serde_json::json;

/// Runs `script` in the container of `env` and returns its output lines.
fn sh(env: &mut Env, script: &str) -> Vec<String> {
    env.config["process"]["args"] = json!(["sh", "-c", script]);
    let out = env.run(&unique("views"));
    ok(&out).lines().map(str::to_string).collect()
}

/// The value of `key` in a `/proc/meminfo` text, in kB.
fn meminfo_kb(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k == key).then(|| v.split_whitespace().next()?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no {key} in {text}"))
}

fn host(path: &str) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn limited(env: &mut Env) {
    env.config["linux"]["resources"] = json!({
        "memory": {"limit": 268435456},
        "cpu": {"quota": 100000, "period": 100000}
    });
}

/// The line after `marker` in `lines`.
fn after<'a>(lines: &'a [String], marker: &str) -> &'a str {
    let i = lines
        .iter()
        .position(|l| l == marker)
        .unwrap_or_else(|| panic!("no {marker} in {lines:?}"));
    lines.get(i + 1).map_or("", |s| s.as_str())
}

#[test]
fn a_limited_container_sees_its_memory_and_cpus() {
    let mut env = Env::busybox(&[]);
    limited(&mut env);
    let started = Instant::now();
    let lines = sh(
        &mut env,
        "echo =meminfo; grep -E '^(MemTotal|MemFree|MemAvailable|Cached|Buffers):' /proc/meminfo; \
         echo =free; free -k | grep '^Mem:'; \
         echo =top; top -bn1 | grep '^Mem:'; \
         echo =online; cat /sys/devices/system/cpu/online; \
         echo =cpuinfo; grep -c '^processor' /proc/cpuinfo; \
         echo =stat; grep -c '^cpu[0-9]' /proc/stat; \
         echo =uptime; cat /proc/uptime; \
         echo =loadavg; cat /proc/loadavg; \
         echo =swaps; wc -l < /proc/swaps",
    );
    let elapsed = started.elapsed().as_secs_f64();
    let start = lines.iter().position(|l| l == "=meminfo").unwrap();
    let end = lines.iter().position(|l| l == "=free").unwrap();
    let mem = lines[start + 1..end].join("\n");
    let total = meminfo_kb(&mem, "MemTotal");
    assert_eq!(total, 262144, "{lines:?}");
    let (free, cached) = (meminfo_kb(&mem, "MemFree"), meminfo_kb(&mem, "Cached"));
    assert!(free + cached <= total && free > 0, "{lines:?}");
    assert!(meminfo_kb(&mem, "MemAvailable") <= total, "{lines:?}");
    // busybox free: total from sysinfo(2), cached from /proc/meminfo;
    // used = total - free - buffers - cached must be sane.
    let free_line: Vec<u64> = after(&lines, "=free")
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap())
        .collect();
    assert_eq!(free_line[0], 262144, "free's total: {lines:?}");
    assert!(free_line[1] <= 262144, "free's used: {lines:?}");
    // busybox top: "Mem: 1008K used, 261136K free, ..." from /proc/meminfo.
    let top: Vec<u64> = after(&lines, "=top")
        .split_whitespace()
        .filter_map(|f| f.strip_suffix('K')?.parse().ok())
        .collect();
    assert_eq!(top[0] + top[1], 262144, "top's used + free: {lines:?}");
    assert_eq!(after(&lines, "=online"), "0", "{lines:?}");
    assert_eq!(after(&lines, "=cpuinfo"), "1", "{lines:?}");
    assert_eq!(after(&lines, "=stat"), "1", "{lines:?}");
    let up: f64 = after(&lines, "=uptime")
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(up <= elapsed + 0.01, "uptime {up} s of a container run {elapsed} s ago");
    let load: Vec<&str> = after(&lines, "=loadavg").split_whitespace().collect();
    assert_eq!(load.len(), 5, "{lines:?}");
    let (running, threads) = load[3].split_once('/').unwrap();
    assert!(running.parse::<u32>().unwrap() >= 1, "the reader runs: {lines:?}");
    // sh and cat: the container's threads, not the host's, nor its
    // supervisor's (which sits in the container's cpu cgroup).
    assert!(
        threads.parse::<u32>().unwrap() <= 3,
        "the container's threads, not the host's or the supervisor's: {lines:?}"
    );
    assert_eq!(after(&lines, "=swaps"), "1", "no swap under the limit: {lines:?}");
}

#[test]
fn the_identity_is_the_same_everywhere() {
    let mut env = Env::busybox(&[]);
    let lines = sh(
        &mut env,
        "uname -r; cat /proc/sys/kernel/osrelease; cat /proc/version; cat /proc/sys/kernel/ostype; \
         cat /proc/sys/kernel/version; uname -v; cat /proc/cmdline; \
         cat /proc/config.gz /sys/kernel/notes 2>/dev/null | wc -c",
    );
    let release = &lines[0];
    assert_eq!(release, "6.1.0-cordon", "{lines:?}");
    assert_eq!(&lines[1], release, "{lines:?}");
    assert!(lines[2].starts_with(&format!("Linux version {release} ")), "{lines:?}");
    let host_release = host("/proc/sys/kernel/osrelease");
    assert!(!lines.iter().any(|l| l.contains(host_release.trim())), "{lines:?}");
    assert_eq!(lines[3], "Linux");
    assert_eq!(lines[4], lines[5], "uname -v and /proc/sys/kernel/version");
    assert_eq!(lines[6], format!("BOOT_IMAGE=/boot/vmlinuz-{release} ro quiet"));
    // The host kernel's configuration and build notes (which name its
    // release) read empty, where the host has them.
    assert_eq!(lines[7].trim(), "0", "{lines:?}");
}

#[test]
fn views_cannot_be_written_or_unmounted() {
    let mut env = Env::busybox(&[]);
    let lines = sh(
        &mut env,
        "echo 9.9 > /proc/sys/kernel/osrelease; echo w=$?; echo x > /proc/meminfo; echo m=$?; \
         umount /proc/version; echo u=$?; umount -l /proc/sys/kernel/osrelease; echo l=$?; \
         cat /proc/sys/kernel/osrelease; grep -c . /proc/version",
    );
    assert!(
        lines.contains(&"w=1".to_string()) && lines.contains(&"m=1".to_string()),
        "{lines:?}"
    );
    assert!(
        !lines.contains(&"u=0".to_string()) && !lines.contains(&"l=0".to_string()),
        "{lines:?}"
    );
    assert_eq!(lines[lines.len() - 2], "6.1.0-cordon", "{lines:?}");
}

#[test]
fn a_one_cpu_cpuset_is_one_cpu() {
    let mut env = Env::busybox(&[]);
    env.config["linux"]["resources"] = json!({"cpu": {"cpus": "0"}});
    let lines = sh(
        &mut env,
        "nproc; cat /sys/devices/system/cpu/online; grep -c '^processor' /proc/cpuinfo",
    );
    assert_eq!(lines, ["1", "0", "1"]);
}

#[test]
fn without_limits_the_hosts_numbers_show() {
    let mut env = Env::busybox(&[]);
    let lines = sh(
        &mut env,
        "grep MemTotal /proc/meminfo; cat /sys/devices/system/cpu/online; grep -c '^processor' /proc/cpuinfo",
    );
    let host_total = meminfo_kb(&host("/proc/meminfo"), "MemTotal");
    assert_eq!(meminfo_kb(&lines[0], "MemTotal"), host_total, "{lines:?}");
    assert_eq!(lines[1], host("/sys/devices/system/cpu/online").trim());
    let host_cpus = host("/proc/cpuinfo")
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    assert_eq!(lines[2], host_cpus.to_string());
}

/// A policy extending `default` with `views`.
fn policy(dir: &TempDir, views: &str) -> String {
    let p = dir.path().join("views.toml");
    std::fs::write(
        &p,
        format!("name = \"views\"\nextends = \"default\"\n[views]\n{views}\n"),
    )
    .unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn a_policy_turns_the_views_off_or_shows_the_hosts_identity() {
    let dir = TempDir::new("views-policy");
    let host_total = meminfo_kb(&host("/proc/meminfo"), "MemTotal");
    let host_release = host("/proc/sys/kernel/osrelease").trim().to_string();

    let mut env = Env::busybox(&[]);
    limited(&mut env);
    env.set_policy(&policy(&dir, "proc = false"));
    let lines = sh(&mut env, "grep MemTotal /proc/meminfo; cat /proc/sys/kernel/osrelease");
    assert_eq!(meminfo_kb(&lines[0], "MemTotal"), host_total, "views off: {lines:?}");
    assert_eq!(lines[1], host_release, "views off: {lines:?}");

    let mut env = Env::busybox(&[]);
    limited(&mut env);
    env.set_policy(&policy(&dir, "identity = \"host\""));
    let lines = sh(
        &mut env,
        "uname -r; cat /proc/sys/kernel/osrelease; grep MemTotal /proc/meminfo",
    );
    assert_eq!(lines[..2], [host_release.clone(), host_release], "{lines:?}");
    assert_eq!(meminfo_kb(&lines[2], "MemTotal"), 262144, "the views stay: {lines:?}");

    let mut env = Env::busybox(&[]);
    env.set_policy(&policy(&dir, "release = \"5.15.0-custom\""));
    let lines = sh(&mut env, "uname -r; cat /proc/sys/kernel/osrelease; cat /proc/version");
    assert_eq!(lines[..2], ["5.15.0-custom", "5.15.0-custom"], "{lines:?}");
    assert!(lines[2].starts_with("Linux version 5.15.0-custom "), "{lines:?}");
}

#[test]
fn views_with_every_open_in_the_supervisor() {
    // The supervisor opens /proc/meminfo for the caller: the open it makes
    // is served by its own views thread.
    let mut env = Env::busybox_supervised(&[]);
    limited(&mut env);
    let lines = sh(
        &mut env,
        "grep MemTotal /proc/meminfo; cat /sys/devices/system/cpu/online",
    );
    assert_eq!(meminfo_kb(&lines[0], "MemTotal"), 262144, "{lines:?}");
    assert_eq!(lines[1], "0", "{lines:?}");
}

#[test]
fn python_sees_the_limits() {
    let mut env = Env::python(&[]);
    limited(&mut env);
    env.config["process"]["args"] = json!([
        "sh",
        "-c",
        "getconf _NPROCESSORS_ONLN; python3 -c 'import os; print(os.cpu_count()); \
         print(os.sysconf(\"SC_PHYS_PAGES\") * os.sysconf(\"SC_PAGE_SIZE\")); print(os.uname().release)'"
    ]);
    let out = env.run(&unique("views-py"));
    let lines: Vec<String> = ok(&out).lines().map(str::to_string).collect();
    assert_eq!(lines, ["1", "1", "268435456", "6.1.0-cordon"], "{}", stderr(&out));
}

#[test]
fn an_exec_sees_the_views_of_its_container() {
    let mut env = Env::busybox(&["sleep", "60"]);
    limited(&mut env);
    let id = unique("views-exec");
    ok(&env.create(&id));
    ok(&env.cordon(&["start", &id]));
    cordon_tests::wait_until("the container runs", std::time::Duration::from_secs(10), || {
        match env.state(&id)["status"].as_str() {
            Some("running") => Ok(()),
            s => Err(format!("{s:?}")),
        }
    });
    let out = env.cordon(&[
        "exec",
        &id,
        "sh",
        "-c",
        "grep MemTotal /proc/meminfo; cat /proc/sys/kernel/osrelease; cat /sys/devices/system/cpu/online",
    ]);
    let lines: Vec<String> = ok(&out).lines().map(str::to_string).collect();
    assert_eq!(meminfo_kb(&lines[0], "MemTotal"), 262144, "{lines:?}");
    assert_eq!(lines[1..], ["6.1.0-cordon", "0"], "{lines:?}");
    ok(&env.cordon(&["delete", "--force", &id]));
}

/// What procps (`free`, `top`) and Node (`os.totalmem()`, `os.cpus()`,
/// which read /proc/meminfo and /proc/stat) report under a 256 MiB limit
/// and a 1-CPU quota: the container's numbers, and the virtual release.
#[test]
fn procps_and_node_see_the_limits() {
    let mut env = Env::python(&[]);
    limited(&mut env);
    env.with_host_programs(&["node"]);
    let lines = sh(
        &mut env,
        "echo =free; free -m | grep '^Mem:'; \
         echo =top; top -bn1 | grep 'Mem :'; \
         echo =node; LD_LIBRARY_PATH=/opt/lib /opt/bin/node -e \
         'const os = require(\"os\"); console.log(os.totalmem(), os.cpus().length, os.release())'",
    );
    let free: Vec<&str> = after(&lines, "=free").split_whitespace().collect();
    assert_eq!(free[1], "256", "free -m's total: {lines:?}");
    let top = after(&lines, "=top");
    assert!(top.contains(" 256.0 total"), "top's total: {lines:?}");
    assert_eq!(after(&lines, "=node"), "268435456 1 6.1.0-cordon", "{lines:?}");
}
