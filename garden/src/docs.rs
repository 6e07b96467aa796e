//! Parsed snapshot documents, cached on this machine by their id.
//!
//! A snapshot document is a manifest stored as a blob under the SHA-256 of
//! its bytes, so it never changes: once parsed, its parsed form can be kept
//! and used again without reading or parsing its YAML (`sgard log`, `diff`
//! and `restore --at` of an old snapshot, `undo`, a merge's parent, a
//! prune's live set). Each one is a file in this machine's state folder for
//! the repository (beside the index, see [`crate::index`]):
//! `<state>/sgard/repos/<key>/snapshots/<id>`, holding a magic, a version,
//! the id, a CRC-32 of the id and the rest, and the manifest in
//! [`sgard_manifest::codec`]'s encoding (a file copied or renamed to
//! another snapshot's name is not that snapshot's).
//!
//! Trust, as for the index: a missing, damaged, truncated or foreign file,
//! or one of another version, is a miss (the document is parsed again and
//! the file replaced, if the folder keeps it); so is a failure to read it (the repository is read
//! instead, and any error there is reported). A hit is used only while the
//! repository still holds the snapshot sound (see
//! `Repo::has_sound_snapshot`: its blob hashes to its name), so a pruned,
//! lost or damaged snapshot is reported as such whatever this cache holds.
//! Checking the blob's hash costs a read of it, a small part of parsing it.
//!
//! The folder is bounded: of the documents parsed, it keeps those of the
//! newest snapshots (by their place in the history; by the file's age
//! among equals; a document the history no longer names goes first, and
//! one it does not name yet, a pull's incoming snapshot, ranks first while
//! the run that parsed it keeps it), at most [`MAX_FILES`] files and
//! [`MAX_BYTES`] bytes (a document bigger than that is not kept at all).
//! A document that would be the one to go is not written, and a run that
//! met one offers none older. So once a history outgrows the folder, an
//! older snapshot is parsed each time it is opened, and the newer ones
//! stay: a `verify` or a `prune`, which read every snapshot oldest first,
//! fill an empty folder with the oldest ones, move it up to the newest at
//! most a folder's worth a run, and then leave it alone. When the
//! newest file stayed instead, each run evicted what the next one read
//! first, and at 100,000 entries a `verify` took 4 s and 9 s by turns.

use std::io::Read;
use std::path::{Path, PathBuf};

use sgard_manifest::{Manifest, codec};
use sgard_store::{Hash, durable};

use crate::{Error, Result};

/// The folder's name in the repository's state folder.
pub(crate) const DIR: &str = "snapshots";

const MAGIC: &[u8; 14] = b"sgard-snapdoc\n";
/// Bump on any change of the layout (or of the codec's).
const VERSION: u32 = 1;
pub(crate) const HEADER: usize = MAGIC.len() + 4 + 32 + 4;

/// At most this many documents are kept.
pub(crate) const MAX_FILES: usize = 64;
/// At most this many bytes of documents are kept (a 10,000-entry document
/// takes about 1 MB).
pub(crate) const MAX_BYTES: u64 = 64 << 20;

fn path_of(dir: &Path, id: &Hash) -> PathBuf {
    dir.join(id.to_hex())
}

/// The cached document `id` in `dir`, if there is a sound one.
pub(crate) fn read(dir: &Path, id: &Hash) -> Option<Manifest> {
    let f = durable::open_regular_file(&path_of(dir, id)).ok()?;
    let mut bytes = Vec::new();
    f.take(MAX_BYTES + HEADER as u64)
        .read_to_end(&mut bytes)
        .ok()?;
    decode(&bytes, id)
}

/// The manifest in `bytes` (a file [`encode`] made) if they are sound and
/// name `id`.
pub(crate) fn decode(bytes: &[u8], id: &Hash) -> Option<Manifest> {
    let (head, body) = bytes.split_at_checked(HEADER)?;
    let (magic, rest) = head.split_at(MAGIC.len());
    let (version, rest) = rest.split_at(4);
    let (named, sum) = rest.split_at(32);
    if magic != MAGIC
        || version != VERSION.to_le_bytes()
        || named != id.as_bytes()
        || sum != checksum(id, body).to_le_bytes()
    {
        return None;
    }
    codec::decode_manifest(body)
}

