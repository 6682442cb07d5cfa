//! Engines suite: a real container engine drives cordon. Here containerd's
//! runc shim (containerd-shim-runc-v2) runs cordon in place of runc, as
//! `ctr run --runc-binary /abs/path/to/cordon`, and the shim invokes it the
//! way it invokes runc: `cordon --root R --log B/log.json --log-format json
//! create --bundle B --pid-file B/init.pid ID`, then `start`, `state`,
//! `exec`, `kill`, `delete`.
//!
//! Each test starts its own containerd (its own config, root, state, grpc
//! and ttrpc sockets and opt dir in a temp dir, CRI plugin disabled) — it
//! never talks to a system containerd — and imports an OCI image layout
//! built here from bundles/busybox/rootfs, since no registry is reachable.
//! `ctr run` gets `--runc-root` and `--fifo-dir` inside that temp dir too
//! (`ctr task exec` gets `--fifo-dir`), so cordon's state is private to the
//! test. (containerd 1.6's shim still puts its socket in /run/containerd/s,
//! a fixed path; the suite removes that directory afterwards if it created
//! it and it is empty.)
//!
//! cordon's default policy emulates uname (`uname -r` is `6.1.0-cordon`
//! inside a container): seeing it proves the supervisor is there.
//!
//! Needs root, a real kernel, `make bundles`, target/debug/cordon, and
//! containerd + ctr + containerd-shim-runc-v2 (tools/install-deps.sh).
//! Tests run one at a time (one containerd at a time) under [`SERIAL`].

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cordon_tests::{busybox_bundle, cgroup_leaked, cordon_bin, run_captured, unique, TempDir};
use serde_json::{json, Value};

/// The containerd namespace every test uses.
const NS: &str = "cordon-test";
/// The image built and imported by every test.
const IMAGE: &str = "docker.io/library/cordon-busybox:latest";
/// What `uname -r` says under cordon's default policy.
const CORDON_RELEASE: &str = "6.1.0-cordon";
/// Longest a single ctr/containerd command may take.
const CMD_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest containerd may take to answer `ctr version` after starting.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a poll for a state change (task stopped, cleanup done) may take.
const WAIT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest containerd may take to exit on SIGTERM before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// One containerd at a time: they share /run/containerd/s and the
/// `cordon-test` cgroup parents, and the machine has 2 cores.
static SERIAL: Mutex<()> = Mutex::new(());

// ---------------------------------------------------------------------------
// running commands
// ---------------------------------------------------------------------------

/// A finished (or timed-out) command.
struct Ran {
    /// The command line, for messages.
    cmdline: String,
    /// `None` when it timed out (it was then killed) or could not start.
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
    fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = match self.status {
            Some(s) => format!("{s}"),
            None => "did not finish (timed out and killed, or failed to start)".into(),
        };
        write!(
            f,
            "$ {}\n  status: {status}\n  stdout: {:?}\n  stderr: {:?}",
            self.cmdline, self.stdout, self.stderr
        )
    }
}

