//! Names checked on the wire: a connection a host rule allowed to a TLS
//! port must open with a ClientHello naming an allowed server, and every
//! request on an HTTP port must name an allowed `Host`, else it is reset
//! and the trail names what was asked for.

use super::*;

/// Servers of their own in the test's servers namespace: on
/// 192.0.2.1:80 an HTTP/1.1 server that answers every request of a
/// keep-alive connection with `host=<its Host header>`, on 192.0.2.1:443
/// one that reads what comes and answers `tls got N` (N bytes read).
struct WireServers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The Host of every request the HTTP server answered.
    served: Arc<Mutex<Vec<String>>>,
}

impl WireServers {
    fn start(net: &TestNet) -> Self {
        let (http, tls) = in_netns(&net.server_ns, || {
            (
                TcpListener::bind("192.0.2.1:80").unwrap(),
                TcpListener::bind("192.0.2.1:443").unwrap(),
            )
        });
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for (l, tls) in [(http, false), (tls, true)] {
            let stop = Arc::clone(&stop);
            let served = Arc::clone(&served);
            l.set_nonblocking(true).unwrap();
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match l.accept() {
                        Ok((c, _)) => {
                            c.set_nonblocking(false).unwrap();
                            c.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
                            let served = Arc::clone(&served);
                            std::thread::spawn(move || if tls { answer_tls(c) } else { answer_http(c, &served) });
                        }
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                    }
                }
            }));
        }
        Self { stop, threads, served }
    }
}

impl Drop for WireServers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn answer_tls(mut c: std::net::TcpStream) {
    let mut buf = [0u8; 4096];
    let n = c.read(&mut buf).unwrap_or(0);
    let _ = write!(c, "tls got {n}");
}

/// Answers each request of a connection, reading heads only (as a lenient
/// server would: a line that is not a header is skipped), and records its
/// Host.
fn answer_http(c: std::net::TcpStream, served: &Mutex<Vec<String>>) {
    use std::io::BufRead;
    let mut r = std::io::BufReader::new(&c);
    let mut w = &c;
    loop {
        let mut host = String::new();
        let mut line = String::new();
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some(h) = line.strip_prefix("Host: ") {
                host = h.trim().to_string();
            }
        }
        served.lock().unwrap().push(host.clone());
        let body = format!("host={host}");
        if write!(w, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).is_err() {
            return;
        }
    }
}

/// Python: `response(s)`, the body of the next HTTP/1.1 response on
/// socket `s` (by its Content-Length); EOFError when the server closed.
const RESPONSE: &str = r#"
import socket

def response(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            raise EOFError()
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    n = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(body) < n:
        body += s.recv(4096)
    return body.decode()
"#;

/// The container's side: requests over one keep-alive connection to
/// allowed.test:80 with the given Host headers, and ClientHellos to
/// allowed.test:443 naming a server (or none).
const SCRIPT: &str = r#"
import socket, ssl, struct

def http(hosts):
    s = socket.create_connection(("allowed.test", 80), timeout=5)
    out = []
    try:
        for h in hosts:
            s.sendall(b"GET / HTTP/1.1\r\nHost: " + h.encode() + b"\r\n\r\n")
            out.append(response(s))
    except (OSError, EOFError) as e:
        out.append("err " + type(e).__name__)
    finally:
        s.close()
    return " ".join(out)

def hello(name):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, outg = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, outg, server_hostname=name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    data = outg.read()
    s = socket.create_connection(("allowed.test", 443), timeout=5)
    try:
        s.sendall(data)
        return s.recv(100).decode() or "eof"
    except OSError as e:
        return "err " + type(e).__name__
    finally:
        s.close()

def hello_ech():
    name = b"allowed.test"
    entry = b"\x00" + struct.pack(">H", len(name)) + name
    sni = struct.pack(">HHH", 0, len(entry) + 2, len(entry)) + entry
    exts = sni + struct.pack(">HH", 0xfe0d, 3) + b"\x00\x01\x02"
    body = b"\x03\x03" + b"\x07" * 32 + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
    body += struct.pack(">H", len(exts)) + exts
    msg = b"\x01" + struct.pack(">I", len(body))[1:] + body
    s = socket.create_connection(("allowed.test", 443), timeout=5)
    try:
        s.sendall(b"\x16\x03\x01" + struct.pack(">H", len(msg)) + msg)
        return s.recv(100).decode() or "eof"
    except OSError as e:
        return "err " + type(e).__name__
    finally:
        s.close()

s = socket.create_connection(("allowed.test", 80), timeout=5)
print("addresses", s.getpeername(), s.getsockname()[0])
s.close()
print("http-allowed", http(["allowed.test"]))
print("http-other", http(["other.test"]))
print("http-keepalive", http(["allowed.test", "Allowed.Test:80", "other.test"]))
print("tls-allowed", hello("allowed.test").startswith("tls got"))
print("tls-other", hello("other.test"))
print("tls-none", hello(None))
print("tls-encrypted", hello_ech())
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"quic", ("allowed.test", 443))
    print("quic", "sent")
