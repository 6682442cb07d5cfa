//! HTTP rules of a `host` rule: the methods and paths its requests may
//! have (`methods`, `paths` in [`super::model::NetRule`]), checked by the
//! relay on every request of a plain-HTTP connection (docs/POLICY.md,
//! "HTTP rules"). Pure: no syscalls.
//!
//! A path is checked as the server will read it, or refused: a request
//! whose path holds a `.` or `..` segment, an empty segment (`//`), a
//! backslash, or a percent-encoded `/`, `\`, `.` or `%` could reach
//! another resource than the one the pattern names on a server that
//! normalises or decodes it, so it is refused under a rule with `paths`.

use super::model::{NetRule, HTTP_PORTS};

/// A host rule's HTTP request rules.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpRule {
    /// Allowed methods, upper case; empty: any.
    pub methods: Vec<String>,
    /// Allowed path patterns; empty: any.
    pub paths: Vec<String>,
}

impl HttpRule {
    /// The rule of `r`, checked: `None` when it has neither `methods` nor
    /// `paths`. Errors (field, why): on a rule that is not an `allow`
    /// `host` rule, whose `ports` are not all HTTP ports, with the name
    /// check off or optional, a method that is not an HTTP token, a path pattern not
    /// starting with `/`.
    pub fn compile(r: &NetRule) -> Result<Option<Self>, (&'static str, String)> {
        if r.methods.is_empty() && r.paths.is_empty() {
            return Ok(None);
        }
        let field = if r.methods.is_empty() { "paths" } else { "methods" };
        if r.host.is_none() || r.action != super::NetAction::Allow {
            return Err((field, "only an allow rule with host has methods or paths".into()));
        }
        if matches!(r.sni, Some(super::model::Sni::Off | super::model::Sni::Optional)) {
            return Err((
                field,
                "methods and paths are checked on the wire, request by request, for the rule its Host names: \
                 sni = \"off\" turns that off, and under sni = \"optional\" a request without Host names no rule"
                    .into(),
            ));
        }
        if r.ports.is_empty() || r.ports.iter().any(|p| !HTTP_PORTS.contains(p)) {
            return Err((
                "ports",
                format!(
                    "methods and paths are checked on plain HTTP only: list ports among {HTTP_PORTS:?} \
                     (TLS hides the request, and cordon does not terminate TLS)"
                ),
            ));
        }
        for m in &r.methods {
            if m.is_empty() || !m.bytes().all(|b| b.is_ascii_uppercase() || b == b'-') {
                return Err((
                    "methods",
                    format!("{m:?} is not an HTTP method in upper case (GET, POST, ...)"),
                ));
            }
        }
        for p in &r.paths {
            if !p.starts_with('/') {
                return Err(("paths", format!("{p:?} does not start with /")));
            }
        }
        Ok(Some(HttpRule {
            methods: r.methods.clone(),
            paths: r.paths.clone(),
        }))
    }

    /// Why a request with `method` and request target `target` is
    /// refused under this rule; `None`: allowed.
    pub fn refuses(&self, method: &str, target: &str) -> Option<String> {
        if !self.methods.is_empty() && !self.methods.iter().any(|m| m == method) {
            return Some(format!("method {method} not among {:?}", self.methods));
        }
        if self.paths.is_empty() {
            return None;
        }
        let Some(path) = request_path(target) else {
            return Some(format!(
                "the path of {target:?} could be read otherwise by the server (a . or .. segment, //, \\ or an encoded /, \\, . or %)"
            ));
        };
        if self.paths.iter().any(|p| matches(p, &path)) {
            None
        } else {
            Some(format!("path {path} not among {:?}", self.paths))
        }
    }
}

/// The path of request target `target` (origin form `/a/b?q`, or
/// absolute form `http://host/a/b?q`), without its query; `None` when it
/// is one a server could read as another path.
pub fn request_path(target: &str) -> Option<String> {
    let path = if target.starts_with('/') {
        target
    } else {
        let rest = target.split_once("://")?.1;
        match rest.find('/') {
            Some(i) => &rest[i..],
            None => "/",
        }
    };
    let path = path.split(['?', '#']).next().unwrap_or("/");
    let lower = path.to_ascii_lowercase();
    if path.contains('\\') || ["%2f", "%5c", "%2e", "%25"].iter().any(|e| lower.contains(e)) {
        return None;
    }
    let segments: Vec<&str> = path[1..].split('/').collect();
    let last = segments.len() - 1;
    for (i, s) in segments.iter().enumerate() {
        if *s == "." || *s == ".." || (s.is_empty() && i != last) {
            return None;
        }
    }
    Some(path.to_string())
}

