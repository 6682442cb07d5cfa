//! The x86-64 syscall table: the one place where what a syscall is and what
//! cordon does with it are written. Names and numbers come from the
//! kernel's own table (generated into [`super::table_x86_64`] by
//! `tools/gen-syscall-table.sh`); the rest of each [`Entry`] is written by
//! hand next to it ([`super::entries_x86_64`]). The filter, the policy
//! checker, the supervisor's dispatch and its own confinement, the audit
//! log, `cordon syscalls` and the lists in docs/POLICY.md all read it here.

use super::entries_x86_64::ENTRIES;
use super::table_x86_64::SYSCALLS;

/// The handler family that can emulate a syscall (one file of
/// `supervisor/syscalls/` each; the supervisor's dispatch maps a family to
/// its handler).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// `uname`: the virtual kernel identity of the policy's views.
    Uname,
    /// `sysinfo`: memory and uptime as the container's cgroup sees them.
    Sysinfo,
    /// The open family (`open`, `openat`, `openat2`, `creat`): opened by the
    /// supervisor under the path rules and installed with ADDFD.
    Open,
    /// `connect`: the egress rules, on a copy of the socket.
    Connect,
    /// `bind`: a unix socket's path under the path rules.
    Bind,
    /// `sendto` with an address: the egress rules.
    Sendto,
    /// `sendmsg` with an address: the egress rules.
    Sendmsg,
    /// `sendmmsg`: the egress rules, message by message.
    Sendmmsg,
    /// Metadata reads and tree changes by path (`supervisor/syscalls/fs.rs`).
    Fs,
    /// Metadata changes by path and by fd, and the file-flag ioctls
    /// (`supervisor/syscalls/meta.rs`).
    Meta,
}

impl Family {
    /// Whether this family emulates a call for the path rules (opens,
    /// metadata, tree changes, unix binds), which the kernel levels (the
    /// mounts, Landlock) can enforce instead; the network and identity
    /// families are the supervisor's whatever the level.
    pub fn serves_path_rules(self) -> bool {
        matches!(self, Family::Open | Family::Bind | Family::Fs | Family::Meta)
    }

    /// The syscalls the supervisor makes itself, on the caller's behalf,
    /// when it emulates a call of this family: its own confinement
    /// (`supervisor/confine.rs`) allows them.
    pub fn host_calls(self) -> &'static [&'static str] {
        match self {
            // The caller's names are read in its UTS namespace (setns with
            // CLONE_NEWUTS alone, allowed by its own rule).
            Family::Uname => &["uname"],
            Family::Sysinfo => &["sysinfo"],
            Family::Open => &["openat2"],
            Family::Connect | Family::Sendto | Family::Sendmsg | Family::Sendmmsg => &["connect", "sendto", "sendmsg"],
            // A unix bind runs on a thread with the caller's root, cwd and
            // umask (unshare(CLONE_FS) alone, allowed by its own rule).
            Family::Bind => &["bind", "fchdir", "chroot", "umask"],
            Family::Fs => &[
                "newfstatat",
                "statx",
                "faccessat",
                "faccessat2",
                "readlinkat",
                "mkdirat",
                "mknodat",
                "unlinkat",
                "renameat",
                "renameat2",
                "linkat",
                "symlinkat",
                "fchmodat",
                "fchownat",
                "truncate",
            ],
            Family::Meta => &[
                "fchmod",
                "fchown",
                "fchmodat",
                "fchmodat2",
                "utimensat",
                "setxattr",
                "lsetxattr",
                "fsetxattr",
                "removexattr",
                "lremovexattr",
                "fremovexattr",
                "ioctl",
            ],
        }
    }
}

/// What cordon does with a syscall whatever the policy, and what the
/// built-in policies must decide about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// The policy's rules decide (its default action if none names it).
    Policy,
    /// Names a path but changes no file (metadata reads, exec, chdir,
    /// chroot): the kernel resolves the path unless the policy emulates
    /// the call.
    Reads,
    /// Changes a file's data or metadata, or the tree, by path or through
    /// an fd opened for reading (or O_PATH): every built-in policy with
    /// path rules emulates it or refuses it outright, for the arguments
    /// that change something.
    Changes,
    /// Changes the mount table: refused outright by the built-in
    /// policies, which so pin every caller's root
    /// ([`crate::policy::Policy::pins_root`]).
    Mount,
    /// Refused with ENOSYS whatever the policy says, and no policy rule
    /// may name it (the note says why).
    Nosys,
    /// The kernel runs it without consulting seccomp (the uprobe
    /// trampolines' calls): no filter decides it. Where a kernel does ask,
    /// the filter answers ENOSYS, as for [`Disposition::Nosys`], and no
    /// policy rule may name it.
    Unfiltered,
}

impl Disposition {
    /// The disposition as `cordon syscalls --notes` prints it.
    pub fn label(self) -> &'static str {
        match self {
            Disposition::Policy => "policy",
            Disposition::Reads => "reads a path",
            Disposition::Changes => "changes files",
            Disposition::Mount => "mount",
            Disposition::Nosys => "ENOSYS",
            Disposition::Unfiltered => "no seccomp",
        }
    }
}

