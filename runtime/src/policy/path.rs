//! File path rules, matched on the resolved path inside the container.

use globset::{GlobBuilder, GlobMatcher};

use super::model::{PathAccess, PathRule};

/// Compiled path rules; the first matching rule decides, no match allows.
/// A pattern `D/**` also matches `D` itself: a rule that protects what is
/// below a directory protects the directory (its listing, its mode, its
/// removal) too.
#[derive(Debug, Clone, Default)]
pub struct PathPolicy {
    rules: Vec<(GlobMatcher, Option<GlobMatcher>, PathAccess)>,
    /// The components of each restrictive rule's pattern, compiled, with
    /// the rule's index.
    restricted: Vec<(usize, Vec<Component>)>,
}

/// One `/`-separated component of a pattern, for [`PathPolicy::restricts_below`].
#[derive(Debug, Clone)]
enum Component {
    /// `**`: any number of components.
    AnyDepth,
    /// A brace group that continues into the next component (`{a/b,c}`):
    /// cannot be matched one component at a time.
    Spanning,
    /// A literal name.
    Literal(String),
    /// A name with wildcards.
    Glob(GlobMatcher),
}

impl Component {
    fn compile(c: &str) -> Result<Self, String> {
        Ok(if c == "**" {
            Component::AnyDepth
        } else if c.contains('{') && !c.contains('}') {
            Component::Spanning
        } else if c.contains(['*', '?', '[', '{', '\\']) {
            Component::Glob(
                GlobBuilder::new(c)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| e.to_string())?
                    .compile_matcher(),
            )
        } else {
            Component::Literal(c.to_string())
        })
    }
}

