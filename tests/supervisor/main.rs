//! The supervisor and the default policy, seen from inside real containers:
//! errno values the probe gets, files it can or cannot open, connections
//! it can or cannot make, and the audit trail left behind.

use cordon_tests::*;
use serde_json::json;

/// Runs `script` with sh in the container of `env` (kept after exit, so
/// its audit trail can be read) and returns its stdout lines.
fn sh(env: &Env, id: &str, script: &str) -> Vec<String> {
    let mut config = env.config.clone();
    config["process"]["args"] = json!(["sh", "-c", script]);
    std::fs::write(
        env.bundle.path().join("config.json"),
        serde_json::to_vec_pretty(&config).unwrap(),
    )
    .unwrap();
    let b = env.bundle.path().to_string_lossy().into_owned();
    let out = env.cordon(&["run", "--keep", "-b", &b, id]);
    ok(&out).lines().map(str::to_string).collect()
}

/// Every syscall the default policy refuses unconditionally, with its errno,
/// from `cordon syscalls` (the same table the filter is compiled from).
fn refused_by_default() -> Vec<(u32, String, String)> {
    let out = std::process::Command::new(cordon_bin())
        .args(["syscalls", "--format", "json", "--policy", "default"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&ok(&out).into_bytes()).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            let action = e["action"].as_str()?;
            let errno = action.strip_prefix("deny (")?.strip_suffix(')')?;
            Some((
                e["nr"].as_u64()? as u32,
                e["name"].as_str()?.to_string(),
                errno.to_string(),
            ))
        })
        .collect()
}

#[test]
fn default_policy_refuses_in_bpf_with_the_right_errno() {
    let refused = refused_by_default();
    assert!(
        refused.len() > 40,
        "suspiciously few refused syscalls: {}",
        refused.len()
    );
    // Arguments are all zero: harmless if a refusal were missing.
    let script: String = refused
        .iter()
        .map(|(nr, _, _)| format!("probe syscall {nr};"))
        .collect();
    let env = Env::busybox(&[]);
    let id = unique("refuse");
    let lines = sh(&env, &id, &script);
    assert_eq!(lines.len(), refused.len(), "{lines:?}");
    for ((nr, name, errno), line) in refused.iter().zip(&lines) {
        assert_eq!(line, &format!("err {errno}"), "syscall {name} ({nr})");
    }
    // Refused in BPF: the supervisor never saw them.
    let audited: Vec<_> = env.audit(&id).into_iter().filter(|r| r["syscall"] == "bpf").collect();
    assert!(audited.is_empty(), "{audited:?}");
}

#[test]
fn unknown_numbers_and_other_entry_points_get_enosys() {
    let env = Env::busybox(&[]);
    let lines = sh(
        &env,
        &unique("enosys"),
        "probe syscall 9999; probe syscall 400; probe int80 20; probe int80 1 0 0; probe x32 39; probe syscall 39",
    );
    assert_eq!(lines[0], "err ENOSYS", "number above the table");
    assert_eq!(lines[1], "err ENOSYS", "hole in the table");
    assert_eq!(lines[2], "err ENOSYS", "i386 getpid through int 0x80");
    // i386 exit is allowed so 32-bit code can end: the probe process exits 0 silently.
    assert_eq!(lines[3], "err ENOSYS", "x32 getppid");
    assert!(lines[4].starts_with("ok "), "plain getppid works: {}", lines[4]);
}

/// Raw netlink sockets (how `ip` and if_nameindex() list interfaces) are
/// allowed by the default policy, with or without SOCK_CLOEXEC; SOCK_RAW
/// of other families stays refused.
#[test]
fn netlink_raw_sockets_are_allowed_by_default() {
    let env = Env::busybox(&[]);
    let lines = sh(
        &env,
        &unique("netlink"),
        "ip -o -4 addr show lo | cut -d' ' -f2; probe socket netlink raw; probe socket inet raw; probe socket inet6 raw",
    );
    assert_eq!(lines[0], "lo", "{lines:?}");
    assert!(lines[1].starts_with("ok"), "{lines:?}");
    assert_eq!(lines[2..], ["err EPERM", "err EPERM"], "{lines:?}");

    let env = Env::python(&[]);
    let lines = sh(
        &env,
        &unique("netlink"),
        "python3 -c 'import socket; print([n for _, n in socket.if_nameindex()])'",
    );
    assert_eq!(lines, ["['lo']"]);
}

#[test]
fn user_namespaces_and_mounts_are_refused() {
    let env = Env::busybox(&[]);
    let lines = sh(
        &env,
        &unique("ns"),
        "probe unshare-user; probe clone-newuser; probe clone3-newuser; probe mount; probe ptrace-parent; probe socket packet raw; probe socket inet raw",
    );
    assert_eq!(
        lines,
        [
            "err EPERM",
            "err EPERM",
            "err ENOSYS",
            "err EPERM",
            "err EPERM",
            "err EPERM",
            "err EPERM"
        ]
    );
}

/// `exec` runs under the policy the container was created with: a policy
/// file changed (or removed) afterwards changes nothing, for the exec'd
/// process's filter as for its supervisor.
#[test]
fn exec_keeps_the_policy_of_create() {
    let dir = TempDir::new("fixed-policy");
    let file = dir.path().join("p.toml");
    // sched_setaffinity(2) refused (taskset fails): what the created container's
    // policy says, and not the changed file's.
    std::fs::write(
        &file,
        "name = \"p\"\nextends = \"default\"\n[[syscall]]\nnames = [\"sched_setaffinity\"]\naction = \"deny\"\n",
    )
    .unwrap();
    let mut env = Env::busybox(&["sleep", "600"]);
    env.set_policy(&file.to_string_lossy());
    let id = unique("fixed-policy");
    ok(&env.create(&id));
    ok(&env.cordon(&["start", &id]));
    let probe = ["exec", &id, "sh", "-c", "taskset 1 true 2>/dev/null; echo $?"];
    assert_eq!(ok(&env.cordon(&probe)).trim(), "1", "exec under the file as created");
    std::fs::write(&file, "name = \"p\"\nextends = \"default\"\n").unwrap();
    assert_eq!(ok(&env.cordon(&probe)).trim(), "1", "exec under the changed file");
    std::fs::remove_file(&file).unwrap();
    assert_eq!(ok(&env.cordon(&probe)).trim(), "1", "exec without the file");
    ok(&env.cordon(&["delete", "--force", &id]));
}

