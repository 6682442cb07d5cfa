//! Allow-list policies ("writable only beneath", "readable only beneath"):
//! at the default kernel level Landlock enforces them (level 2) with the
//! supervisor deciding metadata changes; with
//! `CORDON_TEST_ENFORCEMENT=supervisor` every path rule is the
//! supervisor's. The same assertions hold at both levels and on both
//! platforms (`CORDON_TEST_PLATFORM=ptrace`): what is refused, and from
//! the host that the protected objects never changed and a denied file's
//! content never reached the container. Return values differ only as
//! docs/POLICY.md lists (Landlock gives EACCES, or EXDEV for a link or
//! rename across directories).
//!
//! The metadata probe is tests/deputy/deputy.c (`meta FILE`), compiled
//! with `gcc -static` and bound read-only at /home. Needs root, a real
//! kernel with Landlock ABI 3 or later, gcc and `make bundles`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use cordon_tests::*;
use serde_json::json;

/// The deputy probe, compiled once per test run.
fn probe() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("landlock-probe");
        std::fs::create_dir_all(&dir).unwrap();
        let tmp = dir.join(format!(".{}", unique("deputy")));
        let out = Command::new("gcc")
            .args(["-static", "-O2", "-pthread", "-o"])
            .arg(&tmp)
            .arg(repo().join("tests/deputy/deputy.c"))
            .output()
            .expect("run gcc");
        assert!(out.status.success(), "gcc: {}", String::from_utf8_lossy(&out.stderr));
        let bin = dir.join("deputy");
        std::fs::rename(&tmp, &bin).unwrap();
        bin
    })
}

/// Mode, owner, mtime and xattr names of `p`, from the host.
fn fingerprint(p: &Path) -> (u32, u32, u32, i64, Vec<u8>) {
    let m = std::fs::symlink_metadata(p).unwrap();
    let mut xattrs = vec![0u8; 1024];
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and a buffer with its length.
    let n = unsafe { libc::llistxattr(c.as_ptr(), xattrs.as_mut_ptr().cast(), xattrs.len()) };
    xattrs.truncate(n.max(0) as usize);
    (m.mode(), m.uid(), m.gid(), m.mtime(), xattrs)
}

