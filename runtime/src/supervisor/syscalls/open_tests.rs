//! Unit tests of the open handlers.

use super::super::task::fake::{Fake, TempTree};
use super::*;

/// The policy of the supervisor suite's `files_env`: `/secret` denied,
/// `/etc` read-only.
const POLICY: &str = "name = 't'\n\
    [[path]]\npattern = \"/secret/**\"\naccess = \"deny\"\n\
    [[path]]\npattern = \"/secret\"\naccess = \"deny\"\n\
    [[path]]\npattern = \"/etc/**\"\naccess = \"read-only\"\n";

/// A container root with the suite's files: `/secret/key` (denied),
/// `/data/ok.txt`, symlinks from `/data` into `/secret` (absolute,
/// relative past the root, to the directory, dangling), and `/etc`,
/// `/work`.
fn rootfs() -> TempTree {
    let t = TempTree::new("open");
    for d in ["secret", "data", "etc", "work"] {
        std::fs::create_dir(t.join(d)).unwrap();
    }
    std::fs::write(t.join("secret/key"), "TOPSECRET").unwrap();
    std::fs::write(t.join("data/ok.txt"), "fine").unwrap();
    std::fs::write(t.join("etc/hostname"), "cordon").unwrap();
    let link = |to: &str, at: &str| std::os::unix::fs::symlink(to, t.join(at)).unwrap();
    link("/secret/key", "data/abs-link");
    link("../../../../../secret/key", "data/rel-link");
    link("ok.txt", "data/good-link");
    link("/secret", "data/dir-link");
    link("/secret/planted", "data/dangling-secret");
    link("/work/created", "data/dangling-ok");
    t
}

/// A caller whose root is `root`, cwd `cwd` (below the root) and fds
/// `fds` (number, directory below the root).
fn caller(root: &TempTree, cwd: &str, fds: &[(i32, &str)]) -> Fake {
    let mut t = Fake::new(POLICY, 8192);
    t.root = Some(root.0.clone());
    t.cwd = Some(root.join(cwd));
    for &(n, d) in fds {
        t.fds.insert(n, Fake::open_dir(&root.join(d)).unwrap());
    }
    t
}

/// What the caller sees: `ok <contents>` for an fd it can read, `ok`
/// for one it cannot (a directory, write-only), `continue` (the kernel
/// opens it), or `err <errno>`; and the audit action.
fn answer(t: &Fake, name: &str) -> (String, &'static str) {
    use std::io::Read;
    let out = super::super::dispatch_named(t, name);
    let got = match out.reply {
        Reply::Fd { fd, .. } => {
            let mut s = String::new();
            match std::fs::File::from(fd).read_to_string(&mut s) {
                Ok(_) => format!("ok {s}"),
                Err(_) => "ok".into(),
            }
        }
        Reply::Errno(e) => format!("err {}", std::io::Error::from_raw_os_error(e)),
        Reply::Continue => "continue".into(),
        Reply::Value(v) => format!("value {v}"),
        Reply::Blocking(_) => "blocking".into(),
    };
    (got, out.action.as_str())
}

/// openat(dirfd, path, flags, 0o644) by `t`.
fn openat(t: &mut Fake, dirfd: i32, path: &str, flags: i32) -> (String, &'static str) {
    let mut bytes = path.as_bytes().to_vec();
    bytes.push(0);
    t.mem.borrow_mut()[..bytes.len()].copy_from_slice(&bytes);
    t.args = [dirfd as u64, Fake::BASE, flags as u64, 0o644, 0, 0];
    answer(t, "openat")
}

fn denied() -> (String, &'static str) {
    (
        format!("err {}", std::io::Error::from_raw_os_error(libc::EACCES)),
        "deny",
    )
}