#[test]
fn uname_shows_the_virtual_identity() {
    let mut env = Env::busybox(&[]);
    env.config["hostname"] = json!("sandbox-1");
    let lines = sh(&env, &unique("uname"), "probe uname; uname -r");
    assert_eq!(
        lines[0],
        "Linux|6.1.0-cordon|#1 SMP PREEMPT_DYNAMIC cordon|x86_64|sandbox-1"
    );
    assert_eq!(lines[1], "6.1.0-cordon");
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert!(!lines.iter().any(|l| l.contains(host.trim())), "host release leaked");
}

/// The emulated uname's domain name is config.json's `domainname` (the one
/// the kernel has in the container's UTS namespace), else the host's.
#[test]
fn uname_domainname_follows_the_spec() {
    let mut env = Env::busybox(&[]);
    env.config["domainname"] = json!("example.org");
    let lines = sh(
        &env,
        &unique("domain"),
        "probe domainname; cat /proc/sys/kernel/domainname",
    );
    assert_eq!(lines, ["example.org", "example.org"]);

    let env = Env::busybox(&[]);
    let host = std::fs::read_to_string("/proc/sys/kernel/domainname").unwrap();
    let lines = sh(&env, &unique("domain"), "probe domainname");
    assert_eq!(lines, [host.trim()]);
}

/// The emulated uname's nodename follows a sethostname inside (with
/// CAP_SYS_ADMIN), as the kernel's does and `/proc/sys/kernel/hostname`
/// shows; the release stays virtual. A process in a UTS namespace of its
/// own (unshare -u) sees its own name, and the container's processes
/// theirs again afterwards, whichever namespace the supervisor read last.
#[test]
fn uname_nodename_follows_sethostname() {
    let mut env = Env::busybox(&[]);
    env.config["hostname"] = json!("before");
    for set in ["bounding", "effective", "permitted"] {
        env.config["process"]["capabilities"][set]
            .as_array_mut()
            .unwrap()
            .push(json!("CAP_SYS_ADMIN"));
    }
    let lines = sh(
        &env,
        &unique("sethost"),
        "uname -n; hostname after; uname -n; cat /proc/sys/kernel/hostname; uname -r; \
         unshare -u sh -c 'hostname inner; uname -n'; uname -n",
    );
    assert_eq!(lines, ["before", "after", "after", "6.1.0-cordon", "inner", "after"]);
}

#[test]
fn sysinfo_reports_the_cgroup_memory_limit() {
    let mut env = Env::busybox(&[]);
    env.config["linux"]["resources"] = json!({"memory": {"limit": 268435456}});
    let lines = sh(&env, &unique("sysinfo"), "probe sysinfo");
    assert!(lines[0].starts_with("totalram=268435456 uptime="), "{}", lines[0]);
}

/// A world for file-policy tests: /secret (denied), /data (allowed, with
/// symlinks into /secret), /etc read-only, /work a writable tmpfs.
struct Files {
    env: Env,
    _host: TempDir,
}

fn files_env() -> Files {
    let host = TempDir::new("files");
    let secret = host.path().join("secret");
    let data = host.path().join("data");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(secret.join("key"), "TOPSECRET\n").unwrap();
    std::fs::write(data.join("ok.txt"), "fine\n").unwrap();
    std::os::unix::fs::symlink("/secret/key", data.join("abs-link")).unwrap();
    std::os::unix::fs::symlink("../../../../../secret/key", data.join("rel-link")).unwrap();
    std::os::unix::fs::symlink("ok.txt", data.join("good-link")).unwrap();
    std::os::unix::fs::symlink("/secret", data.join("dir-link")).unwrap();
    std::os::unix::fs::symlink("/secret/planted", data.join("dangling-secret")).unwrap();
    std::os::unix::fs::symlink("/work/created", data.join("dangling-ok")).unwrap();
    let policy = host.path().join("policy.toml");
    std::fs::write(
        &policy,
        "name = \"files\"\nextends = \"default\"\n\
         [[path]]\npattern = \"/secret/**\"\naccess = \"deny\"\n\
         [[path]]\npattern = \"/secret\"\naccess = \"deny\"\n\
         [[path]]\npattern = \"/etc/**\"\naccess = \"read-only\"\n\
         [[path]]\npattern = \"/work/vault/inner/**\"\naccess = \"deny\"\n\
         [[syscall]]\nnames = [\"stat\", \"lstat\", \"newfstatat\", \"statx\", \"access\", \"faccessat\", \
         \"faccessat2\", \"readlink\", \"readlinkat\", \"mkdir\", \"mkdirat\", \"unlink\", \"unlinkat\", \"rmdir\", \
         \"rename\", \"renameat\", \"renameat2\", \"link\", \"linkat\", \"symlink\", \"symlinkat\", \"chmod\", \
         \"fchmodat\", \"chown\", \"lchown\", \"fchownat\", \"truncate\", \"mknod\", \"mknodat\"]\naction = \"emulate\"\n",
    )
    .unwrap();
    let mut env = Env::busybox(&[]);
    env.set_policy(&policy.to_string_lossy());
    let mounts = env.config["mounts"].as_array_mut().unwrap();
    mounts.push(json!({"destination": "/secret", "type": "bind", "source": secret, "options": ["rbind", "rw"]}));
    mounts.push(json!({"destination": "/data", "type": "bind", "source": data, "options": ["rbind", "rw"]}));
    mounts.push(json!({"destination": "/work", "type": "tmpfs", "source": "tmpfs", "options": ["size=16m"]}));
    Files { env, _host: host }
}

