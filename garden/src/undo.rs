//! `undo`: reverse the most recent change sgard made to the home folder.

use crate::Tx;
use sgard_manifest::history::Reason;
use sgard_manifest::{Entry, Timestamp};

use crate::fsx::{self, DiskKind};
use crate::restore::{Op, Step};
use crate::{Error, Garden, RestoreAction, RestoreReport, Result};

/// The file, in this home's local log, naming the latest restore-like
/// operation when it changed nothing (and so left no safety snapshot).
const NOOP_FILE: &str = "latest-changed-nothing";

/// What [`Garden::undo`] would reverse, for the user to see (and confirm)
/// before anything changes.
#[derive(Clone, Debug)]
pub struct UndoSummary {
    /// The operation: its record's description (`restore --at 3f2a…`,
    /// `pull from …`), else its kind.
    pub operation: String,
    /// When it was done.
    pub time: Timestamp,
    /// The paths it changed, sorted.
    pub paths: Vec<String>,
    /// This machine's latest restore-like operation, when it changed
    /// nothing (so it left nothing to undo, and `undo` reaches past it to
    /// [`UndoSummary::operation`]): what it was and when.
    pub latest_changed_nothing: Option<(String, Timestamp)>,
}

/// The result of [`Garden::undo`].
#[derive(Debug, Default)]
pub struct UndoReport {
    /// The operation undone: its record's reason and message.
    pub undone: String,
    /// What happened to each path.
    pub restore: RestoreReport,
}

