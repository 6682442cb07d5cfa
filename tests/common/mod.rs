//! Helpers for the integration suites: the cordon binary, throw-away
//! bundles over the shared busybox rootfs, and a private state root per
//! test so tests run in parallel without seeing each other.
//!
//! Needs root, a real kernel, and `make bundles` (bundles/busybox with the
//! probe in /usr/local/bin).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The cordon binary under test: `$CORDON_BIN`, else target/debug/cordon.
pub fn cordon_bin() -> PathBuf {
    std::env::var_os("CORDON_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/debug/cordon"))
}

/// The shared busybox bundle built by `make bundles`.
pub fn busybox_bundle() -> PathBuf {
    let b = repo().join("bundles/busybox");
    assert!(
        b.join("rootfs/usr/local/bin/probe").exists(),
        "bundles/busybox with the probe is missing: run `make bundles`"
    );
    b
}

/// The shared python bundle built by `make bundles`.
pub fn python_bundle() -> PathBuf {
    let b = repo().join("bundles/python");
    assert!(
        b.join("rootfs/usr/bin/python3").exists(),
        "bundles/python is missing: run `make bundles`"
    );
    b
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A unique name for this test process: `<prefix>-<pid>-<n>`.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates `/tmp/cordon-test-<unique>`.
    pub fn new(prefix: &str) -> Self {
        let p = std::env::temp_dir().join(unique(&format!("cordon-test-{prefix}")));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The platform the suites run on (`$CORDON_TEST_PLATFORM`), if not the
/// default.
pub fn test_platform() -> Option<String> {
    std::env::var("CORDON_TEST_PLATFORM").ok().filter(|p| !p.is_empty())
}

/// The enforcement level the suites run with (`$CORDON_TEST_ENFORCEMENT`:
/// `kernel`, the default, or `supervisor`); set as the annotation
/// `org.cordon.enforcement` when given.
pub fn test_enforcement() -> Option<String> {
    std::env::var("CORDON_TEST_ENFORCEMENT").ok().filter(|p| !p.is_empty())
}

/// Whether the default policy's path rules are enforced by the container's
/// mounts in this run (masked files read empty, writes get EROFS) rather
/// than by the supervisor (EACCES, and an audit record).
pub fn kernel_level() -> bool {
    test_enforcement().as_deref() != Some("supervisor")
}

/// A test's world: a private state root and a bundle whose config.json is
/// the shared bundle's, edited by the test, with an absolute rootfs path.
pub struct Env {
    /// Private `--root`.
    pub root: TempDir,
    /// The test's bundle directory (config.json only; the rootfs is shared).
    pub bundle: TempDir,
    /// The config.json being edited.
    pub config: serde_json::Value,
    /// The runtime's `--policy` for this environment's commands (an admin's
    /// choice, not gated like the `org.cordon.policy` annotation).
    pub policy: Option<String>,
    /// The runtime config file for this environment's commands
    /// (`CORDON_CONFIG`); none: the defaults.
    pub config_file: Option<PathBuf>,
}

impl Env {
    /// A busybox environment running `args`.
    pub fn busybox(args: &[&str]) -> Self {
        Self::from_bundle(&busybox_bundle(), args)
    }

    /// A busybox environment running `args` with every path rule in the
    /// supervisor (`org.cordon.enforcement = "supervisor"`), for the
    /// suites that exercise the supervisor's own machinery with opens
    /// (calls pending in it, floods of intercepted calls): under the
    /// default kernel level those opens never reach it.
    pub fn busybox_supervised(args: &[&str]) -> Self {
        let mut env = Self::busybox(args);
        env.annotate("org.cordon.enforcement", "supervisor");
        env
    }

    /// A python environment running `args`.
    pub fn python(args: &[&str]) -> Self {
        Self::from_bundle(&python_bundle(), args)
    }

    /// Makes the host's programs `names` (found on the host's PATH) run
    /// inside: each bind-mounted read-only at `/opt/bin/NAME`, the host's
    /// library directory at `/opt/lib` (run them with
    /// `LD_LIBRARY_PATH=/opt/lib`), over a tmpfs at `/opt`. For tools no
    /// bundle has (node, curl); the python bundle's glibc is the host's
    /// release, so the host's libraries load with it. Panics naming
    /// tools/install-deps.sh when a program is not installed.
    pub fn with_host_programs(&mut self, names: &[&str]) {
        let mounts = self.config["mounts"].as_array_mut().unwrap();
        mounts.push(json!({"destination": "/opt", "type": "tmpfs", "source": "tmpfs",
                           "options": ["nosuid", "nodev", "size=1m"]}));
        for name in names {
            let out = Command::new("sh")
                .args(["-c", &format!("command -v {name}")])
                .output()
                .expect("sh");
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            assert!(
                !path.is_empty(),
                "{name} is not installed on the host: run tools/install-deps.sh"
            );
            let path = std::fs::canonicalize(&path).unwrap();
            mounts.push(json!({"destination": format!("/opt/bin/{name}"), "type": "bind",
                               "source": path, "options": ["rbind", "ro"]}));
        }
        mounts.push(json!({"destination": "/opt/lib", "type": "bind",
                           "source": "/usr/lib/x86_64-linux-gnu", "options": ["rbind", "ro"]}));
    }

    fn from_bundle(src: &Path, args: &[&str]) -> Self {
        let text = std::fs::read_to_string(src.join("config.json")).unwrap();
        let mut config: serde_json::Value = serde_json::from_str(&text).unwrap();
        config["root"]["path"] = src.join("rootfs").to_string_lossy().into_owned().into();
        config["process"]["args"] = args.iter().map(|s| s.to_string()).collect::<Vec<_>>().into();
        let mut env = Env {
            root: TempDir::new("root"),
            bundle: TempDir::new("bundle"),
            config,
            policy: None,
            config_file: None,
        };
        // The suites run on both platforms: `CORDON_TEST_PLATFORM=ptrace`
        // (make test-ptrace) puts every container on the ptrace platform.
        if let Some(p) = test_platform() {
            env.annotate("org.cordon.platform", &p);
        }
        if let Some(e) = test_enforcement() {
            env.annotate("org.cordon.enforcement", &e);
        }
        env
    }

    /// Writes config.json (call after editing `config`).
    pub fn write(&self) {
        std::fs::write(
            self.bundle.path().join("config.json"),
            serde_json::to_vec_pretty(&self.config).unwrap(),
        )
        .unwrap();
    }

    /// Sets an annotation.
    pub fn annotate(&mut self, key: &str, value: &str) {
        if !self.config["annotations"].is_object() {
            self.config["annotations"] = serde_json::json!({});
        }
        self.config["annotations"][key] = value.into();
    }

    /// `cordon --root <root> <args>`, with stdin closed. Output goes through
    /// files, not pipes: a created container inherits cordon's stdio (as with
    /// runc), and would hold a pipe open for as long as it lives.
    pub fn cordon(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(cordon_bin());
        cmd.arg("--root").arg(self.root.path());
        if let Some(p) = &self.policy {
            cmd.arg("--policy").arg(p);
        }
        if let Some(c) = &self.config_file {
            cmd.env("CORDON_CONFIG", c);
        }
        run_captured(cmd.args(args))
    }

    /// Runs this environment's containers under `policy` (a built-in name
    /// or a policy file) with the runtime's `--policy` flag.
    pub fn set_policy(&mut self, policy: &str) {
        self.policy = Some(policy.to_string());
    }

    /// Writes config.json and runs `cordon run -b <bundle> <id>`.
    pub fn run(&self, id: &str) -> Output {
        self.write();
        let b = self.bundle.path().to_string_lossy().into_owned();
        self.cordon(&["run", "-b", &b, id])
    }

    /// Writes config.json and runs `cordon run -b <bundle> <id>`, waiting
    /// for it at most `timeout` (a hang detector, not a timing): past it
    /// the run is killed and this panics with the state of every thread
    /// of the container's processes (`t`: stopped by the tracer).
    #[track_caller]
    pub fn run_within(&self, id: &str, timeout: std::time::Duration) -> Output {
        self.write();
        let dir = TempDir::new("out");
        let (o, e) = (dir.path().join("stdout"), dir.path().join("stderr"));
        let mut child = Command::new(cordon_bin())
            .arg("--root")
            .arg(self.root.path())
            .args(["run", "-b", &self.bundle.path().to_string_lossy(), id])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&o).unwrap())
            .stderr(std::fs::File::create(&e).unwrap())
            .spawn()
            .expect("spawn cordon run");
        let deadline = std::time::Instant::now() + timeout;
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if std::time::Instant::now() >= deadline {
                let threads = thread_states(id);
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "`cordon run {id}` still running after {timeout:?}; threads: {threads:?}; stdout: {}",
                    String::from_utf8_lossy(&std::fs::read(&o).unwrap_or_default())
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        Output {
            status,
            stdout: std::fs::read(&o).unwrap(),
            stderr: std::fs::read(&e).unwrap(),
        }
    }

    /// Writes config.json and runs `cordon run --keep -b <bundle> <id>`
    /// (the stopped container stays for `state` and `audit`).
    pub fn run_keep(&self, id: &str) -> Output {
        self.write();
        let b = self.bundle.path().to_string_lossy().into_owned();
        self.cordon(&["run", "--keep", "-b", &b, id])
    }

    /// Writes config.json and runs `cordon create -b <bundle> <id>`.
    pub fn create(&self, id: &str) -> Output {
        self.write();
        let b = self.bundle.path().to_string_lossy().into_owned();
        self.cordon(&["create", "-b", &b, id])
    }

    /// The OCI state of `id` as JSON.
    pub fn state(&self, id: &str) -> serde_json::Value {
        let out = self.cordon(&["state", id]);
        assert!(out.status.success(), "state {id}: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The audit records of `id`.
    pub fn audit(&self, id: &str) -> Vec<serde_json::Value> {
        let out = self.cordon(&["audit", "--json", id]);
        assert!(out.status.success(), "audit {id}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Container `id`'s audit trail once a record `wanted` accepts is in
    /// it: the supervisor writes a call's record right after it answers
    /// the call, so the caller (and `cordon run`) may be done a moment
    /// before the record is there. Panics naming `what` and the trail
    /// after 30 s (a hang detector).
    pub fn audit_with(
        &self,
        id: &str,
        what: &str,
        wanted: impl Fn(&serde_json::Value) -> bool,
    ) -> Vec<serde_json::Value> {
        let mut trail = Vec::new();
        wait_until(what, std::time::Duration::from_secs(30), || {
            trail = self.audit(id);
            if trail.iter().any(&wanted) {
                Ok(())
            } else {
                Err(format!("{trail:?}"))
            }
        });
        trail
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // Leave nothing behind, whatever the test did.
        let out = self.cordon(&["list", "-q"]);
        for id in String::from_utf8_lossy(&out.stdout).lines() {
            let _ = self.cordon(&["delete", "--force", id]);
        }
    }
}

/// Runs `cmd` with stdin closed and stdout/stderr captured through files;
/// returns once the command (not the processes it leaves behind) exits.
pub fn run_captured(cmd: &mut Command) -> Output {
    let dir = TempDir::new("out");
    let (o, e) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let status = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap())
        .status()
        .expect("run command");
    Output {
        status,
        stdout: std::fs::read(&o).unwrap(),
        stderr: std::fs::read(&e).unwrap(),
    }
}

/// stdout as a String.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as a String.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns stdout.
#[track_caller]
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

/// Whether any cgroup directory named after `id` exists (leak check).
pub fn cgroup_leaked(id: &str) -> bool {
    let out = Command::new("find")
        .args(["/sys/fs/cgroup", "-maxdepth", "4", "-type", "d", "-name", id])
        .output()
        .unwrap();
    !out.stdout.is_empty()
}

// ---------------------------------------------------------------------------
// Leak checks
// ---------------------------------------------------------------------------

/// Host pid of container `id`'s supervisor, from cordon's meta.json under
/// state root `root` (`None` if there is none).
pub fn supervisor_pid(root: &Path, id: &str) -> Option<i32> {
    let meta = std::fs::read(root.join(".cordon").join(id).join("meta.json")).ok()?;
    let meta: serde_json::Value = serde_json::from_slice(&meta).ok()?;
    meta["supervisor_pid"].as_i64().map(|p| p as i32)
}

/// A field of /proc/PID/status without its unit ("VmRSS" -> 9216 for
/// "VmRSS:  9216 kB"); `None` if the process or the field is gone.
pub fn proc_status(pid: i32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The names (comm) of the threads of process `pid`.
pub fn thread_names(pid: i32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .collect()
}

/// This process's open fds, "N -> what it refers to" each (the directory
/// handle that lists them left out). Only meaningful while no other test of
/// the same binary runs (see [`serial`]).
pub fn open_fds() -> std::collections::BTreeSet<String> {
    let me = format!("/proc/{}/fd", std::process::id());
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let target = std::fs::read_link(e.path()).ok()?;
            (target.as_os_str() != me.as_str())
                .then(|| format!("{} -> {}", e.file_name().to_string_lossy(), target.display()))
        })
        .collect()
}

/// Asserts that this process has no fd open now that it did not have when
/// `before` was taken ([`open_fds`]): nothing the test ran leaked one.
#[track_caller]
pub fn assert_no_new_fds(before: &std::collections::BTreeSet<String>) {
    let new: Vec<String> = open_fds().difference(before).cloned().collect();
    assert!(new.is_empty(), "fds left open: {new:?} (before: {before:?})");
}

/// Serializes the tests of one test binary that take it (their fd counts
/// and load must not mix). A failed test does not poison it for the others.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `text` names `id` as a whole argument or path component
/// (`/cordon/<id>`, `<id>`), not as part of a longer name.
fn names(text: &str, id: &str) -> bool {
    text.split(|c: char| c.is_whitespace() || c == '/' || c == '\0' || c == ':')
        .any(|w| w == id)
}

/// Every cgroup directory under /sys/fs/cgroup (each v1 hierarchy and the
/// unified one), a few levels deep.
fn cgroup_dir_list() -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                out.push(e.path());
                if depth > 0 {
                    walk(&e.path(), depth - 1, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), 4, &mut out);
    out
}

/// A live process: pid, command line (spaces for NULs), /proc/PID/cgroup.
struct Proc {
    pid: String,
    cmdline: String,
    cgroup: String,
}

/// Every live process but this one (zombies are left out: their parent
/// reaps them).
fn live_processes() -> Vec<Proc> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if pid == me || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if matches!(stat.rsplit_once(") ").and_then(|(_, r)| r.get(..1)), Some("Z" | "X")) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        out.push(Proc {
            cmdline: String::from_utf8_lossy(&cmdline).replace('\0', " ").trim().to_string(),
            cgroup: std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default(),
            pid,
        });
    }
    out
}

