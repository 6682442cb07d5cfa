//! Syscall cost (section 2) inside the container, and the kernel's floor: a minimal
//! seccomp-notify supervisor (bench/probe/floor.c) run on the host.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::bail;
use serde::Serialize;
use serde_json::json;

use crate::charts::{self, Bar, Marker};
use crate::env::{Env, Image, Runtime};
use crate::proc;
use crate::report::{num, table, SectionOut, Target};
use crate::stats::{self, Summary};

/// One loop inside a configuration.
struct Test {
    key: &'static str,
    /// The loop's argument without the count (`getppid`, `open:/bench/data`).
    spec: &'static str,
    calls: u64,
    what: &'static str,
    expect: Option<&'static str>,
}

/// A configuration: a container under a runtime, or a host program.
struct Config {
    name: &'static str,
    kind: Kind,
    tests: Vec<Test>,
}

enum Kind {
    Container(Runtime),
    /// A container whose /etc/resolv.conf names 127.0.0.1, where the loop
    /// runs a nameserver of its own (`loop serve-dns`).
    DnsContainer(Runtime),
    HostLoop,
    Floor {
        addfd: bool,
        sync: bool,
    },
}

#[derive(Debug, Serialize)]
struct Case {
    config: String,
    test: String,
    what: String,
    calls: u64,
    ns: Vec<f64>,
    summary: Summary,
    ret: String,
    expected: Option<String>,
}

const T_NATIVE: u64 = 1_000_000;
const T_CHEAP: u64 = 200_000;
const T_TRIP: u64 = 20_000;
const T_OPEN: u64 = 10_000;
const T_NET: u64 = 5_000;

/// A lookup and a connect, by name where the policy has host rules.
fn net_tests(lookup: &'static str, connect: &'static str) -> Vec<Test> {
    vec![
        t("lookup", "lookup:bench.test", T_NET, lookup, Some("OK")),
        t("connect", "connect:127.0.0.1:9", T_NET, connect, Some("ECONNREFUSED")),
    ]
}

fn t(key: &'static str, spec: &'static str, calls: u64, what: &'static str, expect: Option<&'static str>) -> Test {
    Test {
        key,
        spec,
        calls,
        what,
        expect,
    }
}

/// The loops of a container under the default policy, on either platform
/// (`uname`, `open` and `open_denied` say how each call is answered).
fn default_policy_tests(uname: &'static str, open: &'static str, open_denied: &'static str) -> Vec<Test> {
    vec![
        t(
            "getppid",
            "getppid",
            T_NATIVE,
            "not intercepted (allowed in BPF)",
            Some("OK"),
        ),
        t("uname", "uname", T_TRIP, uname, Some("OK")),
        t("open", "open:/bench/data", T_OPEN, open, Some("OK")),
        t(
            "open-denied",
            "open:/proc/kallsyms",
            T_OPEN,
            open_denied,
            Some("EACCES"),
        ),
    ]
}