impl Garden {
    /// Reverses the most recent restore-like operation this home did
    /// (restore, mirror down, merge, undo, pull; never another machine's in
    /// a shared repository): puts back what it overwrote and removes what it
    /// created, but only where the disk still holds what it wrote; a path
    /// changed since is reported as a conflict and left alone. The undo is
    /// itself recorded, so undoing again redoes.
    ///
    /// # Errors
    /// [`Error::Snapshot`] when there is nothing to undo or its snapshots are
    /// gone; snapshot integrity errors.
    pub fn undo(&mut self, dry_run: bool) -> Result<UndoReport> {
        let (a_idx, b_idx) = self.undo_target()?;
        let a_rec = self.repo.history.records[a_idx].clone();
        let b_id = self.repo.history.records[b_idx].id;
        let (after, before, paths) = self.undo_docs(a_idx, b_idx)?;
        let mut report = UndoReport {
            undone: format!(
                "{} {}{}",
                a_rec.reason,
                a_rec.id.short(12),
                a_rec
                    .message
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            ),
            ..UndoReport::default()
        };
        let mut steps = Vec::new();
        for p in paths {
            let abs = self.repo.env.expand(&p);
            let was = before.get(&p);
            let wrote = after.get(&p);
            let disk = match self.disk_entry(&p, &abs) {
                Ok(d) => d,
                Err(e) => {
                    report.restore.failures.push((p.clone(), e));
                    report
                        .restore
                        .actions
                        .push((p, RestoreAction::Failed("unreadable".into())));
                    continue;
                }
            };
            let mut is = |rec: Option<&Entry>| self.tx().disk_is(disk.as_ref(), rec, &abs);
            let (is_was, is_wrote) = match (is(was), is(wrote)) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => {
                    let msg = crate::checkpoint::error_chain(&e);
                    report.restore.failures.push((p.clone(), e));
                    report.restore.actions.push((p, RestoreAction::Failed(msg)));
                    continue;
                }
            };
            if is_was {
                report.restore.actions.push((p, RestoreAction::UpToDate));
                continue;
            }
            if !is_wrote {
                report.restore.actions.push((
                    p,
                    RestoreAction::Conflict("changed since; left as it is".into()),
                ));
                continue;
            }
            let op = match was {
                None => Op::Delete,
                Some(e) => Op::Write {
                    entry: e.clone().into(),
                    existed: disk.is_some(),
                },
            };
            // undo compared the disk with what it expects just now.
            steps.push(Step {
                path: p,
                op,
                expect: None,
            });
        }
        if dry_run {
            for s in &steps {
                let action = match &s.op {
                    Op::Delete => RestoreAction::Deleted,
                    Op::Write { existed: true, .. } => RestoreAction::Overwritten,
                    _ => RestoreAction::Created,
                };
                report.restore.actions.push((s.path.clone(), action));
            }
        } else {
            let what = format!("undo {}", a_rec.id.short(12));
            // What the base said of these paths before the operation being
            // undone (saved by it); without that record, no base at all for
            // them: every difference is then a question, never a revert.
            let prior = self
                .repo
                .local
                .as_ref()
                .and_then(|l| crate::base::load_prior(&l.dir.join("bases").join(b_id.to_hex())))
                .map(|v| v.into_iter().collect())
                .unwrap_or_default();
            self.execute_with(
                steps,
                Reason::Undo,
                &what,
                &mut report.restore,
                Some(&prior),
            )?;
        }
        report.restore.sort();
        Ok(report)
    }

    /// What [`Garden::undo`] would reverse: the operation, its time, the
    /// paths it changed, and whether this machine's latest restore-like
    /// operation changed nothing (see [`UndoSummary`]).
    ///
    /// # Errors
    /// As [`Garden::undo`].
    pub fn undo_summary(&mut self) -> Result<UndoSummary> {
        let (a_idx, b_idx) = self.undo_target()?;
        let (_, _, paths) = self.undo_docs(a_idx, b_idx)?;
        let rec = &self.repo.history.records[a_idx];
        Ok(UndoSummary {
            operation: rec
                .message
                .clone()
                .unwrap_or_else(|| rec.reason.as_str().to_owned()),
            time: rec.time,
            paths,
            latest_changed_nothing: self.latest_changed_nothing(),
        })
    }

    /// The record of the operation `undo` reverses (this home's newest
    /// restore-like one) and of its `before-restore` snapshot.
    fn undo_target(&self) -> Result<(usize, usize)> {
        self.require_history()?;
        let recs = &self.repo.history.records;
        let a_idx = recs
            .iter()
            .rposition(|r| r.reason.is_restore_like() && self.is_mine(r))
            .ok_or_else(|| {
                Error::Snapshot("nothing to undo: no restore on this machine in the history".into())
            })?;
        let b_idx = self
            .repo
            .parent_index(a_idx)
            .filter(|&i| recs[i].reason == Reason::BeforeRestore)
            .ok_or_else(|| {
                Error::Snapshot(format!(
                    "cannot undo {}: its before-restore snapshot is not in the history",
                    recs[a_idx].id.short(12)
                ))
            })?;
        Ok((a_idx, b_idx))
    }

    /// The after and before documents of the operation, and every path
    /// either names, sorted.
    fn undo_docs(
        &mut self,
        a_idx: usize,
        b_idx: usize,
    ) -> Result<(
        sgard_manifest::Manifest,
        sgard_manifest::Manifest,
        Vec<String>,
    )> {
        let (a, b) = (
            self.repo.history.records[a_idx].id,
            self.repo.history.records[b_idx].id,
        );
        let after = self.snapshot_doc(&a)?;
        let before = self.snapshot_doc(&b)?;
        let mut paths: Vec<String> = after.files.iter().map(|e| e.path.clone()).collect();
        paths.extend(after.absent.iter().cloned());
        paths.extend(before.files.iter().map(|e| e.path.clone()));
        paths.extend(before.absent.iter().cloned());
        paths.sort();
        paths.dedup();
        Ok((after, before, paths))
    }

    /// Notes that a restore-like operation (`what`) just changed nothing, so
    /// a later `undo` does not reach past it without saying so (best
    /// effort: the note only adds a question).
    pub(crate) fn note_changed_nothing(&self, what: &str) {
        let Some(l) = &self.repo.local else { return };
        // The note names the newest restore-like record of this machine it
        // speaks past: a record added after it (even one whose command was
        // cut off before it could clear the note) makes the note stale.
        let text = format!(
            "{}\n{}\n{}\n",
            self.repo.env.now,
            what.replace('\n', " "),
            self.newest_restore_like().unwrap_or_default()
        );
        if sgard_store::durable::create_private_dir_all(&l.dir).is_ok() {
            let _ =
                sgard_store::durable::write_atomic(&l.dir.join(NOOP_FILE), text.as_bytes(), 0o600);
        }
    }

    /// Forgets that note: an operation that changed something was recorded.
    pub(crate) fn clear_changed_nothing(&self) {
        if let Some(l) = &self.repo.local {
            let _ = std::fs::remove_file(l.dir.join(NOOP_FILE));
        }
    }

    /// The latest restore-like operation, if it changed nothing: what it
    /// was and when (see [`Garden::note_changed_nothing`]).
    fn latest_changed_nothing(&self) -> Option<(String, Timestamp)> {
        let l = self.repo.local.as_ref()?;
        let text = sgard_store::durable::read_regular_to_string(&l.dir.join(NOOP_FILE)).ok()?;
        let mut lines = text.lines();
        let time = Timestamp::parse(lines.next()?).ok()?;
        let what = lines.next()?.to_owned();
        // A note without the record line (an older sgard's) is taken as is.
        if let Some(past) = lines.next()
            && past != self.newest_restore_like().unwrap_or_default()
        {
            return None;
        }
        Some((what, time))
    }

    /// This machine's newest restore-like record, as how many there are and
    /// the newest one's id (two restores of the same content at the same
    /// time have the same id), if any.
    fn newest_restore_like(&self) -> Option<String> {
        let mine = || {
            self.repo
                .history
                .records
                .iter()
                .filter(|r| r.reason.is_restore_like() && self.is_mine(r))
        };
        let newest = mine().last()?;
        Some(format!("{} {}", mine().count(), newest.id.to_hex()))
    }

    /// The disk state of a path as an entry, without storing anything.
    fn disk_entry(&self, path: &str, abs: &std::path::Path) -> Result<Option<Entry>> {
        let Some(md) = fsx::lstat(abs)? else {
            return Ok(None);
        };
        let kind = DiskKind::of(&md);
        let mut e = match kind {
            DiskKind::File => Entry::new(
                path.into(),
                sgard_manifest::EntryKind::File,
                self.repo.env.now,
            ),
            DiskKind::Link => Entry::new(
                path.into(),
                sgard_manifest::EntryKind::Link,
                self.repo.env.now,
            ),
            DiskKind::Dir => Entry::new(
                path.into(),
                sgard_manifest::EntryKind::Directory,
                self.repo.env.now,
            ),
            _ => {
                return Err(Error::Unsupported {
                    path: path.into(),
                    reason: format!("is {}", kind.describe()),
                });
            }
        };
        e.mode = Some(fsx::mode_to_record(fsx::mode_of(&md), e.mode, abs));
        match kind {
            DiskKind::File => e.hash = Some(fsx::hash_file(abs)?.0),
            DiskKind::Link => e.target = Some(fsx::read_link(abs)?),
            _ => {}
        }
        Ok(Some(e))
    }
}

