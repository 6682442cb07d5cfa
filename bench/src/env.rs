//! The benchmark's world: binaries, private bundles, probes, runtime roots.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::{cleanup, proc};

/// How big a run is.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Sizes {
    /// `make bench-smoke`.
    pub smoke: bool,
    /// Lifecycle runs per runtime.
    pub lifecycle_runs: usize,
    /// Repetitions of each syscall measurement.
    pub syscall_reps: usize,
    /// Divides the syscall loop counts.
    pub syscall_scale: u64,
    /// Repetitions of each workload.
    pub workload_reps: usize,
    /// Idle containers per runtime for density.
    pub density: usize,
    /// Concurrent starts for scale.
    pub scale: usize,
}

impl Sizes {
    /// The full run (`make bench`).
    pub fn full() -> Self {
        Sizes {
            smoke: false,
            lifecycle_runs: 50,
            syscall_reps: 7,
            syscall_scale: 1,
            workload_reps: 21,
            density: 50,
            scale: 100,
        }
    }

    /// The smoke run (`make bench-smoke`): every section, few iterations.
    pub fn smoke() -> Self {
        Sizes {
            smoke: true,
            lifecycle_runs: 10,
            syscall_reps: 2,
            syscall_scale: 10,
            workload_reps: 1,
            density: 5,
            scale: 10,
        }
    }
}

/// A runtime under test, with its own private state root.
#[derive(Debug, Clone)]
pub struct Runtime {
    /// Name in the report: `cordon`, `cordon-permissive`, `runc`, `crun`...
    pub label: String,
    /// Binary.
    pub bin: PathBuf,
    /// Private `--root`.
    pub root: PathBuf,
    /// cordon's policy (its `--policy` flag), for cordon only.
    pub policy: Option<String>,
    /// The bundle's `linux.seccomp` (none unless set).
    pub seccomp: Option<Value>,
    /// cordon's platform annotation (`org.cordon.platform`): `cordon-ptrace*`
    /// labels run on ptrace.
    pub platform: Option<String>,
    /// cordon's enforcement annotation (`org.cordon.enforcement`): labels
    /// ending in `-supervisor` keep every path rule in the supervisor, so
    /// their opens are emulated.
    pub enforcement: Option<String>,
}

