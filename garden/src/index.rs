//! The index: one machine-local binary file per repository holding what
//! this machine knows about it, so that a command whose manifest did not
//! change never parses YAML and never reads a text cache.
//!
//! `$XDG_STATE_HOME/sgard/repos/<key>/index` (beside the undo log), in
//! these sections:
//!
//! - **manifest**: the parsed `manifest.yaml`, keyed by the SHA-256 of its
//!   bytes (the head hash) and by the file's stat fingerprint (device,
//!   inode, size, mtime and ctime in nanoseconds) as it was when read;
//! - **history** and **local history**: the parsed `history.yaml` and this
//!   home's `undo/history.yaml`, keyed the same way;
//! - **base**: this machine's three-way base ([`crate::base`]);
//! - **stat cache**: per tracked path, the `lstat` data a content hash was
//!   computed under ([`crate::statcache`]).
//!
//! Trust, as git trusts its index:
//! - The file starts with a magic, a version and a CRC-32 of the rest. A
//!   missing, damaged, truncated, foreign (another format) or newer file is
//!   not used at all: the manifest is parsed, the stat cache starts empty
//!   and the base is treated as damaged (rebuilt the safe way, see
//!   [`crate::base`]), and the next write replaces it. The system failing
//!   to read it (EIO, ENOSPC, a permission) is no damage: the command fails
//!   with that error and the next one reads the file again. The folder it is in
//!   names the repository (it moves when the repository's id changes); an
//!   index put in another repository's folder supplies no manifest (the
//!   section is bound to that folder's `manifest.yaml` by fingerprint and
//!   hash) and no stat-cache hit (bound to device and inode).
//! - A file's section (manifest, history) is used without reading it only if
//!   the file's fingerprint is unchanged **and** its mtime and ctime were
//!   more than [`RACY_WINDOW`] older than the moment the fingerprint was
//!   taken (the racy-clean rule: a rewrite in the same timestamp tick as
//!   the last one could leave the fingerprint as it was, but any write
//!   after that moment moves the ctime, which userland cannot set back).
//!   Otherwise `manifest.yaml` is read and hashed, and the section is used
//!   only if the hash is the section's; else the YAML is parsed.
//! - Stat-cache entries follow the same rule per file ([`crate::statcache`]).
//!
//! The file is written whole, atomically and durably (temp file in the same
//! folder, `sync_all`, rename, fsync of the folder), at the points the base
//! must be durable and at the end of a command that learned something.

use std::fs::Metadata;
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sgard_manifest::Manifest;
use sgard_manifest::history::History;
use sgard_store::{Hash, durable};

use crate::base::BaseEntry;
use crate::pathtable::PathTable;
use crate::statcache::Stat;
use crate::{Error, Result};

use sgard_manifest::codec::{self, Reader, Writer};

/// The file's name in the repository's state folder.
pub const FILE: &str = "index";

const MAGIC: &[u8; 12] = b"sgard-index\n";
/// Bump on any change of the layout; an index of another version is
/// rebuilt.
const VERSION: u32 = 2;
/// Far above any real index (100,000 entries take ~30 MB).
const MAX_BYTES: u64 = 1 << 30;
/// Decoded counts never reserve more than this many items up front (see
/// [`codec::MAX_RESERVE`]). Real counts get exactly their room: a table
/// grown by doubling held up to twice its records (at 100,000 entries,
/// 16 MB of the peak of every command).
pub(crate) use sgard_manifest::codec::MAX_RESERVE;

/// How much older than the moment it was looked at a file must be for its
/// fingerprint alone to vouch for its content.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// Nanoseconds since the epoch, now.
pub(crate) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
        .unwrap_or(0)
}

/// What identifies one version of a file without reading it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Fingerprint {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}:{}",
            self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns
        )
    }
}

impl Fingerprint {
    pub fn of(md: &Metadata) -> Self {
        let (dev, ino) = crate::platform::dev_ino(md);
        let ns = |(secs, nsec): (i64, i64)| secs.saturating_mul(1_000_000_000).saturating_add(nsec);
        Fingerprint {
            dev,
            ino,
            size: md.len(),
            mtime_ns: ns(crate::platform::mtime(md)),
            ctime_ns: ns(crate::platform::ctime(md)),
        }
    }

