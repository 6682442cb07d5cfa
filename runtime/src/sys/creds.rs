//! The calling thread's credentials, through raw per-thread syscalls
//! (glibc's wrappers would change every thread of the process): ids
//! (setresuid(2), setfsuid(2), ...), supplementary groups (setgroups(2))
//! and capability sets (capget(2), capset(2)). The supervisor switches a
//! thread to a caller's credentials around a call it makes for it
//! (`supervisor::creds`).

use std::io;

use super::cvt;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// One 32-bit half of the capability sets (`struct
/// __user_cap_data_struct`); index 0 holds capabilities 0-31, index 1
/// 32-63.
#[repr(C)]
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapData {
    /// Effective set.
    pub effective: u32,
    /// Permitted set.
    pub permitted: u32,
    /// Inheritable set.
    pub inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: two [`CapData`].
const CAP_V3: u32 = 0x2008_0522;

/// The calling thread's capability sets (capget(2)).
pub fn capget() -> io::Result<[CapData; 2]> {
    let mut h = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let mut d = [CapData::default(); 2];
    // SAFETY: header and a two-element data array as capget(2) requires
    // for _LINUX_CAPABILITY_VERSION_3; both live on our stack.
    cvt(unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut CapHeader, d.as_mut_ptr()) })?;
    Ok(d)
}

/// Sets the calling thread's capability sets to `d` (capset(2)); EPERM
/// for a set beyond what the thread may have.
pub fn capset(d: &[CapData; 2]) -> io::Result<()> {
    let mut h = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    // SAFETY: as in capget; capset(2) only reads the arrays. pid 0 is the
    // calling thread, so only this thread's set changes.
    cvt(unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut CapHeader, d.as_ptr()) }).map(drop)
}

/// setgroups(2) of the calling thread only.
pub fn setgroups(groups: &[libc::gid_t]) -> io::Result<()> {
    // SAFETY: a gid array we borrow, with its length; the kernel only
    // reads it and changes only this thread's credentials.
    cvt(unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) }).map(drop)
}

/// getgroups(2): the thread's supplementary groups into `buf`; returns how
/// many (EINVAL if `buf` is too small).
pub fn getgroups(buf: &mut [libc::gid_t]) -> io::Result<usize> {
    // SAFETY: a gid array we own, with its length; the kernel writes at
    // most that many.
    cvt(unsafe { libc::syscall(libc::SYS_getgroups, buf.len(), buf.as_mut_ptr()) }).map(|n| n as usize)
}

/// setfsuid(2) of the calling thread; `u32::MAX` (-1) changes nothing.
/// Returns the previous fsuid (the call has no error return: compare a
/// second call's result to see whether it took).
pub fn setfsuid(uid: u32) -> io::Result<u32> {
    // SAFETY: an integer argument only.
    cvt(unsafe { libc::syscall(libc::SYS_setfsuid, uid as libc::c_long) }).map(|v| v as u32)
}

/// setfsgid(2), as [`setfsuid`].
pub fn setfsgid(gid: u32) -> io::Result<u32> {
    // SAFETY: an integer argument only.
    cvt(unsafe { libc::syscall(libc::SYS_setfsgid, gid as libc::c_long) }).map(|v| v as u32)
}

/// setresuid(2) of the calling thread only; `u32::MAX` (-1) leaves an id.
pub fn setresuid(r: u32, e: u32, s: u32) -> io::Result<()> {
    // SAFETY: three integers; changes only the calling thread's
    // credentials (raw syscall, not glibc's wrapper).
    cvt(unsafe {
        libc::syscall(
            libc::SYS_setresuid,
            r as libc::c_long,
            e as libc::c_long,
            s as libc::c_long,
        )
    })
    .map(drop)
}

/// setresgid(2), as [`setresuid`].
pub fn setresgid(r: u32, e: u32, s: u32) -> io::Result<()> {
    // SAFETY: as in setresuid.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_setresgid,
            r as libc::c_long,
            e as libc::c_long,
            s as libc::c_long,
        )
    })
    .map(drop)
}

fn getres(nr: libc::c_long) -> io::Result<[u32; 3]> {
    let mut v = [0u32; 3];
    let [a, b, c] = &mut v;
    // SAFETY: getresuid(2)/getresgid(2) write three ids to the pointers,
    // which point at this array.
    cvt(unsafe { libc::syscall(nr, a as *mut u32, b as *mut u32, c as *mut u32) })?;
    Ok(v)
}

/// The thread's real, effective and saved uids (getresuid(2)).
pub fn getresuid() -> io::Result<[u32; 3]> {
    getres(libc::SYS_getresuid)
}

/// The thread's real, effective and saved gids (getresgid(2)).
pub fn getresgid() -> io::Result<[u32; 3]> {
    getres(libc::SYS_getresgid)
}
