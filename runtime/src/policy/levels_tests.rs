//! Unit tests of the enforcement levels.

use super::*;

/// What level 2 keeps with the supervisor is Landlock's blind spot:
/// every change of mode, owner, times, xattrs or file flags, and readlink;
/// not an open, a creation, a removal, a rename or a metadata read.
#[test]
fn landlock_uncovered_calls_are_the_metadata_changes_and_readlink() {
    let uncovered: Vec<&str> = table::entries()
        .filter(|(_, e)| landlock_uncovered(e))
        .map(|(_, e)| e.name)
        .collect();
    for name in [
        "chmod",
        "fchmodat",
        "fchmodat2",
        "fchmod",
        "chown",
        "lchown",
        "fchownat",
        "fchown",
        "utimensat",
        "utime",
        "utimes",
        "futimesat",
        "setxattr",
        "lsetxattr",
        "fsetxattr",
        "removexattr",
        "lremovexattr",
        "fremovexattr",
        "ioctl",
        "readlink",
        "readlinkat",
    ] {
        assert!(uncovered.contains(&name), "{name} is not kept for Landlock");
    }
    assert_eq!(uncovered.len(), 21, "{uncovered:?}");
}

fn kernel_fs() -> Vec<String> {
    vec!["/proc".into(), "/sys".into()]
}

#[test]
fn trace_mode_sends_denials_and_leaves_kills_to_the_kernel() {
    let p = Policy::from_toml(
        "name = \"t\"\n[[syscall]]\nnames = [\"getpgid\"]\naction = \"kill\"\n\
         [[syscall]]\nnames = [\"acct\"]\naction = \"deny\"\n",
        "t",
    )
    .unwrap();
    let t = p.traced();
    let nr = |n| table::number(n).unwrap();
    assert_eq!(t.decide(nr("getpgid"), &[0; 6]).0, Action::Kill);
    assert_eq!(t.decide(nr("acct"), &[0; 6]).0, Action::Audit);
    assert_eq!(
        p.decide(nr("acct"), &[0; 6]),
        (Action::Deny, libc::EPERM),
        "the supervisor's own copy decides"
    );
}

#[test]
fn shadowed_rules_are_named() {
    let p = Policy::from_toml(
        "name = \"s\"\n\
         [[path]]\npattern = \"/data/**\"\naccess = \"read-only\"\n\
         [[path]]\npattern = \"/data/secret/**\"\naccess = \"deny\"\n\
         [[path]]\npattern = \"/data/ro/**\"\naccess = \"read-only\"\n\
         [[path]]\npattern = \"/**\"\naccess = \"read-only\"\n",
        "s",
    )
    .unwrap();
    let w = p.shadowed_paths();
    assert!(
        w[0].starts_with("path[1] /data/secret/** deny never decides: path[0] /data/** read-only"),
        "{w:?}"
    );
    assert!(
        !w.iter().any(|l| l.starts_with("path[2]")),
        "same access: redundant, not shadowed"
    );
    // The default's kernel-file masks go before the user's /** (the
    // floor): nothing of theirs is shadowed.
    assert!(!w.iter().any(|l| l.contains("/proc/kcore")), "{w:?}");
    assert!(Policy::load("default").unwrap().shadowed_paths().is_empty());
}

#[test]
fn existing_directories_and_files_go_to_the_mounts() {
    let p = Policy::from_toml(
        "name = \"u\"\n\
         [[path]]\npattern = \"/data/secret/**\"\naccess = \"deny\"\n\
         [[path]]\npattern = \"/data/ro/**\"\naccess = \"read-only\"\n\
         [[path]]\npattern = \"/etc/shadow\"\naccess = \"deny\"\n",
        "u",
    )
    .unwrap();
    let all = |path: &str| match path {
        "/data/secret" | "/data/ro" => Some(Existing::Dir),
        "/etc/shadow" => Some(Existing::File),
        _ => None,
    };
    let plan = p.plan_with(Enforcement::Kernel, &kernel_fs(), &all);
    assert!(plan.all_kernel, "{plan:#?}");
    let mounts = plan.mounts();
    // The file's rules must find their paths; the default's kernel
    // files need not exist.
    assert!(
        mounts
            .iter()
            .all(|m| m.required != (m.path.starts_with("/proc") || m.path.starts_with("/sys"))),
        "{mounts:?}"
    );
    assert!(mounts.contains(&PlannedMount {
        kind: Mount::ReadOnly,
        path: "/data/ro".into(),
        required: true
    }));
    // A rule on a path missing at create, or a literal directory rule,
    // stays with the supervisor, and so do all the others.
    let missing = |path: &str| if path == "/data/ro" { None } else { all(path) };
    let plan = p.plan_with(Enforcement::Kernel, &kernel_fs(), &missing);
    assert!(!plan.all_kernel);
    assert!(plan.choices[1].why.contains("nothing there at create"), "{plan:#?}");
    let dir = Policy::from_toml(
        "name = \"d\"\n[[path]]\npattern = \"/data/secret\"\naccess = \"deny\"\n",
        "d",
    )
    .unwrap();
    let plan = dir.plan_with(Enforcement::Kernel, &kernel_fs(), &all);
    assert!(
        !plan.all_kernel && plan.choices[0].why.contains("without /**"),
        "{plan:#?}"
    );
}

