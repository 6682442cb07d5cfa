//! The x86-64 syscall table: the one place syscall names and numbers live.
//! Numbers come from the generated [`super::table_x86_64`]; the filter, the
//! policy checker, the audit log and `cordon syscalls` all read them here.

use super::table_x86_64::SYSCALLS;

/// The number of syscall `name` on x86-64, if the table knows it.
pub fn number(name: &str) -> Option<u32> {
    SYSCALLS.iter().find(|(n, _)| *n == name).map(|&(_, nr)| nr)
}

/// The name of x86-64 syscall `nr`, if the table knows it.
pub fn name(nr: u32) -> Option<&'static str> {
    SYSCALLS
        .binary_search_by_key(&nr, |&(_, n)| n)
        .ok()
        .map(|i| SYSCALLS[i].0)
}

/// The highest number in the table.
pub fn max_number() -> u32 {
    SYSCALLS.last().map(|&(_, n)| n).unwrap_or(0)
}

/// Every (name, number), sorted by number.
pub fn all() -> &'static [(&'static str, u32)] {
    SYSCALLS
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_numbers() {
        assert_eq!(super::number("read"), Some(0));
        assert_eq!(super::number("uname"), Some(63));
        assert_eq!(super::name(257), Some("openat"));
        assert_eq!(super::name(100_000), None);
        assert!(super::all().windows(2).all(|w| w[0].1 < w[1].1));
    }
}
