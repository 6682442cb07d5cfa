//! The DNS message format, as much of it as the supervisor's resolver
//! reads and writes (RFC 1035 section 4.1): the header, one question, the
//! answer section's A, AAAA and CNAME records, compressed names (section
//! 4.1.4), and the EDNS(0) OPT record of a query (RFC 6891 section 6.1).
//!
//! Pure functions over byte slices: no syscalls, every length checked, so
//! any bytes a container sends can be fed to them (unit tests, fuzzing).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Size of the fixed header (RFC 1035 section 4.1.1), in bytes.
pub const HEADER: usize = 12;
/// Response code NOERROR (RFC 1035 section 4.1.1).
pub const NOERROR: u8 = 0;
/// Response code FORMERR: the query could not be read.
pub const FORMERR: u8 = 1;
/// Response code SERVFAIL: the nameservers did not answer in time.
pub const SERVFAIL: u8 = 2;
/// Response code NXDOMAIN: the name does not exist (for a refused name).
pub const NXDOMAIN: u8 = 3;
/// Response code NOTIMP: an opcode other than QUERY.
pub const NOTIMP: u8 = 4;
/// Record type A (RFC 1035 section 3.2.2).
pub const TYPE_A: u16 = 1;
/// Record type CNAME.
pub const TYPE_CNAME: u16 = 5;
/// Record type AAAA (RFC 3596 section 2.1).
pub const TYPE_AAAA: u16 = 28;
/// Record type OPT (RFC 6891 section 6.1.1).
pub const TYPE_OPT: u16 = 41;
/// Largest UDP payload the resolver asks its nameservers for when the
/// container's query carries EDNS(0) (the DNS flag day 2020 figure).
pub const EDNS_SIZE: u16 = 1232;
/// Most compression pointers followed in one name (a loop guard).
const MAX_JUMPS: usize = 32;

/// A query read from the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The message ID, echoed in the answer.
    pub id: u16,
    /// The RD (recursion desired) bit.
    pub rd: bool,
    /// The queried name in presentation form: lower case, no final dot,
    /// bytes other than letters, digits, `-` and `_` escaped as `\DDD`
    /// (RFC 1035 section 5.1), so no name rule can match them; the root
    /// is the empty string.
    pub name: String,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
    /// The question section as received (name, type, class).
    pub question: Vec<u8>,
    /// The UDP payload size of the query's OPT record, if it has one.
    pub edns: Option<u16>,
}

/// Why a message was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bad {
    /// Too short for a header: there is nobody to answer.
    NoHeader,
    /// A header, but the rest is malformed or not a single question:
    /// answer with this response code.
    Answer(u8),
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Reads the (possibly compressed) name at `at` in `msg`: its
/// presentation form (see [`Query::name`]) and the offset just past it in
/// the message. `None`: truncated, a pointer forward loop, a bad label
/// type, or longer than 255 octets.
pub fn read_name(msg: &[u8], mut at: usize) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut end = None;
    let mut jumps = 0;
    let mut wire_len = 1usize;
    loop {
        let len = *msg.get(at)? as usize;
        match len & 0xc0 {
            0x00 if len == 0 => {
                return Some((out, end.unwrap_or(at + 1)));
            }
            0x00 => {
                let label = msg.get(at + 1..at + 1 + len)?;
                wire_len += len + 1;
                if wire_len > 255 {
                    return None;
                }
                if !out.is_empty() {
                    out.push('.');
                }
                for &c in label {
                    match c {
                        b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => out.push(c as char),
                        b'A'..=b'Z' => out.push(c.to_ascii_lowercase() as char),
                        _ => out.push_str(&format!("\\{c:03}")),
                    }
                }
                at += 1 + len;
            }
            0xc0 => {
                let ptr = usize::from(u16_at(msg, at)?) & 0x3fff;
                end.get_or_insert(at + 2);
                jumps += 1;
                if jumps > MAX_JUMPS {
                    return None;
                }
                at = ptr;
            }
            _ => return None,
        }
    }
}

