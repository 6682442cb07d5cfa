//! Egress by name (`[[net]] host = ...`): the supervisor's resolver and
//! the connects decided on the names it answered.
//!
//! Each test builds its own network, and nothing leaves the machine: a
//! network namespace for the container and one for the servers, joined by
//! a veth pair; in the servers' namespace a small DNS server (192.0.2.1:53)
//! and two HTTP servers (192.0.2.1:8080 "server-a", 192.0.2.3:8080
//! "server-b"), all written here, started by the test and stopped with it.
//! The container's own resolv.conf (a bind mount, as engines give one)
//! names the test's DNS server; cordon must forward to it.
//!
//! Runs on both platforms (`CORDON_TEST_PLATFORM=ptrace`).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use cordon_tests::*;

mod ask;
mod guards;
mod live;
mod wire;

/// The two network namespaces, the servers, and what the DNS server was
/// asked. Dropping it stops the servers and removes the namespaces.
struct TestNet {
    container_ns: String,
    server_ns: String,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Queries the DNS server received, by name.
    asked: Arc<Mutex<BTreeMap<String, usize>>>,
    dir: TempDir,
}

/// The DNS server's zone: A records (with an optional CNAME first), by
/// name; `slow.test` is never answered. Every name under `wild.test`
/// answers 192.0.2.1, but `hop.wild.test`, a CNAME to `other.test`.
fn zone(name: &str) -> Option<(Option<&'static str>, [u8; 4])> {
    match name {
        "allowed.test" => Some((None, [192, 0, 2, 1])),
        "denied.test" => Some((None, [192, 0, 2, 3])),
        "cname.test" => Some((Some("denied.test"), [192, 0, 2, 3])),
        "alias.test" => Some((Some("edge.cdn.test"), [192, 0, 2, 1])),
        "meta.test" => Some((None, [169, 254, 169, 254])),
        // No host answers at this address: a connect fails (EHOSTUNREACH)
        // after the neighbour lookup gives up, seconds later.
        "dead.test" => Some((None, [192, 0, 2, 9])),
        "private.test" => Some((None, [10, 1, 2, 3])),
        "loop.test" => Some((None, [127, 0, 0, 1])),
        "hop.wild.test" => Some((Some("other.test"), [192, 0, 2, 3])),
        n if n.ends_with(".wild.test") => Some((None, [192, 0, 2, 1])),
        _ => None,
    }
}

fn encode_name(name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for l in name.split('.').filter(|l| !l.is_empty()) {
        out.push(l.len() as u8);
        out.extend_from_slice(l.as_bytes());
    }
    out.push(0);
    out
}

/// Answers one query (RFC 1035 section 4.1): `None` to stay silent.
fn dns_answer(q: &[u8], asked: &Mutex<BTreeMap<String, usize>>) -> Option<Vec<u8>> {
    if q.len() < 17 {
        return None;
    }
    let mut at = 12;
    let mut labels = Vec::new();
    while q[at] != 0 {
        let n = q[at] as usize;
        labels.push(String::from_utf8_lossy(&q[at + 1..at + 1 + n]).to_lowercase());
        at += 1 + n;
    }
    let name = labels.join(".");
    let qtype = u16::from_be_bytes([q[at + 1], q[at + 2]]);
    let question_end = at + 5;
    *asked.lock().unwrap().entry(name.clone()).or_default() += 1;
    if name == "slow.test" {
        return None;
    }
    let mut out = q[..question_end].to_vec();
    out[2] = 0x84 | (q[2] & 1);
    out[3] = 0x80;
    out[6..12].copy_from_slice(&[0; 6]);
    let Some((cname, addr)) = zone(&name) else {
        out[3] |= 3;
        return Some(out);
    };
    if qtype != 1 {
        return Some(out);
    }
    let mut count = 0u16;
    let mut owner = vec![0xc0, 12];
    if let Some(c) = cname {
        out.extend_from_slice(&owner);
        out.extend_from_slice(&[0, 5, 0, 1, 0, 0, 1, 44]);
        let target = encode_name(c);
        owner = vec![0xc0 | ((out.len() + 2) >> 8) as u8, (out.len() + 2) as u8];
        out.extend_from_slice(&(target.len() as u16).to_be_bytes());
        out.extend_from_slice(&target);
        count += 1;
    }
    out.extend_from_slice(&owner);
    out.extend_from_slice(&[0, 1, 0, 1, 0, 0, 1, 44, 0, 4]);
    out.extend_from_slice(&addr);
    count += 1;
    out[6..8].copy_from_slice(&count.to_be_bytes());
    Some(out)
}