#[test]
fn every_alias_of_a_denied_file_is_denied() {
    let root = rootfs();
    let mut t = caller(&root, "/", &[(4, "etc"), (5, "data"), (6, "")]);
    let at = libc::AT_FDCWD;
    for path in [
        "/secret/key",
        "/./secret//key",
        "//secret/key",
        "/etc/../secret/key",
        // `..` past the root stays at the root.
        "/../../secret/key",
        "/data/../../../secret/key",
        "/data/abs-link",
        "/data/rel-link",
        "/data/dir-link/key",
        "/proc/self/root/secret/key",
        "/proc/thread-self/root/secret/key",
        "/dev/fd/4/../secret/key",
        "/proc/self/cwd/secret/key",
        "data/../secret/key",
    ] {
        assert_eq!(openat(&mut t, at, path, libc::O_RDONLY), denied(), "{path}");
    }
    // Relative to a dirfd, through a symlink, and to the root's fd.
    assert_eq!(openat(&mut t, 5, "dir-link/key", libc::O_RDONLY), denied());
    assert_eq!(openat(&mut t, 5, "abs-link", libc::O_RDONLY), denied());
    assert_eq!(openat(&mut t, 6, "secret/key", libc::O_RDONLY), denied());
    // The directory itself.
    assert_eq!(
        openat(&mut t, at, "/secret", libc::O_RDONLY | libc::O_DIRECTORY),
        denied()
    );
    assert_eq!(openat(&mut t, 5, "dir-link", libc::O_RDONLY), denied());
    // Relative to a cwd in the denied directory.
    let mut inside = caller(&root, "secret", &[]);
    assert_eq!(openat(&mut inside, at, "key", libc::O_RDONLY), denied());
    assert_eq!(openat(&mut inside, at, ".", libc::O_RDONLY), denied());
    // The denial names the rule that decided.
    t.mem.borrow_mut()[..12].copy_from_slice(b"/secret/key\0");
    t.args = [at as u64, Fake::BASE, 0, 0, 0, 0];
    assert_eq!(
        super::super::dispatch_named(&t, "openat").rule.as_deref(),
        Some("path[0] \"/secret/**\" deny")
    );
}

#[test]
fn allowed_paths_open_the_file_they_name() {
    let root = rootfs();
    let mut t = caller(&root, "data", &[(5, "data"), (4, "etc")]);
    let at = libc::AT_FDCWD;
    let fine = ("ok fine".to_string(), "allow");
    assert_eq!(openat(&mut t, at, "/data/ok.txt", libc::O_RDONLY), fine);
    assert_eq!(openat(&mut t, at, "/data/good-link", libc::O_RDONLY), fine);
    assert_eq!(openat(&mut t, at, "ok.txt", libc::O_RDONLY), fine);
    assert_eq!(openat(&mut t, 5, "ok.txt", libc::O_RDONLY), fine);
    assert_eq!(openat(&mut t, at, "/dev/fd/5/ok.txt", libc::O_RDONLY), fine);
    assert_eq!(openat(&mut t, at, "/proc/self/cwd/ok.txt", libc::O_RDONLY), fine);
    assert_eq!(openat(&mut t, at, "/../data/./ok.txt", libc::O_RDONLY), fine);
    let host = ("ok cordon".to_string(), "allow");
    assert_eq!(openat(&mut t, at, "/proc/self/root/etc/hostname", libc::O_RDONLY), host);
    assert_eq!(openat(&mut t, 4, "hostname", libc::O_RDONLY), host);
    // A missing file, and an fd the caller does not have.
    let enoent = format!("err {}", std::io::Error::from_raw_os_error(libc::ENOENT));
    assert_eq!(openat(&mut t, at, "/data/none", libc::O_RDONLY), (enoent, "allow"));
    let ebadf = format!("err {}", std::io::Error::from_raw_os_error(libc::EBADF));
    assert_eq!(openat(&mut t, 9, "ok.txt", libc::O_RDONLY), (ebadf, "allow"));
}

