//! `purge`: remove every stored version of some paths' content from the
//! repository (or every one but the current), for a secret that leaked
//! into it.
//!
//! The snapshots that named a purged version are rewritten with those
//! entries marked purged (`purged: <hash>` instead of `hash:`; stored anew:
//! their ids change, and every record naming one, as its id, its parent or
//! the head before it, follows); `<repo>/purges.yaml` records what was
//! purged, when, and which snapshots lost entries; then everything nothing
//! references any more is deleted, as `prune` does: the purged contents,
//! their chunks, and the old snapshot documents.
//!
//! A content also stored under a path not purged is refused (deleting it
//! would break that path); naming that path too purges it as well.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;

use sgard_manifest::history::{HISTORY_FILE, History};
use sgard_manifest::purges::{PURGES_FILE, Purge, PurgeLog};
use sgard_manifest::{Entry, Manifest};
use sgard_store::Hash;

use crate::identity;
use crate::{Error, Garden, PruneReport, Result};

/// What [`Garden::purge`] did (or, for a dry run, would do).
#[derive(Debug, Default)]
pub struct PurgeReport {
    /// The paths purged (`~/…`), each with how many of its stored versions
    /// went.
    pub paths: BTreeMap<String, usize>,
    /// The stored contents removed.
    pub versions: usize,
    /// The snapshots rewritten.
    pub snapshots: usize,
    /// Entries taken out of the current manifest (their current version
    /// was purged too): no longer tracked.
    pub untracked: Vec<String>,
    /// What the sweep after it deleted.
    pub swept: PruneReport,
    /// Of a purge applied here ([`Garden::apply_purge`]): entries whose
    /// current version here is a purged content, which stays stored.
    pub kept: Vec<String>,
}

/// The content an entry names: its hash, or why there is none (a
/// version `sgard purge` removed, or an entry that is no file).
pub(crate) fn content_hash(e: &Entry) -> Result<Hash> {
    match (e.hash, e.purged.as_deref().copied()) {
        (Some(h), _) => Ok(h),
        (None, Some(_)) => Err(Error::Invalid(format!(
            "{}: that version's content was purged (see `sgard log`)",
            e.path
        ))),
        (None, None) => Err(Error::Invalid(format!("{}: no hash", e.path))),
    }
}

/// The new ids of `renamed`, sorted.
fn new_ids(renamed: &BTreeMap<Hash, Hash>) -> Vec<Hash> {
    let mut v: Vec<Hash> = renamed.values().copied().collect();
    v.sort();
    v.dedup();
    v
}

/// The options of [`Garden::purge`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PurgeOptions {
    /// Keep each path's current version (a file encrypted after it
    /// leaked): only older versions go.
    pub keep_current: bool,
    /// Say what would go; change nothing.
    pub dry_run: bool,
}

/// Whether `path` is `target` or under it.
fn under(path: &str, target: &str) -> bool {
    path == target
        || path
            .strip_prefix(target)
            .is_some_and(|rest| rest.starts_with('/') || target.ends_with('/'))
}

fn targeted<'a>(e: &Entry, targets: &'a [String]) -> Option<&'a String> {
    targets.iter().find(|t| under(&e.path, t))
}

