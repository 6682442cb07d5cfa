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
//!   through them. An executed file, which the kernel opens, counts as
//!   read from its `execve` record (the path as the call named it). The
//!   root directory itself is never granted (that would grant every
//!   file).
//! - **Destinations** become `host` rules (by the name the resolver
//!   answered, with the ports used) or `cidr` rules (an address reached
//!   without a lookup), and `net_default = "deny"`.
//!
//! - **Syscalls** become an allow-list: every syscall the base allows that
//!   the run never made is refused with ENOSYS, as if the kernel had no
//!   such call (a program then takes its fall-back). The observing policy
//!   sends every syscall to the supervisor (`default_action = "audit"`)
//!   except the [`ASSUMED`] ones, which every program makes all the time
//!   and a learned policy never refuses. Only a learning run observes them
//!   all ([`Observed::all_syscalls`]); a trail of another run does not.
//!
//! The policy extends the observing run's base, so its denials still
//! hold, and every rule carries a note with what was observed.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use crate::abi::table;
use crate::policy::model::{Action, PolicyFile, SyscallRule};
use crate::policy::Policy;

/// The syscalls a learning run lets through unobserved and a learned
/// policy never refuses: the ones nearly every program makes, often
/// (I/O on open fds, memory, signals, threads' futexes, time, the
/// loader's start-up), and the ones cordon's executor makes between the
/// filter and the job's exec (the listener's handover: `write`, `read`,
/// `close`; dropping a lent capability). Observing these would
/// cost a round trip each and refusing them would only break programs.
pub const ASSUMED: &[&str] = &[
    "read",
    "write",
    "close",
    "fstat",
    "newfstatat",
    "statx",
    "lseek",
    "mmap",
    "mprotect",
    "munmap",
    "mremap",
    "madvise",
    "brk",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sigaltstack",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "access",
    "faccessat",
    "faccessat2",
    "pipe",
    "pipe2",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "epoll_wait",
    "epoll_pwait",
    "epoll_ctl",
    "sched_yield",
    "nanosleep",
    "clock_nanosleep",
    "clock_gettime",
    "gettimeofday",
    "getpid",
    "gettid",
    "getppid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "fcntl",
    "dup",
    "dup2",
    "dup3",
    "getdents64",
    "getcwd",
    "futex",
    "set_robust_list",
    "set_tid_address",
    "rseq",
    "arch_prctl",
    "prlimit64",
    "getrandom",
    "recvfrom",
    "recvmsg",
    "sendto",
    "sendmsg",
    "wait4",
    "exit",
    "exit_group",
    "capget",
    "capset",
    "prctl",
    "seccomp",
];

/// Syscalls a learning run observes (the trail counts the threads and
/// processes started from them) but a learned policy never refuses: a job
/// that did not start one while learning may well start one later (a
/// shell's pipeline forks where its simple commands vfork), and a program
/// that cannot is broken, not confined. The same holds for ending and
/// reaping them: whether a pool's teardown signals a worker (`kill`) or
/// waits for it (`waitid`) depends on which finished first, so one run
/// cannot tell; and `restart_syscall`, which the kernel makes for a
/// program whose sleep or wait a signal interrupted. `execve` is observed for the files it runs (the program
/// does not open them itself: the kernel does), and never refused: the
/// job's own start is one.
pub const NEVER_REFUSED: &[&str] = &[
    "clone",
    "fork",
    "vfork",
    "execve",
    "kill",
    "tkill",
    "tgkill",
    "waitid",
    "restart_syscall",
    "sched_getaffinity",
    "sched_yield",
];

/// Directories a learned policy grants read-only whole when the container
/// has them, though a run may never read them: what glibc reads on its
/// own, only when it needs to, so whether one run does depends on timing.
/// malloc counts the CPUs (`/sys/devices/system/cpu/online`, then
/// `sched_getaffinity`, both above in [`NEVER_REFUSED`]) the first time two
/// threads contend for an arena, and reads `/proc/sys/vm/overcommit_memory`
/// the first time it trims a thread's heap; a thread spinning on a lock
/// yields (`sched_yield`) only when it found it held. A run without
/// contention never does any of these, the next one may: refused, its
/// fall-backs would still run the job, but with denials.
/// Each is granted when the mount it is below (`/sys`, `/proc`) is there.
pub const LAZY_READS: &[&str] = &["/sys/devices/system/cpu", "/proc/sys/vm"];

