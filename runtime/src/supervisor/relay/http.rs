//! HTTP/1.x request heads (RFC 9112): the names a request is for, and how
//! long its body is, so every request of a keep-alive connection is
//! checked. Pure: no syscalls, any input.

/// The longest request head read (request line and headers).
pub const MAX_HEAD: usize = 64 * 1024;

/// How the body after a request head ends (RFC 9112 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// This many bytes (`Content-Length`, or 0 without one).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A request head, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The names the request is for: its `Host` header's host and, for an
    /// absolute-form target (`GET http://name/ HTTP/1.1`), the target's
    /// (lower case, no port, no trailing dot). Empty: neither (HTTP/1.0
    /// without `Host`).
    pub names: Vec<String>,
    /// Its body.
    pub body: Body,
    /// Its method.
    pub method: String,
    /// Its request target, whole (`/a/b?q`, `http://host/a`, `*`).
    pub target: String,
}

impl Head {
    /// Its method and target, for the audit trail (the target cut to 200
    /// characters).
    pub fn request(&self) -> String {
        let t = &self.target;
        let cut = t.char_indices().nth(200).map(|(i, _)| i).unwrap_or(t.len());
        format!("{} {}", self.method, &t[..cut])
    }
}

/// Decodes a request head (`head`: the bytes up to and including the
/// empty line). Errors name what makes the request one the relay cannot
/// frame or check: a malformed line, CONNECT, a protocol upgrade, several
/// `Host` headers, a `Transfer-Encoding` other than chunked or next to a
/// `Content-Length`, conflicting lengths.
pub fn parse_head(head: &[u8]) -> Result<Head, &'static str> {
    let text = std::str::from_utf8(head).map_err(|_| "a request head that is not text")?;
    let text = text
        .strip_suffix("\r\n\r\n")
        .ok_or("a request head without its empty line")?;
    // A bare CR or LF, a NUL or a folded line could be read otherwise by
    // the server (two headers where the relay saw one).
    if text
        .split("\r\n")
        .any(|l| l.contains(['\r', '\n', '\0']) || l.starts_with([' ', '\t']))
    {
        return Err("a bare CR or LF, a NUL or a folded header line");
    }
    let mut lines = text.split("\r\n");
    let request = lines.next().unwrap_or_default();
    let mut parts = request.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("a malformed request line");
    };
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err("a malformed method");
    }
    if !version.starts_with("HTTP/1.") {
        return Err("not HTTP/1.x");
    }
    if method == "CONNECT" {
        return Err("CONNECT (a tunnel the relay cannot check)");
    }
    let mut names = Vec::new();
    let (mut host, mut length, mut chunked, mut encoded) = (None, None, false, false);
    for line in lines {
        let (name, value) = line.split_once(':').ok_or("a malformed header")?;
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err("a malformed header name");
        }
        let value = value.trim_matches([' ', '\t']);
        let lower = name.to_ascii_lowercase();
        // A server that reads `_` as `-` would see a header the relay did not.
        if lower.contains('_')
            && matches!(
                lower.replace('_', "-").as_str(),
                "host" | "content-length" | "transfer-encoding"
            )
        {
            return Err("a Host, Content-Length or Transfer-Encoding header spelled with an underscore");
        }
        match lower.as_str() {
            "host" if host.replace(value).is_some() => return Err("several Host headers"),
            "content-length" => {
                if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                    return Err("a malformed Content-Length");
                }
                let n: u64 = value.parse().map_err(|_| "a malformed Content-Length")?;
                if length.replace(n).is_some_and(|m| m != n) {
                    return Err("conflicting Content-Length headers");
                }
            }
            "transfer-encoding" => {
                encoded = true;
                chunked = value
                    .rsplit(',')
                    .next()
                    .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
            }
            "upgrade" => return Err("a protocol upgrade (the rest of the stream could not be checked)"),
            _ => {}
        }
    }
    if let Some(h) = host {
        names.push(host_of(h).ok_or("a malformed Host header")?);
    }
    if let Some(n) = target_host(target)? {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let body = match (encoded, chunked, length) {
        (true, _, Some(_)) => return Err("Transfer-Encoding next to Content-Length"),
        (true, false, _) => return Err("a Transfer-Encoding other than chunked"),
        (true, true, None) => Body::Chunked,
        (false, _, n) => Body::Length(n.unwrap_or(0)),
    };
    // Many servers leave the body of these unread, and would read it as
    // the next request, which the relay would not have checked.
    if matches!(method, "GET" | "HEAD" | "OPTIONS" | "TRACE") && body != Body::Length(0) {
        return Err("a body on a GET, HEAD, OPTIONS or TRACE request");
    }
    Ok(Head {
        names,
        body,
        method: method.to_string(),
        target: target.to_string(),
    })
}

/// The host a request target names: none for origin-form (`/path`) and
/// asterisk-form (`*`); for absolute-form (`scheme://authority/...`, any
/// scheme, in any case) its authority's, which a server takes over `Host`
/// (RFC 9112 3.2.2). Any other form is refused.
fn target_host(target: &str) -> Result<Option<String>, &'static str> {
    if target.starts_with('/') || target == "*" {
        return Ok(None);
    }
    let (scheme, rest) = target.split_once("://").ok_or("a request target of no known form")?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok {
        return Err("a request target of no known form");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    host_of(authority).map(Some).ok_or("a malformed request target")
}

