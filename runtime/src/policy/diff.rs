//! `cordon policy diff A B`: what one policy grants that the other does
//! not, per rule kind.
//!
//! Decided on probes, not on the rule lists: each syscall of the table;
//! each path a rule of either policy names (a literal pattern, or a file
//! below `D` for `D/**`, or the pattern itself with `*` taken as a name);
//! each address or name a network rule of either names, on each port
//! either lists (and on a port neither lists); and `net_default` through
//! an address no rule names. A line is written where A and B decide a
//! probe differently: `+` where B grants more than A, `-` where less, `~`
//! where neither order holds (conditions on arguments, other errnos).

use std::collections::BTreeSet;
use std::net::IpAddr;

use super::model::{Action, NetAction, PathAccess};
use super::Policy;
use crate::abi::table;

/// One difference: its mark (`+`, `-`, `~`) and its line.
pub type Line = (char, String);

/// Every difference between `a` and `b`, syscalls first, then paths,
/// network, `[dns]` and `[views]`.
pub fn diff(a: &Policy, b: &Policy) -> Vec<Line> {
    let mut out = syscalls(a, b);
    out.extend(paths(a, b));
    out.extend(net(a, b));
    if a.source.dns != b.source.dns {
        out.push(('~', "[dns] differs".into()));
    }
    if a.source.views != b.source.views {
        out.push(('~', "[views] differs".into()));
    }
    out
}

/// How much an unconditional action grants: kill < deny < audit, emulate
/// (the supervisor decides) < allow.
fn syscall_rank(a: Action) -> u8 {
    match a {
        Action::Kill => 0,
        Action::Deny => 1,
        Action::Audit | Action::Emulate => 2,
        Action::Allow => 3,
    }
}

/// What `p` does with syscall `nr`: `(action, errno)` when one action
/// decides whatever the arguments, else `None` (conditions).
fn disposition(p: &Policy, nr: u32) -> Option<(Action, i32)> {
    match p.rules.get(&nr) {
        None => Some((p.default_action, p.default_errno)),
        // First match: a first rule without conditions decides all.
        Some(rules) => rules.first().filter(|r| r.args.is_empty()).map(|r| (r.action, r.errno)),
    }
}

fn shown(d: Option<(Action, i32)>) -> String {
    match d {
        None => "depends on its arguments".into(),
        Some((Action::Deny, e)) => format!("deny ({})", crate::errno::name(e)),
        Some((a, _)) => format!("{a:?}").to_lowercase(),
    }
}

fn syscalls(a: &Policy, b: &Policy) -> Vec<Line> {
    let mut out = Vec::new();
    for &(name, nr) in table::all().iter().filter(|(_, nr)| table::available(*nr)) {
        let (da, db) = (disposition(a, nr), disposition(b, nr));
        let same_rules = a.rules.get(&nr).map(|r| strip(r)) == b.rules.get(&nr).map(|r| strip(r));
        if da == db && (da.is_some() || same_rules) {
            continue;
        }
        let mark = match (da, db) {
            (Some((x, _)), Some((y, _))) if syscall_rank(y) > syscall_rank(x) => '+',
            (Some((x, _)), Some((y, _))) if syscall_rank(y) < syscall_rank(x) => '-',
            _ => '~',
        };
        out.push((mark, format!("syscall {name}: {} -> {}", shown(da), shown(db))));
    }
    out
}

/// Rules without their index (the same rule at another place is the same).
fn strip(rules: &[super::Rule]) -> Vec<(Vec<super::ArgMatch>, Action, i32)> {
    rules.iter().map(|r| (r.args.clone(), r.action, r.errno)).collect()
}

fn path_rank(a: PathAccess) -> u8 {
    match a {
        PathAccess::Deny => 0,
        PathAccess::ReadOnly => 1,
        // The decision program may allow it.
        PathAccess::Allow | PathAccess::Ask => 2,
    }
}

fn path_name(a: PathAccess) -> &'static str {
    match a {
        PathAccess::Deny => "deny",
        PathAccess::ReadOnly => "read-only",
        PathAccess::Allow => "allow",
        PathAccess::Ask => "ask",
    }
}

/// The paths a pattern stands for, as probes.
fn path_probes(pattern: &str) -> Vec<String> {
    let base = pattern.trim_end_matches("/**");
    let base = if base.is_empty() { "/" } else { base };
    let named = base.replace('*', "x");
    let below = format!("{}/probe", named.trim_end_matches('/'));
    if pattern.ends_with("/**") {
        vec![named, below]
    } else {
        vec![named]
    }
}

