//! Host names in network rules: `host = "pypi.org"` matches that name,
//! `host = "*.githubusercontent.com"` every name below it (not the name
//! itself).
//!
//! Names are compared in their ASCII form (IDNA A-labels, RFC 5890
//! section 2.3.2.1), without the trailing dot and case-insensitively (RFC
//! 4343). A rule must be written in that form: `policy check` refuses
//! non-ASCII text with the A-label to write instead unknown, since the
//! IDNA mapping tables are not part of cordon.

/// The longest name in presentation form without its final dot (RFC 1035
/// section 2.3.4 gives 255 octets on the wire: 253 characters of text).
pub const MAX_NAME: usize = 253;
/// The longest label (RFC 1035 section 2.3.4).
pub const MAX_LABEL: usize = 63;

/// A compiled host pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// The name (lower case, no trailing dot) or, for a wildcard, the
    /// suffix after `*.`.
    name: String,
    /// Whether the pattern was `*.name`.
    wildcard: bool,
}

impl HostPattern {
    /// Parses `text` (`name` or `*.name`). Errors: one line saying what is
    /// wrong (empty, too long, a bad label, a `*` elsewhere, non-ASCII).
    pub fn parse(text: &str) -> Result<Self, String> {
        let (wildcard, rest) = match text.strip_prefix("*.") {
            Some(r) => (true, r),
            None => (false, text),
        };
        let name = normalize(rest).map_err(|e| format!("{text:?}: {e}"))?;
        if wildcard && !name.contains('.') {
            return Err(format!(
                "{text:?}: a wildcard needs at least two labels after \"*.\" (it would match a whole top-level domain)"
            ));
        }
        Ok(Self { name, wildcard })
    }

    /// Whether `name` (normalized, see [`normalize`]) matches.
    pub fn matches(&self, name: &str) -> bool {
        if self.wildcard {
            name.len() > self.name.len() + 1
                && name.ends_with(&self.name)
                && name.as_bytes()[name.len() - self.name.len() - 1] == b'.'
        } else {
            name == self.name
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.wildcard {
            write!(f, "*.{}", self.name)
        } else {
            f.write_str(&self.name)
        }
    }
}

/// A host name in the form rules compare: lower case, without the final
/// dot. Errors: empty, longer than [`MAX_NAME`], a label empty, longer than
/// [`MAX_LABEL`], with characters other than letters, digits and `-` (or
/// `_`, found in service names), starting or ending with `-`, an `xn--`
/// label that is not valid Punycode (RFC 3492), or non-ASCII text.
pub fn normalize(text: &str) -> Result<String, String> {
    let t = text.strip_suffix('.').unwrap_or(text);
    if t.is_empty() {
        return Err("empty name".into());
    }
    if !t.is_ascii() {
        return Err("not ASCII: write the name's IDNA A-label form (xn--...), as `idn2` prints it".into());
    }
    if t.len() > MAX_NAME {
        return Err(format!("{} characters, at most {MAX_NAME}", t.len()));
    }
    let lower = t.to_ascii_lowercase();
    for label in lower.split('.') {
        if label.is_empty() {
            return Err("an empty label (two dots in a row)".into());
        }
        if label.len() > MAX_LABEL {
            return Err(format!(
                "label {label:?} has {} characters, at most {MAX_LABEL}",
                label.len()
            ));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(format!("label {label:?} holds {c:?} (letters, digits and '-' only)"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("label {label:?} starts or ends with '-'"));
        }
        if let Some(puny) = label.strip_prefix("xn--") {
            if !punycode_valid(puny) {
                return Err(format!("label {label:?} is not a valid IDNA A-label (Punycode)"));
            }
        } else if label.len() >= 4 && &label[2..4] == "--" {
            return Err(format!(
                "label {label:?} has '--' in its third and fourth characters, reserved for IDNA"
            ));
        }
    }
    Ok(lower)
}

/// Whether `s` decodes as Punycode (RFC 3492 section 6.2) to at least one
/// non-ASCII code point.
fn punycode_valid(s: &str) -> bool {
    const BASE: u32 = 36;
    let (basic, ext) = match s.rfind('-') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => ("", s),
    };
    if ext.is_empty() {
        return false;
    }
    let (mut n, mut i, mut bias, mut out) = (128u32, 0u32, 72u32, basic.len() as u32);
    let mut it = ext.bytes().peekable();
    let mut decoded_any = false;
    while it.peek().is_some() {
        let old = i;
        let mut w = 1u32;
        let mut k = BASE;
        loop {
            let Some(c) = it.next() else { return false };
            let digit = match c {
                b'a'..=b'z' => c - b'a',
                b'0'..=b'9' => c - b'0' + 26,
                _ => return false,
            } as u32;
            let Some(add) = digit.checked_mul(w).and_then(|d| i.checked_add(d)) else {
                return false;
            };
            i = add;
            let t = if k <= bias {
                1
            } else if k >= bias + 26 {
                26
            } else {
                k - bias
            };
            if digit < t {
                break;
            }
            let Some(nw) = w.checked_mul(BASE - t) else {
                return false;
            };
            w = nw;
            k += BASE;
        }
        out += 1;
        // adapt
        let mut delta = if old == 0 { (i - old) / 700 } else { (i - old) / 2 };
        delta += delta / out;
        let mut k = 0;
        while delta > ((BASE - 1) * 26) / 2 {
            delta /= BASE - 1;
            k += BASE;
        }
        bias = k + (BASE * delta) / (delta + 38);
        let Some(nn) = n.checked_add(i / out) else { return false };
        n = nn;
        i %= out;
        if char::from_u32(n).is_none() || n < 128 {
            return false;
        }
        decoded_any = true;
        i += 1;
    }
    decoded_any
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let p = HostPattern::parse("PyPI.org.").unwrap();
        assert!(p.matches("pypi.org"));
        assert!(!p.matches("files.pypi.org"));
        let w = HostPattern::parse("*.githubusercontent.com").unwrap();
        assert!(w.matches("raw.githubusercontent.com"));
        assert!(w.matches("a.b.githubusercontent.com"));
        assert!(!w.matches("githubusercontent.com"));
        assert!(!w.matches("xgithubusercontent.com"));
        assert_eq!(w.to_string(), "*.githubusercontent.com");
    }

    #[test]
    fn bad_names() {
        for bad in [
            "",
            ".",
            "a..b",
            "*.com",
            "a.*.b",
            "-a.com",
            "a b.com",
            "bücher.de",
            "ab--cd.com",
            "xn--.com",
            "xn--99999999999.com",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(HostPattern::parse(&format!("{}.com", "a".repeat(64))).is_err());
        assert!(HostPattern::parse(&format!("{}.com", ["a"; 130].join("."))).is_err());
        // bücher.de in its A-label form.
        assert!(HostPattern::parse("xn--bcher-kva.de").is_ok());
        assert!(HostPattern::parse("_dmarc.example.com").is_ok());
    }
}
