//! Checks of user input before anything is created: the container id, the
//! bundle and its config.json. Each error is one line that names the field
//! or path at fault, so engines (containerd shows the last log line) and
//! users see the cause rather than a library's generic message.

use std::path::{Path, PathBuf};

use oci_spec::runtime::{Hooks, LinuxSeccomp, LinuxSeccompAction, Mount, Process, Spec};

/// Input errors. Messages name the id, path or config.json field.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// Bad container id.
    #[error(
        "invalid container id {0:?}: use letters, digits and _ + - . (not . or .., not starting with .cordon: \
         cordon's own state), at most 255 characters"
    )]
    Id(String),
    /// The bundle directory is missing.
    #[error("bundle {}: {reason}", path.display())]
    Bundle {
        /// The bundle path as given.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// config.json is not valid.
    #[error("{}: {field}: {reason}", path.display())]
    Config {
        /// Path of config.json.
        path: PathBuf,
        /// The JSON path of the field, e.g. `process.args`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

/// Checks a container id the way runc does (`^[\w+-\.]+$`, not `.`/`..`).
pub fn id(id: &str) -> Result<(), ValidateError> {
    let ok = !id.is_empty()
        && id.len() <= 255
        && id != "."
        && id != ".."
        // `<root>/.cordon` holds every container's supervisor state: an id
        // naming it would let `delete --force` remove it.
        && !id.starts_with(crate::layout::CORDON_DIR)
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"_+-.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ValidateError::Id(id.to_string()))
    }
}

/// Loads and checks `<bundle>/config.json`. Returns the canonical bundle
/// path and the spec.
pub fn bundle(bundle: &Path) -> Result<(PathBuf, Spec), ValidateError> {
    let berr = |reason: &str| ValidateError::Bundle {
        path: bundle.to_path_buf(),
        reason: reason.to_string(),
    };
    let canon = std::fs::canonicalize(bundle).map_err(|e| berr(&io_reason(&e)))?;
    if !canon.is_dir() {
        return Err(berr("not a directory"));
    }
    let path = canon.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| ValidateError::Config {
        path: path.clone(),
        field: "(file)".into(),
        reason: io_reason(&e),
    })?;
    let spec = config(&text, &canon)?;
    Ok((canon, spec))
}

/// Parses and checks the text of a bundle's config.json, as [`bundle`]
/// does once it has read the file. `bundle` is the canonical bundle
/// directory: a relative `root.path` is looked up below it, and errors name
/// `<bundle>/config.json`. Reads nothing but `root.path`'s metadata,
/// `/proc/filesystems` (for mount types) and the process's own limits.
pub fn config(text: &str, bundle: &Path) -> Result<Spec, ValidateError> {
    let path = bundle.join("config.json");
    // Field names (map keys) and reasons quote config.json's own text:
    // control characters are escaped so an error stays one line.
    let cerr = |field: &str, reason: String| ValidateError::Config {
        path: path.clone(),
        field: one_line(field),
        reason: one_line(&reason),
    };
    let de = &mut serde_json::Deserializer::from_str(text);
    let spec: Spec = serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { "(document)".to_string() } else { field };
        cerr(&field, e.into_inner().to_string())
    })?;
    check_spec(&spec, bundle).map_err(|(field, reason)| cerr(field, reason))?;
    Ok(spec)
}

/// `s` with its control characters (newlines...) escaped as `\n`, `\u{1b}`.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        _ => e.to_string(),
    }
}

