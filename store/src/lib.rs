//! # sgard-store: the content-addressed blob store
//!
//! Every file content sgard keeps lives once, under its SHA-256:
//!
//! ```text
//! <repo>/blobs/<h0h1>/<h2h3>/<64 lowercase hex>
//! ```
//!
//! This is the Go sgard's layout, so repositories move between the two.
//!
//! ## Invariants
//! - A blob's name is the SHA-256 of its bytes. Names are validated as 64
//!   lowercase hex ([`Hash::parse`]) before any path is built from them.
//! - A blob name that exists is durable: the bytes were `sync_data`'d before
//!   the rename that gave them the name, and the leaf folder (plus the parent
//!   of every folder created for it) was fsynced after it.
//! - Blobs are never renamed over, except an existing blob whose size is
//!   wrong, which is rewritten from the fresh data.
//! - Reading re-hashes: [`Store::read_to`] fails with [`Error::Corrupt`] when
//!   the bytes do not match their name, so callers never trust bad data.
//! - Writing streams through a fixed buffer: memory stays bounded whatever
//!   the size of the data.
//! - Unfinished writes live in `blobs/tmp/` (same filesystem as the blobs);
//!   [`Store::sweep_temps`] removes them when no writer can be running.
//!
//! ```
//! let dir = tempfile::tempdir().map_err(sgard_store::Error::Source)?;
//! let store = sgard_store::Store::init(dir.path())?;
//! let w = store.write(&mut &b"hello\n"[..])?;
//! assert!(store.contains(&w.hash)?);
//! let mut out = Vec::new();
//! store.read_to(&w.hash, &mut out)?;
//! assert_eq!(out, b"hello\n");
//! # Ok::<(), sgard_store::Error>(())
//! ```

pub mod cancel;
pub mod chunks;
pub mod durable;
mod error;
mod hash;
pub mod par;
mod presence;
pub mod progress;
mod spool;

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

pub use error::{Error, Result};
pub use hash::{Hash, Hasher};
pub use presence::{Area, Lack, LeafStat, Presence, leaf_of};

const BUF_SIZE: usize = 256 * 1024;
const TMP_DIR: &str = "tmp";
/// How many blobs a batch names on all cores at a time (their results
/// are held until the window is done).
const NAME_WINDOW: usize = 1024;

/// `Ok` when what `hasher` saw hashes to `hash`, else [`Error::Corrupt`].
pub(crate) fn expect_hash(hash: &Hash, hasher: Hasher) -> Result<()> {
    let actual = hasher.finish();
    if actual == *hash {
        Ok(())
    } else {
        Err(Error::Corrupt {
            hash: *hash,
            actual,
        })
    }
}

/// The blob store of one repository.
#[derive(Debug, Clone)]
pub struct Store {
    blobs: PathBuf,
    /// The repository's chunked content, looked in when a blob is not
    /// there (`None` for a store of chunk objects itself).
    chunks: Option<std::sync::Arc<chunks::ChunkStore>>,
}

/// What [`Store::write`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The blob's name.
    pub hash: Hash,
    /// Its size in bytes.
    pub size: u64,
    /// False when an identical blob was already stored (nothing was written).
    pub new: bool,
}

/// The state of one blob, as [`Store::verify`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobState {
    /// Present and its bytes hash to its name.
    Ok,
    /// Not in the store.
    Missing,
    /// Present, but its bytes hash to something else (or, for chunked
    /// content, a chunk does, or its list is damaged).
    Corrupt,
}

/// Blobs written as one batch: their bytes go to temp files with no fsync;
/// [`Batch::commit`] then flushes the filesystem once, renames every blob
/// into place, and flushes once more. A blob still gets a name only after its
/// bytes are durable, as with [`Store::write`], at a constant number of flush
/// rounds instead of one fsync per blob. Dropping an uncommitted batch
/// deletes its temp files.
#[derive(Debug)]
pub struct Batch {
    store: Store,
    /// Blobs spooled and not named yet (a temp file is taken from its
    /// slot when it is named).
    pending: Vec<(Option<tempfile::TempPath>, Hash, u64)>,
    /// The names in `pending` (a first add queues 10,000 of them).
    queued: std::collections::HashSet<Hash>,
    /// A flush started ahead ([`Batch::start_flush`]): its thread, and how
    /// many of `pending` were written when it started.
    flushing: Option<(std::thread::JoinHandle<bool>, usize)>,
}

impl Batch {
    /// Stores what `reader` yields (see [`Store::write`]); the blob is named
    /// at [`Batch::commit`].
    ///
    /// # Errors
    /// As [`Store::write`].
    pub fn write(&mut self, reader: &mut dyn Read) -> Result<Written> {
        let spooled = self.store.spool_blob(reader)?;
        Ok(self.adopt(spooled))
    }

    /// Adds a blob copied by [`Store::spool_blob`] (on any thread) to the
    /// batch, or drops it if an identical blob is stored or queued already.
    pub fn adopt(&mut self, spooled: Spooled) -> Written {
        let Spooled {
            tmp,
            hash,
            size,
            stored,
        } = spooled;
        let Some(tmp) = tmp.filter(|_| !stored) else {
            return Written {
                hash,
                size,
                new: false,
            };
        };
        if !self.queued.insert(hash) {
            return Written {
                hash,
                size,
                new: false,
            };
        }
        self.pending.push((Some(tmp), hash, size));
        Written {
            hash,
            size,
            new: true,
        }
    }

    /// The folder of the store the batch writes to.
    pub fn root(&self) -> &Path {
        self.store.root()
    }

    /// How many blobs wait for [`Batch::commit`].
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Starts flushing the bytes of the blobs waiting now, on another
    /// thread (Linux `syncfs`), so that what the caller does before the
    /// commit overlaps the wait for the disk; the commit waits for it, and
    /// flushes again only if blobs came after it started. Nothing happens
    /// where `syncfs` is missing, with nothing waiting, or when no thread
    /// can be started.
    pub fn start_flush(&mut self) {
        if !cfg!(target_os = "linux") || self.pending.is_empty() || self.flushing.is_some() {
            return;
        }
        let root = self.store.blobs.clone();
        let flush = std::thread::Builder::new()
            .name("flush-blobs".into())
            .spawn(move || durable::syncfs(&root));
        if let Ok(thread) = flush {
            self.flushing = Some((thread, self.pending.len()));
        }
    }

