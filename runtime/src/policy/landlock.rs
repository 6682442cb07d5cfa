//! Level 2: the path rules Landlock enforces (landlock(7); the kernel's
//! Documentation/userspace-api/landlock.rst).
//!
//! Landlock is an allow-list: a ruleset *handles* access rights, which are
//! then refused everywhere except beneath the directories its rules grant
//! them on, and a grant cannot be taken back for a subtree. A policy
//! qualifies when its path rules have this shape (rules are first-match;
//! accesses are ordered deny < read-only < allow):
//!
//! 1. A catch-all `/**` rule with base access B = `deny` or `read-only`.
//!    Rules after it never decide. The ruleset handles the rights B
//!    refuses: every filesystem right of the ABI for `deny`, every right
//!    but reading files and directories and executing for `read-only`.
//! 2. A rule that an earlier rule covers entirely (an earlier `E/**` with
//!    its path below `E`) never decides: nothing to enforce.
//! 3. For every other rule i, C_i is the most permissive access among the
//!    later live rules `E/**` that cover its path. `access_i == C_i`: the
//!    rule changes nothing. `access_i > C_i`: a **grant**, which must be
//!    `D/**` on a directory there when the container's process starts (it
//!    exists at create reached without a symlink, or a mount is made there,
//!    or it is a kernel directory), with no later covering rule enforced by
//!    a mount; it becomes a path-beneath rule on D. `access_i < C_i`: a
//!    **restriction**, which the mounts must enforce (a mask or a
//!    read-only bind of an object that exists at create, or of a kernel
//!    file): a mount restricts whatever Landlock grants around it.
//! 4. No live rule is covered by a later restriction of lower access (its
//!    mount would hide or freeze what the rule gives).
//!
//! Then for every path the first matching rule's access is what Landlock
//! and the mounts together allow: the grants that reach a path are
//! exactly the live rules above it, ordered so that the nearest is the
//! most permissive. A granted directory cannot be moved to another path:
//! renaming it (or a directory above it) removes an entry from a directory
//! covered only by less permissive rules, which Landlock refuses without
//! REMOVE_DIR there (EACCES).

use serde::{Deserialize, Serialize};

use super::choice::{below, literal_base, Choice, Existing, Level, Site};
use super::model::PathRule;
use super::{PathAccess, Policy};

/// The lowest Landlock ABI level 2 uses: 3 brings TRUNCATE (Linux 6.2),
/// without which a read-only file could be truncated by `truncate(2)` or
/// `O_TRUNC`.
pub const MIN_ABI: u32 = 3;

/// The Landlock ruleset of a container (level 2): what the runtime applies
/// in each of its processes before execve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Landlock {
    /// The running kernel's Landlock ABI version at create (3 or more).
    pub abi: u32,
    /// The catch-all's access (`deny` or `read-only`): the rights it
    /// refuses are the ones the ruleset handles.
    pub base: PathAccess,
    /// The directories granted more, in rule order.
    pub grants: Vec<Grant>,
    /// Whether the kernel logs the denials of the programs run under the
    /// ruleset to its audit (the runtime config's `[audit] kernel`; ABI 7).
    #[serde(default)]
    pub log: bool,
}

impl Landlock {
    /// A ruleset of ABI `abi` refusing what `base` refuses outside
    /// `grants`, its denials not logged.
    pub fn new(abi: u32, base: PathAccess, grants: Vec<Grant>) -> Self {
        Landlock {
            abi,
            base,
            grants,
            log: false,
        }
    }
}

/// One path-beneath rule of the ruleset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// Index of the `[[path]]` rule it enforces.
    pub rule: usize,
    /// The directory, as a path in the container.
    pub dir: String,
    /// `allow` (every handled right) or `read-only` (reading files and
    /// directories, executing).
    pub access: PathAccess,
}

/// deny < read-only < allow.
pub fn rank(a: PathAccess) -> u8 {
    match a {
        PathAccess::Deny => 0,
        PathAccess::ReadOnly => 1,
        // The decision program may allow it.
        PathAccess::Allow | PathAccess::Ask => 2,
    }
}

/// The access's name in policy files.
pub fn name(a: PathAccess) -> &'static str {
    match a {
        PathAccess::Deny => "deny",
        PathAccess::ReadOnly => "read-only",
        PathAccess::Allow => "allow",
        PathAccess::Ask => "ask",
    }
}

