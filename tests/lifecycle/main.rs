//! Lifecycle suite: the runc-compatible commands (create, start, state,
//! kill, delete, run, exec, ps, list, pause, resume, update, spec) driven
//! through the real `cordon` binary against the busybox bundle, asserting
//! what a user sees: exit codes, output, state JSON, cgroup files, and that
//! nothing is left behind.
//!
//! Needs root and a real kernel. Every test has its own [`Env`] (private
//! state root) and unique container ids, so tests run in parallel.
//!
//! Notes on kernel semantics the tests rely on:
//! - A pid namespace's init only receives signals it has a handler for,
//!   except SIGKILL/SIGSTOP sent from an ancestor namespace. So "killed by
//!   signal N" is observed either without a pid namespace (`probe
//!   kill-self`) or by `cordon kill ID KILL` from the host; and the default
//!   SIGTERM of `cordon kill` is observed on an init that traps it.
//! - A container whose stdio is the runtime's (create, exec -d, run -d)
//!   keeps the runtime's stdout/stderr open, so those commands are run with
//!   stdio in files ([`Logged`]) rather than pipes.
//! - As with runc, `--console-socket` goes with a detached process (`run
//!   -d`, `exec -d -t`, `create`): a foreground `run`/`exec` keeps its own
//!   stdio, and libcontainer refuses a console socket there.

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cordon_tests::{
    busybox_bundle, cgroup_leaked, cordon_bin, ok, processes_of, repo, run_captured, stderr, stdout, supervisor_pid,
    unique, wait_until, Env, TempDir,
};
use serde_json::{json, Value};

/// Longest any single wait in this suite may take (a hang detector: a
/// loaded machine makes a create take seconds).
const TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------

/// Polls `f` every 20 ms until it returns `Ok`, or panics after [`TIMEOUT`]
/// naming `what` and the last `Err` (the last observation).
#[track_caller]
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match f() {
            Ok(v) => return v,
            Err(last) => {
                assert!(
                    Instant::now() < deadline,
                    "timed out after {TIMEOUT:?} waiting for {what}; last: {last}"
                );
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The status field of `cordon state ID`.
#[track_caller]
fn status(env: &Env, id: &str) -> String {
    env.state(id)["status"]
        .as_str()
        .expect("state has a status string")
        .to_string()
}

/// Waits until `cordon state ID` reports `want`.
#[track_caller]
fn wait_status(env: &Env, id: &str, want: &str) {
    wait_for(&format!("{id} to be {want}"), || {
        let out = env.cordon(&["state", id]);
        if !out.status.success() {
            return Err(format!("state failed: {}", stderr(&out)));
        }
        let s: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
        if s["status"] == want {
            Ok(())
        } else {
            Err(format!("status {}", s["status"]))
        }
    })
}

/// The init's host pid from `cordon state ID`.
#[track_caller]
fn state_pid(env: &Env, id: &str) -> i32 {
    env.state(id)["pid"].as_i64().expect("state has a numeric pid") as i32
}

/// stdout/stderr of a cordon command kept in files: the container may
/// inherit them and outlive the command.
struct Logged {
    dir: TempDir,
}

impl Logged {
    fn new() -> Self {
        Logged {
            dir: TempDir::new("logged"),
        }
    }
    fn files(&self) -> (fs::File, fs::File) {
        (
            fs::File::create(self.dir.path().join("stdout")).unwrap(),
            fs::File::create(self.dir.path().join("stderr")).unwrap(),
        )
    }
    fn stdout(&self) -> String {
        fs::read_to_string(self.dir.path().join("stdout")).unwrap_or_default()
    }
    fn stderr(&self) -> String {
        fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }
}

/// `cordon --root <root> <args>` with stdin closed and stdout/stderr in
/// files; returns once the command (not the container) exits.
fn cordon_logged(env: &Env, args: &[&str]) -> (ExitStatus, Logged) {
    let (child, log) = spawn_cordon(env, args);
    let st = wait_child(child, "cordon", args);
    (st, log)
}

/// Starts `cordon --root <root> <args>` in the background (stdio in files).
fn spawn_cordon(env: &Env, args: &[&str]) -> (Child, Logged) {
    let log = Logged::new();
    let (o, e) = log.files();
    let child = Command::new(cordon_bin())
        .arg("--root")
        .arg(env.root.path())
        .args(args)
        .stdin(Stdio::null())
        .stdout(o)
        .stderr(e)
        .spawn()
        .expect("spawn cordon");
    (child, log)
}

/// Waits (at most [`TIMEOUT`]) for `child`; kills it and panics on timeout.
#[track_caller]
fn wait_child(mut child: Child, what: &str, args: &[&str]) -> ExitStatus {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} {args:?} did not exit within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The bundle path of `env` as a string.
fn bundle(env: &Env) -> String {
    env.bundle.path().to_string_lossy().into_owned()
}

/// Writes config.json and `cordon create`s `id` (stdio in files); asserts
/// success. The returned log holds the container's stdout/stderr.
#[track_caller]
fn create(env: &Env, id: &str) -> Logged {
    env.write();
    let b = bundle(env);
    let (st, log) = cordon_logged(env, &["create", "-b", &b, id]);
    assert!(st.success(), "create {id}: {st}\nstderr: {}", log.stderr());
    log
}

/// create + start; waits for "running". Returns the container's log.
#[track_caller]
fn start_running(env: &Env, id: &str) -> Logged {
    let log = create(env, id);
    ok(&env.cordon(&["start", id]));
    wait_status(env, id, "running");
    log
}

/// create + start of a short-lived process (it may already have exited).
#[track_caller]
fn start_running_or_stopped(env: &Env, id: &str) -> Logged {
    let log = create(env, id);
    ok(&env.cordon(&["start", id]));
    log
}

/// `cordon` with `input` on stdin.
fn cordon_stdin(env: &Env, args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(cordon_bin())
        .arg("--root")
        .arg(env.root.path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cordon");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// `cordon run` of `env` as `id`, asserting success; returns stdout.
#[track_caller]
fn run_ok(env: &Env, id: &str) -> String {
    ok(&env.run(id))
}

/// Asserts a failed command printed exactly one non-empty line on stderr
/// that contains every one of `needles`; returns that line.
#[track_caller]
fn assert_fails(out: &Output, needles: &[&str]) -> String {
    assert!(
        !out.status.success(),
        "expected failure, got success\nstdout: {}\nstderr: {}",
        stdout(out),
        stderr(out)
    );
    let err = stderr(out);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "expected ONE line on stderr, got {}:\n{err}",
        lines.len()
    );
    for n in needles {
        assert!(lines[0].contains(n), "stderr does not mention {n:?}: {}", lines[0]);
    }
    lines[0].to_string()
}

/// Pids of processes whose command line has `id` as an argument (a
/// leftover supervisor or container process).
fn processes_mentioning(id: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmd) = fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if cmd.split(|&b| b == 0).any(|a| a == id.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// Whether host pid `pid` is a live (not zombie) process.
fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s.rsplit_once(')').and_then(|(_, r)| r.trim_start().chars().next());
            state != Some('Z') && state != Some('X')
        }
        Err(_) => false,
    }
}

/// Asserts nothing of container `id` is left: `list -q` is empty, no state
/// directory, no cgroup, no process naming it.
#[track_caller]
fn assert_clean(env: &Env, id: &str) {
    let list = ok(&env.cordon(&["list", "-q"]));
    assert!(list.trim().is_empty(), "list -q is not empty: {list:?}");
    assert!(
        !env.root.path().join(id).exists(),
        "state directory of {id} left behind"
    );
    assert!(
        !env.root.path().join(".cordon").join(id).exists(),
        "cordon directory of {id} left behind"
    );
    assert!(!cgroup_leaked(id), "cgroup of {id} left behind");
    // A supervisor killed by delete may take a moment to be gone.
    wait_for(&format!("no process mentioning {id}"), || {
        let p = processes_mentioning(id);
        if p.is_empty() {
            Ok(())
        } else {
            Err(format!("pids {p:?}"))
        }
    });
}

/// A cgroup file of container `id` under the default cgroupsPath
/// `/cordon/<id>`: the v1 controller's file, else the unified v2 file.
fn cgroup_read(id: &str, controller: &str, v1_file: &str, v2_file: &str) -> Option<String> {
    let v1 = PathBuf::from(format!("/sys/fs/cgroup/{controller}/cordon/{id}/{v1_file}"));
    if let Ok(s) = fs::read_to_string(&v1) {
        return Some(s.trim().to_string());
    }
    for base in ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
        if let Ok(s) = fs::read_to_string(format!("{base}/cordon/{id}/{v2_file}")) {
            return Some(s.trim().to_string());
        }
    }
    None
}

/// `ps --format json ID` as a list of host pids.
#[track_caller]
fn ps_pids(env: &Env, id: &str) -> Vec<i32> {
    let out = ok(&env.cordon(&["ps", "--format", "json", id]));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("ps json {out:?}: {e}"))
}

/// Capability numbers (linux/capability.h).
const CAPS: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// The CapEff mask a list of `CAP_*` names gives.
fn cap_mask(names: &Value) -> u64 {
    names
        .as_array()
        .expect("capability list")
        .iter()
        .map(|n| {
            let n = n.as_str().unwrap();
            let bare = n.strip_prefix("CAP_").unwrap_or(n);
            let bit = CAPS
                .iter()
                .position(|c| *c == bare)
                .unwrap_or_else(|| panic!("unknown capability {n}"));
            1u64 << bit
        })
        .fold(0, |a, b| a | b)
}

/// Sets every capability set of the process to `names`.
fn set_caps(env: &mut Env, names: &[&str]) {
    let list: Vec<Value> = names.iter().map(|n| json!(n)).collect();
    for set in ["bounding", "effective", "inheritable", "permitted", "ambient"] {
        env.config["process"]["capabilities"][set] = json!(list);
    }
}

/// Adds a mount to the config.
fn add_mount(env: &mut Env, m: Value) {
    env.config["mounts"].as_array_mut().expect("mounts").push(m);
}

// --- console socket ---------------------------------------------------------

/// A console socket (runc's `--console-socket` protocol): a listener that
/// accepts one connection, receives the pty master by SCM_RIGHTS and reads
/// everything the container writes to its terminal until it hangs up.
struct Console {
    _dir: TempDir,
    path: PathBuf,
    reader: JoinHandle<Result<String, String>>,
}

impl Console {
    fn new() -> Self {
        let dir = TempDir::new("console");
        let path = dir.path().join("console.sock");
        let listener = UnixListener::bind(&path).expect("bind console socket");
        listener.set_nonblocking(true).unwrap();
        let reader = std::thread::spawn(move || console_read(listener));
        Console {
            _dir: dir,
            path,
            reader,
        }
    }

    fn path(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// What the terminal showed (waits for the hangup, at most [`TIMEOUT`]).
    #[track_caller]
    fn output(self) -> String {
        match self.reader.join().expect("console reader panicked") {
            Ok(s) => s,
            Err(e) => panic!("console socket: {e}"),
        }
    }
}

fn console_read(listener: UnixListener) -> Result<String, String> {
    let deadline = Instant::now() + TIMEOUT;
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err("no connection on the console socket".into());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    };
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(TIMEOUT)).map_err(|e| e.to_string())?;
    let master = recv_fd(&stream)?;
    read_until_hangup(&master, deadline)
}

/// Receives one fd passed with SCM_RIGHTS on `sock`.
fn recv_fd(sock: &UnixStream) -> Result<OwnedFd, String> {
    let mut data = [0u8; 4096];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // u64 elements keep the control buffer aligned for cmsghdr.
    let mut control = [0u64; 32];
    // SAFETY: msghdr is plain old data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points to live buffers of the sizes it states.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(format!("recvmsg: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `msg` was filled by recvmsg; the CMSG_* macros walk its
    // control buffer within msg_controllen.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !c.is_null() {
        // SAFETY: `c` is a non-null header inside the control buffer.
        let h = unsafe { &*c };
        if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_RIGHTS {
            let mut fd: libc::c_int = -1;
            // SAFETY: an SCM_RIGHTS message carries at least one int; the
            // data may be unaligned, hence the byte copy.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    libc::CMSG_DATA(c),
                    (&mut fd as *mut libc::c_int).cast::<u8>(),
                    std::mem::size_of::<libc::c_int>(),
                )
            };
            // SAFETY: the kernel just installed `fd` in this process for us.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        // SAFETY: as for CMSG_FIRSTHDR.
        c = unsafe { libc::CMSG_NXTHDR(&msg, c) };
    }
    Err(format!("no SCM_RIGHTS fd in the message ({n} bytes of data)"))
}

