//! cordon's own commands: `policy show|check|diff|update`, `audit`, `syscalls`.

use std::collections::BTreeMap;
use std::io::{BufRead, Seek};
use std::path::Path;

use anyhow::Context;
use cordon::abi::table;
use cordon::policy::{Action, Policy};
use cordon::supervisor::audit::Record;

use super::{AuditArgs, PolicyCmd, SyscallsArgs};

/// `policy show|check|update`; `configured` is the global `--policy`,
/// which `show` without a name prints before the runtime config's; `rt`
/// gives the runtime `update` acts in.
pub fn policy(
    cmd: PolicyCmd,
    configured: Option<&str>,
    rt: impl FnOnce() -> anyhow::Result<cordon::container::Runtime>,
) -> anyhow::Result<i32> {
    match cmd {
        PolicyCmd::Show {
            policy,
            json,
            explain,
            bundle,
        } => {
            let name = match policy.or(configured.map(str::to_string)) {
                Some(p) => p,
                None => cordon::config::RuntimeConfig::load()?.policy,
            };
            let p = cordon::filter::load_policy(&name)?;
            if explain {
                let plan = match &bundle {
                    Some(b) => cordon::container::plan_for_bundle(&p, cordon::policy::Enforcement::Kernel, b)?,
                    None => p.plan(
                        cordon::policy::Enforcement::Kernel,
                        &["/proc".to_string(), "/sys".to_string()],
                    ),
                };
                print!("{}", explain_text(&p, &plan));
            } else if json {
                println!("{}", serde_json::to_string_pretty(&p.source)?);
            } else {
                print!("{}", toml::to_string_pretty(&p.source).context("render policy")?);
            }
        }
        PolicyCmd::Check { file } => {
            let p = cordon::filter::load_policy(&file)?;
            for w in p.shadowed_paths().into_iter().chain(p.net_order_warnings()) {
                eprintln!("cordon: warning: policy {file}: {w}");
            }
            if let Some(n) = metadata_note(&p) {
                eprintln!("cordon: note: policy {file}: {n}");
            }
            let intercepted = p
                .rules
                .values()
                .flatten()
                .filter(|r| matches!(r.action, Action::Emulate | Action::Audit))
                .count();
            println!(
                "{file}: ok (policy {:?}: {} syscall rules, {} path rules, {} intercepted)",
                p.name,
                p.rules.values().map(Vec::len).sum::<usize>(),
                p.source.paths.len(),
                intercepted
            );
        }
        PolicyCmd::Update { container_id, policy } => rt()?.update_policy(&container_id, &policy)?,
        PolicyCmd::Diff { a, b } => {
            let lines =
                cordon::policy::diff::diff(&cordon::filter::load_policy(&a)?, &cordon::filter::load_policy(&b)?);
            for (mark, line) in &lines {
                println!("{mark} {line}");
            }
            return Ok(i32::from(!lines.is_empty()));
        }
    }
    Ok(0)
}

/// What the policy's `deny` rules on directories (`D/**`) leave visible
/// of what they cover, for `policy check`: content is refused at every
/// level, but metadata reads the filter leaves to the kernel still
/// answer at the supervisor level and under Landlock (docs/POLICY.md,
/// "What each level refuses"). `None` without such a rule.
fn metadata_note(p: &Policy) -> Option<String> {
    // The built-in floor's own (/sys/firmware) is left out: every policy
    // extending `default` has it.
    let floor: Vec<String> = cordon::policy::BUILTIN
        .iter()
        .find(|(n, _)| *n == "default")
        .and_then(|(_, src)| Policy::from_toml(src, "default").ok())
        .map(|d| d.source.paths.into_iter().map(|r| r.pattern).collect())
        .unwrap_or_default();
    let denies: Vec<String> = p
        .source
        .paths
        .iter()
        .enumerate()
        .filter(|(_, r)| r.access == cordon::policy::model::PathAccess::Deny && r.pattern.ends_with("/**"))
        .filter(|(_, r)| r.pattern != "/**" && !floor.contains(&r.pattern))
        .map(|(i, r)| format!("path[{i}] {:?}", r.pattern))
        .collect();
    if denies.is_empty() {
        return None;
    }
    let emulated = |name: &str| table::number(name).is_some_and(|nr| p.decide(nr, &[0; 6]).0 == Action::Emulate);
    let hidden = if emulated("newfstatat") && emulated("readlink") {
        "stat and readlink are refused (the policy emulates them); xattr reads, statfs and inotify watches still answer"
    } else {
        "stat, readlink (a symlink's target), xattr reads, statfs and inotify watches still answer (emulating the Fs group refuses stat and readlink)"
    };
    Some(format!(
        "the deny rules on directories ({}) refuse content at every level; where the kernel level masks an existing directory with a mount nothing below shows, but at the supervisor level and under Landlock {hidden} (docs/POLICY.md, \"What each level refuses\")",
        denies.join(", ")
    ))
}

