//! `prune`: delete blobs and chunks nothing references, and stale temp
//! files.

use crate::chunking::ChunkSweep;
use crate::{Garden, Result};

/// The result of [`Garden::prune`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Blobs deleted.
    pub blobs: u64,
    /// Bytes those blobs held.
    pub blob_bytes: u64,
    /// Temp files of interrupted writes removed.
    pub temps: u64,
    /// Bytes those held.
    pub temp_bytes: u64,
    /// Blobs deleted from this home's local log (what forgotten safety
    /// snapshots captured).
    pub local_blobs: u64,
    /// Bytes those held.
    pub local_bytes: u64,
    /// Chunk lists and chunks (see [`ChunkSweep`]).
    pub chunks: ChunkSweep,
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
        self.prune_with(&std::collections::HashSet::new(), None)
    }

    /// What [`Garden::prune`] would delete, deleting nothing (temp files
    /// are not counted); a shared lock is enough.
    ///
    /// # Errors
    /// As [`Garden::prune`].
    pub fn prune_dry_run(&mut self) -> Result<PruneReport> {
        self.prune_opts(
            &std::collections::HashSet::new(),
            None,
            &std::collections::HashSet::new(),
            true,
        )
    }

    /// As [`Garden::prune`], also keeping the blobs in `protect` and, with
    /// `grace`, every blob and temp file younger than it (a server keeps the
    /// blobs of pushes in progress this way).
    ///
    /// # Errors
    /// As [`Garden::prune`].
    pub fn prune_with(
        &mut self,
        protect: &std::collections::HashSet<sgard_store::Hash>,
        grace: Option<std::time::Duration>,
    ) -> Result<PruneReport> {
        self.prune_opts(protect, grace, &std::collections::HashSet::new(), false)
    }

    /// As [`Garden::prune_with`], deleting the objects of `forced` (and the
    /// chunks of those that are chunk lists) whatever their age, unless
    /// something live names them: what a purge removed.
    ///
    /// # Errors
    /// As [`Garden::prune`].
    pub fn prune_forced(
        &mut self,
        protect: &std::collections::HashSet<sgard_store::Hash>,
        grace: Option<std::time::Duration>,
        forced: &std::collections::HashSet<sgard_store::Hash>,
    ) -> Result<PruneReport> {
        self.prune_opts(protect, grace, forced, false)
    }

    fn prune_opts(
        &mut self,
        protect: &std::collections::HashSet<sgard_store::Hash>,
        grace: Option<std::time::Duration>,
        forced: &std::collections::HashSet<sgard_store::Hash>,
        dry_run: bool,
    ) -> Result<PruneReport> {
        if !dry_run {
            self.require_exclusive("prune")?;
        }
        sgard_store::progress::begin("pruning", 0, 0);
        let mut keep = self.live_blobs()?;
        keep.extend(protect.iter().copied());
        let mut r = PruneReport::default();
        let stored = self.repo.store.list()?;
        let sizes: std::collections::HashMap<_, _> =
            stored.iter().map(|b| (b.hash, b.size)).collect();
        let young = |h: &sgard_store::Hash| {
            !forced.contains(h)
                && grace.is_some_and(|g| {
                    std::fs::metadata(self.repo.store.path_of(h))
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_none_or(|age| age < g)
                })
        };
        for h in crate::rules::doomed(&keep, stored.iter().map(|b| b.hash), young) {
            if dry_run || self.repo.store.delete(&h)?.is_some() {
                let size = sizes.get(&h).copied().unwrap_or(0);
                r.blobs += 1;
                r.blob_bytes += size;
                sgard_store::progress::bytes(size);
                sgard_store::progress::done(&h.to_hex(), "pruning blob");
            }
        }
        r.chunks = self.sweep_chunks(&keep, grace, forced, dry_run)?;
        // This home's local log keeps only what its own snapshots name.
        if let Some(l) = &self.repo.local
            && l.store.root().is_dir()
        {
            let mut keep_local = std::collections::HashSet::new();
            for rec in &l.history.records {
                keep_local.insert(rec.id);
                keep_local.extend(
                    crate::Tx::new(&self.repo, &mut self.work)
                        .snapshot_doc(&rec.id)?
                        .referenced_blobs(),
                );
            }
            for b in l.store.list()? {
                if keep_local.contains(&b.hash) {
                    continue;
                }
                if dry_run || l.store.delete(&b.hash)?.is_some() {
                    r.local_blobs += 1;
                    r.local_bytes += b.size;
                }
            }
            // And the bases saved for undo of forgotten operations.
            if !dry_run && let Ok(rd) = std::fs::read_dir(l.dir.join("bases")) {
                for e in rd.flatten() {
                    let name = e.file_name();
                    let known = name
                        .to_str()
                        .and_then(|n| sgard_store::Hash::parse(n).ok())
                        .is_some_and(|h| keep_local.contains(&h));
                    if !known {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
        }
        let (temps, temp_bytes) = if grace.is_some() || dry_run {
            // Temp files may belong to uploads in progress.
            (0, 0)
        } else {
            let (a, b) = self.repo.store.sweep_temps()?;
            let (c, d) = match self.repo.store.chunked() {
                Some(cs) => cs.sweep_temps()?,
                None => (0, 0),
            };
            (a + c, b + d)
        };
        r.temps = temps;
        r.temp_bytes = temp_bytes;
        if grace.is_none() && !dry_run {
            // And what killed commands left in the repository's root, this
            // machine's state and the home.
            r.temps += (self.sweep_repo_temps() + self.sweep_home()) as u64;
        }
        Ok(r)
    }
}
