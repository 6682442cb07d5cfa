//! `cordon learn`: the tightest policy that still runs a job, written from
//! what the job did under an observing policy (docs/LEARN.md).
//!
//! The observations are the audit trail's records of a run at the
//! supervisor level, where every open and every change of a file, every
//! connect and send, and (under host rules) every lookup is decided and
//! recorded. From them:
//!
//! - **Files** become a Landlock-shaped allow-list: a `D/** allow` grant
//!   for each directory written in, `D/** read-only` for each only read,
//!   and `/** deny` last. A file's directory is collapsed to at most
//!   `collapse` components (`/work/venv/lib/x.py` with 2: `/work/venv`),
//!   then up to the nearest directory that exists when the container
//!   starts (a grant needs one). The system directories (`/usr`, `/lib`,
//!   `/lib64`, `/bin`, `/sbin`, `/etc`) are granted read-only whole when
//!   they exist: the loader, libc and a program's own files are reached
//!   through them, and an executed file is not opened by the program (its
//!   exec is not in the trail). The root directory itself is never
//!   granted (that would grant every file).
//! - **Destinations** become `host` rules (by the name the resolver
//!   answered, with the ports used) or `cidr` rules (an address reached
//!   without a lookup), and `net_default = "deny"`.
//!
//! The policy extends the observing run's base, so its denials still
//! hold, and every rule carries a note with what was observed.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// Directories granted read-only whole when they exist (see the module).
pub const SYSTEM_DIRS: &[&str] = &["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc"];

/// Syscalls whose records name one file the job changed: the record's
/// whole detail.
const CHANGES: &[&str] = &[
    "mkdir",
    "mkdirat",
    "rmdir",
    "unlink",
    "unlinkat",
    "symlink",
    "symlinkat",
    "mknod",
    "mknodat",
    "chmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchownat",
    "lchown",
    "utimensat",
    "utimes",
    "utime",
    "futimesat",
    "truncate",
    "setxattr",
    "lsetxattr",
    "removexattr",
    "lremovexattr",
];

/// Syscalls whose records name two paths, `OLD -> NEW`.
const TWO_PATHS: &[&str] = &["rename", "renameat", "renameat2", "link", "linkat"];

/// What a run did, as the trail recorded it.
#[derive(Debug, Default, Clone)]
pub struct Observed {
    /// Per path: (reads, writes).
    files: BTreeMap<String, (u64, u64)>,
    /// Per destination (name, address, port): how many calls.
    destinations: BTreeMap<(Option<String>, IpAddr, u16), u64>,
    /// Records left out because their paths could not be told apart.
    pub ambiguous: u64,
}

impl Observed {
    /// Takes note of one record: its syscall, detail and action, and for a
    /// network record its destination (name, address, port). Records the
    /// observing policy refused (`deny`) are left out: they stay refused.
    pub fn add(&mut self, syscall: &str, detail: &str, action: &str, destination: Option<(Option<&str>, IpAddr, u16)>) {
        if action == "deny" || action == "event" {
            return;
        }
        if let Some((name, ip, port)) = destination {
            if detail.starts_with("resolver ") {
                return;
            }
            *self
                .destinations
                .entry((name.map(str::to_string), ip, port))
                .or_default() += 1;
            return;
        }
        if matches!(syscall, "open" | "openat" | "openat2" | "creat") {
            let (path, flags) = detail.rsplit_once(' ').unwrap_or((detail, ""));
            let write = syscall == "creat"
                || ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"]
                    .iter()
                    .any(|f| flags.split('|').any(|g| g == *f));
            let path = if flags.split('|').any(|g| g == "O_DIRECTORY") {
                format!("{}/.", path.trim_end_matches('/'))
            } else {
                path.to_string()
            };
            self.file(&path, write);
        } else if TWO_PATHS.contains(&syscall) {
            // `OLD -> NEW`; a name holding ` -> ` itself makes the record
            // ambiguous: it is left out (the policy can only be narrower,
            // and `--verify` shows what that costs).
            let mut parts = detail.split(" -> ");
            match (parts.next(), parts.next(), parts.next()) {
                (Some(old), Some(new), None) => {
                    self.file(old, true);
                    self.file(new, true);
                }
                _ => self.ambiguous += 1,
            }
        } else if CHANGES.contains(&syscall) {
            // The record's detail is the one path, spaces and all.
            self.file(detail, true);
        }
    }