except OSError as e:
    print("quic", "err", e.errno)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.connect(("allowed.test", 443))
try:
    u.sendmsg([b"quic"])
    print("quic-connected", "sent")
except OSError as e:
    print("quic-connected", "err", e.errno)
"#;

/// Under a host rule for allowed.test: another name sent to its address
/// on the wire is refused (reset), as is a ClientHello without a server
/// name; the allowed name passes, request after request; the trail
/// records the name asked for, and each name and request let through. An
/// encrypted ClientHello (ECH) is refused. The relayed socket shows the addresses of
/// a direct connection (getpeername, getsockname). With `sni = "optional"` the nameless
/// ClientHello passes, with `sni = "off"` every name does.
#[test]
fn the_name_on_the_wire_must_be_allowed() {
    let net = TestNet::new();
    let _servers = WireServers::start(&net);
    let run = |rules: &str| -> (String, Vec<serde_json::Value>, String) {
        let mut env = Env::python(&["python3", "-c", &format!("{RESPONSE}{SCRIPT}")]);
        net.configure(&mut env, rules);
        let id = unique("wire");
        let out = env.run_keep(&id);
        // The relayed connections' ends are recorded before the init's exit.
        let trail = env.audit_with(&id, "the init's exit", |r| r["result"] == "exit");
        let stats = ok(&env.cordon(&["audit", "--stats", &id]));
        (ok(&out), trail, stats)
    };
    let (text, trail, stats) = run("[[net]]\nhost = \"allowed.test\"\naction = \"allow\"\n");
    // Relayed connections by name, with their bytes: 4 on port 80, 4 on
    // 443 (the ECH one included).
    assert!(
        stats
            .lines()
            .any(|l| l.starts_with("allowed.test ") && l.split_whitespace().nth(1) == Some("8")),
        "audit --stats counts the relayed connections by name: {stats}"
    );
    assert_eq!(
        text,
        "addresses ('192.0.2.1', 80) 192.0.2.2\n\
         http-allowed host=allowed.test\n\
         http-other err ConnectionResetError\n\
         http-keepalive host=allowed.test host=Allowed.Test:80 err ConnectionResetError\n\
         tls-allowed True\n\
         tls-other err ConnectionResetError\n\
         tls-none err ConnectionResetError\n\
         tls-encrypted err ConnectionResetError\n\
         quic err 1\n\
         quic-connected err 1\n"
    );
    assert!(
        trail.iter().any(|r| {
            r["result"] == "closed"
                && r["detail"].as_str().is_some_and(|d| {
                    d.starts_with("allowed.test (192.0.2.1):443 closed: ") && d.contains(" bytes sent, ")
                })
        }),
        "each relayed connection's end is in the trail"
    );
    let refused: Vec<String> = trail
        .iter()
        .filter(|r| r["action"] == "deny" && r["syscall"] == "connect")
        .map(|r| r["detail"].as_str().unwrap_or_default().to_string())
        .collect();
    let passed: Vec<String> = trail
        .iter()
        .filter(|r| r["action"] == "allow" && r["result"] == "passed")
        .map(|r| r["detail"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        passed.contains(&"allowed.test (192.0.2.1):80 named allowed.test on the wire: GET /".to_string())
            && passed.contains(&"allowed.test (192.0.2.1):443 named allowed.test on the wire".to_string()),
        "each request and name let through is in the trail: {passed:?}"
    );
    for name in ["other.test", "no server name"] {
        assert!(
            refused
                .iter()
                .any(|d| d.starts_with("allowed.test (192.0.2.1)") && d.contains(&format!("named {name} on the wire"))),
            "no refusal of {name} in the trail: {refused:?}"
        );
    }

    let (text, _, _) = run("[[net]]\nhost = \"allowed.test\"\naction = \"allow\"\nsni = \"optional\"\n");
    assert!(text.contains("tls-none tls got"), "{text}");
    assert!(text.contains("tls-other err ConnectionResetError"), "{text}");

    let (text, _, _) = run("[[net]]\nhost = \"allowed.test\"\naction = \"allow\"\nsni = \"off\"\n");
    assert!(text.contains("http-other host=other.test\n"), "{text}");
    assert!(text.contains("tls-other tls got"), "{text}");
    assert!(text.contains("tls-encrypted tls got"), "{text}");
    assert!(text.contains("quic sent"), "{text}");
}

/// A second name allowed by a rule of its own may be asked for on the
/// first one's address (a CDN serving both).
#[test]
fn another_allowed_name_on_the_same_address_passes() {
    let net = TestNet::new();
    let _servers = WireServers::start(&net);
    let mut env = Env::python(&["python3", "-c", &format!("{RESPONSE}{SCRIPT}")]);
    net.configure(
        &mut env,
        "[[net]]\nhost = \"allowed.test\"\naction = \"allow\"\n[[net]]\nhost = \"other.test\"\naction = \"allow\"\n",
    );
    let text = ok(&env.run(&unique("wire2")));
    assert!(text.contains("http-other host=other.test\n"), "{text}");
    assert!(text.contains("tls-other tls got"), "{text}");
    assert!(text.contains("tls-none err ConnectionResetError"), "{text}");
}

/// `sni` belongs to host rules: on a cidr rule `policy check` names it.
#[test]
fn sni_on_a_cidr_rule_is_refused() {
    let dir = TempDir::new("sni");
    let p = dir.path().join("p.toml");
    std::fs::write(
        &p,
        "name = \"x\"\nextends = \"default\"\n[[net]]\ncidr = \"192.0.2.0/24\"\naction = \"allow\"\nsni = \"off\"\n",
    )
    .unwrap();
    let env = Env::busybox(&["true"]);
    let out = env.cordon(&["policy", "check", &p.to_string_lossy()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("net[0].sni"), "{}", stderr(&out));
}

/// What got past the relay in earlier versions (attack passes against a
/// real nginx and Python's http.server): an absolute target in another
/// case, a chunked body whose trailer or chunk end is a bare LF, a GET
/// body a server leaves unread, an MPTCP socket, TCP Fast Open by
/// sendmmsg, a connect of a socket still connecting (which another thread
/// could close meanwhile). The server never answers a request for
/// other.test; the MPTCP connect gets EPERM, the Fast Open send
/// EOPNOTSUPP, the busy socket EALREADY without a connect.
#[test]
fn smuggled_requests_and_other_routes_never_reach_the_server() {
    let net = TestNet::new();
    let servers = WireServers::start(&net);
    let script = r#"
import ctypes, errno, socket, struct
socket.getaddrinfo("allowed.test", 80)
def raw(payload):
    s = socket.create_connection(("192.0.2.1", 80), timeout=5)
    try:
        s.sendall(payload)
        while s.recv(4096):
            pass
    except OSError:
        pass
    finally:
        s.close()
raw(b"GET HTTP://other.test/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
hidden = b"GET /hidden HTTP/1.1\r\nHost: other.test\r\n\r\n"
raw(b"GET /front HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: %d\r\n\r\n" % len(hidden) + hidden)
raw(b"POST / HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\nGET /s HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n")
smuggled = b"GET /s2 HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n"
raw(b"POST / HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nA\n0\t" + b"%x" % len(smuggled) + b"\r\n\r\n" + smuggled + b"0\r\n\r\n")
try:
    m = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
    m.settimeout(5)
    m.connect(("192.0.2.1", 80))
    m.sendall(b"GET / HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n")
    m.recv(4096)
    print("mptcp connected")
except OSError as e:
    print("mptcp err", errno.errorcode[e.errno])
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure): _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class msghdr(ctypes.Structure): _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(iovec)), ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t), ("flags", ctypes.c_int)]
class mmsghdr(ctypes.Structure): _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]
data = b"GET / HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n"
buf = ctypes.create_string_buffer(data, len(data))
sa = ctypes.create_string_buffer(struct.pack("=HH4s8x", socket.AF_INET, socket.htons(80), socket.inet_aton("192.0.2.1")), 16)
iov = iovec(ctypes.cast(buf, ctypes.c_void_p), len(data))
mm = mmsghdr(msghdr(ctypes.cast(sa, ctypes.c_void_p), 16, ctypes.pointer(iov), 1, None, 0, 0), 0)
t = socket.socket()
r = libc.sendmmsg(t.fileno(), ctypes.byref(mm), 1, 0x20000000)
print("fastopen-sendmmsg", r, errno.errorcode.get(ctypes.get_errno(), "0") if r < 0 else "")
# A socket still connecting elsewhere: the kernel's EALREADY, no connect.
b = socket.socket()
b.setblocking(False)
b.connect_ex(socket.getaddrinfo("dead.test", 9999, socket.AF_INET)[0][4])
print("busy", errno.errorcode.get(b.connect_ex(("192.0.2.1", 80)), "0"))
"#;
    let mut env = Env::python(&["python3", "-c", script]);
    net.configure(
        &mut env,
        "[[net]]\nhost = \"allowed.test\"\naction = \"allow\"\n[[net]]\nhost = \"dead.test\"\naction = \"allow\"\n",
    );
    let text = ok(&env.run(&unique("smuggle")));
    // Python names errno 95 by its alias ENOTSUP.
    assert_eq!(text, "mptcp err EPERM\nfastopen-sendmmsg -1 ENOTSUP\nbusy EALREADY\n");
    let served = servers.served.lock().unwrap().clone();
    assert!(
        served.iter().all(|h| h == "allowed.test"),
        "the server answered a request that was not for allowed.test: {served:?}"
    );
}

