//! File path rules, matched on the resolved path inside the container.

use globset::{GlobBuilder, GlobMatcher};

use super::model::{PathAccess, PathRule};

/// Compiled path rules; the first matching rule decides, no match allows.
/// A pattern `D/**` also matches `D` itself: a rule that protects what is
/// below a directory protects the directory (its listing, its mode, its
/// removal) too.
#[derive(Debug, Clone, Default)]
pub struct PathPolicy {
    rules: Vec<(Matcher, Option<Matcher>, PathAccess)>,
    /// The components of each restrictive rule's pattern, compiled, with
    /// the rule's index.
    restricted: Vec<(usize, Vec<Component>)>,
}

/// A compiled pattern. Most patterns of real policies are a literal path
/// or a literal directory with `/**`: those are compared as strings, with
/// the glob's own meaning, since a glob is compiled to a regex (and the
/// regex engine to automata, about 0.1 ms each: two per rule, on every
/// `create`, `exec` and supervisor start).
#[derive(Debug, Clone)]
enum Matcher {
    /// A pattern with no glob syntax: the path itself.
    Exact(String),
    /// `D/**` with `D` literal (`D` empty for `/**`): what starts with `D/`
    /// (the glob's regex is `^D/.*$`).
    Below(String),
    /// Anything else.
    Glob(GlobMatcher),
}

/// Whether `p` holds no glob syntax (globset: `*`, `?`, `[`, `{`, `\`).
fn is_literal(p: &str) -> bool {
    !p.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

impl Matcher {
    fn new(pattern: &str) -> Result<Self, String> {
        if is_literal(pattern) {
            return Ok(Matcher::Exact(pattern.to_string()));
        }
        if let Some(d) = pattern.strip_suffix("/**").filter(|d| is_literal(d)) {
            return Ok(Matcher::Below(format!("{d}/")));
        }
        Ok(Matcher::Glob(
            GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| e.to_string())?
                .compile_matcher(),
        ))
    }

    fn is_match(&self, path: &str) -> bool {
        match self {
            Matcher::Exact(p) => path == p,
            Matcher::Below(prefix) => path.starts_with(prefix.as_str()),
            Matcher::Glob(g) => g.is_match(path),
        }
    }
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
            if r.pattern.len() > 1 && r.pattern.contains("//") {
                return Err((
                    i,
                    format!("{:?}: // never appears in a normalised path: write one /", r.pattern),
                ));
            }
            if r.pattern.contains('\0') {
                return Err((i, format!("{:?}: a path holds no NUL byte", r.pattern)));
            }
            if r.access != PathAccess::Allow {
                let comps = r.pattern.split('/').filter(|c| !c.is_empty()).map(Component::compile);
                restricted.push((i, comps.collect::<Result<_, _>>().map_err(|e| (i, e))?));
            }
            let glob = Matcher::new(&r.pattern).map_err(|e| (i, e))?;
            // `D/**` covers `D` (`/**` covers `/`).
            let dir = match r.pattern.strip_suffix("/**") {
                Some(d) => Some(Matcher::new(if d.is_empty() { "/" } else { d }).map_err(|e| (i, e))?),
                None => None,
            };
            out.push((glob, dir, r.access));
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

    /// Whether a rule refuses or asks about some path (`deny` or `ask`):
    /// what an exec must then be checked against.
    pub fn refuses_some(&self) -> bool {
        self.rules
            .iter()
            .any(|(_, _, a)| matches!(a, PathAccess::Deny | PathAccess::Ask))
    }

    /// Whether a restrictive rule (deny, read-only) may apply to something
    /// *below* `dir`: then moving `dir` (rename) would carry restricted
    /// files to a path the rules no longer cover, and is refused. Decided
    /// component by component, so wildcards count: `/rw/*/private/**`
    /// restricts below `/rw` and `/rw/a`, not below `/rw/a/public`.
    ///
    /// Rules are first-match: a restrictive rule after a rule `E/**` that
    /// covers `dir` (its `E` matches `dir` or a directory above it) never
    /// decides below `dir`, and does not count.
    pub fn restricts_below(&self, dir: &str) -> bool {
        self.restricting_below(dir).is_some()
    }

    /// The first restrictive rule that may decide something strictly below
    /// `dir` (see [`Self::restricts_below`]).
    fn restricting_below(&self, dir: &str) -> Option<usize> {
        let comps: Vec<&str> = dir.split('/').filter(|c| !c.is_empty()).collect();
        let mut ancestors = vec!["/".to_string()];
        for c in &comps {
            let last = ancestors
                .last()
                .expect("starts with /")
                .trim_end_matches('/')
                .to_string();
            ancestors.push(format!("{last}/{c}"));
        }
        let shadow = self
            .rules
            .iter()
            .position(|(_, d, _)| d.as_ref().is_some_and(|d| ancestors.iter().any(|a| d.is_match(a))));
        self.restricted
            .iter()
            .find(|(i, pat)| shadow.is_none_or(|s| *i <= s) && may_match_below(pat, &comps))
            .map(|&(i, _)| i)
    }

    /// The index (in rule order) of the rule that refuses something about
    /// `path`: the first rule matching it if that rule restricts, else the
    /// first restrictive rule that applies below it (see
    /// [`Self::restricts_below`]). `None` when no rule restricts it.
    pub fn deciding_rule(&self, path: &str) -> Option<usize> {
        if let Some(i) = self.first_match(path).filter(|&i| self.rules[i].2 != PathAccess::Allow) {
            return Some(i);
        }
        self.restricting_below(path)
    }

    /// The index (in rule order) of the first rule matching `path`, the
    /// one that decides its access; `None` when no rule matches.
    pub fn first_match(&self, path: &str) -> Option<usize> {
        self.rules
            .iter()
            .position(|(g, dir, _)| g.is_match(path) || dir.as_ref().is_some_and(|d| d.is_match(trim_slashes(path))))
    }

    /// Whether an open of `path` with open(2) `flags` is allowed. A path an
    /// `ask` rule decides is not: a caller that can ask (an open, a
    /// metadata call) asks before ([`Self::access`] says `Ask`).
    pub fn allows_open(&self, path: &str, flags: u64) -> bool {
        self.access(path).allows_open(flags)
    }
}

