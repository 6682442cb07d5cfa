//! Process-wide state and the fds a process is handed: signals
//! (tgkill(2), signal dispositions), fork(2) and exec of the watchdog, the
//! environment, the umask-free heap and page trimming, and taking
//! ownership of fds received from a parent or over a socket.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::cvt;

/// Sends `sig` to thread `tid` of thread group `tgid` (tgkill(2)).
pub fn tgkill(tgid: i32, tid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: tgkill(2) with integer arguments only; no memory effects.
    cvt(unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, sig) }).map(drop)
}

extern "C" fn on_signal_noop(_: libc::c_int) {}

/// Installs a handler for `sig` that does nothing: the signal then only
/// interrupts a blocking call of the thread it hits (EINTR), instead of
/// killing the process.
pub fn install_empty_handler(sig: nix::sys::signal::Signal) -> nix::Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet};
    let sa = SigAction::new(SigHandler::Handler(on_signal_noop), SaFlags::empty(), SigSet::empty());
    // SAFETY: the handler does nothing, so it is async-signal-safe.
    unsafe { sigaction(sig, &sa) }.map(drop)
}

/// Restores the default disposition of `sig` (signal(2) `SIG_DFL`).
pub fn default_disposition(sig: nix::sys::signal::Signal) -> nix::Result<()> {
    use nix::sys::signal::{signal, SigHandler};
    // SAFETY: restoring the default disposition installs no handler.
    unsafe { signal(sig, SigHandler::SigDfl) }.map(drop)
}

/// When process `pid` started, in clock ticks after boot (field 22 of
/// `/proc/PID/stat`, proc(5)): with the pid, it names one process for
/// good, a zombie or one exiting too (whose command line reads empty).
///
/// Errors: no such process, or a stat line that does not parse (EIO).
pub fn start_time(pid: i32) -> io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) is in parentheses and may hold anything:
    // the fields after the last ')' start with field 3.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(22 - 3))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))
}

/// The number of threads of this process (`/proc/self/status`).
fn threads() -> io::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))
}

/// fork(2) of a process that has one thread: the child is a faithful copy
/// with no lock held by another thread. EBUSY when the process has more
/// than one thread (nothing is forked).
pub fn fork_single_threaded() -> io::Result<nix::unistd::ForkResult> {
    if threads()? != 1 {
        return Err(io::Error::from_raw_os_error(libc::EBUSY));
    }
    // SAFETY: the process has one thread (checked above; only this thread
    // could start another), so the child inherits no lock held elsewhere.
    unsafe { nix::unistd::fork() }.map_err(io::Error::from)
}

/// Sets environment variable `key` to `value` in a process that has one
/// thread (no other thread can read the environment meanwhile). EBUSY when
/// the process has more (nothing is set).
pub fn set_env_single_threaded(key: &str, value: impl AsRef<std::ffi::OsStr>) -> io::Result<()> {
    if threads()? != 1 {
        return Err(io::Error::from_raw_os_error(libc::EBUSY));
    }
    // SAFETY: one thread (checked above): nothing reads the environment
    // concurrently.
    unsafe { std::env::set_var(key, value) };
    Ok(())
}

/// execveat(2) of the program open as fd number `fd` (`AT_EMPTY_PATH`)
/// with `argv` and an empty environment. Returns only on failure.
pub fn execveat_fd(fd: RawFd, argv: &[&CStr]) -> io::Error {
    let mut args: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    args.push(std::ptr::null());
    let envp = [std::ptr::null::<libc::c_char>()];
    // SAFETY: argv and envp are NULL-terminated arrays of C strings that
    // outlive the call; the empty path literal is NUL-terminated.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            fd,
            c"".as_ptr(),
            args.as_ptr(),
            envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    io::Error::last_os_error()
}