/// Semantic checks runc makes at create time.
fn check_spec(spec: &Spec, bundle: &Path) -> Result<(), (&'static str, String)> {
    let major = spec.version().split('.').next().unwrap_or("");
    if major != "1" {
        return Err((
            "ociVersion",
            format!("{:?} is not supported (this runtime implements 1.x)", spec.version()),
        ));
    }
    if let Some(h) = spec.hostname() {
        if h.len() > 64 {
            return Err(("hostname", format!("{} bytes: a hostname is at most 64", h.len())));
        }
    }
    if let Some(mounts) = spec.mounts() {
        check_mounts(mounts)?;
    }
    let root = spec.root().as_ref().ok_or(("root", "missing".to_string()))?;
    let rootfs = if root.path().is_absolute() {
        root.path().clone()
    } else {
        bundle.join(root.path())
    };
    if !rootfs.is_dir() {
        return Err(("root.path", format!("{}: no such directory", rootfs.display())));
    }
    let process = spec.process().as_ref().ok_or(("process", "missing".to_string()))?;
    check_process(process)?;
    let linux = spec
        .linux()
        .as_ref()
        .ok_or(("linux", "missing (only Linux containers are supported)".to_string()))?;
    if let Some(seccomp) = linux.seccomp() {
        check_seccomp(seccomp)?;
    }
    if let Some(hooks) = spec.hooks() {
        check_hooks(hooks)?;
    }
    Ok(())
}

/// A bind mount has a source; a filesystem type is one the kernel knows
/// (`/proc/filesystems`), `bind` or `none`.
fn check_mounts(mounts: &[Mount]) -> Result<(), (&'static str, String)> {
    let known = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    for m in mounts {
        // `source` is optional (a proc or tmpfs mount needs none), but
        // a bind mount without one has nothing to bind.
        if m.source().is_none() && is_bind(m) {
            return Err((
                "mounts",
                format!("{}: a bind mount needs a source", m.destination().display()),
            ));
        }
        let Some(t) = m.typ().as_deref() else { continue };
        let ok =
            t.is_empty() || t == "bind" || t == "none" || known.lines().any(|l| l.split_whitespace().last() == Some(t));
        if !ok {
            return Err((
                "mounts",
                format!("{}: unknown filesystem type {t:?}", m.destination().display()),
            ));
        }
    }
    Ok(())
}

/// The process: arguments (not empty, no NUL), environment (no NUL),
/// rlimits, oom_score_adj, an absolute cwd.
fn check_process(process: &Process) -> Result<(), (&'static str, String)> {
    match process.args() {
        Some(a) if !a.is_empty() && !a[0].is_empty() => {
            if let Some(i) = a.iter().position(|x| x.contains('\0')) {
                return Err(("process.args", format!("argument {i} contains a NUL byte")));
            }
        }
        _ => return Err(("process.args", "must not be empty".into())),
    }
    if let Some(i) = process.env().iter().flatten().position(|x| x.contains('\0')) {
        return Err(("process.env", format!("entry {i} contains a NUL byte")));
    }
    if let Some(rlimits) = process.rlimits() {
        check_rlimits(rlimits)?;
    }
    if let Some(adj) = process.oom_score_adj() {
        check_oom_score_adj(adj)?;
    }
    if !process.cwd().is_absolute() {
        return Err(("process.cwd", format!("{:?} must be an absolute path", process.cwd())));
    }
    Ok(())
}

/// The spec's own notify listener is refused: the supervisor owns it.
fn check_seccomp(seccomp: &LinuxSeccomp) -> Result<(), (&'static str, String)> {
    let notify = seccomp.default_action() == LinuxSeccompAction::ScmpActNotify
        || seccomp
            .syscalls()
            .iter()
            .flatten()
            .any(|s| s.action() == LinuxSeccompAction::ScmpActNotify);
    if notify || seccomp.listener_path().is_some() {
        return Err((
            "linux.seccomp",
            "SCMP_ACT_NOTIFY and listenerPath are not supported: cordon's supervisor owns the container's notify listener (use a cordon policy instead)".into(),
        ));
    }
    Ok(())
}

/// Every hook's path is absolute.
fn check_hooks(hooks: &Hooks) -> Result<(), (&'static str, String)> {
    let all = [
        hooks.prestart(),
        hooks.create_runtime(),
        hooks.create_container(),
        hooks.start_container(),
        hooks.poststart(),
        hooks.poststop(),
    ];
    for h in all.into_iter().flatten().flatten() {
        if !h.path().is_absolute() {
            return Err(("hooks", format!("hook path {:?} must be absolute", h.path())));
        }
    }
    Ok(())
}