fn paths(a: &Policy, b: &Policy) -> Vec<Line> {
    let probes: BTreeSet<String> = a
        .source
        .paths
        .iter()
        .chain(&b.source.paths)
        .flat_map(|r| path_probes(&r.pattern))
        .collect();
    let mut out = Vec::new();
    for p in probes {
        let (x, y) = (a.paths.access(&p), b.paths.access(&p));
        if x != y {
            let mark = if path_rank(y) > path_rank(x) { '+' } else { '-' };
            out.push((mark, format!("path {p}: {} -> {}", path_name(x), path_name(y))));
        }
    }
    out
}

fn net_name(a: NetAction) -> &'static str {
    match a {
        NetAction::Deny => "deny",
        NetAction::Allow => "allow",
        NetAction::Ask => "ask",
    }
}

fn net_rank(a: NetAction) -> u8 {
    match a {
        NetAction::Deny => 0,
        NetAction::Ask => 1,
        NetAction::Allow => 2,
    }
}

/// How much a connection may leave unchecked on the wire: a required
/// name < an optional one < no check.
fn wire_rank(w: Option<super::model::Sni>) -> u8 {
    match w {
        Some(super::model::Sni::Required) => 0,
        Some(super::model::Sni::Optional) => 1,
        Some(super::model::Sni::Off) | None => 2,
    }
}

fn wire_name(w: Option<super::model::Sni>) -> &'static str {
    match w {
        Some(super::model::Sni::Required) => "checked (sni required)",
        Some(super::model::Sni::Optional) => "checked (sni optional)",
        Some(super::model::Sni::Off) | None => "not checked",
    }
}

/// `+` when HTTP rules `b` let a request through that `a` refuses (no
/// rules, or a method or path pattern `a` does not list), else `-`.
fn http_mark(a: &Option<super::http::HttpRule>, b: &Option<super::http::HttpRule>) -> char {
    match (a, b) {
        (_, None) => '+',
        (None, Some(_)) => '-',
        (Some(a), Some(b)) => {
            let wider =
                |x: &[String], y: &[String]| (y.is_empty() && !x.is_empty()) || y.iter().any(|v| !x.contains(v));
            if wider(&a.methods, &b.methods) || wider(&a.paths, &b.paths) {
                '+'
            } else {
                '-'
            }
        }
    }
}

/// HTTP rules as `policy diff` shows them.
fn http_name(h: &Option<super::http::HttpRule>) -> String {
    match h {
        None => "any request".into(),
        Some(h) => format!("methods {:?} paths {:?}", h.methods, h.paths),
    }
}

