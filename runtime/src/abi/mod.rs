//! The kernel's ABI as cordon needs it, and nothing of cordon's own above
//! it: the x86-64 syscall table ([`table`]: every syscall's name, number
//! and what cordon does with it) and the architecture numbers of
//! `seccomp_data`. The ground floor: every other layer may read it, and it
//! imports none of them.

mod entries_x86_64;
pub mod entry;
pub mod table;
mod table_x86_64;

/// `AUDIT_ARCH_X86_64` (linux/audit.h): `seccomp_data.arch` of an x86-64
/// syscall. The one definition: the filters, the bundle profile's
/// compiler and both platforms' checks use it.
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// `AUDIT_ARCH_I386` (linux/audit.h): `seccomp_data.arch` of a syscall
/// made through the i386 entry point.
pub const AUDIT_ARCH_I386: u32 = 0x4000_0003;
/// `__X32_SYSCALL_BIT`: set in the number of a syscall of the x32 ABI.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// `exit` on the i386 entry point.
pub const I386_EXIT: u32 = 1;
/// `exit_group` on the i386 entry point.
pub const I386_EXIT_GROUP: u32 = 252;
/// `BPF_MAXINSNS` (linux/bpf_common.h): the longest classic BPF program
/// the kernel loads.
pub const BPF_MAXINSNS: usize = 4096;