impl TestNet {
    fn new() -> Self {
        let tag = unique("eg");
        let (c, s) = (format!("{tag}-c"), format!("{tag}-s"));
        ip(&["netns", "add", &c]);
        ip(&["netns", "add", &s]);
        ip(&[
            "link", "add", "eth0", "netns", &c, "type", "veth", "peer", "name", "veth0", "netns", &s,
        ]);
        ip(&["-n", &c, "addr", "add", "192.0.2.2/24", "dev", "eth0"]);
        ip(&["-n", &c, "link", "set", "eth0", "up"]);
        ip(&["-n", &c, "link", "set", "lo", "up"]);
        ip(&["-n", &s, "addr", "add", "192.0.2.1/24", "dev", "veth0"]);
        ip(&["-n", &s, "addr", "add", "192.0.2.3/24", "dev", "veth0"]);
        ip(&["-n", &s, "link", "set", "veth0", "up"]);
        ip(&["-n", &s, "link", "set", "lo", "up"]);
        let (dns, a, b) = in_netns(&s, || {
            (
                UdpSocket::bind("192.0.2.1:53").unwrap(),
                TcpListener::bind("192.0.2.1:8080").unwrap(),
                TcpListener::bind("192.0.2.3:8080").unwrap(),
            )
        });
        let stop = Arc::new(AtomicBool::new(false));
        let asked = Arc::new(Mutex::new(BTreeMap::new()));
        let mut threads = Vec::new();
        {
            let (stop, asked) = (Arc::clone(&stop), Arc::clone(&asked));
            dns.set_read_timeout(Some(std::time::Duration::from_millis(50)))
                .unwrap();
            threads.push(std::thread::spawn(move || {
                let mut buf = [0u8; 1500];
                while !stop.load(Ordering::SeqCst) {
                    if let Ok((n, from)) = dns.recv_from(&mut buf) {
                        if let Some(a) = dns_answer(&buf[..n], &asked) {
                            let _ = dns.send_to(&a, from);
                        }
                    }
                }
            }));
        }
        for (l, body) in [(a, "server-a"), (b, "server-b")] {
            let stop = Arc::clone(&stop);
            l.set_nonblocking(true).unwrap();
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match l.accept() {
                        Ok((mut c, _)) => {
                            c.set_nonblocking(false).unwrap();
                            c.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
                            let mut req = [0u8; 2048];
                            let _ = c.read(&mut req);
                            let _ = write!(
                                c,
                                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                                body.len()
                            );
                        }
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                    }
                }
            }));
        }
        let dir = TempDir::new("egress");
        std::fs::write(
            dir.path().join("resolv.conf"),
            "nameserver 192.0.2.1\noptions timeout:5 attempts:1\n",
        )
        .unwrap();
        TestNet {
            container_ns: c,
            server_ns: s,
            stop,
            threads,
            asked,
            dir,
        }
    }

    /// How often the DNS server was asked for `name`.
    fn asked(&self, name: &str) -> usize {
        self.asked.lock().unwrap().get(name).copied().unwrap_or(0)
    }

    /// Puts `env`'s container in the container namespace with the test's
    /// resolv.conf, under a policy of `rules` (TOML after the header) with
    /// `net_default = "deny"`.
    fn configure(&self, env: &mut Env, rules: &str) {
        self.configure_with(env, "deny", rules)
    }

    /// [`Self::configure`] with `net_default` as given.
    fn configure_with(&self, env: &mut Env, net_default: &str, rules: &str) {
        let policy = self.dir.path().join("policy.toml");
        std::fs::write(
            &policy,
            format!("name = \"egress\"\nextends = \"default\"\nnet_default = \"{net_default}\"\n{rules}"),
        )
        .unwrap();
        env.set_policy(&policy.to_string_lossy());
        let ns = env.config["linux"]["namespaces"].as_array_mut().unwrap();
        ns.retain(|n| n["type"] != "network");
        ns.push(serde_json::json!({"type": "network", "path": format!("/var/run/netns/{}", self.container_ns)}));
        env.config["mounts"].as_array_mut().unwrap().push(serde_json::json!({
            "destination": "/etc/resolv.conf",
            "type": "bind",
            "source": self.dir.path().join("resolv.conf"),
            "options": ["rbind", "ro"]
        }));
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.container_ns]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.server_ns]).status();
    }
}