/// Lowering oom_score_adj below the process's `oom_score_adj_min` needs
/// CAP_SYS_RESOURCE (proc(5); kernel `__set_oom_adj`); without it the
/// container's set-up would fail with a bare "io error". The minimum is not
/// shown in /proc: it is 0 unless a privileged ancestor set a value (then
/// that value, which it also left as the runtime's own), so a value below
/// both 0 and the runtime's own is refused. Engines set 0 while their shims
/// run at 1 (containerd raises its shims' by one): that is allowed.
fn check_oom_score_adj(adj: i32) -> Result<(), (&'static str, String)> {
    if !(-1000..=1000).contains(&adj) {
        return Err(("process.oomScoreAdj", format!("{adj} is outside -1000..1000")));
    }
    let own: Option<i32> = std::fs::read_to_string("/proc/self/oom_score_adj")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let can_lower = caps::has_cap(None, caps::CapSet::Effective, caps::Capability::CAP_SYS_RESOURCE).unwrap_or(false);
    match own {
        Some(own) if adj < own.min(0) && !can_lower => Err((
            "process.oomScoreAdj",
            format!(
                "{adj} is below the runtime's own {own} (lowering it needs CAP_SYS_RESOURCE, which the runtime does not have)"
            ),
        )),
        _ => Ok(()),
    }
}

/// Raising a hard limit above the runtime's own needs CAP_SYS_RESOURCE
/// (setrlimit(2)); say so up front instead of failing inside the container.
fn check_rlimits(rlimits: &[oci_spec::runtime::PosixRlimit]) -> Result<(), (&'static str, String)> {
    use oci_spec::runtime::PosixRlimitType as T;
    let can_raise = caps::has_cap(None, caps::CapSet::Effective, caps::Capability::CAP_SYS_RESOURCE).unwrap_or(false);
    for r in rlimits {
        let resource = match r.typ() {
            T::RlimitCpu => libc::RLIMIT_CPU,
            T::RlimitFsize => libc::RLIMIT_FSIZE,
            T::RlimitData => libc::RLIMIT_DATA,
            T::RlimitStack => libc::RLIMIT_STACK,
            T::RlimitCore => libc::RLIMIT_CORE,
            T::RlimitRss => libc::RLIMIT_RSS,
            T::RlimitNproc => libc::RLIMIT_NPROC,
            T::RlimitNofile => libc::RLIMIT_NOFILE,
            T::RlimitMemlock => libc::RLIMIT_MEMLOCK,
            T::RlimitAs => libc::RLIMIT_AS,
            T::RlimitLocks => libc::RLIMIT_LOCKS,
            T::RlimitSigpending => libc::RLIMIT_SIGPENDING,
            T::RlimitMsgqueue => libc::RLIMIT_MSGQUEUE,
            T::RlimitNice => libc::RLIMIT_NICE,
            T::RlimitRtprio => libc::RLIMIT_RTPRIO,
            T::RlimitRttime => libc::RLIMIT_RTTIME,
        };
        if r.soft() > r.hard() {
            return Err((
                "process.rlimits",
                format!(
                    "{:?}: soft limit {} is above the hard limit {}",
                    r.typ(),
                    r.soft(),
                    r.hard()
                ),
            ));
        }
        let host = crate::sys::process::getrlimit(resource).ok().map(|h| h.rlim_max);
        if let Some(host_max) = host.filter(|&m| r.hard() > m && !can_raise) {
            return Err((
                "process.rlimits",
                format!(
                    "{}: hard limit {} is above this host's hard limit {} (raising it needs CAP_SYS_RESOURCE, which the runtime does not have)",
                    format!("{:?}", r.typ()).to_uppercase().replace("RLIMIT", "RLIMIT_"),
                    r.hard(),
                    host_max
                ),
            ));
        }
    }
    Ok(())
}

