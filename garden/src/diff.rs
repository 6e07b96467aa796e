//! `diff`: a unified diff of a tracked file, stored against current.

use crate::Repo;
use crate::Tx;
use std::ffi::OsStr;
use std::io::Read;

use sgard_manifest::EntryKind;
use similar::TextDiff;

use crate::fsx;
use crate::{Error, Garden, Result};

/// The largest file diffed line by line; bigger ones are only compared.
pub const MAX_DIFF_BYTES: u64 = 16 << 20;

/// The outcome of [`Garden::diff`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Diff {
    /// Stored and current content are the same.
    Same,
    /// A unified diff with `--- <path> (stored)` / `+++ <path> (current)` headers.
    Text {
        /// The diff text.
        text: String,
        /// Lines added on disk.
        insertions: usize,
        /// Lines removed on disk.
        deletions: usize,
    },
    /// At least one side is binary (or too large); they differ.
    Binary {
        /// The entry's path.
        path: String,
    },
    /// A template that asks a password manager differs from what sgard
    /// last wrote only where its secrets stand (masked: nothing was asked).
    Secret {
        /// The entry's path.
        path: String,
    },
}

impl Garden {
    /// Compares the stored content of the file entry at `arg` with the file
    /// on disk (a missing file diffs as empty).
    ///
    /// # Errors
    /// [`Error::NotTracked`]; [`Error::Unsupported`] for links and folders;
    /// [`Error::Integrity`] when the stored blob fails its hash;
    /// [`Error::Crypto`] (`cannot decrypt: …`) for a secret without its key.
    pub fn diff(&mut self, arg: &OsStr) -> Result<Diff> {
        self.tx().diff(arg)
    }

    /// Diffs every file entry selected by `args` (all when empty; a folder
    /// selects the files under it), in manifest order. Entries targeted
    /// away from this machine are left out unless an argument names one
    /// exactly (a folder argument keeps targeting, as `status` does). One
    /// entry that cannot be diffed (a secret without the passphrase, an
    /// unreadable file) does not stop the others: its error is its result.
    ///
    /// # Errors
    /// [`Error::NoMatch`] when `args` select no file; [`Error::Interrupted`].
    pub fn diff_many(
        &mut self,
        args: &[std::ffi::OsString],
    ) -> Result<Vec<(String, Result<Diff>)>> {
        self.tx().diff_many(args)
    }

    /// Diffs the file entries of snapshot `at` (selected by `args`, all when
    /// empty) against the disk, with the targeting and per-entry errors of
    /// [`Garden::diff_many`].
    ///
    /// # Errors
    /// As [`Garden::resolve`], [`Garden::snapshot_doc`]; [`Error::NoMatch`].
    pub fn diff_at(
        &mut self,
        at: &str,
        args: &[std::ffi::OsString],
    ) -> Result<Vec<(String, Result<Diff>)>> {
        self.tx().diff_at(at, args)
    }

    /// Diffs the file entries of two snapshots (selected by `args`).
    ///
    /// # Errors
    /// As [`Garden::diff_at`].
    pub fn diff_snapshots(
        &mut self,
        from: &str,
        to: &str,
        args: &[std::ffi::OsString],
    ) -> Result<Vec<(String, Diff)>> {
        self.tx().diff_snapshots(from, to, args)
    }
}

impl Repo {
    /// Whether `e` is diffed here: it applies to this machine, or an
    /// argument names it exactly.
    fn wanted_here(&self, e: &sgard_manifest::Entry, named: &[String]) -> Result<bool> {
        Ok(self.applies(e)? || named.contains(&e.path))
    }
}

