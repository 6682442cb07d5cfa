//! Safe wrappers over the raw syscalls cordon needs that `nix` does not cover:
//! seccomp filters and user notification (seccomp(2), seccomp_unotify(2)),
//! pidfds (pidfd_open(2), pidfd_getfd(2), pidfd_send_signal(2)), cross-process
//! memory reads (process_vm_readv(2)) and openat2(2) here; by concern in the
//! submodules: the file handlers' calls ([`fs`], [`meta`]), the network
//! handlers' ([`net`]), a thread's credentials ([`creds`]), process state,
//! signals and inherited fds ([`process`]), the sealed binary copy
//! ([`exeseal`]) and ptrace ([`ptrace`]).
//!
//! All `unsafe` of the runtime crate lives here (`tools/check-unsafe.sh`, in
//! `make lint`, fails on any in `runtime/src` outside `sys/`); each block
//! names the invariant it relies on, and each wrapper returns the kernel's
//! errno as an `io::Error`.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

pub mod creds;
pub mod exeseal;
pub mod fs;
pub mod meta;
pub mod net;
pub mod process;
pub mod ptrace;
pub mod timings;

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6): wake the tracee on the
/// supervisor's CPU. Missing from the `libc` crate.
pub const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;

fn cvt(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;

fn mount_setattr_rdonly(dirfd: libc::c_int, path: &CStr, flags: libc::c_int) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a NUL-terminated path and a mount_attr struct we own, with its
    // size; the kernel only reads both.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Makes the mount at `path` and every mount below it read-only:
/// mount_setattr(2) with `AT_RECURSIVE` and `MOUNT_ATTR_RDONLY` (Linux
/// 5.12), other attributes unchanged.
pub fn mount_setattr_rdonly_recursive(path: &std::path::Path) -> io::Result<()> {
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    mount_setattr_rdonly(libc::AT_FDCWD, &c, libc::AT_RECURSIVE)
}

/// A detached, read-only bind mount of the file or directory at `path`
/// (open_tree(2) `OPEN_TREE_CLONE`, then mount_setattr(2)), to attach
/// elsewhere with [`move_mount_to`], in another mount namespace too.
pub fn open_tree_rdonly(path: &CStr) -> io::Result<OwnedFd> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    // SAFETY: a NUL-terminated path; the kernel returns a new fd we own.
    let fd = cvt(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        )
    })?;
    // SAFETY: the kernel returned a new fd, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    mount_setattr_rdonly(fd.as_raw_fd(), c"", libc::AT_EMPTY_PATH)?;
    Ok(fd)
}

/// Attaches the detached mount `tree` (from [`open_tree_rdonly`]) at
/// `target`, resolved from the calling thread's root and cwd: move_mount(2)
/// with `MOVE_MOUNT_F_EMPTY_PATH`.
pub fn move_mount_to(tree: BorrowedFd<'_>, target: &std::path::Path) -> io::Result<()> {
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str()))
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a borrowed fd and NUL-terminated paths; the kernel reads them.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            c.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// The running kernel's Landlock ABI version (landlock_create_ruleset(2)
/// with `LANDLOCK_CREATE_RULESET_VERSION`), or `None` when Landlock is not
/// built in or not enabled at boot (ENOSYS, EOPNOTSUPP).
pub fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_long = 1;
    // SAFETY: with a NULL attribute pointer, size 0 and the VERSION flag the
    // kernel reads no memory and returns the version or an error.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).ok().filter(|&v| v > 0)
}

/// Sets `PR_SET_NO_NEW_PRIVS` on the calling thread (prctl(2)).
pub fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only; no memory is passed.
    cvt(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into()).map(drop)
}

/// Installs the BPF program `prog` with `flags` (seccomp(2)
/// SECCOMP_SET_MODE_FILTER). With `SECCOMP_FILTER_FLAG_NEW_LISTENER` the
/// result is the notification listener fd.
pub fn seccomp_set_filter(prog: &[libc::sock_filter], flags: libc::c_ulong) -> io::Result<Option<OwnedFd>> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `fprog` points at `prog`, which outlives the call; the kernel
    // copies the program before returning.
    let r = cvt(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &fprog as *const libc::sock_fprog,
        )
    })?;
    if flags & libc::SECCOMP_FILTER_FLAG_NEW_LISTENER != 0 {
        // SAFETY: with NEW_LISTENER the kernel returns a new fd we now own.
        Ok(Some(unsafe { OwnedFd::from_raw_fd(r as RawFd) }))
    } else {
        Ok(None)
    }
}

