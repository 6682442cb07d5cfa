//! Snapshots suite: a writable layer cordon owns (`org.cordon.rootfs =
//! "overlay"`, `--overlay`), and `checkpoint`, `checkpoints`, `checkpoint
//! rm`, `diff` and `restore` of it (docs/CHECKPOINT.md), through the real
//! `cordon` binary on the busybox bundle.
//!
//! Trees are compared from inside the container: every path of the root
//! filesystem (`find / -xdev`) with its type, mode and owner, a symlink's
//! target and a file's md5. Every test has its own state root and data
//! directory (`CORDON_CONFIG` names a config whose `data_dir` is the
//! test's), so tests run in parallel. Needs root and a real kernel.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use cordon_tests::{
    assert_no_leftovers, cordon_bin, ok, processes_of, run_captured, stderr, stdout, test_platform, unique, wait_until,
    Env, TempDir,
};
use serde_json::{json, Value};

/// Longest any single wait may take (a hang detector).
const TIMEOUT: Duration = Duration::from_secs(30);

/// A test's world: an [`Env`] and a data directory of its own.
struct World {
    env: Env,
    data: TempDir,
    config: PathBuf,
}

impl World {
    /// A busybox container running `sleep`, with a writable rootfs.
    fn busybox() -> Self {
        let mut env = Env::busybox(&["sleep", "1000"]);
        env.config["root"]["readonly"] = false.into();
        let data = TempDir::new("data");
        let config = data.path().join("config.toml");
        std::fs::write(&config, format!("data_dir = {:?}\n", data.path().join("lib"))).unwrap();
        World { env, data, config }
    }

    /// A python container running `sleep`, with a writable rootfs and the
    /// host directory `host` at /host (read-only).
    fn python(host: &Path) -> Self {
        let mut w = Self::busybox();
        let mut env = Env::python(&["sleep", "1000"]);
        env.config["root"]["readonly"] = false.into();
        env.config["mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"destination": "/host", "type": "bind", "source": host, "options": ["rbind", "ro"]}));
        w.env = env;
        w
    }

    /// The container's root filesystem seen from inside by python: every
    /// path (directories on other filesystems pruned), its mode and
    /// owner, a symlink's target, a file's md5.
    #[track_caller]
    fn py_tree(&self, id: &str) -> String {
        ok(&self.cordon(&["exec", id, "python3", "-c", PY_TREE]))
    }

    /// `cordon --root R ARGS` with this world's runtime config.
    fn cordon(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(cordon_bin());
        cmd.env("CORDON_CONFIG", &self.config)
            .arg("--root")
            .arg(self.env.root.path());
        run_captured(cmd.args(args))
    }

    /// `cordon run -d [EXTRA] -b BUNDLE ID`, waiting for it to be running.
    fn run_detached(&self, id: &str, extra: &[&str]) {
        self.env.write();
        let b = self.env.bundle.path().to_string_lossy().into_owned();
        let mut args = vec!["run", "-d"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-b", &b, id]);
        ok(&self.cordon(&args));
        self.wait_running(id);
    }

    fn wait_running(&self, id: &str) {
        wait_until(&format!("{id} to run"), TIMEOUT, || {
            let s = self.env.state(id);
            if s["status"] == "running" {
                Ok(())
            } else {
                Err(format!("status {}", s["status"]))
            }
        });
    }

    /// Runs `script` with `sh -c` in container `id`; returns its stdout.
    #[track_caller]
    fn sh(&self, id: &str, script: &str) -> String {
        ok(&self.cordon(&["exec", id, "sh", "-c", script]))
    }

    /// The container's root filesystem, seen from inside.
    #[track_caller]
    fn tree(&self, id: &str) -> String {
        self.sh(
            id,
            r#"find / -xdev | sort | while read -r f; do
                 if [ -L "$f" ]; then echo "$f link $(readlink "$f")";
                 elif [ -f "$f" ]; then echo "$f file $(stat -c %a:%u:%g "$f") $(md5sum < "$f")";
                 else echo "$f $(stat -c %F:%a:%u:%g "$f")"; fi
               done"#,
        )
    }

    /// The writable layer's directory of container `id`.
    fn layer(&self, id: &str) -> PathBuf {
        self.data.path().join("lib/containers").join(id)
    }

    /// One-line failure of `cordon ARGS`: its stderr.
    #[track_caller]
    fn fails(&self, args: &[&str]) -> String {
        let out = self.cordon(args);
        assert!(!out.status.success(), "{args:?} succeeded: {}", stdout(&out));
        let e = stderr(&out);
        assert_eq!(e.trim_end().lines().count(), 1, "{args:?}: not one line: {e:?}");
        assert!(!e.contains("panicked"), "{e}");
        e
    }

    /// Deletes `id` and checks nothing of it is left: no state, no mount,
    /// no process, no writable layer.
    #[track_caller]
    fn delete_and_check(&self, id: &str) {
        ok(&self.cordon(&["delete", "--force", id]));
        assert_no_leftovers(self.env.root.path(), &[id], &[self.env.bundle.path(), self.data.path()]);
        assert!(!self.layer(id).exists(), "{} left behind", self.layer(id).display());
    }
}

/// [`World::py_tree`]'s program.
const PY_TREE: &str = r#"
import hashlib, os
dev = os.lstat("/").st_dev
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.lstat(os.path.join(root, d)).st_dev == dev]
    for n in sorted(dirs + files):
        p = os.path.join(root, n)
        st = os.lstat(p)
        if os.path.islink(p):
            extra = "-> " + os.readlink(p)
        elif os.path.isfile(p):
            with open(p, "rb") as f:
                extra = hashlib.md5(f.read()).hexdigest()
        else:
            extra = ""
        print(p, oct(st.st_mode), st.st_uid, st.st_gid, extra)
"#;

/// One host entry as [`host_tree`] sees it: mode, uid, gid, size, mtime
/// (seconds) and, for files, the content.
type HostEntry = (u32, u32, u32, u64, i64, Vec<u8>);

/// Every entry of the host directory `root` (to see that nothing changed it).
fn host_tree(root: &Path) -> BTreeMap<PathBuf, HostEntry> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let content = if m.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                Vec::new()
            };
            if m.is_dir() {
                stack.push(p.clone());
            }
            out.insert(p, (m.mode(), m.uid(), m.gid(), m.size(), m.mtime(), content));
        }
    }
    out
}

