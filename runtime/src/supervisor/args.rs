//! The hidden `cordon supervise` command's arguments, spelled once: `create`
//! builds the argv with [`SuperviseArgs::to_args`] and the binary parses it
//! with the clap definition derived from the same struct.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::PathBuf;

use super::Options;

/// `supervise` arguments (set by `create`).
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct SuperviseArgs {
    /// Container id
    pub container_id: String,
    /// cordon's directory of the container
    #[arg(long)]
    pub dir: PathBuf,
    /// Policy name or file
    #[arg(long)]
    pub policy: String,
    /// Hostname for the emulated uname
    #[arg(long, default_value = "")]
    pub hostname: String,
    /// Readiness pipe fd
    #[arg(long)]
    pub ready_fd: Option<RawFd>,
    /// Bound supervisor socket fd (the supervisor binds its own without)
    #[arg(long)]
    pub listen_fd: Option<RawFd>,
    /// Platform: seccomp-notify or ptrace
    #[arg(long, default_value = "seccomp-notify")]
    pub platform: String,
    /// Why cordon fell back to this platform (recorded in the audit trail)
    #[arg(long)]
    pub fallback: Option<String>,
    /// Where the path rules are enforced, and why (recorded in the audit trail)
    #[arg(long, default_value = "supervisor")]
    pub enforcement: String,
    /// Every path rule is enforced by the container's mounts or Landlock:
    /// file syscalls never come to the supervisor
    #[arg(long)]
    pub kernel_paths: bool,
    /// The decision program's socket for `ask` rules
    #[arg(long)]
    pub ask_socket: Option<PathBuf>,
    /// How long a question waits for its answer (ms)
    #[arg(long, default_value_t = crate::config::DEFAULT_ASK_TIMEOUT_MS)]
    pub ask_timeout_ms: u32,
    /// Read Landlock's denials from the kernel's audit into the trail
    #[arg(long)]
    pub kernel_audit: bool,
}

impl SuperviseArgs {
    /// The (hidden) subcommand of the `cordon` binary that runs a
    /// supervisor; [`SuperviseArgs::to_args`] follows it.
    pub const COMMAND: &'static str = "supervise";

    /// The arguments after [`SuperviseArgs::COMMAND`] that parse back to
    /// `self`: every flag given, the container id last after `--` (an id
    /// cannot be taken for a flag).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = vec![
            "--dir".into(),
            self.dir.clone().into(),
            "--policy".into(),
            self.policy.clone().into(),
            "--hostname".into(),
            self.hostname.clone().into(),
        ];
        if let Some(fd) = self.ready_fd {
            v.extend(["--ready-fd".into(), fd.to_string().into()]);
        }
        if let Some(fd) = self.listen_fd {
            v.extend(["--listen-fd".into(), fd.to_string().into()]);
        }
        v.extend(["--platform".into(), self.platform.clone().into()]);
        if let Some(why) = &self.fallback {
            v.extend(["--fallback".into(), why.into()]);
        }
        if self.kernel_paths {
            v.push("--kernel-paths".into());
        }
        if self.kernel_audit {
            v.push("--kernel-audit".into());
        }
        if let Some(socket) = &self.ask_socket {
            v.extend(["--ask-socket".into(), socket.into()]);
        }
        v.extend([
            "--ask-timeout-ms".into(),
            self.ask_timeout_ms.to_string().into(),
            "--enforcement".into(),
            self.enforcement.clone().into(),
            "--".into(),
            self.container_id.clone().into(),
        ]);
        v
    }

    /// The supervisor's [`Options`].
    ///
    /// Errors: [`crate::config::ConfigError::Unsupported`] for an unknown
    /// platform name.
    pub fn into_options(self) -> Result<Options, crate::config::ConfigError> {
        Ok(Options {
            id: self.container_id,
            dir: self.dir,
            policy: self.policy,
            hostname: self.hostname,
            ready_fd: self.ready_fd,
            listen_fd: self.listen_fd,
            platform: crate::config::Platform::parse(&self.platform, "--platform")?,
            fallback: self.fallback,
            enforcement: self.enforcement,
            kernel_paths: self.kernel_paths,
            ask_socket: self.ask_socket,
            ask_timeout_ms: self.ask_timeout_ms,
            kernel_audit: self.kernel_audit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        args: SuperviseArgs,
    }

    fn round_trip(a: &SuperviseArgs) -> SuperviseArgs {
        let argv = std::iter::once(OsString::from(SuperviseArgs::COMMAND)).chain(a.to_args());
        Cmd::try_parse_from(argv).expect("to_args parses").args
    }

    #[test]
    fn to_args_parses_back_to_the_same_arguments() {
        let full = SuperviseArgs {
            container_id: "-looks-like-a-flag".into(),
            dir: "/run/cordon/c1/.cordon".into(),
            policy: "/etc/cordon/policies/my policy.toml".into(),
            hostname: "box".into(),
            ready_fd: Some(3),
            listen_fd: Some(4),
            platform: "ptrace".into(),
            fallback: Some("cannot create a seccomp notify listener: EBUSY".into()),
            enforcement: "kernel (12 path rules by the container's mounts)".into(),
            kernel_paths: true,
            ask_socket: Some("/run/platform/ask.sock".into()),
            ask_timeout_ms: 500,
            kernel_audit: true,
        };
        assert_eq!(round_trip(&full), full);
        let bare = SuperviseArgs {
            container_id: "c2".into(),
            dir: "/d".into(),
            policy: "default".into(),
            hostname: String::new(),
            ready_fd: None,
            listen_fd: None,
            platform: "seccomp-notify".into(),
            fallback: None,
            enforcement: "supervisor".into(),
            kernel_paths: false,
            ask_socket: None,
            ask_timeout_ms: crate::config::DEFAULT_ASK_TIMEOUT_MS,
            kernel_audit: false,
        };
        assert_eq!(round_trip(&bare), bare);
    }

    #[test]
    fn an_unknown_platform_is_refused_with_the_flag_named() {
        let mut a = round_trip(&SuperviseArgs {
            container_id: "c".into(),
            dir: "/d".into(),
            policy: "default".into(),
            hostname: String::new(),
            ready_fd: None,
            listen_fd: None,
            platform: "kvm".into(),
            fallback: None,
            enforcement: "supervisor".into(),
            kernel_paths: false,
            ask_socket: None,
            ask_timeout_ms: 1,
            kernel_audit: false,
        });
        let e = a.clone().into_options().unwrap_err().to_string();
        assert!(e.contains("--platform") && e.contains("\"kvm\""), "{e}");
        a.platform = "ptrace".into();
        assert_eq!(a.into_options().unwrap().platform, crate::config::Platform::Ptrace);
    }
}
