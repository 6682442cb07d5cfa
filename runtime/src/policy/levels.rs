//! Enforcement levels: each `[[path]]` rule is enforced by the cheapest
//! mechanism that enforces it exactly, chosen when a container is created.
//!
//! 1. **The container's mount namespace** (this module plans it, the
//!    runtime applies it before the container's process runs): a deny rule
//!    becomes a mask (an empty read-only tmpfs over a directory, the
//!    container's `/dev/null` bound over a file: what OCI `maskedPaths`
//!    does), a read-only rule a read-only bind (recursive: the mounts below
//!    it too). The mount calls, `umount2`, `pivot_root`, `chroot` and
//!    `setns` must be refused by the policy's own filter
//!    ([`Policy::pins_root`]) so nothing inside can undo them.
//! 2. **Landlock** (landlock(7); the kernel's
//!    Documentation/userspace-api/landlock.rst), for policies shaped as an
//!    allow-list: a final catch-all `/**` that denies or makes read-only,
//!    grants `D/**` on directories that exist at create, and restrictions
//!    inside them that the mounts enforce ([`super::landlock`] checks the
//!    shape). The runtime applies the ruleset in the container's process
//!    before its execve; what Landlock has no right for (metadata changes,
//!    readlink) stays with the supervisor, under the same path rules.
//! 3. **The supervisor** (emulation, as before) for every rule neither
//!    level can express exactly.
//!
//! A mount protects the object that exists when the container starts, not
//! a path created later, so only rules on the kernel's own files (below a
//! `proc` or `sysfs` mount of the bundle, where nothing inside can create
//! a file) go to the mounts. A rule qualifies when its pattern is a
//! literal path or `DIR/**` with a literal `DIR` (which covers `DIR`), and
//! the policy has no `allow` path rule (an exception inside a mask or a
//! read-only tree is not a mount; Landlock may make it). If every path
//! rule qualifies (at level 1 or 2), the
//! file syscalls the policy sends to the supervisor only for path rules
//! stay in the kernel ([`Policy::kernel_enforced`]); else every path rule
//! stays with the supervisor, as `org.cordon.enforcement = "supervisor"`
//! asks for.

use super::choice::{below, literal_base};
pub use super::choice::{Choice, Existing, Level, Mount, Site};
use super::{Action, PathAccess, Policy};
use crate::abi::table;

/// Where path rules are enforced (`org.cordon.enforcement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Enforcement {
    /// The cheapest exact level for each rule (the default).
    #[default]
    Kernel,
    /// Every path rule in the supervisor, every open recorded.
    Supervisor,
}

impl Enforcement {
    /// Parses `kernel` or `supervisor`; the error names `what` (the
    /// annotation) and the accepted values.
    pub fn parse(s: &str, what: &str) -> Result<Self, String> {
        match s {
            "kernel" => Ok(Self::Kernel),
            "supervisor" => Ok(Self::Supervisor),
            other => Err(format!(
                "{what}: {other:?} is not an enforcement level (kernel, supervisor)"
            )),
        }
    }

    /// `kernel` or `supervisor`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Kernel => "kernel",
            Self::Supervisor => "supervisor",
        }
    }
}

/// What the mounts take on for a policy, rule by rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// One entry per `[[path]]` rule, in order.
    pub choices: Vec<Choice>,
    /// Whether every rule went to the kernel (the mounts, or Landlock with
    /// them): then the file syscalls stay in the kernel.
    pub all_kernel: bool,
    /// The Landlock ruleset of level 2, when the plan uses it.
    pub landlock: Option<super::landlock::Landlock>,
    /// The rule that keeps the policy with the supervisor, if one does.
    pub blocker: Option<usize>,
}

