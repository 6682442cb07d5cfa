//! connect(2) and bind(2): one address, decided, then made on our copy
//! of the caller's socket.

use super::*;

/// connect(fd, addr, len)
pub fn connect(ctx: &dyn Task) -> Outcome {
    let addr = match Addr::read(ctx, ctx.arg(1), ctx.arg(2)) {
        Ok(a) => a,
        Err(e) => return Outcome::new(Reply::Errno(e), Decision::Emulate, "connect: bad address".into()),
    };
    let (detail, verdict) = check(ctx, &addr, false);
    if let Some(out) = ask_first(&verdict, &detail, connect) {
        return out;
    }
    let by = verdict.clone().ok().flatten();
    let Prepared {
        sock,
        addr: bytes,
        dir,
        creds,
    } = match prepare(ctx, &addr, verdict, &detail) {
        Ok(p) => p,
        Err(out) => return out,
    };
    let plan = wire_plan(ctx, &addr);
    let route = plan.map(|_| crate::supervisor::relay::classify(&sock));
    if let Some(crate::supervisor::relay::Route::Busy(e)) = route {
        return Outcome::new(Reply::Errno(e), Decision::Allow, detail).by(by);
    }
    if route == Some(crate::supervisor::relay::Route::Refuse) {
        let why = "sni: a stream socket other than TCP (MPTCP, SCTP) to a port whose name is checked on the wire \
                   (the relay takes TCP only)";
        return Outcome::new(Reply::Errno(libc::EPERM), Decision::Deny, detail).by(Some(why.into()));
    }
    if let Some((wire, sni, dest)) = plan.filter(|_| route == Some(crate::supervisor::relay::Route::Relay)) {
        // Through the relay, which checks the name on the wire; the
        // upstream connect may take a while, so always on a thread.
        let plan = crate::supervisor::relay::Plan {
            wire,
            sni,
            dest,
            policy: ctx.sup().policy(),
            audit: std::sync::Arc::clone(&ctx.sup().audit),
            pid: ctx.pid(),
            detail: detail.clone(),
            blocking: is_blocking(&sock),
        };
        let (d2, by2) = (detail.clone(), by.clone());
        let job = Box::new(move |_: &Ctx<'_>| {
            let reply = match crate::supervisor::relay::steer(sock, plan) {
                0 => Reply::Value(0),
                e => Reply::Errno(e),
            };
            Outcome::new(reply, Decision::Allow, d2).by(by2)
        });
        return Outcome::new(Reply::Blocking(job), Decision::Allow, detail).by(by);
    }
    let blocking = is_blocking(&sock);
    // The peer sees the caller's uid and gid (SO_PEERCRED); the socket file
    // is reached with its credentials (connect needs write permission).
    let run = move || {
        let r = as_caller_identity(&creds, || do_connect(&sock, &bytes));
        drop(dir);
        r
    };
    if blocking {
        let (d2, by2) = (detail.clone(), by.clone());
        let job = Box::new(move |_: &Ctx<'_>| Outcome::new(run(), Decision::Allow, d2).by(by2));
        return Outcome::new(Reply::Blocking(job), Decision::Allow, detail).by(by);
    }
    Outcome::new(run(), Decision::Allow, detail).by(by)
}

