//! `state` and `list` (`runc state`, `runc list`): a container's OCI state
//! as runc prints it, with cordon's annotations.

use super::*;

/// The OCI state of a container, as `runc state` prints it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateJson {
    /// OCI runtime spec version.
    pub oci_version: String,
    /// Container id.
    pub id: String,
    /// Host pid of the init (0 once stopped).
    pub pid: i32,
    /// creating, created, running, paused or stopped.
    pub status: String,
    /// Absolute bundle path.
    pub bundle: PathBuf,
    /// Absolute rootfs path.
    pub rootfs: PathBuf,
    /// Creation time, RFC 3339.
    pub created: String,
    /// Owner (empty, as runc prints for root).
    pub owner: String,
    /// The spec's annotations plus `org.cordon.policy` and `org.cordon.platform`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<HashMap<String, String>>,
}

impl Runtime {
    /// The OCI state of container `id`.
    pub fn state(&self, id: &str) -> Result<StateJson> {
        let _lock = self.lock(id, false);
        let c = self.load(id)?;
        Ok(self.state_of(&c))
    }

    pub(super) fn state_of(&self, c: &Container) -> StateJson {
        let meta = self.meta(c.id());
        let bundle = if meta.bundle.as_os_str().is_empty() {
            c.bundle().clone()
        } else {
            meta.bundle.clone()
        };
        let rootfs = libcontainer::oci_spec::runtime::Spec::load(Self::built_config(c))
            .ok()
            .and_then(|s| s.root().as_ref().map(|r| r.path().clone()))
            .map(|p| if p.is_absolute() { p } else { bundle.join(p) })
            .unwrap_or_else(|| bundle.join("rootfs"));
        let mut annotations = c.state.annotations.clone().unwrap_or_default();
        if !meta.policy.is_empty() {
            annotations.insert(crate::annotations::POLICY.into(), meta.policy.clone());
            annotations.insert(crate::annotations::PLATFORM.into(), meta.platform.clone());
            if let Some(why) = &meta.fallback {
                annotations.insert(format!("{}-fallback", crate::annotations::PLATFORM), why.clone());
            }
            let level = if meta.kernel_enforced { "kernel" } else { "supervisor" };
            annotations.insert(crate::annotations::ENFORCEMENT.into(), level.into());
            if let Some(how) = &meta.enforcement {
                annotations.insert(format!("{}-detail", crate::annotations::ENFORCEMENT), how.clone());
            }
        }
        let status = c.status();
        StateJson {
            oci_version: "1.0.2".into(),
            id: c.id().to_string(),
            pid: match status {
                ContainerStatus::Stopped => 0,
                _ => c.pid().map(|p| p.as_raw()).unwrap_or(0),
            },
            status: status_str(status),
            bundle,
            rootfs,
            created: c
                .created()
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
                .unwrap_or_default(),
            owner: String::new(),
            annotations: (!annotations.is_empty()).then_some(annotations),
        }
    }

    /// Every container under the root, sorted by id.
    pub fn list(&self) -> Result<Vec<StateJson>> {
        let mut out = Vec::new();
        let entries = std::fs::read_dir(&self.root).map_err(io(format!("read {}", self.root.display())))?;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let _lock = self.lock(&name, false);
            if let Ok(c) = self.load(&name) {
                out.push(self.state_of(&c));
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}
