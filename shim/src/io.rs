//! A process's standard streams between containerd's fifos and the
//! container: pipes (or a pty) on the container's side, copy threads on
//! the shim's. containerd names the fifos in Create and Exec requests
//! (an empty name means none: /dev/null).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use cordon::container::StdioFds;

/// The fifo paths containerd gave for a process.
#[derive(Debug, Clone, Default)]
pub struct StdioPaths {
    /// Fifo the shim reads the process's input from ("" = none).
    pub stdin: String,
    /// Fifo the shim writes the process's output to ("" = none).
    pub stdout: String,
    /// Fifo for the error stream ("" = none; unused with a terminal).
    pub stderr: String,
    /// Whether the process has a pty (stdout and stderr merged).
    pub terminal: bool,
}

/// The shim's side of a process's streams, alive until the process is
/// deleted.
#[derive(Default)]
pub struct ProcessIo {
    /// Where copied input goes: the stdin pipe or the pty master. Taken
    /// (closed) by CloseIO so the process reads EOF.
    stdin: Arc<Mutex<Option<File>>>,
    /// The pty master, for ResizePty.
    console: Option<Arc<File>>,
    /// Output copy threads; they end at EOF (every writer gone).
    copiers: Vec<JoinHandle<()>>,
}

/// What the container's side gets: the fds to hand to libcontainer, and
/// for a terminal the console socket libcontainer sends the master to.
pub struct Prepared {
    /// Pipes for a process without a terminal.
    pub stdio: Option<StdioFds>,
    /// Socket for a process with a terminal.
    pub console: Option<ConsoleSocket>,
    /// The shim's side.
    pub io: ProcessIo,
    // Output pipe read ends, copied once the process runs.
    out_readers: Vec<(File, String)>,
    // The stdin fifo, copied into the process once it runs.
    stdin_fifo: String,
    // The output fifo of a terminal process.
    terminal_out: String,
}

/// A listening AF_UNIX socket (`--console-socket`) that receives the pty
/// master from the container (runc's console protocol: one SCM_RIGHTS
/// message).
pub struct ConsoleSocket {
    listener: UnixListener,
    /// Its path, given to libcontainer.
    pub path: PathBuf,
}

impl Drop for ConsoleSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn pipe() -> std::io::Result<(File, File)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    Ok((File::from(r), File::from(w)))
}

fn dev_null(write: bool) -> std::io::Result<OwnedFd> {
    let f = OpenOptions::new().read(!write).write(write).open("/dev/null")?;
    Ok(f.into())
}

/// Sets up the streams of a process that has not started yet. `sock_dir`
/// holds the console socket of a terminal process.
pub fn prepare(paths: &StdioPaths, sock_dir: &Path, name: &str) -> std::io::Result<Prepared> {
    let mut p = Prepared {
        stdio: None,
        console: None,
        io: ProcessIo::default(),
        out_readers: Vec::new(),
        stdin_fifo: paths.stdin.clone(),
        terminal_out: paths.stdout.clone(),
    };
    if paths.terminal {
        let path = sock_dir.join(format!("console-{name}.sock"));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        p.console = Some(ConsoleSocket { listener, path });
        return Ok(p);
    }
    let stdin: OwnedFd = if paths.stdin.is_empty() {
        dev_null(false)?
    } else {
        let (r, w) = pipe()?;
        *p.io.stdin.lock().unwrap_or_else(|e| e.into_inner()) = Some(w);
        r.into()
    };
    let mut out = |path: &str| -> std::io::Result<OwnedFd> {
        if path.is_empty() {
            return dev_null(true);
        }
        let (r, w) = pipe()?;
        p.out_readers.push((r, path.to_string()));
        Ok(w.into())
    };
    let stdout = out(&paths.stdout)?;
    let stderr = out(&paths.stderr)?;
    p.stdio = Some(StdioFds(Arc::new([stdin, stdout, stderr])));
    Ok(p)
}

