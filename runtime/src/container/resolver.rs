//! The container side of egress by name (see [`crate::supervisor::dns`]):
//! under a policy with `host` rules, `create` points the container's
//! /etc/resolv.conf at the supervisor's resolver and, once the container's
//! network namespace exists, makes the resolver's sockets there and hands
//! them to the supervisor before the container runs.

use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxNamespaceType, Mount, Spec};

use super::{io, Error, Result};
use crate::policy::Policy;
use crate::supervisor::dns::{Handover, MAX_NAMESERVERS, RESOLVER_V4, WORKERS};

/// The resolv.conf `create` writes in the container's cordon dir and
/// bind-mounts read-only over the container's /etc/resolv.conf.
pub const RESOLV_CONF: &str = "resolv.conf";

/// What the resolver of one container uses.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The nameservers the container was configured with (its own
    /// resolv.conf: the bundle's mount of /etc/resolv.conf, else the
    /// rootfs's), port 53, at most [`MAX_NAMESERVERS`].
    pub nameservers: Vec<SocketAddr>,
    /// The resolv.conf written for the container.
    pub conf: PathBuf,
}

/// Whether `spec` is a Kubernetes pod's sandbox (its "pause" container,
/// which holds the pod's namespaces and runs nothing that connects), as
/// containerd's CRI (`io.kubernetes.cri.container-type`) and CRI-O
/// (`io.kubernetes.cri-o.ContainerType`) mark it. It gets no resolver: the
/// pod's network namespace keeps port 53 of 127.0.0.53 for the pod's
/// container, whose lookups are the ones to answer.
pub fn is_pod_sandbox(spec: &Spec) -> bool {
    spec.annotations().as_ref().is_some_and(|a| {
        ["io.kubernetes.cri.container-type", "io.kubernetes.cri-o.ContainerType"]
            .iter()
            .any(|k| a.get(*k).is_some_and(|v| v == "sandbox"))
    })
}

/// Refuses a policy with `host` rules for a container on the host's
/// network: the resolver's socket would be the host's port 53.
pub fn check_network(spec: &Spec, policy: &Policy) -> Result<()> {
    if !policy.net.has_names() {
        return Ok(());
    }
    let own_netns = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .is_some_and(|ns| ns.iter().any(|n| n.typ() == LinuxNamespaceType::Network));
    let at = policy
        .source
        .net
        .iter()
        .position(|r| r.host.is_some())
        .unwrap_or_default();
    if !own_netns {
        return Err(Error::HostRulesNeedNetns {
            policy: policy.name.clone(),
            at,
        });
    }
    if let Some(cap) = redirecting_capability(spec, policy) {
        return Err(Error::HostRulesCapability {
            policy: policy.name.clone(),
            at,
            cap,
        });
    }
    Ok(())
}

/// For `exec` into a container whose policy has `host` rules: refuses
/// `--cap` additions and a process.json holding CAP_NET_ADMIN (or
/// CAP_NET_RAW where raw sockets are allowed), for the reason
/// [`check_network`] gives.
pub fn check_exec(policy: &Policy, caps: &[String], process: Option<&Path>) -> Result<()> {
    if !policy.net.has_names() {
        return Ok(());
    }
    let mut spec = Spec::default();
    let mut p = match process {
        Some(path) => {
            let text = std::fs::read(path).map_err(io(format!("read {}", path.display())))?;
            serde_json::from_slice::<oci_spec::runtime::Process>(&text).map_err(|source| Error::Parse {
                path: path.to_path_buf(),
                source,
            })?
        }
        None => oci_spec::runtime::Process::default(),
    };
    if process.is_none() {
        p.set_capabilities(None);
    }
    let mut extra: std::collections::HashSet<oci_spec::runtime::Capability> = Default::default();
    for c in caps {
        let name = c.strip_prefix("CAP_").unwrap_or(c);
        if let Ok(cap) = name.parse() {
            extra.insert(cap);
        }
    }
    if !extra.is_empty() {
        let mut all = p.capabilities().clone().unwrap_or_default();
        let mut b = all.bounding().clone().unwrap_or_default();
        b.extend(extra);
        all.set_bounding(Some(b));
        p.set_capabilities(Some(all));
    }
    spec.set_process(Some(p));
    if let Some(cap) = redirecting_capability(&spec, policy) {
        return Err(Error::ExecCapability {
            policy: policy.name.clone(),
            cap,
        });
    }
    Ok(())
}

