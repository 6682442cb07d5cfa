//! The escape suite: known container-escape techniques, each run as a
//! container under the DEFAULT policy and expected blocked. Every test
//! asserts what the user sees inside (errno, output) AND a host-side marker
//! proving nothing got out: a file the escape would create on the host, a
//! host value it would change (core_pattern, release_agent, the keyring, a
//! cgroup limit), the runtime binary's sha256.
//!
//! The probes are `escape.c` next to this file (one subcommand per
//! technique), compiled here with `gcc -static` and bind-mounted read-only
//! at /home in the container. Where it matters, a control run with the
//! `permissive` policy shows the technique itself works on this kernel, so
//! the refusal is cordon's and not an accident of the environment.
//!
//! A technique that gets through keeps its test failing: the assertion
//! message says what got out. Needs root, a real kernel and `make bundles`.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cordon_tests::*;
use serde_json::{json, Value};

/// Where the probe directory is mounted in containers (an existing
/// directory in both bundles, so no mount point is created in them).
const TOOLS: &str = "/home";
/// The probe inside containers.
const ESCAPE: &str = "/home/escape";

// ---------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------

/// The escape probe, compiled once per test run into Cargo's test tmpdir.
fn escape_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let src = repo().join("tests/security/escape.c");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("security-probes");
        std::fs::create_dir_all(&dir).unwrap();
        // Built beside and renamed over: never rewritten in place while a
        // container of an earlier run may still execute it.
        let tmp = dir.join(format!(".{}", unique("escape")));
        let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".into());
        let out = Command::new(&cc)
            .args(["-static", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", "-o"])
            .arg(&tmp)
            .arg(&src)
            .output()
            .unwrap_or_else(|e| panic!("run {cc}: {e}"));
        assert!(
            out.status.success(),
            "{cc} -static {}: {}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let bin = dir.join("escape");
        std::fs::rename(&tmp, &bin).unwrap();
        bin
    })
}

fn add_mount(env: &mut Env, m: Value) {
    env.config["mounts"].as_array_mut().unwrap().push(m);
}

/// A read-write bind mount of host directory `host` at `dest`.
fn volume(env: &mut Env, host: &Path, dest: &str) {
    add_mount(
        env,
        json!({"destination": dest, "type": "bind", "source": host, "options": ["rbind", "rw"]}),
    );
}

/// `env` with the probe directory mounted read-only at [`TOOLS`].
fn with_probe(mut env: Env) -> Env {
    let tools = escape_bin().parent().unwrap().to_path_buf();
    add_mount(
        &mut env,
        json!({"destination": TOOLS, "type": "bind", "source": tools, "options": ["rbind", "ro"]}),
    );
    env
}

fn busybox(args: &[&str]) -> Env {
    with_probe(Env::busybox(args))
}

fn python(args: &[&str]) -> Env {
    with_probe(Env::python(args))
}

/// The capability names, by number.
const CAPS: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// Every capability in the host's bounding set: a "privileged" bundle.
fn host_caps() -> Vec<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .unwrap()
        .trim()
        .to_string();
    let bits = u64::from_str_radix(&hex, 16).unwrap();
    CAPS.iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// Replaces the container's capabilities with `caps` (no ambient set).
fn set_caps(env: &mut Env, caps: &[String]) {
    for set in ["bounding", "effective", "permitted", "inheritable"] {
        env.config["process"]["capabilities"][set] = json!(caps);
    }
    env.config["process"]["capabilities"]["ambient"] = json!([]);
}

/// Adds `caps` to the container's capabilities.
fn add_caps(env: &mut Env, caps: &[&str]) {
    for set in ["bounding", "effective", "permitted", "inheritable"] {
        let list = env.config["process"]["capabilities"][set].as_array_mut().unwrap();
        for c in caps {
            list.push(json!(c));
        }
    }
}