/// Reads the pty master until every slave fd is closed (EIO) or EOF.
fn read_until_hangup(master: &OwnedFd, deadline: Instant) -> Result<String, String> {
    let mut out = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "terminal still open after {TIMEOUT:?}; read so far: {:?}",
                String::from_utf8_lossy(&out)
            ));
        }
        let mut pfd = libc::pollfd {
            fd: master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(1000) as i32) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("poll: {e}"));
        }
        if r == 0 {
            continue;
        }
        let mut buf = [0u8; 4096];
        // SAFETY: reads into a local buffer of the given size.
        let n = unsafe { libc::read(master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            out.extend_from_slice(&buf[..n as usize]);
        } else if n == 0 {
            break;
        } else {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EIO) => break,
                Some(libc::EINTR) | Some(libc::EAGAIN) => continue,
                _ => return Err(format!("read pty master: {e}")),
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

// ---------------------------------------------------------------------------
// run: exit status, stdio, process settings
// ---------------------------------------------------------------------------

#[test]
fn run_returns_the_exit_code() {
    for code in ["7", "0", "1"] {
        let env = Env::busybox(&["probe", "exit", code]);
        let id = unique("exit");
        let out = env.run(&id);
        assert_eq!(
            out.status.code(),
            Some(code.parse().unwrap()),
            "stderr: {}",
            stderr(&out)
        );
        assert_clean(&env, &id);
    }
}

/// `CORDON_TIMINGS=FILE` (bench/README.md): every process of a `run`
/// writes its steps to FILE (the CLI, the supervisor, the container's
/// init before it execs), one tab-separated line each with a duration,
/// and the container runs as it does without: same exit status, same
/// output, its environment the config's (the variable does not leak in).
#[test]
fn run_with_timings_writes_every_step_and_changes_nothing() {
    let env = Env::busybox(&["sh", "-c", "echo out; env | grep -c CORDON_ || true; exit 3"]);
    let dir = TempDir::new("timings");
    let file = dir.path().join("t.log");
    env.write();
    let id = unique("timings");
    let b = env.bundle.path().to_string_lossy().into_owned();
    let mut cmd = Command::new(cordon_bin());
    cmd.arg("--root").arg(env.root.path()).args(["run", "-b", &b, &id]);
    cmd.env("CORDON_TIMINGS", &file);
    let out = run_captured(&mut cmd);
    assert_eq!(out.status.code(), Some(3), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "out\n0\n", "the container saw a timing variable");
    assert_clean(&env, &id);
    let text = fs::read_to_string(&file).expect("the timings file was written");
    let mut seen = std::collections::BTreeSet::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 6, "a line of six fields: {line:?}");
        assert_eq!(f[0], "cordon-timing");
        assert!(f[1].parse::<u32>().is_ok(), "a pid: {line:?}");
        let (start, dur): (f64, f64) = (f[4].parse().unwrap(), f[5].parse().unwrap());
        assert!(start >= 0.0 && dur >= 0.0, "{line:?}");
        seen.insert((f[3].to_string(), f[2].to_string()));
    }
    for (step, process) in [
        ("exec (sealed binary)", "run"),
        ("load and compile the policy", "run"),
        ("build (libcontainer)", "run"),
        ("create", "run"),
        ("start", "run"),
        ("wait", "run"),
        ("stop the supervisor", "run"),
        ("delete", "run"),
        ("process: filters and handshake", "run"),
        ("supervisor: exec", "supervise"),
        ("supervisor: load the policy", "supervise"),
    ] {
        assert!(
            seen.contains(&(step.to_string(), process.to_string())),
            "step {step:?} of {process} in {text}"
        );
    }
    // Without the variable nothing is written anywhere.
    fs::remove_file(&file).unwrap();
    let id = unique("timings");
    assert_eq!(env.run(&id).status.code(), Some(3));
    assert!(!file.exists());
}

/// `run` of `probe kill-self SIG` without a pid namespace (a pid
/// namespace's init ignores signals it has no handler for, even its own).
fn run_kill_self(sig: &str) -> (Env, String, Output) {
    let mut env = Env::busybox(&["probe", "kill-self", sig]);
    env.config["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .retain(|n| n["type"] != "pid");
    let id = unique("sig");
    let out = env.run(&id);
    (env, id, out)
}

#[test]
fn run_killed_by_sigkill_returns_137() {
    let (env, id, out) = run_kill_self("9");
    assert_eq!(
        out.status.code(),
        Some(137),
        "stdout {} stderr {}",
        stdout(&out),
        stderr(&out)
    );
    assert_clean(&env, &id);
}

/// SIGTERM, unlike SIGKILL, can be blocked: this also fails if the
/// container inherits a blocked signal mask from `run`.
#[test]
fn run_killed_by_sigterm_returns_143() {
    let (env, id, out) = run_kill_self("TERM");
    assert_eq!(
        out.status.code(),
        Some(143),
        "stdout {} stderr {}",
        stdout(&out),
        stderr(&out)
    );
    assert_clean(&env, &id);
}

#[test]
fn run_killed_from_the_host_returns_137() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("hostkill");
    env.write();
    let b = bundle(&env);
    let (child, log) = spawn_cordon(&env, &["run", "-b", &b, &id]);
    wait_status(&env, &id, "running");
    ok(&env.cordon(&["kill", &id, "9"]));
    let st = wait_child(child, "run", &[&id]);
    assert_eq!(st.code(), Some(137), "run after kill 9: {st}; stderr: {}", log.stderr());
    assert_clean(&env, &id);
}

/// `cordon kill` saves the container's state while `run`, woken by the
/// init's death, loads it to delete the container: `run` must still clean
/// up (the kill and the delete race; repeated to make the race likely).
#[test]
fn run_cleans_up_after_a_concurrent_kill() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    env.write();
    let b = bundle(&env);
    // The race window is small: up to 40 rounds within 6 s.
    let deadline = Instant::now() + Duration::from_secs(6);
    let mut rounds = 0;
    while rounds < 40 && Instant::now() < deadline {
        rounds += 1;
        let id = unique("killrace");
        let (child, log) = spawn_cordon(&env, &["run", "-b", &b, &id]);
        wait_status(&env, &id, "running");
        ok(&env.cordon(&["kill", &id, "KILL"]));
        let st = wait_child(child, "run", &[&id]);
        assert_eq!(
            st.code(),
            Some(137),
            "round {rounds}: run after kill: {st}; stderr: {}",
            log.stderr()
        );
        let left = ok(&env.cordon(&["list", "-q"]));
        assert!(
            left.trim().is_empty(),
            "round {rounds}: run exited but left {left:?} behind; its stderr: {:?}",
            log.stderr()
        );
        assert_clean(&env, &id);
    }
}

#[test]
fn stdout_and_stderr_pass_through() {
    let env = Env::busybox(&["sh", "-c", "echo to-out; echo to-err >&2; echo more-out"]);
    let id = unique("stdio");
    let out = env.run(&id);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "to-out\nmore-out\n");
    assert_eq!(stderr(&out), "to-err\n");
}

#[test]
fn args_are_passed_verbatim() {
    let env = Env::busybox(&["sh", "-c", "printf '[%s]' \"$@\"", "sh", "a b", "", "c*", "$HOME"]);
    let id = unique("args");
    assert_eq!(run_ok(&env, &id), "[a b][][c*][$HOME]");
}

#[test]
fn env_comes_from_process_env() {
    let mut env = Env::busybox(&["sh", "-c", "echo \"$FOO|$EMPTY|$PATH\"; env | grep -c ^FOO="]);
    env.config["process"]["env"] = json!(["PATH=/bin:/usr/local/bin", "FOO=bar baz=qux", "EMPTY="]);
    let id = unique("env");
    assert_eq!(run_ok(&env, &id), "bar baz=qux||/bin:/usr/local/bin\n1\n");
}

#[test]
fn cwd_comes_from_process_cwd() {
    let mut env = Env::busybox(&["pwd"]);
    env.config["process"]["cwd"] = json!("/usr/local/bin");
    let id = unique("cwd");
    assert_eq!(run_ok(&env, &id), "/usr/local/bin\n");
}

#[test]
fn user_uid_gid_and_additional_groups() {
    let mut env = Env::busybox(&["sh", "-c", "id -u; id -g; id -G"]);
    env.config["process"]["user"] = json!({"uid": 1000, "gid": 1000, "additionalGids": [2000]});
    let id = unique("user");
    let out = run_ok(&env, &id);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out:?}");
    assert_eq!(lines[0], "1000", "uid: {out:?}");
    assert_eq!(lines[1], "1000", "gid: {out:?}");
    let mut groups: Vec<&str> = lines[2].split_whitespace().collect();
    groups.sort();
    assert_eq!(groups, ["1000", "2000"], "groups: {out:?}");
}

#[test]
fn hostname_comes_from_the_spec() {
    let mut env = Env::busybox(&["hostname"]);
    let name = unique("host");
    env.config["hostname"] = json!(name);
    let id = unique("hostname");
    assert_eq!(run_ok(&env, &id), format!("{name}\n"));
}

#[test]
fn init_is_pid_1() {
    let env = Env::busybox(&["sh", "-c", "echo $$"]);
    let id = unique("pid1");
    assert_eq!(run_ok(&env, &id), "1\n");
}

/// The SigBlk and SigIgn masks a container process reports, from
/// `grep Sig(Blk|Ign) /proc/self/status` output.
#[track_caller]
fn signal_masks(out: &str) -> (String, String) {
    let get = |k: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {k} in {out:?}"))
    };
    (get("SigBlk:"), get("SigIgn:"))
}

const NO_SIGNALS: &str = "0000000000000000";

/// The SigIgn mask a plain child of this test process gets: signals the
/// environment already ignores (e.g. glibc's internal 32 and 33) stay
/// ignored across fork and exec; a runtime must not add to them.
fn host_sigign() -> String {
    let out = Command::new("grep")
        .args(["-E", "^Sig(Blk|Ign):", "/proc/self/status"])
        .output()
        .unwrap();
    signal_masks(&stdout(&out)).1
}

/// Asserts a container process's masks: nothing blocked, nothing ignored
/// beyond what the environment ignores (SIGPIPE is bit 0x1000).
#[track_caller]
fn assert_default_signal_state(what: &str, out: &str) {
    let (blk, ign) = signal_masks(out);
    assert_eq!(blk, NO_SIGNALS, "{what}: blocked signals (SigBlk)");
    assert_eq!(
        ign,
        host_sigign(),
        "{what}: ignored signals (SigIgn) differ from a plain host child's"
    );
}

/// `run`'s foreground wait must not leak its blocked signal mask, nor the
/// Rust runtime's ignored SIGPIPE, into the container: a process starts
/// with every signal unblocked and at its default disposition.
#[test]
fn run_process_starts_with_default_signal_state() {
    let env = Env::busybox(&["grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status"]);
    let id = unique("sigrun");
    assert_default_signal_state("run", &run_ok(&env, &id));
}

#[test]
fn created_process_starts_with_default_signal_state() {
    let env = Env::busybox(&["grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status"]);
    let id = unique("sigcreate");
    let log = start_running_or_stopped(&env, &id);
    wait_status(&env, &id, "stopped");
    assert_default_signal_state("create+start", &log.stdout());
}

#[test]
fn exec_process_starts_with_default_signal_state() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("sigexec");
    start_running(&env, &id);
    let out = ok(&env.cordon(&["exec", &id, "grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status"]));
    assert_default_signal_state("exec", &out);
}

// ---------------------------------------------------------------------------
// filesystem
// ---------------------------------------------------------------------------

#[test]
fn readonly_rootfs_rejects_writes() {
    let env = Env::busybox(&["probe", "write", "/x", "y"]);
    assert_eq!(
        env.config["root"]["readonly"], true,
        "the busybox bundle has a read-only rootfs"
    );
    let id = unique("rofs");
    assert_eq!(run_ok(&env, &id).trim(), "err EROFS");
    assert!(
        !busybox_bundle().join("rootfs/x").exists(),
        "the write reached the host rootfs"
    );
}