/// Runs `cmd` with stdin closed and stdout/stderr in files (a process it
/// starts may inherit them and outlive it), killing it after `timeout`.
/// Never panics, so cleanup code can use it.
fn run_timeout(cmd: &mut Command, timeout: Duration) -> Ran {
    let cmdline = format!(
        "{} {}",
        cmd.get_program().to_string_lossy(),
        cmd.get_args()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let dir = TempDir::new("out");
    let (o, e) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let files = fs::File::create(&o).and_then(|of| Ok((of, fs::File::create(&e)?)));
    let spawned = files.and_then(|(of, ef)| cmd.stdin(Stdio::null()).stdout(of).stderr(ef).spawn());
    let mut child = match spawned {
        Ok(c) => c,
        Err(err) => {
            return Ran {
                cmdline,
                status: None,
                stdout: String::new(),
                stderr: format!("failed to start: {err}"),
            }
        }
    };
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    Ran {
        cmdline,
        status,
        stdout: fs::read_to_string(&o).unwrap_or_default(),
        stderr: fs::read_to_string(&e).unwrap_or_default(),
    }
}

/// Polls `f` every 50 ms until it returns `Ok`, or gives the last `Err`
/// after [`WAIT_TIMEOUT`].
fn poll<T>(mut f: impl FnMut() -> Result<T, String>) -> Result<T, String> {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(last) if Instant::now() >= deadline => return Err(format!("after {WAIT_TIMEOUT:?}: {last}")),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// `name`'s path if it is an executable file in $PATH.
fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Fails (never skips) when the engine is not installed.
fn require_containerd() {
    let missing: Vec<&str> = ["containerd", "ctr", "containerd-shim-runc-v2"]
        .into_iter()
        .filter(|t| which(t).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "containerd is not installed ({} not found in PATH): run tools/install-deps.sh (as root) \
         to install the containerd package, then rerun this suite",
        missing.join(", ")
    );
}

/// The cordon binary as an absolute path (the shim runs it from the bundle).
fn cordon_abs() -> PathBuf {
    let bin = cordon_bin();
    assert!(
        bin.is_file(),
        "{} does not exist: build it with `cargo build -p cordon`",
        bin.display()
    );
    fs::canonicalize(&bin).expect("canonicalize the cordon binary path")
}

// ---------------------------------------------------------------------------
// the OCI image layout
// ---------------------------------------------------------------------------

/// The sha256 of a file, as lowercase hex.
fn sha256_file(path: &Path) -> String {
    let out = run_captured(Command::new("sha256sum").arg(path));
    assert!(out.status.success(), "sha256sum {}: {:?}", path.display(), out);
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = text.split_whitespace().next().unwrap_or_default().to_string();
    assert!(
        hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "sha256sum printed {text:?}"
    );
    hex
}

/// Moves `file` into `blobs` under its digest; returns (digest, size).
fn add_blob(blobs: &Path, file: &Path) -> (String, u64) {
    let hex = sha256_file(file);
    let size = fs::metadata(file).unwrap().len();
    fs::rename(file, blobs.join(&hex)).unwrap();
    (format!("sha256:{hex}"), size)
}

/// Writes `value` as a blob; returns (digest, size).
fn add_json_blob(blobs: &Path, scratch: &Path, value: &Value) -> (String, u64) {
    let tmp = scratch.join("blob.json");
    fs::write(&tmp, serde_json::to_vec(value).unwrap()).unwrap();
    add_blob(blobs, &tmp)
}

/// Runs `tar args` and asserts it succeeded.
fn tar(args: &[&str]) {
    let out = run_captured(Command::new("tar").args(args));
    assert!(
        out.status.success(),
        "tar {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds an OCI image layout tarball of `rootfs` (one uncompressed layer)
/// in `dir`, named [`IMAGE`], and returns its path.
fn build_image(dir: &Path, rootfs: &Path) -> PathBuf {
    let layout = dir.join("layout");
    let blobs = layout.join("blobs/sha256");
    fs::create_dir_all(&blobs).unwrap();
    let s = |p: &Path| p.to_string_lossy().into_owned();

    let layer_tar = dir.join("layer.tar");
    tar(&["--numeric-owner", "-C", &s(rootfs), "-cf", &s(&layer_tar), "."]);
    let (layer, layer_size) = add_blob(&blobs, &layer_tar);

    let config = json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Cmd": ["sh"],
        },
        // Uncompressed layer: its diff_id is its digest.
        "rootfs": {"type": "layers", "diff_ids": [layer]},
    });
    let (config, config_size) = add_json_blob(&blobs, dir, &config);

    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config,
            "size": config_size,
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": layer,
            "size": layer_size,
        }],
    });
    let (manifest, manifest_size) = add_json_blob(&blobs, dir, &manifest);

    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest,
            "size": manifest_size,
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {
                "io.containerd.image.name": IMAGE,
                "org.opencontainers.image.ref.name": "latest",
            },
        }],
    });
    fs::write(layout.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    fs::write(layout.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();

    let image = dir.join("image.tar");
    tar(&["-C", &s(&layout), "-cf", &s(&image), "."]);
    image
}

// ---------------------------------------------------------------------------
// host state: mounts, processes, directories
// ---------------------------------------------------------------------------

/// Undoes /proc/self/mountinfo's octal escapes (`\040` for a space...).
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let esc = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], esc) {
            (b'\\', Some(d)) => {
                out.push((u32::from(d[0] - b'0') * 64 + u32::from(d[1] - b'0') * 8 + u32::from(d[2] - b'0')) as u8);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Mount points at or under `dir`, deepest first.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape_mountinfo(m)))
        .filter(|m| m.starts_with(dir))
        .collect();
    found.sort_by(|a, b| b.as_os_str().len().cmp(&a.as_os_str().len()).then(a.cmp(b)));
    found.dedup();
    found
}

