//! Unit tests of the policy model and its compilation.

use super::*;

/// The fuzz corpus starts from the built-in policies as they are (TOML
/// and JSON), and `policy show`'s output reads back as the same policy.
#[test]
fn the_fuzz_corpus_holds_the_builtins_and_shown_policies_read_back() {
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/policy");
    for (name, src) in BUILTIN {
        let toml_copy = std::fs::read_to_string(corpus.join(format!("{name}.toml"))).unwrap();
        assert_eq!(
            &toml_copy, src,
            "fuzz/corpus/policy/{name}.toml is not runtime/policies/{name}.toml"
        );
        let json_copy = std::fs::read_to_string(corpus.join(format!("{name}.json"))).unwrap();
        let from_json: PolicyFile = serde_json::from_str(&json_copy).unwrap();
        let from_toml: PolicyFile = toml::from_str(src).unwrap();
        assert_eq!(
            from_json, from_toml,
            "fuzz/corpus/policy/{name}.json differs from the built-in"
        );
        let shown = Policy::load(name).unwrap();
        let text = toml::to_string_pretty(&shown.source).unwrap();
        let again = Policy::from_toml(&text, name).unwrap();
        assert_eq!(again.source, shown.source, "{name}: policy show does not read back");
        assert_eq!(again.rules, shown.rules);
    }
}

/// The lists of docs/POLICY.md that come from the syscall table: the
/// syscalls `emulate` takes, per handler family, and the TOML that
/// emulates the whole file family. On a stale doc the test prints the
/// text to paste.
#[test]
fn the_documented_lists_are_the_table() {
    use table::Family;
    let names = |f: Family| {
        table::entries()
            .filter(|(_, e)| e.family() == Some(f))
            .map(|(_, e)| e.name)
            .collect::<Vec<_>>()
    };
    let families = [
        (Family::Uname, "the kernel identity"),
        (Family::Sysinfo, "memory and uptime"),
        (Family::Open, "opens"),
        (Family::Connect, "egress"),
        (Family::Sendto, "egress"),
        (Family::Sendmsg, "egress"),
        (Family::Sendmmsg, "egress"),
        (Family::Sockname, "a relayed connection's addresses"),
        (Family::Bind, "unix socket paths"),
        (Family::Fs, "metadata reads and tree changes"),
        (Family::Meta, "metadata changes, by path and by fd"),
    ];
    let emulated: String = families
        .iter()
        .map(|&(f, what)| format!("- {f:?} ({what}): `{}`\n", names(f).join(" ")))
        .collect();
    // What `names = [...]` wraps to at 80 columns.
    let toml = format!(
        "```toml\n[[syscall]]\nnames = {}\naction = \"emulate\"\n```\n",
        super::learn::toml_names(&names(Family::Fs), 8)
    );
    let body = toml.trim_start_matches("```toml\n").trim_end_matches("```\n");
    Policy::from_toml(&format!("name = \"doc\"\n{body}"), "doc").expect("the documented TOML");
    let doc = include_str!("../../../docs/POLICY.md");
    let blocks: Vec<&str> = doc
        .split("a unit test checks it -->\n")
        .skip(1)
        .map(|b| &b[..b.find("<!-- end of generated list -->").expect("the block's end")])
        .collect();
    assert_eq!(blocks.len(), 2, "docs/POLICY.md's generated blocks");
    for (found, want) in blocks.iter().zip([&emulated, &toml]) {
        assert!(
            found == want,
            "docs/POLICY.md is stale: replace its generated block by\n{want}"
        );
    }
}

#[test]
fn a_policy_builds_on_default_unless_it_says_none() {
    let p = Policy::from_toml("name = \"p\"\n[[path]]\npattern = \"/d/**\"\naccess = \"deny\"\n", "p").unwrap();
    let default = Policy::load("default").unwrap();
    assert_eq!(p.rules.len(), default.rules.len(), "the default's syscall rules");
    assert!(p.pins_root(), "the default's hardening");
    let none = Policy::from_toml("name = \"n\"\nextends = \"none\"\n", "n").unwrap();
    assert!(none.rules.is_empty());
    let e = Policy::from_toml("name = \"x\"\nextends = \"strict\"\n", "x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("extends") && e.contains("\"none\""), "{e}");
}

