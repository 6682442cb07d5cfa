//! What a container sees of the machine: its kernel identity and the
//! `/proc` and `/sys` files that describe memory, CPUs and load, sized to
//! its cgroup (what LXCFS does with FUSE and gVisor with its own procfs).
//!
//! Mechanism (no syscall is trapped, so opens keep their native speed):
//! every view is a file of the container's cordon state directory
//! (`<root>/.cordon/<id>/views/`), bind-mounted read-only over its entry
//! in the container's mount namespace after libcontainer's build
//! (`container/harden.rs`), from where nothing inside can remove it: the
//! policy refuses the mount calls.
//! - **Static** views (the identity: `/proc/version`,
//!   `/proc/sys/kernel/{osrelease,version,ostype}`, `/proc/cmdline`) are written once by
//!   `create` and never change: no race can show the host's.
//! - **Dynamic** views (`/proc/meminfo`, `/proc/cpuinfo`, `/proc/stat`,
//!   `/proc/uptime`, `/proc/loadavg`, `/proc/swaps`,
//!   `/sys/devices/system/cpu/online`) are rewritten by the supervisor on
//!   every open: it holds a fanotify `FAN_OPEN_PERM` mark on just those
//!   files, renders the view from the container's cgroup ([`cgroup`]) and
//!   the host's own file ([`render`]), then allows the open
//!   (`supervisor/views.rs`).
//!
//! Views are made only for containers with a supervisor and a policy
//! whose `[views] proc` is on (the default).

pub mod cgroup;
pub mod render;

use std::io;
use std::path::{Path, PathBuf};

use crate::policy::model::{Identity, Views};

/// The kernel version string the container sees (`uname -v`,
/// `/proc/sys/kernel/version`).
pub const VERSION: &str = "#1 SMP PREEMPT_DYNAMIC cordon";

pub use crate::layout::VIEWS as DIR;

/// One view: a file of the views directory mounted over a path inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// `/proc/version`.
    Version,
    /// `/proc/sys/kernel/osrelease`.
    OsRelease,
    /// `/proc/sys/kernel/version`.
    KernelVersion,
    /// `/proc/sys/kernel/ostype`.
    OsType,
    /// `/proc/cmdline` (the host's often names its kernel image, and so
    /// its release).
    Cmdline,
    /// `/proc/meminfo`.
    Meminfo,
    /// `/proc/cpuinfo`.
    Cpuinfo,
    /// `/proc/stat`.
    Stat,
    /// `/proc/uptime`.
    Uptime,
    /// `/proc/loadavg`.
    Loadavg,
    /// `/proc/swaps`.
    Swaps,
    /// `/sys/devices/system/cpu/online`.
    CpuOnline,
}

/// Every view refreshed on open.
pub const DYNAMIC: [View; 7] = [
    View::Meminfo,
    View::Cpuinfo,
    View::Stat,
    View::Uptime,
    View::Loadavg,
    View::Swaps,
    View::CpuOnline,
];

impl View {
    /// The path inside the container the view is mounted over (and, for
    /// dynamic views, the host's file it is rendered from).
    pub fn path(self) -> &'static str {
        match self {
            View::Version => "/proc/version",
            View::OsRelease => "/proc/sys/kernel/osrelease",
            View::KernelVersion => "/proc/sys/kernel/version",
            View::OsType => "/proc/sys/kernel/ostype",
            View::Cmdline => "/proc/cmdline",
            View::Meminfo => "/proc/meminfo",
            View::Cpuinfo => "/proc/cpuinfo",
            View::Stat => "/proc/stat",
            View::Uptime => "/proc/uptime",
            View::Loadavg => "/proc/loadavg",
            View::Swaps => "/proc/swaps",
            View::CpuOnline => "/sys/devices/system/cpu/online",
        }
    }

    /// The file's name in the views directory.
    pub fn file(self) -> &'static str {
        match self {
            View::Version => "version",
            View::OsRelease => "osrelease",
            View::KernelVersion => "kernel-version",
            View::OsType => "ostype",
            View::Cmdline => "cmdline",
            View::Meminfo => "meminfo",
            View::Cpuinfo => "cpuinfo",
            View::Stat => "stat",
            View::Uptime => "uptime",
            View::Loadavg => "loadavg",
            View::Swaps => "swaps",
            View::CpuOnline => "cpu-online",
        }
    }
}

/// The identity files and their content for release `release`. The
/// kernel command line is a plain one naming the virtual kernel's image
/// (as gVisor's is): the host's carries its boot configuration.
pub fn identity(release: &str) -> [(View, String); 5] {
    [
        (View::Version, render::version(release, VERSION)),
        (View::OsRelease, format!("{release}\n")),
        (View::KernelVersion, format!("{VERSION}\n")),
        (View::OsType, "Linux\n".into()),
        (View::Cmdline, format!("BOOT_IMAGE=/boot/vmlinuz-{release} ro quiet\n")),
    ]
}

