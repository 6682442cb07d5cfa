//! The shape of one entry of the syscall table ([`super::table`]): the
//! handler that can emulate a syscall and where its arguments are, its
//! disposition, and the hand-written [`Entry`] itself.

/// The handler family of a [`Handler`]: a group of handlers with one
/// purpose, listed so in docs/POLICY.md, whose host calls the supervisor's
/// own confinement allows.
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
    /// Metadata reads and tree changes by path (`supervisor/syscalls/fs/`).
    Fs,
    /// Metadata changes (mode, owner, times, xattrs) by path and by fd, and
    /// the file-flag ioctls (`supervisor/syscalls/meta.rs`).
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
                "truncate",
            ],
            Family::Meta => &[
                "fchmod",
                "fchown",
                "fchownat",
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

/// The handler an entry binds: the one function of `supervisor/syscalls/`
/// that emulates the syscall, whatever form of it was called (chmod,
/// fchmodat, fchmodat2 and fchmod are all [`Handler::Chmod`]); the
/// entry's [`Arg`]s say where the form keeps each argument. The
/// supervisor's dispatch maps each variant to its function, by number,
/// never by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Handler {
    /// uname(2).
    Uname,
    /// sysinfo(2).
    Sysinfo,
    /// open(2), openat(2), openat2(2) (an [`Arg::How`]), creat(2).
    Open,
    /// connect(2).
    Connect,
    /// bind(2).
    Bind,
    /// sendto(2).
    Sendto,
    /// sendmsg(2).
    Sendmsg,
    /// sendmmsg(2).
    Sendmmsg,
    /// getsockname(2).
    Getsockname,
    /// getpeername(2).
    Getpeername,
    /// stat(2), lstat(2), newfstatat(2).
    Stat,
    /// statx(2).
    Statx,
    /// access(2), faccessat(2), faccessat2(2).
    Access,
    /// readlink(2), readlinkat(2).
    Readlink,
    /// mkdir(2), mkdirat(2).
    Mkdir,
    /// mknod(2), mknodat(2).
    Mknod,
    /// unlink(2), rmdir(2) (implies `AT_REMOVEDIR`), unlinkat(2).
    Unlink,
    /// rename(2), renameat(2), renameat2(2).
    Rename,
    /// link(2), linkat(2).
    Link,
    /// symlink(2), symlinkat(2).
    Symlink,
    /// truncate(2).
    Truncate,
    /// chmod(2), fchmodat(2), fchmodat2(2), and fchmod(2) (an [`Arg::Fd`]).
    Chmod,
    /// chown(2), lchown(2), fchownat(2), and fchown(2) (an [`Arg::Fd`]).
    Chown,
    /// utimensat(2), utimes(2), futimesat(2), utime(2): the kind of the
    /// times argument ([`Arg::Timespecs`], [`Arg::Timevals`],
    /// [`Arg::Utimbuf`]) says which.
    Utimes,
    /// setxattr(2), lsetxattr(2), fsetxattr(2).
    SetXattr,
    /// removexattr(2), lremovexattr(2), fremovexattr(2).
    RemoveXattr,
    /// ioctl(2): the file-flag commands.
    Ioctl,
}

impl Handler {
    /// The family this handler belongs to.
    pub fn family(self) -> Family {
        match self {
            Handler::Uname => Family::Uname,
            Handler::Sysinfo => Family::Sysinfo,
            Handler::Open => Family::Open,
            Handler::Connect => Family::Connect,
            Handler::Bind => Family::Bind,
            Handler::Sendto => Family::Sendto,
            Handler::Sendmsg => Family::Sendmsg,
            Handler::Sendmmsg => Family::Sendmmsg,
            Handler::Getsockname | Handler::Getpeername => Family::Sockname,
            Handler::Stat
            | Handler::Statx
            | Handler::Access
            | Handler::Readlink
            | Handler::Mkdir
            | Handler::Mknod
            | Handler::Unlink
            | Handler::Rename
            | Handler::Link
            | Handler::Symlink
            | Handler::Truncate => Family::Fs,
            Handler::Chmod
            | Handler::Chown
            | Handler::Utimes
            | Handler::SetXattr
            | Handler::RemoveXattr
            | Handler::Ioctl => Family::Meta,
        }
    }
}