#[test]
fn writes_and_creates_follow_the_tree_rules() {
    let root = rootfs();
    let mut t = caller(&root, "/", &[]);
    let at = libc::AT_FDCWD;
    let create = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
    // Read-only /etc: readable, not writable, nothing created in it.
    assert_eq!(openat(&mut t, at, "/etc/hostname", libc::O_RDONLY).0, "ok cordon");
    assert_eq!(openat(&mut t, at, "/etc/hostname", libc::O_WRONLY), denied());
    assert_eq!(openat(&mut t, at, "/etc/hostname", libc::O_RDWR), denied());
    assert_eq!(openat(&mut t, at, "/etc/new", create), denied());
    assert!(!root.join("etc/new").exists());
    // A denied directory: no file created, directly or through a
    // dangling symlink into it.
    assert_eq!(openat(&mut t, at, "/secret/new", create), denied());
    assert!(!root.join("secret/new").exists());
    assert_eq!(openat(&mut t, at, "/data/dangling-secret", create), denied());
    assert!(!root.join("secret/planted").exists());
    // Allowed: created where the dangling link points, and in place.
    assert_eq!(openat(&mut t, at, "/data/dangling-ok", create), ("ok".into(), "allow"));
    assert!(root.join("work/created").is_file());
    assert_eq!(openat(&mut t, at, "/work/new", create), ("ok".into(), "allow"));
    assert!(root.join("work/new").is_file());
    // With O_NOFOLLOW the dangling link is not followed: ELOOP.
    let eloop = format!("err {}", std::io::Error::from_raw_os_error(libc::ELOOP));
    assert_eq!(
        openat(&mut t, at, "/data/dangling-ok", create | libc::O_NOFOLLOW).0,
        eloop
    );
    // The kernel's answers on existing objects.
    let err = |e: i32| format!("err {}", std::io::Error::from_raw_os_error(e));
    assert_eq!(
        openat(&mut t, at, "/work/new", create | libc::O_EXCL).0,
        err(libc::EEXIST)
    );
    assert_eq!(openat(&mut t, at, "/work", create).0, err(libc::EISDIR));
    assert_eq!(openat(&mut t, at, "/work/new/", create).0, err(libc::EISDIR));
}

#[test]
fn o_path_is_decided_then_left_to_the_kernel() {
    let root = rootfs();
    let mut t = caller(&root, "/", &[]);
    let at = libc::AT_FDCWD;
    assert_eq!(openat(&mut t, at, "/secret/key", libc::O_PATH), denied());
    assert_eq!(openat(&mut t, at, "/data/abs-link", libc::O_PATH), denied());
    // Not followed: the link itself, in an allowed directory.
    assert_eq!(
        openat(&mut t, at, "/data/abs-link", libc::O_PATH | libc::O_NOFOLLOW),
        ("continue".into(), "allow")
    );
    assert_eq!(
        openat(&mut t, at, "/data/ok.txt", libc::O_PATH),
        ("continue".into(), "allow")
    );
    // open(2) drops the flags O_PATH does not take: no write, no create.
    assert_eq!(
        openat(&mut t, at, "/etc/hostname", libc::O_PATH | libc::O_RDWR),
        ("continue".into(), "allow")
    );
}

#[test]
fn openat2_checks_its_arguments_and_scopes() {
    let root = rootfs();
    let mut t = caller(&root, "/", &[(5, "data")]);
    let call = |t: &mut Fake, dirfd: i32, path: &str, how: OpenHow| {
        let how = [how.flags, how.mode, how.resolve].map(u64::to_ne_bytes).concat();
        let mut mem = t.mem.borrow_mut();
        mem[..path.len()].copy_from_slice(path.as_bytes());
        mem[path.len()] = 0;
        mem[4096..4096 + how.len()].copy_from_slice(&how);
        drop(mem);
        t.args = [dirfd as u64, Fake::BASE, Fake::BASE + 4096, 24, 0, 0];
        answer(t, "openat2").0
    };
    let how = |flags: i32, resolve: u64| OpenHow {
        flags: flags as u64,
        mode: 0,
        resolve,
    };
    let err = |e: i32| format!("err {}", std::io::Error::from_raw_os_error(e));
    assert_eq!(call(&mut t, 5, "ok.txt", how(0, RESOLVE_BENEATH)), "ok fine");
    assert_eq!(
        call(&mut t, 5, "../secret/key", how(0, RESOLVE_BENEATH)),
        err(libc::EXDEV)
    );
    // In the dirfd as a root, `..` stays in /data; the policy still decides.
    assert_eq!(call(&mut t, 5, "../ok.txt", how(0, RESOLVE_IN_ROOT)), "ok fine");
    assert_eq!(call(&mut t, 5, "dir-link/key", how(0, 0)), denied().0);
    assert_eq!(
        call(&mut t, 5, "good-link", how(0, RESOLVE_NO_SYMLINKS)),
        err(libc::ELOOP)
    );
    assert_eq!(
        call(&mut t, 5, "/proc/self/root/data/ok.txt", how(0, RESOLVE_NO_MAGICLINKS)),
        err(libc::ELOOP)
    );
    // Flags openat2 refuses before any lookup.
    assert_eq!(call(&mut t, 5, "ok.txt", how(0x4000_0000, 0)), err(libc::EINVAL));
    assert_eq!(
        call(&mut t, 5, "ok.txt", how(libc::O_PATH | libc::O_RDWR, 0)),
        err(libc::EINVAL)
    );
}