impl Runtime {
    /// `bin --root root [--policy P] args...` (cordon's policy is the
    /// runtime's flag: a container's annotation may not choose
    /// `permissive` or a file outside /etc/cordon/policies/).
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--root").arg(&self.root);
        if let Some(p) = &self.policy {
            c.arg("--policy").arg(p);
        }
        c.args(args);
        c
    }

    /// Runs `bin --root root args...` (refused once a signal asked us to stop).
    pub fn exec(&self, args: &[&str], timeout: Duration) -> anyhow::Result<proc::Outcome> {
        if cleanup::STOP.load(Ordering::SeqCst) {
            bail!("stopping");
        }
        proc::run(&mut self.cmd(args), timeout)
    }

    /// Runs the container of `bundle` as `id` to its end: `run -b BUNDLE
    /// ID`, or for sandlock-oci (which has no `run`) create, start, `state`
    /// every millisecond until it says stopped, delete. The outcome's
    /// stdout is the container's; for sandlock its code is the one its
    /// state reports once stopped (`exit_info`) and its RSS is not
    /// measured.
    pub fn run_bundle(&self, bundle: &str, id: &str, timeout: Duration) -> anyhow::Result<proc::Outcome> {
        if !self.label.starts_with("sandlock") {
            return self.exec(&["run", "-b", bundle, id], timeout);
        }
        let start = std::time::Instant::now();
        let (o, e) = proc::scratch_files()?;
        let created = proc::run_to(&mut self.cmd(&["create", "-b", bundle, id]), timeout, &o, &e)?;
        let finish = |code: Option<i32>| -> anyhow::Result<proc::Outcome> {
            let stdout = std::fs::read_to_string(&o).unwrap_or_default();
            let stderr = std::fs::read_to_string(&e).unwrap_or_default();
            let _ = self.exec(&["delete", "--force", id], Duration::from_secs(30));
            let _ = std::fs::remove_file(&o);
            let _ = std::fs::remove_file(&e);
            Ok(proc::Outcome {
                code,
                elapsed: start.elapsed(),
                maxrss_kib: 0,
                stdout,
                stderr,
            })
        };
        if !created.ok() {
            return finish(created.code);
        }
        let started = self.exec(&["start", id], timeout)?;
        if !started.ok() {
            return finish(started.code);
        }
        loop {
            let st = self.exec(&["state", id], Duration::from_secs(10))?;
            let v: Value = serde_json::from_str(&st.stdout).unwrap_or_default();
            if !st.ok() {
                return finish(st.code);
            }
            if v["status"] == "stopped" {
                // sandlock's state carries the exit status (`exit_info`).
                let code = v["exit_info"]["code"].as_i64().map_or(0, |c| c as i32);
                return finish(Some(code));
            }
            if start.elapsed() > timeout {
                return finish(None);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Whether this is cordon (whatever the policy).
    pub fn is_cordon(&self) -> bool {
        self.policy.is_some()
    }

    /// For containers still in the root after they were deleted: what
    /// `state` says about each and which state files remain; then deletes
    /// them again (`delete --force`). Returns one line per container.
    pub fn diagnose_leftovers(&self) -> Vec<String> {
        let mut out = Vec::new();
        for id in cleanup::container_ids(&self.root) {
            let st = self.exec(&["state", &id], Duration::from_secs(30));
            let state = match &st {
                Ok(o) if o.ok() => {
                    let v: Value = serde_json::from_str(&o.stdout).unwrap_or_default();
                    format!("state says status {} pid {}", v["status"], v["pid"])
                }
                Ok(o) => format!("state fails: {}", o.stderr.trim().lines().last().unwrap_or("")),
                Err(e) => format!("state: {e}"),
            };
            let files = |d: &Path| -> String {
                std::fs::read_dir(d)
                    .map(|rd| {
                        let mut v: Vec<String> = rd
                            .flatten()
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect();
                        v.sort();
                        v.join(" ")
                    })
                    .unwrap_or_else(|_| "-".into())
            };
            let (state_files, cordon_files) =
                (files(&self.root.join(&id)), files(&self.root.join(".cordon").join(&id)));
            let again = self
                .exec(&["delete", "--force", &id], Duration::from_secs(60))
                .map(|o| if o.ok() { "ok".to_string() } else { o.failure("") })
                .unwrap_or_else(|e| e.to_string());
            out.push(format!(
                "{id}: {state}; files: [{state_files}] [.cordon: {cordon_files}]; second delete --force: {again}"
            ));
        }
        out
    }

    /// Force-deletes whatever containers are left in the root; returns their ids.
    pub fn clean(&self) -> Vec<String> {
        cleanup::clean_root(&self.bin, &self.root)
    }
}

/// Which rootfs a container uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Image {
    /// The private copy of bundles/busybox's rootfs, with /bench/loop.
    Busybox,
    /// bundles/python's rootfs (shared, read-only), our files on /srv,
    /// a tmpfs on /tmp.
    Python,
}

/// Everything the sections share.
pub struct Env {
    /// Our temporary directory (removed at exit).
    pub tmp: PathBuf,
    /// Sizes of this run.
    pub sizes: Sizes,
    /// cordon binary.
    pub cordon: PathBuf,
    /// runc binary.
    pub runc: PathBuf,
    /// crun binary.
    pub crun: PathBuf,
    /// sandlock-oci 0.9.0 (Landlock + seccomp-notify, no namespaces), when
    /// `--sandlock` names one that runs: a column of the lifecycle and
    /// workload sections.
    pub sandlock: Option<PathBuf>,
    /// For sandlock: the python rootfs as hard links (the same inodes, so
    /// the same page cache) plus the timing probe at
    /// `/usr/local/bin/loop`. sandlock lets a workload execute only files
    /// of its rootfs, not of a bind mount such as `/srv` or of a tmpfs.
    sandlock_python_rootfs: Option<PathBuf>,
    /// Host copies of the static probes.
    pub loop_bin: PathBuf,
    /// The floor supervisor.
    pub floor_bin: PathBuf,
    /// The private busybox rootfs.
    pub busybox_rootfs: PathBuf,
    /// bundles/python/rootfs.
    pub python_rootfs: PathBuf,
    /// Host directory bind-mounted read-only at /srv in python containers.
    pub srv: PathBuf,
    /// A policy file: default + getppid audited (intercepted, continued).
    pub audit_policy: PathBuf,
    /// Policy file: default, plus one directory denied and one read-only.
    pub user_policy: PathBuf,
    /// Policy file: default, egress denied but to `bench.test` by name.
    pub names_policy: PathBuf,
    /// A resolv.conf naming 127.0.0.1 (the nameserver of `loop serve-dns`).
    pub resolv_conf: PathBuf,
    /// Every container's cgroup lives under `/<cgroup_parent>/`.
    pub cgroup_parent: String,
    /// Things worth knowing about how the measurement was set up.
    pub notes: Vec<String>,
    /// Versions of the runtimes, kernel.
    pub versions: Vec<(String, String)>,
    busybox_config: Value,
    python_config: Value,
}

static IDS: AtomicU64 = AtomicU64::new(0);

/// The stdlib-heavy workload (json, re, sqlite3 on a file in /tmp).
const STDLIB_WORK: &str = r#"import json, os, re, sqlite3
data = [{"id": i, "name": "item-%d" % i, "tags": ["a", "b", str(i % 7)], "value": i * 1.5} for i in range(20000)]
text = json.dumps(data)
back = json.loads(text)
assert len(back) == len(data)
hits = len(re.findall(r'"item-(\d*7)"', text))
words = re.sub(r"[aeiou]", "_", " ".join(d["name"] for d in back))
db = sqlite3.connect("/tmp/bench.db")
db.execute("create table t (id integer primary key, name text, value real)")
db.executemany("insert into t values (?, ?, ?)", ((d["id"], d["name"], d["value"]) for d in back))
db.commit()
(total,) = db.execute("select sum(value) from t where name like '%7'").fetchone()
db.close()
os.unlink("/tmp/bench.db")
assert hits > 0 and total > 0 and len(words) > 0
"#;

/// The fetch workload: a package index and a git repository served over
/// HTTP on the container's loopback (by a thread of this script), then
/// `pip install` of the package (pip run from Debian's wheel, no venv)
/// and `git clone` of the repository, as an agent's first minute has
/// them: name lookups aside, every connect, send and receive of a real
/// client and server goes through the policy. Fails (non-zero) if either
/// does.
const FETCH_WORK: &str = r#"import functools, http.server, os, subprocess, sys, threading, zipfile
d = "/tmp/www/simple/hello-cordon/"
os.makedirs(d)
whl = "hello_cordon-1.0-py3-none-any.whl"
with zipfile.ZipFile(d + whl, "w") as z:
    z.writestr("hello_cordon/__init__.py", "VALUE = 'cordon'\n")
    z.writestr("hello_cordon-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: hello-cordon\nVersion: 1.0\n")
    z.writestr("hello_cordon-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: cordon-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("hello_cordon-1.0.dist-info/RECORD", "")
open(d + "index.html", "w").write('<a href="%s">%s</a>\n' % (whl, whl))
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass
web = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), functools.partial(Quiet, directory="/tmp/www"))
threading.Thread(target=web.serve_forever, daemon=True).start()
env = dict(os.environ, HOME="/tmp", GIT_CONFIG_NOSYSTEM="1")
git = lambda *a: subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "user.name=b", "-c", "user.email=b@example.com", *a], env=env, check=True, capture_output=True)
git("init", "-q", "/tmp/src")
for i in range(20):
    open("/tmp/src/f%d.txt" % i, "w").write("line\n" * 100)