fn checksum(id: &Hash, body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(id.as_bytes());
    h.update(body);
    h.finalize()
}

/// The file that caches `m`, the document of snapshot `id`.
pub(crate) fn encode(id: &Hash, m: &Manifest) -> Vec<u8> {
    let body = codec::encode_manifest(m);
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(&checksum(id, &body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// What [`write`] did with a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kept {
    /// Written; the documents past the bounds went.
    Written,
    /// Not written: it would have been the one to go, and nothing went.
    /// `floor` is the rank of the lowest-ranked document the folder keeps:
    /// while it holds these, one ranked below that would not be kept either.
    Refused { floor: Option<usize> },
}

/// Writes `bytes` (what [`encode`] made of snapshot `id`'s document) into
/// `dir` through a temp file and a rename but without an fsync (a cache: a
/// file a crash tore fails its checksum and is parsed again), when the
/// folder keeps it; then removes what no longer fits (see the module
/// documentation). `rank` is a snapshot's place in the history, newer
/// higher (`None`: not in it).
///
/// # Errors
/// [`Error::Io`] naming the file or folder.
pub(crate) fn write(
    dir: &Path,
    id: &Hash,
    bytes: &[u8],
    rank: &dyn Fn(&Hash) -> Option<usize>,
) -> Result<Kept> {
    if bytes.len() as u64 > MAX_BYTES {
        return Ok(Kept::Refused { floor: None });
    }
    durable::create_private_dir_all(dir)?;
    let mut files = listed(dir)?;
    files.retain(|f| f.id != *id);
    files.push(Cached {
        id: *id,
        modified: Some(std::time::SystemTime::now()),
        len: bytes.len() as u64,
    });
    let (kept, going) = bounded(files, rank);
    if going.iter().any(|f| f.id == *id) {
        return Ok(Kept::Refused {
            floor: kept.last().and_then(|f| rank(&f.id)),
        });
    }
    durable::write_replace(&path_of(dir, id), bytes, 0o600)?;
    for f in going {
        let path = path_of(dir, &f.id);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("removing", path, e)),
        }
    }
    Ok(Kept::Written)
}

/// One document file in the folder.
struct Cached {
    id: Hash,
    modified: Option<std::time::SystemTime>,
    len: u64,
}

/// The documents in `dir` (only files under our own names: a temp file of
/// a write under way is left alone).
fn listed(dir: &Path) -> Result<Vec<Cached>> {
    let list = std::fs::read_dir(dir).map_err(|e| Error::io("listing", dir, e))?;
    let mut files = Vec::new();
    for item in list {
        let item = item.map_err(|e| Error::io("listing", dir, e))?;
        let Some(id) = item.file_name().to_str().and_then(|n| Hash::parse(n).ok()) else {
            continue;
        };
        if let Ok(md) = item.metadata()
            && md.is_file()
        {
            files.push(Cached {
                id,
                modified: md.modified().ok(),
                len: md.len(),
            });
        }
    }
    Ok(files)
}