impl Plan {
    /// One line for the audit trail and `cordon state`: `kernel (N path
    /// rules by the container's mounts)`, `kernel (N path rules by the
    /// container's mounts, M by Landlock ABI K)` (N and M count the rules
    /// each mechanism enforces; the others are covered), or `supervisor
    /// (why)` with the reason of the rule that keeps the policy there.
    pub fn describe(&self) -> String {
        if self.all_kernel {
            let count = |l: Level| self.choices.iter().filter(|c| c.level == l).count();
            return match &self.landlock {
                Some(l) => format!(
                    "kernel ({} path rules by the container's mounts, {} by Landlock ABI {})",
                    count(Level::Mounts),
                    count(Level::Landlock),
                    l.abi
                ),
                None => format!("kernel ({} path rules by the container's mounts)", self.choices.len()),
            };
        }
        let blocker = self.blocker.and_then(|b| self.choices.get(b));
        match blocker.or_else(|| self.choices.iter().find(|c| c.level == Level::Supervisor)) {
            Some(c) => format!("supervisor (path[{}] {}: {})", c.rule, c.pattern, c.why),
            None => "supervisor".into(),
        }
    }

    /// Whether a mount protects a path of the rootfs or a volume (a
    /// `required` one): renames then stay with the supervisor (see
    /// [`Policy::kernel_enforced`]).
    pub fn guards_renames(&self) -> bool {
        self.all_kernel && self.choices.iter().any(|c| c.level == Level::Mounts && c.required)
    }

    /// The mounts to make, masks first (a read-only bind made after them
    /// carries them along).
    pub fn mounts(&self) -> Vec<PlannedMount> {
        let mut m: Vec<PlannedMount> = self
            .choices
            .iter()
            .filter_map(|c| {
                c.mount.clone().map(|(kind, path)| PlannedMount {
                    kind,
                    path,
                    required: c.required,
                })
            })
            .collect();
        m.sort_by_key(|p| p.kind != Mount::Mask);
        m.dedup();
        m
    }
}

/// Whether the emulated file call `e` is one Landlock has no access right
/// for (ABI 1 to 7): the metadata changes (mode, owner, times, xattrs and
/// file flags, by path and by fd: the `Meta` family) and readlink (a
/// denied symlink's target is its content). At level 2 they stay with the
/// supervisor. Opens, creation, removal, renames, links and truncation are
/// Landlock's; stat and access are not checked by Landlock and stay in the
/// kernel (docs/POLICY.md lists the difference).
pub fn landlock_uncovered(e: &table::Entry) -> bool {
    e.family() == Some(table::Family::Meta) || e.handler == Some(table::Handler::Readlink)
}

/// One mount of the kernel level, for the runtime to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedMount {
    /// Mask or read-only bind.
    pub kind: Mount,
    /// The path inside the container.
    pub path: String,
    /// Whether the path must exist, reached without a symlink (see
    /// [`Choice::required`]); else a missing path needs no mount.
    pub required: bool,
}

/// Every rule with the supervisor, each with `why(rule)`.
fn supervisor_plan(rules: &[super::model::PathRule], why: impl Fn(usize) -> String, blocker: Option<usize>) -> Plan {
    let choices = rules
        .iter()
        .enumerate()
        .map(|(i, r)| Choice {
            rule: i,
            level: Level::Supervisor,
            pattern: r.pattern.clone(),
            mount: None,
            why: why(i),
            required: false,
        })
        .collect();
    Plan {
        choices,
        all_kernel: false,
        landlock: None,
        blocker,
    }
}

impl Policy {
    /// Path rules that can never decide, because an earlier rule with a
    /// different access matches every path they name first (rules are
    /// first-match; a file's own `/**` rule shadows its base's, for
    /// example). One line each, naming both rules. Only sure cases: the
    /// later rule is a literal path or `D/**`, the earlier one `/**`,
    /// `E/**` above it, or (for a literal) any pattern matching it.
    pub fn shadowed_paths(&self) -> Vec<String> {
        let rules = &self.source.paths;
        let name = super::landlock::name;
        let mut out = Vec::new();
        for (j, later) in rules.iter().enumerate() {
            let Some(base) = literal_base(&later.pattern) else {
                continue;
            };
            let subtree = later.pattern.ends_with("/**");
            let covers = |earlier: &str| -> bool {
                if let Some(e) = earlier.strip_suffix("/**") {
                    if literal_base(earlier).is_some() {
                        return below(base, if e.is_empty() { "/" } else { e });
                    }
                }
                !subtree
                    && globset::GlobBuilder::new(earlier)
                        .literal_separator(true)
                        .build()
                        .is_ok_and(|g| g.compile_matcher().is_match(base))
            };
            if let Some((i, earlier)) = rules[..j]
                .iter()
                .enumerate()
                .find(|(_, e)| e.access != later.access && covers(&e.pattern))
            {
                out.push(format!(
                    "path[{j}] {} {} never decides: path[{i}] {} {} comes first and matches every path it names",
                    later.pattern,
                    name(later.access),
                    earlier.pattern,
                    name(earlier.access)
                ));
            }
        }
        out
    }