/// A zeroed `seccomp_notif`, ready for [`notif_recv`].
pub fn empty_notif() -> libc::seccomp_notif {
    // SAFETY: seccomp_notif is plain old data; all-zero is a valid value and
    // is what SECCOMP_IOCTL_NOTIF_RECV requires on input.
    unsafe { std::mem::zeroed() }
}

/// Receives one notification (SECCOMP_IOCTL_NOTIF_RECV). `notif` must be zeroed.
pub fn notif_recv(listener: BorrowedFd<'_>, notif: &mut libc::seccomp_notif) -> io::Result<()> {
    // SAFETY: `notif` is a valid, exclusive seccomp_notif the kernel fills.
    cvt(unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, notif as *mut _) }.into()).map(drop)
}

/// Answers a notification (SECCOMP_IOCTL_NOTIF_SEND): `val` on success, or
/// `-error` when `error` is non-zero, or CONTINUE when `cont` is set.
pub fn notif_send(listener: BorrowedFd<'_>, id: u64, val: i64, error: i32, cont: bool) -> io::Result<()> {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error: if error != 0 { -error } else { 0 },
        flags: if cont {
            libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32
        } else {
            0
        },
    };
    // SAFETY: `resp` is a valid seccomp_notif_resp on our stack.
    cvt(unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp as *mut _,
        )
    }
    .into())
    .map(drop)
}

/// Whether notification `id` is still pending (SECCOMP_IOCTL_NOTIF_ID_VALID):
/// the tracee has not died or been interrupted since it was received. Checked
/// after reading tracee memory so that a pid reused meanwhile is not trusted.
pub fn notif_id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads one u64 from the pointer.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &mut id as *mut u64,
        ) == 0
    }
}

/// Installs `fd` into the tracee of notification `id` and, with `send`,
/// answers the notification with the new fd number atomically
/// (SECCOMP_IOCTL_NOTIF_ADDFD, SECCOMP_ADDFD_FLAG_SEND, Linux 5.14).
/// `cloexec` sets O_CLOEXEC on the new fd. Returns the tracee's fd number.
pub fn notif_addfd(
    listener: BorrowedFd<'_>,
    id: u64,
    fd: BorrowedFd<'_>,
    cloexec: bool,
    send: bool,
) -> io::Result<i32> {
    let mut addfd = libc::seccomp_notif_addfd {
        id,
        flags: if send { libc::SECCOMP_ADDFD_FLAG_SEND as u32 } else { 0 },
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: `addfd` is a valid seccomp_notif_addfd on our stack.
    cvt(unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD,
            &mut addfd as *mut _,
        )
    }
    .into())
    .map(|r| r as i32)
}

/// Asks the kernel to wake tracees synchronously on this CPU
/// (SECCOMP_IOCTL_NOTIF_SET_FLAGS, Linux 6.6). Errors on older kernels.
pub fn notif_set_sync_wakeup(listener: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: the ioctl takes the flags by value.
    cvt(unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    }
    .into())
    .map(drop)
}

/// A pidfd for `pid` (pidfd_open(2), Linux 5.3).
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    pidfd_open_flags(pid, 0)
}

/// pidfd_open(2) with `flags` (e.g. `PIDFD_THREAD`, Linux 6.9: a pidfd for
/// one thread). EINVAL from a kernel that does not know a flag.
pub fn pidfd_open_flags(pid: i32, flags: u32) -> io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let fd = cvt(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) })?;
    // SAFETY: on success the kernel returns a new fd we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `AT_FDCWD` as a borrowed fd, for the `*at` calls that take a
/// `BorrowedFd` (it names the current directory).
pub fn cwd_fd() -> BorrowedFd<'static> {
    // SAFETY: AT_FDCWD is a constant understood by the *at syscalls, never
    // closed or dereferenced as a real fd.
    unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}

/// A copy of fd `target_fd` of the process behind `pidfd` (pidfd_getfd(2),
/// Linux 5.6): the same open file description, so acting on it acts on the
/// tracee's object, not on memory the tracee can change.
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, target_fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let fd = cvt(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target_fd, 0) })?;
    // SAFETY: on success the kernel returns a new fd we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Sends `sig` to the process behind `pidfd` (pidfd_send_signal(2)).
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: i32) -> io::Result<()> {
    // SAFETY: integer arguments and a null siginfo.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    })
    .map(drop)
}

