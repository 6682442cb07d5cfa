//! The programs agents run, in the set-ups engines give them, under runc
//! and under cordon, results compared (issue #25's yardstick).
//!
//! Each workload runs once under runc, then under cordon with every policy
//! of [`POLICIES`]: `default`, `audit`, `agent` with host rules for the
//! test's names, and a Landlock allow-list ("writable only beneath /work
//! and /tmp"). Its exit status, output and the files it leaves must be the
//! same. The platform is the suite's (`CORDON_TEST_PLATFORM=ptrace` in
//! `make test-ptrace`). The services (a DNS server answering A and AAAA,
//! an HTTP server with a 20 MB file) run in a network namespace the test
//! builds, which the container joins, on documentation addresses
//! (198.51.100.0/24, 2001:db8::/32; the HTTPS server's files: a package
//! index, an npm registry, a git repository; the python bundle has
//! python3, pip's wheel, git, curl, gcc, make, node and npm), with one nameserver on the namespace's
//! own address and one on the loopback (127.0.0.11, as Docker's).
//!
//! A difference is printed whole, with the policy and the output of both.

use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use cordon_tests::*;

/// A name's A and AAAA records.
type Records = (Vec<[u8; 4]>, Vec<[u8; 16]>);

/// The DNS zone: the addresses of each name, by type.
fn zone(name: &str) -> Option<Records> {
    let v6 = |last: u8| {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        a[15] = last;
        a
    };
    match name {
        "files.test" => Some((vec![[198, 51, 100, 80]], vec![v6(0x80)])),
        "v4only.test" => Some((vec![[198, 51, 100, 80]], vec![])),
        _ => None,
    }
}

/// Answers one DNS query (RFC 1035 section 4.1; AAAA: RFC 3596) from
/// [`zone`]: NXDOMAIN for an unknown name, an empty answer for a type the
/// name has no record of. `None` for a malformed query.
fn dns_answer(q: &[u8]) -> Option<Vec<u8>> {
    let mut at = 12;
    let mut labels = Vec::new();
    while *q.get(at)? != 0 {
        let n = q[at] as usize;
        labels.push(String::from_utf8_lossy(q.get(at + 1..at + 1 + n)?).to_lowercase());
        at += 1 + n;
    }
    let qtype = u16::from_be_bytes([*q.get(at + 1)?, *q.get(at + 2)?]);
    let end = at + 5;
    let mut out = q.get(..end)?.to_vec();
    out[2] = 0x84 | (q[2] & 1);
    out[3] = 0x80;
    out[6..12].copy_from_slice(&[0; 6]);
    let Some((v4, v6)) = zone(&labels.join(".")) else {
        out[3] |= 3;
        return Some(out);
    };
    let records: Vec<Vec<u8>> = match qtype {
        1 => v4.iter().map(|a| a.to_vec()).collect(),
        28 => v6.iter().map(|a| a.to_vec()).collect(),
        _ => Vec::new(),
    };
    for r in &records {
        out.extend_from_slice(&[0xc0, 12]);
        out.extend_from_slice(&qtype.to_be_bytes());
        out.extend_from_slice(&[0, 1, 0, 0, 1, 44]);
        out.extend_from_slice(&(r.len() as u16).to_be_bytes());
        out.extend_from_slice(r);
    }
    out[6..8].copy_from_slice(&(records.len() as u16).to_be_bytes());
    Some(out)
}

