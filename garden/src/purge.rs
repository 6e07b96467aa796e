//! `purge`: remove every stored version of some paths' content from the
//! repository (or every one but the current), for a secret that leaked
//! into it.
//!
//! The snapshots that named a purged version are rewritten without those
//! entries (stored anew; their ids change, and every record naming one,
//! as its id or its parent, follows); `<repo>/purges.yaml` records what was
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
        let touched: Vec<Hash> = docs
            .iter()
            .filter(|(_, d)| {
                d.files
                    .iter()
                    .any(|e| e.hash.is_some_and(|h| purge.contains_key(&h)))
            })
            .map(|(id, _)| *id)
            .collect();
        report.snapshots = touched.len();
        if !opts.dry_run {
            report.untracked = self
                .repo
                .manifest
                .files
                .iter()
                .filter(|e| e.hash.is_some_and(|h| purge.contains_key(&h)))
                .map(|e| e.path.clone())
                .collect();
        }
        if opts.dry_run {
            return Ok(report);
        }
        // Read before anything is written: a log that cannot be read is
        // never written over, and then nothing changes.
        let log_path = self.repo.root.join(PURGES_FILE);
        let mut log = PurgeLog::load(&log_path)?;
        // Each rewritten snapshot: its new id, entries and content bytes.
        let mut renamed: HashMap<Hash, (Hash, u64, u64)> = HashMap::new();
        for id in &touched {
            let Some(mut doc) = docs.remove(id) else {
                continue;
            };
            doc.files
                .retain(|e| !e.hash.is_some_and(|h| purge.contains_key(&h)));
            let (repo_store, local_store) = self.repo.stores();
            let store = crate::history::pick_store(repo_store, local_store, id);
            let w = store.write_from(&mut |out| doc.write_yaml(out))?;
            let bytes = self.content_bytes(doc.files.iter().filter_map(|e| e.hash));
            renamed.insert(*id, (w.hash, doc.files.len() as u64, bytes));
        }
        let map = |h: &Hash| renamed.get(h).map_or(*h, |r| r.0);
        let remap = |h: &History| History {
            records: h
                .records
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    if let Some((id, entries, bytes)) = renamed.get(&r.id) {
                        r.id = *id;
                        r.entries = *entries;
                        r.bytes = *bytes;
                    }
                    r.parent = r.parent.as_ref().map(map);
                    r
                })
                .collect(),
        };
        // The purge log first: a purge cut off after it says what it meant
        // to do, and running it again finishes it.
        let mut new_ids: Vec<Hash> = touched.iter().map(map).collect();
        new_ids.sort();
        new_ids.dedup();
        log.purges.push(Purge {
            time: self.repo.env.now,
            host: identity::short_hostname(&self.repo.env.hostname),
            paths: report.paths.keys().cloned().collect(),
            kept_current: opts.keep_current,
            versions: report.versions as u64,
            snapshots: new_ids,
        });
        log.save(&log_path)?;
        self.repo.env.crash_point("purge-logged");
        let repo = remap(&self.repo.repo_history);
        if repo != self.repo.repo_history {
            repo.save(&self.repo.root.join(HISTORY_FILE))?;
        }
        if let Some(l) = self.repo.local.as_mut() {
            let local = remap(&l.history);
            if local != l.history {
                local.save(&l.dir.join(HISTORY_FILE))?;
            }
            l.history = local;
        }
        self.set_repo_history(repo);
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