/// Writes the view files of a container whose policy says `views` into
/// its cordon dir `dir` (the identity with its content, the dynamic views
/// empty, for the supervisor to render on open) and returns each host file
/// with the path inside it goes over. Nothing when `views.proc` is off.
///
/// Errors: a file cannot be written (the error names it).
pub fn prepare(dir: &Path, views: &Views) -> io::Result<Vec<(PathBuf, &'static str)>> {
    if !views.proc {
        return Ok(Vec::new());
    }
    let vdir = dir.join(DIR);
    std::fs::create_dir_all(&vdir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", vdir.display())))?;
    let mut files: Vec<(View, String)> = Vec::new();
    if views.identity == Identity::Virtual {
        files.extend(identity(&views.release));
    }
    // The dynamic views start empty: the supervisor renders each on open
    // (an empty file takes no space under the state root until then).
    // Without fanotify permission events (a kernel built without
    // CONFIG_FANOTIFY_ACCESS_PERMISSIONS, no CAP_SYS_ADMIN) nothing could,
    // and the container sees the host's.
    if fanotify_works_cached(dir.parent()) {
        files.extend(DYNAMIC.iter().map(|v| (*v, String::new())));
    } else {
        tracing::warn!(
            "fanotify permission events unavailable: /proc/meminfo and the other dynamic views show the host's"
        );
    }
    files
        .into_iter()
        .map(|(view, text)| {
            let path = vdir.join(view.file());
            write_read_only(&path, text.as_bytes())
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            Ok((path, view.path()))
        })
        .collect()
}

/// Writes `bytes` to a new file at `path` made with mode 0444 (as root
/// writes it anyway), or, when it is there already, truncates it and sets
/// that mode: one syscall fewer per view than a write and a chmod.
fn write_read_only(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let f = std::fs::OpenOptions::new().write(true).truncate(true).open(path)?;
            f.set_permissions(std::fs::Permissions::from_mode(0o444))?;
            f
        }
        Err(e) => return Err(e),
    };
    f.write_all(bytes)
}

/// [`fanotify_works`], remembered for this boot in `cache_dir`
/// (`@fanotify`, holding the boot id, a yes only): closing even an empty
/// fanotify group waits for the fsnotify mark reaper, which another
/// group's close (the supervisor's of the last container) may have
/// started, an SRCU grace period of up to tens of milliseconds on
/// `create`'s path. Without a `cache_dir` it probes.
fn fanotify_works_cached(cache_dir: Option<&Path>) -> bool {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let mark = cache_dir.map(|d| d.join(crate::layout::FANOTIFY_PROBE));
    if let Some(mark) = &mark {
        if !boot.is_empty() && std::fs::read_to_string(mark).is_ok_and(|b| b == boot) {
            return true;
        }
    }
    let works = fanotify_works();
    if let (true, Some(mark), false) = (works, &mark, boot.is_empty()) {
        // Best effort: without it the next create probes again.
        let tmp = mark.with_extension(format!("{}", std::process::id()));
        if std::fs::write(&tmp, &boot).is_ok() && std::fs::rename(&tmp, mark).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    works
}

/// Whether this kernel gives fanotify permission events (a group of the
/// class the supervisor uses can be made). Marks are not tried: closing a
/// group that held one waits for an RCU grace period, on `create`'s path.
fn fanotify_works() -> bool {
    use nix::sys::fanotify::{EventFFlags, Fanotify, InitFlags};
    Fanotify::init(
        InitFlags::FAN_CLASS_CONTENT | InitFlags::FAN_CLOEXEC,
        EventFFlags::O_RDONLY | EventFFlags::O_CLOEXEC,
    )
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::model::RELEASE;

    #[test]
    fn identity_agrees_with_itself() {
        let id = identity("5.10.0-x");
        assert!(id[0].1.starts_with("Linux version 5.10.0-x "));
        assert!(id[0].1.contains(VERSION));
        assert_eq!(id[1].1, "5.10.0-x\n");
        assert_eq!(id[3].1, "Linux\n");
    }

    #[test]
    fn prepare_writes_what_the_policy_asks() {
        let dir = std::env::temp_dir().join(format!("cordon-prepare-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let off = Views {
            proc: false,
            ..Views::default()
        };
        assert!(prepare(&dir, &off).unwrap().is_empty());
        // The dynamic views need fanotify permission events (root).
        let dynamic = if fanotify_works() { DYNAMIC.len() } else { 0 };
        let all = prepare(&dir, &Views::default()).unwrap();
        assert_eq!(all.len(), 5 + dynamic);
        assert_eq!(
            std::fs::read_to_string(dir.join(DIR).join("osrelease")).unwrap(),
            format!("{RELEASE}\n")
        );
        let host = Views {
            identity: Identity::Host,
            ..Views::default()
        };
        let some = prepare(&dir, &host).unwrap();
        assert_eq!(some.len(), dynamic);
        assert!(some.iter().all(|(_, p)| *p != "/proc/version"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