/// The body of `GET /big`: 20 MiB of a fixed pattern.
fn big() -> Vec<u8> {
    (0..20u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect()
}

/// The namespace the containers join, its servers and the files the
/// bundles mount (resolv.conf, the policies).
struct Net {
    /// The containers' namespace; 127.0.0.11 answers DNS in it.
    ns: String,
    /// The servers' namespace, reached through a veth pair.
    server_ns: String,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The HTTPS server (tests/workloads/https.py): ends when its stdin
    /// closes.
    https: Option<std::process::Child>,
    dir: TempDir,
}

/// Makes, in `dir`: a CA (`ca/ca.pem`, what the containers trust), a
/// certificate for the zone's names signed by it, and the HTTPS server's
/// files under `www/`: a simple package index with one wheel
/// (`hello-cordon`), an npm registry's document and tarball of one
/// package (`hello-cordon-npm`), a git repository served the "dumb" HTTP way, and
/// `big`.
const PREPARE: &str = r#"set -e
mkdir -p ca www/simple/hello-cordon
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca/ca.pem -subj /CN=cordon-workloads-ca -days 2 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=files.test 2>/dev/null
printf 'subjectAltName=DNS:files.test,DNS:v4only.test\n' > san.ext
openssl x509 -req -in server.csr -CA ca/ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile san.ext 2>/dev/null
python3 - <<'PY'
import zipfile
d = "www/simple/hello-cordon/"
whl = "hello_cordon-1.0-py3-none-any.whl"
with zipfile.ZipFile(d + whl, "w") as z:
    z.writestr("hello_cordon/__init__.py", "VALUE = 'cordon'\n")
    z.writestr("hello_cordon-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: hello-cordon\nVersion: 1.0\n")
    z.writestr("hello_cordon-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: cordon-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("hello_cordon-1.0.dist-info/RECORD", "hello_cordon/__init__.py,,\nhello_cordon-1.0.dist-info/METADATA,,\nhello_cordon-1.0.dist-info/WHEEL,,\nhello_cordon-1.0.dist-info/RECORD,,\n")
open(d + "index.html", "w").write('<a href="%s">%s</a>\n' % (whl, whl))
PY
python3 - <<'PY'
import base64, hashlib, io, json, os, tarfile
name, ver = "hello-cordon-npm", "1.0.0"
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    for path, text in [("package/package.json", json.dumps({"name": name, "version": ver, "main": "index.js"})),
                       ("package/index.js", "module.exports = 'cordon';\n")]:
        data = text.encode()
        info = tarfile.TarInfo(path)
        info.size, info.mode, info.mtime = len(data), 0o644, 1700000000
        t.addfile(info, io.BytesIO(data))
tgz = buf.getvalue()
os.makedirs("www/tarballs")
open("www/tarballs/%s-%s.tgz" % (name, ver), "wb").write(tgz)
open("www/" + name, "w").write(json.dumps({"name": name, "dist-tags": {"latest": ver}, "versions": {ver: {
    "name": name, "version": ver, "main": "index.js",
    "dist": {"tarball": "https://files.test:8443/tarballs/%s-%s.tgz" % (name, ver),
             "shasum": hashlib.sha1(tgz).hexdigest(),
             "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()}}}}))
PY
git -c init.defaultBranch=main init -q src
printf 'hello from git\n' > src/README
git -C src add README
git -C src -c user.name=cordon -c user.email=cordon@example.com -c commit.gpgsign=false commit -q -m first
git clone -q --bare src www/repo.git
git -C www/repo.git update-server-info
"#;

impl Net {
    fn new() -> Self {
        let tag = unique("wl");
        let (ns, server_ns) = (format!("{tag}-c"), format!("{tag}-s"));
        ip(&["netns", "add", &ns]);
        ip(&["netns", "add", &server_ns]);
        ip(&[
            "link", "add", "eth0", "netns", &ns, "type", "veth", "peer", "name", "veth0", "netns", &server_ns,
        ]);
        for (n, dev, addrs) in [
            (&ns, "eth0", ["198.51.100.2/24", "2001:db8::2/64"].as_slice()),
            (
                &server_ns,
                "veth0",
                ["198.51.100.53/24", "198.51.100.80/24", "2001:db8::80/64"].as_slice(),
            ),
        ] {
            ip(&["-n", n, "link", "set", "lo", "up"]);
            for a in addrs {
                let mut args = vec!["-n", n, "addr", "add", a, "dev", dev];
                if a.contains(':') {
                    args.push("nodad");
                }
                ip(&args);
            }
            ip(&["-n", n, "link", "set", dev, "up"]);
        }
        let (dns_ns, http4, http6) = in_netns(&server_ns, || {
            (
                UdpSocket::bind("198.51.100.53:53").unwrap(),
                TcpListener::bind("198.51.100.80:8080").unwrap(),
                TcpListener::bind("[2001:db8::80]:8080").unwrap(),
            )
        });
        let dns_lo = in_netns(&ns, || UdpSocket::bind("127.0.0.11:53").unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for dns in [dns_ns, dns_lo] {
            let stop = Arc::clone(&stop);
            dns.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            threads.push(std::thread::spawn(move || {
                let mut buf = [0u8; 1500];
                while !stop.load(Ordering::SeqCst) {
                    if let Ok((n, from)) = dns.recv_from(&mut buf) {
                        if let Some(a) = dns_answer(&buf[..n]) {
                            let _ = dns.send_to(&a, from);
                        }
                    }
                }
            }));
        }
        let body = Arc::new(big());
        for l in [http4, http6] {
            let (stop, body) = (Arc::clone(&stop), Arc::clone(&body));
            l.set_nonblocking(true).unwrap();
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match l.accept() {
                        Ok((c, _)) => {
                            let body = Arc::clone(&body);
                            std::thread::spawn(move || serve(c, &body));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            }));
        }
        let dir = TempDir::new("workloads");
        let prepared = Command::new("sh")
            .args(["-c", PREPARE])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            prepared.status.success(),
            "prepare the HTTPS files (tools/install-deps.sh installs openssl, git, python3): {}",
            String::from_utf8_lossy(&prepared.stderr)
        );
        std::fs::write(dir.path().join("www/big"), &*body).unwrap();
        let mut https = Command::new("ip")
            .args(["netns", "exec", &server_ns, "python3"])
            .arg(repo().join("tests/workloads/https.py"))
            .arg(dir.path().join("www"))
            .arg(dir.path().join("server.pem"))
            .arg(dir.path().join("server.key"))
            .args(["198.51.100.80:8443", "[2001:db8::80]:8443"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(https.stdout.take().unwrap()), &mut ready);
        assert_eq!(ready, "ready\n", "the HTTPS server did not start");
        std::fs::write(
            dir.path().join("resolv-ns.conf"),
            "nameserver 198.51.100.53\noptions timeout:5 attempts:2\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("resolv-lo.conf"),
            "nameserver 127.0.0.11\noptions timeout:5 attempts:2\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("agent.toml"),
            "name = \"agent-workloads\"\nextends = \"agent\"\nnet_default = \"deny\"\n\
             [[net]]\nhost = \"files.test\"\naction = \"allow\"\n\
             [[net]]\nhost = \"v4only.test\"\naction = \"allow\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("landlock.toml"),
            "name = \"writable-beneath\"\n\
             [[path]]\npattern = \"/work/**\"\naccess = \"allow\"\n\
             [[path]]\npattern = \"/tmp/**\"\naccess = \"allow\"\n\
             [[path]]\npattern = \"/**\"\naccess = \"read-only\"\n",
        )
        .unwrap();
        Net {
            ns,
            server_ns,
            stop,
            threads,
            https: Some(https),
            dir,
        }
    }

    /// The container joins the namespace and gets `resolv` (`ns` or `lo`)
    /// as its /etc/resolv.conf, the way engines give one; /work and /tmp are
    /// tmpfs of its own.
    fn configure(&self, config: &mut serde_json::Value, resolv: &str) {
        let ns = config["linux"]["namespaces"].as_array_mut().unwrap();
        ns.retain(|n| n["type"] != "network");
        ns.push(serde_json::json!({"type": "network", "path": format!("/var/run/netns/{}", self.ns)}));
        let mounts = config["mounts"].as_array_mut().unwrap();
        mounts.push(serde_json::json!({
            "destination": "/etc/resolv.conf", "type": "bind",
            "source": self.dir.path().join(format!("resolv-{resolv}.conf")),
            "options": ["rbind", "ro"]
        }));
        for d in ["/work", "/tmp"] {
            mounts.push(serde_json::json!({"destination": d, "type": "tmpfs", "source": "tmpfs",
                                           "options": ["nosuid", "nodev", "size=256m"]}));
        }
        mounts.push(serde_json::json!({
            "destination": "/ca", "type": "bind",
            "source": self.dir.path().join("ca"), "options": ["rbind", "ro"]
        }));
        config["process"]["cwd"] = "/work".into();
        let env = config["process"]["env"].as_array_mut().unwrap();
        for var in [
            "SSL_CERT_FILE",
            "PIP_CERT",
            "REQUESTS_CA_BUNDLE",
            "GIT_SSL_CAINFO",
            "CURL_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS",
        ] {
            env.push(format!("{var}=/ca/ca.pem").into());
        }
    }
}

/// Answers HTTP/1.0 and 1.1 requests on `c` until it closes: `/big` gets
/// [`big`], anything else `hello`.
fn serve(mut c: std::net::TcpStream, body: &[u8]) {
    let _ = c.set_nonblocking(false);
    let _ = c.set_read_timeout(Some(Duration::from_secs(30)));
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => req.extend_from_slice(&buf[..n]),
            }
        }
        let text = String::from_utf8_lossy(&req).into_owned();
        let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
        let end = req.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        req.drain(..end);
        let data: &[u8] = if path == "/big" { body } else { b"hello" };
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", data.len());
        if c.write_all(head.as_bytes()).and_then(|()| c.write_all(data)).is_err() {
            return;
        }
        if text.starts_with("GET") && text.contains("HTTP/1.0") {
            return;
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(mut h) = self.https.take() {
            drop(h.stdin.take());
            let _ = h.wait();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.server_ns]).status();
    }
}

/// The policies every workload runs under (the runtime's `--policy`):
/// a built-in name, or a file of the [`Net`]'s directory.
const POLICIES: [&str; 4] = ["default", "audit", "agent.toml", "landlock.toml"];

/// How the container's stdio is set up, as shells and engines give it.
#[derive(Clone, Copy, Debug)]
enum Stdio3 {
    /// stdin /dev/null, stdout and stderr captured in files.
    Files,
    /// stdout and stderr to /dev/null (only the exit status compares).
    DevNull,
    /// stdout to a pipe read by the test, stderr to a file.
    Pipe,
    /// stdin, stdout and stderr closed (not compared with runc: see
    /// `stdio_reaches_the_program_as_under_runc`).
    Closed,
    /// stdin a pipe the test writes `input` into, then closes.
    StdinPipe,
}

/// What a run gave: exit status, stdout, stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Result3 {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` with stdio `how`; `input` goes to a stdin pipe.
fn run_with(cmd: &mut Command, how: Stdio3, input: &str) -> Result3 {
    let dir = TempDir::new("wl-out");
    let (o, e) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let file = |p: &Path| Stdio::from(std::fs::File::create(p).unwrap());
    match how {
        Stdio3::Files => cmd.stdin(Stdio::null()).stdout(file(&o)).stderr(file(&e)),
        Stdio3::DevNull => cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()),
        Stdio3::Pipe => cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(file(&e)),
        Stdio3::StdinPipe => cmd.stdin(Stdio::piped()).stdout(file(&o)).stderr(file(&e)),
        Stdio3::Closed => {
            // Closed as `cmd <&- >&- 2>&-` closes them: through a shell.
            let prog = cmd.get_program().to_owned();
            let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
            let mut sh = Command::new("sh");
            sh.arg("-c")
                .arg("exec \"$@\" <&- >&- 2>&-")
                .arg("sh")
                .arg(prog)
                .args(args);
            let status = sh.status().unwrap();
            return Result3 {
                code: status.code(),
                stdout: String::new(),
                stderr: String::new(),
            };
        }
    };
    let mut child = cmd.spawn().unwrap();
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(input.as_bytes());
    }
    let mut piped = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut piped);
    }
    let status = child.wait().unwrap();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    Result3 {
        code: status.code(),
        stdout: if matches!(how, Stdio3::Pipe) { piped } else { read(&o) },
        stderr: read(&e),
    }
}

/// One workload: a program for the python bundle.
struct Workload<'a> {
    name: &'a str,
    args: Vec<String>,
    resolv: &'a str,
}