#[test]
fn file_policy_denies_every_alias_of_a_denied_file() {
    let f = files_env();
    let id = unique("paths");
    let lines = sh(
        &f.env,
        &id,
        "probe read /secret/key; probe read /./secret//key; probe read /etc/../secret/key; \
         probe read /data/abs-link; probe read /data/rel-link; probe read /data/dir-link/key; \
         probe read /proc/self/root/secret/key; cd /secret && probe read key; cd /; \
         probe openat /data dir-link/key; probe openat / secret/key; probe open /secret rdonly,directory; \
         probe write /secret/new x; probe stat /secret/key; probe read /proc/self/cwd/etc/hostname; \
         probe open /proc/self/exe; probe read /proc/1/root/etc/hostname; \
         exec 4</etc; probe read /dev/fd/4/../secret/key; true",
    );
    let expect = [
        "err EACCES",
        "err EACCES",
        "err EACCES",
        "err EACCES",
        "err EACCES",
        "err EACCES",
        "err EACCES",
    ];
    assert_eq!(&lines[..7], &expect, "{lines:?}");
    // `cd /secret` itself is allowed (chdir cannot be emulated); the open is not.
    assert_eq!(lines[7], "err EACCES", "relative to cwd: {lines:?}");
    assert_eq!(
        lines[8], "err EACCES",
        "relative to a dirfd through a symlink: {lines:?}"
    );
    assert_eq!(lines[9], "err EACCES", "relative to a dirfd: {lines:?}");
    assert_eq!(lines[10], "err EACCES", "the directory itself: {lines:?}");
    assert_eq!(lines[11], "err EACCES", "creating in a denied directory: {lines:?}");
    assert!(
        !f._host.path().join("secret/new").exists(),
        "a denied create must not create the file"
    );
    assert_eq!(lines[13], "ok cordon", "/proc/self/cwd/...: {lines:?}");
    assert!(lines[14].starts_with("ok "), "/proc/self/exe opens: {lines:?}");
    assert_eq!(
        lines[15], "err ELOOP",
        "another process's root link stays refused: {lines:?}"
    );
    assert_eq!(lines[16], "err EACCES", "a path below a directory fd: {lines:?}");
    let denied: Vec<_> = f.env.audit(&id).into_iter().filter(|r| r["action"] == "deny").collect();
    assert!(denied.len() >= 11, "audit records the denials: {denied:?}");
    assert!(denied.iter().all(|r| r["result"] == "EACCES"));
    assert!(denied
        .iter()
        .any(|r| r["detail"].as_str().unwrap().starts_with("/secret/key")));
    // Each denial names the rule that decided, as `policy show` numbers it.
    let key = denied
        .iter()
        .find(|r| r["detail"].as_str().unwrap().starts_with("/secret/key"))
        .unwrap();
    assert_eq!(key["rule"], "path[0] \"/secret/**\" deny", "{key}");
    assert!(
        denied
            .iter()
            .all(|r| r["rule"].as_str().is_some_and(|r| r.starts_with("path["))),
        "{denied:?}"
    );
}

#[test]
fn file_policy_allows_the_rest_unchanged() {
    let f = files_env();
    let lines = sh(
        &f.env,
        &unique("allowed"),
        "probe read /data/ok.txt; probe read /data/good-link; cd /data && probe read ok.txt; cd /; \
         probe openat /data ok.txt; probe read /etc/hostname; probe write /etc/hostname x; \
         probe write /work/out hello; probe read /work/out; probe open /work/new wronly,creat,excl; \
         probe open /work/new wronly,creat,excl; echo piped | probe read /dev/stdin; probe read /proc/self/status; \
         exec 5</data; probe read /dev/fd/5/ok.txt",
    );
    assert_eq!(lines[0], "ok fine");
    assert_eq!(lines[1], "ok fine", "symlink that stays inside");
    assert_eq!(lines[2], "ok fine", "relative to cwd");
    assert!(lines[3].starts_with("ok "), "relative to a dirfd: {lines:?}");
    assert!(lines[4].starts_with("ok "), "read-only /etc is readable");
    assert_eq!(lines[5], "err EACCES", "read-only /etc is not writable");
    assert_eq!(lines[6], "ok 5");
    assert_eq!(lines[7], "ok hello");
    assert!(lines[8].starts_with("ok "), "O_CREAT|O_EXCL creates");
    assert_eq!(lines[9], "err EEXIST", "O_EXCL semantics kept");
    assert_eq!(lines[10], "ok piped", "/dev/stdin reopen");
    assert_eq!(lines[11], "ok Name:\tprobe");
    assert_eq!(lines[12], "ok fine", "a path below a directory fd: {lines:?}");
}

#[test]
fn racing_path_flips_never_open_the_denied_file() {
    let f = files_env();
    let lines = sh(
        &f.env,
        &unique("race"),
        "probe race-open /data/ok.txt /secret/key 100000",
    );
    let l = &lines[0];
    assert!(l.starts_with("opened_denied=0 "), "{l}");
    let opened: u64 = l
        .split("opened=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(opened > 0, "the race must really have opened the allowed file: {l}");
}

fn net_env() -> (Env, TempDir) {
    let host = TempDir::new("net");
    let policy = host.path().join("net.toml");
    std::fs::write(
        &policy,
        "name = \"net\"\nextends = \"default\"\n\
         [[net]]\ncidr = \"127.0.0.1/32\"\nports = [8081]\naction = \"deny\"\n\
         [[net]]\ncidr = \"127.0.0.2/32\"\naction = \"deny\"\n",
    )
    .unwrap();
    let mut env = Env::busybox(&[]);
    env.set_policy(&policy.to_string_lossy());
    (env, host)
}

#[test]
fn egress_policy_on_connect_sendto_sendmsg() {
    let (env, _h) = net_env();
    let id = unique("net");
    let lines = sh(
        &env,
        &id,
        "probe listen 8080 >/dev/null & probe listen 8081 >/dev/null & sleep 1; \
         probe connect 127.0.0.1 8080; probe connect 127.0.0.1 8081; probe connect 127.0.0.2 8080; \
         probe connect 169.254.169.254 80; probe udp 127.0.0.1 9; probe udp 127.0.0.2 9; \
         probe udpmsg 127.0.0.1 9; probe udpmsg 127.0.0.2 9; probe udpmsg 169.254.169.254 53; kill %1 %2",
    );
    assert_eq!(
        lines,
        [
            "ok",
            "err EPERM",
            "err EPERM",
            "err EPERM",
            "ok 4",
            "err EPERM",
            "ok 4",
            "err EPERM",
            "err EPERM"
        ],
        "per-port deny, per-address deny, metadata service, datagrams"
    );
    let audit = env.audit(&id);
    // The connects' records (the servers' binds are recorded too).
    let find = |d: &str| {
        audit
            .iter()
            .find(|r| r["syscall"] == "connect" && r["detail"].as_str().unwrap_or("").starts_with(d))
            .cloned()
    };
    let r = find("127.0.0.1:8081").expect("audit of the denied connect");
    assert_eq!(
        (r["syscall"].as_str(), r["action"].as_str(), r["result"].as_str()),
        (Some("connect"), Some("deny"), Some("EPERM"))
    );
    assert_eq!(r["rule"], "net[0] 127.0.0.1/32", "the rule that denied: {r}");
    let r = find("127.0.0.1:8080").expect("audit of the allowed connect");
    // The probe connects without blocking: the emulated connect keeps that.
    assert_eq!(r["result"], "EINPROGRESS");
}

/// The supervisor's work is charged to the container (cgroup v1): it
/// joins the container's `cpu` and `cpuacct` cgroups (so a container
/// limited to 0.1 CPU cannot make it burn a core), never its `freezer` or
/// `pids`.
#[test]
fn the_supervisors_cpu_is_the_containers() {
    let line = |pid: i32, controller: &str| -> Option<String> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        text.lines()
            .find(|l| {
                l.split(':')
                    .nth(1)
                    .is_some_and(|c| c.split(',').any(|c| c == controller))
            })
            .map(|l| l.split(':').nth(2).unwrap_or("").to_string())
    };
    if line(std::process::id() as i32, "cpu").is_none() {
        eprintln!("no cgroup v1 cpu hierarchy on this host: the supervisor stays in its own cgroup (docs/SECURITY.md)");
        return;
    }
    let mut env = Env::busybox(&["probe", "sleep", "60"]);
    env.config["linux"]["resources"]["cpu"] = serde_json::json!({"quota": 10000, "period": 100000});
    let id = unique("supcpu");
    ok(&env.create(&id));
    ok(&env.cordon(&["start", &id]));
    let init = env.state(&id)["pid"].as_i64().expect("init pid") as i32;
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.root.path().join(".cordon").join(&id).join("meta.json")).unwrap())
            .unwrap();
    let sup = meta["supervisor_pid"].as_i64().expect("supervisor pid") as i32;
    for controller in ["cpu", "cpuacct"] {
        let want = line(init, controller);
        wait_until(
            &format!("the supervisor in the container's {controller} cgroup"),
            std::time::Duration::from_secs(30),
            || {
                let got = line(sup, controller);
                if got == want {
                    Ok(())
                } else {
                    Err(format!("supervisor {got:?}, container {want:?}"))
                }
            },
        );
    }
    for controller in ["freezer", "pids"] {
        assert_ne!(line(sup, controller), line(init, controller), "{controller}");
    }
    ok(&env.cordon(&["delete", "--force", &id]));
    assert!(!cgroup_leaked(&id), "the container's cgroups are removed");
}