impl PathAccess {
    /// Whether this access lets an open with open(2) `flags` through
    /// (`ask`: not without an answer, see [`PathPolicy::allows_open`]).
    pub fn allows_open(self, flags: u64) -> bool {
        match self {
            PathAccess::Allow => true,
            PathAccess::Deny | PathAccess::Ask => false,
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

    /// The string comparisons of literal patterns agree with the glob's
    /// own regex on every path tried, newlines and odd bytes included.
    #[test]
    fn literal_matchers_agree_with_globset() {
        let patterns = [
            "/",
            "/**",
            "/etc/shadow",
            "/etc/**",
            "/proc/sys/**",
            "/a b/**",
            "/x]y",
            "/a*",
            "/a/*/c",
            "/{a,b}/**",
        ];
        let paths = [
            "/",
            "/etc",
            "/etc/",
            "/etc/shadow",
            "/etc/shadow2",
            "/etcx",
            "/etc/a/b",
            "/etc/\nx",
            "/proc/sys",
            "/proc/sys/kernel",
            "/proc/system",
            "/a b",
            "/a b/c",
            "/x]y",
            "/ab",
            "/a/b/c",
            "/b/q",
            "//",
            "",
        ];
        let mut literal = 0;
        for p in patterns {
            let m = Matcher::new(p).unwrap();
            literal += !matches!(m, Matcher::Glob(_)) as usize;
            let g = GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .unwrap()
                .compile_matcher();
            for path in paths {
                assert_eq!(m.is_match(path), g.is_match(path), "pattern {p:?} on {path:?}");
            }
        }
        assert_eq!(literal, 6, "the literal patterns take the fast path");
    }

    fn rule(p: &str, a: PathAccess) -> PathRule {
        PathRule {
            pattern: p.into(),
            access: a,
            note: None,
            message: None,
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

    /// First match: under an allow-list (`/data/rw/** allow` before a
    /// catch-all `/** read-only`) nothing restrictive decides below a
    /// directory of /data/rw (nor below /data/rw itself), so it may be
    /// renamed; below /data the catch-all decides.
    #[test]
    fn restrictive_rules_shadowed_below_a_directory_do_not_count() {
        let p = PathPolicy::compile(&[
            rule("/data/rw/**", PathAccess::Allow),
            rule("/data/*/keep/**", PathAccess::Deny),
            rule("/**", PathAccess::ReadOnly),
        ])
        .unwrap();
        assert!(!p.restricts_below("/data/rw/sub"));
        assert!(!p.restricts_below("/data/rw"));
        assert!(
            p.restricts_below("/data"),
            "the catch-all and /data/*/keep decide below it"
        );
        assert!(p.restricts_below("/data/other"));
        assert!(p.restricts_below("/"));
        assert_eq!(p.deciding_rule("/data/rw/x"), None);
        let ro =
            PathPolicy::compile(&[rule("/data/**", PathAccess::ReadOnly), rule("/**", PathAccess::Allow)]).unwrap();
        assert!(ro.restricts_below("/data/x"), "the covering rule itself restricts");
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
