//! The workloads suite's lookup, stdio and pip jobs (tests/workloads) through
//! the engines: `ctr run` with cordon's shim, `docker run --runtime
//! cordon`, `podman --runtime cordon run`, each under cordon's default
//! policy, the python image.
//!
//! The engines here run containers without a network of their own (no
//! CNI, no bridge), so the job brings its own name server, as Docker's
//! embedded resolver is: on the loopback (127.0.0.11:53, A and AAAA of
//! `files.test`), named in /etc/resolv.conf. Its lookups are glibc's
//! `getaddrinfo` with AF_UNSPEC (both queries at once, by `sendmmsg`),
//! AF_INET and AF_INET6, as urllib, pip and git make them.

use super::*;

/// The job: the name server, three lookups, 64 KiB to stdout, a line to
/// stderr; with the argument `stdin` the length of stdin (the engine's
/// /dev/null: empty; ctr's fifo is never closed, so not there); with
/// `pip` a `pip install` into a venv from a package index the job serves
/// on the loopback by name (`index.test`), then an import of the package,
/// and a `git clone` over HTTP from the same server, its commit checked;
/// with `quiet` (a CRI pod, whose log is the output) not the 64 KiB and
/// the stderr line, but `done` last, then it waits to be stopped.
pub(super) const JOB: &str = r#"
import socket, struct, sys, threading
def serve(srv):
    while True:
        q, a = srv.recvfrom(512)
        i = 12
        while q[i]:
            i += 1 + q[i]
        qtype = struct.unpack(">H", q[i + 1:i + 3])[0]
        end = i + 5
        name = q[12:i].lower()
        if name == b"\x05index\x04test":
            rdata = {1: socket.inet_pton(socket.AF_INET, "127.0.0.1")}.get(qtype)
        else:
            rdata = {1: socket.inet_pton(socket.AF_INET, "192.0.2.10"),
                     28: socket.inet_pton(socket.AF_INET6, "2001:db8::10")}.get(qtype)
        head = q[:2] + b"\x81\x80" + q[4:6] + struct.pack(">HHH", 1 if rdata else 0, 0, 0)
        ans = b"\xc0\x0c" + struct.pack(">HHIH", qtype, 1, 60, len(rdata)) + rdata if rdata else b""
        srv.sendto(head + q[12:end] + ans, a)
srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
srv.bind(("127.0.0.11", 53))
threading.Thread(target=serve, args=(srv,), daemon=True).start()
with open("/etc/resolv.conf", "w") as f:
    f.write("nameserver 127.0.0.11\n")

for fam in (socket.AF_UNSPEC, socket.AF_INET, socket.AF_INET6):
    print(sorted({a[4][0] for a in socket.getaddrinfo("files.test", 443, fam, socket.SOCK_STREAM)}))
if "quiet" not in sys.argv[1:]:
    sys.stdout.write("x" * 65536 + "\n")
    sys.stdout.flush()
    sys.stderr.write("to stderr\n")
if "stdin" in sys.argv[1:]:
    print("stdin", len(sys.stdin.read()))
if "pip" in sys.argv[1:]:
    import functools, http.server, os, subprocess, zipfile
    d = "/tmp/www/simple/hello-cordon/"
    os.makedirs(d)
    whl = "hello_cordon-1.0-py3-none-any.whl"
    with zipfile.ZipFile(d + whl, "w") as z:
        z.writestr("hello_cordon/__init__.py", "VALUE = 'cordon'\n")
        z.writestr("hello_cordon-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: hello-cordon\nVersion: 1.0\n")
        z.writestr("hello_cordon-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: cordon-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("hello_cordon-1.0.dist-info/RECORD", "")
    open(d + "index.html", "w").write('<a href="%s">%s</a>\n' % (whl, whl))
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass
    handler = functools.partial(Quiet, directory="/tmp/www")
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), handler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    run = lambda *a: subprocess.run(a, capture_output=True, text=True)
    v = run(sys.executable, "-m", "venv", "/tmp/v")
    p = run("/tmp/v/bin/pip", "install", "-q", "--disable-pip-version-check", "--no-cache-dir",
            "--index-url", "http://index.test:8000/simple", "--trusted-host", "index.test", "hello-cordon")
    print("pip", v.returncode, p.returncode, p.stderr.strip()[-300:])
    print(run("/tmp/v/bin/python", "-c", "import hello_cordon; print(hello_cordon.VALUE)").stdout.strip())
    # git: a repository served the "dumb" HTTP way by the same server.
    git = lambda *a: run("git", "-c", "init.defaultBranch=main", "-c", "user.name=c", "-c", "user.email=c@example.com", *a)
    made = [git("init", "-q", "/tmp/src"), git("-C", "/tmp/src", "commit", "-q", "--allow-empty", "-m", "first"),
            git("clone", "-q", "--bare", "/tmp/src", "/tmp/www/repo.git"), git("-C", "/tmp/www/repo.git", "update-server-info")]
    clone = git("clone", "-q", "http://index.test:8000/repo.git", "/tmp/clone")
    same = git("-C", "/tmp/clone", "rev-parse", "HEAD").stdout == git("-C", "/tmp/src", "rev-parse", "HEAD").stdout
    print("git", [m.returncode for m in made], clone.returncode, clone.stderr.strip()[-300:], same)
if "quiet" in sys.argv[1:]:
    print("done", flush=True)
    threading.Event().wait()  # a pod's container runs on until stopped
