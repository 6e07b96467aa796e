//! Small documents (heads, history, the server's keys and nonces) that
//! change only through compare-and-swap.
//!
//! A stored document is a one-line header, `sgard-depot-doc 1 <incarnation>
//! <generation>\n`, then the caller's bytes. The incarnation is random, drawn
//! when the document is created; the generation counts its writes. So every
//! write stores bytes that no earlier write of that name stored, and a
//! [`Version`] read before a write (or before a delete and re-create) never
//! matches after it, on any backend: there is no ABA.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path as FsPath, PathBuf};

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, UpdateVersion};
use sgard_store::durable::{TMP_PREFIX, fsync_dir, retry_rename};

use crate::names::is_doc_name;
use crate::{Backend, Depot, DocName, Error, Result, Scope};

const MAGIC: &[u8] = b"sgard-depot-doc 1 ";
/// The longest header line: magic, 16 hex digits, a space, 20 digits, `\n`.
const MAX_HEADER: usize = MAGIC.len() + 16 + 1 + 20 + 1;
/// The most a stored document may take, header included: documents are
/// small (heads, fleet records, keys, nonces), and one read is held whole.
pub const MAX_DOC: u64 = 1 << 20;

/// The version of a document as read or written; pass it back in
/// [`Cond::Version`] to replace exactly that version. A version only means
/// something to the depot location it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct Version {
    incarnation: u64,
    generation: u64,
    /// The store's entity tag (S3, memory); `None` in a folder depot.
    e_tag: Option<String>,
}

impl Version {
    /// How many times the document was written since it was created (1 for
    /// the first write).
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Version({:016x}/{}", self.incarnation, self.generation)?;
        if let Some(tag) = &self.e_tag {
            write!(f, " {tag}")?;
        }
        f.write_str(")")
    }
}

/// The condition a document write needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cond {
    /// There must be no document of that name.
    Absent,
    /// The document must still be at this version.
    Version(Version),
}

/// What a conditional write did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum Written {
    /// The condition held; the document is now at this version.
    Done(Version),
    /// The condition did not hold (someone else wrote, created or deleted
    /// the document first); nothing was written.
    Conflict,
}