/// Pids (not ours) whose command line has an argument containing `needle`.
fn pids_mentioning(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(rd) = fs::read_dir("/proc") else { return vec![] };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmdline
                .split(|&b| b == 0)
                .any(|a| String::from_utf8_lossy(a).contains(needle))
        })
        .collect()
}

/// Sends SIGKILL to `pid`.
fn sigkill(pid: i32) {
    // SAFETY: kill(2) with a pid we found by its command line; no memory
    // is shared with the callee.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// The `cordon-test` cgroup parents the runc shim's cgroupsPath
/// (`/<namespace>/<id>`) makes, on cgroup v1 (per controller) and v2.
fn ns_cgroup_dirs() -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let mut dirs = vec![root.join(NS)];
    if let Ok(rd) = fs::read_dir(root) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(e.path().join(NS));
            }
        }
    }
    dirs
}

// ---------------------------------------------------------------------------
// the containerd fixture
// ---------------------------------------------------------------------------

/// A private containerd, stopped and cleaned up on drop — whatever the test
/// did, including panicking half way.
struct Containerd {
    /// Everything of this containerd; `None` once dropped (or leaked because
    /// something stayed mounted under it).
    dir: Option<TempDir>,
    child: Option<std::process::Child>,
    sock: PathBuf,
    state: PathBuf,
    log: PathBuf,
    /// `ctr run --runc-root`: cordon's `--root` is `<runc_root>/<namespace>`.
    runc_root: PathBuf,
    fifo_dir: PathBuf,
    cordon: PathBuf,
    /// Host directories this containerd may create outside `dir`, that did
    /// not exist before it started (removed if empty at the end).
    created_outside: Vec<PathBuf>,
}

impl Containerd {
    /// Starts containerd and waits until `ctr version` answers.
    fn start() -> Self {
        require_containerd();
        let cordon = cordon_abs();
        let dir = TempDir::new("containerd");
        let d = dir.path().to_path_buf();
        let created_outside: Vec<PathBuf> = ["s", "fifo", "runc", ""]
            .into_iter()
            .map(|sub| Path::new("/run/containerd").join(sub))
            .chain(ns_cgroup_dirs())
            .filter(|p| !p.exists())
            .collect();
        let (sock, state, log) = (d.join("containerd.sock"), d.join("state"), d.join("containerd.log"));
        let config = format!(
            r#"version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "{sock}"

[ttrpc]
  address = "{sock}.ttrpc"

[debug]
  address = "{d}/debug.sock"
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"
"#,
            root = d.join("root").display(),
            state = state.display(),
            sock = sock.display(),
            d = d.display(),
        );
        fs::write(d.join("config.toml"), config).unwrap();
        let logf = fs::File::create(&log).unwrap();
        let child = Command::new("containerd")
            .arg("--config")
            .arg(d.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(logf.try_clone().unwrap())
            .stderr(logf)
            .spawn()
            .expect("spawn containerd");
        let mut c = Containerd {
            runc_root: d.join("runc"),
            fifo_dir: d.join("fifo"),
            dir: Some(dir),
            child: Some(child),
            sock,
            state,
            log,
            cordon,
            created_outside,
        };
        // From here on a panic drops `c`, which stops containerd.
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(st)) = c.child.as_mut().unwrap().try_wait() {
                panic!("containerd exited ({st}) before answering\n{}", c.diagnostics());
            }
            let v = c.ctr_global(&["version"], Duration::from_secs(5));
            if v.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "containerd did not answer `ctr version` within {START_TIMEOUT:?}\n{v}\n{}",
                c.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        c
    }

    /// `ctr --address SOCK <args>`.
    fn ctr_global(&self, args: &[&str], timeout: Duration) -> Ran {
        run_timeout(Command::new("ctr").arg("--address").arg(&self.sock).args(args), timeout)
    }

    /// `ctr --address SOCK -n cordon-test <args>`.
    fn ctr(&self, args: &[&str]) -> Ran {
        run_timeout(
            Command::new("ctr")
                .arg("--address")
                .arg(&self.sock)
                .arg("-n")
                .arg(NS)
                .args(args),
            CMD_TIMEOUT,
        )
    }

    /// cordon's state root for this namespace (what the shim passes as --root).
    fn cordon_root(&self) -> PathBuf {
        self.runc_root.join(NS)
    }