#[test]
fn killing_the_supervisor_kills_the_container() {
    let env = Env::busybox(&["probe", "sleep", "60"]);
    let id = unique("failclosed");
    ok(&env.create(&id));
    ok(&env.cordon(&["start", &id]));
    assert_eq!(env.state(&id)["status"], "running");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.root.path().join(".cordon").join(&id).join("meta.json")).unwrap())
            .unwrap();
    let sup = meta["supervisor_pid"].as_i64().expect("supervisor pid") as i32;
    // SAFETY: plain kill(2) of a pid we just read.
    assert_eq!(unsafe { libc::kill(sup, libc::SIGKILL) }, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if env.state(&id)["status"] == "stopped" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "container still running after its supervisor died"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn python_with_200_threads_of_intercepted_syscalls() {
    let script = "import os, threading\n\
        errors = []\n\
        def work(i):\n\
        \x20   try:\n\
        \x20       for _ in range(20):\n\
        \x20           assert os.uname().release == '6.1.0-cordon'\n\
        \x20           with open('/etc/os-release') as f: assert 'Debian' in f.read()\n\
        \x20   except Exception as e:\n\
        \x20       errors.append(repr(e))\n\
        ts = [threading.Thread(target=work, args=(i,)) for i in range(200)]\n\
        [t.start() for t in ts]; [t.join() for t in ts]\n\
        print('errors', len(errors), errors[:3])\n";
    let env = Env::python(&["python3", "-c", script]);
    let id = unique("py200");
    let out = ok(&env.run(&id));
    assert_eq!(out.trim(), "errors 0 []");
}

/// Issue #25: real-time signals reach their thread on every platform.
/// glibc sends SIGSETXID (33) to every other thread on setresgid/setuid in
/// a threaded process and waits on a futex until each has run it (CPython's
/// test_posix hung there under ptrace: the tracer lost the stops of
/// real-time signals); SIGRTMIN is sent to a waiting thread here too. Each
/// call sends them every time, so a lost stop hangs the program: the
/// timeout only detects that hang.
#[test]
fn real_time_signals_reach_every_thread() {
    let script = "import os, signal, threading\n\
        got = threading.Event(); stop = threading.Event()\n\
        signal.signal(signal.SIGRTMIN, lambda s, f: got.set())\n\
        ts = [threading.Thread(target=stop.wait) for _ in range(4)]\n\
        [t.start() for t in ts]\n\
        for _ in range(50):\n\
        \x20   os.setresgid(0, 0, 0); os.setuid(0)\n\
        signal.pthread_kill(ts[0].ident, signal.SIGRTMIN)\n\
        while not got.wait(0.05): pass\n\
        stop.set(); [t.join() for t in ts]\n\
        print('setxid and SIGRTMIN ok')\n";
    let env = Env::python(&["python3", "-c", script]);
    let id = unique("rtsig");
    let out = ok(&env.run_within(&id, std::time::Duration::from_secs(60)));
    assert_eq!(out.trim(), "setxid and SIGRTMIN ok");
}

/// A process stopped by SIGSTOP stays stopped until SIGCONT, also when
/// the signal comes while the supervisor is answering one of its calls
/// (with every path rule in the supervisor, each open is emulated: on
/// ptrace the fd is installed by running syscalls in the caller, and a
/// group-stop met then let the caller run on). The parent waits for the
/// stop (WUNTRACED) and checks the child's counter does not move while it
/// is stopped: a stopped process cannot move it, whatever the timing.
#[test]
fn a_stopped_process_stays_stopped_while_its_calls_are_answered() {
    let script = "import mmap, os, signal, struct, time\n\
        m = mmap.mmap(-1, 8)\n\
        count = lambda: struct.unpack('Q', m[:8])[0]\n\
        pid = os.fork()\n\
        if pid == 0:\n\
        \x20   n = 0\n\
        \x20   while True:\n\
        \x20       open('/etc/hostname').close(); n += 1; m[:8] = struct.pack('Q', n)\n\
        ran = 0\n\
        for _ in range(60):\n\
        \x20   c = count()\n\
        \x20   while count() == c: time.sleep(0.001)\n\
        \x20   os.kill(pid, signal.SIGSTOP)\n\
        \x20   _, st = os.waitpid(pid, os.WUNTRACED); assert os.WIFSTOPPED(st), st\n\
        \x20   c = count(); time.sleep(0.02); ran += count() != c\n\
        \x20   os.kill(pid, signal.SIGCONT)\n\
        os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)\n\
        print('ran while stopped', ran)\n";
    let mut env = Env::python(&["python3", "-c", script]);
    env.annotate("org.cordon.enforcement", "supervisor");
    let out = ok(&env.run_within(&unique("gstop"), std::time::Duration::from_secs(120)));
    assert_eq!(out.trim(), "ran while stopped 0");
}

/// A thread execs while the main thread's open is being answered (every
/// open emulated): the main thread dies in the exec and the new program
/// takes its tid. On ptrace the exec stop then came to the fd injection
/// running in that tid, which took it for its own and put the old
/// registers back into the new program (it spun for ever). Each run must
/// print what the new program prints, whatever the exec interrupts.
#[test]
fn exec_from_a_thread_while_the_leaders_open_is_answered() {
    let child = "import os, threading\n\
        opening = threading.Event()\n\
        def ex(): opening.wait(); os.execv('/bin/echo', ['echo', 'exec-ok'])\n\
        threading.Thread(target=ex).start()\n\
        while True: os.close(os.open('/etc/hostname', os.O_RDONLY)); opening.set()\n";
    let script = format!(
        "import subprocess\n\
         outs = [subprocess.run(['python3', '-c', {child:?}], capture_output=True, text=True).stdout.strip() \
         for _ in range(10)]\n\
         print(outs.count('exec-ok'))\n"
    );
    let mut env = Env::python(&["python3", "-c", &script]);
    env.annotate("org.cordon.enforcement", "supervisor");
    let out = ok(&env.run_within(&unique("thrx"), std::time::Duration::from_secs(120)));
    assert_eq!(out.trim(), "10");
}

#[test]
fn python_stdlib_program_runs_unchanged_under_the_default_policy() {
    let script = "import json, sqlite3, subprocess, threading, os\n\
        os.makedirs('/tmp/w', exist_ok=True)\n\
        json.dump({'a': [1, 2]}, open('/tmp/w/x.json', 'w'))\n\
        db = sqlite3.connect('/tmp/w/db'); db.execute('create table t(x)'); db.execute('insert into t values (41)')\n\
        db.commit()\n\
        n = db.execute('select x+1 from t').fetchone()[0]\n\
        out = subprocess.run(['python3', '-c', 'print(6*7)'], capture_output=True, text=True).stdout.strip()\n\
        r = []\n\
        t = threading.Thread(target=lambda: r.append(json.load(open('/tmp/w/x.json'))['a'][1])); t.start(); t.join()\n\
        print(n, out, r[0])\n";
    let mut env = Env::python(&["python3", "-c", script]);
    env.config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["size=32m"]}));
    let out = ok(&env.run(&unique("pystd")));
    assert_eq!(out.trim(), "42 42 2");
}

