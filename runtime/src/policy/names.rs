//! Host names in network rules: `host = "pypi.org"` matches that name,
//! `host = "*.githubusercontent.com"` every name below it (not the name
//! itself).
//!
//! Names are compared in their ASCII form (IDNA A-labels, RFC 5890
//! section 2.3.2.1), without the trailing dot and case-insensitively (RFC
//! 4343). A rule may be written in Unicode (`bücher.example`): it is
//! mapped to its A-labels (`xn--bcher-kva.example`) by UTS #46 with the
//! STD3 rules (the `idna` crate, the one the `url` crate uses), which also
//! checks every `xn--` label written as such.

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

    /// Whether the pattern is `*.name`.
    pub fn is_wildcard(&self) -> bool {
        self.wildcard
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
/// label that is not a valid IDNA A-label, or Unicode text that UTS #46
/// does not map to a valid name. Unicode text is returned as its A-labels.
pub fn normalize(text: &str) -> Result<String, String> {
    let t = text.strip_suffix('.').unwrap_or(text);
    if t.is_empty() {
        return Err("empty name".into());
    }
    let mapped;
    let t = if t.is_ascii() {
        t
    } else {
        mapped = idna::domain_to_ascii_strict(t)
            .map_err(|_| "not a valid internationalized name (IDNA, UTS #46 with the STD3 rules)".to_string())?;
        mapped.as_str()
    };
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
        if label.starts_with("xn--") {
            if !a_label_valid(label) {
                return Err(format!("label {label:?} is not a valid IDNA A-label"));
            }
        } else if label.len() >= 4 && &label[2..4] == "--" {
            return Err(format!(
                "label {label:?} has '--' in its third and fourth characters, reserved for IDNA"
            ));
        }
    }
    Ok(lower)
}

/// Whether `label` (`xn--...`) is an A-label: it decodes (RFC 3492) to a
/// U-label that UTS #46 accepts and maps back to the same A-label.
fn a_label_valid(label: &str) -> bool {
    let (unicode, decoded) = idna::domain_to_unicode(label);
    decoded.is_ok() && !unicode.is_ascii() && idna::domain_to_ascii_strict(&unicode).is_ok_and(|back| back == label)
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
            "ab--cd.com",
            "a\u{0}b.com",
            "bü cher.de",
            "xn--bcher-kva-.de",
            "xn--.com",
            "xn--99999999999.com",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(HostPattern::parse(&format!("{}.com", "a".repeat(64))).is_err());
        assert!(HostPattern::parse(&format!("{}.com", ["a"; 130].join("."))).is_err());
        // bücher.de in its A-label form, and in Unicode (mapped to it; upper
        // case folded as UTS #46 does).
        assert!(HostPattern::parse("xn--bcher-kva.de").is_ok());
        let u = HostPattern::parse("*.BÜCHER.de").unwrap();
        assert_eq!(u.to_string(), "*.xn--bcher-kva.de");
        assert!(u.matches("www.xn--bcher-kva.de"));
        assert_eq!(normalize("münchen.example.").unwrap(), "xn--mnchen-3ya.example");
        assert!(HostPattern::parse("_dmarc.example.com").is_ok());
    }
}