    /// Whether a file with this fingerprint, looked at `observed_ns`, was
    /// settled then (see the module's racy-clean rule).
    pub fn settled_at(&self, observed_ns: i64) -> bool {
        let window = i64::try_from(RACY_WINDOW.as_nanos()).unwrap_or(i64::MAX);
        self.mtime_ns.max(self.ctime_ns) < observed_ns.saturating_sub(window)
    }

    fn put(&self, w: &mut Writer) {
        w.u64(self.dev);
        w.u64(self.ino);
        w.u64(self.size);
        w.i64(self.mtime_ns);
        w.i64(self.ctime_ns);
    }

    fn get(r: &mut Reader<'_>) -> Option<Self> {
        Some(Fingerprint {
            dev: r.u64()?,
            ino: r.u64()?,
            size: r.u64()?,
            mtime_ns: r.i64()?,
            ctime_ns: r.i64()?,
        })
    }
}

/// An encoded section caching a file: its fingerprint, when that was
/// taken, the SHA-256 of its bytes, and what `put` writes of its contents.
pub(crate) fn file_section(
    fp: Fingerprint,
    observed_ns: i64,
    hash: &Hash,
    size_hint: usize,
    put: impl FnOnce(&mut Writer),
) -> Vec<u8> {
    let mut w = Writer::default();
    w.buf.reserve(size_hint + 128);
    fp.put(&mut w);
    w.i64(observed_ns);
    w.hash(hash);
    put(&mut w);
    w.buf
}

/// The encoded manifest section (see [`file_section`]; a run keeps a
/// [`ManifestSection`] instead).
#[cfg(test)]
pub(crate) fn manifest_section(
    fp: Fingerprint,
    observed_ns: i64,
    head: &Hash,
    m: &Manifest,
) -> Vec<u8> {
    file_section(fp, observed_ns, head, m.files.len() * 96, |w| {
        codec::put_manifest(w, m);
    })
}

/// Bytes of a section's head: the fingerprint, when it was taken, the hash.
const SECTION_HEAD: usize = 5 * 8 + 8 + 32;

/// A manifest section kept as its head and a digest of the manifest it
/// held (the length and CRC-32 of its encoding), not its bytes: they were
/// 10 MB held through every run at 100,000 entries. It is written from the
/// manifest in memory (streamed, see [`write`]), and only if that still
/// encodes to what the section held: a manifest changed here but not
/// written to `manifest.yaml` is never cached as the file's (the section is
/// left out, and the next run reads the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ManifestSection {
    head: Vec<u8>,
    len: u64,
    crc: u32,
}

impl ManifestSection {
    /// The section whose bytes are `sec`, as an index file holds it.
    pub fn of_bytes(sec: &[u8]) -> Option<Self> {
        let (head, body) = sec.split_at_checked(SECTION_HEAD)?;
        Some(ManifestSection {
            head: head.to_vec(),
            len: body.len() as u64,
            crc: crc32fast::hash(body),
        })
    }

    /// The section for `m`, as `manifest.yaml` now holds it (`fp` seen at
    /// `observed_ns`, its bytes hashing to `head`).
    pub fn of_manifest(fp: Fingerprint, observed_ns: i64, head: &Hash, m: &Manifest) -> Self {
        let mut w = Writer::default();
        fp.put(&mut w);
        w.i64(observed_ns);
        w.hash(head);
        let (len, crc) = measure(m);
        ManifestSection {
            head: w.buf,
            len,
            crc,
        }
    }

    /// Whether `m` encodes to what the section held.
    pub fn holds(&self, m: &Manifest) -> bool {
        measure(m) == (self.len, self.crc)
    }
}

/// The length and CRC-32 of `m`'s encoding, taken in pieces.
fn measure(m: &Manifest) -> (u64, u32) {
    let mut crc = crc32fast::Hasher::new();
    let mut len = 0u64;
    let mut w = Writer::default();
    let mut take = |w: &mut Writer| {
        if w.buf.len() >= 1 << 16 {
            crc.update(&w.buf);
            len += w.buf.len() as u64;
            w.buf.clear();
        }
        Ok(())
    };
    let _ = codec::put_manifest_with(&mut w, m, &mut take);
    crc.update(&w.buf);
    len += w.buf.len() as u64;
    (len, crc.finalize())
}

