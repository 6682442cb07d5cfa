//! The supervisor confines itself (as gVisor's Sentry and Firecracker's
//! VMM do) with two seccompiler-built filters, installed before its first
//! thread so every thread inherits them:
//! 1. syscalls it never needs and an attacker would want (exec, ptrace,
//!    mounts, namespaces, module loading...) kill the whole process; the
//!    watchdog then kills the container, so a compromised supervisor ends
//!    the sandbox instead of escaping it;
//! 2. everything outside the list of syscalls it uses fails with EPERM.
//!
//! The allowed list was read off `strace -f` of the supervisor under the
//! integration suites, plus what Rust's std uses on rarer paths.

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

/// Errors building or installing the filters.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// seccompiler refused the rules.
    #[error("build the supervisor's filter: {0}")]
    Build(#[from] seccompiler::BackendError),
    /// The kernel refused the filter (seccomp(2) failed).
    #[error("install the supervisor's filter: {0}")]
    Install(#[source] seccompiler::Error),
}

/// Syscalls that kill the supervisor outright.
const FATAL: &[&str] = &[
    "execve",
    "execveat",
    "ptrace",
    "mount",
    "umount2",
    "pivot_root",
    "setns",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "userfaultfd",
    "perf_event_open",
    "open_by_handle_at",
    "reboot",
];

/// Syscalls the supervisor uses.
const ALLOWED: &[&str] = &[
    // memory, threads, signals, time
    "brk",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "clone",
    "clone3",
    "exit",
    "exit_group",
    "futex",
    "set_robust_list",
    "rseq",
    "sched_yield",
    "sched_getaffinity",
    "gettid",
    "getpid",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sigaltstack",
    // interrupting a blocked handler whose caller went away (notify.rs)
    "tgkill",
    "clock_gettime",
    "clock_nanosleep",
    "nanosleep",
    "getrandom",
    "prlimit64",
    "prctl",
    "restart_syscall",
    // files and sockets
    "read",
    "pread64",
    "write",
    "writev",
    "openat",
    "openat2",
    "close",
    "close_range",
    "fcntl",
    "lseek",
    "fstat",
    "newfstatat",
    // whether a mount is read-only (EROFS before a trailing-slash check)
    "fstatfs",
    "statx",
    "readlink",
    "readlinkat",
    // the exec guard marks the container's mounts once they exist
    // (exec_guard.rs); its group is made before confinement
    "fanotify_mark",
    "getdents64",
    "unlink",
    // rotating the audit trail (audit.rs): std::fs::rename is rename(2)
    "rename",
    // What the handlers do for the caller comes from the syscall table
    // (abi::table::Family::host_calls): see allowed().
    "umask",
    "poll",
    "ppoll",
    "ioctl",
    "socket",
    "connect",
    "accept4",
    "sendto",
    "sendmsg",
    "recvfrom",
    "recvmsg",
    "getsockopt",
    "shutdown",
    // The relay that checks names on the wire (supervisor/relay): its
    // loopback listener, the accepted peer's address, SO_LINGER.
    "bind",
    "listen",
    "getsockname",
    "getpeername",
    "setsockopt",
    // pidfds, tracee memory, credentials of the caller
    "pidfd_open",
    "pidfd_getfd",
    "pidfd_send_signal",
    "process_vm_readv",
    "process_vm_writev",
    "setfsuid",
    "setfsgid",
    "setgroups",
    "getgroups",
    "capget",
    "capset",
    // Acting as the caller (creds.rs).
    "setresuid",
    "setresgid",
    "getresuid",
    "getresgid",
    // Rewriting a view in place (supervisor/views.rs).
    "pwrite64",
    "ftruncate",
];

/// The numbers of syscalls `names`, from the syscall table (a name it
/// does not know is left out; a unit test makes sure there is none).
fn numbers<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<libc::c_long> {
    let mut v: Vec<libc::c_long> = names
        .into_iter()
        .filter_map(crate::abi::table::number)
        .map(libc::c_long::from)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// [`ALLOWED`] plus the syscalls the emulation handlers make on the
/// caller's behalf, as the syscall table lists them per family
/// ([`crate::abi::table::Family::host_calls`]).
fn allowed() -> Vec<libc::c_long> {
    let handlers = crate::abi::table::entries().filter_map(|(_, e)| e.family());
    numbers(
        ALLOWED
            .iter()
            .copied()
            .chain(handlers.flat_map(|f| f.host_calls().iter().copied())),
    )
}

fn program(
    rules: &[libc::c_long],
    mismatch: SeccompAction,
    matched: SeccompAction,
) -> Result<BpfProgram, ConfineError> {
    let mut map: BTreeMap<i64, Vec<seccompiler::SeccompRule>> = rules.iter().map(|&nr| (nr, vec![])).collect();
    // unshare(CLONE_FS) alone, for the thread that binds a unix socket
    // with the caller's root and cwd (syscalls/net.rs); any other unshare
    // kills the process.
    let clone_fs = |op| -> Result<seccompiler::SeccompRule, ConfineError> {
        let c = seccompiler::SeccompCondition::new(0, seccompiler::SeccompCmpArgLen::Qword, op, libc::CLONE_FS as u64)?;
        Ok(seccompiler::SeccompRule::new(vec![c])?)
    };
    // setns(fd, CLONE_NEWUTS), for the threads that read a caller's
    // hostname and domain name in its UTS namespace for the emulated
    // uname (syscalls/uname.rs), and setns(fd, CLONE_NEWNET), for the
    // short-lived threads of the relay that make its sockets in the
    // network namespace of the caller's socket (relay/mod.rs): a thread
    // that joined one holds nothing but the sockets it makes there. Any
    // other setns kills the process.
    let ns_type = |op, ns: libc::c_int| -> Result<seccompiler::SeccompCondition, ConfineError> {
        Ok(seccompiler::SeccompCondition::new(
            1,
            seccompiler::SeccompCmpArgLen::Dword,
            op,
            ns as u64,
        )?)
    };
    let (unshare, setns) = (numbers(["unshare"])[0], numbers(["setns"])[0]);
    if matched == SeccompAction::KillProcess {
        use seccompiler::SeccompCmpOp::Ne;
        map.insert(unshare, vec![clone_fs(Ne)?]);
        let other = vec![ns_type(Ne, libc::CLONE_NEWUTS)?, ns_type(Ne, libc::CLONE_NEWNET)?];
        map.insert(setns, vec![seccompiler::SeccompRule::new(other)?]);
    } else {
        use seccompiler::SeccompCmpOp::Eq;
        map.insert(unshare, vec![clone_fs(Eq)?]);
        let one = |ns| -> Result<seccompiler::SeccompRule, ConfineError> {
            Ok(seccompiler::SeccompRule::new(vec![ns_type(Eq, ns)?])?)
        };
        map.insert(setns, vec![one(libc::CLONE_NEWUTS)?, one(libc::CLONE_NEWNET)?]);
    }
    let filter = SeccompFilter::new(map, mismatch, matched, TargetArch::x86_64)?;
    Ok(filter.try_into()?)
}

/// What the ptrace platform's tracer needs on top of [`ALLOWED`] (and
/// takes out of [`FATAL`]): only supervisors of ptrace-platform containers
/// may trace.
const PTRACE: &[&str] = &["ptrace", "wait4", "waitid", "signalfd4", "eventfd2"];

/// Installs both filters on the calling thread (and so on every thread it
/// starts afterwards); `ptrace`: the container runs on the ptrace platform.
pub fn confine(ptrace: bool) -> Result<(), ConfineError> {
    let extra = numbers(if ptrace { PTRACE } else { &[] }.iter().copied());
    let fatal: Vec<libc::c_long> = numbers(FATAL.iter().copied())
        .into_iter()
        .filter(|nr| !extra.contains(nr))
        .collect();
    let allowed: Vec<libc::c_long> = allowed().into_iter().chain(extra.iter().copied()).collect();
    let fatal = program(&fatal, SeccompAction::Allow, SeccompAction::KillProcess)?;
    let allowed = program(&allowed, SeccompAction::Errno(libc::EPERM as u32), SeccompAction::Allow)?;
    seccompiler::apply_filter(&fatal).map_err(ConfineError::Install)?;
    seccompiler::apply_filter(&allowed).map_err(ConfineError::Install)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_disjoint_and_build() {
        let allowed = allowed();
        let (fatal, ptrace) = (numbers(FATAL.iter().copied()), numbers(PTRACE.iter().copied()));
        assert!(fatal.iter().all(|nr| !allowed.contains(nr)));
        assert!(ptrace.iter().all(|nr| !allowed.contains(nr)));
        program(&fatal, SeccompAction::Allow, SeccompAction::KillProcess).unwrap();
        // Every name of the lists is the table's.
        for name in FATAL.iter().chain(ALLOWED).chain(PTRACE).chain(&["unshare", "setns"]) {
            assert!(
                crate::abi::table::number(name).is_some(),
                "{name} is not in the syscall table"
            );
        }
        program(&allowed, SeccompAction::Errno(1), SeccompAction::Allow).unwrap();
        // Each family's host calls are known to the table.
        for (_, e) in crate::abi::table::entries() {
            for name in e.family().iter().flat_map(|f| f.host_calls()) {
                assert!(crate::abi::table::number(name).is_some(), "{name}");
            }
        }
    }
}