fn configs(env: &Env) -> Vec<Config> {
    let audit = env.runtime("cordon-audit", Some(&env.audit_policy.to_string_lossy()));
    vec![
        Config {
            name: "runc (no filter)",
            kind: Kind::Container(env.runtime("runc", None)),
            tests: vec![
                t("getppid", "getppid", T_NATIVE, "native", Some("OK")),
                t("uname", "uname", T_CHEAP, "native", Some("OK")),
                t("open", "open:/bench/data", T_CHEAP, "native openat+close", Some("OK")),
                t("bpf", "bpf", T_CHEAP, "kernel refuses (no CAP_BPF)", None),
            ],
        },
        Config {
            name: "runc (1-rule filter)",
            kind: Kind::Container(env.runc_with_filter()),
            tests: vec![t(
                "getppid",
                "getppid",
                T_NATIVE,
                "allowed by a minimal libseccomp filter",
                Some("OK"),
            )],
        },
        Config {
            name: "cordon-permissive",
            kind: Kind::Container(env.runtime("cordon-permissive", Some("permissive"))),
            tests: vec![
                t("getppid", "getppid", T_NATIVE, "allowed in BPF", Some("OK")),
                t("open", "open:/bench/data", T_CHEAP, "allowed in BPF", Some("OK")),
            ],
        },
        Config {
            name: "cordon (default)",
            // Supervisor-level enforcement: under the default kernel level
            // opens never reach the supervisor (the workloads section).
            kind: Kind::Container(env.runtime("cordon-supervisor", Some("default"))),
            tests: {
                let mut v = default_policy_tests(
                    "emulated by the supervisor",
                    "emulated open (openat2 + ADDFD) + close, org.cordon.enforcement = supervisor",
                    "denied by the supervisor (path rule)",
                );
                v.push(t(
                    "bpf",
                    "bpf",
                    T_CHEAP,
                    "refused in BPF (no round trip)",
                    Some("EPERM"),
                ));
                v
            },
        },
        Config {
            name: "cordon-ptrace (default)",
            kind: Kind::Container(env.runtime("cordon-ptrace-supervisor", Some("default"))),
            tests: default_policy_tests(
                "emulated at a ptrace stop",
                "emulated open (openat2 + fd injected by 6 syscalls in the tracee) + close, supervisor level",
                "denied at a ptrace stop (path rule)",
            ),
        },
        Config {
            name: "cordon (getppid audited)",
            kind: Kind::Container(audit),
            tests: vec![t(
                "getppid",
                "getppid",
                T_TRIP,
                "intercepted, recorded, answered CONTINUE",
                Some("OK"),
            )],
        },
        Config {
            name: "runc (lookup, connect)",
            kind: Kind::DnsContainer(env.runtime("runc-dns", None)),
            tests: net_tests(
                "native: UDP socket, connect, A query to an in-container nameserver, answer, close",
                "native: TCP connect to a closed port, close",
            ),
        },
        Config {
            name: "cordon (default, lookup, connect)",
            kind: Kind::DnsContainer(env.runtime("cordon-dns", Some("default"))),
            tests: net_tests(
                "connect decided on the address by the supervisor; the nameserver's reply an intercepted sendto",
                "decided on the address by the supervisor, then done by it",
            ),
        },
        Config {
            name: "cordon (host rules)",
            kind: Kind::DnsContainer(env.runtime("cordon-names", Some(&env.names_policy.to_string_lossy()))),
            tests: net_tests(
                "through the supervisor's resolver: connect to it decided, the query forwarded to the nameserver (its reply an intercepted sendto), the answer bound and passed back",
                "decided on the name bound to the address (host rule), then done by the supervisor",
            ),
        },
        Config {
            name: "host (no container)",
            kind: Kind::HostLoop,
            tests: vec![
                t("getppid", "getppid", T_NATIVE, "native", Some("OK")),
                t("open", "open:DATA", T_CHEAP, "native openat+close", Some("OK")),
            ],
        },
        Config {
            name: "floor CONTINUE (sync wake-up)",
            kind: Kind::Floor {
                addfd: false,
                sync: true,
            },
            tests: vec![t("getppid", "getppid", T_TRIP, "RECV + SEND(CONTINUE)", Some("OK"))],
        },
        Config {
            name: "floor CONTINUE",
            kind: Kind::Floor {
                addfd: false,
                sync: false,
            },
            tests: vec![t("getppid", "getppid", T_TRIP, "RECV + SEND(CONTINUE)", Some("OK"))],
        },
        Config {
            name: "floor ADDFD (sync wake-up)",
            kind: Kind::Floor {
                addfd: true,
                sync: true,
            },
            tests: vec![t(
                "open",
                "open:DATA",
                T_OPEN,
                "RECV + read path + openat + ADDFD(SEND) + close",
                Some("OK"),
            )],
        },
        Config {
            name: "floor ADDFD",
            kind: Kind::Floor {
                addfd: true,
                sync: false,
            },
            tests: vec![t(
                "open",
                "open:DATA",
                T_OPEN,
                "RECV + read path + openat + ADDFD(SEND) + close",
                Some("OK"),
            )],
        },
    ]
}

/// Parses `result NAME calls=K ns=X ret=R` lines.
fn parse(stdout: &str) -> Vec<(f64, String)> {
    stdout
        .lines()
        .filter(|l| l.starts_with("result "))
        .filter_map(|l| {
            let mut ns = None;
            let mut ret = None;
            for w in l.split_whitespace() {
                if let Some(v) = w.strip_prefix("ns=") {
                    ns = v.parse::<f64>().ok();
                } else if let Some(v) = w.strip_prefix("ret=") {
                    ret = Some(v.to_string());
                }
            }
            Some((ns?, ret?))
        })
        .collect()
}

