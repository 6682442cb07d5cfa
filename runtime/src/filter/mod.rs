//! Compiles a [`Policy`] into a classic BPF seccomp program.
//!
//! Shape of the program (seccomp(2), `struct seccomp_data`):
//! ```text
//!   arch == AUDIT_ARCH_X86_64 ?  -> x86-64 part
//!   arch == AUDIT_ARCH_I386   ?  -> i386 part: exit/exit_group allowed, all else ENOSYS
//!   else                         -> KILL_PROCESS
//! x86-64 part:
//!   nr >= 0x40000000 (x32 ABI)   -> ENOSYS
//!   for each syscall with rules: nr == N -> its block
//!   nr > max available, a hole   -> ENOSYS (unknown, or an ENOSYS entry
//!                                   of the table: abi::table)
//!   else                         -> default action
//! block N: rule 1 conditions -> action 1; rule 2 ...; else default action
//! ```
//! Syscalls whose outcome does not depend on arguments return a constant, so
//! the kernel's seccomp action cache (5.11+) skips the filter for the allowed
//! ones entirely: they run at native speed.
//!
//! The platform decides what "send to the supervisor" compiles to:
//! `SECCOMP_RET_USER_NOTIF` on seccomp-notify, `SECCOMP_RET_TRACE` on
//! ptrace ([`compile_for`]).
//!
//! A policy whose program is longer than the kernel loads is refused when
//! it is loaded to be run or judged ([`load_policy`], [`fits`]), with the
//! rule at fault named as the policy's own errors name theirs.

use crate::abi::table;
use crate::abi::{AUDIT_ARCH_I386, AUDIT_ARCH_X86_64, BPF_MAXINSNS, I386_EXIT, I386_EXIT_GROUP, X32_SYSCALL_BIT};
use crate::policy::{Action, ArgMatch, Policy, PolicyError};

/// One BPF instruction (`struct sock_filter`).
pub type Insn = libc::sock_filter;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const fn off_arg_lo(i: u8) -> u32 {
    16 + 8 * i as u32
}

fn stmt(code: u32, k: u32) -> Insn {
    Insn {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}
fn jump(code: u32, k: u32, jt: u8, jf: u8) -> Insn {
    Insn {
        code: code as u16,
        jt,
        jf,
        k,
    }
}
fn ld(off: u32) -> Insn {
    stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, off)
}
fn ret(v: u32) -> Insn {
    stmt(libc::BPF_RET | libc::BPF_K, v)
}

/// The seccomp return value for an action on seccomp-notify.
pub fn action_value(action: Action, errno: i32) -> u32 {
    action_value_on(action, errno, libc::SECCOMP_RET_USER_NOTIF)
}

/// The seccomp return value for an action, `supervisor` being what sends a
/// call to the supervisor on the platform (`SECCOMP_RET_USER_NOTIF` or
/// `SECCOMP_RET_TRACE`).
fn action_value_on(action: Action, errno: i32, supervisor: u32) -> u32 {
    match action {
        Action::Allow => libc::SECCOMP_RET_ALLOW,
        Action::Deny => libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA),
        Action::Emulate | Action::Audit => supervisor,
        Action::Kill => libc::SECCOMP_RET_KILL_PROCESS,
    }
}

/// Emits the test of one argument condition; on failure jumps forward to
/// the instruction index `fail` (absolute), patched by the caller.
fn emit_arg(out: &mut Vec<Insn>, m: &ArgMatch, fails: &mut Vec<usize>) {
    let lo = off_arg_lo(m.index);
    for (off, shift) in [(lo, 0u32), (lo + 4, 32u32)] {
        out.push(ld(off));
        let (value, mask) = ((m.value >> shift) as u32, (m.mask >> shift) as u32);
        match m.op {
            crate::policy::model::ArgOp::Eq | crate::policy::model::ArgOp::Ne => {}
            crate::policy::model::ArgOp::MaskedEq => out.push(stmt(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, mask)),
        }
        // jeq value: match continues (jt = 0), mismatch -> fail (patched)
        fails.push(out.len());
        out.push(jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, value, 0, 0));
    }
}