#[test]
fn restore_gives_back_each_checkpoints_tree_byte_for_byte() {
    let mut w = World::busybox();
    w.env.annotate("org.cordon.rootfs", "overlay");
    let rootfs = cordon_tests::busybox_bundle().join("rootfs");
    let before = host_tree(&rootfs);
    let id = unique("snap");
    w.run_detached(&id, &[]);
    let start = w.tree(&id);

    // Writes files, deletes one of the bundle's, replaces one of its
    // directories by a file, makes a tree, a symlink, a FIFO.
    w.sh(
        &id,
        "echo one > /one; mkdir -p /work/a/b; echo deep > /work/a/b/f; ln -s /one /link; \
         rm /etc/group; rm -rf /home; echo file > /home; chmod 600 /one; mkfifo /fifo; \
         dd if=/dev/urandom of=/big bs=64k count=16 2>/dev/null",
    );
    let first = w.tree(&id);
    assert_ne!(first, start);
    assert_eq!(ok(&w.cordon(&["checkpoint", &id])).trim(), "cp1");

    // Changes, deletes and replaces some of that, and more of the bundle's.
    w.sh(
        &id,
        "echo two >> /one; rm -rf /work/a; echo x > /work; rm /link; rm /bin/vi; mkdir /etc/group; \
         echo new > /etc/group/inside; rm /big; dd if=/dev/urandom of=/big bs=4k count=3 2>/dev/null",
    );
    let second = w.tree(&id);
    assert_eq!(ok(&w.cordon(&["checkpoint", &id, "--name", "second"])).trim(), "second");
    let list: Value = serde_json::from_str(&ok(&w.cordon(&["checkpoints", &id, "--format", "json"]))).unwrap();
    let names: Vec<(&str, &Value)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), &c["parent"]))
        .collect();
    assert_eq!(names, [("cp1", &Value::Null), ("second", &json!("cp1"))]);
    assert!(list[0]["size"].as_u64().unwrap() >= 1 << 20, "{list}");
    assert!(list[1]["files"].as_u64().unwrap() >= 5, "{list}");

    // Unchanged since: an empty diff and an empty checkpoint.
    assert_eq!(ok(&w.cordon(&["diff", &id, "second"])), "");
    w.sh(&id, "rm -rf /etc /one; echo three > /three");
    assert_ne!(w.tree(&id), second);

    ok(&w.cordon(&["restore", &id, "second"]));
    w.wait_running(&id);
    assert_eq!(w.tree(&id), second, "restored to `second`");
    assert_eq!(ok(&w.cordon(&["diff", &id, "second"])), "");

    ok(&w.cordon(&["restore", &id, "cp1"]));
    w.wait_running(&id);
    assert_eq!(w.tree(&id), first, "restored to cp1");
    assert_eq!(ok(&w.cordon(&["diff", &id, "cp1"])), "");
    // The next checkpoint's parent is the restored one.
    w.sh(&id, "echo after > /after");
    assert_eq!(ok(&w.cordon(&["checkpoint", &id])).trim(), "cp2");
    let list: Value = serde_json::from_str(&ok(&w.cordon(&["checkpoints", &id, "--format", "json"]))).unwrap();
    assert_eq!(list[2]["parent"], "cp1", "{list}");
    assert_eq!(list[2]["files"], 1, "only /after changed: {list}");

    // Both events are in the trail, and the supervisor is a new one.
    let audit = ok(&w.cordon(&["audit", &id]));
    for event in ["checkpoint cp1", "checkpoint second", "restore second", "restore cp1"] {
        assert!(audit.contains(event), "no {event:?} in the trail:\n{audit}");
    }
    assert_eq!(w.env.state(&id)["annotations"]["org.cordon.policy"], "default");

    assert!(host_tree(&rootfs) == before, "the bundle's rootfs changed");
    w.delete_and_check(&id);
}

/// A volume's mount point, which the runtime makes in the writable layer
/// when the rootfs has no such directory, is not a change of the
/// container's; what it writes into the volume is not in the layer.
#[test]
fn diff_leaves_out_the_mount_points_of_volumes() {
    let mut w = World::busybox();
    let vol = TempDir::new("vol");
    w.env.config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/vol/data", "type": "bind", "source": vol.path(), "options": ["rbind", "rw"]}));
    let id = unique("diff-vol");
    w.run_detached(&id, &["--overlay"]);
    assert_eq!(ok(&w.cordon(&["diff", &id])), "", "nothing changed yet");
    w.sh(&id, "echo in > /vol/data/f; echo out > /new");
    assert_eq!(ok(&w.cordon(&["diff", &id])), "A /new\n");
    assert_eq!(std::fs::read_to_string(vol.path().join("f")).unwrap(), "in\n");
    w.delete_and_check(&id);
}