#[test]
fn emulated_open_honours_the_callers_credentials() {
    use std::os::unix::fs::{chown, PermissionsExt};
    let host = TempDir::new("creds");
    let d = host.path().join("d");
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (name, uid, mode) in [("root-only", 0, 0o600), ("mine", 1000, 0o600), ("group", 0, 0o640)] {
        let f = d.join(name);
        std::fs::write(&f, format!("{name}\n")).unwrap();
        chown(&f, Some(uid), Some(if name == "group" { 2000 } else { uid })).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let private = d.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(private.join("f"), "x\n").unwrap();

    let mut env = Env::busybox(&[]);
    env.config["process"]["user"] = json!({"uid": 1000, "gid": 1000, "additionalGids": [2000]});
    env.config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/d", "type": "bind", "source": d, "options": ["rbind", "rw"]}));
    let lines = sh(
        &env,
        &unique("creds"),
        "probe read /d/root-only; probe read /d/mine; probe read /d/group; probe write /d/new x; \
         probe read /d/private/f; probe write /d/mine y; probe read /d/mine",
    );
    assert_eq!(
        lines,
        [
            "err EACCES",
            "ok mine",
            "ok group",
            "err EACCES",
            "err EACCES",
            "ok 1",
            "ok y"
        ],
        "uid 1000 with group 2000 gets exactly what the kernel would give it"
    );
    assert!(!d.join("new").exists());
}

#[test]
fn policy_commands_and_annotation_errors() {
    let env = Env::busybox(&["true"]);
    let out = ok(&env.cordon(&["policy", "show", "default"]));
    assert!(
        out.contains("name = \"default\"") && out.contains("kexec_load"),
        "{out}"
    );
    let dir = TempDir::new("pol");
    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        "name = \"g\"\nextends = \"default\"\n[[path]]\npattern = \"/x/**\"\naccess = \"deny\"\n",
    )
    .unwrap();
    let out = ok(&env.cordon(&["policy", "check", &good.to_string_lossy()]));
    assert!(out.contains("ok"), "{out}");
    // A rule that shadows later ones is valid, and `policy check` says
    // which rules it leaves without effect.
    let wide = dir.path().join("wide.toml");
    std::fs::write(
        &wide,
        "name = \"w\"\n[[path]]\npattern = \"/data/**\"\naccess = \"read-only\"\n\
         [[path]]\npattern = \"/data/secret/**\"\naccess = \"deny\"\n",
    )
    .unwrap();
    let out = env.cordon(&["policy", "check", &wide.to_string_lossy()]);
    assert!(ok(&out).contains("ok"));
    assert!(
        stderr(&out).contains("warning")
            && stderr(&out).contains("path[1] /data/secret/** deny never decides: path[0] /data/** read-only"),
        "{}",
        stderr(&out)
    );
    // The default's protections cannot be loosened: refused, naming both.
    let loose = dir.path().join("loose.toml");
    std::fs::write(
        &loose,
        "name = \"l\"\n[[path]]\npattern = \"/proc/kallsyms\"\naccess = \"allow\"\n",
    )
    .unwrap();
    let out = env.cordon(&["policy", "check", &loose.to_string_lossy()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("path[0].access") && stderr(&out).contains("/proc/kallsyms deny applies first"),
        "{}",
        stderr(&out)
    );
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "name = \"b\"\n[[syscall]]\nnames = [\"read\", \"forkk\"]\naction = \"deny\"\n",
    )
    .unwrap();
    let out = env.cordon(&["policy", "check", &bad.to_string_lossy()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("syscall[0].names[1]") && err.contains("forkk"), "{err}");

    // A container whose annotation names a broken policy is not created.
    let mut env = Env::busybox(&["true"]);
    env.set_policy(&bad.to_string_lossy());
    let id = unique("badpol");
    let out = env.create(&id);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("forkk"), "{}", stderr(&out));
    assert!(
        stdout(&env.cordon(&["list", "-q"])).trim().is_empty(),
        "nothing left behind"
    );
    assert!(
        !env.root.path().join(".cordon").join(&id).exists(),
        "no supervisor dir left behind"
    );
    env.set_policy("no-such-policy");
    let out = env.create(&id);
    assert!(
        stderr(&out).contains("no such built-in policy or file"),
        "{}",
        stderr(&out)
    );

    // `cordon syscalls` is the table the filter is compiled from.
    let out = ok(&env.cordon(&["syscalls", "--format", "csv"]));
    assert!(out.contains("321,bpf,\"deny (EPERM)\""), "{out}");
    assert!(out.contains("63,uname,\"emulate\""), "{out}");
    // --notes adds each entry's disposition and note; a syscall new to the
    // table is refused with ENOSYS whatever the policy.
    let out = ok(&env.cordon(&["syscalls", "--format", "csv", "--notes", "--policy", "permissive"]));
    assert!(out.starts_with("nr,name,action,disposition,note\n"), "{out}");
    assert!(out.contains("\n451,cachestat,\"deny (ENOSYS)\",ENOSYS,\""), "{out}");
    assert!(out.contains("\n257,openat,\"allow\",changes files,\""), "{out}");
}

