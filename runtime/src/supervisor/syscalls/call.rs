//! One call a path handler serves: the caller, the syscall table's entry
//! of the form it called, and its arguments read by kind ([`Arg`]) from the
//! registers that entry names. A handler serves every form of its call
//! (chmod, fchmodat, fchmodat2, fchmod) without knowing their names: what
//! differs between forms is written in the table, once.

use super::asked;
use super::path::Denied;
use super::{again_to_ask, Outcome, Reply, Task, ASK_FIRST};
use crate::abi::table::{Arg, Entry};
use crate::supervisor::audit::Decision;
use crate::supervisor::creds::Creds;

/// A path handler: decides and acts on one call, giving the syscall's
/// return value or why it fails.
pub(super) type PathHandler = fn(&mut Call<'_>) -> Result<i64, Denied>;

/// One call being handled: what every path handler takes.
pub(super) struct Call<'c> {
    /// The caller.
    pub ctx: &'c dyn Task,
    /// The entry of the form the caller called.
    pub entry: &'static Entry,
    /// The caller's credentials, taken once.
    pub creds: &'c Creds,
    /// The audit detail: the container path(s) the call named.
    pub detail: &'c mut String,
}

impl Call<'_> {
    /// Whether this form has argument `a`.
    pub fn has(&self, a: Arg) -> bool {
        self.entry.arg(a).is_some()
    }

    /// The raw register holding `a`; 0 for a form without it.
    pub fn word(&self, a: Arg) -> u64 {
        self.entry.arg(a).map(|i| self.ctx.arg(i)).unwrap_or(0)
    }

    /// The fd in `a` ([`Arg::Dirfd`], [`Arg::Dirfd2`], [`Arg::Fd`]), as the
    /// kernel reads it (an int); `AT_FDCWD` for a form without it.
    pub fn fd(&self, a: Arg) -> i32 {
        self.entry
            .arg(a)
            .map(|i| self.ctx.arg(i) as i32)
            .unwrap_or(libc::AT_FDCWD)
    }

    /// The path: its directory fd ([`Call::fd`] of [`Arg::Dirfd`]) and the
    /// register holding its address. ENOSYS for a form without a path
    /// (the table's tests make sure each path handler's forms have one).
    pub fn path(&self) -> Result<(i32, usize), Denied> {
        let at = self.entry.arg(Arg::Path).ok_or(Denied::Errno(libc::ENOSYS))?;
        Ok((self.fd(Arg::Dirfd), at))
    }

    /// The second path ([`Arg::Path2`] relative to [`Arg::Dirfd2`]), as
    /// [`Call::path`].
    pub fn path2(&self) -> Result<(i32, usize), Denied> {
        let at = self.entry.arg(Arg::Path2).ok_or(Denied::Errno(libc::ENOSYS))?;
        Ok((self.fd(Arg::Dirfd2), at))
    }

    /// The flags as the kernel reads them (an int), or the ones a form
    /// without them implies ([`Entry::implied`]).
    pub fn flags(&self) -> i32 {
        match self.entry.arg(Arg::Flags) {
            Some(i) => self.ctx.arg(i) as i32,
            None => self.entry.implied,
        }
    }

    /// The mode (an unsigned int, as the kernel reads `umode_t`).
    pub fn mode(&self) -> u32 {
        self.word(Arg::Mode) as u32
    }
}

/// Runs path handler `f` for a call of `entry`, taking the caller's
/// credentials first (ESRCH when it is gone), asking the decision program
/// where an `ask` rule says so, and recording the container paths the call
/// named. A path rule's refusal gives EACCES and names the rule.
pub(super) fn by_path(ctx: &dyn Task, entry: &'static Entry, f: PathHandler) -> Outcome {
    let mut detail = String::new();
    let run = |detail: &mut String| {
        let creds = ctx.creds().map_err(|_| Denied::Errno(libc::ESRCH))?;
        f(&mut Call {
            ctx,
            entry,
            creds: &creds,
            detail,
        })
    };
    let reply = match asked::asking(ctx, entry.name, || run(&mut detail)) {
        Ok(v) => Reply::Value(v),
        Err(Denied::Policy(p)) => return Outcome::path_denied(ctx, p),
        Err(Denied::Errno(ASK_FIRST)) => return again_to_ask(detail, move |ctx| by_path(ctx, entry, f)),
        Err(Denied::Errno(e)) => Reply::Errno(e),
    };
    Outcome::new(reply, Decision::Allow, detail)
}
