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
//! Docker: a private dockerd (`--data-root`, `--exec-root`, `--pidfile`, API
//! socket, `--config-file` all in a temp dir; no iptables, no bridge) on a
//! private containerd (`--containerd`), told about cordon with
//! `--add-runtime cordon=/abs/cordon` or by a daemon.json written by `cordon
//! install docker --write --config F`; the image is `docker import`ed from a
//! tar of bundles/busybox/rootfs. The runc shim then calls `cordon --root
//! <exec-root>/runtime-runc/moby --log B/log.json --log-format json ...`.
//!
//! podman: private storage, runroot, tmpdir and network config dir,
//! cgroupfs, file events, and `CONTAINERS_CONF` pointing at a file of the
//! test's; `podman --runtime /abs/cordon run` (or `--runtime cordon` after
//! `cordon install podman --write`). podman runs the runtime without
//! `--root`, so cordon uses its default root /run/cordon: the tests check
//! that each container's state is gone from it afterwards.
//!
//! Needs root, a real kernel, `make bundles`, target/debug/cordon, and
//! containerd + ctr + containerd-shim-runc-v2, dockerd + docker, podman +
//! conmon (tools/install-deps.sh); a missing engine fails its tests.
//! Tests run one at a time (one engine at a time) under [`SERIAL`].

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cordon_tests::{busybox_bundle, cgroup_leaked, cordon_bin, run_captured, unique, TempDir};
use serde_json::{json, Value};

mod cri;
mod workloads;
use cri::cri_config;

/// The containerd namespace every test uses.
const NS: &str = "cordon-test";
/// The image built and imported by every test.
const IMAGE: &str = "docker.io/library/cordon-busybox:latest";
/// containerd's runtime name of cordon's own shim.
const SHIM_RUNTIME: &str = "io.containerd.cordon.v2";
/// What `uname -r` says under cordon's default policy.
const CORDON_RELEASE: &str = "6.1.0-cordon";
/// What cordon's shim writes in a task checkpoint's directory.
const CHECKPOINT_RECORD: &str = "cordon-checkpoint.json";
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

/// Runs `tar args` and asserts it succeeded.
fn tar(args: &[&str]) {
    let out = run_captured(Command::new("tar").args(args));
    assert!(
        out.status.success(),
        "tar {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The OCI image layout `make image-layouts` built (tools/images.sh) of
/// image `name` (cordon-busybox, cordon-pause).
fn image_layout(name: &str) -> PathBuf {
    let t = cordon_tests::repo().join("target/images").join(format!("{name}.tar"));
    assert!(t.is_file(), "{} is missing: run `make image-layouts`", t.display());
    t
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
    cgroup_dirs(NS)
}

/// Cgroup directory `rel` on cgroup v2 and in every v1 hierarchy.
fn cgroup_dirs(rel: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let mut dirs = vec![root.join(rel)];
    if let Ok(rd) = fs::read_dir(root) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(e.path().join(rel));
            }
        }
    }
    dirs
}

/// Removes what a fixture created outside its temp dir: files, then
/// directories deepest first, each only if empty (remove_dir never removes
/// a non-empty directory or a busy cgroup).
fn remove_created(paths: &[PathBuf]) {
    let mut paths = paths.to_vec();
    paths.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in &paths {
        if fs::symlink_metadata(p).is_ok_and(|m| m.is_file()) {
            let _ = fs::remove_file(p);
        } else {
            let _ = fs::remove_dir(p);
        }
    }
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
    /// `$CORDON_SHIM_ROOT` of cordon's own shim.
    shim_base: PathBuf,
    fifo_dir: PathBuf,
    cordon: PathBuf,
    /// Host directories this containerd may create outside `dir`, that did
    /// not exist before it started (removed if empty at the end).
    created_outside: Vec<PathBuf>,
}

impl Containerd {
    /// Starts containerd (CRI plugin disabled) and waits until `ctr
    /// version` answers.
    fn start() -> Self {
        Self::start_with(false)
    }

    /// Starts containerd, with its CRI plugin if `cri`: sandbox image
    /// cordon-pause, runtime handler `cordon` on cordon's shim passing
    /// `org.cordon.*` pod annotations, no CNI (pods use the host network).
    fn start_with(cri: bool) -> Self {
        Self::start_config(|d| {
            if cri {
                cri_config(d)
            } else {
                r#"disabled_plugins = ["io.containerd.grpc.v1.cri"]"#.to_string()
            }
        })
    }

    /// Starts containerd with `plugins(dir)` as the plugins' part of its
    /// config (the rest points everything into the temp dir).
    fn start_config(plugins: impl FnOnce(&Path) -> String) -> Self {
        require_containerd();
        let cordon = cordon_abs();
        let dir = TempDir::new("containerd");
        let d = dir.path().to_path_buf();
        let created_outside: Vec<PathBuf> = ["s", "fifo", "runc/k8s.io", "runc", ""]
            .into_iter()
            .map(|sub| Path::new("/run/containerd").join(sub))
            .chain(ns_cgroup_dirs())
            .filter(|p| !p.exists())
            .collect();
        let (sock, state, log) = (d.join("containerd.sock"), d.join("state"), d.join("containerd.log"));
        let plugins = plugins(&d);
        let config = format!(
            r#"version = 2
root = "{root}"
state = "{state}"
{plugins}

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
        // cordon's own runtime config for every container of this
        // containerd (the shims inherit $CORDON_CONFIG): the defaults, with
        // a directory org.cordon.learn may write to and policies be chosen
        // from, and kept trails in the temp dir.
        fs::create_dir_all(d.join("learned")).unwrap();
        fs::write(
            d.join("cordon.toml"),
            format!(
                "[annotations]\nlearn = [\"{l}\"]\npolicies = [\"default\", \"audit\", \"agent\", \"{l}/\"]\n\n[audit]\ndir = \"{a}\"\n",
                l = d.join("learned").display(),
                a = d.join("trails").display()
            ),
        )
        .unwrap();
        let mut c = Containerd {
            runc_root: d.join("runc"),
            shim_base: d.join("cordon-shim"),
            fifo_dir: d.join("fifo"),
            dir: Some(dir),
            child: None,
            sock,
            state,
            log,
            cordon,
            created_outside,
        };
        // From here on a panic drops `c`, which stops containerd.
        c.spawn();
        c
    }

    /// The config file containerd reads.
    fn config_path(&self) -> PathBuf {
        self.dir.as_ref().expect("running").path().join("config.toml")
    }

    /// Starts containerd on its config and waits until `ctr version`
    /// answers.
    fn spawn(&mut self) {
        let d = self.dir.as_ref().expect("running").path().to_path_buf();
        let logf = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        // containerd finds `containerd-shim-cordon-v2` on its PATH (the
        // shim finds `cordon` beside itself); the shim's state goes to the
        // temp dir.
        let bin_dir = self.cordon.parent().expect("cordon has a directory").to_path_buf();
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
        let child = Command::new("containerd")
            .arg("--config")
            .arg(d.join("config.toml"))
            .env("PATH", path)
            .env("CORDON_SHIM_ROOT", d.join("cordon-shim"))
            .env("CORDON_CONFIG", d.join("cordon.toml"))
            .stdin(Stdio::null())
            .stdout(logf.try_clone().unwrap())
            .stderr(logf)
            .spawn()
            .expect("spawn containerd");
        self.child = Some(child);
        let c = self;
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
    }

    /// Stops containerd (SIGTERM, its shims and containers keep running)
    /// and starts it again on its config, as `systemctl restart
    /// containerd` does.
    fn restart(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill(2) on our own child's pid; it is not reaped yet
            // (we hold the Child), so the pid cannot be reused.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + STOP_TIMEOUT;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(
                !matches!(child.try_wait(), Ok(None)),
                "containerd did not stop on SIGTERM within {STOP_TIMEOUT:?}\n{}",
                self.diagnostics()
            );
            let _ = child.wait();
        }
        self.spawn();
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

    /// `cordon --root ROOT <args>`, with this containerd's cordon config.
    fn cordon_in(&self, root: &Path, args: &[&str]) -> Ran {
        let mut cmd = Command::new(&self.cordon);
        // Also from the drop, once the directory is gone.
        if let Some(d) = &self.dir {
            cmd.env("CORDON_CONFIG", d.path().join("cordon.toml"));
        }
        run_timeout(cmd.arg("--root").arg(root).args(args), CMD_TIMEOUT)
    }

    /// The directory this containerd's cordon config lets
    /// `org.cordon.learn` write to and `org.cordon.policy` choose from.
    fn learned_dir(&self) -> PathBuf {
        self.dir.as_ref().expect("running").path().join("learned")
    }

    /// The state root of cordon's own shim (containerd-shim-cordon-v2) for
    /// the test namespace: `$CORDON_SHIM_ROOT/<namespace>`.
    fn shim_root(&self) -> PathBuf {
        self.shim_base.join(NS)
    }

    /// The roots cordon containers of this containerd live in: the runc
    /// shim's, and cordon's shim's for the test namespace and CRI's.
    fn roots(&self) -> [PathBuf; 4] {
        [
            self.cordon_root(),
            self.shim_root(),
            self.shim_base.join("k8s.io"),
            self.runc_shim_root().join("k8s.io"),
        ]
    }

    /// `options.Root` of CRI runtimes on the runc shim in this containerd's
    /// config (see `cri_pods_after_cordon_install`).
    fn runc_shim_root(&self) -> PathBuf {
        self.shim_base.with_file_name("cordon-runc-shim")
    }