/// A name the container chose cannot forge lines of `cordon diff`: its
/// control characters are printed escaped.
#[test]
fn diff_prints_the_containers_names_escaped() {
    let w = World::busybox();
    let id = unique("diff-esc");
    w.run_detached(&id, &["--overlay"]);
    w.sh(&id, r#"touch "$(printf '/x\nD etc')" "$(printf '/e\033[2K')""#);
    let text = ok(&w.cordon(&["diff", &id]));
    assert_eq!(text, "A /e\\x1b[2K\nA /x\\nD etc\n");
    let json: Value = serde_json::from_str(&ok(&w.cordon(&["diff", &id, "--format", "json"]))).unwrap();
    assert_eq!(json[1]["path"], "/x\nD etc", "JSON keeps the name, escaped by JSON");
    w.delete_and_check(&id);
}

/// `cordon audit --follow` goes on across a restore (the trail is the
/// same, the container's state is gone for a moment) and ends when the
/// restored container's init exits; each JSON record names the container.
#[test]
fn audit_follow_goes_on_across_a_restore() {
    let w = World::busybox();
    let id = unique("follow");
    w.run_detached(&id, &["--overlay"]);
    assert_eq!(ok(&w.cordon(&["checkpoint", &id, "--name", "base"])).trim(), "base");
    let out = TempDir::new("follow");
    let file = out.path().join("trail");
    let mut follower = Command::new(cordon_bin())
        .env("CORDON_CONFIG", &w.config)
        .arg("--root")
        .arg(w.env.root.path())
        .args(["audit", "--follow", "--json", &id])
        .stdout(std::fs::File::create(&file).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The follower has read the trail so far (the container's start) before
    // the restore: it follows a container it found, not one mid-restore.
    wait_until(
        "the follower to print the trail so far",
        TIMEOUT,
        || match std::fs::metadata(&file) {
            Ok(m) if m.len() > 0 => Ok(()),
            _ => Err("nothing yet".to_string()),
        },
    );
    ok(&w.cordon(&["restore", &id, "base"]));
    w.wait_running(&id);
    assert!(
        follower.try_wait().unwrap().is_none(),
        "the follower is still there after the restore"
    );
    ok(&w.cordon(&["kill", &id, "KILL"]));
    let status = wait_until("the follower to end with the restored init", TIMEOUT, || {
        follower.try_wait().unwrap().ok_or_else(|| "running".to_string())
    });
    assert!(status.success());
    let records: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(records.iter().all(|r| r["container"] == id.as_str()), "{records:?}");
    let events: Vec<&str> = records
        .iter()
        .filter(|r| r["syscall"] == "supervisor")
        .map(|r| r["result"].as_str().unwrap())
        .collect();
    let detail = |r: &Value| r["detail"].as_str().unwrap_or("").to_string();
    assert_eq!(events.iter().filter(|e| **e == "started").count(), 2, "{events:?}");
    assert_eq!(events.last(), Some(&"exit"), "{events:?}");
    assert!(records
        .iter()
        .any(|r| detail(r) == "restore base: restarted with a fresh supervisor"));
    w.delete_and_check(&id);
}

#[test]
fn diff_lists_added_changed_and_deleted_paths() {
    let w = World::busybox();
    let id = unique("diff");
    w.run_detached(&id, &["--overlay"]);
    assert_eq!(ok(&w.cordon(&["diff", &id])), "", "nothing changed yet");
    w.sh(
        &id,
        "echo new > /new; rm /etc/group; echo more >> /etc/hosts; mkdir /nd; echo f > /nd/f; rm -rf /var",
    );
    assert_eq!(
        ok(&w.cordon(&["diff", &id])),
        "C /etc\nD /etc/group\nC /etc/hosts\nA /nd\nA /nd/f\nA /new\nD /var\n"
    );
    let content: Value = serde_json::from_str(&ok(&w.cordon(&["diff", &id, "--content", "--format", "json"]))).unwrap();
    let hosts = content
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "/etc/hosts")
        .unwrap();
    let rootfs = cordon_tests::busybox_bundle().join("rootfs");
    let sha = |bytes: &[u8]| {
        let out = Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(bytes)?;
                c.wait_with_output()
            })
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let original = std::fs::read(rootfs.join("etc/hosts")).unwrap();
    assert_eq!(hosts["old_sha256"], sha(&original).as_str());
    assert_eq!(
        hosts["new_sha256"],
        sha(&[original.as_slice(), b"more\n"].concat()).as_str()
    );
    assert!(
        hosts["diff"]
            .as_str()
            .unwrap()
            .starts_with("--- a/etc/hosts\n+++ b/etc/hosts\n"),
        "{hosts}"
    );
    assert!(hosts["diff"].as_str().unwrap().ends_with("\n+more\n"), "{hosts}");
    let by_path = |p: &str| {
        content
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["path"] == p)
            .unwrap()
            .clone()
    };
    assert_eq!(by_path("/new")["old_sha256"], Value::Null);
    assert_eq!(by_path("/new")["diff"], "--- a/new\n+++ b/new\n@@ -0,0 +1 @@\n+new\n");
    assert_eq!(by_path("/etc/group")["new_sha256"], Value::Null);
    assert!(by_path("/nd").get("old_sha256").is_none(), "a directory has no content");
    let text = ok(&w.cordon(&["diff", &id, "--content"]));
    assert!(text.contains("C /etc/hosts\n  sha256 "), "{text}");
    assert_eq!(ok(&w.cordon(&["checkpoint", &id, "--name", "base"])).trim(), "base");
    w.sh(
        &id,
        "rm -rf /nd; echo changed > /new; echo other > /other; touch /etc/group",
    );
    let since: Value =
        serde_json::from_str(&ok(&w.cordon(&["diff", &id, "base", "--content", "--format", "json"]))).unwrap();
    let new = since.as_array().unwrap().iter().find(|c| c["path"] == "/new").unwrap();
    assert_eq!(
        new["old_sha256"],
        sha(b"new\n").as_str(),
        "the checkpoint's version: {new}"
    );
    assert_eq!(new["diff"], "--- a/new\n+++ b/new\n@@ -1 +1 @@\n-new\n+changed\n");
    let json: Value = serde_json::from_str(&ok(&w.cordon(&["diff", &id, "base", "--format", "json"]))).unwrap();
    assert_eq!(
        json,
        json!([
            {"kind": "C", "path": "/etc"},
            {"kind": "A", "path": "/etc/group"},
            {"kind": "D", "path": "/nd"},
            {"kind": "D", "path": "/nd/f"},
            {"kind": "C", "path": "/new"},
            {"kind": "A", "path": "/other"},
        ])
    );
    w.delete_and_check(&id);
}

#[test]
fn bad_input_gets_one_clear_line() {
    let w = World::busybox();
    let id = unique("bad");
    w.run_detached(&id, &["--overlay"]);
    assert!(w
        .fails(&["restore", &id, "nope"])
        .contains("has no checkpoint \"nope\""));
    assert!(w.fails(&["diff", &id, "nope"]).contains("has no checkpoint \"nope\""));
    assert!(w
        .fails(&["checkpoint", "rm", &id, "nope"])
        .contains("has no checkpoint \"nope\""));
    assert!(w
        .fails(&["checkpoint", &id, "--name", "../x"])
        .contains("checkpoint name \"../x\""));
    assert!(w.fails(&["checkpoint", "no-such-container"]).contains("does not exist"));
    assert!(w.fails(&["restore", &id]).contains("checkpoint name is missing"));
    for criu in [
        &["checkpoint", "--image-path", "/tmp/x", &id][..],
        &["restore", "--image-path", "/tmp/x", &id],
        &["restore", "-b", "/tmp/x", &id],
    ] {
        assert!(w.fails(criu).contains("CRIU"), "{criu:?}");
    }
    ok(&w.cordon(&["checkpoint", &id]));
    ok(&w.cordon(&["checkpoint", &id]));
    assert!(w
        .fails(&["checkpoint", &id, "--name", "cp1"])
        .contains("has a checkpoint \"cp1\" already"));
    assert!(w
        .fails(&["checkpoint", "rm", &id, "cp1"])
        .contains("is the parent of \"cp2\""));

    // Another checkpoint holds the container's lock: a clear refusal, and
    // nothing half-written.
    {
        let f = std::fs::File::open(w.layer(&id).join("lock")).unwrap();
        // SAFETY: flock on an fd this test owns.
        assert_eq!(
            unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), libc::LOCK_EX) },
            0
        );
        // The error names the operation: here the last one cordon ran
        // with the lock held exclusively (a checkpoint rm).
        let e = w.fails(&["checkpoint", &id]);
        assert!(
            e.contains("checkpoint of container") && e.contains("while a checkpoint rm of it is running"),
            "{e}"
        );
        let e = w.fails(&["restore", &id, "cp1"]);
        assert!(e.contains("restore of container") && e.contains("is running"), "{e}");
        let e = w.fails(&["fork", &id, "cp1", &unique("bad-fork")]);
        assert!(e.contains("fork of container") && e.contains("is running"), "{e}");
    }
    {
        // A fork holds the lock shared: checkpoints wait, forks do not.
        let f = std::fs::File::open(w.layer(&id).join("lock")).unwrap();
        // SAFETY: flock on an fd this test owns.
        assert_eq!(
            unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), libc::LOCK_SH) },
            0
        );
        let e = w.fails(&["checkpoint", &id]);
        assert!(e.contains("while a fork of it is running"), "{e}");
    }
    let entries: Vec<String> = std::fs::read_dir(w.layer(&id).join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries.len(), 2, "{entries:?}");

    // Removing the head: the next checkpoint's parent is its parent.
    ok(&w.cordon(&["checkpoint", "rm", &id, "cp2"]));
    ok(&w.cordon(&["checkpoint", &id]));
    let list: Value = serde_json::from_str(&ok(&w.cordon(&["checkpoints", &id, "--format", "json"]))).unwrap();
    assert_eq!(list[1]["name"], "cp2");
    assert_eq!(list[1]["parent"], "cp1");

    // A stopped container has nothing to checkpoint.
    ok(&w.cordon(&["kill", &id, "KILL"]));
    wait_until(&format!("{id} to stop"), TIMEOUT, || {
        match w.env.state(&id)["status"].as_str() {
            Some("stopped") => Ok(()),
            s => Err(format!("{s:?}")),
        }
    });
    assert!(w.fails(&["checkpoint", &id]).contains("is stopped"));

    // --keep-checkpoints keeps them (and only them); a plain delete of a
    // new container of the id is then refused until they are removed.
    ok(&w.cordon(&["delete", "--keep-checkpoints", &id]));
    assert!(w.layer(&id).join("checkpoints/cp1/info.json").exists());
    assert!(!w.layer(&id).join("upper").exists());
    assert_no_leftovers(w.env.root.path(), &[&id], &[w.env.bundle.path()]);
    let b = w.env.bundle.path().to_string_lossy().into_owned();
    assert!(w.fails(&["create", "--overlay", "-b", &b, &id]).contains("exists"));
    std::fs::remove_dir_all(w.layer(&id)).unwrap();
    assert_no_leftovers(w.env.root.path(), &[&id], &[w.env.bundle.path(), w.data.path()]);

    // A container without cordon's layer.
    let plain = unique("plain");
    w.run_detached(&plain, &[]);
    assert!(w.fails(&["checkpoint", &plain]).contains("no writable layer"));
    assert!(w.fails(&["diff", &plain]).contains("no writable layer"));
    w.delete_and_check(&plain);
}

