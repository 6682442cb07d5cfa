//! The supervisor's decoders of container memory: what it copies out of a
//! caller (paths, socket addresses, `struct open_how`, `struct msghdr` with
//! its iovecs and ancillary data) is attacker-chosen bytes.
//!
//! The first byte picks the decoder, the rest is its input:
//! 0 C string (byte 1: the length limit) then the path helpers on it;
//! 1 sockaddr, then the default policy's verdict on it; 2 open_how and the
//! open mode rule; 3 msghdr (56 bytes) then caller memory from address 0,
//! gathered through its iovecs; 4 control messages (SCM_RIGHTS...);
//! 5 the path helpers on raw bytes; 6 a DNS message, read as the
//! resolver reads a container's query and a nameserver's answer to it;
//! 7 the first bytes of a relayed connection, read as a TLS ClientHello
//! and as an HTTP request head.
//!
//! Oracle: no panic, and each decoder's documented shape (lengths, ranges,
//! errno values).
#![no_main]

use std::sync::OnceLock;

use cordon::policy::Policy;
use cordon::supervisor::syscalls::decode::{
    cmsgs, gather, open_mode, parse_magic_link, rewrite_proc_alias, split_parent, Addr, Magic, MsgHdr, OpenHow,
};
use cordon::sys::decode_cstring;
use libfuzzer_sys::fuzz_target;

const PATH_MAX: usize = 4096;
const MAX_PAYLOAD: usize = 1 << 20;

fn default_policy() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| Policy::load("default").expect("the default policy loads"))
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 8 {
        0 => cstring(rest),
        1 => sockaddr(rest),
        2 => open_how(rest),
        3 => msghdr(rest),
        4 => control(rest),
        5 => paths(rest),
        6 => dns(rest),
        _ => wire(rest),
    }
});

/// The relay's readers of what a client sends first: a ClientHello's
/// server name is a lower-case name of at most 253 bytes, a prefix of an
/// incomplete hello is incomplete too; a request head's names are lower
/// case with no port.
fn wire(data: &[u8]) {
    use cordon::supervisor::relay::{http, tls};
    match tls::client_hello(data) {
        tls::Hello::Name(n) => {
            assert!(!n.is_empty() && n.len() <= 253 && n == n.to_ascii_lowercase());
        }
        tls::Hello::Incomplete => {
            for cut in [0, data.len() / 2] {
                assert_eq!(tls::client_hello(&data[..cut]), tls::Hello::Incomplete);
            }
        }
        tls::Hello::Encrypted(n) => assert!(n.len() <= 253 && n == n.to_ascii_lowercase()),
        tls::Hello::NoName | tls::Hello::NotTls => {}
    }
    if let Ok(h) = http::parse_head(data) {
        assert!(data.ends_with(b"\r\n\r\n"));
        for n in &h.names {
            assert!(!n.is_empty() && *n == n.to_ascii_lowercase());
        }
    }
    let _ = http::chunk_size(data);
}

fn cstring(data: &[u8]) {
    let Some((&m, bytes)) = data.split_first() else { return };
    // Small limits reach the boundaries; 0 stands for PATH_MAX.
    let max = if m == 0 { PATH_MAX } else { usize::from(m) };
    match decode_cstring(bytes, max) {
        Ok(s) => {
            assert!(s.len() < max && !s.contains(&0));
            assert_eq!(&bytes[..=s.len()], [&s[..], &[0]].concat().as_slice());
            paths(&s);
        }
        Err(libc::ENAMETOOLONG) => assert!(bytes.len() >= max && !bytes[..max].contains(&0)),
        Err(libc::EFAULT) => assert!(bytes.len() < max && !bytes.contains(&0)),
        Err(e) => panic!("decode_cstring: unexpected errno {e}"),
    }
}

fn paths(path: &[u8]) {
    let (parent, name) = split_parent(path);
    assert!(!name.contains(&b'/'), "name {name:?}");
    assert!(parent == b"/" || parent == b"." || path.starts_with(parent));
    let rewritten = rewrite_proc_alias(path, || Some(("7".into(), "9".into())));
    assert!(rewritten == path || rewritten.starts_with(b"/proc/7"));
    for p in [path, &rewritten[..]] {
        if let Some((pid, magic)) = parse_magic_link(p) {
            assert!(p.starts_with(b"/proc/") && p[6..].starts_with(pid.as_bytes()));
            match magic {
                Magic::Cwd(rest) => assert!(!rest.is_empty()),
                Magic::FdPath(_, rest) => assert!(!rest.iter().all(|&b| b == b'/')),
                Magic::Fd(_) | Magic::Exe | Magic::Root(_) | Magic::Deleted(_) => {}
            }
        }
    }
}