/// A `tchar` of a token (RFC 9110 5.6.2): methods and header names.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The host of `authority` (`host`, `host:port`, `[v6]:port`, with no
/// user part): lower case, without the port and a trailing dot.
fn host_of(authority: &str) -> Option<String> {
    if authority.contains('@') {
        return None;
    }
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map(|(h, _)| h)?,
        None => authority.split(':').next()?,
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    let ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':'));
    ok.then(|| host.to_ascii_lowercase())
}

/// The size of a chunk from its size line (`1a;ext=v\r\n`), RFC 9112 7.1:
/// hex digits, then optional extensions after `;` (whitespace only before
/// a `;`), the line ended by CRLF with no other CR, LF or NUL. `None` for
/// anything else, which a server could read otherwise.
pub fn chunk_size(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?.strip_suffix("\r\n")?;
    if text.contains(['\r', '\n', '\0']) {
        return None;
    }
    let (hex, ext) = match text.split_once(';') {
        Some((h, e)) => (h.trim_end_matches([' ', '\t']), Some(e)),
        None => (text, None),
    };
    if hex.is_empty() || hex.len() > 15 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    if ext.is_some_and(|e| e.trim_start_matches([' ', '\t']).is_empty()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// Whether `line` is a well-formed trailer line or the empty line that
/// ends the trailers: CRLF-ended, no other CR, LF or NUL, not folded.
pub fn trailer_line(line: &[u8]) -> bool {
    let Some(text) = line.strip_suffix(b"\r\n") else {
        return false;
    };
    !text.iter().any(|b| matches!(b, b'\r' | b'\n' | 0)) && !text.starts_with(b" ") && !text.starts_with(b"\t")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_bodies() {
        let h = parse_head(b"GET /x HTTP/1.1\r\nHost: Allowed.Test.:8080\r\n\r\n").unwrap();
        assert_eq!(
            h,
            Head {
                names: vec!["allowed.test".into()],
                body: Body::Length(0),
                method: "GET".into(),
                target: "/x".into(),
            }
        );
        assert_eq!(h.request(), "GET /x");
        let h = parse_head(b"POST http://other.test/ HTTP/1.1\r\nhost: a.test\r\ncontent-length: 5\r\n\r\n").unwrap();
        assert_eq!(h.names, ["a.test", "other.test"]);
        assert_eq!(h.body, Body::Length(5));
        let h = parse_head(b"PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").unwrap();
        assert_eq!(h.body, Body::Chunked);
        assert!(parse_head(b"GET / HTTP/1.0\r\n\r\n").unwrap().names.is_empty());
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n").unwrap().names,
            ["::1"]
        );
    }

    #[test]
    fn requests_the_relay_cannot_check_are_refused() {
        for bad in [
            &b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"[..],
            b"CONNECT other.test:443 HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: user@a\r\n\r\n",
            b"GET  / HTTP/1.1\r\n\r\n",
            b"\x16\x03\x01\x00",
            b"GET / SSH-2.0\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: y\nHost: b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\n Host: b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\n",
        ] {
            assert!(parse_head(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn chunk_sizes() {
        assert_eq!(chunk_size(b"1a\r\n"), Some(26));
        assert_eq!(chunk_size(b"0;ext=1\r\n"), Some(0));
        assert_eq!(chunk_size(b"0 ;ext\r\n"), Some(0));
        for bad in [
            &b"zz\r\n"[..],
            b"\r\n",
            b"ffffffffffffffffff\r\n",
            b"+1a\r\n",
            b"\t1f\r\n",
            b"1f \r\n",
            b"1\n",
            b"1\r\r\n",
            b"0;\r\n",
        ] {
            assert_eq!(chunk_size(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(trailer_line(b"\r\n") && trailer_line(b"X-T: 1\r\n"));
        assert!(!trailer_line(b"\n") && !trailer_line(b"X: 1\n") && !trailer_line(b" X: 1\r\n"));
    }

    #[test]
    fn absolute_targets_of_any_scheme_and_case_name_their_host() {
        for t in [
            "HTTP://other.test/",
            "Http://other.test/x",
            "ftp://other.test/",
            "https://other.test",
        ] {
            let h = parse_head(format!("GET {t} HTTP/1.1\r\nHost: a.test\r\n\r\n").as_bytes()).unwrap();
            assert_eq!(h.names, ["a.test", "other.test"], "{t}");
        }
        for t in ["other.test/", "1http://other.test/", "http:/x"] {
            assert!(
                parse_head(format!("GET {t} HTTP/1.1\r\nHost: a.test\r\n\r\n").as_bytes()).is_err(),
                "{t}"
            );
        }
        assert!(parse_head(b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n").is_ok());
        assert!(parse_head(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n").is_err());
        assert!(parse_head(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer_Encoding: chunked\r\n\r\n").is_err());
        assert!(parse_head(b"GET / HTTP/1.1\r\nHo_st: b\r\nHost: a\r\n\r\n").is_ok());
        assert!(parse_head(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n").is_err());
        assert!(parse_head(b"HEAD / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
        assert!(parse_head(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n").is_ok());
    }
}