#[test]
fn tmpfs_mount_is_writable() {
    let mut env = Env::busybox(&[
        "sh",
        "-c",
        "probe write /mnt/t/f hello && cat /mnt/t/f && echo && grep ' /mnt/t ' /proc/self/mounts | cut -d' ' -f3",
    ]);
    add_mount(
        &mut env,
        json!({"destination": "/mnt/t", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "size=1m"]}),
    );
    let id = unique("tmpfs");
    assert_eq!(run_ok(&env, &id), "ok 5\nhello\ntmpfs\n");
}

/// `source` is optional in the runtime spec (crun's configs leave it out
/// for proc): such mounts are made with an empty source, as runc makes
/// them, and show the same in /proc/mounts. Both with cordon's default
/// cgroupsPath and with one of the config's own.
#[test]
fn mounts_without_a_source_are_made() {
    for explicit_cgroups_path in [false, true] {
        let mut env = Env::busybox(&[
            "sh",
            "-c",
            "probe write /mnt/t/f hello && grep -E ' /(proc|mnt/t) ' /proc/self/mounts | cut -d' ' -f1-3",
        ]);
        let id = unique("nosource");
        for m in env.config["mounts"].as_array_mut().expect("mounts") {
            if m["destination"] == "/proc" {
                m.as_object_mut().unwrap().remove("source");
            }
        }
        add_mount(
            &mut env,
            json!({"destination": "/mnt/t", "type": "tmpfs", "options": ["size=1m"]}),
        );
        if explicit_cgroups_path {
            env.config["linux"]["cgroupsPath"] = json!(format!("/cordon/{id}"));
        }
        assert_eq!(
            run_ok(&env, &id),
            "ok 5\n /proc proc\n /mnt/t tmpfs\n",
            "cgroupsPath given: {explicit_cgroups_path}"
        );
        assert_clean(&env, &id);
    }
}

/// `cordon ARGS` started by bash after `redirs` (bash redirections such as
/// `0<&- 5</etc/hostname`), so the runtime inherits exactly those fds.
fn cordon_with_fds(env: &Env, redirs: &str, args: &[&str]) -> Output {
    let mut cmd = format!("exec {} --root {}", cordon_bin().display(), env.root.path().display());
    for a in args {
        cmd.push_str(&format!(" '{a}'"));
    }
    Command::new("bash")
        .arg("-c")
        .arg(format!("exec {redirs} 2>/dev/null; exec 2>&1; {cmd}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run bash")
}

/// The fds `probe fds` listed: (number, target) pairs.
fn fd_list(out: &Output) -> Vec<(i32, String)> {
    stdout(out)
        .lines()
        .map(|l| {
            let (n, t) = l.split_once(' ').unwrap_or((l, ""));
            (
                n.parse()
                    .unwrap_or_else(|_| panic!("not an fd line: {l:?} in {}", stdout(out))),
                t.to_string(),
            )
        })
        .collect()
}

/// Only stdio and the `--preserve-fds` range reach the container, whatever
/// else the caller has open or closed: stdin closed, extra inherited fds,
/// a preserved range, through `run` and `exec`.
#[test]
fn only_stdio_and_preserved_fds_reach_the_container() {
    let env = Env::busybox(&["probe", "fds"]);
    env.write();
    let b = bundle(&env);
    let numbers = |out: &Output| fd_list(out).into_iter().map(|(n, _)| n).collect::<Vec<_>>();

    let id = unique("fds");
    let out = cordon_with_fds(&env, "0<&-", &["run", "-b", &b, &id]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(numbers(&out), [0, 1, 2], "stdin closed: {}", stdout(&out));

    let id = unique("fds");
    let out = cordon_with_fds(
        &env,
        "0<&- 5</etc/hostname 9</etc/hostname 10</dev/null",
        &["run", "-b", &b, &id],
    );
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(numbers(&out), [0, 1, 2], "extra fds: {}", stdout(&out));

    let id = unique("fds");
    let out = cordon_with_fds(
        &env,
        "0<&- 3</etc/hostname 4</etc/passwd 7</etc/hostname",
        &["run", "--preserve-fds", "2", "-b", &b, &id],
    );
    assert!(out.status.success(), "{}", stdout(&out));
    let fds = fd_list(&out);
    assert_eq!(
        fds.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4],
        "{fds:?}"
    );
    assert_eq!((fds[3].1.as_str(), fds[4].1.as_str()), ("/etc/hostname", "/etc/passwd"));

    let env = Env::busybox(&["sleep", "100"]);
    let id = unique("fdsexec");
    start_running(&env, &id);
    let out = cordon_with_fds(
        &env,
        "0<&- 3</etc/hostname 6</etc/hostname",
        &["exec", "--preserve-fds", "1", &id, "probe", "fds"],
    );
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(numbers(&out), [0, 1, 2, 3], "exec: {}", stdout(&out));
}

/// A `--preserve-fds` range with a gap is refused (as by runc) before the
/// runtime opens an fd of its own that could fill the gap.
#[test]
fn a_gap_in_the_preserved_fds_is_refused() {
    let env = Env::busybox(&["probe", "fds"]);
    env.write();
    let b = bundle(&env);
    let id = unique("fdgap");
    let out = cordon_with_fds(&env, "3</etc/hostname", &["run", "--preserve-fds", "8", "-b", &b, &id]);
    assert!(!out.status.success(), "ran: {}", stdout(&out));
    let err = stdout(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--preserve-fds 8") && err.contains("fd 4 is not open"),
        "{err}"
    );
    assert_clean(&env, &id);
}

/// `--systemd-cgroup` where systemd does not run: refused as runc refuses
/// it, leaving nothing (no cgroup named after the `slice:prefix:name`).
#[test]
fn systemd_cgroup_without_systemd_fails_cleanly() {
    if std::path::Path::new("/run/systemd/system").is_dir() {
        eprintln!("systemd runs here: nothing to check");
        return;
    }
    let mut env = Env::busybox(&["true"]);
    let id = unique("systemd");
    env.config["linux"]["cgroupsPath"] = json!(format!("system.slice:cri:{id}"));
    env.write();
    let b = bundle(&env);
    let out = env.cordon(&["--systemd-cgroup", "run", "-b", &b, &id]);
    assert_fails(&out, &["--systemd-cgroup", "systemd not running"]);
    assert_clean(&env, &id);
    for dir in ["/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
        let leaked = std::path::Path::new(dir).join(format!("system.slice:cri:{id}"));
        assert!(!leaked.exists(), "{} created", leaked.display());
    }
}

/// A bind mount without a source has nothing to bind: refused, naming it.
#[test]
fn bind_mount_without_a_source_fails_naming_it() {
    let mut env = Env::busybox(&["true"]);
    add_mount(
        &mut env,
        json!({"destination": "/mnt/b", "type": "bind", "options": ["rbind"]}),
    );
    let id = unique("nosourcebind");
    assert_fails(&env.run(&id), &["mounts", "/mnt/b", "source"]);
    assert_clean(&env, &id);
}

/// A mount whose destination crosses a file fails naming the mount and
/// the errno, as runc's "not a directory", and leaves nothing behind.
#[test]
fn a_mount_across_a_file_names_enotdir() {
    let mut env = Env::busybox(&["true"]);
    add_mount(
        &mut env,
        json!({"destination": "/etc/passwd/sub", "type": "tmpfs", "source": "tmpfs"}),
    );
    let id = unique("acrossfile");
    assert_fails(&env.run(&id), &["/etc/passwd/sub", "ENOTDIR (Not a directory)"]);
    assert_clean(&env, &id);
}

#[test]
fn bind_mount_shows_host_files_and_takes_writes() {
    let host = TempDir::new("bind");
    fs::write(host.path().join("from-host"), "host-data").unwrap();
    let mut env = Env::busybox(&[
        "sh",
        "-c",
        "cat /mnt/host/from-host; echo; probe write /mnt/host/from-ctr ctr-data",
    ]);
    add_mount(
        &mut env,
        json!({"destination": "/mnt/host", "type": "bind", "source": host.path(), "options": ["rbind", "rw"]}),
    );
    let id = unique("bind");
    assert_eq!(run_ok(&env, &id), "host-data\nok 8\n");
    assert_eq!(fs::read_to_string(host.path().join("from-ctr")).unwrap(), "ctr-data");
}

#[test]
fn readonly_bind_mount_is_not_writable() {
    let host = TempDir::new("robind");
    fs::write(host.path().join("from-host"), "host-data").unwrap();
    let mut env = Env::busybox(&["sh", "-c", "cat /mnt/ro/from-host; echo; probe write /mnt/ro/new x"]);
    add_mount(
        &mut env,
        json!({"destination": "/mnt/ro", "type": "bind", "source": host.path(), "options": ["rbind", "ro"]}),
    );
    let id = unique("robind");
    assert_eq!(run_ok(&env, &id), "host-data\nerr EROFS\n");
    assert!(
        !host.path().join("new").exists(),
        "the write reached the host through a read-only bind"
    );
}

// ---------------------------------------------------------------------------
// rlimits and capabilities
// ---------------------------------------------------------------------------

#[test]
fn rlimit_nofile_is_applied() {
    let mut env = Env::busybox(&["sh", "-c", "ulimit -n; ulimit -Hn"]);
    env.config["process"]["rlimits"] = json!([{"type": "RLIMIT_NOFILE", "soft": 512, "hard": 512}]);
    let id = unique("rlimit");
    assert_eq!(run_ok(&env, &id), "512\n512\n");
}

#[test]
fn rlimit_above_host_hard_limit_fails_cleanly() {
    // SAFETY: getrlimit fills a local struct.
    let mut host: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut host) }, 0);
    let want: u64 = if host.rlim_max < 1_048_576 {
        1_048_576
    } else {
        host.rlim_max + 1
    };
    let mut env = Env::busybox(&["sh", "-c", "ulimit -n"]);
    env.config["process"]["rlimits"] = json!([{"type": "RLIMIT_NOFILE", "soft": want, "hard": want}]);
    let id = unique("rlimithi");
    let out = env.run(&id);
    assert_fails(&out, &["RLIMIT_NOFILE"]);
    assert_clean(&env, &id);
}

#[test]
fn capabilities_are_those_of_the_config() {
    let env = Env::busybox(&["probe", "caps"]);
    let want = cap_mask(&env.config["process"]["capabilities"]["effective"]);
    assert_eq!(
        want,
        (1 << 5) | (1 << 10) | (1 << 29),
        "busybox bundle: CAP_KILL, CAP_NET_BIND_SERVICE, CAP_AUDIT_WRITE"
    );
    let id = unique("caps");
    assert_eq!(run_ok(&env, &id).trim(), format!("capeff={want:016x}"));

    let mut env = Env::busybox(&["probe", "caps"]);
    set_caps(&mut env, &["CAP_CHOWN", "CAP_NET_RAW", "CAP_SYS_CHROOT"]);
    let id = unique("caps");
    assert_eq!(
        run_ok(&env, &id).trim(),
        format!("capeff={:016x}", (1u64 << 0) | (1 << 13) | (1 << 18))
    );
}

#[test]
fn empty_capability_lists_give_no_capabilities() {
    let mut env = Env::busybox(&["probe", "caps"]);
    set_caps(&mut env, &[]);
    let id = unique("nocaps");
    assert_eq!(run_ok(&env, &id).trim(), "capeff=0000000000000000");
}

// ---------------------------------------------------------------------------
// state machine, kill, delete
// ---------------------------------------------------------------------------