/// [`compile`] for `platform`: on ptrace every `SECCOMP_RET_USER_NOTIF`
/// becomes `SECCOMP_RET_TRACE` (a ptrace stop of the seized caller; with no
/// tracer attached the kernel fails the call with ENOSYS: fail closed).
///
/// On ptrace the program starts with a guard that keeps every process
/// traced and every call meant for the supervisor on its way there:
/// - `seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER)`
///   fails with EBUSY (what notify containers get, their chain having
///   cordon's listener): `SECCOMP_RET_USER_NOTIF` outranks
///   `SECCOMP_RET_TRACE`, so a listener of the container's own would take
///   the supervisor's calls and could let them run;
/// - `clone` with `CLONE_UNTRACED` fails with EPERM (the child would not be
///   traced: no exec check, ENOSYS for every intercepted call);
/// - `clone3` fails with ENOSYS (its flags are in memory BPF cannot read;
///   libc falls back to clone).
pub fn compile_for(policy: &Policy, platform: crate::config::Platform) -> Vec<Insn> {
    if platform != crate::config::Platform::Ptrace {
        return compile(policy);
    }
    let mut p = compile_with(policy, libc::SECCOMP_RET_TRACE);
    // The guard, then the policy's program at END:
    //  0 ld arch;  1 x86-64? else END;  2 ld nr
    //  3 seccomp? else 8;  4 ld arg0;  5 SET_MODE_FILTER? else END
    //  6 ld arg1;  7 NEW_LISTENER set? -> EBUSY else END
    //  8 clone? else 11;  9 ld arg0;  10 CLONE_UNTRACED set? -> EPERM else END
    //  11 clone3? -> ENOSYS else END;  12 EBUSY;  13 EPERM;  14 ENOSYS
    const END: usize = 15;
    let rel = |from: usize, to: usize| (to - from - 1) as u8;
    let (jeq, jset) = (
        libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
        libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K,
    );
    let mut prefix = vec![
        ld(OFF_ARCH),
        jump(jeq, AUDIT_ARCH_X86_64, 0, rel(1, END)),
        ld(OFF_NR),
        jump(jeq, libc::SYS_seccomp as u32, 0, rel(3, 8)),
        ld(off_arg_lo(0)),
        jump(jeq, libc::SECCOMP_SET_MODE_FILTER, 0, rel(5, END)),
        ld(off_arg_lo(1)),
        jump(
            jset,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as u32,
            rel(7, 12),
            rel(7, END),
        ),
        jump(jeq, libc::SYS_clone as u32, 0, rel(8, 11)),
        ld(off_arg_lo(0)),
        jump(jset, libc::CLONE_UNTRACED as u32, rel(10, 13), rel(10, END)),
        jump(jeq, libc::SYS_clone3 as u32, rel(11, 14), rel(11, END)),
        ret(action_value(Action::Deny, libc::EBUSY)),
        ret(action_value(Action::Deny, libc::EPERM)),
        ret(action_value(Action::Deny, libc::ENOSYS)),
    ];
    debug_assert_eq!(prefix.len(), END);
    prefix.append(&mut p);
    prefix
}

/// [`Policy::load`], refusing a policy whose program the kernel would not
/// load ([`fits`]): how `create`, `exec`, `fork`, the supervisor and
/// `cordon policy` load a policy.
pub fn load_policy(name_or_path: &str) -> crate::policy::Result<Policy> {
    fits(Policy::load(name_or_path)?, name_or_path)
}

/// [`Policy::from_toml`], refusing a policy whose program the kernel would
/// not load ([`fits`]).
pub fn policy_from_toml(text: &str, origin: &str) -> crate::policy::Result<Policy> {
    fits(Policy::from_toml(text, origin)?, origin)
}

