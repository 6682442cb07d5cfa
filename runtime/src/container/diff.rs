//! `diff` (docs/CHECKPOINT.md): what changed in a container's files since a
//! checkpoint, or since it started.

use super::snapshot::*;
use super::*;

impl Runtime {
    /// The changes of container `id`'s files since checkpoint `name`, or
    /// since it started; with `content`, each regular file's digests
    /// before and now and, for text, a unified diff ([`Content`]).
    pub fn diff(&self, id: &str, name: Option<&str>, content: bool) -> Result<Vec<Change>> {
        let (layer, lowers) = self.layer_of(id)?;
        let points = self.mount_points(id);
        let mut changes = layer.diff(id, name, &lowers)?;
        if content {
            layer.with_content(id, name, &lowers, &mut changes)?;
        }
        // The mount points the runtime made for volumes, and the
        // directories above them it made or changed on the way, are not
        // the container's changes (what the container adds beneath them
        // still is).
        changes.retain(|c| !(matches!(c.kind, 'A' | 'C') && points.contains(&c.path)));
        Ok(changes)
    }

    /// The destinations of container `id`'s mounts (its bundle's, and the
    /// ones cordon added in its shadow bundle) and every directory above
    /// them, as absolute paths inside the container.
    fn mount_points(&self, id: &str) -> std::collections::BTreeSet<String> {
        let meta = self.meta(id);
        let configs = [
            meta.bundle.join("config.json"),
            self.cordon_dir(id)
                .join(crate::layout::SHADOW_BUNDLE)
                .join("config.json"),
        ];
        let mut out = std::collections::BTreeSet::new();
        for spec in configs.iter().filter_map(|c| oci_spec::runtime::Spec::load(c).ok()) {
            for m in spec.mounts().iter().flatten() {
                let mut p = m.destination().as_path();
                while p.parent().is_some() {
                    out.insert(p.to_string_lossy().trim_end_matches('/').to_string());
                    p = p.parent().unwrap_or(Path::new("/"));
                }
            }
        }
        out
    }
}