/// How Landlock treats one live rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Dead,
    Same,
    Grant,
    Restriction,
}

/// The catch-all `/**` rule's index and access, and the Landlock ABI, or
/// why level 2 cannot be (the first rule a mount cannot enforce, with its
/// own reason and this one).
fn catch_all(
    rules: &[PathRule],
    site: &Site<'_>,
    mounts: &[Result<Choice, String>],
) -> Result<(usize, PathAccess, u32), (usize, String)> {
    let first_unmounted = mounts.iter().position(Result::is_err).unwrap_or(0);
    let unmounted_why = |extra: &str| {
        let own = mounts[first_unmounted].as_ref().err().cloned().unwrap_or_default();
        (first_unmounted, format!("{own}; {extra}"))
    };
    let Some(k) = rules.iter().position(|r| r.pattern == "/**") else {
        return Err(unmounted_why(
            "and no catch-all /** rule (deny or read-only) makes the rules an allow-list for Landlock",
        ));
    };
    let base = rules[k].access;
    if base == PathAccess::Allow {
        return Err((
            k,
            "a catch-all /** allow leaves nothing for Landlock to refuse, and its exceptions are not mounts".into(),
        ));
    }
    let abi = match site.landlock_abi {
        Some(v) if v >= MIN_ABI => v,
        Some(v) => {
            return Err(unmounted_why(&format!(
                "Landlock ABI {v} on this kernel, level 2 needs {MIN_ABI} (TRUNCATE)"
            )))
        }
        None => return Err(unmounted_why("Landlock is not available on this kernel")),
    };
    Ok((k, base, abi))
}

/// Whether `pattern` names a directory's whole subtree (`D/**`).
fn is_subtree(pattern: &str) -> bool {
    pattern.ends_with("/**") && literal_base(pattern).is_some()
}

/// Rule 2: for each rule, the earlier rule that covers it (it never
/// decides), `None` when it can decide; every rule after the catch-all
/// `k` is covered by it.
fn dead_rules(rules: &[PathRule], k: usize) -> Vec<Option<usize>> {
    let subtree = |i: usize| is_subtree(&rules[i].pattern);
    let base_of = |i: usize| literal_base(&rules[i].pattern);
    (0..rules.len())
        .map(|i| {
            if i > k {
                return Some(k);
            }
            let b = base_of(i)?;
            (0..i).find(|&j| match base_of(j) {
                Some(e) if subtree(j) => below(b, e),
                Some(e) => !subtree(i) && e == b,
                None => false,
            })
        })
        .collect()
}

/// A rule's choice at `level`, without a mount.
fn choice_of(rules: &[PathRule], i: usize, level: Level, why: String) -> Choice {
    Choice {
        rule: i,
        level,
        pattern: rules[i].pattern.clone(),
        mount: None,
        why,
        required: false,
    }
}

/// Why Landlock can grant beneath directory `b` (a kernel directory, a
/// mount point of the bundle that is not a file, a directory that exists
/// at create), or `None` when it cannot.
fn grant_site(site: &Site<'_>, b: &str) -> Option<String> {
    site.kernel_fs
        .iter()
        .find(|fs| below(b, fs))
        .map(|fs| format!("a kernel directory below {fs}"))
        .or_else(|| {
            // A mount of a file (a bind of one) is no directory to grant
            // beneath.
            (site.mount_points.iter().any(|m| m.trim_end_matches('/') == b)
                && (site.existing)(b) != Some(Existing::File))
            .then(|| "a mount point of the bundle".to_string())
        })
        .or_else(|| {
            ((site.existing)(b) == Some(Existing::Dir)).then(|| "a directory that exists at create".to_string())
        })
}

/// Rule `i`, on directory `b`, gives more than `c`, what the live rules
/// after it (`later`, already classed in `class`) give there: its grant
/// and choice, or why Landlock cannot grant it.
fn grant_of(
    rules: &[PathRule],
    site: &Site<'_>,
    (i, b): (usize, &str),
    c: PathAccess,
    later: &[usize],
    class: &[Class],
) -> Result<(Grant, Choice), (usize, String)> {
    if !is_subtree(&rules[i].pattern) {
        return Err((
            i,
            format!(
                "gives more than the rules after it ({}) to a single path: Landlock grants directories (D/**)",
                name(c)
            ),
        ));
    }
    if let Some(&j) = later.iter().find(|&&j| class[j] == Class::Restriction) {
        return Err((
            i,
            format!(
                "a grant inside path[{j}] {}, which a mount enforces: the mount would limit the grant",
                rules[j].pattern
            ),
        ));
    }
    let Some(there) = grant_site(site, b) else {
        return Err((
            i,
            "a grant on a directory missing at create (or reached through a symlink, or below a mount other than a bind): Landlock attaches a grant to an existing directory".into(),
        ));
    };
    let access = rules[i].access;
    let grant = Grant {
        rule: i,
        dir: b.to_string(),
        access,
    };
    let why = format!(
        "Landlock grants {} beneath {b}, {there} (the rules after it give {})",
        name(access),
        name(c)
    );
    Ok((grant, choice_of(rules, i, Level::Landlock, why)))
}