/// As runc and crun: `exec` into a created container runs in its
/// namespaces before `start`, its exit status passed on, and leaves the
/// container created; the user process then starts as usual.
#[test]
fn exec_into_a_created_container_runs_before_start() {
    let env = Env::busybox(&["sh", "-c", "echo init ran"]);
    let id = unique("execcreated");
    let log = create(&env, &id);
    let out = env.cordon(&["exec", &id, "sh", "-c", "echo exec ran in $(hostname); exit 3"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "exec into a created container: {}",
        stderr(&out)
    );
    let host = env.config["hostname"].as_str().unwrap_or_default().to_string();
    assert_eq!(stdout(&out), format!("exec ran in {host}\n"), "{}", stderr(&out));
    assert_eq!(env.state(&id)["status"], "created");
    assert_eq!(log.stdout(), "", "the user process ran before start");
    ok(&env.cordon(&["start", &id]));
    wait_status(&env, &id, "stopped");
    assert_eq!(log.stdout(), "init ran\n");
    ok(&env.cordon(&["delete", &id]));
    assert_clean(&env, &id);
}

#[test]
fn state_machine_create_start_stop_delete() {
    let env = Env::busybox(&["probe", "sleep", "1"]);
    let id = unique("states");
    let log = create(&env, &id);

    let s = env.state(&id);
    assert_eq!(s["status"], "created", "{s}");
    assert_eq!(s["id"], id.as_str());
    let pid = s["pid"].as_i64().unwrap_or(0) as i32;
    assert!(pid > 0, "created container has no pid: {s}");
    assert!(alive(pid), "init pid {pid} of a created container is not alive");
    let b = fs::canonicalize(env.bundle.path()).unwrap();
    assert_eq!(
        s["bundle"],
        b.to_string_lossy().as_ref(),
        "state bundle is the user's bundle"
    );
    assert_eq!(s["rootfs"], busybox_bundle().join("rootfs").to_string_lossy().as_ref());
    assert_eq!(log.stdout(), "", "the user process ran before start");
    assert!(
        cgroup_leaked(&id),
        "no cgroup named {id} under the default cgroupsPath /cordon/{id}"
    );

    ok(&env.cordon(&["start", &id]));
    let s = env.state(&id);
    assert_eq!(s["status"], "running", "{s}");
    assert_eq!(s["pid"].as_i64(), Some(pid as i64), "pid changed on start");

    wait_status(&env, &id, "stopped");
    assert_eq!(log.stdout(), "ok\n", "the user process did not run to completion");

    ok(&env.cordon(&["delete", &id]));
    let out = env.cordon(&["state", &id]);
    assert_fails(&out, &["does not exist"]);
    assert_clean(&env, &id);
}

#[test]
fn kill_default_signal_is_sigterm() {
    // pid 1 only gets SIGTERM with a handler: trap it and say so.
    let env = Env::busybox(&[
        "sh",
        "-c",
        "trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.05; done",
    ]);
    let id = unique("killterm");
    let log = start_running(&env, &id);
    wait_for("the init to install its trap", || {
        let o = log.stdout();
        if o.contains("ready") {
            Ok(())
        } else {
            Err(o)
        }
    });
    ok(&env.cordon(&["kill", &id]));
    wait_status(&env, &id, "stopped");
    assert_eq!(log.stdout(), "ready\ngot-term\n");
}

#[test]
fn kill_sigkill_stops_the_container() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("killkill");
    start_running(&env, &id);
    let pid = state_pid(&env, &id);
    ok(&env.cordon(&["kill", &id, "KILL"]));
    wait_status(&env, &id, "stopped");
    wait_for("the init to be gone", || {
        if alive(pid) {
            Err(format!("{pid} alive"))
        } else {
            Ok(())
        }
    });
    ok(&env.cordon(&["delete", &id]));
    assert_clean(&env, &id);
}

#[test]
fn kill_all_signals_every_process() {
    // The init ignores SIGTERM (pid 1, no handler); an exec'd process does not.
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("killall");
    start_running(&env, &id);
    let init = state_pid(&env, &id);
    let (st, log) = cordon_logged(&env, &["exec", "-d", &id, "probe", "sleep", "30"]);
    assert!(st.success(), "exec -d: {}", log.stderr());
    let other = wait_for("the exec'd process in ps", || {
        let p = ps_pids(&env, &id);
        match p.iter().find(|&&p| p != init) {
            Some(&o) if p.len() == 2 => Ok(o),
            _ => Err(format!("{p:?}")),
        }
    });
    ok(&env.cordon(&["kill", "--all", &id, "TERM"]));
    wait_for("the exec'd process to die", || {
        let p = ps_pids(&env, &id);
        if p == [init] && !alive(other) {
            Ok(())
        } else {
            Err(format!("ps {p:?}, {other} alive: {}", alive(other)))
        }
    });
    assert_eq!(status(&env, &id), "running", "init must survive SIGTERM");

    ok(&env.cordon(&["kill", "--all", &id, "KILL"]));
    wait_status(&env, &id, "stopped");
}

#[test]
fn kill_with_an_unknown_signal_fails() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("killbad");
    start_running(&env, &id);
    let out = env.cordon(&["kill", &id, "FOO"]);
    assert_fails(&out, &["invalid signal", "FOO"]);
    assert_eq!(status(&env, &id), "running");
}

#[test]
fn delete_force_removes_a_running_container() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("delforce");
    start_running(&env, &id);
    let pid = state_pid(&env, &id);
    assert!(
        cgroup_leaked(&id),
        "running container has no cgroup named {id} (default cgroupsPath /cordon/{id})"
    );
    assert!(
        cgroup_read(&id, "pids", "cgroup.procs", "cgroup.procs")
            .is_some_and(|p| p.lines().any(|l| l == pid.to_string())),
        "init {pid} is not in the /cordon/{id} cgroup"
    );
    let out = env.cordon(&["delete", &id]);
    assert_fails(&out, &[&id]);
    assert_eq!(status(&env, &id), "running", "a failed delete changed the container");

    ok(&env.cordon(&["delete", "--force", &id]));
    assert_fails(&env.cordon(&["state", &id]), &["does not exist"]);
    wait_for("the init to be gone", || {
        if alive(pid) {
            Err(format!("{pid} alive"))
        } else {
            Ok(())
        }
    });
    assert_clean(&env, &id);
}

/// Poststop hooks: one that fails (and exits without reading its stdin)
/// and one that records that it ran.
fn failing_poststop_hooks(env: &mut Env, ran: &std::path::Path) {
    env.config["hooks"] = json!({"poststop": [
        {"path": "/bin/false"},
        {"path": "/bin/sh", "args": ["sh", "-c", format!("cat > {}", ran.display())]},
    ]});
}

/// The runtime spec: a failing poststop hook is logged as a warning and
/// the rest of the life cycle goes on. The container is always deletable.
#[test]
fn a_failing_poststop_hook_does_not_stop_delete() {
    let dir = TempDir::new("poststop");
    let ran = dir.path().join("ran");
    let mut env = Env::busybox(&["probe", "sleep", "30"]);
    failing_poststop_hooks(&mut env, &ran);
    let id = unique("poststop");
    start_running(&env, &id);
    ok(&env.cordon(&["delete", "--force", &id]));
    assert!(ran.exists(), "the hook after the failing one did not run");
    assert_clean(&env, &id);
}

/// `run` deletes its container once the process exits: a failing poststop
/// hook does not leave it behind (nor its supervisor).
#[test]
fn a_run_with_a_failing_poststop_hook_leaves_nothing() {
    let dir = TempDir::new("poststop");
    let ran = dir.path().join("ran");
    let mut env = Env::busybox(&["true"]);
    failing_poststop_hooks(&mut env, &ran);
    let id = unique("runpoststop");
    ok(&env.run(&id));
    assert!(ran.exists(), "the hook after the failing one did not run");
    assert_clean(&env, &id);
}

/// A create that fails in the container's set-up, after the supervisor
/// started, says in one line which mount failed and with which errno (as
/// runc does), and leaves no state, supervisor or cgroup.
#[test]
fn a_create_that_fails_in_set_up_names_the_mount_and_leaves_nothing() {
    let mut env = Env::busybox(&["true"]);
    add_mount(
        &mut env,
        json!({"destination": "/mnt/bad", "type": "tmpfs", "source": "tmpfs", "options": ["size=abc"]}),
    );
    let id = unique("failsetup");
    assert_fails(&env.create(&id), &[&id, "mount /mnt/bad", "EINVAL"]);
    assert_clean(&env, &id);
}

/// A set-up step that fails inside the container process names its step
/// and errno, not "failed syscall".
#[test]
fn a_set_up_step_that_fails_names_the_step_and_errno() {
    let mut env = Env::busybox(&["true"]);
    env.config["process"]["cwd"] = json!("/etc/passwd");
    let id = unique("failcwd");
    assert_fails(&env.run(&id), &[&id, "chdir", "ENOTDIR"]);
    assert_clean(&env, &id);

    // The same step of an exec'd process.
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("failcwd");
    start_running(&env, &id);
    assert_fails(
        &env.cordon(&["exec", "--cwd", "/etc/passwd", &id, "true"]),
        &[&id, "chdir", "ENOTDIR"],
    );
}

/// A program whose execve fails (a script with a missing interpreter)
/// says why on the process's stderr, as runc's init does.
#[test]
fn a_failed_execve_says_why() {
    let dir = TempDir::new("badscript");
    let script = dir.path().join("bad.sh");
    fs::write(&script, "#!/no/such/interpreter\n").unwrap();
    fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut env = Env::busybox(&["/mnt/bad.sh"]);
    add_mount(
        &mut env,
        json!({"destination": "/mnt/bad.sh", "type": "bind", "source": script, "options": ["rbind", "ro"]}),
    );
    let id = unique("badexec");
    assert_fails(&env.run(&id), &["exec /mnt/bad.sh", "ENOENT"]);
    assert_clean(&env, &id);
}

/// Lowering oomScoreAdj needs CAP_SYS_RESOURCE, which the runtime lacks
/// here: refused up front naming the field.
#[test]
fn an_oom_score_adj_below_the_runtimes_fails_naming_the_field() {
    let own: i32 = fs::read_to_string("/proc/self/oom_score_adj")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let eff = status.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap().trim();
    if own <= -1000 || u64::from_str_radix(eff, 16).unwrap() & (1 << 24) != 0 {
        eprintln!("CAP_SYS_RESOURCE held or oom_score_adj at its minimum: nothing to check");
        return;
    }
    let mut env = Env::busybox(&["true"]);
    env.config["process"]["oomScoreAdj"] = json!(own - 1);
    let id = unique("oomadj");
    assert_fails(&env.run(&id), &["process.oomScoreAdj", "CAP_SYS_RESOURCE"]);
    assert_clean(&env, &id);
}

/// A supervisor ends once no process of its container can run again: the
/// init of a created container was killed before `start`. Until then (a
/// created container waiting for `start`) it stays.
#[test]
fn the_supervisor_exits_when_a_created_init_dies() {
    let env = Env::busybox(&["true"]);
    let id = unique("initdies");
    create(&env, &id);
    let sup = supervisor_pid(env.root.path(), &id).expect("a supervisor");
    assert!(alive(sup), "the supervisor of a created container is gone");
    let pid = state_pid(&env, &id);
    // SAFETY: kill(2) with a pid and a signal number touches no memory.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0, "kill {pid}");
    wait_status(&env, &id, "stopped");
    wait_for("the supervisor to exit", || {
        if alive(sup) {
            Err(format!("{sup} alive"))
        } else {
            Ok(())
        }
    });
    ok(&env.cordon(&["delete", &id]));
    assert_clean(&env, &id);
}

/// A supervisor ends when its state directory is removed (a harness's
/// `rm -rf` of `--root`); its watchdog then ends the container.
#[test]
fn the_supervisor_exits_when_its_state_directory_is_removed() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("rmroot");
    start_running(&env, &id);
    let sup = supervisor_pid(env.root.path(), &id).expect("a supervisor");
    let pid = state_pid(&env, &id);
    fs::remove_dir_all(env.root.path()).unwrap();
    wait_for("the supervisor and the init to exit", || {
        let left: Vec<i32> = [sup, pid].into_iter().filter(|p| alive(*p)).collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{left:?} alive"))
        }
    });
    // Nothing knows the container now: remove its cgroup as a harness would.
    let find = Command::new("find")
        .args(["/sys/fs/cgroup", "-maxdepth", "4", "-depth", "-type", "d", "-name", &id])
        .output()
        .unwrap();
    for dir in String::from_utf8_lossy(&find.stdout).lines() {
        wait_for(&format!("rmdir {dir}"), || {
            fs::remove_dir(dir).map_err(|e| e.to_string())
        });
    }
}

// ---------------------------------------------------------------------------
// the bundle's own seccomp profile
// ---------------------------------------------------------------------------

