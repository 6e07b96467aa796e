//! `merge`: settle a conflict in a text file with a three-way merge.
//!
//! The three versions: the one this machine last synced (named by its
//! base), the file on disk ("ours") and the repository's ("theirs"). The
//! merge itself is `diffy`'s. The result is written to the disk like a
//! restore (a safety snapshot first, so `undo` brings the file back), and
//! the base moves to the repository's version: the merged file is then a
//! local change (`modified`) that the next `checkpoint` records.

use crate::Tx;
use std::ffi::OsString;
use std::io::Read;

use sgard_manifest::history::Reason;
use sgard_manifest::{Entry, EntryKind};

use crate::diff::MAX_DIFF_BYTES;
use crate::fsx;
use crate::restore::{Op, Step};
use crate::scan::Found;
use crate::{Error, Garden, RestoreAction, RestoreReport, Result, State};

/// What `merge` did with one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MergeOutcome {
    /// Merged without conflicts and written.
    Clean,
    /// Written with this many conflict regions marked (`<<<<<<< ours` …
    /// `>>>>>>> theirs`): edit them away, then checkpoint.
    Conflicts(usize),
    /// Nothing to merge: why.
    NotNeeded(NoMerge),
}

/// Why a file needs no merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoMerge {
    /// Disk and repository agree.
    #[error("it matches the repository")]
    Matches,
    /// Only this machine changed it (a checkpoint records it).
    #[error("only this machine changed it")]
    OnlyHere,
    /// Only the repository changed it (a restore brings it here).
    #[error("only the repository changed it")]
    OnlyRepository,
}

/// Why a file cannot be merged (see [`Error::Unmergeable`]). What happened,
/// in the library's words; the CLI says what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unmergeable {
    /// The entry is targeted away from this machine.
    #[error("is targeted away from this machine")]
    TargetedAway,
    /// Not a file entry.
    #[error("is a {0}; only files can be merged")]
    NotAFile(EntryKind),
    /// A template: its rendering is never merged into its source.
    #[error("is a template: its rendering is never merged into its source")]
    Template,
    /// The markers of an earlier merge are still in the file.
    #[error("still holds the conflict markers of its last merge")]
    Unresolved,
    /// A locked entry: the repository's version wins.
    #[error("is locked: the repository's version wins")]
    Locked,
    /// The disk holds no file there (what it holds).
    #[error("is not a file on disk ({0}); nothing to merge")]
    NotOnDisk(String),
    /// No record of the last sync, so no common version.
    #[error(
        "this machine has no record of the last sync of this file, so there is no common \
         version to merge from"
    )]
    NoBase,
    /// It was something else than a file at the last sync.
    #[error("was not a file when this machine last synced it")]
    NotAFileAtSync,
    /// A version is over the diff limit.
    #[error("is over {MAX_DIFF_BYTES} bytes; too big to merge")]
    TooBig,
    /// The last synced version's blob is gone (its short hash).
    #[error(
        "the version this machine last synced (blob {0}) is no longer in the repository \
         (forgotten and pruned?), so there is nothing to merge from"
    )]
    BaseGone(String),
    /// A version is not text.
    #[error("is not text (in one of its versions)")]
    NotText,
}

impl Garden {
    /// Three-way merges each tracked text file `args` name that is in
    /// conflict (see [`State::Conflict`]), writes the result, and settles
    /// the base on the repository's version. Each file gets its own result.
    ///
    /// # Errors
    /// [`Error::NoMatch`] when `args` select nothing. Per-file errors (no
    /// base to merge from, binary content, a missing blob) are in the list.
    pub fn merge(&mut self, args: &[OsString]) -> Result<Vec<(String, Result<MergeOutcome>)>> {
        self.require_home_writer("merge")?;
        let picked = self.repo.select(args)?;
        let entries: Vec<Entry> = picked
            .into_iter()
            .map(|i| self.repo.manifest.files[i].clone())
            .collect();
        let mut out = Vec::new();
        for e in entries {
            let r = self.merge_one(&e);
            out.push((e.path, r));
        }
        self.tx().flush_base()?;
        Ok(out)
    }

