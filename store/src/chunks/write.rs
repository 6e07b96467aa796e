//! Writing chunked content: read and cut on this thread, the whole
//! content's SHA-256 on a second, the chunks' SHA-256 (and their temp
//! files) on the others, and the commits on one collector.
//!
//! ```text
//! reader → FastCDC ──chunk──▶ whole-content hasher
//!                    └─chunk─▶ chunk workers (hash, spool) ──▶ collector (batch, journal)
//! ```
//!
//! Chunks travel in groups of about [`GROUP_BYTES`], so the threads wake
//! once per group rather than once per chunk (16,000 times for 1 GiB).
//! Every channel is bounded, so at most a few groups exist at once whatever
//! the file's size.

use std::collections::{BTreeMap, HashSet};
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use super::journal::Journal;
use super::{COMMIT_EVERY, ChunkList, ChunkStore, ChunkedWritten, Params, Source};
use crate::{Error, Hash, Hasher, Result, Spooled, durable};

/// Groups in flight on each channel.
const DEPTH: usize = 4;

/// A group is sent once it holds this many bytes (or the input ends).
const GROUP_BYTES: usize = 1 << 20;

/// Consecutive chunks, numbered from `.0`.
type Group = (usize, Arc<Vec<Vec<u8>>>);

/// What a worker made of a group: each chunk's length and spooled copy.
type Done = (usize, Vec<(u32, Result<Spooled>)>);

struct Collected {
    chunks: Vec<(Hash, u32)>,
    new_chunks: usize,
    new_bytes: u64,
    journal: Option<Journal>,
}

fn thread_failed() -> Error {
    Error::Source(io::Error::other("a chunking thread failed"))
}

impl ChunkStore {
    /// Splits what `reader` yields into chunks with `params`, stores the
    /// chunks not stored yet (durably, before anything names them), then
    /// the list, named by the whole content's SHA-256. With a `source`, a
    /// journal records the chunks made durable as it goes (see
    /// [`super::journal`]). Memory stays within a few dozen chunks whatever
    /// the size.
    ///
    /// # Errors
    /// [`Error::Source`] when reading fails; [`Error::Interrupted`];
    /// [`Error::Io`]. Nothing is named then; chunks already committed stay
    /// for the next write of the same content to reuse.
    pub fn write(
        &self,
        reader: &mut dyn Read,
        params: Params,
        source: Option<&Source>,
    ) -> Result<ChunkedWritten> {
        durable::create_dir_all_durable(self.objects.root())?;
        let journal = match source {
            Some(s) => Some(Journal::begin(self, s, params)?),
            None => None,
        };
        // As many workers as cores (2 to 4): a worker's share (the chunks'
        // SHA-256 and copying them into the page cache) is twice what the
        // reader (read and cut) or the whole-content hasher does, so with
        // one worker beside them on two cores it alone set the pace
        // (1.4 s of CPU for 1 GiB against 0.7 and 0.6). Four threads over
        // two cores keep both busy.
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(2, 4);
        let stop = AtomicBool::new(false);
        let (whole, collected, cut) = std::thread::scope(|sc| {
            let (whole_tx, whole_rx) = sync_channel::<Group>(DEPTH);
            let (work_tx, work_rx) = sync_channel::<Group>(DEPTH);
            let (done_tx, done_rx) = sync_channel::<Done>(DEPTH);
            let work_rx = Arc::new(Mutex::new(work_rx));
            let hasher = sc.spawn(move || {
                let mut h = Hasher::new();
                let mut size = 0u64;
                for (_, group) in whole_rx {
                    for c in group.iter() {
                        h.update(c);
                        size += c.len() as u64;
                    }
                }
                (h.finish(), size)
            });
            for _ in 0..workers {
                let rx = Arc::clone(&work_rx);
                let tx = done_tx.clone();
                let objects = &self.objects;
                sc.spawn(move || worker(objects, &rx, &tx));
            }
            drop((work_rx, done_tx));
            let stop = &stop;
            let collector = sc.spawn(move || self.collect(done_rx, journal, source, params, stop));
            let cut = cut(reader, params, &whole_tx, &work_tx, stop);
            drop((whole_tx, work_tx));
            let whole = hasher.join().map_err(|_| thread_failed());
            let collected = collector.join().map_err(|_| thread_failed());
            (whole, collected, cut)
        });
        // The first failure is the one to tell: reading before writing.
        let count = cut?;
        let (hash, size) = whole?;
        let mut c = collected??;
        if c.chunks.len() != count {
            return Err(thread_failed());
        }
        let list = ChunkList {
            params,
            size,
            chunks: std::mem::take(&mut c.chunks),
        };
        let path = self.list_path(&hash);
        let text = list.to_text();
        if text.len() as u64 > super::MAX_LIST_BYTES {
            // Never name a list that reading refuses.
            return Err(Error::TooManyChunks {
                chunks: list.chunks.len(),
            });
        }
        // A list already there is kept only when it is this one: a damaged
        // list, or one whose chunks are gone, is replaced by the new one,
        // whose chunks are durable now.
        let new_list = match self.list(&hash) {
            Ok(old) => old != list,
            Err(_) => true,
        };
        if new_list {
            durable::create_dir_all_durable(&durable::parent_of(&path))?;
            durable::write_atomic(&path, text.as_bytes(), 0o644)?;
        }
        let resume = c.journal.take().map(Journal::finish).unwrap_or_default();
        Ok(ChunkedWritten {
            hash,
            size,
            chunks: list.chunks.len(),
            new_chunks: c.new_chunks,
            new_bytes: c.new_bytes,
            new_list,
            resume,
        })
    }