/// Puts `tests/lifecycle/seccomp/<file>` in the config as `linux.seccomp`:
/// `runtime-tools-allowlist.json` is what the OCI runtime-tools generator
/// writes in every config (an allow-list without `pidfd_open`);
/// `docker-default.json` reproduces the structure of moby's default
/// profile as Docker resolves it into config.json for a container without
/// extra capabilities (defaultErrnoRet 1, an allow-list whose newest entries
/// are landlock, memfd_secret, process_mrelease and futex_waitv, the
/// personality and clone argument rules, clone3 answered ENOSYS).
fn with_profile(env: &mut Env, file: &str) {
    let path = repo().join("tests/lifecycle/seccomp").join(file);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    env.config["linux"]["seccomp"] = serde_json::from_str(&text).unwrap();
}

/// The errno lines `probe syscall NR` prints for `nrs`, from `runtime run`
/// (`cordon` or `runc`) of `env`'s bundle.
fn errnos_under(env: &Env, runtime: &str, nrs: &[u32]) -> Vec<String> {
    let script: Vec<String> = nrs.iter().map(|n| format!("probe syscall {n}")).collect();
    let mut env_cfg = env.config.clone();
    env_cfg["process"]["args"] = json!(["sh", "-c", script.join("; ")]);
    fs::write(
        env.bundle.path().join("config.json"),
        serde_json::to_vec_pretty(&env_cfg).unwrap(),
    )
    .unwrap();
    let id = unique("profile");
    let out = if runtime == "runc" {
        let root = TempDir::new("runc-root");
        Command::new("runc")
            .arg("--root")
            .arg(root.path())
            .args(["run", "-b", &bundle(env), &id])
            .stdin(Stdio::null())
            .output()
            .expect("run runc")
    } else {
        env.cordon(&["run", "-b", &bundle(env), &id])
    };
    assert!(out.status.success(), "{runtime}: {}{}", stdout(&out), stderr(&out));
    stdout(&out).lines().map(str::to_string).collect()
}

/// The case of an allow-list profile without `pidfd_open` (cordon's
/// handshake needs it): the container runs, with the profile in force
/// (pidfd_open refused with its default EPERM) and cordon's policy too (the
/// emulated uname).
#[test]
fn a_bundle_allow_list_profile_does_not_break_the_handshake() {
    let mut env = Env::busybox(&["true"]);
    with_profile(&mut env, "runtime-tools-allowlist.json");
    let id = unique("allowlist");
    run_ok(&env, &id);
    assert_clean(&env, &id);

    env.config["process"]["args"] = json!(["sh", "-c", "probe syscall 434 1 0; probe uname"]);
    let id = unique("allowlist");
    let out = run_ok(&env, &id);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "err EPERM", "pidfd_open: {out}");
    assert!(lines[1].contains("6.1.0-cordon"), "uname not emulated: {out}");

    // exec'd processes get the profile too.
    env.config["process"]["args"] = json!(["sleep", "30"]);
    let id = unique("allowlist");
    start_running(&env, &id);
    let out = ok(&env.cordon(&["exec", &id, "probe", "syscall", "434", "1", "0"]));
    assert_eq!(out.trim(), "err EPERM");
}

/// Under the same profile cordon gives what runc 1.1.5 gives (both run
/// side by side): with Docker's default profile clone3 ENOSYS (the
/// profile's own rule), io_uring_setup EPERM (not listed: the default
/// errno), mseal (462) ENOSYS (newer than the newest syscall the profile
/// names: runc's stub), fchmodat2 (452) whatever runc's libseccomp makes of
/// it; with the runtime-tools allow-list (newest: landlock_restrict_self,
/// 446) pidfd_open and clone3 EPERM, fchmodat2 and mseal ENOSYS.
#[test]
fn bundle_profile_errnos_match_runc() {
    let mut env = Env::busybox(&[]);
    with_profile(&mut env, "docker-default.json");
    let nrs = [435, 425, 452, 462, 39];
    let runc = errnos_under(&env, "runc", &nrs);
    let cordon = errnos_under(&env, "cordon", &nrs);
    assert_eq!(
        cordon, runc,
        "Docker's profile: clone3, io_uring_setup, fchmodat2, mseal, getpid"
    );
    assert_eq!(
        [&runc[0], &runc[1], &runc[3]],
        ["err ENOSYS", "err EPERM", "err ENOSYS"],
        "{runc:?}"
    );

    with_profile(&mut env, "runtime-tools-allowlist.json");
    let nrs = [434, 435, 452, 462, 39];
    let runc = errnos_under(&env, "runc", &nrs);
    let cordon = errnos_under(&env, "cordon", &nrs);
    assert_eq!(cordon, runc, "allow-list: pidfd_open, clone3, fchmodat2, mseal, getpid");
    assert_eq!(
        runc[..4],
        ["err EPERM", "err EPERM", "err ENOSYS", "err ENOSYS"],
        "{runc:?}"
    );
}

/// A profile cordon cannot honour is refused naming the field, before
/// anything is created.
#[test]
fn an_unsupported_profile_flag_is_refused_naming_it() {
    let mut env = Env::busybox(&["true"]);
    with_profile(&mut env, "runtime-tools-allowlist.json");
    env.config["linux"]["seccomp"]["flags"] = json!(["SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"]);
    let id = unique("profileflag");
    assert_fails(&env.run(&id), &["linux.seccomp.flags", "WAIT_KILLABLE_RECV"]);
    assert_clean(&env, &id);
}

// ---------------------------------------------------------------------------
// exec
// ---------------------------------------------------------------------------

/// A container without noNewPrivileges (Docker's default) and an exec
/// whose process file (as `docker exec` writes it) has Docker's
/// capabilities, none of them CAP_SYS_ADMIN: the exec runs (cordon lends
/// CAP_SYS_ADMIN to install its filter, then drops it), without
/// no_new_privs and with exactly the file's capabilities.
#[test]
fn exec_with_a_process_file_and_no_no_new_privs() {
    let mut env = Env::busybox(&["probe", "sleep", "30"]);
    env.config["process"]["noNewPrivileges"] = json!(false);
    let id = unique("exec-nnp");
    start_running(&env, &id);
    let caps = [
        "CAP_CHOWN",
        "CAP_KILL",
        "CAP_SETUID",
        "CAP_SETGID",
        "CAP_NET_BIND_SERVICE",
    ];
    let mut process = env.config["process"].clone();
    process["args"] = json!(["sh", "-c", "grep -E 'NoNewPrivs|CapEff' /proc/self/status"]);
    process["noNewPrivileges"] = json!(false);
    process["capabilities"] = json!({"bounding": caps, "effective": caps, "permitted": caps});
    let file = env.bundle.path().join("exec-process.json");
    std::fs::write(&file, serde_json::to_vec(&process).unwrap()).unwrap();
    let out = env.cordon(&["exec", "--process", &file.to_string_lossy(), &id]);
    let text = ok(&out);
    // CHOWN 0, KILL 5, SETGID 6, SETUID 7, NET_BIND_SERVICE 10.
    assert_eq!(text, "CapEff:\t00000000000004e1\nNoNewPrivs:\t0\n", "{text}");
    let _ = env.cordon(&["delete", "--force", &id]);
}

#[test]
fn exec_prints_and_propagates_the_exit_code() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("exec");
    start_running(&env, &id);
    let out = env.cordon(&["exec", &id, "sh", "-c", "echo hi"]);
    assert_eq!(ok(&out), "hi\n");
    let out = env.cordon(&["exec", &id, "sh", "-c", "echo bye; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "bye\n");
    let out = env.cordon(&["exec", &id, "sh", "-c", "echo $$; cat /proc/1/cmdline | tr '\\0' ' '"]);
    let text = ok(&out);
    let mut lines = text.lines();
    assert_ne!(lines.next(), Some("1"), "exec'd process is not init");
    assert_eq!(
        lines.next(),
        Some("probe sleep 30 "),
        "exec did not join the container's pid namespace"
    );
    assert_eq!(status(&env, &id), "running");
}

/// runc's exec flags cordon cannot honour are refused in one line naming
/// the flag, not ignored; `--no-new-privs` (always on under cordon) is
/// accepted.
#[test]
fn exec_refuses_the_flags_it_cannot_honour() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("execflags");
    start_running(&env, &id);
    for (flag, value, says) in [
        ("--apparmor", "unconfined", "AppArmor profiles are not supported"),
        (
            "--process-label",
            "system_u:system_r:container_t:s0",
            "SELinux labels are not supported",
        ),
        ("--cgroup", "sub", "sub-cgroup is not supported"),
    ] {
        let out = env.cordon(&["exec", flag, value, &id, "true"]);
        assert_fails(&out, &[&format!("exec {flag}"), says]);
    }
    let out = env.cordon(&["exec", "--ignore-paused", &id, "true"]);
    assert_fails(&out, &["exec --ignore-paused", "not supported"]);
    let out = env.cordon(&[
        "exec",
        "--no-new-privs",
        &id,
        "sh",
        "-c",
        "grep NoNewPrivs /proc/self/status",
    ]);
    assert_eq!(ok(&out).split_whitespace().collect::<Vec<_>>(), ["NoNewPrivs:", "1"]);
    assert_eq!(status(&env, &id), "running");
}

/// A capability the host's bounding set lacks (CAP_SYS_RESOURCE here):
/// exec fails naming the step, as runc's "unable to apply caps", and the
/// capability.
#[test]
fn exec_with_a_capability_the_host_lacks_names_it() {
    let bounding = caps_bounding();
    if bounding & (1 << 24) != 0 {
        eprintln!("CAP_SYS_RESOURCE is in the bounding set: nothing to check");
        return;
    }
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("execcap");
    start_running(&env, &id);
    let out = env.cordon(&["exec", "--cap", "CAP_SYS_RESOURCE", &id, "true"]);
    assert_fails(
        &out,
        &[
            "unable to apply caps",
            "EPERM",
            "CAP_SYS_RESOURCE is not in the runtime's bounding set",
        ],
    );
    assert_eq!(status(&env, &id), "running");
}

/// The same for a container whose config asks for it: run fails naming
/// the step and the capability, and leaves nothing behind.
#[test]
fn run_with_a_capability_the_host_lacks_names_it() {
    if caps_bounding() & (1 << 24) != 0 {
        eprintln!("CAP_SYS_RESOURCE is in the bounding set: nothing to check");
        return;
    }
    let mut env = Env::busybox(&["true"]);
    for set in ["bounding", "effective", "permitted"] {
        let caps = env.config["process"]["capabilities"][set]
            .as_array_mut()
            .expect("capabilities");
        caps.push("CAP_SYS_RESOURCE".into());
    }
    env.write();
    let id = unique("runcap");
    assert_fails(
        &env.run(&id),
        &[
            "unable to apply caps",
            "EPERM",
            "CAP_SYS_RESOURCE is not in the runtime's bounding set",
        ],
    );
    assert_clean(&env, &id);
}

/// CapBnd of this process, from /proc/self/status.
fn caps_bounding() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .expect("CapBnd in /proc/self/status")
        .trim();
    u64::from_str_radix(hex, 16).unwrap()
}

#[test]
fn exec_with_env_cwd_and_user() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("execopts");
    start_running(&env, &id);
    let out = env.cordon(&[
        "exec",
        "--env",
        "FOO=bar",
        "--cwd",
        "/tmp",
        "--user",
        "1000:1000",
        &id,
        "sh",
        "-c",
        "echo $FOO; pwd; id -u; id -g",
    ]);
    assert_eq!(ok(&out), "bar\n/tmp\n1000\n1000\n");
}

#[test]
fn exec_with_a_tty_through_the_console_socket() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("exectty");
    start_running(&env, &id);
    let console = Console::new();
    let sock = console.path();
    let (st, log) = cordon_logged(
        &env,
        &[
            "exec",
            "-d",
            "-t",
            "--console-socket",
            &sock,
            &id,
            "sh",
            "-c",
            "tty; echo hi-from-tty",
        ],
    );
    assert!(st.success(), "exec -t: {st}; stderr: {}", log.stderr());
    let text = console.output();
    assert!(text.contains("/dev/pts/0"), "tty output: {text:?}");
    assert!(text.contains("hi-from-tty"), "tty output: {text:?}");
}

