//! `mirror up` / `mirror down`: make a folder in the repository match the
//! disk, or the disk match the repository.

use crate::why::{Remedy, Why};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use sgard_manifest::{EntryKind, path_is_under};

use crate::checkpoint::{EntryChange, error_chain};
use crate::fsx::{self, DiskKind};
use crate::own::{ANOTHER_REPOSITORY, What};
use crate::scan::Found;
use sgard_manifest::history::Reason;

use crate::restore::{Op, Step};
use crate::{
    AddOptions, AddReport, Error, Garden, Prompt, RestoreAction, RestoreOptions, RestoreReport,
    Result, State,
};

/// The result of [`Garden::mirror_up`].
#[derive(Debug, Default)]
pub struct MirrorUpReport {
    /// Paths newly tracked.
    pub added: Vec<String>,
    /// Entries dropped because their path is gone.
    pub removed: Vec<String>,
    /// Entries whose content, target or mode was refreshed.
    pub refreshed: Vec<String>,
    /// Entries left alone, with why (locked, targeted away, failed).
    pub kept: Vec<(String, Why)>,
    /// Paths skipped while walking (FIFOs, sockets…), with why.
    pub skipped: Vec<(String, Why)>,
}

/// The result of [`Garden::mirror_down`].
#[derive(Debug, Default)]
pub struct MirrorDownReport {
    /// What the restore part did.
    pub restore: RestoreReport,
    /// Untracked files deleted (in a dry run: that would be deleted).
    pub deleted: Vec<String>,
    /// Untracked files kept because the user said no (dry run: would ask).
    pub kept: Vec<String>,
    /// Folders removed because deleting emptied them.
    pub removed_dirs: Vec<String>,
    /// Walk errors (deletion failures are in `restore.failures`).
    pub failures: Vec<(String, Error)>,
    /// Folders the walk passed by (other sgard repositories), with why.
    pub skipped: Vec<(String, Why)>,
}

impl Garden {
    fn mirror_roots(&self, dirs: &[OsString]) -> Result<Vec<(PathBuf, String)>> {
        let mut roots = Vec::new();
        for d in dirs {
            let abs = self.repo.env.resolve(d);
            match fsx::lstat(&abs)? {
                None => return Err(Error::NotFound(abs)),
                Some(md) if DiskKind::of(&md) != DiskKind::Dir => {
                    return Err(Error::Unsupported {
                        path: abs.display().to_string(),
                        reason: "is not a folder; mirror works on folders".into(),
                    });
                }
                Some(_) => {}
            }
            self.refuse_own(&abs)?;
            let tilde = self.repo.env.to_tilde(&abs)?;
            roots.push((abs, tilde));
        }
        Ok(roots)
    }

    /// Makes the repository match each folder: tracks new files and symlinks
    /// (exclusions respected), drops entries whose path is gone, refreshes
    /// changed entries. Each entry keeps its flags: locked entries are not
    /// refreshed or dropped, entries targeted away from this machine are left
    /// alone, and an encrypted entry is never replaced by plaintext.
    ///
    /// # Errors
    /// [`Error::NotFound`] or [`Error::Unsupported`] for a bad folder; read
    /// and store errors while adding.
    pub fn mirror_up(&mut self, dirs: &[OsString]) -> Result<MirrorUpReport> {
        let r = self.mirror_up_inner(dirs);
        if r.is_err() {
            self.work.base.rollback();
        }
        r
    }