/// Reads a query: a header with QR 0, opcode QUERY, exactly one question
/// and no answer or authority records; an OPT record in the additional
/// section is noted. Errors: see [`Bad`].
pub fn parse_query(msg: &[u8]) -> Result<Query, Bad> {
    if msg.len() < HEADER {
        return Err(Bad::NoHeader);
    }
    let id = u16::from_be_bytes([msg[0], msg[1]]);
    let flags = u16::from_be_bytes([msg[2], msg[3]]);
    if flags & 0x8000 != 0 {
        // A response sent to us: never answer it (no loops).
        return Err(Bad::NoHeader);
    }
    if (flags >> 11) & 0xf != 0 {
        return Err(Bad::Answer(NOTIMP));
    }
    let count = |i: usize| u16::from_be_bytes([msg[4 + 2 * i], msg[5 + 2 * i]]);
    if count(0) != 1 || count(1) != 0 || count(2) != 0 {
        return Err(Bad::Answer(FORMERR));
    }
    let (name, after) = read_name(msg, HEADER).ok_or(Bad::Answer(FORMERR))?;
    // The one question is written out: a compression pointer in it could
    // only point into parts of the message that are not passed on.
    let mut at = HEADER;
    while msg[at] != 0 {
        if msg[at] & 0xc0 != 0 {
            return Err(Bad::Answer(FORMERR));
        }
        at += 1 + usize::from(msg[at]);
    }
    let qtype = u16_at(msg, after).ok_or(Bad::Answer(FORMERR))?;
    let qclass = u16_at(msg, after + 2).ok_or(Bad::Answer(FORMERR))?;
    let question = msg[HEADER..after + 4].to_vec();
    let mut edns = None;
    let mut at = after + 4;
    for _ in 0..count(3) {
        let (_, n) = read_name(msg, at).ok_or(Bad::Answer(FORMERR))?;
        let t = u16_at(msg, n).ok_or(Bad::Answer(FORMERR))?;
        let class = u16_at(msg, n + 2).ok_or(Bad::Answer(FORMERR))?;
        let rdlen = usize::from(u16_at(msg, n + 8).ok_or(Bad::Answer(FORMERR))?);
        if t == TYPE_OPT {
            edns = Some(class.max(512));
        }
        at = n + 10 + rdlen;
        if at > msg.len() {
            return Err(Bad::Answer(FORMERR));
        }
    }
    Ok(Query {
        id,
        rd: flags & 0x0100 != 0,
        name,
        qtype,
        qclass,
        question,
        edns,
    })
}

/// The query the resolver sends its nameservers for `q`: message ID `id`,
/// RD set, the same question, and an OPT record of [`EDNS_SIZE`] bytes
/// when the container's query had one. Nothing else of the container's
/// message is passed on.
pub fn upstream_query(q: &Query, id: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + q.question.len() + 11);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&0x0100u16.to_be_bytes());
    out.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, u8::from(q.edns.is_some())]);
    // The name in lower case: the case of its letters is the container's
    // to choose, and would carry bits past the rules and the wildcards'
    // budgets, which see the name in lower case.
    out.extend_from_slice(&lowered(&q.question));
    if let Some(size) = q.edns {
        out.push(0);
        out.extend_from_slice(&TYPE_OPT.to_be_bytes());
        out.extend_from_slice(&size.min(EDNS_SIZE).to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    }
    out
}

/// An answer of our own to `q`: its ID and question, RD echoed, RA set,
/// response code `rcode`, no records.
pub fn reply(q: &Query, rcode: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + q.question.len());
    out.extend_from_slice(&q.id.to_be_bytes());
    out.push(0x80 | u8::from(q.rd));
    out.push(0x80 | (rcode & 0xf));
    out.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&q.question);
    out
}

/// A reply of our own to a message whose question could not be read: its
/// ID, response code `rcode`, no question. `None` without a header.
pub fn reply_header_only(msg: &[u8], rcode: u8) -> Option<Vec<u8>> {
    let id = msg.get(..2)?;
    let rd = msg.get(2)? & 1;
    let mut out = id.to_vec();
    out.extend_from_slice(&[0x80 | rd, 0x80 | (rcode & 0xf), 0, 0, 0, 0, 0, 0, 0, 0]);
    Some(out)
}

/// One record of an answer section, as the resolver uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// An A or AAAA record: owner name, address, TTL in seconds.
    Addr(String, IpAddr, u32),
    /// A CNAME record: owner name, canonical name.
    Cname(String, String),
}

