//! Chunked content in a repository: turning chunking off (every content
//! the head names stored whole again, for the Go sgard), the mark-and-sweep
//! of chunks for `prune`, and the numbers of `sgard stats`.

use std::collections::HashSet;

use sgard_store::Hash;
use sgard_store::chunks::{ChunkStore, Setting};

use crate::{Error, Garden, Result};

/// How long the journal of an interrupted store of a big file keeps its
/// chunks for a rerun to resume from: past that, `prune` frees them.
pub const JOURNAL_KEEP: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// What [`Garden::sweep_chunks`] freed (or would free).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChunkSweep {
    /// Chunk lists deleted: content nothing names, or stored whole too.
    pub lists: u64,
    /// Chunks no kept list (and no resumable journal) names.
    pub chunks: u64,
    /// Their bytes (lists and chunks).
    pub bytes: u64,
    /// Journals of interrupted writes whose source changed or went, or
    /// untouched for [`JOURNAL_KEEP`].
    pub journals: u64,
    /// Set when a list the repository needs is damaged: no chunk was
    /// swept then (which chunks it needs is unknown), and this says which.
    pub held_back: Option<String>,
}

impl Garden {
    /// Sets the repository's chunking; turning it off also stores every
    /// chunked content the head names as one blob, so the Go sgard reads
    /// the whole head. Returns how many contents were rewritten and their
    /// bytes.
    ///
    /// # Errors
    /// [`Error::Invalid`] without the exclusive lock; store errors (a
    /// chunk missing or corrupt: that content cannot be made whole).
    pub fn configure_chunking(&mut self, s: Setting) -> Result<(u64, u64)> {
        self.require_exclusive("chunking")?;
        let mut done = (0, 0);
        if s == Setting::Off
            && let Some(cs) = self.repo.store.chunked().cloned()
        {
            let mut seen = HashSet::new();
            // Template sources (and the template data) stay in chunks: the
            // Go sgard's prune deletes any blob no `type: file` entry names.
            let hashes: Vec<Hash> = self
                .repo
                .manifest
                .files
                .iter()
                .filter(|e| !e.template)
                .filter_map(|e| e.hash)
                .collect();
            for h in hashes {
                if !seen.insert(h) || self.repo.store.contains_blob(&h)? || !cs.contains(&h) {
                    continue;
                }
                if self.repo.dry_run {
                    done.0 += 1;
                    done.1 += self.repo.store.size_of(&h)?.unwrap_or(0);
                    continue;
                }
                let w = self.repo.store.write_from(&mut |out| {
                    cs.read_to(&h, out)
                        .map(|_| ())
                        .map_err(std::io::Error::other)
                })?;
                if w.hash != h {
                    return Err(Error::Invalid(format!(
                        "internal error: content {h} reassembled as {}",
                        w.hash
                    )));
                }
                done.0 += 1;
                done.1 += w.size;
            }
        }
        if !self.repo.dry_run {
            self.set_chunking(s)?;
        }
        Ok(done)
    }

    /// Deletes (with `dry_run`, only counts) the chunk lists of content
    /// outside `live` or also stored whole, then every chunk that no kept
    /// list and no resumable journal names. With `grace`, lists and chunks
    /// younger than it stay.
    pub(crate) fn sweep_chunks(
        &self,
        live: &HashSet<Hash>,
        grace: Option<std::time::Duration>,
        forced: &HashSet<Hash>,
        dry_run: bool,
    ) -> Result<ChunkSweep> {
        let mut r = ChunkSweep::default();
        let Some(cs) = self.repo.store.chunked() else {
            return Ok(r);
        };
        let young = |p: &std::path::Path| {
            grace.is_some_and(|g| {
                std::fs::metadata(p)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_none_or(|age| age < g)
            })
        };
        // A template's source (and the template data) is kept in chunks
        // even when a blob holds it too (a Go peer's copy, which the Go
        // sgard's prune may delete).
        let templates: HashSet<Hash> = self
            .repo
            .manifest
            .files
            .iter()
            .filter(|e| e.template)
            .filter_map(|e| e.hash)
            .chain(self.repo.manifest.data)
            .collect();
        // A live list stays, unless its content is stored whole too and
        // that blob is intact (then the chunks are not the only good copy).
        let lists = cs.lists()?;
        let mut keep_lists = HashSet::new();
        for h in &lists {
            if live.contains(h)
                && (templates.contains(h)
                    || !(self.repo.store.contains_blob(h)?
                        && self.repo.store.verify(h)? == sgard_store::BlobState::Ok))
            {
                keep_lists.insert(*h);
            }
        }
        let gone: HashSet<Hash> = crate::rules::doomed(&keep_lists, lists.iter().copied(), |h| {
            !forced.contains(h) && young(&cs.list_path(h))
        })
        .into_iter()
        .collect();
        let mut marked: HashSet<Hash> = HashSet::new();
        // The chunks of a purged content go whatever their age.
        let mut forced_chunks: HashSet<Hash> = HashSet::new();
        for h in &lists {
            let path = cs.list_path(h);
            if forced.contains(h)
                && gone.contains(h)
                && let Ok(l) = cs.list(h)
            {
                forced_chunks.extend(l.chunks.iter().map(|(c, _)| *c));
            }
            if !gone.contains(h) {
                match cs.list(h) {
                    Ok(l) => marked.extend(l.chunks.iter().map(|(c, _)| *c)),
                    Err(e) => {
                        r.held_back.get_or_insert_with(|| e.to_string());
                    }
                }
                continue;
            }
            let size = std::fs::symlink_metadata(&path).map_or(0, |m| m.len());
            if dry_run || cs.delete_list(h)?.is_some() {
                r.lists += 1;
                r.bytes += size;
            }
        }
        self.mark_journals(cs, &mut marked, &mut r, dry_run)?;
        if r.held_back.is_some() {
            return Ok(r);
        }
        let chunks = cs.objects().list()?;
        let sizes: std::collections::HashMap<Hash, u64> =
            chunks.iter().map(|c| (c.hash, c.size)).collect();
        for c in crate::rules::doomed(&marked, chunks.iter().map(|c| c.hash), |h| {
            !forced_chunks.contains(h) && young(&cs.objects().path_of(h))
        }) {
            if dry_run || cs.objects().delete(&c)?.is_some() {
                r.chunks += 1;
                r.bytes += sizes.get(&c).copied().unwrap_or(0);
            }
        }
        Ok(r)
    }

    /// Marks the chunks of journals whose source is still as it was (the
    /// next store of it resumes from them); drops the others, and those
    /// left alone for [`JOURNAL_KEEP`].
    fn mark_journals(
        &self,
        cs: &ChunkStore,
        marked: &mut HashSet<Hash>,
        r: &mut ChunkSweep,
        dry_run: bool,
    ) -> Result<()> {
        for j in cs.journals()? {
            let fresh = j.age.is_none_or(|a| a < JOURNAL_KEEP);
            let current = fresh
                && j.source.as_ref().is_some_and(|s| {
                    std::fs::metadata(&s.key)
                        .is_ok_and(|m| m.len() == s.size && crate::platform::mtime(&m) == s.mtime)
                });
            if current {
                marked.extend(j.chunks.iter().copied());
            } else {
                if !dry_run {
                    cs.delete_journal(&j)?;
                }
                r.journals += 1;
            }
        }
        Ok(())
    }
}
