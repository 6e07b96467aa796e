//! `checkpoint`: record the current state of every tracked path.

use crate::Tx;
use std::ffi::OsString;

use sgard_manifest::history::Reason;
use sgard_manifest::{Entry, EntryKind, Manifest};

use crate::fsx;
use crate::history::compare_docs;
use crate::scan::Found;
use crate::status::Judged;
use crate::{Garden, Result, ShowChange, State};

/// What a checkpoint did to one entry (entries it left alone are not listed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryChange {
    /// New content (or link target) recorded.
    Content,
    /// Only the mode changed.
    Mode,
    /// The path is gone from disk; the stored version is kept.
    Missing,
    /// The path is now something else (e.g. a folder); the entry is kept.
    TypeChange(String),
    /// Locked and different on disk: the repository's version is kept.
    Locked,
    /// Changed in the repository since this machine last synced it, not
    /// here: another machine's work, left as it is (restore brings it here).
    Behind(String),
    /// Changed both here and in the repository (or different with no
    /// record of a sync here): the repository's version is kept.
    Conflict(String),
    /// Still holds the conflict markers `merge` wrote: not recorded until
    /// they are gone.
    Unresolved(String),
    /// The entry could not be checkpointed; it is kept as it was.
    Failed(String),
    /// A template's rendering was edited on disk: the source is kept (a
    /// rendering never replaces it; `sgard edit` changes the source).
    Template,
}

/// The result of [`Garden::checkpoint`].
#[derive(Clone, Debug, Default)]
pub struct CheckpointReport {
    /// What the head already changed since the newest snapshot (an `add`,
    /// `edit`, `remove`, `lock` …, or a first checkpoint's every entry):
    /// the snapshot records it too.
    pub staged: Vec<ShowChange>,
    /// Entries that changed or need attention, in manifest order.
    pub changes: Vec<(String, EntryChange)>,
    /// New blobs stored.
    pub new_blobs: usize,
    /// True when the head says what the newest snapshot says: nothing was
    /// (with a dry run: would be) recorded.
    pub unchanged: bool,
    /// The snapshot recorded, if any.
    pub snapshot: Option<sgard_store::Hash>,
    /// A dry run: nothing was stored or recorded.
    pub dry_run: bool,
}

impl CheckpointReport {
    /// Whether any entry failed.
    pub fn has_failures(&self) -> bool {
        self.changes
            .iter()
            .any(|(_, c)| matches!(c, EntryChange::Failed(_)))
    }

    /// The entries left as they were because they are in conflict.
    pub fn conflicts(&self) -> Vec<&str> {
        self.paths_where(|c| matches!(c, EntryChange::Conflict(_)))
    }

    /// The entries left as they were because they still hold the conflict
    /// markers of a merge.
    pub fn unresolved(&self) -> Vec<&str> {
        self.paths_where(|c| matches!(c, EntryChange::Unresolved(_)))
    }

    fn paths_where(&self, pick: impl Fn(&EntryChange) -> bool) -> Vec<&str> {
        self.changes
            .iter()
            .filter(|(_, c)| pick(c))
            .map(|(p, _)| p.as_str())
            .collect()
    }

    /// How many entries the snapshot records as changed (what the head
    /// held already and what was taken from disk now).
    pub fn recorded(&self) -> usize {
        let mut paths: Vec<&str> = self.staged.iter().map(|c| c.path.as_str()).collect();
        paths.extend(
            self.changes
                .iter()
                .filter(|(_, c)| matches!(c, EntryChange::Content | EntryChange::Mode))
                .map(|(p, _)| p.as_str()),
        );
        paths.sort_unstable();
        paths.dedup();
        paths.len()
    }
}

/// The newest snapshot, as a checkpoint compares the head with it.
enum Parent {
    /// There is none: every entry is new.
    None,
    /// It is the head itself, which referenced these blobs (unsorted).
    Head(Vec<sgard_store::Hash>),
    /// Its document.
    Doc(Box<Manifest>),
    /// Its document cannot be read: the head is recorded.
    Unreadable,
}