git("-C", "/tmp/src", "add", ".")
git("-C", "/tmp/src", "commit", "-q", "-m", "first")
git("clone", "-q", "--bare", "/tmp/src", "/tmp/www/repo.git")
git("-C", "/tmp/www/repo.git", "update-server-info")
pip = [sys.executable, "/usr/share/python-wheels/pip-23.0.1-py3-none-any.whl/pip", "install", "-q",
       "--no-cache-dir", "--disable-pip-version-check", "--target", "/tmp/t",
       "--index-url", "http://127.0.0.1:8000/simple", "hello-cordon"]
subprocess.run(pip, env=env, check=True, capture_output=True)
git("clone", "-q", "http://127.0.0.1:8000/repo.git", "/tmp/clone")
assert open("/tmp/t/hello_cordon/__init__.py").read() == "VALUE = 'cordon'\n"
assert sorted(os.listdir("/tmp/clone"))[1:] == sorted("f%d.txt" % i for i in range(20))
"#;

/// Standard-library packages byte-compiled by the compileall workload.
pub const COMPILEALL_DIRS: &[&str] = &[
    "email",
    "json",
    "http",
    "xml",
    "asyncio",
    "logging",
    "urllib",
    "concurrent",
];

/// Files in the tarball of the tar workload.
pub const TAR_FILES: usize = 3000;

