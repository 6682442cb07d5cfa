//! Keeps the container's dynamic views fresh ([`crate::views`]): a
//! fanotify group with a `FAN_OPEN_PERM` mark on each dynamic view file
//! (and nothing else), so an open of `/proc/meminfo` inside the container
//! waits while this thread renders the view from the container's cgroup
//! into the file, then proceeds. Nothing is trapped in seccomp: other
//! opens never reach the supervisor, and the opener's wait is killable
//! (fanotify(7)), so it cannot fail with EINTR.
//!
//! The file is rewritten in place (pwrite, then truncate to the new
//! length): a reader of the same view in another process, between its
//! own open and read, can see the text of this newer open, or during the
//! rewrite a mix of both (docs/SECURITY.md). If the supervisor dies, the
//! kernel allows every pending and later open (the group is gone) and the
//! files keep their last content; the watchdog ends the container anyway.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::fanotify::{EventFFlags, Fanotify, FanotifyResponse, InitFlags, MarkFlags, MaskFlags, Response};

use super::Supervisor;
use crate::supervisor::audit::Decision;
use crate::views::cgroup::{parse_cpu_list, CgroupDirs, Limits};
use crate::views::{render, View, DYNAMIC};

/// The fanotify group and the view files it watches.
pub(crate) struct Views {
    fan: Fanotify,
    /// Each dynamic view: its file (open for writing, so rewriting it is
    /// not an open the group would see) and its (device, inode).
    files: Vec<(View, std::fs::File, (u64, u64))>,
}

impl Views {
    /// Opens the dynamic view files of cordon dir `dir` and marks them.
    /// `None` when the policy turns the views off or `create` made none
    /// (it probes fanotify first: `views::prepare`).
    ///
    /// Errors: fanotify is unavailable (a kernel without
    /// `CONFIG_FANOTIFY_ACCESS_PERMISSIONS`), or a view file cannot be
    /// opened or marked.
    pub(crate) fn open(dir: &Path, views: &crate::policy::model::Views) -> io::Result<Option<Self>> {
        let vdir = dir.join(crate::views::DIR);
        // `create` makes no dynamic view where fanotify cannot serve them.
        if !views.proc || !vdir.join(View::Meminfo.file()).exists() {
            return Ok(None);
        }
        let fan = Fanotify::init(
            InitFlags::FAN_CLASS_CONTENT | InitFlags::FAN_CLOEXEC,
            EventFFlags::O_RDONLY | EventFFlags::O_LARGEFILE | EventFFlags::O_CLOEXEC,
        )
        .map_err(|e| io::Error::other(format!("fanotify_init: {e}")))?;
        let mut files = Vec::new();
        for view in DYNAMIC {
            let path = vdir.join(view.file());
            let err = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
            let file = std::fs::OpenOptions::new().write(true).open(&path).map_err(err)?;
            let st = file.metadata().map_err(err)?;
            fan.mark(MarkFlags::FAN_MARK_ADD, MaskFlags::FAN_OPEN_PERM, None, Some(&path))
                .map_err(|e| err(e.into()))?;
            files.push((view, file, (st.dev(), st.ino())));
        }
        Ok(Some(Views { fan, files }))
    }

    /// The fanotify group's fd.
    pub(crate) fn fanotify(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fan.as_fd()
    }

    /// Renders the view opened as `fd` into its file; an fd of no view is
    /// left alone.
    fn refresh(&mut self, fd: BorrowedFd<'_>, opener: i32, sup: &Supervisor) {
        let Ok(st) = nix::sys::stat::fstat(fd.as_raw_fd()) else {
            return;
        };
        let key = (st.st_dev, st.st_ino);
        let Some(view) = self.files.iter().find(|(_, _, k)| *k == key).map(|(v, _, _)| *v) else {
            return;
        };
        let text = self.render(view, opener, sup);
        if let Some((_, file, _)) = self.files.iter().find(|(v, _, _)| *v == view) {
            // Nothing rendered (a host file that could not be read) keeps
            // the previous text; so does a write that fails (a full disk).
            if !text.is_empty() && file.write_all_at(text.as_bytes(), 0).is_ok() {
                let _ = file.set_len(text.len() as u64);
            }
        }
    }

    fn render(&mut self, view: View, opener: i32, sup: &Supervisor) -> String {
        let host = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let dirs = sup.cgroups(opener);
        if view == View::Loadavg {
            let (loads, running, total) = load(sup, dirs.as_ref(), opener, true);
            return render::loadavg(loads, running, total);
        }
        // Memory alone for the memory views (fewer cgroup files to read).
        let read = match view {
            View::Meminfo | View::Swaps => Limits::read_memory,
            _ => Limits::read,
        };
        let limits = dirs.as_ref().map(read).unwrap_or_default();
        // The host's online CPUs (its text too) and the container's.
        let cpus = || {
            let text = host("/sys/devices/system/cpu/online");
            let online = parse_cpu_list(&text).unwrap_or_default();
            let cpus = render::cpus(&limits, &online);
            (text, online, cpus)
        };
        match view {
            View::Meminfo => render::meminfo(&host("/proc/meminfo"), &limits),
            View::Cpuinfo => render::cpuinfo(&host("/proc/cpuinfo"), &cpus().2),
            View::Stat => render::stat(&host("/proc/stat"), &cpus().2),
            View::Uptime => render::uptime(
                sup.started.elapsed().as_secs_f64(),
                cpus().2.len(),
                limits.cpu_usage_ns.map(|ns| ns as f64 / 1e9),
            ),
            View::Swaps => render::swaps(
                &host("/proc/swaps"),
                render::memory(&limits, &host("/proc/meminfo")).as_ref(),
            ),
            View::CpuOnline => match cpus() {
                (text, online, cpus) if cpus == online => text,
                (_, _, cpus) => render::online(cpus.len()),
            },
            // Static views are not marked; loadavg is above.
            View::Loadavg | View::Version | View::OsRelease | View::KernelVersion | View::OsType | View::Cmdline => {
                String::new()
            }
        }
    }
}

