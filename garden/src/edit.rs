//! `edit`: changing a tracked file's stored content through an editor.
//!
//! [`Garden::edit_begin`] says which file the editor opens: the file itself
//! for a plain entry; for a template, a copy of its source; for an
//! encrypted entry, a decrypted copy in a private folder (0700, the file
//! 0600) that is removed when the [`EditSession`] is dropped, whatever
//! happened. No lock is held while the editor runs; [`Garden::edit_finish`]
//! (under the exclusive lock) stores what changed, refusing when the entry
//! changed in the repository meanwhile, and brings the disk up to date.

use crate::Tx;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use sgard_manifest::{Entry, EntryKind};
use sgard_store::Hash;
use zeroize::Zeroizing;

use crate::{Error, Garden, Result, fsx};

/// One entry being edited (see the module comment).
#[derive(Debug)]
pub struct EditSession {
    /// The entry's path (`~/…`).
    pub path: String,
    /// The entry as it was when the edit began.
    entry: Entry,
    /// The file the editor opens.
    file: PathBuf,
    /// The SHA-256 of what `file` held before the editor ran.
    before: Hash,
    /// For a copy: what the disk file should hold when it is in step with
    /// the repository (the rendering, the plaintext); a disk file holding
    /// something else has changes of its own and is not overwritten.
    in_step: Option<Hash>,
    /// The private folder of a copy (removed on drop).
    _dir: Option<tempfile::TempDir>,
}

impl EditSession {
    /// The file the editor is to open.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Whether the editor opens a copy (a template's source, a secret's
    /// plaintext) rather than the file itself.
    pub fn is_copy(&self) -> bool {
        self._dir.is_some()
    }

    /// Keeps the edited copy (when nothing could be stored) and returns
    /// where it is.
    pub fn keep(self) -> Option<PathBuf> {
        let file = self.file;
        self._dir.map(|d| {
            let _ = d.keep();
            file
        })
    }
}

/// What [`Garden::edit_finish`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EditOutcome {
    /// The editor left the content as it was.
    Unchanged,
    /// The new content is stored; `applied` when the disk was brought up
    /// to date (not with `--no-apply`).
    Stored {
        /// The disk file was written (rendered for a template).
        applied: bool,
    },
    /// The new content is stored, and the disk file, which has changes of
    /// its own, was left as it is.
    StoredDiskKept,
}

/// The largest content edited through a copy.
const EDIT_MAX: u64 = 64 << 20;

fn read_capped(path: &Path) -> Result<Zeroizing<Vec<u8>>> {
    let (f, md) = fsx::open_regular(path)?;
    if md.len() > EDIT_MAX {
        return Err(Error::Unsupported {
            path: path.display().to_string(),
            reason: format!("{} bytes is more than edit handles", md.len()),
        });
    }
    let mut buf = Zeroizing::new(Vec::with_capacity(md.len() as usize));
    std::io::Read::read_to_end(&mut std::io::Read::take(f, EDIT_MAX + 1), &mut buf)
        .map_err(|e| Error::io("reading", path, e))?;
    Ok(buf)
}

impl Garden {
    /// Prepares the edit of the file entry `arg`.
    ///
    /// # Errors
    /// [`Error::NotTracked`]; [`Error::Unsupported`] for links, folders and
    /// a plain entry missing on disk; key and store errors for a copy.
    pub fn edit_begin(&mut self, arg: &OsStr) -> Result<EditSession> {
        self.tx().edit_begin(arg)
    }