#[test]
fn a_catch_all_leaves_dev_usable_unless_an_earlier_rule_says_otherwise() {
    let rule = |p: &str, a: &str| format!("[[path]]\npattern = \"{p}\"\naccess = \"{a}\"\n");
    let text = format!(
        "name = \"p\"\n{}{}",
        rule("/work/**", "allow"),
        rule("/**", "read-only")
    );
    let p = Policy::from_toml(&text, "p").unwrap();
    for dev in [
        "/dev/null",
        "/dev/zero",
        "/dev/urandom",
        "/dev/tty",
        "/dev/ptmx",
        "/dev/pts/0",
        "/dev/shm/sem.x",
    ] {
        assert_eq!(p.paths.access(dev), PathAccess::Allow, "{dev}");
    }
    assert_eq!(p.paths.access("/etc/passwd"), PathAccess::ReadOnly);
    assert_eq!(p.paths.access("/devices"), PathAccess::ReadOnly);
    let all = p.source.paths.iter().position(|r| r.pattern == "/**").unwrap();
    assert_eq!(p.source.paths[all - 1].pattern, DEV_RULE, "right before the catch-all");
    // What `policy show` prints reads back the same.
    let again = Policy::compile(p.source.clone(), "again").unwrap();
    assert_eq!(again.source.paths, p.source.paths);
    // The user's own word on /dev, above the catch-all, still decides.
    let text = format!(
        "name = \"p\"\n{}{}",
        rule("/dev/shm/**", "deny"),
        rule("/** ", "deny").replace("/** ", "/**")
    );
    let p = Policy::from_toml(&text, "p").unwrap();
    assert_eq!(p.paths.access("/dev/shm/x"), PathAccess::Deny);
    assert_eq!(p.paths.access("/dev/null"), PathAccess::Allow);
    assert_eq!(p.paths.access("/etc"), PathAccess::Deny);
    // No catch-all, nothing added.
    let p = Policy::from_toml(&format!("name = \"p\"\n{}", rule("/etc/**", "read-only")), "p").unwrap();
    assert!(p.source.paths.iter().all(|r| r.pattern != DEV_RULE));
}

#[test]
fn the_defaults_protections_are_a_floor() {
    let rule = |p: &str, a: &str| format!("[[path]]\npattern = \"{p}\"\naccess = \"{a}\"\n");
    // An allow-list's catch-all first: the default's masks still decide.
    let text = format!(
        "name = \"p\"\n{}{}",
        rule("/work/**", "allow"),
        rule("/**", "read-only")
    );
    let p = Policy::from_toml(&text, "p").unwrap();
    assert_eq!(p.paths.access("/proc/kallsyms"), PathAccess::Deny);
    assert_eq!(p.paths.access("/sys/kernel/notes"), PathAccess::Deny);
    assert_eq!(p.paths.access("/proc/sys/kernel/hostname"), PathAccess::ReadOnly);
    assert_eq!(p.paths.access("/work/x"), PathAccess::Allow);
    assert_eq!(
        p.source.paths[0].pattern, "/work/**",
        "the user's rules before keep their numbers"
    );
    assert!(p.shadowed_paths().is_empty(), "{:?}", p.shadowed_paths());
    let again = Policy::compile(p.source.clone(), "again").unwrap();
    assert_eq!(again.source.paths, p.source.paths, "policy show reads back the same");
    // A catch-all allow first, too.
    let p = Policy::from_toml(&format!("name = \"p\"\n{}", rule("/**", "allow")), "p").unwrap();
    assert_eq!(p.paths.access("/proc/kcore"), PathAccess::Deny);
    // Naming a protected path to loosen it is refused, naming both rules.
    for (pattern, access, floor) in [
        ("/proc/kallsyms", "allow", "/proc/kallsyms deny"),
        ("/proc/kallsyms", "read-only", "/proc/kallsyms deny"),
        ("/sys/fs/cgroup/**", "allow", "/sys/** read-only"),
    ] {
        let e = Policy::from_toml(&format!("name = \"p\"\n{}", rule(pattern, access)), "p")
            .unwrap_err()
            .to_string();
        assert!(e.contains("path[0].access") && e.contains(floor), "{pattern}: {e}");
    }
    // Tightening is fine, and so is a policy without the default.
    Policy::from_toml(&format!("name = \"p\"\n{}", rule("/proc/sys/**", "deny")), "p").unwrap();
    let none = format!(
        "name = \"p\"\nextends = \"none\"\n[[syscall]]\nnames = [\"openat\"]\naction = \"emulate\"\n{}",
        rule("/proc/kallsyms", "allow")
    );
    assert_eq!(
        Policy::from_toml(&none, "p").unwrap().paths.access("/proc/kallsyms"),
        PathAccess::Allow
    );
}