impl Prepared {
    /// Once the process exists: receives the pty master (terminal), closes
    /// the shim's copies of the container's ends, and starts copying.
    pub fn connect(mut self) -> std::io::Result<ProcessIo> {
        // The container's ends must only be held by the container, or the
        // output copiers never see EOF.
        self.stdio = None;
        let mut io = self.io;
        if let Some(sock) = self.console.take() {
            let master = receive_master(&sock)?;
            // Input goes to the master; its output is the fifo named
            // stdout (a pty merges stderr into it).
            *io.stdin.lock().unwrap_or_else(|e| e.into_inner()) = Some(master.try_clone()?);
            io.copiers
                .push(spawn_output(master.try_clone()?, self.terminal_out.clone()));
            io.console = Some(Arc::new(master));
        }
        for (reader, fifo) in self.out_readers.drain(..) {
            io.copiers.push(spawn_output(reader, fifo));
        }
        if !self.stdin_fifo.is_empty() {
            spawn_input(self.stdin_fifo.clone(), io.stdin.clone());
        }
        Ok(io)
    }
}

impl ProcessIo {
    /// CloseIO: the process reads EOF on its stdin.
    pub fn close_stdin(&self) {
        self.stdin.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// ResizePty: TIOCSWINSZ on the pty master (no-op without a terminal).
    pub fn resize(&self, width: u32, height: u32) -> std::io::Result<()> {
        let Some(master) = &self.console else { return Ok(()) };
        let ws = libc::winsize {
            ws_row: height as u16,
            ws_col: width as u16,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize from the valid pointer.
        let r = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits (up to `timeout`) for the output copiers to drain.
    pub fn wait_output(&mut self, timeout: std::time::Duration) {
        let deadline = std::time::Instant::now() + timeout;
        for h in self.copiers.drain(..) {
            while !h.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }
}

/// Copies `reader` into the fifo at `path` until EOF (or until nobody
/// reads the fifo any more).
fn spawn_output(mut reader: File, path: String) -> JoinHandle<()> {
    std::thread::spawn(move || {
        if path.is_empty() {
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
            return;
        }
        // Blocks until containerd's reader is there.
        let Ok(mut fifo) = OpenOptions::new().write(true).open(&path) else {
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
            return;
        };
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match reader.read(&mut buf) {
                // A pty master reads EIO once the last slave fd closed.
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if fifo.write_all(&buf[..n]).is_err() {
                        // Keep draining so the process never blocks on a
                        // full pipe nobody reads.
                        let _ = std::io::copy(&mut reader, &mut std::io::sink());
                        break;
                    }
                }
            }
        }
    })
}

/// Copies the stdin fifo into the process until the fifo's writer closes
/// or CloseIO takes the destination; then the process reads EOF.
fn spawn_input(path: String, dest: Arc<Mutex<Option<File>>>) {
    std::thread::spawn(move || {
        // Blocks until containerd's writer is there.
        let Ok(mut fifo) = File::open(&path) else { return };
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            let n = match fifo.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let mut guard = dest.lock().unwrap_or_else(|e| e.into_inner());
            let Some(w) = guard.as_mut() else { return };
            if w.write_all(&buf[..n]).is_err() {
                return;
            }
        }
        // EOF from containerd: close the pipe, unless it is the pty master
        // (the output side still needs it; a terminal's EOF is a VEOF byte).
        let mut guard = dest.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = guard.as_ref() {
            if is_pipe(w.as_raw_fd()) {
                guard.take();
            }
        }
    });
}

fn is_pipe(fd: RawFd) -> bool {
    nix::sys::stat::fstat(fd)
        .map(|st| (st.st_mode & libc::S_IFMT) == libc::S_IFIFO)
        .unwrap_or(false)
}

/// Accepts the container's connection on the console socket and takes the
/// pty master from its SCM_RIGHTS message. The container sent it during
/// create, so the connection is already queued.
fn receive_master(sock: &ConsoleSocket) -> std::io::Result<File> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    sock.listener.set_nonblocking(true)?;
    let (conn, _) = sock.listener.accept()?;
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut buf = [0u8; 4096];
    let mut iov = [std::io::IoSliceMut::new(&mut buf)];
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(conn.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC)
        .map_err(std::io::Error::from)?;
    for c in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            if let Some(&fd) = fds.first() {
                for &extra in &fds[1..] {
                    let _ = nix::unistd::close(extra);
                }
                // SAFETY: SCM_RIGHTS installed `fd` in this process just now;
                // nothing else owns it.
                return Ok(unsafe { File::from_raw_fd(fd) });
            }
        }
    }
    Err(std::io::Error::other("the console socket received no pty master"))
}