impl<'a> Workload<'a> {
    fn python(name: &'a str, script: &str) -> Self {
        Workload {
            name,
            args: vec!["python3".into(), "-c".into(), script.into()],
            resolv: "ns",
        }
    }

    fn sh(name: &'a str, script: &str) -> Self {
        Workload {
            name,
            args: vec!["sh".into(), "-c".into(), script.into()],
            resolv: "ns",
        }
    }

    fn env(&self, net: &Net) -> Env {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let mut env = Env::python(&args);
        net.configure(&mut env.config, self.resolv);
        env
    }

    /// Under runc.
    fn runc(&self, net: &Net, how: Stdio3, input: &str) -> Result3 {
        self.runc_edited(net, how, input, &|_| {})
    }

    /// Under runc, with `edit` applied to the config.
    fn runc_with(&self, net: &Net, edit: &dyn Fn(&mut serde_json::Value)) -> Result3 {
        self.runc_edited(net, Stdio3::Files, "", edit)
    }

    /// Under cordon with `policy`, with `edit` applied to the config.
    fn cordon_with(&self, net: &Net, policy: &str, edit: &dyn Fn(&mut serde_json::Value)) -> Result3 {
        self.cordon_edited(net, policy, Stdio3::Files, "", edit)
    }

    fn runc_edited(&self, net: &Net, how: Stdio3, input: &str, edit: &dyn Fn(&mut serde_json::Value)) -> Result3 {
        let mut env = self.env(net);
        edit(&mut env.config);
        env.write();
        let root = TempDir::new("wl-runc");
        let id = unique("wl-runc");
        let mut cmd = Command::new("runc");
        cmd.arg("--root")
            .arg(root.path())
            .args(["run", "-b"])
            .arg(env.bundle.path())
            .arg(&id);
        let r = run_with(&mut cmd, how, input);
        let _ = Command::new("runc")
            .arg("--root")
            .arg(root.path())
            .args(["delete", "--force", &id])
            .output();
        r
    }