    /// After the editor exited 0: stores the edited content if it changed
    /// (encrypted again where the entry is) and, with `apply`, brings the
    /// disk up to date (the rendering for a template); the base settles.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the entry changed in the repository since
    /// the edit began; key, store and template errors (a template that no
    /// longer renders is stored, and the error says it was not applied).
    pub fn edit_finish(&mut self, s: &EditSession, apply: bool) -> Result<EditOutcome> {
        self.require_exclusive("edit")?;
        let now = self.repo.manifest.get(&s.path).cloned();
        if now.as_ref() != Some(&s.entry) {
            return Err(Error::Conflict(format!(
                "{} changed in the repository while it was being edited; nothing was \
                 stored (the edited copy was {})",
                s.path,
                s.file.display()
            )));
        }
        let content = read_capped(&s.file)?;
        if Hash::of(&content) == s.before {
            return Ok(EditOutcome::Unchanged);
        }
        // Never stored with the markers a merge wrote (the same test as
        // status and checkpoint).
        if self.unresolved_merge_in(&s.path, &content) {
            return Err(Error::Conflict(format!(
                "{} still holds the conflict markers `sgard merge` wrote; nothing was stored \
                 (the edited copy is {})",
                s.path,
                s.file.display()
            )));
        }
        let mut e = s.entry.clone();
        self.tx().begin_batch();
        if e.encrypted {
            let (h, mac, _) = self.tx().store_encrypted(&content, e.template)?;
            e.hash = Some(h);
            e.plaintext_mac = Some(Box::new(mac));
            e.plaintext_hash = None;
        } else if e.template {
            e.hash = Some(self.tx().put_source(&content)?.hash);
        } else {
            let w = self.tx().put(&mut content.as_slice())?;
            e.hash = Some(w.hash);
        }
        if !s.is_copy() {
            // The file itself was edited: its mode is the entry's now.
            if let Some(md) = fsx::lstat(&s.file)? {
                e.mode = Some(fsx::mode_to_record(fsx::mode_of(&md), e.mode, &s.file));
            }
        }
        e.updated = self.repo.env.now;
        self.tx().commit_batch()?;
        self.repo.manifest.upsert(e.clone());
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        // The file itself stored without markers: the merge is over.
        if !s.is_copy() {
            self.drop_unresolved([s.path.as_str()])?;
        }
        let disk = self.repo.env.expand(&s.path);
        if !s.is_copy() {
            self.tx().settle(&e, Some(Hash::of(&content)), e.mode);
            self.tx().flush_base()?;
            return Ok(EditOutcome::Stored { applied: true });
        }
        if !apply {
            self.tx().flush_base()?;
            return Ok(EditOutcome::Stored { applied: false });
        }
        // A disk file with changes of its own is left as it is.
        if let Some(md) = fsx::lstat(&disk)? {
            let now = if md.is_file() {
                Some(if e.encrypted {
                    Hash::of(&self.repo.read_plain(&disk)?.0)
                } else {
                    fsx::hash_file(&disk)?.0
                })
            } else {
                None
            };
            // What this machine last agreed on is no change of its own
            // either (the source just added, before its first restore).
            let agreed = self.work.base.get(&s.path).and_then(|b| b.content);
            if now.is_none() || (now != s.in_step && now != agreed) {
                self.tx().flush_base()?;
                return Ok(EditOutcome::StoredDiskKept);
            }
        }
        let written = if e.template {
            let out = self
                .render_source(&e.path, &content)
                .map_err(|err| Error::Template {
                    path: e.path.clone(),
                    message: format!(
                        "the new source is stored, but {} was not written: {}",
                        e.path,
                        crate::checkpoint::error_chain(&err)
                    ),
                })?;
            Zeroizing::new(out)
        } else {
            content
        };
        self.write_bytes(&e, &disk, &written)?;
        self.tx().settle(&e, Some(Hash::of(&written)), e.mode);
        self.tx().flush_base()?;
        Ok(EditOutcome::Stored { applied: true })
    }
}

impl Tx<'_> {
    pub(crate) fn edit_begin(&mut self, arg: &OsStr) -> Result<EditSession> {
        let e = self.repo.entry_at(arg)?.clone();
        let path = e.path.clone();
        if e.kind != EntryKind::File {
            return Err(Error::Unsupported {
                path,
                reason: format!("cannot edit a {} entry (only files)", e.kind),
            });
        }
        if !e.template && !e.encrypted {
            let file = self.repo.env.expand(&path);
            if fsx::lstat(&file)?.is_none_or(|m| !m.is_file()) {
                return Err(Error::NotOnDisk(path));
            }
            let before = fsx::hash_file(&file)?.0;
            return Ok(EditSession {
                path,
                entry: e,
                file,
                before,
                in_step: None,
                _dir: None,
            });
        }
        let content = if e.encrypted {
            self.stored_plaintext(&e)?
        } else {
            Zeroizing::new(self.repo.blob_of(&e)?)
        };
        let dir = crate::platform::private(tempfile::Builder::new().prefix("sgard-edit-"), 0o700)
            .tempdir()
            .map_err(|err| Error::io("creating a private folder in", std::env::temp_dir(), err))?;
        let name = Path::new(&path)
            .file_name()
            .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
        let name = name.trim_start_matches('.');
        let file = dir.path().join(if name.is_empty() { "file" } else { name });
        // Removed by the signal thread too, if this process must end while
        // blocked.
        if let (Some(parent), Some(name)) = (dir.path().parent(), dir.path().file_name()) {
            sgard_store::cancel::register_prefix(parent, name);
        }
        sgard_store::durable::write_atomic(&file, &content, 0o600)?;
        let in_step = if e.template {
            self.rendered_hash(&e, true)?
        } else {
            Some(Hash::of(&content))
        };
        Ok(EditSession {
            path,
            in_step,
            before: Hash::of(&content),
            entry: e,
            file,
            _dir: Some(dir),
        })
    }
}
