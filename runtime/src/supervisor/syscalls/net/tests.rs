//! Unit tests of the network handlers.

use super::super::task::fake::Fake;
use super::*;

fn v4(ip: [u8; 4], port: u16) -> Addr {
    Addr::from_bytes(&sin(libc::AF_INET as u16, port, ip)).unwrap()
}

const RULES: &str = "name = 't'
[[net]]
cidr = '10.0.0.0/8'
action = 'deny'
[[net]]
host = '*.example.com'
ports = [443]
action = 'allow'
[[net]]
cidr = '0.0.0.0/0'
ports = [443]
action = 'deny'
";

#[test]
fn a_denied_network_gets_eperm_naming_its_rule() {
    let t = Fake::new(RULES, 0);
    let (detail, verdict) = check(&t, &v4([10, 1, 2, 3], 80), false);
    assert_eq!(detail, "10.1.2.3:80");
    let (errno, rule) = verdict.unwrap_err();
    assert_eq!(errno, libc::EPERM);
    assert!(rule.contains("10.0.0.0/8"), "{rule}");
}

/// Other families follow their `family` rule, else `net_default`,
/// recorded either way; netlink without a rule is allowed; unix and
/// AF_UNSPEC are no network destination.
#[test]
fn other_families_follow_family_rules_and_net_default() {
    let addr = |family: i32| Addr::from_bytes(&[&(family as u16).to_ne_bytes()[..], &[0u8; 14]].concat()).unwrap();
    let deny = Fake::new("name = 'd'\nnet_default = 'deny'\n", 0);
    let (detail, verdict) = check(&deny, &addr(libc::AF_VSOCK), false);
    assert_eq!(detail, "family 40 (vsock)");
    assert_eq!(
        verdict,
        Err((libc::EPERM, "net_default (no rule names vsock addresses)".into()))
    );
    assert!(check(&deny, &addr(libc::AF_NETLINK), true)
        .1
        .unwrap()
        .unwrap()
        .starts_with("netlink"));
    assert_eq!(check(&deny, &addr(libc::AF_UNSPEC), false).1, Ok(None));
    let allow = Fake::new("name = 'a'\n[[net]]\nfamily = 'bluetooth'\naction = 'deny'\n", 0);
    let (_, verdict) = check(&allow, &addr(libc::AF_BLUETOOTH), true);
    assert_eq!(verdict.unwrap_err().1, "net[0] bluetooth");
    let (_, verdict) = check(&allow, &addr(libc::AF_VSOCK), false);
    assert_eq!(verdict, Ok(Some("net_default (no rule names vsock addresses)".into())));
}

#[test]
fn routing_control_messages_are_named() {
    let c = |level, kind| Cmsg {
        level,
        kind,
        data: 0..0,
    };
    assert_eq!(
        routing_cmsg(&c(libc::IPPROTO_IPV6, libc::IPV6_RTHDR)),
        Some("IPV6_RTHDR")
    );
    assert_eq!(routing_cmsg(&c(libc::IPPROTO_IP, libc::IP_RETOPTS)), Some("IP_RETOPTS"));
    assert_eq!(routing_cmsg(&c(libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT)), None);
    assert_eq!(routing_cmsg(&c(libc::SOL_SOCKET, libc::SCM_RIGHTS)), None);
}

#[test]
fn an_address_no_rule_names_is_allowed() {
    let t = Fake::new(RULES, 0);
    let (detail, verdict) = check(&t, &v4([192, 0, 2, 1], 80), false);
    assert_eq!(detail, "192.0.2.1:80");
    assert_eq!(verdict, Ok(None));
}