/// bind(fd, addr, len). Every bind comes here (BPF cannot see the
/// family): a unix socket's path is a new file, which the path rules
/// govern like any other. Other addresses are bound as the caller (its
/// capabilities decide on privileged ports and netlink groups).
///
/// A unix path is bound with the caller's exact bytes, so `getsockname`
/// and the peer's `getpeername` show what the caller passed. Everything
/// runs on a thread that has taken the caller's root and cwd (held copies,
/// read once: unshare(CLONE_FS), chroot, fchdir) and its identity, so the
/// kernel resolves the path for the check, the bind and the check after it
/// exactly as for the caller, from the same places:
/// 1. the parent directory is opened (O_PATH) and its container path
///    (readlink of our fd, which the kernel gives relative to the thread's
///    root) with the entry's name must be writable under the rules;
/// 2. the bind;
/// 3. the parent is opened again and must be the same directory holding a
///    socket under that name; if a tree changed between 1 and 3 and it is
///    not, the entry is removed as the caller (only a socket) and the
///    caller gets EACCES. What remains (docs/SECURITY.md): a race that
///    moves directories back and forth around the bind can leave a socket
///    file, never data, in a read-only tree; no kernel-level rule is
///    affected.
pub fn bind(ctx: &dyn Task) -> Outcome {
    let addr = match Addr::read(ctx, ctx.arg(1), ctx.arg(2)) {
        Ok(a) => a,
        Err(e) => return Outcome::new(Reply::Errno(e), Decision::Emulate, "bind: bad address".into()),
    };
    let detail = addr.describe();
    let out = |e, action| Outcome::new(Reply::Errno(e), action, detail.clone());
    if !ctx.still_valid() {
        return out(libc::EINTR, Decision::Emulate);
    }
    let Ok(caller) = ctx.caller() else {
        return out(libc::ESRCH, Decision::Allow);
    };
    let sock = match socket_copy(ctx, ctx.arg(0) as i32) {
        Ok(s) => s,
        Err(e) => return out(e, Decision::Allow),
    };
    let creds = &caller.creds;
    let Some(path) = addr.unix_path() else {
        return Outcome::new(
            as_caller_identity(creds, || do_bind(&sock, addr.bytes())),
            Decision::Allow,
            detail,
        );
    };
    let cwd = match super::super::path::dir_copy(ctx, libc::AT_FDCWD) {
        Ok(c) => c,
        Err(_) => return out(libc::ESRCH, Decision::Allow),
    };
    // Our own fd table, opened before the chroot: its readlinks name our
    // fds from the thread's root, the caller's.
    let fds = match std::fs::File::open("/proc/thread-self/fd") {
        Ok(f) => f,
        Err(_) => return out(libc::EIO, Decision::Allow),
    };
    let paths = &ctx.sup().policy().paths;
    let (parent, name) = super::super::path::split_parent(path);
    let (Ok(parent), Ok(name)) = (CString::new(parent), CString::new(name)) else {
        return out(libc::EINVAL, Decision::Allow);
    };
    let r = in_fs_of(&caller.root, &cwd, creds.umask, || {
        creds::with_identity(creds, || -> Result<Reply, Denied> {
            let dir_flags = (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
            let place = |dir: &OwnedFd| -> Result<String, Denied> {
                let link = nix::fcntl::readlinkat(Some(fds.as_raw_fd()), format!("{}", dir.as_raw_fd()).as_str())
                    .map_err(|e| Denied::Errno(e as i32))?;
                let link = link.to_string_lossy();
                let sep = if link.ends_with('/') { "" } else { "/" };
                Ok(format!("{link}{sep}{}", name.to_string_lossy()))
            };
            let before = sys::openat2(super::super::path::cwd_fd(), &parent, dir_flags, 0, 0)?;
            let want = place(&before)?;
            if !paths.allows_open(&want, libc::O_WRONLY as u64) {
                return Err(Denied::Policy(want));
            }
            let reply = do_bind(&sock, addr.bytes());
            if !matches!(reply, Reply::Value(_)) {
                return Ok(reply);
            }
            let same = |a: &OwnedFd, b: &OwnedFd| {
                let (x, y) = (
                    nix::sys::stat::fstat(a.as_raw_fd()),
                    nix::sys::stat::fstat(b.as_raw_fd()),
                );
                matches!((x, y), (Ok(x), Ok(y)) if (x.st_dev, x.st_ino) == (y.st_dev, y.st_ino))
            };
            let is_socket = |dir: &OwnedFd| {
                nix::sys::stat::fstatat(
                    Some(dir.as_raw_fd()),
                    name.as_c_str(),
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFSOCK)
            };
            match sys::openat2(super::super::path::cwd_fd(), &parent, dir_flags, 0, 0) {
                Ok(after) if same(&before, &after) && is_socket(&before) => Ok(reply),
                Ok(after) => {
                    // Moved while bound: take back what landed elsewhere, as
                    // the caller, and only a socket.
                    if is_socket(&after) {
                        let _ = nix::unistd::unlinkat(
                            Some(after.as_raw_fd()),
                            name.as_c_str(),
                            nix::unistd::UnlinkatFlags::NoRemoveDir,
                        );
                    }
                    Err(Denied::Policy(format!("{want} (moved while bound)")))
                }
                Err(_) => Err(Denied::Policy(format!("{want} (moved while bound)"))),
            }
        })
    });
    match r {
        Ok(Ok(Ok(reply))) => Outcome::new(reply, Decision::Allow, detail),
        Ok(Ok(Err(Denied::Policy(p)))) => Outcome::path_denied(ctx, p),
        Ok(Ok(Err(Denied::Errno(e)))) => out(e, Decision::Allow),
        _ => out(libc::EPERM, Decision::Allow),
    }
}

fn do_bind(sock: &OwnedFd, addr: &[u8]) -> Reply {
    reply(sys::net::bind(sock.as_fd(), addr).map(|()| 0))
}

/// Runs `f` on a thread of its own whose root directory, cwd and umask
/// are the caller's (`root`, `cwd`: O_PATH fds; `umask`, which the kernel
/// applies to a bound socket's mode): unshare(CLONE_FS) gives the thread a
/// private `fs_struct`, which goes with the thread. Errors: a step of the
/// switch failed (`f` did not run).
fn in_fs_of<T: Send>(
    root: &super::super::path::Root,
    cwd: &OwnedFd,
    umask: u32,
    f: impl FnOnce() -> T + Send,
) -> std::io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| -> std::io::Result<T> {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS)?;
            nix::unistd::fchdir(root.as_fd().as_raw_fd())?;
            nix::unistd::chroot(".")?;
            nix::unistd::fchdir(cwd.as_raw_fd())?;
            nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(umask as libc::mode_t));
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("bind thread panicked")))
    })
}