    fn file(&mut self, path: &str, write: bool) {
        if !path.starts_with('/') {
            return;
        }
        // A path spelled with `.`, `..` or `//` (the trail keeps the
        // caller's spelling) names no directory a grant could take as
        // written: left out, as ambiguous.
        let body = path.strip_suffix("/.").unwrap_or(path);
        if body.len() > 1 && body[1..].split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            self.ambiguous += 1;
            return;
        }
        let e = self.files.entry(path.to_string()).or_default();
        if write {
            e.1 += 1;
        } else {
            e.0 += 1;
        }
    }
}

/// One generated path grant: the directory, whether it is written in, and
/// what was seen below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The directory (`D` of `D/**`).
    pub dir: String,
    /// `allow` when a file below was written, else `read-only`.
    pub write: bool,
    /// Opens and changes seen below it.
    pub uses: u64,
    /// Distinct files seen below it.
    pub files: usize,
    /// The first file seen (in path order).
    pub first: String,
}

/// The directory a file's grant goes on: collapsed to `collapse`
/// components, then up to one that exists at create (`is_dir`); a file of
/// a system directory, its system directory. `None` for the root itself.
fn grant_dir(path: &str, collapse: usize, is_dir: &impl Fn(&str) -> bool) -> Option<String> {
    let dir = match path.rsplit_once('/') {
        Some(("", _)) | None => return None,
        Some((d, _)) => d,
    };
    if let Some(sys) = SYSTEM_DIRS
        .iter()
        .find(|s| dir == **s || dir.starts_with(&format!("{s}/")))
    {
        // A system directory that is a symlink (merged /usr: /lib ->
        // usr/lib) is reached through the one it names, granted whole.
        return Some(sys.to_string()).filter(|s| is_dir(s));
    }
    let parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    let mut n = parts.len().min(collapse.max(1));
    while n > 0 {
        let d = format!("/{}", parts[..n].join("/"));
        if is_dir(&d) {
            return Some(d);
        }
        n -= 1;
    }
    None
}

/// A path as observed, without the `/.` a directory's open is noted with.
fn shown(path: &str) -> String {
    match path.strip_suffix("/.") {
        Some("") => "/".into(),
        Some(p) => p.into(),
        None => path.into(),
    }
}

/// The grants for `obs`, most specific first, none covered by an
/// ancestor that grants as much; with `is_dir` saying what exists at
/// create. Also the paths no grant could take (below the root itself).
pub fn grants(obs: &Observed, collapse: usize, is_dir: impl Fn(&str) -> bool) -> (Vec<Grant>, Vec<String>) {
    let mut by_dir: BTreeMap<String, Grant> = BTreeMap::new();
    let mut ungranted = Vec::new();
    for s in SYSTEM_DIRS.iter().filter(|s| is_dir(s)) {
        by_dir.insert(
            s.to_string(),
            Grant {
                dir: s.to_string(),
                write: false,
                uses: 0,
                files: 0,
                first: String::new(),
            },
        );
    }
    for (path, (reads, writes)) in &obs.files {
        let Some(dir) = grant_dir(path, collapse, &is_dir) else {
            if !SYSTEM_DIRS.iter().any(|s| path.starts_with(&format!("{s}/"))) {
                ungranted.push(shown(path));
            }
            continue;
        };
        let g = by_dir.entry(dir.clone()).or_insert_with(|| Grant {
            dir,
            write: false,
            uses: 0,
            files: 0,
            first: String::new(),
        });
        g.write |= *writes > 0;
        g.uses += reads + writes;
        g.files += 1;
        if g.first.is_empty() {
            g.first = shown(path);
        }
    }
    let all: Vec<Grant> = by_dir.into_values().collect();
    let covered = |g: &Grant| {
        all.iter()
            .any(|a| a.dir != g.dir && g.dir.starts_with(&format!("{}/", a.dir)) && (a.write || !g.write))
    };
    let mut out: Vec<Grant> = all.iter().filter(|g| !covered(g)).cloned().collect();
    out.sort_by(|a, b| {
        b.dir
            .matches('/')
            .count()
            .cmp(&a.dir.matches('/').count())
            .then(a.dir.cmp(&b.dir))
    });
    (out, ungranted)
}

