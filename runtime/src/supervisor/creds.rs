//! Acting with the caller's credentials.
//!
//! The supervisor runs as root with every capability, so a file it opens
//! for a container process must be opened with that process's filesystem
//! credentials, or an unprivileged container user could read
//! `/etc/shadow` through the emulation. Linux keeps fsuid, fsgid,
//! supplementary groups and capabilities per thread (the raw syscalls, not
//! glibc's process-wide wrappers), so a handler thread can take on the
//! caller's credentials around the access and restore its own after.
//!
//! The caller's credentials are read from `/proc/<tid>/status` (kept open
//! between calls, [`super::task`]), which the
//! kernel prints in the reader's user namespace. A caller in another user
//! namespace gets no capabilities here: its capabilities only apply inside
//! its own namespace.

use std::io;

/// Filesystem credentials of one thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Creds {
    /// Filesystem uid.
    pub fsuid: u32,
    /// Filesystem gid.
    pub fsgid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    /// Effective capability mask.
    pub cap_eff: u64,
    /// File mode creation mask, applied by the supervisor (its own is 0).
    pub umask: u32,
}

impl Creds {
    /// Parses the `Uid:`, `Gid:`, `Groups:` and `CapEff:` lines of a
    /// `/proc/<tid>/status` text.
    pub fn parse(status: &str) -> Option<Self> {
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
        let fourth = |v: &str| v.split_whitespace().nth(3).and_then(|x| x.parse().ok());
        Some(Creds {
            fsuid: fourth(field("Uid:")?)?,
            fsgid: fourth(field("Gid:")?)?,
            groups: field("Groups:")?
                .split_whitespace()
                .filter_map(|g| g.parse().ok())
                .collect(),
            cap_eff: u64::from_str_radix(field("CapEff:")?, 16).ok()?,
            umask: field("Umask:")
                .and_then(|u| u32::from_str_radix(u, 8).ok())
                .unwrap_or(0o022),
        })
    }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_V3: u32 = 0x2008_0522;

fn capget() -> io::Result<[CapData; 2]> {
    let mut h = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let mut d = [CapData::default(); 2];
    // SAFETY: header and a two-element data array as capget(2) requires
    // for _LINUX_CAPABILITY_VERSION_3; both live on our stack.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut CapHeader, d.as_mut_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(d)
}

fn capset_effective(d: &[CapData; 2], eff: u64) -> io::Result<()> {
    let mut h = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let mut n = *d;
    n[0].effective = (eff as u32) & d[0].permitted;
    n[1].effective = ((eff >> 32) as u32) & d[1].permitted;
    // SAFETY: as in capget; capset(2) only reads the arrays. pid 0 is the
    // calling thread, so only this thread's set changes.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut CapHeader, n.as_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn raw(nr: libc::c_long, a: libc::c_long, b: libc::c_long) -> io::Result<libc::c_long> {
    // SAFETY: the credential syscalls below take integers or a pointer to a
    // gid array that outlives the call; they affect only this thread.
    let r = unsafe { libc::syscall(nr, a, b) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Runs `f` on this thread with `c`'s filesystem credentials, then
/// restores the thread's own. If the switch fails, `f` does not run.
///
/// Only what differs is switched: the supervisor's own credentials are
/// read once, and every syscall here costs a few microseconds (a new
/// `struct cred` each), so a caller with the supervisor's fsuid, fsgid and
/// groups (container root, usually) costs two capset(2) calls instead of
/// nine credential syscalls.
pub fn with<T>(c: &Creds, f: impl FnOnce() -> T) -> io::Result<T> {
    // The supervisor's own credentials never change: read them once.
    // setfsuid/setfsgid with -1 change nothing and return the current ids.
    static OWN: std::sync::OnceLock<Own> = std::sync::OnceLock::new();
    let own = match OWN.get() {
        Some(o) => o,
        None => {
            let caps = capget()?;
            let mut groups = vec![0 as libc::gid_t; 256];
            let n = raw(libc::SYS_getgroups, groups.len() as _, groups.as_mut_ptr() as _)?;
            groups.truncate(n as usize);
            let fsuid = raw(libc::SYS_setfsuid, -1, 0)? as u32;
            let fsgid = raw(libc::SYS_setfsgid, -1, 0)? as u32;
            OWN.get_or_init(|| Own {
                caps,
                groups,
                fsuid,
                fsgid,
            })
        }
    };
    let (saved_caps, saved_groups) = (&own.caps, &own.groups);
    let full = u64::from(saved_caps[0].permitted) | (u64::from(saved_caps[1].permitted) << 32);
    let plan = Switch {
        groups: c.groups != *saved_groups,
        fsgid: c.fsgid != own.fsgid,
        fsuid: c.fsuid != own.fsuid,
        caps: c.cap_eff & full != full,
    };
    let restore = || {
        if plan.caps {
            let _ = capset_effective(saved_caps, full);
        }
        if plan.fsuid {
            let _ = raw(libc::SYS_setfsuid, own.fsuid as _, 0);
        }
        if plan.fsgid {
            let _ = raw(libc::SYS_setfsgid, own.fsgid as _, 0);
        }
        if plan.groups {
            let _ = raw(libc::SYS_setgroups, saved_groups.len() as _, saved_groups.as_ptr() as _);
        }
    };
    let switch = || -> io::Result<()> {
        if plan.groups {
            raw(libc::SYS_setgroups, c.groups.len() as _, c.groups.as_ptr() as _)?;
        }
        if plan.fsgid {
            raw(libc::SYS_setfsgid, c.fsgid as _, 0)?;
            // setfsgid returns the previous value; check the switch happened.
            if raw(libc::SYS_setfsgid, -1, 0)? as u32 != c.fsgid {
                return Err(io::Error::from_raw_os_error(libc::EPERM));
            }
        }
        if plan.fsuid {
            raw(libc::SYS_setfsuid, c.fsuid as _, 0)?;
            if raw(libc::SYS_setfsuid, -1, 0)? as u32 != c.fsuid {
                return Err(io::Error::from_raw_os_error(libc::EPERM));
            }
        }
        if plan.caps {
            capset_effective(saved_caps, c.cap_eff)?;
        }
        Ok(())
    };
    if let Err(e) = switch() {
        restore();
        return Err(e);
    }
    let out = f();
    restore();
    Ok(out)
}

/// The supervisor thread's own credentials, as [`with`] restores them.
struct Own {
    caps: [CapData; 2],
    groups: Vec<libc::gid_t>,
    fsuid: u32,
    fsgid: u32,
}

/// Which of the thread's credentials [`with`] changes for one caller.
#[derive(Clone, Copy)]
struct Switch {
    groups: bool,
    fsgid: bool,
    fsuid: bool,
    caps: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_switches_what_differs_and_restores_it() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root");
            return;
        }
        let ids = || {
            (
                raw(libc::SYS_setfsuid, -1, 0).unwrap(),
                raw(libc::SYS_setfsgid, -1, 0).unwrap(),
                capget().unwrap()[0].effective,
            )
        };
        let before = ids();
        let c = Creds {
            fsuid: 4242,
            fsgid: 4343,
            groups: vec![7],
            cap_eff: 0,
            umask: 0o022,
        };
        assert_eq!(with(&c, ids).unwrap(), (4242, 4343, 0));
        assert_eq!(ids(), before, "restored");
        // The thread's own ids: only the capabilities change (5: CAP_KILL).
        let same = Creds {
            fsuid: before.0 as u32,
            fsgid: before.1 as u32,
            cap_eff: 1 << 5,
            ..c
        };
        let mut groups = vec![0 as libc::gid_t; 64];
        let n = raw(libc::SYS_getgroups, 64, groups.as_mut_ptr() as _).unwrap();
        groups.truncate(n as usize);
        let same = Creds { groups, ..same };
        assert_eq!(with(&same, ids).unwrap(), (before.0, before.1, 1 << 5));
        assert_eq!(ids(), before, "restored");
    }

    #[test]
    fn parses_status() {
        let s = "Name:\tsh\nUmask:\t0077\nUid:\t1000\t1001\t1002\t1003\nGid:\t20\t21\t22\t23\nGroups:\t2000 2001 \nCapEff:\t0000000000000420\n";
        assert_eq!(
            Creds::parse(s),
            Some(Creds {
                fsuid: 1003,
                fsgid: 23,
                groups: vec![2000, 2001],
                cap_eff: 0x420,
                umask: 0o077,
            })
        );
    }
}