fn encode(incarnation: u64, generation: u64, content: &[u8]) -> Vec<u8> {
    let header = format!("{incarnation:016x} {generation}\n");
    let mut out = Vec::with_capacity(MAGIC.len() + header.len() + content.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(content);
    out
}

/// `(incarnation, generation, content)` of a stored document.
fn decode(stored: &Bytes) -> Option<(u64, u64, Bytes)> {
    let rest = stored.strip_prefix(MAGIC)?;
    let end = rest
        .iter()
        .take(MAX_HEADER - MAGIC.len())
        .position(|&b| b == b'\n')?;
    let line = std::str::from_utf8(&rest[..end]).ok()?;
    let (inc, generation) = line.split_once(' ')?;
    if inc.len() != 16 || !generation.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let incarnation = u64::from_str_radix(inc, 16).ok()?;
    let generation = generation.parse().ok().filter(|&g| g >= 1)?;
    Some((
        incarnation,
        generation,
        stored.slice(MAGIC.len() + end + 1..),
    ))
}

fn incarnation(shown: &str) -> Result<u64> {
    getrandom::u64().map_err(|e| {
        Error::io(
            "drawing a random incarnation for",
            shown,
            io::Error::other(e.to_string()),
        )
    })
}

fn next_generation(v: &Version, shown: &str) -> Result<u64> {
    v.generation.checked_add(1).ok_or_else(|| Error::BadDoc {
        key: shown.to_owned(),
        reason: "its generation counter is exhausted",
    })
}

impl Depot {
    fn doc_base(&self, scope: Scope<'_>) -> Path {
        let mut parts = Self::scope_parts(scope);
        parts.push("docs");
        self.key(&parts)
    }

    fn doc_key(&self, scope: Scope<'_>, name: &DocName) -> Path {
        let mut parts = Self::scope_parts(scope);
        parts.extend(["docs", name.as_str()]);
        self.key(&parts)
    }

    /// The lock file of a document in a folder depot (beside the documents'
    /// folder, never listed as a document).
    fn doc_lock(&self, root: &FsPath, scope: Scope<'_>, name: &DocName) -> PathBuf {
        let mut parts = Self::scope_parts(scope);
        parts.extend(["doc-locks", name.as_str()]);
        Self::file_of(root, &self.key(&parts))
    }

    /// The document `name` of `scope` and its version, or `None` when there
    /// is none.
    ///
    /// # Errors
    /// [`Error::BadDoc`] when the stored bytes lack the depot's header,
    /// [`Error::TooLarge`] (not read) when they are more than [`MAX_DOC`],
    /// [`Error::Store`] when reading fails.
    pub async fn read_doc(
        &self,
        scope: Scope<'_>,
        name: &DocName,
    ) -> Result<Option<(Bytes, Version)>> {
        let key = self.doc_key(scope, name);
        let got = match self.inner.store.get(&key).await {
            Ok(got) => got,
            Err(e @ object_store::Error::NotFound { .. }) if !self.no_bucket(&e) => {
                return Ok(None);
            }
            Err(e) => return Err(self.fail("reading", self.show(&key), e)),
        };
        let e_tag = match self.inner.backend {
            Backend::Dir { .. } => None,
            _ => got.meta.e_tag.clone(),
        };
        // Whoever holds the store's keys can put anything here: a huge
        // object is refused before it is read.
        let too_large = |size: u64| Error::TooLarge {
            key: self.show(&key),
            size,
            limit: MAX_DOC,
        };
        if got.meta.size > MAX_DOC {
            return Err(too_large(got.meta.size));
        }
        let stored = got.bytes().await.map_err(|e| self.read_error(&key, e))?;
        if stored.len() as u64 > MAX_DOC {
            return Err(too_large(stored.len() as u64));
        }
        let (incarnation, generation, content) = decode(&stored).ok_or_else(|| Error::BadDoc {
            key: self.show(&key),
            reason: "its header is missing or malformed",
        })?;
        Ok(Some((
            content,
            Version {
                incarnation,
                generation,
                e_tag,
            },
        )))
    }

    /// Writes the document `name` of `scope` if `cond` holds, atomically:
    /// with [`Cond::Absent`] only if there is none, with
    /// [`Cond::Version`] only if it is still at that version. Of writers
    /// racing from the same state (in any process, on any machine sharing
    /// the store) exactly one gets [`Written::Done`]; the others get
    /// [`Written::Conflict`] and should read again.
    ///
    /// On S3 a request whose reply was lost is retried, and the retry of a
    /// write that did land answers [`Written::Conflict`]: after a conflict,
    /// read again (the document may hold this very write).
    ///
    /// # Errors
    /// [`Error::TooLarge`] (nothing written) when `content` would make a
    /// document over [`MAX_DOC`]; [`Error::Store`] / [`Error::Io`] when the
    /// write fails (it then may or may not have happened, as with any lost
    /// reply: read again).
    pub async fn write_doc(
        &self,
        scope: Scope<'_>,
        name: &DocName,
        content: &[u8],
        cond: Cond,
    ) -> Result<Written> {
        let key = self.doc_key(scope, name);
        let shown = self.show(&key);
        let limit = MAX_DOC - MAX_HEADER as u64;
        if content.len() as u64 > limit {
            return Err(Error::TooLarge {
                key: shown,
                size: content.len() as u64,
                limit,
            });
        }
        if let Backend::Dir { root } = &self.inner.backend {
            let file = Self::file_of(root, &key);
            let lock = self.doc_lock(root, scope, name);
            let (root, content) = (root.clone(), content.to_vec());
            return tokio::task::spawn_blocking(move || {
                local::write(&root, &file, &lock, &content, cond)
            })
            .await
            .map_err(|_| Error::Interrupted { key: shown })?;
        }
        let creating = matches!(cond, Cond::Absent);
        let (mode, incarnation, generation) = match cond {
            Cond::Absent => (PutMode::Create, incarnation(&shown)?, 1),
            Cond::Version(v) => {
                let generation = next_generation(&v, &shown)?;
                let mode = PutMode::Update(UpdateVersion {
                    e_tag: v.e_tag,
                    version: None,
                });
                (mode, v.incarnation, generation)
            }
        };
        let body = encode(incarnation, generation, content);
        match self
            .inner
            .store
            .put_opts(&key, body.into(), mode.into())
            .await
        {
            Ok(put) => Ok(Written::Done(Version {
                incarnation,
                generation,
                e_tag: put.e_tag,
            })),
            // Never a conflict: a missing bucket (which a replace may
            // answer as a failed precondition) would be read again as a
            // missing document, and a push would start a fresh garden.
            Err(e) if self.no_bucket(&e) => Err(self.fail("writing", shown, e)),
            // Creating answered "not found": the bucket itself is missing.
            Err(e @ object_store::Error::NotFound { .. }) if creating => {
                Err(self.fail("writing", shown, e))
            }
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. }
                | object_store::Error::NotFound { .. },
            ) => Ok(Written::Conflict),
            Err(e) => Err(self.fail("writing", shown, e)),
        }
    }

    /// Creates the document `name` of `scope` unless it exists: `true` for
    /// the one writer, among all racing in any process, that created it (a
    /// login nonce is accepted once). A lost and retried reply can make the
    /// creator see `false` too (see [`Depot::write_doc`]), never two writers
    /// `true`.
    ///
    /// # Errors
    /// As [`Depot::write_doc`].
    pub async fn write_once(
        &self,
        scope: Scope<'_>,
        name: &DocName,
        content: &[u8],
    ) -> Result<bool> {
        Ok(matches!(
            self.write_doc(scope, name, content, Cond::Absent).await?,
            Written::Done(_)
        ))
    }

    /// Deletes the document `name` of `scope`, unconditionally (for
    /// documents that are done with, such as expired nonces); deleting a
    /// missing document succeeds.
    ///
    /// # Errors
    /// [`Error::Store`] / [`Error::Io`] when the delete fails.
    pub async fn remove_doc(&self, scope: Scope<'_>, name: &DocName) -> Result<()> {
        let key = self.doc_key(scope, name);
        let shown = self.show(&key);
        if let Backend::Dir { root } = &self.inner.backend {
            let file = Self::file_of(root, &key);
            let lock = self.doc_lock(root, scope, name);
            return tokio::task::spawn_blocking(move || local::remove(&file, &lock))
                .await
                .map_err(|_| Error::Interrupted { key: shown })?;
        }
        match self.inner.store.delete(&key).await {
            Ok(()) => Ok(()),
            Err(e @ object_store::Error::NotFound { .. }) if !self.no_bucket(&e) => Ok(()),
            Err(e) => Err(self.fail("deleting", shown, e)),
        }
    }

    /// The names of the documents of `scope`, sorted.
    ///
    /// # Errors
    /// [`Error::Store`] when listing fails.
    pub async fn list_docs(&self, scope: Scope<'_>) -> Result<Vec<DocName>> {
        let base = self.doc_base(scope);
        let mut listing = self.inner.store.list(Some(&base));
        let mut names = Vec::new();
        while let Some(item) = listing.next().await {
            let meta = item.map_err(|e| self.fail("listing", self.show(&base), e))?;
            let Some(parts) = meta.location.prefix_match(&base) else {
                continue;
            };
            let parts: Vec<_> = parts.collect();
            if let [name] = parts.as_slice()
                && is_doc_name(name.as_ref())
                && let Ok(name) = DocName::new(name.as_ref())
            {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }
}

/// The folder backend's compare-and-swap, which `object_store`'s
/// `LocalFileSystem` lacks: create is a `link(2)` (`renameat2` with
/// `RENAME_NOREPLACE`) of a synced temp file, which never replaces a file;
/// replace and delete hold the document's lock file (`flock`) from the
/// version check to the rename, and renames are atomic. Every step is
/// durable: temp file synced, then the folder.
///
/// On Windows the folder is not synced (it cannot be opened for it), and
/// a rename waits a moment while a reader of the document has it open
/// (see `sgard_store::durable::retry_rename`).
mod local {
    use super::*;

    pub(super) fn write(
        root: &FsPath,
        file: &FsPath,
        lock: &FsPath,
        content: &[u8],
        cond: Cond,
    ) -> Result<Written> {
        let dir = parent(file);
        ensure_dir(root, &dir)?;
        match cond {
            Cond::Absent => {
                // A fast answer only: the link below decides.
                if file.exists() {
                    return Ok(Written::Conflict);
                }
                let incarnation = incarnation(&file.display().to_string())?;
                let temp = temp_with(&dir, &encode(incarnation, 1, content))?;
                let linked = retry_rename(file, temp, |t| {
                    t.persist_noclobber(file).map_err(|e| (e.error, e.file))
                });
                match linked {
                    Ok(_) => {
                        fsync_dir(&dir)?;
                        Ok(Written::Done(Version {
                            incarnation,
                            generation: 1,
                            e_tag: None,
                        }))
                    }
                    Err((e, _)) if e.kind() == io::ErrorKind::AlreadyExists => {
                        Ok(Written::Conflict)
                    }
                    Err((e, _)) => Err(Error::io("creating", file, e)),
                }
            }
            Cond::Version(v) => {
                let _held = hold(root, lock)?;
                let stored = match std::fs::read(file) {
                    Ok(stored) => Bytes::from(stored),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Written::Conflict),
                    Err(e) => return Err(Error::io("reading", file, e)),
                };
                let Some((incarnation, generation, _)) = decode(&stored) else {
                    return Err(Error::BadDoc {
                        key: file.display().to_string(),
                        reason: "its header is missing or malformed",
                    });
                };
                if incarnation != v.incarnation || generation != v.generation {
                    return Ok(Written::Conflict);
                }
                let next = next_generation(&v, &file.display().to_string())?;
                let temp = temp_with(&dir, &encode(incarnation, next, content))?;
                retry_rename(file, temp, |t| {
                    t.persist(file).map_err(|e| (e.error, e.file))
                })
                .map_err(|(e, _)| Error::io("renaming a temp file to", file, e))?;
                fsync_dir(&dir)?;
                Ok(Written::Done(Version {
                    incarnation,
                    generation: next,
                    e_tag: None,
                }))
            }
        }
    }

    pub(super) fn remove(file: &FsPath, lock: &FsPath) -> Result<()> {
        let dir = parent(file);
        if !dir.is_dir() {
            return Ok(());
        }
        let lock_dir = parent(lock);
        std::fs::create_dir_all(&lock_dir)
            .map_err(|e| Error::io("creating folder", &lock_dir, e))?;
        let _held = lock_file(lock)?;
        match std::fs::remove_file(file) {
            Ok(()) => Ok(fsync_dir(&dir)?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("deleting", file, e)),
        }
    }

    fn parent(path: &FsPath) -> PathBuf {
        sgard_store::durable::parent_of(path)
    }

    /// Makes `dir` (inside `root`) and makes the new folders durable.
    fn ensure_dir(root: &FsPath, dir: &FsPath) -> Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io("creating folder", dir, e))?;
        let mut at = dir.parent();
        while let Some(folder) = at {
            fsync_dir(folder)?;
            if folder == root {
                break;
            }
            at = folder.parent();
        }
        Ok(())
    }

    /// Takes the document's lock (its folder made if needed).
    fn hold(root: &FsPath, lock: &FsPath) -> Result<File> {
        ensure_dir(root, &parent(lock))?;
        lock_file(lock)
    }

    /// An exclusive `flock` on `path`, released when the file is closed.
    /// Lock files stay: removing one would let two writers lock different
    /// files of the same name.
    fn lock_file(path: &FsPath) -> Result<File> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| Error::io("opening lock", path, e))?;
        file.lock().map_err(|e| Error::io("locking", path, e))?;
        Ok(file)
    }

    /// A synced temp file in `dir` holding `bytes`.
    fn temp_with(dir: &FsPath, bytes: &[u8]) -> Result<tempfile::NamedTempFile> {
        let mut temp = tempfile::Builder::new()
            .prefix(TMP_PREFIX)
            .tempfile_in(dir)
            .map_err(|e| Error::io("creating a temp file in", dir, e))?;
        temp.write_all(bytes)
            .and_then(|()| temp.as_file().sync_all())
            .map_err(|e| Error::io("writing", temp.path().to_path_buf(), e))?;
        Ok(temp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let stored = Bytes::from(encode(0xdead_beef, 7, b"payload\nwith lines"));
        assert_eq!(
            decode(&stored),
            Some((0xdead_beef, 7, Bytes::from_static(b"payload\nwith lines")))
        );
        let empty = Bytes::from(encode(u64::MAX, u64::MAX, b""));
        assert_eq!(decode(&empty), Some((u64::MAX, u64::MAX, Bytes::new())));
    }

    #[test]
    fn rejects_malformed_headers() {
        for bad in [
            &b""[..],
            b"payload",
            b"sgard-depot-doc 1 ",
            b"sgard-depot-doc 1 00000000000000ff 1",
            b"sgard-depot-doc 1 ff 1\n",
            b"sgard-depot-doc 1 00000000000000ff 0\n",
            b"sgard-depot-doc 1 00000000000000ff -1\n",
            b"sgard-depot-doc 1 00000000000000ff +1\n",
            b"sgard-depot-doc 1 00000000000000ff 99999999999999999999999\n",
            b"sgard-depot-doc 2 00000000000000ff 1\n",
            b"sgard-depot-doc 1 0000000000000zzz 1\n",
        ] {
            assert_eq!(decode(&Bytes::copy_from_slice(bad)), None, "{bad:?}");
        }
    }
}