    fn mirror_up_inner(&mut self, dirs: &[OsString]) -> Result<MirrorUpReport> {
        let roots = self.mirror_roots(dirs)?;
        let mut report = MirrorUpReport::default();
        let mut add = AddReport::default();
        if !self.repo.dry_run {
            self.tx().begin_batch();
        }
        for (abs, _) in &roots {
            self.add_tree(abs, &AddOptions::default(), true, &mut add)?;
        }
        report.added = add.entries.into_iter().map(|(p, _)| p).collect();
        report.skipped = add.skipped;
        let mut i = 0;
        while i < self.repo.manifest.files.len() {
            let e = self.repo.manifest.files[i].clone();
            let under = roots.iter().any(|(_, t)| path_is_under(&e.path, t));
            if !under || report.added.contains(&e.path) {
                i += 1;
                continue;
            }
            if !self.repo.applies(&e)? {
                report
                    .kept
                    .push((e.path.clone(), "targeted away from this machine".into()));
                i += 1;
                continue;
            }
            if e.locked {
                report.kept.push((e.path.clone(), "locked".into()));
                i += 1;
                continue;
            }
            // Only what changed here: another machine's change (behind, a
            // conflict) is never reverted, and an entry missing here is
            // dropped only if this machine had it as the repository has it
            // (it was deleted here, not added or changed elsewhere).
            match self.tx().judge(&e, true, &Found::Unknown) {
                Ok(j) if j.state == State::Ok => {
                    i += 1;
                    continue;
                }
                Ok(j) if matches!(j.state, State::Behind | State::Conflict) => {
                    report.kept.push((
                        e.path.clone(),
                        Why::new(
                            format!(
                                "{}: {}; not taken from disk",
                                j.state.as_str(),
                                j.detail.unwrap_or_default()
                            ),
                            Remedy::AddFile,
                        ),
                    ));
                    i += 1;
                    continue;
                }
                Ok(j) if j.state == State::Missing => {
                    let content = self.tx().content_of(&e);
                    let deleted_here = self
                        .work
                        .base
                        .get(&e.path)
                        .is_some_and(|b| b.matches_repo(&e, content));
                    if !deleted_here {
                        report.kept.push((
                            e.path.clone(),
                            Why::new(
                                "missing here, but this machine never synced this version (added \
                                 or changed on another machine); kept",
                                Remedy::RemoveDrops,
                            ),
                        ));
                        i += 1;
                        continue;
                    }
                }
                _ => {}
            }
            if self.repo.dry_run {
                // What the judgement says, with nothing stored.
                match self.tx().judge(&e, true, &Found::Unknown).map(|j| j.state) {
                    Ok(State::Missing) => {
                        self.repo.manifest.files.remove(i);
                        report.removed.push(e.path);
                        continue;
                    }
                    Ok(State::Modified) => report.refreshed.push(e.path),
                    Ok(State::TypeChange) => {
                        report
                            .kept
                            .push((e.path, "its type changed on disk".into()));
                    }
                    Ok(_) => {}
                    Err(err) => report.kept.push((e.path, error_chain(&err).into())),
                }
                i += 1;
                continue;
            }
            let mut scratch = crate::CheckpointReport::default();
            match self
                .tx()
                .checkpoint_entry(&e, &mut Found::Unknown, &mut scratch)
            {
                Ok(Some((_, EntryChange::Missing))) => {
                    self.repo.manifest.files.remove(i);
                    report.removed.push(e.path);
                    continue;
                }
                Ok(Some((updated, EntryChange::Content | EntryChange::Mode))) => {
                    self.repo.manifest.files[i] = updated;
                    let mut tx = self.tx();
                    let u = &tx.repo.manifest.files[i];
                    let content = tx.content_of(u);
                    tx.settle(u, content, u.mode);
                    report.refreshed.push(e.path);
                }
                Ok(Some((_, EntryChange::TypeChange(why)))) => {
                    report.kept.push((e.path, why.into()));
                }
                Ok(Some((_, other))) => report.kept.push((e.path, format!("{other:?}").into())),
                Ok(None) => {}
                Err(err) => report.kept.push((e.path, error_chain(&err).into())),
            }
            i += 1;
        }
        let under: Vec<OsString> = roots.iter().map(|(a, _)| a.clone().into()).collect();
        self.refresh_folders_for(&under);
        self.tx().commit_batch()?;
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        self.tx().flush_base()?;
        Ok(report)
    }

