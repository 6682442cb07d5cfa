//! `cordon policy update ID FILE`: a running container's supervisor-level
//! rules replaced in place (docs/POLICY.md, "Live policy").

use std::path::Path;

use super::{Error, Result, Runtime, POLICY_FILE};

impl Runtime {
    /// Puts policy `file` (a built-in name or a file) in force in
    /// container `id` (created, running or paused): the supervisor
    /// decides every call from then on under it, `exec` and a fork or
    /// restore of the container load it. Refused, with nothing changed,
    /// when it changes what the kernel enforces
    /// ([`crate::policy::live::refusal`]).
    ///
    /// Errors: [`Error::NotFound`], [`Error::BadState`] (stopped),
    /// [`Error::Policy`] (the file does not load), [`Error::PolicyUpdate`]
    /// (refused, or the supervisor cannot be reached).
    pub fn update_policy(&self, id: &str, file: &str) -> Result<()> {
        let _lock = self.lock(id, true);
        self.load_live(id, "update its policy")?;
        let refused = |why: String| Error::PolicyUpdate { id: id.into(), why };
        let meta = self.meta(id);
        let dir = self.cordon_dir(id);
        let now_text = std::fs::read_to_string(dir.join(POLICY_FILE)).map_err(|e| {
            refused(format!(
                "read the running policy {}: {e}",
                dir.join(POLICY_FILE).display()
            ))
        })?;
        let now = crate::filter::policy_from_toml(&now_text, &meta.policy)?;
        let asked = crate::filter::load_policy(file)?;
        if let Some(why) = crate::policy::live::refusal(&now, &asked, meta.kernel_enforced) {
            return Err(refused(format!("{file}: {why}")));
        }
        let text = toml::to_string_pretty(&asked.source).map_err(Error::RenderPolicy)?;
        let next = dir.join(format!("{POLICY_FILE}.next"));
        let _ = std::fs::remove_file(&next);
        super::create::write_private(&next, text.as_bytes())
            .map_err(|e| refused(format!("write {}: {e}", next.display())))?;
        let sent = crate::supervisor::connect(&dir)
            .and_then(|mut sock| crate::supervisor::handshake::send_update(&mut sock, file, &text));
        match sent {
            Ok(Ok(())) => self.keep_updated(id, file, &next, &dir.join(POLICY_FILE)),
            Ok(Err(why)) => {
                let _ = std::fs::remove_file(&next);
                Err(refused(format!("{file}: the supervisor refused it: {why}")))
            }
            Err(e) => {
                let _ = std::fs::remove_file(&next);
                Err(refused(format!("cannot reach the supervisor: {e}")))
            }
        }
    }

    /// Makes the policy in force (at `next`) container `id`'s own: what
    /// `exec`, a fork and a restore load, and the name `state` shows.
    fn keep_updated(&self, id: &str, file: &str, next: &Path, fixed: &Path) -> Result<()> {
        std::fs::rename(next, fixed).map_err(super::io(format!("replace {}", fixed.display())))?;
        let mut meta = self.meta(id);
        // A file by its absolute path (a built-in by its name), as create
        // records it.
        let builtin = crate::policy::BUILTIN.iter().any(|(n, _)| *n == file);
        meta.policy = match std::fs::canonicalize(file) {
            Ok(p) if !builtin => p.to_string_lossy().into_owned(),
            _ => file.to_string(),
        };
        self.save_meta(id, &meta)
    }
}
