//! Where a cgroup v1 controller's hierarchy is mounted on the host and
//! which cgroup of it a task is in: what the device checks, the supervisor's
//! memory cgroup and the device-rule correction need (cgroups(7),
//! proc_pid_mountinfo(5)). A cgroup v2 host has no v1 hierarchies: both
//! answer `None` there.

use std::io;
use std::path::PathBuf;

/// The mount point of the host's v1 hierarchy that carries `controller`
/// (`devices`, `memory`, ...), from this process's `/proc/self/mountinfo`
/// (a hierarchy mounted from its root). `None` without one.
pub fn mount_point(controller: &str) -> Option<PathBuf> {
    mount_point_in(&std::fs::read_to_string("/proc/self/mountinfo").ok()?, controller)
}

/// [`mount_point`] on a mountinfo text.
pub fn mount_point_in(mountinfo: &str, controller: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let mut post = post.split_whitespace();
        let (fstype, _src, opts) = (post.next()?, post.next()?, post.next()?);
        let mut pre = pre.split_whitespace();
        let root = pre.nth(3)?;
        let point = pre.next()?;
        (fstype == "cgroup" && root == "/" && opts.split(',').any(|o| o == controller)).then(|| PathBuf::from(point))
    })
}

/// Task `pid`'s cgroup path in the v1 hierarchy of `controller`, as
/// `/proc/<pid>/cgroup` gives it (`/cordon/c1`); `None` when no v1
/// hierarchy carries the controller.
///
/// Errors: the task is gone (its `/proc` entry cannot be read).
pub fn path_of(pid: i32, controller: &str) -> io::Result<Option<String>> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
    Ok(cgroups.lines().find_map(|l| {
        let mut p = l.splitn(3, ':');
        let (_, controllers, path) = (p.next()?, p.next()?, p.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_string())
    }))
}

/// The host directory of task `pid`'s cgroup in the v1 hierarchy of
/// `controller` ([`path_of`] below the hierarchy's mount point).
/// `Ok(None)` when the host has no such hierarchy.
///
/// Errors: the task is gone (its `/proc` entry cannot be read).
pub fn dir_of(pid: i32, controller: &str) -> io::Result<Option<PathBuf>> {
    Ok(match (path_of(pid, controller)?, mount_point(controller)) {
        (Some(path), Some(mount)) => Some(mount.join(path.trim_start_matches('/'))),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_a_controller_mounted_from_its_root() {
        let info = "36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n\
                    37 31 0:34 /x /mnt/memory rw - cgroup cgroup rw,memory\n\
                    38 31 0:35 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        let mp = |c| super::mount_point_in(info, c);
        assert_eq!(mp("devices"), Some("/sys/fs/cgroup/devices".into()));
        assert_eq!(mp("memory"), None, "not its root");
        assert_eq!(mp("cpuacct"), Some("/sys/fs/cgroup/cpu,cpuacct".into()));
        assert_eq!(mp("pids"), None);
    }
}