    /// Makes every blob of the batch durable under its name.
    ///
    /// # Errors
    /// [`Error::Io`]; blobs not yet renamed are then dropped.
    pub fn commit(mut self) -> Result<()> {
        self.commit_round()
    }

    /// Makes every blob waiting in the batch durable under its name, and
    /// keeps the batch open for more (it still knows every name it took,
    /// so a blob queued again is not new).
    ///
    /// # Errors
    /// As [`Batch::commit`].
    pub fn commit_round(&mut self) -> Result<()> {
        self.flush(|| None).map(|_| ())
    }

    /// As [`Batch::commit`], with one more blob whose bytes are still being
    /// written when the commit starts: `late` is asked for it once the
    /// batch's blobs are named, and the flush that makes their names
    /// durable makes its bytes durable too; it is then named, and its
    /// folder synced. So a snapshot document rendered on another thread
    /// while the batch's bytes are flushed is stored without a flush of its
    /// own. Returns what became of the late blob.
    ///
    /// # Errors
    /// As [`Batch::commit`].
    pub fn commit_with_late(
        mut self,
        late: impl FnOnce() -> Option<Spooled>,
    ) -> Result<Option<Written>> {
        self.flush(late)
    }

    /// Flushes the bytes of the waiting blobs, names them, then makes the
    /// names durable, taking `late`'s blob into that last flush (see
    /// [`Batch::commit_with_late`]).
    fn flush(&mut self, late: impl FnOnce() -> Option<Spooled>) -> Result<Option<Written>> {
        let root = self.store.blobs.clone();
        let ahead = self
            .flushing
            .take()
            .map(|(thread, covers)| (thread.join().unwrap_or(false), covers));
        let batched = bytes_flushed(ahead, self.pending.len(), || durable::syncfs(&root));
        let leaves = self.name_pending(batched)?;
        let late = late().map(|s| self.adopt(s));
        let late_waits = !self.pending.is_empty();
        // The late blob's bytes were written before this flush began. With
        // no batch to flush, it is synced alone (a `syncfs` would wait for
        // whatever else the file system holds).
        let flushed = batched && durable::syncfs(&root);
        if !flushed {
            self.sync_leaves(leaves)?;
        }
        if late_waits {
            let leaves = self.name_pending(flushed)?;
            self.sync_leaves(leaves)?;
        }
        Ok(late)
    }

    /// Renames every waiting blob into place (`flushed`: their bytes are
    /// durable already; else each is synced first), on all cores, a window
    /// at a time (see [`par::update_in_windows`]). Returns the leaf folders
    /// that gained a name. A failure fails the batch: the blobs of later
    /// windows are dropped, and those of its own window may still have
    /// been named (their bytes are durable, their names are not made so
    /// here: at worst a blob nothing names, which `prune` removes).
    fn name_pending(&mut self, flushed: bool) -> Result<std::collections::BTreeSet<PathBuf>> {
        let mut pending = std::mem::take(&mut self.pending);
        let store = &self.store;
        let name =
            |_: usize, (tmp, hash, size): &mut (Option<tempfile::TempPath>, Hash, u64)| match tmp
                .take()
            {
                Some(tmp) => store.name_blob(tmp, hash, *size, flushed).map_err(Box::new),
                // Each blob is named once: its temp file is taken here.
                None => Ok(()),
            };
        let mut leaves = std::collections::BTreeSet::new();
        let mut failed = None;
        par::update_in_windows(
            &mut pending,
            NAME_WINDOW,
            256,
            name,
            |_, (_, hash, _), r| match r {
                Some(Ok(())) => {
                    leaves.insert(durable::parent_of(&store.path_of(hash)));
                    std::ops::ControlFlow::Continue(())
                }
                Some(Err(e)) => {
                    failed = Some(*e);
                    std::ops::ControlFlow::Break(())
                }
                None => {
                    failed = Some(Error::io(
                        "naming blob",
                        store.path_of(hash),
                        io::Error::other("a worker thread failed"),
                    ));
                    std::ops::ControlFlow::Break(())
                }
            },
        );
        match failed {
            Some(e) => Err(e),
            None => Ok(leaves),
        }
    }

    /// Makes the names in `leaves` durable one folder at a time, where no
    /// flush of the whole file system did.
    fn sync_leaves(&self, leaves: std::collections::BTreeSet<PathBuf>) -> Result<()> {
        // On Linux, a leaf made on a spooling thread (see `prepare_leaf`)
        // was not synced into its fan-out folder, nor a new fan-out folder
        // into `blobs/`: each folder above a leaf is synced too, once.
        // Elsewhere `make_leaf` synced whatever it made.
        let mut above = std::collections::BTreeSet::new();
        for leaf in leaves {
            durable::fsync_dir(&leaf)?;
            if cfg!(target_os = "linux") {
                let fanout = durable::parent_of(&leaf);
                above.insert(durable::parent_of(&fanout));
                above.insert(fanout);
            }
        }
        for dir in above {
            durable::fsync_dir(&dir)?;
        }
        Ok(())
    }
}

/// Whether the bytes of a batch's `waiting` blobs are flushed, by a flush
/// started ahead (`ahead`: whether it succeeded, and how many blobs were
/// written when it began) or by `flush` now; false means each is to be
/// synced on its own. A flush that failed is not tried again: `syncfs`
/// reports a write error once, to its first caller, so a second one would
/// say all is well while each file still holds the error for its own sync.
fn bytes_flushed(
    ahead: Option<(bool, usize)>,
    waiting: usize,
    flush: impl FnOnce() -> bool,
) -> bool {
    waiting > 0
        && match ahead {
            Some((true, covers)) if covers == waiting => true,
            Some((false, _)) => false,
            _ => flush(),
        }
}

/// Bytes copied into the store's temp folder and hashed, not yet named:
/// [`Batch::adopt`] takes it; dropping it deletes the temp file. It holds no
/// open file, so thousands can wait at once.
#[derive(Debug)]
pub struct Spooled {
    /// `None` when the bytes were hashed in memory and found stored.
    tmp: Option<tempfile::TempPath>,
    hash: Hash,
    size: u64,
    /// A blob of this name and size was already stored when the copy ended
    /// (looked up on the spooling thread, so batches of them look up in
    /// parallel; the writer's exclusive lock keeps it true).
    stored: bool,
}