#[test]
fn masked_eq_conditions_that_cannot_decide_are_refused() {
    let rule = |cond: &str| {
        Policy::from_toml(
            &format!("name = \"m\"\n[[syscall]]\nnames = [\"socket\"]\naction = \"deny\"\nargs = [{cond}]\n"),
            "m",
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    assert!(rule("{ index = 0, op = \"masked_eq\", value = 16 }")
        .unwrap_err()
        .contains("args[0].mask"));
    assert!(rule("{ index = 0, op = \"masked_eq\", mask = 15, value = 23 }")
        .unwrap_err()
        .contains("args[0].value"));
    assert!(rule("{ index = 0, op = \"masked_eq\", mask = 0xffffffff, value = 16 }").is_ok());
}

#[test]
fn rules_that_cannot_take_effect_are_refused_with_their_name() {
    let e = Policy::from_toml(
        "name = \"n\"\nextends = \"none\"\n[[path]]\npattern = \"/d/**\"\naccess = \"deny\"\n",
        "n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("path[0]") && e.contains("cannot take effect"), "{e}");
    let e = Policy::from_toml("name = \"n\"\nextends = \"none\"\nnet_default = \"deny\"\n", "n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("net_default") && e.contains("cannot take effect"), "{e}");
    let e = Policy::from_toml("name = \"p\"\n[[path]]\npattern = \"/d/\"\naccess = \"deny\"\n", "p")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("path[0].pattern") && e.contains("matches nothing") && e.contains("/d/**"),
        "{e}"
    );
    let e = Policy::from_toml(
        "name = \"p\"\n[[path]]\npattern = \"/a/../etc\"\naccess = \"deny\"\n",
        "p",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("path[0].pattern"), "{e}");
    // Empty components (which a Landlock grant would normalise away
    // while the supervisor's matcher never matches them) and NUL.
    for bad in ["//data/rw/**", "/data/rw//**", "/data/f\\u0000"] {
        let e = Policy::from_toml(
            &format!("name = \"p\"\n[[path]]\npattern = \"{bad}\"\naccess = \"allow\"\n"),
            "p",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("path[0].pattern"), "{bad}: {e}");
    }
}

#[test]
fn parse_errors_name_the_place_not_the_content() {
    let text = "name = \"p\"\nAWS_SECRET_ACCESS_KEY = \"abc123\"\n";
    let e = Policy::from_toml(text, "/etc/x").unwrap_err().to_string();
    assert!(e.contains("line 2"), "{e}");
    assert!(!e.contains("abc123"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}

/// Every syscall of the table that can change a file is covered: a new
/// one (by its name) must be classified, and each change is decided by
/// the supervisor or refused under the built-in policies with path
/// rules. `ioctl` is checked for the commands that set file flags.
/// Every syscall that takes a path has a decision under each built-in
/// policy with path rules: emulated under them, refused, or, for one
/// that only reads a path (its table entry says so), left to the
/// kernel.
#[test]
fn every_path_taking_syscall_is_decided() {
    use table::Disposition;
    for (policy, _) in BUILTIN {
        let p = Policy::load(policy).unwrap();
        if p.source.paths.is_empty() {
            continue;
        }
        for (nr, e) in table::entries().filter(|(_, e)| e.path.is_some()) {
            for args in [[0; 6], [u64::MAX; 6]] {
                let (action, _) = p.decide(nr, &args);
                let decided = match action {
                    Action::Emulate | Action::Deny | Action::Kill => true,
                    Action::Allow | Action::Audit => e.disposition == Disposition::Reads,
                };
                assert!(
                    decided,
                    "{policy}: {} takes a path and is let through ({action:?})",
                    e.name
                );
            }
        }
    }
}

#[test]
fn every_file_change_is_decided_or_refused() {
    let words = [
        "xattr",
        "attr",
        "chmod",
        "chown",
        "utime",
        "rename",
        "link",
        "mkdir",
        "mknod",
        "truncate",
        "rmdir",
        "creat",
        "open",
        "mount",
        "swap",
        "acct",
        "quota",
        "write",
        "sync",
        "bind",
        "fallocate",
    ];
    use table::Disposition;
    let file_changes: Vec<&str> = table::with(Disposition::Changes)
        .chain(table::with(Disposition::Mount))
        .collect();
    for name in NOT_FILE_CHANGES {
        assert!(
            !file_changes.contains(name),
            "{name} is in NOT_FILE_CHANGES and changes files"
        );
    }
    for &(name, _) in table::all() {
        if words.iter().any(|w| name.contains(w)) {
            assert!(
                file_changes.contains(&name)
                    || NOT_FILE_CHANGES.contains(&name)
                    || table::entry_named(name).is_some_and(|e| e.disposition == Disposition::Nosys),
                "{name} may change files: give it the disposition Changes in the syscall table, or list it in NOT_FILE_CHANGES"
            );
        }
    }
    for policy in ["default", "audit"] {
        let p = Policy::load(policy).unwrap();
        for name in &file_changes {
            let nr = table::number(name).unwrap_or_else(|| panic!("{name} not in the table"));
            let argsets: Vec<[u64; 6]> = if *name == "ioctl" {
                crate::supervisor::syscalls::SETTING_IOCTLS
                    .iter()
                    .flat_map(|&c| [[3, u64::from(c), 0, 0, 0, 0], [3, u64::from(c) | 1 << 32, 0, 0, 0, 0]])
                    .collect()
            } else {
                vec![[0; 6], [u64::MAX; 6], [3, 1, 2, 0x100, 0x400, 0]]
            };
            for args in argsets {
                let (action, _) = p.decide(nr, &args);
                assert!(
                    matches!(action, Action::Emulate | Action::Deny | Action::Kill),
                    "{policy}: {name}{args:x?} is {action:?}: it changes files without a decision"
                );
            }
        }
    }
}

#[test]
fn views_keys() {
    let p = Policy::from_toml("name = 't'\n", "t").unwrap();
    assert!(p.source.views.proc && p.source.views.identity == model::Identity::Virtual);
    assert_eq!(p.source.views.release, model::RELEASE);
    let p = Policy::from_toml(
        "name = 't'\n[views]\nproc = false\nidentity = 'host'\nrelease = '5.15.0-x'\n",
        "t",
    )
    .unwrap();
    assert!(!p.source.views.proc && p.source.views.identity == model::Identity::Host);
    assert_eq!(p.source.views.release, "5.15.0-x");
    let e = Policy::from_toml("name = 't'\n[views]\nrelease = 'a b'\n", "t").unwrap_err();
    assert!(e.to_string().contains("views.release"), "{e}");
    let e = Policy::from_toml("name = 't'\n[views]\nprocs = false\n", "t").unwrap_err();
    assert!(e.to_string().contains("procs"), "{e}");
    assert!(!Policy::load("permissive").unwrap().source.views.proc);
    assert_eq!(Policy::load("default").unwrap().views(), model::Views::default());
    // Without an emulated uname the identity files would disagree
    // with it: the host's identity; without a supervisor, no views.
    let p = Policy::from_toml(
        "name = 't'\nextends = 'none'\n[[syscall]]\nnames = ['sysinfo']\naction = 'emulate'\n",
        "t",
    )
    .unwrap();
    assert!(p.views().proc && p.views().identity == model::Identity::Host);
    let p = Policy::from_toml("name = 't'\nextends = 'none'\n", "t").unwrap();
    assert!(!p.views().proc);
}

#[test]
fn builtins_compile() {
    for (name, _) in BUILTIN {
        Policy::load(name).unwrap();
    }
}

#[test]
fn pins_follow_the_rules_that_could_break_them() {
    let default = Policy::load("default").unwrap();
    assert!(default.pins_root() && default.pins_user_namespace());
    let permissive = Policy::load("permissive").unwrap();
    assert!(!permissive.pins_root() && !permissive.pins_user_namespace());
    // One rule letting unshare(CLONE_NEWUSER) or chroot through, ahead
    // of default's refusals, and the pin is gone.
    let src = |extra: &str| format!("name = \"t\"\nextends = \"default\"\n{extra}");
    let unshare = Policy::from_toml(&src("[[syscall]]\nnames = [\"unshare\"]\naction = \"allow\"\n"), "t").unwrap();
    assert!(!unshare.pins_user_namespace() && unshare.pins_root());
    let chroot = Policy::from_toml(&src("[[syscall]]\nnames = [\"chroot\"]\naction = \"audit\"\n"), "t").unwrap();
    assert!(!chroot.pins_root() && chroot.pins_user_namespace());
}

#[test]
fn default_refuses_and_emulates() {
    let p = Policy::load("default").unwrap();
    let nr = |n| table::number(n).unwrap();
    assert_eq!(p.decide(nr("bpf"), &[0; 6]), (Action::Deny, libc::EPERM));
    assert_eq!(p.decide(nr("io_uring_setup"), &[0; 6]), (Action::Deny, libc::ENOSYS));
    assert_eq!(p.decide(nr("uname"), &[0; 6]).0, Action::Emulate);
    assert_eq!(p.decide(nr("getppid"), &[0; 6]).0, Action::Allow);
    assert_eq!(p.decide(nr("unshare"), &[0x10000000, 0, 0, 0, 0, 0]).0, Action::Deny);
    assert_eq!(p.decide(nr("unshare"), &[0x00020000, 0, 0, 0, 0, 0]).0, Action::Allow);
    assert_eq!(p.decide(nr("personality"), &[8, 0, 0, 0, 0, 0]).0, Action::Allow);
    assert_eq!(p.decide(nr("personality"), &[0x0040000, 0, 0, 0, 0, 0]).0, Action::Deny);
    assert_eq!(p.decide(nr("sendto"), &[3, 0, 0, 0, 0, 0]).0, Action::Allow);
    assert_eq!(p.decide(nr("sendto"), &[3, 0, 0, 0, 0x1000, 0]).0, Action::Emulate);
    assert_eq!(p.decide(9999, &[0; 6]), (Action::Deny, libc::ENOSYS));
}

/// Found by fuzzing (fuzz/corpus/policy/crash-*): BPF jump offsets are
/// 8 bits, so a rule with many conditions jumped into the middle of its
/// own conditions: here the filter denied a call `decide` allows.
#[test]
fn many_conditions_compile_right_or_are_refused() {
    let rule = |n: usize| {
        let mut args = vec!["{ index = 0, op = 'eq', value = 1 }".to_string()];
        args.extend((1..n).map(|_| "{ index = 1, op = 'eq', value = 0 }".to_string()));
        format!(
            "name='x'\n[[syscall]]\nnames=['getpid']\naction='deny'\nargs=[{}]\n",
            args.join(",")
        )
    };
    let nr = table::number("getpid").unwrap();
    let ok = Policy::from_toml(&rule(MAX_CONDITIONS), "t").unwrap();
    let prog = crate::filter::compile(&ok);
    for args in [[0; 6], [1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0]] {
        let (act, errno) = ok.decide(nr, &args);
        assert_eq!(
            crate::filter::evaluate(&prog, crate::abi::AUDIT_ARCH_X86_64, nr, &args),
            crate::filter::action_value(act, errno),
            "{args:?}"
        );
    }
    let e = Policy::from_toml(&rule(70), "t").unwrap_err();
    assert!(e.to_string().contains("syscall[0].args: 70 conditions"), "{e}");
}

/// Found by fuzzing (fuzz/corpus/policy/crash-too-long): `policy check`
/// accepted a policy whose filter the kernel refuses (EINVAL at every
/// container start).
#[test]
fn errors_name_rule_and_field() {
    let e = Policy::from_toml("name='x'\n[[syscall]]\nnames=['nosuch']\naction='deny'\n", "t").unwrap_err();
    assert_eq!(
        e.to_string(),
        "policy t: syscall[0].names[0]: unknown syscall \"nosuch\""
    );
    let e = Policy::from_toml(
        "name='x'\n[[syscall]]\nnames=['read']\naction='deny'\nerrno='EWHAT'\n",
        "t",
    )
    .unwrap_err();
    assert!(e.to_string().contains("syscall[0].errno"), "{e}");
    let e = Policy::from_toml("name='x'\n[[syscall]]\nnames=['getpid']\naction='emulate'\n", "t").unwrap_err();
    assert!(e.to_string().contains("getpid cannot be emulated"), "{e}");
    // A syscall the table refuses whatever the policy says cannot be
    // named: a rule for it would silently never apply.
    let e = Policy::from_toml("name='x'\n[[syscall]]\nnames=['cachestat']\naction='allow'\n", "t").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("policy t: syscall[0].names[0]: cachestat is refused with ENOSYS"),
        "{e}"
    );
    // Nor one the kernel runs without asking seccomp (the uprobe
    // trampolines): a rule the filter would apply and the supervisor not.
    let e = Policy::from_toml("name='x'\n[[syscall]]\nnames=['uprobe']\naction='deny'\n", "t").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("policy t: syscall[0].names[0]: uprobe is refused with ENOSYS"),
        "{e}"
    );
    let nr = |n| table::number(n).unwrap();
    let p = Policy::load("permissive").unwrap();
    assert_eq!(p.decide(nr("cachestat"), &[0; 6]), (Action::Deny, libc::ENOSYS));
    assert_eq!(p.decide(nr("mseal"), &[0; 6]).0, Action::Allow);
    let e = Policy::from_toml("name='x'\n[[net]]\ncidr='10.0.0.0/33'\naction='deny'\n", "t").unwrap_err();
    assert!(e.to_string().contains("net[0].cidr"), "{e}");
    let e = Policy::from_toml("name='x'\n[[syscall]]\nnames=['write']\naction='audit'\n", "t").unwrap_err();
    assert!(e.to_string().contains("listener handover"), "{e}");
    // The listener goes over a sendto without an address: a policy that
    // holds or refuses it would stop every container before it starts; one
    // that emulates sends with an address (the egress rules) is fine.
    for text in [
        "name='x'\ndefault_action='audit'\n[[syscall]]\nnames=['read','write','close']\naction='allow'\n",
        "name='x'\ndefault_action='deny'\n[[syscall]]\nnames=['read','write','close']\naction='allow'\n",
        "name='x'\n[[syscall]]\nnames=['sendto']\naction='deny'\n",
    ] {
        let e = Policy::from_toml(text, "t").unwrap_err();
        assert!(
            e.to_string().contains("sendto without an address must be allowed"),
            "{e}"
        );
    }
    let e = Policy::from_toml("name='x'\nbogus=1\n", "t").unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
    let e = Policy::from_toml(
        "name='x'\n[[syscall]]\nnames=['read']\naction='deny'\nargs=[{index=7,op='eq',value=1}]\n",
        "t",
    )
    .unwrap_err();
    assert!(e.to_string().contains("syscall[0].args[0].index"), "{e}");
}