/// `policy show --explain`: the level of each path rule in `plan` (for a
/// given bundle, or one that mounts proc at /proc and sysfs at /sys, as
/// `cordon spec`'s and the engines' do, with nothing else known to
/// exist), and what that leaves with the supervisor.
fn explain_text(p: &Policy, plan: &cordon::policy::levels::Plan) -> String {
    use cordon::policy::levels::{Level, Mount};
    use std::fmt::Write;
    let mut out = String::new();
    for (c, r) in plan.choices.iter().zip(&p.source.paths) {
        let access = serde_json::to_value(r.access).ok();
        let access = access.as_ref().and_then(|v| v.as_str()).unwrap_or("?");
        let level = match (c.level, &c.mount) {
            (Level::Mounts, Some((Mount::Mask, _))) => "mounts: mask",
            (Level::Mounts, _) => "mounts: read-only bind",
            (Level::Landlock, _) => "landlock",
            (Level::Covered, _) => "covered",
            (Level::Supervisor, _) => "supervisor",
        };
        let _ = writeln!(out, "path[{}] {} {access}: {level} ({})", c.rule, c.pattern, c.why);
    }
    let files = if plan.landlock.is_some() {
        "file syscalls stay in the kernel (Landlock and the mounts), except metadata changes (and readlink, when the policy emulates it), which the supervisor decides under the same rules"
    } else if plan.all_kernel {
        "file syscalls stay in the kernel: opens, metadata and tree changes are not sent to the supervisor"
    } else {
        "file syscalls go to the supervisor, as the policy's emulate rules say (org.cordon.enforcement = \"supervisor\" does the same for any policy)"
    };
    let _ = writeln!(out, "{files}");
    for (i, r) in p.source.net.iter().enumerate() {
        let action = match r.action {
            cordon::policy::NetAction::Allow => "allow",
            cordon::policy::NetAction::Deny => "deny",
            cordon::policy::NetAction::Ask => "ask",
        };
        let ports = if r.ports.is_empty() {
            String::new()
        } else {
            format!(
                " ports {}",
                r.ports.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(",")
            )
        };
        let level = if r.host.is_some() {
            "supervisor (its resolver answers the name; connect, sendto and sendmsg are decided on the addresses it answered, for their TTL)"
        } else {
            "supervisor (connect, sendto and sendmsg decided on a copy of the address)"
        };
        let _ = writeln!(out, "net[{i}] {}{ports} {action}: {level}", r.target());
    }
    if p.net.has_names() {
        let _ = writeln!(
            out,
            "lookups go to the supervisor's resolver (/etc/resolv.conf is cordon's); ports 53 and 853 reach nothing else"
        );
    }
    out
}

/// Prints one record of container `id`'s trail: as text, or as a JSON
/// line with the container's id and, for a network decision, its `host`,
/// `address` and `port` as fields of their own.
fn print_record(id: &str, r: &Record, json: bool) {
    if json {
        let json = serde_json::to_string(&record_json(id, r)).unwrap_or_default();
        println!("{}", cordon::supervisor::audit::escape_c1(&json));
    } else {
        let by = r
            .rule
            .as_deref()
            .map(|rule| format!(" by {}", escaped(rule)))
            .unwrap_or_default();
        println!(
            "{} pid={} {} {} -> {} ({}{by})",
            r.time,
            r.pid,
            escaped(&r.syscall),
            escaped(&r.detail),
            escaped(&r.result),
            escaped(&r.action)
        );
    }
}

