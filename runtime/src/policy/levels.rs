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

/// The calls that rename a directory entry.
const RENAMES: [&str; 3] = ["rename", "renameat", "renameat2"];

/// The emulated file calls Landlock has no access right for (ABI 1 to 7):
/// changes of mode, owner, times, xattrs and file flags (by path and by
/// fd), and readlink (a denied symlink's target is its content). At level
/// 2 they stay with the supervisor. Opens, creation, removal, renames,
/// links and truncation are Landlock's; stat and access are not checked
/// by Landlock and stay in the kernel (docs/POLICY.md lists the
/// difference).
pub const LANDLOCK_UNCOVERED: [&str; 21] = [
    "chmod",
    "fchmodat",
    "fchmodat2",
    "fchmod",
    "chown",
    "lchown",
    "fchownat",
    "fchown",
    "utimensat",
    "utime",
    "utimes",
    "futimesat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "ioctl",
    "readlink",
    "readlinkat",
];

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
            None
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
    /// ([`LANDLOCK_UNCOVERED`]: metadata changes, readlink), which decides
    /// them with the same path rules as at level 3.
    pub fn kernel_enforced(&self, guard_renames: bool, landlock: bool) -> Policy {
        let mut kept: Vec<&str> = table::entries()
            .filter(|(_, e)| e.family.is_some_and(|f| !f.serves_path_rules()))
            .map(|(_, e)| e.name)
            .collect();
        if guard_renames {
            kept.extend(RENAMES);
        }
        if landlock {
            kept.extend(LANDLOCK_UNCOVERED);
        }
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
mod tests {
    use super::*;

    /// What level 2 keeps with the supervisor is emulated by the file
    /// handlers (the syscall table's `Fs` and `Meta` families), and every
    /// `Meta` call is in it: Landlock has no right for metadata changes.
    #[test]
    fn landlock_uncovered_calls_are_file_handlers() {
        use table::Family;
        for name in LANDLOCK_UNCOVERED {
            let family = table::entry_named(name).and_then(|e| e.family);
            assert!(matches!(family, Some(Family::Fs | Family::Meta)), "{name}: {family:?}");
        }
        for (_, e) in table::entries().filter(|(_, e)| e.family == Some(Family::Meta)) {
            assert!(LANDLOCK_UNCOVERED.contains(&e.name), "{} is a metadata change", e.name);
        }
    }

    fn kernel_fs() -> Vec<String> {
        vec!["/proc".into(), "/sys".into()]
    }

    #[test]
    fn trace_mode_sends_denials_and_leaves_kills_to_the_kernel() {
        let p = Policy::from_toml(
            "name = \"t\"\n[[syscall]]\nnames = [\"getpgid\"]\naction = \"kill\"\n\
             [[syscall]]\nnames = [\"acct\"]\naction = \"deny\"\n",
            "t",
        )
        .unwrap();
        let t = p.traced();
        let nr = |n| table::number(n).unwrap();
        assert_eq!(t.decide(nr("getpgid"), &[0; 6]).0, Action::Kill);
        assert_eq!(t.decide(nr("acct"), &[0; 6]).0, Action::Audit);
        assert_eq!(
            p.decide(nr("acct"), &[0; 6]),
            (Action::Deny, libc::EPERM),
            "the supervisor's own copy decides"
        );
    }

    #[test]
    fn shadowed_rules_are_named() {
        let p = Policy::from_toml(
            "name = \"s\"\n\
             [[path]]\npattern = \"/data/**\"\naccess = \"read-only\"\n\
             [[path]]\npattern = \"/data/secret/**\"\naccess = \"deny\"\n\
             [[path]]\npattern = \"/data/ro/**\"\naccess = \"read-only\"\n\
             [[path]]\npattern = \"/**\"\naccess = \"read-only\"\n",
            "s",
        )
        .unwrap();
        let w = p.shadowed_paths();
        assert!(
            w[0].starts_with("path[1] /data/secret/** deny never decides: path[0] /data/** read-only"),
            "{w:?}"
        );
        assert!(
            !w.iter().any(|l| l.starts_with("path[2]")),
            "same access: redundant, not shadowed"
        );
        // The default's kernel-file masks go before the user's /** (the
        // floor): nothing of theirs is shadowed.
        assert!(!w.iter().any(|l| l.contains("/proc/kcore")), "{w:?}");
        assert!(Policy::load("default").unwrap().shadowed_paths().is_empty());
    }

    #[test]
    fn existing_directories_and_files_go_to_the_mounts() {
        let p = Policy::from_toml(
            "name = \"u\"\n\
             [[path]]\npattern = \"/data/secret/**\"\naccess = \"deny\"\n\
             [[path]]\npattern = \"/data/ro/**\"\naccess = \"read-only\"\n\
             [[path]]\npattern = \"/etc/shadow\"\naccess = \"deny\"\n",
            "u",
        )
        .unwrap();
        let all = |path: &str| match path {
            "/data/secret" | "/data/ro" => Some(Existing::Dir),
            "/etc/shadow" => Some(Existing::File),
            _ => None,
        };
        let plan = p.plan_with(Enforcement::Kernel, &kernel_fs(), &all);
        assert!(plan.all_kernel, "{plan:#?}");
        let mounts = plan.mounts();
        // The file's rules must find their paths; the default's kernel
        // files need not exist.
        assert!(
            mounts
                .iter()
                .all(|m| m.required != (m.path.starts_with("/proc") || m.path.starts_with("/sys"))),
            "{mounts:?}"
        );
        assert!(mounts.contains(&PlannedMount {
            kind: Mount::ReadOnly,
            path: "/data/ro".into(),
            required: true
        }));
        // A rule on a path missing at create, or a literal directory rule,
        // stays with the supervisor, and so do all the others.
        let missing = |path: &str| if path == "/data/ro" { None } else { all(path) };
        let plan = p.plan_with(Enforcement::Kernel, &kernel_fs(), &missing);
        assert!(!plan.all_kernel);
        assert!(plan.choices[1].why.contains("nothing there at create"), "{plan:#?}");
        let dir = Policy::from_toml(
            "name = \"d\"\n[[path]]\npattern = \"/data/secret\"\naccess = \"deny\"\n",
            "d",
        )
        .unwrap();
        let plan = dir.plan_with(Enforcement::Kernel, &kernel_fs(), &all);
        assert!(
            !plan.all_kernel && plan.choices[0].why.contains("without /**"),
            "{plan:#?}"
        );
    }

    #[test]
    fn the_default_policy_goes_to_the_mounts() {
        let p = Policy::load("default").unwrap();
        let plan = p.plan(Enforcement::Kernel, &kernel_fs());
        assert!(plan.all_kernel, "{plan:#?}");
        let mounts: Vec<(Mount, String)> = plan
            .mounts()
            .into_iter()
            .inspect(|m| assert!(!m.required, "kernel files need not exist"))
            .map(|m| (m.kind, m.path))
            .collect();
        assert!(mounts.contains(&(Mount::Mask, "/proc/kallsyms".into())));
        assert!(mounts.contains(&(Mount::Mask, "/sys/firmware".into())));
        assert!(mounts.contains(&(Mount::ReadOnly, "/proc/sys".into())));
        assert!(mounts.contains(&(Mount::ReadOnly, "/sys".into())));
        assert_eq!(mounts.iter().filter(|m| m.1 == "/sys").count(), 1, "deduplicated");
        assert!(mounts.iter().position(|m| m.0 == Mount::ReadOnly) > mounts.iter().rposition(|m| m.0 == Mount::Mask));
        // Its file syscalls then stay in the kernel; the network does not.
        let k = p.kernel_enforced(false, false);
        let nr = |n| table::number(n).unwrap();
        assert_eq!(k.decide(nr("openat"), &[0; 6]).0, Action::Allow);
        assert_eq!(k.decide(nr("fchmod"), &[0; 6]).0, Action::Allow);
        assert_eq!(k.decide(nr("connect"), &[0; 6]).0, Action::Emulate);
        assert_eq!(k.decide(nr("uname"), &[0; 6]).0, Action::Emulate);
        assert_eq!(k.decide(nr("bpf"), &[0; 6]).0, Action::Deny);
    }

    #[test]
    fn rules_the_mounts_cannot_express_go_to_the_supervisor() {
        let src = |rules: &str| format!("name = \"t\"\nextends = \"default\"\n{rules}");
        let other = Policy::from_toml(&src("[[path]]\npattern = \"/data/**\"\naccess = \"deny\"\n"), "t").unwrap();
        let plan = other.plan(Enforcement::Kernel, &kernel_fs());
        assert!(!plan.all_kernel);
        assert!(plan.choices[0].why.contains("not a kernel file"), "{plan:#?}");
        let glob = Policy::from_toml(&src("[[path]]\npattern = \"/proc/*/mem\"\naccess = \"deny\"\n"), "t").unwrap();
        assert!(glob.plan(Enforcement::Kernel, &kernel_fs()).choices[0]
            .why
            .contains("glob"));
        // Loosening the default's protections is refused (the floor).
        let allow = Policy::from_toml(&src("[[path]]\npattern = \"/proc/sys/x\"\naccess = \"allow\"\n"), "t")
            .unwrap_err()
            .to_string();
        assert!(
            allow.contains("path[0].access") && allow.contains("/proc/sys/** read-only applies first"),
            "{allow}"
        );
        let chroot = Policy::from_toml(&src("[[syscall]]\nnames = [\"chroot\"]\naction = \"allow\"\n"), "t").unwrap();
        assert!(!chroot.plan(Enforcement::Kernel, &kernel_fs()).all_kernel);
        let p = Policy::load("default").unwrap();
        assert!(!p.plan(Enforcement::Supervisor, &kernel_fs()).all_kernel);
        assert!(
            !p.plan(Enforcement::Kernel, &[]).all_kernel,
            "no /proc mount: no kernel files"
        );
    }

    /// A site with `existing`, /dev, /tmp and /proc as mount points, and
    /// Landlock ABI `abi`.
    fn site<'a>(kfs: &'a [String], existing: &'a dyn Fn(&str) -> Option<Existing>, abi: Option<u32>) -> Site<'a> {
        Site {
            kernel_fs: kfs,
            mount_points: MOUNT_POINTS.get_or_init(|| vec!["/dev".into(), "/tmp".into(), "/proc".into()]),
            existing,
            landlock_abi: abi,
        }
    }

    static MOUNT_POINTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

    fn user(rules: &[(&str, &str)]) -> Policy {
        let mut src = String::from("name = \"u\"\n");
        for (pattern, access) in rules {
            src.push_str(&format!("[[path]]\npattern = \"{pattern}\"\naccess = \"{access}\"\n"));
        }
        Policy::from_toml(&src, "u").unwrap()
    }

    fn dirs(path: &str) -> Option<Existing> {
        match path {
            "/data" | "/data/rw" | "/data/rw/keys" | "/data/ro" | "/bin" => Some(Existing::Dir),
            "/data/f" => Some(Existing::File),
            _ => None,
        }
    }

    /// Grants, a redundant rule, a restriction by a mount inside a grant,
    /// the catch-all, and the default's rules after it (which never
    /// decide): Landlock with the mounts, file calls in the kernel but the
    /// metadata changes and readlink.
    #[test]
    fn allow_lists_go_to_landlock_with_the_mounts() {
        let p = user(&[
            ("/data/rw/keys/**", "deny"),
            ("/data/rw/**", "allow"),
            ("/data/ro/**", "read-only"),
            ("/dev/**", "allow"),
            ("/proc/**", "allow"),
            ("/**", "read-only"),
        ]);
        let kfs = kernel_fs();
        let plan = p.plan_at(Enforcement::Kernel, &site(&kfs, &dirs, Some(7)));
        assert!(plan.all_kernel, "{plan:#?}");
        let levels: Vec<Level> = plan.choices.iter().map(|c| c.level).collect();
        use Level::*;
        // The default's protections (the floor) go right before /proc/**,
        // the first rule that would decide their paths more loosely.
        let floor = Policy::load("default").unwrap().source.paths.len();
        let (proc_at, all_at) = (4 + floor, 5 + floor);
        assert_eq!(&levels[..4], &[Mounts, Landlock, Covered, Landlock]);
        assert!(
            levels[4..proc_at].iter().all(|l| matches!(l, Mounts | Covered)),
            "the floor: {plan:#?}"
        );
        assert_eq!(&levels[proc_at..=all_at], &[Landlock, Landlock]);
        assert_eq!(all_at + 1, levels.len(), "nothing after the catch-all: {plan:#?}");
        assert!(plan.choices[2].why.contains("nothing to enforce"), "{plan:#?}");
        assert!(plan.choices[3].why.contains("a mount point"), "{plan:#?}");
        assert!(
            plan.choices[proc_at].why.contains("kernel directory below /proc"),
            "{plan:#?}"
        );
        let l = plan.landlock.clone().unwrap();
        assert_eq!((l.abi, l.base), (7, PathAccess::ReadOnly));
        let grants: Vec<(usize, &str, PathAccess)> =
            l.grants.iter().map(|g| (g.rule, g.dir.as_str(), g.access)).collect();
        assert_eq!(
            grants,
            [
                (1, "/data/rw", PathAccess::Allow),
                (3, "/dev", PathAccess::Allow),
                (proc_at, "/proc", PathAccess::Allow)
            ]
        );
        assert_eq!(
            plan.mounts()[0],
            PlannedMount {
                kind: Mount::Mask,
                path: "/data/rw/keys".into(),
                required: true
            },
        );
        assert!(
            plan.mounts()[1..]
                .iter()
                .all(|m| m.path.starts_with("/proc") || m.path.starts_with("/sys")),
            "the floor's masks and read-only binds: {:?}",
            plan.mounts()
        );
        assert!(plan.guards_renames());
        assert_eq!(
            plan.describe(),
            format!(
                "kernel ({} path rules by the container's mounts, 4 by Landlock ABI 7)",
                1 + plan.mounts()[1..].len()
            )
        );
        // The filter: opens and tree changes in the kernel, what Landlock
        // has no right for with the supervisor.
        let k = p.kernel_enforced(plan.guards_renames(), true);
        let nr = |n| table::number(n).unwrap();
        for n in ["openat", "mkdirat", "unlinkat", "truncate", "newfstatat"] {
            assert_eq!(k.decide(nr(n), &[0; 6]).0, Action::Allow, "{n}");
        }
        for n in [
            "fchmod",
            "fchownat",
            "utimensat",
            "setxattr",
            "fremovexattr",
            "renameat2",
        ] {
            assert_eq!(k.decide(nr(n), &[0; 6]).0, Action::Emulate, "{n}");
        }
    }

    /// Other allow-list shapes: readable only beneath, a file mount point,
    /// the mounts alone, the user's choice of the supervisor.
    #[test]
    fn other_allow_lists_choose_their_levels() {
        let kfs = kernel_fs();
        // Readable only beneath: a deny base, a read-only grant.
        let r = user(&[("/bin/**", "read-only"), ("/data/rw/**", "allow"), ("/**", "deny")]);
        let plan = r.plan_at(Enforcement::Kernel, &site(&kfs, &dirs, Some(3)));
        let l = plan.landlock.clone().unwrap();
        assert_eq!(l.base, PathAccess::Deny);
        assert_eq!(l.grants[0].access, PathAccess::ReadOnly);
        assert!(!plan.guards_renames());
        // A mount point that is a file (a bind of one) is no directory to
        // grant beneath: the supervisor keeps the rules.
        let g = user(&[("/tmp/**", "allow"), ("/**", "read-only")]);
        assert!(g
            .plan_at(Enforcement::Kernel, &site(&kfs, &dirs, Some(7)))
            .landlock
            .is_some());
        let file_at_tmp = |p: &str| if p == "/tmp" { Some(Existing::File) } else { dirs(p) };
        let plan = g.plan_at(Enforcement::Kernel, &site(&kfs, &file_at_tmp, Some(7)));
        assert!(plan.landlock.is_none() && !plan.all_kernel, "{plan:?}");
        // Level 1 still comes first, and the user's choice of the supervisor
        // wins.
        let mounts_only = user(&[("/data/ro/**", "read-only")]);
        let plan = mounts_only.plan_at(Enforcement::Kernel, &site(&kfs, &dirs, Some(7)));
        assert!(plan.all_kernel && plan.landlock.is_none());
        assert!(
            !r.plan_at(Enforcement::Supervisor, &site(&kfs, &dirs, Some(7)))
                .all_kernel
        );
    }

    /// Each rule Landlock and the mounts cannot enforce together keeps the
    /// policy with the supervisor, named with its reason.
    #[test]
    fn shapes_landlock_cannot_enforce_go_to_the_supervisor() {
        let kfs = kernel_fs();
        let refused = |rules: &[(&str, &str)], abi: Option<u32>| -> (usize, String) {
            let plan = user(rules).plan_at(Enforcement::Kernel, &site(&kfs, &dirs, abi));
            assert!(!plan.all_kernel && plan.landlock.is_none(), "{rules:?}: {plan:#?}");
            let b = plan.blocker.expect("a blocker");
            assert!(
                plan.describe().starts_with(&format!("supervisor (path[{b}] ")),
                "{}",
                plan.describe()
            );
            (b, plan.choices[b].why.clone())
        };
        let writable = [("/data/rw/**", "allow"), ("/**", "read-only")];
        let (b, why) = refused(&writable, Some(2));
        assert!(
            b == 0 && why.contains("Landlock ABI 2") && why.contains("TRUNCATE"),
            "{why}"
        );
        let (_, why) = refused(&writable, None);
        assert!(why.contains("Landlock is not available"), "{why}");
        let (b, why) = refused(&[("/data/rw/**", "allow")], Some(7));
        assert!(b == 0 && why.contains("no catch-all /**"), "{why}");
        let (b, why) = refused(&[("/work/**", "deny"), ("/**", "allow")], Some(7));
        let floor = Policy::load("default").unwrap().source.paths.len();
        assert!(b == 1 + floor && why.contains("catch-all /** allow"), "{why}");
        let (b, why) = refused(&[("/work/**", "allow"), ("/**", "deny")], Some(7));
        assert!(b == 0 && why.contains("missing at create"), "{why}");
        let (b, why) = refused(&[("/data/*.txt", "allow"), ("/**", "read-only")], Some(7));
        assert!(b == 0 && why.contains("glob"), "{why}");
        let (b, why) = refused(&[("/data/f", "allow"), ("/**", "read-only")], Some(7));
        assert!(b == 0 && why.contains("Landlock grants directories"), "{why}");
        // A grant inside a mask would be hidden by it.
        let (b, why) = refused(
            &[("/data/rw/**", "allow"), ("/data/**", "deny"), ("/**", "read-only")],
            Some(7),
        );
        assert!(b == 0 && why.contains("inside path[1] /data/**"), "{why}");
        // A restriction inside a grant that no mount can make.
        let (b, why) = refused(
            &[
                ("/data/rw/new/**", "deny"),
                ("/data/rw/**", "allow"),
                ("/**", "read-only"),
            ],
            Some(7),
        );
        assert!(b == 0 && why.contains("only a mount can do"), "{why}");
        // A rule that adds nothing, inside a mask that would take it back.
        let (b, why) = refused(
            &[("/data/ro/**", "read-only"), ("/data/**", "deny"), ("/**", "read-only")],
            Some(7),
        );
        assert!(b == 0 && why.contains("take back"), "{why}");
        // The other rules say which one keeps them there.
        let plan = user(&[
            ("/data/ro/**", "read-only"),
            ("/data/*.txt", "allow"),
            ("/**", "read-only"),
        ])
        .plan_at(Enforcement::Kernel, &site(&kfs, &dirs, Some(7)));
        assert!(
            plan.choices[0].why.contains("path[1] needs the supervisor"),
            "{plan:#?}"
        );
    }
}
