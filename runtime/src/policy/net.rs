//! Network egress rules on IPv4/IPv6 destinations, by address or by the
//! host name the supervisor's resolver answered them for, and on the
//! other address families as a whole (`family` rules).

use std::net::IpAddr;

use ipnet::IpNet;

use super::model::{NetAction, NetRule, Sni};
use super::names::HostPattern;

/// What a rule matches: an address range, host names, or every address
/// of a family.
#[derive(Debug, Clone)]
enum Target {
    Net(IpNet),
    Host(HostPattern),
    Family(i32),
}

/// The IPv4 address an IPv6 address carries, in any of the forms that
/// reach an IPv4 host through a translator or tunnel: IPv4-mapped
/// (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`, not `::` or `::1`),
/// NAT64 (`64:ff9b::a.b.c.d`), SIIT (`::ffff:0:a.b.c.d`) and 6to4
/// (`2002:AABB:CCDD::/48`).
pub fn embedded_v4(a: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    let o = a.octets();
    let tail = || std::net::Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if let Some(v4) = a.to_ipv4_mapped() {
        return Some(v4);
    }
    let compatible = o[..12] == [0; 12] && o[12..] != [0, 0, 0, 0] && o[12..] != [0, 0, 0, 1];
    let nat64 = o[..12] == [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0];
    let siit = o[..8] == [0; 8] && o[8..12] == [0xff, 0xff, 0, 0];
    if compatible || nat64 || siit {
        return Some(tail());
    }
    (o[..2] == [0x20, 0x02]).then(|| std::net::Ipv4Addr::new(o[2], o[3], o[4], o[5]))
}

/// Whether `addr` is internal, which a name's answer may not bind unless
/// a `cidr` rule allows it ([`NetPolicy::cidr_allows`]): unspecified,
/// loopback, link-local (the cloud metadata service among them), private
/// (RFC 1918, IPv6 ULA fc00::/7), shared (CGNAT 100.64.0.0/10),
/// benchmarking (198.18.0.0/15), this-network or broadcast, in IPv4 or
/// any form an IPv6 address carries one in ([`embedded_v4`]).
pub fn is_internal(addr: IpAddr) -> bool {
    let v4 = |a: std::net::Ipv4Addr| {
        let o = a.octets();
        a.is_unspecified()
            || a.is_loopback()
            || a.is_link_local()
            || a.is_private()
            || o[0] == 0
            || (o[0] == 100 && (64..128).contains(&o[1]))
            || (o[0] == 198 && (o[1] & 0xfe) == 18)
            || a.is_broadcast()
    };
    match addr {
        IpAddr::V4(a) => v4(a),
        IpAddr::V6(a) => {
            let o = a.octets();
            a.is_unspecified()
                || a.is_loopback()
                || (o[0] & 0xfe) == 0xfc
                || (o[0] == 0xfe && (o[1] & 0xc0) == 0x80)
                || embedded_v4(a).is_some_and(v4)
        }
    }
}

/// Address families by name (linux/socket.h), for `family` rules and the
/// audit trail.
const FAMILIES: &[(&str, i32)] = &[
    ("unspec", libc::AF_UNSPEC),
    ("unix", libc::AF_UNIX),
    ("inet", libc::AF_INET),
    ("ax25", libc::AF_AX25),
    ("ipx", libc::AF_IPX),
    ("appletalk", libc::AF_APPLETALK),
    ("x25", libc::AF_X25),
    ("inet6", libc::AF_INET6),
    ("decnet", libc::AF_DECnet),
    ("key", libc::AF_KEY),
    ("netlink", libc::AF_NETLINK),
    ("packet", libc::AF_PACKET),
    ("rds", libc::AF_RDS),
    ("pppox", libc::AF_PPPOX),
    ("llc", libc::AF_LLC),
    ("ib", libc::AF_IB),
    ("mpls", libc::AF_MPLS),
    ("can", libc::AF_CAN),
    ("tipc", libc::AF_TIPC),
    ("bluetooth", libc::AF_BLUETOOTH),
    ("iucv", libc::AF_IUCV),
    ("rxrpc", libc::AF_RXRPC),
    ("isdn", libc::AF_ISDN),
    ("phonet", libc::AF_PHONET),
    ("ieee802154", libc::AF_IEEE802154),
    ("caif", libc::AF_CAIF),
    ("alg", libc::AF_ALG),
    ("nfc", libc::AF_NFC),
    ("vsock", libc::AF_VSOCK),
    ("kcm", 41),
    ("qipcrtr", 42),
    ("smc", 43),
    ("xdp", 44),
    ("mctp", 45),
];

