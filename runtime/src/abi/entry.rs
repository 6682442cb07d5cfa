//! The shape of one entry of the syscall table ([`super::table`]): the
//! handler family that can emulate a syscall, its disposition, and the
//! hand-written [`Entry`] itself.

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
    /// `getpeername` and `getsockname`: the addresses of a connection the
    /// relay that checks names on the wire made, as a direct one shows.
    Sockname,
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
            // Answered from the relay's own record of the connection.
            Family::Sockname => &[],
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
    /// policies, which so pin every caller's root (the policy's
    /// `pins_root`).
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
