//! `remove`: stop tracking paths.

use std::ffi::OsString;

use sgard_manifest::path_is_under;

use crate::{Error, Garden, Result};

/// The result of [`Garden::remove`].
#[derive(Clone, Debug, Default)]
pub struct RemoveReport {
    /// The entries no longer tracked.
    pub removed: Vec<String>,
}

impl Garden {
    /// Untracks each argument: its own entry and every entry under it. Blobs
    /// stay until `prune`. Files on disk are not touched.
    ///
    /// # Errors
    /// [`Error::NotTracked`] for an argument that matches nothing (then
    /// nothing is removed).
    pub fn remove(&mut self, args: &[OsString]) -> Result<RemoveReport> {
        let wanted = self.repo.tilde_args(args)?;
        for w in &wanted {
            if !self
                .repo
                .manifest
                .files
                .iter()
                .any(|e| path_is_under(&e.path, w))
            {
                return Err(Error::NotTracked(w.clone()));
            }
        }
        let mut report = RemoveReport::default();
        self.repo.manifest.files.retain(|e| {
            let hit = wanted.iter().any(|w| path_is_under(&e.path, w));
            if hit {
                report.removed.push(e.path.clone());
            }
            !hit
        });
        // Untracked here, on purpose: no record kept (a record left by
        // another machine's removal stops mirror up from tracking it again).
        {
            let base = &mut self.work.base;
            for p in &report.removed {
                base.put(p, None);
            }
        }
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        Ok(report)
    }
}
