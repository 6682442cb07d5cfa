//! Network egress rules on IPv4/IPv6 destinations.

use std::net::IpAddr;

use ipnet::IpNet;

use super::model::{NetAction, NetRule};

/// Compiled network rules; the first match decides, else the default.
#[derive(Debug, Clone)]
pub struct NetPolicy {
    rules: Vec<(IpNet, Vec<u16>, NetAction)>,
    default: NetAction,
}

impl Default for NetPolicy {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            default: NetAction::Allow,
        }
    }
}

impl NetPolicy {
    /// Compiles rules; an error gives (rule index, field, message).
    pub fn compile(rules: &[NetRule], default: NetAction) -> Result<Self, (usize, &'static str, String)> {
        let mut out = Vec::with_capacity(rules.len());
        for (i, r) in rules.iter().enumerate() {
            let net: IpNet = r
                .cidr
                .parse()
                .or_else(|_| r.cidr.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| (i, "cidr", format!("{:?} is not an address or CIDR", r.cidr)))?;
            out.push((net, r.ports.clone(), r.action));
        }
        Ok(Self { rules: out, default })
    }

    /// The verdict for a destination address and port. IPv4-mapped IPv6
    /// addresses (`::ffff:a.b.c.d`) are matched as IPv4.
    pub fn decide(&self, addr: IpAddr, port: u16) -> NetAction {
        self.decide_by(addr, port).0
    }

    /// [`Self::decide`], with the index (in rule order) of the rule that
    /// decided; `None` for `net_default`.
    pub fn decide_by(&self, addr: IpAddr, port: u16) -> (NetAction, Option<usize>) {
        let one = |a: IpAddr| {
            self.rules
                .iter()
                .position(|(net, ports, _)| net.contains(&a) && (ports.is_empty() || ports.contains(&port)))
                .map(|i| (self.rules[i].2, Some(i)))
                .unwrap_or((self.default, None))
        };
        match addr {
            IpAddr::V6(v6) => {
                if let Some(v4) = v6.to_ipv4_mapped() {
                    return one(IpAddr::V4(v4));
                }
                // Other ways an IPv6 address carries an IPv4 one (IPv4-
                // compatible ::a.b.c.d, NAT64 64:ff9b::/96): denied if
                // either reading is.
                let o = v6.octets();
                let embedded = (o[..12] == [0; 12] || o[..12] == [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0])
                    .then(|| IpAddr::V4(std::net::Ipv4Addr::new(o[12], o[13], o[14], o[15])));
                match (one(addr), embedded.map(one)) {
                    (d @ (NetAction::Deny, _), _) | (_, Some(d @ (NetAction::Deny, _))) => d,
                    (a, _) => a,
                }
            }
            v4 => one(v4),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_ports_and_mapped_addresses() {
        let rules = vec![
            NetRule {
                cidr: "10.0.0.1".into(),
                ports: vec![443],
                action: NetAction::Allow,
                note: None,
            },
            NetRule {
                cidr: "10.0.0.0/8".into(),
                ports: vec![],
                action: NetAction::Deny,
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
    }
}
