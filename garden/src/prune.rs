//! `prune`: delete blobs nothing references, and stale temp files.

use crate::{Garden, Result};

/// The result of [`Garden::prune`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Blobs deleted.
    pub blobs: u64,
    /// Bytes those blobs held.
    pub blob_bytes: u64,
    /// Temp files of interrupted writes removed.
    pub temps: u64,
    /// Bytes those held.
    pub temp_bytes: u64,
}

impl Garden {
    /// Deletes every blob that neither the head nor any snapshot in the
    /// history references (snapshot blobs included) and every temp file
    /// left by an interrupted write. Needs the exclusive lock, so no writer
    /// can be between storing a blob and saving the manifest that names it.
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] without the exclusive lock; store errors.
    pub fn prune(&mut self) -> Result<PruneReport> {
        self.require_exclusive("prune")?;
        let keep = self.live_blobs()?;
        let mut r = PruneReport::default();
        for b in self.store.list()? {
            if keep.contains(&b.hash) {
                continue;
            }
            if let Some(bytes) = self.store.delete(&b.hash)? {
                r.blobs += 1;
                r.blob_bytes += bytes;
            }
        }
        let (temps, temp_bytes) = self.store.sweep_temps()?;
        r.temps = temps;
        r.temp_bytes = temp_bytes;
        Ok(r)
    }
}