/// Record `r` of container `id`'s trail as JSON, with the container's id
/// and, for a network decision, `host`, `address` and `port`.
fn record_json(id: &str, r: &Record) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    v["container"] = id.into();
    if let Some((host, address, port)) = r.destination() {
        if let Some(h) = host {
            v["host"] = h.into();
        }
        v["address"] = address.to_string().into();
        v["port"] = port.into();
    }
    v
}

/// The `message` of the rule a record names (`net[3] ...`, `path[0]
/// ...`, `syscall[2]...`), from container `id`'s policy as it is now
/// (its kept `policy.toml`); `None` without one.
fn rule_message(root: &Path, id: &str, rule: Option<&str>) -> Option<String> {
    let rule = rule?;
    let (kind, rest) = rule.split_once('[')?;
    let index: usize = rest.split_once(']')?.0.parse().ok()?;
    let text =
        std::fs::read_to_string(cordon::container::cordon_dir(root, id).join(cordon::container::POLICY_FILE)).ok()?;
    let policy = Policy::from_toml(&text, cordon::container::POLICY_FILE).ok()?;
    let src = &policy.source;
    match kind {
        "net" => src.net.get(index)?.message.clone(),
        "path" => src.paths.get(index)?.message.clone(),
        "syscall" => src.syscalls.get(index)?.message.clone(),
        _ => None,
    }
}

/// `text` with control characters (newlines, escape sequences, NUL)
/// written as `\n`, `\t` and `\xNN` and backslashes doubled: a record's
/// fields come from the container (paths, addresses), which must not be
/// able to forge lines or drive the terminal.
pub(super) fn escaped(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() || c == '\\') {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.into()
}

pub fn audit(root: &Path, a: AuditArgs) -> anyhow::Result<i32> {
    let (path, file) = open_trail(root, &a.container_id)?;
    if a.last {
        last_denial(root, &a.container_id, &path, a.json)?;
        return Ok(0);
    }
    if a.stats {
        let mut counts: BTreeMap<(String, String, String), u64> = BTreeMap::new();
        // Relayed connections by name: how many, bytes sent, received.
        let mut bytes: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
        for r in cordon::supervisor::audit::read_all(&path)? {
            let name = r.host().unwrap_or("-").to_string();
            if let Some((sent, received)) = cordon::supervisor::relay::closed_bytes(&r.detail) {
                let e = bytes.entry(name.clone()).or_default();
                *e = (e.0 + 1, e.1 + sent, e.2 + received);
            }
            *counts.entry((r.syscall, r.action, name)).or_default() += 1;
        }
        println!("{:<16} {:<8} {:<32} {:>8}", "SYSCALL", "ACTION", "NAME", "COUNT");
        for ((s, act, name), n) in counts {
            println!("{s:<16} {act:<8} {name:<32} {n:>8}");
        }
        if !bytes.is_empty() {
            println!();
            println!(
                "{:<32} {:>11} {:>14} {:>14}",
                "NAME", "CONNECTIONS", "BYTES SENT", "BYTES RECEIVED"
            );
            for (name, (n, sent, received)) in bytes {
                println!("{name:<32} {n:>11} {sent:>14} {received:>14}");
            }
        }
        return Ok(0);
    }
    let id = a.container_id.clone();
    stream_trail(root, &id, &path, file, a.follow, |r| print_record(&id, r, a.json))?;
    Ok(0)
}

/// Container `id`'s audit trail (or the kept one of a deleted
/// container): its path and the file opened for reading.
pub(super) fn open_trail(root: &Path, id: &str) -> anyhow::Result<(std::path::PathBuf, std::fs::File)> {
    cordon::container::validate::id(id)?;
    let mut path = cordon::container::audit_path(root, id);
    if !path.exists() {
        // A deleted container's trail, kept under [audit] dir.
        let retention = cordon::config::RuntimeConfig::load()?.audit;
        if let Some(kept) = retention.find(id) {
            path = kept;
        }
    }
    let file = std::fs::File::open(&path).map_err(|_| {
        anyhow::anyhow!("container {id:?} has no audit trail (no such container, and none kept for it)")
    })?;
    Ok((path, file))
}

