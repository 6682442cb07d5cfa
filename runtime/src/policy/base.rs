//! The base a policy extends (`extends`, `default` unless it says
//! otherwise) merged under its own rules, the floor of the default's path
//! rules that no policy extending it can loosen, and the `/dev` rule a
//! catch-all keeps usable.

use super::model::{self, PathAccess, PolicyFile};
use super::{choice, invalid, landlock, PathPolicy, Policy, Result, BUILTIN};

/// Adds the rules of the policy `file` extends (the default policy
/// without `extends`; none with `extends = "none"`) after its own, and
/// marks it `extends = "none"`: the merged file stands alone (`policy show`
/// prints it, and reading that back gives the same policy). A policy of a
/// few path rules must not lose the default's hardening, nor the
/// interception its rules need.
pub(super) fn merge_base(file: &mut PolicyFile, origin: &str) -> Result<()> {
    let base = match file.extends.take() {
        None => Some("default".to_string()),
        Some(b) if b == "none" => None,
        Some(b) => Some(b),
    };
    if let Some(base) = base {
        let Some((_, src)) = BUILTIN.iter().find(|(n, _)| *n == base) else {
            return Err(invalid(
                origin,
                "extends".into(),
                format!("{base:?} is not a built-in policy (default, audit, permissive, agent) or \"none\""),
            ));
        };
        let base = Policy::from_toml(src, &base)?.source;
        file.syscalls.extend(base.syscalls);
        let floor = floor_paths(&base.paths);
        check_floor(&floor, &file.paths, origin)?;
        // The floor goes right before the first of the user's rules that
        // would decide one of its paths more loosely (the user's rules
        // before it keep their numbers), else where the base's rules go.
        let at = file
            .paths
            .iter()
            .position(|r| loosens_floor(r, &floor))
            .unwrap_or(file.paths.len());
        let rest: Vec<_> = base.paths.into_iter().filter(|r| !floor.contains(r)).collect();
        let after = file.paths.split_off(at);
        file.paths.extend(floor);
        file.paths.extend(after);
        file.paths.extend(rest);
        file.net.extend(base.net);
    }
    file.extends = Some("none".into());
    Ok(())
}

/// The default policy's path rules (its masks of the kernel's files and
/// its read-only /proc/sys and /sys) among `base`: the floor every policy
/// that extends `default` keeps. They go first, so no rule of the user's
/// (a catch-all `/**` first, the natural shape of an allow-list) can stop
/// them from deciding; `[]` for a base without them.
fn floor_paths(base: &[model::PathRule]) -> Vec<model::PathRule> {
    let Some((_, src)) = BUILTIN.iter().find(|(n, _)| *n == "default") else {
        return Vec::new();
    };
    let Ok(default) = toml::from_str::<PolicyFile>(src) else {
        return Vec::new();
    };
    if !default.paths.iter().all(|r| base.contains(r)) {
        return Vec::new();
    }
    default.paths
}

/// Whether rule `r` matches a path one of the `floor` rules decides (the
/// floor rule's directory or file) with a looser access: placed before the
/// floor, it would take those paths out of it (`/** read-only` would make
/// `/proc/kcore` readable).
fn loosens_floor(r: &model::PathRule, floor: &[model::PathRule]) -> bool {
    let Ok(one) = PathPolicy::compile(std::slice::from_ref(r)) else {
        return false;
    };
    floor.iter().any(|f| {
        landlock::rank(r.access) > landlock::rank(f.access)
            && choice::literal_base(&f.pattern).is_some_and(|base| one.first_match(base).is_some())
    })
}

/// Refuses a rule of the user's that would loosen the floor where it names
/// a path the floor decides: `/proc/kallsyms` allowed, `/sys/fs/cgroup/**`
/// writable. Such a rule could never decide there (the floor goes first),
/// so it is an error, naming both rules, rather than a silent no-op. A
/// rule that only covers floor paths among others (`/proc/** allow`, a
/// catch-all) is not one: the floor decides those paths, the rule the rest.
fn check_floor(floor: &[model::PathRule], own: &[model::PathRule], origin: &str) -> Result<()> {
    let Ok(compiled) = PathPolicy::compile(floor) else {
        return Ok(());
    };
    for (i, r) in own.iter().enumerate() {
        let Some(base) = choice::literal_base(&r.pattern) else {
            continue;
        };
        let Some(j) = compiled.first_match(base) else {
            continue;
        };
        let f = &floor[j];
        if landlock::rank(r.access) <= landlock::rank(f.access) {
            continue;
        }
        let by = format!("{} {}", f.pattern, landlock::name(f.access));
        return Err(invalid(
            origin,
            format!("path[{i}].access"),
            format!(
                "{} {}: the default policy's protection {by} applies first and cannot be loosened (extends = \"none\" builds a policy without the default's)",
                r.pattern,
                landlock::name(r.access)
            ),
        ));
    }
    Ok(())
}

/// The rule a catch-all keeps out of /dev ([`keep_dev_usable`]).
pub const DEV_RULE: &str = "/dev/**";

/// A catch-all path rule (`/**` with `deny` or `read-only`, the natural
/// first line of an allow-list) would also cover `/dev`: `/dev/null`,
/// `zero`, `full`, `random`, `urandom`, `tty`, `ptmx`, `pts/*` and
/// `/dev/shm`, which shells, git and Python's multiprocessing open for
/// writing. A read-only rootfs under runc (`docker --read-only`) keeps
/// them usable: `/dev` is the container's own tmpfs, its devices are the
/// ones the device cgroup allows. So an `allow` rule on `/dev/**` goes
/// right before the first catch-all, after every rule of the user's before
/// it (which still decide first: `/dev/shm/** deny` above the catch-all
/// keeps /dev/shm denied). Nothing is added when a `/dev/**` rule is there
/// already, so a policy printed by `policy show` reads back the same.
pub(super) fn keep_dev_usable(paths: &mut Vec<model::PathRule>) {
    let Some(at) = paths
        .iter()
        .position(|r| r.pattern == "/**" && r.access != PathAccess::Allow)
    else {
        return;
    };
    if paths[..at].iter().any(|r| r.pattern == DEV_RULE) {
        return;
    }
    paths.insert(
        at,
        model::PathRule {
            pattern: DEV_RULE.into(),
            access: PathAccess::Allow,
            note: Some(
                "added before the catch-all: the container's /dev (devices, /dev/shm, /dev/pts) stays usable, as on runc's read-only rootfs"
                    .into(),
            ),
            message: None,
        },
    );
}
