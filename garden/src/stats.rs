//! `sgard stats`: what the repository tracks and what it costs to keep.

use std::collections::{HashMap, HashSet};

use sgard_manifest::EntryKind;
use sgard_manifest::history::Record;
use sgard_store::Hash;

use crate::{Garden, Result};

/// One snapshot's line of [`Stats`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotStats {
    /// The snapshot's record.
    pub record: Record,
    /// Files it names.
    pub files: u64,
    /// Their content's bytes.
    pub bytes: u64,
    /// Bytes of stored objects (blobs, chunks, lists) no earlier snapshot
    /// needed: what keeping this one costs.
    pub added_bytes: u64,
}

/// What [`Garden::stats`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// File entries in the head.
    pub tracked_files: u64,
    /// Their content's bytes.
    pub tracked_bytes: u64,
    /// Head files stored in chunks.
    pub chunked_files: u64,
    /// Blobs in the store and their bytes.
    pub blobs: (u64, u64),
    /// Chunks and their bytes.
    pub chunks: (u64, u64),
    /// Chunk lists and their bytes.
    pub lists: (u64, u64),
    /// Content bytes of the head and of every snapshot, each counted whole:
    /// what storing every version whole would take.
    pub logical_bytes: u64,
    /// What `prune` would free.
    pub prunable_bytes: u64,
    /// Per snapshot, oldest first (only when asked).
    pub snapshots: Vec<SnapshotStats>,
}

impl Stats {
    /// Bytes of everything stored.
    pub fn stored_bytes(&self) -> u64 {
        self.blobs.1 + self.chunks.1 + self.lists.1
    }

    /// Logical bytes per stored byte (1.0 for an empty repository).
    pub fn dedup_ratio(&self) -> f64 {
        match self.stored_bytes() {
            0 => 1.0,
            n => self.logical_bytes as f64 / n as f64,
        }
    }
}

/// Sizes of contents and of the objects that hold them, each looked up once.
struct Sizer<'a> {
    g: &'a crate::Repo,
    content: HashMap<Hash, u64>,
    /// Objects counted for the snapshots so far.
    objects: HashSet<(bool, Hash)>,
}

impl Sizer<'_> {
    fn size(&mut self, h: &Hash) -> u64 {
        if let Some(n) = self.content.get(h) {
            return *n;
        }
        let n = self.g.blobs_for(h).size_of(h).ok().flatten().unwrap_or(0);
        self.content.insert(*h, n);
        n
    }

    /// Bytes of the objects holding `h` that were not counted yet.
    fn added(&mut self, h: &Hash) -> u64 {
        let store = self.g.blobs_for(h);
        if let Ok(Some(n)) = store.blob_size(h) {
            return if self.objects.insert((false, *h)) {
                n
            } else {
                0
            };
        }
        let Some(cs) = store.chunked() else { return 0 };
        let Ok(list) = cs.list(h) else { return 0 };
        let mut n = 0;
        if self.objects.insert((true, *h)) {
            n += std::fs::metadata(cs.list_path(h)).map_or(0, |m| m.len());
        }
        for (c, len) in &list.chunks {
            if self.objects.insert((false, *c)) {
                n += u64::from(*len);
            }
        }
        n
    }
}

impl Garden {
    /// Counts what the repository tracks and stores; with `per_snapshot`,
    /// what each snapshot costs.
    ///
    /// # Errors
    /// Store errors listing the store; a snapshot that cannot be read.
    pub fn stats(&mut self, per_snapshot: bool) -> Result<Stats> {
        let mut s = Stats::default();
        for b in self.repo.store.list()? {
            s.blobs.0 += 1;
            s.blobs.1 += b.size;
        }
        if let Some(cs) = self.repo.store.chunked() {
            for c in cs.objects().list()? {
                s.chunks.0 += 1;
                s.chunks.1 += c.size;
            }
            for l in cs.lists()? {
                s.lists.0 += 1;
                s.lists.1 += std::fs::metadata(cs.list_path(&l)).map_or(0, |m| m.len());
            }
        }
        let mut sizer = Sizer {
            g: &self.repo,
            content: HashMap::new(),
            objects: HashSet::new(),
        };
        for e in &self.repo.manifest.files {
            if e.kind != EntryKind::File {
                continue;
            }
            s.tracked_files += 1;
            if let Some(h) = e.hash {
                s.tracked_bytes += sizer.size(&h);
                if !self.repo.store.contains_blob(&h)?
                    && self.repo.store.chunked().is_some_and(|c| c.contains(&h))
                {
                    s.chunked_files += 1;
                }
            }
        }
        s.logical_bytes = s.tracked_bytes;
        let mut seen = HashSet::new();
        for r in &self.repo.history.records {
            if !seen.insert(r.id) {
                continue;
            }
            let doc = crate::Tx::new(&self.repo, &mut self.work).snapshot_doc(&r.id)?;
            let (mut files, mut bytes, mut added) = (0, 0, sizer.added(&r.id));
            for h in doc.referenced_blobs() {
                files += 1;
                bytes += sizer.size(&h);
                added += sizer.added(&h);
            }
            s.logical_bytes += bytes;
            if per_snapshot {
                s.snapshots.push(SnapshotStats {
                    record: r.clone(),
                    files,
                    bytes,
                    added_bytes: added,
                });
            }
        }
        let p = self.prune_dry_run()?;
        s.prunable_bytes = p.blob_bytes + p.local_bytes + p.chunks.bytes;
        Ok(s)
    }
}