    /// `cordon --root <the shim's root> <args>`.
    fn cordon(&self, args: &[&str]) -> Ran {
        run_timeout(
            Command::new(&self.cordon)
                .arg("--root")
                .arg(self.cordon_root())
                .args(args),
            CMD_TIMEOUT,
        )
    }

    /// Builds the busybox image and imports it as [`IMAGE`].
    fn import_busybox(&self) {
        let rootfs = busybox_bundle().join("rootfs");
        let dir = self.dir.as_ref().unwrap().path().join("image");
        fs::create_dir_all(&dir).unwrap();
        let image = build_image(&dir, &rootfs);
        let imp = self.ctr(&["image", "import", &image.to_string_lossy()]);
        assert!(imp.success(), "image import failed\n{imp}\n{}", self.diagnostics());
        let ls = self.ctr(&["image", "ls", "-q"]);
        assert!(
            ls.success() && ls.stdout.lines().any(|l| l == IMAGE),
            "{IMAGE} not listed after import\n{ls}\n{}",
            self.diagnostics()
        );
    }

    /// The `ctr run` flags that make the runc shim use cordon, with its
    /// state and fifos in the temp dir.
    fn runc_flags(&self) -> Vec<String> {
        vec![
            "--runc-binary".into(),
            self.cordon.to_string_lossy().into_owned(),
            "--runc-root".into(),
            self.runc_root.to_string_lossy().into_owned(),
            "--fifo-dir".into(),
            self.fifo_dir.to_string_lossy().into_owned(),
        ]
    }

    /// `ctr run --rm --runc-binary cordon ... IMAGE id cmd...`.
    fn run_rm(&self, id: &str, cmd: &[&str]) -> Ran {
        let mut args: Vec<String> = vec!["run".into(), "--rm".into()];
        args.extend(self.runc_flags());
        args.push(IMAGE.into());
        args.push(id.into());
        args.extend(cmd.iter().map(|s| s.to_string()));
        self.ctr(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// What to look at when something failed: containerd's warnings and
    /// errors, the runtime's log.json files still in the state dir, and
    /// cordon's containers.
    fn diagnostics(&self) -> String {
        let mut s = String::from("--- containerd log (warnings and errors, last 30) ---\n");
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let bad: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("level=warning") || l.contains("level=error") || l.contains("level=fatal"))
            .collect();
        for l in &bad[bad.len().saturating_sub(30)..] {
            s.push_str(l);
            s.push('\n');
        }
        let task_dir = self.state.join("io.containerd.runtime.v2.task").join(NS);
        if let Ok(rd) = fs::read_dir(&task_dir) {
            for e in rd.flatten() {
                let p = e.path().join("log.json");
                if let Ok(text) = fs::read_to_string(&p) {
                    s.push_str(&format!("--- {} ---\n{text}\n", p.display()));
                }
            }
        }
        let list = self.cordon(&["list"]);
        s.push_str(&format!(
            "--- cordon containers in {} ---\n{}",
            self.cordon_root().display(),
            list.stdout
        ));
        s
    }

    /// The sockets of this containerd's live shims (each bundle's `address`
    /// file says `unix:///run/containerd/s/<hash>`).
    fn shim_sockets(&self) -> Vec<PathBuf> {
        let task_dir = self.state.join("io.containerd.runtime.v2.task").join(NS);
        let Ok(rd) = fs::read_dir(task_dir) else { return vec![] };
        rd.flatten()
            .filter_map(|e| fs::read_to_string(e.path().join("address")).ok())
            .filter_map(|a| a.trim().strip_prefix("unix://").map(PathBuf::from))
            .filter(|p| p.starts_with("/run/containerd/s"))
            .collect()
    }

    /// Ids of cordon containers in the shim's root.
    fn cordon_ids(&self) -> Vec<String> {
        if !self.cordon_root().exists() {
            return vec![];
        }
        self.cordon(&["list", "-q"])
            .stdout
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Waits until container `id` left nothing behind: no cordon container,
    /// no cgroup, no mount, no containerd task or container.
    fn assert_gone(&self, id: &str) {
        let dir = self.dir.as_ref().unwrap().path().to_path_buf();
        let res = poll(|| {
            let mut left = vec![];
            if self.cordon_ids().iter().any(|c| c == id) {
                left.push("a cordon container".to_string());
            }
            if cgroup_leaked(id) {
                left.push("a cgroup directory".into());
            }
            let mounts: Vec<_> = mounts_under(&dir)
                .into_iter()
                .filter(|m| m.to_string_lossy().contains(id))
                .collect();
            if !mounts.is_empty() {
                left.push(format!("mounts {mounts:?}"));
            }
            if self.ctr(&["task", "ls", "-q"]).stdout.lines().any(|l| l == id) {
                left.push("a containerd task".into());
            }
            if self.ctr(&["container", "ls", "-q"]).stdout.lines().any(|l| l == id) {
                left.push("a containerd container".into());
            }
            if left.is_empty() {
                Ok(())
            } else {
                Err(left.join(", "))
            }
        });
        if let Err(left) = res {
            panic!("{id} left behind: {left}\n{}", self.diagnostics());
        }
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else { return };
        let quick = Duration::from_secs(20);
        let running = self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)));
        let shim_sockets = self.shim_sockets();

