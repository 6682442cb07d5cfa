//! `action = "ask"`: the supervisor holds a connect and asks the
//! runtime config's decision program (`[ask] socket`).

use std::collections::VecDeque;
use std::io::BufRead;
use std::os::unix::net::UnixListener;

use super::live::{round, LOOP};
use super::*;

/// The rules the trail names for each connect, in order.
fn connect_rules(trail: &[serde_json::Value]) -> Vec<&str> {
    trail
        .iter()
        .filter(|r| r["syscall"] == "connect")
        .filter_map(|r| r["rule"].as_str())
        .collect()
}

/// A decision program: answers each question with the next line of
/// `answers` (the last one again once they run out) and keeps the
/// questions. Stops with the test.
struct Program {
    socket: std::path::PathBuf,
    questions: Arc<Mutex<Vec<serde_json::Value>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Program {
    fn new(dir: &std::path::Path, answers: &[&'static str]) -> Self {
        let socket = dir.join("ask.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        listener.set_nonblocking(true).unwrap();
        let questions = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut answers: VecDeque<&'static str> = answers.iter().copied().collect();
        let (q, st) = (Arc::clone(&questions), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                };
                conn.set_nonblocking(false).unwrap();
                let mut line = String::new();
                std::io::BufReader::new(&conn).read_line(&mut line).unwrap();
                q.lock().unwrap().push(serde_json::from_str(&line).unwrap());
                let answer = if answers.len() > 1 {
                    answers.pop_front().unwrap()
                } else {
                    answers[0]
                };
                let _ = writeln!(conn, "{answer}");
            }
        });
        Program {
            socket,
            questions,
            stop,
            thread: Some(thread),
        }
    }

    fn asked(&self) -> Vec<serde_json::Value> {
        self.questions.lock().unwrap().clone()
    }

