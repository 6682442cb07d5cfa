//! The caller's device cgroup, applied to the device nodes the supervisor
//! opens or creates for it.
//!
//! The kernel checks a device node against the device cgroup of the task
//! that opens it (or mknods it): `devcgroup_inode_permission` and
//! `devcgroup_inode_mknod`. When the supervisor performs an open or a
//! mknod for a container, that task is the supervisor, which sits in the
//! host's cgroup and may use every device: a container with CAP_MKNOD
//! could make a block device node of the host's disk and have the
//! supervisor open it. So before the supervisor opens or creates a device
//! node for a caller, it asks the caller's device cgroup:
//!
//! - cgroup v1: the `devices.list` of the caller's `devices` cgroup (from
//!   `/proc/<tid>/cgroup`), which is the kernel's own exception list;
//! - cgroup v2: the device rules are a BPF program the kernel cannot show,
//!   so the supervisor allows the devices every OCI container has
//!   (runtime-spec config-linux.md "Default Devices", plus the pty
//!   devices) and refuses the rest with EPERM. A bundle that passes other
//!   devices in on a v2 host reaches them only without open emulation.
//!
//! A refusal is EPERM, what the kernel answers.

use std::io;

/// What a call does with a device node (devices.list access letters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// An open with these read and write rights.
    Open {
        /// Opened for reading (O_RDONLY or O_RDWR).
        read: bool,
        /// Opened for writing (O_WRONLY or O_RDWR).
        write: bool,
    },
    /// mknod(2) of the node.
    Mknod,
}

impl Access {
    /// The access an open(2) with `flags` needs (O_PATH needs none).
    pub fn of_open(flags: u64) -> Option<Self> {
        let f = flags as i32;
        if f & libc::O_PATH != 0 {
            return None;
        }
        Some(match f & libc::O_ACCMODE {
            libc::O_WRONLY => Access::Open {
                read: false,
                write: true,
            },
            libc::O_RDWR => Access::Open {
                read: true,
                write: true,
            },
            _ => Access::Open {
                read: true,
                write: false,
            },
        })
    }

    fn letters(self) -> Vec<char> {
        match self {
            Access::Mknod => vec!['m'],
            Access::Open { read, write } => {
                let mut v = Vec::new();
                if read {
                    v.push('r');
                }
                if write {
                    v.push('w');
                }
                v
            }
        }
    }
}

/// One line of a v1 `devices.list`: `TYPE MAJOR:MINOR ACCESS`, TYPE one of
/// `a` (all), `c`, `b`; `*` for any number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// `a`, `c` or `b`.
    pub kind: char,
    /// `None` for `*`.
    pub major: Option<u64>,
    /// `None` for `*`.
    pub minor: Option<u64>,
    /// Access letters (`r`, `w`, `m`).
    pub access: String,
}

impl Rule {
    /// Parses one `devices.list` line; `None` if it is not one.
    pub fn parse(line: &str) -> Option<Self> {
        let mut it = line.split_whitespace();
        let kind = it.next()?.chars().next()?;
        let (maj, min) = it.next()?.split_once(':')?;
        let num = |s: &str| if s == "*" { Ok(None) } else { s.parse().map(Some) };
        Some(Rule {
            kind,
            major: num(maj).ok()?,
            minor: num(min).ok()?,
            access: it.next()?.to_string(),
        })
    }

    fn covers(&self, kind: char, major: u64, minor: u64, letter: char) -> bool {
        (self.kind == 'a' || self.kind == kind)
            && self.major.is_none_or(|m| m == major)
            && self.minor.is_none_or(|m| m == minor)
            && self.access.contains(letter)
    }
}

/// Whether the allow-list `rules` (a v1 `devices.list`) lets `access` of
/// device `kind` (`c` or `b`) `major:minor` through: every letter the
/// access needs must be granted by some rule.
pub fn list_allows(rules: &[Rule], kind: char, major: u64, minor: u64, access: Access) -> bool {
    access
        .letters()
        .into_iter()
        .all(|l| rules.iter().any(|r| r.covers(kind, major, minor, l)))
}