/// The encoded section of a history log (see [`file_section`]).
pub(crate) fn history_section(
    fp: Fingerprint,
    observed_ns: i64,
    hash: &Hash,
    h: &History,
) -> Vec<u8> {
    file_section(fp, observed_ns, hash, h.records.len() * 160, |w| {
        codec::put_history(w, h);
    })
}

/// Stamps `section` with a new fingerprint of its file (the same bytes,
/// seen again at `observed_ns`).
pub(crate) fn restamp(section: &mut [u8], fp: Fingerprint, observed_ns: i64) {
    let mut w = Writer::default();
    fp.put(&mut w);
    w.i64(observed_ns);
    if let Some(head) = section.get_mut(..w.buf.len()) {
        head.copy_from_slice(&w.buf);
    }
}

/// How [`cached_file`] found the section.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// The fingerprint vouched for it; the file was not read.
    Vouched,
    /// The file was read and hashed and matched; the section should be
    /// restamped with the new fingerprint.
    Hashed,
}

/// The contents a section holds (to decode) and the file's hash, if it
/// describes the file whose metadata is `md` now. `read_hash` reads and
/// hashes the file (only called when the fingerprint cannot vouch for it).
pub(crate) fn cached_file<'a>(
    section: &'a [u8],
    md: &Metadata,
    read_hash: impl FnOnce() -> Option<Hash>,
) -> Option<(Reader<'a>, Hash, Freshness)> {
    let mut r = Reader::new(section);
    let fp = Fingerprint::get(&mut r)?;
    let then = r.i64()?;
    let hash = r.hash()?;
    let freshness = if fp == Fingerprint::of(md) && fp.settled_at(then) {
        Freshness::Vouched
    } else if read_hash()? == hash {
        Freshness::Hashed
    } else {
        return None;
    };
    Some((r, hash, freshness))
}

/// The manifest a section holds, if it describes the file now (see
/// [`cached_file`]).
pub(crate) fn cached_manifest(
    section: &[u8],
    md: &Metadata,
    read_hash: impl FnOnce() -> Option<Hash>,
) -> Option<(Manifest, Hash, Freshness)> {
    let (mut r, hash, fresh) = cached_file(section, md, read_hash)?;
    let m = codec::get_manifest(&mut r)?;
    r.is_empty().then_some((m, hash, fresh))
}

/// The log a section holds, if it describes the file now (see
/// [`cached_file`]).
pub(crate) fn cached_history(
    section: &[u8],
    md: &Metadata,
    read_hash: impl FnOnce() -> Option<Hash>,
) -> Option<(History, Hash, Freshness)> {
    let (mut r, hash, fresh) = cached_file(section, md, read_hash)?;
    let h = codec::get_history(&mut r)?;
    r.is_empty().then_some((h, hash, fresh))
}

/// What an index file held.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// The index file as it was read (see [`fingerprint_of`]).
    pub file: Option<Fingerprint>,
    /// The manifest section, encoded (see [`cached_manifest`]).
    pub manifest: Option<Vec<u8>>,
    /// The repository's `history.yaml` (see [`cached_history`]).
    pub history: Option<Vec<u8>>,
    /// This home's own log, `undo/history.yaml`.
    pub local: Option<Vec<u8>>,
    /// None: this machine keeps no base for the repository yet.
    pub base: Option<PathTable<BaseEntry>>,
    pub stat: crate::statcache::Table,
}

/// What reading an index found.
#[derive(Debug)]
pub(crate) enum Found {
    /// No index: a first run here, or one after an older sgard.
    Missing,
    /// There was one but it cannot be used (damaged, foreign, newer).
    Unusable,
    Usable(Box<Loaded>),
}

/// Reads the index at `path`.
///
/// # Errors
/// [`Error::Io`] when the system fails to read it (EIO, ENOSPC, a
/// permission): a passing failure is an error, never a damaged index.
pub(crate) fn read(path: &Path) -> Result<Found> {
    read_parts(path, Parts::All)
}

/// Reads only the base of the index at `path` (the sections and the stat
/// cache are checked, skipped, not decoded): what a save that keeps the
/// base on disk needs.
///
/// # Errors
/// As [`read`].
pub(crate) fn read_base(path: &Path) -> Result<Found> {
    read_parts(path, Parts::Base)
}

