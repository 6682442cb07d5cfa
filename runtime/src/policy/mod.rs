//! Policies: what happens to each syscall, file path and network destination.
//!
//! A policy is loaded from a built-in name (`default`, `audit`, `permissive`, `agent`) or
//! a file (TOML, or JSON when the name ends in `.json`), validated, and compiled
//! into a [`Policy`]: per syscall number an ordered list of rules, plus path and
//! network matchers. The same compiled form drives the BPF filter
//! ([`crate::filter`]) and the supervisor's decisions, so the two cannot drift.

mod base;
mod choice;
pub mod diff;
pub mod http;
pub mod landlock;
pub mod learn;
pub mod levels;
pub mod live;
pub mod model;
pub mod names;
pub mod narrow;
mod net;
mod path;

use std::collections::BTreeMap;
use std::path::Path;

pub use base::DEV_RULE;
pub use levels::Enforcement;
pub use model::{Action, ArgMatch, NetAction, PathAccess, PolicyFile, Sni};
pub use net::{embedded_v4, family_name, is_internal, NetPolicy, Wire};
pub use path::{is_write_open, PathPolicy};

use crate::abi::table;

/// Policies compiled into the binary: (name, TOML source).
pub const BUILTIN: &[(&str, &str)] = &[
    ("default", include_str!("../../policies/default.toml")),
    ("audit", include_str!("../../policies/audit.toml")),
    ("permissive", include_str!("../../policies/permissive.toml")),
    ("agent", include_str!("../../policies/agent.toml")),
];

/// Syscalls whose names look like file changes but are not: reads of
/// metadata, persistence of data already written, objects outside the
/// container's file tree (POSIX message queues, memfds), or writes through
/// an fd that had to be opened for writing. The file-change test checks
/// that the syscall table gives none of them the disposition
/// [`table::Disposition::Changes`], and that every other name that looks
/// like a file change has it (or is a mount call or refused).
pub const NOT_FILE_CHANGES: &[&str] = &[
    "write",
    "pwrite64",
    "writev",
    "pwritev",
    "pwritev2",
    "ftruncate",
    "fallocate",
    "msync",
    "fsync",
    "fdatasync",
    "sync",
    "syncfs",
    "sync_file_range",
    "readlink",
    "readlinkat",
    "getxattr",
    "lgetxattr",
    "fgetxattr",
    "listxattr",
    "llistxattr",
    "flistxattr",
    "mq_open",
    "mq_unlink",
    "mq_getsetattr",
    "memfd_create",
    "epoll_create",
    "epoll_create1",
    "timer_create",
    "timerfd_create",
    "pidfd_open",
    "perf_event_open",
    "process_vm_writev",
    "sched_setattr",
    "sched_getattr",
    "mbind",
    "landlock_create_ruleset",
];

/// Syscalls a container process makes between installing its filter and
/// handing the listener over (see `supervisor::handshake`): sending them to
/// the supervisor would deadlock.
pub const HANDOVER: &[&str] = &["write", "read", "close"];

/// The send that carries the listener (a unix stream's `write_all` is
/// `sendto(fd, buf, 4, MSG_NOSIGNAL, NULL, 0)`): whatever a policy's
/// rules do with a `sendto` that names an address, one like this must be
/// let through.
pub const HANDOVER_SEND: [u64; 6] = [5, 0x1000, 4, libc::MSG_NOSIGNAL as u64, 0, 0];

/// Errors from loading or validating a policy. Messages name the rule and field.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("policy {path}: {source}")]
    Read {
        /// File path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not valid TOML/JSON of the policy shape.
    #[error("policy {path}: {msg}")]
    Parse {
        /// File path or built-in name.
        path: String,
        /// Parser message (names the field and line).
        msg: String,
    },
    /// A rule is semantically wrong.
    #[error("policy {policy}: {rule}: {msg}")]
    Invalid {
        /// Policy name or path.
        policy: String,
        /// Which rule, e.g. `syscall[3].names[1]`.
        rule: String,
        /// What is wrong.
        msg: String,
    },
    /// Neither a built-in name nor an existing file.
    #[error("policy {0:?}: no such built-in policy or file (built-in: default, audit, permissive, agent)")]
    NotFound(String),
}

