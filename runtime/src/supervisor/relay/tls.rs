//! The server name of a TLS ClientHello (RFC 8446 4.1.2, RFC 6066 3), read
//! from the first bytes a client sends. Pure: no syscalls, any input.

/// What the first bytes of a connection say about its TLS server name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// More bytes are needed to read the whole ClientHello.
    Incomplete,
    /// A ClientHello with this `server_name` (host_name type; lower case,
    /// without a trailing dot).
    Name(String),
    /// A ClientHello without a server name.
    NoName,
    /// A ClientHello that carries an encrypted one (`encrypted_client_hello`,
    /// RFC 9849 / draft-ietf-tls-esni): the name shown (here) is the outer,
    /// public one; the server name the client asks for is hidden.
    Encrypted(String),
    /// Not a TLS ClientHello (another protocol), or a malformed or
    /// ambiguous one (two server names, a name with bytes no host name
    /// has): refused whatever `sni` says.
    NotTls,
}

/// The largest ClientHello read (handshake message plus record headers).
pub const MAX_HELLO: usize = 64 * 1024;

/// Reads the ClientHello at the start of `buf` (the bytes received so
/// far), which may span several handshake records (RFC 8446 5.1).
pub fn client_hello(buf: &[u8]) -> Hello {
    // Reassemble the handshake message from the records' fragments.
    let mut msg = Vec::new();
    let mut at = 0;
    loop {
        if buf.len() < at + 5 {
            return if buf.len() > MAX_HELLO {
                Hello::NotTls
            } else {
                Hello::Incomplete
            };
        }
        let h = &buf[at..at + 5];
        // Content type 22 (handshake), legacy record version 3.x.
        if h[0] != 22 || h[1] != 3 {
            return Hello::NotTls;
        }
        let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
        if len == 0 || len > 16384 + 256 {
            return Hello::NotTls;
        }
        if buf.len() < at + 5 + len {
            return if at + 5 + len > MAX_HELLO {
                Hello::NotTls
            } else {
                Hello::Incomplete
            };
        }
        msg.extend_from_slice(&buf[at + 5..at + 5 + len]);
        at += 5 + len;
        if msg.len() >= 4 {
            // Handshake type 1 (client_hello) and its 24-bit length.
            if msg[0] != 1 {
                return Hello::NotTls;
            }
            let body = (usize::from(msg[1]) << 16) | (usize::from(msg[2]) << 8) | usize::from(msg[3]);
            if body + 4 > MAX_HELLO {
                return Hello::NotTls;
            }
            if msg.len() >= body + 4 {
                return parse_body(&msg[4..4 + body]).unwrap_or(Hello::NotTls);
            }
        }
    }
}

/// A cursor over a ClientHello body; `None` past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }
    /// A vector with a `width`-byte length prefix.
    fn vec(&mut self, width: usize) -> Option<&'a [u8]> {
        let n = if width == 1 { self.u8()? } else { self.u16()? };
        self.take(n)
    }
}

fn parse_body(body: &[u8]) -> Option<Hello> {
    let mut r = Reader(body);
    r.take(2 + 32)?; // legacy_version, random
    r.vec(1)?; // legacy_session_id
    r.vec(2)?; // cipher_suites
    r.vec(1)?; // legacy_compression_methods
    if r.0.is_empty() {
        return Some(Hello::NoName);
    }
    let mut exts = Reader(r.vec(2)?);
    let mut found = None;
    let mut ech = false;
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let data = exts.vec(2)?;
        if kind == ECH {
            ech = true;
        }
        if kind != 0 {
            continue;
        }
        // Two server_name extensions: refused (RFC 8446 4.2).
        if found.is_some() {
            return None;
        }
        let mut list = Reader(Reader(data).vec(2)?);
        let mut name = None;
        while !list.0.is_empty() {
            let t = list.u8()?;
            let n = list.vec(2)?;
            // One host_name (type 0) per list (RFC 6066 3).
            if t == 0 {
                if name.is_some() {
                    return None;
                }
                name = Some(n);
            }
        }
        found = Some(name?);
    }
    let Some(raw) = found else {
        return Some(if ech {
            Hello::Encrypted(String::new())
        } else {
            Hello::NoName
        });
    };
    let text = std::str::from_utf8(raw).ok()?;
    let text = text.strip_suffix('.').unwrap_or(text);
    let ok = !text.is_empty()
        && text.len() <= 253
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    let name = text.to_ascii_lowercase();
    ok.then_some(if ech { Hello::Encrypted(name) } else { Hello::Name(name) })
}