#[test]
fn the_supervisor_runs_under_its_own_seccomp_filters() {
    let env = Env::busybox(&["probe", "sleep", "30"]);
    let id = unique("confined");
    ok(&env.create(&id));
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.root.path().join(".cordon").join(&id).join("meta.json")).unwrap())
            .unwrap();
    let pid = meta["supervisor_pid"].as_i64().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .map(str::trim)
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(field("Seccomp:"), "2", "filter mode");
    assert_eq!(field("Seccomp_filters:"), "2", "the fatal list and the allowed list");
    ok(&env.cordon(&["delete", "--force", &id]));
}

#[test]
fn file_policy_covers_metadata_and_tree_changes() {
    let f = files_env();
    let id = unique("meta");
    let r = |cmd: &str| format!("{cmd} >/dev/null 2>&1 && echo yes || echo no;");
    let script = [
        "probe stat /secret/key;".to_string(),
        "probe stat /data/ok.txt;".to_string(),
        r("test -e /secret/key"),
        r("readlink /data/abs-link"),
        r("rm -f /secret/key"),
        r("mv /secret/key /work/stolen"),
        r("ln /secret/key /work/hard"),
        r("chmod 777 /secret/key"),
        r("mkdir /secret/d"),
        r("mkdir /etc/d"),
        r("mkdir /work/d && rmdir /work/d"),
        r("cp /data/ok.txt /work/c && mv /work/c /work/e && ln -s /work/e /work/l && chmod 600 /work/e && rm /work/e /work/l"),
        "umask 077; probe write /work/u x >/dev/null; stat -c %a /work/u; mkdir /work/ud; stat -c %a /work/ud;".to_string(),
        r("mkdir -p /work/a/b/c"),
        r("mkdir -p /work/vault/inner && mv /work/vault /work/moved"),
        r("mv /work/vault/inner /work/inner2"),
    ]
    .concat();
    let lines = sh(&f.env, &id, &script);
    assert_eq!(lines[0], "err EACCES", "stat of a denied file: {lines:?}");
    assert_eq!(lines[1], "ok 5", "stat of an allowed file: {lines:?}");
    assert_eq!(
        &lines[2..12],
        ["no", "yes", "no", "no", "no", "no", "no", "no", "yes", "yes"],
        "{lines:?}"
    );
    assert_eq!(&lines[12..14], ["600", "700"], "the caller's umask applies: {lines:?}");
    assert_eq!(lines[14], "yes", "mkdir -p of an absolute path: {lines:?}");
    assert_eq!(
        &lines[15..17],
        ["no", "no"],
        "moving a directory above denied files: {lines:?}"
    );
    let key = f._host.path().join("secret/key");
    assert_eq!(
        std::fs::read_to_string(&key).unwrap(),
        "TOPSECRET\n",
        "denied file untouched"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_ne!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o777);
}

#[test]
fn a_blocked_emulation_does_not_stall_other_threads() {
    let mut env = Env::busybox(&[]);
    env.config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/work", "type": "tmpfs", "source": "tmpfs", "options": ["size=1m"]}));
    // The FIFO open blocks in the supervisor until a writer comes; opens
    // by other processes must still be answered meanwhile.
    let lines = sh(
        &env,
        &unique("fifo"),
        "mkfifo /work/p; probe read /work/p > /work/reader.out & sleep 0.3; \
         timeout 5 probe read /etc/hostname; echo fromwriter > /work/p; wait; cat /work/reader.out",
    );
    assert_eq!(lines, ["ok cordon", "ok fromwriter"]);
}

#[test]
fn audit_follow_streams_until_the_container_exits() {
    let env = Env::busybox(&[
        "sh",
        "-c",
        "sleep 1; probe uname >/dev/null; probe connect 169.254.169.254 80",
    ]);
    let id = unique("follow");
    ok(&env.create(&id));
    let mut follow = std::process::Command::new(cordon_bin())
        .arg("--root")
        .arg(env.root.path())
        .args(["audit", "--follow", &id])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    ok(&env.cordon(&["start", &id]));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while follow.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "audit --follow did not end after the container exited"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let mut out = String::new();
    std::io::Read::read_to_string(follow.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(out.contains(" uname ") && out.contains("(emulate)"), "{out}");
    assert!(
        out.contains("169.254.169.254:80 -> EPERM (deny by net[0] 169.254.0.0/16: link-local"),
        "the record names the rule: {out}"
    );
    assert!(
        out.trim_end().ends_with("container init exited -> exit (event)"),
        "{out}"
    );
}

#[test]
fn creating_through_a_dangling_symlink_is_checked_where_it_lands() {
    let f = files_env();
    let lines = sh(
        &f.env,
        &unique("dangle"),
        "probe write /data/dangling-secret x; probe write /data/dangling-ok y; probe read /work/created; \
         probe open /data/dangling-ok wronly,creat,nofollow",
    );
    assert_eq!(lines[0], "err EACCES", "{lines:?}");
    assert!(
        !f._host.path().join("secret/planted").exists(),
        "nothing may be created in a denied directory"
    );
    assert_eq!(lines[1], "ok 1", "{lines:?}");
    assert_eq!(lines[2], "ok y", "created where the allowed link points: {lines:?}");
    assert_eq!(lines[3], "err ELOOP", "O_NOFOLLOW on a symlink: {lines:?}");
}

#[test]
fn the_bundles_own_seccomp_profile_still_applies_with_its_errno() {
    // Docker-style: the bundle's profile refuses getppid with its own errnoRet;
    // cordon's filter stacks on top and the kernel applies the stricter verdict.
    let mut env = Env::busybox(&[]);
    env.config["linux"]["seccomp"] = json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": [{"names": ["getppid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]
    });
    let lines = sh(
        &env,
        &unique("stack"),
        "probe syscall 110; probe syscall 321; probe uname",
    );
    assert_eq!(lines[0], "err EACCES", "the bundle's errnoRet is kept");
    assert_eq!(lines[1], "err EPERM", "cordon's refusals still apply");
    assert!(lines[2].contains("6.1.0-cordon"), "and its emulation: {}", lines[2]);

    // A bundle that wants its own notify listener is refused, clearly.
    env.config["linux"]["seccomp"]["syscalls"] = json!([{"names": ["getppid"], "action": "SCMP_ACT_NOTIFY"}]);
    env.config["linux"]["seccomp"]["listenerPath"] = json!("/tmp/x.sock");
    env.config["process"]["args"] = json!(["true"]);
    let id = unique("notify");
    let out = env.create(&id);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("linux.seccomp"), "{}", stderr(&out));
    assert!(
        !stdout(&env.cordon(&["list", "-q"])).contains(&id),
        "nothing left behind"
    );
}