/// Makes `src` (a policy that lets through what no rule names) an
/// observing one: a call no rule decides is recorded (`audit`), but one
/// of the [`ASSUMED`] syscalls, which is let through as before by a last
/// rule (after `src`'s own, which still decide first: a `sendto` with an
/// address is still emulated, one without is let through). A policy that
/// refuses what no rule names is left as it is: what it lets through, its
/// rules name.
///
/// The last rule also keeps the listener's handover out of the
/// supervisor, which cannot answer before it has the listener: the
/// executor sends it with `sendto` after the filter is in.
pub fn observe_syscalls(src: &mut PolicyFile) {
    if src.default_action != Action::Allow {
        return;
    }
    src.default_action = Action::Audit;
    src.syscalls.push(SyscallRule {
        names: ASSUMED.iter().map(|n| n.to_string()).collect(),
        action: Action::Allow,
        errno: None,
        args: Vec::new(),
        note: Some("cordon learn: made by nearly every program, let through unobserved".into()),
        message: None,
    });
}

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
    /// Per syscall name: how many calls the trail recorded (not refused).
    syscalls: BTreeMap<String, u64>,
    /// Whether the trail holds every syscall of the run but the
    /// [`ASSUMED`] ones (a learning run's, under [`observe_syscalls`]):
    /// only then are the others refused.
    pub all_syscalls: bool,
    /// Threads and processes started (clone, clone3, fork, vfork).
    pub tasks: u64,
    /// The highest fd number an open returned.
    pub max_fd: Option<u64>,
}