/// One generated network rule: a name or an address, its ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The host name the resolver answered, or `None` for an address
    /// reached without a lookup.
    pub host: Option<String>,
    /// The addresses seen (one for a `cidr` rule).
    pub addresses: BTreeSet<IpAddr>,
    /// The ports used.
    pub ports: BTreeSet<u16>,
    /// Calls seen.
    pub uses: u64,
}

/// The network rules for `obs`: one per name, one per address reached
/// without a lookup.
pub fn destinations(obs: &Observed) -> Vec<Destination> {
    let mut by: BTreeMap<String, Destination> = BTreeMap::new();
    for ((name, ip, port), n) in &obs.destinations {
        let key = name.clone().unwrap_or_else(|| ip.to_string());
        let d = by.entry(key).or_insert_with(|| Destination {
            host: name.clone(),
            addresses: BTreeSet::new(),
            ports: BTreeSet::new(),
            uses: 0,
        });
        d.addresses.insert(*ip);
        d.ports.insert(*port);
        d.uses += n;
    }
    by.into_values().collect()
}

/// The policy file (TOML) for `grants` and `dests`, extending `from`.
pub fn policy_text(name: &str, from: &str, grants: &[Grant], dests: &[Destination]) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut out = format!(
        "# Written by `cordon learn` from what one run did; check it, then use it.\n\
         name = {}\ndescription = {}\nextends = {}\nnet_default = \"deny\"\n",
        q(name),
        q(&format!("learned from a run, extending {from}")),
        q(from)
    );
    for d in dests {
        let ports: Vec<String> = d.ports.iter().map(u16::to_string).collect();
        let target = match &d.host {
            Some(h) => format!("host = {}", q(h)),
            None => {
                let ip = d.addresses.iter().next().copied().unwrap_or(IpAddr::from([0, 0, 0, 0]));
                let bits = if ip.is_ipv4() { 32 } else { 128 };
                format!("cidr = {}", q(&format!("{ip}/{bits}")))
            }
        };
        let seen: Vec<String> = d.addresses.iter().map(IpAddr::to_string).collect();
        out.push_str(&format!(
            "\n[[net]]\n{target}\nports = [{}]\naction = \"allow\"\nnote = {}\n",
            ports.join(", "),
            q(&format!("learned: {} calls to {}", d.uses, seen.join(" ")))
        ));
    }
    for g in grants {
        let access = if g.write { "allow" } else { "read-only" };
        let note = if g.files == 0 {
            "a system directory, granted whole".to_string()
        } else {
            format!(
                "learned: {} opens or changes of {} files, first {}",
                g.uses, g.files, g.first
            )
        };
        out.push_str(&format!(
            "\n[[path]]\npattern = {}\naccess = \"{access}\"\nnote = {}\n",
            q(&format!("{}/**", g.dir)),
            q(&note)
        ));
    }
    out.push_str("\n[[path]]\npattern = \"/**\"\naccess = \"deny\"\nnote = \"learned: nothing else was opened\"\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed() -> Observed {
        let mut o = Observed::default();
        for (s, d, a) in [
            ("openat", "/usr/lib/python3.11/os.py O_RDONLY", "allow"),
            ("openat", "/lib/x86_64-linux-gnu/libc.so.6 O_RDONLY", "allow"),
            ("openat", "/work/venv/lib/site.py O_RDONLY", "allow"),
            ("openat", "/work/venv/lib/new.py O_WRONLY|O_CREAT|O_TRUNC", "allow"),
            ("openat", "/work/src/main.py O_RDONLY", "allow"),
            ("mkdir", "/tmp/build", "allow"),
            ("openat", "/root/.netrc O_RDONLY", "deny"),
            ("openat", "/ O_RDONLY|O_DIRECTORY", "allow"),
            // A name with spaces and what looks like other paths.
            ("mkdir", "/tmp/a /etc/evil", "allow"),
            ("rename", "/tmp/x -> /etc/y -> /root/z", "allow"),
            ("openat", "/./etc/hostname O_RDONLY", "allow"),
            ("openat", "/tmp/.. O_RDONLY|O_DIRECTORY", "allow"),
        ] {
            o.add(s, d, a, None);
        }
        o.add(
            "connect",
            "pypi.org (192.0.2.1):443",
            "allow",
            Some((Some("pypi.org"), "192.0.2.1".parse().unwrap(), 443)),
        );
        o.add(
            "connect",
            "192.0.2.9:8080",
            "allow",
            Some((None, "192.0.2.9".parse().unwrap(), 8080)),
        );
        o.add(
            "sendto",
            "resolver 127.0.0.53:53 40 bytes",
            "allow",
            Some((None, "127.0.0.53".parse().unwrap(), 53)),
        );
        o
    }

    #[test]
    fn files_become_grants_on_existing_directories() {
        let exists = |d: &str| ["/usr", "/lib", "/etc", "/work", "/tmp"].contains(&d);
        let (g, ungranted) = grants(&observed(), 2, exists);
        let shown: Vec<(&str, bool)> = g.iter().map(|g| (g.dir.as_str(), g.write)).collect();
        assert_eq!(
            shown,
            [
                ("/etc", false),
                ("/lib", false),
                ("/tmp", true),
                ("/usr", false),
                ("/work", true)
            ],
            "/work/venv does not exist at create: the grant goes up to /work; /root was denied"
        );
        assert_eq!(ungranted, ["/"]);
        assert!(
            !g.iter().any(|g| g.write && g.dir == "/etc"),
            "no write grant from a name with spaces"
        );
        let exists = |d: &str| ["/usr", "/work", "/work/venv", "/work/src"].contains(&d);
        let (g, _) = grants(&observed(), 2, exists);
        let shown: Vec<(&str, bool)> = g.iter().map(|g| (g.dir.as_str(), g.write)).collect();
        assert_eq!(shown, [("/work/src", false), ("/work/venv", true), ("/usr", false)]);
    }

    #[test]
    fn the_policy_reads_back_and_names_what_was_seen() {
        let o = observed();
        let (g, _) = grants(&o, 2, |d| ["/usr", "/lib", "/work", "/tmp"].contains(&d));
        let d = destinations(&o);
        assert_eq!(d.len(), 2, "the resolver's own traffic is left out");
        let text = policy_text("learned", "default", &g, &d);
        let p = crate::policy::Policy::from_toml(&text, "learned").expect("the policy loads");
        assert!(text.contains("host = \"pypi.org\"\nports = [443]"), "{text}");
        assert!(text.contains("cidr = \"192.0.2.9/32\"\nports = [8080]"), "{text}");
        assert!(text.contains("pattern = \"/work/**\"\naccess = \"allow\""), "{text}");
        assert_eq!(p.paths.access("/root/.netrc"), crate::policy::PathAccess::Deny);
        assert_eq!(p.paths.access("/usr/bin/python3"), crate::policy::PathAccess::ReadOnly);
        assert_eq!(
            p.net.decide("192.0.2.9".parse().unwrap(), 8080),
            crate::policy::NetAction::Allow
        );
        assert_eq!(
            p.net.decide("192.0.2.10".parse().unwrap(), 8080),
            crate::policy::NetAction::Deny
        );
    }
}
