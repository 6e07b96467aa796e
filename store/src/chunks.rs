//! Big files in content-defined chunks (issue 14, first step: the store).
//!
//! A chunked file is stored as its chunks plus one chunk list:
//!
//! - **chunks** are content-addressed objects in `<repo>/chunks/ab/cd/<sha256>`
//!   (the blob layout, in a folder of their own: the Go sgard's `prune`
//!   deletes every file under `blobs/` that no entry names, and never walks
//!   `chunks/`). Each is verified against its name on every read.
//! - the **chunk list** of a file is `<repo>/chunk-lists/ab/cd/<sha256>`,
//!   named by the SHA-256 of the *whole* content: the same hash the
//!   manifest entry records, so the manifest needs no new field (the Go
//!   sgard drops fields it does not know) and a Go restore of the entry
//!   finds no blob and fails loudly instead of writing wrong bytes. Its
//!   text:
//!
//!   ```text
//!   sgard-chunks 1
//!   fastcdc-2020 <min> <avg> <max>
//!   size <bytes>
//!   <sha256 of chunk 1> <length>
//!   …
//!   ```
//!
//!   A list is trusted only as far as reassembly proves it: every chunk is
//!   checked against its name, the lengths against the list, and the whole
//!   content against the list's own name, before a reader is told it
//!   succeeded.
//!
//! Writing: chunks first (through a [`Batch`], so they are durable before
//! they are named, committed every [`COMMIT_EVERY`] new bytes), the list
//! last; an interrupted write leaves chunks that the next write of the same
//! content reuses, and never a list. A write that knows its [`Source`]
//! keeps a journal of the chunks made durable so far (see [`journal`]), so
//! the next run can say it resumes, or why it does not.
//!
//! [`Batch`]: crate::Batch

mod journal;
pub mod setting;
mod write;

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub use journal::{JournalInfo, Resume, Source};
pub use setting::{SETTING_FILE, Setting};

use crate::{Error, Hash, Hasher, Result, Store, durable};

/// The folder of chunk objects in a repository.
pub const CHUNKS_DIR: &str = "chunks";
/// The folder of chunk lists in a repository.
pub const LISTS_DIR: &str = "chunk-lists";

const MAGIC: &str = "sgard-chunks 1";
const ALGORITHM: &str = "fastcdc-2020";
/// A list file is at most this long (about 900,000 chunks, 57 GB at the
/// default sizes): sgard never writes a longer one (that store fails,
/// naming the remedy), and reading refuses one.
const MAX_LIST_BYTES: u64 = 64 << 20;

/// The chunker's sizes: every chunk is at least `min` bytes (but the last),
/// at most `max`, `avg` on average.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    min: u32,
    avg: u32,
    max: u32,
}

impl Default for Params {
    /// 16 KiB / 64 KiB / 256 KiB: small enough that an edit or an append to a
    /// shell history stores a chunk or two, large enough that a 1 GiB file
    /// is 16,000 chunks.
    fn default() -> Self {
        Params {
            min: 16 * 1024,
            avg: 64 * 1024,
            max: 256 * 1024,
        }
    }
}

/// From this size on, a file is cut with [`Params::LARGE`] instead of the
/// default sizes (see [`Params::for_size`]).
pub const LARGE_FROM: u64 = 256 << 20;

impl Params {
    /// 256 KiB / 1 MiB / 4 MiB, restic's average: a 1 GiB file is about
    /// 1,000 chunks rather than 16,000.
    pub const LARGE: Params = Params {
        min: 256 * 1024,
        avg: 1024 * 1024,
        max: 4 * 1024 * 1024,
    };

    /// The sizes to cut content of `size` bytes with: with the default
    /// sizes, a file of [`LARGE_FROM`] or more is cut with
    /// [`Params::LARGE`]. Creating a chunk file costs more than hashing
    /// its bytes (a 1 GiB add spent as much in the kernel, making 16,000
    /// files and their folders, as in SHA-256), and an edit there costs a
    /// megabyte or two either way. Sizes set by hand are kept. A file that
    /// grows past the mark is stored anew once: its next version shares no
    /// chunk with the last.
    pub fn for_size(self, size: u64) -> Params {
        if self == Params::default() && size >= LARGE_FROM {
            Params::LARGE
        } else {
            self
        }
    }