    /// Under cordon with `policy` (see [`POLICIES`]).
    fn cordon(&self, net: &Net, policy: &str, how: Stdio3, input: &str) -> Result3 {
        self.cordon_edited(net, policy, how, input, &|_| {})
    }

    fn cordon_edited(
        &self,
        net: &Net,
        policy: &str,
        how: Stdio3,
        input: &str,
        edit: &dyn Fn(&mut serde_json::Value),
    ) -> Result3 {
        let mut env = self.env(net);
        edit(&mut env.config);
        env.write();
        let policy: PathBuf = if policy.ends_with(".toml") {
            net.dir.path().join(policy)
        } else {
            PathBuf::from(policy)
        };
        let id = unique("wl");
        let mut cmd = Command::new(cordon_bin());
        cmd.arg("--root").arg(env.root.path()).arg("--policy").arg(&policy);
        cmd.args(["run", "-b"]).arg(env.bundle.path()).arg(&id);
        run_with(&mut cmd, how, input)
    }

    /// Runs under runc, then under cordon with every policy, and returns
    /// the differences (empty when every run matched runc's).
    fn compare(&self, net: &Net, how: Stdio3, input: &str) -> Vec<String> {
        self.compare_under(net, &POLICIES, how, input)
    }

    /// [`Self::compare`] under `policies` only.
    fn compare_under(&self, net: &Net, policies: &[&str], how: Stdio3, input: &str) -> Vec<String> {
        let want = self.runc(net, how, input);
        assert_eq!(want.code, Some(0), "{} under runc ({how:?}): {want:#?}", self.name);
        policies
            .iter()
            .filter_map(|p| {
                let got = self.cordon(net, p, how, input);
                (got != want).then(|| {
                    format!(
                        "{} ({how:?}) under {p}:\n  runc:   {want:?}\n  cordon: {got:?}",
                        self.name
                    )
                })
            })
            .collect()
    }
}

fn assert_same(diffs: Vec<String>) {
    assert!(diffs.is_empty(), "differences from runc:\n{}", diffs.join("\n"));
}

/// Name lookups as urllib, pip and git make them: getaddrinfo with
/// AF_UNSPEC (glibc sends the A and AAAA queries together with sendmmsg),
/// AF_INET and AF_INET6, a name with no AAAA record, an unknown name, and
/// `getent hosts`; through a nameserver on the namespace's address and
/// through one on the loopback (as Docker's 127.0.0.11).
const LOOKUPS: &str = r#"
import socket, subprocess
def q(name, fam):
    try:
        return " ".join(sorted({a[4][0] for a in socket.getaddrinfo(name, 443, fam, socket.SOCK_STREAM)}))
    except socket.gaierror as e:
        return "gaierror %d" % e.errno
for name in ["files.test", "v4only.test", "nosuch.test"]:
    for fam, label in [(socket.AF_UNSPEC, "unspec"), (socket.AF_INET, "inet"), (socket.AF_INET6, "inet6")]:
        print(name, label, q(name, fam))
r = subprocess.run(["getent", "ahosts", "files.test"], capture_output=True, text=True)
print("getent", r.returncode, sorted(set(l.split()[0] for l in r.stdout.splitlines())))
"#;

#[test]
fn name_lookups_resolve_as_under_runc() {
    let net = Net::new();
    let mut diffs = Workload::python("lookups", LOOKUPS).compare(&net, Stdio3::Files, "");
    let mut lo = Workload::python("lookups-lo", LOOKUPS);
    lo.resolv = "lo";
    diffs.extend(lo.compare_under(&net, &["default", "audit", "landlock.toml"], Stdio3::Files, ""));
    assert_same(diffs);
    // On purpose: under host rules the supervisor's resolver does not ask
    // a nameserver that is an address of the container's own namespace
    // (a process inside could answer for it and bind addresses of its
    // choice to an allowed name; docs/POLICY.md): allowed names get
    // SERVFAIL, unknown ones NXDOMAIN.
    let got = lo.cordon(&net, "agent.toml", Stdio3::Files, "");
    assert!(
        got.stdout.starts_with("files.test unspec gaierror -3\n")
            && got.stdout.contains("nosuch.test inet gaierror -2\n"),
        "{got:?}"
    );
}

/// An HTTP download of 20 MiB by name (urllib: AF_UNSPEC lookup, then the
/// IPv6 address first), its sha256 and size, and a request to the IPv4
/// address on a keep-alive connection.
const HTTP: &str = r#"
import hashlib, http.client, urllib.request
data = urllib.request.urlopen("http://files.test:8080/big", timeout=30).read()
print(len(data), hashlib.sha256(data).hexdigest())
c = http.client.HTTPConnection("v4only.test", 8080, timeout=30)
for _ in range(3):
    c.request("GET", "/hello")
    print(c.getresponse().read())