/// `label: note`, or `label` without a note.
fn with_note(label: String, note: &Option<String>) -> String {
    match note {
        Some(n) if !n.is_empty() => format!("{label}: {n}"),
        _ => label,
    }
}

/// A TOML parse error as one line: where (line and column, 1-based) and
/// what, without the excerpt of the file the error's `Display` quotes (the
/// file may not be a policy at all, and the message may be shown to
/// whoever chose it).
pub fn toml_message(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().replace('\n', " ").trim().to_string();
    match e.span() {
        Some(span) => {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let col = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
            format!("line {line}, column {col}: {msg}")
        }
        None => msg,
    }
}

/// Most argument conditions in one rule: the BPF program jumps over a
/// rule's conditions with 8-bit offsets (up to 6 instructions each).
pub const MAX_CONDITIONS: usize = 32;

/// Result alias for this module.
pub type Result<T> = std::result::Result<T, PolicyError>;

/// One compiled syscall rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Conditions on the raw argument registers; all must hold.
    pub args: Vec<ArgMatch>,
    /// Action when they hold.
    pub action: Action,
    /// Errno for [`Action::Deny`].
    pub errno: i32,
    /// Index of the rule in the policy's `syscall` list (as `cordon policy
    /// show` prints it: the file's own rules, then its base's).
    pub index: usize,
}

/// A validated, compiled policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The policy's name.
    pub name: String,
    /// The source it was parsed from (kept for `policy show`).
    pub source: PolicyFile,
    /// Rules per x86-64 syscall number, in file order.
    pub rules: BTreeMap<u32, Vec<Rule>>,
    /// Action for known syscalls no rule names.
    pub default_action: Action,
    /// Errno for a `deny` default action.
    pub default_errno: i32,
    /// File path rules.
    pub paths: PathPolicy,
    /// Network egress rules.
    pub net: NetPolicy,
}

impl Policy {
    /// Loads a built-in policy by name, or a file by path. Whether its BPF
    /// program fits the kernel is the filter's to say: what loads a policy
    /// to run it checks that too (`filter::load_policy`).
    ///
    /// Errors: [`PolicyError::NotFound`], [`PolicyError::Read`],
    /// [`PolicyError::Parse`], [`PolicyError::Invalid`].
    pub fn load(name_or_path: &str) -> Result<Self> {
        if let Some((name, src)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Self::from_toml(src, name);
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            return Err(PolicyError::NotFound(name_or_path.to_string()));
        }
        if !path.is_file() {
            // A FIFO or a device would block or never end.
            return Err(PolicyError::Read {
                path: name_or_path.to_string(),
                source: std::io::Error::other("not a regular file"),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: name_or_path.to_string(),
            source,
        })?;
        if name_or_path.ends_with(".json") {
            let file: PolicyFile = serde_json::from_str(&text).map_err(|e| {
                let full = e.to_string();
                let what = full
                    .strip_suffix(&format!(" at line {} column {}", e.line(), e.column()))
                    .unwrap_or(&full);
                PolicyError::Parse {
                    path: name_or_path.to_string(),
                    msg: format!("line {}, column {}: {what}", e.line(), e.column()),
                }
            })?;
            Self::compile(file, name_or_path)
        } else {
            Self::from_toml(&text, name_or_path)
        }
    }

    /// Parses and compiles TOML policy text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self> {
        let file: PolicyFile = toml::from_str(text).map_err(|e| PolicyError::Parse {
            path: origin.to_string(),
            msg: toml_message(text, &e),
        })?;
        Self::compile(file, origin)
    }

