//! The workload executor libcontainer runs in the container process as its
//! last step: attach to the supervisor, then exec the payload.
//!
//! Why here and not through libcontainer's `linux.seccomp.listenerPath`:
//! libcontainer hands the listener over with `sendmsg` *after* the filter is
//! loaded, which deadlocks as soon as the policy intercepts `sendmsg`; here
//! the handover needs only `write`/`read` ([`crate::supervisor::handshake`]).
//! The bundle's own `linux.seccomp` goes in last, after the handshake and
//! cordon's filter ([`super::bundle_seccomp`]: libcontainer never sees it),
//! so no profile can break the handshake; the kernel applies the stricter
//! verdict of the two filters (seccomp(2): the highest-precedence action
//! wins). What runs before it in this process (libcontainer's set-up, the
//! startContainer hooks) runs without the bundle's profile, as under runc,
//! which also installs it right before execve.
//!
//! A Landlock ruleset (level 2 of the path rules) is applied right after
//! `no_new_privs` and before the handshake (the payload may stack one of
//! its own afterwards, which can only take rights away).
//!
//! `no_new_privs` is set as the config asks (`process.noNewPrivileges`,
//! OCI runtime spec, config.md): runc's default config and `docker
//! --security-opt no-new-privileges` ask for it, Docker's and podman's
//! defaults do not, and setuid programs (`sudo`, `su`, `ping`) need it
//! off. Without it, seccomp(2) and landlock_restrict_self(2) need
//! CAP_SYS_ADMIN: runc installs its filter before it drops capabilities;
//! libcontainer drops them before the executor runs, so cordon lends
//! CAP_SYS_ADMIN to the set-up instead ([`lend_sys_admin`]: effective and
//! permitted only, never the bounding set, so nothing exec'd before it is
//! dropped can gain it) and drops it right after the filters are in,
//! before execve.

use std::mem::ManuallyDrop;
use std::os::fd::RawFd;
use std::os::unix::net::UnixStream;

use libcontainer::oci_spec::runtime::Spec;
use libcontainer::workload::default::DefaultExecutor;
use libcontainer::workload::{Executor, ExecutorError, ExecutorSetEnvsError, ExecutorValidationError};

use crate::supervisor::handshake::{self, Role};

/// Executor that installs cordon's filter before exec.
#[derive(Clone)]
pub struct CordonExecutor {
    /// The compiled BPF program; empty means "no filter" (permissive policy).
    pub prog: Vec<libc::sock_filter>,
    /// Inherited connection to the supervisor (an fd number valid in the
    /// container process, which is a fork of the runtime).
    pub supervisor: Option<RawFd>,
    /// Init or exec.
    pub role: Role,
    /// How the supervisor receives calls (what `prog` was compiled for).
    pub platform: crate::config::Platform,
    /// The bundle's own seccomp profile, installed after cordon's filter.
    pub bundle_filter: Option<std::sync::Arc<super::bundle_seccomp::BundleFilter>>,
    /// The container's Landlock ruleset (level 2), applied before cordon's
    /// filter ([`super::landlock`]).
    pub landlock: Option<crate::policy::landlock::Landlock>,
    /// Set no_new_privs (the config's `process.noNewPrivileges`).
    pub no_new_privs: bool,
    /// CAP_SYS_ADMIN was lent for installing the filters
    /// ([`lend_sys_admin`]): dropped once they are in.
    pub lent_sys_admin: bool,
}

/// Whether `spec` asks for no_new_privs (`process.noNewPrivileges`; absent
/// is false, OCI runtime spec config.md).
pub fn asks_no_new_privs(spec: &Spec) -> bool {
    spec.process().as_ref().and_then(|p| p.no_new_privileges()) == Some(true)
}

/// `noNewPrivileges` of the process.json at `file` (`exec --process`),
/// false when the file does not say (as runc reads it); `None` when it
/// cannot be read.
pub fn process_file_no_new_privs(file: &std::path::Path) -> Option<bool> {
    let text = std::fs::read_to_string(file).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("noNewPrivileges").and_then(|b| b.as_bool()).or(Some(false))
}

/// The spec libcontainer builds from: without no_new_privs, CAP_SYS_ADMIN
/// is added to the process's effective and permitted sets when they lack
/// it, so the executor can install the filters (seccomp(2): "the caller
/// must have the CAP_SYS_ADMIN capability in its user namespace, or the
/// thread must already have the no_new_privs bit set"). Never to the
/// bounding set: a program exec'd before the executor drops it again (a
/// startContainer hook) gets its permitted set from the bounding set, not
/// from this. Returns the spec and whether it was lent.
pub fn lend_sys_admin(mut spec: Spec) -> (Spec, bool) {
    if asks_no_new_privs(&spec) {
        return (spec, false);
    }
    let Some(mut process) = spec.process().clone() else {
        return (spec, false);
    };
    let lent = lend_sys_admin_to(&mut process);
    spec.set_process(Some(process));
    (spec, lent)
}

