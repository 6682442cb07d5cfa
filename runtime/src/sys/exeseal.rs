//! Running from a copy of the runtime binary that containers cannot
//! write (CVE-2019-5736).
//!
//! A process that forks into a container is, until its execve, the runtime
//! binary: a container process that opens its `/proc/PID/exe` could write
//! to the host's binary. runc and youki re-exec from a sealed memfd copy of
//! their binary first; that copies the whole binary (about 11 MB here, some
//! milliseconds) on every `create`, `run` and `exec`, and the shim's copy
//! stays in memory for the container's whole life.
//!
//! [`ensure_sealed`] does what runc 1.2 does instead (its
//! `libcontainer/exeseal`): it re-execs from the binary as seen through a
//! private, read-only overlayfs mount whose lower layers are the binary's
//! directory and an empty directory. The mount is never attached anywhere
//! (fsopen/fsmount give an fd on it), writes through it fail with EROFS and
//! it cannot be unwrapped into the underlying file; it costs a mount, not
//! a copy, and the pages stay shared with the page cache. Where overlayfs
//! or the new mount API is unavailable, it falls back to the memfd copy
//! (`pentacle`).
//!
//! Source: fsopen(2), fsconfig(2), fsmount(2); execveat(2) AT_EMPTY_PATH;
//! Documentation/filesystems/overlayfs.rst ("lower-only" mounts).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;
const MOUNT_ATTR_RDONLY: libc::c_uint = 0x1;
const MOUNT_ATTR_NOSUID: libc::c_uint = 0x2;
const MOUNT_ATTR_NODEV: libc::c_uint = 0x4;

/// Makes sure this process runs from a copy of its binary that no
/// container can write: returns at once if it already does, else re-execs
/// itself (same arguments and environment) from a read-only overlayfs view
/// of the binary, or from a sealed memfd copy. `lower` is an empty
/// directory overlayfs needs as a second layer (created if missing).
///
/// Errors: only when no re-exec was possible at all (the memfd fallback
/// failed too); on success it does not return.
pub fn ensure_sealed(lower: &Path) -> io::Result<()> {
    if pentacle::is_sealed() || on_readonly_overlay() {
        return Ok(());
    }
    if let Ok(exe) = overlay_view(lower) {
        reexec(&exe);
        // Only on failure: fall back to the copy.
    }
    pentacle::ensure_sealed().map_err(io::Error::other)
}

/// Whether `/proc/self/exe` lives on a read-only overlayfs mount (this
/// process was re-exec'd by [`ensure_sealed`], or the binary is installed
/// on such a mount, which protects it as well).
fn on_readonly_overlay() -> bool {
    use nix::sys::statfs::{statfs, OVERLAYFS_SUPER_MAGIC};
    use nix::sys::statvfs::FsFlags;
    statfs("/proc/self/exe")
        .is_ok_and(|s| s.filesystem_type() == OVERLAYFS_SUPER_MAGIC && s.flags().contains(FsFlags::ST_RDONLY))
}

fn check(r: libc::c_long, what: &str) -> io::Result<libc::c_long> {
    if r < 0 {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(r)
    }
}

/// A lowerdir entry: `:` and `\` escaped, as overlayfs parses the list.
fn escape(p: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in p.as_os_str().as_bytes() {
        if b == b':' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// An O_PATH fd on this process's binary through a new, detached,
/// read-only overlayfs mount of its directory.
fn overlay_view(lower: &Path) -> io::Result<OwnedFd> {
    let exe = std::fs::read_link("/proc/self/exe")?;
    let (Some(dir), Some(name)) = (exe.parent(), exe.file_name()) else {
        return Err(io::Error::other("no directory for /proc/self/exe"));
    };
    if !exe.is_absolute() || !exe.exists() {
        // A deleted or replaced binary: nothing to mount.
        return Err(io::Error::other("the binary is not on disk"));
    }
    std::fs::create_dir_all(lower)?;
    let nul = |b: &[u8]| CString::new(b).map_err(io::Error::other);
    // SAFETY: fsopen(2) with a NUL-terminated filesystem name.
    let ctx = check(
        unsafe { libc::syscall(libc::SYS_fsopen, c"overlay".as_ptr(), FSOPEN_CLOEXEC) },
        "fsopen overlay",
    )?;
    // SAFETY: a new fd we own.
    let ctx = unsafe { OwnedFd::from_raw_fd(ctx as i32) };
    // The binary's directory on top, so nothing in `lower` can shadow it.
    let lowerdir = nul(&[escape(dir), b":".to_vec(), escape(lower)].concat())?;
    let set = |key: &std::ffi::CStr, value: &std::ffi::CStr| {
        // SAFETY: fsconfig(2) FSCONFIG_SET_STRING with NUL-terminated key
        // and value on our fs context.
        unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                ctx.as_raw_fd(),
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            )
        }
    };
    check(set(c"lowerdir", &lowerdir), "fsconfig lowerdir")?;
    // xino only adds kernel log noise here; not all kernels know it.
    let _ = set(c"xino", c"off");
    check(
        // SAFETY: fsconfig(2) FSCONFIG_CMD_CREATE takes no key or value.
        unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                ctx.as_raw_fd(),
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<libc::c_void>(),
                0,
            )
        },
        "fsconfig create",
    )?;
    let attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    // SAFETY: fsmount(2) on our configured context.
    let mnt = check(
        unsafe { libc::syscall(libc::SYS_fsmount, ctx.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) },
        "fsmount",
    )?;
    // SAFETY: a new fd we own.
    let mnt = unsafe { OwnedFd::from_raw_fd(mnt as i32) };
    let name = nul(name.as_bytes())?;
    // SAFETY: openat(2) relative to our mount fd with a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            mnt.as_raw_fd(),
            name.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    check(fd as libc::c_long, "open the binary through overlayfs")?;
    // SAFETY: a new fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// execveat(2) of `exe` with this process's arguments and environment.
/// Returns only if it failed.
fn reexec(exe: &OwnedFd) {
    let args: Vec<CString> = std::env::args_os()
        .filter_map(|a| CString::new(a.as_bytes()).ok())
        .collect();
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| CString::new([k.as_bytes(), b"=", v.as_bytes()].concat()).ok())
        .collect();
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: execveat(2) with AT_EMPTY_PATH on our O_PATH fd; argv and
    // envp are NULL-terminated arrays of C strings that outlive the call.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            exe.as_raw_fd(),
            c"".as_ptr(),
            argv.as_ptr(),
            envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
}