impl Garden {}

impl Tx<'_> {
    /// Whether the disk state (from `disk_entry`: a file's `hash` is the
    /// SHA-256 of its plaintext) equals a recorded state: content, target
    /// and mode. Encrypted recorded states are compared by plaintext.
    fn disk_is(
        &mut self,
        disk: Option<&Entry>,
        rec: Option<&Entry>,
        abs: &std::path::Path,
    ) -> Result<bool> {
        let (d, r) = match (disk, rec) {
            (None, None) => return Ok(true),
            (Some(d), Some(r)) => (d, r),
            _ => return Ok(false),
        };
        if d.kind != r.kind || d.target != r.target {
            return Ok(false);
        }
        let mode_ok =
            d.kind == sgard_manifest::EntryKind::Link || r.mode.is_none() || d.mode == r.mode;
        if !mode_ok {
            return Ok(false);
        }
        if r.template {
            // A template that asks a password manager: what sgard last
            // wrote there (this machine's record) says, when it is of this
            // source; else it is rendered (undo writes, so it may ask).
            if self.is_secret_template(r)? == Some(true) {
                if let Some(b) = self.work.base.get(&r.path)
                    && b.stored == r.hash
                    && b.content.is_some()
                {
                    return Ok(d.hash.is_some() && d.hash == b.content);
                }
                return Ok(
                    d.hash.is_some() && d.hash == Some(sgard_store::Hash::of(&self.rendering(r)?))
                );
            }
            return Ok(d.hash.is_some() && d.hash == self.rendered_hash(r, true)?);
        }
        match (r.encrypted, d.hash) {
            (true, Some(sha)) => self.plain_matches(r, abs, sha),
            _ => Ok(d.hash == r.hash),
        }
    }
}