    /// Sizes the chunker accepts: `min ≤ avg ≤ max`, each within FastCDC's
    /// bounds.
    ///
    /// # Errors
    /// A message naming the size out of bounds.
    pub fn new(min: u32, avg: u32, max: u32) -> std::result::Result<Self, String> {
        use fastcdc::v2020 as f;
        let within = |name: &str, v: u32, lo: u32, hi: u32| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("{name} chunk size {v} is outside {lo}..={hi}"))
            }
        };
        within("minimum", min, f::MINIMUM_MIN, f::MINIMUM_MAX)?;
        within("average", avg, f::AVERAGE_MIN, f::AVERAGE_MAX)?;
        within("maximum", max, f::MAXIMUM_MIN, f::MAXIMUM_MAX)?;
        if !(min <= avg && avg <= max) {
            return Err(format!(
                "chunk sizes must satisfy minimum <= average <= maximum (got {min}, {avg}, {max})"
            ));
        }
        Ok(Params { min, avg, max })
    }

    /// The minimum, average and maximum chunk sizes.
    pub fn sizes(&self) -> (u32, u32, u32) {
        (self.min, self.avg, self.max)
    }
}

/// A file's chunks, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkList {
    /// The chunker's sizes when the file was split.
    pub params: Params,
    /// The whole content's size.
    pub size: u64,
    /// Each chunk's name and length.
    pub chunks: Vec<(Hash, u32)>,
}

impl ChunkList {
    /// The list's text (see the module documentation).
    pub fn to_text(&self) -> String {
        let (min, avg, max) = self.params.sizes();
        let mut t = format!(
            "{MAGIC}\n{ALGORITHM} {min} {avg} {max}\nsize {}\n",
            self.size
        );
        for (h, len) in &self.chunks {
            let _ = writeln!(t, "{} {len}", h.to_hex());
        }
        t
    }

    /// Reads a list's text; `Err` says what is wrong with it.
    ///
    /// # Errors
    /// A message: wrong header, a malformed line, lengths that do not add up
    /// to the size, or a chunk longer than the sizes allow.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err("not a chunk list of this format".into());
        }
        let algo = lines.next().ok_or("no chunker line")?;
        let mut words = algo.split(' ');
        if words.next() != Some(ALGORITHM) {
            return Err(format!("unknown chunker {algo:?}"));
        }
        let mut size = || -> std::result::Result<u32, String> {
            words
                .next()
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| format!("malformed chunker line {algo:?}"))
        };
        let params = Params::new(size()?, size()?, size()?)?;
        let size: u64 = lines
            .next()
            .and_then(|l| l.strip_prefix("size "))
            .and_then(|n| n.parse().ok())
            .ok_or("no size line")?;
        let mut chunks = Vec::new();
        let mut total: u64 = 0;
        let mut short = None;
        for (i, line) in lines.enumerate() {
            // Only the last chunk may be shorter than the minimum: a list
            // that repeats short chunks is not one the chunker cut.
            if let Some(at) = short {
                return Err(format!(
                    "chunk {at} is shorter than the minimum and not the last"
                ));
            }
            let bad = || format!("malformed chunk line {}: {line:?}", i + 1);
            let (hex, len) = line.split_once(' ').ok_or_else(bad)?;
            let hash = Hash::parse(hex).map_err(|_| bad())?;
            let len: u32 = len.parse().map_err(|_| bad())?;
            if len == 0 || len > params.max {
                return Err(format!("chunk {} has impossible length {len}", i + 1));
            }
            if len < params.min {
                short = Some(i + 1);
            }
            total = total.saturating_add(u64::from(len));
            chunks.push((hash, len));
        }
        if total != size {
            return Err(format!(
                "its chunks hold {total} bytes, its size says {size}"
            ));
        }
        Ok(ChunkList {
            params,
            size,
            chunks,
        })
    }
}