#[test]
fn run_with_a_terminal_through_the_console_socket() {
    let mut env = Env::busybox(&["sh", "-c", "tty; echo hi-from-tty"]);
    env.config["process"]["terminal"] = json!(true);
    env.write();
    let id = unique("runtty");
    let console = Console::new();
    let (sock, b) = (console.path(), bundle(&env));
    let (st, log) = cordon_logged(&env, &["run", "-d", "--console-socket", &sock, "-b", &b, &id]);
    assert!(st.success(), "run -d with a terminal: {st}; stderr: {}", log.stderr());
    let text = console.output();
    assert!(text.contains("/dev/pts/0"), "tty output: {text:?}");
    assert!(text.contains("hi-from-tty"), "tty output: {text:?}");
    wait_status(&env, &id, "stopped");
    ok(&env.cordon(&["delete", &id]));
    assert_clean(&env, &id);
}

// ---------------------------------------------------------------------------
// pause, ps, list, update
// ---------------------------------------------------------------------------

#[test]
fn pause_and_resume() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("pause");
    start_running(&env, &id);
    ok(&env.cordon(&["pause", &id]));
    assert_eq!(status(&env, &id), "paused");
    if let Some(f) = cgroup_read(&id, "freezer", "freezer.state", "cgroup.freeze") {
        assert!(f == "FROZEN" || f == "1", "freezer says {f:?} for a paused container");
    }
    ok(&env.cordon(&["resume", &id]));
    assert_eq!(status(&env, &id), "running");
    if let Some(f) = cgroup_read(&id, "freezer", "freezer.state", "cgroup.freeze") {
        assert!(f == "THAWED" || f == "0", "freezer says {f:?} for a resumed container");
    }
    // Still alive and killable after the thaw.
    ok(&env.cordon(&["kill", &id, "KILL"]));
    wait_status(&env, &id, "stopped");
}

#[test]
fn ps_json_lists_the_init_host_pid() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("ps");
    start_running(&env, &id);
    let pid = state_pid(&env, &id);
    assert_eq!(ps_pids(&env, &id), [pid]);
}

#[test]
fn list_json_and_quiet() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let a = unique("list-a");
    let b = unique("list-b");
    start_running(&env, &a);
    create(&env, &b);

    let quiet = ok(&env.cordon(&["list", "-q"]));
    let mut ids: Vec<&str> = quiet.lines().collect();
    ids.sort();
    assert_eq!(ids, [a.as_str(), b.as_str()], "list -q: {quiet:?}");

    let out = ok(&env.cordon(&["list", "--format", "json"]));
    let list: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("list json {out:?}: {e}"));
    let list = list.as_array().expect("list --format json is an array");
    assert_eq!(list.len(), 2, "{out}");
    let find = |id: &str| {
        list.iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("{id} not in {out}"))
            .clone()
    };
    let ca = find(&a);
    assert_eq!(ca["status"], "running");
    assert_eq!(ca["pid"].as_i64(), Some(state_pid(&env, &a) as i64));
    assert_eq!(
        ca["bundle"],
        fs::canonicalize(env.bundle.path()).unwrap().to_string_lossy().as_ref()
    );
    let cb = find(&b);
    assert_eq!(cb["status"], "created");
}

#[test]
fn update_pids_and_memory_flags_change_the_cgroup() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("update");
    start_running(&env, &id);

    ok(&env.cordon(&["update", "--pids-limit", "42", &id]));
    assert_eq!(cgroup_read(&id, "pids", "pids.max", "pids.max").as_deref(), Some("42"));

    ok(&env.cordon(&["update", "--memory", "67108864", &id]));
    assert_eq!(
        cgroup_read(&id, "memory", "memory.limit_in_bytes", "memory.max").as_deref(),
        Some("67108864")
    );
    // The pids limit is untouched by a memory update.
    assert_eq!(cgroup_read(&id, "pids", "pids.max", "pids.max").as_deref(), Some("42"));
}

/// `memory.disableOOMKiller` reaches the cgroup as runc writes it (v1
/// `memory.oom_control`; cgroup v2 has no such switch, and runc ignores
/// it there too).
#[test]
fn disable_oom_killer_reaches_the_memory_cgroup() {
    let mut env = Env::busybox(&["probe", "sleep", "30"]);
    env.config["linux"]["resources"]["memory"] = json!({"limit": 67108864, "disableOOMKiller": true});
    let id = unique("oomctl");
    start_running(&env, &id);
    match cgroup_read(&id, "memory", "memory.oom_control", "memory.oom_control") {
        Some(text) => assert!(
            text.lines().any(|l| l == "oom_kill_disable 1"),
            "memory.oom_control: {text}"
        ),
        None => assert!(
            !Path::new("/sys/fs/cgroup/memory").exists(),
            "no memory.oom_control for {id} on a cgroup v1 host"
        ),
    }
}

/// Flags cordon cannot honour are refused; the others take effect on their
/// own (`--cpuset-mems` without another cpu flag).
#[test]
fn update_refuses_intel_rdt_and_applies_cpuset_mems_alone() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("updrdt");
    start_running(&env, &id);
    let out = env.cordon(&["update", "--l3-cache-schema", "L3:0=f", &id]);
    assert_fails(&out, &["update --l3-cache-schema", "Intel RDT is not supported"]);
    let out = env.cordon(&["update", "--mem-bw-schema", "MB:0=50", &id]);
    assert_fails(&out, &["update --mem-bw-schema", "Intel RDT is not supported"]);
    // A memory node no machine has: the kernel refuses it, so the flag
    // reached the cgroup (it was once dropped without another cpu flag).
    let out = env.cordon(&["update", "--cpuset-mems", "1000", &id]);
    assert_fails(&out, &["update"]);
    ok(&env.cordon(&["update", "--cpuset-mems", "0", &id]));
}

#[test]
fn update_resources_from_stdin() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("updstdin");
    start_running(&env, &id);
    let out = cordon_stdin(
        &env,
        &["update", "--resources", "-", &id],
        r#"{"pids":{"limit":43},"memory":{"limit":33554432}}"#,
    );
    ok(&out);
    assert_eq!(cgroup_read(&id, "pids", "pids.max", "pids.max").as_deref(), Some("43"));
    assert_eq!(
        cgroup_read(&id, "memory", "memory.limit_in_bytes", "memory.max").as_deref(),
        Some("33554432")
    );

    let out = cordon_stdin(&env, &["update", "--resources", "-", &id], "{ not json");
    assert_fails(&out, &["--resources"]);
    assert_eq!(cgroup_read(&id, "pids", "pids.max", "pids.max").as_deref(), Some("43"));
}

// ---------------------------------------------------------------------------
// hooks
// ---------------------------------------------------------------------------

const HOOKS: &[(&str, &str)] = &[
    ("createRuntime", "creating"),
    ("prestart", "creating"),
    ("poststart", "running"),
    ("poststop", "stopped"),
];

/// Runs a container with a `cat > DIR/<hook>.json` hook of every kind in
/// [`HOOKS`]; returns what each hook received.
fn run_with_hooks(id: &str, cgroups_path: bool) -> (Env, Vec<(String, String, Value)>) {
    let dir = TempDir::new("hooks");
    let mut env = Env::busybox(&["probe", "exit", "0"]);
    let mut hooks = json!({});
    for (name, _) in HOOKS {
        let file = dir.path().join(format!("{name}.json"));
        hooks[*name] = json!([{
            "path": "/bin/sh",
            "args": ["sh", "-c", format!("cat > {}", file.display())],
            "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
        }]);
    }
    env.config["hooks"] = hooks;
    // As engines do: with an explicit cgroupsPath cordon builds from the
    // user's bundle itself; without one it builds from its own copy of the
    // config with a default cgroupsPath.
    if cgroups_path {
        env.config["linux"]["cgroupsPath"] = json!(format!("/cordon-hooks/{id}"));
    }
    ok(&env.run(id));
    let got = HOOKS
        .iter()
        .map(|(name, status)| {
            let file = dir.path().join(format!("{name}.json"));
            let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{name} hook did not run ({e})"));
            let v: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} hook stdin is not JSON ({e}): {text:?}"));
            (name.to_string(), status.to_string(), v)
        })
        .collect();
    (env, got)
}

#[test]
fn hooks_receive_the_state_on_stdin() {
    let id = unique("hooks");
    let (env, got) = run_with_hooks(&id, true);
    for (name, status, v) in &got {
        assert_eq!(v["id"], id.as_str(), "{name}: {v}");
        assert_eq!(v["status"], status.as_str(), "{name}: {v}");
        assert!(
            v["ociVersion"].as_str().is_some_and(|s| s.starts_with("1.")),
            "{name}: {v}"
        );
        if name != "poststop" {
            assert!(v["pid"].as_i64().unwrap_or(0) > 0, "{name}: no pid: {v}");
        }
    }
    assert_clean(&env, &id);
}