"#;

#[test]
fn a_download_by_name_gets_the_same_bytes() {
    let net = Net::new();
    assert_same(Workload::python("http", HTTP).compare(&net, Stdio3::Files, ""));
}

/// Threads and processes: 16 threads each running a subprocess, a tree of
/// 200 short-lived children, a Python compileall into /work and a
/// multiprocessing pool (semaphores in /dev/shm).
const PROCESSES: &str = r#"
import compileall, multiprocessing, os, shutil, subprocess, threading
out = []
def work(i):
    out.append(subprocess.run(["sh", "-c", "echo %d" % i], capture_output=True, text=True).stdout.strip())
ts = [threading.Thread(target=work, args=(i,)) for i in range(16)]
[t.start() for t in ts]
[t.join() for t in ts]
print(sorted(out, key=int))
print(sum(subprocess.run(["true"]).returncode == 0 for _ in range(200)))
shutil.copytree("/usr/lib/python3.11/json", "/work/json")
print(compileall.compile_dir("/work/json", quiet=1), len(os.listdir("/work/json/__pycache__")))
def square(x):
    return x * x
with multiprocessing.Pool(2) as p:
    print(p.map(square, range(8)))
"#;

#[test]
fn threads_children_and_builds_run_as_under_runc() {
    let net = Net::new();
    assert_same(Workload::python("processes", PROCESSES).compare(&net, Stdio3::Files, ""));
}

/// The devices and files shells and git open: `/dev/null` read-write,
/// `/dev/zero`, `/dev/urandom`, `/dev/shm`, `/dev/full` (ENOSPC), a
/// redirection into /tmp and /work, and a write to the rootfs (allowed
/// under runc and every policy but the allow-list).
const DEVICES: &str = "exec 3<>/dev/null && echo x >&3 && echo devnull ok; \
    head -c 4 /dev/zero | od -An -tx1; head -c 16 /dev/urandom | wc -c; \
    echo s > /dev/shm/s && cat /dev/shm/s; \
    echo full > /dev/full 2>/dev/null || echo full refused; \
    echo t > /tmp/t && echo w > /work/w && cat /tmp/t /work/w; \
    (: > /dev/tty) 2>/dev/null; echo tty $?";

#[test]
fn devices_stay_usable_under_every_policy() {
    let net = Net::new();
    assert_same(Workload::sh("devices", DEVICES).compare(&net, Stdio3::Files, ""));
}

/// A program that writes 64 KiB to stdout and a line to stderr, then
/// reads its stdin, with stdio as engines and shells give it: files,
/// /dev/null, a pipe, closed, stdin a pipe. A write to a closed stdout
/// fails (EBADF) under runc too; the exit status is what compares.
const STDIO: &str = r#"
import sys
try:
    sys.stdout.write("x" * 65536 + "\n")
    sys.stdout.flush()
    print("stdout ok", file=sys.stderr)
except (OSError, AttributeError):
    pass
try:
    print("stdin", len(sys.stdin.read()))
except (OSError, AttributeError, ValueError) as e:
    print("stdin error", type(e).__name__)
sys.stdout.flush()
"#;

#[test]
fn stdio_reaches_the_program_as_under_runc() {
    let net = Net::new();
    let w = Workload::python("stdio", STDIO);
    let mut diffs = Vec::new();
    for how in [Stdio3::Files, Stdio3::DevNull, Stdio3::Pipe, Stdio3::StdinPipe] {
        diffs.extend(w.compare(&net, how, "some input\n"));
    }
    // On purpose: a stdio fd the caller closed is /dev/null (read-write)
    // inside, where runc leaves one of its own set-up pipes on it (a write
    // then fails with EPIPE and python exits 120): docs/DESIGN.md.
    for p in POLICIES {
        let got = w.cordon(&net, p, Stdio3::Closed, "");
        if got.code != Some(0) {
            diffs.push(format!("stdio (Closed) under {p}: {got:?}"));
        }
    }
    // A shell's redirections, busybox's and dash's.
    let sh = Workload::sh("sh-stdio", "echo out; echo err >&2; cat");
    for how in [Stdio3::DevNull, Stdio3::Pipe, Stdio3::StdinPipe] {
        diffs.extend(sh.compare(&net, how, "in\n"));
    }
    assert_same(diffs);
}

/// The same program through `cordon exec` into a running container, with
/// stdout to /dev/null and to a pipe: exit 0 and the output, as through
/// `runc exec`.
#[test]
fn exec_stdio_as_under_runc() {
    let net = Net::new();
    let w = Workload::sh("exec-host", "sleep 600");
    let env = w.env(&net);
    env.write();
    let id = unique("wl-exec");
    let out = env.cordon(&["run", "-d", "-b", &env.bundle.path().to_string_lossy(), &id]);
    assert!(out.status.success(), "run -d: {}", stderr(&out));
    let exec = |how: Stdio3| {
        let mut cmd = Command::new(cordon_bin());
        cmd.arg("--root")
            .arg(env.root.path())
            .args(["exec", &id, "python3", "-c", STDIO]);
        run_with(&mut cmd, how, "in\n")
    };
    let null = exec(Stdio3::DevNull);
    assert_eq!(null.code, Some(0), "exec >/dev/null: {null:?}");
    let piped = exec(Stdio3::Pipe);
    assert_eq!(piped.code, Some(0), "{piped:?}");
    assert!(piped.stdout.starts_with(&"x".repeat(65536)), "{piped:?}");
    let _ = env.cordon(&["delete", "--force", &id]);
}

