//! The policy file format (TOML or JSON, same shape).
//!
//! ```toml
//! name = "example"
//! default_action = "allow"          # for syscalls no rule names
//! [[syscall]]
//! names = ["clone"]
//! action = "deny"                   # allow | deny | emulate | audit | kill
//! errno = "EPERM"                   # deny only; default EPERM
//! args = [{ index = 0, op = "masked_eq", mask = 0x10000000, value = 0x10000000 }]
//! [[path]]
//! pattern = "/secret/**"            # glob on the resolved path inside the container
//! access = "deny"                   # deny | read-only | allow
//! [[net]]
//! cidr = "10.0.0.0/8"
//! ports = [443]                     # optional; empty means every port
//! action = "deny"                   # deny | allow
//! [[net]]
//! host = "*.example.com"            # a host name instead of cidr
//! action = "allow"
//! ```

use serde::{Deserialize, Serialize};

/// What happens to a syscall a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// The kernel runs it; no round trip.
    Allow,
    /// Refused in BPF with `errno` (default EPERM); no round trip.
    Deny,
    /// Sent to the supervisor, which performs it on copied arguments.
    Emulate,
    /// Sent to the supervisor, recorded, then run by the kernel. Only safe
    /// because the decision never depends on container memory.
    Audit,
    /// The whole process is killed (SECCOMP_RET_KILL_PROCESS).
    Kill,
}

/// How an argument is compared. Values are the raw 64-bit register.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgOp {
    /// `arg == value`
    Eq,
    /// `arg != value`
    Ne,
    /// `arg & mask == value`
    MaskedEq,
}

/// One argument condition of a syscall rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgMatch {
    /// Argument position, 0 to 5.
    pub index: u8,
    /// Comparison.
    pub op: ArgOp,
    /// Mask for `masked_eq`; ignored otherwise.
    #[serde(default)]
    pub mask: u64,
    /// Value compared with.
    pub value: u64,
}

impl ArgMatch {
    /// Whether the raw argument registers `args` satisfy this condition.
    pub fn matches(&self, args: &[u64; 6]) -> bool {
        let a = args[usize::from(self.index)];
        match self.op {
            ArgOp::Eq => a == self.value,
            ArgOp::Ne => a != self.value,
            ArgOp::MaskedEq => a & self.mask == self.value,
        }
    }
}

/// A rule over one or more syscalls by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyscallRule {
    /// Syscall names as in the x86-64 table (`cordon syscalls`).
    pub names: Vec<String>,
    /// What happens when the rule matches.
    pub action: Action,
    /// Errno name for `deny`, e.g. "EPERM" (the default) or "ENOSYS".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// All must hold for the rule to match; empty matches always.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<ArgMatch>,
    /// Why the rule exists (shown by `cordon policy show`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What to tell the caller's agent when this rule refuses a call:
    /// `cordon audit --last ID` prints it with the last denial, so a
    /// platform can feed it back (docs/POLICY.md, "In the audit trail").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Access a path rule grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathAccess {
    /// Opens fail with EACCES.
    Deny,
    /// Opens for writing (or with O_CREAT/O_TRUNC) fail with EACCES.
    ReadOnly,
    /// No restriction.
    Allow,
    /// Held while the runtime config's decision program (`[ask]`) answers
    /// allow (the call goes on as under `allow`) or deny (EACCES, or the
    /// errno it names); deny without one. Enforced by the supervisor
    /// (docs/POLICY.md, "Ask").
    Ask,
}

/// A rule over files, matched on the path inside the container after
/// resolution (symlinks followed inside the rootfs, `..` and `.` removed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathRule {
    /// Glob: `*` within one component, `**` across components.
    pub pattern: String,
    /// What the rule grants.
    pub access: PathAccess,
    /// Why the rule exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What to tell the caller's agent when this rule refuses a call:
    /// `cordon audit --last ID` prints it with the last denial, so a
    /// platform can feed it back (docs/POLICY.md, "In the audit trail").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Verdict of a network rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetAction {
    /// Refused with ECONNREFUSED (connect) or EACCES (sendto/sendmsg).
    Deny,
    /// Allowed.
    Allow,
    /// Held while the runtime config's decision program (`[ask]`) answers
    /// allow or deny; deny without one, or when it does not answer in
    /// time. A rule's action only (`cidr` and `host` rules), never
    /// `net_default` (docs/POLICY.md, "Ask").
    Ask,
}