#[test]
fn the_default_policy_goes_to_the_mounts() {
    let p = Policy::load("default").unwrap();
    let plan = p.plan(Enforcement::Kernel, &kernel_fs());
    assert!(plan.all_kernel, "{plan:#?}");
    let mounts: Vec<(Mount, String)> = plan
        .mounts()
        .into_iter()
        .inspect(|m| assert!(!m.required, "kernel files need not exist"))
        .map(|m| (m.kind, m.path))
        .collect();
    assert!(mounts.contains(&(Mount::Mask, "/proc/kallsyms".into())));
    assert!(mounts.contains(&(Mount::Mask, "/sys/firmware".into())));
    assert!(mounts.contains(&(Mount::ReadOnly, "/proc/sys".into())));
    assert!(mounts.contains(&(Mount::ReadOnly, "/sys".into())));
    assert_eq!(mounts.iter().filter(|m| m.1 == "/sys").count(), 1, "deduplicated");
    assert!(mounts.iter().position(|m| m.0 == Mount::ReadOnly) > mounts.iter().rposition(|m| m.0 == Mount::Mask));
    // Its file syscalls then stay in the kernel; the network does not.
    let k = p.kernel_enforced(false, false);
    let nr = |n| table::number(n).unwrap();
    assert_eq!(k.decide(nr("openat"), &[0; 6]).0, Action::Allow);
    assert_eq!(k.decide(nr("fchmod"), &[0; 6]).0, Action::Allow);
    assert_eq!(k.decide(nr("connect"), &[0; 6]).0, Action::Emulate);
    assert_eq!(k.decide(nr("uname"), &[0; 6]).0, Action::Emulate);
    assert_eq!(k.decide(nr("bpf"), &[0; 6]).0, Action::Deny);
}

#[test]
fn rules_the_mounts_cannot_express_go_to_the_supervisor() {
    let src = |rules: &str| format!("name = \"t\"\nextends = \"default\"\n{rules}");
    let other = Policy::from_toml(&src("[[path]]\npattern = \"/data/**\"\naccess = \"deny\"\n"), "t").unwrap();
    let plan = other.plan(Enforcement::Kernel, &kernel_fs());
    assert!(!plan.all_kernel);
    assert!(plan.choices[0].why.contains("not a kernel file"), "{plan:#?}");
    let glob = Policy::from_toml(&src("[[path]]\npattern = \"/proc/*/mem\"\naccess = \"deny\"\n"), "t").unwrap();
    assert!(glob.plan(Enforcement::Kernel, &kernel_fs()).choices[0]
        .why
        .contains("glob"));
    // Loosening the default's protections is refused (the floor).
    let allow = Policy::from_toml(&src("[[path]]\npattern = \"/proc/sys/x\"\naccess = \"allow\"\n"), "t")
        .unwrap_err()
        .to_string();
    assert!(
        allow.contains("path[0].access") && allow.contains("/proc/sys/** read-only applies first"),
        "{allow}"
    );
    let chroot = Policy::from_toml(&src("[[syscall]]\nnames = [\"chroot\"]\naction = \"allow\"\n"), "t").unwrap();
    assert!(!chroot.plan(Enforcement::Kernel, &kernel_fs()).all_kernel);
    let p = Policy::load("default").unwrap();
    assert!(!p.plan(Enforcement::Supervisor, &kernel_fs()).all_kernel);
    assert!(
        !p.plan(Enforcement::Kernel, &[]).all_kernel,
        "no /proc mount: no kernel files"
    );
}

/// A site with `existing`, /dev, /tmp and /proc as mount points, and
/// Landlock ABI `abi`.
fn site<'a>(kfs: &'a [String], existing: &'a dyn Fn(&str) -> Option<Existing>, abi: Option<u32>) -> Site<'a> {
    Site {
        kernel_fs: kfs,
        mount_points: MOUNT_POINTS.get_or_init(|| vec!["/dev".into(), "/tmp".into(), "/proc".into()]),
        existing,
        landlock_abi: abi,
    }
}

static MOUNT_POINTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