/// A capability of the container's process that would let it take over
/// the resolver's way to its nameservers inside its own network namespace:
/// CAP_NET_ADMIN (addresses, routes, netfilter), or CAP_NET_RAW where the
/// policy lets raw sockets be made (forged answers). Any capability set
/// counts.
pub fn redirecting_capability(spec: &Spec, policy: &Policy) -> Option<&'static str> {
    use oci_spec::runtime::Capability;
    let caps = spec.process().as_ref().and_then(|p| p.capabilities().as_ref())?;
    let sets = [
        caps.bounding(),
        caps.effective(),
        caps.permitted(),
        caps.inheritable(),
        caps.ambient(),
    ];
    let holds = |c: Capability| sets.iter().any(|s| s.as_ref().is_some_and(|s| s.contains(&c)));
    if holds(Capability::NetAdmin) {
        return Some("CAP_NET_ADMIN");
    }
    let raw_allowed = crate::abi::table::number("socket").is_some_and(|nr| {
        let args = [libc::AF_INET as u64, libc::SOCK_RAW as u64, 0, 0, 0, 0];
        policy.decide(nr, &args).0 != crate::policy::Action::Deny
    });
    (holds(Capability::NetRaw) && raw_allowed).then_some("CAP_NET_RAW")
}

/// The resolv.conf the container was configured with: the source of the
/// bundle's mount on /etc/resolv.conf (as engines give one), else the
/// rootfs's own file (not followed through a symlink). Empty when there is
/// none.
fn original(spec: &Spec, bundle: &Path) -> String {
    let mounted = spec
        .mounts()
        .iter()
        .flatten()
        .rfind(|m| m.destination() == Path::new("/etc/resolv.conf"))
        .and_then(|m| m.source().clone());
    if let Some(src) = mounted {
        let src = if src.is_absolute() { src } else { bundle.join(src) };
        return std::fs::read_to_string(src).unwrap_or_default();
    }
    let Some(root) = spec.root().as_ref().map(|r| r.path().clone()) else {
        return String::new();
    };
    let root = if root.is_absolute() { root } else { bundle.join(root) };
    let Ok(dir) = std::fs::File::open(root) else {
        return String::new();
    };
    crate::sys::open_beneath_no_symlinks(dir.as_fd(), Path::new("etc/resolv.conf"))
        .ok()
        .and_then(|fd| std::io::read_to_string(std::fs::File::from(fd)).ok())
        .unwrap_or_default()
}

/// Splits a resolv.conf (resolv.conf(5)): its nameservers (port 53;
/// scoped IPv6 addresses and the resolver's own address skipped; at most
/// [`MAX_NAMESERVERS`]) and its other lines that still apply (`search`,
/// `domain`, `options`).
pub fn parse(conf: &str) -> (Vec<SocketAddr>, Vec<String>) {
    let mut servers = Vec::new();
    let mut keep = Vec::new();
    for line in conf.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("nameserver") => {
                if let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok()) {
                    if ip != IpAddr::V4(RESOLVER_V4) && servers.len() < MAX_NAMESERVERS {
                        servers.push(SocketAddr::new(ip, 53));
                    }
                }
            }
            Some("search" | "domain" | "options") => keep.push(line.trim().to_string()),
            _ => {}
        }
    }
    (servers, keep)
}