/// A nameserver's answer, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The response code (the low four bits of the header's).
    pub rcode: u8,
    /// Whether the TC bit is set (the answer was cut to fit UDP).
    pub truncated: bool,
    /// The A, AAAA and CNAME records of the answer section (class IN);
    /// other types are skipped.
    pub records: Vec<Record>,
}

/// Reads a nameserver's answer to the query with ID `id` and question
/// `q`: QR set, the same ID, one question equal to ours (names compared
/// case-insensitively). `None` for anything else (an answer to another
/// query, or malformed: the caller keeps waiting or gives SERVFAIL).
pub fn parse_response(msg: &[u8], id: u16, q: &Query) -> Option<Response> {
    if msg.len() < HEADER || u16_at(msg, 0)? != id || msg[2] & 0x80 == 0 {
        return None;
    }
    if u16_at(msg, 4)? != 1 {
        return None;
    }
    let (name, after) = read_name(msg, HEADER)?;
    if name != q.name || u16_at(msg, after)? != q.qtype || u16_at(msg, after + 2)? != q.qclass {
        return None;
    }
    let mut at = after + 4;
    let mut records = Vec::new();
    for _ in 0..u16_at(msg, 6)? {
        let (owner, n) = read_name(msg, at)?;
        let t = u16_at(msg, n)?;
        let class = u16_at(msg, n + 2)?;
        let ttl = u32_at(msg, n + 4)?;
        let rdlen = usize::from(u16_at(msg, n + 8)?);
        let rdata = msg.get(n + 10..n + 10 + rdlen)?;
        if class == 1 {
            match (t, rdlen) {
                (TYPE_A, 4) => records.push(Record::Addr(
                    owner,
                    IpAddr::V4(Ipv4Addr::new(rdata[0], rdata[1], rdata[2], rdata[3])),
                    ttl,
                )),
                (TYPE_AAAA, 16) => {
                    let a: [u8; 16] = rdata.try_into().ok()?;
                    records.push(Record::Addr(owner, IpAddr::V6(Ipv6Addr::from(a)), ttl));
                }
                (TYPE_CNAME, _) => {
                    let (target, end) = read_name(msg, n + 10)?;
                    if end > n + 10 + rdlen {
                        return None;
                    }
                    records.push(Record::Cname(owner, target));
                }
                _ => {}
            }
        }
        at = n + 10 + rdlen;
    }
    Some(Response {
        rcode: msg[3] & 0xf,
        truncated: msg[2] & 0x02 != 0,
        records,
    })
}

/// The CNAME chain from `name` through `records` (at most 16 links; a
/// loop ends it): `name` first, then each canonical name in turn.
pub fn chain(name: &str, records: &[Record]) -> Vec<String> {
    let mut out = vec![name.to_string()];
    for _ in 0..16 {
        let last = out.last().cloned().unwrap_or_default();
        let next = records.iter().find_map(|r| match r {
            Record::Cname(owner, target) if *owner == last => Some(target.clone()),
            _ => None,
        });
        match next {
            Some(t) if !out.contains(&t) => out.push(t),
            _ => break,
        }
    }
    out
}

/// The message `msg` with its ID replaced by `id` (a nameserver's answer
/// passed back under the container's query ID).
pub fn with_id(msg: &[u8], id: u16) -> Vec<u8> {
    let mut out = msg.to_vec();
    if out.len() >= 2 {
        out[..2].copy_from_slice(&id.to_be_bytes());
    }
    out
}

/// A question section (labels, then type and class) with the ASCII
/// letters of its labels in lower case; length bytes, type and class
/// unchanged.
pub fn lowered(question: &[u8]) -> Vec<u8> {
    let mut out = question.to_vec();
    let mut at = 0;
    while at < out.len() {
        let n = out[at] as usize;
        if n == 0 || n & 0xc0 != 0 {
            break;
        }
        let end = (at + 1 + n).min(out.len());
        out[at + 1..end].make_ascii_lowercase();
        at = end;
    }
    out
}

