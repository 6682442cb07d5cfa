//! Policy files: bytes -> TOML and JSON parse, validation, and compilation
//! to BPF, as `cordon policy check` and `cordon create` do. An input that
//! starts with 0xFF (never valid UTF-8, so never a text policy) builds a
//! policy from the bytes directly instead, to reach the BPF compiler with
//! shapes text rarely gets to (many rules, many conditions).
//!
//! Oracle: no panic; for a policy that compiles, the BPF program fits the
//! kernel's limit and agrees with `Policy::decide` (what the supervisor
//! uses) on every syscall a rule names, for argument values around each
//! condition.
#![no_main]

use cordon::abi::{table, AUDIT_ARCH_X86_64};
use cordon::filter;
use cordon::policy::model::{ArgOp, PathRule, SyscallRule};
use cordon::policy::{Action, ArgMatch, NetAction, PathAccess, Policy, PolicyFile};
use libfuzzer_sys::fuzz_target;

/// BPF_MAXINSNS: the kernel refuses longer seccomp programs.
const BPF_MAXINSNS: usize = 4096;

fuzz_target!(|data: &[u8]| {
    if let Some(rest) = data.strip_prefix(&[0xff]) {
        check(Policy::compile(structured(rest), "fuzz").and_then(|p| filter::fits(p, "fuzz")));
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else { return };
    check(filter::policy_from_toml(text, "fuzz.toml"));
    if let Ok(file) = serde_json::from_str::<PolicyFile>(text) {
        check(Policy::compile(file, "fuzz.json").and_then(|p| filter::fits(p, "fuzz.json")));
    }
});

fn check(r: cordon::policy::Result<Policy>) {
    let policy = match r {
        Ok(p) => p,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let prog = filter::compile(&policy);
    assert!(
        prog.len() <= BPF_MAXINSNS,
        "a checked policy compiles to {} instructions",
        prog.len()
    );
    let _ = policy.needs_supervisor();
    let mut nrs: Vec<u32> = policy.rules.keys().copied().collect();
    nrs.extend([0, 1, 2, 134, 335, 512, table::max_number() + 1, 0x4000_0000]);
    for nr in nrs {
        for args in argsets(&policy, nr) {
            let (action, errno) = policy.decide(nr, &args);
            let bpf = filter::evaluate(&prog, AUDIT_ARCH_X86_64, nr, &args);
            assert_eq!(
                bpf,
                filter::action_value(action, errno),
                "BPF and decide disagree: nr {nr} args {args:x?}"
            );
        }
    }
    // What `cordon policy show` prints must load again (TOML has no u64
    // above i64::MAX: rendering may fail, but not panic).
    if let Ok(text) = toml::to_string_pretty(&policy.source) {
        let again = Policy::from_toml(&text, "shown");
        assert!(
            again.is_ok(),
            "policy show output does not load: {:?}\n{text}",
            again.err()
        );
        assert_eq!(again.map(|p| p.rules).ok(), Some(policy.rules.clone()));
    }
}

/// Argument registers around every condition of the rules for `nr`: each
/// condition met and missed alone, and all conditions of a rule met at once.
fn argsets(policy: &Policy, nr: u32) -> Vec<[u64; 6]> {
    let mut out = vec![[0; 6], [u64::MAX; 6]];
    for rule in policy.rules.get(&nr).into_iter().flatten() {
        let mut all = [0u64; 6];
        for m in &rule.args {
            let i = usize::from(m.index.min(5));
            let hit = match m.op {
                ArgOp::Eq | ArgOp::MaskedEq => m.value,
                ArgOp::Ne => !m.value,
            };
            all[i] = hit;
            for v in [m.value, m.value ^ 1, m.value ^ (1 << 40), !m.value, m.value & m.mask] {
                let mut a = [0u64; 6];
                a[i] = v;
                out.push(a);
            }
        }
        out.push(all);
        if out.len() > 4096 {
            break;
        }
    }
    out
}

/// Reads the input as a sequence of choices.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.u8();
        }
        u64::from_le_bytes(b)
    }
    fn done(&self) -> bool {
        self.0.is_empty()
    }
}

fn action(b: u8) -> Action {
    [
        Action::Allow,
        Action::Deny,
        Action::Emulate,
        Action::Audit,
        Action::Kill,
    ][usize::from(b % 5)]
}

/// A policy built from choices: syscall rules by table index with up to 63
/// conditions each, a few path and net rules.
fn structured(data: &[u8]) -> PolicyFile {
    let mut b = Bytes(data);
    let all = table::all();
    let mut file = PolicyFile {
        name: "fuzz".into(),
        description: String::new(),
        extends: Some(if b.u8() % 4 == 0 { "default" } else { "none" }.to_string()),
        default_action: action(b.u8()),
        default_errno: None,
        syscalls: Vec::new(),
        paths: Vec::new(),
        net: Vec::new(),
        net_default: NetAction::Allow,
        dns: Default::default(),
        views: Default::default(),
    };
    while !b.done() && file.syscalls.len() < 512 {
        let names = (0..1 + b.u8() % 3)
            .map(|_| all[usize::from(b.u8()) * 2 % all.len()].0.to_string())
            .collect();
        let act = action(b.u8());
        let errno = (act == Action::Deny && b.u8() % 2 == 0)
            .then(|| ["EPERM", "ENOSYS", "EACCES"][usize::from(b.u8() % 3)].into());
        let nargs = b.u8() % 64;
        let args = (0..nargs)
            .map(|_| {
                let op = [ArgOp::Eq, ArgOp::Ne, ArgOp::MaskedEq][usize::from(b.u8() % 3)];
                // A masked_eq that can decide: a mask, and a value within it
                // (policy validation refuses the others).
                let mask = if op == ArgOp::MaskedEq { b.u64() | 1 } else { 0 };
                let value = b.u64();
                ArgMatch {
                    index: b.u8() % 6,
                    op,
                    mask,
                    value: if op == ArgOp::MaskedEq { value & mask } else { value },
                }
            })
            .collect();
        file.syscalls.push(SyscallRule {
            names,
            action: act,
            errno,
            args,
            note: None,
            message: None,
        });
        if b.u8() % 8 == 0 {
            file.paths.push(PathRule {
                pattern: ["/etc/**", "/secret/*", "/a/{b,c}/[x-z]?", "/**"][usize::from(b.u8() % 4)].into(),
                access: [PathAccess::Deny, PathAccess::ReadOnly, PathAccess::Allow][usize::from(b.u8() % 3)],
                note: None,
                message: None,
            });
        }
    }
    file
}