    /// Validates `file` and compiles it (into the rules, path and network
    /// matchers; not into BPF).
    pub fn compile(mut file: PolicyFile, origin: &str) -> Result<Self> {
        base::merge_base(&mut file, origin)?;
        base::keep_dev_usable(&mut file.paths);
        let invalid = |rule: String, msg: String| invalid(origin, rule, msg);
        if file.default_action == Action::Emulate {
            return Err(invalid(
                "default_action".into(),
                "emulate cannot be a default action: only some syscalls can be emulated".into(),
            ));
        }
        let release = &file.views.release;
        if release.is_empty() || release.len() > 64 || !release.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(invalid(
                "views.release".into(),
                format!("{release:?}: 1 to 64 printable ASCII characters without spaces"),
            ));
        }
        let default_errno = errno_of(origin, "default_errno", &file.default_errno)?;
        let rules = compile_syscall_rules(&file, origin)?;
        check_handover(&rules, file.default_action, origin)?;
        check_dns(&file.dns, origin)?;
        let paths = PathPolicy::compile(&file.paths).map_err(|(i, msg)| invalid(format!("path[{i}].pattern"), msg))?;
        if file.net_default == model::NetAction::Ask {
            return Err(invalid(
                "net_default".into(),
                "ask is a rule's action: write net_default = \"deny\" and a rule with action = \"ask\" for what may be asked".into(),
            ));
        }
        let net = NetPolicy::compile(&file.net, file.net_default)
            .map_err(|(i, field, msg)| invalid(format!("net[{i}].{field}"), msg))?;
        check_reachable(&file, &rules, origin)?;
        let mut rules = rules;
        if net.checks_wire() {
            wire_rules(&mut rules);
        }
        let policy = Policy {
            name: file.name.clone(),
            default_action: file.default_action,
            default_errno,
            rules,
            paths,
            net,
            source: file,
        };
        Ok(policy)
    }

    /// The action for syscall `nr` with argument registers `args`, and the
    /// errno for a deny. Numbers the table does not make available
    /// ([`table::available`]) give `(Deny, ENOSYS)`.
    pub fn decide(&self, nr: u32, args: &[u64; 6]) -> (Action, i32) {
        if !table::available(nr) {
            return (Action::Deny, libc::ENOSYS);
        }
        match self.rules.get(&nr) {
            Some(rules) => rules
                .iter()
                .find(|r| r.args.iter().all(|a| a.matches(args)))
                .map(|r| (r.action, r.errno))
                .unwrap_or((self.default_action, self.default_errno)),
            None => (self.default_action, self.default_errno),
        }
    }

    /// Whether syscall `name` is refused whatever its arguments: its first
    /// rule denies (or kills) with no condition, or no rule names it and
    /// the default action denies.
    fn always_refuses(&self, name: &str) -> bool {
        let refuses = |a: Action| matches!(a, Action::Deny | Action::Kill);
        let Some(nr) = table::number(name) else { return false };
        match self.rules.get(&nr).and_then(|r| r.first()) {
            Some(first) => first.args.is_empty() && refuses(first.action),
            None => refuses(self.default_action),
        }
    }

    /// Whether syscall `name` is refused whenever argument 0 has `bit`
    /// set: its first rule denies (or kills) with no condition, or with
    /// the one condition `arg0 & bit == bit`. Rules are first-match, so
    /// later rules cannot let such a call through.
    fn refuses_with_flag(&self, name: &str, bit: u64) -> bool {
        let refuses = |a: Action| matches!(a, Action::Deny | Action::Kill);
        let Some(nr) = table::number(name) else { return false };
        match self.rules.get(&nr).and_then(|r| r.first()) {
            Some(first) => {
                refuses(first.action)
                    && match first.args.as_slice() {
                        [] => true,
                        [a] => a.index == 0 && a.op == model::ArgOp::MaskedEq && a.mask == bit && a.value == bit,
                        _ => false,
                    }
            }
            None => refuses(self.default_action),
        }
    }

    /// Whether no process under this policy can change its root directory:
    /// chroot, pivot_root and setns are refused outright, and so is every
    /// mount call ([`table::Disposition::Mount`]) (so a private mount namespace from unshare(CLONE_NEWNS)
    /// stays an exact copy). The supervisor then keeps each caller's root
    /// between calls (supervisor/callers.rs).
    pub fn pins_root(&self) -> bool {
        ["chroot", "pivot_root", "setns"]
            .into_iter()
            .chain(table::with(table::Disposition::Mount))
            .all(|n| self.always_refuses(n))
    }

    /// Whether no process under this policy can enter another user
    /// namespace: setns and clone3 are refused outright, unshare and clone
    /// whenever CLONE_NEWUSER is set. The supervisor then checks each
    /// caller's user namespace once (supervisor/callers.rs).
    pub fn pins_user_namespace(&self) -> bool {
        let newuser = libc::CLONE_NEWUSER as u64;
        self.always_refuses("setns")
            && self.always_refuses("clone3")
            && self.refuses_with_flag("unshare", newuser)
            && self.refuses_with_flag("clone", newuser)
    }

    /// The syscall rule that decides syscall `nr` with argument registers
    /// `args` (`syscall[I]` and its note), or `default_action`.
    pub fn explain_syscall(&self, nr: u32, args: &[u64; 6]) -> String {
        let rule = self
            .rules
            .get(&nr)
            .and_then(|rules| rules.iter().find(|r| r.args.iter().all(|a| a.matches(args))));
        match rule.and_then(|r| self.source.syscalls.get(r.index).map(|s| (r.index, s))) {
            Some((i, s)) => with_note(format!("syscall[{i}]"), &s.note),
            None if rule.is_some_and(|r| r.index == WIRE_RULE) => "net rules: names checked on the wire".into(),
            None => "default_action".into(),
        }
    }

    /// The path rule behind a refusal about `path`, for the audit trail:
    /// `path[I] "PATTERN" ACCESS` and its note, where `I` indexes the rules
    /// `cordon policy show` prints for this policy (a base policy's follow
    /// the file's own). `None` when no rule restricts `path`.
    pub fn explain_path(&self, path: &str) -> Option<String> {
        let i = self.paths.deciding_rule(path)?;
        let r = self.source.paths.get(i)?;
        let access = landlock::name(r.access);
        Some(with_note(format!("path[{i}] {:?} {access}", r.pattern), &r.note))
    }

    /// The net rule (`net[I] CIDR`, its note) or `net_default` that decided
    /// a connection to `addr`:`port`, for the audit trail.
    pub fn explain_net(&self, addr: std::net::IpAddr, port: u16) -> String {
        match self
            .net
            .decide_by(addr, port)
            .1
            .and_then(|i| self.source.net.get(i).map(|r| (i, r)))
        {
            Some((i, r)) => with_note(format!("net[{i}] {}", r.target()), &r.note),
            None => "net_default".into(),
        }
    }

    /// Host rules that allow (or ask) before a `cidr` rule denying an
    /// internal range: one warning line each, naming both. The resolver
    /// refuses internal answers on names whatever the order (docs/POLICY.md,
    /// "Egress by name"), but a reader of the policy would think the host
    /// rule wins.
    pub fn net_order_warnings(&self) -> Vec<String> {
        let rules = &self.source.net;
        let internal_deny = |r: &model::NetRule| {
            r.action == model::NetAction::Deny
                && r.cidr
                    .as_deref()
                    .and_then(|c| {
                        c.parse::<ipnet::IpNet>()
                            .ok()
                            .map(|n| n.addr())
                            .or_else(|| c.parse().ok())
                    })
                    .is_some_and(is_internal)
        };
        let mut out = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let Some(host) = r.host.as_deref().filter(|_| r.action != model::NetAction::Deny) else {
                continue;
            };
            if let Some((j, d)) = rules.iter().enumerate().skip(i + 1).find(|(_, d)| internal_deny(d)) {
                out.push(format!(
                    "net[{i}] {host} comes before net[{j}] {} deny: a name is never bound to an address in that range \
                     anyway (internal addresses never ride on names), but put deny rules first so the file reads as it acts",
                    d.target()
                ));
            }
        }
        out
    }

    /// [`Self::explain_net`] for the net rule of index `i` (`None`:
    /// `net_default`).
    pub fn explain_net_rule(&self, i: Option<usize>) -> String {
        match i.and_then(|i| self.source.net.get(i).map(|r| (i, r))) {
            Some((i, r)) => with_note(format!("net[{i}] {}", r.target()), &r.note),
            None => "net_default".into(),
        }
    }

    /// The views a container under this policy gets: the policy's
    /// `[views]`, with no views at all without a supervisor (nothing
    /// would keep them fresh) and the host's identity when `uname` is not
    /// emulated (the /proc identity files agree with what `uname` shows).
    pub fn views(&self) -> model::Views {
        let mut v = self.source.views.clone();
        v.proc &= self.needs_supervisor();
        let uname = table::number("uname").map(|nr| self.decide(nr, &[0; 6]).0);
        if uname != Some(Action::Emulate) {
            v.identity = model::Identity::Host;
        }
        v
    }

    /// Whether any rule can send a syscall to the supervisor.
    pub fn needs_supervisor(&self) -> bool {
        matches!(self.default_action, Action::Audit)
            || self
                .rules
                .values()
                .flatten()
                .any(|r| matches!(r.action, Action::Emulate | Action::Audit))
    }
}