/// The name of address family `family` ("vsock"), or its number.
pub fn family_name(family: i32) -> String {
    FAMILIES
        .iter()
        .find(|(_, f)| *f == family)
        .map(|(n, _)| (*n).to_string())
        .unwrap_or_else(|| family.to_string())
}

/// A `family` rule's value: a name of [`FAMILIES`] or a number below 64
/// (AF_MAX is 46 today). unix, inet and inet6 have rules of their own
/// (the path rules, `cidr` and `host`); unspec is no destination.
fn parse_family(text: &str) -> Result<i32, String> {
    let f = FAMILIES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(text.trim()))
        .map(|(_, f)| *f)
        .or_else(|| text.trim().parse::<i32>().ok().filter(|f| (0..64).contains(f)))
        .ok_or_else(|| format!("{text:?} is not an address family (a name such as \"vsock\" or a number)"))?;
    match f {
        libc::AF_INET | libc::AF_INET6 => Err(format!("{text:?}: IPv4 and IPv6 destinations take cidr or host rules")),
        libc::AF_UNIX => Err(format!(
            "{text:?}: unix addresses are files, which the path rules decide"
        )),
        libc::AF_UNSPEC => Err(format!("{text:?} is no destination")),
        f => Ok(f),
    }
}

/// Compiled network rules; the first match decides, else the default.
#[derive(Debug, Clone)]
pub struct NetPolicy {
    rules: Vec<(Target, Vec<u16>, NetAction)>,
    default: NetAction,
    /// Per rule: the names a wildcard host rule forwards per minute.
    caps: Vec<Option<u32>>,
    /// Per rule: the check of the name on the wire (host rules).
    sni: Vec<Sni>,
    /// Per rule: its HTTP request rules (methods, paths), if any.
    http: Vec<Option<super::http::HttpRule>>,
}

/// The protocol whose name a connection must carry on the wire
/// ([`NetPolicy::wire_check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// A TLS ClientHello's server name.
    Tls,
    /// Every HTTP/1.x request's `Host`.
    Http,
}

impl Default for NetPolicy {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            default: NetAction::Allow,
            caps: Vec::new(),
            sni: Vec::new(),
            http: Vec::new(),
        }
    }
}

/// How a rule decided: its verdict, the rule's index (`None`:
/// `net_default`), and for a `host` rule the index of the name (among the
/// names given) it matched.
pub type Verdict = (NetAction, Option<usize>, Option<usize>);