#[test]
fn an_address_the_resolver_answered_for_an_allowed_name_is_allowed_by_its_rule() {
    let t = Fake::new(RULES, 0);
    let ip = IpAddr::from([93, 184, 216, 34]);
    let (_, verdict) = check(&t, &v4([93, 184, 216, 34], 443), false);
    assert!(verdict.is_err(), "no name yet: the catch-all denies");
    t.sup
        .names
        .bind(ip, "a.example.com", std::time::Duration::from_secs(60));
    let (detail, verdict) = check(&t, &v4([93, 184, 216, 34], 443), false);
    assert_eq!(detail, "a.example.com (93.184.216.34):443");
    assert!(verdict.unwrap().unwrap().contains("*.example.com"));
    // The name's rule covers port 443 only.
    let (_, verdict) = check(&t, &v4([93, 184, 216, 34], 80), false);
    assert_eq!(verdict, Ok(None));
}

#[test]
fn under_host_rules_dns_ports_reach_only_the_resolver() {
    let t = Fake::new(RULES, 0);
    for port in [53, 853] {
        let (_, verdict) = check(&t, &v4([8, 8, 8, 8], port), false);
        let (errno, why) = verdict.unwrap_err();
        assert_eq!(errno, libc::EPERM);
        assert!(why.starts_with("dns:"), "{why}");
    }
    // Without host rules, port 53 is an address like any other.
    let t = Fake::new("name = 't'\n", 0);
    assert_eq!(check(&t, &v4([8, 8, 8, 8], 53), false).1, Ok(None));
}

/// A caller rooted in a temp tree with `/secret/app.sock` (denied by
/// the path rules), `/data/app.sock` and symlinks into `/secret`, whose
/// fd 3 is a non-blocking unbound unix datagram socket; `path` as a
/// `sockaddr_un` at [`Fake::BASE`] (its length returned).
fn unix_caller(path: &str) -> (crate::supervisor::syscalls::task::fake::TempTree, Fake, u64) {
    let root = crate::supervisor::syscalls::task::fake::TempTree::new("net");
    for d in ["secret", "data"] {
        std::fs::create_dir(root.join(d)).unwrap();
    }
    std::fs::write(root.join("secret/app.sock"), "").unwrap();
    std::fs::write(root.join("data/app.sock"), "").unwrap();
    std::os::unix::fs::symlink("/secret/app.sock", root.join("data/abs.sock")).unwrap();
    std::os::unix::fs::symlink("../secret", root.join("data/dir")).unwrap();
    let policy = "name = 't'\n[[path]]\npattern = \"/secret/**\"\naccess = \"deny\"\n";
    let mut t = Fake::new(policy, 256);
    t.root = Some(root.0.clone());
    let sock = std::os::unix::net::UnixDatagram::unbound().unwrap();
    sock.set_nonblocking(true).unwrap();
    t.fds.insert(3, sock.into());
    let mut addr = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    addr.extend_from_slice(path.as_bytes());
    addr.push(0);
    t.mem.borrow_mut()[..addr.len()].copy_from_slice(&addr);
    (root, t, addr.len() as u64)
}

#[test]
fn unix_connects_and_sends_decide_on_the_socket_file_reached() {
    for path in [
        "/secret/app.sock",
        "/data/abs.sock",
        "/data/dir/app.sock",
        "/data/../../secret/app.sock",
        "/proc/self/root/secret/app.sock",
    ] {
        let (_root, mut t, len) = unix_caller(path);
        t.args = [3, Fake::BASE, len, 0, 0, 0];
        let out = connect(&t);
        assert!(matches!(out.reply, Reply::Errno(libc::EACCES)), "connect {path}");
        assert_eq!((out.action.as_str(), out.detail.as_str()), ("deny", "/secret/app.sock"));
        // sendto(fd, buf, 0, flags, addr, len)
        t.args = [3, Fake::BASE, 0, 0, Fake::BASE, len];
        let out = sendto(&t);
        assert!(matches!(out.reply, Reply::Errno(libc::EACCES)), "sendto {path}");
        assert_eq!(out.action.as_str(), "deny");
    }
    // (An allowed connect goes on with the caller's identity, which
    // needs root: the integration suites check it.) A socket fd the
    // caller does not have.
    let (_root, mut t, len) = unix_caller("/data/app.sock");
    t.args = [4, Fake::BASE, len, 0, 0, 0];
    assert!(matches!(connect(&t).reply, Reply::Errno(libc::EBADF)));
}