        // 1. Through containerd: leftover tasks and containers.
        if running {
            for id in self.ctr(&["task", "ls", "-q"]).stdout.lines() {
                let _ = self.ctr(&["task", "kill", "-s", "SIGKILL", id]);
                let _ = run_timeout(
                    Command::new("ctr")
                        .arg("--address")
                        .arg(&self.sock)
                        .args(["-n", NS, "task", "rm", "-f", id]),
                    quick,
                );
            }
            for id in self.ctr(&["container", "ls", "-q"]).stdout.lines() {
                let _ = self.ctr(&["container", "rm", id]);
            }
        }

        // 2. Directly: cordon containers the shim left in its root.
        let force_delete_all = |c: &Containerd| {
            for id in c.cordon_ids() {
                let _ = c.cordon(&["delete", "--force", &id]);
            }
        };
        force_delete_all(self);

        // 3. Stop containerd: SIGTERM, wait, then SIGKILL.
        if let Some(mut child) = self.child.take() {
            if matches!(child.try_wait(), Ok(None)) {
                // SAFETY: kill(2) on our own child's pid; it is not reaped
                // yet (we hold the Child), so the pid cannot be reused.
                unsafe {
                    libc::kill(child.id() as i32, libc::SIGTERM);
                }
                let deadline = Instant::now() + STOP_TIMEOUT;
                while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
                if matches!(child.try_wait(), Ok(None)) {
                    let _ = child.kill();
                }
            }
            let _ = child.wait();
        }

        // 4. Shims outlive containerd: kill this containerd's (they carry
        //    `-address SOCK`), then anything else still naming our dir
        //    (a hung cordon, a supervisor), deleting containers between.
        let sock = self.sock.to_string_lossy().into_owned();
        for pid in pids_mentioning(&sock) {
            sigkill(pid);
        }
        force_delete_all(self);
        for pid in pids_mentioning(&dir.path().to_string_lossy()) {
            sigkill(pid);
        }
        force_delete_all(self);
        // A killed shim leaves its socket (in /run/containerd/s) behind.
        for sock in shim_sockets {
            let _ = fs::remove_file(sock.with_extension("debug"));
            let _ = fs::remove_file(sock);
        }

        // 5. Mounts under the temp dir (rootfs of a leaked task, snapshots).
        for m in mounts_under(dir.path()) {
            if let Ok(c) = std::ffi::CString::new(m.to_string_lossy().as_bytes()) {
                // SAFETY: umount2(2) with a valid NUL-terminated path.
                unsafe {
                    libc::umount2(c.as_ptr(), libc::MNT_DETACH);
                }
            }
        }

        // 6. Directories made outside the temp dir, if now empty (remove_dir
        //    never removes a non-empty directory or a busy cgroup).
        for p in &self.created_outside {
            let _ = fs::remove_dir(p);
        }

        // 7. The temp dir — unless something is still mounted under it, which
        //    removing recursively could reach through.
        let left = mounts_under(dir.path());
        if left.is_empty() {
            drop(dir);
        } else {
            eprintln!(
                "engines: leaving {} in place: still mounted: {left:?}",
                dir.path().display()
            );
            std::mem::forget(dir);
        }
    }
}

/// Takes the suite's lock (even if a previous test panicked holding it).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------
// tests
// ---------------------------------------------------------------------------

/// The supervisor is there: `uname -r` is emulated.
#[test]
fn ctr_run_uname_is_emulated_by_cordon() {
    let _g = serial();
    let c = Containerd::start();
    c.import_busybox();
    let id = unique("ctr-uname");
    let r = c.run_rm(&id, &["uname", "-r"]);
    assert!(
        r.success() && r.stdout.trim() == CORDON_RELEASE,
        "expected ctr to exit 0 printing {CORDON_RELEASE}\n{r}\n{}",
        c.diagnostics()
    );
    c.assert_gone(&id);
}