    /// Chooses the level of each path rule for a container whose kernel
    /// filesystems (`proc` and `sysfs` mounts) are at `kernel_fs`, under
    /// `enforcement`, with nothing known to exist and no Landlock.
    pub fn plan(&self, enforcement: Enforcement, kernel_fs: &[String]) -> Plan {
        self.plan_with(enforcement, kernel_fs, &|_| None)
    }

    /// [`Self::plan`] knowing what exists in the container at create:
    /// `existing(path)` says what `path` is (reached without a symlink) in
    /// the rootfs or a bind-mounted volume. A rule `D/**` on an existing
    /// directory, or a literal rule (or `F/**`) on an existing regular
    /// file, goes to the mounts too: a mask or read-only bind protects the
    /// object there at create, and the rule's paths can only ever name
    /// that object (a mount point cannot be removed or renamed: EBUSY).
    /// No Landlock (see [`Self::plan_at`]).
    pub fn plan_with(
        &self,
        enforcement: Enforcement,
        kernel_fs: &[String],
        existing: &dyn Fn(&str) -> Option<Existing>,
    ) -> Plan {
        self.plan_at(
            enforcement,
            &Site {
                kernel_fs,
                mount_points: &[],
                existing,
                landlock_abi: None,
            },
        )
    }

    /// Chooses the level of each path rule for the container `site`
    /// describes: the mounts (level 1) when they take every rule, else
    /// Landlock with the mounts (level 2) when the rules are shaped as an
    /// allow-list ([`super::landlock`]) and the kernel's Landlock ABI is at
    /// least 3, else the supervisor for every path rule, naming the rule
    /// that keeps the policy there ([`Plan::blocker`]).
    pub fn plan_at(&self, enforcement: Enforcement, site: &Site<'_>) -> Plan {
        let rules = &self.source.paths;
        let global = if enforcement == Enforcement::Supervisor {
            Some("org.cordon.enforcement = \"supervisor\"".to_string())
        } else if !self.pins_root() {
            Some("the policy lets mounts, chroot or setns through, which could undo a mount".to_string())
        } else {
            rules
                .iter()
                .position(|r| r.access == PathAccess::Ask)
                .map(|i| format!("path[{i}] asks the decision program, which only the supervisor can"))
        };
        if let Some(why) = global {
            return supervisor_plan(rules, |_| why.clone(), None);
        }
        let mounts: Vec<Result<Choice, String>> = (0..rules.len()).map(|i| self.by_mount(i, site)).collect();
        if mounts.iter().all(Result::is_ok) {
            return Plan {
                choices: mounts.into_iter().map(|c| c.expect("checked")).collect(),
                all_kernel: true,
                landlock: None,
                blocker: None,
            };
        }
        match super::landlock::plan(self, site, &mounts) {
            Ok((choices, landlock)) => Plan {
                choices,
                all_kernel: true,
                landlock: Some(landlock),
                blocker: None,
            },
            Err((b, why)) => {
                let own = |i: usize| {
                    if i == b {
                        why.clone()
                    } else {
                        format!("path[{b}] needs the supervisor, and so every path rule does (one filter for all)")
                    }
                };
                supervisor_plan(rules, own, Some(b))
            }
        }
    }