/// An answer to a question asked in lower case, given back with the
/// container's own spelling of it (`question`, same length): a stub
/// resolver that compares the question byte for byte (musl) takes it.
pub fn with_question(msg: &[u8], question: &[u8]) -> Vec<u8> {
    let mut out = msg.to_vec();
    let span = HEADER..HEADER + question.len();
    if out.len() >= span.end && out[span.clone()] == lowered(question)[..] {
        out[span].copy_from_slice(question);
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A query for `name` of type `qtype`, ID `id`.
    pub(crate) fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
        let mut m = id.to_be_bytes().to_vec();
        m.extend_from_slice(&[1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        for l in name.split('.').filter(|l| !l.is_empty()) {
            m.push(l.len() as u8);
            m.extend_from_slice(l.as_bytes());
        }
        m.push(0);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&1u16.to_be_bytes());
        m
    }

    #[test]
    fn queries() {
        let q = parse_query(&query(7, "PyPI.org", TYPE_A)).unwrap();
        assert_eq!(
            (q.id, q.rd, q.name.as_str(), q.qtype, q.edns),
            (7, true, "pypi.org", 1, None)
        );
        let r = reply(&q, NXDOMAIN);
        assert_eq!(&r[..4], &[0, 7, 0x81, 0x83]);
        assert_eq!(&r[HEADER..], &q.question[..]);
        let up = upstream_query(&q, 99);
        assert_eq!(parse_query(&up).unwrap().name, "pypi.org");
        assert_eq!(parse_query(&[0; 5]), Err(Bad::NoHeader));
        let mut two = query(1, "a.b", TYPE_A);
        two[5] = 2;
        assert_eq!(parse_query(&two), Err(Bad::Answer(FORMERR)));
        let mut op = query(1, "a.b", TYPE_A);
        op[2] |= 0x28;
        assert_eq!(parse_query(&op), Err(Bad::Answer(NOTIMP)));
        // A label holding a dot can never pass for two labels.
        let mut dotted = query(1, "x", TYPE_A);
        dotted.splice(HEADER..HEADER + 2, *b"\x08pypi.org");
        assert_eq!(parse_query(&dotted).unwrap().name, "pypi\\046org");
        // A pointer in the question (to the header here).
        let mut pointed = query(1, "", TYPE_A);
        pointed.splice(HEADER..HEADER + 1, [0xc0, 2]);
        assert_eq!(parse_query(&pointed), Err(Bad::Answer(FORMERR)));
    }

    #[test]
    fn compressed_names_and_loops() {
        let mut m = query(1, "a.example.com", TYPE_A);
        m.extend_from_slice(&[0xc0, 12]);
        assert_eq!(read_name(&m, m.len() - 2).unwrap().0, "a.example.com");
        let looped = [0u8; 12].iter().copied().chain([0xc0, 12]).collect::<Vec<_>>();
        assert_eq!(read_name(&looped, 12), None);
        assert_eq!(read_name(&[3, b'a'], 0), None);
    }

    /// An answer to `q` (ID `id`) with `cname` then A records.
    pub(crate) fn answer(id: u16, q: &[u8], cname: Option<&str>, addrs: &[[u8; 4]], ttl: u32) -> Vec<u8> {
        let mut m = q.to_vec();
        m[..2].copy_from_slice(&id.to_be_bytes());
        m[2] |= 0x80;
        m[3] = 0x80;
        let n = cname.is_some() as u16 + addrs.len() as u16;
        m[6..8].copy_from_slice(&n.to_be_bytes());
        let mut owner = vec![0xc0, 12];
        if let Some(c) = cname {
            let at = m.len() + 12;
            m.extend_from_slice(&owner);
            m.extend_from_slice(&TYPE_CNAME.to_be_bytes());
            m.extend_from_slice(&[0, 1]);
            m.extend_from_slice(&ttl.to_be_bytes());
            let mut target = Vec::new();
            for l in c.split('.') {
                target.push(l.len() as u8);
                target.extend_from_slice(l.as_bytes());
            }
            target.push(0);
            m.extend_from_slice(&(target.len() as u16).to_be_bytes());
            m.extend_from_slice(&target);
            owner = vec![0xc0 | (at >> 8) as u8, at as u8];
        }
        for a in addrs {
            m.extend_from_slice(&owner);
            m.extend_from_slice(&TYPE_A.to_be_bytes());
            m.extend_from_slice(&[0, 1]);
            m.extend_from_slice(&ttl.to_be_bytes());
            m.extend_from_slice(&[0, 4]);
            m.extend_from_slice(a);
        }
        m
    }

    #[test]
    fn responses_and_chains() {
        let raw = query(5, "files.pythonhosted.org", TYPE_A);
        let q = parse_query(&raw).unwrap();
        let a = answer(
            9,
            &raw,
            Some("dualstack.python.map.fastly.net"),
            &[[151, 101, 0, 223]],
            60,
        );
        assert_eq!(parse_response(&a, 5, &q), None, "another ID");
        let r = parse_response(&a, 9, &q).unwrap();
        assert_eq!(r.rcode, NOERROR);
        assert_eq!(
            r.records,
            [
                Record::Cname(
                    "files.pythonhosted.org".into(),
                    "dualstack.python.map.fastly.net".into()
                ),
                Record::Addr(
                    "dualstack.python.map.fastly.net".into(),
                    "151.101.0.223".parse().unwrap(),
                    60
                ),
            ]
        );
        assert_eq!(
            chain(&q.name, &r.records),
            ["files.pythonhosted.org", "dualstack.python.map.fastly.net"]
        );
        // An AAAA record (RFC 3596) in place of the A one.
        let raw6 = query(6, "v6.example", TYPE_AAAA);
        let q6 = parse_query(&raw6).unwrap();
        let mut a6 = answer(6, &raw6, None, &[], 0);
        a6[6..8].copy_from_slice(&1u16.to_be_bytes());
        a6.extend_from_slice(&[0xc0, 12, 0, 28, 0, 1, 0, 0, 0, 30, 0, 16]);
        a6.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        assert_eq!(
            parse_response(&a6, 6, &q6).unwrap().records,
            [Record::Addr("v6.example".into(), "2001:db8::1".parse().unwrap(), 30)]
        );
        let other = parse_query(&query(5, "pypi.org", TYPE_A)).unwrap();
        assert_eq!(parse_response(&a, 9, &other), None, "another question");
        assert_eq!(with_id(&a, 5)[..2], [0, 5]);
        for cut in 0..a.len() {
            let _ = parse_response(&a[..cut], 9, &q);
        }
    }

    /// Mutated queries and answers (a small deterministic fuzz): no panic,
    /// our own query reads back, chains stay short and loop-free.
    #[test]
    fn mutations() {
        let raw = query(5, "files.pythonhosted.org", TYPE_A);
        let q = parse_query(&raw).unwrap();
        let seeds = [
            raw.clone(),
            answer(
                9,
                &raw,
                Some("dualstack.python.map.fastly.net"),
                &[[151, 101, 0, 223]],
                60,
            ),
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..20_000 {
            let mut m = seeds[i % 2].clone();
            for _ in 0..(next() % 4 + 1) {
                let at = (next() as usize) % m.len();
                match next() % 3 {
                    0 => m[at] = next() as u8,
                    1 => m.truncate(at),
                    _ => m.insert(at, next() as u8),
                }
                if m.is_empty() {
                    break;
                }
            }
            if let Ok(mq) = parse_query(&m) {
                let back = parse_query(&upstream_query(&mq, 1)).expect("our own query reads back");
                assert_eq!((back.name, back.qtype), (mq.name.clone(), mq.qtype));
                assert_eq!(reply(&mq, NXDOMAIN).len(), HEADER + mq.question.len());
            }
            if let Some(r) = parse_response(&m, 9, &q) {
                let c = chain(&q.name, &r.records);
                assert!(c.len() <= 17);
                for (k, n) in c.iter().enumerate() {
                    assert!(!c[..k].contains(n));
                }
            }
        }
    }

    #[test]
    fn names_go_upstream_in_lower_case_and_come_back_as_asked() {
        let asked = query(0x1234, "ExFiL.Wild.Test", TYPE_A);
        let q = parse_query(&asked).unwrap();
        assert_eq!(q.name, "exfil.wild.test");
        let up = upstream_query(&q, 7);
        assert_eq!(&up[HEADER..HEADER + q.question.len()], &lowered(&q.question)[..]);
        assert!(!up.windows(5).any(|w| w == b"ExFiL"), "no case bit leaves");
        let mut answer = up.clone();
        answer[2] |= 0x80;
        let back = with_question(&answer, &q.question);
        assert_eq!(&back[HEADER..HEADER + q.question.len()], &q.question[..]);
    }
}