/// Source files of the C project the `c-build` workload builds.
pub const C_FILES: usize = 50;

/// Writes a C project of [`C_FILES`] files and a Makefile into `dir`:
/// `f1.c` .. `f49.c` each defining a function, `main.c` calling them all.
fn make_c_project(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut main = String::from("#include <stdio.h>\n");
    let mut calls = String::new();
    for i in 1..C_FILES {
        std::fs::write(
            dir.join(format!("f{i}.c")),
            format!("#include <string.h>\nint f{i}(void) {{ return (int)strlen(\"{i}\") + {i}; }}\n"),
        )?;
        main.push_str(&format!("int f{i}(void);\n"));
        calls.push_str(&format!("    s += f{i}();\n"));
    }
    main.push_str(&format!(
        "int main(void) {{\n    int s = 0;\n{calls}    printf(\"%d\\n\", s);\n    return 0;\n}}\n"
    ));
    std::fs::write(dir.join("main.c"), main)?;
    std::fs::write(
        dir.join("Makefile"),
        "OBJS := $(patsubst %.c,%.o,$(wildcard *.c))\nprog: $(OBJS)\n\tgcc -o $@ $^\n%.o: %.c\n\tgcc -O1 -c -o $@ $<\n",
    )?;
    Ok(())
}