/// Live processes that belong to container `id`: its supervisor and
/// watchdog, a `cordon create` or init that names it on its command line,
/// every process whose cgroup path names it. "pid (command line)" each.
pub fn processes_of(id: &str) -> Vec<String> {
    live_processes()
        .into_iter()
        .filter(|p| p.cmdline.split(' ').any(|a| a == id) || p.cgroup.lines().any(|l| names(l, id)))
        .map(|p| format!("{} ({})", p.pid, p.cmdline))
        .collect()
}

/// "tid state" for every thread of the live processes of container `id`
/// (see [`processes_of`]).
pub fn thread_states(id: &str) -> Vec<String> {
    let mut out = Vec::new();
    for p in processes_of(id) {
        let pid = p.split(' ').next().unwrap_or_default();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            let state = stat.rsplit_once(") ").and_then(|(_, r)| r.get(..1)).unwrap_or("?");
            out.push(format!("{} {state}", t.file_name().to_string_lossy()));
        }
    }
    out
}

/// Everything the containers `ids` under state root `root` left behind, one
/// line per leftover (empty: nothing): entries in `cordon list`, state
/// directories, mounts naming an id or one of `paths` (bundles), cgroup
/// directories, processes (see [`processes_of`]).
pub fn leftovers<S: AsRef<str>>(root: &Path, ids: &[S], paths: &[&Path]) -> Vec<String> {
    let mut out = Vec::new();
    let list = run_captured(Command::new(cordon_bin()).arg("--root").arg(root).args(["list", "-q"]));
    if !list.status.success() {
        out.push(format!("`cordon list` fails: {}", stderr(&list).trim()));
    }
    let listed = stdout(&list);
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let cgroups = cgroup_dir_list();
    let procs = live_processes();
    for p in paths {
        let p = p.to_string_lossy();
        for l in mountinfo.lines() {
            if l.split(' ').any(|f| f == p || f.starts_with(&format!("{p}/"))) {
                out.push(format!("mount of {p}: {l}"));
            }
        }
    }
    for id in ids {
        let id = id.as_ref();
        if listed.lines().any(|l| l == id) {
            out.push(format!("{id}: listed by `cordon list`"));
        }
        for d in [root.join(id), root.join(".cordon").join(id)] {
            if d.exists() {
                out.push(format!("{id}: state directory {}", d.display()));
            }
        }
        for l in mountinfo.lines().filter(|l| names(l, id)) {
            out.push(format!("{id}: mount {l}"));
        }
        for d in cgroups.iter().filter(|d| d.file_name().is_some_and(|n| n == id)) {
            out.push(format!("{id}: cgroup {}", d.display()));
        }
        for p in procs
            .iter()
            .filter(|p| p.cmdline.split(' ').any(|a| a == id) || p.cgroup.lines().any(|l| names(l, id)))
        {
            out.push(format!("{id}: process {} ({})", p.pid, p.cmdline));
        }
    }
    out
}

