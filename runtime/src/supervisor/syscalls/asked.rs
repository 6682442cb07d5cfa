//! `access = "ask"` path rules: a file call on a path such a rule decides
//! waits for the decision program ([`crate::supervisor::ask`]).
//!
//! The decision is taken deep inside a handler, often while the thread has
//! taken the caller's credentials, where no question may be asked (the
//! program's socket is the supervisor's, and the thread may not be one
//! that can wait). So [`verdict`] answers from what is already known (an
//! answer given earlier in this call, or remembered for the container),
//! else leaves the path pending and fails the call with [`ASK_FIRST`];
//! [`asking`] then asks, on the handler's own thread and identity, and runs
//! the handler again, which now finds the answer. A call on a thread that
//! cannot wait goes to one that can first ([`super::again_to_ask`]).

use std::cell::RefCell;

use super::path::Denied;
use super::{Task, ASK_FIRST};
use crate::supervisor::ask::{self, Answer, Question};
use crate::supervisor::audit::Decision;

thread_local! {
    /// The path a handler's run left to ask about.
    static PENDING: RefCell<Option<String>> = const { RefCell::new(None) };
    /// The answers given during this call, by path.
    static ANSWERED: RefCell<Vec<(String, bool)>> = const { RefCell::new(Vec::new()) };
}

/// The verdict on container path `path`, which an `ask` rule decides:
/// `Ok` when the program allowed it (in this call, or remembered), the
/// rule's refusal when it denied, else [`ASK_FIRST`] with the path left
/// pending for [`asking`].
pub(crate) fn verdict(t: &dyn Task, path: &str) -> Result<(), Denied> {
    let given = ANSWERED.with(|a| a.borrow().iter().find(|(p, _)| p == path).map(|(_, ok)| *ok));
    let ok = match given {
        Some(ok) => ok,
        None => match t.sup().asker.remembered(&question(t, "", path)) {
            Some(a) => a == Answer::Allow,
            None => {
                PENDING.with(|p| *p.borrow_mut() = Some(path.to_string()));
                return Err(Denied::Errno(ASK_FIRST));
            }
        },
    };
    if ok {
        Ok(())
    } else {
        Err(Denied::Policy(path.to_string()))
    }
}

/// Runs `run` (a handler's decision and its act), asking each question it
/// leaves pending and running it again, on this thread when it may wait
/// ([`ask::may_wait`]); returns its result, or [`ASK_FIRST`] when a
/// question must wait and this thread cannot. `syscall` names the call in
/// the questions.
pub(crate) fn asking<T>(t: &dyn Task, syscall: &str, mut run: impl FnMut() -> Result<T, Denied>) -> Result<T, Denied> {
    ANSWERED.with(|a| a.borrow_mut().clear());
    // A call names at most a few paths (a rename two, a creation through
    // dangling links a few more); past that it is refused.
    let mut out = Err(Denied::Errno(libc::EACCES));
    for _ in 0..8 {
        match run() {
            Err(Denied::Errno(ASK_FIRST)) => {
                let Some(path) = PENDING.with(|p| p.borrow_mut().take()) else {
                    break;
                };
                if !ask::may_wait() {
                    out = Err(Denied::Errno(ASK_FIRST));
                    break;
                }
                let ok = ask_now(t, syscall, &path);
                ANSWERED.with(|a| a.borrow_mut().push((path, ok)));
            }
            r => {
                out = r;
                break;
            }
        }
    }
    ANSWERED.with(|a| a.borrow_mut().clear());
    out
}

/// The question about `path` for `syscall`, under the rule that decides it.
fn question(t: &dyn Task, syscall: &str, path: &str) -> Question {
    ask::path_question(t.sup(), t.pid(), syscall, path)
}

/// Asks the program about `path` now (this thread waits); the trail
/// records the question's answer and how it came.
fn ask_now(t: &dyn Task, syscall: &str, path: &str) -> bool {
    let sup = t.sup();
    let mut q = question(t, syscall, path);
    let (answer, how) = match sup.asker.remembered(&q) {
        Some(a) => (a, "remembered".to_string()),
        None => {
            q.command = ask::command_of(q.pid);
            sup.asker.ask(&q)
        }
    };
    let ok = answer == Answer::Allow;
    let action = if ok { Decision::Allow } else { Decision::Deny };
    sup.audit.record_by(t.pid(), syscall, path, action, &how, Some(&q.rule));
    ok
}