/// `policy` (loaded from `origin`), if its program is no longer than the
/// kernel loads on either platform (the ptrace one, a guard first, is the
/// longer); else [`PolicyError::Invalid`] naming its `syscall` rules.
pub fn fits(policy: Policy, origin: &str) -> crate::policy::Result<Policy> {
    let insns = compile_for(&policy, crate::config::Platform::Ptrace).len();
    if insns > BPF_MAXINSNS {
        return Err(PolicyError::Invalid {
            policy: origin.to_string(),
            rule: "syscall".into(),
            msg: format!("the rules compile to {insns} BPF instructions; the kernel loads at most {BPF_MAXINSNS}"),
        });
    }
    Ok(policy)
}

/// Compiles `policy` to a BPF program for x86-64 (with i386 and x32 refused)
/// on seccomp-notify.
pub fn compile(policy: &Policy) -> Vec<Insn> {
    compile_with(policy, libc::SECCOMP_RET_USER_NOTIF)
}

/// [`compile`], `supervisor` being the return value that sends a call to
/// the supervisor.
fn compile_with(policy: &Policy, supervisor: u32) -> Vec<Insn> {
    let action_value = |a, e| action_value_on(a, e, supervisor);
    let default_ret = action_value(policy.default_action, policy.default_errno);
    let enosys = action_value(Action::Deny, libc::ENOSYS);
    let mut p = vec![
        ld(OFF_ARCH),
        jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, AUDIT_ARCH_X86_64, 5, 0),
        jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, AUDIT_ARCH_I386, 1, 0),
        ret(libc::SECCOMP_RET_KILL_PROCESS),
        // i386: only the exits, so 32-bit code can at least end.
        ld(OFF_NR),
        jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, I386_EXIT, 3, 0),
    ];
    // index 6
    p.push(jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, I386_EXIT_GROUP, 2, 0));
    p.push(ret(enosys));
    // index 8 would be the x86-64 entry: fix the offsets above to land here.
    p.push(ret(libc::SECCOMP_RET_ALLOW)); // index 8: i386 exit allowed
    let x86 = p.len(); // 9
    p[1].jt = (x86 - 2) as u8;
    p[5].jt = (8 - 6) as u8;
    p[6].jt = (8 - 7) as u8;

    p.push(ld(OFF_NR));
    p.push(jump(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K, X32_SYSCALL_BIT, 0, 1));
    p.push(ret(enosys));

    // Dispatch: "jeq N, 0, 1; ja block_N" for each syscall with rules.
    let mut dispatch_jumps = Vec::new();
    for &nr in policy.rules.keys() {
        p.push(jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, nr, 0, 1));
        dispatch_jumps.push((p.len(), nr));
        p.push(stmt(libc::BPF_JMP | libc::BPF_JA, 0));
    }
    // Numbers containers may not make: above the last available one, or
    // holes between them (unknown to the table, or refused by their entry).
    let available: Vec<u32> = table::all()
        .iter()
        .map(|&(_, nr)| nr)
        .filter(|&nr| table::available(nr))
        .collect();
    p.push(jump(
        libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K,
        available.last().copied().unwrap_or(0),
        0,
        1,
    ));
    p.push(ret(enosys));
    for w in available.windows(2) {
        let (lo, hi) = (w[0] + 1, w[1] - 1);
        if lo <= hi {
            // nr < lo: skip both; lo <= nr <= hi: ENOSYS; nr > hi: skip the return.
            p.push(jump(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K, lo, 0, 2));
            p.push(jump(libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K, hi, 1, 0));
            p.push(ret(enosys));
        }
    }
    p.push(ret(default_ret));

    // Blocks.
    for (ja_at, nr) in dispatch_jumps {
        let start = p.len();
        p[ja_at].k = (start - ja_at - 1) as u32;
        for rule in &policy.rules[&nr] {
            let mut fails = Vec::new();
            for m in &rule.args {
                emit_arg(&mut p, m, &mut fails);
            }
            // An `ne` condition inverts: both halves equal means "fail".
            p.push(ret(action_value(rule.action, rule.errno)));
            let next = p.len();
            patch_fails(&mut p, rule, &fails, next);
            // Argument loads clobber A; nothing to restore for the next rule.
        }
        p.push(ret(default_ret));
    }
    p
}