/// Reads only the file sections of the index at `path` (the base and the
/// stat cache are checked, skipped, not decoded): what a command that reads
/// the repository alone needs.
///
/// # Errors
/// As [`read`].
pub(crate) fn read_sections(path: &Path) -> Result<Found> {
    read_parts(path, Parts::Sections)
}

/// Which parts of an index to decode.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    All,
    Base,
    Sections,
}

/// Why an index was not read: its bytes (damage: it is rebuilt), or the
/// system (an error: it is read again next time).
enum Unread {
    Damaged,
    Io(std::io::Error),
}

impl From<std::io::Error> for Unread {
    fn from(e: std::io::Error) -> Self {
        if durable::is_damage(&e) {
            Unread::Damaged
        } else {
            Unread::Io(e)
        }
    }
}

/// `Some` or damage.
fn sound<T>(v: Option<T>) -> std::result::Result<T, Unread> {
    v.ok_or(Unread::Damaged)
}

fn read_parts(path: &Path, parts: Parts) -> Result<Found> {
    let read = || -> std::result::Result<Found, Unread> {
        let (f, meta) = match durable::open_regular(path) {
            Ok(found) => found,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Missing),
            Err(e) => return Err(e.into()),
        };
        let len = meta.len().min(MAX_BYTES);
        let l = read_from(f.take(MAX_BYTES), len, parts)?;
        Ok(Found::Usable(Box::new(Loaded {
            file: Some(Fingerprint::of(&meta)),
            ..l
        })))
    };
    match read() {
        Ok(found) => Ok(found),
        Err(Unread::Damaged) => Ok(Found::Unusable),
        Err(Unread::Io(e)) => Err(Error::io("reading", path, e)),
    }
}

/// Reads an index of `len` bytes from `r`: each file section straight into
/// its own buffer (read whole, they were copied out of it: at 100,000
/// entries the file and its copies were 36 MB at once), the rest into one,
/// the checksum computed on the way.
fn read_from(r: impl Read, len: u64, parts: Parts) -> std::result::Result<Loaded, Unread> {
    let mut r = std::io::BufReader::with_capacity(1 << 16, r);
    let mut head = [0u8; MAGIC.len() + 8];
    r.read_exact(&mut head)?;
    let (magic, rest) = head.split_at(MAGIC.len());
    let (version, sum) = rest.split_at(4);
    if magic != MAGIC || version != VERSION.to_le_bytes() {
        return Err(Unread::Damaged);
    }
    let sum = u32::from_le_bytes(sound(sum.try_into().ok())?);
    let mut crc = crc32fast::Hasher::new();
    let mut left = sound(len.checked_sub(head.len() as u64))?;
    // `n` bytes (`None`: all that are left), kept or only checksummed.
    let mut take = |r: &mut std::io::BufReader<_>,
                    n: Option<u64>,
                    keep: bool|
     -> std::result::Result<Vec<u8>, Unread> {
        let n = n.unwrap_or(left);
        left = sound(left.checked_sub(n))?;
        let mut buf = Vec::with_capacity(if keep {
            sound(usize::try_from(n).ok())?
        } else {
            0
        });
        let mut part = r.by_ref().take(n);
        if keep {
            part.read_to_end(&mut buf)?;
            crc.update(&buf);
            sound((buf.len() as u64 == n).then_some(()))?;
        } else {
            let mut chunk = [0u8; 1 << 14];
            let mut got = 0;
            loop {
                match part.read(&mut chunk)? {
                    0 => break,
                    k => {
                        crc.update(sound(chunk.get(..k))?);
                        got += k as u64;
                    }
                }
            }
            sound((got == n).then_some(()))?;
        }
        Ok(buf)
    };
    let all = parts != Parts::Base;
    let mut sections: [Option<Vec<u8>>; 3] = [None, None, None];
    for slot in &mut sections {
        let flag = take(&mut r, Some(1), true)?;
        match sound(flag.first())? {
            0 => {}
            1 => {
                let n = take(&mut r, Some(8), true)?;
                let n = u64::from_le_bytes(sound(n.as_slice().try_into().ok())?);
                let bytes = take(&mut r, Some(n), all)?;
                if all {
                    *slot = Some(bytes);
                }
            }
            _ => return Err(Unread::Damaged),
        }
    }
    let rest = take(&mut r, None, parts != Parts::Sections)?;
    // Nothing may follow what the size said.
    if r.read(&mut [0u8; 1])? != 0 || crc.finalize() != sum {
        return Err(Unread::Damaged);
    }
    let [manifest, history, local] = sections;
    let mut l = if parts == Parts::Sections {
        Loaded::default()
    } else {
        sound(parse_rest(&rest, parts))?
    };
    l.manifest = manifest;
    l.history = history;
    l.local = local;
    Ok(l)
}