impl NetPolicy {
    /// Compiles rules; an error gives (rule index, field, message).
    pub fn compile(rules: &[NetRule], default: NetAction) -> Result<Self, (usize, &'static str, String)> {
        let mut out = Vec::with_capacity(rules.len());
        let mut caps = Vec::with_capacity(rules.len());
        let mut sni = Vec::with_capacity(rules.len());
        let mut http = Vec::with_capacity(rules.len());
        for (i, r) in rules.iter().enumerate() {
            http.push(super::http::HttpRule::compile(r).map_err(|(f, why)| (i, f, why))?);
            let target = match (&r.cidr, &r.host) {
                _ if r.family.is_some() && (r.cidr.is_some() || r.host.is_some()) => {
                    return Err((i, "family", "a rule has one of cidr, host or family".into()))
                }
                (None, None) if r.family.is_some() => {
                    if !r.ports.is_empty() {
                        return Err((i, "ports", "a family rule decides every address of the family".into()));
                    }
                    Target::Family(parse_family(r.family.as_deref().unwrap_or("")).map_err(|e| (i, "family", e))?)
                }
                (Some(cidr), None) => Target::Net(
                    cidr.parse()
                        .or_else(|_| cidr.parse::<IpAddr>().map(IpNet::from))
                        .map_err(|_| (i, "cidr", format!("{cidr:?} is not an address or CIDR")))?,
                ),
                (None, Some(host)) => {
                    if host.parse::<IpAddr>().is_ok() {
                        return Err((
                            i,
                            "host",
                            format!("{host:?} is an address, which no lookup answers for: write cidr = {host:?}"),
                        ));
                    }
                    Target::Host(HostPattern::parse(host).map_err(|e| (i, "host", e))?)
                }
                (Some(_), Some(_)) => return Err((i, "host", "a rule has either cidr or host, not both".into())),
                (None, None) => return Err((i, "cidr", "missing: a rule needs cidr, host or family".into())),
            };
            if r.ports.contains(&0) {
                return Err((i, "ports", "port 0 is no destination: list ports 1 to 65535".into()));
            }
            if let Some(n) = r.max_names {
                if !matches!(&target, Target::Host(h) if h.is_wildcard()) {
                    return Err((
                        i,
                        "max_names",
                        "only a wildcard host rule (*.name) has max_names".into(),
                    ));
                }
                if n == 0 {
                    return Err((
                        i,
                        "max_names",
                        "0 would refuse every name: remove the rule instead".into(),
                    ));
                }
            }
            if r.action == NetAction::Ask && matches!(target, Target::Family(_)) {
                return Err((
                    i,
                    "action",
                    "ask applies to cidr and host rules, not to a family".into(),
                ));
            }
            let cap = match &target {
                Target::Host(h) if h.is_wildcard() => Some(r.max_names.unwrap_or(super::model::DEFAULT_MAX_NAMES)),
                _ => None,
            };
            if r.sni.is_some() && !matches!(&target, Target::Host(_)) {
                return Err((i, "sni", "only a host rule checks the name on the wire".into()));
            }
            sni.push(r.sni.unwrap_or_default());
            out.push((target, r.ports.clone(), r.action));
            caps.push(cap);
        }
        Ok(Self {
            rules: out,
            default,
            caps,
            sni,
            http,
        })
    }

    /// Whether any rule names hosts: the container's lookups then go
    /// through the supervisor's resolver.
    pub fn has_names(&self) -> bool {
        self.rules.iter().any(|(t, _, _)| matches!(t, Target::Host(_)))
    }

    /// The verdict for a destination address and port. IPv4-mapped IPv6
    /// addresses (`::ffff:a.b.c.d`) are matched as IPv4.
    pub fn decide(&self, addr: IpAddr, port: u16) -> NetAction {
        self.decide_by(addr, port).0
    }

    /// [`Self::decide`], with the index (in rule order) of the rule that
    /// decided; `None` for `net_default`. `host` rules match no address
    /// here (see [`Self::decide_named`]).
    pub fn decide_by(&self, addr: IpAddr, port: u16) -> (NetAction, Option<usize>) {
        let (a, i, _) = self.decide_named(addr, port, &[]);
        (a, i)
    }

