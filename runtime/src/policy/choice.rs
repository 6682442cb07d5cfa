//! What the enforcement levels ([`super::levels`]) and the Landlock
//! planner ([`super::landlock`]) both speak of: the levels, the level
//! chosen for one path rule, what the planner knows of the container
//! being created, and the two path tests both make.

/// How a rule is enforced by the mounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mount {
    /// Hidden: an empty read-only tmpfs over a directory, `/dev/null` over
    /// a file.
    Mask,
    /// A recursive read-only bind of the path over itself.
    ReadOnly,
}

/// What a path is in the container's view when it is created (outside its
/// kernel filesystems), found without following a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// A directory.
    Dir,
    /// A regular file.
    File,
}

/// The mechanism that enforces one path rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// The container's mounts (level 1): see [`Choice::mount`].
    Mounts,
    /// Landlock (level 2): a grant beneath the rule's directory, or (for
    /// the catch-all `/**`) the rights the ruleset handles.
    Landlock,
    /// Nothing to enforce: the rule never decides (an earlier rule matches
    /// every path it names first), or gives the access the later rules that
    /// cover it give anyway.
    Covered,
    /// The supervisor's emulation (level 3).
    Supervisor,
}

/// The level chosen for one path rule, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Index of the rule in the policy's `[[path]]` list.
    pub rule: usize,
    /// The mechanism that enforces it.
    pub level: Level,
    /// The rule's pattern.
    pub pattern: String,
    /// The mount that enforces it and the path it applies to (`Some` only
    /// at [`Level::Mounts`]).
    pub mount: Option<(Mount, String)>,
    /// Why this level.
    pub why: String,
    /// Whether the path must exist when the mount is made (a rule outside
    /// the kernel filesystems: a missing path would be one the container
    /// could create unprotected).
    pub required: bool,
}

/// The literal path a pattern names: itself, or `DIR` for `DIR/**`.
/// `None` for any other glob.
pub(super) fn literal_base(pattern: &str) -> Option<&str> {
    let base = pattern.strip_suffix("/**").unwrap_or(pattern);
    let base = if base.is_empty() { "/" } else { base };
    (!base.contains(['*', '?', '[', ']', '{', '}', '\\'])).then_some(base)
}

/// Whether `path` is `dir` or below it.
pub(super) fn below(path: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/')) || dir.is_empty()
}

/// What the planner knows about the container being created.
pub struct Site<'a> {
    /// Where the bundle mounts the kernel's own filesystems (`proc`,
    /// `sysfs`): paths below them only the kernel creates.
    pub kernel_fs: &'a [String],
    /// Every mount destination of the bundle: each is a directory when the
    /// container's process runs (the root of what is mounted there).
    pub mount_points: &'a [String],
    /// What a path is at create, reached without a symlink, in the rootfs
    /// or a bind-mounted volume (`None`: missing, or not known).
    pub existing: &'a dyn Fn(&str) -> Option<Existing>,
    /// The running kernel's Landlock ABI version (`None`: no Landlock).
    pub landlock_abi: Option<u32>,
}