impl Spooled {
    /// The name of the bytes copied.
    pub fn hash(&self) -> Hash {
        self.hash
    }

    /// How many bytes were copied.
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// A blob found by [`Store::list`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobInfo {
    /// The blob's name.
    pub hash: Hash,
    /// Its size on disk.
    pub size: u64,
}

impl Store {
    /// The store of the repository at `repo` (its `blobs/` folder need not exist yet).
    pub fn open(repo: &Path) -> Self {
        Store {
            blobs: repo.join("blobs"),
            chunks: Some(std::sync::Arc::new(chunks::ChunkStore::open(repo))),
        }
    }

    /// The store of objects kept under `folder` itself, in the same layout
    /// (`folder/ab/cd/<sha256>`), with no chunked content: the chunk
    /// objects of [`chunks::ChunkStore`].
    pub fn at(folder: PathBuf) -> Self {
        Store {
            blobs: folder,
            chunks: None,
        }
    }

    /// The repository's chunked content (`None` for a store of chunks).
    pub fn chunked(&self) -> Option<&chunks::ChunkStore> {
        self.chunks.as_deref()
    }

    /// This store with its chunk store replaced (a test hook's settings).
    #[must_use]
    pub fn with_chunk_store(mut self, cs: chunks::ChunkStore) -> Self {
        self.chunks = Some(std::sync::Arc::new(cs));
        self
    }

    /// Starts a batch of writes (see [`Batch`]).
    pub fn batch(&self) -> Batch {
        Batch {
            store: self.clone(),
            pending: Vec::new(),
            queued: std::collections::HashSet::new(),
            flushing: None,
        }
    }

    /// Names the spooled blob `tmp` as `hash` (`flushed`: its bytes are
    /// durable already; else it is synced first), making its leaf folder
    /// if it is missing. A blob of that name and size is kept as it is; one
    /// of another size (damaged) is replaced.
    fn name_blob(
        &self,
        tmp: tempfile::TempPath,
        hash: &Hash,
        size: u64,
        flushed: bool,
    ) -> Result<()> {
        if !flushed {
            let f = durable::open_to_sync(&tmp)
                .map_err(|e| Error::io("opening", tmp.to_path_buf(), e))?;
            f.sync_data()
                .map_err(|e| Error::io("syncing", tmp.to_path_buf(), e))?;
        }
        let dest = self.path_of(hash);
        let rename = |tmp| {
            durable::retry_rename(&dest, tmp, |t: tempfile::TempPath| {
                t.persist_noclobber(&dest).map_err(|e| (e.error, e.path))
            })
        };
        // Most leaves are there already (on Linux the spooling threads
        // made them): the folder is made only when the rename says it is
        // missing.
        let linked = match rename(tmp) {
            Err((e, tmp)) if e.kind() == io::ErrorKind::NotFound => {
                self.make_leaf(&durable::parent_of(&dest), flushed)?;
                rename(tmp)
            }
            linked => linked,
        };
        match linked {
            Ok(()) => Ok(()),
            Err((e, tmp)) if e.kind() == io::ErrorKind::AlreadyExists => {
                if self.blob_size(hash)? != Some(size) {
                    durable::retry_rename(&dest, tmp, |t| {
                        t.persist(&dest).map_err(|e| (e.error, e.path))
                    })
                    .map_err(|(e, _)| Error::io("replacing damaged blob", &dest, e))?;
                }
                Ok(())
            }
            Err((e, _)) => Err(Error::io("renaming temp file to", &dest, e)),
        }
    }

    /// Creates a leaf folder; with `batched`, its new entries are left for
    /// the next `syncfs` instead of being fsynced one by one.
    fn make_leaf(&self, leaf: &Path, batched: bool) -> Result<()> {
        if batched {
            fs::create_dir_all(leaf).map_err(|e| Error::io("creating folder", leaf, e))?;
            Ok(())
        } else {
            durable::create_dir_all_durable(leaf).map(|_| ())
        }
    }

