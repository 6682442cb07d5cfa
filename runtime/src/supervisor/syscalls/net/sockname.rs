//! getpeername(2) and getsockname(2) of a connection the relay made
//! ([`crate::supervisor::relay`]): the caller's socket is connected to the
//! relay's loopback listener, so the kernel would answer with loopback
//! addresses; the supervisor answers with the destination and the local
//! address a direct connection has. Any other socket is the kernel's to
//! answer (CONTINUE: nothing was decided, nothing read from the caller).

use super::*;

/// getpeername(fd, addr, addrlen) (`peer`) or getsockname(fd, addr,
/// addrlen). As net/socket.c does: `*addrlen` is read first (EFAULT, and
/// EINVAL when negative), the address is written cut to it, and its
/// whole length goes back in `*addrlen`.
pub fn sockname(ctx: &dyn Task, peer: bool) -> Outcome {
    let quiet = |reply| Outcome {
        record: false,
        ..Outcome::new(reply, Decision::Allow, String::new())
    };
    let Ok(sock) = socket_copy(ctx, ctx.arg(0) as i32) else {
        return quiet(Reply::Continue);
    };
    let Some((remote, local)) = crate::supervisor::relay::relayed(&sock) else {
        return quiet(Reply::Continue);
    };
    let bytes = crate::supervisor::relay::sockaddr(if peer { remote } else { local });
    let mut raw = [0u8; 4];
    if !matches!(ctx.read_mem(ctx.arg(2), &mut raw), Ok(4)) {
        return quiet(Reply::Errno(libc::EFAULT));
    }
    let Ok(len) = usize::try_from(i32::from_ne_bytes(raw)) else {
        return quiet(Reply::Errno(libc::EINVAL));
    };
    let cut = len.min(bytes.len());
    if cut > 0 && ctx.write_mem(ctx.arg(1), &bytes[..cut]).is_err() {
        return quiet(Reply::Errno(libc::EFAULT));
    }
    if ctx.write_mem(ctx.arg(2), &(bytes.len() as u32).to_ne_bytes()).is_err() {
        return quiet(Reply::Errno(libc::EFAULT));
    }
    quiet(Reply::Value(0))
}
