//! Applies a container's Landlock ruleset (level 2, [`crate::policy::landlock`])
//! in the process about to execve its payload: the container's init and
//! every `exec`. Runs after `no_new_privs` (or, when the config does not
//! ask for it, with CAP_SYS_ADMIN lent: landlock_restrict_self(2) needs
//! one of the two) and before cordon's seccomp filter, with the
//! container's mounts and root in place, so the paths are the container's.
//! The landlock syscalls stay allowed to the payload: a ruleset it stacks
//! can only take rights away.
//!
//! The ruleset is built with the `landlock` crate in
//! `CompatLevel::HardRequirement`: a right the kernel lacks is an error,
//! never a silent downgrade (the plan chose this level for the ABI found at
//! create; a different kernel by now fails the start).

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use landlock::{
    AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
};

use crate::policy::landlock::Landlock;
use crate::policy::PathAccess;

/// The rights a read-only access keeps: reading files, listing
/// directories, executing.
fn reading() -> BitFlags<AccessFs> {
    AccessFs::Execute | AccessFs::ReadFile | AccessFs::ReadDir
}

/// Every filesystem right of ABI `abi` that level 2 handles: ABI 3's
/// thirteen plus REFER and TRUNCATE, and IOCTL_DEV from ABI 5.
pub fn every_right(abi: u32) -> BitFlags<AccessFs> {
    let mut all = reading()
        | AccessFs::WriteFile
        | AccessFs::RemoveDir
        | AccessFs::RemoveFile
        | AccessFs::MakeChar
        | AccessFs::MakeDir
        | AccessFs::MakeReg
        | AccessFs::MakeSock
        | AccessFs::MakeFifo
        | AccessFs::MakeBlock
        | AccessFs::MakeSym
        | AccessFs::Refer
        | AccessFs::Truncate;
    if abi >= 5 {
        all |= AccessFs::IoctlDev;
    }
    all
}

/// The rights the ruleset handles (refuses outside its grants): every
/// right for a `deny` base, every right but reading for `read-only`.
pub fn handled(l: &Landlock) -> BitFlags<AccessFs> {
    match l.base {
        PathAccess::Deny => every_right(l.abi),
        _ => every_right(l.abi) & !reading(),
    }
}

/// The rights a grant of `access` gives beneath its directory, among those
/// `handled`.
pub fn granted(access: PathAccess, handled: BitFlags<AccessFs>) -> BitFlags<AccessFs> {
    match access {
        PathAccess::Allow => handled,
        _ => handled & reading(),
    }
}

/// Restricts the calling thread (and what it execs) to `l`. Each grant's
/// directory is opened `O_PATH` beneath `/` without following a symlink.
///
/// Errors (one line, for the process's stderr): a grant's directory cannot
/// be opened, the kernel refuses a right, or the ruleset is not fully
/// enforced.
pub fn apply(l: &Landlock) -> Result<(), String> {
    let handled = handled(l);
    let root = std::fs::File::open("/").map_err(|e| format!("open /: {e}"))?;
    let mut dirs: Vec<(OwnedFd, BitFlags<AccessFs>)> = Vec::new();
    for g in &l.grants {
        let rel = Path::new(g.dir.trim_start_matches('/'));
        let fd: OwnedFd = if rel.as_os_str().is_empty() {
            root.try_clone().map_err(|e| format!("open /: {e}"))?.into()
        } else {
            crate::sys::open_beneath_no_symlinks(root.as_fd(), rel)
                .map_err(|e| format!("open {} for path[{}]: {e}", g.dir, g.rule))?
        };
        dirs.push((fd, granted(g.access, handled)));
    }
    let err = |e: landlock::RulesetError| format!("Landlock ABI {}: {e}", l.abi);
    let mut created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .map_err(err)?
        .create()
        .map_err(err)?;
    for (fd, rights) in dirs {
        created = created.add_rule(PathBeneath::new(fd, rights)).map_err(err)?;
    }
    // no_new_privs is the config's choice, set (or not, with CAP_SYS_ADMIN
    // lent) by the executor before this: the crate would set it itself.
    if l.log && l.abi >= 7 {
        // The denials of the program about to be executed (and of what it
        // runs) are logged: the kernel's default logs only those made
        // before the next exec, cordon's own.
        created = landlock::RulesetCreatedAttr::log_new_exec(created, true).map_err(err)?;
    }
    let status = created.no_new_privs(false).restrict_self().map_err(err)?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(format!("Landlock ABI {}: ruleset {:?}", l.abi, status.ruleset));
    }
    Ok(())
}