/// Level 2 for `p` in `site`, given each rule's level-1 mount (or why not):
/// every rule's choice and the ruleset, or the rule that cannot be
/// enforced this way and why.
pub(super) fn plan(
    p: &Policy,
    site: &Site<'_>,
    mounts: &[Result<Choice, String>],
) -> Result<(Vec<Choice>, Landlock), (usize, String)> {
    let rules = &p.source.paths;
    let (k, base, abi) = catch_all(rules, site, mounts)?;
    let subtree = |i: usize| is_subtree(&rules[i].pattern);
    let base_of = |i: usize| literal_base(&rules[i].pattern);
    let dead = dead_rules(rules, k);
    let mut class = vec![Class::Dead; rules.len()];
    let mut choices: Vec<Option<Choice>> = vec![None; rules.len()];
    let choice = |i: usize, level: Level, why: String| choice_of(rules, i, level, why);
    for (i, d) in dead.iter().enumerate() {
        if let Some(j) = d {
            choices[i] = Some(choice(
                i,
                Level::Covered,
                format!(
                    "never decides: path[{j}] {} comes first and matches every path it names",
                    rules[*j].pattern
                ),
            ));
        }
    }
    class[k] = Class::Grant;
    let refused = match base {
        PathAccess::Deny => "every access",
        _ => "every change",
    };
    let why = format!(
        "Landlock refuses {refused} outside the grants (ABI {abi}); metadata changes and readlink stay with the supervisor, under the same rules"
    );
    choices[k] = Some(choice(k, Level::Landlock, why));
    let mut grants = Vec::new();
    for i in (0..k).rev() {
        if dead[i].is_some() {
            continue;
        }
        let r = &rules[i];
        let Some(b) = base_of(i) else {
            return Err((
                i,
                "a glob over paths: matched on every open (Landlock and mounts name existing objects)".into(),
            ));
        };
        let later: Vec<usize> = (i + 1..=k)
            .filter(|&j| dead[j].is_none() && subtree(j) && base_of(j).is_some_and(|e| below(b, e)))
            .collect();
        let c = later
            .iter()
            .map(|&j| rules[j].access)
            .max_by_key(|&a| rank(a))
            .unwrap_or(base);
        // Rule 4: a later mount of lower access would hide or freeze it.
        if let Some(&j) = later
            .iter()
            .find(|&&j| class[j] == Class::Restriction && rank(rules[j].access) < rank(r.access))
        {
            return Err((
                i,
                format!(
                    "inside path[{j}] {} {}, which a mount enforces: the mount would take back what this rule gives",
                    rules[j].pattern,
                    name(rules[j].access)
                ),
            ));
        }
        if rank(r.access) == rank(c) {
            class[i] = Class::Same;
            choices[i] = Some(choice(
                i,
                Level::Covered,
                format!("nothing to enforce: the rules after it give {} here too", name(c)),
            ));
        } else if rank(r.access) > rank(c) {
            let (grant, chosen) = grant_of(rules, site, (i, b), c, &later, &class)?;
            class[i] = Class::Grant;
            grants.push(grant);
            choices[i] = Some(chosen);
        } else {
            match &mounts[i] {
                Ok(m) => {
                    class[i] = Class::Restriction;
                    choices[i] = Some(m.clone());
                }
                Err(e) => {
                    return Err((
                        i,
                        format!("restricts what the rules after it give ({}), which only a mount can do inside a Landlock grant: {e}", name(c)),
                    ))
                }
            }
        }
    }
    grants.reverse();
    let choices = choices.into_iter().map(|c| c.expect("every rule classified")).collect();
    Ok((choices, Landlock::new(abi, base, grants)))
}
