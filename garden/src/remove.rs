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
    /// stay until `prune`. Files on disk are not touched. An external goes
    /// whole: removing its path drops its record too, and a path inside one
    /// is refused.
    ///
    /// # Errors
    /// [`Error::NotTracked`] for an argument that matches nothing,
    /// [`Error::Conflict`] for a part of an external (then nothing is
    /// removed).
    pub fn remove(&mut self, args: &[OsString]) -> Result<RemoveReport> {
        let wanted = self.repo.tilde_args(args)?;
        let mut externals = self.externals()?;
        for w in &wanted {
            if let Some(x) = externals.owner(w)
                && x.path != *w
            {
                return Err(Error::Conflict(format!(
                    "{w} is part of the external at {}; an external is removed whole \
                     (`sgard remove {}`)",
                    x.path, x.path
                )));
            }
        }
        for w in &wanted {
            // An external whose entries are gone (another machine removed
            // them) is still removed: its record goes.
            if !self
                .repo
                .manifest
                .files
                .iter()
                .any(|e| path_is_under(&e.path, w))
                && !externals
                    .externals
                    .iter()
                    .any(|x| path_is_under(&x.path, w))
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
        // The record goes first: cut off between the two, the entries stay
        // as ordinary ones (a record left without its entries would have a
        // refresh bring back what was removed).
        let before = externals.externals.len();
        externals
            .externals
            .retain(|x| !wanted.iter().any(|w| path_is_under(&x.path, w)));
        if externals.externals.len() != before {
            self.save_externals(&externals)?;
        }
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        Ok(report)
    }
}