impl Garden {
    /// Removes the stored versions of `args`' content (see the module).
    ///
    /// # Errors
    /// [`Error::Conflict`] when a content to purge is also stored under a
    /// path not purged, or nothing by these paths was ever stored; history,
    /// store and I/O errors. Nothing changes unless every snapshot could
    /// be rewritten.
    pub fn purge(&mut self, args: &[&OsStr], opts: PurgeOptions) -> Result<PurgeReport> {
        self.require_history()?;
        if !opts.dry_run {
            self.require_exclusive("purge")?;
        }
        let mut targets = Vec::new();
        for a in args {
            let abs = self.repo.env.resolve(a);
            targets.push(self.repo.env.to_tilde(&abs)?);
        }
        targets.sort();
        targets.dedup();

        // Every document: the head manifest and each snapshot.
        let ids: BTreeSet<Hash> = self.repo.history.records.iter().map(|r| r.id).collect();
        let mut docs: BTreeMap<Hash, Manifest> = BTreeMap::new();
        for id in &ids {
            docs.insert(*id, self.tx().snapshot_doc(id)?);
        }
        let current: BTreeMap<&str, Option<Hash>> = self
            .repo
            .manifest
            .files
            .iter()
            .filter(|e| targeted(e, &targets).is_some())
            .map(|e| (e.path.as_str(), e.hash))
            .collect();

        // The contents to remove, and who else holds them.
        let mut purge: BTreeMap<Hash, String> = BTreeMap::new();
        let mut others: HashMap<Hash, String> = HashMap::new();
        let all_entries = docs
            .values()
            .flat_map(|d| d.files.iter())
            .chain(self.repo.manifest.files.iter());
        for e in all_entries {
            let Some(h) = e.hash else { continue };
            if targeted(e, &targets).is_none() {
                others.entry(h).or_insert_with(|| e.path.clone());
                continue;
            }
            let is_current = current.get(e.path.as_str()) == Some(&Some(h));
            if opts.keep_current && is_current {
                continue;
            }
            purge.entry(h).or_insert_with(|| e.path.clone());
        }
        if let Some(d) = self.repo.manifest.data {
            others
                .entry(d)
                .or_insert_with(|| "the template data".into());
        }
        // With --keep-current the current versions stay whatever else holds them.
        if opts.keep_current {
            for h in current.values().flatten() {
                purge.remove(h);
            }
        }
        let shared: Vec<String> = purge
            .iter()
            .filter_map(|(h, p)| others.get(h).map(|o| format!("{p} (also stored as {o})")))
            .collect();
        if !shared.is_empty() {
            return Err(Error::Conflict(format!(
                "a content to purge is also stored under a path not named: {}; nothing \
                 was purged",
                shared.join(", ")
            )));
        }
        let mut report = PurgeReport::default();
        for p in purge.values() {
            *report.paths.entry(p.clone()).or_insert(0) += 1;
        }
        report.versions = purge.len();
        if purge.is_empty() {
            // A purge cut off after rewriting the history left contents
            // nothing references: the sweep finishes it.
            if !opts.dry_run {
                report.swept = self.prune()?;
            }
            return Ok(report);
        }

        // The rewritten snapshots.
        let touched = docs
            .values()
            .filter(|d| {
                d.files
                    .iter()
                    .any(|e| e.hash.is_some_and(|h| purge.contains_key(&h)))
            })
            .count();
        report.snapshots = touched;
        if opts.dry_run {
            return Ok(report);
        }
        report.untracked = self
            .repo
            .manifest
            .files
            .iter()
            .filter(|e| e.hash.is_some_and(|h| purge.contains_key(&h)))
            .map(|e| e.path.clone())
            .collect();
        // Read before anything is written: a log that cannot be read is
        // never written over, and then nothing changes.
        let log_path = self.repo.root.join(PURGES_FILE);
        let mut log = PurgeLog::load(&log_path)?;
        let gone: BTreeSet<Hash> = purge.keys().copied().collect();
        let renamed = self.rewrite_snapshots(&gone, docs)?;
        // The purge log first: a purge cut off after it says what it meant
        // to do, and running it again finishes it.
        let shared: BTreeSet<Hash> = self
            .repo
            .repo_history
            .records
            .iter()
            .map(|r| r.id)
            .collect();
        let mut record = Purge {
            time: self.repo.env.now,
            host: identity::short_hostname(&self.repo.env.hostname),
            paths: report.paths.keys().cloned().collect(),
            kept_current: opts.keep_current,
            versions: report.versions as u64,
            snapshots: Vec::new(),
            renamed: renamed
                .iter()
                .filter(|(old, _)| shared.contains(old))
                .map(|(o, n)| (*o, *n))
                .collect(),
            signature: None,
        };
        record.renamed.sort();
        record.snapshots = new_ids(&renamed);
        log.purges.push(record);
        log.save(&log_path)?;
        self.repo.env.crash_point("purge-logged");
        self.rename_history(&renamed)?;
        if !report.untracked.is_empty() {
            self.repo
                .manifest
                .files
                .retain(|e| !e.hash.is_some_and(|h| purge.contains_key(&h)));
            self.repo.manifest.updated = self.repo.env.now;
            self.save()?;
        }
        self.repo.env.crash_point("purge-rewritten");
        report.swept = self.prune()?;
        Ok(report)
    }