/// The devices every OCI container may use, as a v1 list (runtime-spec
/// "Default Devices": null, zero, full, random, urandom, tty, console,
/// ptmx; and the pty slaves, 136-143).
fn defaults() -> Vec<Rule> {
    let mut v: Vec<Rule> = [(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 1), (5, 2)]
        .into_iter()
        .map(|(major, minor)| Rule {
            kind: 'c',
            major: Some(major),
            minor: Some(minor),
            access: "rwm".into(),
        })
        .collect();
    v.extend((136..=143).map(|major| Rule {
        kind: 'c',
        major: Some(major),
        minor: None,
        access: "rwm".into(),
    }));
    v
}

/// Where the host's v1 `devices` hierarchy is mounted (read once: it
/// does not move while the supervisor runs).
fn devices_mount() -> Option<&'static std::path::Path> {
    static MOUNT: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    MOUNT.get_or_init(|| crate::cgroupv1::mount_point("devices")).as_deref()
}

/// The rules of thread `tid`'s device cgroup: its v1 `devices.list`, or
/// the defaults on a v2 host (see the module docs).
///
/// Errors: the thread is gone, or its list cannot be read.
pub fn rules_of(tid: i32) -> io::Result<Vec<Rule>> {
    match (crate::cgroupv1::path_of(tid, "devices")?, devices_mount()) {
        (Some(path), Some(mount)) => {
            let list = std::fs::read_to_string(mount.join(path.trim_start_matches('/')).join("devices.list"))?;
            Ok(list.lines().filter_map(Rule::parse).collect())
        }
        _ => Ok(defaults()),
    }
}

/// Checks that the caller `tid`'s device cgroup allows `access` of the
/// device node described by `st` (from fstat(2)); anything that is not a
/// character or block device passes. `Err(EPERM)` when refused or when
/// the cgroup cannot be read (fail closed).
pub fn check(tid: i32, st: &libc::stat, access: Access) -> Result<(), i32> {
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFCHR => 'c',
        libc::S_IFBLK => 'b',
        _ => return Ok(()),
    };
    check_dev(tid, kind, st.st_rdev, access)
}

/// As [`check`], for device number `rdev` of `kind` (`c` or `b`).
pub fn check_dev(tid: i32, kind: char, rdev: u64, access: Access) -> Result<(), i32> {
    let (major, minor) = (libc::major(rdev) as u64, libc::minor(rdev) as u64);
    let rules = rules_of(tid).map_err(|_| libc::EPERM)?;
    if list_allows(&rules, kind, major, minor, access) {
        Ok(())
    } else {
        Err(libc::EPERM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_lists() {
        let rules: Vec<Rule> = "c 1:3 rwm\nc 136:* rwm\nb 7:* m\n"
            .lines()
            .filter_map(Rule::parse)
            .collect();
        let rw = Access::Open {
            read: true,
            write: true,
        };
        let r = Access::Open {
            read: true,
            write: false,
        };
        assert!(list_allows(&rules, 'c', 1, 3, rw));
        assert!(list_allows(&rules, 'c', 136, 9, rw));
        assert!(!list_allows(&rules, 'c', 1, 5, r));
        assert!(
            !list_allows(&rules, 'b', 7, 0, r),
            "a loop device may be made, not opened"
        );
        assert!(list_allows(&rules, 'b', 7, 0, Access::Mknod));
        assert!(!list_allows(&rules, 'b', 8, 0, Access::Mknod));
        let all: Vec<Rule> = Rule::parse("a *:* rwm").into_iter().collect();
        assert!(list_allows(&all, 'b', 8, 0, rw));
        assert_eq!(Rule::parse("bogus"), None);
    }

    #[test]
    fn defaults_are_the_oci_devices() {
        let d = defaults();
        let rw = Access::Open {
            read: true,
            write: true,
        };
        assert!(list_allows(&d, 'c', 1, 3, rw), "/dev/null");
        assert!(list_allows(&d, 'c', 5, 2, rw), "/dev/ptmx");
        assert!(!list_allows(&d, 'b', 7, 0, rw), "a loop device");
        assert!(!list_allows(&d, 'c', 1, 1, rw), "/dev/mem");
        assert_eq!(Access::of_open(libc::O_PATH as u64), None);
    }

    #[test]
    fn this_process_reads_its_own_rules() {
        // The test runs in some cgroup: its rules read without error.
        rules_of(std::process::id() as i32).unwrap();
    }
}