    /// Makes each folder match the repository: restores its entries with the
    /// normal rules (prompts, locks, targeting), then deletes untracked files
    /// and symlinks in it (asking each time unless `opts.force`), and removes
    /// folders that this emptied. Never deletes excluded paths, tracked
    /// folders, special files (FIFOs, sockets, devices) or anything of
    /// sgard's own (the repository, its machine's folders, another
    /// repository, temp files: see [`crate::own`]).
    ///
    /// # Errors
    /// [`Error::NoMatch`] when a folder holds no tracked entry (sgard then
    /// refuses to empty it); bad folders.
    pub fn mirror_down(
        &mut self,
        dirs: &[OsString],
        opts: RestoreOptions,
        prompt: &mut dyn Prompt,
    ) -> Result<MirrorDownReport> {
        let roots = self.mirror_roots(dirs)?;
        for (abs, tilde) in &roots {
            if !self
                .repo
                .manifest
                .files
                .iter()
                .any(|e| path_is_under(&e.path, tilde))
            {
                return Err(Error::Unsupported {
                    path: abs.display().to_string(),
                    reason: "no tracked entries under it; refusing to delete its contents".into(),
                });
            }
        }
        let files = self.repo.manifest.files.clone();
        let (restore, mut steps) = self.tx().plan_restore(&files, dirs, opts, prompt)?;
        let mut report = MirrorDownReport {
            restore,
            ..MirrorDownReport::default()
        };
        let restore_steps = steps.len();
        let own = self.own_dirs();
        for (root, _) in &roots {
            let mut walk = walkdir::WalkDir::new(root)
                .follow_links(false)
                .sort_by_file_name()
                .into_iter();
            while let Some(item) = walk.next() {
                let ent = match item {
                    Ok(e) => e,
                    Err(e) => {
                        let p = e.path().map_or_else(|| root.clone(), Path::to_path_buf);
                        report.failures.push((
                            p.display().to_string(),
                            Error::io("walking", p.clone(), e.into()),
                        ));
                        continue;
                    }
                };
                let path = ent.path();
                let Ok(md) = ent.metadata() else { continue };
                let kind = DiskKind::of(&md);
                let Ok(tilde) = self.repo.env.to_tilde(path) else {
                    continue;
                };
                let excluded = self.repo.manifest.excluded_by(&tilde).is_some();
                let mine = (!excluded).then(|| own.met(path, &md)).flatten();
                if mine
                    .as_ref()
                    .is_some_and(|o| o.what == What::OtherRepository)
                {
                    report
                        .skipped
                        .push((tilde.clone(), ANOTHER_REPOSITORY.into()));
                }
                if kind == DiskKind::Dir {
                    if excluded || mine.is_some() {
                        walk.skip_current_dir();
                    }
                    continue;
                }
                if excluded
                    || mine.is_some()
                    || self.repo.manifest.get(&tilde).is_some()
                    || !matches!(kind, DiskKind::File | DiskKind::Link)
                {
                    continue;
                }
                if opts.dry_run {
                    if opts.force {
                        report.deleted.push(tilde);
                    } else {
                        report.kept.push(tilde);
                    }
                    continue;
                }
                if !opts.force && !prompt.confirm(&format!("Delete untracked file {tilde}?")) {
                    report.kept.push(tilde);
                    continue;
                }
                steps.push(Step {
                    path: tilde,
                    op: Op::Delete,
                    expect: None,
                });
            }
        }
        if opts.dry_run {
            for s in &steps[..restore_steps] {
                report.restore.actions.push((s.path.clone(), s.action()));
            }
            report.restore.sort();
            return Ok(report);
        }
        let deletions: Vec<(String, PathBuf)> = steps[restore_steps..]
            .iter()
            .map(|s| (s.path.clone(), self.repo.env.expand(&s.path)))
            .collect();
        let what = format!(
            "mirror down {}",
            roots
                .iter()
                .map(|(_, t)| t.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        );
        self.execute(steps, Reason::Restore, &what, &mut report.restore)?;
        // Split the deletions back out of the restore report.
        let mut emptied: BTreeSet<PathBuf> = BTreeSet::new();
        let mut actions = Vec::new();
        for (p, a) in std::mem::take(&mut report.restore.actions) {
            if a == RestoreAction::Deleted {
                if let Some((_, abs)) = deletions.iter().find(|(t, _)| *t == p)
                    && let Some(parent) = abs.parent()
                    && !roots.iter().any(|(r, _)| r == parent)
                {
                    emptied.insert(parent.to_path_buf());
                }
                report.deleted.push(p);
            } else {
                actions.push((p, a));
            }
        }
        report.restore.actions = actions;
        report.restore.sort();
        self.remove_emptied(&roots, emptied, &mut report);
        Ok(report)
    }

    fn remove_emptied(
        &self,
        roots: &[(PathBuf, String)],
        mut candidates: BTreeSet<PathBuf>,
        report: &mut MirrorDownReport,
    ) {
        // Deepest first: a BTreeSet of paths pops children after parents, so
        // take the longest each time.
        while let Some(dir) = candidates
            .iter()
            .max_by_key(|p| p.components().count())
            .cloned()
        {
            candidates.remove(&dir);
            if roots.iter().any(|(r, _)| r == &dir)
                || !roots.iter().any(|(r, _)| dir.starts_with(r))
            {
                continue;
            }
            let Ok(tilde) = self.repo.env.to_tilde(&dir) else {
                continue;
            };
            let tracked_dir = self
                .repo
                .manifest
                .get(&tilde)
                .is_some_and(|e| e.kind == EntryKind::Directory);
            if tracked_dir || self.repo.manifest.excluded_by(&tilde).is_some() {
                continue;
            }
            let empty = fs::read_dir(&dir)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            if empty && fs::remove_dir(&dir).is_ok() {
                report.removed_dirs.push(tilde);
                if let Some(p) = dir.parent() {
                    candidates.insert(p.to_path_buf());
                }
            }
        }
    }
}
