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
        let addr = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(addr),
            v4 => v4,
        };
        self.rules
            .iter()
            .find(|(net, ports, _)| net.contains(&addr) && (ports.is_empty() || ports.contains(&port)))
            .map(|&(_, _, a)| a)
            .unwrap_or(self.default)
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
    }
}