/// `pip install` of a package from a local index over HTTPS into a venv,
/// then an import of it.
const PIP: &str = "python3 -m venv /work/v && \
    /work/v/bin/pip install -q --disable-pip-version-check --no-cache-dir \
        --index-url https://files.test:8443/simple hello-cordon && \
    /work/v/bin/python -c 'import hello_cordon; print(hello_cordon.VALUE)'";

/// `npm install` of a package from a registry over HTTPS (its document,
/// then its tarball, checked against its sha512), then `node` requires it.
/// Its cache in /tmp (HOME too: /root is outside an allow-list's grants).
const NPM: &str = "HOME=/tmp npm install --no-audit --no-fund --no-update-notifier --loglevel=error \
        --cache /tmp/npm-cache --registry https://files.test:8443/ hello-cordon-npm >/dev/null && \
    node -e \"console.log(require('hello-cordon-npm'))\"";

#[test]
fn npm_installs_from_an_https_registry() {
    let net = Net::new();
    assert_same(Workload::sh("npm", NPM).compare(&net, Stdio3::Files, ""));
}

/// A server in the container (python's http.server on the namespace's
/// address, port 8000) that answers one request, from the test's other
/// namespace, then exits: what it printed, and the status line and body
/// the client got.
const SERVER: &str = r#"
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello " + self.path).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("0.0.0.0", 8000), H)
s.handle_request()
print("served")
"#;