fn net(a: &Policy, b: &Policy) -> Vec<Line> {
    let rules: Vec<_> = a.source.net.iter().chain(&b.source.net).collect();
    let mut ports: BTreeSet<u16> = rules.iter().flat_map(|r| r.ports.iter().copied()).collect();
    // A port no rule lists: what the rules without ports and net_default
    // do; and the ports where host rules check names on the wire.
    ports.insert(1);
    ports.extend(super::model::TLS_PORTS);
    ports.extend(super::model::HTTP_PORTS);
    let mut targets: BTreeSet<(Option<String>, IpAddr)> = BTreeSet::new();
    for r in &rules {
        if let Some(c) = &r.cidr {
            let ip = c
                .parse::<ipnet::IpNet>()
                .map(|n| n.addr())
                .or_else(|_| c.parse::<IpAddr>())
                .ok();
            if let Some(ip) = ip {
                targets.insert((None, ip));
            }
        }
        if let Some(h) = &r.host {
            targets.insert((Some(h.replace('*', "x")), IpAddr::from([192, 0, 2, 123])));
        }
    }
    // An address no rule names: net_default.
    targets.insert((None, IpAddr::from([192, 0, 2, 254])));
    let mut out = Vec::new();
    for (name, ip) in &targets {
        let names: Vec<String> = name.iter().cloned().collect();
        for &port in &ports {
            let (da, db) = (
                a.net.decide_named(*ip, port, &names),
                b.net.decide_named(*ip, port, &names),
            );
            let (x, y) = (da.0, db.0);
            let what = match name {
                Some(n) => format!("{n}:{port}"),
                None if ip == &IpAddr::from([192, 0, 2, 254]) => format!("an address no rule names, port {port}"),
                None => format!("{ip}:{port}"),
            };
            if x == y {
                // Both allow: the check of the name on the wire may differ.
                let wire =
                    |p: &Policy, d: super::net::Verdict| d.1.and_then(|i| p.net.wire_check(i, port)).map(|w| w.1);
                let (wa, wb) = (wire(a, da), wire(b, db));
                if x != NetAction::Deny && wa != wb {
                    let mark = if wire_rank(wb) > wire_rank(wa) { '+' } else { '-' };
                    out.push((
                        mark,
                        format!("net {what}: name on the wire {} -> {}", wire_name(wa), wire_name(wb)),
                    ));
                }
                // Both allow: the HTTP rules (methods, paths) may differ.
                let http = |p: &Policy, d: super::net::Verdict| d.1.and_then(|i| p.net.http_rule(i)).cloned();
                let (ha, hb) = (http(a, da), http(b, db));
                if x != NetAction::Deny && ha != hb {
                    out.push((
                        http_mark(&ha, &hb),
                        format!("net {what}: HTTP {} -> {}", http_name(&ha), http_name(&hb)),
                    ));
                }
                continue;
            }
            let mark = if net_rank(y) > net_rank(x) { '+' } else { '-' };
            out.push((mark, format!("net {what}: {} -> {}", net_name(x), net_name(y))));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(text: &str) -> Policy {
        Policy::from_toml(&format!("name = \"t\"\n{text}"), "t").expect("policy")
    }

    #[test]
    fn dropping_http_rules_grants_more() {
        let rule = "net_default = \"deny\"\n[[net]]\nhost = \"files.test\"\nports = [80]\naction = \"allow\"\n";
        let a = policy(&format!("{rule}methods = [\"GET\"]\npaths = [\"/simple/**\"]\n"));
        let b = policy(rule);
        let lines = diff(&a, &b);
        assert!(
            lines.contains(&(
                '+',
                "net files.test:80: HTTP methods [\"GET\"] paths [\"/simple/**\"] -> any request".into()
            )),
            "{lines:?}"
        );
        assert!(diff(&b, &a).iter().all(|l| l.0 == '-'), "{:?}", diff(&b, &a));
        let c = policy(&format!(
            "{rule}methods = [\"GET\", \"POST\"]\npaths = [\"/simple/**\"]\n"
        ));
        assert!(
            diff(&a, &c).iter().any(|l| l.0 == '+'),
            "POST added: {:?}",
            diff(&a, &c)
        );
        assert!(diff(&c, &a).iter().all(|l| l.0 == '-'), "{:?}", diff(&c, &a));
    }

    #[test]
    fn turning_the_wire_check_off_grants_more() {
        let a = policy("net_default = \"deny\"\n[[net]]\nhost = \"pypi.org\"\naction = \"allow\"\n");
        let b = policy("net_default = \"deny\"\n[[net]]\nhost = \"pypi.org\"\naction = \"allow\"\nsni = \"off\"\n");
        let lines = diff(&a, &b);
        assert!(
            lines.contains(&(
                '+',
                "net pypi.org:443: name on the wire checked (sni required) -> not checked".into()
            )),
            "{lines:?}"
        );
        assert!(diff(&b, &a).iter().all(|l| l.0 == '-'), "{:?}", diff(&b, &a));
    }

    #[test]
    fn each_kind_says_which_way_it_differs() {
        let a = policy("net_default = \"deny\"\n[[net]]\nhost = \"pypi.org\"\nports = [443]\naction = \"allow\"\n");
        let b = policy(
            "net_default = \"deny\"\n[[net]]\nhost = \"pypi.org\"\naction = \"allow\"\n\
             [[path]]\npattern = \"/secret/**\"\naccess = \"deny\"\n\
             [[syscall]]\nnames = [\"mkdir\"]\naction = \"deny\"\nerrno = \"EPERM\"\n",
        );
        let lines = diff(&a, &b);
        assert!(
            lines.contains(&('-', "syscall mkdir: emulate -> deny (EPERM)".into())),
            "{lines:?}"
        );
        assert!(
            lines.contains(&('-', "path /secret: allow -> deny".into())),
            "{lines:?}"
        );
        assert!(
            lines.contains(&('+', "net pypi.org:1: deny -> allow".into())),
            "{lines:?}"
        );
        assert!(!lines.iter().any(|l| l.1.starts_with("net pypi.org:443")), "{lines:?}");
        assert!(diff(&a, &a).is_empty());
        let back = diff(&b, &a);
        assert!(
            back.contains(&('+', "syscall mkdir: deny (EPERM) -> emulate".into())),
            "{back:?}"
        );
    }
}