/// "NAME RESULT" lines as a map (split at the first space).
fn results(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The lines of `out` whose result is not an error: what got through.
fn not_refused(out: &str, except: &[&str]) -> Vec<String> {
    results(out)
        .into_iter()
        .filter(|(k, v)| !v.starts_with("err ") && !except.contains(&k.as_str()))
        .map(|(k, v)| format!("{k} {v}"))
        .collect()
}

/// Writes config.json and starts the container detached.
fn start(env: &Env, id: &str) {
    env.write();
    let b = env.bundle.path().to_string_lossy().into_owned();
    ok(&env.cordon(&["run", "-d", "-b", &b, id]));
}

/// Writes config.json and runs the container, keeping it after it exits
/// (for its audit trail).
fn run_keep(env: &Env, id: &str) -> Output {
    env.write();
    let b = env.bundle.path().to_string_lossy().into_owned();
    env.cordon(&["run", "--keep", "-b", &b, id])
}

/// Waits for `path` to exist.
fn wait_for(path: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A scratch directory on the same filesystem as the bundles (file handles
/// only open on the filesystem they come from), removed on drop.
fn scratch(prefix: &str) -> TempDir {
    let p = Path::new(env!("CARGO_TARGET_TMPDIR")).join(unique(prefix));
    std::fs::create_dir_all(&p).unwrap();
    TempDir(p)
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().expect("sha256sum");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// A private copy of the cordon binary, used as the runtime of a test (the
/// CVE-2019-5736 marker is its sha256: the real one is never exposed).
struct RuntimeCopy {
    _dir: TempDir,
    bin: PathBuf,
    sha: String,
}

impl RuntimeCopy {
    fn new() -> Self {
        let dir = TempDir::new("runtime");
        let bin = dir.path().join("cordon");
        std::fs::copy(cordon_bin(), &bin).unwrap();
        let sha = sha256(&bin);
        RuntimeCopy { _dir: dir, bin, sha }
    }

    fn cmd(&self, env: &Env) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--root").arg(env.root.path());
        c
    }

    fn run(&self, env: &Env, args: &[&str]) -> Output {
        run_captured(self.cmd(env).args(args))
    }

    #[track_caller]
    fn assert_intact(&self) {
        assert_eq!(
            sha256(&self.bin),
            self.sha,
            "ESCAPE: the runtime binary on the host was modified ({})",
            self.bin.display()
        );
    }
}

/// The host directory entries in `dir` other than `keep`.
fn extra_entries(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

// ---------------------------------------------------------------------------
// 1. CVE-2019-5736: overwriting the runtime binary through /proc/PID/exe
// ---------------------------------------------------------------------------

/// A container process hunts every process that appears in its pid
/// namespace while `cordon exec` runs: the exec process before its execve,
/// the runtime binary exec'd inside through `/proc/self/exe` (as an exec
/// command and as a `#!/proc/self/exe` script). It reads and opens their
/// `/proc/PID/exe`, gets an O_PATH fd to it through the supervisor's O_PATH
/// race when it can, and reopens that fd through /proc/self/fd for writing
/// while the process runs and after it exits. Marker: the host binary
/// (a private copy, used for run, exec and the supervisor) keeps its sha256.
#[test]
fn cve_2019_5736_runtime_binary_cannot_be_overwritten_through_proc_exe() {
    let rt = RuntimeCopy::new();
    let host = TempDir::new("5736-host");
    let vol = TempDir::new("5736-vol");
    let hostdir = host.path().to_string_lossy().into_owned();
    // The python bundle has a dynamic loader, so the runtime binary can run
    // inside; busybox's would stop at ENOENT from the missing ld.so.
    let mut env = python(&[ESCAPE, "exe-hunt", "/tmp/stop", "/tmp/ready", &hostdir, "120"]);
    volume(&mut env, vol.path(), "/tmp");
    env.write();
    let id = unique("hunt");
    let b = env.bundle.path().to_string_lossy().into_owned();
    let mut runner = rt.cmd(&env);
    runner.args(["run", "-b", &b, &id]);
    let hunter = std::thread::spawn(move || run_captured(&mut runner));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !vol.path().join("ready").exists() {
        if hunter.is_finished() || Instant::now() > deadline {
            let out = hunter.join().unwrap();
            panic!("the hunter did not start: {}{}", stdout(&out), stderr(&out));
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    // The runtime binary itself, running in the container (the sealed copy
    // cordon exec re-executed from), blocked on its stdin meanwhile.
    // The runtime binary inside, blocked: `cordon ask` waits for a question
    // on a socket in the shared /tmp. Held until the hunter has read its exe
    // link; run again (up to five times) when it ended first (a busy
    // machine), so the hunter gets to try every time. Then a question with
    // stdin closed ends it. What each run said goes in the report.
    let logs = TempDir::new("5736-exec");
    let seen = vol.path().join("ready.runtime");
    let sock = vol.path().join("ask.sock");
    let mut runs = String::new();
    for attempt in 0..5 {
        let (out, err) = (
            logs.path().join(format!("out{attempt}")),
            logs.path().join(format!("err{attempt}")),
        );
        let mut exec = rt
            .cmd(&env)
            .args(["exec", &id, "/proc/self/exe", "ask", "/tmp/ask.sock"])
            .stdin(Stdio::piped())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !seen.exists() && Instant::now() < deadline && exec.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(exec.stdin.take());
        if let Ok(mut q) = std::os::unix::net::UnixStream::connect(&sock) {
            let _ = std::io::Write::write_all(&mut q, b"{}\n");
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while exec.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = exec.kill();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        runs += &format!(
            "exec {attempt}: {:?} {:?} {:?}\n",
            exec.try_wait(),
            std::fs::read_to_string(&out).unwrap_or_default(),
            std::fs::read_to_string(&err).unwrap_or_default()
        );
        if seen.exists() {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(500));

    // The classic: a script whose interpreter is /proc/self/exe.
    let evil = vol.path().join("evil");
    std::fs::write(&evil, "#!/proc/self/exe\n").unwrap();
    std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _ = rt.run(&env, &["exec", &id, "/tmp/evil"]);

    // Plain execs: the exec process between setns and its execve.
    for _ in 0..10 {
        ok(&rt.run(&env, &["exec", &id, "/bin/true"]));
    }
    std::fs::write(vol.path().join("stop"), "").unwrap();
    let out = hunter.join().unwrap();
    let text = stdout(&out);
    let report = format!("hunter:\n{text}{}\n{runs}", stderr(&out));

    // What the hunter got (shown with --nocapture).
    eprintln!("{report}");
    rt.assert_intact();
    let count = |k: &str| -> i64 {
        results(&text)
            .get(k)
            .unwrap_or_else(|| panic!("no {k} in {report}"))
            .parse()
            .unwrap()
    };
    assert!(
        count("runtime_seen") >= 1,
        "the hunter never saw the runtime binary run: {report}"
    );
    // The exec'd runtime binary is a copy no container can write: the
    // read-only overlayfs view of it (the link names it at the root of
    // that detached mount, "/<name>"), or a sealed memfd copy where
    // overlayfs is unavailable. Seen by reading the link, or by the
    // race's own open of it (which of the two wins varies with load).
    let view = format!(" /{}", rt.bin.file_name().unwrap().to_string_lossy());
    assert!(
        text.lines()
            .filter(|l| l.starts_with("exe_link ") || l.starts_with("race_target "))
            .any(|l| l.contains(" /memfd:") || l.contains(&format!("{view} x"))),
        "the exec'd runtime binary is a read-only view or a sealed copy: {report}"
    );
    assert!(
        !text.contains(&rt.bin.to_string_lossy().into_owned()),
        "a process in the container runs the host binary: {report}"
    );
    assert_eq!(
        count("wrote"),
        0,
        "ESCAPE: a write to a runtime binary succeeded: {report}"
    );
    assert!(!text.lines().any(|l| l.starts_with("write ok")), "ESCAPE: {report}");
    assert_eq!(count("escapes"), 0, "ESCAPE: a cwd outside the container: {report}");
    assert!(
        extra_entries(host.path(), &[]).is_empty(),
        "ESCAPE: markers on the host: {:?}\n{report}",
        extra_entries(host.path(), &[])
    );
}

/// The first stage of CVE-2019-5736: the container's entrypoint is
/// `/proc/self/exe`, i.e. the runtime's own binary. It runs the read-only
/// view (or sealed copy) cordon re-executed from, never the file on the
/// host.
#[test]
fn cve_2019_5736_entrypoint_proc_self_exe_runs_a_sealed_copy() {
    let rt = RuntimeCopy::new();
    let env = python(&["/proc/self/exe", "--version"]);
    env.write();
    let b = env.bundle.path().to_string_lossy().into_owned();
    let out = rt.run(&env, &["run", "-b", &b, &unique("selfexe")]);
    assert!(ok(&out).starts_with("cordon "), "{}", stdout(&out));
    rt.assert_intact();
}

// ---------------------------------------------------------------------------
// 2. CVE-2024-21626: a leaked fd as the process's cwd
// ---------------------------------------------------------------------------

/// Checks the output of `escape cwd` (or a refused start): the cwd never
/// leaves the container and relative paths never reach the host.
fn check_cwd(out: &Output, what: &str, failures: &mut Vec<String>) {
    if !out.status.success() {
        return; // refused to start: fine
    }
    let r = results(&stdout(out));
    if r.get("cwd_outside").map(String::as_str) != Some("0")
        || !r.get("stat_host").is_some_and(|v| v.starts_with("err"))
        || !r.get("mkdir_host").is_some_and(|v| v.starts_with("err"))
    {
        failures.push(format!("{what}: {}", stdout(out)));
    }
}

/// process.cwd = /proc/self/fd/N (runc's leaked cgroup fd was 7 or 8), for
/// the init and for `exec --cwd`: the container must fail to start or stay
/// inside. Markers: a host-only file is not visible and nothing is created
/// in the host directory through `../../..` from the cwd. Also: no fd but
/// stdio reaches the init or an exec'd process.
#[test]
fn cve_2024_21626_leaked_fd_as_cwd_never_reaches_the_host() {
    let host = TempDir::new("21626");
    std::fs::write(host.path().join("host-only"), "x").unwrap();
    let hostdir = host.path().to_string_lossy().into_owned();
    let mut failures = Vec::new();
    for n in 3..=12 {
        let mut env = busybox(&[ESCAPE, "cwd", &hostdir]);
        env.config["process"]["cwd"] = json!(format!("/proc/self/fd/{n}"));
        let out = env.run(&unique("cwd"));
        check_cwd(&out, &format!("process.cwd=/proc/self/fd/{n}"), &mut failures);
        assert!(
            stdout(&env.cordon(&["list", "-q"])).trim().is_empty(),
            "a refused start leaves nothing"
        );
    }
    let env = busybox(&["sleep", "60"]);
    let id = unique("cwdexec");
    start(&env, &id);
    for n in 3..=12 {
        let cwd = format!("/proc/self/fd/{n}");
        let out = env.cordon(&["exec", "--cwd", &cwd, &id, ESCAPE, "cwd", &hostdir]);
        check_cwd(&out, &format!("exec --cwd {cwd}"), &mut failures);
    }
    // What a process finds open at start.
    let out = ok(&env.cordon(&["exec", &id, ESCAPE, "fds"]));
    let fds: Vec<_> = out.lines().filter(|l| l.starts_with("fd ")).collect();
    if fds.len() != 3 || !out.contains("cwd_outside 0") {
        failures.push(format!("exec starts with more than stdio: {out}"));
    }
    let init = busybox(&[ESCAPE, "fds"]);
    let out = ok(&init.run(&unique("fds")));
    let fds: Vec<_> = out.lines().filter(|l| l.starts_with("fd ")).collect();
    if fds.len() != 3 || !out.contains("cwd_outside 0") {
        failures.push(format!("init starts with more than stdio: {out}"));
    }
    let extra = extra_entries(host.path(), &["host-only"]);
    assert!(
        failures.is_empty() && extra.is_empty(),
        "ESCAPE: {failures:#?}, host markers {extra:?}"
    );
}

// ---------------------------------------------------------------------------
// 3. open_by_handle_at ("shocker")
// ---------------------------------------------------------------------------

/// name_to_handle_at(2) of `path` on the host: (handle_type, hex bytes).
fn file_handle(path: &Path) -> (i32, String) {
    let c = std::ffi::CString::new(path.to_string_lossy().as_bytes()).unwrap();
    let mut buf = [0u8; 8 + 128];
    buf[..4].copy_from_slice(&128u32.to_ne_bytes());
    let mut mount_id: libc::c_int = 0;
    // SAFETY: name_to_handle_at reads the path and writes at most
    // 8 + handle_bytes (128) bytes into buf and one int into mount_id.
    let r = unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            libc::AT_FDCWD,
            c.as_ptr(),
            buf.as_mut_ptr(),
            &mut mount_id as *mut libc::c_int,
            0,
        )
    };
    assert_eq!(r, 0, "name_to_handle_at: {}", std::io::Error::last_os_error());
    let n = u32::from_ne_bytes(buf[..4].try_into().unwrap()) as usize;
    let ty = i32::from_ne_bytes(buf[4..8].try_into().unwrap());
    (ty, buf[8..8 + n].iter().map(|b| format!("{b:02x}")).collect())
}

/// The 2014 Docker escape: open_by_handle_at(2) with the handle of a host
/// file (computed on the host, as the exploit brute-forces it) and of the
/// filesystem root (ext4 inode 2). Refused for the default capabilities
/// and for a bundle that grants CAP_DAC_READ_SEARCH, as Docker 0.x did.
/// Control: the permissive policy with that capability reads the file.
#[test]
fn shocker_open_by_handle_at_cannot_open_host_files() {
    let host = scratch("shocker");
    let secret = host.path().join("secret");
    let marker = unique("HOST-SECRET");
    std::fs::write(&secret, format!("{marker}\n")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(&secret).unwrap().dev(),
        std::fs::metadata(busybox_bundle().join("rootfs")).unwrap().dev(),
        "the secret must live on the rootfs's filesystem"
    );
    let (ty, hex) = file_handle(&secret);
    let ty = ty.to_string();
    for grant in [false, true] {
        let mut env = busybox(&[ESCAPE, "shocker", &ty, &hex]);
        if grant {
            add_caps(&mut env, &["CAP_DAC_READ_SEARCH"]);
        }
        let out = ok(&env.run(&unique("shocker")));
        assert!(!out.contains(&marker), "ESCAPE: host file read through a handle: {out}");
        let r = results(&out);
        for k in ["name_to_handle_at", "open_by_handle_at", "open_by_handle_at_root"] {
            assert_eq!(r[k], "err EPERM", "{k} (CAP_DAC_READ_SEARCH: {grant}): {out}");
        }
    }
    let mut env = busybox(&[ESCAPE, "shocker", &ty, &hex]);
    add_caps(&mut env, &["CAP_DAC_READ_SEARCH"]);
    env.set_policy("permissive");
    let out = ok(&env.run(&unique("shocker-control")));
    assert_eq!(
        results(&out)["open_by_handle_at"],
        format!("ok {marker}"),
        "control: without cordon's refusal the technique reads the host file"
    );
}

// ---------------------------------------------------------------------------
// 4. cgroup v1 release_agent (CVE-2022-0492) and cgroup limits
// ---------------------------------------------------------------------------

/// Restores the host's release agents and removes every cgroup named
/// `mark`, whatever the test saw.
struct CgroupGuard {
    mark: String,
    agents: Vec<(PathBuf, String)>,
}

impl CgroupGuard {
    fn new(mark: &str) -> Self {
        let agents = release_agents();
        CgroupGuard {
            mark: mark.to_string(),
            agents,
        }
    }

    /// Host cgroup directories named after the mark.
    fn leftovers(&self) -> Vec<PathBuf> {
        let out = Command::new("find")
            .args(["/sys/fs/cgroup", "-maxdepth", "6", "-type", "d", "-name", &self.mark])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(PathBuf::from)
            .collect()
    }

    /// Release agents that differ from what they were.
    fn changed_agents(&self) -> Vec<String> {
        let now = release_agents();
        now.iter()
            .filter(|a| !self.agents.contains(a))
            .map(|(p, v)| format!("{}={v}", p.display()))
            .collect()
    }
}

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        for (p, v) in &self.agents {
            if std::fs::read_to_string(p).ok().map(|s| s.trim().to_string()).as_ref() != Some(v) {
                let _ = std::fs::write(p, format!("{v}\n"));
            }
        }
        let mut dirs = self.leftovers();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in dirs {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Every cgroup v1 hierarchy's release_agent on the host.
fn release_agents() -> Vec<(PathBuf, String)> {
    let mut v: Vec<_> = std::fs::read_dir("/sys/fs/cgroup")
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path().join("release_agent");
            let s = std::fs::read_to_string(&p).ok()?;
            Some((p, s.trim().to_string()))
        })
        .collect();
    v.sort();
    v
}

/// CVE-2022-0492, step by step: a user namespace to be root in, a fresh
/// cgroup v1 mount or a read-write remount, then in every hierarchy a
/// child cgroup with notify_on_release=1 and release_agent set to a script
/// on the host, and a process that joins and leaves it. The config asks for
/// /sys/fs/cgroup read-only. Run with the default capabilities and with a
/// privileged bundle (every capability). Markers: the script never runs
/// (it would create `released` on the host), no host release_agent
/// changes, no cgroup is created on the host.
#[test]
fn cgroup_release_agent_cve_2022_0492() {
    let mut failures = Vec::new();
    for privileged in [false, true] {
        let label = if privileged {
            "privileged bundle"
        } else {
            "default capabilities"
        };
        let host = TempDir::new("cg-host");
        let agent = host.path().join("agent");
        let released = host.path().join("released");
        std::fs::write(&agent, format!("#!/bin/sh\ntouch {}\n", released.display())).unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mark = unique("cordon-escape-cg");
        let guard = CgroupGuard::new(&mark);
        let mut env = busybox(&[ESCAPE, "cgroup", &agent.to_string_lossy(), &mark]);
        if privileged {
            set_caps(&mut env, &host_caps());
        }
        let id = unique("cg");
        let out = env.run(&id);
        let text = stdout(&out);
        std::thread::sleep(Duration::from_millis(500)); // release agents run asynchronously
        let got_through = not_refused(&text, &["agent_wait"]);
        let leftovers = guard.leftovers();
        let changed = guard.changed_agents();
        let ran = released.exists();
        drop(guard); // restore and clean before asserting
        let _ = env.cordon(&["delete", "--force", &id]);
        if ran {
            failures.push(format!(
                "{label}: ESCAPE: the release agent {} ran as root on the host",
                agent.display()
            ));
        }
        if !changed.is_empty() {
            failures.push(format!("{label}: host release_agent changed: {changed:?}"));
        }
        if !leftovers.is_empty() {
            failures.push(format!("{label}: cgroups created on the host: {leftovers:?}"));
        }
        if !got_through.is_empty() {
            failures.push(format!("{label}: not refused inside: {got_through:?}"));
        }
        if cgroup_leaked(&id) {
            failures.push(format!("{label}: the container's cgroups were left behind"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The host-side cgroup file `file` of the container whose init is `pid`
/// (cgroup v1 controller `controller`, else the unified hierarchy).
fn host_cgroup_file(pid: i64, controller: &str, file: &str) -> PathBuf {
    let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    for l in cg.lines() {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
        if ctrls.split(',').any(|c| c == controller) {
            return PathBuf::from(format!("/sys/fs/cgroup/{controller}{path}/{file}"));
        }
    }
    let path = cg.lines().find_map(|l| l.strip_prefix("0::")).unwrap();
    PathBuf::from(format!("/sys/fs/cgroup{path}/{file}"))
}

/// A container cannot raise its own cgroup limits: the config asks for
/// /sys/fs/cgroup read-only. Marker: the host's memory and pids limits of
/// the container's cgroup are unchanged.
#[test]
fn cgroup_limits_cannot_be_raised_from_inside() {
    let vol = TempDir::new("limits");
    let script = "for f in /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max; do \
                  [ -e $f ] && { (echo -1 > $f) 2>/dev/null && echo \"raised $f\" || echo \"refused $f\"; }; done; \
                  for f in /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max; do \
                  [ -e $f ] && { (echo max > $f) 2>/dev/null && echo \"raised $f\" || echo \"refused $f\"; }; done; \
                  touch /tmp/done; sleep 60";
    let mut env = busybox(&["sh", "-c", script]);
    volume(&mut env, vol.path(), "/tmp");
    env.config["linux"]["resources"] = json!({"devices": [], "memory": {"limit": 67108864}, "pids": {"limit": 50}});
    let id = unique("limits");
    start(&env, &id);
    wait_for(&vol.path().join("done"), "the container's writes");
    let pid = env.state(&id)["pid"].as_i64().unwrap();
    let mem_file = host_cgroup_file(pid, "memory", "memory.limit_in_bytes");
    let mem_file = if mem_file.exists() {
        mem_file
    } else {
        host_cgroup_file(pid, "memory", "memory.max")
    };
    let mem = std::fs::read_to_string(&mem_file).unwrap();
    let pids = std::fs::read_to_string(host_cgroup_file(pid, "pids", "pids.max")).unwrap();
    ok(&env.cordon(&["delete", "--force", &id]));
    assert_eq!(
        (mem.trim(), pids.trim()),
        ("67108864", "50"),
        "ESCAPE: the container raised its own cgroup limits on the host ({})",
        mem_file.display()
    );
}

// ---------------------------------------------------------------------------
// 5. host-wide files, the kernel's attack surface, entry points
// ---------------------------------------------------------------------------

/// Restores core_pattern if a test changed it.
struct CorePatternGuard(String);

impl Drop for CorePatternGuard {
    fn drop(&mut self) {
        let p = "/proc/sys/kernel/core_pattern";
        if std::fs::read_to_string(p).ok().as_deref() != Some(&self.0) {
            let _ = std::fs::write(p, &self.0);
        }
    }
}

/// Every way we know to open /proc/sys/kernel/core_pattern (a program the
/// host kernel runs as root on a crash) and /proc/sysrq-trigger for writing:
/// aliases, dirfds, openat2 scopes, a symlink, O_PATH reopens, the O_PATH
/// race, truncate, the i386 and x32 entry points. Default capabilities and
/// a privileged bundle. Marker: the host's core_pattern is unchanged.
#[test]
fn core_pattern_and_sysrq_trigger_cannot_be_written() {
    let path = "/proc/sys/kernel/core_pattern";
    let saved = std::fs::read_to_string(path).unwrap();
    let _guard = CorePatternGuard(saved.clone());
    let host = TempDir::new("core");
    let value = format!("|{}/pwn %p", host.path().display());
    let mut failures = Vec::new();
    for privileged in [false, true] {
        let mut env = busybox(&[ESCAPE, "procwrite", path, &value]);
        if privileged {
            set_caps(&mut env, &host_caps());
        }
        let out = ok(&env.run(&unique("core")));
        let r = results(&out);
        // A masked file opens for reading (and as O_PATH) and reads empty.
        let allowed: &[&str] = if kernel_level() {
            &["o_path_race", "o_path", "open_rdonly"]
        } else {
            &["o_path_race"]
        };
        let through = not_refused(&out, allowed);
        if !through.is_empty() {
            failures.push(format!("privileged={privileged}: {through:?}"));
        }
        // Masked and read-only by the mounts (EROFS), or refused by the
        // supervisor (EACCES).
        let refused = if kernel_level() { "err EROFS" } else { "err EACCES" };
        for (k, v) in [
            ("open", refused),
            ("self_root", refused),
            ("o_path_race_reopen", refused),
            ("int80_open", "err ENOSYS"),
            ("x32_open", "err ENOSYS"),
        ] {
            // The race flips the path under the open: a torn read of it can
            // name a directory above the target (/proc/sys/kernel), which
            // the kernel refuses to open for writing (EISDIR): refused too.
            let torn = k == "o_path_race_reopen" && r.get(k).is_some_and(|got| got == "err EISDIR");
            if r.get(k).is_some_and(|got| got != v) && !torn {
                failures.push(format!("privileged={privileged}: {k}: {} (expected {v})", r[k]));
            }
        }
        if std::fs::read_to_string(path).unwrap() != saved {
            failures.push(format!("ESCAPE: host core_pattern changed (privileged={privileged})"));
        }
    }
    // This kernel may have no /proc/sysrq-trigger (CONFIG_MAGIC_SYSRQ): the
    // attempts then end at ENOENT; with it, at the default policy's deny.
    let env = busybox(&[ESCAPE, "procwrite", "/proc/sysrq-trigger", "h"]);
    let out = ok(&env.run(&unique("sysrq")));
    let allowed: &[&str] = if kernel_level() {
        &["o_path_race", "o_path", "open_rdonly"]
    } else {
        &["o_path_race"]
    };
    let through = not_refused(&out, allowed);
    if !through.is_empty() {
        failures.push(format!("sysrq-trigger: {through:?}"));
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(
        extra_entries(host.path(), &[]).is_empty(),
        "ESCAPE: core_pattern program ran"
    );
}

/// Invalidates keys whose description contains a mark, whatever happened.
struct KeyGuard(String);

impl KeyGuard {
    /// Ids of the host's keys (as root sees them) described by the mark.
    fn keys(&self) -> Vec<i64> {
        std::fs::read_to_string("/proc/keys")
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&self.0))
            .filter_map(|l| i64::from_str_radix(l.split_whitespace().next()?, 16).ok())
            .collect()
    }
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        for k in self.keys() {
            // SAFETY: keyctl(KEYCTL_INVALIDATE, id) takes integers only.
            unsafe { libc::syscall(libc::SYS_keyctl, 21, k) };
        }
    }
}

/// What the default policy answers for every call of the battery, with the
/// default capabilities and for a privileged bundle alike. The arguments
/// are ones the kernel would accept (see the control below) or answer with
/// another errno (no module support: ENOSYS; bad reboot magic: EINVAL).
const BATTERY: &[(&str, &str)] = &[
    ("io_uring_setup", "err ENOSYS"),
    ("io_uring_enter", "err ENOSYS"),
    ("io_uring_register", "err ENOSYS"),
    ("add_key", "err EPERM"),
    ("keyctl", "err EPERM"),
    ("keyctl_join", "err EPERM"),
    ("request_key", "err EPERM"),
    ("bpf", "err EPERM"),
    ("perf_event_open", "err EPERM"),
    ("userfaultfd", "err EPERM"),
    ("ptrace_traceme", "err EPERM"),
    ("process_vm_readv", "err EPERM"),
    ("process_vm_writev", "err EPERM"),
    ("pidfd_getfd", "err EPERM"),
    ("kcmp", "err EPERM"),
    ("init_module", "err EPERM"),
    ("finit_module", "err EPERM"),
    ("delete_module", "err EPERM"),
    ("kexec_load", "err EPERM"),
    ("reboot", "err EPERM"),
    ("mount", "err EPERM"),
    ("mount_bind_root", "err EPERM"),
    ("umount2", "err EPERM"),
    ("pivot_root", "err EPERM"),
    ("open_tree", "err EPERM"),
    ("fsopen", "err EPERM"),
    ("fspick", "err EPERM"),
    ("mount_setattr", "err EPERM"),
    ("move_mount", "err EPERM"),
    ("unshare_user", "err EPERM"),
    ("unshare_user_mnt", "err EPERM"),
    ("clone_newuser", "err EPERM"),
    ("clone3", "err ENOSYS"),
    ("setns", "err EPERM"),
    ("adjtimex_read", "err EPERM"),
    ("clock_settime_monotonic", "err EPERM"),
    ("syslog_size", "err EPERM"),
    ("swapon", "err EPERM"),
    ("acct", "err EPERM"),
    ("personality_no_aslr", "err EPERM"),
    ("iopl", "err EPERM"),
    ("ioperm", "err EPERM"),
    ("modify_ldt_read", "err EPERM"),
    // Raw and packet sockets, in every spelling the kernel accepts.
    ("socket_inet_raw", "err EPERM"),
    ("socket_inet_raw_flags", "err EPERM"),
    ("socket_inet6_raw", "err EPERM"),
    ("socket_packet_raw", "err EPERM"),
    ("socket_packet_dgram", "err EPERM"),
    ("socket_inet_packet", "err EPERM"),
    ("socket_packet_hibits", "err EPERM"),
    // Netlink is allowed, SOCK_RAW too (its usual type: iproute2,
    // if_nameindex()); the default policy's SOCK_RAW rule is for the other
    // families.
    ("socket_netlink_raw", "ok 4"),
    ("socket_netlink_dgram", "ok 4"),
    ("socket_netlink_uevent", "ok 4"),
    ("socket_netlink_audit", "ok 4"),
    // Ping sockets: the container's net.ipv4.ping_group_range refuses them.
    ("socket_ping", "err EACCES"),
    ("pidfd_open_self", "ok 3"),
];

/// io_uring, keyctl, bpf, perf_event_open, userfaultfd, ptrace and
/// cross-process memory, module loading, kexec, reboot, the mount API,
/// new user namespaces, setns, host clocks and logs, raw and packet
/// sockets: each with real arguments, for the default capabilities and a
/// privileged bundle. Control: the permissive policy with every capability
/// gets through where the kernel allows it, so the refusals are cordon's.
/// Marker: the key the container tries to add to root's user keyring
/// (shared with the host: keyrings are not namespaced) is not on the host.
#[test]
fn kernel_attack_surface_is_refused_even_for_a_privileged_bundle() {
    let mark = unique("cordon-escape-key");
    let keys = KeyGuard(mark.clone());
    let mut failures = Vec::new();
    for privileged in [false, true] {
        let mut env = busybox(&[ESCAPE, "syscalls", &mark]);
        if privileged {
            set_caps(&mut env, &host_caps());
        }
        let out = ok(&env.run(&unique("battery")));
        let r = results(&out);
        for (k, want) in BATTERY {
            let got = r.get(*k).map(String::as_str).unwrap_or("missing");
            if got != *want {
                failures.push(format!("privileged={privileged}: {k}: {got} (expected {want})"));
            }
        }
        if !keys.keys().is_empty() {
            failures.push(format!("ESCAPE: key {mark} added to the host's keyring"));
        }
    }
    // Control: what the kernel itself allows this bundle.
    let mut env = busybox(&[ESCAPE, "syscalls", &mark]);
    set_caps(&mut env, &host_caps());
    env.set_policy("permissive");
    let out = ok(&env.run(&unique("battery-control")));
    let r = results(&out);
    for k in [
        "io_uring_setup",
        "add_key",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "ptrace_traceme",
        "process_vm_readv",
        "pidfd_getfd",
        "mount",
        "open_tree",
        "fsopen",
        "unshare_user",
        "adjtimex_read",
        "personality_no_aslr",
    ] {
        assert!(
            r[k].starts_with("ok"),
            "control: the kernel refuses {k} by itself: {out}"
        );
    }
    assert!(
        !keys.keys().is_empty(),
        "control: the marker key is visible on the host without cordon"
    );
    drop(keys);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The i386 (`int 0x80`, with IA32 emulation in the kernel) and x32 entry
/// points with the dangerous calls: a filter that checked numbers but not
/// the architecture would let these through. All ENOSYS. (x32 may not be
/// built into the kernel, which answers ENOSYS by itself.)
#[test]
fn int80_and_x32_entry_points_get_enosys() {
    let env = busybox(&[ESCAPE, "int80"]);
    let out = ok(&env.run(&unique("int80")));
    let r = results(&out);
    assert!(r.len() >= 16, "{out}");
    for (k, v) in &r {
        assert_eq!(v, "err ENOSYS", "{k}: {out}");
    }
}

/// A container installing its own seccomp notify listener gets EBUSY (one
/// listener exists in its filter chain, the supervisor's), in a child too;
/// an allow-everything filter stacked on top relaxes nothing: bpf and user
/// namespaces stay refused, uname stays emulated, the open of
/// /proc/kallsyms is still decided (and recorded) by cordon's supervisor.
#[test]
fn a_container_cannot_install_its_own_listener_or_relax_its_filter() {
    let env = busybox(&[ESCAPE, "listener"]);
    let id = unique("listener");
    let out = ok(&run_keep(&env, &id));
    let r = results(&out);
    let expect = [
        ("new_listener", "err EBUSY"),
        ("child_new_listener", "EBUSY"),
        ("allow_all_filter", "ok 0"),
        ("bpf_after", "err EPERM"),
        ("unshare_user_after", "err EPERM"),
        ("uname_after", "6.1.0-cordon"),
        // Masked by the mounts (it opens and reads empty), or refused by
        // the supervisor.
        ("kallsyms_after", if kernel_level() { "ok" } else { "err EACCES" }),
        ("prctl_seccomp_disable", "err EINVAL"),
        ("prctl_no_new_privs_off", "err EINVAL"),
    ];
    for (k, v) in expect {
        // "ok" stands for any success (an fd number).
        let got = r.get(k).map(String::as_str).unwrap_or("");
        assert!(
            got == v || (v == "ok" && got.starts_with("ok ")),
            "{k}: {got:?}, expected {v:?}: {out}"
        );
    }
    if !kernel_level() {
        // The supervisor still decided the open.
        env.audit_with(&id, "the supervisor's deny of /proc/kallsyms", |a| {
            a["action"] == "deny" && a["detail"].as_str().unwrap_or("").starts_with("/proc/kallsyms")
        });
    }
}

/// Netlink route sockets work and see the container's own network
/// namespace only (just `lo`).
#[test]
fn netlink_sees_only_the_container_network() {
    let env = busybox(&[ESCAPE, "netlink"]);
    let out = ok(&env.run(&unique("netlink")));
    let links: Vec<_> = out.lines().filter_map(|l| l.strip_prefix("link ")).collect();
    assert_eq!(links, ["lo"], "{out}");
}

// ---------------------------------------------------------------------------
// 6. the supervisor and host processes
// ---------------------------------------------------------------------------

/// Kills the process on drop.
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn alive(pid: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Signals and ptrace aimed at the supervisor and at a host process: both
/// are invisible from inside (pid namespace: ESRCH, no /proc entry; ptrace
/// refused outright), no visible process is the supervisor, and
/// kill(-1, SIGKILL) from inside reaches only the container. Markers: the
/// supervisor and the host process are still alive, the container runs.
#[test]
fn the_supervisor_and_host_processes_are_out_of_reach() {
    // A second process for kill(-1) to reach; the init is never signalled.
    let env = busybox(&["sh", "-c", "sleep 60 & exec sleep 60"]);
    let id = unique("pids");
    start(&env, &id);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(env.root.path().join(".cordon").join(&id).join("meta.json")).unwrap())
            .unwrap();
    let sup = meta["supervisor_pid"].as_i64().unwrap() as i32;
    let sleeper = Reap(Command::new("sleep").arg("60").spawn().unwrap());
    let host_pid = sleeper.0.id() as i32;
    let (s, h) = (sup.to_string(), host_pid.to_string());
    let out = ok(&env.cordon(&["exec", &id, ESCAPE, "pids", &s, &h]));
    let r = results(&out);
    for p in [&s, &h] {
        for (k, v) in [
            ("kill0", "err ESRCH"),
            ("kill_cont", "err ESRCH"),
            ("pidfd_open", "err ESRCH"),
            ("ptrace_attach", "err EPERM"),
            ("proc", "err ENOENT"),
        ] {
            let key = format!("{k}:{p}");
            assert_eq!(r.get(&key).map(String::as_str), Some(v), "{key}: {out}");
        }
    }
    assert_eq!(r["supervisor_visible"], "0", "{out}");
    for l in out.lines().filter_map(|l| l.strip_prefix("visible ")) {
        assert!(
            l.contains("sleep") || l.contains(ESCAPE),
            "a process that is not the container's is visible: {l}\n{out}"
        );
    }
    let out = ok(&env.cordon(&["exec", &id, ESCAPE, "killall"]));
    assert!(out.contains("kill_all ok 0"), "{out}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(sup), "ESCAPE: the supervisor was killed from inside");
    assert!(alive(host_pid), "ESCAPE: a host process was killed from inside");
    assert_eq!(env.state(&id)["status"], "running", "the container's init is untouched");
    ok(&env.cordon(&["delete", "--force", &id]));
}

// ---------------------------------------------------------------------------
// 7. CVE-2021-30465: a mount destination swapped for a symlink
// ---------------------------------------------------------------------------

/// Two containers share a volume. The attacker flips `d` in it between a
/// directory and a symlink to `/` (renameat2 RENAME_EXCHANGE) as fast as it
/// can; meanwhile victims are created whose config mounts a host directory
/// at `<volume>/d`. Each victim must fail to start or have that directory
/// mounted inside the volume (on the directory, wherever the flips left
/// it), never over its root or anywhere else. Marker: the host's own
/// mount table never gains the mount.
#[test]
fn cve_2021_30465_mount_destination_symlink_race() {
    let shared = TempDir::new("race-vol");
    let src = TempDir::new("race-src");
    std::fs::write(src.path().join("victim-src"), "victim\n").unwrap();
    let src_path = src.path().to_string_lossy().into_owned();
    let mut attacker = busybox(&[ESCAPE, "swap", "/tmp", "120"]);
    volume(&mut attacker, shared.path(), "/tmp");
    attacker.write();
    let aid = unique("racer");
    let b = attacker.bundle.path().to_string_lossy().into_owned();
    let root = attacker.root.path().to_path_buf();
    let racer = std::thread::spawn(move || {
        run_captured(
            Command::new(cordon_bin())
                .arg("--root")
                .arg(root)
                .args(["run", "-b", &b, &aid]),
        )
    });
    wait_for(&shared.path().join("l"), "the attacker");

    let mut victim = Env::busybox(&[
        "sh",
        "-c",
        "cat /tmp/d/victim-src 2>/dev/null; cut -d' ' -f4,5 /proc/self/mountinfo; ls /",
    ]);
    volume(&mut victim, shared.path(), "/tmp");
    add_mount(
        &mut victim,
        json!({"destination": "/tmp/d", "type": "bind", "source": src.path(), "options": ["rbind", "ro"]}),
    );
    let (mut started, mut refused) = (0, 0);
    let mut failures = Vec::new();
    for _ in 0..20 {
        let out = victim.run(&unique("victim"));
        if !out.status.success() {
            refused += 1;
            continue;
        }
        started += 1;
        let text = stdout(&out);
        for l in text.lines() {
            if let Some(mountpoint) = l.strip_prefix(&format!("{src_path} ")) {
                if mountpoint != "/tmp/d" && mountpoint != "/tmp/l" {
                    failures.push(format!("the volume landed at {mountpoint}: {text}"));
                }
            }
        }
        if !text.lines().any(|l| l == "proc") || !text.lines().any(|l| l == "bin") {
            failures.push(format!("the victim's root is not its rootfs: {text}"));
        }
        let host_mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        if host_mounts.contains(&src_path) {
            failures.push(format!("ESCAPE: mounted on the host: {host_mounts}"));
        }
    }
    std::fs::write(shared.path().join("stop"), "").unwrap();
    let out = racer.join().unwrap();
    let swaps = results(&stdout(&out))
        .get("swaps")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(swaps > 1000, "the attacker must really have raced: {}", stdout(&out));
    assert!(
        stdout(&victim.cordon(&["list", "-q"])).trim().is_empty(),
        "refused victims leave nothing behind"
    );
    assert!(
        failures.is_empty(),
        "{failures:#?} (started {started}, refused {refused})"
    );
}

/// chroot is refused even with CAP_SYS_CHROOT (in containerd's and
/// Docker's default set): path rules name files from the container's
/// root, and a process chrooted to /proc would see /proc/kallsyms as
/// /kallsyms. Checked on both platforms (`make test-ptrace`).
#[test]
fn chroot_cannot_rename_denied_paths() {
    let mut env = busybox(&[
        "sh",
        "-c",
        "chroot /proc /kallsyms; echo rc=$?; cat /proc/kallsyms >/dev/null; echo cat=$?",
    ]);
    add_caps(&mut env, &["CAP_SYS_CHROOT"]);
    let out = env.run(&unique("chroot"));
    let o = stdout(&out);
    // kallsyms itself: masked (reads empty) or refused by the supervisor.
    let cat = if kernel_level() { "cat=0" } else { "cat=1" };
    assert!(o.contains("rc=1\n") && o.contains(cat), "{o} {}", stderr(&out));
    assert!(
        stderr(&out).contains("can't change root directory to '/proc': Operation not permitted"),
        "{}",
        stderr(&out)
    );
}

// ---------------------------------------------------------------------------
// 7. every route a packet can take is decided
// ---------------------------------------------------------------------------

/// Tries, inside the container, the socket options and sendmsg/sendmmsg
/// control messages that route a packet, and connects and sends to a vsock
/// address; prints `NAME RESULT` per try (`ok` or the errno's name).
const ROUTES_PROBE: &str = r#"
import ctypes, errno, socket, struct
def res(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def show(name, f):
    print(name, res(f), flush=True)
s4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
nop4 = b"\x01\x01\x01\x00"
rthdr = bytes([0, 2, 0, 1, 0, 0, 0, 0]) + socket.inet_pton(socket.AF_INET6, "::1")
opts = b"\x00\x00\x01\x04\x00\x00\x00\x00"
for name, s, level, opt, val in [
    ("IP_OPTIONS", s4, 0, 4, nop4),
    ("IP_TRANSPARENT", s4, 0, 19, 1),
    ("IPV6_RTHDR", s6, 41, 57, rthdr),
    ("IPV6_2292RTHDR", s6, 41, 5, rthdr),
    ("IPV6_NEXTHOP", s6, 41, 9, b"\x0a\x00" + b"\x00" * 26),
    ("IPV6_HOPOPTS", s6, 41, 54, opts),
    ("IPV6_DSTOPTS", s6, 41, 59, opts),
    ("IPV6_RTHDRDSTOPTS", s6, 41, 55, opts),
    ("IPV6_TRANSPARENT", s6, 41, 75, 1),
    ("SO_RCVBUF", s4, socket.SOL_SOCKET, socket.SO_RCVBUF, 65536),
]:
    show("setsockopt " + name, lambda: s.setsockopt(level, opt, val))
for name, s, dest, level, kind, data in [
    ("IP_OPTIONS", s4, ("127.0.0.1", 9), 0, 4, nop4),
    ("IP_RETOPTS", s4, ("127.0.0.1", 9), 0, 7, nop4),
    ("IPV6_RTHDR", s6, ("::1", 9), 41, 57, rthdr),
    ("IPV6_2292RTHDR", s6, ("::1", 9), 41, 5, rthdr),
    ("IPV6_NEXTHOP", s6, ("::1", 9), 41, 9, b"\x0a\x00" + b"\x00" * 26),
    ("IPV6_HOPOPTS", s6, ("::1", 9), 41, 54, opts),
    ("IPV6_DSTOPTS", s6, ("::1", 9), 41, 59, opts),
    ("IPV6_RTHDRDSTOPTS", s6, ("::1", 9), 41, 55, opts),
    ("IPV6_HOPLIMIT", s6, ("::1", 9), 41, 52, struct.pack("i", 7)),
    ("IPV6_RTHDR-on-IPv4", s4, ("127.0.0.1", 9), 41, 57, rthdr),
    ("none", s4, ("127.0.0.1", 9), None, None, None),
]:
    anc = [] if level is None else [(level, kind, data)]
    show("sendmsg " + name, lambda: s.sendmsg([b"x"], anc, 0, dest))
# sendmmsg(2) of one message to [::1]:9 with a routing header.
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class mmsghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(iovec)),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int), ("len", ctypes.c_uint32)]
def sendmmsg(level, kind, data):
    addr = ctypes.create_string_buffer(struct.pack("=HHI16sI", socket.AF_INET6, socket.htons(9), 0,
                                                   socket.inet_pton(socket.AF_INET6, "::1"), 0), 28)
    payload = ctypes.create_string_buffer(b"x", 1)
    iov = iovec(ctypes.cast(payload, ctypes.c_void_p), 1)
    c = struct.pack("=QiI", 16 + len(data), level, kind) + data
    c += b"\0" * (-len(c) % 8)
    control = ctypes.create_string_buffer(c, len(c))
    m = mmsghdr(ctypes.cast(addr, ctypes.c_void_p), 28, ctypes.pointer(iov), 1,
                ctypes.cast(control, ctypes.c_void_p), len(c), 0, 0)
    if libc.sendmmsg(s6.fileno(), ctypes.byref(m), 1, 0) < 0:
        raise OSError(ctypes.get_errno(), "sendmmsg")
show("sendmmsg IPV6_RTHDR", lambda: sendmmsg(41, 57, rthdr))
show("sendmmsg IPV6_HOPLIMIT", lambda: sendmmsg(41, 52, struct.pack("i", 7)))
# vsock: CID 1 is the local loopback; non-blocking, so an allowed connect
# answers at once (EINPROGRESS) rather than after the vsock timeout.
try:
    v = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    v.setblocking(False)
    e = v.connect_ex((1, 1234))
    print("connect vsock", errno.errorcode.get(e, "ok"), flush=True)
    w = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    show("sendmsg vsock", lambda: w.sendmsg([b"x"], [], socket.MSG_DONTWAIT, (1, 1234)))
except OSError as e:
    print("vsock unavailable", errno.errorcode.get(e.errno, str(e.errno)), flush=True)
# netlink keeps working: a link dump through sendto and connect.
n = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
req = struct.pack("=IHHII", 32, 18, 0x301, 1, 0) + struct.pack("=BxHiII", 0, 0, 0, 0, 0)
show("sendto netlink", lambda: n.sendto(req, (0, 0)))
show("connect netlink", lambda: n.connect((0, 0)))
show("recv netlink", lambda: n.recv(65536))
"#;

/// The probe's answers, by try.
fn route_answers(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Under `default`, under a deny-by-default policy (loopback allowed) and
/// under one with a `family = "vsock"` rule: the socket options that route
/// a packet get EPERM from the filter, the same as control messages of
/// sendmsg and sendmmsg get EPERM from the supervisor with an audit record
/// naming the option, and others pass with the kernel's answer; a vsock
/// address follows `net_default` and the family rule, recorded; netlink
/// keeps working. On both platforms (`CORDON_TEST_PLATFORM`).
#[test]
fn every_route_a_packet_can_take_is_decided() {
    let dir = TempDir::new("routes");
    let deny_all = dir.path().join("deny.toml");
    std::fs::write(
        &deny_all,
        "name = \"deny-all\"\nnet_default = \"deny\"\n\
         [[net]]\ncidr = \"127.0.0.0/8\"\naction = \"allow\"\n\
         [[net]]\ncidr = \"::1/128\"\naction = \"allow\"\n",
    )
    .unwrap();
    let vsock_rule = dir.path().join("vsock.toml");
    std::fs::write(
        &vsock_rule,
        "name = \"no-vsock\"\n[[net]]\nfamily = \"vsock\"\naction = \"deny\"\nnote = \"the hypervisor\"\n",
    )
    .unwrap();
    let cases = [
        ("default", "default".to_string(), None),
        (
            "deny-all",
            deny_all.display().to_string(),
            Some("net_default (no rule names vsock addresses)"),
        ),
        ("no-vsock", vsock_rule.display().to_string(), Some("net[0] vsock")),
    ];
    for (name, policy, vsock_denied_by) in cases {
        let mut env = python(&["python3", "-c", ROUTES_PROBE]);
        env.set_policy(&policy);
        let id = unique("routes");
        let out = ok(&env.run_keep(&id));
        let got = route_answers(&out);
        let want = |k: &str, v: &str| assert_eq!(got.get(k).map(String::as_str), Some(v), "{name}: {k}\n{out}");
        for o in [
            "IP_OPTIONS",
            "IP_TRANSPARENT",
            "IPV6_RTHDR",
            "IPV6_2292RTHDR",
            "IPV6_NEXTHOP",
            "IPV6_HOPOPTS",
            "IPV6_DSTOPTS",
            "IPV6_RTHDRDSTOPTS",
            "IPV6_TRANSPARENT",
        ] {
            want(&format!("setsockopt {o}"), "EPERM");
        }
        want("setsockopt SO_RCVBUF", "ok");
        let cmsgs = [
            "IP_OPTIONS",
            "IP_RETOPTS",
            "IPV6_RTHDR",
            "IPV6_2292RTHDR",
            "IPV6_NEXTHOP",
            "IPV6_HOPOPTS",
            "IPV6_DSTOPTS",
            "IPV6_RTHDRDSTOPTS",
        ];
        for c in cmsgs {
            want(&format!("sendmsg {c}"), "EPERM");
        }
        want("sendmsg IPV6_HOPLIMIT", "ok");
        // An IPv4 socket skips IPv6 control messages: the kernel's answer.
        want("sendmsg IPV6_RTHDR-on-IPv4", "ok");
        want("sendmsg none", "ok");
        want("sendmmsg IPV6_RTHDR", "EPERM");
        want("sendmmsg IPV6_HOPLIMIT", "ok");
        want("sendto netlink", "ok");
        want("connect netlink", "ok");
        want("recv netlink", "ok");
        let trail = env.audit_with(&id, "the deny of the last routing cmsg", |r| {
            r["syscall"] == "sendmmsg" && r["action"] == "deny"
        });
        for c in cmsgs {
            let r = trail
                .iter()
                .find(|r| {
                    r["syscall"] == "sendmsg"
                        && r["action"] == "deny"
                        && r["detail"].as_str().unwrap_or("").ends_with(&format!(" cmsg {c}"))
                })
                .unwrap_or_else(|| panic!("{name}: no deny record naming {c}: {trail:?}"));
            assert!(r["rule"].as_str().unwrap_or("").contains(c), "{name}: {r}");
        }
        assert!(
            trail.iter().any(|r| r["syscall"] == "sendmmsg"
                && r["action"] == "deny"
                && r["detail"].as_str().unwrap_or("").contains("cmsg IPV6_RTHDR")),
            "{name}: {trail:?}"
        );
        if got.contains_key("vsock unavailable") {
            eprintln!("{name}: AF_VSOCK unavailable on this host: vsock not tested");
            continue;
        }
        let vsock: Vec<_> = trail
            .iter()
            .filter(|r| r["detail"].as_str().unwrap_or("").starts_with("family 40 (vsock)"))
            .collect();
        match vsock_denied_by {
            Some(rule) => {
                want("connect vsock", "EPERM");
                want("sendmsg vsock", "EPERM");
                for call in ["connect", "sendmsg"] {
                    assert!(
                        vsock.iter().any(|r| r["syscall"] == call
                            && r["action"] == "deny"
                            && r["rule"].as_str().unwrap_or("").starts_with(rule)),
                        "{name}: {call} {vsock:?}"
                    );
                }
            }
            None => {
                // The kernel's own answers, as on the host.
                want("connect vsock", "EINPROGRESS");
                assert_ne!(got.get("sendmsg vsock").map(String::as_str), Some("EPERM"), "{out}");
                assert!(
                    vsock.iter().any(|r| r["syscall"] == "connect"
                        && r["action"] == "allow"
                        && r["rule"] == "net_default (no rule names vsock addresses)"),
                    "{name}: {vsock:?}"
                );
            }
        }
    }
}