/// The init's exit code reaches ctr through the shim.
#[test]
fn ctr_run_exit_code_propagates() {
    let _g = serial();
    let c = Containerd::start();
    c.import_busybox();
    let id = unique("ctr-exit");
    let r = c.run_rm(&id, &["sh", "-c", "exit 3"]);
    assert_eq!(r.code(), Some(3), "expected ctr to exit 3\n{r}\n{}", c.diagnostics());
    c.assert_gone(&id);
}

/// The probe sees the emulated utsname (release and version).
#[test]
fn ctr_run_probe_sees_emulated_uname() {
    let _g = serial();
    let c = Containerd::start();
    c.import_busybox();
    let id = unique("ctr-probe");
    let r = c.run_rm(&id, &["probe", "uname"]);
    assert!(
        r.success() && r.stdout.starts_with(&format!("Linux|{CORDON_RELEASE}|")),
        "expected ctr to exit 0 printing Linux|{CORDON_RELEASE}|...\n{r}\n{}",
        c.diagnostics()
    );
    c.assert_gone(&id);
}

/// A detached task: the shim's create/start, then exec, ps, kill and delete
/// through ctr, with cordon's own view (state) in between.
#[test]
fn ctr_detached_task_exec_kill_delete() {
    let _g = serial();
    let c = Containerd::start();
    c.import_busybox();
    let id = unique("ctr-detached");

    let mut args: Vec<String> = vec!["run".into(), "-d".into()];
    args.extend(c.runc_flags());
    args.extend([IMAGE.to_string(), id.clone(), "sleep".into(), "1000".into()]);
    let r = c.ctr(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(r.success(), "ctr run -d failed\n{r}\n{}", c.diagnostics());

    // containerd's task is cordon's running container, same pid.
    let ls = c.ctr(&["task", "ls"]);
    let task_pid: Option<i64> = ls
        .stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(id.as_str()))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok());
    let st = c.cordon(&["state", &id]);
    assert!(st.success(), "cordon state {id} failed\n{st}\n{}", c.diagnostics());
    let state: Value = serde_json::from_str(&st.stdout).expect("cordon state prints JSON");
    assert_eq!(state["status"], "running", "cordon state: {state}");
    assert_eq!(
        task_pid,
        state["pid"].as_i64(),
        "ctr task ls pid vs cordon state pid\n{ls}\n{state}"
    );

    let fifo = c.fifo_dir.to_string_lossy().into_owned();
    let ex = c.ctr(&[
        "task",
        "exec",
        "--fifo-dir",
        &fifo,
        "--exec-id",
        "e1",
        &id,
        "uname",
        "-r",
    ]);
    assert!(
        ex.success() && ex.stdout.trim() == CORDON_RELEASE,
        "expected ctr task exec to exit 0 printing {CORDON_RELEASE}\n{ex}\n{}",
        c.diagnostics()
    );

    let ps = c.ctr(&["task", "ps", &id]);
    assert!(ps.success(), "ctr task ps failed\n{ps}\n{}", c.diagnostics());

    let k = c.ctr(&["task", "kill", "-s", "SIGKILL", &id]);
    assert!(k.success(), "ctr task kill failed\n{k}\n{}", c.diagnostics());
    let stopped = poll(|| {
        let ls = c.ctr(&["task", "ls"]);
        let line = ls
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id.as_str()));
        match line {
            Some(l) if l.contains("STOPPED") => Ok(()),
            other => Err(format!("task line {other:?}")),
        }
    });
    if let Err(e) = stopped {
        panic!("task {id} not STOPPED after SIGKILL: {e}\n{}", c.diagnostics());
    }

    let rm = c.ctr(&["task", "rm", &id]);
    assert!(rm.success(), "ctr task rm failed\n{rm}\n{}", c.diagnostics());
    assert!(
        rm.stderr.contains("137") || rm.stdout.contains("137"),
        "expected ctr task rm to report exit code 137\n{rm}"
    );
    let crm = c.ctr(&["container", "rm", &id]);
    assert!(crm.success(), "ctr container rm failed\n{crm}\n{}", c.diagnostics());
    c.assert_gone(&id);
}