fn user(rules: &[(&str, &str)]) -> Policy {
    let mut src = String::from("name = \"u\"\n");
    for (pattern, access) in rules {
        src.push_str(&format!("[[path]]\npattern = \"{pattern}\"\naccess = \"{access}\"\n"));
    }
    Policy::from_toml(&src, "u").unwrap()
}

fn dirs(path: &str) -> Option<Existing> {
    match path {
        "/data" | "/data/rw" | "/data/rw/keys" | "/data/ro" | "/bin" => Some(Existing::Dir),
        "/data/f" => Some(Existing::File),
        _ => None,
    }
}

/// Grants, a redundant rule, a restriction by a mount inside a grant,
/// the catch-all, and the default's rules after it (which never
/// decide): Landlock with the mounts, file calls in the kernel but the
/// metadata changes and readlink.
#[test]
fn allow_lists_go_to_landlock_with_the_mounts() {
    let p = user(&[
        ("/data/rw/keys/**", "deny"),
        ("/data/rw/**", "allow"),
        ("/data/ro/**", "read-only"),
        ("/dev/**", "allow"),
        ("/proc/**", "allow"),
        ("/**", "read-only"),
    ]);
    let kfs = kernel_fs();
    let plan = p.plan_at(Enforcement::Kernel, &site(&kfs, &dirs, Some(7)));
    assert!(plan.all_kernel, "{plan:#?}");
    let levels: Vec<Level> = plan.choices.iter().map(|c| c.level).collect();
    use Level::*;
    // The default's protections (the floor) go right before /proc/**,
    // the first rule that would decide their paths more loosely.
    let floor = Policy::load("default").unwrap().source.paths.len();
    let (proc_at, all_at) = (4 + floor, 5 + floor);
    assert_eq!(&levels[..4], &[Mounts, Landlock, Covered, Landlock]);
    assert!(
        levels[4..proc_at].iter().all(|l| matches!(l, Mounts | Covered)),
        "the floor: {plan:#?}"
    );
    assert_eq!(&levels[proc_at..=all_at], &[Landlock, Landlock]);
    assert_eq!(all_at + 1, levels.len(), "nothing after the catch-all: {plan:#?}");
    assert!(plan.choices[2].why.contains("nothing to enforce"), "{plan:#?}");
    assert!(plan.choices[3].why.contains("a mount point"), "{plan:#?}");
    assert!(
        plan.choices[proc_at].why.contains("kernel directory below /proc"),
        "{plan:#?}"
    );
    let l = plan.landlock.clone().unwrap();
    assert_eq!((l.abi, l.base), (7, PathAccess::ReadOnly));
    let grants: Vec<(usize, &str, PathAccess)> = l.grants.iter().map(|g| (g.rule, g.dir.as_str(), g.access)).collect();
    assert_eq!(
        grants,
        [
            (1, "/data/rw", PathAccess::Allow),
            (3, "/dev", PathAccess::Allow),
            (proc_at, "/proc", PathAccess::Allow)
        ]
    );
    assert_eq!(
        plan.mounts()[0],
        PlannedMount {
            kind: Mount::Mask,
            path: "/data/rw/keys".into(),
            required: true
        },
    );
    assert!(
        plan.mounts()[1..]
            .iter()
            .all(|m| m.path.starts_with("/proc") || m.path.starts_with("/sys")),
        "the floor's masks and read-only binds: {:?}",
        plan.mounts()
    );
    assert!(plan.guards_renames());
    assert_eq!(
        plan.describe(),
        format!(
            "kernel ({} path rules by the container's mounts, 4 by Landlock ABI 7)",
            1 + plan.mounts()[1..].len()
        )
    );
    // The filter: opens and tree changes in the kernel, what Landlock
    // has no right for with the supervisor.
    let k = p.kernel_enforced(plan.guards_renames(), true);
    let nr = |n| table::number(n).unwrap();
    for n in ["openat", "mkdirat", "unlinkat", "truncate", "newfstatat"] {
        assert_eq!(k.decide(nr(n), &[0; 6]).0, Action::Allow, "{n}");
    }
    for n in [
        "fchmod",
        "fchownat",
        "utimensat",
        "setxattr",
        "fremovexattr",
        "renameat2",
    ] {
        assert_eq!(k.decide(nr(n), &[0; 6]).0, Action::Emulate, "{n}");
    }
}

