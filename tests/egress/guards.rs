//! What the resolver refuses beyond the verdict on the queried name:
//! internal addresses on names, wildcard budgets, CNAME chains through a
//! wildcard.

use super::*;

/// Looks each name up (AF_INET) and prints `NAME ADDRESS` or `NAME
/// gaierror N`.
const LOOKUPS: &str = r#"
import socket, sys
for name in sys.argv[1:]:
    try:
        print(name, socket.getaddrinfo(name, 80, socket.AF_INET)[0][4][0])
    except socket.gaierror as e:
        print(name, "gaierror", e.errno)
"#;

fn lookups(net: &TestNet, rules: &str, names: &[&str]) -> (String, Vec<serde_json::Value>) {
    let mut args = vec!["python3", "-c", LOOKUPS];
    args.extend_from_slice(names);
    let mut env = Env::python(&args);
    net.configure(&mut env, rules);
    let id = unique("guards");
    let out = env.run_keep(&id);
    (ok(&out), env.audit(&id))
}

/// A name answered with the metadata service's, a private or a loopback
/// address gets NXDOMAIN, whatever the order of the rules (here the host
/// rules come before the default's link-local deny), unless a cidr rule
/// allows the address; the trail says why.
#[test]
fn internal_addresses_never_ride_on_names() {
    let net = TestNet::new();
    let rules = "[[net]]\nhost = \"meta.test\"\naction = \"allow\"\n\
                 [[net]]\nhost = \"private.test\"\naction = \"allow\"\n\
                 [[net]]\nhost = \"loop.test\"\naction = \"allow\"\n\
                 [[net]]\nhost = \"allowed.test\"\naction = \"allow\"\n";
    let (text, trail) = lookups(&net, rules, &["meta.test", "private.test", "loop.test", "allowed.test"]);
    assert_eq!(
        text,
        "meta.test gaierror -2\nprivate.test gaierror -2\nloop.test gaierror -2\nallowed.test 192.0.2.1\n"
    );
    let why = trail
        .iter()
        .find(|r| r["syscall"] == "dns" && r["detail"] == "meta.test A")
        .expect("the refused lookup is recorded");
    assert_eq!(why["action"], "deny");
    assert_eq!(
        why["result"],
        "NXDOMAIN (answer 169.254.169.254 is internal: only a cidr rule can allow it)"
    );

    let with_cidr = format!("{rules}[[net]]\ncidr = \"10.1.2.0/24\"\naction = \"allow\"\n");
    let (text, _) = lookups(&net, &with_cidr, &["private.test", "meta.test"]);
    assert_eq!(
        text, "private.test 10.1.2.3\nmeta.test gaierror -2\n",
        "a cidr rule allows its range only"
    );
}

/// A wildcard rule forwards at most `max_names` distinct names a minute:
/// the next new name gets NXDOMAIN without reaching the nameserver, a
/// name already forwarded still resolves. A CNAME from a name under the
/// wildcard to one no rule allows is refused; an exact rule's chain
/// (alias.test to edge.cdn.test) is its owner's and resolves.
#[test]
fn wildcards_forward_a_bounded_number_of_names() {
    let net = TestNet::new();
    let rules = "[[net]]\nhost = \"*.wild.test\"\nmax_names = 3\naction = \"allow\"\n\
                 [[net]]\nhost = \"alias.test\"\naction = \"allow\"\n";
    let names = [
        "a.wild.test",
        "b.wild.test",
        "hop.wild.test",
        "d.wild.test",
        "a.wild.test",
        "alias.test",
    ];
    let (text, trail) = lookups(&net, rules, &names);
    assert_eq!(
        text,
        "a.wild.test 192.0.2.1\nb.wild.test 192.0.2.1\nhop.wild.test gaierror -2\nd.wild.test gaierror -2\n\
         a.wild.test 192.0.2.1\nalias.test 192.0.2.1\n"
    );
    assert_eq!(
        net.asked("d.wild.test"),
        0,
        "past the budget a name never reaches the nameserver"
    );
    assert!(net.asked("hop.wild.test") > 0);
    let result = |detail: &str| {
        trail
            .iter()
            .find(|r| r["syscall"] == "dns" && r["detail"] == detail)
            .map(|r| r["result"].as_str().unwrap_or("").to_string())
    };
    assert_eq!(
        result("hop.wild.test A").as_deref(),
        Some("NXDOMAIN (CNAME other.test)")
    );
    assert_eq!(
        result("d.wild.test A").as_deref(),
        Some("NXDOMAIN (net[0] *.wild.test: max_names 3 new names a minute)")
    );
}

/// `policy check` warns about a host rule placed before a cidr rule that
/// denies an internal range (agent's link-local deny, here through
/// `extends`), and still accepts the file.
#[test]
fn policy_check_warns_about_host_rules_before_an_internal_deny() {
    let dir = TempDir::new("order");
    let file = dir.path().join("p.toml");
    std::fs::write(
        &file,
        "name = \"p\"\nextends = \"agent\"\n[[net]]\nhost = \"meta.test\"\naction = \"allow\"\n",
    )
    .unwrap();
    let out = Command::new(cordon_bin())
        .args(["policy", "check", &file.to_string_lossy()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning") && err.contains("net[0] meta.test comes before net[1] 169.254.0.0/16 deny"),
        "{err}"
    );
}