/// Whether `path` matches `pattern`: `**` as the last segment matches
/// anything below (and the directory itself), `*` one segment's worth of
/// characters (no `/`), anything else itself.
pub fn matches(pattern: &str, path: &str) -> bool {
    if let Some(dir) = pattern.strip_suffix("/**") {
        // The directory itself, or any path below it: a prefix ending
        // before a `/` that matches it.
        return glob(dir, path)
            || path
                .char_indices()
                .filter(|&(k, c)| c == '/' && k > 0)
                .any(|(k, _)| glob(dir, &path[..k]));
    }
    glob(pattern, path)
}

/// `*`-only glob (no `/` crossed).
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < t.len() {
        if i < p.len() && p[i] == b'*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if i < p.len() && p[i] == t[j] {
            i += 1;
            j += 1;
        } else if let Some(s) = star.filter(|_| t[mark] != b'/') {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(methods: &[&str], paths: &[&str], ports: &[u16]) -> NetRule {
        NetRule {
            cidr: None,
            host: Some("files.test".into()),
            family: None,
            ports: ports.to_vec(),
            action: super::super::NetAction::Allow,
            max_names: None,
            sni: None,
            methods: methods.iter().map(|s| s.to_string()).collect(),
            paths: paths.iter().map(|s| s.to_string()).collect(),
            note: None,
            message: None,
        }
    }

    #[test]
    fn methods_and_paths_decide_requests() {
        let r = HttpRule::compile(&rule(&["GET", "HEAD"], &["/simple/**", "/api/*/status"], &[80]))
            .unwrap()
            .unwrap();
        assert_eq!(r.refuses("GET", "/simple/x/y.whl?a=b"), None);
        assert_eq!(r.refuses("GET", "/simple"), None);
        assert_eq!(r.refuses("HEAD", "http://files.test/api/v1/status"), None);
        assert!(r.refuses("POST", "/simple/x").unwrap().contains("method POST"));
        assert!(r.refuses("GET", "/simplex").unwrap().contains("path /simplex"));
        assert!(r.refuses("GET", "/api/v1/x/status").is_some(), "* is one segment");
        assert!(r.refuses("GET", "/admin").is_some());
        for sneaky in [
            "/simple/../admin",
            "/simple/%2e%2e/admin",
            "/simple/%2E%2E/admin",
            "/simple/..%2fadmin",
            "/simple//x",
            "/simple/./x",
            "/simple/x\\..\\..\\admin",
            "/simple/%252e%252e/admin",
        ] {
            assert!(r.refuses("GET", sneaky).is_some(), "{sneaky}");
        }
        assert!(HttpRule::compile(&rule(&[], &[], &[80])).unwrap().is_none());
    }

    #[test]
    fn rules_the_relay_cannot_check_are_refused() {
        let field = |r: NetRule| HttpRule::compile(&r).unwrap_err().0;
        assert_eq!(field(rule(&["GET"], &[], &[443])), "ports", "TLS hides the request");
        assert_eq!(field(rule(&["GET"], &[], &[])), "ports", "every port");
        assert_eq!(field(rule(&["get"], &[], &[80])), "methods");
        assert_eq!(field(rule(&[], &["simple"], &[80])), "paths");
        let mut cidr = rule(&["GET"], &[], &[80]);
        cidr.host = None;
        cidr.cidr = Some("192.0.2.0/24".into());
        assert_eq!(field(cidr), "methods");
        let mut off = rule(&["GET"], &[], &[80]);
        off.sni = Some(super::super::model::Sni::Off);
        assert_eq!(field(off), "methods");
        let mut optional = rule(&[], &["/x/**"], &[80]);
        optional.sni = Some(super::super::model::Sni::Optional);
        assert_eq!(field(optional), "paths", "a request without Host would pass unchecked");
    }
}