/// Other allow-list shapes: readable only beneath, a file mount point,
/// the mounts alone, the user's choice of the supervisor.
#[test]
fn other_allow_lists_choose_their_levels() {
    let kfs = kernel_fs();
    // Readable only beneath: a deny base, a read-only grant.
    let r = user(&[("/bin/**", "read-only"), ("/data/rw/**", "allow"), ("/**", "deny")]);
    let plan = r.plan_at(Enforcement::Kernel, &site(&kfs, &dirs, Some(3)));
    let l = plan.landlock.clone().unwrap();
    assert_eq!(l.base, PathAccess::Deny);
    assert_eq!(l.grants[0].access, PathAccess::ReadOnly);
    assert!(!plan.guards_renames());
    // A mount point that is a file (a bind of one) is no directory to
    // grant beneath: the supervisor keeps the rules.
    let g = user(&[("/tmp/**", "allow"), ("/**", "read-only")]);
    assert!(g
        .plan_at(Enforcement::Kernel, &site(&kfs, &dirs, Some(7)))
        .landlock
        .is_some());
    let file_at_tmp = |p: &str| if p == "/tmp" { Some(Existing::File) } else { dirs(p) };
    let plan = g.plan_at(Enforcement::Kernel, &site(&kfs, &file_at_tmp, Some(7)));
    assert!(plan.landlock.is_none() && !plan.all_kernel, "{plan:?}");
    // Level 1 still comes first, and the user's choice of the supervisor
    // wins.
    let mounts_only = user(&[("/data/ro/**", "read-only")]);
    let plan = mounts_only.plan_at(Enforcement::Kernel, &site(&kfs, &dirs, Some(7)));
    assert!(plan.all_kernel && plan.landlock.is_none());
    assert!(
        !r.plan_at(Enforcement::Supervisor, &site(&kfs, &dirs, Some(7)))
            .all_kernel
    );
}

/// Each rule Landlock and the mounts cannot enforce together keeps the
/// policy with the supervisor, named with its reason.
#[test]
fn shapes_landlock_cannot_enforce_go_to_the_supervisor() {
    let kfs = kernel_fs();
    let refused = |rules: &[(&str, &str)], abi: Option<u32>| -> (usize, String) {
        let plan = user(rules).plan_at(Enforcement::Kernel, &site(&kfs, &dirs, abi));
        assert!(!plan.all_kernel && plan.landlock.is_none(), "{rules:?}: {plan:#?}");
        let b = plan.blocker.expect("a blocker");
        assert!(
            plan.describe().starts_with(&format!("supervisor (path[{b}] ")),
            "{}",
            plan.describe()
        );
        (b, plan.choices[b].why.clone())
    };
    let writable = [("/data/rw/**", "allow"), ("/**", "read-only")];
    let (b, why) = refused(&writable, Some(2));
    assert!(
        b == 0 && why.contains("Landlock ABI 2") && why.contains("TRUNCATE"),
        "{why}"
    );
    let (_, why) = refused(&writable, None);
    assert!(why.contains("Landlock is not available"), "{why}");
    let (b, why) = refused(&[("/data/rw/**", "allow")], Some(7));
    assert!(b == 0 && why.contains("no catch-all /**"), "{why}");
    let (b, why) = refused(&[("/work/**", "deny"), ("/**", "allow")], Some(7));
    let floor = Policy::load("default").unwrap().source.paths.len();
    assert!(b == 1 + floor && why.contains("catch-all /** allow"), "{why}");
    let (b, why) = refused(&[("/work/**", "allow"), ("/**", "deny")], Some(7));
    assert!(b == 0 && why.contains("missing at create"), "{why}");
    let (b, why) = refused(&[("/data/*.txt", "allow"), ("/**", "read-only")], Some(7));
    assert!(b == 0 && why.contains("glob"), "{why}");
    let (b, why) = refused(&[("/data/f", "allow"), ("/**", "read-only")], Some(7));
    assert!(b == 0 && why.contains("Landlock grants directories"), "{why}");
    // A grant inside a mask would be hidden by it.
    let (b, why) = refused(
        &[("/data/rw/**", "allow"), ("/data/**", "deny"), ("/**", "read-only")],
        Some(7),
    );
    assert!(b == 0 && why.contains("inside path[1] /data/**"), "{why}");
    // A restriction inside a grant that no mount can make.
    let (b, why) = refused(
        &[
            ("/data/rw/new/**", "deny"),
            ("/data/rw/**", "allow"),
            ("/**", "read-only"),
        ],
        Some(7),
    );
    assert!(b == 0 && why.contains("only a mount can do"), "{why}");
    // A rule that adds nothing, inside a mask that would take it back.
    let (b, why) = refused(
        &[("/data/ro/**", "read-only"), ("/data/**", "deny"), ("/**", "read-only")],
        Some(7),
    );
    assert!(b == 0 && why.contains("take back"), "{why}");
    // The other rules say which one keeps them there.
    let plan = user(&[
        ("/data/ro/**", "read-only"),
        ("/data/*.txt", "allow"),
        ("/**", "read-only"),
    ])
    .plan_at(Enforcement::Kernel, &site(&kfs, &dirs, Some(7)));
    assert!(
        plan.choices[0].why.contains("path[1] needs the supervisor"),
        "{plan:#?}"
    );
}