/// A sealed memfd (memfd_create(2), `F_ADD_SEALS` of every seal) holding
/// `bytes`, close-on-exec, named `name` (shown in /proc/pid/fd).
pub fn sealed_memfd(name: &CStr, bytes: &[u8]) -> io::Result<OwnedFd> {
    use std::io::Write;
    // SAFETY: memfd_create(2) with a valid NUL-terminated name.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd we own.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(bytes)?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl(2) F_ADD_SEALS with an integer argument on our memfd.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file.into())
}

/// Sets close-on-exec on fd number `fd` (fcntl(2) `F_SETFD`), replacing its
/// other fd flags.
pub fn set_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl(2) with integer arguments only; a bad fd gives EBADF.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) }.into()).map(drop)
}

/// The fd numbers [`own_fd`] adopted in this process (and, across a
/// fork, in its parent): each is adopted once.
static ADOPTED: std::sync::Mutex<Vec<RawFd>> = std::sync::Mutex::new(Vec::new());

/// Takes ownership of fd number `fd`, which this process was handed from
/// outside (inherited from the parent that started it, at a number that
/// parent named, or placed by the process itself with dup2(2) before any
/// other owner exists): closing the returned fd closes it.
///
/// Checked: the number is open (fcntl(2) `F_GETFD`; else EBADF), and it
/// was not adopted before in this process (else EBUSY), so two calls
/// cannot make two owners. A number adopted once stays refused, even after
/// its owner closed it (the kernel may have reused it for another owner).
///
/// The precondition left to the caller: the number must not belong to an
/// owner created otherwise in this process (a `File` it opened, say); only
/// numbers handed in from outside qualify. Received `SCM_RIGHTS` fds come
/// owned from [`super::net::recv_with_fds`] instead.
pub fn own_fd(fd: RawFd) -> io::Result<OwnedFd> {
    let mut adopted = ADOPTED.lock().unwrap_or_else(|e| e.into_inner());
    if adopted.contains(&fd) {
        return Err(io::Error::from_raw_os_error(libc::EBUSY));
    }
    // SAFETY: fcntl(2) with integer arguments only; a closed or negative
    // fd gives EBADF.
    cvt(unsafe { libc::fcntl(fd, libc::F_GETFD) }.into())?;
    adopted.push(fd);
    // SAFETY: `fd` is open and adopted here for the first time (checked
    // above, under the lock), and the caller names a number handed in from
    // outside that no other owner in this process holds (see above).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// send(2) of `bytes` on the socket at fd number `fd` with `flags`.
/// Returns the bytes sent.
pub fn send_raw(fd: RawFd, bytes: &[u8], flags: i32) -> io::Result<usize> {
    // SAFETY: a buffer we borrow with its length; send(2) only reads it,
    // and a bad fd gives EBADF.
    cvt(unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), flags) } as libc::c_long).map(|n| n as usize)
}

/// Sets this process's umask to `mask`; returns the previous one.
pub fn umask(mask: u32) -> u32 {
    // SAFETY: umask(2) only changes this process's file mode creation mask.
    unsafe { libc::umask(mask) }
}

/// Returns free heap pages to the kernel (malloc_trim(3)).
pub fn malloc_trim() {
    // SAFETY: malloc_trim only releases memory malloc holds free.
    unsafe { libc::malloc_trim(0) };
}

/// Sets up `cmd`'s child, between fork and exec: fd `fd3` becomes fd 3 and
/// `fd4` fd 4 (both kept open at exec), the child starts a new session
/// (setsid(2)), and every fd from 5 up closes at exec (close_range(2)
/// `CLOSE_RANGE_CLOEXEC`: an engine's pipes must not be held open). The
/// spawn fails with the error of a failed move. `cmd` holds close-on-exec
/// duplicates of both until it is dropped. Errors: a duplicate cannot be
/// made (EMFILE).
pub fn pre_exec_fds_3_4(cmd: &mut std::process::Command, fd3: BorrowedFd<'_>, fd4: BorrowedFd<'_>) -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    // Ours for as long as the closure lives: the numbers it uses stay
    // these files whatever the caller closes meanwhile.
    let (fd3, fd4) = (fd3.try_clone_to_owned()?, fd4.try_clone_to_owned()?);
    // SAFETY: the closure runs in the forked child before exec and only
    // makes async-signal-safe syscalls (fcntl, dup2, setsid, close_range)
    // on fds it owns.
    unsafe {
        cmd.pre_exec(move || {
            // Out of the way of fds 3 and 4 first, then into place.
            let w = libc::fcntl(fd3.as_raw_fd(), libc::F_DUPFD, 5);
            let l = libc::fcntl(fd4.as_raw_fd(), libc::F_DUPFD, 5);
            if w < 0 || l < 0 || libc::dup2(w, 3) < 0 || libc::dup2(l, 4) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::setsid();
            libc::syscall(libc::SYS_close_range, 5u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
            Ok(())
        });
    }
    Ok(())
}