/// Flags of `checkpoint`.
#[derive(Clone, Copy, Debug, Default)]
pub struct CheckpointOptions {
    /// Say what would be recorded; store and record nothing.
    pub dry_run: bool,
}

impl Garden {
    /// Records what changed on disk since this machine last synced: for
    /// every entry that applies here (or those `args` select), judged three
    /// ways against this machine's base (see [`Tx::judge`]), a
    /// `modified` entry's content, target or mode is stored and recorded;
    /// a `behind` one (changed in the repository by another machine) is
    /// left alone, and so is a `conflict` (the repository's version is kept
    /// and the entry is reported). The result is saved with `message` and
    /// recorded as a snapshot in the history; when nothing changed since the
    /// newest snapshot, nothing is written. Missing paths and paths whose
    /// type changed are reported and kept as they were; one failing entry
    /// never aborts the run. Locked entries are never taken from disk.
    ///
    /// # Errors
    /// [`Error::NoMatch`] when `args` select nothing; when the manifest cannot
    /// be saved or targeting is inconsistent.
    pub fn checkpoint(
        &mut self,
        message: Option<&str>,
        args: &[OsString],
        opts: CheckpointOptions,
    ) -> Result<CheckpointReport> {
        self.require_history()?;
        let picked = self.repo.select(args)?;
        let mut report = CheckpointReport {
            dry_run: opts.dry_run,
            ..CheckpointReport::default()
        };
        // What the head changed since the newest snapshot. The head is
        // that snapshot (the common case) or the parent document is read:
        // whichever machine it came from, only a change is recorded.
        let head_is_snapshot = self
            .repo
            .history
            .head()
            .is_some_and(|r| r.id == self.repo.head_hash);
        let parent = match self.repo.history.head().map(|r| r.id) {
            // What it references, before the scan changes the head: the
            // new snapshot's count of new contents is against these
            // (reading the snapshot back would cost a parse).
            _ if head_is_snapshot => {
                Parent::Head(self.repo.manifest.referenced_blobs().collect::<Vec<_>>())
            }
            None => Parent::None,
            Some(id) => match self.snapshot_doc(&id) {
                Ok(doc) => Parent::Doc(Box::new(doc)),
                Err(_) => Parent::Unreadable,
            },
        };
        report.staged = match &parent {
            Parent::None => compare_docs(None, &self.repo.manifest, true),
            Parent::Doc(doc) => compare_docs(Some(doc), &self.repo.manifest, true),
            Parent::Head(_) | Parent::Unreadable => Vec::new(),
        };
        if !opts.dry_run {
            self.tx().begin_batch();
        }
        sgard_store::progress::begin("checking", picked.len() as u64, 0);
        let mut scan = self.tx().scan(&picked, !opts.dry_run);
        let mut recorded = Vec::new();
        // A dry run cannot tell a secret's new ciphertext, only that there
        // will be one.
        let mut unknown_change = false;
        let mut resolved = Vec::new();
        for i in picked {
            sgard_store::cancel::check()?;
            let mut tx = Tx {
                repo: &self.repo,
                work: &mut self.work,
            };
            let entry = &tx.repo.manifest.files[i];
            sgard_store::progress::done(&entry.path, "checking");
            if !tx.repo.applies(entry)? {
                continue;
            }
            // With the key where a secret needs it (a checkpoint of a changed
            // secret needs it anyway).
            let mut found = scan.take(&mut tx, i);
            let judged = match tx.judge(entry, entry.encrypted, &found) {
                Ok(j) => j,
                Err(e) => {
                    report
                        .changes
                        .push((entry.path.clone(), EntryChange::Failed(error_chain(&e))));
                    continue;
                }
            };
            // A merge whose markers are gone (resolved, taken back from the
            // repository, or removed with the file) rests, whether or not
            // this checkpoint records the path.
            if !opts.dry_run
                && !judged.unresolved
                && !matches!(judged.state, State::Skipped | State::Error)
                && tx.work.has_unresolved(&entry.path)
            {
                resolved.push(entry.path.clone());
            }
            let detail = judged.detail.clone().unwrap_or_default();
            let mut updated = None;
            let change = match judged.state {
                State::Ok => {
                    if !opts.dry_run
                        && let Err(e) = tx.heal(entry, &judged, &mut report)
                    {
                        report
                            .changes
                            .push((entry.path.clone(), EntryChange::Failed(error_chain(&e))));
                    }
                    continue;
                }
                State::Skipped => continue,
                State::Missing => EntryChange::Missing,
                State::TypeChange => EntryChange::TypeChange(detail),
                State::Drifted => EntryChange::Locked,
                State::Behind => EntryChange::Behind(detail),
                State::Conflict if judged.unresolved => EntryChange::Unresolved(detail),
                State::Conflict => EntryChange::Conflict(detail),
                State::Error => EntryChange::Failed(detail),
                // A rendering is never stored in place of its template.
                State::Modified if entry.template => {
                    if judged.content_same != Some(true) {
                        EntryChange::Template
                    } else if let Some(seen) = judged.seen.as_ref() {
                        let mut u = entry.clone();
                        u.mode = Some(seen.mode);
                        u.updated = tx.repo.env.now;
                        recorded.push((i, seen.content));
                        updated = Some(u);
                        EntryChange::Mode
                    } else {
                        continue;
                    }
                }
                State::Modified if opts.dry_run => {
                    // What the real run would record, as far as it is known
                    // without storing anything.
                    let mut u = entry.clone();
                    if let Some(seen) = &judged.seen {
                        if entry.kind != EntryKind::Link {
                            u.mode = Some(seen.mode);
                        }
                        match entry.kind {
                            EntryKind::File if judged.content_same == Some(true) => {}
                            EntryKind::File if entry.encrypted => unknown_change = true,
                            EntryKind::File => u.hash = seen.content,
                            EntryKind::Link => u.target.clone_from(&seen.target),
                            EntryKind::Directory => {}
                        }
                    }
                    updated = Some(u);
                    if judged.content_same == Some(true) {
                        EntryChange::Mode
                    } else {
                        EntryChange::Content
                    }
                }
                State::Modified => match tx.checkpoint_entry(entry, &mut found, &mut report) {
                    Ok(Some((u, change))) => {
                        if matches!(change, EntryChange::Content | EntryChange::Mode) {
                            recorded.push((i, judged.seen.and_then(|s| s.content)));
                        }
                        updated = Some(u);
                        change
                    }
                    Ok(None) => continue,
                    Err(e) => EntryChange::Failed(error_chain(&e)),
                },
            };
            report.changes.push((entry.path.clone(), change));
            if let Some(u) = updated {
                self.repo.manifest.files[i] = u;
            }
        }
        // Every changed file is copied: their bytes go to the disk while
        // the folders are looked at and the head is rendered.
        self.work.start_batch_flush();
        // A folder above an entry whose mode changed here is recorded too.
        let folders_moved = self.refresh_folders_for(args);
        // No snapshot without a change, whatever the parent came from.
        let taken = report
            .changes
            .iter()
            .any(|(_, c)| matches!(c, EntryChange::Content | EntryChange::Mode));
        let changed = match &parent {
            Parent::Head(_) => taken || folders_moved || unknown_change,
            Parent::Doc(doc) => {
                unknown_change || !compare_docs(Some(doc), &self.repo.manifest, true).is_empty()
            }
            Parent::None | Parent::Unreadable => true,
        };
        report.unchanged = !changed;
        if opts.dry_run {
            return Ok(report);
        }
        let message = message.filter(|m| !m.is_empty()).map(str::to_owned);
        // What is recorded agrees with the disk: settled with the head
        // (commit_head or save writes it, pending first).
        let mut tx = self.tx();
        let repo = tx.repo;
        for (i, content) in recorded.iter().copied() {
            let e = &repo.manifest.files[i];
            let content = if e.encrypted || e.template {
                content
            } else {
                e.hash
            };
            tx.settle(e, content, e.mode);
        }
        if !changed {
            // Nothing to record: the newest snapshot already says this
            // (healed blobs, if any, are made durable all the same). What
            // this run changed in the head (it only undid the head's own
            // changes since that snapshot, or put back folder modes a Go
            // sgard dropped) still goes into manifest.yaml.
            self.tx().commit_batch()?;
            if recorded.is_empty() && !folders_moved {
                self.tx().flush_base()?;
            } else {
                self.repo.manifest.updated = self.repo.env.now;
                if let Err(e) = self.save() {
                    self.work.base.rollback();
                    return Err(e);
                }
            }
            self.rest_unresolved(resolved.iter().map(String::as_str))?;
            return Ok(report);
        }
        // commit_head adds the snapshot to the batch and commits it, blobs
        // before the record that names them.
        self.repo.manifest.updated = self.repo.env.now;
        self.repo.manifest.message.clone_from(&message);
        let parent_blobs = match parent {
            Parent::Doc(doc) => Some(crate::history::sorted_blobs(&doc)),
            Parent::Head(mut blobs) => {
                blobs.sort_unstable();
                Some(blobs)
            }
            Parent::None | Parent::Unreadable => None,
        };
        let rec = match self.commit_head_after(
            Reason::Checkpoint,
            message,
            report.new_blobs as u64,
            parent_blobs.as_deref(),
        ) {
            Ok(r) => r,
            Err(e) => {
                // Nothing was recorded, or what follows the record failed:
                // the agreements are not taken here (after a record, the
                // journal on disk holds them for the next command).
                self.work.base.rollback();
                return Err(e);
            }
        };
        report.snapshot = Some(rec.id);
        self.rest_unresolved(resolved.iter().map(String::as_str))?;
        Ok(report)
    }
}

