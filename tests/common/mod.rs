//! Helpers for the integration suites: the cordon binary, throw-away
//! bundles over the shared busybox rootfs, and a private state root per
//! test so tests run in parallel without seeing each other.
//!
//! Needs root, a real kernel, and `make bundles` (bundles/busybox with the
//! probe in /usr/local/bin).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
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

/// A test's world: a private state root and a bundle whose config.json is
/// the shared bundle's, edited by the test, with an absolute rootfs path.
pub struct Env {
    /// Private `--root`.
    pub root: TempDir,
    /// The test's bundle directory (config.json only; the rootfs is shared).
    pub bundle: TempDir,
    /// The config.json being edited.
    pub config: serde_json::Value,
}

impl Env {
    /// A busybox environment running `args`.
    pub fn busybox(args: &[&str]) -> Self {
        Self::from_bundle(&busybox_bundle(), args)
    }

    /// A python environment running `args`.
    pub fn python(args: &[&str]) -> Self {
        Self::from_bundle(&python_bundle(), args)
    }

    fn from_bundle(src: &Path, args: &[&str]) -> Self {
        let text = std::fs::read_to_string(src.join("config.json")).unwrap();
        let mut config: serde_json::Value = serde_json::from_str(&text).unwrap();
        config["root"]["path"] = src.join("rootfs").to_string_lossy().into_owned().into();
        config["process"]["args"] = args.iter().map(|s| s.to_string()).collect::<Vec<_>>().into();
        Env {
            root: TempDir::new("root"),
            bundle: TempDir::new("bundle"),
            config,
        }
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
        run_captured(
            Command::new(cordon_bin())
                .arg("--root")
                .arg(self.root.path())
                .args(args),
        )
    }

    /// Writes config.json and runs `cordon run -b <bundle> <id>`.
    pub fn run(&self, id: &str) -> Output {
        self.write();
        let b = self.bundle.path().to_string_lossy().into_owned();
        self.cordon(&["run", "-b", &b, id])
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