    /// Creates the leaf folder a spooled blob will be renamed into, on the
    /// spooling thread (on Linux, where a batch is made durable by
    /// `syncfs`): most new blobs of a big store need a new leaf
    /// (10,000 blobs fill 9,300 of the 65,536), and creating a folder is the
    /// slowest step of naming one (ext4 searches its inode bitmaps, longest
    /// on a file system without a journal). Here the folders are made in
    /// parallel, while the next files are read, instead of one by one in
    /// [`Batch::commit_round`], which still makes (and, without `syncfs`,
    /// syncs) any folder missing then. An error is left for it to report;
    /// a run that stops before the rename leaves an empty leaf, as `prune`
    /// does. Returns whether this call made the leaf: then no blob is in
    /// it, and the caller need not look for one.
    fn prepare_leaf(&self, hash: &Hash) -> bool {
        if !cfg!(target_os = "linux") {
            return false;
        }
        let leaf = durable::parent_of(&self.path_of(hash));
        // One `mkdir` when the fan-out folder is there. Only a `mkdir` of
        // the leaf that succeeded says this call made it (another thread
        // may make it meanwhile, and store a blob in it).
        match fs::create_dir(&leaf) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let fanout = durable::parent_of(&leaf);
                fs::create_dir_all(&fanout).is_ok() && fs::create_dir(&leaf).is_ok()
            }
            Err(_) => false,
        }
    }

    /// Whether a blob of `hash` and `size` is stored. On Linux its leaf
    /// folder is made first (see [`Store::prepare_leaf`]): a leaf just made
    /// holds nothing, which saves the blob's `stat` (9,300 of them in a
    /// first add of 10,000 files).
    fn stored_or_leaf_made(&self, hash: &Hash, size: u64) -> Result<bool> {
        if self.prepare_leaf(hash) {
            return Ok(false);
        }
        Ok(self.blob_size(hash)? == Some(size))
    }

    /// Copies `reader` into a temp file in the store, hashing it, for a
    /// [`Batch`] to [`adopt`](Batch::adopt). Safe to call from many threads
    /// at once.
    ///
    /// # Errors
    /// [`Error::Source`] when reading fails, [`Error::Io`] when writing does.
    pub fn spool_blob(&self, reader: &mut dyn Read) -> Result<Spooled> {
        let (tmp, hash, size) = self.spool(reader, None, None)?;
        let stored = self.stored_or_leaf_made(&hash, size)?;
        Ok(Spooled {
            tmp: Some(tmp.into_temp_path()),
            hash,
            size,
            stored,
        })
    }

    /// As [`Store::spool_blob`] for bytes in memory: they are hashed first,
    /// and copied to a temp file (not synced) only when no blob of that
    /// name is stored. Safe to call from many threads at once.
    ///
    /// # Errors
    /// [`Error::Io`] when writing the temp file fails.
    pub fn spool_bytes(&self, data: &[u8]) -> Result<Spooled> {
        let hash = Hash::of(data);
        let size = data.len() as u64;
        if self.stored_or_leaf_made(&hash, size)? {
            return Ok(Spooled {
                tmp: None,
                hash,
                size,
                stored: true,
            });
        }
        let mut tmp = self.temp_file()?;
        tmp.write_all(data)
            .map_err(|e| Error::io("writing", tmp.path().to_path_buf(), e))?;
        Ok(Spooled {
            tmp: Some(tmp.into_temp_path()),
            hash,
            size,
            stored: false,
        })
    }

    /// A new temp file in the store's temp folder, named for this process
    /// (`blob-<pid>-…`) and registered, so a process ended by a signal
    /// before its threads stop removes it (see [`cancel`]).
    fn temp_file(&self) -> Result<tempfile::NamedTempFile> {
        let tmp_dir = self.blobs.join(TMP_DIR);
        let prefix = format!("blob-{}-", std::process::id());
        cancel::register_prefix(&tmp_dir, std::ffi::OsStr::new(&prefix));
        let create = || {
            tempfile::Builder::new()
                .prefix(&prefix)
                .tempfile_in(&tmp_dir)
        };
        // The folder is made (durably) when it is missing, not looked up
        // before every file: a checkpoint spools a file per change.
        let made = match create() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                durable::create_dir_all_durable(&tmp_dir)?;
                create()
            }
            made => made,
        };
        made.map_err(|e| Error::io("creating temp file in", &tmp_dir, e))
    }

    /// Copies `reader` into a temp file, hashing; checks `expected`/`max`.
    fn spool(
        &self,
        reader: &mut dyn Read,
        expected: Option<&Hash>,
        max: Option<u64>,
    ) -> Result<(tempfile::NamedTempFile, Hash, u64)> {
        let tmp = self.temp_file()?;
        let path = tmp.path().to_path_buf();
        let (hash, size) = spool::copy_hashing(reader, tmp.as_file(), &path, max)?;
        if let Some(want) = expected
            && *want != hash
        {
            return Err(Error::Corrupt {
                hash: *want,
                actual: hash,
            });
        }
        Ok((tmp, hash, size))
    }

    /// Creates `repo/blobs/` durably and returns the store.
    ///
    /// # Errors
    /// [`Error::Io`] when the folder cannot be created.
    pub fn init(repo: &Path) -> Result<Self> {
        let s = Store::open(repo);
        durable::create_dir_all_durable(&s.blobs)?;
        Ok(s)
    }

    /// The folder holding the blobs.
    pub fn root(&self) -> &Path {
        &self.blobs
    }

    /// Where the blob named `hash` lives.
    pub fn path_of(&self, hash: &Hash) -> PathBuf {
        let hex = hash.to_hex();
        self.blobs.join(&hex[0..2]).join(&hex[2..4]).join(hex)
    }

    /// Whether content named `hash` is stored, as a blob or in chunks
    /// (without checking its bytes).
    ///
    /// # Errors
    /// [`Error::Io`] when the store cannot be inspected.
    pub fn contains(&self, hash: &Hash) -> Result<bool> {
        Ok(self.blob_size(hash)?.is_some()
            || self.chunks.as_ref().is_some_and(|c| c.contains(hash)))
    }

    /// Whether a blob (not chunked content) named `hash` is stored.
    ///
    /// # Errors
    /// [`Error::Io`] when the store cannot be inspected.
    pub fn contains_blob(&self, hash: &Hash) -> Result<bool> {
        Ok(self.blob_size(hash)?.is_some())
    }

    /// The size of the content named `hash` (a blob's, or chunked
    /// content's as its list says), or `None` if it is not stored.
    ///
    /// # Errors
    /// [`Error::Io`] when the store cannot be inspected,
    /// [`Error::BadChunkList`] when the content's list is damaged.
    pub fn size_of(&self, hash: &Hash) -> Result<Option<u64>> {
        if let Some(n) = self.blob_size(hash)? {
            return Ok(Some(n));
        }
        match &self.chunks {
            Some(c) if c.contains(hash) => match c.list(hash) {
                Ok(l) => Ok(Some(l.size)),
                Err(Error::Missing(_)) => Ok(None),
                Err(e) => Err(e),
            },
            _ => Ok(None),
        }
    }

    /// The size of the blob named `hash` on disk, or `None`.
    ///
    /// # Errors
    /// [`Error::Io`] when the store cannot be inspected.
    pub fn blob_size(&self, hash: &Hash) -> Result<Option<u64>> {
        let p = self.path_of(hash);
        match fs::metadata(&p) {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("inspecting blob", p, e)),
        }
    }

    /// Stores everything `reader` yields, hashing while copying to a temp
    /// file, and makes it durable under its hash.
    ///
    /// An existing blob of the same name and size is kept as it is (the temp
    /// file is dropped); one of another size is replaced.
    ///
    /// # Errors
    /// [`Error::Source`] when `reader` fails, [`Error::Io`] when the store
    /// cannot be written. The store is then unchanged (no partial blob ever
    /// carries a name).
    pub fn write(&self, reader: &mut dyn Read) -> Result<Written> {
        self.write_checked(reader, None, None)
    }

    /// Stores what `reader` yields only if it hashes to `expected` and is at
    /// most `max` bytes: what a server does with a blob a client claims. The
    /// temp file is dropped otherwise, so nothing misnamed or oversized is
    /// ever stored.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the bytes hash to something else,
    /// [`Error::TooLarge`] past `max`, or as [`Store::write`].
    pub fn write_expect(
        &self,
        reader: &mut dyn Read,
        expected: &Hash,
        max: Option<u64>,
    ) -> Result<Written> {
        self.write_checked(reader, Some(expected), max)
    }

    fn write_checked(
        &self,
        reader: &mut dyn Read,
        expected: Option<&Hash>,
        max: Option<u64>,
    ) -> Result<Written> {
        let (tmp, hash, size) = self.spool(reader, expected, max)?;
        self.settle(tmp, hash, size)
    }

    /// Makes a spooled temp file the blob `hash` (unless one of that size is
    /// there already).
    fn settle(&self, tmp: tempfile::NamedTempFile, hash: Hash, size: u64) -> Result<Written> {
        if self.blob_size(&hash)? == Some(size) {
            return Ok(Written {
                hash,
                size,
                new: false,
            });
        }
        tmp.as_file()
            .sync_data()
            .map_err(|e| Error::io("syncing", tmp.path().to_path_buf(), e))?;
        let dest = self.path_of(&hash);
        let leaf = durable::parent_of(&dest);
        durable::create_dir_all_durable(&leaf)?;
        let linked = durable::retry_rename(&dest, tmp, |t| {
            t.persist_noclobber(&dest).map_err(|e| (e.error, e.file))
        });
        match linked {
            Ok(_) => {}
            Err((e, tmp)) if e.kind() == io::ErrorKind::AlreadyExists => {
                // Someone stored it meanwhile, or a damaged blob of the wrong
                // size sits there: keep a good one, replace a bad one.
                if self.blob_size(&hash)? != Some(size) {
                    durable::retry_rename(&dest, tmp, |t| {
                        t.persist(&dest).map_err(|e| (e.error, e.file))
                    })
                    .map_err(|(e, _)| Error::io("replacing damaged blob", &dest, e))?;
                }
            }
            Err((e, _)) => return Err(Error::io("renaming temp file to", &dest, e)),
        }
        durable::fsync_dir(&leaf)?;
        Ok(Written {
            hash,
            size,
            new: true,
        })
    }

    /// Stores what `fill` writes, hashing on the way (see [`Store::write`]):
    /// for content rendered piece by piece, such as a snapshot document,
    /// which is then never held whole.
    ///
    /// # Errors
    /// [`Error::Source`] with the error `fill` returned, [`Error::Io`]
    /// naming the temp file when writing it failed; or as [`Store::write`].
    pub fn write_from(
        &self,
        fill: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
    ) -> Result<Written> {
        let tmp = self.temp_file()?;
        let mut sink = HashingFile {
            file: tmp.as_file(),
            hasher: Hasher::new(),
            size: 0,
            failed: None,
        };
        let filled = {
            let mut buf = io::BufWriter::with_capacity(1 << 16, &mut sink);
            fill(&mut buf).and_then(|()| buf.flush())
        };
        if let Some(e) = sink.failed.take() {
            return Err(Error::io("writing", tmp.path().to_path_buf(), e));
        }
        filled.map_err(Error::Source)?;
        let (hash, size) = (sink.hasher.finish(), sink.size);
        self.settle(tmp, hash, size)
    }

    /// Stores a byte slice (see [`Store::write`]).
    ///
    /// # Errors
    /// As [`Store::write`].
    pub fn write_bytes(&self, data: &[u8]) -> Result<Written> {
        let mut r = data;
        self.write(&mut r)
    }

    /// Streams the blob into `out`, re-hashing it on the way.
    ///
    /// When the bytes do not match the name, the error is [`Error::Corrupt`]
    /// and whatever reached `out` must be thrown away.
    ///
    /// # Errors
    /// [`Error::Missing`], [`Error::Corrupt`], or [`Error::Io`].
    pub fn read_to(&self, hash: &Hash, out: &mut dyn Write) -> Result<u64> {
        self.read_chunks(hash, BUF_SIZE, &mut |c| out.write_all(c).map(|()| true))
    }

    /// Reads blob `hash` in chunks of at most `chunk` bytes, re-hashing it:
    /// `each` gets every chunk in order (an empty blob: one empty chunk)
    /// and returns `Ok(false)` to stop early (nothing is verified then).
    /// The one read-and-hash loop of every reader of a whole blob (restore,
    /// the server sending a blob, the client pushing one).
    ///
    /// When the bytes do not match the name, the error is [`Error::Corrupt`],
    /// after every chunk was given: whatever `each` did with them must be
    /// undone. A blob that is not a regular file (a FIFO planted in the
    /// store, a folder) counts as missing; opening never blocks.
    ///
    /// # Errors
    /// [`Error::Missing`], [`Error::Corrupt`], [`Error::Io`],
    /// [`Error::Source`] from `each`, or the cancellation error on Ctrl-C.
    pub fn read_chunks(
        &self,
        hash: &Hash,
        chunk: usize,
        each: &mut dyn FnMut(&[u8]) -> io::Result<bool>,
    ) -> Result<u64> {
        let p = self.path_of(hash);
        let (mut f, len) = match durable::open_regular(&p) {
            Ok((f, md)) => (f, md.len()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::InvalidInput
                ) || e.kind() == io::ErrorKind::NotADirectory =>
            {
                return match &self.chunks {
                    Some(c) if c.contains(hash) => c.read_each(hash, chunk, each),
                    _ => Err(Error::Missing(*hash)),
                };
            }
            Err(e) => return Err(Error::io("opening blob", p, e)),
        };
        let mut hasher = Hasher::new();
        // No bigger than the blob (and a byte for the end): most blobs are
        // a few KiB, and zeroing a whole chunk for each was a twentieth of
        // a restore.
        let room = usize::try_from(len.saturating_add(1)).unwrap_or(usize::MAX);
        let mut buf = vec![0u8; chunk.min(room).max(1)];
        let mut size = 0u64;
        loop {
            let n = match f.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("reading blob", p, e)),
            };
            if n == 0 && size > 0 {
                break;
            }
            hasher.update(&buf[..n]);
            crate::cancel::check()?;
            crate::progress::bytes(n as u64);
            if !each(&buf[..n]).map_err(Error::Source)? {
                return Ok(size);
            }
            size += n as u64;
            if n == 0 {
                break;
            }
        }
        expect_hash(hash, hasher)?;
        Ok(size)
    }

    /// Reads a whole blob into memory, verified (for small data such as diffs).
    ///
    /// # Errors
    /// As [`Store::read_to`].
    pub fn read(&self, hash: &Hash) -> Result<Vec<u8>> {
        // Room for the blob as it is on disk (a doubling vector held up to
        // twice a 20 MB snapshot document); capped, since the size is only
        // a hint.
        let size = self.size_of(hash).ok().flatten().unwrap_or(0);
        let mut out = Vec::with_capacity(usize::try_from(size.min(1 << 30)).unwrap_or(0));
        self.read_to(hash, &mut out)?;
        Ok(out)
    }

    /// Re-hashes one blob.
    ///
    /// # Errors
    /// [`Error::Io`] when the blob exists but cannot be read.
    pub fn verify(&self, hash: &Hash) -> Result<BlobState> {
        match self.read_to(hash, &mut io::sink()) {
            Ok(_) => Ok(BlobState::Ok),
            Err(Error::Missing(_) | Error::MissingChunk { .. }) => Ok(BlobState::Missing),
            Err(
                Error::Corrupt { .. } | Error::CorruptChunk { .. } | Error::BadChunkList { .. },
            ) => Ok(BlobState::Corrupt),
            Err(e) => Err(e),
        }
    }

    /// Deletes a blob; returns the bytes freed, or `None` if it was not there.
    ///
    /// # Errors
    /// [`Error::Io`] when it cannot be removed.
    pub fn delete(&self, hash: &Hash) -> Result<Option<u64>> {
        let p = self.path_of(hash);
        let Some(size) = self.blob_size(hash)? else {
            return Ok(None);
        };
        fs::remove_file(&p).map_err(|e| Error::io("deleting blob", &p, e))?;
        durable::fsync_dir(&durable::parent_of(&p))?;
        Ok(Some(size))
    }

    /// Every blob in the store, in hash order. Files whose names are not
    /// valid hashes in the right place are not blobs and are left out.
    ///
    /// # Errors
    /// [`Error::Io`] when a folder cannot be listed.
    pub fn list(&self) -> Result<Vec<BlobInfo>> {
        let mut out = Vec::new();
        for l1 in read_dir_sorted(&self.blobs)? {
            if !is_fanout(&l1) {
                continue;
            }
            let p1 = self.blobs.join(&l1);
            for l2 in read_dir_sorted(&p1)? {
                if !is_fanout(&l2) {
                    continue;
                }
                let p2 = p1.join(&l2);
                for name in read_dir_sorted(&p2)? {
                    let Ok(hash) = Hash::parse(&name) else {
                        continue;
                    };
                    if !name.starts_with(&format!("{l1}{l2}")) {
                        continue;
                    }
                    let p = p2.join(&name);
                    let m = fs::symlink_metadata(&p).map_err(|e| Error::io("inspecting", &p, e))?;
                    if m.is_file() {
                        out.push(BlobInfo {
                            hash,
                            size: m.len(),
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    /// Removes unfinished writes: everything in `blobs/tmp/`, the Go
    /// sgard's `.blob-*` temp files and sgard's `.sgard-tmp-*` ones. Call only while holding the repository's
    /// exclusive lock (no writer can be running). Returns (files, bytes).
    ///
    /// # Errors
    /// [`Error::Io`] when a temp file cannot be removed.
    pub fn sweep_temps(&self) -> Result<(u64, u64)> {
        let mut count = 0;
        let mut bytes = 0;
        let mut remove = |p: PathBuf| -> Result<()> {
            let m = fs::symlink_metadata(&p).map_err(|e| Error::io("inspecting", &p, e))?;
            if m.is_file() || m.file_type().is_symlink() {
                fs::remove_file(&p).map_err(|e| Error::io("removing temp file", &p, e))?;
                count += 1;
                bytes += m.len();
            }
            Ok(())
        };
        let tmp = self.blobs.join(TMP_DIR);
        if tmp.is_dir() {
            for name in read_dir_sorted(&tmp)? {
                remove(tmp.join(name))?;
            }
        }
        // The Go sgard leaves `.blob-*` temp files in the fan-out folders;
        // an interrupted `durable::write_atomic` (a chunk list) leaves
        // `.sgard-tmp-*` ones.
        let is_temp = |n: &str| n.starts_with(".blob-") || n.starts_with(durable::TMP_PREFIX);
        for l1 in read_dir_sorted(&self.blobs)? {
            let p1 = self.blobs.join(&l1);
            if !is_fanout(&l1) {
                if is_temp(&l1) {
                    remove(p1)?;
                }
                continue;
            }
            for l2 in read_dir_sorted(&p1)? {
                let p2 = p1.join(&l2);
                if !is_fanout(&l2) {
                    if is_temp(&l2) {
                        remove(p2)?;
                    }
                    continue;
                }
                for name in read_dir_sorted(&p2)? {
                    if is_temp(&name) {
                        remove(p2.join(name))?;
                    }
                }
            }
        }
        Ok((count, bytes))
    }
}

fn is_fanout(name: &str) -> bool {
    name.len() == 2
        && name
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<String>> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("listing", dir, e)),
    };
    let mut names = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| Error::io("listing", dir, e))?;
        // Non-UTF-8 names cannot be blobs; skip them.
        if let Ok(n) = ent.file_name().into_string() {
            names.push(n);
        }
    }
    names.sort();
    Ok(names)
}

/// A temp file being filled by [`Store::write_from`]: hashes and counts
/// what reaches it, and keeps its own write error apart from the filler's.
struct HashingFile<'a> {
    file: &'a File,
    hasher: Hasher,
    size: u64,
    failed: Option<io::Error>,
}

impl Write for HashingFile<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.file.write(buf) {
            Ok(n) => {
                self.hasher.update(buf.get(..n).unwrap_or_default());
                self.size += n as u64;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                let kind = e.kind();
                self.failed = Some(e);
                Err(io::Error::new(kind, "writing the blob's temp file failed"))
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let s = Store::init(d.path()).unwrap();
        (d, s)
    }

    #[test]
    fn write_read_round_trip_in_go_layout() {
        let (d, s) = store();
        let w = s.write_bytes(b"hello").unwrap();
        assert!(w.new);
        assert_eq!(w.size, 5);
        let hex = w.hash.to_hex();
        assert_eq!(
            hex,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        let p = d.path().join("blobs/2c/f2").join(&hex);
        assert_eq!(fs::read(&p).unwrap(), b"hello");
        assert_eq!(s.read(&w.hash).unwrap(), b"hello");
    }

    #[test]
    fn write_from_stores_what_is_written_piece_by_piece() {
        let (_d, s) = store();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let w = s
            .write_from(&mut |out| {
                for piece in data.chunks(7_001) {
                    out.write_all(piece)?;
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(w.hash, Hash::of(&data));
        assert_eq!(w.size, data.len() as u64);
        assert!(w.new);
        assert_eq!(s.read(&w.hash).unwrap(), data);
        let again = s.write_from(&mut |out| out.write_all(&data)).unwrap();
        assert!(!again.new);
        // A filler that fails stores nothing and leaves no temp file.
        let err = s
            .write_from(&mut |out| {
                out.write_all(b"partial")?;
                Err(io::Error::other("renderer gave up"))
            })
            .unwrap_err();
        assert!(matches!(err, Error::Source(_)), "{err}");
        assert_eq!(s.list().unwrap().len(), 1);
        assert_eq!(fs::read_dir(s.root().join(TMP_DIR)).unwrap().count(), 0);
    }

    #[test]
    fn duplicate_write_is_a_no_op() {
        let (_d, s) = store();
        let a = s.write_bytes(b"same").unwrap();
        let b = s.write_bytes(b"same").unwrap();
        assert_eq!(a.hash, b.hash);
        assert!(!b.new);
        assert_eq!(s.list().unwrap().len(), 1);
        assert_eq!(fs::read_dir(s.root().join(TMP_DIR)).unwrap().count(), 0);
    }

    #[test]
    fn truncated_blob_is_rewritten() {
        let (_d, s) = store();
        let w = s.write_bytes(b"precious data").unwrap();
        fs::write(s.path_of(&w.hash), b"").unwrap();
        let again = s.write_bytes(b"precious data").unwrap();
        assert!(again.new);
        assert_eq!(s.read(&w.hash).unwrap(), b"precious data");
    }

    #[test]
    fn corrupt_blob_fails_its_read() {
        let (_d, s) = store();
        let w = s.write_bytes(b"original").unwrap();
        fs::write(s.path_of(&w.hash), b"tampered").unwrap();
        let err = s.read(&w.hash).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert!(err.is_integrity());
        assert_eq!(s.verify(&w.hash).unwrap(), BlobState::Corrupt);
    }

    #[test]
    fn chunks_come_in_order_once_and_are_verified() {
        let (_d, s) = store();
        let chunks = |h: &Hash, n: usize| {
            let mut got: Vec<Vec<u8>> = Vec::new();
            let r = s.read_chunks(h, n, &mut |c| {
                got.push(c.to_vec());
                Ok(true)
            });
            (r, got)
        };
        // An empty blob: one empty chunk (a stream always says which blob).
        let e = s.write_bytes(b"").unwrap();
        let (r, got) = chunks(&e.hash, 4);
        assert_eq!(r.unwrap(), 0);
        assert_eq!(got, vec![Vec::<u8>::new()]);
        let w = s.write_bytes(b"0123456789").unwrap();
        let (r, got) = chunks(&w.hash, 4);
        assert_eq!(r.unwrap(), 10);
        assert_eq!(got.concat(), b"0123456789");
        assert!(got.iter().all(|c| !c.is_empty() && c.len() <= 4), "{got:?}");
        // Stopping early is not an error and verifies nothing.
        let mut n = 0;
        let r = s.read_chunks(&w.hash, 4, &mut |_| {
            n += 1;
            Ok(false)
        });
        assert_eq!((r.unwrap(), n), (0, 1));
        // Tampered: every chunk is given, then the read fails.
        fs::write(s.path_of(&w.hash), b"0123456780").unwrap();
        let (r, got) = chunks(&w.hash, 4);
        assert!(matches!(r, Err(Error::Corrupt { .. })));
        assert_eq!(got.concat(), b"0123456780");
        // An error from the consumer is passed on.
        let r = s.read_chunks(&e.hash, 4, &mut |_| Err(io::Error::other("full")));
        assert!(matches!(r, Err(Error::Source(_))));
    }

    #[test]
    fn missing_blob_reports_missing() {
        let (_d, s) = store();
        let h = Hash::of(b"never stored");
        assert!(!s.contains(&h).unwrap());
        assert!(matches!(s.read(&h), Err(Error::Missing(_))));
        assert_eq!(s.verify(&h).unwrap(), BlobState::Missing);
        assert_eq!(s.delete(&h).unwrap(), None);
    }

    #[test]
    fn delete_and_list() {
        let (_d, s) = store();
        let a = s.write_bytes(b"a").unwrap();
        let b = s.write_bytes(b"bb").unwrap();
        let mut want = vec![a.hash, b.hash];
        want.sort();
        let got: Vec<_> = s.list().unwrap().iter().map(|i| i.hash).collect();
        assert_eq!(got, want);
        assert_eq!(s.delete(&a.hash).unwrap(), Some(1));
        assert!(!s.contains(&a.hash).unwrap());
        assert_eq!(s.list().unwrap().len(), 1);
    }

    #[test]
    fn list_ignores_strays_and_sweep_removes_temps() {
        let (_d, s) = store();
        s.write_bytes(b"a").unwrap();
        fs::create_dir_all(s.root().join("zz")).unwrap();
        fs::write(s.root().join("zz/notablob"), b"x").unwrap();
        fs::write(s.root().join(TMP_DIR).join("blob-stale"), b"half").unwrap();
        let leaf = durable::parent_of(&s.path_of(&Hash::of(b"a")));
        fs::write(leaf.join(".blob-123"), b"go temp").unwrap();
        assert_eq!(s.list().unwrap().len(), 1);
        assert_eq!(s.sweep_temps().unwrap(), (2, 11));
        assert_eq!(s.list().unwrap().len(), 1);
    }

    #[test]
    fn batch_names_blobs_only_at_commit_and_dedupes() {
        let (_d, s) = store();
        let mut b = s.batch();
        let a = b.write(&mut &b"alpha"[..]).unwrap();
        let again = b.write(&mut &b"alpha"[..]).unwrap();
        let c = b.write(&mut &b"gamma"[..]).unwrap();
        assert!(a.new && !again.new && c.new);
        assert_eq!(b.len(), 2);
        assert!(!s.contains(&a.hash).unwrap(), "named before commit");
        b.commit().unwrap();
        assert_eq!(s.read(&a.hash).unwrap(), b"alpha");
        assert_eq!(s.read(&c.hash).unwrap(), b"gamma");
        assert_eq!(fs::read_dir(s.root().join(TMP_DIR)).unwrap().count(), 0);
        // Already stored: nothing queued.
        let mut b = s.batch();
        assert!(!b.write(&mut &b"alpha"[..]).unwrap().new);
        assert!(b.is_empty());
    }

    #[test]
    fn a_late_blob_is_named_with_the_batch() {
        let (_d, s) = store();
        let tmp_count = || fs::read_dir(s.root().join(TMP_DIR)).unwrap().count();
        // Asked only once the batch's blobs are named.
        let mut b = s.batch();
        let a = b.write(&mut &b"alpha"[..]).unwrap();
        let late = b
            .commit_with_late(|| {
                assert!(
                    s.contains(&a.hash).unwrap(),
                    "asked before the batch was named"
                );
                Some(s.spool_bytes(b"the snapshot").unwrap())
            })
            .unwrap()
            .unwrap();
        assert!(late.new);
        assert_eq!(late.hash, Hash::of(b"the snapshot"));
        assert_eq!(s.read(&late.hash).unwrap(), b"the snapshot");
        assert_eq!(tmp_count(), 0);
        // Stored already (copied or not): nothing more is written.
        let b = s.batch();
        let again = b
            .commit_with_late(|| Some(s.spool_bytes(b"the snapshot").unwrap()))
            .unwrap()
            .unwrap();
        assert!(!again.new);
        assert_eq!(tmp_count(), 0);
        // With nothing else in the batch, and with no late blob at all.
        let b = s.batch();
        let alone = b
            .commit_with_late(|| Some(s.spool_bytes(b"alone").unwrap()))
            .unwrap()
            .unwrap();
        assert!(alone.new && s.contains(&alone.hash).unwrap());
        let mut b = s.batch();
        let c = b.write(&mut &b"gamma"[..]).unwrap();
        assert_eq!(b.commit_with_late(|| None).unwrap(), None);
        assert!(s.contains(&c.hash).unwrap());
        assert_eq!(tmp_count(), 0);
    }

    #[test]
    fn a_failed_flush_is_not_taken_back_by_another() {
        let called = std::cell::Cell::new(0);
        let flush = |ok: bool| {
            let called = &called;
            move || {
                called.set(called.get() + 1);
                ok
            }
        };
        // Ahead and covering every blob: no second flush.
        assert!(bytes_flushed(Some((true, 3)), 3, flush(true)));
        // Blobs came after it: flushed again.
        assert!(bytes_flushed(Some((true, 2)), 3, flush(true)));
        assert!(!bytes_flushed(Some((true, 2)), 3, flush(false)));
        assert_eq!(called.get(), 2);
        // It failed: each file is synced, whatever a new flush would say.
        assert!(!bytes_flushed(Some((false, 3)), 3, flush(true)));
        assert_eq!(called.get(), 2);
        // None ahead; nothing waiting.
        assert!(bytes_flushed(None, 3, flush(true)));
        assert!(!bytes_flushed(None, 0, flush(true)));
        assert_eq!(called.get(), 3);
    }

    #[test]
    fn a_flush_started_ahead_still_names_blobs_written_after_it() {
        let (_d, s) = store();
        let mut b = s.batch();
        b.start_flush(); // nothing waits: nothing starts
        assert!(b.flushing.is_none());
        let a = b.write(&mut &b"before"[..]).unwrap();
        b.start_flush();
        assert_eq!(b.flushing.is_some(), cfg!(target_os = "linux"));
        let c = b.write(&mut &b"after"[..]).unwrap();
        b.commit().unwrap();
        assert_eq!(s.read(&a.hash).unwrap(), b"before");
        assert_eq!(s.read(&c.hash).unwrap(), b"after");
        assert_eq!(fs::read_dir(s.root().join(TMP_DIR)).unwrap().count(), 0);
    }

    #[test]
    fn a_spooled_blob_finds_a_stored_one_in_a_leaf_made_or_not() {
        let (_d, s) = store();
        let first = s.spool_bytes(b"content").unwrap();
        assert!(!first.stored);
        let mut b = s.batch();
        b.adopt(first);
        b.commit().unwrap();
        // The leaf is there now: the blob is looked up, and found.
        assert!(s.spool_bytes(b"content").unwrap().stored);
        assert!(s.spool_blob(&mut &b"content"[..]).unwrap().stored);
        // A leaf made empty (a run stopped before its rename) holds nothing.
        let other = Hash::of(b"other");
        fs::create_dir_all(durable::parent_of(&s.path_of(&other))).unwrap();
        assert!(!s.spool_blob(&mut &b"other"[..]).unwrap().stored);
    }

    #[test]
    fn dropped_batch_leaves_nothing() {
        let (_d, s) = store();
        let mut b = s.batch();
        let w = b.write(&mut &b"never committed"[..]).unwrap();
        drop(b);
        assert!(!s.contains(&w.hash).unwrap());
        assert_eq!(fs::read_dir(s.root().join(TMP_DIR)).unwrap().count(), 0);
    }

    #[test]
    fn streaming_write_of_a_large_reader() {
        let (_d, s) = store();
        // 8 MiB from a reader that never holds it all.
        let mut r = io::repeat(7).take(8 << 20);
        let w = s.write(&mut r).unwrap();
        assert_eq!(w.size, 8 << 20);
        assert_eq!(s.verify(&w.hash).unwrap(), BlobState::Ok);
    }
}