/// What [`ChunkStore::write`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkedWritten {
    /// SHA-256 of the whole content (the list's name).
    pub hash: Hash,
    /// The whole content's size.
    pub size: u64,
    /// How many chunks the content has.
    pub chunks: usize,
    /// How many of them were not stored before.
    pub new_chunks: usize,
    /// Their bytes.
    pub new_bytes: u64,
    /// Whether the list was not stored before.
    pub new_list: bool,
    /// What became of an interrupted earlier write of the same source.
    pub resume: Resume,
}

/// New chunk bytes between two commits of a write (each one a point an
/// interrupted write resumes from).
pub const COMMIT_EVERY: u64 = 16 << 20;

/// The chunks and chunk lists of one repository.
#[derive(Clone, Debug)]
pub struct ChunkStore {
    objects: Store,
    lists: PathBuf,
    journals: PathBuf,
    /// Test hook: after this many commits of a write, stop (sleep until
    /// killed), so a test can kill -9 a write at a known point.
    stall_after: Option<u32>,
}

impl ChunkStore {
    /// The chunk store of the repository at `repo` (nothing is created).
    pub fn open(repo: &Path) -> Self {
        let objects = Store::at(repo.join(CHUNKS_DIR));
        let journals = objects.root().join(journal::DIR);
        ChunkStore {
            objects,
            lists: repo.join(LISTS_DIR),
            journals,
            stall_after: None,
        }
    }

    /// Test hook: every write stops for good after `n` commits (it sleeps
    /// until the process is killed).
    #[must_use]
    pub fn stalling_after(mut self, n: u32) -> Self {
        self.stall_after = Some(n);
        self
    }

    /// Where the list of the content hashing to `hash` is kept.
    pub fn list_path(&self, hash: &Hash) -> PathBuf {
        let hex = hash.to_hex();
        self.lists.join(&hex[0..2]).join(&hex[2..4]).join(hex)
    }

    /// The folder of the chunk lists (in the blob layout).
    pub fn lists_root(&self) -> &Path {
        &self.lists
    }

    /// The store of chunk objects.
    pub fn objects(&self) -> &Store {
        &self.objects
    }

    /// Whether content hashing to `hash` is stored here as chunks (its list
    /// exists; its chunks are checked when it is read).
    pub fn contains(&self, hash: &Hash) -> bool {
        durable::lstat_exists(&self.list_path(hash))
    }

