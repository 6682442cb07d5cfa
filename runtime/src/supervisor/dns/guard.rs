//! What the resolver refuses beyond the rules' verdict on the queried
//! name (docs/POLICY.md, "Egress by name"):
//!
//! - **Internal addresses never ride on a name.** An answer binding an
//!   internal address ([`crate::policy::is_internal`]: loopback,
//!   link-local and the metadata service, private, CGNAT) or one of the
//!   host's own addresses is refused (NXDOMAIN) unless a `cidr` rule
//!   allows that address explicitly, wherever it stands in the policy: a
//!   host rule cannot reach the metadata service or the host's services
//!   by being placed before a `cidr` deny, nor by a name its owner points
//!   at 127.0.0.1.
//! - **Bounded lookups under wildcards.** A wildcard host rule forwards
//!   at most its `max_names` distinct names per minute; a new name past
//!   that gets NXDOMAIN without reaching the nameservers.
//! - **CNAME chains through a wildcard** are refused when a name in the
//!   chain is denied (any policy) or, under `net_default = "deny"`,
//!   matches no rule that allows it. A chain from a name an exact host
//!   rule allows is that name owner's (a CDN's name, typically), as its
//!   addresses are; only a `deny` rule refuses it.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::policy::{NetAction, NetPolicy};

/// The window of a wildcard rule's name budget.
const WINDOW: Duration = Duration::from_secs(60);

/// The resolver's guards' state: the host's addresses, and the names
/// each wildcard rule forwarded in the current minute.
#[derive(Debug, Default)]
pub struct Guards {
    /// The host's own addresses (its network namespace's, read at start).
    host: Vec<IpAddr>,
    /// Per wildcard rule (by its text): when its window began and the
    /// names forwarded in it.
    windows: Mutex<HashMap<String, (Instant, HashSet<String>)>>,
}