impl Observed {
    /// Takes note of one record: its syscall, detail and action, and for a
    /// network record its destination (name, address, port). Records the
    /// observing policy refused (`deny`) are left out: they stay refused.
    pub fn add(
        &mut self,
        syscall: &str,
        detail: &str,
        (action, result): (&str, &str),
        destination: Option<(Option<&str>, IpAddr, u16)>,
    ) {
        if action == "deny" || action == "event" {
            return;
        }
        *self.syscalls.entry(syscall.to_string()).or_default() += 1;
        if matches!(syscall, "clone" | "clone3" | "fork" | "vfork") {
            self.tasks += 1;
        }
        if let Some(fd) = result.strip_prefix("fd ").and_then(|n| n.parse::<u64>().ok()) {
            self.max_fd = self.max_fd.max(Some(fd));
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
            // `OLD -> NEW` (`OLD -> ` when the call failed before the new
            // name was reached, whose empty name is no file); a name
            // holding ` -> ` itself makes more parts: left out (the policy can only be narrower,
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
        } else if syscall == "execve" {
            // The file run: read (and executed) by the kernel, never
            // opened by the program, so seen only here. A relative path
            // (`./a.out`) names no directory and is left out.
            self.file(detail, false);
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
    // Below a mount (/sys, /proc) nothing is known at create: the mount
    // point stands for them.
    let top = |d: &str| d.split('/').take(2).collect::<Vec<_>>().join("/");
    for d in LAZY_READS.iter().filter(|d| is_dir(&top(d))) {
        by_dir.insert(
            d.to_string(),
            Grant {
                dir: d.to_string(),
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
/// without a lookup. Port 0 is left out: nothing reaches it (a TCP
/// connect there fails, a UDP send there is EINVAL), and a UDP connect to
/// it, which sends nothing, is how resolvers sort the addresses they got
/// (c-ares under node): the learned policy refuses it (EPERM, the
/// resolver then leaves its answers unsorted) and `--verify` does not
/// count it as a denial (docs/LEARN.md).
pub fn destinations(obs: &Observed) -> Vec<Destination> {
    let mut by: BTreeMap<String, Destination> = BTreeMap::new();
    for ((name, ip, port), n) in obs.destinations.iter().filter(|((_, _, port), _)| *port != 0) {
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

/// The syscalls a learned policy refuses with ENOSYS: every one `from`
/// lets through (its answer to a call with all-zero arguments) that the
/// run never made and that is not [`ASSUMED`], in number order; none
/// when the trail does not hold every syscall ([`Observed::all_syscalls`]).
pub fn unused_syscalls(obs: &Observed, from: &Policy) -> Vec<&'static str> {
    if !obs.all_syscalls {
        return Vec::new();
    }
    table::entries()
        .filter(|(nr, e)| table::available(*nr) && !ASSUMED.contains(&e.name) && !NEVER_REFUSED.contains(&e.name))
        .filter(|(_, e)| !obs.syscalls.contains_key(e.name))
        .filter(|(nr, _)| !matches!(from.decide(*nr, &[0; 6]).0, Action::Deny | Action::Kill))
        .map(|(_, e)| e.name)
        .collect()
}

/// Resource limits to start from, from what the trail shows the run used
/// (threads and processes started, the highest fd opened), one line each.
pub fn suggestions(obs: &Observed) -> Vec<String> {
    let mut out = Vec::new();
    if obs.all_syscalls {
        let n = obs.tasks + 1;
        out.push(format!(
            "{n} threads and processes ran in all (at most that many at once): a pids limit \
             (linux.resources.pids.limit) of {} leaves room",
            (2 * n).max(32)
        ));
    }
    if let Some(fd) = obs.max_fd {
        out.push(format!(
            "the highest fd opened was {fd}: an open-files limit (process.rlimits RLIMIT_NOFILE) of {} leaves room",
            (2 * (fd + 1)).next_power_of_two().max(1024)
        ));
    }
    out
}

/// `names` as a TOML array, wrapped at 80 columns after `indent` (the
/// column the array starts in, plus one).
pub(crate) fn toml_names(names: &[&str], indent: usize) -> String {
    let mut out = String::from("[");
    let mut line = indent + 1;
    for (i, n) in names.iter().enumerate() {
        let item = format!("\"{n}\"");
        if i > 0 {
            out.push(',');
            line += 1;
            if line + 1 + item.len() + 1 > 80 {
                out.push('\n');
                out.push_str(&" ".repeat(indent));
                line = indent;
            } else {
                out.push(' ');
                line += 1;
            }
        }
        out.push_str(&item);
        line += item.len();
    }
    out.push(']');
    out
}

/// The policy file (TOML) for `grants` and `dests`, extending `from`,
/// refusing the syscalls `refused` ([`unused_syscalls`]), with `notes`
/// ([`suggestions`]) as comments at its top.
pub fn policy_text(
    name: &str,
    from: &str,
    (grants, dests): (&[Grant], &[Destination]),
    refused: &[&str],
    notes: &[String],
) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut out: String = notes.iter().map(|n| format!("# {n}\n")).collect();
    out.push_str(&format!(
        "# Written by `cordon learn` from what one run did; check it, then use it.\n\
         name = {}\ndescription = {}\nextends = {}\nnet_default = \"deny\"\n",
        q(name),
        q(&format!("learned from a run, extending {from}")),
        q(from)
    ));
    if !refused.is_empty() {
        out.push_str(&format!(
            "\n[[syscall]]\nnames = {}\naction = \"deny\"\nerrno = \"ENOSYS\"\nnote = {}\n",
            toml_names(refused, 8),
            q(&format!(
                "learned: {} syscalls the base lets through were never made; as if the kernel had none of them",
                refused.len()
            ))
        ));
    }
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
        let note = if g.files == 0 && LAZY_READS.contains(&g.dir.as_str()) {
            "what libc reads when it needs to (the CPUs, overcommit), granted whole".to_string()
        } else if g.files == 0 {
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
            // A link refused before its new name was reached (EEXIST), its
            // old name holding ` -> `: more than two parts, left out.
            ("linkat", "/tmp/x -> /etc/y -> ", "allow"),
            // A program run (the kernel opens it).
            ("execve", "/usr/bin/git", "audit"),
            ("openat", "/./etc/hostname O_RDONLY", "allow"),
            ("openat", "/tmp/.. O_RDONLY|O_DIRECTORY", "allow"),
        ] {
            o.add(s, d, (a, "0"), None);
        }
        o.add(
            "connect",
            "pypi.org (192.0.2.1):443",
            ("allow", "0"),
            Some((Some("pypi.org"), "192.0.2.1".parse().unwrap(), 443)),
        );
        o.add(
            "connect",
            "192.0.2.9:8080",
            ("allow", "0"),
            Some((None, "192.0.2.9".parse().unwrap(), 8080)),
        );
        o.add(
            "sendto",
            "resolver 127.0.0.53:53 40 bytes",
            ("allow", "0"),
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
        let o = observed();
        assert_eq!(o.ambiguous, 4, "the rename, the link and the two spellings");
        assert!(o.files.contains_key("/usr/bin/git"), "the program run");
        let exists = |d: &str| ["/usr", "/work", "/work/venv", "/work/src"].contains(&d);
        let (g, _) = grants(&observed(), 2, exists);
        let shown: Vec<(&str, bool)> = g.iter().map(|g| (g.dir.as_str(), g.write)).collect();
        assert_eq!(shown, [("/work/src", false), ("/work/venv", true), ("/usr", false)]);
    }

    /// What glibc reads only under contention is granted though the run
    /// never read it, when the container mounts /sys and /proc.
    #[test]
    fn what_libc_reads_on_demand_is_granted_unseen() {
        let o = Observed::default();
        let (g, _) = grants(&o, 2, |d| ["/usr", "/sys", "/proc"].contains(&d));
        let text = policy_text("learned", "default", (&g, &[]), &[], &[]);
        let p = crate::policy::Policy::from_toml(&text, "learned").expect("the policy loads");
        assert_eq!(
            p.paths.access("/sys/devices/system/cpu/online"),
            crate::policy::PathAccess::ReadOnly
        );
        assert_eq!(
            p.paths.access("/proc/sys/vm/overcommit_memory"),
            crate::policy::PathAccess::ReadOnly
        );
        assert_eq!(p.paths.access("/sys/kernel/notes"), crate::policy::PathAccess::Deny);
        let (g, _) = grants(&o, 2, |d| d == "/usr");
        assert_eq!(g.len(), 1, "no /sys, no /proc: no grant below them");
    }

    #[test]
    fn the_policy_reads_back_and_names_what_was_seen() {
        let o = observed();
        let (g, _) = grants(&o, 2, |d| ["/usr", "/lib", "/work", "/tmp"].contains(&d));
        let d = destinations(&o);
        assert_eq!(d.len(), 2, "the resolver's own traffic is left out");
        let mut o = o;
        o.add(
            "connect",
            "pypi.org (192.0.2.1):0",
            ("allow", "0"),
            Some((Some("pypi.org"), "192.0.2.1".parse().unwrap(), 0)),
        );
        let d = destinations(&o);
        assert!(
            d.iter().all(|d| !d.ports.contains(&0)),
            "port 0 is no destination: {d:?}"
        );
        let text = policy_text("learned", "default", (&g, &d), &[], &[]);
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

    fn nr(name: &str) -> u32 {
        table::number(name).unwrap()
    }

    fn default_policy() -> Policy {
        let src = crate::policy::BUILTIN.iter().find(|(n, _)| *n == "default").unwrap().1;
        Policy::from_toml(src, "default").unwrap()
    }

    /// The observing policy records every syscall no rule names, but the
    /// assumed ones; its base's rules still decide theirs.
    #[test]
    fn observing_records_what_no_rule_names_but_the_assumed() {
        let mut src = default_policy().source;
        observe_syscalls(&mut src);
        let p = Policy::from_toml(&toml::to_string(&src).unwrap(), "observing").unwrap();
        assert_eq!(p.decide(nr("setpriority"), &[0; 6]).0, Action::Audit);
        assert_eq!(p.decide(nr("read"), &[0; 6]).0, Action::Allow);
        assert_eq!(p.decide(nr("openat"), &[0; 6]).0, Action::Emulate);
        assert_eq!(p.decide(nr("kexec_load"), &[0; 6]).0, Action::Deny);
        for name in ASSUMED {
            assert!(table::number(name).is_some(), "{name} is not in the syscall table");
        }
        // The listener's handover (a send without an address) is never
        // held for a supervisor that has no listener yet; a send with one
        // is still the egress rules'.
        assert_eq!(p.decide(nr("sendto"), &[0; 6]).0, Action::Allow);
        assert_eq!(p.decide(nr("sendto"), &[3, 0, 0, 0, 0x1000, 16]).0, Action::Emulate);
        // Every built-in observes.
        for (name, src) in crate::policy::BUILTIN {
            let mut file = Policy::from_toml(src, name).unwrap().source;
            observe_syscalls(&mut file);
            Policy::from_toml(&toml::to_string(&file).unwrap(), name).unwrap();
        }
    }

    /// A learning run's trail: what it never made is refused with ENOSYS,
    /// what it made and the assumed syscalls are decided as by the base;
    /// another run's trail refuses nothing.
    #[test]
    fn the_syscalls_never_made_are_refused_and_no_others() {
        let base = default_policy();
        let mut o = Observed::default();
        o.add("socket", "socket(0x2, 0x1, 0x0)", ("audit", "3"), None);
        o.add("openat", "/etc/hosts O_RDONLY", ("allow", "fd 7"), None);
        o.add("clone", "clone(0x3d0f00, 0x0, 0x0)", ("audit", "12"), None);
        assert!(unused_syscalls(&o, &base).is_empty(), "not every syscall was observed");
        o.all_syscalls = true;
        let refused = unused_syscalls(&o, &base);
        assert!(refused.contains(&"setpriority"), "{refused:?}");
        for made in ["socket", "openat", "clone", "read", "execve", "fork", "pipe"] {
            assert!(!refused.contains(&made), "{made} was made or assumed");
        }
        assert!(!refused.contains(&"kexec_load"), "the base refuses it already");
        let notes = suggestions(&o);
        let text = policy_text("learned", "default", (&[], &[]), &refused, &notes);
        assert!(text.starts_with("# 2 threads and processes ran in all"), "{text}");
        assert!(text.contains("the highest fd opened was 7"), "{text}");
        let p = Policy::from_toml(&text, "learned").unwrap();
        assert_eq!(p.decide(nr("setpriority"), &[0; 6]), (Action::Deny, libc::ENOSYS));
        assert_eq!(p.decide(nr("socket"), &[0; 6]).0, Action::Allow);
        assert_eq!(p.decide(nr("openat"), &[0; 6]).0, Action::Emulate);
        assert_eq!(p.decide(nr("write"), &[0; 6]).0, Action::Allow);
    }
}