fn sockaddr(bytes: &[u8]) {
    let addr = match Addr::from_bytes(bytes) {
        Ok(a) => a,
        Err(e) => {
            assert!(e == libc::EINVAL && bytes.len() > 128);
            return;
        }
    };
    assert_eq!(addr.bytes(), bytes);
    let _ = addr.describe();
    if let Some(p) = addr.unix_path() {
        assert!(addr.family() == libc::AF_UNIX && !p.is_empty() && !p.contains(&0));
    }
    if let Some((ip, port)) = addr.ip() {
        assert!(matches!(addr.family(), libc::AF_INET | libc::AF_INET6));
        assert_eq!(addr.send_ip(), Some((ip, port)));
    }
    if let Some((ip, port)) = addr.send_ip() {
        let _ = default_policy().net.decide(ip, port);
    }
}

fn open_how(bytes: &[u8]) {
    match OpenHow::from_bytes(bytes) {
        Ok(how) => {
            assert!((24..=4096).contains(&bytes.len()) && bytes[24..].iter().all(|&b| b == 0));
            for openat2 in [false, true] {
                match open_mode(openat2, how.flags, how.mode) {
                    Ok(m) => assert!(m <= 0o7777),
                    Err(e) => assert!(openat2 && e == libc::EINVAL && how.mode != 0),
                }
            }
        }
        Err(libc::EINVAL) => assert!(bytes.len() < 24),
        Err(libc::E2BIG) => assert!(bytes.len() > 24),
        Err(e) => panic!("OpenHow::from_bytes: unexpected errno {e}"),
    }
}

fn msghdr(bytes: &[u8]) {
    let hdr = match MsgHdr::from_bytes(bytes) {
        Ok(h) => h,
        Err(e) => {
            assert!(e == libc::EFAULT && bytes.len() < 56);
            return;
        }
    };
    // The caller's memory: the bytes after the header, mapped at address 0.
    let mem = &bytes[56..];
    let read = |addr: u64, buf: &mut [u8]| -> Result<usize, i32> {
        let at = usize::try_from(addr)
            .ok()
            .filter(|&a| a < mem.len())
            .ok_or(libc::EFAULT)?;
        let n = buf.len().min(mem.len() - at);
        buf[..n].copy_from_slice(&mem[at..at + n]);
        Ok(n)
    };
    match gather(&hdr, read) {
        Ok(data) => {
            assert!(hdr.iovlen <= 1024 && data.len() <= MAX_PAYLOAD);
            // Every byte gathered comes from the caller's memory.
            assert!(data.len() <= mem.len() * hdr.iovlen as usize);
        }
        Err(e) => assert!(
            e == libc::EFAULT || (e == libc::EMSGSIZE && hdr.iovlen > 1024),
            "errno {e}"
        ),
    }
}

fn control(bytes: &[u8]) {
    let mut end = 0;
    for c in cmsgs(bytes) {
        let Ok(c) = c else { break };
        assert!(c.data.start >= end + 16 && c.data.start <= c.data.end && c.data.end <= bytes.len());
        for at in c.int_offsets() {
            assert!(at + 4 <= c.data.end);
            let _ = i32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
        }
        end = c.data.end;
    }
}

/// A DNS message: as a query from the container (our replies and the
/// query sent on keep its question), then as an answer to the query for
/// `allowed.test`, whose CNAME chain stays short and free of repeats.
fn dns(bytes: &[u8]) {
    use cordon::supervisor::dns::wire;
    match wire::parse_query(bytes) {
        Ok(q) => {
            assert!(q.name.len() <= 4 * 255);
            assert_eq!(&bytes[12..12 + q.question.len()], q.question.as_slice());
            let r = wire::reply(&q, wire::NXDOMAIN);
            assert_eq!(r.len(), 12 + q.question.len());
            let up = wire::upstream_query(&q, 7);
            let again = wire::parse_query(&up).expect("our own query reads back");
            assert_eq!((again.name, again.qtype, again.qclass), (q.name, q.qtype, q.qclass));
        }
        Err(wire::Bad::NoHeader) => assert!(bytes.len() < 12 || bytes[2] & 0x80 != 0),
        Err(wire::Bad::Answer(rc)) => {
            assert!(rc == wire::FORMERR || rc == wire::NOTIMP);
            assert_eq!(wire::reply_header_only(bytes, rc).map(|r| r.len()), Some(12));
        }
    }
    let mut q = vec![0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(b"\x07allowed\x04test\x00\x00\x01\x00\x01");
    let query = wire::parse_query(&q).expect("the fixed query");
    let Some(id) = bytes.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
        return;
    };
    if let Some(r) = wire::parse_response(bytes, id, &query) {
        assert!(r.rcode < 16);
        let chain = wire::chain(&query.name, &r.records);
        assert!(!chain.is_empty() && chain.len() <= 17 && chain[0] == "allowed.test");
        for (i, n) in chain.iter().enumerate() {
            assert!(!chain[..i].contains(n), "a loop in the chain");
        }
    }
}