    /// Every snapshot of the history (this home's and the shared one) that
    /// names a content of `gone`, stored anew with those entries marked
    /// purged: each one's old id and new id. `docs` holds the snapshots
    /// already read (by id); the others are read here.
    fn rewrite_snapshots(
        &mut self,
        gone: &BTreeSet<Hash>,
        mut docs: BTreeMap<Hash, Manifest>,
    ) -> Result<BTreeMap<Hash, Hash>> {
        let ids: BTreeSet<Hash> = self.repo.history.records.iter().map(|r| r.id).collect();
        let mut renamed = BTreeMap::new();
        for id in ids {
            let mut doc = match docs.remove(&id) {
                Some(d) => d,
                None => self.tx().snapshot_doc(&id)?,
            };
            if !crate::rules::mark_purged(&mut doc, gone) {
                continue;
            }
            let (repo_store, local_store) = self.repo.stores();
            let store = crate::history::pick_store(repo_store, local_store, &id);
            let w = store.write_from(&mut |out| doc.write_yaml(out))?;
            renamed.insert(id, w.hash);
        }
        Ok(renamed)
    }

    /// Renames snapshots in the shared history and this home's own.
    fn rename_history(&mut self, renamed: &BTreeMap<Hash, Hash>) -> Result<()> {
        let map: HashMap<Hash, Hash> = renamed.iter().map(|(a, b)| (*a, *b)).collect();
        let remap = |h: &History| History {
            records: crate::rules::rename_records(&h.records, &map),
        };
        let repo = remap(&self.repo.repo_history);
        if repo != self.repo.repo_history {
            let path = self.repo.root.join(HISTORY_FILE);
            let hash = repo.save(&path)?;
            self.tx().index_history_written(&path, &repo, &hash, false);
        }
        if let Some(l) = self.repo.local.as_mut() {
            let local = remap(&l.history);
            if local != l.history {
                local.save(&l.dir.join(HISTORY_FILE))?;
            }
            l.history = local;
        }
        self.set_repo_history(repo);
        Ok(())
    }