/// The client's side of [`SERVER`]: retries until the container listens
/// (waiting for its state, not a time), then one request.
fn fetch_from_the_container(net: &Net) -> std::thread::JoinHandle<String> {
    let ns = net.server_ns.clone();
    std::thread::spawn(move || {
        in_netns(&ns, || {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            loop {
                if let Ok(mut c) = std::net::TcpStream::connect("198.51.100.2:8000") {
                    c.write_all(b"GET /from-the-host HTTP/1.0\r\n\r\n").unwrap();
                    let mut got = String::new();
                    let _ = c.read_to_string(&mut got);
                    let status = got.lines().next().unwrap_or_default().to_string();
                    let body = got.rsplit("\r\n\r\n").next().unwrap_or_default().to_string();
                    return format!("{status} | {body}");
                }
                assert!(std::time::Instant::now() < deadline, "the container never listened");
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    })
}

/// A long-running server in the container reached from outside it, under
/// runc and under cordon with every policy: the same answer, and the same
/// output.
#[test]
fn a_server_in_the_container_answers_from_outside() {
    let net = Net::new();
    let job = Workload::python("server", SERVER);
    let client = fetch_from_the_container(&net);
    let want = job.runc(&net, Stdio3::Files, "");
    let answer = client.join().unwrap();
    assert_eq!(want.code, Some(0), "{want:?}");
    assert!(
        answer.starts_with("HTTP/1.0 200 OK | hello /from-the-host"),
        "under runc: {answer}"
    );
    for p in POLICIES {
        let client = fetch_from_the_container(&net);
        let got = job.cordon(&net, p, Stdio3::Files, "");
        assert_eq!(client.join().unwrap(), answer, "{p}");
        assert_eq!(got, want, "{p}");
    }
}

#[test]
fn pip_installs_from_an_https_index() {
    let net = Net::new();
    assert_same(Workload::sh("pip", PIP).compare(&net, Stdio3::Files, ""));
}

/// `cordon learn` of the pip install: the learned policy (checked again
/// by `--verify`, at the kernel level) runs the job as while learning,
/// grants the index by name, and refuses what the job never did: reading
/// /root, reaching another host.
#[test]
fn a_policy_learned_from_pip_runs_it_and_refuses_the_rest() {
    let net = Net::new();
    let job = Workload::sh("pip", PIP);
    let env = job.env(&net);
    env.write();
    let out = net.dir.path().join("learned.toml");
    let id = unique("learn");
    let learned = env.cordon(&[
        "learn",
        "-b",
        &env.bundle.path().to_string_lossy(),
        &id,
        "-o",
        &out.to_string_lossy(),
        "--verify",
    ]);
    assert!(learned.status.success(), "{}\n{}", stdout(&learned), stderr(&learned));
    assert!(
        stdout(&learned).contains("cordon\n"),
        "the job ran: {}",
        stdout(&learned)
    );
    assert!(
        stderr(&learned).contains("as while learning; nothing denied"),
        "{}",
        stderr(&learned)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("host = \"files.test\"\nports = [8443]"), "{text}");
    assert!(text.contains("pattern = \"/work/**\"\naccess = \"allow\""), "{text}");
    assert!(!text.contains("/root"), "{text}");
    if std::path::Path::new("/sys/fs/cgroup/memory/memory.max_usage_in_bytes").exists() {
        // A cgroup v1 memory hierarchy keeps the peak: the suggestion is there.
        assert!(text.starts_with("# peak memory "), "{text}");
    }
    // A syscall pip never made (setpriority) is refused as the kernel
    // refuses one it does not have; one it made (socket) is not.
    assert!(text.contains("errno = \"ENOSYS\""), "{text}");
    let probe = Workload::sh(
        "probe",
        "cat /root/.bashrc >/dev/null 2>&1; echo root $?; \
         python3 -c 'import socket; socket.create_connection((\"198.51.100.53\", 8080), timeout=5)' 2>&1 | tail -1; \
         python3 -c 'import os; os.setpriority(os.PRIO_PROCESS, 0, 1)' 2>&1 | tail -1; \
         echo x > /work/x; echo work $?",
    );
    let got = probe.cordon_with(&net, &out.to_string_lossy(), &|_| {});
    assert_eq!(
        got.stdout,
        "root 1\nPermissionError: [Errno 1] Operation not permitted\nOSError: [Errno 38] Function not implemented\nwork 0\n",
        "{got:?}"
    );
}

/// `cordon learn --verify` of `env`'s bundle (written first) into a file
/// named after `name`, which must pass; the job's output (both runs) and
/// the learned policy's text.
fn learn_and_verify(net: &Net, env: &Env, name: &str) -> (String, String) {
    env.write();
    let out = net.dir.path().join(format!("learned-{name}.toml"));
    let learned = env.cordon(&[
        "learn",
        "-b",
        &env.bundle.path().to_string_lossy(),
        &unique("learn-job"),
        "-o",
        &out.to_string_lossy(),
        "--verify",
    ]);
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        learned.status.success() && stderr(&learned).contains("as while learning; nothing denied"),
        "{name}: {}\n{}\n{text}",
        stdout(&learned),
        stderr(&learned)
    );
    (stdout(&learned), text)
}

/// A program the job runs from outside the system directories is never
/// opened by the job (the kernel opens it at exec), and the container's
/// own program is run by cordon's executor: the learning run records
/// both execs, so the learned policy grants their directory and runs the
/// job again (`--verify`), on both platforms.
#[test]
fn a_learned_policy_grants_the_programs_the_job_ran() {
    let net = Net::new();
    let tools = TempDir::new("learn-tools");
    std::fs::copy(python_bundle().join("rootfs/usr/bin/true"), tools.path().join("tool")).unwrap();
    for (name, args) in [
        ("child", vec!["sh", "-c", "/opt/tools/tool && echo ran"]),
        ("init", vec!["/opt/tools/tool"]),
    ] {
        let job = Workload {
            name: "tools",
            args: args.iter().map(|a| a.to_string()).collect(),
            resolv: "ns",
        };
        let mut env = job.env(&net);
        env.config["mounts"].as_array_mut().unwrap().push(serde_json::json!({
            "destination": "/opt/tools", "type": "bind",
            "source": tools.path(), "options": ["rbind", "ro"]
        }));
        let (_, text) = learn_and_verify(&net, &env, name);
        assert!(
            text.contains("pattern = \"/opt/tools/**\"\naccess = \"read-only\""),
            "{name}: {text}"
        );
    }
}

/// `cordon learn --verify` of the suite's other jobs (a git clone and
/// downloads over HTTPS and HTTP, a C build with `make -j2`, threads and
/// process trees): each learned policy runs its job again at the kernel
/// level with nothing denied, and the job's output is what it was while
/// learning.
#[test]
fn the_suites_jobs_learn_and_verify() {
    let net = Net::new();
    for job in [
        Workload::sh("git-curl", GIT_CURL),
        Workload::sh("c-build", C_BUILD),
        Workload::python("processes", PROCESSES),
        Workload::sh("npm", NPM),
    ] {
        let name = job.name;
        let env = job.env(&net);
        let (o, text) = learn_and_verify(&net, &env, name);
        // The job's output twice (learning, then verifying), the same.
        let (first, second) = o.split_at(o.len() / 2);
        assert_eq!(first, second, "{name}: the verifying run printed otherwise");
        assert!(
            text.contains("pattern = \"/** \"") || text.contains("pattern = \"/**\"\naccess = \"deny\""),
            "{name}: {text}"
        );
    }
}

/// `cordon learn --from-audit` of a container already run at the
/// supervisor level under host rules (as a platform's production run
/// would be): the same kind of policy, from its kept trail, with no run
/// of its own.
#[test]
fn a_policy_learned_from_a_trail_grants_what_the_run_did() {
    let net = Net::new();
    let job = Workload::python(
        "fetch",
        "import urllib.request; open('/work/page', 'wb').write(urllib.request.urlopen('https://files.test:8443/simple/').read()); print('ok')",
    );
    let mut env = job.env(&net);
    env.annotate("org.cordon.enforcement", "supervisor");
    let observing = net.dir.path().join("observing.toml");
    std::fs::write(
        &observing,
        "name = \"observing\"\nextends = \"default\"\n[[net]]\nhost = \"files.test\"\naction = \"allow\"\n",
    )
    .unwrap();
    env.set_policy(&observing.to_string_lossy());
    let id = unique("learn-trail");
    assert_eq!(ok(&env.run_keep(&id)), "ok\n");
    let out = net.dir.path().join("from-trail.toml");
    let learned = env.cordon(&[
        "learn",
        "--from-audit",
        &id,
        "-o",
        &out.to_string_lossy(),
        "-b",
        &env.bundle.path().to_string_lossy(),
    ]);
    assert!(learned.status.success(), "{}", stderr(&learned));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("host = \"files.test\"\nports = [8443]"), "{text}");
    assert!(text.contains("pattern = \"/work/**\"\naccess = \"allow\""), "{text}");
    assert!(text.contains("pattern = \"/**\"\naccess = \"deny\""), "{text}");
}

/// `org.cordon.learn`: the way an engine learns a container (the
/// annotation rides in config.json): the container runs observed, and its
/// delete (here at the end of `cordon run`) writes the learned policy,
/// only beneath a directory the runtime config's gate lists.
#[test]
fn the_learn_annotation_writes_the_policy_at_delete() {
    let net = Net::new();
    let job = Workload::python(
        "fetch",
        "import urllib.request; open('/work/page', 'wb').write(urllib.request.urlopen('https://files.test:8443/simple/').read()); print('ok')",
    );
    let learned_dir = TempDir::new("learned");
    let config = net.dir.path().join("config.toml");
    std::fs::write(&config, format!("[annotations]\nlearn = [{:?}]\n", learned_dir.path())).unwrap();
    let file = learned_dir.path().join("fetch.toml");
    let mut env = job.env(&net);
    env.config_file = Some(config);
    env.annotate("org.cordon.learn", &file.to_string_lossy());
    assert_eq!(ok(&env.run(&unique("learn-ann"))), "ok\n");
    let text = std::fs::read_to_string(&file).expect("delete wrote the learned policy");
    assert!(text.contains("extends = \"default\""), "{text}");
    assert!(text.contains("host = \"files.test\"\nports = [8443]"), "{text}");
    assert!(text.contains("pattern = \"/work/**\"\naccess = \"allow\""), "{text}");

    // Elsewhere than the gate allows: refused at create, in one line.
    env.annotate("org.cordon.learn", "/etc/cordon/x.toml");
    let out = env.run(&unique("learn-ann"));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("annotation org.cordon.learn: \"/etc/cordon/x.toml\" is not allowed"),
        "{}",
        stderr(&out)
    );
    env.assert_no_leftovers::<&str>(&[]);
}