#[test]
fn a_failed_create_leaves_no_layer_and_no_mount() {
    let mut w = World::busybox();
    w.env.config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/x", "type": "bind", "source": "/no/such/dir", "options": ["rbind"]}));
    let id = unique("fail");
    w.env.write();
    let b = w.env.bundle.path().to_string_lossy().into_owned();
    let out = w.cordon(&["create", "--overlay", "-b", &b, &id]);
    assert!(!out.status.success());
    assert_no_leftovers(w.env.root.path(), &[&id], &[w.env.bundle.path(), w.data.path()]);
    assert!(!w.layer(&id).exists());
}

#[test]
fn a_call_pending_in_the_supervisor_is_defined() {
    let mut w = World::busybox();
    w.env.annotate("org.cordon.enforcement", "supervisor");
    let host = TempDir::new("fifo");
    let fifo = host.path().join("p");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
    w.env.config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/host", "type": "bind", "source": host.path(), "options": ["rbind", "rw"]}));
    w.env.config["process"]["args"] = json!([
        "sh",
        "-c",
        "probe read /host/p; echo thawed > /host/after; exec sleep 1000"
    ]);
    let id = unique("fifo");
    w.run_detached(&id, &["--overlay"]);
    wait_until("the probe to wait on the FIFO", TIMEOUT, || {
        let p: Vec<i32> = processes_of(&id)
            .iter()
            .filter(|p| p.ends_with("(probe read /host/p)"))
            .map(|p| p.split(' ').next().unwrap().parse().unwrap())
            .collect();
        let wchan = p
            .first()
            .and_then(|p| std::fs::read_to_string(format!("/proc/{p}/wchan")).ok());
        match wchan {
            Some(w) if w.contains("seccomp") || w.contains("ptrace_stop") => Ok(()),
            w => Err(format!("{p:?} in {w:?}")),
        }
    });
    if test_platform().as_deref() == Some("ptrace") {
        // A tracee in its syscall stop freezes: the checkpoint is taken.
        assert_eq!(ok(&w.cordon(&["checkpoint", &id])).trim(), "cp1");
    } else {
        // A call waiting in its seccomp notification cannot be frozen: the
        // freezer gives up, thaws, and the checkpoint is absent.
        let e = w.fails(&["checkpoint", &id]);
        assert!(
            e.contains("cannot freeze") && e.contains("wait in its supervisor"),
            "{e}"
        );
        assert_eq!(ok(&w.cordon(&["checkpoints", &id, "--format", "json"])).trim(), "[]");
        let left: Vec<_> = std::fs::read_dir(w.layer(&id).join("checkpoints")).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }
    // Thawed either way: the probe goes on once a writer comes.
    std::fs::write(&fifo, b"x").unwrap();
    wait_until("the container to go on", TIMEOUT, || {
        std::fs::read_to_string(host.path().join("after")).map_err(|e| e.to_string())
    });
    assert_eq!(w.env.state(&id)["status"], "running");
    w.delete_and_check(&id);
}

#[test]
fn a_fork_starts_from_the_checkpoints_files_and_goes_its_own_way() {
    let w = World::busybox();
    let id = unique("src");
    let fork = unique("fork");
    w.run_detached(&id, &["--overlay"]);
    w.sh(
        &id,
        "echo base > /base; rm -rf /home; echo f > /home; mkdir -p /w/x; echo y > /w/x/y; rm /etc/group",
    );
    ok(&w.cordon(&["checkpoint", &id]));
    let at_cp1 = w.tree(&id);
    w.sh(&id, "echo later > /later; rm /base");

    assert!(w
        .fails(&["fork", &id, "nope", &fork])
        .contains("has no checkpoint \"nope\""));
    assert!(w.fails(&["fork", &id, "cp1", &id]).contains("already exists"));
    ok(&w.cordon(&["fork", &id, "cp1", &fork]));
    w.wait_running(&fork);
    assert_eq!(w.tree(&fork), at_cp1, "the fork's files are the checkpoint's");
    assert_eq!(
        ok(&w.cordon(&["diff", &fork])),
        "",
        "nothing changed since the fork started"
    );

    // Each goes its own way.
    w.sh(&fork, "echo mine > /mine");
    assert!(!w.sh(&id, "ls /").contains("mine"));
    assert!(!w.sh(&fork, "ls /").contains("later"));
    assert_eq!(ok(&w.cordon(&["diff", &fork])), "A /mine\n");
    // The fork's own first checkpoint holds what it changed: restoring it
    // gives the fork's files back, over the checkpoint it started from.
    let forked = w.tree(&fork);
    assert_eq!(ok(&w.cordon(&["checkpoint", &fork])).trim(), "cp1");
    w.sh(&fork, "rm -rf /w /mine");
    ok(&w.cordon(&["restore", &fork, "cp1"]));
    w.wait_running(&fork);
    assert_eq!(w.tree(&fork), forked);
    assert!(ok(&w.cordon(&["audit", &fork])).contains(&format!("forked from checkpoint cp1 of container {id}")));

    ok(&w.cordon(&["delete", "--force", &fork]));
    w.delete_and_check(&id);
    w.delete_and_check(&fork);
}