#[test]
fn hook_state_names_the_users_bundle() {
    // With the user's cgroupsPath, and with none (cordon then builds from
    // its own copy of the config): the same bundle either way.
    for cgroups_path in [true, false] {
        let id = unique("hookbundle");
        let (env, got) = run_with_hooks(&id, cgroups_path);
        let b = fs::canonicalize(env.bundle.path()).unwrap();
        for (name, _, v) in &got {
            assert_eq!(
                v["bundle"],
                b.to_string_lossy().as_ref(),
                "{name} hook got the wrong bundle (cgroupsPath given: {cgroups_path}): {v}"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// bad input: non-zero, one line naming the culprit, nothing left behind
// ---------------------------------------------------------------------------

#[test]
fn bad_input_missing_bundle_dir() {
    let env = Env::busybox(&["true"]);
    let id = unique("nobundle");
    let missing = env.bundle.path().join("nope");
    let m = missing.to_string_lossy().into_owned();
    assert_fails(&env.cordon(&["create", "-b", &m, &id]), &[&m]);
    assert_clean(&env, &id);
    assert_fails(&env.cordon(&["run", "-b", &m, &id]), &[&m]);
    assert_clean(&env, &id);
}

#[test]
fn bad_input_missing_config_json() {
    let env = Env::busybox(&["true"]);
    let id = unique("noconfig");
    let b = bundle(&env); // never written
    assert_fails(&env.cordon(&["create", "-b", &b, &id]), &["config.json"]);
    assert_clean(&env, &id);
}

#[test]
fn bad_input_malformed_config_json() {
    let env = Env::busybox(&["true"]);
    let id = unique("badjson");
    fs::write(
        env.bundle.path().join("config.json"),
        "{ \"ociVersion\": \"1.0.2\", not json",
    )
    .unwrap();
    let b = bundle(&env);
    assert_fails(&env.cordon(&["create", "-b", &b, &id]), &["config.json"]);
    assert_clean(&env, &id);
}

#[test]
fn bad_input_wrong_type_names_the_field() {
    let mut env = Env::busybox(&["true"]);
    env.config["process"]["args"] = json!("sh -c true");
    let id = unique("badtype");
    assert_fails(&env.create(&id), &["process.args"]);
    assert_clean(&env, &id);
}

#[test]
fn bad_input_unsupported_oci_version() {
    let mut env = Env::busybox(&["true"]);
    env.config["ociVersion"] = json!("2.0.0");
    let id = unique("ociver");
    assert_fails(&env.create(&id), &["ociVersion", "2.0.0"]);
    assert_clean(&env, &id);
}

#[test]
fn bad_input_missing_rootfs() {
    let mut env = Env::busybox(&["true"]);
    env.config["root"]["path"] = json!(env.bundle.path().join("no-rootfs"));
    let id = unique("norootfs");
    assert_fails(&env.create(&id), &["root.path"]);
    assert_clean(&env, &id);
}

#[test]
fn bad_input_duplicate_id() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("dup");
    create(&env, &id);
    let pid = state_pid(&env, &id);
    let out = env.create(&id);
    assert_fails(&out, &["already exists", &id]);
    let s = env.state(&id);
    assert_eq!(s["status"], "created", "the first container was disturbed: {s}");
    assert_eq!(
        s["pid"].as_i64(),
        Some(pid as i64),
        "the first container was disturbed: {s}"
    );
    assert!(alive(pid));
    ok(&env.cordon(&["delete", "--force", &id]));
    assert_clean(&env, &id);
}

#[test]
fn bad_input_unknown_id() {
    let env = Env::busybox(&["true"]);
    let id = unique("ghost");
    for cmd in [
        vec!["state", id.as_str()],
        vec!["start", id.as_str()],
        vec!["kill", id.as_str()],
        vec!["kill", id.as_str(), "KILL"],
        vec!["delete", id.as_str()],
        vec!["pause", id.as_str()],
        vec!["exec", id.as_str(), "true"],
    ] {
        let out = env.cordon(&cmd);
        let line = assert_fails(&out, &["does not exist"]);
        assert!(line.contains(&id), "{cmd:?}: {line}");
    }
    assert_clean(&env, &id);
}

#[test]
fn bad_input_invalid_id() {
    let env = Env::busybox(&["true"]);
    let name = unique("escape");
    let bad = format!("../{name}");
    let b = bundle(&env);
    assert_fails(&env.cordon(&["create", "-b", &b, &bad]), &["invalid container id"]);
    assert_fails(&env.cordon(&["state", &bad]), &["invalid container id"]);
    assert_fails(&env.cordon(&["delete", "--force", &bad]), &["invalid container id"]);
    let outside = env.root.path().parent().unwrap().join(&name);
    assert!(!outside.exists(), "{} was created outside the root", outside.display());
    assert_clean(&env, &name);
}

/// A state.json that a killed create left empty (libcontainer had only
/// begun to write it): `delete --force` still removes the container, its
/// processes and its supervisor; `state` fails with one line.
#[test]
fn delete_force_removes_a_container_with_an_empty_state_file() {
    let env = Env::busybox(&["sleep", "60"]);
    let id = unique("torn");
    ok(&env.create(&id));
    std::fs::write(env.root.path().join(&id).join("state.json"), "").unwrap();
    assert_fails(&env.cordon(&["state", &id]), &[&id]);
    ok(&env.cordon(&["delete", "--force", &id]));
    wait_until("the container's processes to be gone", Duration::from_secs(10), || {
        let p = processes_of(&id);
        if p.is_empty() {
            Ok(())
        } else {
            Err(format!("{p:?}"))
        }
    });
    assert_clean(&env, &id);
}

/// An id naming cordon's own state directory (`<root>/.cordon`, which
/// holds every container's supervisor state) is refused by every command:
/// `delete --force .cordon` used to remove it, and with it the audit
/// trails and supervisors of the running containers.
#[test]
fn ids_naming_cordons_own_state_are_refused() {
    let env = Env::busybox(&["sleep", "60"]);
    let id = unique("kept");
    ok(&env.create(&id));
    let state = env.root.path().join(".cordon").join(&id);
    assert!(state.is_dir(), "{} missing", state.display());
    let b = bundle(&env);
    for bad in [".cordon", ".cordon-x"] {
        assert_fails(
            &env.cordon(&["delete", "--force", bad]),
            &["invalid container id", ".cordon"],
        );
        assert_fails(&env.cordon(&["state", bad]), &["invalid container id"]);
        assert_fails(&env.cordon(&["kill", bad, "9"]), &["invalid container id"]);
        assert_fails(&env.cordon(&["create", "-b", &b, bad]), &["invalid container id"]);
    }
    assert!(state.is_dir(), "another container's state was removed");
    assert_eq!(env.state(&id)["status"], "created");
    ok(&env.cordon(&["delete", "--force", &id]));
}

#[test]
fn bad_input_start_twice() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("twice");
    let log = start_running(&env, &id);
    let pid = state_pid(&env, &id);
    assert_fails(&env.cordon(&["start", &id]), &[&id]);
    let s = env.state(&id);
    assert_eq!(s["status"], "running", "{s}");
    assert_eq!(s["pid"].as_i64(), Some(pid as i64), "{s}");
    assert_eq!(log.stdout(), "", "the process ran twice or exited");
}

#[test]
fn bad_input_unknown_flag() {
    let env = Env::busybox(&["true"]);
    let id = unique("flag");
    env.write();
    let b = bundle(&env);
    let out = env.cordon(&["create", "--bogus", "-b", &b, &id]);
    assert!(!out.status.success(), "create --bogus succeeded");
    assert!(
        stderr(&out).contains("--bogus"),
        "stderr does not name the flag: {}",
        stderr(&out)
    );
    assert_clean(&env, &id);
}

// ---------------------------------------------------------------------------
// install and uninstall (the merging itself: unit tests in cli/install)
// ---------------------------------------------------------------------------

/// `cordon ARGS` as the user runs it.
fn cordon_plain(args: &[&str]) -> Output {
    Command::new(cordon_bin()).args(args).output().unwrap()
}

/// On Debian's config.toml: `--dry-run` prints the diff and writes
/// nothing, `--write` merges and keeps a backup, `uninstall` shows its diff
/// then gives the file back byte for byte and drops the backup; removing a
/// runtime that is not cordon's is refused in one line.
#[test]
fn install_dry_run_write_and_uninstall_from_the_command_line() {
    let dir = TempDir::new("install-cli");
    let config = dir.path().join("config.toml");
    let debian = fs::read_to_string(repo().join("runtime/tests/fixtures/install/containerd-debian12.toml")).unwrap();
    fs::write(&config, &debian).unwrap();
    let cfg = config.to_string_lossy().into_owned();
    let backup = dir.path().join("config.toml.before-cordon");

    let dry = ok(&cordon_plain(&["install", "containerd", "--config", &cfg, "--dry-run"]));
    assert!(dry.starts_with(&format!("--- {cfg}\n+++ {cfg}\n@@ ")), "{dry}");
    assert!(
        dry.contains("\n+[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.cordon]\n"),
        "{dry}"
    );
    assert_eq!(fs::read_to_string(&config).unwrap(), debian, "--dry-run wrote the file");

    let w = ok(&cordon_plain(&["install", "containerd", "--config", &cfg, "--write"]));
    assert!(w.contains("runtime \"cordon\" added"), "{w}");
    assert_eq!(fs::read_to_string(&backup).unwrap(), debian);
    let after = fs::read_to_string(&config).unwrap();
    let again = ok(&cordon_plain(&["install", "containerd", "--config", &cfg, "--write"]));
    assert!(again.contains("already configured"), "{again}");
    assert_eq!(fs::read_to_string(&config).unwrap(), after);

    let out = cordon_plain(&["uninstall", "containerd", "--config", &cfg, "--runtime", "runc"]);
    assert_fails(&out, &["runtime \"runc\" is not cordon's", "not removing it"]);
    let out = cordon_plain(&["install", "containerd", "--config", &cfg, "--write", "--dry-run"]);
    assert!(!out.status.success(), "--write with --dry-run should be refused");

    let dry = ok(&cordon_plain(&[
        "uninstall",
        "containerd",
        "--config",
        &cfg,
        "--dry-run",
    ]));
    assert!(dry.contains("\n-BinaryName = "), "{dry}");
    assert_eq!(fs::read_to_string(&config).unwrap(), after, "--dry-run wrote the file");
    ok(&cordon_plain(&["uninstall", "containerd", "--config", &cfg, "--write"]));
    assert_eq!(fs::read_to_string(&config).unwrap(), debian);
    assert!(!backup.exists(), "the backup should go with the restore");
    let none = ok(&cordon_plain(&["uninstall", "containerd", "--config", &cfg, "--write"]));
    assert!(none.contains("nothing to remove"), "{none}");
}

// ---------------------------------------------------------------------------
// version and spec
// ---------------------------------------------------------------------------

#[test]
fn version_flag_prints_a_version() {
    let out = Command::new(cordon_bin()).arg("--version").output().unwrap();
    let text = ok(&out);
    let first = text.lines().next().unwrap_or_default();
    assert_eq!(first, format!("cordon version {}", env!("CARGO_PKG_VERSION")));
    // As runc: the commit, the spec, then the libraries.
    let keys: Vec<&str> = text.lines().skip(1).filter_map(|l| l.split(": ").next()).collect();
    assert_eq!(keys, ["commit", "spec", "libcontainer", "libseccomp"], "{text}");
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}: ")))
            .unwrap_or_default()
            .to_string()
    };
    // The commit the binary was built from (or "unknown" without git).
    let commit = value("commit");
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{text}"
    );
    assert!(value("libcontainer").starts_with("0."), "{text}");
    let seccomp = value("libseccomp");
    assert!(
        seccomp.split('.').count() == 3 && seccomp.split('.').all(|p| p.parse::<u32>().is_ok()),
        "{text}"
    );
}

/// `features` lists every annotation cordon reads from a container's
/// config: each `org.cordon.*` key constant of the runtime's source, with
/// what it does.
#[test]
fn features_lists_every_annotation_cordon_reads() {
    let out = Command::new(cordon_bin()).arg("features").output().unwrap();
    let doc: Value = serde_json::from_str(&ok(&out)).expect("features JSON");
    let listed = doc["annotations"].as_object().expect("annotations");
    let mut read = Vec::new();
    let mut dirs = vec![cordon_tests::repo().join("runtime/src")];
    while let Some(dir) = dirs.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                for l in fs::read_to_string(&path).unwrap().lines() {
                    if let Some(rest) = l.split(": &str = \"org.cordon.").nth(1) {
                        let key = format!("org.cordon.{}", rest.trim_end_matches("\";"));
                        // Not the prefix, nor a pattern of keys.
                        if key != "org.cordon." && !key.contains('*') {
                            read.push(key);
                        }
                    }
                }
            }
        }
    }
    read.sort();
    read.dedup();
    assert!(read.len() >= 3, "annotation constants found: {read:?}");
    for key in &read {
        let says = listed.get(key).and_then(Value::as_str).unwrap_or_default();
        assert!(!says.is_empty(), "features does not list {key}: {listed:?}");
    }
    assert_eq!(listed["org.cordon.version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn spec_writes_a_config_that_run_accepts() {
    let dir = TempDir::new("spec");
    let out = Command::new(cordon_bin())
        .arg("spec")
        .current_dir(dir.path())
        .output()
        .unwrap();
    ok(&out);
    let text = fs::read_to_string(dir.path().join("config.json")).expect("spec wrote no config.json");
    let mut config: Value = serde_json::from_str(&text).expect("spec's config.json is JSON");
    assert!(
        config["ociVersion"].as_str().is_some_and(|v| v.starts_with("1.")),
        "{}",
        config["ociVersion"]
    );

    // A second spec does not overwrite it.
    let again = Command::new(cordon_bin())
        .arg("spec")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_fails(&again, &["config.json"]);
    assert_eq!(fs::read_to_string(dir.path().join("config.json")).unwrap(), text);

    // run accepts it as is, with only root.path pointed at the rootfs ...
    let rootfs = busybox_bundle().join("rootfs");
    config["root"]["path"] = json!(rootfs);
    let mut env = Env::busybox(&["true"]);
    env.config = config.clone();
    let id = unique("spec");
    let out = env.run(&id);
    assert!(out.status.success(), "run of the spec config: {}", stderr(&out));
    assert_clean(&env, &id);

    // ... and runs its process.
    config["process"]["args"] = json!(["sh", "-c", "echo spec-ok; hostname"]);
    env.config = config;
    let id = unique("spec");
    assert_eq!(run_ok(&env, &id), "spec-ok\ncordon\n");
    assert_clean(&env, &id);
}

#[test]
fn python_bundle_prints_2_plus_2() {
    // bundles/python's own config.json runs python3 -c 'print(2+2)'.
    let b = cordon_tests::python_bundle();
    let env = Env::python(&["python3", "-c", "print(2+2)"]);
    let root = env.root.path().to_string_lossy().into_owned();
    let out = cordon_tests::run_captured(
        std::process::Command::new(cordon_bin())
            .args(["--root", &root, "run", "-b"])
            .arg(&b)
            .arg(unique("py")),
    );
    assert_eq!(ok(&out).trim(), "4");
}

#[test]
fn events_stats_prints_cgroup_statistics() {
    let env = Env::busybox(&["probe", "sleep", "10"]);
    let id = unique("events");
    ok(&env.create(&id));
    ok(&env.cordon(&["start", &id]));
    let out = ok(&env.cordon(&["events", "--stats", &id]));
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("events --stats prints one JSON object");
    assert_eq!(v["type"], "stats", "{v}");
    assert!(v["data"]["pids"]["current"].as_u64().unwrap_or(0) >= 1, "{v}");
}

#[test]
fn long_state_root_and_64_character_id() {
    // Engines use long roots (Docker: /var/run/docker/runtime-runc/moby)
    // and 64-character ids; a unix socket path holds at most 107 bytes.
    let env = Env::busybox(&["uname", "-r"]);
    env.write();
    let root = env
        .root
        .path()
        .join("a-rather-long-state-root-directory/runtime-runc/moby/0123456789");
    let id = "0123456789abcdef".repeat(4);
    let b = env.bundle.path().to_string_lossy().into_owned();
    let out = cordon_tests::run_captured(
        Command::new(cordon_bin())
            .arg("--root")
            .arg(&root)
            .args(["run", "-b", &b, &id]),
    );
    assert_eq!(ok(&out).trim(), "6.1.0-cordon");
}

#[test]
fn json_log_ends_with_the_error_that_names_the_cause() {
    // containerd's runc shim shows its user the last "error" line of the log.
    let env = Env::busybox(&["true"]);
    let log = env.root.path().join("log.json");
    let missing = env.bundle.path().join("nope");
    let out = env.cordon(&[
        "--log",
        &log.to_string_lossy(),
        "--log-format",
        "json",
        "create",
        "--bundle",
        &missing.to_string_lossy(),
        &unique("logjson"),
    ]);
    assert!(!out.status.success());
    let text = fs::read_to_string(&log).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().expect("a log line")).unwrap();
    assert_eq!(last["level"], "error", "{last}");
    assert!(
        last["msg"].as_str().unwrap().contains(&*missing.to_string_lossy()),
        "{last}"
    );
    assert!(last["time"].as_str().is_some_and(|t| t.contains('T')), "{last}");
}