    /// Applies a purge another machine made (given by a server, checked by
    /// the caller): every snapshot it renamed that is here is checked to be
    /// the new one's original with only contents purged, those contents
    /// are taken out of every snapshot here (the shared ones become what
    /// the statement says), the history follows, the purge joins the log,
    /// and the contents are deleted, unless the head names one (this
    /// machine's current version; reported in [`PurgeReport::kept`]).
    /// `protect` and `grace` are as for [`Garden::prune_with`]: what else
    /// is swept. `None` when the purge was applied here already (one cut
    /// off in the middle is finished first).
    ///
    /// # Errors
    /// [`Error::Conflict`] when a renamed snapshot is not here or is not a
    /// purge of its original (nothing is changed then); history, store and
    /// I/O errors.
    pub fn apply_purge(
        &mut self,
        p: &Purge,
        protect: &std::collections::HashSet<Hash>,
        grace: Option<std::time::Duration>,
    ) -> Result<Option<PurgeReport>> {
        self.require_history()?;
        self.require_exclusive("purge")?;
        let log_path = self.repo.root.join(PURGES_FILE);
        let mut log = PurgeLog::load(&log_path)?;
        // One cut off after its log record is finished now (the rewrite
        // is the same again), and then is no news.
        let logged = log.purges.iter().any(|q| q.id() == p.id());
        if logged && self.purge_done(p)? {
            return Ok(None);
        }
        let mut gone = BTreeSet::new();
        for (old, new) in &p.renamed {
            let Ok(o) = self.tx().snapshot_doc(old) else {
                // Never here (or purged by hand): nothing of it to purge.
                continue;
            };
            let n = self.tx().snapshot_doc(new).map_err(|_| {
                Error::Conflict(crate::rules::purge_refusal(&p.host, old, new, false))
            })?;
            let g = crate::rules::purge_of(&o, &n).ok_or_else(|| {
                Error::Conflict(crate::rules::purge_refusal(&p.host, old, new, true))
            })?;
            gone.extend(g);
        }
        let mut report = PurgeReport {
            versions: gone.len(),
            ..PurgeReport::default()
        };
        let mut renamed = self.rewrite_snapshots(&gone, BTreeMap::new())?;
        for (old, new) in &p.renamed {
            match renamed.get(old) {
                Some(mine) if mine != new => {
                    return Err(Error::Conflict(format!(
                        "purging snapshot {} here gives {}, not {} as on {}; nothing was purged",
                        old.short(12),
                        mine.short(12),
                        new.short(12),
                        p.host
                    )));
                }
                Some(_) => {}
                // Named by a record here without its snapshot: renamed too.
                None => {
                    renamed.insert(*old, *new);
                }
            }
        }
        report.snapshots = renamed.len();
        for path in &p.paths {
            report.paths.insert(path.clone(), 0);
        }
        if !logged {
            let mut record = p.clone();
            record.snapshots = new_ids(&renamed);
            log.purges.push(record);
            log.save(&log_path)?;
            self.repo.env.crash_point("purge-logged");
        }
        self.rename_history(&renamed)?;
        report.kept = self
            .repo
            .manifest
            .files
            .iter()
            .filter(|e| e.hash.is_some_and(|h| gone.contains(&h)))
            .map(|e| e.path.clone())
            .collect();
        let forced: std::collections::HashSet<Hash> =
            gone.iter().chain(renamed.keys()).copied().collect();
        report.swept = self.prune_forced(protect, grace, &forced)?;
        Ok((!logged).then_some(report))
    }

    /// Whether purge `p` is done here: no record of the history names a
    /// snapshot it renamed, and none of those is stored any more. (Not
    /// done: it is not applied, or was cut off before its end.)
    ///
    /// # Errors
    /// Store I/O errors.
    pub fn purge_done(&self, p: &Purge) -> Result<bool> {
        let old: BTreeSet<Hash> = p.renamed.iter().map(|r| r.0).collect();
        let named = self.repo.history.records.iter().any(|r| {
            old.contains(&r.id)
                || r.parent.is_some_and(|h| old.contains(&h))
                || r.head_before.is_some_and(|h| old.contains(&h))
        });
        if named {
            return Ok(false);
        }
        for h in &old {
            if self.repo.store.contains(h)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The purge log of the repository (empty when there is none).
    ///
    /// # Errors
    /// The log cannot be read or parsed.
    pub fn purges(&self) -> Result<PurgeLog> {
        Ok(PurgeLog::load(&self.repo.root.join(PURGES_FILE))?)
    }
}

#[cfg(test)]
mod tests {
    use super::under;

    #[test]
    fn a_target_covers_itself_and_what_is_under_it() {
        assert!(under("~/.ssh/id", "~/.ssh"));
        assert!(under("~/.ssh", "~/.ssh"));
        assert!(!under("~/.sshx", "~/.ssh"));
        assert!(under("~/a", "~/"));
    }
}
