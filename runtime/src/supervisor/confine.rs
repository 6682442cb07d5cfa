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
const FATAL: &[libc::c_long] = &[
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_ptrace,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_setns,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_bpf,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_io_uring_setup,
    libc::SYS_userfaultfd,
    libc::SYS_perf_event_open,
    libc::SYS_open_by_handle_at,
    libc::SYS_reboot,
];

/// Syscalls the supervisor uses.
const ALLOWED: &[libc::c_long] = &[
    // memory, threads, signals, time
    libc::SYS_brk,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_mprotect,
    libc::SYS_madvise,
    libc::SYS_clone,
    libc::SYS_clone3,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_futex,
    libc::SYS_set_robust_list,
    libc::SYS_rseq,
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_gettid,
    libc::SYS_getpid,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_sigaltstack,
    // interrupting a blocked handler whose caller went away (notify.rs)
    libc::SYS_tgkill,
    libc::SYS_clock_gettime,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_getrandom,
    libc::SYS_prlimit64,
    libc::SYS_prctl,
    libc::SYS_restart_syscall,
    // files and sockets
    libc::SYS_read,
    libc::SYS_pread64,
    libc::SYS_write,
    libc::SYS_writev,
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_close,
    libc::SYS_close_range,
    libc::SYS_fcntl,
    libc::SYS_lseek,
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    // whether a mount is read-only (EROFS before a trailing-slash check)
    libc::SYS_fstatfs,
    libc::SYS_statx,
    libc::SYS_readlink,
    libc::SYS_readlinkat,
    libc::SYS_getdents64,
    libc::SYS_unlink,
    // rotating the audit trail (audit.rs): std::fs::rename is rename(2)
    libc::SYS_rename,
    // What the handlers do for the caller comes from the syscall table
    // (abi::table::Family::host_calls): see allowed().
    libc::SYS_umask,
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_ioctl,
    libc::SYS_socket,
    libc::SYS_connect,
    libc::SYS_accept4,
    libc::SYS_sendto,
    libc::SYS_sendmsg,
    libc::SYS_recvfrom,
    libc::SYS_recvmsg,
    libc::SYS_getsockopt,
    libc::SYS_shutdown,
    // The relay that checks names on the wire (supervisor/relay): its
    // loopback listener, the accepted peer's address, SO_LINGER.
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
    libc::SYS_setsockopt,
    // pidfds, tracee memory, credentials of the caller
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_getfd,
    libc::SYS_pidfd_send_signal,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_setfsuid,
    libc::SYS_setfsgid,
    libc::SYS_setgroups,
    libc::SYS_getgroups,
    libc::SYS_capget,
    libc::SYS_capset,
    // Acting as the caller (creds.rs).
    libc::SYS_setresuid,
    libc::SYS_setresgid,
    libc::SYS_getresuid,
    libc::SYS_getresgid,
    // Rewriting a view in place (supervisor/views.rs).
    libc::SYS_pwrite64,
    libc::SYS_ftruncate,
];

/// [`ALLOWED`] plus the syscalls the emulation handlers make on the
/// caller's behalf, as the syscall table lists them per family
/// ([`crate::abi::table::Family::host_calls`]).
fn allowed() -> Vec<libc::c_long> {
    use crate::abi::table;
    let mut v = ALLOWED.to_vec();
    let handlers = table::entries().filter_map(|(_, e)| e.family);
    for name in handlers.flat_map(|f| f.host_calls()) {
        if let Some(nr) = table::number(name).map(libc::c_long::from) {
            if !v.contains(&nr) {
                v.push(nr);
            }
        }
    }
    v
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
    if matched == SeccompAction::KillProcess {
        use seccompiler::SeccompCmpOp::Ne;
        map.insert(libc::SYS_unshare, vec![clone_fs(Ne)?]);
        let other = vec![ns_type(Ne, libc::CLONE_NEWUTS)?, ns_type(Ne, libc::CLONE_NEWNET)?];
        map.insert(libc::SYS_setns, vec![seccompiler::SeccompRule::new(other)?]);
    } else {
        use seccompiler::SeccompCmpOp::Eq;
        map.insert(libc::SYS_unshare, vec![clone_fs(Eq)?]);
        let one = |ns| -> Result<seccompiler::SeccompRule, ConfineError> {
            Ok(seccompiler::SeccompRule::new(vec![ns_type(Eq, ns)?])?)
        };
        map.insert(
            libc::SYS_setns,
            vec![one(libc::CLONE_NEWUTS)?, one(libc::CLONE_NEWNET)?],
        );
    }
    let filter = SeccompFilter::new(map, mismatch, matched, TargetArch::x86_64)?;
    Ok(filter.try_into()?)
}

/// What the ptrace platform's tracer needs on top of [`ALLOWED`] (and
/// takes out of [`FATAL`]): only supervisors of ptrace-platform containers
/// may trace.
const PTRACE: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_signalfd4,
    libc::SYS_eventfd2,
];

/// Installs both filters on the calling thread (and so on every thread it
/// starts afterwards); `ptrace`: the container runs on the ptrace platform.
pub fn confine(ptrace: bool) -> Result<(), ConfineError> {
    let extra: &[libc::c_long] = if ptrace { PTRACE } else { &[] };
    let fatal: Vec<libc::c_long> = FATAL.iter().copied().filter(|nr| !extra.contains(nr)).collect();
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
        assert!(FATAL.iter().all(|nr| !allowed.contains(nr)));
        assert!(PTRACE.iter().all(|nr| !allowed.contains(nr)));
        program(FATAL, SeccompAction::Allow, SeccompAction::KillProcess).unwrap();
        program(&allowed, SeccompAction::Errno(1), SeccompAction::Allow).unwrap();
        // Each family's host calls are known to the table.
        for (_, e) in crate::abi::table::entries() {
            for name in e.family.iter().flat_map(|f| f.host_calls()) {
                assert!(crate::abi::table::number(name).is_some(), "{name}");
            }
        }
    }
}