    /// The list of the content hashing to `hash`.
    ///
    /// # Errors
    /// [`Error::Missing`] when there is none; [`Error::BadChunkList`] when
    /// it is damaged; [`Error::Io`].
    pub fn list(&self, hash: &Hash) -> Result<ChunkList> {
        let path = self.list_path(hash);
        match std::fs::symlink_metadata(&path) {
            Ok(md) if md.len() > MAX_LIST_BYTES => {
                return Err(Error::BadChunkList {
                    path,
                    reason: format!("{} bytes, more than any list sgard writes", md.len()),
                });
            }
            _ => {}
        }
        let text = match durable::read_regular_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Error::Missing(*hash)),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Err(Error::BadChunkList {
                    path,
                    reason: "not UTF-8 text".into(),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                return Err(Error::BadChunkList {
                    path,
                    reason: "not a regular file".into(),
                });
            }
            Err(e) => return Err(Error::io("reading chunk list", path, e)),
        };
        ChunkList::parse(&text).map_err(|reason| Error::BadChunkList { path, reason })
    }

    /// Every chunk list in the repository, in hash order.
    ///
    /// # Errors
    /// [`Error::Io`] when a folder cannot be listed.
    pub fn lists(&self) -> Result<Vec<Hash>> {
        Ok(Store::at(self.lists.clone())
            .list()?
            .into_iter()
            .map(|b| b.hash)
            .collect())
    }

    /// Removes unfinished writes: chunk temp files, interrupted list and
    /// journal writes. Call only while holding the repository's exclusive
    /// lock. Returns (files, bytes).
    ///
    /// # Errors
    /// [`Error::Io`] when a temp file cannot be removed.
    pub fn sweep_temps(&self) -> Result<(u64, u64)> {
        let (mut count, mut bytes) = self.objects.sweep_temps()?;
        let (c, b) = Store::at(self.lists.clone()).sweep_temps()?;
        count += c;
        bytes += b;
        if let Ok(rd) = std::fs::read_dir(&self.journals) {
            for ent in rd.flatten() {
                let temp = ent
                    .file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(durable::TMP_PREFIX));
                let Ok(m) = ent.metadata() else { continue };
                if temp && m.is_file() {
                    let p = ent.path();
                    std::fs::remove_file(&p).map_err(|e| Error::io("removing temp file", &p, e))?;
                    count += 1;
                    bytes += m.len();
                }
            }
        }
        Ok((count, bytes))
    }

    /// Deletes the list of `hash`; returns its size, or `None` if there was
    /// none. The chunks stay (the caller sweeps those no list needs).
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn delete_list(&self, hash: &Hash) -> Result<Option<u64>> {
        Store::at(self.lists.clone()).delete(hash)
    }

    /// Stores a chunk list received from a peer for the content `hash`,
    /// once every chunk it names is here and the content reassembles to
    /// `hash` (each chunk and the whole verified); never a list that does
    /// not.
    ///
    /// # Errors
    /// [`Error::BadChunkList`] when the text is not a list, or is longer
    /// than any sgard writes; [`Error::MissingChunk`],
    /// [`Error::CorruptChunk`], [`Error::Corrupt`]; [`Error::Io`].
    pub fn install_list(&self, hash: &Hash, text: &str) -> Result<()> {
        let path = self.list_path(hash);
        if text.len() as u64 > MAX_LIST_BYTES {
            return Err(Error::BadChunkList {
                path,
                reason: "longer than any list sgard writes".into(),
            });
        }
        let list = ChunkList::parse(text).map_err(|reason| Error::BadChunkList {
            path: path.clone(),
            reason,
        })?;
        for (c, _) in &list.chunks {
            if !self.objects.contains(c)? {
                return Err(Error::MissingChunk {
                    content: *hash,
                    chunk: *c,
                });
            }
        }
        self.reassemble(hash, &list, 1 << 16, &mut |_| Ok(true))?;
        durable::create_dir_all_durable(&durable::parent_of(&path))?;
        durable::write_atomic(&path, list.to_text().as_bytes(), 0o644)
    }

    /// The text of the list of `hash`, as stored (for a peer).
    ///
    /// # Errors
    /// As [`ChunkStore::list`].
    pub fn list_text(&self, hash: &Hash) -> Result<String> {
        Ok(self.list(hash)?.to_text())
    }

    /// Writes the content hashing to `hash` into `out`, chunk by chunk,
    /// each chunk verified against its name and the whole against `hash`.
    /// Returns the bytes written.
    ///
    /// When the result is an error, whatever reached `out` must be thrown
    /// away.
    ///
    /// # Errors
    /// [`Error::Missing`] (no list), [`Error::MissingChunk`],
    /// [`Error::CorruptChunk`], [`Error::Corrupt`] (the whole),
    /// [`Error::BadChunkList`], [`Error::Source`] when `out` fails,
    /// [`Error::Io`].
    pub fn read_to(&self, hash: &Hash, out: &mut dyn Write) -> Result<u64> {
        self.read_each(hash, 1 << 16, &mut |data| {
            out.write_all(data).map(|()| true)
        })
    }

    /// As [`Store::read_chunks`], for chunked content: `each` gets the
    /// content in pieces of at most `piece` bytes and may stop early
    /// (nothing is verified then).
    ///
    /// # Errors
    /// As [`ChunkStore::read_to`].
    pub fn read_each(
        &self,
        hash: &Hash,
        piece: usize,
        each: &mut dyn FnMut(&[u8]) -> io::Result<bool>,
    ) -> Result<u64> {
        let list = self.list(hash)?;
        self.reassemble(hash, &list, piece, each)
    }

    fn reassemble(
        &self,
        hash: &Hash,
        list: &ChunkList,
        piece: usize,
        each: &mut dyn FnMut(&[u8]) -> io::Result<bool>,
    ) -> Result<u64> {
        if list.chunks.is_empty() {
            each(&[]).map_err(Error::Source)?;
        }
        let mut whole = Hasher::new();
        let mut size = 0u64;
        let mut stopped = false;
        for (i, (h, len)) in list.chunks.iter().enumerate() {
            let mut seen = 0u64;
            let mut too_long = false;
            let got = self
                .objects
                .read_chunks(h, piece, &mut |data| {
                    // A chunk longer than the list says stops at once,
                    // before more of it is passed on.
                    seen += data.len() as u64;
                    if seen > u64::from(*len) {
                        too_long = true;
                        return Ok(false);
                    }
                    whole.update(data);
                    let go_on = each(data)?;
                    stopped = !go_on;
                    Ok(go_on)
                })
                .map_err(|e| match e {
                    // Not the content missing (which callers may look for
                    // elsewhere): a part of it, after others were written.
                    Error::Missing(chunk) => Error::MissingChunk {
                        content: *hash,
                        chunk,
                    },
                    Error::Corrupt { hash: chunk, .. } => Error::CorruptChunk {
                        content: *hash,
                        chunk,
                    },
                    other => other,
                })?;
            if too_long {
                return Err(Error::BadChunkList {
                    path: self.list_path(hash),
                    reason: format!(
                        "chunk {} holds more than the {len} bytes the list says",
                        i + 1
                    ),
                });
            }
            size += got;
            if stopped {
                return Ok(size);
            }
            if got != u64::from(*len) {
                return Err(Error::BadChunkList {
                    path: self.list_path(hash),
                    reason: format!("chunk {} holds {got} bytes, the list says {len}", i + 1),
                });
            }
        }
        crate::expect_hash(hash, whole)?;
        Ok(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bytes that do not repeat (xorshift).
    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn read_all(cs: &ChunkStore, h: &Hash) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        cs.read_to(h, &mut out)?;
        Ok(out)
    }

    #[test]
    fn chunked_content_round_trips_and_edits_store_little() {
        let d = tempfile::tempdir().unwrap();
        let cs = ChunkStore::open(d.path());
        let p = Params::default();
        let data = noise(3 << 20, 7);
        let w = cs.write(&mut data.as_slice(), p, None).unwrap();
        assert_eq!(w.hash, Hash::of(&data), "named by the whole content");
        assert_eq!((w.size, w.new_chunks), (data.len() as u64, w.chunks));
        assert!(w.chunks > 10, "3 MiB in 64 KiB chunks: {}", w.chunks);
        assert_eq!(read_all(&cs, &w.hash).unwrap(), data);
        // The same content again stores nothing.
        let again = cs.write(&mut data.as_slice(), p, None).unwrap();
        assert_eq!((again.hash, again.new_chunks), (w.hash, 0));
        // One byte changed in the middle, one inserted, a line appended: a
        // chunk or two each, every version still whole.
        let mut edited = data.clone();
        edited[1 << 20] ^= 0xff;
        let mut inserted = data.clone();
        inserted.insert(2 << 20, b'!');
        let mut appended = data.clone();
        appended.extend_from_slice(b"echo one more line\n");
        for v in [&edited, &inserted, &appended] {
            let w = cs.write(&mut v.as_slice(), p, None).unwrap();
            assert!(w.new_chunks <= 3, "{} new chunks", w.new_chunks);
            assert!(w.new_bytes < 3 * 256 * 1024, "{} new bytes", w.new_bytes);
            assert_eq!(&read_all(&cs, &w.hash).unwrap(), v);
        }
        assert_eq!(
            read_all(&cs, &w.hash).unwrap(),
            data,
            "the first version too"
        );
        // Not a blob: the Go layout's folder holds nothing of it.
        assert!(!d.path().join("blobs").exists());
    }

    #[test]
    fn a_damaged_chunk_or_list_never_reads_as_content() {
        let d = tempfile::tempdir().unwrap();
        let cs = ChunkStore::open(d.path());
        let data = noise(1 << 20, 3);
        let w = cs
            .write(&mut data.as_slice(), Params::default(), None)
            .unwrap();
        let list = cs.list(&w.hash).unwrap();
        // A chunk's bytes changed: that chunk fails its own name.
        let victim = cs.objects().path_of(&list.chunks[1].0);
        let good = std::fs::read(&victim).unwrap();
        let mut bad = good.clone();
        bad[10] ^= 1;
        std::fs::write(&victim, &bad).unwrap();
        let e = read_all(&cs, &w.hash).unwrap_err();
        assert!(
            matches!(e, Error::CorruptChunk { .. }) && e.is_integrity(),
            "{e}"
        );
        std::fs::write(&victim, &good).unwrap();
        // A chunk gone: a part missing, not the content (callers may look
        // for missing content elsewhere, after part of it was written).
        std::fs::remove_file(&victim).unwrap();
        let e = read_all(&cs, &w.hash).unwrap_err();
        assert!(
            matches!(e, Error::MissingChunk { .. }) && e.is_integrity(),
            "{e}"
        );
        std::fs::write(&victim, &good).unwrap();
        assert_eq!(read_all(&cs, &w.hash).unwrap(), data);
        // A list that reorders two chunks: every chunk is intact, the whole
        // is not what the name says.
        let mut swapped = list.clone();
        swapped.chunks.swap(0, 1);
        std::fs::write(cs.list_path(&w.hash), swapped.to_text()).unwrap();
        assert!(matches!(read_all(&cs, &w.hash), Err(Error::Corrupt { .. })));
        // Hostile or damaged lists are refused with a reason, never panic.
        for text in [
            "",
            "sgard-chunks 2\n",
            "sgard-chunks 1\nfastcdc-2020 1 2 3\nsize 0\n",
            "sgard-chunks 1\nfastcdc-2020 16384 65536 262144\nsize 5\n",
            "sgard-chunks 1\nfastcdc-2020 16384 65536 262144\nsize 1\nzz 1\n",
            "sgard-chunks 1\nfastcdc-2020 16384 65536 262144\nsize 999999\n\
             0000000000000000000000000000000000000000000000000000000000000000 999999\n",
            "sgard-chunks 1\nfastcdc-2020 65536 16384 262144\nsize 0\n",
        ] {
            std::fs::write(cs.list_path(&w.hash), text).unwrap();
            let e = read_all(&cs, &w.hash).unwrap_err();
            assert!(
                matches!(e, Error::BadChunkList { .. }) && e.is_integrity(),
                "{text:?}: {e}"
            );
        }
        // One real chunk named over and over (each shorter than the
        // minimum), and a list longer than any sgard writes.
        let (c, len) = list.chunks[list.chunks.len() - 1];
        let mut repeated = ChunkList {
            params: Params::new(len + 1, len + 1, 256 * 1024).unwrap(),
            size: 0,
            chunks: vec![(c, len); 1000],
        };
        repeated.size = u64::from(len) * 1000;
        let huge = format!("{}{}", list.to_text(), " ".repeat(64 << 20));
        for text in [repeated.to_text(), huge] {
            std::fs::write(cs.list_path(&w.hash), &text).unwrap();
            let e = read_all(&cs, &w.hash).unwrap_err();
            assert!(matches!(e, Error::BadChunkList { .. }), "{e}");
        }
        assert!(matches!(
            read_all(&cs, &Hash::of(b"never stored")),
            Err(Error::Missing(_))
        ));
    }

    /// Yields `data`, then fails after `fail_at` bytes (a full disk, a
    /// vanished mount): what an interrupted write sees.
    struct Failing<'a> {
        data: &'a [u8],
        fail_at: usize,
    }

    impl std::io::Read for Failing<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.fail_at == 0 {
                return Err(io::Error::other("the source went away"));
            }
            let n = buf.len().min(self.data.len()).min(self.fail_at);
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            self.fail_at -= n;
            Ok(n)
        }
    }

    #[test]
    fn an_interrupted_write_resumes_or_says_why_not() {
        let d = tempfile::tempdir().unwrap();
        let cs = ChunkStore::open(d.path());
        let p = Params::default();
        let data = noise(40 << 20, 11);
        let src = Source {
            key: "~/big\nname".into(),
            size: data.len() as u64,
            mtime: (1_700_000_000, 5),
        };
        let interrupt = |src: &Source, p: Params, data: &[u8]| {
            let mut r = Failing {
                data,
                fail_at: 30 << 20,
            };
            let e = cs.write(&mut r, p, Some(src)).unwrap_err();
            assert!(matches!(e, Error::Source(_)), "{e}");
            let j = cs.journals().unwrap();
            assert_eq!(j.len(), 1);
            assert_eq!(j[0].source.as_ref(), Some(src));
            assert!(
                j[0].chunks.len() > 200,
                "{} chunks journaled",
                j[0].chunks.len()
            );
        };
        interrupt(&src, p, &data);
        assert!(!cs.contains(&Hash::of(&data)), "nothing named");
        let w = cs.write(&mut data.as_slice(), p, Some(&src)).unwrap();
        let Resume::Resumed { chunks, bytes } = w.resume else {
            panic!("{:?}", w.resume);
        };
        assert!(
            bytes >= 16 << 20 && chunks > 200,
            "{chunks} chunks, {bytes} bytes"
        );
        assert!(
            w.new_bytes <= (data.len() as u64) - bytes,
            "{}",
            w.new_bytes
        );
        assert!(cs.journals().unwrap().is_empty(), "done: the journal goes");
        assert_eq!(read_all(&cs, &w.hash).unwrap(), data);

        // The source changed: each reason is said, and the write is whole.
        let mut other = data.clone();
        other[0] ^= 1;
        let touched = Source {
            mtime: (1_700_000_001, 0),
            ..src.clone()
        };
        let small = Params::new(8 * 1024, 32 * 1024, 128 * 1024).unwrap();
        for (second, p2, content, why) in [
            (&touched, p, &data, "modified"),
            (&src, small, &data, "chunker settings changed"),
            (&src, p, &other, "chunk 1 differs"),
        ] {
            interrupt(&src, p, &data);
            let w = cs.write(&mut content.as_slice(), p2, Some(second)).unwrap();
            match &w.resume {
                Resume::Refused(r) => assert!(r.contains(why), "{r}"),
                r => panic!("{why}: {r:?}"),
            }
            assert_eq!(read_all(&cs, &w.hash).unwrap(), *content);
        }
        let bigger = Source {
            size: src.size + 1,
            ..src.clone()
        };
        interrupt(&src, p, &data);
        let mut longer = data.clone();
        longer.push(b'\n');
        let w = cs.write(&mut longer.as_slice(), p, Some(&bigger)).unwrap();
        assert!(
            matches!(&w.resume, Resume::Refused(r) if r.contains("size changed")),
            "{:?}",
            w.resume
        );
    }

    #[test]
    fn chunker_sizes_out_of_bounds_are_refused() {
        assert!(Params::new(16 * 1024, 64 * 1024, 256 * 1024).is_ok());
        for (min, avg, max) in [
            (0, 64, 1024),
            (64, 128, 512),
            (4096, 1024, 8192),
            (64, 256, 1 << 25),
        ] {
            assert!(Params::new(min, avg, max).is_err(), "{min} {avg} {max}");
        }
    }
}