#[test]
fn python_a_wheel_installed_between_checkpoints_comes_and_goes_with_them() {
    // A wheel (a zip of the package and its dist-info), built on the host;
    // the bundle has no pip: it is unpacked into site-packages as pip does.
    let host = TempDir::new("wheel");
    let script = r#"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("snapdemo/__init__.py", "VALUE = 42\n")
    z.writestr("snapdemo/data.txt", "x" * 100000)
    z.writestr("snapdemo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: snapdemo\nVersion: 1.0\n")
    z.writestr("snapdemo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("snapdemo-1.0.dist-info/RECORD", "")
"#;
    let wheel = host.path().join("snapdemo-1.0-py3-none-any.whl");
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&wheel)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let w = World::python(host.path());
    let id = unique("py");
    w.run_detached(&id, &["--overlay"]);
    let import = "import snapdemo; print(snapdemo.VALUE)";
    ok(&w.cordon(&[
        "exec",
        &id,
        "python3",
        "-c",
        "import zipfile; zipfile.ZipFile('/host/snapdemo-1.0-py3-none-any.whl').extractall('/usr/local/lib/python3.11/dist-packages')",
    ]));
    assert_eq!(ok(&w.cordon(&["exec", &id, "python3", "-c", import])).trim(), "42");
    let installed = w.py_tree(&id);
    ok(&w.cordon(&["checkpoint", &id, "--name", "installed"]));

    // Deletes files (of the bundle's and of the package), replaces a
    // directory by a file.
    ok(&w.cordon(&[
        "exec",
        &id,
        "sh",
        "-c",
        "rm -rf /usr/local/lib/python3.11/dist-packages/snapdemo /usr/lib/python3.11/email; \
         rm -rf /usr/share/doc; echo gone > /usr/share/doc",
    ]));
    let broken = w.py_tree(&id);
    assert!(installed.contains("/usr/local/lib/python3.11/dist-packages/snapdemo/__init__.py "));
    assert!(
        !broken.contains("snapdemo/") && broken.contains("/usr/share/doc 0o100644"),
        "{broken}"
    );
    ok(&w.cordon(&["checkpoint", &id, "--name", "broken"]));
    let diff = ok(&w.cordon(&["diff", &id, "installed"]));
    for line in [
        "D /usr/local/lib/python3.11/dist-packages/snapdemo\n",
        "D /usr/lib/python3.11/email/__init__.py\n",
        "C /usr/share/doc\n",
    ] {
        assert!(diff.contains(line), "no {line:?} in:\n{diff}");
    }

    ok(&w.cordon(&["restore", &id, "installed"]));
    w.wait_running(&id);
    assert_eq!(w.py_tree(&id), installed);
    assert_eq!(ok(&w.cordon(&["exec", &id, "python3", "-c", import])).trim(), "42");

    ok(&w.cordon(&["restore", &id, "broken"]));
    w.wait_running(&id);
    assert_eq!(w.py_tree(&id), broken);
    let out = w.cordon(&["exec", &id, "python3", "-c", import]);
    assert!(!out.status.success(), "the package is gone at `broken`");

    let fork = unique("pyfork");
    ok(&w.cordon(&["fork", &id, "installed", &fork]));
    w.wait_running(&fork);
    assert_eq!(w.py_tree(&fork), installed);
    ok(&w.cordon(&["delete", "--force", &fork]));
    w.delete_and_check(&id);
    w.delete_and_check(&fork);
}

#[test]
fn a_full_disk_half_way_leaves_no_checkpoint_and_a_running_container() {
    // A data directory on a 4 MiB tmpfs: the container's 2.5 MiB file fits
    // in its upper layer, its copy in a checkpoint does not.
    let w = World::busybox();
    let lib = w.data.path().join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&lib)
        .status()
        .unwrap();
    assert!(st.success());
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(lib.clone());
    let id = unique("full");
    w.run_detached(&id, &["--overlay"]);
    w.sh(&id, "echo small > /small");
    ok(&w.cordon(&["checkpoint", &id]));
    w.sh(&id, "dd if=/dev/zero of=/big bs=64k count=40 2>/dev/null");
    let e = w.fails(&["checkpoint", &id]);
    assert!(e.contains("No space left on device"), "{e}");
    let list: Value = serde_json::from_str(&ok(&w.cordon(&["checkpoints", &id, "--format", "json"]))).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let entries: Vec<String> = std::fs::read_dir(w.layer(&id).join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["cp1"], "nothing half-written");
    // Thawed: it still runs and answers.
    assert_eq!(w.sh(&id, "cat /small"), "small\n");
    // With room again, the next checkpoint holds the change, as cp2.
    w.sh(&id, "rm /big; echo b > /b");
    assert_eq!(ok(&w.cordon(&["checkpoint", &id])).trim(), "cp2");
    ok(&w.cordon(&["restore", &id, "cp1"]));
    w.wait_running(&id);
    assert_eq!(
        w.sh(&id, "ls /b /big 2>&1; cat /small"),
        "ls: /b: No such file or directory\nls: /big: No such file or directory\nsmall\n"
    );
    // The test's tmpfs stays until the end: the container's own mounts go.
    ok(&w.cordon(&["delete", "--force", &id]));
    assert_no_leftovers(w.env.root.path(), &[&id], &[w.env.bundle.path()]);
    let containers = lib.join("containers").to_string_lossy().into_owned();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mountinfo.contains(&containers), "{mountinfo}");
    assert!(!w.layer(&id).exists());
}

#[test]
fn a_restore_stops_the_processes_an_exec_started() {
    let w = World::busybox();
    let id = unique("rexec");
    w.run_detached(&id, &["--overlay"]);
    ok(&w.cordon(&["checkpoint", &id]));
    let pidfile = w.data.path().join("exec.pid");
    ok(&w.cordon(&[
        "exec",
        "-d",
        "--pid-file",
        pidfile.to_str().unwrap(),
        &id,
        "sleep",
        "1001",
    ]));
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    assert!(cordon_tests::alive(pid));
    ok(&w.cordon(&["restore", &id, "cp1"]));
    w.wait_running(&id);
    wait_until("the exec'd process to be gone", TIMEOUT, || {
        if cordon_tests::alive(pid) {
            Err(format!("{pid} alive"))
        } else {
            Ok(())
        }
    });
    assert!(!w.sh(&id, "ps").contains("1001"));
    w.delete_and_check(&id);
}

#[test]
fn an_overlay_an_engine_mounted_gets_checkpoints_and_diffs_but_no_restore() {
    // The rootfs is an overlay mounted as containerd's snapshotter does:
    // two lower layers (the bundle's rootfs beneath a layer that deletes
    // /etc/group and adds /layer), an upper layer the engine owns.
    let mut w = World::busybox();
    let engine = TempDir::new("engine");
    let (top, upper, work, merged) = (
        engine.path().join("top"),
        engine.path().join("upper"),
        engine.path().join("work"),
        engine.path().join("rootfs"),
    );
    for d in [&top, &upper, &work, &merged] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::create_dir(top.join("etc")).unwrap();
    let c = std::ffi::CString::new(top.join("etc/group").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR, 0) }, 0);
    std::fs::write(top.join("layer"), "from the image\n").unwrap();
    let lower = cordon_tests::busybox_bundle().join("rootfs");
    let st = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o"])
        .arg(format!(
            "lowerdir={}:{},upperdir={},workdir={}",
            top.display(),
            lower.display(),
            upper.display(),
            work.display()
        ))
        .arg(&merged)
        .status()
        .unwrap();
    assert!(st.success());
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(merged.clone());
    w.env.config["root"]["path"] = merged.to_string_lossy().into_owned().into();
    let id = unique("engine");
    w.run_detached(&id, &[]);
    assert_eq!(
        w.sh(&id, "cat /layer; ls /etc/group 2>&1; true"),
        "from the image\nls: /etc/group: No such file or directory\n"
    );

    w.sh(&id, "echo new > /new; rm /layer; echo more >> /etc/hosts");
    assert_eq!(ok(&w.cordon(&["diff", &id])), "C /etc/hosts\nD /layer\nA /new\n");
    assert_eq!(ok(&w.cordon(&["checkpoint", &id])).trim(), "cp1");
    w.sh(&id, "rm /new; echo g > /etc/group");
    assert_eq!(ok(&w.cordon(&["diff", &id, "cp1"])), "C /etc\nA /etc/group\nD /new\n");
    let list: Value = serde_json::from_str(&ok(&w.cordon(&["checkpoints", &id, "--format", "json"]))).unwrap();
    assert_eq!(list[0]["name"], "cp1");
    assert!(w.layer(&id).join("checkpoints/cp1/layer/new").exists());

    for args in [&["restore", &id, "cp1"][..], &["fork", &id, "cp1", "other"]] {
        let e = w.fails(args);
        assert!(e.contains("an overlay an engine mounted"), "{e}");
    }
    // The engine's layers are its own: delete removes cordon's checkpoints
    // and nothing of the engine's.
    ok(&w.cordon(&["delete", "--force", &id]));
    assert!(!w.layer(&id).exists());
    assert_eq!(std::fs::read_to_string(upper.join("etc/group")).unwrap(), "g\n");
    assert_no_leftovers(w.env.root.path(), &[&id], &[w.env.bundle.path(), w.data.path()]);
}