/// Whether `m` is a bind mount (type `bind`, or a `bind`/`rbind` option).
pub(crate) fn is_bind(m: &Mount) -> bool {
    m.typ().as_deref() == Some("bind") || m.options().iter().flatten().any(|o| o == "bind" || o == "rbind")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert!(id("abc-1_2.3+x").is_ok());
        for bad in ["", ".", "..", "../x", "a/b", "a b", "é"] {
            assert!(id(bad).is_err(), "{bad}");
        }
    }

    fn write_bundle(cfg: &str) -> tempdir::Dir {
        let d = tempdir::Dir::new();
        std::fs::create_dir(d.path().join("rootfs")).unwrap();
        std::fs::write(d.path().join("config.json"), cfg).unwrap();
        d
    }

    mod tempdir {
        pub struct Dir(std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                let p = std::env::temp_dir().join(format!(
                    "cordon-validate-{}-{}",
                    std::process::id(),
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_nanos()
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
            pub fn path(&self) -> &std::path::Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn config_errors_name_the_field() {
        let ok = r#"{"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"args":["sh"],"cwd":"/","user":{"uid":0,"gid":0}},"linux":{}}"#;
        let d = write_bundle(ok);
        bundle(d.path()).unwrap();

        let d = write_bundle(r#"{"ociVersion":"1.0.2","process":{"args":"sh"}}"#);
        let e = bundle(d.path()).unwrap_err().to_string();
        assert!(e.contains("process.args"), "{e}");

        let d = write_bundle("{ not json");
        let e = bundle(d.path()).unwrap_err().to_string();
        assert!(e.contains("config.json"), "{e}");

        let d = write_bundle(&ok.replace("1.0.2", "2.0.0"));
        let e = bundle(d.path()).unwrap_err().to_string();
        assert!(e.contains("ociVersion"), "{e}");

        let d = write_bundle(&ok.replace("\"rootfs\"", "\"nope\""));
        let e = bundle(d.path()).unwrap_err().to_string();
        assert!(e.contains("root.path"), "{e}");

        let d = write_bundle(&ok.replace("[\"sh\"]", "[\"sh\\u0000x\"]"));
        let e = bundle(d.path()).unwrap_err().to_string();
        assert!(e.contains("process.args") && e.contains("NUL"), "{e}");

        let long = format!("\"linux\":{{}},\"hostname\":\"{}\"", "h".repeat(65));
        let d = write_bundle(&ok.replace("\"linux\":{}", &long));
        let e = bundle(d.path()).unwrap_err().to_string();
        assert!(e.contains("hostname"), "{e}");

        let d = write_bundle(&ok.replace(
            "\"linux\":{}",
            "\"linux\":{},\"mounts\":[{\"destination\":\"/x\",\"type\":\"nosuchfs\",\"source\":\"n\"}]",
        ));
        let e = bundle(d.path()).unwrap_err().to_string();
        assert!(e.contains("mounts") && e.contains("nosuchfs"), "{e}");

        let e = bundle(Path::new("/nonexistent/bundle")).unwrap_err().to_string();
        assert_eq!(e, "bundle /nonexistent/bundle: no such file or directory");
    }

    /// Found by fuzzing (fuzz/corpus/config/crash-*): text of config.json
    /// (a map key in the field path, a mount destination, an unknown enum
    /// value) reached the one-line error with its newlines.
    #[test]
    fn config_errors_are_one_line() {
        let d = write_bundle("{}");
        let ok = r#"{"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"args":["sh"],"cwd":"/","user":{"uid":0,"gid":0}},"linux":{}}"#;
        let cases = [
            r#"{"annotations":{"a\nb\r":1}}"#.to_string(),
            r#"{"ociVersion":"1.0.2","linux":{"namespaces":[{"type":"pid\nlevel=info"}]}}"#.to_string(),
            ok.replace(
                "\"linux\":{}",
                "\"linux\":{},\"mounts\":[{\"destination\":\"/x\\ny\",\"type\":\"nosuchfs\",\"source\":\"n\"}]",
            ),
            r#"{"\u001b[31m":1, "ociVersion":"1.0.2\n"}"#.to_string(),
        ];
        for text in &cases {
            let e = config(text, d.path()).unwrap_err().to_string();
            assert!(!e.contains('\n') && !e.contains('\r') && !e.contains('\u{1b}'), "{e:?}");
            assert!(e.contains("config.json"), "{e}");
        }
        let e = config(&cases[0], d.path()).unwrap_err().to_string();
        assert!(e.contains("annotations.a\\nb\\r"), "{e}");
    }
}