/// `git clone` over HTTPS (the dumb protocol: plain GETs), the commit id
/// and the file checked; `curl` of 20 MiB over HTTPS and over HTTP, the
/// sha256 checked.
const GIT_CURL: &str = "git clone -q https://files.test:8443/repo.git /work/r && \
    git -C /work/r rev-parse HEAD && cat /work/r/README && \
    curl -sS https://files.test:8443/big | sha256sum && \
    curl -sS http://files.test:8080/big | sha256sum";

#[test]
fn git_clone_and_curl_over_https() {
    let net = Net::new();
    assert_same(Workload::sh("git-curl", GIT_CURL).compare(&net, Stdio3::Files, ""));
}

/// A C project of 50 files built with `make -j2`, then run.
const C_BUILD: &str = r#"set -e
mkdir -p /work/c && cd /work/c
python3 - <<'PY'
for i in range(1, 50):
    open("f%d.c" % i, "w").write("int f%d(void) { return %d; }\n" % (i, i))
decls = "".join("int f%d(void);\n" % i for i in range(1, 50))
calls = "".join("    s += f%d();\n" % i for i in range(1, 50))
open("main.c", "w").write('#include <stdio.h>\n' + decls + 'int main(void) {\n    int s = 0;\n' + calls + '    printf("%d\\n", s);\n    return 0;\n}\n')
open("Makefile", "w").write("OBJS := $(patsubst %.c,%.o,$(wildcard *.c))\nprog: $(OBJS)\n\tgcc -o $@ $^\n%.o: %.c\n\tgcc -O1 -c -o $@ $<\n")
PY
make -s -j2
./prog
ls *.o | wc -l
"#;

#[test]
fn a_c_project_builds_with_make() {
    let net = Net::new();
    assert_same(Workload::sh("c-build", C_BUILD).compare(&net, Stdio3::Files, ""));
}

/// A setuid-root program run by an unprivileged user, with the config's
/// `noNewPrivileges` false (Docker's and podman's default: `sudo`, `su`,
/// `ping` need it) and true: the effective uid and the no_new_privs bit
/// as under runc.
#[test]
fn setuid_programs_follow_no_new_privileges_as_under_runc() {
    let net = Net::new();
    let script = "cp /usr/bin/id /work/suid/id && chmod 4755 /work/suid/id && \
        setpriv --reuid 65534 --regid 65534 --clear-groups /work/suid/id -u && \
        grep NoNewPrivs /proc/self/status";
    let mut diffs = Vec::new();
    for nnp in [false, true] {
        let w = Workload::sh("setuid", script);
        let edit = move |c: &mut serde_json::Value| {
            c["process"]["noNewPrivileges"] = nnp.into();
            for set in ["bounding", "effective", "permitted"] {
                c["process"]["capabilities"][set] = DOCKER_CAPS.to_vec().into();
            }
            c["mounts"].as_array_mut().unwrap().push(serde_json::json!({
                "destination": "/work/suid", "type": "tmpfs", "source": "tmpfs", "options": ["nodev", "size=16m"]}));
        };
        let want = w.runc_with(&net, &edit);
        let expect = if nnp {
            "65534\nNoNewPrivs:\t1\n"
        } else {
            "0\nNoNewPrivs:\t0\n"
        };
        assert_eq!(want.stdout, expect, "runc, noNewPrivileges {nnp}: {want:?}");
        for p in POLICIES {
            let got = w.cordon_with(&net, p, &edit);
            if got != want {
                diffs.push(format!(
                    "noNewPrivileges {nnp} under {p}:\n  runc:   {want:?}\n  cordon: {got:?}"
                ));
            }
        }
    }
    assert_same(diffs);
}

/// The zone answers as a nameserver would (the differential tests rely on
/// it): A and AAAA records, an empty answer, NXDOMAIN.
#[test]
fn the_test_zone_answers() {
    let query = |name: &str, qtype: u16| {
        let mut q = vec![0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        for l in name.split('.') {
            q.push(l.len() as u8);
            q.extend_from_slice(l.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&[0, 1]);
        dns_answer(&q).unwrap()
    };
    let a = query("files.test", 1);
    assert_eq!((a[3] & 0xf, u16::from_be_bytes([a[6], a[7]])), (0, 1));
    assert_eq!(&a[a.len() - 4..], &[198, 51, 100, 80]);
    let aaaa = query("files.test", 28);
    let ip: [u8; 16] = aaaa[aaaa.len() - 16..].try_into().unwrap();
    assert_eq!(IpAddr::from(ip).to_string(), "2001:db8::80");
    let none = query("v4only.test", 28);
    assert_eq!((none[3] & 0xf, u16::from_be_bytes([none[6], none[7]])), (0, 0));
    let nx = query("nosuch.test", 1);
    assert_eq!(nx[3] & 0xf, 3);
}