impl PathPolicy {
    /// Compiles globs; an error gives the rule index and the message.
    pub fn compile(rules: &[PathRule]) -> Result<Self, (usize, String)> {
        let mut out = Vec::with_capacity(rules.len());
        let mut restricted = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            if !r.pattern.starts_with('/') {
                return Err((i, format!("{:?} must be an absolute path", r.pattern)));
            }
            // Paths are matched normalised, without a trailing slash: such a
            // pattern would never match.
            if r.pattern.len() > 1 && r.pattern.ends_with('/') {
                let d = r.pattern.trim_end_matches('/');
                return Err((
                    i,
                    format!("{:?} matches nothing (paths have no trailing /): write {d:?} for the directory itself or \"{d}/**\" for it and everything below", r.pattern),
                ));
            }
            if r.pattern.split('/').any(|c| c == "." || c == "..") {
                return Err((
                    i,
                    format!("{:?}: . and .. never appear in a normalised path", r.pattern),
                ));
            }
            if r.access != PathAccess::Allow {
                let comps = r.pattern.split('/').filter(|c| !c.is_empty()).map(Component::compile);
                restricted.push((i, comps.collect::<Result<_, _>>().map_err(|e| (i, e))?));
            }
            let glob = GlobBuilder::new(&r.pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| (i, e.to_string()))?;
            // `D/**` covers `D` (`/**` covers `/`).
            let dir = match r.pattern.strip_suffix("/**") {
                Some(d) => Some(
                    GlobBuilder::new(if d.is_empty() { "/" } else { d })
                        .literal_separator(true)
                        .build()
                        .map_err(|e| (i, e.to_string()))?
                        .compile_matcher(),
                ),
                None => None,
            };
            out.push((glob.compile_matcher(), dir, r.access));
        }
        Ok(Self { rules: out, restricted })
    }

    /// The access granted to `path` (absolute, normalised, inside the container).
    pub fn access(&self, path: &str) -> PathAccess {
        self.rules
            .iter()
            .find(|(g, dir, _)| g.is_match(path) || dir.as_ref().is_some_and(|d| d.is_match(trim_slashes(path))))
            .map(|&(_, _, a)| a)
            .unwrap_or(PathAccess::Allow)
    }

    /// Whether a restrictive rule (deny, read-only) may apply to something
    /// *below* `dir`: then moving `dir` (rename) would carry restricted
    /// files to a path the rules no longer cover, and is refused. Decided
    /// component by component, so wildcards count: `/rw/*/private/**`
    /// restricts below `/rw` and `/rw/a`, not below `/rw/a/public`.
    pub fn restricts_below(&self, dir: &str) -> bool {
        let comps: Vec<&str> = dir.split('/').filter(|c| !c.is_empty()).collect();
        self.restricted.iter().any(|(_, pat)| may_match_below(pat, &comps))
    }

    /// The index (in rule order) of the rule that refuses something about
    /// `path`: the first rule matching it if that rule restricts, else the
    /// first restrictive rule that applies below it (see
    /// [`Self::restricts_below`]). `None` when no rule restricts it.
    pub fn deciding_rule(&self, path: &str) -> Option<usize> {
        let first = self
            .rules
            .iter()
            .position(|(g, dir, _)| g.is_match(path) || dir.as_ref().is_some_and(|d| d.is_match(trim_slashes(path))));
        if let Some(i) = first.filter(|&i| self.rules[i].2 != PathAccess::Allow) {
            return Some(i);
        }
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        self.restricted
            .iter()
            .find(|(_, pat)| may_match_below(pat, &comps))
            .map(|&(i, _)| i)
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

/// `path` without trailing slashes (`/` stays `/`).
fn trim_slashes(path: &str) -> &str {
    match path.trim_end_matches('/') {
        "" if path.starts_with('/') => "/",
        p => p,
    }
}

/// Whether a pattern split in components (`pat`) can match a path strictly
/// below the directory whose components are `dir`. A brace group that
/// spans components (`{a/b,c}`) counts as matching below anything from
/// where it starts.
fn may_match_below(pat: &[Component], dir: &[&str]) -> bool {
    for (i, d) in dir.iter().enumerate() {
        let Some(p) = pat.get(i) else {
            return false;
        };
        match p {
            Component::AnyDepth | Component::Spanning => return true,
            Component::Literal(l) if l != d => return false,
            Component::Glob(g) if !g.is_match(d) => return false,
            _ => {}
        }
    }
    pat.len() > dir.len()
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
        assert!(!p.allows_open("/secret", 0), "/secret/** covers /secret");
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
        assert!(!p.restricts_below("/etc/a.conf"), "the file itself is not below");
    }

    /// A wildcard in the middle of a pattern: renaming any directory on a
    /// path it can match moves what it protects (found as an escape:
    /// `mv /rw/a /rw/b` took `/rw/a/private/key` out of `/rw/*/private/**`).
    #[test]
    fn wildcards_restrict_below_every_directory_they_can_match() {
        let p = PathPolicy::compile(&[rule("/rw/*/private/**", PathAccess::Deny)]).unwrap();
        assert!(p.restricts_below("/rw"));
        assert!(p.restricts_below("/rw/a"));
        assert!(p.restricts_below("/rw/a/private"));
        assert!(p.restricts_below("/"));
        assert!(!p.restricts_below("/rw/a/public"));
        assert!(!p.restricts_below("/ro"));
        assert_eq!(p.access("/rw/a/private/key"), PathAccess::Deny);
    }

    /// `D/**` covers `D`: the directory a rule protects cannot be listed,
    /// chmodded or removed either.
    #[test]
    fn a_subtree_rule_covers_its_directory() {
        let p = PathPolicy::compile(&[
            rule("/secret/**", PathAccess::Deny),
            rule("/rw/*/ro/**", PathAccess::ReadOnly),
        ])
        .unwrap();
        assert_eq!(p.access("/secret"), PathAccess::Deny);
        assert_eq!(p.access("/secret/"), PathAccess::Deny);
        assert_eq!(p.access("/secret/x"), PathAccess::Deny);
        assert_eq!(p.access("/secretive"), PathAccess::Allow);
        assert_eq!(p.access("/rw/a/ro"), PathAccess::ReadOnly);
        assert_eq!(p.access("/rw/a/rox"), PathAccess::Allow);
    }

    #[test]
    fn relative_pattern_is_an_error() {
        assert!(PathPolicy::compile(&[rule("etc", PathAccess::Deny)]).is_err());
    }
}