/// What one argument register of a syscall holds, as its man page's
/// synopsis names it. An entry lists its arguments in register order
/// ([`Entry::args`]); handlers read them by kind, so one handler serves
/// every form of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// The directory fd the path is relative to (`AT_FDCWD` for a form
    /// without one).
    Dirfd,
    /// The path (for two-path calls, the first; for symlink, the new name).
    Path,
    /// The second path's directory fd (renameat, linkat).
    Dirfd2,
    /// The second path (the new name of rename and link).
    Path2,
    /// An fd the call acts on itself (fchmod, fsetxattr, ioctl).
    Fd,
    /// The `AT_*`, `RENAME_*` or open flags (0, or the entry's
    /// [`Entry::implied`] flags, for a form without them).
    Flags,
    /// A mode: permission bits, a file type, or access(2)'s mode.
    Mode,
    /// A device number (mknod).
    Dev,
    /// A user id (`-1`: unchanged).
    Uid,
    /// A group id (`-1`: unchanged).
    Gid,
    /// A file length in bytes (truncate).
    Len,
    /// An output buffer (`struct stat`, `struct statx`, a link's target).
    Buf,
    /// A size in bytes: of the output buffer, an xattr value, `open_how`.
    Size,
    /// A symlink's target, stored as given.
    Target,
    /// statx's mask.
    Mask,
    /// An xattr name.
    Xname,
    /// An xattr value.
    Value,
    /// The `XATTR_CREATE` / `XATTR_REPLACE` flags.
    Xflags,
    /// utimensat's `struct timespec[2]`.
    Timespecs,
    /// utimes' and futimesat's `struct timeval[2]`.
    Timevals,
    /// utime's `struct utimbuf`.
    Utimbuf,
    /// openat2's `struct open_how`.
    How,
    /// An ioctl command.
    Request,
    /// An ioctl's argument.
    Argp,
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
    /// first path of calls that take two; [`Arg::Path`] of the args).
    pub path: Option<u8>,
    /// What each argument register holds, in order; empty for an entry
    /// whose handler reads fixed registers (or that has none).
    pub args: &'static [Arg],
    /// The flags a form without an [`Arg::Flags`] implies (lstat's
    /// `AT_SYMLINK_NOFOLLOW`, rmdir's `AT_REMOVEDIR`, creat's
    /// `O_CREAT|O_WRONLY|O_TRUNC`).
    pub implied: i32,
    /// The handler that can emulate it; `None`: `emulate` is refused for
    /// it.
    pub handler: Option<Handler>,
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
            args: &[],
            implied: 0,
            handler: None,
            disposition,
            note,
        }
    }
    /// This entry, argument `i` being a path.
    pub const fn path(mut self, i: u8) -> Self {
        self.path = Some(i);
        self
    }
    /// This entry, emulated by `handler`.
    pub const fn by(mut self, handler: Handler) -> Self {
        self.handler = Some(handler);
        self
    }
    /// This entry, its argument registers holding `args` in order; the
    /// register of [`Arg::Path`] is its path.
    pub const fn args(mut self, args: &'static [Arg]) -> Self {
        self.args = args;
        let mut i = 0;
        while i < args.len() {
            if matches!(args[i], Arg::Path) {
                self.path = Some(i as u8);
            }
            i += 1;
        }
        self
    }
    /// This entry, implying `flags` where it has no [`Arg::Flags`].
    pub const fn implies(mut self, flags: i32) -> Self {
        self.implied = flags;
        self
    }
    /// The family of its handler.
    pub fn family(&self) -> Option<Family> {
        self.handler.map(Handler::family)
    }
    /// The register (0 to 5) that holds `arg`, if this form has one.
    pub fn arg(&self, arg: Arg) -> Option<usize> {
        self.args.iter().position(|&a| a == arg)
    }
}