/// A busybox container running `args` with `host` bound read-write at
/// /data, a tmpfs /tmp, the probe at /home and the policy `policy` (TOML)
/// from a file of its own; returns the environment and the policy file's
/// directory (keep it alive).
fn env(args: &[&str], host: &Path, policy: &str) -> (Env, TempDir) {
    let mut env = Env::busybox(args);
    let tools = probe().parent().unwrap().to_path_buf();
    let mounts = env.config["mounts"].as_array_mut().unwrap();
    mounts.push(json!({"destination": "/data", "type": "bind", "source": host, "options": ["rbind", "rw"]}));
    mounts.push(json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=1777"]}));
    mounts.push(json!({"destination": "/home", "type": "bind", "source": tools, "options": ["rbind", "ro"]}));
    let pol = TempDir::new("landlock-policy");
    let file = pol.path().join("policy.toml");
    std::fs::write(&file, policy).unwrap();
    env.set_policy(&file.to_string_lossy());
    (env, pol)
}

const WRITABLE: &str = "name = \"writable\"\n\
    [[path]]\npattern = \"/data/rw/**\"\naccess = \"allow\"\n\
    [[path]]\npattern = \"/dev/**\"\naccess = \"allow\"\n\
    [[path]]\npattern = \"/proc/**\"\naccess = \"allow\"\n\
    [[path]]\npattern = \"/tmp/**\"\naccess = \"allow\"\n\
    [[path]]\npattern = \"/**\"\naccess = \"read-only\"\n";

/// A host directory for /data: `rw/old` and `rw/gone` (writable beneath),
/// `f` (read-only, mode 0644, an old mtime, an xattr `user.pre`).
fn data_dir() -> TempDir {
    let data = TempDir::new("landlock-data");
    let d = data.path();
    std::fs::create_dir_all(d.join("rw")).unwrap();
    std::fs::write(d.join("rw/old"), "old\n").unwrap();
    std::fs::write(d.join("rw/gone"), "g").unwrap();
    std::fs::write(d.join("f"), "orig").unwrap();
    std::fs::set_permissions(d.join("f"), std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let f = std::fs::File::options().write(true).open(d.join("f")).unwrap();
    f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_500_000_000))
        .unwrap();
    drop(f);
    let c = std::ffi::CString::new(d.join("f").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: NUL-terminated path and name, a value with its length.
    unsafe { libc::setxattr(c.as_ptr(), c"user.pre".as_ptr(), b"1".as_ptr().cast(), 1, 0) };
    data
}

/// `/data/rw/** allow` and a catch-all `/** read-only`: everything under
/// /data/rw can be written, created and removed; under /data every change
/// fails (EACCES), however the file is named (`..`, `//`,
/// `/proc/self/root`, a symlink or a dangling one from /data/rw, an fd of
/// /data), and leaves the host's file as it was (content, mode, times,
/// xattrs); the granted directory cannot be renamed away, nor a
/// link to the read-only file made inside it. At the kernel level
/// `policy show --explain --bundle` names Landlock for the grant, and
/// `cordon state` and the audit trail's start record say so.
#[test]
fn writable_only_beneath() {
    let data = data_dir();
    let d = data.path();
    let before = fingerprint(&d.join("f"));
    let script = "cd /data; \
        for t in 'echo new > rw/new' 'echo more >> rw/old' 'mkdir rw/d' 'mkdir rw/d/e' 'rmdir rw/d/e' 'rm rw/gone' \
                 'mv rw/new rw/d/moved' 'ln -s moved rw/d/sl' 'truncate -s 1 rw/old'; do \
          sh -c \"$t\" 2>/tmp/err || echo \"FAILED $t: $(cat /tmp/err)\"; done; \
        for t in 'echo x >> f' 'echo x > f' 'echo x > created' 'rm f' 'mkdir dd' 'ln -s f sl' 'truncate -s 0 f' \
                 'chmod 777 f' 'touch -d 2001-01-01 f' 'mv rw x' 'ln f rw/hard' 'mv f g'; do \
          sh -c \"$t\" 2>/tmp/err && echo \"ALLOWED $t\"; \
          grep -q -e 'Permission denied' -e 'ross-device' /tmp/err || echo \"ODD $t: $(cat /tmp/err)\"; done; \
        ln -s /data/f rw/lnk; ln -s /data/nx rw/dangling; exec 3</data; \
        for t in 'echo x >> rw/../f' 'echo x >> //data//f' 'echo x >> /proc/self/root/data/f' 'echo x >> rw/lnk' \
                 'echo x > rw/dangling' 'echo x >> /proc/self/fd/3/f' 'echo x >> /dev/fd/3/f' 'cd rw && echo x >> ../f'; do \
          sh -c \"$t\" 2>/dev/null && echo \"ALLOWED $t\"; done; \
        /home/deputy meta /data/f; echo done";
    let (env, _pol) = env(&["sh", "-c", script], d, WRITABLE);
    let id = unique("landlock-w");
    let out = env.run_keep(&id);
    let text = ok(&out);
    assert!(!text.contains("FAILED"), "writing beneath /data/rw failed: {text}");
    assert!(
        !text.contains("ALLOWED"),
        "ESCAPE: a change under /data got through: {text}"
    );
    assert!(!text.contains("ODD"), "an unexpected error: {text}");
    assert!(text.trim_end().ends_with("done"), "{text}");
    // The probe: opening for reading works, every metadata change fails.
    let meta: Vec<&str> = text
        .lines()
        .filter(|l| l.split_once(' ').is_some_and(|(k, _)| k != "open-ro" && k != "done"))
        .filter(|l| !l.ends_with(" err EACCES"))
        .collect();
    assert!(text.contains("open-ro ok"), "{text}");
    assert!(meta.is_empty(), "ESCAPE: metadata changes got through: {meta:?}");
    // From the host.
    assert_eq!(std::fs::read_to_string(d.join("f")).unwrap(), "orig");
    assert_eq!(
        fingerprint(&d.join("f")),
        before,
        "ESCAPE: the read-only file's metadata changed"
    );
    assert!(
        d.join("rw").is_dir() && !d.join("x").exists(),
        "the granted directory moved"
    );
    for p in ["created", "dd", "sl", "g", "rw/hard", "sock", "nx"] {
        assert!(
            !d.join(p).exists() && d.join(p).symlink_metadata().is_err(),
            "ESCAPE: {p} created"
        );
    }
    assert_eq!(std::fs::read_to_string(d.join("rw/old")).unwrap(), "o");
    assert_eq!(std::fs::read_to_string(d.join("rw/d/moved")).unwrap(), "new\n");
    assert!(!d.join("rw/gone").exists());
    // What chose the level, and where it is recorded.
    let b = env.bundle.path().to_string_lossy().into_owned();
    let explained = ok(&env.cordon(&[
        "policy",
        "show",
        "--explain",
        "--bundle",
        &b,
        env.policy.as_deref().unwrap(),
    ]));
    assert!(
        explained.contains("path[0] /data/rw/** allow: landlock (Landlock grants allow beneath /data/rw"),
        "{explained}"
    );
    // The default's protections (the floor) come before the catch-all,
    // enforced by mounts.
    assert!(
        explained.lines().any(|l| l.contains(" /** read-only: landlock (")),
        "{explained}"
    );
    assert!(
        explained.contains(" /proc/kallsyms deny: mounts: mask ("),
        "{explained}"
    );
    let state = env.state(&id);
    let start = &env.audit(&id)[0];
    if kernel_level() {
        let detail = state["annotations"]["org.cordon.enforcement-detail"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(detail.contains("by Landlock ABI"), "{state}");
        assert!(
            start["detail"].as_str().unwrap_or_default().contains(&detail),
            "{start}"
        );
        assert!(
            !env.audit(&id).iter().any(|r| r["syscall"] == "openat"),
            "opens stay in the kernel"
        );
    } else {
        assert_eq!(state["annotations"]["org.cordon.enforcement"], "supervisor");
    }
}

/// A `cordon exec` process gets the container's ruleset too.
#[test]
fn exec_processes_are_confined_alike() {
    let data = data_dir();
    let d = data.path();
    let (env, _pol) = env(&["sleep", "30"], d, WRITABLE);
    let id = unique("landlock-x");
    let out = env.create(&id);
    assert!(out.status.success(), "create: {}", stderr(&out));
    let out = env.cordon(&["start", &id]);
    assert!(out.status.success(), "start: {}", stderr(&out));
    let out = env.cordon(&[
        "exec",
        &id,
        "sh",
        "-c",
        "echo x >> /data/f; echo y > /data/rw/y; echo rc=$?",
    ]);
    let text = stdout(&out);
    assert!(text.contains("rc=0"), "{text} {}", stderr(&out));
    assert!(stderr(&out).contains("Permission denied"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(d.join("f")).unwrap(),
        "orig",
        "ESCAPE: exec wrote /data/f"
    );
    assert_eq!(std::fs::read_to_string(d.join("rw/y")).unwrap(), "y\n");
    let _ = env.cordon(&["delete", "--force", &id]);
}

/// `/bin/** read-only`, `/data/rw/** allow`, `/dev/** allow` and a
/// catch-all `/** deny`: the payload runs from /bin, /data/rw works, and
/// neither a file nor a listing outside the grants can be read: the
/// secret's content never appears.
#[test]
fn readable_only_beneath() {
    let data = TempDir::new("landlock-data");
    let d = data.path();
    std::fs::create_dir_all(d.join("rw")).unwrap();
    std::fs::write(d.join("secret"), "TOPSECRET").unwrap();
    let policy = "name = \"readable\"\n\
        [[path]]\npattern = \"/bin/**\"\naccess = \"read-only\"\n\
        [[path]]\npattern = \"/dev/**\"\naccess = \"allow\"\n\
        [[path]]\npattern = \"/data/rw/**\"\naccess = \"allow\"\n\
        [[path]]\npattern = \"/**\"\naccess = \"deny\"\n";
    let script = "cat /data/secret && echo READ; ls / && echo LISTED; ls /data && echo LISTED2; \
        cp /data/secret /data/rw/copy && echo COPIED; echo hi > /data/rw/w && cat /data/rw/w; ls /data/rw; \
        echo x > /bin/new && echo WROTE; echo done";
    let (env, _pol) = env(&["sh", "-c", script], d, policy);
    let out = env.run(&unique("landlock-r"));
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        !all.contains("TOPSECRET"),
        "ESCAPE: the secret's content reached the container: {all}"
    );
    let text = ok(&out);
    for leak in ["READ", "LISTED", "LISTED2", "COPIED", "WROTE"] {
        assert!(!text.lines().any(|l| l == leak), "ESCAPE: {leak}: {text}");
    }
    assert!(text.contains("hi\n") && text.contains("w\n"), "/data/rw: {text}");
    assert!(text.trim_end().ends_with("done"), "{text}");
    assert!(!d.join("rw/copy").exists());
    assert!(stderr(&out).contains("Permission denied"), "{}", stderr(&out));
}

/// The default's protections are a floor: an allow-list whose catch-all
/// comes first (`/** read-only`) still has the kernel's files masked
/// (/proc/kallsyms and /sys/kernel/notes read nothing) and /proc/sys
/// read-only; before, its catch-all left them to `read-only`, and the
/// host's kernel symbols and release were readable.
#[test]
fn an_allow_list_keeps_the_defaults_protections() {
    let data = data_dir();
    let (env, _pol) = env(
        &[
            "sh",
            "-c",
            "echo kallsyms $(cat /proc/kallsyms 2>/dev/null | wc -c); \
             echo notes $(cat /sys/kernel/notes 2>/dev/null | wc -c); \
             (echo 1 > /proc/sys/vm/overcommit_memory) 2>/dev/null && echo WROTE; \
             echo x > /dev/null && echo devnull ok",
        ],
        data.path(),
        "name = \"floor\"\n\
         [[path]]\npattern = \"/**\"\naccess = \"read-only\"\n",
    );
    let id = unique("ll-floor");
    let out = ok(&env.run(&id));
    assert_eq!(out, "kallsyms 0\nnotes 0\ndevnull ok\n", "{out}");
}

/// The kernel's audit switched on (`AUDIT_SET`, as `auditctl -e 1` does)
/// while it lives, then back to what it was.
struct KernelAudit {
    was: u32,
}

/// One request to the kernel's audit over netlink: `AUDIT_GET` (1000)
/// answers the status, `AUDIT_SET` (1001) with `enabled` sets it; the
/// status's `enabled` after the request.
fn audit_request(kind: u16, enabled: Option<u32>) -> u32 {
    // SAFETY: a netlink socket this function owns and closes; buffers
    // with their lengths.
    unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_AUDIT,
        );
        assert!(fd >= 0, "netlink audit socket");
        // struct audit_status: mask, enabled, then nine more u32.
        let mut body = [0u32; 11];
        if let Some(e) = enabled {
            body[0] = 1; // AUDIT_STATUS_ENABLED
            body[1] = e;
        }
        let mut msg = Vec::new();
        let len = 16 + if kind == 1001 { 44 } else { 0 };
        msg.extend_from_slice(&(len as u32).to_ne_bytes());
        msg.extend_from_slice(&kind.to_ne_bytes());
        msg.extend_from_slice(&(libc::NLM_F_REQUEST as u16 | libc::NLM_F_ACK as u16).to_ne_bytes());
        msg.extend_from_slice(&[0; 8]);
        if kind == 1001 {
            for v in body {
                msg.extend_from_slice(&v.to_ne_bytes());
            }
        }
        let mut addr: libc::sockaddr_nl = std::mem::zeroed();
        addr.nl_family = libc::AF_NETLINK as u16;
        let sent = libc::sendto(
            fd,
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        );
        assert_eq!(sent, msg.len() as isize, "send to the kernel's audit");
        let mut enabled_now = None;
        let mut buf = [0u8; 8192];
        for _ in 0..4 {
            let n = libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
            assert!(n >= 16, "answer of the kernel's audit");
            let t = u16::from_ne_bytes([buf[4], buf[5]]);
            if t == 1000 {
                enabled_now = Some(u32::from_ne_bytes([buf[20], buf[21], buf[22], buf[23]]));
                break;
            }
            if kind == 1001 {
                // The ACK of the SET: ask again.
                libc::close(fd);
                return audit_request(1000, None);
            }
        }
        libc::close(fd);
        enabled_now.expect("AUDIT_GET answered")
    }
}