/// Hard links, extended attributes and names that are not UTF-8 come back
/// with a restore and a fork: each name of a file is one file again, the
/// xattrs are the file's, odd names are kept byte for byte.
#[test]
fn hard_links_xattrs_and_odd_names_come_back() {
    let w = World::busybox();
    let id = unique("links");
    w.run_detached(&id, &["--overlay"]);
    let merged = w.layer(&id).join("merged");
    let setx = |p: &str, name: &str, value: &str| {
        let st = Command::new("python3")
            .args([
                "-c",
                "import os, sys; os.setxattr(sys.argv[1], sys.argv[2], sys.argv[3].encode(), follow_symlinks=False)",
            ])
            .arg(merged.join(p.trim_start_matches('/')))
            .args([name, value])
            .status()
            .unwrap();
        assert!(st.success(), "setxattr {p} {name}");
    };
    let getx = |layer_root: &Path, p: &str| -> String {
        let out = Command::new("python3")
            .args(["-c", "import os, sys\ntry: print(os.getxattr(sys.argv[1], 'user.note', follow_symlinks=False).decode())\nexcept OSError as e: print('none', e.errno)"])
            .arg(layer_root.join(p.trim_start_matches('/')))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // One file with two names, a name that is not UTF-8, a name with a
    // backslash, xattrs on a file and a directory.
    w.sh(
        &id,
        "echo shared > /h1; ln /h1 /h2; mkdir /xd; echo x > /xd/f; \
         echo odd > \"$(printf '/odd\\377name')\"; echo back > '/back\\x41slash'",
    );
    setx("/xd/f", "user.note", "file-note");
    setx("/xd", "user.note", "dir-note");
    ok(&w.cordon(&["checkpoint", &id]));
    // A third name of the same file in the next checkpoint; the directory's
    // xattr goes, the file's changes.
    w.sh(&id, "ln /h1 /xd/h3; echo more >> /h2");
    setx("/xd/f", "user.note", "changed");
    let out = Command::new("python3")
        .args(["-c", "import os, sys; os.removexattr(sys.argv[1], 'user.note')"])
        .arg(merged.join("xd"))
        .status()
        .unwrap();
    assert!(out.success());
    let links = "stat -c '%n %h' /h1 /h2 /xd/h3; [ /h1 -ef /xd/h3 ] && [ /h2 -ef /h1 ] && echo one-file";
    let at_cp2 = (w.tree(&id), w.sh(&id, links));
    assert!(
        at_cp2.1.contains("/h1 3\n") && at_cp2.1.contains("one-file"),
        "{}",
        at_cp2.1
    );
    assert!(
        at_cp2.0.contains("/odd") && at_cp2.0.contains("/back\\x41slash"),
        "{}",
        at_cp2.0
    );
    ok(&w.cordon(&["checkpoint", &id]));

    w.sh(&id, "rm -rf /h1 /h2 /xd /odd* /back*; echo later > /later");
    ok(&w.cordon(&["restore", &id, "cp2"]));
    w.wait_running(&id);
    assert_eq!((w.tree(&id), w.sh(&id, links)), at_cp2, "restored to cp2");
    assert_eq!(getx(&merged, "/xd/f"), "changed");
    assert_eq!(
        getx(&merged, "/xd"),
        "none 61",
        "the directory's xattr was removed at cp2"
    );
    let odd = merged.join(std::ffi::OsStr::from_bytes(b"odd\xffname"));
    assert_eq!(std::fs::read(&odd).unwrap(), b"odd\n", "{}", odd.display());
    assert_eq!(std::fs::read(merged.join("back\\x41slash")).unwrap(), b"back\n");

    ok(&w.cordon(&["restore", &id, "cp1"]));
    w.wait_running(&id);
    assert_eq!(
        w.sh(&id, "stat -c '%n %h' /h1 /h2; cat /h2; [ -e /xd/h3 ] || echo no-h3"),
        "/h1 2\n/h2 2\nshared\nno-h3\n"
    );
    assert_eq!(getx(&merged, "/xd/f"), "file-note");
    assert_eq!(getx(&merged, "/xd"), "dir-note");

    // A fork of cp2 has them too.
    let fork = unique("links-fork");
    ok(&w.cordon(&["fork", &id, "cp2", &fork]));
    w.wait_running(&fork);
    let fork_merged = w.layer(&fork).join("merged");
    assert_eq!(w.tree(&fork), at_cp2.0);
    assert!(w.sh(&fork, links).contains("one-file"));
    assert_eq!(getx(&fork_merged, "/xd/f"), "changed");
    assert_eq!(
        std::fs::read(fork_merged.join(std::ffi::OsStr::from_bytes(b"odd\xffname"))).unwrap(),
        b"odd\n"
    );
    ok(&w.cordon(&["delete", "--force", &fork]));
    w.delete_and_check(&id);
    w.delete_and_check(&fork);
}

/// A fork shares the checkpoint's files instead of copying them, and does
/// not depend on them: its parent's deletion leaves it whole. A fork of a
/// fork stacks both.
#[test]
fn a_fork_shares_the_checkpoints_files_and_outlives_its_parent() {
    let w = World::busybox();
    let id = unique("cow");
    let fork = unique("cow-fork");
    let grandchild = unique("cow-fork2");
    w.run_detached(&id, &["--overlay"]);
    w.sh(
        &id,
        "dd if=/dev/urandom of=/big bs=64k count=16 2>/dev/null; rm /etc/group; mkdir -p /w/x; echo y > /w/x/y",
    );
    ok(&w.cordon(&["checkpoint", &id]));
    let big = w.sh(&id, "md5sum < /big");
    ok(&w.cordon(&["fork", &id, "cp1", &fork]));
    w.wait_running(&fork);
    // The same inode: no content was copied.
    let ino = |p: PathBuf| {
        std::fs::metadata(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .ino()
    };
    assert_eq!(
        ino(w.layer(&fork).join("lower/big")),
        ino(w.layer(&id).join("checkpoints/cp1/layer/big")),
        "the fork's lower layer links the checkpoint's file"
    );
    assert_eq!(ok(&w.cordon(&["diff", &fork])), "", "nothing changed since the fork");
    w.sh(&fork, "echo mine >> /big; rm -rf /w; echo f2 > /f2");
    assert_eq!(
        ok(&w.cordon(&["diff", &fork])),
        "C /big\nA /f2\nD /w\nD /w/x\nD /w/x/y\n"
    );
    assert_eq!(w.sh(&id, "md5sum < /big"), big, "the parent's file is untouched");
    ok(&w.cordon(&["checkpoint", &fork]));
    let fork_cp1 = w.tree(&fork);

    // The parent goes, checkpoints and all; the fork keeps its files, and
    // forks again.
    ok(&w.cordon(&["delete", "--force", &id]));
    assert!(!w.layer(&id).exists(), "the parent's layer and checkpoints are gone");
    assert_eq!(w.tree(&fork), fork_cp1);
    ok(&w.cordon(&["fork", &fork, "cp1", &grandchild]));
    w.wait_running(&grandchild);
    assert_eq!(w.tree(&grandchild), fork_cp1);
    assert_eq!(ok(&w.cordon(&["diff", &grandchild])), "");
    // Restoring the fork goes back over its own lower layer.
    w.sh(&fork, "rm -rf /big /f2 /etc; echo z > /z");
    ok(&w.cordon(&["restore", &fork, "cp1"]));
    w.wait_running(&fork);
    assert_eq!(w.tree(&fork), fork_cp1);
    ok(&w.cordon(&["delete", "--force", &grandchild]));
    ok(&w.cordon(&["delete", "--force", &fork]));
    for c in [&id, &fork, &grandchild] {
        w.delete_and_check(c);
    }
}

/// A restore starts the container again under the policy fixed at its
/// create, not the policy file as it is now.
#[test]
fn a_restore_keeps_the_policy_of_create() {
    let w = World::busybox();
    let file = w.data.path().join("p.toml");
    std::fs::write(
        &file,
        "name = \"p\"\nextends = \"default\"\n[[syscall]]\nnames = [\"sched_setaffinity\"]\naction = \"deny\"\n",
    )
    .unwrap();
    let id = unique("snap-policy");
    w.env.write();
    let b = w.env.bundle.path().to_string_lossy().into_owned();
    ok(&w.cordon(&[
        "--policy",
        &file.to_string_lossy(),
        "run",
        "-d",
        "--overlay",
        "-b",
        &b,
        &id,
    ]));
    w.wait_running(&id);
    let probe = "taskset 1 true 2>/dev/null; echo $?";
    assert_eq!(w.sh(&id, probe).trim(), "1", "refused as created");
    ok(&w.cordon(&["checkpoint", &id]));
    std::fs::write(&file, "name = \"p\"\nextends = \"default\"\n").unwrap();
    ok(&w.cordon(&["restore", &id, "cp1"]));
    w.wait_running(&id);
    assert_eq!(
        w.sh(&id, probe).trim(),
        "1",
        "refused after a restore, the file changed"
    );
    std::fs::remove_file(&file).unwrap();
    ok(&w.cordon(&["restore", &id, "cp1"]));
    w.wait_running(&id);
    assert_eq!(w.sh(&id, probe).trim(), "1", "refused after a restore, the file gone");
    w.delete_and_check(&id);
}

/// A fork and a restore of a container run with `--trace` are traced
/// too: what the BPF filter refuses (chroot under the default policy) is
/// recorded in their trails, with the same errno.
#[test]
fn a_fork_and_a_restore_keep_trace_mode() {
    let w = World::busybox();
    let id = unique("snap-trace");
    w.env.write();
    let b = w.env.bundle.path().to_string_lossy().into_owned();
    ok(&w.cordon(&["--trace", "run", "-d", "--overlay", "-b", &b, &id]));
    w.wait_running(&id);
    ok(&w.cordon(&["checkpoint", &id, "--name", "base"]));
    let fork = format!("{id}-f");
    ok(&w.cordon(&["fork", &id, "base", &fork]));
    w.wait_running(&fork);
    ok(&w.cordon(&["restore", &id, "base"]));
    w.wait_running(&id);
    for c in [&fork, &id] {
        let probe = "chroot / true 2>/dev/null; echo $?";
        assert_eq!(w.sh(c, probe).trim(), "1", "{c}: chroot refused");
        w.env
            .audit_with(c, &format!("{c}: the refused chroot in the trail"), |r| {
                r["syscall"] == "chroot" && r["action"] == "deny" && r["result"] == "EPERM"
            });
    }
    ok(&w.cordon(&["delete", "--force", &fork]));
    w.delete_and_check(&id);
}

/// What [`a_fork_is_never_weaker_than_its_parent`] asks inside a
/// container: a connect to a denied address, a read of a denied file, a
/// write beneath a read-only directory.
const DENIALS: &str = "probe connect 127.0.0.2 80; \
    cat /etc/shadow >/dev/null 2>&1 && echo read || echo denied; \
    (echo x > /etc/x) 2>/dev/null && echo wrote || echo refused";

/// A fork runs under its parent's policy fixed at create (not the runtime
/// config's), with its platform and enforcement level; `fork --policy P`
/// is accepted only when P narrows the parent's, and a looser one is
/// refused in one line naming the rule.
#[test]
fn a_fork_is_never_weaker_than_its_parent() {
    let w = World::busybox();
    let rules = "[[net]]\ncidr = \"127.0.0.2/32\"\naction = \"deny\"\n\
                 [[path]]\npattern = \"/etc/shadow\"\naccess = \"deny\"\n\
                 [[path]]\npattern = \"/etc/**\"\naccess = \"read-only\"\n";
    let file = w.data.path().join("ws.toml");
    std::fs::write(&file, format!("name = \"ws\"\nextends = \"default\"\n{rules}")).unwrap();
    let narrower = w.data.path().join("narrower.toml");
    std::fs::write(
        &narrower,
        format!(
            "name = \"narrower\"\nextends = \"default\"\n[[net]]\ncidr = \"127.0.0.3/32\"\naction = \"deny\"\n{rules}"
        ),
    )
    .unwrap();
    let file_s = file.to_string_lossy().into_owned();
    let id = unique("ag");
    let (fork, same, narrow, loose) = (
        unique("ag-fork"),
        unique("ag-same"),
        unique("ag-narrow"),
        unique("ag-loose"),
    );
    w.env.write();
    let b = w.env.bundle.path().to_string_lossy().into_owned();
    ok(&w.cordon(&["--policy", &file_s, "run", "-d", "--overlay", "-b", &b, &id]));
    w.wait_running(&id);
    // A file to deny, written from the host through the overlay.
    std::fs::write(w.layer(&id).join("merged/etc/shadow"), "root:x:\n").unwrap();
    let denied = "err EPERM\ndenied\nrefused\n";
    assert_eq!(w.sh(&id, DENIALS), denied, "the parent's denials");
    ok(&w.cordon(&["checkpoint", &id]));

    ok(&w.cordon(&["fork", &id, "cp1", &fork]));
    w.wait_running(&fork);
    assert_eq!(
        w.sh(&fork, DENIALS),
        denied,
        "every denial of the parent holds in the fork"
    );
    let (parent, child) = (w.env.state(&id), w.env.state(&fork));
    assert_eq!(child["annotations"]["org.cordon.policy"], file_s.as_str());
    for key in ["org.cordon.policy", "org.cordon.platform", "org.cordon.enforcement"] {
        assert_eq!(child["annotations"][key], parent["annotations"][key], "{key}");
    }

    let e = w.fails(&["--policy", "default", "fork", &id, "cp1", &loose]);
    assert!(e.contains("refused") && e.contains("/etc/shadow"), "{e}");
    assert!(!w.env.root.path().join(&loose).exists());
    assert!(!w.layer(&loose).exists(), "nothing of a refused fork is left");

    ok(&w.cordon(&["--policy", &file_s, "fork", &id, "cp1", &same]));
    w.wait_running(&same);
    assert_eq!(w.sh(&same, DENIALS), denied, "the same policy again");
    let narrower_s = narrower.to_string_lossy().into_owned();
    ok(&w.cordon(&["--policy", &narrower_s, "fork", &id, "cp1", &narrow]));
    w.wait_running(&narrow);
    assert_eq!(
        w.sh(&narrow, DENIALS),
        denied,
        "a narrower policy keeps the parent's denials"
    );
    assert_eq!(
        w.sh(&narrow, "probe connect 127.0.0.3 80"),
        "err EPERM\n",
        "and adds its own"
    );
    assert_eq!(
        w.env.state(&narrow)["annotations"]["org.cordon.policy"],
        narrower_s.as_str()
    );

    for c in [&narrow, &same, &fork] {
        ok(&w.cordon(&["delete", "--force", c]));
    }
    for c in [&id, &narrow, &same, &fork] {
        w.delete_and_check(c);
    }
}

/// Forks of one checkpoint run at once: the parent's lock is shared by
/// forks and held only while the checkpoint's files are linked.
#[test]
fn ten_forks_of_one_checkpoint_at_once_all_run() {
    let w = World::busybox();
    let id = unique("many");
    w.run_detached(&id, &["--overlay"]);
    w.sh(&id, "echo base > /base");
    ok(&w.cordon(&["checkpoint", &id]));
    let forks: Vec<String> = (0..10).map(|i| unique(&format!("many-{i}"))).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = forks
            .iter()
            .map(|f| s.spawn(|| w.cordon(&["fork", &id, "cp1", f])))
            .collect();
        for (h, f) in handles.into_iter().zip(&forks) {
            let out = h.join().unwrap();
            assert!(out.status.success(), "fork {f}: {}", stderr(&out));
        }
    });
    for f in &forks {
        w.wait_running(f);
        assert_eq!(w.sh(f, "cat /base"), "base\n", "{f} runs on the checkpoint's files");
    }
    for f in &forks {
        ok(&w.cordon(&["delete", "--force", f]));
    }
    for c in [&id].into_iter().chain(&forks) {
        w.delete_and_check(c);
    }
}

