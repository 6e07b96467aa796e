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
//! the file replaced); so is a failure to read it (the repository is read
//! instead, and any error there is reported). A hit is used only while the
//! repository still holds the snapshot sound (see
//! `Repo::has_sound_snapshot`: its blob hashes to its name), so a pruned,
//! lost or damaged snapshot is reported as such whatever this cache holds.
//! Checking the blob's hash costs a read of it, a small part of parsing it.
//!
//! The folder is bounded: after each write the oldest files go until at most
//! [`MAX_FILES`] files and [`MAX_BYTES`] bytes remain (a document bigger
//! than that is not kept at all).

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

/// Writes `docs` (ids and what [`encode`] made of them) into `dir`, each
/// through a temp file and a rename but without an fsync (a cache: a file
/// a crash tore fails its checksum and is parsed again), then trims the
/// folder to its bounds.
///
/// # Errors
/// [`Error::Io`] naming the file or folder.
pub(crate) fn write(dir: &Path, docs: &[(Hash, Vec<u8>)]) -> Result<()> {
    if docs.is_empty() {
        return Ok(());
    }
    durable::create_private_dir_all(dir)?;
    for (id, bytes) in docs {
        if bytes.len() as u64 <= MAX_BYTES {
            durable::write_replace(&path_of(dir, id), bytes, 0o600)?;
        }
    }
    trim(dir)
}

/// Removes the oldest documents until the folder is within its bounds.
fn trim(dir: &Path) -> Result<()> {
    let list = std::fs::read_dir(dir).map_err(|e| Error::io("listing", dir, e))?;
    let mut files = Vec::new();
    for item in list {
        let item = item.map_err(|e| Error::io("listing", dir, e))?;
        // Only our own names: 64 hex characters (a temp file of a write
        // under way is left alone).
        let name = item.file_name();
        if name.to_str().and_then(|n| Hash::parse(n).ok()).is_none() {
            continue;
        }
        if let Ok(md) = item.metadata()
            && md.is_file()
        {
            files.push((md.modified().ok(), md.len(), item.path()));
        }
    }
    // Newest first; keep while both bounds hold.
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.2.cmp(&b.2)));
    let mut total = 0u64;
    for (i, (_, len, path)) in files.iter().enumerate() {
        total = total.saturating_add(*len);
        if i >= MAX_FILES || total > MAX_BYTES {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("removing", path, e)),
            }
        }
    }
    Ok(())
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
        write(t.path(), &[(id, encode(&id, &m))]).unwrap();
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
    fn the_folder_keeps_the_newest_within_bounds() {
        let t = tempfile::tempdir().unwrap();
        let d = doc(1);
        let ids: Vec<Hash> = (0..MAX_FILES + 5)
            .map(|i| Hash::of(&i.to_le_bytes()))
            .collect();
        for (i, id) in ids.iter().enumerate() {
            write(t.path(), &[(*id, encode(id, &d))]).unwrap();
            // Distinct times, oldest first.
            let f = std::fs::File::options()
                .write(true)
                .open(path_of(t.path(), id))
                .unwrap();
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i as u64);
            f.set_modified(when).unwrap();
        }
        write(
            t.path(),
            &[(ids[MAX_FILES + 4], encode(&ids[MAX_FILES + 4], &d))],
        )
        .unwrap();
        std::fs::write(t.path().join("not-ours"), b"x").unwrap();
        trim(t.path()).unwrap();
        let kept = std::fs::read_dir(t.path()).unwrap().count();
        assert_eq!(kept, MAX_FILES + 1, "the cap and the foreign file");
        assert!(read(t.path(), &ids[0]).is_none(), "the oldest went");
        assert!(read(t.path(), &ids[MAX_FILES + 3]).is_some());
    }
}
