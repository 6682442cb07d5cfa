//! File path rules, matched on the resolved path inside the container.

use globset::{GlobBuilder, GlobMatcher};

use super::model::{PathAccess, PathRule};

/// Compiled path rules; the first matching rule decides, no match allows.
#[derive(Debug, Clone, Default)]
pub struct PathPolicy {
    rules: Vec<(GlobMatcher, PathAccess)>,
    /// The literal directory prefix of each restrictive rule's pattern.
    restricted_prefixes: Vec<String>,
}

impl PathPolicy {
    /// Compiles globs; an error gives the rule index and the message.
    pub fn compile(rules: &[PathRule]) -> Result<Self, (usize, String)> {
        let mut out = Vec::with_capacity(rules.len());
        let mut restricted_prefixes = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            if r.access != PathAccess::Allow {
                let literal: String = r.pattern.chars().take_while(|c| !"*?[{\\".contains(*c)).collect();
                restricted_prefixes.push(literal);
            }
            if !r.pattern.starts_with('/') {
                return Err((i, format!("{:?} must be an absolute path", r.pattern)));
            }
            let glob = GlobBuilder::new(&r.pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| (i, e.to_string()))?;
            out.push((glob.compile_matcher(), r.access));
        }
        Ok(Self {
            rules: out,
            restricted_prefixes,
        })
    }

    /// The access granted to `path` (absolute, normalised, inside the container).
    pub fn access(&self, path: &str) -> PathAccess {
        self.rules
            .iter()
            .find(|(g, _)| g.is_match(path))
            .map(|&(_, a)| a)
            .unwrap_or(PathAccess::Allow)
    }

    /// Whether a restrictive rule (deny, read-only) may apply to something
    /// *below* `dir`: then moving `dir` (rename) would carry restricted
    /// files to a path the rules no longer cover, and is refused.
    pub fn restricts_below(&self, dir: &str) -> bool {
        let dir = dir.trim_end_matches('/');
        self.restricted_prefixes
            .iter()
            .any(|p| dir.is_empty() || p.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/')))
    }

    /// Whether an open of `path` with open(2) `flags` is allowed.
    pub fn allows_open(&self, path: &str, flags: u64) -> bool {
        match self.access(path) {
            PathAccess::Allow => true,
            PathAccess::Deny => false,
            PathAccess::ReadOnly => !is_write_open(flags),
        }
    }
}

/// Whether open(2) `flags` can modify the file.
pub fn is_write_open(flags: u64) -> bool {
    let f = flags as i32;
    f & libc::O_ACCMODE != libc::O_RDONLY || f & (libc::O_CREAT | libc::O_TRUNC) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(p: &str, a: PathAccess) -> PathRule {
        PathRule {
            pattern: p.into(),
            access: a,
            note: None,
        }
    }

    #[test]
    fn first_match_decides() {
        let p = PathPolicy::compile(&[
            rule("/secret/ok", PathAccess::Allow),
            rule("/secret/**", PathAccess::Deny),
            rule("/etc/**", PathAccess::ReadOnly),
        ])
        .unwrap();
        assert!(p.allows_open("/secret/ok", 0));
        assert!(!p.allows_open("/secret/a/b", 0));
        assert!(!p.allows_open("/secret", 0) || p.access("/secret") == PathAccess::Allow);
        assert!(p.allows_open("/etc/passwd", libc::O_RDONLY as u64));
        assert!(!p.allows_open("/etc/passwd", libc::O_WRONLY as u64));
        assert!(!p.allows_open("/etc/passwd", (libc::O_RDONLY | libc::O_TRUNC) as u64));
        assert!(p.allows_open("/tmp/x", libc::O_RDWR as u64));
    }

    #[test]
    fn parents_of_restricted_paths() {
        let p = PathPolicy::compile(&[
            rule("/data/d/secret/**", PathAccess::Deny),
            rule("/etc/*.conf", PathAccess::ReadOnly),
        ])
        .unwrap();
        assert!(p.restricts_below("/data/d/secret"));
        assert!(p.restricts_below("/data/d"));
        assert!(p.restricts_below("/data"));
        assert!(p.restricts_below("/etc"));
        assert!(!p.restricts_below("/data/e"));
        assert!(!p.restricts_below("/data/d/secretive"));
        assert!(!p.restricts_below("/tmp"));
    }

    #[test]
    fn relative_pattern_is_an_error() {
        assert!(PathPolicy::compile(&[rule("etc", PathAccess::Deny)]).is_err());
    }
}