#[test]
fn ids_that_look_like_flags_and_closed_output_pipes() {
    let env = Env::busybox(&["true"]);
    env.write();
    let b = env.bundle.path().to_string_lossy().into_owned();
    // runc accepts ids starting with '-' after "--".
    ok(&env.cordon(&["run", "-b", &b, "--", "-x"]));
    assert!(stdout(&env.cordon(&["list", "-q"])).trim().is_empty());
    // A reader that goes away (| head) ends cordon quietly, without a panic.
    let root = env.root.path().to_string_lossy().into_owned();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' --root '{root}' syscalls | head -1",
            cordon_bin().display()
        ))
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("NR"));
}

/// A strict allow-list of 65 syscalls (what busybox `sh`, the probe and runc's
/// last steps before execve need;
/// no `pidfd_open`, which cordon's handshake uses), as a profile.
fn strict_allowlist() -> serde_json::Value {
    let names: [&str; 65] = [
        "read",
        "write",
        "open",
        "openat",
        "close",
        "stat",
        "fstat",
        "lstat",
        "newfstatat",
        "statx",
        "poll",
        "lseek",
        "mmap",
        "mprotect",
        "munmap",
        "mremap",
        "brk",
        "rt_sigaction",
        "rt_sigprocmask",
        "rt_sigreturn",
        "sigaltstack",
        "ioctl",
        "pread64",
        "readv",
        "writev",
        "access",
        "faccessat2",
        "pipe",
        "pipe2",
        "dup",
        "dup2",
        "dup3",
        "getpid",
        "getppid",
        "gettid",
        "clone",
        "fork",
        "vfork",
        "execve",
        "exit",
        "exit_group",
        "wait4",
        "kill",
        "uname",
        "fcntl",
        "getcwd",
        "chdir",
        "getuid",
        "getgid",
        "geteuid",
        "getegid",
        "getpgrp",
        "setpgid",
        "arch_prctl",
        "set_tid_address",
        "set_robust_list",
        "rseq",
        "prlimit64",
        "getrandom",
        "futex",
        "readlink",
        "getdents64",
        "clock_gettime",
        "fstatfs",
        "close_range",
    ];
    json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": [{"names": names.to_vec(), "action": "SCMP_ACT_ALLOW"}]
    })
}

/// Every profile cordon is tested with gives runc's errno for
/// io_uring_setup, fchmodat2 and a number no kernel has (runc 1.1.5's
/// ENOSYS stub, libseccomp's handling of names it does not know): Docker's
/// default (a fixture with moby's structure), podman's (containers-common,
/// installed with podman), the OCI runtime-tools generator's default and a
/// strict allow-list; and for clone3 and sendmmsg either runc's or the
/// ENOSYS of cordon's default policy, which refuses both itself (their
/// arguments are in memory BPF cannot read; docs/POLICY.md) where a profile
/// allows them.
#[test]
fn each_tested_profile_gives_runcs_errnos() {
    let podman = std::path::Path::new("/usr/share/containers/seccomp.json");
    let mut profiles: Vec<(&str, serde_json::Value)> = ["docker-default.json", "runtime-tools-allowlist.json"]
        .iter()
        .map(|f| {
            let text = fs::read_to_string(repo().join("tests/lifecycle/seccomp").join(f)).unwrap();
            (*f, serde_json::from_str(&text).unwrap())
        })
        .collect();
    profiles.push(("strict allow-list", strict_allowlist()));
    match fs::read_to_string(podman) {
        Ok(text) => profiles.push(("podman (containers-common)", serde_json::from_str(&text).unwrap())),
        Err(e) => eprintln!("{}: {e}: podman's profile not tested", podman.display()),
    }
    let nrs = [425, 452, 999, 435, 307];
    for (name, profile) in profiles {
        let mut env = Env::busybox(&[]);
        env.config["linux"]["seccomp"] = profile;
        let runc = errnos_under(&env, "runc", &nrs);
        let cordon = errnos_under(&env, "cordon", &nrs);
        assert_eq!(cordon[..3], runc[..3], "{name}: io_uring_setup, fchmodat2, 999");
        // clone3 and sendmmsg: the profile's verdict, or the default
        // policy's own ENOSYS where the profile allows them.
        for (i, call) in [(3, "clone3"), (4, "sendmmsg")] {
            assert!(
                cordon[i] == runc[i] || cordon[i] == "err ENOSYS",
                "{name}: {call} {} (runc {})",
                cordon[i],
                runc[i]
            );
        }
    }
}

// ---------------------------------------------------------------------------
// cordon's mounts never land on the host
// ---------------------------------------------------------------------------

/// The host's mounts a container could change: `/`, `/proc`, `/sys`,
/// `/dev`, `/etc` and below, and anything below the bundle's rootfs. Other
/// suites running at the same time mount elsewhere (overlay layers under
/// their state roots), so those lines are left out of the comparison.
fn host_mounts(rootfs: &str) -> std::collections::BTreeSet<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .filter(|l| {
            let point = l.split(' ').nth(4).unwrap_or("");
            point == "/"
                || ["/proc", "/sys", "/dev", "/etc", rootfs]
                    .iter()
                    .any(|p| point == *p || point.starts_with(&format!("{p}/")))
        })
        // Mount ids and parents stay; options are what a remount changes.
        .map(str::to_string)
        .collect()
}

/// Asserts the host's mounts `now` are `before`, showing what changed.
#[track_caller]
fn assert_same_mounts(before: &std::collections::BTreeSet<String>, now: &std::collections::BTreeSet<String>) {
    let gone: Vec<_> = before.difference(now).collect();
    let new: Vec<_> = now.difference(before).collect();
    assert!(
        gone.is_empty() && new.is_empty(),
        "the host's mounts changed:\ngone: {gone:#?}\nnew: {new:#?}"
    );
}

/// A busybox environment whose config.json gives the container no mount
/// namespace of its own (`ns`: `None`, or `Some(path)` to join one) and no
/// masked or read-only paths (libcontainer refuses those as runc does),
/// on a private copy of the rootfs in `copy` (libcontainer makes /dev's
/// defaults in the rootfs itself when it mounts nothing over /dev).
/// `mounts`: keep the bundle's mounts; without them nothing of the
/// bundle's is mounted (they would be made in the runtime's namespace, as
/// runc makes them, and stay there).
fn without_private_mount_ns(policy: &str, ns: Option<&str>, copy: &TempDir, mounts: bool) -> Env {
    let mut env = Env::busybox(&["true"]);
    env.set_policy(policy);
    let rootfs = copy.path().join("rootfs");
    let cp = Command::new("cp")
        .arg("-a")
        .arg(busybox_bundle().join("rootfs"))
        .arg(&rootfs)
        .status()
        .unwrap();
    assert!(cp.success(), "copy the busybox rootfs");
    env.config["root"]["path"] = rootfs.to_string_lossy().into_owned().into();
    let linux = &mut env.config["linux"];
    let mut namespaces: Vec<Value> = linux["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["type"] != "mount")
        .cloned()
        .collect();
    if let Some(path) = ns {
        namespaces.push(json!({"type": "mount", "path": path}));
    }
    linux["namespaces"] = namespaces.into();
    linux["maskedPaths"] = json!([]);
    linux["readonlyPaths"] = json!([]);
    if !mounts {
        env.config["mounts"] = json!([]);
    }
    env.config["root"]["readonly"] = false.into();
    env
}

/// A policy that needs mounts (default: masks and read-only binds below
/// the bundle's /proc and /sys, the /proc views) is refused for a
/// container without a mount namespace of its own, as runc refuses masked
/// paths, in one line naming the rule; nothing is left and the host's
/// mounts are unchanged. Joining an existing namespace by path is refused
/// the same way. Without the bundle's /proc mount the rules stay with the
/// supervisor, and the views are what is refused.
#[test]
fn policy_mounts_need_a_private_mount_namespace() {
    for (ns, mounts, what) in [
        (None, true, "path["),
        (Some("/proc/1/ns/mnt"), true, "path["),
        (None, false, "[views] proc"),
    ] {
        let copy = TempDir::new("rootfs");
        let env = without_private_mount_ns("default", ns, &copy, mounts);
        let rootfs = copy.path().join("rootfs").to_string_lossy().into_owned();
        let before = host_mounts(&rootfs);
        let id = unique("nomntns");
        let out = env.create(&id);
        let line = assert_fails(
            &out,
            &[
                "unable to restrict sys entries without a private MNT namespace",
                "policy \"default\"",
                what,
                "cannot be enforced",
            ],
        );
        match ns {
            None => assert!(line.contains("no \"mount\" entry"), "{line}"),
            Some(p) => assert!(line.contains(p), "{line}"),
        }
        assert_clean(&env, &id);
        env.assert_no_leftovers(&[&id]);
        assert_same_mounts(&before, &host_mounts(&rootfs));
    }
}

/// A policy that needs no mounts (permissive) is refused in the runtime's
/// own mount namespace too: libcontainer's set-up would mount there (the
/// rootfs bound over itself, `/` made rslave) and those mounts outlive the
/// container. Joining another mount namespace by path (here one a helper
/// process made) runs, and the host's mounts stay as they were.
#[test]
fn no_policy_mounts_still_no_runtime_mount_namespace() {
    for ns in [None, Some("/proc/self/ns/mnt")] {
        let copy = TempDir::new("rootfs");
        let env = without_private_mount_ns("permissive", ns, &copy, false);
        let rootfs = copy.path().join("rootfs").to_string_lossy().into_owned();
        let before = host_mounts(&rootfs);
        let id = unique("nomntns-perm");
        let out = env.run(&id);
        assert_fails(
            &out,
            &[
                "unable to create a container in the runtime's own mount namespace",
                "outlive the container",
            ],
        );
        assert_clean(&env, &id);
        assert_same_mounts(&before, &host_mounts(&rootfs));
    }
    // Another namespace: a process in a mount namespace of its own.
    let copy = TempDir::new("rootfs");
    let mut holder = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sleep", "60"])
        .spawn()
        .unwrap();
    let ns = format!("/proc/{}/ns/mnt", holder.id());
    wait_for("the helper's own mount namespace", || {
        let (a, b) = (fs::read_link(&ns), fs::read_link("/proc/self/ns/mnt"));
        match (a, b) {
            (Ok(a), Ok(b)) if a != b => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    let env = without_private_mount_ns("permissive", Some(&ns), &copy, false);
    let rootfs = copy.path().join("rootfs").to_string_lossy().into_owned();
    let before = host_mounts(&rootfs);
    let id = unique("nomntns-join");
    run_ok(&env, &id);
    assert_same_mounts(&before, &host_mounts(&rootfs));
    assert_clean(&env, &id);
    let _ = holder.kill();
    let _ = holder.wait();
}