    /// The path questions asked, "SYSCALL PATH" each.
    fn asked_paths(&self) -> Vec<String> {
        self.asked()
            .iter()
            .map(|q| {
                format!(
                    "{} {}",
                    q["syscall"].as_str().unwrap_or("?"),
                    q["path"].as_str().unwrap_or("?")
                )
            })
            .collect()
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A container under a deny-by-default policy asks for allowed.test: a
/// deny answer refuses once, an allow-and-remember answer lets the
/// connection through and the next one is not asked again; a policy
/// update without the rule refuses it; without an answer in time the
/// call is denied.
#[test]
fn ask_rules_hold_the_connect_until_the_program_answers() {
    let net = TestNet::new();
    let dir = TempDir::new("ask");
    let program = Program::new(
        dir.path(),
        &[r#"{"answer":"deny"}"#, r#"{"answer":"allow","remember":true}"#],
    );
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[ask]\nsocket = {:?}\ntimeout_ms = 20000\n", program.socket),
    )
    .unwrap();
    let mut env = Env::python(&["python3", "-c", LOOP]);
    env.config_file = Some(config);
    net.configure(
        &mut env,
        "[[net]]\nhost = \"allowed.test\"\nports = [8080]\naction = \"ask\"\n\n[[net]]\nhost = \"alias.test\"\naction = \"allow\"\n",
    );
    let shared = TempDir::new("ask-shared");
    env.config["mounts"].as_array_mut().unwrap().push(serde_json::json!({
        "destination": "/shared", "type": "bind", "source": shared.path(), "options": ["rbind", "rw"]
    }));
    let id = unique("ask");
    ok(&env.create(&id));
    ok(&env.cordon(&["start", &id]));

    assert_eq!(round(shared.path(), 1, "allowed.test"), "err EPERM", "answered deny");
    assert_eq!(program.asked().len(), 1);
    assert_eq!(
        round(shared.path(), 2, "allowed.test"),
        "ok",
        "answered allow and remember"
    );
    assert_eq!(program.asked().len(), 2, "a deny answered once is asked again");
    assert_eq!(round(shared.path(), 3, "allowed.test"), "ok", "remembered");
    assert_eq!(program.asked().len(), 2, "a remembered answer is not asked again");
    let q = &program.asked()[1];
    assert_eq!(q["container"], id.as_str());
    assert_eq!(q["syscall"], "connect");
    assert_eq!(q["host"], "allowed.test");
    assert_eq!(q["address"], "192.0.2.1");
    assert_eq!(q["port"], 8080);
    assert_eq!(q["rule"], "net[0] allowed.test");
    assert!(q["command"].as_str().unwrap().starts_with("python3 -c"), "{q}");
    let trail = env.audit(&id);
    let rules = connect_rules(&trail);
    assert_eq!(
        rules,
        [
            "net[0] allowed.test (asked: deny)",
            "net[0] allowed.test (asked: allow, remembered)",
            "net[0] allowed.test (remembered)"
        ],
        "{trail:?}"
    );

    let without = dir.path().join("without.toml");
    std::fs::write(
        &without,
        "name = \"without\"\nextends = \"default\"\nnet_default = \"deny\"\n[[net]]\nhost = \"alias.test\"\naction = \"allow\"\n",
    )
    .unwrap();
    ok(&env.cordon(&["policy", "update", &id, &without.to_string_lossy()]));
    assert_eq!(
        round(shared.path(), 4, "192.0.2.1"),
        "err EPERM",
        "the update took the rule away: the remembered answer no longer applies"
    );
    assert_eq!(program.asked().len(), 2);
    let trail = env.audit(&id);
    let last = trail.iter().rev().find(|r| r["syscall"] == "connect").unwrap();
    assert_eq!(
        last["rule"], "net_default (no rule allows the name allowed.test)",
        "{last}"
    );
}

/// With no program listening, and with one that never answers, the call
/// is denied, and the trail says why.
#[test]
fn ask_without_an_answer_denies() {
    let net = TestNet::new();
    let dir = TempDir::new("ask-none");
    let socket = dir.path().join("silent.sock");
    // Accepts (in its backlog) and never answers.
    let _silent = UnixListener::bind(&socket).unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, format!("[ask]\nsocket = {socket:?}\ntimeout_ms = 300\n")).unwrap();
    let script = r#"
import errno, socket
for target in ["192.0.2.1", "192.0.2.3"]:
    try:
        socket.create_connection((target, 8080), timeout=5).close()
        print(target, "ok")
    except OSError as e:
        print(target, "err", errno.errorcode.get(e.errno, str(e.errno)))
"#;
    let mut env = Env::python(&["python3", "-c", script]);
    env.config_file = Some(config);
    net.configure(
        &mut env,
        "[[net]]\ncidr = \"192.0.2.1/32\"\naction = \"ask\"\n\n[[net]]\nhost = \"alias.test\"\naction = \"allow\"\n",
    );
    let id = unique("ask-none");
    let out = env.run_keep(&id);
    assert_eq!(ok(&out), "192.0.2.1 err EPERM\n192.0.2.3 err EPERM\n");
    let trail = env.audit(&id);
    let rules = connect_rules(&trail);
    assert_eq!(
        rules,
        [
            "net[0] 192.0.2.1/32 (no answer (timeout 300 ms): deny)",
            "net_default (no rule allows the address 192.0.2.3)"
        ]
    );
}

/// A denial says which part failed, the JSON trail carries the
/// destination as fields, and `audit --last` gives the last denial with
/// the message of the rule that refused it.
#[test]
fn denials_say_which_part_failed_and_carry_the_rules_message() {
    let net = TestNet::new();
    let script = r#"
import errno, socket
socket.getaddrinfo("allowed.test", 8080, socket.AF_INET)
for target, port in [("192.0.2.1", 8080), ("192.0.2.1", 9090), ("192.0.2.3", 8080)]:
    try:
        socket.create_connection((target, port), timeout=5).close()
        print(target, port, "ok")
    except OSError as e:
        print(target, port, "err", errno.errorcode.get(e.errno, str(e.errno)))
"#;
    let mut env = Env::python(&["python3", "-c", script]);
    net.configure(
        &mut env,
        "[[net]]\nhost = \"allowed.test\"\nports = [8080]\naction = \"allow\"\n\n\
         [[net]]\ncidr = \"192.0.2.3/32\"\naction = \"deny\"\nmessage = \"server-b is off limits: ask the operator\"\n",
    );
    let id = unique("why");
    let out = env.run_keep(&id);
    assert_eq!(
        ok(&out),
        "192.0.2.1 8080 ok\n192.0.2.1 9090 err EPERM\n192.0.2.3 8080 err EPERM\n"
    );
    // Whole: the supervisor's last records (a relayed connection's end,
    // the init's exit) may land a moment after `run` returned.
    let trail = env.audit_with(&id, "the init's exit", |r| r["result"] == "exit");
    let port = trail
        .iter()
        .find(|r| r["syscall"] == "connect" && r["port"] == 9090)
        .unwrap_or_else(|| panic!("the JSON record has the port as a field: {trail:?}"));
    assert_eq!(port["container"], id.as_str());
    assert_eq!(port["host"], "allowed.test");
    assert_eq!(port["address"], "192.0.2.1");
    assert_eq!(
        port["rule"],
        "net_default (port 9090 not allowed: net[0] allowed.test allows ports 8080)"
    );
    let last: serde_json::Value = serde_json::from_str(&ok(&env.cordon(&["audit", "--last", "--json", &id]))).unwrap();
    assert_eq!(last["rule"], "net[1] 192.0.2.3/32");
    assert_eq!(last["address"], "192.0.2.3");
    assert_eq!(last["message"], "server-b is off limits: ask the operator");
    // The same decisions as runc-style events, ending with the init's exit.
    let events: Vec<serde_json::Value> = ok(&env.cordon(&["events", "--audit", &id]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(events.iter().all(|e| e["type"] == "audit" && e["id"] == id.as_str()));
    assert_eq!(events.len(), trail.len());
    assert!(events
        .iter()
        .any(|e| e["data"]["port"] == 9090 && e["data"]["host"] == "allowed.test"));
    assert_eq!(events.last().unwrap()["data"]["result"], "exit");
    let text = ok(&env.cordon(&["audit", "--last", &id]));
    assert!(
        text.ends_with("\nmessage: server-b is off limits: ask the operator\n"),
        "{text}"
    );
}

/// In `dir`: a decision program that answers allow-and-remember, then
/// deny; a runtime config naming it; a policy asking about `/data/**`.
fn allow_then_deny(dir: &std::path::Path) -> (Program, std::path::PathBuf, std::path::PathBuf) {
    let program = Program::new(dir, &[r#"{"answer":"allow","remember":true}"#, r#"{"answer":"deny"}"#]);
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!("[ask]\nsocket = {:?}\ntimeout_ms = 20000\n", program.socket),
    )
    .unwrap();
    let policy = dir.join("p.toml");
    std::fs::write(
        &policy,
        "name = \"askp\"\nextends = \"default\"\n[[path]]\npattern = \"/data/**\"\naccess = \"ask\"\n",
    )
    .unwrap();
    (program, config, policy)
}

/// `access = "ask"` on a path rule: an open or a change of the tree on a
/// path the rule decides waits for the program; allow-and-remember lets
/// the next open through unasked, deny gives EACCES, a missing file
/// ENOENT before anything is asked. The question names the path and the
/// rule.
#[test]
fn ask_path_rules_hold_the_open_until_the_program_answers() {
    let dir = TempDir::new("ask-path");
    let (program, config, policy) = allow_then_deny(dir.path());
    let data = TempDir::new("ask-data");
    std::fs::write(data.path().join("ok"), "yes\n").unwrap();
    std::fs::write(data.path().join("secret"), "no\n").unwrap();
    let script = r#"
import errno, os
for p in ["/data/ok", "/data/secret", "/data/ok", "/data/new"]:
    try:
        print(p, open(p).read().strip())
    except OSError as e:
        print(p, "err", errno.errorcode[e.errno])
try:
    os.mkdir("/data/d")
    print("mkdir ok")
except OSError as e:
    print("mkdir err", errno.errorcode[e.errno])
"#;
    let mut env = Env::python(&["python3", "-c", script]);
    env.config_file = Some(config);
    env.set_policy(&policy.to_string_lossy());
    env.config["mounts"].as_array_mut().unwrap().push(serde_json::json!({
        "destination": "/data", "type": "bind", "source": data.path(), "options": ["rbind", "rw"]
    }));
    let id = unique("askpath");
    let out = env.run_keep(&id);
    assert_eq!(
        ok(&out),
        "/data/ok yes\n/data/secret err EACCES\n/data/ok yes\n/data/new err ENOENT\nmkdir err EACCES\n"
    );
    assert_eq!(
        program.asked_paths(),
        ["openat /data/ok", "openat /data/secret", "mkdir /data/d"],
        "{:?}",
        program.asked()
    );
    let q = &program.asked()[0];
    assert_eq!(q["rule"], "path[0] \"/data/**\" ask");
    assert_eq!(q["container"], id.as_str());
    assert!(q.get("address").is_none() && q.get("port").is_none(), "{q}");
    let state = env.state(&id);
    assert_eq!(state["annotations"]["org.cordon.enforcement"], "supervisor", "{state}");
}

/// `access = "ask"` covers the exec of a file too: the exec guard holds
/// it in the kernel until the program answers. Allow-and-remember runs
/// the program and its next exec is not asked again; deny refuses the
/// exec (EPERM: the shell's 126), and the trail records both answers.
#[test]
fn ask_path_rules_hold_the_exec_until_the_program_answers() {
    let dir = TempDir::new("ask-exec");
    let (program, config, policy) = allow_then_deny(dir.path());
    // busybox, whose applet is its name, in two directories.
    let data = TempDir::new("ask-exec-data");
    for sub in ["yes", "no"] {
        std::fs::create_dir_all(data.path().join(sub)).unwrap();
        std::fs::copy(
            busybox_bundle().join("rootfs/bin/busybox"),
            data.path().join(sub).join("echo"),
        )
        .unwrap();
    }
    let script = "/data/yes/echo one; echo yes=$?; /data/no/echo two 2>/dev/null; echo no=$?; \
                  /data/yes/echo three; echo again=$?";
    let mut env = Env::busybox(&["sh", "-c", script]);
    env.config_file = Some(config);
    env.set_policy(&policy.to_string_lossy());
    env.config["mounts"].as_array_mut().unwrap().push(serde_json::json!({
        "destination": "/data", "type": "bind", "source": data.path(), "options": ["rbind", "ro"]
    }));
    let id = unique("askexec");
    let out = env.run_keep(&id);
    assert_eq!(ok(&out), "one\nyes=0\nno=126\nthree\nagain=0\n", "{}", stderr(&out));
    assert_eq!(
        program.asked_paths(),
        ["execve /data/yes/echo", "execve /data/no/echo"],
        "{:?}",
        program.asked()
    );
    assert_eq!(program.asked()[0]["rule"], "path[0] \"/data/**\" ask");
    let trail = env.audit(&id);
    let execs: Vec<String> = trail
        .iter()
        .filter(|r| r["syscall"] == "execve" && r["detail"].as_str().is_some_and(|d| d.starts_with("/data/")))
        .map(|r| {
            format!(
                "{} {} {}",
                r["detail"].as_str().unwrap(),
                r["action"].as_str().unwrap(),
                r["result"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        execs,
        [
            "/data/yes/echo allow asked: allow, remembered: exec",
            "/data/no/echo deny asked: deny: EPERM",
            "/data/yes/echo allow remembered: exec"
        ],
        "{trail:?}"
    );
    let _ = env.cordon(&["delete", "--force", &id]);
}