/// The soft limit `resource` of process `pid` (prlimit(2), read only).
pub fn rlimit_of(pid: i32, resource: libc::__rlimit_resource_t) -> io::Result<u64> {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a null new limit (nothing set) and a limit struct we own.
    cvt(unsafe { libc::prlimit(pid, resource, std::ptr::null(), &mut old) }.into())?;
    Ok(old.rlim_cur)
}

/// Sends `sig` to thread `tid` (tgkill(2) with its thread group read from
/// `/proc/<tid>/status`), as the kernel signals the thread whose call
/// raised it.
pub fn signal_thread(tid: i32, sig: i32) -> io::Result<()> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    let tgid: i32 = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: tgkill(2) with integer arguments only.
    cvt(unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, sig) }).map(drop)
}

/// Reads `buf.len()` bytes at `addr` in process `pid` (process_vm_readv(2)).
/// Returns how many bytes were read (short at an unmapped page).
pub fn read_mem(pid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes `buf`, which we own exclusively for the call;
    // the remote iovec is only interpreted in the other process.
    let r = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    cvt(r as libc::c_long).map(|n| n as usize)
}

/// Writes `data` at `addr` in process `pid` (process_vm_writev(2)).
pub fn write_mem(pid: i32, addr: u64, data: &[u8]) -> io::Result<()> {
    let local = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: `local` describes `data`, only read by the kernel.
    let r = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
    match cvt(r as libc::c_long)? as usize {
        n if n == data.len() => Ok(()),
        _ => Err(io::Error::from_raw_os_error(libc::EFAULT)),
    }
}

/// An `O_PATH` fd of `path` (absolute, or relative to the cwd) reached
/// without following any symlink, its last component included
/// (openat2(2) `RESOLVE_NO_SYMLINKS`): ELOOP when one is on the way.
pub fn open_path_no_symlinks(path: &std::path::Path) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    // SAFETY: AT_FDCWD is a valid dirfd for the whole call.
    let cwd = unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) };
    openat2(
        cwd,
        &c,
        (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
        0,
        libc::RESOLVE_NO_SYMLINKS,
    )
}

/// The same below `dir`: `rel` (relative) resolved beneath `dir` without
/// `..` leaving it and without following a symlink
/// (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`).
pub fn open_beneath_no_symlinks(dir: BorrowedFd<'_>, rel: &std::path::Path) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(rel.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    openat2(
        dir,
        &c,
        (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
        0,
        libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS,
    )
}

/// openat2(2) (Linux 5.6) of `path` relative to `dirfd`. A scoped lookup
/// (RESOLVE_IN_ROOT, RESOLVE_BENEATH) that crosses `..` fails with EAGAIN
/// when any rename or mount happened meanwhile anywhere on the host; the
/// man page asks callers to retry, which this does a bounded number of times.
pub fn openat2(dirfd: BorrowedFd<'_>, path: &CStr, flags: u64, mode: u64, resolve: u64) -> io::Result<OwnedFd> {
    let mut tries = 0;
    loop {
        match openat2_once(dirfd, path, flags, mode, resolve) {
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && resolve & 0x18 != 0 && tries < 64 => tries += 1,
            r => return r,
        }
    }
}

fn openat2_once(dirfd: BorrowedFd<'_>, path: &CStr, flags: u64, mode: u64, resolve: u64) -> io::Result<OwnedFd> {
    // SAFETY: open_how is plain old data; zero is valid for every field.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags;
    how.mode = mode;
    how.resolve = resolve;
    // SAFETY: `path` is NUL-terminated and `how` is a valid open_how; both
    // outlive the call.
    let fd = cvt(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd.as_raw_fd(),
            path.as_ptr(),
            &mut how as *mut libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    })?;
    // SAFETY: on success the kernel returns a new fd we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Reads a NUL-terminated string of at most `max` bytes at `addr` in `pid`,
