//! Live policy updates (`cordon policy update ID FILE`): the supervisor's
//! side. The runtime checks the update first (`policy::live::refusal`)
//! and sends the new policy's TOML over the supervisor's socket
//! ([`super::handshake::send_update`]); the supervisor checks it again
//! against the policy in force, puts it in force for every call decided
//! from then on ([`super::Supervisor::replace_policy`]) and records the
//! change with both policies' digests.
//!
//! Only root of the host may update: the socket is the container's state
//! directory's (mode 0600, never inside the container), and the peer must
//! be uid 0 in the supervisor's own pid namespace (a container process
//! that reached the socket is refused).

use std::os::unix::net::UnixStream;

use sha2::Digest;

use super::{handshake, Supervisor};
use crate::supervisor::audit::Decision;

/// Serves one update request on `stream`: `name` and the policy `text`.
pub(super) fn serve(sup: &Supervisor, name: &str, text: &str, stream: &mut UnixStream) {
    let refused = match authorised(stream).and_then(|()| replace(sup, name, text)) {
        Ok(line) => {
            sup.audit.record(0, "supervisor", &line, Decision::Event, "policy");
            None
        }
        Err(why) => {
            let line = format!("policy update to {name} refused: {why}");
            sup.audit.record(0, "supervisor", &line, Decision::Event, "error");
            Some(why)
        }
    };
    let _ = handshake::answer_update(stream, refused.as_deref());
}

/// Whether the peer of `stream` may update: uid 0, in this process's pid
/// namespace.
fn authorised(stream: &UnixStream) -> Result<(), String> {
    let cred = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    if cred.uid() != 0 {
        return Err(format!("uid {} may not update a policy (only root may)", cred.uid()));
    }
    let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok();
    match (ns(&cred.pid().to_string()), ns("self")) {
        (Some(theirs), Some(ours)) if theirs == ours => Ok(()),
        _ => Err(format!("pid {} is not in the host's pid namespace", cred.pid())),
    }
}

/// Compiles `text`, checks it may replace the policy in force and puts it
/// in force; the audit line, or why not.
fn replace(sup: &Supervisor, name: &str, text: &str) -> Result<String, String> {
    let asked = crate::filter::policy_from_toml(text, name).map_err(|e| e.to_string())?;
    let now = sup.policy();
    if let Some(why) = crate::policy::live::refusal(&now, &asked, !sup.emulates_files) {
        return Err(why);
    }
    let before = digest(&now.source);
    let after = digest(&asked.source);
    let new_name = asked.name.clone();
    let old = sup.replace_policy(asked);
    Ok(format!(
        "policy {} (sha256 {before}) replaced by {new_name} (sha256 {after}) from {name}",
        old.name
    ))
}

/// The first 16 hex digits of the SHA-256 of a policy's TOML rendering
/// (`cordon policy show`'s text), as the trail names a policy.
pub fn digest(source: &crate::policy::model::PolicyFile) -> String {
    let text = toml::to_string_pretty(source).unwrap_or_default();
    let sum = sha2::Sha256::digest(text.as_bytes());
    sum.iter().take(8).map(|b| format!("{b:02x}")).collect()
}