impl Guards {
    /// Guards for a host whose own addresses are `host`.
    pub fn new(host: Vec<IpAddr>) -> Self {
        Guards {
            host,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Whether rule `i` (text `rule`, a wildcard with a budget in `net`)
    /// may forward `name` now; counts it. `Err` is the trail's reason.
    pub fn take_name(&self, net: &NetPolicy, i: usize, rule: &str, name: &str) -> Result<(), String> {
        let Some(cap) = net.name_cap(i) else {
            return Ok(());
        };
        let now = Instant::now();
        let mut w = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let (start, names) = w.entry(rule.to_string()).or_insert_with(|| (now, HashSet::new()));
        if now.duration_since(*start) >= WINDOW {
            *start = now;
            names.clear();
        }
        if names.contains(name) {
            return Ok(());
        }
        if names.len() >= cap as usize {
            return Err(format!("NXDOMAIN ({rule}: max_names {cap} new names a minute)"));
        }
        names.insert(name.to_string());
        Ok(())
    }

    /// Why an answer binding `addrs` is refused, if it is: the first
    /// internal or host address no `cidr` rule allows.
    pub fn internal(&self, net: &NetPolicy, addrs: &[IpAddr]) -> Option<String> {
        addrs.iter().find_map(|&ip| {
            let carried = match ip {
                IpAddr::V6(v6) => crate::policy::embedded_v4(v6).map(IpAddr::V4),
                IpAddr::V4(_) => None,
            };
            let host = |a: &IpAddr| self.host.contains(a);
            let what = if host(&ip) || carried.as_ref().is_some_and(host) {
                "one of the host's own addresses"
            } else if crate::policy::is_internal(ip) {
                "internal"
            } else {
                return None;
            };
            net.cidr_allows(ip)
                .is_none()
                .then(|| format!("NXDOMAIN (answer {ip} is {what}: only a cidr rule can allow it)"))
        })
    }
}

/// The first name of a CNAME `chain` (after the queried one) the policy
/// refuses: one a rule denies, or, when the queried name was allowed by a
/// wildcard rule (`wildcard`) under `net_default = "deny"`, one no rule
/// allows. The name and the deciding rule.
pub fn refused_in_chain<'a>(net: &NetPolicy, chain: &'a [String], wildcard: bool) -> Option<(&'a str, Option<usize>)> {
    chain.iter().skip(1).find_map(|n| {
        if let Some(i) = net.denies_name(n) {
            return Some((n.as_str(), Some(i)));
        }
        if !wildcard {
            return None;
        }
        match net.decide_name(n) {
            (NetAction::Deny, rule) => Some((n.as_str(), rule)),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(toml: &str) -> NetPolicy {
        crate::policy::Policy::from_toml(&format!("name = \"t\"\nnet_default = \"deny\"\n{toml}"), "t")
            .expect("policy")
            .net
    }

    #[test]
    fn internal_and_host_addresses_need_a_cidr_rule() {
        let g = Guards::new(vec!["203.0.113.7".parse().unwrap()]);
        let n = net("[[net]]\nhost = \"a.test\"\naction = \"allow\"\n");
        for ip in [
            "169.254.169.254",
            "10.1.2.3",
            "127.0.0.1",
            "::1",
            "::ffff:127.0.0.1",
            "fd00::1",
            "100.64.0.1",
        ] {
            let why = g
                .internal(&n, &[ip.parse().unwrap()])
                .unwrap_or_else(|| panic!("{ip} is refused"));
            assert!(why.contains("is internal"), "{why}");
        }
        let why = g
            .internal(&n, &["203.0.113.7".parse().unwrap()])
            .expect("the host's own address");
        assert!(why.contains("host's own"), "{why}");
        assert_eq!(g.internal(&n, &["192.0.2.1".parse().unwrap()]), None);
        let allowed =
            net("[[net]]\nhost = \"a.test\"\naction = \"allow\"\n[[net]]\ncidr = \"10.0.0.0/8\"\naction = \"allow\"\n");
        assert_eq!(g.internal(&allowed, &["10.1.2.3".parse().unwrap()]), None);
        assert!(g.internal(&allowed, &["127.0.0.1".parse().unwrap()]).is_some());
    }

    #[test]
    fn a_wildcard_forwards_its_budget_of_new_names() {
        let g = Guards::default();
        let n = net("[[net]]\nhost = \"*.w.test\"\nmax_names = 2\naction = \"allow\"\n[[net]]\nhost = \"x.test\"\naction = \"allow\"\n");
        assert_eq!(n.name_cap(0), Some(2));
        assert_eq!(n.name_cap(1), None, "exact names have no budget: they forward one name");
        assert!(g.take_name(&n, 0, "net[0] *.w.test", "a.w.test").is_ok());
        assert!(g.take_name(&n, 0, "net[0] *.w.test", "b.w.test").is_ok());
        assert!(
            g.take_name(&n, 0, "net[0] *.w.test", "a.w.test").is_ok(),
            "a name already forwarded"
        );
        let why = g.take_name(&n, 0, "net[0] *.w.test", "c.w.test").unwrap_err();
        assert_eq!(why, "NXDOMAIN (net[0] *.w.test: max_names 2 new names a minute)");
        let default = net("[[net]]\nhost = \"*.w.test\"\naction = \"allow\"\n");
        assert_eq!(default.name_cap(0), Some(crate::policy::model::DEFAULT_MAX_NAMES));
    }

    #[test]
    fn chains_through_a_wildcard_need_every_name_allowed() {
        let n = net("[[net]]\nhost = \"*.w.test\"\naction = \"allow\"\n[[net]]\nhost = \"cdn.test\"\naction = \"allow\"\n[[net]]\nhost = \"bad.test\"\naction = \"deny\"\n");
        let chain = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(refused_in_chain(&n, &chain(&["a.w.test", "cdn.test"]), true), None);
        assert_eq!(
            refused_in_chain(&n, &chain(&["a.w.test", "other.test"]), true),
            Some(("other.test", None))
        );
        assert_eq!(
            refused_in_chain(&n, &chain(&["x.test", "other.test"]), false),
            None,
            "an exact rule's chain"
        );
        assert_eq!(
            refused_in_chain(&n, &chain(&["x.test", "bad.test"]), false),
            Some(("bad.test", Some(2))),
            "a denied name refuses any chain"
        );
    }
}