/// a page at a time so a string near the end of a mapping is still read.
/// The bytes read are decoded by [`decode_cstring`].
pub fn read_cstring(pid: i32, addr: u64, max: usize) -> io::Result<Vec<u8>> {
    if addr == 0 {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    let mut buf = Vec::with_capacity(256);
    let mut at = addr;
    let mut chunk = [0u8; 4096];
    while buf.len() < max {
        let to_page_end = 4096 - (at % 4096) as usize;
        let want = to_page_end.min(max - buf.len());
        let n = read_mem(pid, at, &mut chunk[..want])?;
        buf.extend_from_slice(&chunk[..n]);
        if n == 0 || chunk[..n].contains(&0) {
            break;
        }
        let Some(next) = at.checked_add(n as u64) else { break };
        at = next;
    }
    decode_cstring(&buf, max).map_err(io::Error::from_raw_os_error)
}

/// Decodes a C string from `bytes`, the caller's memory from the string's
/// start up to where reading stopped (an unmapped page, or `max` bytes).
///
/// Returns the bytes before the first NUL when that NUL is among the first
/// `max` bytes (so the string is at most `max - 1` bytes, as the kernel's
/// `PATH_MAX` counts the NUL). Errors (errno values): `ENAMETOOLONG` when
/// the first `max` bytes hold no NUL; `EFAULT` when `bytes` ends, shorter
/// than `max`, before any NUL (the string runs into unreadable memory).
pub fn decode_cstring(bytes: &[u8], max: usize) -> Result<Vec<u8>, i32> {
    let window = &bytes[..bytes.len().min(max)];
    match window.iter().position(|&b| b == 0) {
        Some(end) => Ok(window[..end].to_vec()),
        None if bytes.len() >= max => Err(libc::ENAMETOOLONG),
        None => Err(libc::EFAULT),
    }
}

/// Reads a plain-old-data value of type `T` at `addr` in `pid`.
///
/// `T` must be valid for any bit pattern (a `libc` C struct of integers).
pub fn read_pod<T: Copy + Default>(pid: i32, addr: u64) -> io::Result<T> {
    let mut v = T::default();
    // SAFETY: `v` is an initialised T; we view its bytes for the duration of
    // the read. Callers only use integer-only C structs, valid for any bytes.
    let bytes = unsafe { std::slice::from_raw_parts_mut((&mut v as *mut T).cast::<u8>(), std::mem::size_of::<T>()) };
    if read_mem(pid, addr, bytes)? != bytes.len() {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(v)
}

/// The bytes of a plain-old-data value (for writing `T` into a tracee).
pub fn pod_bytes<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: any initialised `T: Copy` may be viewed as bytes for reading;
    // the slice borrows `v` so it cannot outlive it.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// `sysinfo(2)` of the calling process's view of the host.
pub fn sysinfo() -> io::Result<libc::sysinfo> {
    // SAFETY: sysinfo is plain old data; the kernel fills all of it.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: `si` is a valid, exclusive sysinfo struct.
    cvt(unsafe { libc::sysinfo(&mut si) }.into())?;
    Ok(si)
}

/// `close_range(first, ~0, 0)`: closes every fd from `first` up.
pub fn close_fds_from(first: u32) -> io::Result<()> {
    // SAFETY: integer arguments only. Callers run this only where no other
    // code holds the fds being closed (right after fork, before exec).
    cvt(unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0) }).map(drop)
}

/// Sets network interface `name` up (SIOCGIFFLAGS/SIOCSIFFLAGS, netdevice(7))
/// in the calling thread's network namespace.
pub fn set_link_up(name: &str) -> io::Result<()> {
    // SAFETY: socket(2) with constant arguments.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd returned by the kernel, owned by us.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain old data; zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= req.ifr_name.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    for (d, b) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = b as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq the kernel reads and writes.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) }.into())?;
    // SAFETY: the union member ifru_flags is the one SIOCGIFFLAGS filled.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: as above.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &mut req) }.into()).map(drop)
}

/// A random 16-bit value from the kernel's generator (getrandom(2)), for
/// DNS message IDs; falls back to the clock's nanoseconds if it fails.
pub fn random_u16() -> u16 {
    let mut b = [0u8; 2];
    // SAFETY: `b` is a writable buffer of the length passed.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 2 {
        u16::from_ne_bytes(b)
    } else {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u16)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cstrings() {
        assert_eq!(decode_cstring(b"/etc\0junk", 4096), Ok(b"/etc".to_vec()));
        assert_eq!(decode_cstring(b"\0", 4096), Ok(Vec::new()));
        // The NUL counts against the limit, as PATH_MAX does.
        assert_eq!(decode_cstring(b"abc\0", 4), Ok(b"abc".to_vec()));
        assert_eq!(decode_cstring(b"abcd\0", 4), Err(libc::ENAMETOOLONG));
        assert_eq!(decode_cstring(b"abcd", 4), Err(libc::ENAMETOOLONG));
        // Stops before the limit without a NUL: the rest is unreadable.
        assert_eq!(decode_cstring(b"abc", 4), Err(libc::EFAULT));
        assert_eq!(decode_cstring(b"", 4096), Err(libc::EFAULT));
        assert_eq!(decode_cstring(b"", 0), Err(libc::ENAMETOOLONG));
    }
}