#[test]
fn unix_addresses_are_left_to_the_path_rules() {
    let t = Fake::new(RULES, 0);
    let mut b = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    b.extend_from_slice(b"/run/x.sock\0");
    let (detail, verdict) = check(&t, &Addr::from_bytes(&b).unwrap(), false);
    assert_eq!(detail, "unix:/run/x.sock");
    assert_eq!(verdict, Ok(None));
}

fn sin(family: u16, port: u16, ip: [u8; 4]) -> Vec<u8> {
    let mut b = family.to_ne_bytes().to_vec();
    b.extend_from_slice(&port.to_be_bytes());
    b.extend_from_slice(&ip);
    b.extend_from_slice(&[0; 8]);
    b
}

#[test]
fn addresses() {
    let a = Addr::from_bytes(&sin(libc::AF_INET as u16, 80, [169, 254, 169, 254])).unwrap();
    assert_eq!(a.ip(), Some(("169.254.169.254".parse().unwrap(), 80)));
    assert_eq!(a.describe(), "169.254.169.254:80");
    assert_eq!(Addr::from_bytes(&[0; 129]), Err(libc::EINVAL));
    assert_eq!(Addr::from_bytes(&[]).unwrap().family(), libc::AF_UNSPEC);
    let short = Addr::from_bytes(&sin(libc::AF_INET as u16, 80, [10, 0, 0, 1])[..6]).unwrap();
    assert_eq!(short.ip(), None);

    let mut un = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    un.extend_from_slice(b"/run/x.sock\0junk");
    assert_eq!(Addr::from_bytes(&un).unwrap().unix_path(), Some(&b"/run/x.sock"[..]));
    assert_eq!(
        Addr::from_bytes(&un).unwrap().describe(),
        "unix:/run/x.sock",
        "cut at the NUL"
    );
    let mut abstract_ = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    abstract_.extend_from_slice(b"\0name");
    let abstract_ = Addr::from_bytes(&abstract_).unwrap();
    assert_eq!(abstract_.unix_path(), None);
    assert_eq!(abstract_.describe(), "unix:@name");
}

/// Found while extracting the decoders for fuzzing: udp(7) and raw(7)
/// IPv4 sockets send to an AF_UNSPEC destination as to AF_INET, so the
/// network rules must read such an address as IPv4 for sendto/sendmsg.
#[test]
fn unspec_destination_of_a_datagram_is_ipv4() {
    let a = Addr::from_bytes(&sin(libc::AF_UNSPEC as u16, 53, [169, 254, 169, 254])).unwrap();
    assert_eq!(a.ip(), None, "connect(AF_UNSPEC) only disconnects");
    assert_eq!(a.send_ip(), Some(("169.254.169.254".parse().unwrap(), 53)));
    let p = crate::policy::Policy::load("default").unwrap();
    let (ip, port) = a.send_ip().unwrap();
    assert_eq!(p.net.decide(ip, port), NetAction::Deny);
    // Shorter than sockaddr_in: the kernel refuses it (EINVAL).
    let short = Addr::from_bytes(&sin(libc::AF_UNSPEC as u16, 53, [169, 254, 169, 254])[..8]).unwrap();
    assert_eq!(short.send_ip(), None);
}

fn msghdr(iov: u64, iovlen: u64) -> MsgHdr {
    let mut b = [0u8; 56];
    b[16..24].copy_from_slice(&iov.to_ne_bytes());
    b[24..32].copy_from_slice(&iovlen.to_ne_bytes());
    MsgHdr::from_bytes(&b).unwrap()
}