impl KernelAudit {
    fn on() -> Self {
        let was = audit_request(1000, None);
        assert_eq!(audit_request(1001, Some(1)), 1, "the kernel's audit is on");
        KernelAudit { was }
    }
}

impl Drop for KernelAudit {
    fn drop(&mut self) {
        audit_request(1001, Some(self.was));
    }
}

/// `[audit] kernel = true`: a read Landlock refuses (the kernel level,
/// no supervisor in the way) reaches the trail from the kernel's audit,
/// with the call, the path, Landlock's blocker, the errno and the rule,
/// and the caller sees what it sees without the stream (EACCES). Without
/// the setting there is no record.
#[test]
fn landlock_denials_reach_the_trail_from_the_kernel_audit() {
    if std::env::var("CORDON_TEST_ENFORCEMENT").as_deref() == Ok("supervisor") {
        return; // the supervisor level decides the read itself
    }
    let _audit = KernelAudit::on();
    let data = data_dir();
    let policy = "name = \"kaudit\"\n\
        [[path]]\npattern = \"/data/rw/**\"\naccess = \"allow\"\n\
        [[path]]\npattern = \"/dev/**\"\naccess = \"allow\"\n\
        [[path]]\npattern = \"/proc/**\"\naccess = \"allow\"\n\
        [[path]]\npattern = \"/bin/**\"\naccess = \"read-only\"\n\
        [[path]]\npattern = \"/**\"\naccess = \"deny\"\n";
    let script = "cat /data/f 2>/dev/null; echo rc=$? > /data/rw/out; exec sleep 600";
    for kernel in [true, false] {
        let (mut env, _pol) = env(&["sh", "-c", script], data.path(), policy);
        let cfg = TempDir::new("kaudit-config");
        let file = cfg.path().join("config.toml");
        std::fs::write(&file, format!("[audit]\nkernel = {kernel}\n")).unwrap();
        env.config_file = Some(file);
        let id = unique("kaudit");
        ok(&env.create(&id));
        ok(&env.cordon(&["start", &id]));
        let out = data.path().join("rw/out");
        wait_until("the job's result", std::time::Duration::from_secs(30), || {
            std::fs::read_to_string(&out).map(drop).map_err(|e| e.to_string())
        });
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "rc=1\n", "kernel = {kernel}");
        std::fs::remove_file(&out).unwrap();
        let denied = |r: &serde_json::Value| r["detail"] == "/data/f (landlock: fs.read_file)" && r["action"] == "deny";
        if kernel {
            let trail = env.audit_with(&id, "the denial from the kernel's audit", denied);
            let r = trail.iter().find(|r| denied(r)).unwrap();
            assert!(matches!(r["syscall"].as_str(), Some("openat" | "open")), "{r}");
            assert_eq!(r["result"], "EACCES", "{r}");
            assert!(r["rule"].as_str().unwrap().ends_with("\"/**\" deny"), "{r}");
            assert!(r["pid"].as_i64().unwrap() > 0, "{r}");
        } else {
            ok(&env.cordon(&["kill", &id, "KILL"]));
            wait_until("stopped", std::time::Duration::from_secs(30), || {
                match env.state(&id)["status"].as_str() {
                    Some("stopped") => Ok(()),
                    s => Err(format!("{s:?}")),
                }
            });
            assert!(!env.audit(&id).iter().any(denied), "no stream, no record");
        }
        let _ = env.cordon(&["delete", "--force", &id]);
    }
}
