//! The command line as users read it: `--help` where liboci-cli's texts
//! (cordon parses runc's commands with its definitions) are wrong or do not
//! say what cordon does with a flag, and the man pages and bash, zsh and
//! fish completions `make install` installs (`cordon generate-docs DIR`,
//! a hidden command).

use std::fs;
use std::path::Path;

use anyhow::Context;
use clap::{Command, CommandFactory, FromArgMatches};

use super::Cli;

/// (subcommand, argument id, help) for liboci-cli's arguments.
const HELP: &[(&str, &str, &str)] = &[
    ("create", "container_id", "Container identifier"),
    ("run", "container_id", "Container identifier"),
    (
        "create",
        "no_pivot",
        "Do not use pivot_root to jail the process inside rootfs (moves the rootfs over / and chroots)",
    ),
    (
        "run",
        "no_pivot",
        "Do not use pivot_root to jail the process inside rootfs (moves the rootfs over / and chroots)",
    ),
    (
        "create",
        "no_new_keyring",
        "Do not create a new session keyring for the container (cordon never does: the container keeps the caller's)",
    ),
    (
        "run",
        "no_new_keyring",
        "Do not create a new session keyring for the container (cordon never does: the container keeps the caller's)",
    ),
    (
        "run",
        "no_subreaper",
        "Do not make cordon a subreaper of the container's processes (cordon never is one)",
    ),
    (
        "create",
        "console_socket",
        "Unix socket to which the pseudoterminal master is sent (process.terminal)",
    ),
    (
        "run",
        "console_socket",
        "Unix socket to which the pseudoterminal master is sent (process.terminal)",
    ),
    (
        "exec",
        "console_socket",
        "Unix socket to which the pseudoterminal master is sent (--tty)",
    ),
    ("create", "pid_file", "File to write the container's init pid to"),
    ("run", "pid_file", "File to write the container's init pid to"),
    ("exec", "pid_file", "File to write the process's pid to"),
    ("exec", "cwd", "Working directory of the process in the container"),
    (
        "exec",
        "process_label",
        "SELinux label of the process (not supported: refused)",
    ),
    (
        "exec",
        "apparmor",
        "AppArmor profile of the process (not supported: refused)",
    ),
    (
        "exec",
        "no_new_privs",
        "Prevent the process from gaining privileges (no_new_privs; else the process file's or the container's noNewPrivileges)",
    ),
    (
        "exec",
        "cgroup",
        "Run the process in a sub-cgroup of the container (not supported: refused)",
    ),
    (
        "exec",
        "ignore_paused",
        "Allow exec in a paused container (not supported: refused)",
    ),
    (
        "delete",
        "force",
        "Force deletion of a running container (SIGKILL first)",
    ),
    ("ps", "format", "Output format: table or json"),
    (
        "ps",
        "ps_options",
        "Options for ps(1) with --format table (default: -ef)",
    ),
    ("list", "format", "Output format: table or json"),
    ("events", "interval", "Seconds between two stats objects"),
    (
        "update",
        "l3_cache_schema",
        "Intel RDT/CAT L3 cache schema (not supported: refused)",
    ),
    (
        "update",
        "mem_bw_schema",
        "Intel RDT/MBA memory bandwidth schema (not supported: refused)",
    ),
];

/// The `cordon` command with its help texts fixed.
pub fn command() -> Command {
    let mut cmd = Cli::command();
    for (sub, arg, help) in HELP {
        cmd = cmd.mut_subcommand(*sub, |s| s.mut_arg(*arg, |a| a.help(*help)));
    }
    cmd
}