/// Reads of a caller memory image mapped at address 0.
fn mem(image: &[u8]) -> impl FnMut(u64, &mut [u8]) -> Result<usize, i32> + '_ {
    move |addr, buf| {
        let at = usize::try_from(addr)
            .ok()
            .filter(|&a| a < image.len())
            .ok_or(libc::EFAULT)?;
        let n = buf.len().min(image.len() - at);
        buf[..n].copy_from_slice(&image[at..at + n]);
        Ok(n)
    }
}

#[test]
fn gathers_iovecs() {
    let mut image = b"hello, world".to_vec();
    image.resize(16, 0);
    for (base, len) in [(0u64, 5u64), (7, 5)] {
        image.extend_from_slice(&base.to_ne_bytes());
        image.extend_from_slice(&len.to_ne_bytes());
    }
    assert_eq!(gather(&msghdr(16, 2), mem(&image)), Ok(b"helloworld".to_vec()));
    assert_eq!(gather(&msghdr(16, 1025), mem(&image)), Err(libc::EMSGSIZE));
    assert_eq!(gather(&msghdr(16, 3), mem(&image)), Err(libc::EFAULT));
    assert_eq!(MsgHdr::from_bytes(&[0; 55]), Err(libc::EFAULT));
}

/// Found while extracting the decoders for fuzzing (seed
/// fuzz/corpus/decode/msg-iov-wraps): an iovec array at the top of the
/// address space overflowed `iov + 16 * i` (a panic in debug builds).
#[test]
fn iovec_array_at_the_end_of_the_address_space() {
    assert_eq!(gather(&msghdr(u64::MAX - 15, 3), mem(&[])), Err(libc::EFAULT));
}

fn cmsg(len: u64, level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
    let mut b = len.to_ne_bytes().to_vec();
    b.extend_from_slice(&level.to_ne_bytes());
    b.extend_from_slice(&kind.to_ne_bytes());
    b.extend_from_slice(data);
    b.resize(b.len().next_multiple_of(8), 0);
    b
}

#[test]
fn control_messages() {
    let mut c = cmsg(
        28,
        libc::SOL_SOCKET,
        libc::SCM_RIGHTS,
        &[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0],
    );
    c.extend(cmsg(20, libc::SOL_SOCKET, libc::SCM_CREDENTIALS, &[0; 4]));
    c.extend_from_slice(&[0; 15]); // less than a header: ignored
    let all: Vec<_> = cmsgs(&c).collect();
    assert_eq!(all.len(), 2);
    let first = all[0].clone().unwrap();
    assert_eq!(
        (first.level, first.kind, first.data.clone()),
        (libc::SOL_SOCKET, libc::SCM_RIGHTS, 16..28)
    );
    assert_eq!(first.int_offsets().collect::<Vec<_>>(), [16, 20, 24]);
    assert_eq!(all[1].clone().unwrap().data, 48..52);
    // A length below the header's, or past the buffer: EINVAL, then stop.
    assert_eq!(cmsgs(&cmsg(8, 1, 1, &[])).collect::<Vec<_>>(), [Err(libc::EINVAL)]);
    assert_eq!(cmsgs(&cmsg(40, 1, 1, &[0; 4])).collect::<Vec<_>>(), [Err(libc::EINVAL)]);
}

/// Found while extracting the decoders for fuzzing (seed
/// fuzz/corpus/decode/cmsg-len-huge): a `cmsg_len` near u64::MAX
/// overflowed `off + len` (a panic in debug builds).
#[test]
fn control_message_length_near_the_top() {
    let c = cmsg(u64::MAX, libc::SOL_SOCKET, libc::SCM_RIGHTS, &[3, 0, 0, 0]);
    assert_eq!(cmsgs(&c).collect::<Vec<_>>(), [Err(libc::EINVAL)]);
    let mut c = cmsg(20, libc::SOL_SOCKET, libc::SCM_RIGHTS, &[3, 0, 0, 0]);
    c.extend(cmsg(u64::MAX - 6, 1, 1, &[]));
    assert_eq!(cmsgs(&c).count(), 2);
}