/// A [`PolicyError::Invalid`] of policy `origin` at `rule`.
fn invalid(origin: &str, rule: String, msg: String) -> PolicyError {
    PolicyError::Invalid {
        policy: origin.to_string(),
        rule,
        msg,
    }
}

/// The errno a deny rule at `rule` names (EPERM when none).
fn errno_of(origin: &str, rule: &str, e: &Option<String>) -> Result<i32> {
    match e {
        None => Ok(libc::EPERM),
        Some(n) => crate::errno::from_name(n).ok_or_else(|| {
            invalid(
                origin,
                format!("{rule}.errno"),
                format!("unknown errno {n:?} (use a name like EPERM, EACCES, ENOSYS)"),
            )
        }),
    }
}

/// Checks the argument conditions of syscall rule `at`.
fn check_args(args: &[model::ArgMatch], at: &str, origin: &str) -> Result<()> {
    let invalid = |rule: String, msg: String| invalid(origin, rule, msg);
    if args.len() > MAX_CONDITIONS {
        return Err(invalid(
            format!("{at}.args"),
            format!("{} conditions: a rule takes at most {MAX_CONDITIONS}", args.len()),
        ));
    }
    for (j, a) in args.iter().enumerate() {
        if a.index > 5 {
            return Err(invalid(
                format!("{at}.args[{j}].index"),
                format!("{} is out of range 0..=5", a.index),
            ));
        }
        if a.op != model::ArgOp::MaskedEq && a.mask != 0 {
            return Err(invalid(
                format!("{at}.args[{j}].mask"),
                "only masked_eq takes a mask".into(),
            ));
        }
        if a.op == model::ArgOp::MaskedEq && a.mask == 0 {
            return Err(invalid(
                format!("{at}.args[{j}].mask"),
                "masked_eq needs a mask (0, or none, makes the condition hold for any value)".into(),
            ));
        }
        if a.op == model::ArgOp::MaskedEq && a.value & !a.mask != 0 {
            return Err(invalid(
                format!("{at}.args[{j}].value"),
                format!(
                    "{:#x} has bits outside the mask {:#x}: the condition never holds",
                    a.value, a.mask
                ),
            ));
        }
    }
    Ok(())
}