/// Writes the container's resolv.conf in `dir` and returns the plan and
/// the bind mount that puts it on /etc/resolv.conf (to add after the
/// bundle's own mounts, so it wins).
pub fn prepare(dir: &Path, bundle: &Path, spec: &Spec) -> Result<(Plan, Mount)> {
    let (nameservers, keep) = parse(&original(spec, bundle));
    let mut text = format!(
        "# cordon: lookups go to the supervisor's resolver, which applies the policy's host rules\nnameserver {RESOLVER_V4}\n"
    );
    for l in keep {
        text.push_str(&l);
        text.push('\n');
    }
    let conf = dir.join(RESOLV_CONF);
    std::fs::write(&conf, text).map_err(io(format!("write {}", conf.display())))?;
    std::fs::set_permissions(&conf, std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .map_err(io(format!("chmod {}", conf.display())))?;
    let mut mount = Mount::default();
    mount.set_destination(PathBuf::from("/etc/resolv.conf"));
    mount.set_typ(Some("bind".into()));
    mount.set_source(Some(conf.clone()));
    mount.set_options(Some(
        ["rbind", "ro", "nosuid", "nodev", "noexec"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    ));
    Ok((Plan { nameservers, conf }, mount))
}

/// Makes the resolver's sockets in the network namespace of host pid
/// `pid` (on a thread of its own that joins it; `lo` is set up there) and
/// hands them to the supervisor of container dir `dir`. A nameserver that
/// cannot be reached from that namespace (no route: a container without
/// network), or that is an address of the namespace itself (loopback, an
/// interface's: something inside could answer for it), is left out;
/// lookups of allowed names then get SERVFAIL.
pub fn hand_over(dir: &Path, pid: i32, plan: &Plan) -> Result<()> {
    let ns =
        std::fs::File::open(format!("/proc/{pid}/ns/net")).map_err(io("open the container's network namespace"))?;
    let servers = plan.nameservers.clone();
    let made = std::thread::spawn(move || -> std::io::Result<Handover> {
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)?;
        let _ = crate::sys::set_link_up("lo");
        let address = SocketAddr::new(IpAddr::V4(RESOLVER_V4), 53);
        let listen = UdpSocket::bind(address).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                std::io::Error::other(format!(
                    "{address} is taken in this network namespace (another container's resolver, or a DNS server of its own): one namespace holds one resolver (a fork of a container in it: `cordon fork --netns new` gives the fork a namespace of its own)"
                ))
            } else {
                e
            }
        })?;
        let upstream_socket = |ns: &SocketAddr| -> std::io::Result<OwnedFd> {
            let any: SocketAddr = if ns.is_ipv4() {
                "0.0.0.0:0".parse().map_err(std::io::Error::other)?
            } else {
                "[::]:0".parse().map_err(std::io::Error::other)?
            };
            let s = UdpSocket::bind(any)?;
            s.connect(ns)?;
            s.set_nonblocking(true)?;
            Ok(OwnedFd::from(s))
        };
        let tcp = TcpListener::bind(address)?;
        // A nameserver is used only if it is reachable and not an address
        // of this namespace itself (loopback, the resolver's own, an
        // interface's: the kernel then picks it as the source too): a
        // process inside could bind it and answer for any allowed name,
        // binding addresses of its choice to the name.
        let outside = |ns: &SocketAddr| -> bool {
            upstream_socket(ns)
                .ok()
                .and_then(|fd| UdpSocket::from(fd).local_addr().ok())
                .is_some_and(|local| !local_to_namespace(ns.ip(), local.ip()))
        };
        let reachable: Vec<SocketAddr> = servers.into_iter().filter(outside).collect();
        // One set per worker, and one for the TCP server.
        let mut upstream = Vec::with_capacity(WORKERS + 1);
        for _ in 0..=WORKERS {
            upstream.push(reachable.iter().map(upstream_socket).collect::<std::io::Result<Vec<_>>>()?);
        }
        Ok(Handover {
            listen: OwnedFd::from(listen),
            tcp: OwnedFd::from(tcp),
            address,
            nameservers: reachable,
            upstream,
        })
    })
    .join()
    .map_err(|_| Error::ResolverThread)?
    .map_err(io("make the resolver's sockets in the container's network namespace"))?;
    let mut sock = crate::supervisor::connect(dir).map_err(io("connect to the supervisor"))?;
    crate::supervisor::handshake::send_resolver(&mut sock, &made).map_err(io("hand the resolver to the supervisor"))
}

/// Whether nameserver `ns` is an address of the namespace the resolver's
/// socket connected to it from `local` (the source the kernel chose):
/// loopback, unspecified or multicast (v4-mapped forms too), or `local`
/// itself, which the kernel picks for a destination of its own.
fn local_to_namespace(ns: IpAddr, local: IpAddr) -> bool {
    let ip = ns.to_canonical();
    ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() || local.to_canonical() == ip
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pod_sandbox_is_known_by_its_annotation() {
        let spec = |k: &str, v: &str| -> oci_spec::runtime::Spec {
            let mut s = oci_spec::runtime::Spec::default();
            s.set_annotations(Some([(k.to_string(), v.to_string())].into_iter().collect()));
            s
        };
        assert!(super::is_pod_sandbox(&spec(
            "io.kubernetes.cri.container-type",
            "sandbox"
        )));
        assert!(super::is_pod_sandbox(&spec(
            "io.kubernetes.cri-o.ContainerType",
            "sandbox"
        )));
        assert!(!super::is_pod_sandbox(&spec(
            "io.kubernetes.cri.container-type",
            "container"
        )));
        assert!(!super::is_pod_sandbox(&oci_spec::runtime::Spec::default()));
    }

    #[test]
    fn nameservers_of_the_namespace_itself_are_not_used() {
        use super::local_to_namespace as local;
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        let src = ip("10.77.0.2");
        assert!(local(ip("127.0.0.1"), ip("127.0.0.1")));
        assert!(local(ip("127.0.0.53"), src));
        assert!(local(ip("::1"), ip("::1")));
        assert!(local(ip("::ffff:127.0.0.1"), src));
        assert!(local(ip("0.0.0.0"), src));
        assert!(local(ip("10.77.0.2"), src), "an interface's own address");
        assert!(local(ip("::ffff:10.77.0.2"), src));
        assert!(!local(ip("10.77.0.1"), src));
        assert!(!local(ip("2001:db8::1"), ip("2001:db8::2")));
    }

    use super::*;

    #[test]
    fn resolv_conf() {
        let (ns, keep) = parse(
            "# comment\nnameserver 10.0.0.2\nnameserver fe80::1%eth0\nnameserver 127.0.0.53\nsearch corp.example\n\
             nameserver ::1\noptions ndots:2\nnameserver 10.0.0.3\nnameserver 10.0.0.4\n",
        );
        assert_eq!(
            ns,
            [
                "10.0.0.2:53".parse().unwrap(),
                "[::1]:53".parse().unwrap(),
                "10.0.0.3:53".parse().unwrap()
            ]
        );
        assert_eq!(keep, ["search corp.example", "options ndots:2"]);
    }
}