    /// The verdict for a destination address and port that the resolver
    /// answered for `names` (normalized, see
    /// [`super::names::normalize`]; empty for an address never answered):
    /// the first rule that matches the address (`cidr`) or one of the
    /// names (`host`), and the port, decides; else `net_default`.
    pub fn decide_named(&self, addr: IpAddr, port: u16, names: &[String]) -> Verdict {
        let one = |a: IpAddr| -> Verdict {
            for (i, (target, ports, action)) in self.rules.iter().enumerate() {
                if !(ports.is_empty() || ports.contains(&port)) {
                    continue;
                }
                match target {
                    Target::Net(net) if net.contains(&a) => return (*action, Some(i), None),
                    Target::Host(h) => {
                        if let Some(n) = names.iter().position(|n| h.matches(n)) {
                            return (*action, Some(i), Some(n));
                        }
                    }
                    Target::Net(_) | Target::Family(_) => {}
                }
            }
            (self.default, None, None)
        };
        match addr {
            IpAddr::V6(v6) => {
                if let Some(v4) = v6.to_ipv4_mapped() {
                    return one(IpAddr::V4(v4));
                }
                // Other ways an IPv6 address carries an IPv4 one
                // (IPv4-compatible, NAT64, SIIT, 6to4: [`embedded_v4`]):
                // the stricter reading decides. (:: and ::1 are no
                // IPv4-compatible addresses, RFC 4291 2.5.5.1.)
                let embedded = embedded_v4(v6).map(IpAddr::V4);
                // The stricter reading decides: deny, then ask.
                match (one(addr), embedded.map(one)) {
                    (d @ (NetAction::Deny, _, _), _) | (_, Some(d @ (NetAction::Deny, _, _))) => d,
                    (q @ (NetAction::Ask, _, _), _) | (_, Some(q @ (NetAction::Ask, _, _))) => q,
                    (a, _) => a,
                }
            }
            v4 => one(v4),
        }
    }