    /// The `ctr run` flags that pick cordon's own shim.
    fn shim_flags(&self) -> Vec<String> {
        vec![
            "--runtime".into(),
            SHIM_RUNTIME.into(),
            "--fifo-dir".into(),
            self.fifo_dir.to_string_lossy().into_owned(),
        ]
    }

    /// `ctr run --rm --runtime io.containerd.cordon.v2 IMAGE id cmd...`.
    fn shim_run_rm(&self, id: &str, cmd: &[&str]) -> Ran {
        self.run_rm_with(self.shim_flags(), id, cmd)
    }

    /// `ctr run --rm FLAGS IMAGE id cmd...`.
    fn run_rm_with(&self, flags: Vec<String>, id: &str, cmd: &[&str]) -> Ran {
        let mut args: Vec<String> = vec!["run".into(), "--rm".into()];
        args.extend(flags);
        args.push(IMAGE.into());
        args.push(id.into());
        args.extend(cmd.iter().map(|s| s.to_string()));
        self.ctr(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// `ctr --address SOCK -n NS <args>` as one shell-quoted command line.
    fn ctr_cmdline(&self, args: &[&str]) -> String {
        let mut words = vec!["ctr".to_string(), "--address".into(), self.sock.display().to_string()];
        words.extend(["-n".to_string(), NS.to_string()]);
        words.extend(args.iter().map(|a| a.to_string()));
        words
            .iter()
            .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Imports the busybox image as [`IMAGE`].
    fn import_busybox(&self) {
        self.import_image(NS, "cordon-busybox");
    }

    /// Imports image layout `name` (see [`image_layout`]) into namespace `ns`.
    fn import_image(&self, ns: &str, name: &str) {
        let t = image_layout(name).to_string_lossy().into_owned();
        let imp = self.ctr_global(&["-n", ns, "image", "import", &t], CMD_TIMEOUT);
        assert!(imp.success(), "image import failed\n{imp}\n{}", self.diagnostics());
        let want = format!("docker.io/library/{name}:latest");
        let ls = self.ctr_global(&["-n", ns, "image", "ls", "-q"], CMD_TIMEOUT);
        assert!(
            ls.success() && ls.stdout.lines().any(|l| l == want),
            "{want} not listed after import\n{ls}\n{}",
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
        self.run_rm_with(self.runc_flags(), id, cmd)
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
        for root in self.roots() {
            let list = self.cordon_in(&root, &["list"]);
            s.push_str(&format!(
                "--- cordon containers in {} ---\n{}",
                root.display(),
                list.stdout
            ));
        }
        s
    }

    /// The sockets of this containerd's live shims, in every namespace (each
    /// bundle's `address` file says `unix:///run/containerd/s/<hash>`).
    fn shim_sockets(&self) -> Vec<PathBuf> {
        let Ok(namespaces) = fs::read_dir(self.state.join("io.containerd.runtime.v2.task")) else {
            return vec![];
        };
        namespaces
            .flatten()
            .filter_map(|ns| fs::read_dir(ns.path()).ok())
            .flat_map(|rd| rd.flatten())
            .filter_map(|e| fs::read_to_string(e.path().join("address")).ok())
            .filter_map(|a| a.trim().strip_prefix("unix://").map(PathBuf::from))
            .filter(|p| p.starts_with("/run/containerd/s"))
            .collect()
    }

    /// Ids of cordon containers in the shims' roots.
    fn cordon_ids(&self) -> Vec<String> {
        self.roots()
            .iter()
            .filter(|r| r.exists())
            .flat_map(|r| {
                self.cordon_in(r, &["list", "-q"])
                    .stdout
                    .lines()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
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
            for root in c.roots().iter().filter(|r| r.exists()) {
                for id in c.cordon_in(root, &["list", "-q"]).stdout.lines() {
                    let _ = c.cordon_in(root, &["delete", "--force", id]);
                }
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

/// Learning and verifying a policy through containerd, as a platform
/// would (docs/LEARN.md, "Under an engine"): a task with
/// `org.cordon.learn` writes the learned policy when it is deleted; the
/// same job under that policy (`org.cordon.policy`) with
/// `org.cordon.trace` runs as it did and its trail holds no denial; a job
/// that does more is refused, and the trail names the learned rule.
#[test]
fn ctr_learns_a_policy_and_verifies_it() {
    let _g = serial();
    let c = Containerd::start();
    c.import_busybox();
    let file = c.learned_dir().join("job.toml");
    let job = ["sh", "-c", "echo learned > /tmp/out && cat /tmp/out"];
    let ann = |k: &str, v: &Path| vec!["--annotation".to_string(), format!("{k}={}", v.display())];
    let mut flags = c.shim_flags();
    flags.extend(ann("org.cordon.learn", &file));
    let id = unique("ctr-learn");
    let r = c.run_rm_with(flags, &id, &job);
    assert!(
        r.success() && r.stdout.trim() == "learned",
        "learning run\n{r}\n{}",
        c.diagnostics()
    );
    let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}\n{}", file.display(), c.diagnostics()));
    assert!(text.contains("extends = \"default\""), "{text}");
    assert!(text.contains("pattern = \"/tmp/**\""), "{text}");

    // Verified: the job again under the learned policy, traced.
    let mut flags = c.shim_flags();
    flags.extend(ann("org.cordon.policy", &file));
    flags.extend(["--annotation".to_string(), "org.cordon.trace=true".to_string()]);
    let verify = |id: &str, cmd: &[&str]| {
        let r = c.run_rm_with(flags.clone(), id, cmd);
        let trail = c.cordon_in(&c.shim_root(), &["audit", "--json", id]);
        assert!(trail.success(), "cordon audit {id}\n{trail}");
        let denied: Vec<String> = trail
            .stdout
            .lines()
            .filter(|l| l.contains("\"action\":\"deny\""))
            .map(String::from)
            .collect();
        (r, denied)
    };
    let id = unique("ctr-verify");
    let (r, denied) = verify(&id, &job);
    assert!(
        r.success() && r.stdout.trim() == "learned",
        "verifying run\n{r}\n{}",
        c.diagnostics()
    );
    assert!(
        denied.is_empty(),
        "the learned policy refused the job it was learned from: {denied:?}"
    );

    // A job that reads what the learning run never did (the root
    // directory's list): refused, recorded.
    let id = unique("ctr-verify");
    let (r, denied) = verify(&id, &["sh", "-c", "echo learned > /tmp/out && ls /"]);
    assert!(!r.success(), "/ was never read while learning\n{r}");
    assert!(
        denied.iter().any(|l| l.contains("\"detail\":\"/ ")),
        "no denial of / in the trail: {denied:?}\n{r}"
    );
}

/// A detached task through containerd's runc shim with cordon as the runc
/// binary (see [`detached_task_lifecycle`]).
#[test]
fn ctr_detached_task_exec_kill_delete() {
    let _g = serial();
    let c = Containerd::start();
    c.import_busybox();
    let id = unique("ctr-detached");
    detached_task_lifecycle(&c, &id, c.runc_flags(), &c.cordon_root());
}

/// `ctr run -d RUN_FLAGS IMAGE id sleep 1000`, waiting until the task runs.
fn run_sleeping(c: &Containerd, id: &str, run_flags: Vec<String>) {
    let mut args: Vec<String> = vec!["run".into(), "-d".into()];
    args.extend(run_flags);
    args.extend([IMAGE.to_string(), id.to_string(), "sleep".into(), "1000".into()]);
    let r = c.ctr(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(r.success(), "ctr run -d failed\n{r}\n{}", c.diagnostics());
    wait_task_status(c, id, "RUNNING");
}

/// containerd's overlayfs snapshotter mounts the rootfs; cordon recognises
/// it: `checkpoint` and `diff` work with containerd's container id and the
/// runc shim's root, `restore` and `fork` are refused in one line, and the
/// task's deletion removes cordon's checkpoints of it (docs/CHECKPOINT.md).
#[test]
fn ctr_overlay_rootfs_gets_checkpoints_and_diffs() {
    let _g = serial();
    let c = Containerd::start();
    c.import_busybox();
    let id = unique("ctr-snap");
    let root = c.cordon_root();
    run_sleeping(&c, &id, c.runc_flags());
    let fifo = c.fifo_dir.to_string_lossy().into_owned();
    let sh = |exec_id: &str, script: &str| {
        let ex = c.ctr(&[
            "task",
            "exec",
            "--fifo-dir",
            &fifo,
            "--exec-id",
            exec_id,
            &id,
            "sh",
            "-c",
            script,
        ]);
        assert!(
            ex.success(),
            "ctr task exec {script:?} failed\n{ex}\n{}",
            c.diagnostics()
        );
    };
    let cordon = |args: &[&str]| {
        let r = c.cordon_in(&root, args);
        assert!(r.success(), "cordon {args:?} failed\n{r}\n{}", c.diagnostics());
        r.stdout
    };

    sh("w1", "echo new > /new; rm /etc/group; mkdir /made");
    let diff = cordon(&["diff", &id]);
    for line in ["D /etc/group\n", "A /made\n", "A /new\n"] {
        assert!(diff.contains(line), "no {line:?} in the diff since the start:\n{diff}");
    }
    assert_eq!(cordon(&["checkpoint", &id]).trim(), "cp1");
    let layer = PathBuf::from("/var/lib/cordon/containers").join(&id);
    assert!(
        layer.join("checkpoints/cp1/layer/new").is_file(),
        "no checkpoint in {}",
        layer.display()
    );
    sh("w2", "echo more >> /new; echo other > /made/other");
    assert_eq!(cordon(&["diff", &id, "cp1"]), "C /made\nA /made/other\nC /new\n");
    let list: Value = serde_json::from_str(&cordon(&["checkpoints", &id, "--format", "json"])).unwrap();
    assert_eq!(list[0]["name"], "cp1", "{list}");

    for refused in [vec!["restore", &id, "cp1"], vec!["fork", &id, "cp1", "ctr-snap-fork"]] {
        let r = c.cordon_in(&root, &refused);
        assert!(!r.success(), "{refused:?} succeeded on an engine's overlay");
        assert!(
            r.stderr.trim().lines().count() == 1 && r.stderr.contains("an overlay an engine mounted"),
            "{refused:?}: expected one line naming the engine's overlay\n{r}"
        );
    }

    let k = c.ctr(&["task", "kill", "-s", "SIGKILL", &id]);
    assert!(k.success(), "ctr task kill failed\n{k}\n{}", c.diagnostics());
    wait_task_status(&c, &id, "STOPPED");
    let rm = c.ctr(&["task", "rm", &id]);
    assert!(rm.success(), "ctr task rm failed\n{rm}\n{}", c.diagnostics());
    let crm = c.ctr(&["container", "rm", &id]);
    assert!(crm.success(), "ctr container rm failed\n{crm}\n{}", c.diagnostics());
    c.assert_gone(&id);
    assert!(
        !layer.exists(),
        "{} left behind by the task's deletion",
        layer.display()
    );
}

/// containerd's task Checkpoint through cordon's shim (`ctr task
/// checkpoint`): containerd pauses the task, the shim takes a cordon
/// checkpoint of its writable layer and writes its name in the
/// checkpoint's content, containerd resumes the task (docs/CHECKPOINT.md,
/// "Through containerd").
#[test]
fn ctr_task_checkpoint_takes_a_cordon_checkpoint() {
    let _g = serial();
    let c = Containerd::start();
    require_shim(&c);
    c.import_busybox();
    let id = unique("ctr-cp");
    run_sleeping(&c, &id, c.shim_flags());
    let fifo = c.fifo_dir.to_string_lossy().into_owned();
    let ex = c.ctr(&[
        "task",
        "exec",
        "--fifo-dir",
        &fifo,
        "--exec-id",
        "w1",
        &id,
        "sh",
        "-c",
        "echo new > /new",
    ]);
    assert!(ex.success(), "ctr task exec failed\n{ex}\n{}", c.diagnostics());

    let cp = c.ctr(&["task", "checkpoint", &id]);
    assert!(cp.success(), "ctr task checkpoint failed\n{cp}\n{}", c.diagnostics());
    let list = c.cordon_in(&c.shim_root(), &["checkpoints", &id, "--format", "json"]);
    let list: Value = serde_json::from_str(&list.stdout).unwrap_or_else(|e| panic!("{e}\n{list}"));
    assert_eq!(list[0]["name"], "cp1", "{list}");
    assert_eq!(
        task_line(&c, &id).map(|(_, s)| s).as_deref(),
        Some("RUNNING"),
        "resumed after the checkpoint"
    );
    // The checkpoint's content (a tar of the directory the shim wrote in)
    // names the cordon checkpoint.
    let images = c.ctr(&["images", "ls"]);
    let index = images
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("containerd.io/checkpoint/{id}:")))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or_else(|| panic!("no checkpoint image\n{images}"))
        .to_string();
    let index: Value = serde_json::from_str(&c.ctr(&["content", "get", &index]).stdout).unwrap();
    let digest = index["manifests"]
        .as_array()
        .and_then(|ms| {
            ms.iter().find(|m| {
                m["mediaType"]
                    .as_str()
                    .is_some_and(|t| t.contains("checkpoint.criu.tar"))
            })
        })
        .and_then(|m| m["digest"].as_str())
        .unwrap_or_else(|| panic!("no checkpoint content in {index}"))
        .to_string();
    let tar = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} content get {digest} | tar -xO --wildcards '*{CHECKPOINT_RECORD}'",
            c.ctr_cmdline(&[])
        ))
        .output()
        .unwrap();
    let record: Value = serde_json::from_slice(&tar.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&tar.stdout),
            String::from_utf8_lossy(&tar.stderr)
        )
    });
    assert_eq!(record["container"], id.as_str(), "{record}");
    assert_eq!(record["checkpoint"], "cp1", "{record}");

    let _ = c.ctr(&["task", "kill", "-s", "SIGKILL", &id]);
    wait_task_status(&c, &id, "STOPPED");
    let rm = c.ctr(&["task", "rm", &id]);
    assert!(rm.success(), "ctr task rm failed\n{rm}\n{}", c.diagnostics());
    let crm = c.ctr(&["container", "rm", &id]);
    assert!(crm.success(), "ctr container rm failed\n{crm}\n{}", c.diagnostics());
    c.assert_gone(&id);
}

// ---------------------------------------------------------------------------
// cordon's own shim: ctr run --runtime io.containerd.cordon.v2
// ---------------------------------------------------------------------------

/// Fails (never skips) when the shim binary is not beside cordon.
fn require_shim(c: &Containerd) {
    let shim = c.cordon.with_file_name("containerd-shim-cordon-v2");
    assert!(shim.is_file(), "{} is missing: run `make build`", shim.display());
}

/// The host pid of task `id` in `ctr task ls`, and its status column.
fn task_line(c: &Containerd, id: &str) -> Option<(i64, String)> {
    let ls = c.ctr(&["task", "ls"]);
    let line = ls.stdout.lines().find(|l| l.split_whitespace().next() == Some(id))?;
    let mut w = line.split_whitespace().skip(1);
    Some((w.next()?.parse().ok()?, w.next()?.to_string()))
}

/// Waits until task `id` shows `status` in `ctr task ls`.
fn wait_task_status(c: &Containerd, id: &str, status: &str) {
    let res = poll(|| match task_line(c, id) {
        Some((_, s)) if s == status => Ok(()),
        other => Err(format!("task {id}: {other:?}")),
    });
    if let Err(e) = res {
        panic!("task {id} never {status}: {e}\n{}", c.diagnostics());
    }
}

/// Output, error stream, stdin and exit code through cordon's shim, and
/// the supervisor in the container (`uname -r` is emulated).
#[test]
fn shim_ctr_run_streams_and_exit_codes() {
    let _g = serial();
    let c = Containerd::start();
    require_shim(&c);
    c.import_busybox();

    let id = unique("shim-uname");
    let r = c.shim_run_rm(&id, &["uname", "-r"]);
    assert!(
        r.success() && r.stdout.trim() == CORDON_RELEASE,
        "expected ctr to exit 0 printing {CORDON_RELEASE}\n{r}\n{}",
        c.diagnostics()
    );
    c.assert_gone(&id);
    // The shim's sealed view of its binary lives under the state root it
    // was given, not under the default one.
    assert!(
        c.shim_base.join("@lower").is_dir(),
        "no @lower under $CORDON_SHIM_ROOT {}",
        c.shim_base.display()
    );

    let id = unique("shim-exit");
    let r = c.shim_run_rm(&id, &["sh", "-c", "echo to-out; echo to-err >&2; exit 3"]);
    assert_eq!(r.code(), Some(3), "expected ctr to exit 3\n{r}\n{}", c.diagnostics());
    assert_eq!(r.stdout.trim(), "to-out", "stdout\n{r}");
    assert_eq!(r.stderr.trim(), "to-err", "stderr\n{r}");
    c.assert_gone(&id);

    // stdin reaches the container and its EOF too (cat exits).
    let id = unique("shim-stdin");
    let mut args: Vec<String> = vec!["run".into(), "--rm".into()];
    args.extend(c.shim_flags());
    args.extend([
        IMAGE.to_string(),
        id.clone(),
        "sh".into(),
        "-c".into(),
        "cat | tr a-z A-Z".into(),
    ]);
    let line = c.ctr_cmdline(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let r = run_timeout(
        Command::new("sh").args(["-c", &format!("printf 'hello\\nshim\\n' | {line}")]),
        CMD_TIMEOUT,
    );
    assert!(
        r.success() && r.stdout == "HELLO\nSHIM\n",
        "expected the container to echo its stdin upper-cased\n{r}\n{}",
        c.diagnostics()
    );
    c.assert_gone(&id);
}

/// `ctr run --null-io`: the shim gives the runtime /dev/null (opened
/// read-only by go-runc's NullIO) as stdio; inside, fds 0-2 are the
/// container's /dev/null opened read-write, as under runc, so a program
/// writing to stdout exits 0 (it got EBADF when libcontainer reopened
/// /dev/null read-only). Through the runc shim with cordon as its binary
/// and through cordon's own shim.
#[test]
fn ctr_run_null_io_stdout_is_writable() {
    let _g = serial();
    let c = Containerd::start();
    c.import_busybox();
    let script = ["sh", "-c", "head -c 70000 /dev/zero && echo err >&2 && echo done"];
    let id = unique("nullio");
    let mut flags = c.runc_flags();
    flags.push("--null-io".into());
    let r = c.run_rm_with(flags, &id, &script);
    assert_eq!(r.code(), Some(0), "runc shim, --null-io\n{r}\n{}", c.diagnostics());
    c.assert_gone(&id);
    require_shim(&c);
    {
        let id = unique("shim-nullio");
        let mut flags = c.shim_flags();
        flags.push("--null-io".into());
        let r = c.run_rm_with(flags, &id, &script);
        assert_eq!(r.code(), Some(0), "cordon's shim, --null-io\n{r}\n{}", c.diagnostics());
        c.assert_gone(&id);
    }
}

/// `ctr run -t` through cordon's shim: the container's stdio is a pty.
#[test]
fn shim_ctr_run_tty() {
    let _g = serial();
    let c = Containerd::start();
    require_shim(&c);
    c.import_busybox();
    let id = unique("shim-tty");
    let mut args: Vec<String> = vec!["run".into(), "--rm".into(), "-t".into()];
    args.extend(c.shim_flags());
    args.extend([
        IMAGE.to_string(),
        id.clone(),
        "sh".into(),
        "-c".into(),
        "tty && uname -r".into(),
    ]);
    let r = in_pty(&c.ctr_cmdline(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    assert!(
        r.success() && r.stdout.contains("/dev/pts/") && r.stdout.contains(CORDON_RELEASE),
        "expected a pty (/dev/pts/N) and {CORDON_RELEASE}\n{r}\n{}",
        c.diagnostics()
    );
    c.assert_gone(&id);
}

/// A detached task (`ctr run -d ... sleep`) through `run_flags`' shim, with
/// cordon's containers in `root`: cordon's state agrees with containerd's,
/// `ctr task exec` (output and exit code), ps, pause/resume, metrics, the
/// exec in cordon's audit trail, kill, delete (137), nothing left behind.
fn detached_task_lifecycle(c: &Containerd, id: &str, run_flags: Vec<String>, root: &Path) {
    run_sleeping(c, id, run_flags);

    // containerd's task is a cordon container in the shim's root, same pid.
    let st = c.cordon_in(root, &["state", id]);
    assert!(st.success(), "cordon state {id} failed\n{st}\n{}", c.diagnostics());
    let state: Value = serde_json::from_str(&st.stdout).expect("cordon state prints JSON");
    assert_eq!(state["status"], "running", "cordon state: {state}");
    assert_eq!(
        task_line(c, id).map(|t| t.0),
        state["pid"].as_i64(),
        "pids differ: {state}"
    );

    let fifo = c.fifo_dir.to_string_lossy().into_owned();
    let ex = c.ctr(&[
        "task",
        "exec",
        "--fifo-dir",
        &fifo,
        "--exec-id",
        "e1",
        id,
        "uname",
        "-r",
    ]);
    assert!(
        ex.success() && ex.stdout.trim() == CORDON_RELEASE,
        "expected ctr task exec to exit 0 printing {CORDON_RELEASE}\n{ex}\n{}",
        c.diagnostics()
    );
    let ex = c.ctr(&[
        "task",
        "exec",
        "--fifo-dir",
        &fifo,
        "--exec-id",
        "e2",
        id,
        "sh",
        "-c",
        "exit 5",
    ]);
    assert_eq!(
        ex.code(),
        Some(5),
        "expected ctr task exec to exit 5\n{ex}\n{}",
        c.diagnostics()
    );

    // A failed exec leaves nothing that keeps the task from stopping.
    let bad = c.ctr(&[
        "task",
        "exec",
        "--fifo-dir",
        &fifo,
        "--exec-id",
        "e3",
        id,
        "/nonexistent",
    ]);
    assert!(!bad.success(), "an exec of a missing program must fail\n{bad}");

    let ps = c.ctr(&["task", "ps", id]);
    let pid = state["pid"].as_i64().unwrap_or(-1).to_string();
    assert!(
        ps.success()
            && ps
                .stdout
                .lines()
                .any(|l| l.split_whitespace().next() == Some(pid.as_str())),
        "expected ctr task ps to list the init {pid}\n{ps}\n{}",
        c.diagnostics()
    );

    let p = c.ctr(&["task", "pause", id]);
    assert!(p.success(), "ctr task pause failed\n{p}\n{}", c.diagnostics());
    wait_task_status(c, id, "PAUSED");
    let p = c.ctr(&["task", "resume", id]);
    assert!(p.success(), "ctr task resume failed\n{p}\n{}", c.diagnostics());
    wait_task_status(c, id, "RUNNING");

    let m = c.ctr(&["task", "metrics", "--format", "json", id]);
    assert!(m.success(), "ctr task metrics failed\n{m}\n{}", c.diagnostics());
    let metrics: Value = serde_json::from_str(&m.stdout).unwrap_or(Value::Null);
    assert!(
        metrics["pids"]["current"].as_u64().unwrap_or(0) >= 1,
        "expected metrics to count the container's pids\n{m}"
    );

    // The exec went through the supervisor: its uname is in the audit trail.
    let audit = c.cordon_in(root, &["audit", "--json", id]);
    assert!(
        audit.success() && audit.stdout.contains("uname"),
        "expected cordon's audit trail to record uname\n{audit}\n{}",
        c.diagnostics()
    );

    let k = c.ctr(&["task", "kill", "-s", "SIGKILL", id]);
    assert!(k.success(), "ctr task kill failed\n{k}\n{}", c.diagnostics());
    wait_task_status(c, id, "STOPPED");
    let rm = c.ctr(&["task", "rm", id]);
    assert!(rm.success(), "ctr task rm failed\n{rm}\n{}", c.diagnostics());
    assert!(
        rm.stderr.contains("137") || rm.stdout.contains("137"),
        "expected ctr task rm to report exit code 137\n{rm}"
    );
    let crm = c.ctr(&["container", "rm", id]);
    assert!(crm.success(), "ctr container rm failed\n{crm}\n{}", c.diagnostics());
    c.assert_gone(id);
}

/// The same through cordon's own shim.
#[test]
fn shim_detached_task_exec_pause_kill_delete() {
    let _g = serial();
    let c = Containerd::start();
    require_shim(&c);
    c.import_busybox();
    let id = unique("shim-detached");
    detached_task_lifecycle(&c, &id, c.shim_flags(), &c.shim_root());
}

/// kill -9 of cordon's shim: containerd runs the shim's `delete` action,
/// which kills and deletes the container; nothing is left behind.
#[test]
fn shim_killed_leaves_nothing_behind() {
    let _g = serial();
    let c = Containerd::start();
    require_shim(&c);
    c.import_busybox();
    let id = unique("shim-kill9");
    let mut args: Vec<String> = vec!["run".into(), "-d".into()];
    args.extend(c.shim_flags());
    args.extend([IMAGE.to_string(), id.clone(), "sleep".into(), "1000".into()]);
    let r = c.ctr(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(r.success(), "ctr run -d failed\n{r}\n{}", c.diagnostics());
    wait_task_status(&c, &id, "RUNNING");
    let (init, _) = task_line(&c, &id).expect("task listed");

    let shims: Vec<i32> = pids_mentioning(&id)
        .into_iter()
        .filter(|&p| {
            fs::read(format!("/proc/{p}/cmdline"))
                .map(|b| String::from_utf8_lossy(&b).contains("containerd-shim-cordon-v2"))
                .unwrap_or(false)
        })
        .collect();
    assert_eq!(
        shims.len(),
        1,
        "expected one shim for {id}, found {shims:?}\n{}",
        c.diagnostics()
    );
    sigkill(shims[0]);

    // The container dies with it (containerd's cleanup), and so does its init.
    let gone = poll(|| {
        if Path::new(&format!("/proc/{init}")).exists() {
            return Err(format!("init {init} still alive"));
        }
        match task_line(&c, &id) {
            None => Ok(()),
            Some((_, s)) if s == "STOPPED" => Ok(()),
            other => Err(format!("task {other:?}")),
        }
    });
    if let Err(e) = gone {
        panic!("after kill -9 of the shim: {e}\n{}", c.diagnostics());
    }
    let _ = c.ctr(&["task", "rm", "-f", &id]);
    let crm = c.ctr(&["container", "rm", &id]);
    assert!(crm.success(), "ctr container rm failed\n{crm}\n{}", c.diagnostics());
    c.assert_gone(&id);
}

// ---------------------------------------------------------------------------
// shared by the Docker and podman fixtures
// ---------------------------------------------------------------------------

/// The image name `docker import` and `podman import` give the busybox rootfs.
const IMPORTED: &str = "cordon-busybox";

/// Fails (never skips) when `tools` are not all in $PATH.
fn require_tools(engine: &str, package: &str, tools: &[&str]) {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| which(t).is_none()).collect();
    assert!(
        missing.is_empty(),
        "{engine} is not installed ({} not found in PATH): run tools/install-deps.sh (as root) \
         to install the {package} package, then rerun this suite",
        missing.join(", ")
    );
}

/// A tar of bundles/busybox/rootfs in `dir`, for `docker import` / `podman import`.
fn rootfs_tar(dir: &Path) -> PathBuf {
    bundle_tar(dir, &busybox_bundle())
}

/// A tar of `bundle`'s rootfs in `dir` (named after the bundle), for
/// `docker import` / `podman import`.
fn bundle_tar(dir: &Path, bundle: &Path) -> PathBuf {
    let rootfs = bundle.join("rootfs");
    let name = bundle.file_name().unwrap_or_default().to_string_lossy();
    let t = dir.join(format!("rootfs-{name}.tar"));
    tar(&[
        "--numeric-owner",
        "-C",
        &rootfs.to_string_lossy(),
        "-cf",
        &t.to_string_lossy(),
        ".",
    ]);
    t
}

/// The first line of a file (a `--cidfile`), if any.
fn read_id(path: &Path) -> Option<String> {
    let s = fs::read_to_string(path).ok()?;
    let id = s.trim().to_string();
    (!id.is_empty()).then_some(id)
}

/// Unmounts everything under `dir`, deepest first.
fn unmount_under(dir: &Path) {
    for m in mounts_under(dir) {
        if let Ok(c) = std::ffi::CString::new(m.to_string_lossy().as_bytes()) {
            // SAFETY: umount2(2) with a valid NUL-terminated path.
            unsafe {
                libc::umount2(c.as_ptr(), libc::MNT_DETACH);
            }
        }
    }
}

/// Removes `dir` unless something is still mounted under it (removing it
/// recursively could then reach through the mount).
fn remove_unless_mounted(dir: TempDir, who: &str) {
    let left = mounts_under(dir.path());
    if left.is_empty() {
        drop(dir);
    } else {
        eprintln!(
            "engines: {who}: leaving {} in place: still mounted: {left:?}",
            dir.path().display()
        );
        std::mem::forget(dir);
    }
}

/// `run_timeout` of a `script -qec CMD /dev/null`: CMD runs on a new pty,
/// as from a terminal.
fn in_pty(cmdline: &str) -> Ran {
    run_timeout(Command::new("script").args(["-qec", cmdline, "/dev/null"]), CMD_TIMEOUT)
}

// ---------------------------------------------------------------------------
// the Docker fixture
// ---------------------------------------------------------------------------

/// How the test's dockerd learns about cordon.
enum DockerRuntime {
    /// `--add-runtime cordon=<abs path of cordon>` (with a daemon.json of
    /// the fixture's own that names no runtime).
    AddRuntime,
    /// Only from this daemon.json (`--config-file`), as written by
    /// `cordon install docker --write`.
    ConfigFile(PathBuf),
}

/// The major version of the installed dockerd (0 if unknown).
fn dockerd_major() -> u32 {
    let v = run_timeout(Command::new("dockerd").arg("--version"), CMD_TIMEOUT);
    // "Docker version 20.10.24+dfsg1, build 5d6db84"
    v.stdout
        .split_whitespace()
        .nth(2)
        .and_then(|ver| ver.split('.').next()?.parse().ok())
        .unwrap_or(0)
}

/// A private dockerd on a private containerd, stopped and cleaned up on
/// drop. Everything of it is in its temp dir: `--data-root`, `--exec-root`,
/// `--pidfile`, the API socket, daemon.json (`--config-file`, so
/// /etc/docker/daemon.json is never read), and (dockerd < 23) the trust
/// key, which would otherwise be written to /etc/docker/key.json. No
/// iptables, no bridge. Docker gives the runtime `--root
/// <exec-root>/runtime-<...>/moby`.
struct Dockerd {
    /// Its containerd; stopped after dockerd.
    containerd: Option<Containerd>,
    dir: Option<TempDir>,
    child: Option<std::process::Child>,
    sock: PathBuf,
    exec_root: PathBuf,
    log: PathBuf,
    cordon: PathBuf,
    /// Host paths dockerd makes outside `dir` (/run/docker/plugins, the
    /// `docker` cgroup parents) that did not exist before it started.
    created_outside: Vec<PathBuf>,
}

impl Dockerd {
    /// The daemon.json keys every test dockerd needs: on dockerd < 23, a
    /// trust key path in `dir` (the default is /etc/docker/key.json).
    fn base_config(dir: &Path) -> Value {
        if dockerd_major() < 23 {
            json!({"deprecated-key-path": dir.join("key.json")})
        } else {
            json!({})
        }
    }

    /// Starts containerd, then dockerd on it, and waits until the API answers.
    fn start(runtime: DockerRuntime) -> Self {
        require_docker();
        let containerd = Containerd::start();
        let cordon = containerd.cordon.clone();
        let dir = TempDir::new("dockerd");
        let d = dir.path().to_path_buf();
        let created_outside: Vec<PathBuf> = ["/run/docker/plugins", "/run/docker"]
            .into_iter()
            .map(PathBuf::from)
            .chain(cgroup_dirs("docker"))
            .filter(|p| !p.exists())
            .collect();
        let (sock, exec_root, log) = (d.join("docker.sock"), d.join("exec"), d.join("dockerd.log"));
        let mut cmd = Command::new("dockerd");
        cmd.arg("--data-root")
            .arg(d.join("data"))
            .arg("--exec-root")
            .arg(&exec_root)
            .arg("--pidfile")
            .arg(d.join("docker.pid"))
            .arg("-H")
            .arg(format!("unix://{}", sock.display()))
            .args(["--iptables=false", "--ip6tables=false", "--bridge=none"])
            .arg("--containerd")
            .arg(&containerd.sock);
        match runtime {
            DockerRuntime::AddRuntime => {
                let config = d.join("daemon.json");
                fs::write(&config, serde_json::to_vec_pretty(&Self::base_config(&d)).unwrap()).unwrap();
                cmd.arg("--config-file")
                    .arg(config)
                    .arg("--add-runtime")
                    .arg(format!("cordon={}", cordon.display()));
            }
            DockerRuntime::ConfigFile(config) => {
                cmd.arg("--config-file").arg(config);
            }
        }
        let logf = fs::File::create(&log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(logf.try_clone().unwrap())
            .stderr(logf)
            .spawn()
            .expect("spawn dockerd");
        let mut dk = Dockerd {
            containerd: Some(containerd),
            dir: Some(dir),
            child: Some(child),
            sock,
            exec_root,
            log,
            cordon,
            created_outside,
        };
        // From here on a panic drops `dk`, which stops dockerd and containerd.
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(st)) = dk.child.as_mut().unwrap().try_wait() {
                panic!("dockerd exited ({st}) before answering\n{}", dk.diagnostics());
            }
            let v = dk.docker_timeout(&["version"], Duration::from_secs(5));
            if v.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "dockerd did not answer `docker version` within {START_TIMEOUT:?}\n{v}\n{}",
                dk.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        dk
    }

    fn dir(&self) -> &Path {
        self.dir.as_ref().unwrap().path()
    }

    /// `docker -H unix://SOCK <args>` (client config in the temp dir).
    fn docker_timeout(&self, args: &[&str], timeout: Duration) -> Ran {
        let mut cmd = Command::new("docker");
        cmd.env("DOCKER_CONFIG", self.dir().join("client"))
            .env_remove("DOCKER_HOST")
            .env_remove("DOCKER_CONTEXT")
            .arg("-H")
            .arg(format!("unix://{}", self.sock.display()))
            .args(args);
        run_timeout(&mut cmd, timeout)
    }

    fn docker(&self, args: &[&str]) -> Ran {
        self.docker_timeout(args, CMD_TIMEOUT)
    }

    /// The `docker -H unix://SOCK` prefix, for a shell command line.
    fn docker_cmdline(&self) -> String {
        format!("docker -H unix://{}", self.sock.display())
    }

    /// `docker import`s bundles/busybox/rootfs as [`IMPORTED`].
    fn import_busybox(&self) {
        let t = rootfs_tar(self.dir());
        let imp = self.docker(&["import", "-c", r#"CMD ["sh"]"#, &t.to_string_lossy(), IMPORTED]);
        assert!(imp.success(), "docker import failed\n{imp}\n{}", self.diagnostics());
    }

    /// `docker run --rm --runtime cordon --cidfile F IMAGE cmd...`; also
    /// returns the container's id (from the cidfile).
    fn run_rm(&self, cmd: &[&str]) -> (Ran, Option<String>) {
        let cid = self.dir().join(unique("cid"));
        let cid_s = cid.to_string_lossy().into_owned();
        let mut args = vec!["run", "--rm", "--runtime", "cordon", "--cidfile", &cid_s, IMPORTED];
        args.extend_from_slice(cmd);
        let r = self.docker(&args);
        (r, read_id(&cid))
    }

    /// The state roots docker gave cordon (`<exec-root>/runtime-*/moby`).
    fn cordon_roots(&self) -> Vec<PathBuf> {
        let Ok(rd) = fs::read_dir(&self.exec_root) else {
            return vec![];
        };
        rd.flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("runtime-"))
            .map(|e| e.path().join("moby"))
            .filter(|p| p.is_dir())
            .collect()
    }

    /// `cordon --root ROOT <args>`.
    fn cordon(&self, root: &Path, args: &[&str]) -> Ran {
        run_timeout(
            Command::new(&self.cordon).arg("--root").arg(root).args(args),
            CMD_TIMEOUT,
        )
    }

    /// (root, id) of every cordon container in docker's roots.
    fn cordon_containers(&self) -> Vec<(PathBuf, String)> {
        self.cordon_roots()
            .into_iter()
            .flat_map(|root| {
                let ids = self.cordon(&root, &["list", "-q"]).stdout;
                ids.lines().map(|id| (root.clone(), id.to_string())).collect::<Vec<_>>()
            })
            .collect()
    }

    /// dockerd's warnings and errors, the runtime's log.json files in the
    /// shims' bundles, and cordon's containers.
    fn diagnostics(&self) -> String {
        let mut s = String::from("--- dockerd log (warnings and errors, last 30) ---\n");
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let bad: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("level=warning") || l.contains("level=error") || l.contains("level=fatal"))
            .collect();
        for l in &bad[bad.len().saturating_sub(30)..] {
            s.push_str(l);
            s.push('\n');
        }
        if let Some(c) = &self.containerd {
            let task_dir = c.state.join("io.containerd.runtime.v2.task/moby");
            if let Ok(rd) = fs::read_dir(&task_dir) {
                for e in rd.flatten() {
                    let p = e.path().join("log.json");
                    if let Ok(text) = fs::read_to_string(&p) {
                        s.push_str(&format!("--- {} ---\n{text}\n", p.display()));
                    }
                }
            }
        }
        for root in self.cordon_roots() {
            let list = self.cordon(&root, &["list"]);
            s.push_str(&format!(
                "--- cordon containers in {} ---\n{}",
                root.display(),
                list.stdout
            ));
        }
        s
    }

    /// Waits until container `id` left nothing behind: no docker container,
    /// no containerd task, no cordon container, no cgroup, no mount.
    fn assert_gone(&self, id: &str) {
        let res = poll(|| {
            let mut left = vec![];
            if self
                .docker(&["ps", "-aq", "--no-trunc"])
                .stdout
                .lines()
                .any(|l| l == id)
            {
                left.push("a docker container".to_string());
            }
            if let Some(c) = &self.containerd {
                let tasks = c.ctr_global(&["-n", "moby", "task", "ls", "-q"], CMD_TIMEOUT);
                if tasks.stdout.lines().any(|l| l == id) {
                    left.push("a containerd task".into());
                }
            }
            if self.cordon_containers().iter().any(|(_, c)| c == id) {
                left.push("a cordon container".into());
            }
            if cgroup_leaked(id) {
                left.push("a cgroup directory".into());
            }
            let mounts: Vec<_> = mounts_under(self.dir())
                .into_iter()
                .filter(|m| m.to_string_lossy().contains(id))
                .collect();
            if !mounts.is_empty() {
                left.push(format!("mounts {mounts:?}"));
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

impl Drop for Dockerd {
    fn drop(&mut self) {
        if self.dir.is_none() {
            return;
        }
        let quick = Duration::from_secs(20);

        // 1. Through dockerd: every container.
        if self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None))) {
            for id in self.docker_timeout(&["ps", "-aq"], quick).stdout.lines() {
                let _ = self.docker_timeout(&["rm", "-f", id], quick);
            }
        }

        // 2. Stop dockerd: SIGTERM, wait, then SIGKILL.
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

        // 3. Directly: cordon containers left in docker's roots, then
        //    anything still naming our dir (a hung cordon, a supervisor).
        let force_delete_all = |d: &Dockerd| {
            for (root, id) in d.cordon_containers() {
                let _ = d.cordon(&root, &["delete", "--force", &id]);
            }
        };
        force_delete_all(self);
        for pid in pids_mentioning(&self.dir().to_string_lossy()) {
            sigkill(pid);
        }
        force_delete_all(self);

        // 4. Mounts under the temp dir (the data root, container rootfs).
        let dir = self.dir.take().unwrap();
        unmount_under(dir.path());
        // 5. containerd (its own Drop: shims, mounts, its temp dir).
        drop(self.containerd.take());
        // 6. What dockerd made outside the temp dir, if now empty.
        remove_created(&self.created_outside);
        // 7. The temp dir.
        remove_unless_mounted(dir, "dockerd");
    }
}

/// Fails (never skips) when Docker is not installed.
fn require_docker() {
    require_tools("Docker", "docker.io", &["dockerd", "docker"]);
    require_containerd();
}

// ---------------------------------------------------------------------------
// the podman fixture
// ---------------------------------------------------------------------------

/// Where podman's containers.conf of a test comes from.
enum PodmanConf {
    /// An empty one of the fixture's own (only built-in defaults apply).
    Empty,
    /// This file (as written by `cordon install podman --write`).
    File(PathBuf),
}

/// podman with private storage (`--root`, `--runroot`), `--tmpdir`,
/// `--network-config-dir`, `--cgroup-manager cgroupfs`, file events, and
/// `CONTAINERS_CONF` set to a file of the test's (so no system
/// containers.conf is read). podman runs the runtime without `--root`, so
/// cordon keeps its state in its default root, /run/cordon: the fixture
/// removes any container of its own left there (and /run/cordon itself if
/// it created it and it is empty). podman also makes a few paths outside
/// its roots whatever the flags (/run/containers/networks, the blob-info
/// cache in /var/lib/containers/cache, the `libpod_parent` cgroups); those
/// it created are removed again.
struct Podman {
    dir: Option<TempDir>,
    conf: PathBuf,
    cordon: PathBuf,
    created_outside: Vec<PathBuf>,
}

/// cordon's default state root, which podman makes it use.
const DEFAULT_ROOT: &str = "/run/cordon";

impl Podman {
    fn new(conf: PodmanConf) -> Self {
        require_tools("podman", "podman", &["podman", "conmon"]);
        let cordon = cordon_abs();
        let dir = TempDir::new("podman");
        let conf = match conf {
            PodmanConf::Empty => {
                let c = dir.path().join("containers.conf");
                fs::write(&c, "").unwrap();
                c
            }
            PodmanConf::File(c) => c,
        };
        let created_outside: Vec<PathBuf> = [
            "/run/cordon/.cordon",
            DEFAULT_ROOT,
            "/run/containers/networks",
            "/run/containers",
            "/var/lib/containers/cache/blob-info-cache-v1.boltdb",
            "/var/lib/containers/cache",
            "/var/lib/containers",
        ]
        .into_iter()
        .map(PathBuf::from)
        .chain(cgroup_dirs("libpod_parent/conmon"))
        .chain(cgroup_dirs("libpod_parent"))
        .filter(|p| !p.exists())
        .collect();
        Podman {
            dir: Some(dir),
            conf,
            cordon,
            created_outside,
        }
    }

    fn dir(&self) -> &Path {
        self.dir.as_ref().unwrap().path()
    }

    /// `podman <private flags> <args>`.
    fn podman(&self, args: &[&str]) -> Ran {
        let d = self.dir();
        run_timeout(
            Command::new("podman")
                .env("CONTAINERS_CONF", &self.conf)
                .arg("--root")
                .arg(d.join("root"))
                .arg("--runroot")
                .arg(d.join("runroot"))
                .arg("--tmpdir")
                .arg(d.join("tmp"))
                .arg("--network-config-dir")
                .arg(d.join("networks"))
                .args(["--cgroup-manager", "cgroupfs", "--events-backend", "file"])
                .args(args),
            CMD_TIMEOUT,
        )
    }

    /// `podman --runtime <abs path of cordon> <args>`.
    fn podman_cordon(&self, args: &[&str]) -> Ran {
        let rt = self.cordon.to_string_lossy().into_owned();
        let mut all = vec!["--runtime", rt.as_str()];
        all.extend_from_slice(args);
        self.podman(&all)
    }

    /// `podman import`s bundles/busybox/rootfs as [`IMPORTED`].
    fn import_busybox(&self) {
        let t = rootfs_tar(self.dir());
        let imp = self.podman(&["import", &t.to_string_lossy(), IMPORTED]);
        assert!(imp.success(), "podman import failed\n{imp}");
    }

    /// `podman [--runtime RT] run --rm --network none --ulimit ... --cidfile F
    /// IMAGE cmd...`, with `runtime` a path or a name from containers.conf;
    /// also returns the container's id. The ulimits are the host's hard
    /// limits here (podman's default nofile of 1048576 is above them, and
    /// raising a hard limit needs CAP_SYS_RESOURCE).
    fn run_rm(&self, runtime: &str, cmd: &[&str]) -> (Ran, Option<String>) {
        let cid = self.dir().join(unique("cid"));
        let cid_s = cid.to_string_lossy().into_owned();
        let mut args = vec!["--runtime", runtime, "run", "--rm", "--cidfile", &cid_s];
        args.extend_from_slice(&PODMAN_RUN_FLAGS);
        args.push(IMPORTED);
        args.extend_from_slice(cmd);
        let r = self.podman(&args);
        (r, read_id(&cid))
    }

    /// `cordon <args>` with its default root (podman's containers).
    fn cordon(&self, args: &[&str]) -> Ran {
        run_timeout(Command::new(&self.cordon).args(args), CMD_TIMEOUT)
    }

    /// cordon containers in /run/cordon whose bundle is in our temp dir.
    fn own_cordon_containers(&self) -> Vec<String> {
        if !Path::new(DEFAULT_ROOT).exists() {
            return vec![];
        }
        let list = self.cordon(&["list", "--format", "json"]);
        let all: Vec<Value> = serde_json::from_str(&list.stdout).unwrap_or_default();
        all.iter()
            .filter(|c| {
                c["bundle"]
                    .as_str()
                    .is_some_and(|b| Path::new(b).starts_with(self.dir()))
            })
            .filter_map(|c| c["id"].as_str().map(str::to_string))
            .collect()
    }

    /// Waits until container `id` left nothing behind: no podman container,
    /// nothing in /run/cordon, no cgroup, no mount.
    fn assert_gone(&self, id: &str) {
        let res = poll(|| {
            let mut left = vec![];
            if self
                .podman(&["ps", "-aq", "--no-trunc"])
                .stdout
                .lines()
                .any(|l| l == id)
            {
                left.push("a podman container".to_string());
            }
            if self.cordon(&["list", "-q"]).stdout.lines().any(|l| l == id) {
                left.push(format!("a cordon container in {DEFAULT_ROOT}"));
            }
            for p in [
                Path::new(DEFAULT_ROOT).join(id),
                Path::new(DEFAULT_ROOT).join(".cordon").join(id),
            ] {
                if p.exists() {
                    left.push(format!("{}", p.display()));
                }
            }
            if cgroup_leaked(id) || cgroup_leaked(&format!("libpod-{id}")) {
                left.push("a cgroup directory".into());
            }
            let mounts: Vec<_> = mounts_under(self.dir())
                .into_iter()
                .filter(|m| m.to_string_lossy().contains(id))
                .collect();
            if !mounts.is_empty() {
                left.push(format!("mounts {mounts:?}"));
            }
            if left.is_empty() {
                Ok(())
            } else {
                Err(left.join(", "))
            }
        });
        if let Err(left) = res {
            let list = self.cordon(&["list"]);
            panic!("{id} left behind: {left}\n--- cordon list ---\n{}", list.stdout);
        }
    }
}

/// `podman run` flags every test uses (see [`Podman::run_rm`]).
const PODMAN_RUN_FLAGS: [&str; 6] = [
    "--network",
    "none",
    "--ulimit",
    "nofile=20000:20000",
    "--ulimit",
    "nproc=32768:32768",
];

impl Drop for Podman {
    fn drop(&mut self) {
        if self.dir.is_none() {
            return;
        }
        let _ = self.podman(&["rm", "--all", "--force"]);
        for id in self.own_cordon_containers() {
            let _ = self.cordon(&["delete", "--force", &id]);
        }
        // conmon and anything else still naming our dir.
        for pid in pids_mentioning(&self.dir().to_string_lossy()) {
            sigkill(pid);
        }
        for id in self.own_cordon_containers() {
            let _ = self.cordon(&["delete", "--force", &id]);
        }
        let dir = self.dir.take().unwrap();
        unmount_under(dir.path());
        remove_created(&self.created_outside);
        remove_unless_mounted(dir, "podman");
    }
}

// ---------------------------------------------------------------------------
// Docker tests
// ---------------------------------------------------------------------------

/// `docker run --runtime cordon`: the supervisor is there.
#[test]
fn docker_run_uname_is_emulated_by_cordon() {
    let _g = serial();
    let d = Dockerd::start(DockerRuntime::AddRuntime);
    d.import_busybox();
    let (r, id) = d.run_rm(&["uname", "-r"]);
    assert!(
        r.success() && r.stdout.trim() == CORDON_RELEASE,
        "expected docker run to exit 0 printing {CORDON_RELEASE}\n{r}\n{}",
        d.diagnostics()
    );
    d.assert_gone(&id.expect("docker wrote no --cidfile"));
}

/// The init's exit code reaches `docker run`.
#[test]
fn docker_run_exit_code_propagates() {
    let _g = serial();
    let d = Dockerd::start(DockerRuntime::AddRuntime);
    d.import_busybox();
    let (r, id) = d.run_rm(&["sh", "-c", "exit 3"]);
    assert_eq!(
        r.code(),
        Some(3),
        "expected docker run to exit 3\n{r}\n{}",
        d.diagnostics()
    );
    d.assert_gone(&id.expect("docker wrote no --cidfile"));
}

/// A detached container: exec (plain, with an exit code, with a tty), then
/// `docker stop` of an init that ignores SIGTERM (SIGKILL after the grace
/// period: 137) and of one that handles it (its own exit code, at once),
/// then `docker rm -f`.
#[test]
fn docker_detached_exec_stop_rm() {
    let _g = serial();
    let d = Dockerd::start(DockerRuntime::AddRuntime);
    d.import_busybox();
    let name = unique("docker-detached");
    let r = d.docker(&[
        "run",
        "-d",
        "--runtime",
        "cordon",
        "--name",
        &name,
        IMPORTED,
        "sleep",
        "100",
    ]);
    assert!(r.success(), "docker run -d failed\n{r}\n{}", d.diagnostics());
    let id = r.stdout.trim().to_string();

    // docker's container is cordon's running container, same pid.
    let ins = d.docker(&["inspect", "-f", "{{.State.Pid}}", &name]);
    let docker_pid: Option<i64> = ins.stdout.trim().parse().ok();
    let found = d.cordon_containers().into_iter().find(|(_, c)| *c == id);
    let Some((root, _)) = found else {
        panic!("{id} is not a cordon container in docker's roots\n{}", d.diagnostics());
    };
    let st = d.cordon(&root, &["state", &id]);
    let state: Value = serde_json::from_str(&st.stdout).unwrap_or_default();
    assert_eq!(state["status"], "running", "{st}");
    assert_eq!(
        docker_pid,
        state["pid"].as_i64(),
        "docker inspect pid vs cordon state\n{ins}\n{st}"
    );

    let ex = d.docker(&["exec", &name, "uname", "-r"]);
    assert!(
        ex.success() && ex.stdout.trim() == CORDON_RELEASE,
        "expected docker exec to exit 0 printing {CORDON_RELEASE}\n{ex}\n{}",
        d.diagnostics()
    );
    let ex = d.docker(&["exec", &name, "sh", "-c", "exit 5"]);
    assert_eq!(
        ex.code(),
        Some(5),
        "expected docker exec to exit 5\n{ex}\n{}",
        d.diagnostics()
    );
    let ex = d.docker(&["exec", "-t", &name, "tty"]);
    assert!(
        ex.success() && ex.stdout.trim().starts_with("/dev/pts/"),
        "expected docker exec -t to print /dev/pts/N\n{ex}\n{}",
        d.diagnostics()
    );

    // `sleep` as pid 1 ignores SIGTERM: docker kills it after 2 s.
    let t0 = Instant::now();
    let stop = d.docker(&["stop", "-t", "2", &name]);
    let took = t0.elapsed();
    assert!(stop.success(), "docker stop failed\n{stop}\n{}", d.diagnostics());
    let status = d.docker(&["inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", &name]);
    assert_eq!(
        status.stdout.trim(),
        "exited 137",
        "after docker stop -t 2\n{status}\n{}",
        d.diagnostics()
    );
    assert!(
        took >= Duration::from_millis(1500),
        "docker stop -t 2 took only {took:?}: was SIGTERM fatal?"
    );

    // An init that handles SIGTERM exits with its own code, well before the grace period.
    let name2 = unique("docker-sigterm");
    let r = d.docker(&[
        "run",
        "-d",
        "--runtime",
        "cordon",
        "--name",
        &name2,
        IMPORTED,
        "sh",
        "-c",
        "trap 'exit 7' TERM; sleep 100 & wait",
    ]);
    assert!(r.success(), "docker run -d failed\n{r}\n{}", d.diagnostics());
    let id2 = r.stdout.trim().to_string();
    // The trap is set once the shell has started sleep.
    let ready = poll(|| {
        let top = d.docker(&["top", &name2]);
        if top.stdout.contains("sleep 100") {
            Ok(())
        } else {
            Err(format!("{top}"))
        }
    });
    if let Err(e) = ready {
        panic!("sleep never started in {name2}: {e}\n{}", d.diagnostics());
    }
    let t0 = Instant::now();
    let stop = d.docker(&["stop", "-t", "20", &name2]);
    let took = t0.elapsed();
    assert!(stop.success(), "docker stop failed\n{stop}\n{}", d.diagnostics());
    let status = d.docker(&["inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", &name2]);
    assert_eq!(
        status.stdout.trim(),
        "exited 7",
        "after docker stop\n{status}\n{}",
        d.diagnostics()
    );
    assert!(
        took < Duration::from_secs(10),
        "docker stop took {took:?}: SIGTERM not delivered?"
    );

    for (n, i) in [(&name, &id), (&name2, &id2)] {
        let rm = d.docker(&["rm", "-f", n]);
        assert!(rm.success(), "docker rm -f failed\n{rm}\n{}", d.diagnostics());
        d.assert_gone(i);
    }
}

/// `docker run -t` gives the container a pty, with or without a terminal
/// on docker's side; `-it` from a terminal (under script(1)) too, and the
/// exit code still comes through.
#[test]
fn docker_run_tty() {
    let _g = serial();
    let d = Dockerd::start(DockerRuntime::AddRuntime);
    d.import_busybox();
    let r = d.docker(&["run", "-t", "--rm", "--runtime", "cordon", IMPORTED, "tty"]);
    assert!(
        r.success() && r.stdout.trim().starts_with("/dev/pts/"),
        "expected docker run -t to print /dev/pts/N\n{r}\n{}",
        d.diagnostics()
    );
    let r = in_pty(&format!(
        "{} run -it --rm --runtime cordon {IMPORTED} sh -c 'tty; uname -r; exit 4'",
        d.docker_cmdline()
    ));
    assert_eq!(
        r.code(),
        Some(4),
        "expected docker run -it to exit 4\n{r}\n{}",
        d.diagnostics()
    );
    assert!(
        r.stdout.contains("/dev/pts/") && r.stdout.contains(CORDON_RELEASE),
        "expected /dev/pts/N and {CORDON_RELEASE} through the pty\n{r}"
    );
    let ps = d.docker(&["ps", "-aq"]);
    assert!(ps.stdout.trim().is_empty(), "containers left after --rm\n{ps}");
}

// ---------------------------------------------------------------------------
// podman tests
// ---------------------------------------------------------------------------

/// `podman --runtime <cordon> run`: the supervisor is there; cordon's state
/// (in /run/cordon) is gone afterwards.
#[test]
fn podman_run_uname_is_emulated_by_cordon() {
    let _g = serial();
    let p = Podman::new(PodmanConf::Empty);
    p.import_busybox();
    let rt = p.cordon.to_string_lossy().into_owned();
    let (r, id) = p.run_rm(&rt, &["uname", "-r"]);
    assert!(
        r.success() && r.stdout.trim() == CORDON_RELEASE,
        "expected podman run to exit 0 printing {CORDON_RELEASE}\n{r}"
    );
    p.assert_gone(&id.expect("podman wrote no --cidfile"));
}

/// `podman --runtime-flag policy=permissive`: podman passes it as cordon's
/// global `--policy`, an admin's choice no annotation could make, so
/// nothing is emulated and the host's release shows.
#[test]
fn podman_runtime_flag_chooses_the_policy() {
    let _g = serial();
    let p = Podman::new(PodmanConf::Empty);
    p.import_busybox();
    let rt = p.cordon.to_string_lossy().into_owned();
    let cid = p.dir().join(unique("cid"));
    let cid_s = cid.to_string_lossy().into_owned();
    let mut args = vec![
        "--runtime",
        rt.as_str(),
        "--runtime-flag",
        "policy=permissive",
        "run",
        "--rm",
        "--cidfile",
        &cid_s,
    ];
    args.extend_from_slice(&PODMAN_RUN_FLAGS);
    args.extend_from_slice(&[IMPORTED, "uname", "-r"]);
    let r = p.podman(&args);
    let host = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert!(
        r.success() && r.stdout.trim() == host.trim(),
        "expected the host's release {host:?} under --policy permissive\n{r}"
    );
    p.assert_gone(&read_id(&cid).expect("podman wrote no --cidfile"));
}

/// A Docker runtime name with its own policy: daemon.json's `runtimeArgs`
/// are cordon's global flags (`--policy permissive`, which no annotation
/// may choose), on every Docker version, with or without `--annotation`.
#[test]
fn docker_runtime_args_choose_the_policy() {
    let _g = serial();
    require_docker();
    let t = TempDir::new("docker-args");
    let config = t.path().join("daemon.json");
    let mut daemon = Dockerd::base_config(t.path());
    daemon["runtimes"] = json!({"cordon": {
        "path": cordon_abs(),
        "runtimeArgs": ["--policy", "permissive"],
    }});
    fs::write(&config, serde_json::to_vec_pretty(&daemon).unwrap()).unwrap();
    let d = Dockerd::start(DockerRuntime::ConfigFile(config));
    d.import_busybox();
    let (r, id) = d.run_rm(&["uname", "-r"]);
    let host = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert!(
        r.success() && r.stdout.trim() == host.trim(),
        "expected the host's release {host:?} under --policy permissive\n{r}\n{}",
        d.diagnostics()
    );
    d.assert_gone(&id.expect("docker wrote no --cidfile"));
}

/// The init's exit code reaches `podman run`.
#[test]
fn podman_run_exit_code_propagates() {
    let _g = serial();
    let p = Podman::new(PodmanConf::Empty);
    p.import_busybox();
    let rt = p.cordon.to_string_lossy().into_owned();
    let (r, id) = p.run_rm(&rt, &["sh", "-c", "exit 3"]);
    assert_eq!(r.code(), Some(3), "expected podman run to exit 3\n{r}");
    p.assert_gone(&id.expect("podman wrote no --cidfile"));
}

/// A detached podman container: cordon's state in /run/cordon, exec, stop
/// (SIGKILL after the grace period), rm.
#[test]
fn podman_detached_exec_stop_rm() {
    let _g = serial();
    let p = Podman::new(PodmanConf::Empty);
    p.import_busybox();
    let name = unique("podman-detached");
    let mut args = vec!["run", "-d", "--name", &name];
    args.extend_from_slice(&PODMAN_RUN_FLAGS);
    args.extend_from_slice(&[IMPORTED, "sleep", "100"]);
    let r = p.podman_cordon(&args);
    assert!(r.success(), "podman run -d failed\n{r}");
    let id = r.stdout.trim().to_string();

    let st = p.cordon(&["state", &id]);
    let state: Value = serde_json::from_str(&st.stdout).unwrap_or_default();
    assert_eq!(
        state["status"], "running",
        "cordon (default root) state of podman's container\n{st}"
    );

    let ex = p.podman_cordon(&["exec", &name, "uname", "-r"]);
    assert!(
        ex.success() && ex.stdout.trim() == CORDON_RELEASE,
        "expected podman exec to exit 0 printing {CORDON_RELEASE}\n{ex}"
    );
    let ex = p.podman_cordon(&["exec", &name, "sh", "-c", "exit 5"]);
    assert_eq!(ex.code(), Some(5), "expected podman exec to exit 5\n{ex}");

    let stop = p.podman_cordon(&["stop", "-t", "2", &name]);
    assert!(stop.success(), "podman stop failed\n{stop}");
    let status = p.podman_cordon(&["inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", &name]);
    assert_eq!(status.stdout.trim(), "exited 137", "after podman stop -t 2\n{status}");
    let rm = p.podman_cordon(&["rm", "-f", &name]);
    assert!(rm.success(), "podman rm -f failed\n{rm}");
    p.assert_gone(&id);
}

// ---------------------------------------------------------------------------
// cordon install
// ---------------------------------------------------------------------------

/// `cordon <args>` (no --root: install touches no state).
fn cordon_cli(args: &[&str]) -> Ran {
    run_timeout(Command::new(cordon_abs()).args(args), CMD_TIMEOUT)
}

/// `cordon install docker --write --config F` merges into F (keeping its
/// keys), and the file is one a real dockerd takes: `--runtime cordon`
/// then runs under the supervisor.
#[test]
fn cordon_install_docker_daemon_json_works_with_dockerd() {
    let _g = serial();
    require_docker();
    let t = TempDir::new("install-docker");
    let config = t.path().join("daemon.json");
    let mut before = Dockerd::base_config(t.path());
    before["log-level"] = "info".into();
    fs::write(&config, serde_json::to_vec_pretty(&before).unwrap()).unwrap();

    let cfg = config.to_string_lossy().into_owned();
    let printed = cordon_cli(&["install", "docker", "--config", &cfg]);
    assert!(printed.success(), "{printed}");
    let snippet: Value = serde_json::from_str(&printed.stdout).expect("install docker prints JSON");
    let abs = cordon_abs().to_string_lossy().into_owned();
    assert_eq!(snippet, json!({"runtimes": {"cordon": {"path": abs}}}), "{printed}");
    assert_eq!(
        fs::read(&config).unwrap(),
        serde_json::to_vec_pretty(&before).unwrap(),
        "without --write the file must not change"
    );

    let w = cordon_cli(&["install", "docker", "--write", "--config", &cfg]);
    assert!(w.success(), "{w}");
    let after: Value = serde_json::from_slice(&fs::read(&config).unwrap()).unwrap();
    let mut expected = before.clone();
    expected["runtimes"] = json!({"cordon": {"path": abs}});
    assert_eq!(after, expected, "daemon.json after install\n{w}");
    let again = cordon_cli(&["install", "docker", "--write", "--config", &cfg]);
    assert!(
        again.success() && again.stdout.contains("already configured"),
        "a second install should change nothing\n{again}"
    );

    let d = Dockerd::start(DockerRuntime::ConfigFile(config));
    let info = d.docker(&["info", "--format", "{{json .Runtimes}}"]);
    assert!(
        info.stdout.contains("\"cordon\""),
        "dockerd does not list runtime cordon\n{info}"
    );
    d.import_busybox();
    let (r, id) = d.run_rm(&["uname", "-r"]);
    assert!(
        r.success() && r.stdout.trim() == CORDON_RELEASE,
        "expected docker run --runtime cordon to exit 0 printing {CORDON_RELEASE}\n{r}\n{}",
        d.diagnostics()
    );
    d.assert_gone(&id.expect("docker wrote no --cidfile"));
}

/// `cordon install podman --write --config F`: podman with
/// CONTAINERS_CONF=F knows `--runtime cordon` by name.
#[test]
fn cordon_install_podman_containers_conf_works_with_podman() {
    let _g = serial();
    let t = TempDir::new("install-podman");
    let config = t.path().join("containers.conf");
    fs::write(&config, "# the test's own\n[engine]\nevents_logger = \"file\"\n").unwrap();
    let cfg = config.to_string_lossy().into_owned();
    let w = cordon_cli(&["install", "podman", "--write", "--config", &cfg]);
    assert!(w.success(), "{w}");
    let text = fs::read_to_string(&config).unwrap();
    assert!(
        text.starts_with("# the test's own\n[engine]\nevents_logger = \"file\"\n"),
        "install should append to a file it can append to\n{text}"
    );

    let p = Podman::new(PodmanConf::File(config));
    p.import_busybox();
    let (r, id) = p.run_rm("cordon", &["uname", "-r"]);
    assert!(
        r.success() && r.stdout.trim() == CORDON_RELEASE,
        "expected podman --runtime cordon to exit 0 printing {CORDON_RELEASE}\ncontainers.conf:\n{text}\n{r}"
    );
    p.assert_gone(&id.expect("podman wrote no --cidfile"));
}

/// `cordon install containerd --write --config F` writes a config
/// containerd parses, with the runtime on the runc shim and cordon as its
/// BinaryName (`containerd --config F config dump`).
#[test]
fn cordon_install_containerd_config_is_read_by_containerd() {
    require_containerd();
    let t = TempDir::new("install-containerd");
    let config = t.path().join("config.toml");
    let cfg = config.to_string_lossy().into_owned();
    let w = cordon_cli(&["install", "containerd", "--write", "--config", &cfg]);
    assert!(w.success(), "{w}");
    let dump = run_timeout(
        Command::new("containerd")
            .arg("--config")
            .arg(&config)
            .args(["config", "dump"]),
        CMD_TIMEOUT,
    );
    assert!(dump.success(), "containerd config dump failed\n{dump}");
    let abs = cordon_abs().to_string_lossy().into_owned();
    let section: Vec<&str> = dump
        .stdout
        .lines()
        .skip_while(|l| l.trim() != r#"[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.cordon]"#)
        .take_while(|l| !l.contains("containerd.runtimes.runc"))
        .map(str::trim)
        .collect();
    assert!(
        section.contains(&r#"runtime_type = "io.containerd.runc.v2""#)
            && section.contains(&format!(r#"BinaryName = "{abs}""#).as_str()),
        "containerd's view of the runtime:\n{}\n--- config.toml ---\n{}",
        section.join("\n"),
        fs::read_to_string(&config).unwrap_or_default()
    );
}