/// `files` ordered newest snapshot first (`rank`), the newest file first
/// among equals, cut where the folder's bounds end: what stays, what goes.
fn bounded(
    mut files: Vec<Cached>,
    rank: &dyn Fn(&Hash) -> Option<usize>,
) -> (Vec<Cached>, Vec<Cached>) {
    files.sort_by(|a, b| {
        rank(&b.id)
            .cmp(&rank(&a.id))
            .then_with(|| b.modified.cmp(&a.modified))
            .then_with(|| a.id.cmp(&b.id))
    });
    let mut total = 0u64;
    let mut stays = Vec::new();
    let mut going = Vec::new();
    for (i, f) in files.into_iter().enumerate() {
        total = total.saturating_add(f.len);
        if i >= MAX_FILES || total > MAX_BYTES {
            going.push(f);
        } else {
            stays.push(f);
        }
    }
    (stays, going)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(n: usize) -> Manifest {
        let mut text = String::from("version: 1\nfiles:\n");
        for i in 0..n {
            text.push_str(&format!("    - path: ~/d{i:05}\n      type: directory\n"));
        }
        Manifest::from_yaml(&text).unwrap()
    }

    #[test]
    fn a_document_round_trips_and_damage_is_a_miss() {
        let t = tempfile::tempdir().unwrap();
        let id = Hash::of(b"one");
        let m = doc(3);
        assert!(read(t.path(), &id).is_none());
        assert_eq!(
            write(t.path(), &id, &encode(&id, &m), &|_| None).unwrap(),
            Kept::Written
        );
        assert_eq!(read(t.path(), &id), Some(m.clone()));
        assert!(read(t.path(), &Hash::of(b"two")).is_none());
        let file = path_of(t.path(), &id);
        // Copied under another snapshot's name: not that snapshot's.
        let two = Hash::of(b"two");
        std::fs::copy(&file, path_of(t.path(), &two)).unwrap();
        assert!(read(t.path(), &two).is_none());
        let good = std::fs::read(&file).unwrap();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x41;
            std::fs::write(&file, &bad).unwrap();
            assert!(read(t.path(), &id).is_none(), "byte {i}");
        }
        for n in 0..good.len() {
            std::fs::write(&file, &good[..n]).unwrap();
            assert!(read(t.path(), &id).is_none(), "{n} bytes");
        }
        std::fs::remove_file(&file).unwrap();
        std::fs::create_dir(&file).unwrap();
        assert!(read(t.path(), &id).is_none(), "a folder");
    }

    #[test]
    fn the_folder_keeps_the_newest_snapshots_within_bounds() {
        let t = tempfile::tempdir().unwrap();
        let d = doc(1);
        let n = MAX_FILES + 5;
        let ids: Vec<Hash> = (0..n).map(|i| Hash::of(&i.to_le_bytes())).collect();
        // The history: ids[i] is the i-th snapshot, and `gone` was pruned.
        let gone = Hash::of(b"pruned");
        let rank = |h: &Hash| ids.iter().position(|x| x == h);
        let put = |id: &Hash| write(t.path(), id, &encode(id, &d), &rank).unwrap() == Kept::Written;
        assert!(put(&gone), "room for anything at first");
        // Newest first: each is kept until the folder is full, the pruned
        // one going first.
        for id in ids.iter().rev().take(MAX_FILES) {
            assert!(put(id));
        }
        assert!(
            read(t.path(), &gone).is_none(),
            "the one the history lost went first"
        );
        // An older one would be the one to go: not written, nothing goes,
        // and the answer says below which place nothing would be kept.
        assert_eq!(
            write(t.path(), &ids[0], &encode(&ids[0], &d), &rank).unwrap(),
            Kept::Refused {
                floor: Some(n - MAX_FILES)
            }
        );
        assert!(read(t.path(), &ids[0]).is_none());
        // Room again: an older one is kept; then a newer one pushes the
        // oldest kept out.
        std::fs::remove_file(path_of(t.path(), &ids[n - 1])).unwrap();
        let older = ids[n - MAX_FILES - 1];
        assert!(put(&older));
        assert!(put(&ids[n - 1]));
        assert!(read(t.path(), &older).is_none(), "the oldest kept went");
        std::fs::write(t.path().join("not-ours"), b"x").unwrap();
        assert!(put(&ids[n - 1]), "written again in place");
        let kept = std::fs::read_dir(t.path()).unwrap().count();
        assert_eq!(kept, MAX_FILES + 1, "the cap and the foreign file");
        for id in &ids[n - MAX_FILES..] {
            assert!(read(t.path(), id).is_some());
        }
        // Oldest first, with no bound per run: the folder ends with the
        // newest of them all the same.
        let t2 = tempfile::tempdir().unwrap();
        for id in &ids {
            write(t2.path(), id, &encode(id, &d), &rank).unwrap();
        }
        let kept: Vec<Hash> = listed(t2.path())
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(kept.len(), MAX_FILES);
        for id in &ids[n - MAX_FILES..] {
            assert!(kept.contains(id));
        }
        // Among documents the history does not name, the newest file stays.
        let t3 = tempfile::tempdir().unwrap();
        let none = |_: &Hash| None;
        for (i, id) in ids.iter().enumerate() {
            write(t3.path(), id, &encode(id, &d), &none).unwrap();
            // Distinct times, oldest first.
            let f = std::fs::File::options()
                .write(true)
                .open(path_of(t3.path(), id))
                .unwrap();
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i as u64);
            f.set_modified(when).unwrap();
        }
        assert!(read(t3.path(), &ids[n - 1]).is_some());
        assert!(read(t3.path(), &ids[0]).is_none());
    }
}