/// Asserts that nothing of the containers `ids` is left under `root` and no
/// mount names one of `paths` (see [`leftovers`]). Processes being killed
/// take a moment to go: waits for them, failing after 30 s (a hang
/// detector, not a time limit).
#[track_caller]
pub fn assert_no_leftovers<S: AsRef<str>>(root: &Path, ids: &[S], paths: &[&Path]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let left = leftovers(root, ids, paths);
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left behind:\n{}",
            left.join("\n")
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

impl Env {
    /// [`assert_no_leftovers`] for `ids` under this environment's root, also
    /// checking that no mount names its bundle.
    #[track_caller]
    pub fn assert_no_leftovers<S: AsRef<str>>(&self, ids: &[S]) {
        assert_no_leftovers(self.root.path(), ids, &[self.bundle.path()]);
    }

    /// Host pid of container `id`'s supervisor (panics if it has none).
    #[track_caller]
    pub fn supervisor_pid(&self, id: &str) -> i32 {
        supervisor_pid(self.root.path(), id).unwrap_or_else(|| panic!("{id} has no supervisor pid in meta.json"))
    }
}

/// Polls `f` every 20 ms until it returns `Ok`; panics after `timeout` (a
/// hang detector) naming `what` and the last `Err`.
#[track_caller]
pub fn wait_until<T>(what: &str, timeout: std::time::Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match f() {
            Ok(v) => return v,
            Err(last) => assert!(
                std::time::Instant::now() < deadline,
                "timed out after {timeout:?} waiting for {what}; last: {last}"
            ),
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Whether host pid `pid` is a live (not zombie) process.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !matches!(s.rsplit_once(") ").and_then(|(_, r)| r.get(..1)), Some("Z" | "X")),
        Err(_) => false,
    }
}

/// Sends `sig` to host pid `pid`.
pub fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory effects.
    let r = unsafe { libc::kill(pid, sig) };
    assert_eq!(r, 0, "kill({pid}, {sig}): {}", std::io::Error::last_os_error());
}

/// Docker's default capabilities (moby's `oci/caps/defaults.go`; CAP_MKNOD
/// among them).
pub const DOCKER_CAPS: [&str; 14] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// Runs `ip ARGS`; panics with its stderr when it fails.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `f` on a thread that joined network namespace `ns` (by name, as
/// `ip netns add` made it) and returns what it returns.
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(format!("/var/run/netns/{ns}")).unwrap();
    std::thread::spawn(move || {
        // SAFETY: setns(2) on an fd we hold, for this thread only.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap()
}
