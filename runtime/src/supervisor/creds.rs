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

/// The credentials of one thread, as `/proc/<tid>/status` shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Creds {
    /// Real, effective and saved uid (the `Uid:` line's first three).
    pub uids: [u32; 3],
    /// Real, effective and saved gid.
    pub gids: [u32; 3],
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
    /// Whether capability `cap` (capabilities(7) number) is effective.
    pub fn has_cap(&self, cap: u32) -> bool {
        cap < 64 && self.cap_eff & (1 << cap) != 0
    }

    /// Parses the `Uid:`, `Gid:`, `Groups:` and `CapEff:` lines of a
    /// `/proc/<tid>/status` text.
    pub fn parse(status: &str) -> Option<Self> {
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
        let nth = |v: &str, i: usize| v.split_whitespace().nth(i).and_then(|x| x.parse().ok());
        let (uid, gid) = (field("Uid:")?, field("Gid:")?);
        Some(Creds {
            uids: [nth(uid, 0)?, nth(uid, 1)?, nth(uid, 2)?],
            gids: [nth(gid, 0)?, nth(gid, 1)?, nth(gid, 2)?],
            fsuid: nth(uid, 3)?,
            fsgid: nth(gid, 3)?,
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

use crate::sys::creds::{self as raw, CapData};

fn capset_effective(d: &[CapData; 2], eff: u64) -> io::Result<()> {
    let mut n = *d;
    n[0].effective = (eff as u32) & d[0].permitted;
    n[1].effective = ((eff >> 32) as u32) & d[1].permitted;
    raw::capset(&n)
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
    let own = own()?;
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
            let _ = raw::setfsuid(own.fsuid);
        }
        if plan.fsgid {
            let _ = raw::setfsgid(own.fsgid);
        }
        if plan.groups {
            let _ = raw::setgroups(saved_groups);
        }
    };
    let switch = || -> io::Result<()> {
        if plan.groups {
            raw::setgroups(&c.groups)?;
        }
        if plan.fsgid {
            raw::setfsgid(c.fsgid)?;
            // setfsgid returns the previous value; check the switch happened.
            if raw::setfsgid(u32::MAX)? != c.fsgid {
                return Err(io::Error::from_raw_os_error(libc::EPERM));
            }
        }
        if plan.fsuid {
            raw::setfsuid(c.fsuid)?;
            if raw::setfsuid(u32::MAX)? != c.fsuid {
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

/// Runs `f` on this thread as the caller `c` toward the kernel and peers:
/// its real and effective uid and gid (so its fsuid and fsgid), its
/// supplementary groups and its effective capabilities; then restores the
/// thread's own. For calls whose effects carry the caller's identity
/// beyond a permission check: connect(2) records the effective ids as the
/// peer's `SO_PEERCRED`, a datagram to a unix socket with `SO_PASSCRED`
/// carries the real ids, and netlink, `SO_MARK` and the like check the
/// effective capabilities.
///
/// Per-thread raw syscalls only (glibc's wrappers would change every
/// thread): setgroups(2), setresgid(2) and setresuid(2) with the saved ids
/// left at the supervisor's (0), so the thread keeps its permitted set and
/// may go back; capset(2) then sets the caller's effective capabilities
/// (setresuid cleared them when the effective uid left 0). If a step of the
/// switch fails, `f` does not run. If the restore fails the thread cannot
/// be trusted any more and the process aborts (the watchdog then kills the
/// container: fail closed).
pub fn with_identity<T>(c: &Creds, f: impl FnOnce() -> T) -> io::Result<T> {
    let own = own()?;
    let full = u64::from(own.caps[0].permitted) | (u64::from(own.caps[1].permitted) << 32);
    let switch = || -> io::Result<()> {
        raw::setgroups(&c.groups)?;
        raw::setresgid(c.gids[0], c.gids[1], u32::MAX)?;
        raw::setresuid(c.uids[0], c.uids[1], u32::MAX)?;
        capset_effective(&own.caps, c.cap_eff)
    };
    let restore = || -> io::Result<()> {
        // The saved uid is still the supervisor's (0): going back is allowed
        // with or without CAP_SETUID, and an effective uid back to 0 brings
        // the permitted set back into the effective one.
        raw::setresuid(own.uids[0], own.uids[1], u32::MAX)?;
        capset_effective(&own.caps, full)?;
        raw::setresgid(own.gids[0], own.gids[1], u32::MAX)?;
        raw::setgroups(&own.groups)?;
        raw::setfsuid(own.fsuid)?;
        raw::setfsgid(own.fsgid)?;
        Ok(())
    };
    let restored = |r: io::Result<()>| {
        if let Err(e) = r {
            tracing::error!("cannot restore the supervisor's own credentials: {e}");
            std::process::abort();
        }
    };
    if let Err(e) = switch() {
        restored(restore());
        return Err(e);
    }
    let out = f();
    restored(restore());
    Ok(out)
}

/// The supervisor's own credentials, read once: they never change.
fn own() -> io::Result<&'static Own> {
    // setfsuid/setfsgid with -1 change nothing and return the current ids.
    static OWN: std::sync::OnceLock<Own> = std::sync::OnceLock::new();
    if let Some(o) = OWN.get() {
        return Ok(o);
    }
    let caps = raw::capget()?;
    let mut groups = vec![0 as libc::gid_t; 256];
    let n = raw::getgroups(&mut groups)?;
    groups.truncate(n as usize);
    let fsuid = raw::setfsuid(u32::MAX)?;
    let fsgid = raw::setfsgid(u32::MAX)?;
    let (uids, gids) = (raw::getresuid()?, raw::getresgid()?);
    Ok(OWN.get_or_init(|| Own {
        uids,
        gids,
        caps,
        groups,
        fsuid,
        fsgid,
    }))
}

/// The supervisor thread's own credentials, as [`with`] restores them.
struct Own {
    uids: [u32; 3],
    gids: [u32; 3],
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
                raw::setfsuid(u32::MAX).unwrap(),
                raw::setfsgid(u32::MAX).unwrap(),
                raw::capget().unwrap()[0].effective,
            )
        };
        let before = ids();
        let c = Creds {
            uids: [4242; 3],
            gids: [4343; 3],
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
            fsuid: before.0,
            fsgid: before.1,
            cap_eff: 1 << 5,
            ..c
        };
        let mut groups = vec![0 as libc::gid_t; 64];
        let n = raw::getgroups(&mut groups).unwrap();
        groups.truncate(n as usize);
        let same = Creds { groups, ..same };
        assert_eq!(with(&same, ids).unwrap(), (before.0, before.1, 1 << 5));
        assert_eq!(ids(), before, "restored");
    }

    #[test]
    fn with_identity_takes_real_and_effective_ids_and_restores_them() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root");
            return;
        }
        let ids = || {
            (
                raw::getresuid().unwrap(),
                raw::getresgid().unwrap(),
                raw::capget().unwrap()[0].effective,
            )
        };
        // A thread of its own: a failed restore would abort the process.
        std::thread::spawn(move || {
            let before = ids();
            let c = Creds {
                uids: [1000, 1001, 1002],
                gids: [2000, 2001, 2002],
                fsuid: 1001,
                fsgid: 2001,
                groups: vec![5],
                cap_eff: 1 << 12,
                umask: 0o022,
            };
            let inside = with_identity(&c, ids).unwrap();
            assert_eq!(inside.0, [1000, 1001, before.0[2]], "saved uid stays the supervisor's");
            assert_eq!(inside.1, [2000, 2001, before.1[2]]);
            assert_eq!(inside.2, 1 << 12, "only the caller's effective capabilities");
            assert_eq!(ids(), before, "restored");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn parses_status() {
        let s = "Name:\tsh\nUmask:\t0077\nUid:\t1000\t1001\t1002\t1003\nGid:\t20\t21\t22\t23\nGroups:\t2000 2001 \nCapEff:\t0000000000000420\n";
        assert_eq!(
            Creds::parse(s),
            Some(Creds {
                uids: [1000, 1001, 1002],
                gids: [20, 21, 22],
                fsuid: 1003,
                fsgid: 23,
                groups: vec![2000, 2001],
                cap_eff: 0x420,
                umask: 0o077,
            })
        );
    }
}