/// The soft and hard limit `resource` of this process (getrlimit(2)).
pub fn getrlimit(resource: libc::__rlimit_resource_t) -> io::Result<libc::rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the rlimit struct we own.
    cvt(unsafe { libc::getrlimit(resource, &mut r) }.into())?;
    Ok(r)
}

/// Drops this process's page-table entries for file pages it never
/// modified (program text and read-only data of cordon and libc), so an
/// idle supervisor's resident set is what it uses, not what starting up
/// touched: the pages stay in the page cache, shared with every other
/// cordon process, and the few the serving loop needs fault back in on
/// first use (minor faults). Mappings holding any private copy of a page
/// (relocated data, "Anonymous:" in smaps) are left alone, since
/// MADV_DONTNEED would revert those to the file's contents.
///
/// Source: madvise(2) MADV_DONTNEED; proc(5) /proc/pid/smaps.
pub fn drop_clean_file_pages() {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return;
    };
    let mut current: Option<(usize, usize, bool)> = None;
    let flush = |m: Option<(usize, usize, bool)>| {
        if let Some((start, end, true)) = m {
            // SAFETY: the range is one whole mapping of this process, not
            // writable and with no private pages: dropping its page-table
            // entries only makes the next access read the page cache again.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        }
    };
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        let first = f.next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            flush(current.take());
            let perms = f.next().unwrap_or("");
            let path = f.nth(3).unwrap_or("");
            let (Ok(start), Ok(end)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
                continue;
            };
            let candidate = path.starts_with('/') && perms.as_bytes().get(1) == Some(&b'-');
            current = Some((start, end, candidate));
        } else if first == "Anonymous:" && f.next() != Some("0") {
            if let Some(c) = current.as_mut() {
                c.2 = false;
            }
        }
    }
    flush(current);
}

#[cfg(test)]
mod tests {
    use std::os::fd::IntoRawFd;

    use super::*;

    #[test]
    fn a_start_time_names_one_process() {
        let me = std::process::id() as i32;
        let t = start_time(me).unwrap();
        assert!(t > 0);
        assert_eq!(start_time(me).unwrap(), t, "the same process, the same time");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        let c = start_time(pid).unwrap();
        assert!(c >= t, "a child starts after its parent");
        child.wait().unwrap();
        assert!(start_time(pid).is_err(), "a reaped process has none");
    }

    #[test]
    fn an_fd_number_is_adopted_once_and_only_when_open() {
        let raw = std::fs::File::open("/dev/null").unwrap().into_raw_fd();
        let owned = own_fd(raw).expect("an open fd handed in");
        assert_eq!(
            own_fd(raw).unwrap_err().raw_os_error(),
            Some(libc::EBUSY),
            "a second owner"
        );
        drop(owned);
        assert_eq!(
            own_fd(raw).unwrap_err().raw_os_error(),
            Some(libc::EBUSY),
            "a number adopted before stays refused"
        );
        assert_eq!(own_fd(-1).unwrap_err().raw_os_error(), Some(libc::EBADF));
        assert_eq!(
            own_fd(1 << 30).unwrap_err().raw_os_error(),
            Some(libc::EBADF),
            "not open"
        );
    }
}
