//! `cordon ask SOCKET`: the reference decision program of `ask` rules
//! (docs/POLICY.md, "Ask"). It listens on SOCKET (the runtime config's
//! `[ask] socket`), prints each question on stdout and reads the answer
//! from stdin, one line per question: `y` (allow once), `a` (allow, and
//! remember for the container), `n` (deny once), `N` (deny and
//! remember). End of input stops it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

use anyhow::Context;

/// `ask` arguments.
#[derive(clap::Args, Debug)]
pub struct AskArgs {
    /// The socket to listen on (created; a stale one is replaced)
    pub socket: PathBuf,
}

/// The answer line for what the user typed, or `None` to ask again.
fn answer_for(typed: &str) -> Option<&'static str> {
    Some(match typed.trim() {
        "y" | "Y" | "yes" => r#"{"answer":"allow"}"#,
        "a" | "always" => r#"{"answer":"allow","remember":true}"#,
        "n" | "no" => r#"{"answer":"deny"}"#,
        "N" | "never" => r#"{"answer":"deny","remember":true}"#,
        _ => return None,
    })
}

/// One line describing a question (its JSON, as the supervisor sent it).
fn describe(question: &str) -> String {
    // Every field comes from the container (its command line, the names
    // it looked up): control characters are shown escaped, never sent to
    // the terminal.
    let Ok(q) = serde_json::from_str::<serde_json::Value>(question) else {
        return super::policy::escaped(question.trim()).into_owned();
    };
    let s = |k: &str| super::policy::escaped(q[k].as_str().unwrap_or("")).into_owned();
    let dest = match (q["path"].as_str(), q["host"].as_str()) {
        (Some(_), _) => s("path"),
        (None, Some(h)) => format!("{h} ({}):{}", s("address"), q["port"]),
        (None, None) => format!("{}:{}", s("address"), q["port"]),
    };
    format!(
        "container {} pid {} ({}): {} {dest} by {}",
        s("container"),
        q["pid"],
        s("command"),
        s("syscall"),
        s("rule")
    )
}

/// Serves questions until stdin ends.
pub fn ask(args: AskArgs) -> anyhow::Result<i32> {
    let _ = std::fs::remove_file(&args.socket);
    let listener = UnixListener::bind(&args.socket).with_context(|| format!("bind {}", args.socket.display()))?;
    std::fs::set_permissions(&args.socket, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("chmod {}", args.socket.display()))?;
    let mut stdin = std::io::stdin().lock();
    let mut out = std::io::stdout();
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let mut question = String::new();
        if BufReader::new(&conn).read_line(&mut question).is_err() || question.trim().is_empty() {
            continue;
        }
        let answer = loop {
            write!(out, "{}\nallow? [y]es, [a]lways, [n]o, [N]ever: ", describe(&question))?;
            out.flush()?;
            let mut typed = String::new();
            if stdin.read_line(&mut typed)? == 0 {
                let _ = std::fs::remove_file(&args.socket);
                return Ok(0);
            }
            if let Some(a) = answer_for(&typed) {
                break a;
            }
        };
        writeln!(out)?;
        let _ = conn.write_all(format!("{answer}\n").as_bytes());
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn questions_read_as_one_line() {
        let net = r#"{"container":"c","pid":4,"command":"curl x","syscall":"connect","host":"a.test","address":"192.0.2.1","port":443,"rule":"net[0] a.test"}"#;
        assert_eq!(
            super::describe(net),
            "container c pid 4 (curl x): connect a.test (192.0.2.1):443 by net[0] a.test"
        );
        let path = r#"{"container":"c","pid":4,"command":"cat /data/r","syscall":"openat","path":"/data/r\u001b","rule":"path[0] \"/data/**\" ask"}"#;
        let line = super::describe(path);
        assert!(
            line.starts_with("container c pid 4 (cat /data/r): openat /data/r"),
            "{line}"
        );
        assert!(!line.contains('\u{1b}'), "control characters escaped: {line:?}");
    }
}