const RULES: &str = r#"
[[net]]
host = "allowed.test"
action = "allow"

[[net]]
host = "alias.test"
action = "allow"

[[net]]
host = "cname.test"
action = "allow"

[[net]]
host = "slow.test"
action = "allow"

[[net]]
host = "denied.test"
action = "deny"

[dns]
timeout_ms = 400
"#;

/// The container's side, in Python (glibc's resolver): one `key value`
/// line per step.
const SCRIPT: &str = r#"
import errno, socket, struct, urllib.request

def connect(ip, port=8080):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((ip, port))
        return "ok"
    except OSError as e:
        return "err " + errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()

def lookup(name):
    try:
        return " ".join(sorted({a[4][0] for a in socket.getaddrinfo(name, 8080, socket.AF_INET, socket.SOCK_STREAM)}))
    except socket.gaierror as e:
        return "gaierror " + str(e.errno)

def get(url):
    try:
        return urllib.request.urlopen(url, timeout=5).read().decode()
    except Exception as e:
        return "error " + type(e).__name__ + " " + repr(getattr(e, "reason", e))

def rcode(server, name):
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(20)
    try:
        s.connect((server, 53))
        s.send(q)
        r = s.recv(512)
        return "rcode %d" % (r[3] & 15)
    except OSError as e:
        return "err " + (errno.errorcode.get(e.errno, "timeout") if e.errno else "timeout")

def tcp_query(name):
    q = struct.pack(">HHHHHH", 0x4321, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    s = socket.create_connection(("127.0.0.53", 53), timeout=20)
    try:
        s.sendall(struct.pack(">H", len(q)) + q)
        n = struct.unpack(">H", s.recv(2))[0]
        r = b""
        while len(r) < n:
            r += s.recv(n - len(r))
        return "rcode %d answers %d" % (r[3] & 15, struct.unpack(">H", r[6:8])[0])
    finally:
        s.close()

print("literal-before", connect("192.0.2.1"))
print("lookup-allowed", lookup("allowed.test"))
print("literal-after", connect("192.0.2.1"))
print("get-allowed", get("http://allowed.test:8080/"))
print("lookup-denied", lookup("denied.test"))
print("literal-denied", connect("192.0.2.3"))
print("lookup-unlisted", lookup("other.test"))
print("lookup-cname-denied", lookup("cname.test"))
print("get-alias", get("http://alias.test:8080/"))
print("dns-elsewhere", rcode("192.0.2.1", "allowed.test"))
print("dot-elsewhere", connect("192.0.2.1", 853))
print("servfail", rcode("127.0.0.53", "slow.test"))
print("tcp-allowed", tcp_query("allowed.test"))
print("tcp-denied", tcp_query("denied.test"))
"#;

#[test]
fn names_allow_deny_cname_and_literals() {
    let net = TestNet::new();
    let mut env = Env::python(&["python3", "-c", SCRIPT]);
    net.configure(&mut env, RULES);
    let id = unique("egress");
    let out = env.run_keep(&id);
    let text = ok(&out);
    let got: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once(' ')).collect();
    let want = [
        ("literal-before", "err EPERM"),
        ("lookup-allowed", "192.0.2.1"),
        ("literal-after", "ok"),
        ("get-allowed", "server-a"),
        // EAI_NONAME: NXDOMAIN.
        ("lookup-denied", "gaierror -2"),
        ("literal-denied", "err EPERM"),
        ("lookup-unlisted", "gaierror -2"),
        ("lookup-cname-denied", "gaierror -2"),
        ("get-alias", "server-a"),
        ("dns-elsewhere", "err EPERM"),
        ("dot-elsewhere", "err EPERM"),
        ("servfail", "rcode 2"),
        ("tcp-allowed", "rcode 0 answers 1"),
        ("tcp-denied", "rcode 3 answers 0"),
    ];
    for (k, v) in want {
        assert_eq!(got.get(k).copied(), Some(v), "{k}; all output:\n{text}");
    }
    assert_eq!(
        net.asked("denied.test"),
        0,
        "a denied name never reaches the nameserver"
    );
    assert_eq!(net.asked("other.test"), 0, "nor does a name no rule allows");
    assert!(net.asked("cname.test") > 0, "an allowed name does");
    let audit = env.audit(&id);
    let connect = audit
        .iter()
        .find(|r| r["syscall"] == "connect" && r["detail"] == "allowed.test (192.0.2.1):8080")
        .unwrap_or_else(|| panic!("the connect by name is recorded with its name: {audit:#?}"));
    assert_eq!(connect["action"], "allow");
    assert_eq!(connect["rule"], "net[0] allowed.test");
    let refused = audit
        .iter()
        .find(|r| r["syscall"] == "dns" && r["detail"] == "cname.test A")
        .expect("the lookup through a denied CNAME is recorded");
    assert_eq!(refused["action"], "deny");
    assert_eq!(refused["result"], "NXDOMAIN (CNAME denied.test)");
    assert_eq!(refused["rule"], "net[4] denied.test");
    let stats = ok(&env.cordon(&["audit", "--stats", &id]));
    assert!(
        stats
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()[..3] == ["connect", "allow", "allowed.test"]),
        "--stats groups by name:\n{stats}"
    );
}