/// A rule over destinations of connect, sendto and sendmsg: IPv4/IPv6
/// ones by address (`cidr`) or by host name (`host`), or every address of
/// another family (`family`, e.g. "vsock"): exactly one of the three.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetRule {
    /// Destination network, e.g. "10.0.0.0/8" or "::1/128".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// Destination host name, e.g. "pypi.org", or "*.example.com" for
    /// every name below example.com. Matches the addresses the
    /// supervisor's resolver answered for such a name, while the answer's
    /// TTL lasts (docs/POLICY.md, "Egress by name"); for a lookup, whether
    /// the name is resolved at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// An address family other than unix, inet and inet6, by name
    /// ("vsock", "netlink", "bluetooth", ...) or number ("40"): the rule
    /// decides every address of that family (`ports` do not apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// Destination ports; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
    /// Verdict.
    pub action: NetAction,
    /// For a wildcard `host` rule (`*.example.com`): how many distinct
    /// names under it the resolver forwards per minute; a new name past
    /// it gets NXDOMAIN without reaching the nameservers (a DNS
    /// exfiltration channel stays slow and visible). Default 16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_names: Option<u32>,
    /// For a `host` rule: whether a connection it allows must carry an
    /// allowed name on the wire (docs/POLICY.md, "Names on the wire"): on
    /// the TLS ports ([`TLS_PORTS`]) the ClientHello's server name, on the
    /// HTTP ports ([`HTTP_PORTS`]) every request's `Host`. Default
    /// `required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sni: Option<Sni>,
    /// For a `host` rule on HTTP ports ([`HTTP_PORTS`], its `ports` all
    /// among them): the request methods it allows (`GET`, `HEAD`, ...);
    /// empty: any. Checked on every request of a connection, as `Host` is
    /// (docs/POLICY.md, "HTTP rules").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// For a `host` rule on HTTP ports: the request paths it allows, as
    /// patterns (`/simple/**`: anything below; `*`: one segment, no `/`),
    /// matched against the path without its query; empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Why the rule exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What to tell the caller's agent when this rule refuses a call:
    /// `cordon audit --last ID` prints it with the last denial, so a
    /// platform can feed it back (docs/POLICY.md, "In the audit trail").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Ports whose connections allowed by a `host` rule must open with a TLS
/// ClientHello naming an allowed server ([`NetRule::sni`]).
pub const TLS_PORTS: [u16; 2] = [443, 8443];

/// Ports whose connections allowed by a `host` rule must be HTTP/1.x
/// requests each naming an allowed `Host` ([`NetRule::sni`]).
pub const HTTP_PORTS: [u16; 2] = [80, 8080];

/// A `host` rule's check of the name on the wire ([`NetRule::sni`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sni {
    /// A connection on a TLS or HTTP port must name an allowed host: one
    /// that names none is refused.
    #[default]
    Required,
    /// As `required`, but a connection that names no host (a ClientHello
    /// without a server name, an HTTP/1.0 request without `Host`) passes.
    /// Another protocol, or a malformed or ambiguous ClientHello or
    /// request, is refused either way.
    Optional,
    /// Not checked: the rule allows the addresses its names resolved to.
    Off,
}

/// Distinct names a wildcard host rule forwards per minute by default
/// ([`NetRule::max_names`]).
pub const DEFAULT_MAX_NAMES: u32 = 16;

impl NetRule {
    /// What the rule matches, as written: its `cidr`, `host` or
    /// `family`.
    pub fn target(&self) -> &str {
        self.cidr
            .as_deref()
            .or(self.host.as_deref())
            .or(self.family.as_deref())
            .unwrap_or("")
    }
}