    fn merge_one(&mut self, e: &Entry) -> Result<MergeOutcome> {
        let refuse = |why: Unmergeable| {
            Err(Error::Unmergeable {
                path: e.path.clone(),
                why,
            })
        };
        if !self.repo.applies(e)? {
            return refuse(Unmergeable::TargetedAway);
        }
        if e.kind != EntryKind::File {
            return refuse(Unmergeable::NotAFile(e.kind));
        }
        if e.template {
            return refuse(Unmergeable::Template);
        }
        let j = self.tx().judge(e, true, &Found::Unknown)?;
        match j.state {
            State::Conflict if j.unresolved => {
                return refuse(Unmergeable::Unresolved);
            }
            State::Conflict => {}
            State::Ok => return Ok(MergeOutcome::NotNeeded(NoMerge::Matches)),
            State::Modified => return Ok(MergeOutcome::NotNeeded(NoMerge::OnlyHere)),
            State::Behind => return Ok(MergeOutcome::NotNeeded(NoMerge::OnlyRepository)),
            State::Drifted => return refuse(Unmergeable::Locked),
            _ => {
                return refuse(Unmergeable::NotOnDisk(
                    j.detail.unwrap_or_else(|| j.state.as_str().to_owned()),
                ));
            }
        }
        let Some(base) = self.work.base.get(&e.path).cloned() else {
            return refuse(Unmergeable::NoBase);
        };
        let Some(base_hash) = base.stored.filter(|_| base.kind == EntryKind::File) else {
            return refuse(Unmergeable::NotAFileAtSync);
        };
        let mut ancestor_entry = e.clone();
        ancestor_entry.hash = Some(base_hash);
        ancestor_entry.plaintext_hash = None;
        ancestor_entry.plaintext_mac = None;
        // Nothing over the diff limit is read into memory.
        for h in [base_hash, e.hash.unwrap_or(base_hash)] {
            if self
                .repo
                .blobs_for(&h)
                .size_of(&h)?
                .is_some_and(|n| n > MAX_DIFF_BYTES + 64)
            {
                return refuse(Unmergeable::TooBig);
            }
        }
        let ancestor = self.tx().content_bytes_of(&ancestor_entry).map_err(|err| {
            if err.is_integrity() {
                Error::Unmergeable {
                    path: e.path.clone(),
                    why: Unmergeable::BaseGone(base_hash.short(12)),
                }
            } else {
                err
            }
        })?;
        let theirs = self.tx().content_bytes_of(e)?;
        let abs = self.repo.env.expand(&e.path);
        let (f, md) = fsx::open_regular(&abs)?;
        if md.len() > MAX_DIFF_BYTES {
            return refuse(Unmergeable::TooBig);
        }
        let mut ours = Vec::with_capacity(md.len() as usize);
        f.take(MAX_DIFF_BYTES + 1)
            .read_to_end(&mut ours)
            .map_err(|err| Error::io("reading", &abs, err))?;
        let (Some(a), Some(o), Some(t)) = (text(&ancestor), text(&ours), text(&theirs)) else {
            return refuse(Unmergeable::NotText);
        };
        let (merged, outcome) = match diffy::merge(a, o, t) {
            Ok(m) => (m, MergeOutcome::Clean),
            Err(m) => {
                let n = m.lines().filter(|l| l.starts_with("<<<<<<<")).count();
                (m, MergeOutcome::Conflicts(n.max(1)))
            }
        };
        if self.repo.dry_run {
            return Ok(outcome);
        }
        // The markers written that none of the versions held: while the
        // file holds one, it is an unresolved merge (see `unresolved`).
        let markers = crate::unresolved::markers_written(&merged, [a, o, t]);
        // The merged file goes to disk as a restore would write it: stored
        // first (encrypted for a secret), recorded with a safety snapshot.
        let mut result = e.clone();
        result.mode = Some(fsx::mode_to_record(fsx::mode_of(&md), result.mode, &abs));
        result.updated = self.repo.env.now;
        // Kept with the safety snapshot, not in the repository (which may be
        // read-only): the next checkpoint stores what the user leaves on
        // disk. A secret's result is encrypted there too.
        if let Some(l) = &self.repo.local {
            sgard_store::durable::create_private_dir_all(&l.dir)?;
        }
        self.work.begin_batch_in(self.repo.local_store());
        if e.encrypted {
            let (h, mac, _) = self.tx().store_encrypted(merged.as_bytes(), false)?;
            result.hash = Some(h);
            result.plaintext_mac = Some(Box::new(mac));
            result.plaintext_hash = None;
        } else {
            result.hash = Some(self.tx().put(&mut merged.as_bytes())?.hash);
        }
        self.tx().commit_batch()?;
        let written_hash = result.hash;
        // Remembered before the file is written: a crash after the write
        // must not leave markers a checkpoint would take for a change.
        if markers != 0
            && let Some(h) = written_hash
        {
            self.set_unresolved(&e.path, markers, h)?;
        }
        let step = Step {
            expect: j.seen.clone().map(|s| Some(Box::new(s))),
            path: e.path.clone(),
            op: Op::Write {
                entry: result.into(),
                existed: true,
            },
        };
        let mut report = RestoreReport::default();
        self.execute(
            vec![step],
            Reason::Restore,
            &format!("merge {}", e.path),
            &mut report,
        )?;
        if let Some((_, err)) = report.failures.into_iter().next() {
            return Err(err);
        }
        let written = report
            .actions
            .iter()
            .any(|(p, a)| p == &e.path && matches!(a, RestoreAction::Overwritten));
        if !written {
            return Err(Error::Conflict(format!(
                "{} changed on disk while it was being merged; nothing was written (merge again)",
                e.path
            )));
        }
        // The repository's version is now part of what is on disk.
        self.tx().settle_to_head(e);
        if markers == 0 {
            self.drop_unresolved([e.path.as_str()])?;
        }
        Ok(outcome)
    }
}

impl Tx<'_> {
    /// Settles the base of `e` (the head's entry) on the repository's
    /// version, whatever the disk holds: the disk then shows as a local
    /// change against it.
    fn settle_to_head(&mut self, e: &Entry) {
        if let Some(content) = self.content_of(e) {
            self.settle(e, Some(content), e.mode);
        }
    }

    /// The plaintext of a file entry's blob, verified.
    fn content_bytes_of(&mut self, e: &Entry) -> Result<Vec<u8>> {
        if e.encrypted {
            return Ok(self.stored_plaintext(e)?.to_vec());
        }
        self.repo.blob_of(e)
    }
}

fn text(b: &[u8]) -> Option<&str> {
    if b.contains(&0) {
        return None;
    }
    std::str::from_utf8(b).ok()
}
