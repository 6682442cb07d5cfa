//! The bundle's own `linux.seccomp` profile, compiled as runc 1.1.5
//! compiles it and installed by cordon's Executor after its handshake and
//! filter ([`super::executor`]), so a profile can never break the
//! handshake (an allow-list without `pidfd_open` did).
//!
//! What runc does, and so this module:
//! - libseccomp builds the program: the default action (`defaultErrnoRet`,
//!   else EPERM, for `SCMP_ACT_ERRNO`), the listed architectures, one rule
//!   per resolvable name; names libseccomp cannot resolve are skipped, and
//!   so are rules whose action is the default's;
//! - a rule with two conditions on one argument becomes one rule per
//!   condition; `SCMP_CMP_MASKED_EQ` takes `value` as the mask and
//!   `valueTwo` as the datum;
//! - unless the default action allows (or is ENOSYS already), a stub ahead
//!   of libseccomp's program answers ENOSYS for syscall numbers above the
//!   highest the profile names (per architecture), so that programs probe
//!   newer syscalls (`clone3`, `fchmodat2`...) as unimplemented and fall
//!   back, instead of reading the default EPERM as a refusal;
//! - `SECCOMP_FILTER_FLAG_LOG` and `SPEC_ALLOW` are honoured, `TSYNC` needs
//!   nothing (one thread), other flags are refused.

use std::collections::BTreeMap;
use std::io::Read;

use libseccomp::{ScmpAction, ScmpArch, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall};
use oci_spec::runtime::{Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompFilterFlag, LinuxSeccompOperator};

/// A compiled bundle profile: the program and the seccomp(2) flags to
/// install it with.
#[derive(Debug, Clone, Default)]
pub struct BundleFilter {
    /// The BPF program (stub + libseccomp's).
    pub prog: Vec<libc::sock_filter>,
    /// `SECCOMP_FILTER_FLAG_*` bits.
    pub flags: libc::c_ulong,
}