impl Tx<'_> {
    pub(crate) fn diff(&mut self, arg: &OsStr) -> Result<Diff> {
        self.diff_one(self.repo.entry_at(arg)?, "stored")?
    }

    pub(crate) fn diff_many(
        &mut self,
        args: &[std::ffi::OsString],
    ) -> Result<Vec<(String, Result<Diff>)>> {
        let picked: Vec<usize> = self
            .repo
            .select(args)?
            .into_iter()
            .filter(|&i| self.repo.manifest.files[i].kind == EntryKind::File)
            .collect();
        if picked.is_empty() {
            return Err(Error::NoMatch);
        }
        let named = self.repo.tilde_args(args)?;
        let repo = self.repo;
        // The scan vouches for unchanged plain files as a status does (the
        // stat cache, read in parallel otherwise): only the others are read
        // and compared.
        let mut scan = self.scan(&picked, false);
        // A content the repository lacks is diffed the long way, which
        // says so for that entry.
        let mut contents: Vec<sgard_store::Hash> = picked
            .iter()
            .filter_map(|&i| repo.manifest.files[i].hash)
            .collect();
        contents.sort_unstable();
        contents.dedup();
        let lacking = repo.lacking(&contents, false, None);
        let mut out = Vec::new();
        for i in picked {
            let e = &repo.manifest.files[i];
            if !repo.wanted_here(e, &named)? {
                continue;
            }
            let found = scan.take(self, i);
            if !e.template
                && !e.encrypted
                && e.hash.is_some_and(|h| !lacking.contains_key(&h))
                && found.hash_seen() == e.hash
            {
                sgard_store::cancel::check()?;
                out.push((e.path.clone(), Ok(Diff::Same)));
                continue;
            }
            out.push((e.path.clone(), self.diff_one(e, "stored")?));
        }
        Ok(out)
    }

    pub(crate) fn diff_at(
        &mut self,
        at: &str,
        args: &[std::ffi::OsString],
    ) -> Result<Vec<(String, Result<Diff>)>> {
        let idx = self.repo.resolve(at)?;
        let id = self.repo.history.records[idx].id;
        let doc = self.snapshot_doc(&id)?;
        let label = id.short(12);
        let named = self.repo.tilde_args(args)?;
        let mut out = Vec::new();
        let mut any = false;
        for i in self.repo.select_in(&doc.files, args)? {
            let e = &doc.files[i];
            if e.kind == EntryKind::File {
                any = true;
                if self.repo.wanted_here(e, &named)? {
                    out.push((e.path.clone(), self.diff_one(e, &label)?));
                }
            }
        }
        if !any {
            return Err(Error::NoMatch);
        }
        Ok(out)
    }

    /// One entry's diff, its error kept as its result (an interruption
    /// stops the command). A secret that cannot be decrypted says so.
    fn diff_one(&mut self, e: &sgard_manifest::Entry, label: &str) -> Result<Result<Diff>> {
        sgard_store::cancel::check()?;
        match self.diff_entry(e, label) {
            Err(err) if err.is_interrupted() => Err(err),
            Err(Error::Crypto(m)) if e.encrypted => {
                Ok(Err(Error::Crypto(format!("cannot decrypt: {m}"))))
            }
            other => Ok(other),
        }
    }

    pub(crate) fn diff_snapshots(
        &mut self,
        from: &str,
        to: &str,
        args: &[std::ffi::OsString],
    ) -> Result<Vec<(String, Diff)>> {
        let (ia, ib) = (self.repo.resolve(from)?, self.repo.resolve(to)?);
        let (ida, idb) = (
            self.repo.history.records[ia].id,
            self.repo.history.records[ib].id,
        );
        let (da, db) = (self.snapshot_doc(&ida)?, self.snapshot_doc(&idb)?);
        let mut paths: Vec<String> = Vec::new();
        for doc in [&da, &db] {
            for i in self.repo.select_in(&doc.files, args).unwrap_or_default() {
                let e = &doc.files[i];
                if e.kind == EntryKind::File && !paths.contains(&e.path) {
                    paths.push(e.path.clone());
                }
            }
        }
        if paths.is_empty() {
            return Err(Error::NoMatch);
        }
        paths.sort();
        let mut read = |doc: &sgard_manifest::Manifest, p: &str| -> Result<Option<Vec<u8>>> {
            if let Some(e) = doc.get(p).filter(|e| e.encrypted) {
                return self.stored_plaintext(e).map(|b| Some(b.to_vec()));
            }
            match doc.get(p).and_then(|e| e.hash) {
                None => Ok(None),
                Some(h) => self.repo.store.read(&h).map(Some).map_err(|source| {
                    if source.is_integrity() {
                        Error::Integrity {
                            path: p.to_owned(),
                            source,
                        }
                    } else {
                        Error::Store(source)
                    }
                }),
            }
        };
        let mut out = Vec::new();
        for p in paths {
            let (a, b) = (read(&da, &p)?, read(&db, &p)?);
            let la = format!(
                "{p} ({})",
                if a.is_some() {
                    ida.short(12)
                } else {
                    "absent".into()
                }
            );
            let lb = format!(
                "{p} ({})",
                if b.is_some() {
                    idb.short(12)
                } else {
                    "absent".into()
                }
            );
            let d = diff_bytes(&p, &a.unwrap_or_default(), &b.unwrap_or_default(), &la, &lb);
            out.push((p, d));
        }
        Ok(out)
    }

    pub(crate) fn diff_entry(
        &mut self,
        e: &sgard_manifest::Entry,
        stored_label: &str,
    ) -> Result<Diff> {
        let path = e.path.clone();
        if e.kind != EntryKind::File {
            return Err(Error::Unsupported {
                path,
                reason: format!("cannot diff a {} entry (only files)", e.kind),
            });
        }

        let hash = crate::purge::content_hash(e)?;
        let abs = self.repo.env.expand(&path);
        let current_label = |abs: &std::path::Path| -> Result<String> {
            Ok(if fsx::lstat(abs)?.is_none() {
                format!("{path} (missing)")
            } else {
                format!("{path} (current)")
            })
        };
        if e.template && self.source_calls_secrets(e)? {
            return self.diff_secret_template(e, &abs, stored_label);
        }
        if e.template {
            // The rendering is what belongs on disk.
            let stored = self.rendering(e)?;
            let current = match fsx::lstat(&abs)? {
                None => Vec::new(),
                Some(_) if e.encrypted => self.repo.read_plain(&abs)?.0.to_vec(),
                Some(_) => {
                    let (f, md) = fsx::open_regular(&abs)?;
                    let mut buf = Vec::new();
                    f.take(MAX_DIFF_BYTES + 1)
                        .read_to_end(&mut buf)
                        .map_err(|err| Error::io("reading", &abs, err))?;
                    if md.len() > MAX_DIFF_BYTES || buf.len() as u64 > MAX_DIFF_BYTES {
                        return Ok(Diff::Binary { path });
                    }
                    buf
                }
            };
            return Ok(diff_bytes(
                &path,
                &stored,
                &current,
                &format!("{path} ({stored_label}, rendered)"),
                &current_label(&abs)?,
            ));
        }
        if e.encrypted {
            // An unchanged secret needs no passphrase.
            if fsx::lstat(&abs)?.is_some_and(|m| m.is_file())
                && let Ok((sha, _)) = fsx::hash_file(&abs)
                && self.known_match(e, sha) == Some(true)
            {
                return Ok(Diff::Same);
            }
            let current = match fsx::lstat(&abs)? {
                None => Vec::new(),
                Some(_) => self.repo.read_plain(&abs)?.0.to_vec(),
            };
            let stored = self.stored_plaintext(e)?;
            return Ok(diff_bytes(
                &path,
                &stored,
                &current,
                &format!("{path} ({stored_label})"),
                &current_label(&abs)?,
            ));
        }
        let current = match fsx::lstat(&abs)? {
            None => Some(Vec::new()),
            Some(_) => {
                let (mut f, md) = fsx::open_regular(&abs)?;
                if md.len() > MAX_DIFF_BYTES {
                    None
                } else {
                    let mut buf = Vec::with_capacity(md.len() as usize);
                    f.read_to_end(&mut buf)
                        .map_err(|err| Error::io("reading", &abs, err))?;
                    Some(buf)
                }
            }
        };
        let stored_size = self.repo.store.size_of(&hash)?;
        let integrity = |source| Error::Integrity {
            path: path.clone(),
            source,
        };
        let Some(current) = current else {
            // Too large to diff in memory: compare hashes only.
            self.repo.store.verify(&hash)?;
            let (now, _) = fsx::hash_file(&abs)?;
            return Ok(if now == hash {
                Diff::Same
            } else {
                Diff::Binary { path }
            });
        };
        if stored_size.is_some_and(|s| s > MAX_DIFF_BYTES) {
            return Ok(if sgard_store::Hash::of(&current) == hash {
                Diff::Same
            } else {
                Diff::Binary { path }
            });
        }
        let stored = self.repo.store.read(&hash).map_err(|s| {
            if s.is_integrity() {
                integrity(s)
            } else {
                Error::Store(s)
            }
        })?;
        Ok(diff_bytes(
            &path,
            &stored,
            &current,
            &format!("{path} ({stored_label})"),
            &current_label(&abs)?,
        ))
    }
}