fn run_config(env: &Env, c: &Config, scale: u64) -> anyhow::Result<Vec<(f64, String)>> {
    let host_data = env.busybox_rootfs.join("bench/data").to_string_lossy().into_owned();
    let count = |t: &Test| (t.calls / scale).max(1000);
    let specs: Vec<String> = c
        .tests
        .iter()
        .map(|t| format!("{}={}", t.spec.replace("DATA", &host_data), count(t)))
        .collect();
    let timeout = Duration::from_secs(600);
    let out = match &c.kind {
        Kind::Container(rt) | Kind::DnsContainer(rt) => {
            let id = env.id(rt, "sys");
            let dns = matches!(c.kind, Kind::DnsContainer(_));
            let mut args = vec!["/bench/loop"];
            if dns {
                args.push("serve-dns");
            }
            args.extend(specs.iter().map(String::as_str));
            let bundle = env.bundle(rt, &id, Image::Busybox, &args, &[])?;
            if dns {
                let path = bundle.join("config.json");
                let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
                if let Some(m) = config["mounts"].as_array_mut() {
                    m.push(json!({"destination": "/etc/resolv.conf", "type": "bind",
                                  "source": env.resolv_conf, "options": ["rbind", "ro"]}));
                }
                std::fs::write(&path, serde_json::to_vec_pretty(&config)?)?;
            }
            let b = bundle.to_string_lossy().into_owned();
            let out = rt.exec(&["run", "-b", &b, &id], timeout)?;
            env.drop_bundle(&id);
            out
        }
        Kind::HostLoop => proc::run(&mut proc::command(&env.loop_bin, &specs), timeout)?,
        Kind::Floor { addfd, sync } => {
            let t = &c.tests[0];
            let mode = if *sync { "sync" } else { "nosync" };
            let n = count(t).to_string();
            let args: Vec<&str> = if *addfd {
                vec!["addfd", &host_data, &n, mode]
            } else {
                vec!["continue", &n, mode]
            };
            proc::run(&mut proc::command(&env.floor_bin, &args), timeout)?
        }
    };
    let _ = proc::settle_orphans(Duration::from_secs(2));
    if !out.ok() {
        bail!("{}", out.failure(c.name));
    }
    let r = parse(&out.stdout);
    if r.len() != c.tests.len() {
        bail!(
            "{}: expected {} result lines, got {}: {}",
            c.name,
            c.tests.len(),
            r.len(),
            out.stdout.trim()
        );
    }
    Ok(r)
}