"#;

/// What the job prints, as under runc (`stdin`: it was asked to read it;
/// the pip install's lines follow).
fn expected(stdin: bool) -> String {
    format!(
        "['192.0.2.10', '2001:db8::10']\n['192.0.2.10']\n['2001:db8::10']\n{}\n{}pip 0 0 \ncordon\ngit [0, 0, 0, 0] 0  True\n",
        "x".repeat(65536),
        if stdin { "stdin 0\n" } else { "" }
    )
}

/// Asserts `r` is the job's run as runc gives it (each test checks runc's
/// own run with it too): exit 0, its stdout, its stderr line.
fn assert_job(engine: &str, r: &Ran, stdin: bool, diag: impl Fn() -> String) {
    assert!(
        r.success() && r.stdout == expected(stdin) && r.stderr.contains("to stderr"),
        "{engine}: the job's run is not runc's\n{}\n{}",
        // The 64 KiB line shortened.
        r.to_string().replace(&"x".repeat(65536), "x*65536"),
        diag()
    );
}

/// A network namespace of the test's (`ip netns add`), its loopback up,
/// as a CNI plugin leaves one; deleted on drop.
struct Netns(String);

impl Netns {
    fn new() -> Self {
        let name = unique("wl-ns");
        for args in [
            vec!["netns", "add", name.as_str()],
            vec!["-n", name.as_str(), "link", "set", "lo", "up"],
        ] {
            let r = run_timeout(Command::new("ip").args(&args), CMD_TIMEOUT);
            assert!(r.success(), "{r}");
        }
        Netns(name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run_timeout(Command::new("ip").args(["netns", "del", &self.0]), CMD_TIMEOUT);
    }
}

/// `ctr run` through runc's shim, then `io.containerd.cordon.v2`, in a network namespace
/// of the test's (ctr brings no CNI; a new namespace's loopback is down).
#[test]
fn ctr_runs_the_lookup_and_stdio_jobs() {
    let _g = serial();
    let c = Containerd::start();
    require_shim(&c);
    c.import_image(NS, "cordon-python");
    let ns = Netns::new();
    let with_ns = format!("network:/run/netns/{}", ns.0);
    // runc (containerd's default runtime), then cordon's shim.
    for flags in [vec![], c.shim_flags()] {
        let id = unique("wl-ctr");
        let mut args: Vec<String> = vec!["run".into(), "--rm".into(), "--with-ns".into(), with_ns.clone()];
        let engine = if flags.is_empty() {
            "ctr (runc)"
        } else {
            "ctr (cordon's shim)"
        };
        args.extend(flags);
        args.push("docker.io/library/cordon-python:latest".into());
        args.push(id.clone());
        args.extend(["python3", "-c", JOB, "pip"].iter().map(|s| s.to_string()));
        let r = c.ctr(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_job(engine, &r, false, || c.diagnostics());
        c.assert_gone(&id);
    }
}

/// `docker run --runtime runc|cordon --network none` (Docker's own set-up:
/// resolv.conf bind-mounted, the loopback up).
#[test]
fn docker_runs_the_lookup_and_stdio_jobs() {
    let _g = serial();
    let d = Dockerd::start(DockerRuntime::AddRuntime);
    let t = bundle_tar(d.dir(), &cordon_tests::python_bundle());
    let cmd = r#"CMD ["python3"]"#;
    let imp = d.docker(&["import", "-c", cmd, &t.to_string_lossy(), "cordon-python"]);
    assert!(imp.success(), "docker import failed\n{imp}\n{}", d.diagnostics());
    for runtime in ["runc", "cordon"] {
        let cid = d.dir().join(unique("cid"));
        let cid_s = cid.to_string_lossy().into_owned();
        let r = d.docker(&[
            "run",
            "--rm",
            "--runtime",
            runtime,
            "--network",
            "none",
            "--cidfile",
            &cid_s,
            "cordon-python",
            "python3",
            "-c",
            JOB,
            "stdin",
            "pip",
        ]);
        assert_job(&format!("docker ({runtime})"), &r, true, || d.diagnostics());
        if runtime == "cordon" {
            d.assert_gone(&read_id(&cid).expect("docker wrote no --cidfile"));
        }
    }
}

/// `podman --runtime runc|cordon run --network none`.
#[test]
fn podman_runs_the_lookup_and_stdio_jobs() {
    let _g = serial();
    let p = Podman::new(PodmanConf::Empty);
    let t = bundle_tar(p.dir(), &cordon_tests::python_bundle());
    let imp = p.podman(&["import", &t.to_string_lossy(), "cordon-python"]);
    assert!(imp.success(), "podman import failed\n{imp}");
    let cordon = p.cordon.to_string_lossy().into_owned();
    for runtime in ["runc", cordon.as_str()] {
        let cid = p.dir().join(unique("cid"));
        let cid_s = cid.to_string_lossy().into_owned();
        let mut args = vec!["--runtime", runtime, "run", "--rm", "--cidfile", &cid_s];
        args.extend_from_slice(&PODMAN_RUN_FLAGS);
        args.extend_from_slice(&["cordon-python", "python3", "-c", JOB, "stdin", "pip"]);
        let r = p.podman(&args);
        assert_job(&format!("podman ({runtime})"), &r, true, String::new);
        if runtime != "runc" {
            p.assert_gone(&read_id(&cid).expect("podman wrote no --cidfile"));
        }
    }
}