    /// The collector: adopts spooled chunks into a batch in the file's
    /// order, commits it every [`COMMIT_EVERY`] new bytes and at the end,
    /// and journals what each commit made durable. Workers finish groups
    /// out of order; a chunk that comes before those ahead of it waits
    /// (as a temp file) until they are adopted, so that a commit names
    /// only chunks the journal then records: a chunk named past a gap
    /// would be one no journal keeps, and `prune` would take it back from
    /// an add that is to be resumed.
    fn collect(
        &self,
        done: Receiver<Done>,
        mut journal: Option<Journal>,
        source: Option<&Source>,
        params: Params,
        stop: &AtomicBool,
    ) -> Result<Collected> {
        let fail = |e: Error| {
            stop.store(true, Ordering::Relaxed);
            e
        };
        let mut chunks: Vec<(Hash, u32)> = Vec::new();
        let mut waiting: BTreeMap<usize, (u32, Spooled)> = BTreeMap::new();
        let mut batch = self.objects.batch();
        let mut seen = HashSet::new();
        let (mut new_chunks, mut new_bytes, mut pending) = (0, 0u64, 0u64);
        let mut commits = 0u32;
        for (first, group) in done {
            for (k, (len, spooled)) in group.into_iter().enumerate() {
                waiting.insert(first + k, (len, spooled.map_err(fail)?));
            }
            while let Some((len, spooled)) = waiting.remove(&chunks.len()) {
                let w = batch.adopt(spooled);
                if w.new && seen.insert(w.hash) {
                    new_chunks += 1;
                    new_bytes += w.size;
                    pending += w.size;
                }
                if let Some(j) = journal.as_mut() {
                    j.check(chunks.len(), (w.hash, len));
                }
                chunks.push((w.hash, len));
                if pending >= COMMIT_EVERY {
                    std::mem::replace(&mut batch, self.objects.batch())
                        .commit()
                        .map_err(fail)?;
                    pending = 0;
                    commits += 1;
                    if let (Some(j), Some(s)) = (journal.as_mut(), source) {
                        j.record(s, params, &chunks).map_err(fail)?;
                    }
                    if self.stall_after == Some(commits) {
                        loop {
                            std::thread::sleep(std::time::Duration::from_secs(1));
                        }
                    }
                }
            }
        }
        // A chunk that never came leaves the ones after it waiting.
        if !waiting.is_empty() {
            return Err(thread_failed());
        }
        batch.commit().map_err(fail)?;
        // Interrupted, this is where the next write resumes from.
        if let (Some(j), Some(s)) = (journal.as_mut(), source) {
            j.record(s, params, &chunks).map_err(fail)?;
        }
        Ok(Collected {
            chunks,
            new_chunks,
            new_bytes,
            journal,
        })
    }
}