/// A fork of a container whose bundle names its cgroup (`cgroupsPath`,
/// as engines and the bench write it) gets a cgroup of its own next to
/// the parent's, and keeps it across a restore: `delete --force` of the
/// fork leaves the parent running.
#[test]
fn a_fork_of_a_bundle_naming_its_cgroup_gets_its_own() {
    let mut w = World::busybox();
    let id = unique("cg");
    let (fork, grandchild) = (unique("cg-fork"), unique("cg-fork2"));
    w.env.config["linux"]["cgroupsPath"] = format!("/cordon-test/{id}").into();
    w.run_detached(&id, &["--overlay"]);
    ok(&w.cordon(&["checkpoint", &id]));
    ok(&w.cordon(&["fork", &id, "cp1", &fork]));
    w.wait_running(&fork);
    ok(&w.cordon(&["checkpoint", &fork]));
    ok(&w.cordon(&["fork", &fork, "cp1", &grandchild]));
    w.wait_running(&grandchild);
    ok(&w.cordon(&["restore", &fork, "cp1"]));
    w.wait_running(&fork);
    let cgroup = |c: &str| {
        let pid = w.env.state(c)["pid"].as_i64().unwrap();
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains(":pids:") || l.starts_with("0::"))
            .unwrap()
            .to_string();
        line.rsplit(':').next().unwrap().to_string()
    };
    assert!(cgroup(&id).ends_with(&format!("/cordon-test/{id}")), "{}", cgroup(&id));
    assert!(
        cgroup(&fork).ends_with(&format!("/cordon-test/{fork}")),
        "{}",
        cgroup(&fork)
    );
    assert!(
        cgroup(&grandchild).ends_with(&format!("/cordon-test/{grandchild}")),
        "{}",
        cgroup(&grandchild)
    );
    ok(&w.cordon(&["delete", "--force", &fork]));
    ok(&w.cordon(&["delete", "--force", &grandchild]));
    assert_eq!(
        w.env.state(&id)["status"],
        "running",
        "the parent outlives its forks' deletion"
    );
    for c in [&id, &fork, &grandchild] {
        w.delete_and_check(c);
    }
    // The parent cgroup the bundle named, once empty (v2, and each v1
    // hierarchy); another test's container may still be in it.
    let roots = std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten().map(|e| e.path());
    for dir in roots.chain([PathBuf::from("/sys/fs/cgroup")]) {
        let _ = std::fs::remove_dir(dir.join("cordon-test"));
    }
}

