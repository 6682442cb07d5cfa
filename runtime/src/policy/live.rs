//! What `cordon policy update ID FILE` may change in a running
//! container's policy, and why the rest needs a restart.
//!
//! The supervisor decides the calls the container's BPF filter sends it
//! from the policy in its memory, so everything it decides can be
//! replaced while the container runs: the network rules and their
//! defaults, host rules (the resolver's verdicts), `[dns]`, and the path
//! rules when the supervisor enforces them. What the kernel enforces was
//! fixed at create and cannot be replaced in place:
//!
//! - the syscall rules and `default_action`: they are the BPF filter of
//!   every process (and decide which calls reach the supervisor at all);
//! - the path rules at the kernel level (`enforcement kernel (...)`): the
//!   container's mounts and Landlock ruleset enforce them, and file
//!   syscalls never reach the supervisor;
//! - `[views]`: written and mounted over /proc and /sys at create;
//! - whether the policy has host rules: the supervisor's resolver and the
//!   container's resolv.conf are set up at create only under one.
//!
//! An update that changes one of them is refused whole, naming the first
//! such rule. (Tightening the kernel's levels by layering a new filter or
//! ruleset on every process is not done: it would leave processes the
//! layering misses, started between the check and the last layer, under
//! the old rules.)

use super::model::PathRule;
use super::{Policy, Rule};
use crate::abi::table;

/// `None` when a container running under `now` can be switched to
/// `asked` in place; else why not, in one line naming the first rule or
/// table that differs and saying that it needs a restart. `kernel_paths`:
/// the container's path rules are enforced by its mounts or Landlock (its
/// enforcement level is `kernel`).
pub fn refusal(now: &Policy, asked: &Policy, kernel_paths: bool) -> Option<String> {
    names_change(now, asked)
        .or_else(|| syscall_change(now, asked))
        .or_else(|| {
            kernel_paths
                .then(|| path_change(&now.source.paths, &asked.source.paths))
                .flatten()
        })
        .or_else(|| {
            (now.source.views != asked.source.views).then(|| {
                "[views] differs: the views are written and mounted over /proc and /sys at create; \
                 a change needs a restart"
                    .to_string()
            })
        })
}

/// The first syscall whose rules (argument conditions, action, errno) or
/// default differ, as a refusal.
fn syscall_change(now: &Policy, asked: &Policy) -> Option<String> {
    let restart = "the kernel's BPF filter decides it in every process; a change needs a restart";
    if (now.default_action, now.default_errno) != (asked.default_action, asked.default_errno) {
        return Some(format!(
            "default_action {:?} differs from the running policy's {:?}: {restart}",
            asked.default_action, now.default_action
        ));
    }
    let shape = |rules: Option<&Vec<Rule>>| -> Vec<Rule> {
        rules
            .map(|rs| rs.iter().map(|r| Rule { index: 0, ..r.clone() }).collect())
            .unwrap_or_default()
    };
    let nrs: std::collections::BTreeSet<u32> = now.rules.keys().chain(asked.rules.keys()).copied().collect();
    nrs.into_iter()
        .find(|nr| shape(now.rules.get(nr)) != shape(asked.rules.get(nr)))
        .map(|nr| {
            let name = table::name(nr).unwrap_or("?");
            let which = asked.rules.get(&nr).and_then(|r| r.first()).map(|r| r.index);
            let wire = |p: &Policy| p.rules.get(&nr).and_then(|r| r.first()).map(|r| r.index) == Some(super::WIRE_RULE);
            if wire(now) || wire(asked) {
                return format!(
                    "whether a host rule checks names on the wire (sni) differs: {name} then goes to the supervisor or \
                     not, which {restart}"
                );
            }
            match which {
                Some(i) => {
                    format!("syscall[{i}] ({name}) differs from the running policy's rules for {name}: {restart}")
                }
                None => format!("the running policy's rules for {name} are missing: {restart}"),
            }
        })
}