/// Hashes and spools chunks until the work runs out or the collector goes.
fn worker(objects: &crate::Store, rx: &Mutex<Receiver<Group>>, tx: &SyncSender<Done>) {
    loop {
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok((first, group)) = job else { return };
        let mut done = Vec::with_capacity(group.len());
        for data in group.iter() {
            let Ok(len) = u32::try_from(data.len()) else {
                return;
            };
            done.push((len, objects.spool_bytes(data)));
        }
        if tx.send((first, done)).is_err() {
            return;
        }
    }
}

/// Reads and cuts; returns how many chunks were handed on.
fn cut(
    reader: &mut dyn Read,
    params: Params,
    whole: &SyncSender<Group>,
    work: &SyncSender<Group>,
    stop: &AtomicBool,
) -> Result<usize> {
    let (min, avg, max) = params.sizes();
    let mut n = 0;
    let mut group = Vec::new();
    let mut bytes = 0;
    // Sends the group; false when the collector failed (it says why).
    let send = |group: &mut Vec<Vec<u8>>, n: usize| {
        let g = Arc::new(std::mem::take(group));
        let first = n - g.len();
        !stop.load(Ordering::Relaxed)
            && whole.send((first, Arc::clone(&g))).is_ok()
            && work.send((first, g)).is_ok()
    };
    for c in fastcdc::v2020::StreamCDC::new(reader, min, avg, max) {
        crate::cancel::check()?;
        let c = c.map_err(|e| match e {
            fastcdc::v2020::Error::IoError(e) => Error::Source(e),
            other => Error::Source(io::Error::other(other.to_string())),
        })?;
        bytes += c.data.len();
        crate::progress::bytes(c.data.len() as u64);
        group.push(c.data);
        n += 1;
        if bytes >= GROUP_BYTES {
            bytes = 0;
            if !send(&mut group, n) {
                return Ok(usize::MAX);
            }
        }
    }
    if !group.is_empty() && !send(&mut group, n) {
        return Ok(usize::MAX);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file below `dir`, but in its `tmp` folder.
    fn named(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if p.file_name() != Some(std::ffi::OsStr::new("tmp")) {
                    out.extend(named(&p));
                }
            } else {
                out.push(p);
            }
        }
        out
    }

    /// Chunks that came ahead of one that never came, a commit's worth of
    /// them: none is named (a journal records chunks in order, so a chunk
    /// named past the gap would be in none, and `prune` would take it).
    #[test]
    fn a_chunk_ahead_of_a_gap_is_never_named() {
        let d = tempfile::tempdir().unwrap();
        let cs = ChunkStore::open(d.path());
        durable::create_dir_all_durable(cs.objects().root()).unwrap();
        let mib = 1usize << 20;
        let count = COMMIT_EVERY as usize / mib + 1;
        let group: Vec<(u32, Result<Spooled>)> = (1..=count)
            .map(|i| {
                let data: Vec<u8> = (0..mib).map(|k| (k * 31 + i * 7 + k / 251) as u8).collect();
                (mib as u32, cs.objects().spool_bytes(&data))
            })
            .collect();
        let stop = AtomicBool::new(false);
        let (tx, rx) = sync_channel::<Done>(1);
        let got = std::thread::scope(|s| {
            let collector = s.spawn(|| cs.collect(rx, None, None, Params::default(), &stop));
            // Chunks 1 to `count`; chunk 0 never comes.
            tx.send((1, group)).unwrap();
            drop(tx);
            collector.join().unwrap()
        });
        assert!(got.is_err());
        let left = named(cs.objects().root());
        assert!(left.is_empty(), "named past the gap: {left:?}");
    }
}