/// Runs the section.
pub fn run(env: &Env, out: &Path) -> anyhow::Result<SectionOut> {
    let cfgs = configs(env);
    let reps = env.sizes.syscall_reps;
    let scale = env.sizes.syscall_scale;
    let mut so = SectionOut::default();
    let mut cases: BTreeMap<(usize, usize), Case> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut cordon_failures = Vec::new();
    for rep in 0..reps {
        for k in 0..cfgs.len() {
            let ci = (rep + k) % cfgs.len();
            let c = &cfgs[ci];
            match run_config(env, c, scale) {
                Ok(results) => {
                    for (ti, (ns, ret)) in results.into_iter().enumerate() {
                        let t = &c.tests[ti];
                        let case = cases.entry((ci, ti)).or_insert_with(|| Case {
                            config: c.name.to_string(),
                            test: t.key.to_string(),
                            what: t.what.to_string(),
                            calls: (t.calls / scale).max(1000),
                            ns: Vec::new(),
                            summary: Summary::default(),
                            ret: String::new(),
                            expected: t.expect.map(str::to_string),
                        });
                        case.ns.push(ns);
                        case.ret = ret;
                    }
                }
                Err(e) if matches!(&c.kind, Kind::Container(rt) | Kind::DnsContainer(rt) if rt.is_cordon()) => {
                    cordon_failures.push(format!("{e:#}"))
                }
                Err(e) => failures.push(format!("{e:#}")),
            }
        }
    }
    for f in failures.iter().take(5) {
        so.problems.push(f.clone());
    }
    for f in cordon_failures.iter().take(5) {
        so.warnings.push(format!("**cordon failed a run:** {f}"));
    }
    if cases.is_empty() {
        bail!("no measurement succeeded");
    }
    for c in cases.values_mut() {
        c.summary = stats::summary(&c.ns);
        if let Some(e) = &c.expected {
            if &c.ret != e {
                so.warnings.push(format!(
                    "{} {}: expected {e}, got {} (the measurement is not what it claims to be)",
                    c.config, c.test, c.ret
                ));
            }
        }
    }
    let get = |config: &str, test: &str| {
        cases
            .values()
            .find(|c| c.config == config && c.test == test)
            .map(|c| c.summary.median)
    };
    let floor_cont = [
        get("floor CONTINUE (sync wake-up)", "getppid"),
        get("floor CONTINUE", "getppid"),
    ]
    .into_iter()
    .flatten()
    .reduce(f64::min);
    let floor_addfd = [get("floor ADDFD (sync wake-up)", "open"), get("floor ADDFD", "open")]
        .into_iter()
        .flatten()
        .reduce(f64::min);
    let runc_getppid = get("runc (no filter)", "getppid");
    let cordon_getppid = get("cordon (default)", "getppid");
    let audit_getppid = get("cordon (getppid audited)", "getppid");
    let cordon_open = get("cordon (default)", "open");
    if let (Some(a), Some(c)) = (audit_getppid, cordon_getppid) {
        if a < 3.0 * c {
            so.warnings.push(format!(
                "the audited getppid ({a:.0} ns) is not much slower than the unintercepted one ({c:.0} ns): \
                 is it really sent to the supervisor?"
            ));
        }
    }

    so.targets.push(
        Target::at_most(
            "unintercepted syscall: cordon vs no filter",
            "≤ 1.02× runc without seccomp",
            stats::ratio(cordon_getppid, runc_getppid),
            1.02,
            "x",
            format!(
                "getppid: cordon (default policy) {} ns / runc with no filter {} ns (medians)",
                num(cordon_getppid, 1),
                num(runc_getppid, 1)
            ),
        )
        .because(format!(
            "the cost is having a filter, not what it says: any seccomp filter moves every syscall of the process \
         to the kernel's slower entry path (syscall_trace_enter, then the filter's constant-action bitmap for \
         syscalls it always allows), and runc with a one-rule libseccomp filter pays the same (cordon / \
         runc-with-a-filter = {}). Only a container with no filter meets this target; Docker's default \
         profile and Kubernetes' RuntimeDefault pay it too",
            num(stats::ratio(cordon_getppid, get("runc (1-rule filter)", "getppid")), 3)
        )),
    );
    so.targets.push(
        Target::at_most(
            "intercepted round trip vs floor",
            "≤ 1.3× floor",
            stats::ratio(audit_getppid, floor_cont),
            1.3,
            "x",
            format!(
                "getppid audited (CONTINUE) {} ns / minimal C supervisor answering CONTINUE {} ns (the faster floor \
             variant)",
                num(audit_getppid, 0),
                num(floor_cont, 0)
            ),
        )
        .because(
            "the floor is RECV and SEND(CONTINUE) in a tight loop and nothing else. Per call cordon also polls the \
         listener before RECV (a RECV blocked when the last task using the filter exits never returns, so the \
         receiver waits in poll(2) for POLLIN or POLLHUP), looks the call up in the policy, formats a JSON \
         audit record and writes it with one write(2) to an O_APPEND file (one write per record: records of \
         concurrent threads never interleave, and a crash of the supervisor loses none). Two syscalls more than \
         the floor's two: on this VM a syscall costs about 0.3-1 µs and the notification's two wake-ups of \
         the other vCPU most of the floor itself",
        ),
    );
    so.targets.push(
        Target::at_most(
            "emulated open vs ADDFD floor",
            "≤ 1.3× ADDFD floor",
            stats::ratio(cordon_open, floor_addfd),
            1.3,
            "x",
            format!(
                "openat+close of an allowed file: cordon {} ns / minimal C supervisor (openat + ADDFD) {} ns",
                num(cordon_open, 0),
                num(floor_addfd, 0)
            ),
        )
        .because(
            "the floor opens the path with the supervisor's own credentials, in the supervisor's root, under no \
         policy. cordon opens it as the caller would and only then decides: it reads the caller's credentials \
         (a pread(2) of its /proc/<tid>/status, kept open between calls; the kernel formats the whole file, \
         about 6 µs here), takes on the caller's capabilities (capset(2), and setfsuid/setfsgid/setgroups \
         when they differ), looks the path up in the caller's root with openat2(RESOLVE_IN_ROOT) as O_PATH, \
         names what it found for the path rules (readlink(2) of /proc/self/fd/N), checks its type (fstat: a \
         FIFO or a device must not be opened before the decision), reopens it for the access asked through \
         /proc/self/fd/N, switches back and records the decision: 12 syscalls to the floor's 3. Dropping one \
         either decides on memory the container can still change (CONTINUE after reading the path) or opens \
         with the supervisor's own credentials",
        ),
    );

    let mut md = String::new();
    md.push_str(&format!(
        "A static loop (bench/probe/loop.c) calls one syscall K times inside a busybox container and prints \
         ns/call (CLOCK_MONOTONIC via the vDSO, K/10 warm-up calls first); one container per configuration \
         runs all its loops; configurations are interleaved, {reps} repetitions, medians shown. The floor is \
         bench/probe/floor.c on the host: a child with a one-rule notify filter, a parent answering in a tight \
         RECV/SEND loop (CONTINUE), or reading the path and answering with ADDFD+SEND (the least an emulated \
         open can do); \"sync wake-up\" sets SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP as cordon does. Ratios to the \
         floor use the faster floor variant.\n\n"
    ));
    let rows: Vec<Vec<String>> = cases
        .values()
        .map(|c| {
            let round_trip = (c.test == "getppid" && !c.config.starts_with("floor"))
                || (c.test == "uname" && c.config.starts_with("cordon"));
            let vs = if round_trip {
                stats::ratio(Some(c.summary.median), floor_cont)
            } else if c.test.starts_with("open") && !c.config.starts_with("floor") {
                stats::ratio(Some(c.summary.median), floor_addfd)
            } else {
                None
            };
            vec![
                c.config.clone(),
                c.test.clone(),
                c.what.clone(),
                c.calls.to_string(),
                num(Some(c.summary.median), 1),
                num(Some(c.summary.min), 1),
                num(Some(c.summary.max), 1),
                num(vs, 2),
                match &c.expected {
                    Some(e) if e != &c.ret => format!("**{}** (expected {e})", c.ret),
                    _ => c.ret.clone(),
                },
            ]
        })
        .collect();
    md.push_str(&table(
        &[
            "configuration",
            "syscall",
            "what happens",
            "calls",
            "median ns/call",
            "min",
            "max",
            "× floor",
            "result",
        ],
        &rows,
    ));
    md.push_str(&format!(
        "\nFloor: CONTINUE {} ns, ADDFD {} ns. Unintercepted getppid: cordon {} ns, cordon-permissive {} ns, \
         runc with a 1-rule filter {} ns, runc {} ns, host {} ns: any seccomp filter puts every syscall on \
         the kernel's slower entry path, whatever the filter says (cordon / runc-with-a-filter = {}).\n\n\
         The floors are what this kernel on this machine can do; on a VM they move with the cost of waking \
         an idle vCPU (an ADDFD answer needs two wake-ups: the caller to install the fd, then the \
         supervisor), so compare ratios taken in the same run.\n",
        num(floor_cont, 0),
        num(floor_addfd, 0),
        num(cordon_getppid, 1),
        num(get("cordon-permissive", "getppid"), 1),
        num(get("runc (1-rule filter)", "getppid"), 1),
        num(runc_getppid, 1),
        num(get("host (no container)", "getppid"), 1),
        num(stats::ratio(cordon_getppid, get("runc (1-rule filter)", "getppid")), 3),
    ));

    let bars: Vec<Bar> = cases
        .values()
        .map(|c| Bar {
            label: format!("{} · {}", c.config, c.test),
            value: c.summary.median,
            color: charts::color_of(c.config.split_whitespace().next().unwrap_or("")),
            note: format!("{:.0} ns", c.summary.median),
        })
        .collect();
    let markers: Vec<Marker> = floor_cont
        .map(|f| Marker {
            at: f,
            label: format!("CONTINUE floor {f:.0} ns"),
        })
        .into_iter()
        .collect();
    let chart = "syscalls.png";
    match charts::hbars(
        &out.join(chart),
        "Syscall cost (median ns per call, log scale)",
        "nanoseconds per call",
        &bars,
        true,
        &markers,
    ) {
        Ok(()) => so.charts.push(chart.into()),
        Err(e) => so.problems.push(format!("chart {chart}: {e}")),
    }
    so.markdown = md;
    let cases: Vec<&Case> = cases.values().collect();
    so.data = json!({ "repetitions": reps, "scale_divisor": scale, "cases": cases,
        "floor_continue_ns": floor_cont, "floor_addfd_ns": floor_addfd });
    Ok(so)
}