/// A destination that takes seconds to fail: a blocking connect through
/// the relay fails as the kernel's does (EHOSTUNREACH); a non-blocking one
/// returns EINPROGRESS at once, as the kernel's does, and the connection
/// it then sees fails (reset) instead of holding the caller's thread.
#[test]
fn a_slow_destination_does_not_hold_a_non_blocking_connect() {
    let net = TestNet::new();
    let script = r#"
import errno, select, socket
addr = socket.getaddrinfo("dead.test", 80, socket.AF_INET)[0][4]
b = socket.socket()
print("blocking", errno.errorcode.get(b.connect_ex(addr), "0"))
n = socket.socket()
n.setblocking(False)
print("non-blocking", errno.errorcode.get(n.connect_ex(addr), "0"))
select.select([], [n], [], 30)
try:
    n.setblocking(True)
    n.settimeout(30)
    n.sendall(b"GET / HTTP/1.1\r\nHost: dead.test\r\n\r\n")
    print("then", n.recv(10) or b"eof")
except OSError as e:
    print("then", errno.errorcode.get(e.errno, str(e)))
"#;
    let mut env = Env::python(&["python3", "-c", script]);
    net.configure(&mut env, "[[net]]\nhost = \"dead.test\"\naction = \"allow\"\n");
    let text = ok(&env.run(&unique("slow")));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..2],
        ["blocking EHOSTUNREACH", "non-blocking EINPROGRESS"],
        "{text}"
    );
    assert!(
        ["then ECONNRESET", "then EPIPE", "then b'eof'"].contains(&lines[2]),
        "the relayed connection fails: {text}"
    );
}