#[test]
fn parent_split() {
    assert_eq!(split_parent(b"/a/b"), (&b"/a"[..], &b"b"[..]));
    assert_eq!(split_parent(b"/a"), (&b"/"[..], &b"a"[..]));
    assert_eq!(split_parent(b"/a/b/"), (&b"/a"[..], &b"b"[..]));
}

#[test]
fn open_how_bytes() {
    let how = |f: u64, m: u64, r: u64| [f.to_ne_bytes(), m.to_ne_bytes(), r.to_ne_bytes()].concat();
    assert_eq!(
        OpenHow::from_bytes(&how(2, 0o644, 0x10)),
        Ok(OpenHow {
            flags: 2,
            mode: 0o644,
            resolve: 0x10
        })
    );
    assert_eq!(OpenHow::from_bytes(&how(0, 0, 0)[..16]), Err(libc::EINVAL));
    let mut ext = how(0, 0, 0);
    ext.extend_from_slice(&[0; 8]);
    assert!(OpenHow::from_bytes(&ext).is_ok());
    ext[30] = 1;
    assert_eq!(OpenHow::from_bytes(&ext), Err(libc::E2BIG));
    assert_eq!(OpenHow::from_bytes(&vec![0; 4097]), Err(libc::E2BIG));
    assert_eq!(OpenHow::check_size(4096), Ok(()));
}

#[test]
fn kernel_flag_checks() {
    let how = |flags: i32, resolve: u64| OpenHow {
        flags: flags as u64,
        mode: 0,
        resolve,
    };
    assert_eq!(how(libc::O_RDONLY, 0).check(), Ok(()));
    assert_eq!(how(libc::O_RDWR | 0o100000, RESOLVE_CACHED).check(), Ok(()));
    assert_eq!(how(0x4000_0000, 0).check(), Err(libc::EINVAL));
    assert_eq!(how(0, 0x40).check(), Err(libc::EINVAL));
    assert_eq!(how(0, RESOLVE_BENEATH | RESOLVE_IN_ROOT).check(), Err(libc::EINVAL));
    assert_eq!(how(libc::O_PATH | libc::O_RDWR, 0).check(), Err(libc::EINVAL));
    assert_eq!(legacy_flags(0x4000_0000 | libc::O_RDWR as u64), libc::O_RDWR as u64);
    assert_eq!(
        legacy_flags((libc::O_PATH | libc::O_RDWR | libc::O_NOFOLLOW) as u64),
        (libc::O_PATH | libc::O_NOFOLLOW) as u64
    );
    assert_eq!(legacy_flags(1 << 40), 0);
}

#[test]
fn creation_mode() {
    let creat = libc::O_CREAT as u64;
    assert_eq!(open_mode(false, creat, 0o100644), Ok(0o644));
    assert_eq!(open_mode(false, libc::O_TMPFILE as u64, 0o600), Ok(0o600));
    assert_eq!(open_mode(false, 0, 0o644), Ok(0));
    assert_eq!(open_mode(true, 0, 0o644), Err(libc::EINVAL));
    // O_DIRECTORY alone is not O_TMPFILE (which includes it).
    assert_eq!(open_mode(true, libc::O_DIRECTORY as u64, 0o644), Err(libc::EINVAL));
}

#[test]
fn flags_text() {
    assert_eq!(
        flags_str((libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC) as u64),
        "O_WRONLY|O_CREAT|O_TRUNC"
    );
    assert_eq!(flags_str(0), "O_RDONLY");
}