/// Checkpoints and restores of different containers never wait for each
/// other: each container's layer has its own lock.
#[test]
fn checkpoints_and_restores_of_different_containers_run_at_once() {
    let w = World::busybox();
    let ids: Vec<String> = (0..3).map(|i| unique(&format!("apart-{i}"))).collect();
    for id in &ids {
        w.run_detached(id, &["--overlay"]);
        w.sh(id, "echo one > /f");
    }
    let w = &w;
    let all = |args: &dyn Fn(&str) -> Vec<String>| {
        std::thread::scope(|s| {
            let handles: Vec<_> = ids
                .iter()
                .map(|id| {
                    let a = args(id);
                    s.spawn(move || w.cordon(&a.iter().map(String::as_str).collect::<Vec<_>>()))
                })
                .collect();
            for h in handles {
                let out = h.join().unwrap();
                assert!(out.status.success(), "{}", stderr(&out));
            }
        })
    };
    all(&|id| vec!["checkpoint".into(), id.into()]);
    for id in &ids {
        w.sh(id, "echo two > /f");
    }
    all(&|id| vec!["restore".into(), id.into(), "cp1".into()]);
    for id in &ids {
        w.wait_running(id);
        assert_eq!(w.sh(id, "cat /f"), "one\n", "{id}");
    }
    for id in &ids {
        ok(&w.cordon(&["delete", "--force", id]));
    }
    for id in &ids {
        w.delete_and_check(id);
    }
}