/// Parses the process's arguments (exits with clap's message on an error,
/// as `Parser::parse` does).
pub fn parse() -> Cli {
    let matches = command().get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Writes cordon's man pages (`DIR/man1/cordon.1`, `cordon-COMMAND.1`) and
/// shell completions (`DIR/completions/cordon.bash`, `_cordon`,
/// `cordon.fish`) under `dir`.
pub fn generate(dir: &Path) -> anyhow::Result<i32> {
    let mut cmd = command();
    cmd.build();
    let man = dir.join("man1");
    fs::create_dir_all(&man).with_context(|| format!("create {}", man.display()))?;
    write_man(&man, &cmd, "cordon")?;
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        write_man(&man, sub, &format!("cordon-{}", sub.get_name()))?;
    }
    let comp = dir.join("completions");
    fs::create_dir_all(&comp).with_context(|| format!("create {}", comp.display()))?;
    // Without the hidden commands (bash's generator would offer them).
    let mut visible = Command::new("cordon")
        .about(cmd.get_about().cloned().unwrap_or_default())
        .disable_version_flag(true)
        .args(cmd.get_arguments().filter(|a| a.get_id() != "help").cloned())
        .subcommands(
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
                .cloned(),
        );
    use clap_complete::Shell;
    for (shell, file) in [
        (Shell::Bash, "cordon.bash"),
        (Shell::Zsh, "_cordon"),
        (Shell::Fish, "cordon.fish"),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut visible, "cordon", &mut out);
        let path = comp.join(file);
        fs::write(&path, out).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(0)
}

/// Writes `cmd`'s man page as `dir/NAME.1`.
fn write_man(dir: &Path, cmd: &Command, name: &str) -> anyhow::Result<()> {
    let cmd = cmd.clone().display_name(name.to_string());
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .title(name.to_uppercase())
        .section("1")
        .render(&mut out)
        .context("render a man page")?;
    let path = dir.join(format!("{name}.1"));
    fs::write(&path, out).with_context(|| format!("write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every help text of every command and argument.
    fn help_texts(cmd: &Command, out: &mut Vec<String>) {
        out.extend(cmd.get_about().map(|s| s.to_string()));
        for a in cmd.get_arguments() {
            out.extend(a.get_help().map(|s| s.to_string()));
            out.extend(a.get_long_help().map(|s| s.to_string()));
        }
        for s in cmd.get_subcommands() {
            help_texts(s, out);
        }
    }

    #[test]
    fn help_texts_have_no_known_typos() {
        let cmd = command();
        cmd.clone().debug_assert();
        let mut texts = Vec::new();
        help_texts(&cmd, &mut texts);
        assert!(texts.len() > 100, "{}", texts.len());
        for t in &texts {
            for bad in [
                "rool",
                " ,",
                "  ",
                "written to to",
                "asm process",
                "(default: \"",
                "(default: 5s)",
            ] {
                assert!(!t.contains(bad), "help text {t:?} contains {bad:?}");
            }
            assert!(
                t.starts_with(|c: char| !c.is_ascii_lowercase()) || t.starts_with("cordon"),
                "help text {t:?} starts in lower case"
            );
        }
        let create = cmd.find_subcommand("create").unwrap();
        let no_pivot = create.get_arguments().find(|a| a.get_id() == "no_pivot").unwrap();
        assert!(no_pivot.get_help().unwrap().to_string().contains("pivot_root"));
    }

    #[test]
    fn generate_writes_man_pages_and_completions() {
        let dir = std::env::temp_dir().join(format!("cordon-docs-unit-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        generate(&dir).unwrap();
        let man = fs::read_to_string(dir.join("man1/cordon.1")).unwrap();
        assert!(man.starts_with(".ie \\n(.g .ds Aq"), "{}", &man[..100.min(man.len())]);
        assert!(man.contains("cordon\\-install(1)") || man.contains("install"), "{man}");
        let exec = fs::read_to_string(dir.join("man1/cordon-exec.1")).unwrap();
        assert!(exec.contains("\\-\\-ignore\\-paused"), "{exec}");
        assert!(
            !dir.join("man1/cordon-supervise.1").exists(),
            "hidden commands get no page"
        );
        assert!(!dir.join("man1/cordon-help.1").exists());
        let bash = fs::read_to_string(dir.join("completions/cordon.bash")).unwrap();
        assert!(
            bash.contains("uninstall") && bash.contains("--dry-run"),
            "bash completion"
        );
        let zsh = fs::read_to_string(dir.join("completions/_cordon")).unwrap();
        assert!(zsh.starts_with("#compdef cordon"), "{}", &zsh[..50]);
        let fish = fs::read_to_string(dir.join("completions/cordon.fish")).unwrap();
        assert!(fish.contains("complete -c cordon"), "fish completion");
        assert!(!bash.contains("supervise"), "hidden commands are not completed");
        fs::remove_dir_all(&dir).unwrap();
    }
}