/// A whole policy file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// Short name, shown in audit records and `cordon state`.
    pub name: String,
    /// One line of description.
    #[serde(default)]
    pub description: String,
    /// A built-in policy whose rules follow this file's own (so this file's
    /// rules take precedence: the first match decides). Absent: `default`;
    /// `"none"`: no base, the file's rules alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extends: Option<String>,
    /// Action for syscalls that no rule names: `allow`, `deny`, `audit` or `kill`.
    #[serde(default = "default_allow")]
    pub default_action: Action,
    /// Errno for `default_action = "deny"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_errno: Option<String>,
    /// Syscall rules, in order.
    #[serde(default, rename = "syscall")]
    pub syscalls: Vec<SyscallRule>,
    /// Path rules, most specific first (the first match decides).
    #[serde(default, rename = "path")]
    pub paths: Vec<PathRule>,
    /// Network rules (the first match decides).
    #[serde(default, rename = "net")]
    pub net: Vec<NetRule>,
    /// Verdict for destinations no network rule matches.
    #[serde(default = "default_net_allow")]
    pub net_default: NetAction,
    /// The supervisor's resolver, for policies with `host` rules (`[dns]`).
    #[serde(default, skip_serializing_if = "Dns::is_default")]
    pub dns: Dns,
    /// What the container sees of the machine (`[views]`).
    #[serde(default, skip_serializing_if = "Views::is_default")]
    pub views: Views,
}

/// The `[dns]` table: how the supervisor's resolver (used by policies
/// with `host` rules) binds answers and waits for its nameservers. Every
/// key is optional.
///
/// ```toml
/// [dns]
/// ttl_min = 30        # seconds an answered address stays bound at least
/// ttl_max = 3600      # and at most, whatever the answer's TTL
/// timeout_ms = 2000   # for one query to the nameservers; then SERVFAIL
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dns {
    /// Floor of a binding's lifetime, in seconds (a TTL of 0 would make an
    /// answer useless before the connect that follows it).
    #[serde(default = "default_ttl_min")]
    pub ttl_min: u32,
    /// Cap of a binding's lifetime, in seconds.
    #[serde(default = "default_ttl_max")]
    pub ttl_max: u32,
    /// How long one query may wait for the nameservers, in milliseconds
    /// (1 to 30000); the container then gets SERVFAIL.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u32,
}

impl Default for Dns {
    fn default() -> Self {
        Dns {
            ttl_min: default_ttl_min(),
            ttl_max: default_ttl_max(),
            timeout_ms: default_timeout_ms(),
        }
    }
}

impl Dns {
    /// Whether these are the defaults.
    pub fn is_default(&self) -> bool {
        *self == Dns::default()
    }
}

fn default_ttl_min() -> u32 {
    30
}

fn default_ttl_max() -> u32 {
    3600
}

fn default_timeout_ms() -> u32 {
    2000
}

/// The kernel release the container sees by default (policy key
/// `[views] release`).
pub const RELEASE: &str = "6.1.0-cordon";

/// Whose kernel identity the container sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Identity {
    /// The virtual one: `release`, in `uname` and the /proc files alike.
    #[default]
    Virtual,
    /// The host's: `uname` and /proc show the host's kernel.
    Host,
}

/// The `[views]` table: the container's view of the machine (its
/// `/proc` and kernel identity). Every key is optional.
///
/// ```toml
/// [views]
/// proc = true                 # /proc and /sys views sized to the cgroup
/// identity = "virtual"        # virtual | host
/// release = "6.1.0-cordon"    # the virtual kernel release
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Views {
    /// Whether the /proc and /sys views are mounted (meminfo, cpuinfo,
    /// stat, uptime, loadavg, swaps, cpu/online, and the identity files).
    #[serde(default = "default_true")]
    pub proc: bool,
    /// Whose kernel identity `uname` and the /proc identity files show.
    #[serde(default)]
    pub identity: Identity,
    /// The virtual kernel release (`uname -r`, `/proc/sys/kernel/osrelease`,
    /// `/proc/version`); at most 64 bytes of printable ASCII.
    #[serde(default = "default_release")]
    pub release: String,
}

impl Default for Views {
    fn default() -> Self {
        Views {
            proc: true,
            identity: Identity::Virtual,
            release: default_release(),
        }
    }
}

impl Views {
    /// Whether this is the default (on, virtual, the default release).
    pub fn is_default(&self) -> bool {
        *self == Views::default()
    }
}

fn default_true() -> bool {
    true
}

fn default_release() -> String {
    RELEASE.to_string()
}

fn default_allow() -> Action {
    Action::Allow
}

fn default_net_allow() -> NetAction {
    NetAction::Allow
}