/// The `encrypted_client_hello` extension's type.
const ECH: usize = 0xfe0d;

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello record with the given extensions block.
    fn hello(exts: &[u8]) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend([7u8; 32]);
        body.push(0); // session id
        body.extend([0, 2, 0x13, 0x01]); // one cipher suite
        body.extend([1, 0]); // null compression
        body.extend((exts.len() as u16).to_be_bytes());
        body.extend(exts);
        let mut msg = vec![1];
        msg.extend(&(body.len() as u32).to_be_bytes()[1..]);
        msg.extend(body);
        let mut rec = vec![22, 3, 1];
        rec.extend((msg.len() as u16).to_be_bytes());
        rec.extend(msg);
        rec
    }

    fn sni(name: &[u8]) -> Vec<u8> {
        let mut entry = vec![0];
        entry.extend((name.len() as u16).to_be_bytes());
        entry.extend(name);
        let mut list = (entry.len() as u16).to_be_bytes().to_vec();
        list.extend(entry);
        let mut ext = vec![0, 0];
        ext.extend((list.len() as u16).to_be_bytes());
        ext.extend(list);
        ext
    }

    #[test]
    fn reads_the_server_name() {
        let mut exts = vec![0, 10, 0, 2, 0, 29]; // supported_groups first
        exts.extend(sni(b"Allowed.Test."));
        let rec = hello(&exts);
        assert_eq!(client_hello(&rec), Hello::Name("allowed.test".into()));
        for cut in 0..rec.len() {
            assert_eq!(client_hello(&rec[..cut]), Hello::Incomplete, "cut at {cut}");
        }
    }

    #[test]
    fn a_hello_split_over_two_records_is_reassembled() {
        let rec = hello(&sni(b"a.test"));
        let msg = &rec[5..];
        let (a, b) = msg.split_at(20);
        let mut two = vec![22, 3, 1];
        two.extend((a.len() as u16).to_be_bytes());
        two.extend(a);
        two.extend([22, 3, 1]);
        two.extend((b.len() as u16).to_be_bytes());
        two.extend(b);
        assert_eq!(client_hello(&two), Hello::Name("a.test".into()));
    }

    #[test]
    fn an_encrypted_hello_is_told_apart() {
        let mut exts = sni(b"public.test");
        exts.extend([0xfe, 0x0d, 0, 3, 0, 1, 2]);
        assert_eq!(client_hello(&hello(&exts)), Hello::Encrypted("public.test".into()));
    }

    #[test]
    fn no_name_other_protocols_and_bad_names() {
        assert_eq!(client_hello(&hello(&[])), Hello::NoName);
        assert_eq!(client_hello(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), Hello::NotTls);
        assert_eq!(client_hello(&hello(&sni(b"a b"))), Hello::NotTls);
        assert_eq!(client_hello(&hello(&sni(b""))), Hello::NotTls);
        let mut two = sni(b"a.test");
        two.extend(sni(b"b.test"));
        assert_eq!(client_hello(&hello(&two)), Hello::NotTls);
        // A length past the block.
        let mut bad = hello(&sni(b"a.test"));
        let n = bad.len();
        bad[n - 8] = 0xff;
        assert_eq!(client_hello(&bad), Hello::NotTls);
    }
}