/// The fingerprint of the index file at `path` now. Every write of an index
/// is a new file renamed over the old one (a new inode), so an unchanged
/// fingerprint means nobody wrote it since.
pub(crate) fn fingerprint_of(path: &Path) -> Option<Fingerprint> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| Fingerprint::of(&m))
}

/// Decodes what follows the file sections: the base and the stat cache.
fn parse_rest(buf: &[u8], parts: Parts) -> Option<Loaded> {
    let mut r = Reader::new(buf);
    let all = parts == Parts::All;
    let base = match r.u8()? {
        0 => None,
        1 => {
            let n = r.count(4 + 2)?;
            let mut base = PathTable::with_capacity(n.min(MAX_RESERVE));
            for _ in 0..n {
                let path = std::str::from_utf8(r.bytes()?).ok()?;
                // Written in path order: anything else is not our index.
                if !base.push_sorted(path, get_base(&mut r)?) {
                    return None;
                }
            }
            Some(base)
        }
        _ => return None,
    };
    if !all {
        return Some(Loaded {
            base,
            ..Loaded::default()
        });
    }
    let n = r.count(4 + 44 + 32)?;
    let mut stat = crate::statcache::Table::with_capacity(n.min(MAX_RESERVE));
    for _ in 0..n {
        let path = std::str::from_utf8(r.bytes()?).ok()?;
        let st = Stat::get(&mut r)?;
        // Written in path order: anything else is not an index of ours.
        if !stat.push_sorted(path, (st, r.hash()?)) {
            return None;
        }
    }
    r.is_empty().then_some(Loaded {
        base,
        stat,
        ..Loaded::default()
    })
}

/// Writes the index at `path`, durably.
///
/// # Errors
/// [`Error::Io`] naming the file.
pub(crate) fn write(
    path: &Path,
    manifest: Option<(&ManifestSection, &Manifest)>,
    logs: [Option<&[u8]>; 2],
    base: Option<&PathTable<BaseEntry>>,
    stat: &[(&str, &(Stat, Hash))],
) -> Result<()> {
    let base = base.map(PathTable::sorted);
    durable::create_private_dir_all(&durable::parent_of(path))?;
    durable::write_atomic_with(path, 0o600, |f| {
        // Streamed: the header with a zero checksum, the body through the
        // checksum in pieces of at most 64 KiB, then the checksum into the
        // header. Building the file in memory first was its whole size
        // again (27 MB at 100,000 entries).
        let sum = write_body(&mut *f, manifest, logs, base.as_deref(), stat)?;
        f.seek(std::io::SeekFrom::Start(MAGIC.len() as u64 + 4))?;
        f.write_all(&sum.to_le_bytes())
    })
    .map_err(Error::from)
}

/// Writes the index (its checksum left zero) to `f`; returns the checksum.
fn write_body(
    f: &mut std::fs::File,
    manifest: Option<(&ManifestSection, &Manifest)>,
    logs: [Option<&[u8]>; 2],
    base: Option<&[(&str, &BaseEntry)]>,
    stat: &[(&str, &(Stat, Hash))],
) -> std::io::Result<u32> {
    {
        let mut out = Body {
            file: std::io::BufWriter::with_capacity(1 << 16, f),
            crc: crc32fast::Hasher::new(),
        };
        out.file.write_all(MAGIC)?;
        out.file.write_all(&VERSION.to_le_bytes())?;
        out.file.write_all(&0u32.to_le_bytes())?;
        let mut w = Writer::default();
        match manifest {
            Some((sec, m)) => {
                w.u8(1);
                w.u64(sec.head.len() as u64 + sec.len);
                w.buf.extend_from_slice(&sec.head);
                out.put(&mut w)?;
                codec::put_manifest_with(&mut w, m, &mut |w| out.put_some(w))?;
                out.put(&mut w)?;
            }
            None => w.u8(0),
        }
        for s in logs {
            match s {
                Some(m) => {
                    w.u8(1);
                    w.u64(m.len() as u64);
                    out.put(&mut w)?;
                    out.body(m)?;
                }
                None => w.u8(0),
            }
        }
        match base {
            None => w.u8(0),
            Some(base) => {
                w.u8(1);
                w.count(base.len());
                for (k, b) in base {
                    w.str(k);
                    put_base(&mut w, b);
                    out.put_some(&mut w)?;
                }
            }
        }
        w.count(stat.len());
        for (k, (st, h)) in stat {
            w.str(k);
            st.put(&mut w);
            w.hash(h);
            out.put_some(&mut w)?;
        }
        out.put(&mut w)?;
        let Body { mut file, crc } = out;
        file.flush()?;
        Ok(crc.finalize())
    }
}