/// Under `net_default = "allow"` only the names a rule denies are refused;
/// other names resolve, and addresses no rule names stay reachable.
#[test]
fn default_allow_refuses_only_denied_names() {
    let net = TestNet::new();
    let script = r#"
import errno, socket
def lookup(name):
    try:
        return socket.getaddrinfo(name, 80, socket.AF_INET)[0][4][0]
    except socket.gaierror as e:
        return "gaierror " + str(e.errno)
def connect(ip):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((ip, 8080))
        return "ok"
    except OSError as e:
        return "err " + errno.errorcode.get(e.errno, str(e.errno))
print("unlisted", lookup("allowed.test"))
print("denied", lookup("denied.test"))
print("literal", connect("192.0.2.3"))
"#;
    let mut env = Env::python(&["python3", "-c", script]);
    net.configure_with(
        &mut env,
        "allow",
        "[[net]]\nhost = \"denied.test\"\naction = \"deny\"\n",
    );
    let out = env.run(&unique("egress-allow"));
    let text = ok(&out);
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        ["unlisted 192.0.2.1", "denied gaierror -2", "literal ok"],
        "{text}"
    );
    assert_eq!(net.asked("denied.test"), 0);
}

/// busybox: its own resolver in nslookup (musl-style: one query, the reply
/// must come from the address asked) and wget.
#[test]
fn busybox_nslookup_and_wget() {
    let net = TestNet::new();
    let mut env = Env::busybox(&[
        "sh",
        "-c",
        "nslookup allowed.test >/dev/null 2>&1; echo nslookup-allowed $?; \
         nslookup denied.test >/dev/null 2>&1; echo nslookup-denied $?; \
         echo wget-allowed $(wget -q -O- http://allowed.test:8080/ 2>&1); \
         wget -q -O- http://denied.test:8080/ >/dev/null 2>&1; echo wget-denied $?",
    ]);
    net.configure(&mut env, RULES);
    let out = env.run(&unique("egress-bb"));
    let text = ok(&out);
    let got: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once(' ')).collect();
    assert_eq!(got.get("nslookup-allowed"), Some(&"0"), "{text}");
    assert_ne!(got.get("nslookup-denied"), Some(&"0"), "{text}");
    assert_eq!(got.get("wget-allowed"), Some(&"server-a"), "{text}");
    assert_ne!(got.get("wget-denied"), Some(&"0"), "{text}");
}

/// Node (dns.lookup and http.get: glibc's getaddrinfo on libuv's thread
/// pool) and curl (glibc, or its own threaded resolver), the host's, run
/// in the python bundle: an allowed name resolves and its server answers,
/// a denied one does not resolve.
#[test]
fn node_and_curl_by_name() {
    let net = TestNet::new();
    let node = r#"
const dns = require("dns"), http = require("http");
const get = (host) => new Promise((ok) => {
  http.get({host, port: 8080, path: "/"}, (r) => { let b = ""; r.on("data", (d) => b += d); r.on("end", () => ok(b)); })
    .on("error", (e) => ok("error " + e.code));
});
(async () => {
  const look = (n) => new Promise((ok) => dns.lookup(n, {family: 4}, (e, a) => ok(e ? "error " + e.code : a)));
  console.log("node-lookup-allowed", await look("allowed.test"));
  console.log("node-lookup-denied", await look("denied.test"));
  console.log("node-get-allowed", await get("allowed.test"));
  console.log("node-get-denied", await get("denied.test"));
})();
"#;
    let script = format!(
        "export LD_LIBRARY_PATH=/opt/lib; /opt/bin/node -e '{node}'; \
         echo curl-allowed $(/opt/bin/curl -s http://allowed.test:8080/); \
         /opt/bin/curl -s http://denied.test:8080/ >/dev/null; echo curl-denied $?"
    );
    let mut env = Env::python(&["sh", "-c", &script]);
    env.with_host_programs(&["node", "curl"]);
    net.configure(&mut env, RULES);
    let out = env.run(&unique("egress-node"));
    let text = ok(&out);
    let got: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once(' ')).collect();
    let want = [
        ("node-lookup-allowed", "192.0.2.1"),
        ("node-lookup-denied", "error ENOTFOUND"),
        ("node-get-allowed", "server-a"),
        ("node-get-denied", "error ENOTFOUND"),
        ("curl-allowed", "server-a"),
        // CURLE_COULDNT_RESOLVE_HOST.
        ("curl-denied", "6"),
    ];
    for (k, v) in want {
        assert_eq!(
            got.get(k).copied(),
            Some(v),
            "{k}; all output:\n{text}\n{}",
            stderr(&out)
        );
    }
    assert_eq!(net.asked("denied.test"), 0);
}