impl Env {
    /// Checks the prerequisites and builds the private bundles and probes.
    pub fn setup(
        repo: &Path,
        cordon: Option<PathBuf>,
        sandlock: Option<PathBuf>,
        sizes: Sizes,
        mut notes: Vec<String>,
    ) -> anyhow::Result<Env> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            bail!("cordon-bench must run as root (containers, cgroups, seccomp listeners)");
        }
        let busybox = repo.join("bundles/busybox");
        let python = repo.join("bundles/python");
        for (b, probe) in [(&busybox, "rootfs/bin/busybox"), (&python, "rootfs/usr/bin/python3")] {
            if !b.join(probe).exists() || !b.join("config.json").exists() {
                bail!(
                    "{} is missing or incomplete (no {probe} or config.json): build the bundles first with `make bundles`",
                    b.display()
                );
            }
        }
        let cordon = cordon.unwrap_or_else(|| repo.join("target/release/cordon"));
        if !cordon.exists() {
            bail!(
                "cordon binary {} not found: `cargo build --release -p cordon` (make bench does it)",
                cordon.display()
            );
        }
        let cordon = cordon.canonicalize()?;
        let runc = which("runc").context("runc not found in PATH: apt-get install -y runc")?;
        let crun = which("crun").context("crun not found in PATH: apt-get install -y crun")?;
        which("gcc").context("gcc not found: apt-get install -y gcc libc6-dev")?;
        which("tar").context("tar not found")?;

        let tmp = std::env::temp_dir().join(format!("cordon-bench-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).with_context(|| format!("remove stale {}", tmp.display()))?;
        }
        std::fs::create_dir_all(&tmp).with_context(|| format!("create {}", tmp.display()))?;
        cleanup::set_tmp(&tmp);
        let scratch = tmp.join("scratch");
        std::fs::create_dir_all(&scratch)?;
        proc::set_scratch(&scratch);
        let cgroup_parent = format!("cordon-bench-{}", std::process::id());
        cleanup::set_cgroup_parent(&cgroup_parent);

        // Static probes.
        let bin = tmp.join("bin");
        std::fs::create_dir_all(&bin)?;
        let src = repo.join("bench/probe");
        let loop_bin = bin.join("loop");
        let floor_bin = bin.join("floor");
        for (c, out) in [("loop.c", &loop_bin), ("floor.c", &floor_bin)] {
            let mut cmd = Command::new("gcc");
            cmd.args(["-static", "-O2", "-Wall", "-Wextra", "-o"])
                .arg(out)
                .arg(src.join(c));
            proc::run_ok(&mut cmd, Duration::from_secs(120)).with_context(|| format!("compile bench/probe/{c}"))?;
        }

        // Private busybox rootfs with /bench.
        let busybox_rootfs = tmp.join("busybox/rootfs");
        std::fs::create_dir_all(busybox_rootfs.parent().unwrap())?;
        let mut cp = Command::new("cp");
        cp.arg("-a").arg(busybox.join("rootfs")).arg(&busybox_rootfs);
        proc::run_ok(&mut cp, Duration::from_secs(120)).context("copy bundles/busybox/rootfs")?;
        let bench_dir = busybox_rootfs.join("bench");
        std::fs::create_dir_all(&bench_dir)?;
        std::fs::copy(&loop_bin, bench_dir.join("loop"))?;
        std::fs::write(bench_dir.join("data"), "cordon-bench\n")?;

        // /srv for python containers: the probe, the script, the tarball.
        let srv = tmp.join("srv");
        std::fs::create_dir_all(&srv)?;
        std::fs::copy(&loop_bin, srv.join("loop"))?;
        std::fs::write(srv.join("stdlib_work.py"), STDLIB_WORK)?;
        std::fs::write(srv.join("fetch_work.py"), FETCH_WORK)?;
        make_tarball(&tmp.join("tarsrc"), &srv.join("files.tar"))?;
        make_c_project(&srv.join("cproj"))?;

        // Policy: default, plus getppid audited (a round trip answered CONTINUE).
        let pol = tmp.join("policies");
        std::fs::create_dir_all(&pol)?;
        let audit_policy = pol.join("audit-getppid.toml");
        std::fs::write(
            &audit_policy,
            "name = \"bench-audit-getppid\"\n\
             description = \"cordon-bench: default, plus getppid sent to the supervisor and continued\"\n\
             extends = \"default\"\n\n\
             [[syscall]]\nnames = [\"getppid\"]\naction = \"audit\"\n",
        )?;
        let mut check = Command::new(&cordon);
        check.arg("policy").arg("check").arg(&audit_policy);
        proc::run_ok(&mut check, Duration::from_secs(30)).context("cordon policy check (bench policy)")?;
        // A user policy: one directory of the image denied, the harness's
        // volume read-only (both exist at create: enforced by mounts).
        let user_policy = pol.join("user.toml");
        std::fs::write(
            &user_policy,
            "name = \"bench-user\"\n\
             description = \"cordon-bench: default, plus /root denied and /srv read-only\"\n\n\
             [[path]]\npattern = \"/root/**\"\naccess = \"deny\"\n\n\
             [[path]]\npattern = \"/srv/**\"\naccess = \"read-only\"\n",
        )?;
        let mut check = Command::new(&cordon);
        check.arg("policy").arg("check").arg(&user_policy);
        proc::run_ok(&mut check, Duration::from_secs(30)).context("cordon policy check (user policy)")?;
        // Egress by name: lookups through the supervisor's resolver, connects
        // decided on the names it answered.
        let names_policy = pol.join("names.toml");
        std::fs::write(
            &names_policy,
            "name = \"bench-names\"\n\
             description = \"cordon-bench: default, egress denied but to bench.test by name\"\n\
             extends = \"default\"\nnet_default = \"deny\"\n\n\
             [[net]]\nhost = \"bench.test\"\naction = \"allow\"\n\n\
             [[net]]\ncidr = \"127.0.0.1/32\"\naction = \"allow\"\n\
             note = \"the replies of the container's own nameserver (loop serve-dns)\"\n",
        )?;
        let mut check = Command::new(&cordon);
        check.arg("policy").arg("check").arg(&names_policy);
        proc::run_ok(&mut check, Duration::from_secs(30)).context("cordon policy check (names policy)")?;
        let resolv_conf = tmp.join("resolv.conf");
        std::fs::write(&resolv_conf, "nameserver 127.0.0.1\n")?;

        let mut versions = vec![("kernel".to_string(), uname_release())];
        for (name, b) in [("cordon", &cordon), ("runc", &runc), ("crun", &crun)] {
            let out = proc::run(&mut proc::command(b, &["--version"]), Duration::from_secs(10))?;
            versions.push((
                name.to_string(),
                out.stdout.lines().next().unwrap_or("?").trim().to_string(),
            ));
        }
        // sandlock: a column where it was given and its `check` passes.
        let sandlock = match sandlock {
            None => {
                notes.push(
                    "sandlock: no column (not given with --sandlock; `make bench` installs sandlock-oci 0.9.0 with cargo where crates.io is reachable)".into(),
                );
                None
            }
            Some(b) => {
                let check = proc::run(&mut proc::command(&b, &["check"]), Duration::from_secs(30));
                match check {
                    Ok(o) if o.ok() => {
                        let v = proc::run(&mut proc::command(&b, &["--version"]), Duration::from_secs(10))
                            .map(|o| o.stdout.lines().next().unwrap_or("?").trim().to_string())
                            .unwrap_or_else(|_| "?".into());
                        versions.push(("sandlock-oci".into(), v));
                        notes.push(
                            "sandlock (sandlock-oci: Landlock, seccomp and seccomp-notify, no namespaces or cgroups) has no `run`: it is timed as create + start + polling `state` every millisecond until stopped + delete".into(),
                        );
                        Some(b)
                    }
                    Ok(o) => {
                        notes.push(format!(
                            "sandlock: no column ({})",
                            o.failure(&format!("{} check", b.display()))
                        ));
                        None
                    }
                    Err(e) => {
                        notes.push(format!("sandlock: no column ({}: {e:#})", b.display()));
                        None
                    }
                }
            }
        };
        let sandlock_python_rootfs = match &sandlock {
            Some(_) => {
                let dir = tmp.join("sandlock-python-rootfs");
                let mut cp = Command::new("cp");
                cp.arg("-al").arg(python.join("rootfs")).arg(&dir);
                proc::run_ok(&mut cp, Duration::from_secs(300)).context("hard-link the python rootfs for sandlock")?;
                let at = dir.join("usr/local/bin/loop");
                let _ = std::fs::remove_file(&at);
                std::fs::copy(&loop_bin, &at)?;
                Some(dir)
            }
            None => None,
        };
        let load = |p: &Path| -> anyhow::Result<Value> {
            let t = std::fs::read_to_string(p.join("config.json"))?;
            Ok(serde_json::from_str(&t)?)
        };
        Ok(Env {
            sizes,
            cordon,
            runc,
            crun,
            sandlock,
            sandlock_python_rootfs,
            loop_bin,
            floor_bin,
            busybox_rootfs,
            python_rootfs: python.join("rootfs").canonicalize()?,
            srv,
            audit_policy,
            user_policy,
            names_policy,
            resolv_conf,
            cgroup_parent,
            notes,
            versions,
            busybox_config: load(&busybox)?,
            python_config: load(&python)?,
            tmp,
        })
    }

    /// A runtime with a fresh private root. `policy` is cordon's annotation
    /// (`None` for runc and crun).
    pub fn runtime(&self, label: &str, policy: Option<&str>) -> Runtime {
        let bin = if label.starts_with("runc") {
            self.runc.clone()
        } else if label.starts_with("crun") {
            self.crun.clone()
        } else if label.starts_with("sandlock") {
            self.sandlock.clone().unwrap_or_default()
        } else {
            self.cordon.clone()
        };
        let root = self.tmp.join("roots").join(label);
        let _ = std::fs::create_dir_all(&root);
        cleanup::register_root(&bin, &root);
        Runtime {
            label: label.to_string(),
            bin,
            root,
            policy: policy.map(str::to_string),
            seccomp: None,
            platform: label.starts_with("cordon-ptrace").then(|| "ptrace".to_string()),
            enforcement: label.ends_with("-supervisor").then(|| "supervisor".to_string()),
        }
    }

    /// runc with a minimal seccomp filter in the bundle (everything allowed
    /// but one syscall nobody calls): the kernel's fixed cost of having a
    /// filter at all.
    pub fn runc_with_filter(&self) -> Runtime {
        let mut rt = self.runtime("runc-filter", None);
        rt.seccomp = Some(json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{"names": ["kexec_load"], "action": "SCMP_ACT_ERRNO"}]
        }));
        rt
    }

    /// The lifecycle contenders: cordon (default), cordon on the ptrace
    /// platform, cordon with the permissive policy, runc, crun, and
    /// sandlock when it is there.
    pub fn contenders(&self) -> Vec<Runtime> {
        vec![
            self.runtime("cordon", Some("default")),
            self.runtime("cordon-ptrace", Some("default")),
            self.runtime("cordon-permissive", Some("permissive")),
            self.runtime("runc", None),
            self.runtime("crun", None),
        ]
        .into_iter()
        .chain(self.sandlock.is_some().then(|| self.runtime("sandlock", None)))
        .collect()
    }

    /// A fresh container id for `rt` (unique in this run; also its cgroup name).
    pub fn id(&self, rt: &Runtime, what: &str) -> String {
        format!("{}-{what}-{}", rt.label, IDS.fetch_add(1, Ordering::Relaxed))
    }

    /// Writes a bundle (config.json only; the rootfs is referenced by
    /// absolute path) for container `id` under `rt`, running `args`.
    pub fn bundle(&self, rt: &Runtime, id: &str, image: Image, args: &[&str], env: &[&str]) -> anyhow::Result<PathBuf> {
        let (mut c, mut rootfs) = match image {
            Image::Busybox => (self.busybox_config.clone(), &self.busybox_rootfs),
            Image::Python => (self.python_config.clone(), &self.python_rootfs),
        };
        let mut args: Vec<&str> = args.to_vec();
        if let (true, Image::Python, Some(own)) = (
            rt.label.starts_with("sandlock"),
            image,
            self.sandlock_python_rootfs.as_ref(),
        ) {
            rootfs = own;
            if args.first() == Some(&"/srv/loop") {
                args[0] = "/usr/local/bin/loop";
            }
        }
        let args = &args[..];
        c["root"] = json!({"path": rootfs, "readonly": true});
        c["process"]["terminal"] = json!(false);
        c["process"]["args"] = json!(args);
        if !env.is_empty() {
            let mut e: Vec<Value> = c["process"]["env"].as_array().cloned().unwrap_or_default();
            e.extend(env.iter().map(|s| json!(s)));
            c["process"]["env"] = Value::Array(e);
        }
        if !c["annotations"].is_object() {
            c["annotations"] = json!({});
        }
        if let Some(p) = &rt.platform {
            c["annotations"]["org.cordon.platform"] = json!(p);
        }
        if let Some(e) = &rt.enforcement {
            c["annotations"]["org.cordon.enforcement"] = json!(e);
        }
        let linux = c["linux"].as_object_mut().context("config.json has no linux section")?;
        // No bundle filter: what is measured is cordon's own (runc and crun
        // run with no seccomp filter at all), unless the runtime asks for one.
        match &rt.seccomp {
            Some(s) => {
                linux.insert("seccomp".into(), s.clone());
            }
            None => {
                linux.remove("seccomp");
            }
        }
        linux.insert("cgroupsPath".into(), json!(format!("/{}/{id}", self.cgroup_parent)));
        if image == Image::Python {
            let mounts = c["mounts"].as_array_mut().context("config.json has no mounts")?;
            mounts.push(json!({"destination": "/srv", "type": "bind", "source": self.srv,
                               "options": ["rbind", "ro", "nosuid", "nodev"]}));
            mounts.push(json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                               "options": ["nosuid", "nodev", "mode=1777", "size=1g"]}));
        }
        let dir = self.tmp.join("bundles").join(id);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("config.json"), serde_json::to_vec_pretty(&c)?)?;
        Ok(dir)
    }

    /// Removes a container's bundle directory.
    pub fn drop_bundle(&self, id: &str) {
        let _ = std::fs::remove_dir_all(self.tmp.join("bundles").join(id));
    }
}