/// The body of an index being written: to the file and the checksum.
struct Body<W: Write> {
    file: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> Body<W> {
    fn body(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc.update(bytes);
        self.file.write_all(bytes)
    }

    /// Writes what `w` holds and empties it.
    fn put(&mut self, w: &mut Writer) -> std::io::Result<()> {
        self.body(&w.buf)?;
        w.buf.clear();
        Ok(())
    }

    /// As `put`, once `w` holds 64 KiB or more.
    fn put_some(&mut self, w: &mut Writer) -> std::io::Result<()> {
        if w.buf.len() >= 1 << 16 {
            self.put(w)?;
        }
        Ok(())
    }
}

/// Held while a machine-local file is read back and rewritten (the index,
/// the record of scripts that ran): `<file>.lock`, an advisory `flock`
/// beside it (two commands saving at once must not write one's records
/// over the other's).
pub(crate) struct WriteLock {
    _file: std::fs::File,
}

impl WriteLock {
    /// Takes the lock for the file at `path` (waiting for another writer).
    ///
    /// # Errors
    /// [`Error::Io`] naming the lock file.
    pub fn take(path: &Path) -> Result<Self> {
        let lock = path.with_extension("lock");
        durable::create_private_dir_all(&durable::parent_of(&lock))?;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock)
            .map_err(|e| Error::io("opening lock file", &lock, e))?;
        f.lock().map_err(|e| Error::io("locking", &lock, e))?;
        Ok(WriteLock { _file: f })
    }
}

const B_MODE: u8 = 1;
const B_TARGET: u8 = 2;
const B_STORED: u8 = 4;
const B_CONTENT: u8 = 8;
/// The content hash is the stored one (the common case: not encrypted).
const B_CONTENT_IS_STORED: u8 = 16;

fn put_base(w: &mut Writer, b: &BaseEntry) {
    let same = b.content.is_some() && b.content == b.stored;
    let mut flags = 0;
    for (on, bit) in [
        (b.mode.is_some(), B_MODE),
        (b.target.is_some(), B_TARGET),
        (b.stored.is_some(), B_STORED),
        (b.content.is_some() && !same, B_CONTENT),
        (same, B_CONTENT_IS_STORED),
    ] {
        if on {
            flags |= bit;
        }
    }
    w.u8(codec::kind_code(b.kind));
    w.u8(flags);
    if let Some(m) = b.mode {
        w.u32(m.bits());
    }
    if let Some(t) = &b.target {
        w.str(t);
    }
    if let Some(h) = &b.stored {
        w.hash(h);
    }
    if let Some(h) = b.content.filter(|_| !same) {
        w.hash(&h);
    }
}