/// How often the load averages take a new sample of the container's
/// threads, as the kernel's (LOAD_FREQ, 5 s: kernel/sched/loadavg.c).
pub(crate) const LOAD_FREQ: Duration = Duration::from_secs(5);

/// The container's load averages, with its running and total threads when
/// `counts` (`/proc/loadavg` shows them; sysinfo(2) does not). The
/// averages kept in `sup` take a new sample of the container's active
/// threads at most every [`LOAD_FREQ`], decayed over the time since the
/// last (`dirs`: its cgroups; `caller`: the reader, counted as running).
/// Shared by `/proc/loadavg` and the emulated sysinfo(2), so they agree.
/// Without `counts` and within [`LOAD_FREQ`] of the last sample nothing
/// is read (sysinfo is called by every `qsort` of glibc's first use).
pub(crate) fn load(sup: &Supervisor, dirs: Option<&CgroupDirs>, caller: i32, counts: bool) -> ([f64; 3], usize, usize) {
    let now = Instant::now();
    let due = |at: Instant| now.saturating_duration_since(at) >= LOAD_FREQ;
    {
        let state = sup.loads.lock().unwrap_or_else(|e| e.into_inner());
        if !counts && !due(state.0) {
            return (state.1, 0, 0);
        }
    }
    let (active, running, total) = dirs.map_or((0, 0, 0), |d| tasks(d, caller));
    let mut state = sup.loads.lock().unwrap_or_else(|e| e.into_inner());
    let (at, loads) = *state;
    if due(at) {
        let loads = render::decay(loads, active, (now - at).as_secs_f64());
        *state = (now, loads);
    }
    (state.1, running, total)
}

/// The container's threads: (runnable or in uninterruptible sleep,
/// runnable, all), from its cgroup's thread list (v1 `tasks` of the cpu
/// or memory hierarchy, v2 `cgroup.threads`) and each `/proc/<tid>/stat`,
/// the supervisor's own threads left out.
/// The `opener`, waiting for this answer, counts as runnable, as a reader
/// of the kernel's own file is (at least one thread runs whoever opened).
fn tasks(dirs: &CgroupDirs, opener: i32) -> (usize, usize, usize) {
    let list = [
        dirs.cpu.as_ref().map(|d| d.join("tasks")),
        dirs.memory.as_ref().map(|d| d.join("tasks")),
        dirs.v2.as_ref().map(|d| d.join("cgroup.threads")),
    ]
    .into_iter()
    .flatten()
    .find_map(|p| std::fs::read_to_string(p).ok())
    .unwrap_or_default();
    // The supervisor's own threads are in the container's cpu and memory
    // cgroups too (charged to it: `join_cgroups`), but are not its threads.
    let own: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let (mut active, mut running, mut total, mut found) = (0, 0, 0, false);
    for tid in list.lines() {
        let tid = tid.trim();
        if own.contains(tid) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{tid}/stat")) else {
            continue;
        };
        total += 1;
        let state = if tid.parse() == Ok(opener) {
            found = true;
            Some('R')
        } else {
            stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next())
        };
        match state {
            Some('R') => {
                running += 1;
                active += 1;
            }
            Some('D') => active += 1,
            _ => {}
        }
    }
    // A reader whose open the supervisor makes for it (supervisor-level
    // enforcement), or another thread of the opener, is not `opener`:
    // whoever reads the file runs, as the kernel's own file always shows.
    if !found && total > 0 {
        running = running.max(1);
        active = active.max(1);
    }
    (active, running, total)
}

/// Serves the views' open events on a thread of their own until the
/// process exits. Each open is allowed, whether or not the view could be
/// rendered (the file then keeps its previous content).
pub(crate) fn serve(mut views: Views, sup: Arc<Supervisor>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("views".into())
        .stack_size(256 * 1024)
        .spawn(move || loop {
            let events = match views.fan.read_events() {
                Ok(e) => e,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => {
                    sup.audit
                        .record(0, "supervisor", &format!("views: {e}"), Decision::Event, "error");
                    return;
                }
            };
            for ev in events {
                let Some(fd) = ev.fd() else { continue };
                if ev.mask().contains(MaskFlags::FAN_OPEN_PERM) {
                    views.refresh(fd, ev.pid(), &sup);
                    let _ = views.fan.write_response(FanotifyResponse::new(fd, Response::FAN_ALLOW));
                }
            }
        })
        .map(drop)
}