/// Points the condition jumps of one rule at `next` (the next rule).
fn patch_fails(p: &mut [Insn], rule: &crate::policy::Rule, fails: &[usize], next: usize) {
    // Two jeq per condition (low word, high word).
    for (ci, m) in rule.args.iter().enumerate() {
        let (lo, hi) = (fails[2 * ci], fails[2 * ci + 1]);
        match m.op {
            crate::policy::model::ArgOp::Ne => {
                // Low words differ -> condition holds: skip the high test and
                // continue after it. Equal -> test high: differ -> holds, equal -> fail.
                let after_hi = hi + 1;
                p[lo].jt = 0; // equal: go test high word (next insn is ld hi)
                p[lo].jf = (after_hi - lo - 1) as u8;
                p[hi].jt = (next - hi - 1) as u8;
                p[hi].jf = 0;
            }
            _ => {
                p[lo].jf = (next - lo - 1) as u8;
                p[hi].jf = (next - hi - 1) as u8;
            }
        }
    }
}

/// Runs `prog` on a synthetic `seccomp_data` (arch, nr, args) and returns the
/// seccomp return value: a small interpreter for the instructions this
/// module emits, used by tests and `cordon policy show --explain`.
pub fn evaluate(prog: &[Insn], arch: u32, nr: u32, args: &[u64; 6]) -> u32 {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&nr.to_ne_bytes());
    data[4..8].copy_from_slice(&arch.to_ne_bytes());
    for (i, a) in args.iter().enumerate() {
        data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
    }
    let (mut a, mut pc) = (0u32, 0usize);
    loop {
        let ins = prog[pc];
        let code = u32::from(ins.code);
        pc += 1;
        match code {
            c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                let k = ins.k as usize;
                a = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap_or_default());
            }
            c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => a &= ins.k,
            c if c == libc::BPF_JMP | libc::BPF_JA => pc += ins.k as usize,
            c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                pc += usize::from(if a == ins.k { ins.jt } else { ins.jf })
            }
            c if c == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K => {
                pc += usize::from(if a >= ins.k { ins.jt } else { ins.jf })
            }
            c if c == libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K => {
                pc += usize::from(if a > ins.k { ins.jt } else { ins.jf })
            }
            c if c == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => {
                pc += usize::from(if a & ins.k != 0 { ins.jt } else { ins.jf })
            }
            c if c == libc::BPF_RET | libc::BPF_K => return ins.k,
            _ => return libc::SECCOMP_RET_KILL_PROCESS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The BPF program and the supervisor's [`Policy::decide`] must agree on
    /// every syscall number and on argument values around each condition.
    #[test]
    fn bpf_agrees_with_policy() {
        for (name, _) in crate::policy::BUILTIN {
            let policy = Policy::load(name).unwrap();
            let prog = compile(&policy);
            assert!(prog.len() < 4096, "program too long: {}", prog.len());
            let mut argsets: Vec<[u64; 6]> = vec![[0; 6], [u64::MAX; 6]];
            for r in policy.rules.values().flatten() {
                for m in &r.args {
                    for v in [m.value, m.value ^ 1, m.value | (1 << 40), m.value.wrapping_sub(1)] {
                        let mut a = [0u64; 6];
                        a[usize::from(m.index)] = v;
                        argsets.push(a);
                    }
                }
            }
            for nr in 0..520u32 {
                for args in &argsets {
                    let (act, errno) = policy.decide(nr, args);
                    assert_eq!(
                        evaluate(&prog, AUDIT_ARCH_X86_64, nr, args),
                        action_value(act, errno),
                        "policy {name} nr {nr} args {args:x?}"
                    );
                }
            }
        }
    }

    /// On ptrace, what the supervisor gets is a TRACE stop, and nothing
    /// else of the program changes.
    #[test]
    fn ptrace_variant_traces_what_notify_notifies() {
        let policy = Policy::load("default").unwrap();
        let (n, t) = (compile(&policy), compile_for(&policy, crate::config::Platform::Ptrace));
        assert_eq!(n.len() + 15, t.len(), "only the 15-instruction guard is added");
        let mut traced = 0;
        for nr in 0..520u32 {
            let (a, b) = (
                evaluate(&n, AUDIT_ARCH_X86_64, nr, &[0; 6]),
                evaluate(&t, AUDIT_ARCH_X86_64, nr, &[0; 6]),
            );
            if a == libc::SECCOMP_RET_USER_NOTIF {
                assert_eq!(b, libc::SECCOMP_RET_TRACE, "nr {nr}");
                traced += 1;
            } else {
                assert_eq!(a, b, "nr {nr}");
            }
        }
        assert!(traced > 5, "the default policy sends calls to the supervisor");
        // A listener of the container's own is refused; other filters not.
        let seccomp = libc::SYS_seccomp as u32;
        let filter = u64::from(libc::SECCOMP_SET_MODE_FILTER);
        let listener = u64::from(libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as u32);
        assert_eq!(
            evaluate(&t, AUDIT_ARCH_X86_64, seccomp, &[filter, listener | 1, 0, 0, 0, 0]),
            action_value(Action::Deny, libc::EBUSY)
        );
        assert_eq!(
            evaluate(&t, AUDIT_ARCH_X86_64, seccomp, &[filter, 0, 0, 0, 0, 0]),
            evaluate(&n, AUDIT_ARCH_X86_64, seccomp, &[filter, 0, 0, 0, 0, 0])
        );
        // Children stay traced.
        let clone = libc::SYS_clone as u32;
        let untraced = libc::CLONE_UNTRACED as u64;
        assert_eq!(
            evaluate(&t, AUDIT_ARCH_X86_64, clone, &[untraced | 0x11, 0, 0, 0, 0, 0]),
            action_value(Action::Deny, libc::EPERM)
        );
        assert_eq!(
            evaluate(&t, AUDIT_ARCH_X86_64, clone, &[0x11, 0, 0, 0, 0, 0]),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            evaluate(&t, AUDIT_ARCH_X86_64, libc::SYS_clone3 as u32, &[0; 6]),
            action_value(Action::Deny, libc::ENOSYS)
        );
    }

    /// What every built-in policy's filter answers for every syscall
    /// number (arguments all 0 and all 1s; seccomp-notify and ptrace),
    /// as runs of equal answers: `decisions.snapshot`, taken before the
    /// syscall table became the one place and kept so a change of any
    /// disposition shows in review. `CORDON_WRITE_SNAPSHOT=1` rewrites it.
    #[test]
    fn decisions_match_the_snapshot() {
        let mut text = String::new();
        for (name, _) in crate::policy::BUILTIN {
            let policy = Policy::load(name).unwrap();
            let (n, t) = (compile(&policy), compile_for(&policy, crate::config::Platform::Ptrace));
            let at = |nr| {
                format!(
                    "{:#x} {:#x} {:#x}",
                    evaluate(&n, AUDIT_ARCH_X86_64, nr, &[0; 6]),
                    evaluate(&n, AUDIT_ARCH_X86_64, nr, &[u64::MAX; 6]),
                    evaluate(&t, AUDIT_ARCH_X86_64, nr, &[0; 6]),
                )
            };
            let mut start = 0u32;
            for nr in 1..=600u32 {
                if nr == 600 || at(nr) != at(start) {
                    text += &format!("{name} {start}-{} {}\n", nr - 1, at(start));
                    start = nr;
                }
            }
        }
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/filter/decisions.snapshot");
        if std::env::var_os("CORDON_WRITE_SNAPSHOT").is_some() {
            std::fs::write(path, &text).unwrap();
        }
        let kept = std::fs::read_to_string(path).unwrap_or_default();
        assert!(kept == text, "the filters' decisions changed; now:\n{text}");
    }

    /// The default's setsockopt rules: options that route a packet get
    /// EPERM in the kernel on both platforms, whatever the high bits of
    /// the int arguments; the others pass.
    #[test]
    fn routing_socket_options_refused_in_the_filter() {
        let policy = Policy::load("default").unwrap();
        let nr = table::number("setsockopt").unwrap();
        let eperm = action_value(Action::Deny, libc::EPERM);
        for prog in [compile(&policy), compile_for(&policy, crate::config::Platform::Ptrace)] {
            let at = |level: u64, opt: u64| evaluate(&prog, AUDIT_ARCH_X86_64, nr, &[3, level, opt, 0, 4, 0]);
            for (level, opt) in [
                (0, 4),
                (0, 19),
                (41, 57),
                (41, 5),
                (41, 9),
                (41, 54),
                (41, 59),
                (41, 55),
                (41, 75),
            ] {
                assert_eq!(at(level, opt), eperm, "level {level} option {opt}");
                assert_eq!(
                    at(level | 1 << 32, opt | 7 << 40),
                    eperm,
                    "high bits: level {level} option {opt}"
                );
            }
            for (level, opt) in [(1, 25), (0, 1), (41, 26), (6, 1), (0, 8)] {
                assert_eq!(at(level, opt), libc::SECCOMP_RET_ALLOW, "level {level} option {opt}");
            }
        }
    }

    #[test]
    fn too_long_a_filter_is_refused() {
        let mut text = String::from("name='x'\n");
        for i in 0..1000 {
            text += &format!("[[syscall]]\nnames=['getpid']\naction='deny'\nargs=[{{index=0,op='eq',value={i}}}]\n");
        }
        let Err(e) = policy_from_toml(&text, "t") else {
            panic!("a policy of 1000 rules was accepted");
        };
        assert!(e.to_string().contains("kernel loads at most 4096"), "{e}");
        assert!(
            e.to_string().starts_with("policy t: syscall: the rules compile to "),
            "{e}"
        );
        // The same policy written to a file: refused where it is loaded.
        let path = std::env::temp_dir().join(format!("cordon-too-long-{}.toml", std::process::id()));
        std::fs::write(&path, &text).unwrap();
        let loaded = load_policy(&path.to_string_lossy());
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            loaded.map(|_| ()).map_err(|e| e.to_string()),
            Err(e
                .to_string()
                .replace("policy t:", &format!("policy {}:", path.display())))
        );
    }

    #[test]
    fn other_entry_points_refused() {
        let policy = Policy::load("permissive").unwrap();
        let prog = compile(&policy);
        let enosys = action_value(Action::Deny, libc::ENOSYS);
        assert_eq!(
            evaluate(&prog, AUDIT_ARCH_X86_64, 39 | X32_SYSCALL_BIT, &[0; 6]),
            enosys
        );
        assert_eq!(evaluate(&prog, AUDIT_ARCH_I386, 20, &[0; 6]), enosys);
        assert_eq!(evaluate(&prog, AUDIT_ARCH_I386, 1, &[0; 6]), libc::SECCOMP_RET_ALLOW);
        assert_eq!(evaluate(&prog, AUDIT_ARCH_I386, 252, &[0; 6]), libc::SECCOMP_RET_ALLOW);
        assert_eq!(evaluate(&prog, 0xdead, 0, &[0; 6]), libc::SECCOMP_RET_KILL_PROCESS);
        assert_eq!(evaluate(&prog, AUDIT_ARCH_X86_64, 39, &[0; 6]), libc::SECCOMP_RET_ALLOW);
    }
}