/// `PATH` lookup.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/sbin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            p.metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

fn uname_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// A tarball of [`TAR_FILES`] small files in 50 directories (no directory
/// entries), made once.
fn make_tarball(src: &Path, out: &Path) -> anyhow::Result<()> {
    let tree = src.join("tree");
    for i in 0..TAR_FILES {
        let d = tree.join(format!("d{:02}", i % 50));
        if i < 50 {
            std::fs::create_dir_all(&d)?;
        }
        let size = 256 + (i * 7919) % 3840;
        let body: String = (0..size).map(|j| (b'a' + ((i + j) % 26) as u8) as char).collect();
        std::fs::write(d.join(format!("f{i:05}.txt")), body)?;
    }
    // Regular files only (tar creates the parent directories itself): the
    // workload is the cost of creating files.
    let mut names = String::new();
    for i in 0..TAR_FILES {
        names.push_str(&format!("tree/d{:02}/f{i:05}.txt\n", i % 50));
    }
    let list = src.join("files.list");
    std::fs::write(&list, names)?;
    let mut tar = Command::new("tar");
    tar.arg("-cf").arg(out).arg("-C").arg(src).arg("-T").arg(&list);
    proc::run_ok(&mut tar, Duration::from_secs(120)).context("create the tarball")?;
    std::fs::remove_dir_all(src)?;
    Ok(())
}