/// The first path rule that differs, when the kernel enforces them.
fn path_change(now: &[PathRule], asked: &[PathRule]) -> Option<String> {
    let restart = "the container's mounts and Landlock ruleset enforce the path rules (enforcement kernel); \
                   a change needs a restart, or `create` with the annotation org.cordon.enforcement = \"supervisor\"";
    let i = (0..now.len().max(asked.len())).find(|&i| now.get(i) != asked.get(i))?;
    Some(match asked.get(i) {
        Some(r) => format!("path[{i}] ({} {}) differs: {restart}", r.pattern, access_name(r.access)),
        None => format!("path[{i}] ({}) is removed: {restart}", now[i].pattern),
    })
}

/// A path rule's access as the policy file spells it.
fn access_name(a: super::model::PathAccess) -> &'static str {
    match a {
        super::model::PathAccess::Deny => "deny",
        super::model::PathAccess::ReadOnly => "read-only",
        super::model::PathAccess::Allow => "allow",
        super::model::PathAccess::Ask => "ask",
    }
}

/// A refusal when one policy has host rules and the other none.
fn names_change(now: &Policy, asked: &Policy) -> Option<String> {
    match (now.net.has_names(), asked.net.has_names()) {
        (false, true) => Some(
            "the asked policy has host rules and the running one none: the supervisor's resolver and the \
             container's resolv.conf are set up at create only under host rules; a change needs a restart"
                .into(),
        ),
        (true, false) => Some(
            "the asked policy has no host rule and the running one has: the container's resolv.conf names \
             the supervisor's resolver, set up at create; keep at least one host rule, or restart"
                .into(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(extra: &str) -> Policy {
        Policy::from_toml(&format!("name = \"t\"\n{extra}"), "t").expect("policy")
    }

    #[test]
    fn network_rules_and_dns_may_change_in_place() {
        let now = policy("[[net]]\ncidr = \"10.0.0.0/8\"\naction = \"deny\"\n");
        let asked = policy(
            "net_default = \"deny\"\n[[net]]\ncidr = \"10.1.0.0/16\"\naction = \"allow\"\n[dns]\ntimeout_ms = 500\n",
        );
        assert_eq!(refusal(&now, &asked, true), None);
        assert_eq!(refusal(&now, &now, true), None);
    }

    #[test]
    fn a_syscall_rule_change_is_refused_naming_it() {
        let now = policy("");
        let asked = policy("[[syscall]]\nnames = [\"mkdir\"]\naction = \"deny\"\nerrno = \"EPERM\"\n");
        let why = refusal(&now, &asked, false).expect("refused");
        assert!(why.starts_with("syscall[0] (mkdir)"), "{why}");
        assert!(why.contains("needs a restart"), "{why}");
        let why = refusal(&asked, &now, false).expect("refused");
        assert!(why.contains("mkdir"), "{why}");
    }

    #[test]
    fn path_rules_change_only_where_the_supervisor_enforces_them() {
        let now = policy("[[path]]\npattern = \"/secret/**\"\naccess = \"deny\"\n");
        let asked = policy("[[path]]\npattern = \"/secret/**\"\naccess = \"read-only\"\n");
        assert_eq!(refusal(&now, &asked, false), None);
        let why = refusal(&now, &asked, true).expect("refused");
        assert!(why.starts_with("path[0] (/secret/** read-only) differs"), "{why}");
    }

    #[test]
    fn views_and_the_resolver_need_a_restart() {
        let now = policy("");
        let asked = policy("[views]\nrelease = \"6.9.0\"\n");
        assert!(refusal(&now, &asked, false).expect("refused").starts_with("[views]"));
        let named = policy("[[net]]\nhost = \"example.com\"\naction = \"allow\"\n");
        assert!(refusal(&now, &named, false).expect("refused").contains("resolver"));
        assert!(refusal(&named, &now, false).expect("refused").contains("resolver"));
    }
}