    /// Why `net_default` decided a destination no rule matched: the first
    /// `allow` or `ask` rule that matches `addr` (or one of `names`) on
    /// other ports, with those ports, so a denial can say "port not
    /// allowed" rather than "no rule".
    pub fn port_miss(&self, addr: IpAddr, names: &[String]) -> Option<(usize, &[u16])> {
        let addr = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(addr),
            v4 => v4,
        };
        self.rules.iter().enumerate().find_map(|(i, (t, ports, action))| {
            let hit = match t {
                Target::Net(net) => net.contains(&addr),
                Target::Host(h) => names.iter().any(|n| h.matches(n)),
                Target::Family(_) => false,
            };
            (hit && !ports.is_empty() && *action != NetAction::Deny).then_some((i, ports.as_slice()))
        })
    }

    /// Whether a connection may go through the relay that checks names on
    /// the wire: some `host` rule that does not deny has its check on.
    pub fn checks_wire(&self) -> bool {
        self.rules
            .iter()
            .zip(&self.sni)
            .any(|((t, _, a), sni)| matches!(t, Target::Host(_)) && *a != NetAction::Deny && *sni != Sni::Off)
    }

    /// What a connection to `port` that rule `i` allowed must carry on the
    /// wire: for a `host` rule that does not turn the check off, on a TLS
    /// or HTTP port ([`super::model::TLS_PORTS`], [`super::model::HTTP_PORTS`]),
    /// the protocol and whether a connection naming no host passes.
    pub fn wire_check(&self, i: usize, port: u16) -> Option<(Wire, Sni)> {
        let (Target::Host(_), _, action) = self.rules.get(i)? else {
            return None;
        };
        let sni = *self.sni.get(i)?;
        if *action == NetAction::Deny || sni == Sni::Off {
            return None;
        }
        if super::model::TLS_PORTS.contains(&port) {
            Some((Wire::Tls, sni))
        } else if super::model::HTTP_PORTS.contains(&port) {
            Some((Wire::Http, sni))
        } else {
            None
        }
    }

    /// Rule `i`'s HTTP request rules (methods, paths), if it has any.
    pub fn http_rule(&self, i: usize) -> Option<&super::http::HttpRule> {
        self.http.get(i).and_then(Option::as_ref)
    }

    /// How many distinct names rule `i` forwards per minute, when it is
    /// a wildcard host rule ([`super::model::NetRule::max_names`]).
    pub fn name_cap(&self, i: usize) -> Option<u32> {
        self.caps.get(i).copied().flatten()
    }

    /// The first `cidr` rule that allows (or asks about) `addr`
    /// explicitly, wherever it stands: an internal address a name was
    /// answered with is bound only then ([`is_internal`]).
    pub fn cidr_allows(&self, addr: IpAddr) -> Option<usize> {
        let addr = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(addr),
            v4 => v4,
        };
        self.rules.iter().position(|(t, _, action)| {
            matches!(t, Target::Net(net) if net.contains(&addr)) && *action != NetAction::Deny
        })
    }

    /// The verdict for an address of `family` (not inet, inet6 or unix):
    /// the first `family` rule naming it, else `None` (the caller applies
    /// [`Self::default_action`] or its own rule for the family).
    pub fn decide_family(&self, family: i32) -> Option<(NetAction, usize)> {
        self.rules.iter().enumerate().find_map(|(i, (t, _, a))| match t {
            Target::Family(f) if *f == family => Some((*a, i)),
            _ => None,
        })
    }

    /// `net_default`.
    pub fn default_action(&self) -> NetAction {
        self.default
    }

    /// Whether the container's resolver may look `name` (normalized) up:
    /// the first `host` rule that matches it decides (a `deny` rule with
    /// `ports` refuses only those ports, not the lookup, and is skipped);
    /// else `net_default`. Returns the verdict and the deciding rule.
    pub fn decide_name(&self, name: &str) -> (NetAction, Option<usize>) {
        self.first_host_rule(name)
            .map(|(a, i)| (a, Some(i)))
            .unwrap_or((self.default, None))
    }

    /// The `host` rule that denies `name` outright, if the first `host`
    /// rule that matches it does (ports as in [`Self::decide_name`]): a
    /// CNAME chain through such a name is refused.
    pub fn denies_name(&self, name: &str) -> Option<usize> {
        match self.first_host_rule(name) {
            Some((NetAction::Deny, i)) => Some(i),
            _ => None,
        }
    }

    fn first_host_rule(&self, name: &str) -> Option<(NetAction, usize)> {
        self.rules
            .iter()
            .enumerate()
            .find_map(|(i, (t, ports, action))| match t {
                Target::Host(h) if (ports.is_empty() || *action != NetAction::Deny) && h.matches(name) => {
                    Some((*action, i))
                }
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_ports_and_mapped_addresses() {
        let rules = vec![
            NetRule {
                cidr: Some("10.0.0.1".into()),
                host: None,
                family: None,
                ports: vec![443],
                action: NetAction::Allow,
                max_names: None,
                sni: None,
                methods: Vec::new(),
                paths: Vec::new(),
                message: None,
                note: None,
            },
            NetRule {
                cidr: Some("10.0.0.0/8".into()),
                host: None,
                family: None,
                ports: vec![],
                action: NetAction::Deny,
                max_names: None,
                sni: None,
                methods: Vec::new(),
                paths: Vec::new(),
                message: None,
                note: None,
            },
        ];
        let p = NetPolicy::compile(&rules, NetAction::Allow).unwrap();
        assert_eq!(p.decide("10.0.0.1".parse().unwrap(), 443), NetAction::Allow);
        assert_eq!(p.decide("10.0.0.1".parse().unwrap(), 80), NetAction::Deny);
        assert_eq!(p.decide("::ffff:10.1.2.3".parse().unwrap(), 80), NetAction::Deny);
        assert_eq!(p.decide("192.168.0.1".parse().unwrap(), 80), NetAction::Allow);
        assert_eq!(
            p.decide("64:ff9b::a00:5".parse().unwrap(), 80),
            NetAction::Deny,
            "NAT64"
        );
        assert_eq!(
            p.decide("::10.0.0.5".parse().unwrap(), 80),
            NetAction::Deny,
            "IPv4-compatible"
        );
        assert_eq!(p.decide("::1".parse().unwrap(), 80), NetAction::Allow);
        // A deny-by-default policy that allows the loopback by cidr: ::1 is
        // not read as the IPv4-compatible 0.0.0.1.
        let lo = NetRule {
            cidr: Some("::1/128".into()),
            host: None,
            family: None,
            ports: vec![],
            action: NetAction::Allow,
            max_names: None,
            sni: None,
            methods: Vec::new(),
            paths: Vec::new(),
            message: None,
            note: None,
        };
        let p = NetPolicy::compile(&[lo], NetAction::Deny).unwrap();
        assert_eq!(p.decide("::1".parse().unwrap(), 9), NetAction::Allow);
        assert_eq!(p.decide("::".parse().unwrap(), 9), NetAction::Deny);
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn family_rules() {
        let fam = |f: &str, ports: &[u16]| NetRule {
            cidr: None,
            host: None,
            family: Some(f.into()),
            ports: ports.to_vec(),
            action: NetAction::Allow,
            max_names: None,
            sni: None,
            methods: Vec::new(),
            paths: Vec::new(),
            message: None,
            note: None,
        };
        let p = NetPolicy::compile(&[fam("vsock", &[]), fam("31", &[])], NetAction::Deny).unwrap();
        assert_eq!(p.decide_family(libc::AF_VSOCK), Some((NetAction::Allow, 0)));
        assert_eq!(p.decide_family(libc::AF_BLUETOOTH), Some((NetAction::Allow, 1)));
        assert_eq!(p.decide_family(libc::AF_PACKET), None);
        for bad in ["inet", "inet6", "unix", "unspec", "nope", "64"] {
            let e = NetPolicy::compile(&[fam(bad, &[])], NetAction::Deny).unwrap_err();
            assert_eq!((e.0, e.1), (0, "family"), "{bad}");
        }
        let e = NetPolicy::compile(&[fam("vsock", &[22])], NetAction::Deny).unwrap_err();
        assert_eq!(e.1, "ports");
        assert_eq!(family_name(40), "vsock");
        assert_eq!(family_name(63), "63");
    }

    #[test]
    fn an_address_as_a_host_and_port_0_are_refused() {
        let e =
            NetPolicy::compile(&[rule(None, Some("10.0.0.1"), &[], NetAction::Allow)], NetAction::Deny).unwrap_err();
        assert_eq!((e.0, e.1), (0, "host"));
        assert!(e.2.contains("cidr"), "{}", e.2);
        let e = NetPolicy::compile(
            &[rule(Some("10.0.0.0/8"), None, &[0], NetAction::Allow)],
            NetAction::Deny,
        )
        .unwrap_err();
        assert_eq!((e.0, e.1), (0, "ports"));
    }

    fn rule(cidr: Option<&str>, host: Option<&str>, ports: &[u16], action: NetAction) -> NetRule {
        NetRule {
            cidr: cidr.map(Into::into),
            host: host.map(Into::into),
            family: None,
            ports: ports.to_vec(),
            action,
            max_names: None,
            sni: None,
            methods: Vec::new(),
            paths: Vec::new(),
            message: None,
            note: None,
        }
    }

    #[test]
    fn names_in_rule_order() {
        let rules = vec![
            rule(None, Some("evil.example.com"), &[], NetAction::Deny),
            rule(None, Some("*.example.com"), &[443], NetAction::Allow),
            rule(Some("10.0.0.0/8"), None, &[], NetAction::Deny),
            rule(None, Some("pypi.org"), &[], NetAction::Allow),
        ];
        let p = NetPolicy::compile(&rules, NetAction::Deny).unwrap();
        assert!(p.has_names());
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            p.decide_named(ip, 443, &names(&["a.example.com"])),
            (NetAction::Allow, Some(1), Some(0))
        );
        assert_eq!(
            p.decide_named(ip, 80, &names(&["a.example.com"])),
            (NetAction::Deny, Some(2), None)
        );
        assert_eq!(
            p.decide_named(ip, 443, &[]),
            (NetAction::Deny, Some(2), None),
            "an IP literal"
        );
        let other: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(
            p.decide_named(other, 80, &names(&["x", "pypi.org"])),
            (NetAction::Allow, Some(3), Some(1))
        );
        assert_eq!(p.decide_named(other, 80, &[]), (NetAction::Deny, None, None));
        assert_eq!(p.decide_name("pypi.org"), (NetAction::Allow, Some(3)));
        assert_eq!(p.decide_name("evil.example.com"), (NetAction::Deny, Some(0)));
        assert_eq!(p.decide_name("b.example.com"), (NetAction::Allow, Some(1)));
        assert_eq!(p.decide_name("example.org"), (NetAction::Deny, None));
        assert_eq!(p.denies_name("example.org"), None, "only a rule refuses a chain");
        assert_eq!(p.denies_name("evil.example.com"), Some(0));
    }

    #[test]
    fn the_agent_policy() {
        let p = crate::policy::Policy::load("agent").unwrap();
        let n = &p.net;
        assert!(n.has_names());
        assert_eq!(n.decide_name("pypi.org").0, NetAction::Allow);
        assert_eq!(n.decide_name("raw.githubusercontent.com").0, NetAction::Allow);
        assert_eq!(n.decide_name("example.com").0, NetAction::Deny);
        let names = vec!["pypi.org".to_string()];
        let cdn: IpAddr = "151.101.0.223".parse().unwrap();
        assert_eq!(n.decide_named(cdn, 443, &names).0, NetAction::Allow);
        assert_eq!(n.decide_named(cdn, 22, &names).0, NetAction::Deny, "port 443 only");
        assert_eq!(n.decide_named(cdn, 443, &[]).0, NetAction::Deny, "an IP literal");
        let metadata: IpAddr = "169.254.169.254".parse().unwrap();
        assert_eq!(
            n.decide_named(metadata, 443, &names).0,
            NetAction::Deny,
            "no name's answer reaches the metadata service"
        );
    }

    #[test]
    fn bad_rules() {
        let e = NetPolicy::compile(
            &[rule(Some("10.0.0.0/8"), Some("a.com"), &[], NetAction::Deny)],
            NetAction::Allow,
        );
        assert_eq!(e.unwrap_err().1, "host");
        let e = NetPolicy::compile(&[rule(None, None, &[], NetAction::Deny)], NetAction::Allow);
        assert_eq!(e.unwrap_err().1, "cidr");
        let e = NetPolicy::compile(&[rule(None, Some("a..com"), &[], NetAction::Deny)], NetAction::Allow);
        assert!(e.unwrap_err().2.contains("empty label"));
    }

    #[test]
    fn max_names_only_on_wildcards_and_ask_not_on_families() {
        let mut r = rule(None, Some("a.test"), &[], NetAction::Allow);
        r.max_names = Some(4);
        let e = NetPolicy::compile(&[r], NetAction::Deny).unwrap_err();
        assert_eq!((e.0, e.1), (0, "max_names"));
        let mut r = rule(None, Some("*.a.test"), &[], NetAction::Allow);
        r.max_names = Some(0);
        assert_eq!(NetPolicy::compile(&[r], NetAction::Deny).unwrap_err().1, "max_names");
        let mut fam = rule(None, None, &[], NetAction::Ask);
        fam.family = Some("vsock".into());
        assert_eq!(NetPolicy::compile(&[fam], NetAction::Deny).unwrap_err().1, "action");
    }

    #[test]
    fn internal_addresses_and_explicit_cidr_rules() {
        for ip in [
            "0.0.0.0",
            "127.0.0.53",
            "169.254.169.254",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "100.100.0.1",
            "::",
            "::1",
            "fe80::1",
            "fc00::1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["192.0.2.1", "8.8.8.8", "2001:db8::1", "100.128.0.1", "172.32.0.1"] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
        let p = NetPolicy::compile(
            &[
                rule(Some("10.0.0.0/8"), None, &[], NetAction::Deny),
                rule(Some("10.1.0.0/16"), None, &[443], NetAction::Allow),
            ],
            NetAction::Deny,
        )
        .unwrap();
        assert_eq!(
            p.cidr_allows("10.1.2.3".parse().unwrap()),
            Some(1),
            "wherever it stands"
        );
        assert_eq!(p.cidr_allows("::ffff:10.1.2.3".parse().unwrap()), Some(1));
        assert_eq!(p.cidr_allows("10.2.0.1".parse().unwrap()), None);
    }
}