/// Why a profile cannot be compiled; names the field.
#[derive(Debug, thiserror::Error)]
#[error("linux.seccomp{field}: {reason}")]
pub struct ProfileError {
    /// The field below `linux.seccomp`, e.g. `.flags`.
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

fn err(field: impl Into<String>, reason: impl std::fmt::Display) -> ProfileError {
    ProfileError {
        field: field.into(),
        reason: reason.to_string(),
    }
}

use crate::abi::{AUDIT_ARCH_I386, AUDIT_ARCH_X86_64, X32_SYSCALL_BIT};

fn scmp_arch(a: Arch) -> ScmpArch {
    match a {
        Arch::ScmpArchNative => ScmpArch::Native,
        Arch::ScmpArchX86 => ScmpArch::X86,
        Arch::ScmpArchX86_64 => ScmpArch::X8664,
        Arch::ScmpArchX32 => ScmpArch::X32,
        Arch::ScmpArchArm => ScmpArch::Arm,
        Arch::ScmpArchAarch64 => ScmpArch::Aarch64,
        Arch::ScmpArchMips => ScmpArch::Mips,
        Arch::ScmpArchMips64 => ScmpArch::Mips64,
        Arch::ScmpArchMips64n32 => ScmpArch::Mips64N32,
        Arch::ScmpArchMipsel => ScmpArch::Mipsel,
        Arch::ScmpArchMipsel64 => ScmpArch::Mipsel64,
        Arch::ScmpArchMipsel64n32 => ScmpArch::Mipsel64N32,
        Arch::ScmpArchPpc => ScmpArch::Ppc,
        Arch::ScmpArchPpc64 => ScmpArch::Ppc64,
        Arch::ScmpArchPpc64le => ScmpArch::Ppc64Le,
        Arch::ScmpArchS390 => ScmpArch::S390,
        Arch::ScmpArchS390x => ScmpArch::S390X,
        Arch::ScmpArchRiscv64 => ScmpArch::Riscv64,
        Arch::ScmpArchParisc => ScmpArch::Parisc,
        Arch::ScmpArchParisc64 => ScmpArch::Parisc64,
        Arch::ScmpArchLoongarch64 => ScmpArch::Loongarch64,
        Arch::ScmpArchM68k => ScmpArch::M68k,
        Arch::ScmpArchSh => ScmpArch::Sh,
        Arch::ScmpArchSheb => ScmpArch::Sheb,
    }
}

fn action(field: &str, a: LinuxSeccompAction, errno: Option<u32>) -> Result<ScmpAction, ProfileError> {
    let errno = errno.map(|e| e as i32).unwrap_or(libc::EPERM);
    Ok(match a {
        LinuxSeccompAction::ScmpActKill | LinuxSeccompAction::ScmpActKillThread => ScmpAction::KillThread,
        LinuxSeccompAction::ScmpActKillProcess => ScmpAction::KillProcess,
        LinuxSeccompAction::ScmpActTrap => ScmpAction::Trap,
        LinuxSeccompAction::ScmpActErrno => ScmpAction::Errno(errno),
        LinuxSeccompAction::ScmpActTrace => ScmpAction::Trace(
            u16::try_from(errno)
                .map_err(|_| err(field, format!("errnoRet {errno} is out of range for SCMP_ACT_TRACE")))?,
        ),
        LinuxSeccompAction::ScmpActAllow => ScmpAction::Allow,
        LinuxSeccompAction::ScmpActLog => ScmpAction::Log,
        LinuxSeccompAction::ScmpActNotify => {
            return Err(err(
                field,
                "SCMP_ACT_NOTIFY is not supported: cordon's supervisor owns the notify listener",
            ))
        }
    })
}

/// The comparison of a non-masked operator.
fn op(o: LinuxSeccompOperator) -> ScmpCompareOp {
    match o {
        LinuxSeccompOperator::ScmpCmpNe => ScmpCompareOp::NotEqual,
        LinuxSeccompOperator::ScmpCmpLt => ScmpCompareOp::Less,
        LinuxSeccompOperator::ScmpCmpLe => ScmpCompareOp::LessOrEqual,
        LinuxSeccompOperator::ScmpCmpEq => ScmpCompareOp::Equal,
        LinuxSeccompOperator::ScmpCmpGe => ScmpCompareOp::GreaterEqual,
        LinuxSeccompOperator::ScmpCmpGt => ScmpCompareOp::Greater,
        LinuxSeccompOperator::ScmpCmpMaskedEq => ScmpCompareOp::MaskedEqual(0),
    }
}

/// Compiles `profile` (see the module documentation).
pub fn compile(profile: &LinuxSeccomp) -> Result<BundleFilter, ProfileError> {
    let lib = |field: &str| {
        let field = field.to_string();
        move |e: libseccomp::error::SeccompError| err(field, format!("libseccomp: {e}"))
    };
    let default = action(".defaultAction", profile.default_action(), profile.default_errno_ret())?;
    let mut ctx = ScmpFilterContext::new(default).map_err(lib(".defaultAction"))?;
    // cordon sets no_new_privs itself and installs the program.
    ctx.set_ctl_nnp(false).map_err(lib(""))?;
    let mut flags: libc::c_ulong = 0;
    for f in profile.flags().iter().flatten() {
        match f {
            LinuxSeccompFilterFlag::SeccompFilterFlagLog => flags |= libc::SECCOMP_FILTER_FLAG_LOG,
            LinuxSeccompFilterFlag::SeccompFilterFlagSpecAllow => flags |= libc::SECCOMP_FILTER_FLAG_SPEC_ALLOW,
            // The container process has one thread when the filter goes in.
            LinuxSeccompFilterFlag::SeccompFilterFlagTsync => {}
            other => {
                let name = serde_json::to_string(other).unwrap_or_else(|_| format!("{other:?}"));
                return Err(err(
                    ".flags",
                    format!("{name} is not supported (it goes with SCMP_ACT_NOTIFY)"),
                ));
            }
        }
    }
    let mut archs = vec![ScmpArch::native()];
    for (i, a) in profile.architectures().iter().flatten().enumerate() {
        let a = scmp_arch(*a);
        let a = if a == ScmpArch::Native { ScmpArch::native() } else { a };
        if !archs.contains(&a) {
            ctx.add_arch(a).map_err(lib(&format!(".architectures[{i}]")))?;
            archs.push(a);
        }
    }
    for (i, rule) in profile.syscalls().iter().flatten().enumerate() {
        let field = format!(".syscalls[{i}]");
        let act = action(&field, rule.action(), rule.errno_ret())?;
        if act == default {
            continue;
        }
        let args = rule.args().clone().unwrap_or_default();
        let conds: Vec<ScmpArgCompare> = args
            .iter()
            .map(|a| match a.op() {
                // runc: `value` is the mask, `valueTwo` the datum.
                LinuxSeccompOperator::ScmpCmpMaskedEq => ScmpArgCompare::new(
                    a.index() as u32,
                    ScmpCompareOp::MaskedEqual(a.value()),
                    a.value_two().unwrap_or(0),
                ),
                o => ScmpArgCompare::new(a.index() as u32, op(o), a.value()),
            })
            .collect();
        let mut seen = std::collections::HashSet::new();
        let split = !args.iter().all(|a| seen.insert(a.index()));
        for name in rule.names() {
            // As runc: a name this libseccomp does not know is skipped.
            let Ok(sc) = ScmpSyscall::from_name(name) else { continue };
            let added = if conds.is_empty() {
                ctx.add_rule(act, sc).map(drop)
            } else if split {
                conds
                    .iter()
                    .try_for_each(|c| ctx.add_rule_conditional(act, sc, std::slice::from_ref(c)).map(drop))
            } else {
                ctx.add_rule_conditional(act, sc, &conds).map(drop)
            };
            added.map_err(|e| err(&field, format!("{name}: libseccomp: {e}")))?;
        }
    }
    let mut prog = enosys_stub(profile, &archs);
    prog.extend(export(&ctx).map_err(|e| err("", format!("export the program: {e}")))?);
    Ok(BundleFilter { prog, flags })
}

/// libseccomp's program, through a memfd (libseccomp 2.5 has no export to
/// memory).
fn export(ctx: &ScmpFilterContext) -> std::io::Result<Vec<libc::sock_filter>> {
    use std::io::Seek;
    let fd = nix::sys::memfd::memfd_create(c"cordon-seccomp", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    ctx.export_bpf(&file)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    file.rewind()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes
        .chunks_exact(8)
        .map(|c| libc::sock_filter {
            code: u16::from_ne_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect())
}

/// runc's ENOSYS stub (libcontainer/seccomp/patchbpf): for x86-64, x32 and
/// i386, a syscall number above the highest any rule names for that
/// architecture gets ENOSYS; everything else falls through to the program
/// that follows. Empty when the default action allows or is ENOSYS.
fn enosys_stub(profile: &LinuxSeccomp, archs: &[ScmpArch]) -> Vec<libc::sock_filter> {
    let allows = matches!(
        profile.default_action(),
        LinuxSeccompAction::ScmpActAllow | LinuxSeccompAction::ScmpActLog
    );
    if allows || profile.default_errno_ret() == Some(libc::ENOSYS as u32) {
        return Vec::new();
    }
    let mut last: BTreeMap<&str, u32> = BTreeMap::new();
    for (key, arch) in [
        ("x86_64", ScmpArch::X8664),
        ("x32", ScmpArch::X32),
        ("i386", ScmpArch::X86),
    ] {
        if !archs.contains(&arch) {
            continue;
        }
        for name in profile.syscalls().iter().flatten().flat_map(|r| r.names()) {
            let Ok(sc) = ScmpSyscall::from_name_by_arch(name, arch) else {
                continue;
            };
            let nr = i32::from(sc);
            if nr < 0 {
                continue;
            }
            let nr = if arch == ScmpArch::X32 {
                nr as u32 | X32_SYSCALL_BIT
            } else {
                nr as u32
            };
            let e = last.entry(key).or_insert(nr);
            *e = (*e).max(nr);
        }
    }
    stub_program(
        last.get("x86_64").copied(),
        last.get("x32").copied(),
        last.get("i386").copied(),
    )
}

/// The stub for the given highest numbers (`None`: that architecture is not
/// in the profile, its calls fall through).
fn stub_program(x86_64: Option<u32>, x32: Option<u32>, i386: Option<u32>) -> Vec<libc::sock_filter> {
    if x86_64.is_none() && x32.is_none() && i386.is_none() {
        return Vec::new();
    }
    // Laid out as:
    //   0 ld arch
    //   1 jeq X86_64 -> 3 : 2
    //   2 jeq I386 -> 7 : FILTER
    //   3 ld nr
    //   4 jset X32 -> 6 : 5
    //   5 jgt last_x86_64 -> ENOSYS : FILTER
    //   6 jgt last_x32 -> ENOSYS : FILTER
    //   7 ld nr
    //   8 jgt last_i386 -> ENOSYS : FILTER
    //   9 ret ERRNO(ENOSYS)
    //  10 FILTER (the program that follows)
    const ENOSYS_AT: usize = 9;
    const FILTER_AT: usize = 10;
    let jump = |from: usize, to: usize| (to - from - 1) as u8;
    let ins = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let ld = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let jeq = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    let jgt = libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K;
    let jset = libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K;
    // A "highest number" that no call exceeds lets an absent architecture
    // fall through.
    let cmp = |at: usize, last: Option<u32>| match last {
        Some(n) => ins(jgt, jump(at, ENOSYS_AT), jump(at, FILTER_AT), n),
        None => ins(jgt, jump(at, FILTER_AT), jump(at, FILTER_AT), u32::MAX),
    };
    vec![
        ins(ld, 0, 0, 4),
        ins(jeq, jump(1, 3), 0, AUDIT_ARCH_X86_64),
        ins(jeq, jump(2, 7), jump(2, FILTER_AT), AUDIT_ARCH_I386),
        ins(ld, 0, 0, 0),
        ins(jset, jump(4, 6), 0, X32_SYSCALL_BIT),
        cmp(5, x86_64),
        cmp(6, x32),
        ins(ld, 0, 0, 0),
        cmp(8, i386),
        ins(
            libc::BPF_RET | libc::BPF_K,
            0,
            0,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(json: serde_json::Value) -> LinuxSeccomp {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn the_stub_answers_enosys_above_the_newest_named_syscall() {
        let p = profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            "syscalls": [{"names": ["read", "write", "pidfd_open", "no_such_call"], "action": "SCMP_ACT_ALLOW"}]
        }));
        let f = compile(&p).unwrap();
        assert_eq!(f.prog[5].k, 434, "x86_64: pidfd_open is the newest");
        assert_eq!(f.prog[6].k, 434 | X32_SYSCALL_BIT);
        assert_eq!(f.prog[8].k, 434, "i386 pidfd_open");
        assert!(f.prog.len() > 10);
    }

    #[test]
    fn no_stub_when_the_default_allows() {
        let p = profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["mount"], "action": "SCMP_ACT_ERRNO"}]
        }));
        let f = compile(&p).unwrap();
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        assert!(!f.prog.iter().any(|i| i.k == enosys), "a stub answers ENOSYS");
    }

    #[test]
    fn flags_are_honoured_or_refused() {
        let mut p = profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "flags": ["SECCOMP_FILTER_FLAG_LOG", "SECCOMP_FILTER_FLAG_SPEC_ALLOW", "SECCOMP_FILTER_FLAG_TSYNC"]
        }));
        let f = compile(&p).unwrap();
        assert_eq!(
            f.flags,
            libc::SECCOMP_FILTER_FLAG_LOG | libc::SECCOMP_FILTER_FLAG_SPEC_ALLOW
        );
        p.set_flags(Some(vec![LinuxSeccompFilterFlag::SeccompFilterFlagWaitKillableRecv]));
        let e = compile(&p).unwrap_err().to_string();
        assert!(e.starts_with("linux.seccomp.flags:"), "{e}");
    }
}
