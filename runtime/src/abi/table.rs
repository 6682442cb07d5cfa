//! The x86-64 syscall table: the one place where what a syscall is and what
//! cordon does with it are written. Names and numbers come from the
//! kernel's own table (generated into [`super::table_x86_64`] by
//! `tools/gen-syscall-table.sh`); the rest of each [`Entry`] is written by
//! hand next to it ([`super::entries_x86_64`]). The filter, the policy
//! checker, the supervisor's dispatch and its own confinement, the audit
//! log, `cordon syscalls` and the lists in docs/POLICY.md all read it here.

pub use super::entry::{Arg, Disposition, Entry, Family, Handler};

use super::entries_x86_64::ENTRIES;
use super::table_x86_64::SYSCALLS;

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
/// handler), in number order: `emulate` on any other is an error.
pub fn emulated() -> impl Iterator<Item = &'static str> {
    entries().filter(|(_, e)| e.handler.is_some()).map(|(_, e)| e.name)
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
        assert_eq!(entry(257).map(|e| e.handler), Some(Some(Handler::Open)));
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
            assert!(e.args.len() <= 6, "{}: more than six arguments", e.name);
        }
    }

    /// The path handlers read their arguments by kind: each form of a call
    /// they serve lists them, with exactly one of each kind, and the ones
    /// a handler cannot do without.
    #[test]
    fn every_handled_form_says_where_its_arguments_are() {
        let needs = |h: Handler| -> &'static [&'static [Arg]] {
            match h {
                Handler::Open => &[&[Arg::Path]],
                Handler::Stat | Handler::Statx | Handler::Readlink => &[&[Arg::Path, Arg::Buf]],
                Handler::Access | Handler::Mkdir | Handler::Mknod => &[&[Arg::Path, Arg::Mode]],
                Handler::Unlink => &[&[Arg::Path]],
                Handler::Rename | Handler::Link => &[&[Arg::Path, Arg::Path2]],
                Handler::Symlink => &[&[Arg::Target, Arg::Path]],
                Handler::Truncate => &[&[Arg::Path, Arg::Len]],
                Handler::Chmod => &[&[Arg::Path, Arg::Mode], &[Arg::Fd, Arg::Mode]],
                Handler::Chown => &[&[Arg::Path, Arg::Uid, Arg::Gid], &[Arg::Fd, Arg::Uid, Arg::Gid]],
                Handler::Utimes => &[&[Arg::Path]],
                Handler::SetXattr => &[&[Arg::Path, Arg::Xname, Arg::Value], &[Arg::Fd, Arg::Xname, Arg::Value]],
                Handler::RemoveXattr => &[&[Arg::Path, Arg::Xname], &[Arg::Fd, Arg::Xname]],
                Handler::Ioctl => &[&[Arg::Fd, Arg::Request, Arg::Argp]],
                _ => &[&[]],
            }
        };
        for (_, e) in entries() {
            let Some(h) = e.handler else { continue };
            for (i, a) in e.args.iter().enumerate() {
                assert_eq!(e.arg(*a), Some(i), "{}: {a:?} twice", e.name);
            }
            assert!(
                needs(h).iter().any(|set| set.iter().all(|&a| e.arg(a).is_some())),
                "{}: {h:?} needs one of {:?}, the entry has {:?}",
                e.name,
                needs(h),
                e.args
            );
            if e.arg(Arg::Flags).is_some() {
                assert_eq!(e.implied, 0, "{}: flags both given and implied", e.name);
            }
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
            if matches!(e.family(), Some(Family::Fs | Family::Open)) {
                assert!(e.path.is_some(), "{}: the path handlers need a path", e.name);
            }
            if e.handler.is_some() {
                assert!(available(nr), "{} cannot be emulated and refused", e.name);
            }
        }
    }
}