/// Adds CAP_SYS_ADMIN to `process`'s effective and permitted sets (never
/// bounding) when they lack it; whether it did (see [`lend_sys_admin`]).
/// For a process file of `exec --process` too (`docker exec`, `podman
/// exec`: the engine writes the capabilities there).
pub fn lend_sys_admin_to(process: &mut oci_spec::runtime::Process) -> bool {
    use oci_spec::runtime::Capability;
    let mut caps = process.capabilities().clone().unwrap_or_default();
    let has =
        |set: &Option<oci_spec::runtime::Capabilities>| set.as_ref().is_some_and(|s| s.contains(&Capability::SysAdmin));
    if has(caps.effective()) && has(caps.permitted()) {
        return false;
    }
    let with = |set: &Option<oci_spec::runtime::Capabilities>| {
        let mut s = set.clone().unwrap_or_default();
        s.insert(Capability::SysAdmin);
        Some(s)
    };
    let (effective, permitted) = (with(caps.effective()), with(caps.permitted()));
    caps.set_effective(effective);
    caps.set_permitted(permitted);
    process.set_capabilities(Some(caps));
    true
}

/// Makes every stdio fd (0-2) that is `/dev/null` the container's
/// `/dev/null` opened read-write, as runc's init does (`reOpenDevNull` in
/// libcontainer/rootfs_linux.go opens it `O_RDWR`). libcontainer 0.7.0's
/// `reopen_dev_null` opens it read-only, so a container started with
/// `>/dev/null` got EBADF on every write to stdout. Runs in the init only
/// (runc's `exec` passes the caller's fds through untouched); an fd that is
/// not the null device is left as it is. Errors: opening or `fstat` of the
/// container's `/dev/null`, `dup2(2)`.
fn reopen_dev_null_rdwr() -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileTypeExt;
    use std::os::unix::fs::MetadataExt;
    let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?;
    let null_meta = null.metadata()?;
    if !null_meta.file_type().is_char_device() {
        return Ok(());
    }
    for fd in 0..3 {
        let Ok(st) = nix::sys::stat::fstat(fd) else { continue };
        if st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == null_meta.rdev() {
            nix::unistd::dup2(null.as_raw_fd(), fd).map_err(std::io::Error::from)?;
        }
    }
    Ok(())
}

impl Executor for CordonExecutor {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        let timing = crate::sys::timings::step("process: filters and handshake");
        if self.role == Role::Init {
            reopen_dev_null_rdwr().map_err(|e| ExecutorError::Other(format!("cordon: reopen /dev/null: {e}")))?;
        }
        // The payload starts with a clean signal state, as under runc: no
        // blocked signals, SIGPIPE at its default (the Rust runtime ignores it).
        let _ = nix::sys::signal::SigSet::empty().thread_set_mask();
        let _ = crate::sys::process::default_disposition(nix::sys::signal::Signal::SIGPIPE);
        if self.no_new_privs {
            crate::sys::set_no_new_privs()
                .map_err(|e| ExecutorError::Other(format!("cordon: set no_new_privs: {e}")))?;
        }
        if let Some(l) = &self.landlock {
            // Fail closed: a process that cannot get its ruleset does not run.
            super::landlock::apply(l).map_err(|e| {
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "cordon: landlock: {e}");
                ExecutorError::Other(format!("cordon: landlock: {e}"))
            })?;
        }
        match self.supervisor {
            Some(fd) => {
                // `fd` is the connection `cordon create`/`exec` opened and
                // this process inherited; nothing else in this process uses
                // it, and it is closed right below.
                let sock = crate::sys::process::own_fd(fd)
                    .map_err(|e| ExecutorError::Other(format!("cordon: cannot attach to the supervisor: {e}")))?;
                let mut sock = ManuallyDrop::new(UnixStream::from(sock));
                let r = handshake::attach(&mut sock, self.role, &self.prog, self.platform);
                drop(ManuallyDrop::into_inner(sock));
                r.map_err(|e| ExecutorError::Other(format!("cordon: cannot attach to the supervisor: {e}")))?;
            }
            None if !self.prog.is_empty() => {
                crate::sys::seccomp_set_filter(&self.prog, 0)
                    .map_err(|e| ExecutorError::Other(format!("cordon: install seccomp filter: {e}")))?;
            }
            None => {}
        }
        if let Some(f) = &self.bundle_filter {
            crate::sys::seccomp_set_filter(&f.prog, f.flags)
                .map_err(|e| ExecutorError::Other(format!("cordon: install the bundle's seccomp profile: {e}")))?;
        }
        if self.lent_sys_admin {
            // Fail closed: a process that keeps a lent capability does not run.
            for set in [caps::CapSet::Effective, caps::CapSet::Permitted] {
                caps::drop(None, set, caps::Capability::CAP_SYS_ADMIN)
                    .map_err(|e| ExecutorError::Other(format!("cordon: drop the lent CAP_SYS_ADMIN: {e}")))?;
            }
        }
        timing.end();
        let r = DefaultExecutor {}.exec(spec);
        if let (Err(e), Some(prog)) = (&r, spec.process().as_ref().and_then(|p| p.args().as_ref()?.first())) {
            // Nothing else reports it: the process's own stderr is where
            // runc's init says why its execve failed too.
            let why = match e {
                ExecutorError::Execution(e) => e.to_string(),
                e => e.to_string(),
            };
            let why = why
                .split_once("error '")
                .and_then(|(_, rest)| rest.split_once('\''))
                .map(|(errno, _)| errno.to_string())
                .unwrap_or(why);
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "cordon: exec {prog}: {why}");
        }
        r
    }

    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        DefaultExecutor {}.validate(spec)
    }

    fn setup_envs(&self, envs: std::collections::HashMap<String, String>) -> Result<(), ExecutorSetEnvsError> {
        DefaultExecutor {}.setup_envs(envs)
    }
}