impl Tx<'_> {
    /// Re-stores the blob of an unchanged plain file when it went missing
    /// while the file still holds it. For a file the stat cache vouches for
    /// (unchanged since it was last hashed; its blob was made durable when
    /// that hash entered the manifest) the blob is not looked up: that was
    /// 10,000 `stat`s per checkpoint of a big tree. `verify` finds lost
    /// blobs and `--no-cache checkpoint` re-stores them.
    fn heal(
        &mut self,
        entry: &Entry,
        judged: &Judged,
        report: &mut CheckpointReport,
    ) -> Result<()> {
        if entry.kind != EntryKind::File || entry.encrypted {
            return Ok(());
        }
        let (Some(md), Some(hash)) = (&judged.md, judged.seen.as_ref().and_then(|s| s.content))
        else {
            return Ok(());
        };
        if entry.hash != Some(hash) {
            return Ok(());
        }
        // The file holds exactly the blob's bytes.
        self.work.known_size(hash, md.len());
        if !judged.vouched && !self.repo.store.contains(&hash).unwrap_or(true) {
            let (w, _) = self.store_file(&self.repo.env.expand(&entry.path), None)?;
            if w.new {
                report.new_blobs += 1;
            }
        }
        Ok(())
    }

    pub(crate) fn checkpoint_entry(
        &mut self,
        entry: &Entry,
        found: &mut Found,
        report: &mut CheckpointReport,
    ) -> Result<Option<(Entry, EntryChange)>> {
        let abs = self.repo.env.expand(&entry.path);
        let Some(md) = found.lstat(&abs)? else {
            return Ok(Some((entry.clone(), EntryChange::Missing)));
        };
        let disk = md.kind();
        // The stand-in for a link Windows refused is the link, unchanged.
        if entry.kind == EntryKind::Link
            && crate::standin::is_stand_in(&abs, entry.target.as_deref(), disk)
        {
            return Ok(None);
        }
        if !disk.matches(entry.kind) {
            return Ok(Some((
                entry.clone(),
                EntryChange::TypeChange(format!(
                    "tracked as a {}, now {}",
                    entry.kind,
                    disk.describe()
                )),
            )));
        }
        let mode = md.perm();
        let mode_changed = entry.kind != EntryKind::Link && entry.mode != Some(mode);
        if entry.template {
            // A rendering is never stored in place of its template (mirror
            // up comes here too).
            return Ok(Some((entry.clone(), EntryChange::Template)));
        }
        match entry.kind {
            EntryKind::File if entry.encrypted => {
                let (sha, _) = self.hash_tracked(&entry.path, &abs, &md, found, None)?;
                let same = match self.known_match(entry, sha) {
                    Some(b) => b,
                    None => self.plain_matches(entry, &abs, sha)?,
                };
                if entry.locked {
                    return Ok(
                        (!same || mode_changed).then(|| (entry.clone(), EntryChange::Locked))
                    );
                }
                if !same {
                    let (plain, fmd) = self.repo.read_plain(&abs)?;
                    let (h, mac, new) = self.store_encrypted(&plain, false)?;
                    if new {
                        report.new_blobs += 1;
                    }
                    let mut e = entry.clone();
                    e.hash = Some(h);
                    e.plaintext_mac = Some(Box::new(mac));
                    e.plaintext_hash = None;
                    e.mode = Some(fsx::mode_to_record(fsx::mode_of(&fmd), e.mode, &abs));
                    e.updated = self.repo.env.now;
                    return Ok(Some((e, EntryChange::Content)));
                }
            }
            EntryKind::File => {
                let (hash, vouched) =
                    self.hash_tracked(&entry.path, &abs, &md, found, entry.hash)?;
                let content_changed = entry.hash != Some(hash);
                if entry.locked {
                    return Ok((content_changed || mode_changed)
                        .then(|| (entry.clone(), EntryChange::Locked)));
                }
                // Heal a blob that went missing while the file still holds
                // it. For a file the stat cache vouches for (unchanged since it
                // was last hashed; its blob was made durable when that hash
                // entered the manifest) the blob is not looked up: that was
                // 10,000 `stat`s per checkpoint of a big tree. `verify` finds
                // lost blobs and `--no-cache checkpoint` re-stores them.
                let heal = !content_changed
                    && !vouched
                    && entry
                        .hash
                        .is_some_and(|h| !self.repo.store.contains(&h).unwrap_or(true));
                if heal {
                    let (w, _) = self.store_file(&abs, None)?;
                    if w.new {
                        report.new_blobs += 1;
                    }
                }
                if !content_changed && let Some(h) = entry.hash {
                    // The file holds exactly the blob's bytes.
                    self.work.known_size(h, md.len());
                }
                if content_changed {
                    let (w, fmd) = self.store_file(&abs, found.take_spooled())?;
                    if w.new {
                        report.new_blobs += 1;
                    }
                    let mut e = entry.clone();
                    e.hash = Some(w.hash);
                    e.mode = Some(fsx::mode_to_record(fsx::mode_of(&fmd), e.mode, &abs));
                    e.updated = self.repo.env.now;
                    return Ok(Some((e, EntryChange::Content)));
                }
            }
            EntryKind::Link => {
                let target = fsx::read_link(&abs)?;
                if entry.target.as_deref() != Some(target.as_str()) {
                    if entry.locked {
                        return Ok(Some((entry.clone(), EntryChange::Locked)));
                    }
                    let mut e = entry.clone();
                    e.target = Some(target);
                    e.updated = self.repo.env.now;
                    return Ok(Some((e, EntryChange::Content)));
                }
            }
            EntryKind::Directory => {}
        }
        if mode_changed {
            if entry.locked {
                return Ok(Some((entry.clone(), EntryChange::Locked)));
            }
            let mut e = entry.clone();
            e.mode = Some(mode);
            return Ok(Some((e, EntryChange::Mode)));
        }
        Ok(None)
    }
}

/// An error and its causes on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