/// The syscall number `name` stands for in rule `at` (its `j`th name),
/// checked against what the syscall table lets `action` do with it.
fn rule_number(name: &str, action: Action, at: &str, j: usize, origin: &str) -> Result<u32> {
    let invalid = |msg: String| invalid(origin, format!("{at}.names[{j}]"), msg);
    let nr = table::number(name).ok_or_else(|| invalid(format!("unknown syscall {name:?}")))?;
    let entry = table::entry(nr).expect("a known number has an entry");
    if matches!(
        entry.disposition,
        table::Disposition::Nosys | table::Disposition::Unfiltered
    ) {
        return Err(invalid(format!(
            "{name} is refused with ENOSYS by cordon's syscall table, whatever a rule says: {}",
            entry.note
        )));
    }
    if matches!(action, Action::Emulate | Action::Audit) && HANDOVER.contains(&name) {
        return Err(invalid(format!(
            "{name} cannot go to the supervisor: it carries the listener handover"
        )));
    }
    if action == Action::Emulate && entry.handler.is_none() {
        return Err(invalid(format!(
            "{name} cannot be emulated (emulated: {})",
            table::emulated().collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(nr)
}

/// The `index` of the syscall rules a policy gets from its net rules
/// ([`wire_rules`]), which no `syscall` entry of the file wrote.
pub const WIRE_RULE: usize = usize::MAX;

/// Under net rules that check names on the wire, `getpeername` and
/// `getsockname` go to the supervisor, which answers them for the
/// connections it relays with the addresses a direct connection has
/// (`supervisor/syscalls/net/sockname.rs`), unless a rule of the file
/// decides them.
fn wire_rules(rules: &mut BTreeMap<u32, Vec<Rule>>) {
    for name in ["getpeername", "getsockname"] {
        if let Some(nr) = table::number(name) {
            rules.entry(nr).or_insert_with(|| {
                vec![Rule {
                    args: Vec::new(),
                    action: Action::Emulate,
                    errno: 0,
                    index: WIRE_RULE,
                }]
            });
        }
    }
}

/// The syscall rules of `file`, by number, in the order they are written.
fn compile_syscall_rules(file: &PolicyFile, origin: &str) -> Result<BTreeMap<u32, Vec<Rule>>> {
    let mut rules: BTreeMap<u32, Vec<Rule>> = BTreeMap::new();
    for (i, r) in file.syscalls.iter().enumerate() {
        let at = format!("syscall[{i}]");
        if r.names.is_empty() {
            return Err(invalid(
                origin,
                format!("{at}.names"),
                "must name at least one syscall".into(),
            ));
        }
        if r.errno.is_some() && r.action != Action::Deny {
            return Err(invalid(
                origin,
                format!("{at}.errno"),
                "only a deny rule takes an errno".into(),
            ));
        }
        let errno = errno_of(origin, &at, &r.errno)?;
        check_args(&r.args, &at, origin)?;
        for (j, name) in r.names.iter().enumerate() {
            let nr = rule_number(name, r.action, &at, j, origin)?;
            rules.entry(nr).or_default().push(Rule {
                args: r.args.clone(),
                action: r.action,
                errno,
                index: i,
            });
        }
    }
    Ok(rules)
}

/// The handover syscalls must run (see [`HANDOVER`]): a deny or kill of
/// them, by a rule or the default action, would stop every container
/// before it starts.
fn check_handover(rules: &BTreeMap<u32, Vec<Rule>>, default_action: Action, origin: &str) -> Result<()> {
    for name in HANDOVER {
        if let Some(nr) = table::number(name) {
            let rules = rules.get(&nr);
            let first = rules.and_then(|r| r.iter().find(|r| r.args.is_empty()));
            let action = first.map(|r| r.action).unwrap_or(default_action);
            if action != Action::Allow {
                return Err(invalid(
                    origin,
                    if first.is_some() {
                        "syscall".into()
                    } else {
                        "default_action".into()
                    },
                    format!("{name} must be allowed: it carries the listener handover"),
                ));
            }
        }
    }
    // sendto without an address: the rules' conditions decide it.
    let nr = table::number("sendto").unwrap_or(u32::MAX);
    let action = rules
        .get(&nr)
        .and_then(|r| r.iter().find(|r| r.args.iter().all(|a| a.matches(&HANDOVER_SEND))))
        .map(|r| r.action)
        .unwrap_or(default_action);
    if action != Action::Allow {
        return Err(invalid(
            origin,
            "syscall".into(),
            "sendto without an address must be allowed: it carries the listener handover".into(),
        ));
    }
    Ok(())
}

/// Checks the `[dns]` section.
fn check_dns(dns: &model::Dns, origin: &str) -> Result<()> {
    if dns.ttl_min > dns.ttl_max {
        return Err(invalid(
            origin,
            "dns.ttl_min".into(),
            format!("{} is above dns.ttl_max ({})", dns.ttl_min, dns.ttl_max),
        ));
    }
    if !(1..=30_000).contains(&dns.timeout_ms) {
        return Err(invalid(
            origin,
            "dns.timeout_ms".into(),
            format!("{} is not between 1 and 30000 milliseconds", dns.timeout_ms),
        ));
    }
    Ok(())
}

/// Refuses rules nothing can fire: path rules act only on the file calls
/// the policy sends to the supervisor, net rules on connect and friends.
fn check_reachable(file: &PolicyFile, rules: &BTreeMap<u32, Vec<Rule>>, origin: &str) -> Result<()> {
    let emulates = |name: &str| {
        table::number(name)
            .and_then(|nr| rules.get(&nr))
            .is_some_and(|r| r.iter().any(|r| r.action == Action::Emulate))
    };
    if !file.paths.is_empty() && !emulates("openat") {
        return Err(invalid(
            origin,
            "path[0]".into(),
            "no rule of this policy sends openat to the supervisor, so path rules cannot take effect (extends = \"default\" does)".into(),
        ));
    }
    if (!file.net.is_empty() || file.net_default == model::NetAction::Deny) && !emulates("connect") {
        return Err(invalid(
            origin,
            if file.net.is_empty() { "net_default" } else { "net[0]" }.into(),
            "no rule of this policy sends connect to the supervisor, so net rules cannot take effect (extends = \"default\" does)".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