/// Requests (after [`RESPONSE`]) over keep-alive connections to allowed.test:80, each a list
/// of (method, target); prints one line per connection: each answer, or
/// the error that ended it.
const HTTP_RULES: &str = r#"
import socket

def conn(reqs):
    s = socket.create_connection(("allowed.test", 80), timeout=5)
    out = []
    try:
        for method, target in reqs:
            s.sendall(method.encode() + b" " + target.encode() + b" HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 0\r\n\r\n")
            out.append(response(s))
    except (OSError, EOFError) as e:
        out.append("err " + type(e).__name__)
    finally:
        s.close()
    return " ".join(out)

print(conn([("GET", "/simple/hello/"), ("HEAD", "/simple/x.whl?a=1"), ("GET", "/admin")]))
print(conn([("POST", "/simple/hello/")]))
print(conn([("GET", "/simple/../admin")]))
print(conn([("GET", "/simple/%2e%2e/admin")]))
print(conn([("GET", "http://allowed.test/simple/a")]))
"#;

/// `methods` and `paths` on a host rule: every request of a plain-HTTP
/// connection must have an allowed method and a path the patterns match,
/// read as a server would (a `..` segment, encoded or not, is refused),
/// else the connection is reset and the trail says which request and
/// why; the requests before it were answered. Without the rule's HTTP
/// rules the same requests pass.
#[test]
fn http_rules_hold_methods_and_paths() {
    let net = TestNet::new();
    let servers = WireServers::start(&net);
    let run = |rules: &str| -> (String, Vec<serde_json::Value>) {
        let mut env = Env::python(&["python3", "-c", &format!("{RESPONSE}{HTTP_RULES}")]);
        net.configure(&mut env, rules);
        let id = unique("httprules");
        let out = env.run_keep(&id);
        let trail = env.audit_with(&id, "the init's exit", |r| r["result"] == "exit");
        (ok(&out), trail)
    };
    let (text, trail) = run("[[net]]\nhost = \"allowed.test\"\nports = [80]\naction = \"allow\"\n\
         methods = [\"GET\", \"HEAD\"]\npaths = [\"/simple/**\"]\n");
    assert_eq!(
        text,
        "host=allowed.test host=allowed.test err ConnectionResetError\n\
         err ConnectionResetError\n\
         err ConnectionResetError\n\
         err ConnectionResetError\n\
         host=allowed.test\n"
    );
    let refused: Vec<&str> = trail
        .iter()
        .filter(|r| r["action"] == "deny" && r["syscall"] == "connect")
        .filter_map(|r| r["detail"].as_str())
        .collect();
    for (what, why) in [
        ("GET /admin", "path /admin not among"),
        ("POST /simple/hello/", "method POST not among"),
        ("GET /simple/../admin", "could be read otherwise"),
    ] {
        assert!(
            refused.iter().any(|d| d.contains(what))
                && trail.iter().any(|r| r["action"] == "deny"
                    && r["detail"].as_str().is_some_and(|d| d.contains(what))
                    && r.to_string().contains(why)),
            "no refusal of {what} ({why}) in the trail: {trail:?}"
        );
    }
    let served = servers.served.lock().unwrap().len();
    assert_eq!(served, 3, "only the allowed requests reached the server");
    let (text, _) = run("[[net]]\nhost = \"allowed.test\"\nports = [80]\naction = \"allow\"\n");
    assert_eq!(
        text,
        "host=allowed.test host=allowed.test host=allowed.test\n\
         host=allowed.test\nhost=allowed.test\nhost=allowed.test\nhost=allowed.test\n"
    );
}

/// HTTP rules where the relay cannot check them are refused by name:
/// on a TLS port, on every port, on a cidr rule.
#[test]
fn http_rules_the_relay_cannot_check_are_refused() {
    let dir = TempDir::new("httprules");
    for (rule, field) in [
        ("host = \"a.test\"\nports = [443]\nmethods = [\"GET\"]", "ports"),
        ("host = \"a.test\"\npaths = [\"/x/**\"]", "ports"),
        ("cidr = \"192.0.2.0/24\"\nports = [80]\nmethods = [\"GET\"]", "methods"),
    ] {
        let p = dir.path().join("p.toml");
        std::fs::write(&p, format!("name = \"h\"\n[[net]]\n{rule}\naction = \"allow\"\n")).unwrap();
        let out = run_captured(Command::new(cordon_bin()).args(["policy", "check", &p.to_string_lossy()]));
        assert!(!out.status.success(), "{rule}");
        let err = stderr(&out);
        assert!(err.contains("net[0]") && err.contains(field), "{rule}: {err}");
    }
}