    /// Rule `i` as a mount of level 1, or why a mount cannot enforce it.
    pub(super) fn by_mount(&self, i: usize, site: &Site<'_>) -> Result<Choice, String> {
        let r = &self.source.paths[i];
        if r.access == PathAccess::Allow {
            return Err("allows an exception, which a mount cannot make".into());
        }
        if r.access == PathAccess::Ask {
            return Err("asks the decision program, which only the supervisor can".into());
        }
        let Some(base) = literal_base(&r.pattern) else {
            return Err("a glob over paths: matched on every open".into());
        };
        let kind = match r.access {
            PathAccess::Deny => Mount::Mask,
            _ => Mount::ReadOnly,
        };
        let how = match kind {
            Mount::Mask => "reads empty, writes fail with EROFS",
            Mount::ReadOnly => "every change fails with EROFS",
        };
        let mount = |why: String, required: bool| Choice {
            rule: i,
            level: Level::Mounts,
            pattern: r.pattern.clone(),
            mount: Some((kind, base.to_string())),
            why,
            required,
        };
        if let Some(fs) = site.kernel_fs.iter().find(|d| below(base, d)) {
            return Ok(mount(
                format!("{how}; a kernel file below {fs}, which nothing inside can create"),
                false,
            ));
        }
        let subtree = r.pattern.ends_with("/**");
        match (site.existing)(base) {
            Some(Existing::Dir) if subtree => Ok(mount(
                format!("{how}; the directory exists at create, and the mount covers everything below it"),
                true,
            )),
            Some(Existing::File) => Ok(mount(format!("{how}; the file exists at create"), true)),
            Some(Existing::Dir) => Err(
                "a directory without /**: the rule protects the directory, not its files, which a mount cannot tell apart".into(),
            ),
            None => Err(
                "not a kernel file, and nothing there at create (or reached through a symlink, or on a mount other than a bind): a mount would not cover a file created there later".into(),
            ),
        }
    }

    /// The policy the BPF filter is compiled from in trace mode: every
    /// `deny` (a rule or a denying default action) goes to the supervisor
    /// instead, which takes the same decision from the policy itself and
    /// records it with its rule. The caller sees the same errno; the
    /// difference is a round trip and a record. `kill` stays in BPF: only
    /// the kernel kills the whole process with SIGSYS at the call (a
    /// signal from the supervisor could be caught, or miss a thread).
    /// Unknown syscall numbers keep their ENOSYS in BPF.
    pub fn traced(&self) -> Policy {
        let refuses = |a: Action| a == Action::Deny;
        let mut p = self.clone();
        for r in p.rules.values_mut().flatten() {
            if refuses(r.action) {
                r.action = Action::Audit;
            }
        }
        if refuses(p.default_action) {
            p.default_action = Action::Audit;
        }
        p
    }

    /// The policy with its file emulation left to the kernel: every
    /// `emulate` rule of a file syscall (the open family, metadata reads,
    /// tree and metadata changes, `bind`) becomes `allow`, since the path
    /// rules they served are enforced by the mounts ([`Policy::plan`] with
    /// `all_kernel`). `audit` rules stay: a policy that records every call
    /// still sees them. The network and identity emulation (the families
    /// that do not serve the path rules, [`table::Family::serves_path_rules`])
    /// stays.
    ///
    /// With `guard_renames` (the plan mounts over a path of the rootfs or a
    /// volume, [`Plan::guards_renames`]) the rename family stays with the
    /// supervisor: a mount point cannot be renamed, but a directory above
    /// it can, and on a volume that outlives the container the protected
    /// object would then sit at a path the rules no longer name for the
    /// next container. The supervisor refuses renaming a directory above
    /// anything a restrictive rule can match, as at the supervisor level.
    ///
    /// With `landlock` (level 2, [`Plan::landlock`]) the calls Landlock
    /// has no right for stay with the supervisor too
    /// ([`landlock_uncovered`]: metadata changes, readlink), which decides
    /// them with the same path rules as at level 3.
    pub fn kernel_enforced(&self, guard_renames: bool, landlock: bool) -> Policy {
        let kept = |e: &table::Entry| {
            e.family().is_some_and(|f| !f.serves_path_rules())
                || (guard_renames && e.handler == Some(table::Handler::Rename))
                || (landlock && landlock_uncovered(e))
        };
        let kept: Vec<&str> = table::entries().filter(|(_, e)| kept(e)).map(|(_, e)| e.name).collect();
        let file_nrs: Vec<u32> = table::emulated()
            .filter(|n| !kept.contains(n))
            .filter_map(table::number)
            .collect();
        let mut p = self.clone();
        for (nr, rules) in p.rules.iter_mut() {
            if file_nrs.contains(nr) {
                for r in rules.iter_mut().filter(|r| r.action == Action::Emulate) {
                    r.action = Action::Allow;
                }
            }
        }
        p
    }
}

#[cfg(test)]
#[path = "levels_tests.rs"]
mod tests;