#[test]
fn the_runtime_config_file_chooses_the_default_policy() {
    let dir = TempDir::new("cfg");
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "policy = \"permissive\"\n").unwrap();
    let env = Env::busybox(&["uname", "-r"]);
    env.write();
    let b = env.bundle.path().to_string_lossy().into_owned();
    let id = unique("cfg");
    let out = run_captured(
        std::process::Command::new(cordon_bin())
            .env("CORDON_CONFIG", &cfg)
            .arg("--root")
            .arg(env.root.path())
            .args(["run", "-b", &b, &id]),
    );
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(ok(&out).trim(), host.trim(), "permissive: nothing emulated");
    std::fs::write(&cfg, "policy = \"default\"\nbogus = 1\n").unwrap();
    let out = run_captured(
        std::process::Command::new(cordon_bin())
            .env("CORDON_CONFIG", &cfg)
            .arg("--root")
            .arg(env.root.path())
            .args(["run", "-b", &b, &id]),
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("bogus"), "the bad key is named: {}", stderr(&out));
}

/// `cordon --root <root> [env CORDON_CONFIG=cfg] args`.
fn cordon_with_config(env: &Env, cfg: &std::path::Path, args: &[&str]) -> std::process::Output {
    run_captured(
        std::process::Command::new(cordon_bin())
            .env("CORDON_CONFIG", cfg)
            .arg("--root")
            .arg(env.root.path())
            .args(args),
    )
}

#[test]
fn annotations_choose_only_what_the_admin_allows() {
    let host = TempDir::new("gate");
    let secret = host.path().join("secrets.env");
    std::fs::write(&secret, "AWS_SECRET_ACCESS_KEY = \"not-for-pods\"\n").unwrap();
    let allowed = host.path().join("policies");
    std::fs::create_dir(&allowed).unwrap();
    std::fs::write(
        allowed.join("team.toml"),
        "name = \"team\"\nextends = \"default\"\n[[path]]\npattern = \"/etc/hostname\"\naccess = \"deny\"\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&secret, allowed.join("link.toml")).unwrap();
    let b = |env: &Env| env.bundle.path().to_string_lossy().into_owned();
    let refused = |env: &mut Env, value: &str| {
        env.annotate("org.cordon.policy", value);
        let id = unique("gate");
        let out = env.create(&id);
        assert!(!out.status.success(), "{value}: created");
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("org.cordon.policy"), "{err}");
        assert!(
            !err.contains("AWS") && !err.contains("not-for-pods"),
            "a file's content quoted: {err}"
        );
        assert!(!env.root.path().join(&id).exists(), "nothing left behind");
        err
    };

    // By default: not `permissive`, no host file, no symlink into one.
    let mut env = Env::busybox(&["cat", "/etc/hostname"]);
    let err = refused(&mut env, "permissive");
    assert!(err.contains("files under /etc/cordon/policies/"), "{err}");
    refused(&mut env, &secret.to_string_lossy());
    refused(&mut env, "/etc/shadow");
    // A misspelt key is refused with the ones cordon reads.
    let mut env = Env::busybox(&["true"]);
    env.annotate("org.cordon.polcy", "audit");
    let out = env.run(&unique("gate-typo"));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("\"org.cordon.polcy\": unknown key") && stderr(&out).contains("org.cordon.policy"),
        "{}",
        stderr(&out)
    );
    // A built-in the gate lists runs.
    let mut env = Env::busybox(&["true"]);
    env.annotate("org.cordon.policy", "audit");
    let id = unique("gate-audit");
    ok(&env.run_keep(&id));
    assert_eq!(env.state(&id)["annotations"]["org.cordon.policy"], "audit");

    // The admin allows a directory: its files run, a link out of it does not.
    let cfg = host.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!("[annotations]\npolicies = [\"default\", \"{}/\"]\n", allowed.display()),
    )
    .unwrap();
    // The file's bytes never show: a mask reads empty (kernel level), the
    // supervisor refuses the open.
    let mut env = Env::busybox(&["sh", "-c", "cat /etc/hostname 2>/dev/null | wc -c"]);
    env.annotate("org.cordon.policy", &allowed.join("team.toml").to_string_lossy());
    env.write();
    let out = cordon_with_config(&env, &cfg, &["run", "-b", &b(&env), &unique("gate-dir")]);
    assert_eq!(ok(&out).trim(), "0", "the team policy denies /etc/hostname");
    env.annotate("org.cordon.policy", &allowed.join("link.toml").to_string_lossy());
    env.write();
    let out = cordon_with_config(&env, &cfg, &["run", "-b", &b(&env), &unique("gate-link")]);
    assert!(
        !out.status.success() && !stderr(&out).contains("not-for-pods"),
        "{}",
        stderr(&out)
    );
    env.annotate("org.cordon.policy", "audit");
    env.write();
    let out = cordon_with_config(&env, &cfg, &["run", "-b", &b(&env), &unique("gate-narrow")]);
    assert!(
        stderr(&out).contains("\"audit\" is not a policy"),
        "narrowed: {}",
        stderr(&out)
    );

    // The admin forbids annotations altogether.
    std::fs::write(&cfg, "[annotations]\nallow = false\n").unwrap();
    let mut env = Env::busybox(&["true"]);
    // Only the key under test (the suites' own platform and level
    // annotations would be refused first).
    env.config["annotations"] = json!({});
    env.annotate("org.cordon.platform", "ptrace");
    env.write();
    let out = cordon_with_config(&env, &cfg, &["run", "-b", &b(&env), &unique("gate-off")]);
    assert!(
        stderr(&out).contains("org.cordon.platform") && stderr(&out).contains("allow = false"),
        "{}",
        stderr(&out)
    );

    // The runtime's own flag is the admin's: it may choose anything.
    let mut env = Env::busybox(&["uname", "-r"]);
    env.set_policy("permissive");
    let host_release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(ok(&env.run(&unique("gate-flag"))).trim(), host_release.trim());
}

