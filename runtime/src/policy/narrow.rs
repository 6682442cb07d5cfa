//! Whether one policy only narrows another: what `cordon fork --policy P`
//! checks, so that a fork is never weaker than its parent.
//!
//! The check is conservative (a syntactic one over the merged rule lists,
//! not a proof over every call): `narrower` is accepted when, for each of
//! the syscall, path and net lists, it is the parent's list, unchanged and
//! in order, with rules added only before and after it, where
//!
//! - a rule added before the parent's (it decides first) only refuses:
//!   a syscall rule `deny` or `kill`, a path rule `deny`, a net rule
//!   `deny`. A `read-only` path rule there is refused: it would decide
//!   before a parent's `deny` of a file beneath it.
//! - a rule added after the parent's (it decides only what the parent
//!   left to the default) refuses or narrows: a syscall rule `deny` or
//!   `kill`, a path rule `deny` or `read-only`, a net rule `deny`;
//!
//! and the defaults are the parent's or stricter (`default_action`:
//! the same, or `deny`/`kill`; `net_default`: the same, or `deny`), and
//! the `[dns]` and `[views]` tables are the parent's. Anything else (a
//! rule removed, changed or moved, an `allow`, `emulate` or `audit`
//! added) is refused, naming the first such rule.

use super::model::{Action, NetAction, PathAccess, PolicyFile};

/// `Ok` when `narrower` grants nothing `parent` does not (in the sense
/// the module describes); else the first rule or field that could, in
/// one line.
pub fn only_narrows(parent: &PolicyFile, narrower: &PolicyFile) -> Result<(), String> {
    let refuses_syscall = |a: Action| matches!(a, Action::Deny | Action::Kill);
    list(
        "syscall",
        &parent.syscalls,
        &narrower.syscalls,
        |r| refuses_syscall(r.action),
        |r| refuses_syscall(r.action),
        |r| format!("{} {:?}", r.names.join(","), r.action),
    )?;
    list(
        "path",
        &parent.paths,
        &narrower.paths,
        |r| r.access == PathAccess::Deny,
        |r| r.access != PathAccess::Allow,
        |r| format!("{} {:?}", r.pattern, r.access),
    )?;
    list(
        "net",
        &parent.net,
        &narrower.net,
        |r| r.action == NetAction::Deny,
        |r| r.action == NetAction::Deny,
        |r| format!("{} {:?}", r.target(), r.action),
    )?;
    if narrower.default_action != parent.default_action && !refuses_syscall(narrower.default_action) {
        return Err(format!(
            "default_action {:?} is looser than the parent's {:?}",
            narrower.default_action, parent.default_action
        ));
    }
    if narrower.net_default != parent.net_default && narrower.net_default != NetAction::Deny {
        return Err(format!(
            "net_default {:?} is looser than the parent's {:?}",
            narrower.net_default, parent.net_default
        ));
    }
    if narrower.dns != parent.dns {
        return Err("[dns] differs from the parent's".into());
    }
    if narrower.views != parent.views {
        return Err("[views] differs from the parent's".into());
    }
    Ok(())
}

/// One rule list: `now` must be `before ++ parent ++ after` with every
/// rule of `before` passing `first` and every rule of `after` passing
/// `last`.
fn list<R: PartialEq>(
    kind: &str,
    parent: &[R],
    now: &[R],
    first: impl Fn(&R) -> bool,
    last: impl Fn(&R) -> bool,
    show: impl Fn(&R) -> String,
) -> Result<(), String> {
    let at = (0..=now.len().saturating_sub(parent.len())).find(|&i| now[i..].starts_with(parent));
    let Some(at) = at else {
        // The first rule of the parent's that is not where it must be.
        let missing = parent
            .iter()
            .enumerate()
            .find(|(_, r)| !now.contains(r))
            .or_else(|| parent.iter().enumerate().next());
        return Err(match missing {
            Some((i, r)) => format!("{kind}[{i}] ({}) of the parent's policy is missing or moved", show(r)),
            None => format!("the {kind} rules differ from the parent's"),
        });
    };
    let end = at + parent.len();
    for (i, r) in now.iter().enumerate() {
        let ok = if i < at {
            first(r)
        } else if i >= end {
            last(r)
        } else {
            true
        };
        if !ok {
            let place = if i < at { "before" } else { "after" };
            return Err(format!(
                "{kind}[{i}] ({}) is added {place} the parent's rules and could grant what they refuse",
                show(r)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn p(extra: &str) -> PolicyFile {
        Policy::from_toml(&format!("name = \"t\"\nextends = \"default\"\n{extra}"), "t")
            .unwrap()
            .source
    }

    #[test]
    fn the_same_or_added_refusals_pass_and_anything_looser_is_named() {
        let parent = p("[[net]]\ncidr = \"10.9.0.0/16\"\naction = \"deny\"\n[[path]]\npattern = \"/etc/shadow\"\naccess = \"deny\"\n[[path]]\npattern = \"/etc/**\"\naccess = \"read-only\"\n");
        assert_eq!(only_narrows(&parent, &parent), Ok(()));
        let tighter = p("[[net]]\ncidr = \"10.8.0.0/16\"\naction = \"deny\"\n[[net]]\ncidr = \"10.9.0.0/16\"\naction = \"deny\"\n[[path]]\npattern = \"/w/secret\"\naccess = \"deny\"\n[[path]]\npattern = \"/etc/shadow\"\naccess = \"deny\"\n[[path]]\npattern = \"/etc/**\"\naccess = \"read-only\"\n");
        assert_eq!(only_narrows(&parent, &tighter), Ok(()));
        let default = Policy::load("default").unwrap().source;
        let e = only_narrows(&parent, &default).unwrap_err();
        assert!(e.contains("path[0]") && e.contains("/etc/shadow"), "{e}");
        // A read-only rule before the parent's deny would open the file.
        let looser = p("[[path]]\npattern = \"/etc/**\"\naccess = \"read-only\"\n[[net]]\ncidr = \"10.9.0.0/16\"\naction = \"deny\"\n[[path]]\npattern = \"/etc/shadow\"\naccess = \"deny\"\n[[path]]\npattern = \"/etc/**\"\naccess = \"read-only\"\n");
        let e = only_narrows(&parent, &looser).unwrap_err();
        assert!(e.contains("path[0]") && e.contains("/etc/**"), "{e}");
        let allow = p("[[net]]\ncidr = \"0.0.0.0/0\"\naction = \"allow\"\n[[net]]\ncidr = \"10.9.0.0/16\"\naction = \"deny\"\n[[path]]\npattern = \"/etc/shadow\"\naccess = \"deny\"\n[[path]]\npattern = \"/etc/**\"\naccess = \"read-only\"\n");
        assert!(only_narrows(&parent, &allow).unwrap_err().contains("net[0]"));
        // Narrowing the parent in turn is refused.
        assert!(only_narrows(&tighter, &parent).is_err());
    }
}