/// A Kubernetes pod: its sandbox ("pause") container, marked by CRI's
/// annotation, and its container share one network namespace, both under
/// a policy with host rules. The sandbox gets no resolver, so the
/// container gets one and its lookups are answered.
#[test]
fn a_pod_sandbox_leaves_the_resolver_to_its_container() {
    let net = TestNet::new();
    let mut pause = Env::busybox(&["sleep", "600"]);
    net.configure(&mut pause, RULES);
    pause.annotate("io.kubernetes.cri.container-type", "sandbox");
    let sandbox = unique("egress-pause");
    ok(&pause.create(&sandbox));
    ok(&pause.cordon(&["start", &sandbox]));
    let mut app = Env::python(&[
        "python3",
        "-c",
        "import socket; print(socket.getaddrinfo('allowed.test', 80, socket.AF_INET)[0][4][0])",
    ]);
    net.configure(&mut app, RULES);
    let out = app.run(&unique("egress-app"));
    assert_eq!(ok(&out).trim(), "192.0.2.1", "{}", stderr(&out));
    ok(&pause.cordon(&["delete", "--force", &sandbox]));
}

/// A flood of queries: the supervisor keeps a fixed number of threads and
/// bounded memory, and answers again once it passes.
#[test]
fn query_flood_is_bounded() {
    let net = TestNet::new();
    let flood = r#"
import os, socket, struct, time
def q(i, name):
    return struct.pack(">HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("127.0.0.53", 53))
s.setblocking(False)
for i in range(20000):
    try:
        s.send(q(i, "allowed.test" if i % 2 else "n%d.flood.test" % i))
    except OSError:
        pass
for attempt in range(30):
    try:
        socket.getaddrinfo("allowed.test", 80, socket.AF_INET)
        os.execvp("sleep", ["sleep", "600"])
    except socket.gaierror:
        time.sleep(1)
"#;
    let mut env = Env::python(&["python3", "-c", flood]);
    net.configure(&mut env, RULES);
    let id = unique("egress-flood");
    ok(&env.create(&id));
    ok(&env.cordon(&["start", &id]));
    let sup = env.supervisor_pid(&id);
    let threads_before = thread_names(sup).iter().filter(|n| *n == "dns").count();
    assert_eq!(threads_before, 4, "{:?}", thread_names(sup));
    let state = env.state(&id);
    let pid = state["pid"].as_i64().unwrap() as i32;
    // The init execs sleep once a lookup after the flood succeeded.
    wait_until(
        "a lookup after the flood",
        std::time::Duration::from_secs(120),
        || match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
            Ok(c) if c.trim() == "sleep" => Ok(()),
            Ok(c) => Err(format!("init runs {}", c.trim())),
            Err(e) => panic!("the container's init exited: {e}"),
        },
    );
    let dns_threads = thread_names(sup).iter().filter(|n| *n == "dns").count();
    assert_eq!(dns_threads, 4, "no thread per query");
    let rss_kb = proc_status(sup, "VmRSS").unwrap();
    assert!(rss_kb < 64 * 1024, "supervisor RSS {rss_kb} kB after the flood");
    let audit = env.audit(&id);
    assert!(
        audit
            .iter()
            .any(|r| r["syscall"] == "dns" && r["detail"] == "allowed.test A" && r["action"] == "allow"),
        "the lookups were answered"
    );
    let _ = env.cordon(&["delete", "--force", &id]);
    let _ = net;
}