/// A unified diff of two contents (or `Same`, or `Binary`).
impl Tx<'_> {
    /// Whether a template entry asks a password manager (its source read,
    /// decrypted if need be).
    fn source_calls_secrets(&mut self, e: &sgard_manifest::Entry) -> Result<bool> {
        if let Some(s) = self.is_secret_template(e)? {
            return Ok(s);
        }
        self.dek()?;
        Ok(self.is_secret_template(e)? == Some(true))
    }

    /// Diffs a template that asks a password manager without asking it:
    /// the disk as sgard last wrote it is the same; otherwise the rendering
    /// with its secrets masked is compared with the disk, whose lines at
    /// those places are masked alike.
    fn diff_secret_template(
        &mut self,
        e: &sgard_manifest::Entry,
        abs: &std::path::Path,
        stored_label: &str,
    ) -> Result<Diff> {
        let path = e.path.clone();
        let current = match fsx::lstat(abs)? {
            None => None,
            Some(_) => {
                let (f, md) = fsx::open_regular(abs)?;
                let mut buf = Vec::new();
                f.take(MAX_DIFF_BYTES + 1)
                    .read_to_end(&mut buf)
                    .map_err(|err| Error::io("reading", abs, err))?;
                if md.len() > MAX_DIFF_BYTES || buf.len() as u64 > MAX_DIFF_BYTES {
                    return Ok(Diff::Binary { path });
                }
                Some(buf)
            }
        };
        let last = self.work.base.get(&e.path).cloned();
        if let (Some(cur), Some(b)) = (&current, &last)
            && b.stored == e.hash
            && b.content == Some(sgard_store::Hash::of(cur))
        {
            return Ok(Diff::Same);
        }
        let masked = self.rendering_masked(e)?;
        // The disk may still hold the rendering of the source sgard last
        // wrote: its lines are known too.
        let before = match &last {
            Some(b) if b.stored.is_some() && b.stored != e.hash => {
                let mut old = e.clone();
                old.hash = b.stored;
                self.rendering_masked(&old).ok()
            }
            _ => None,
        };
        let label_now = if current.is_some() {
            format!("{path} (current, secrets masked)")
        } else {
            format!("{path} (missing)")
        };
        let (Ok(m), Ok(c)) = (
            String::from_utf8(masked),
            String::from_utf8(current.clone().unwrap_or_default()),
        ) else {
            return Ok(Diff::Binary { path });
        };
        let before = before.and_then(|b| String::from_utf8(b).ok());
        let mut all = vec![m.as_str()];
        all.extend(before.as_deref());
        let (a, b) = crate::managers::mask_like(&all, &c);
        match diff_bytes(
            &path,
            a.as_bytes(),
            b.as_bytes(),
            &format!("{path} ({stored_label}, rendered, secrets masked)"),
            &label_now,
        ) {
            Diff::Same => Ok(Diff::Secret { path }),
            d => Ok(d),
        }
    }
}

fn diff_bytes(path: &str, old: &[u8], new: &[u8], old_label: &str, new_label: &str) -> Diff {
    if old == new {
        return Diff::Same;
    }
    let (Some(old), Some(new)) = (text(old), text(new)) else {
        return Diff::Binary {
            path: path.to_owned(),
        };
    };
    let d = TextDiff::from_lines(old, new);
    let (mut insertions, mut deletions) = (0, 0);
    for op in d.ops() {
        for c in d.iter_changes(op) {
            match c.tag() {
                similar::ChangeTag::Insert => insertions += 1,
                similar::ChangeTag::Delete => deletions += 1,
                similar::ChangeTag::Equal => {}
            }
        }
    }
    let text = d
        .unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .to_string();
    Diff::Text {
        text,
        insertions,
        deletions,
    }
}

fn text(b: &[u8]) -> Option<&str> {
    if b.iter().take(8192).any(|&c| c == 0) {
        return None;
    }
    std::str::from_utf8(b).ok()
}