/// A deleted container's audit trail is kept under `[audit] dir` and
/// `cordon audit ID` still shows it; with `keep = false` it goes with the
/// container.
#[test]
fn audit_trails_outlive_their_containers() {
    let host = TempDir::new("kept");
    let cfg = host.path().join("config.toml");
    let kept = host.path().join("trails");
    std::fs::write(&cfg, format!("[audit]\ndir = \"{}\"\n", kept.display())).unwrap();
    let env = Env::busybox(&["uname", "-r"]);
    env.write();
    let b = env.bundle.path().to_string_lossy().into_owned();
    let id = unique("kept");
    // `run` without --keep deletes the container when it exits, as Docker does.
    let out = cordon_with_config(&env, &cfg, &["run", "-b", &b, &id]);
    assert_eq!(ok(&out).trim(), "6.1.0-cordon");
    assert!(stdout(&env.cordon(&["list", "-q"])).trim().is_empty(), "deleted");
    let shown = cordon_with_config(&env, &cfg, &["audit", "--json", &id]);
    let records: Vec<serde_json::Value> = ok(&shown).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(
        records
            .iter()
            .any(|r| r["syscall"] == "uname" && r["action"] == "emulate"),
        "the kept trail: {records:?}"
    );
    // The trails, beside the prune count (`.prune`, docs/POLICY.md).
    let files: Vec<_> = std::fs::read_dir(&kept)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != ".prune")
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].to_string_lossy().starts_with(&format!("{id}@")));

    std::fs::write(&cfg, format!("[audit]\nkeep = false\ndir = \"{}\"\n", kept.display())).unwrap();
    let id = unique("notkept");
    ok(&cordon_with_config(&env, &cfg, &["run", "-b", &b, &id]));
    let shown = cordon_with_config(&env, &cfg, &["audit", &id]);
    assert!(!shown.status.success());
    assert!(stderr(&shown).contains("no audit trail"), "{}", stderr(&shown));
}

/// `cordon --trace`: what the BPF filter refuses reaches the supervisor,
/// which refuses it the same way and records it with its rule; without
/// the flag the same refusal leaves no record.
#[test]
fn trace_mode_records_what_the_kernel_refuses() {
    let script = "mount -t tmpfs t /mnt 2>/dev/null; echo rc=$?; cat /etc/hostname >/dev/null; echo done";
    let mut outputs = Vec::new();
    for trace in [false, true] {
        let env = Env::busybox(&["sh", "-c", script]);
        env.write();
        let id = unique(if trace { "trace" } else { "notrace" });
        let b = env.bundle.path().to_string_lossy().into_owned();
        let mut args = vec!["run", "--keep", "-b", b.as_str(), id.as_str()];
        if trace {
            args.insert(0, "--trace");
        }
        let out = env.cordon(&args);
        outputs.push(ok(&out));
        let audit = env.audit(&id);
        let mount: Vec<_> = audit.iter().filter(|r| r["syscall"] == "mount").collect();
        let opens = audit
            .iter()
            .any(|r| r["syscall"] == "openat" && r["detail"].as_str().unwrap_or("").starts_with("/etc/hostname"));
        if trace {
            assert_eq!(mount.len(), 1, "the refused mount is recorded: {audit:?}");
            assert_eq!(mount[0]["action"], "deny");
            assert_eq!(mount[0]["result"], "EPERM");
            assert!(
                mount[0]["rule"].as_str().is_some_and(|r| r.starts_with("syscall[")),
                "{:?}",
                mount[0]
            );
            assert!(opens, "every open is recorded in trace mode: {audit:?}");
        } else {
            assert!(mount.is_empty(), "BPF refusals are not recorded: {audit:?}");
        }
        assert_eq!(
            env.state(&id)["annotations"]["org.cordon.enforcement"],
            if trace || !kernel_level() {
                "supervisor"
            } else {
                "kernel"
            }
        );
    }
    assert_eq!(outputs[0], outputs[1], "the container sees the same either way");
    assert_eq!(outputs[1].trim(), "rc=1\ndone");
}

#[test]
fn container_processes_never_run_the_runtime_binary_from_disk() {
    // CVE-2019-5736: before it execs the payload, the container's init is a
    // fork of `cordon create`; if /proc/<init>/exe were the binary on disk,
    // a container process could reopen it for writing.
    let env = Env::busybox(&["true"]);
    let id = unique("sealed");
    ok(&env.create(&id));
    let pid = env.state(&id)["pid"].as_i64().unwrap();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let host = std::fs::canonicalize(cordon_bin()).unwrap();
    assert_ne!(exe, host);
    // A read-only overlayfs view of the binary (EROFS), or a sealed memfd
    // copy (EPERM from its write seal): even root cannot write it.
    let err = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/exe"))
        .expect_err("the init's binary opened for writing");
    assert!(
        matches!(
            err.raw_os_error(),
            Some(libc::EROFS) | Some(libc::EPERM) | Some(libc::ETXTBSY)
        ),
        "init runs {exe:?}: {err}"
    );
    let view = format!("/{}", host.file_name().unwrap().to_string_lossy());
    assert!(
        exe.to_string_lossy().starts_with("/memfd:") || exe.to_string_lossy() == view,
        "init runs {exe:?}"
    );
    ok(&env.cordon(&["delete", "--force", &id]));
}

#[test]
fn debian_tar_extracts_a_tree_under_the_default_policy() {
    // tar opens directories with O_PATH|O_NOFOLLOW|O_DIRECTORY and files
    // with O_CREAT|O_EXCL: the emulated open must keep each flag's meaning.
    let mut env = Env::python(&[
        "sh",
        "-c",
        "mkdir -p /tmp/t/d1/d2 && echo x > /tmp/t/d1/d2/f && ln -s d2/f /tmp/t/d1/l && \
         tar -C /tmp -cf /tmp/a.tar t && mkdir /tmp/out && tar -C /tmp/out -xf /tmp/a.tar && \
         cat /tmp/out/t/d1/l && stat -c %a /tmp/out/t/d1",
    ]);
    env.config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["size=16m"]}));
    let out = ok(&env.run(&unique("tar")));
    assert_eq!(out.lines().collect::<Vec<_>>(), ["x", "755"]);
}

/// shared/cases/eintr-under-signals: a shell that traps SIGWINCH while a
/// loop signals it. An open that waits for the supervisor fails with EINTR
/// when a signal without SA_RESTART arrives (seccomp-notify); with the
/// default policy's path rules enforced by the container's mounts, opens do
/// not wait for it and `true >/dev/null` never fails, as under runc.
#[test]
fn opens_never_fail_with_eintr_under_signals() {
    if !kernel_level() {
        eprintln!("supervisor-level enforcement: opens wait for the supervisor (docs/SECURITY.md)");
        return;
    }
    let env = Env::busybox(&[
        "sh",
        "-c",
        "trap : WINCH; S=$$; (while kill -WINCH $S; do :; done 2>/dev/null) & K=$!; n=0; \
         for i in $(seq 300); do true >/dev/null || n=$((n+1)); done; kill $K; echo failed-opens=$n/300",
    ]);
    let out = ok(&env.run(&unique("eintr")));
    assert!(out.contains("failed-opens=0/300"), "{out}");
}