/// A container with a network namespace of its own and nothing in it but
/// `lo`: its nameserver cannot be reached, and an allowed name fails at
/// once (EAI_AGAIN, from SERVFAIL) instead of hanging.
#[test]
fn a_container_without_network_gets_servfail() {
    let dir = TempDir::new("egress-nonet");
    let policy = dir.path().join("p.toml");
    std::fs::write(&policy, format!("name = \"egress\"\nnet_default = \"deny\"\n{RULES}")).unwrap();
    let mut env = Env::python(&[
        "python3",
        "-c",
        "import socket\ntry:\n    socket.getaddrinfo('allowed.test', 80, socket.AF_INET)\n    print('resolved')\nexcept socket.gaierror as e:\n    print('gaierror', e.errno)\nprint(open('/etc/resolv.conf').read())",
    ]);
    env.set_policy(&policy.to_string_lossy());
    let id = unique("egress-nonet");
    let out = env.run_keep(&id);
    let text = ok(&out);
    assert!(text.starts_with("gaierror -3\n"), "{text}");
    assert!(
        text.contains("\nnameserver 127.0.0.53\n") && !text.contains("single-request"),
        "the container's resolv.conf is cordon's: {text}"
    );
    let audit = env.audit(&id);
    assert!(
        audit
            .iter()
            .any(|r| r["syscall"] == "dns" && r["result"] == "SERVFAIL (no nameserver)"),
        "{audit:#?}"
    );
}

#[test]
fn host_rules_need_a_network_namespace() {
    let net = TestNet::new();
    let mut env = Env::busybox(&["true"]);
    net.configure(&mut env, RULES);
    env.config["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .retain(|n| n["type"] != "network");
    let out = env.run(&unique("egress-hostnet"));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("net[0].host") && err.contains("network namespace of its own"),
        "{err}"
    );
}

/// CAP_NET_ADMIN in its own network namespace would let the container
/// send the resolver's queries to a nameserver of its own: refused, at
/// create and at exec.
#[test]
fn host_rules_refuse_cap_net_admin() {
    let net = TestNet::new();
    let mut env = Env::busybox(&["sleep", "60"]);
    net.configure(&mut env, RULES);
    let caps = env.config["process"]["capabilities"]["bounding"]
        .as_array_mut()
        .unwrap();
    caps.push("CAP_NET_ADMIN".into());
    let out = env.create(&unique("egress-netadmin"));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("net[0].host") && err.contains("CAP_NET_ADMIN"), "{err}");

    let mut env = Env::busybox(&["sleep", "60"]);
    net.configure(&mut env, RULES);
    let id = unique("egress-exec");
    ok(&env.create(&id));
    ok(&env.cordon(&["start", &id]));
    let out = env.cordon(&["exec", "--cap", "CAP_NET_ADMIN", &id, "true"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("CAP_NET_ADMIN"), "{}", stderr(&out));
    ok(&env.cordon(&["exec", &id, "true"]));
}

#[test]
fn malformed_names_are_refused_by_policy_check() {
    let dir = TempDir::new("egress-check");
    for (host, why) in [
        ("a..example.com", "empty label"),
        ("*.com", "wildcard"),
        ("xn--99.de", "A-label"),
        ("bü cher.de", "internationalized"),
        ("-x.example.com", "starts or ends"),
    ] {
        let p = dir.path().join("p.toml");
        std::fs::write(
            &p,
            format!("name = \"x\"\n[[net]]\nhost = \"{host}\"\naction = \"allow\"\n"),
        )
        .unwrap();
        let out = run_captured(Command::new(cordon_bin()).args(["policy", "check", &p.to_string_lossy()]));
        assert!(!out.status.success(), "{host} accepted");
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains("net[0].host") && err.contains(why), "{host}: {err}");
    }
    let p = dir.path().join("ok.toml");
    std::fs::write(
        &p,
        "name = \"x\"\n[[net]]\nhost = \"*.githubusercontent.com\"\nports = [443]\naction = \"allow\"\n\n\
         [[net]]\nhost = \"bücher.de\"\naction = \"allow\"\n",
    )
    .unwrap();
    let out = run_captured(Command::new(cordon_bin()).args(["policy", "check", &p.to_string_lossy()]));
    assert!(out.status.success(), "{}", stderr(&out));
}