fn get_base(r: &mut Reader<'_>) -> Option<BaseEntry> {
    let kind = codec::kind_of(r.u8()?)?;
    let flags = r.u8()?;
    let mode = if flags & B_MODE != 0 {
        Some(codec::mode_of(r.u32()?)?)
    } else {
        None
    };
    let target = if flags & B_TARGET != 0 {
        Some(r.str()?)
    } else {
        None
    };
    let stored = if flags & B_STORED != 0 {
        Some(r.hash()?)
    } else {
        None
    };
    let content = if flags & B_CONTENT != 0 {
        Some(r.hash()?)
    } else if flags & B_CONTENT_IS_STORED != 0 {
        Some(stored?)
    } else {
        None
    };
    Some(BaseEntry {
        kind,
        mode,
        target,
        stored,
        content,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sgard_manifest::{EntryKind, Mode};

    fn base() -> PathTable<BaseEntry> {
        let h = Hash::of(b"x");
        let mut m = PathTable::default();
        m.insert(
            "~/a b",
            BaseEntry {
                kind: EntryKind::File,
                mode: Some(Mode::from_st_mode(0o644)),
                target: None,
                stored: Some(h),
                content: Some(h),
            },
        );
        m.insert(
            "~/enc",
            BaseEntry {
                kind: EntryKind::File,
                mode: Some(Mode::from_st_mode(0o600)),
                target: None,
                stored: Some(h),
                content: Some(Hash::of(b"plain")),
            },
        );
        m.insert(
            "~/l\nnk",
            BaseEntry {
                kind: EntryKind::Link,
                mode: None,
                target: Some("../t a".to_owned()),
                stored: None,
                content: None,
            },
        );
        m
    }

    fn manifest_of(n: usize) -> Manifest {
        let mut m = Manifest::new(sgard_manifest::Timestamp::zero());
        for i in 0..n {
            m.upsert(sgard_manifest::Entry::new(
                format!("~/f{i:05}"),
                EntryKind::File,
                sgard_manifest::Timestamp::zero(),
            ));
        }
        m
    }

    #[test]
    fn the_manifest_section_is_streamed_from_the_manifest_while_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE);
        // Several pieces of 64 KiB: the bytes read back are those of the
        // whole encoding.
        let m = manifest_of(20_000);
        let fp = Fingerprint::of(&std::fs::metadata(dir.path()).unwrap());
        let head = Hash::of(b"manifest.yaml");
        let kept = ManifestSection::of_manifest(fp, 7, &head, &m);
        assert!(kept.holds(&m));
        let section = manifest_section(fp, 7, &head, &m);
        assert!(section.len() > 3 << 16);
        assert_eq!(ManifestSection::of_bytes(&section).as_ref(), Some(&kept));
        write(&p, Some((&kept, &m)), [None; 2], None, &[]).unwrap();
        match read(&p).unwrap() {
            Found::Usable(l) => assert!(l.manifest.as_deref() == Some(&section[..])),
            other => panic!("{other:?}"),
        }
        // A manifest changed in memory since is not the file's.
        let mut changed = m.clone();
        changed.files[12_345].locked = true;
        assert!(!kept.holds(&changed));
        assert!(ManifestSection::of_bytes(&section[..SECTION_HEAD - 1]).is_none());
    }

    #[test]
    fn round_trips_and_refuses_damage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE);
        let m = manifest_of(3);
        let fp = Fingerprint::of(&std::fs::metadata(dir.path()).unwrap());
        let head = Hash::of(b"manifest.yaml");
        let kept = ManifestSection::of_manifest(fp, 7, &head, &m);
        let section = manifest_section(fp, 7, &head, &m);
        write(
            &p,
            Some((&kept, &m)),
            [None, Some(b"h")],
            Some(&base()),
            &[],
        )
        .unwrap();
        match read(&p).unwrap() {
            Found::Usable(l) => {
                assert_eq!(l.manifest.as_deref(), Some(&section[..]));
                assert_eq!(l.history, None);
                assert_eq!(l.local.as_deref(), Some(&b"h"[..]));
                assert_eq!(l.base, Some(base()));
            }
            other => panic!("{other:?}"),
        }
        let good = std::fs::read(&p).unwrap();
        // Every flipped byte, every truncation and a byte too many: read
        // whole or for its base only, nothing is used.
        let mut damaged: Vec<Vec<u8>> = (0..good.len())
            .map(|i| {
                let mut b = good.clone();
                b[i] ^= 1;
                b
            })
            .collect();
        damaged.extend((0..good.len()).map(|n| good[..n].to_vec()));
        damaged.push([&good[..], b"x"].concat());
        for (i, b) in damaged.iter().enumerate() {
            std::fs::write(&p, b).unwrap();
            assert!(matches!(read(&p).unwrap(), Found::Unusable), "case {i}");
            assert!(
                matches!(read_base(&p).unwrap(), Found::Unusable),
                "case {i}"
            );
        }
        std::fs::write(&p, &good).unwrap();
        match read_base(&p).unwrap() {
            Found::Usable(l) => {
                assert_eq!(l.base, Some(base()));
                assert_eq!(l.manifest, None, "only the base is decoded");
            }
            other => panic!("{other:?}"),
        }
        std::fs::remove_file(&p).unwrap();
        assert!(matches!(read(&p).unwrap(), Found::Missing));
    }

    #[test]
    fn a_file_dated_past_2262_does_not_overflow() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("m");
        std::fs::write(&f, "x").unwrap();
        let far = UNIX_EPOCH + Duration::new(10_413_792_000, 500); // 2300
        let file = std::fs::File::options().write(true).open(&f).unwrap();
        if file.set_modified(far).is_err() {
            return; // a filesystem that cannot hold the date
        }
        let md = std::fs::symlink_metadata(&f).unwrap();
        let fp = Fingerprint::of(&md);
        assert!(!fp.settled_at(now_ns()), "a future file is never settled");
    }

    #[test]
    fn stat_entries_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE);
        let md = std::fs::symlink_metadata(dir.path()).unwrap();
        let (f, g) = (
            (Stat::of(&md), Hash::of(b"f")),
            (Stat::of(&md), Hash::of(b"g")),
        );
        write(&p, None, [None; 2], None, &[("~/a\nb", &g), ("~/f", &f)]).unwrap();
        let mut want = crate::statcache::Table::default();
        assert!(want.push_sorted("~/a\nb", g) && want.push_sorted("~/f", f));
        match read(&p).unwrap() {
            Found::Usable(l) => {
                assert_eq!(l.stat, want);
                assert_eq!(l.base, None, "no base is not an empty base");
            }
            other => panic!("{other:?}"),
        }
    }

    /// Records are written in path order; a well-formed file whose records
    /// are not (a repeated or unsorted path) is not one of ours.
    #[test]
    fn records_out_of_path_order_make_the_index_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE);
        let md = std::fs::symlink_metadata(dir.path()).unwrap();
        let v = (Stat::of(&md), Hash::of(b"f"));
        for order in [["~/b", "~/a"], ["~/a", "~/a"]] {
            write(&p, None, [None; 2], None, &[(order[0], &v), (order[1], &v)]).unwrap();
            assert!(matches!(read(&p).unwrap(), Found::Unusable), "{order:?}");
        }
        write(&p, None, [None; 2], None, &[("~/a", &v), ("~/b", &v)]).unwrap();
        assert!(matches!(read(&p).unwrap(), Found::Usable(_)));
    }

    /// The racy-clean rule: a fingerprint taken within the window of the
    /// file's last change does not vouch; the file is hashed instead, and a
    /// different hash means the section is not used.
    #[test]
    fn the_manifest_section_vouches_only_when_settled() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("manifest.yaml");
        std::fs::write(&f, "version: 1\nfiles: []\n").unwrap();
        let md = std::fs::symlink_metadata(&f).unwrap();
        let m = Manifest::from_yaml("version: 1\nfiles: []\n").unwrap();
        let head = Hash::of(b"version: 1\nfiles: []\n");
        let fp = Fingerprint::of(&md);
        let late = now_ns() + 10_000_000_000;
        // Looked at long after the change: vouched, the file is not read.
        let sec = manifest_section(fp, late, &head, &m);
        let (got, h, fresh) =
            cached_manifest(&sec, &md, || panic!("read a vouched-for file")).unwrap();
        assert_eq!((got, h, fresh), (m.clone(), head, Freshness::Vouched));
        // Looked at right after the change: hashed, and used if the same.
        let sec = manifest_section(fp, now_ns(), &head, &m);
        let mut read = false;
        let r = cached_manifest(&sec, &md, || {
            read = true;
            Some(head)
        });
        assert!(read);
        assert_eq!(r.unwrap().2, Freshness::Hashed);
        assert!(cached_manifest(&sec, &md, || Some(Hash::of(b"other"))).is_none());
        // Another fingerprint: hashed, whatever the times.
        let mut moved = manifest_section(fp, late, &head, &m);
        moved[8] ^= 1;
        assert!(cached_manifest(&moved, &md, || Some(Hash::of(b"other"))).is_none());
        // Restamping keeps the manifest and changes only the stamp.
        let mut sec = manifest_section(fp, 0, &head, &m);
        restamp(&mut sec, fp, late);
        assert_eq!(sec, manifest_section(fp, late, &head, &m));
    }
}