/// `audit --last`: container `id`'s last denial in the trail at `path`,
/// with the message of the rule that refused it.
fn last_denial(root: &Path, id: &str, path: &Path, json: bool) -> anyhow::Result<()> {
    let records = cordon::supervisor::audit::read_all(path)?;
    let Some(r) = records.iter().rev().find(|r| r.action == "deny") else {
        return Ok(());
    };
    let message = rule_message(root, id, r.rule.as_deref());
    if json {
        let mut v = record_json(id, r);
        if let Some(m) = &message {
            v["message"] = m.as_str().into();
        }
        println!("{}", cordon::supervisor::audit::escape_c1(&v.to_string()));
    } else {
        print_record(id, r, false);
        if let Some(m) = message {
            println!("message: {}", escaped(&m));
        }
    }
    Ok(())
}

/// Hands every record of container `id`'s trail at `path` (`file`
/// opened on it), the rotated part first, to `emit`; with `follow`, the
/// records still to come too, across restores, until the container's
/// init exits or the container is gone.
fn stream_trail(
    root: &Path,
    id: &str,
    path: &Path,
    file: std::fs::File,
    follow: bool,
    mut emit: impl FnMut(&Record),
) -> anyhow::Result<()> {
    // The rotated part first (the trail is bounded, see supervisor::audit).
    if let Ok(old) = std::fs::read_to_string(cordon::supervisor::audit::rotated(path)) {
        for l in old.lines() {
            if let Ok(r) = serde_json::from_str::<Record>(l) {
                emit(&r);
            }
        }
    }
    let mut reader = std::io::BufReader::new(file);
    let mut line = String::new();
    // A restore stops the container and starts it again on the same
    // trail: its records say when (see `Restore`).
    let mut restore = Restore::default();
    loop {
        line.clear();
        let n = reader.read_line(&mut line)?;
        if n == 0 {
            if !follow || restore.over(root.join(id).exists()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            // Rotated meanwhile: go on with the new file.
            use std::os::unix::fs::MetadataExt;
            let now = std::fs::metadata(path).map(|m| m.ino()).ok();
            if now.is_some() && now != reader.get_ref().metadata().map(|m| m.ino()).ok() {
                if let Ok(f) = std::fs::File::open(path) {
                    reader = std::io::BufReader::new(f);
                }
                continue;
            }
            let pos = reader.stream_position()?;
            reader.seek(std::io::SeekFrom::Start(pos))?;
            continue;
        }
        if let Ok(r) = serde_json::from_str::<Record>(line.trim_end()) {
            emit(&r);
            restore.see(&r);
            // The supervisor's last record: nothing follows it, unless a
            // restore starts the container again.
            if follow && r.syscall == "supervisor" && r.result == "exit" && !restore.running {
                break;
            }
        }
    }
    Ok(())
}

/// `events --audit ID`: the audit trail as runc-style event lines,
/// `{"type":"audit","id":ID,"data":RECORD}` (the record as `audit --json`
/// gives it), from the first record until the container's init exits.
pub fn audit_events(root: &Path, id: &str) -> anyhow::Result<i32> {
    let (path, file) = open_trail(root, id)?;
    stream_trail(root, id, &path, file, true, |r| {
        let event = serde_json::json!({"type": "audit", "id": id, "data": record_json(id, r)});
        println!("{}", cordon::supervisor::audit::escape_c1(&event.to_string()));
    })?;
    Ok(0)
}

/// What `audit --follow` knows of a restore of the container it follows:
/// one runs from its `restore NAME: stopping the container` event until
/// `restarted with a fresh supervisor` or `failed`. The trail file stays
/// the same (renamed away and back), but the container's state directory
/// is gone for a while.
#[derive(Default)]
struct Restore {
    running: bool,
    /// Since when the state directory has been missing during a restore.
    missing: Option<std::time::Instant>,
}

impl Restore {
    /// Takes note of record `r`.
    fn see(&mut self, r: &Record) {
        if r.syscall != "supervisor" || !r.detail.starts_with("restore ") {
            return;
        }
        if r.detail.ends_with(": stopping the container") {
            self.running = true;
        } else if r.detail.ends_with(": restarted with a fresh supervisor") || r.detail.contains(": failed") {
            self.running = false;
        }
    }

    /// Whether following is over at the end of the trail, the container's
    /// state directory existing or not (`exists`): it is gone and no
    /// restore runs, or a restore has left it missing for a minute (the
    /// restoring process died before saying how it ended).
    fn over(&mut self, exists: bool) -> bool {
        if exists {
            self.missing = None;
            return false;
        }
        if !self.running {
            return true;
        }
        let since = *self.missing.get_or_insert_with(std::time::Instant::now);
        since.elapsed() > std::time::Duration::from_secs(60)
    }
}

pub fn syscalls(a: SyscallsArgs) -> anyhow::Result<i32> {
    let p = cordon::filter::load_policy(&a.policy)?;
    let rows: Vec<(u32, &str, String, &table::Entry)> = table::entries()
        .map(|(nr, e)| {
            let rules = p.rules.get(&nr);
            let disp = match rules {
                _ if e.disposition == table::Disposition::Unfiltered => "none (kernel skips seccomp)".to_string(),
                _ if !table::available(nr) => action_name(Action::Deny, libc::ENOSYS),
                None => action_name(p.default_action, p.default_errno),
                Some(rs) if rs.len() == 1 && rs[0].args.is_empty() => action_name(rs[0].action, rs[0].errno),
                Some(rs) => format!(
                    "depends on arguments: {}",
                    rs.iter()
                        .map(|r| action_name(r.action, r.errno))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            (nr, e.name, disp, e)
        })
        .collect();
    match a.format.as_str() {
        "json" => {
            let v: Vec<_> = rows
                .iter()
                .map(|(nr, n, d, e)| {
                    let mut row = serde_json::json!({"nr": nr, "name": n, "action": d});
                    if a.notes {
                        row["disposition"] = e.disposition.label().into();
                        row["note"] = e.note.into();
                    }
                    row
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        "csv" => {
            println!("nr,name,action{}", if a.notes { ",disposition,note" } else { "" });
            for (nr, n, d, e) in rows {
                if a.notes {
                    let note = e.note.replace('"', "\"\"");
                    println!("{nr},{n},\"{d}\",{},\"{note}\"", e.disposition.label());
                } else {
                    println!("{nr},{n},\"{d}\"");
                }
            }
        }
        _ => {
            if a.notes {
                println!(
                    "{:>4} {:<26} {:<32} {:<14} NOTE (policy {})",
                    "NR", "NAME", "ACTION", "DISPOSITION", p.name
                );
                for (nr, n, d, e) in rows {
                    println!("{nr:>4} {n:<26} {d:<32} {:<14} {}", e.disposition.label(), e.note);
                }
            } else {
                println!("{:>4} {:<26} ACTION (policy {})", "NR", "NAME", p.name);
                for (nr, n, d, _) in rows {
                    println!("{nr:>4} {n:<26} {d}");
                }
            }
            println!("   - any other number          deny (ENOSYS); i386 and x32 entry points: ENOSYS");
        }
    }
    Ok(0)
}

fn action_name(a: Action, errno: i32) -> String {
    match a {
        Action::Deny => format!("deny ({})", cordon::errno::name(errno)),
        Action::Allow => "allow".into(),
        Action::Emulate => "emulate".into(),
        Action::Audit => "audit".into(),
        Action::Kill => "kill".into(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn text_records_cannot_forge_lines_or_drive_the_terminal() {
        assert_eq!(super::escaped("/tmp/a b"), "/tmp/a b");
        assert_eq!(
            super::escaped("/x\n2026 pid=1 openat /etc/shadow -> 3 (allow)"),
            "/x\\n2026 pid=1 openat /etc/shadow -> 3 (allow)"
        );
        assert_eq!(super::escaped("\u{1b}[2J\0\\"), "\\x1b[2J\\x00\\\\");
    }
}