/// The hand-written part of one syscall's entry (its number is the
/// kernel's, from the generated table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The syscall's name, as in the kernel's table.
    pub name: &'static str,
    /// Which argument register (0 to 5) holds a path, if one does (the
    /// first path of calls that take two).
    pub path: Option<u8>,
    /// The handler family that can emulate it; `None`: `emulate` is
    /// refused for it.
    pub family: Option<Family>,
    /// What cordon does with it whatever the policy.
    pub disposition: Disposition,
    /// One line on what it does and why it is treated so.
    pub note: &'static str,
}

impl Entry {
    /// An entry without a path argument or a handler family.
    pub const fn new(name: &'static str, disposition: Disposition, note: &'static str) -> Self {
        Self {
            name,
            path: None,
            family: None,
            disposition,
            note,
        }
    }
    /// This entry, argument `i` being a path.
    pub const fn path(mut self, i: u8) -> Self {
        self.path = Some(i);
        self
    }
    /// This entry, emulated by `family`.
    pub const fn by(mut self, family: Family) -> Self {
        self.family = Some(family);
        self
    }
}

/// The number of syscall `name` on x86-64, if the table knows it.
pub fn number(name: &str) -> Option<u32> {
    SYSCALLS.iter().find(|(n, _)| *n == name).map(|&(_, nr)| nr)
}

/// The name of x86-64 syscall `nr`, if the table knows it.
pub fn name(nr: u32) -> Option<&'static str> {
    index(nr).map(|i| SYSCALLS[i].0)
}

fn index(nr: u32) -> Option<usize> {
    SYSCALLS.binary_search_by_key(&nr, |&(_, n)| n).ok()
}

/// The entry of x86-64 syscall `nr`, if the table knows it.
pub fn entry(nr: u32) -> Option<&'static Entry> {
    index(nr).and_then(|i| ENTRIES.get(i))
}

/// The entry of syscall `name`, if the table knows it.
pub fn entry_named(name: &str) -> Option<&'static Entry> {
    number(name).and_then(entry)
}

/// Whether a policy decides syscall `nr`: the table knows it and its entry
/// is neither [`Disposition::Nosys`] nor [`Disposition::Unfiltered`].
/// Other numbers get ENOSYS from the filter whatever the policy says.
pub fn available(nr: u32) -> bool {
    entry(nr).is_some_and(|e| !matches!(e.disposition, Disposition::Nosys | Disposition::Unfiltered))
}

/// The highest number in the table.
pub fn max_number() -> u32 {
    SYSCALLS.last().map(|&(_, n)| n).unwrap_or(0)
}

/// Every (name, number) of the kernel's table, sorted by number.
pub fn all() -> &'static [(&'static str, u32)] {
    SYSCALLS
}

/// Every (number, entry), sorted by number.
pub fn entries() -> impl Iterator<Item = (u32, &'static Entry)> {
    SYSCALLS.iter().zip(ENTRIES).map(|(&(_, nr), e)| (nr, e))
}

/// The names of the syscalls the supervisor can emulate (an entry with a
/// family), in number order: `emulate` on any other is an error.
pub fn emulated() -> impl Iterator<Item = &'static str> {
    entries().filter(|(_, e)| e.family.is_some()).map(|(_, e)| e.name)
}

/// The names of the syscalls with disposition `d`, in number order.
pub fn with(d: Disposition) -> impl Iterator<Item = &'static str> {
    entries().filter(move |(_, e)| e.disposition == d).map(|(_, e)| e.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_numbers() {
        assert_eq!(number("read"), Some(0));
        assert_eq!(number("uname"), Some(63));
        assert_eq!(name(257), Some("openat"));
        assert_eq!(name(100_000), None);
        assert!(all().windows(2).all(|w| w[0].1 < w[1].1));
        assert_eq!(entry(257).map(|e| e.family), Some(Some(Family::Open)));
    }

    /// Every row of the kernel's table has exactly one entry, in the same
    /// place, and no entry stands without a row.
    #[test]
    fn every_kernel_syscall_has_one_entry() {
        for (i, &(name, nr)) in SYSCALLS.iter().enumerate() {
            let e = ENTRIES
                .get(i)
                .unwrap_or_else(|| panic!("{name} ({nr}) has no entry in entries_x86_64.rs"));
            assert_eq!(
                e.name, name,
                "entry {i} of entries_x86_64.rs is not the kernel's syscall {nr}"
            );
        }
        assert_eq!(
            ENTRIES.len(),
            SYSCALLS.len(),
            "entries without a kernel row: {:?}",
            &ENTRIES[SYSCALLS.len().min(ENTRIES.len())..]
        );
        for (_, e) in entries() {
            assert!(!e.note.is_empty(), "{} has no note", e.name);
            assert!(e.path.is_none_or(|i| i <= 5), "{}: no argument {:?}", e.name, e.path);
        }
    }

    /// A path-taking syscall says what becomes of its path: it reads, it
    /// changes files, it mounts, or it is refused; and what reads a path
    /// names it.
    #[test]
    fn every_path_is_accounted_for() {
        for (nr, e) in entries() {
            if e.path.is_some() {
                assert_ne!(e.disposition, Disposition::Policy, "{} takes a path", e.name);
            }
            if e.disposition == Disposition::Reads {
                assert!(e.path.is_some(), "{} reads no path", e.name);
            }
            if e.family == Some(Family::Fs) || e.family == Some(Family::Open) {
                assert!(e.path.is_some(), "{}: the path handlers need a path", e.name);
            }
            if e.family.is_some() {
                assert!(available(nr), "{} cannot be emulated and refused", e.name);
            }
        }
    }
}