/// When /sys/fs/cgroup is a v1/v2 hybrid whose v2 hierarchy still has
/// controllers (here: hugetlb), crun refuses to run ("cgroups in hybrid mode
/// not supported, drop all controllers from cgroupv2"). The harness then
/// moves into a private mount namespace whose /sys/fs/cgroup is a fresh
/// tmpfs holding only the v1 hierarchies (bind mounts of the host's), so
/// every runtime (cordon, runc and crun alike) uses the v1 controllers and
/// nothing is written under the host's hidden v2 mount point. Must run while
/// the process is single-threaded. The host's mounts are not touched.
pub fn hybrid_cgroup_workaround() -> anyhow::Result<Option<String>> {
    let base = Path::new("/sys/fs/cgroup");
    let unified = base.join("unified");
    let controllers = std::fs::read_to_string(unified.join("cgroup.controllers")).unwrap_or_default();
    if controllers.trim().is_empty() {
        return Ok(None);
    }
    // SAFETY: unshare with a flag; the process is single-threaded here.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        bail!("unshare(CLONE_NEWNS): {}", std::io::Error::last_os_error());
    }
    mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE).context("make / private")?;
    let v1: Vec<PathBuf> = {
        use std::os::unix::fs::MetadataExt;
        let dev = base.metadata()?.dev();
        std::fs::read_dir(base)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p != &unified && p.metadata().map(|m| m.is_dir() && m.dev() != dev).unwrap_or(false))
            .collect()
    };
    let staging = std::env::temp_dir().join(format!("cordon-bench-cgroupfs-{}", std::process::id()));
    std::fs::create_dir_all(&staging)?;
    let result = (|| -> anyhow::Result<()> {
        mount(Some("tmpfs"), &staging, Some("tmpfs"), 0).context("mount a tmpfs for /sys/fs/cgroup")?;
        for h in &v1 {
            let to = staging.join(h.file_name().unwrap());
            std::fs::create_dir(&to)?;
            mount(Some(&h.to_string_lossy()), &to, None, libc::MS_BIND)
                .with_context(|| format!("bind {}", h.display()))?;
        }
        let s = staging.to_string_lossy().into_owned();
        mount(Some(&s), base, None, libc::MS_MOVE).context("move the v1-only tree onto /sys/fs/cgroup")?;
        Ok(())
    })();
    let _ = std::fs::remove_dir(&staging);
    result?;
    Ok(Some(format!(
        "cgroups are a v1/v2 hybrid with controllers in v2 ({}), which crun 1.8 refuses; the harness ran in a \
         private mount namespace whose /sys/fs/cgroup holds only the v1 hierarchies, so every runtime used \
         the v1 controllers",
        controllers.trim()
    )))
}

/// mount(2).
fn mount(src: Option<&str>, target: &Path, fstype: Option<&str>, flags: libc::c_ulong) -> anyhow::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let src = src.map(CString::new).transpose()?;
    let fstype = fstype.map(CString::new).transpose()?;
    let target = CString::new(target.as_os_str().as_bytes())?;
    // SAFETY: every pointer is null or a valid NUL-terminated string that
    // outlives the call; data is null.
    let r = unsafe {
        libc::mount(
            src.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            std::ptr::null(),
        )
    };
    if r != 0 {
        bail!("{}", std::io::Error::last_os_error());
    }
    Ok(())
}
