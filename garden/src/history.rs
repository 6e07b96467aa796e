//! Snapshots and the history log: recording, naming, showing, forgetting and
//! checking them.

use crate::Repo;
use crate::Tx;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{Duration, Utc};
use sgard_manifest::history::{HISTORY_FILE, History, Reason, Record};
use sgard_manifest::{DocRef, Entry, Manifest};
use sgard_store::Hash;

use crate::{Error, Garden, Result, VerifyState, identity};

/// Up to this many entries a checkpoint renders the head document once,
/// into memory, for both its snapshot blob and manifest.yaml (about 250
/// bytes an entry: 5 MB here); above, it renders it twice, streamed (at
/// 100,000 entries the 20 MB text held whole was a fifth of the peak).
const RENDER_ONCE_MAX_ENTRIES: usize = 20_000;

/// The store holding blob `h`: `repo`, unless only `local` has it.
pub(crate) fn pick_store<'a>(
    repo: &'a sgard_store::Store,
    local: Option<&'a sgard_store::Store>,
    h: &Hash,
) -> &'a sgard_store::Store {
    match local {
        Some(l) if !repo.contains(h).unwrap_or(false) && l.contains(h).unwrap_or(false) => l,
        _ => repo,
    }
}

/// `e`, said as [`Error::AfterCommit`] when `log` ends with `rec` and `rec`
/// is the head by the log's rule: `manifest.yaml` holds it already (`head`,
/// the hash it holds), or it replaces that head (see [`interrupted_head`]).
/// Otherwise (a record not in place, or one that is no head) `e` as it is.
fn after_commit(rec: &Record, log: &History, head: Hash, e: Error) -> Error {
    let in_log = log.records.last().is_some_and(|r| {
        r.id == rec.id && r.head_before == rec.head_before && r.reason == rec.reason
    });
    if !in_log || (head != rec.id && interrupted_head(log, head) != Some(rec.id)) {
        return e;
    }
    Error::AfterCommit {
        id: rec.id.short(12),
        reason: rec.reason.clone(),
        source: Box::new(e),
    }
}

/// When the last record installed a head whose manifest write was lost.
pub(crate) fn interrupted_head(h: &History, head: Hash) -> Option<Hash> {
    let last = h.records.last()?;
    (last.reason.is_full() && last.id != head && last.head_before == Some(head)).then_some(last.id)
}

/// Which snapshots `forget` drops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForgetPolicy {
    /// These snapshots (ids, `@`, `@~N`).
    Ids(Vec<String>),
    /// Keep the newest N checkpoints (and pulls), and every restore-like
    /// operation since the oldest of them.
    KeepLast(usize),
    /// Keep operations newer than this.
    KeepWithin(Duration),
    /// Keep the newest operation of each of the last N days that have one.
    KeepDaily(usize),
}

/// One difference between a snapshot and its parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShowChange {
    /// The path.
    pub path: String,
    /// `added`, `removed`, `modified`, `mode`, `flags`, `type` or `run`
    /// for an entry; `excluded`, `included` (a rule), `folder` (a folder's
    /// mode), or `added`/`removed`/`modified` of `encryption` and
    /// `data.yaml` for the repository's settings.
    pub what: &'static str,
    /// Details (old → new) where useful.
    pub detail: Option<String>,
}

/// The findings of `verify` on one snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotCheck {
    /// The snapshot's record.
    pub record: Record,
    /// What is wrong (empty when it is intact).
    pub problems: Vec<String>,
}

impl Garden {
    /// The history log.
    pub fn history(&self) -> &History {
        &self.repo.history
    }

    /// Refuses when `history.yaml` could not be read (what needs the
    /// history, or would rewrite it, must not go on with an empty one).
    ///
    /// # Errors
    /// [`Error::DamagedHistory`].
    pub fn require_history(&self) -> Result<()> {
        self.repo.require_history()
    }

    /// What is wrong with `history.yaml` when it could not be read (a
    /// damaged log stops only what needs it, which [`Garden::require_history`]
    /// refuses; what does not need it goes on).
    pub fn history_damage(&self) -> Option<&str> {
        self.repo.history_error.as_deref()
    }

    /// The repository's own log, without this home's local records: what
    /// travels to a server and what another machine sees.
    pub fn shared_history(&self) -> &History {
        &self.repo.repo_history
    }

    /// Whether this home took the snapshot of `r` (its machine id; for
    /// records without one, its host name).
    pub(crate) fn is_mine(&self, r: &Record) -> bool {
        match (&r.machine, &self.repo.machine) {
            (Some(theirs), Some(mine)) => theirs == mine,
            _ => r.host == identity::short_hostname(&self.repo.env.hostname),
        }
    }

    /// Resolves a snapshot name to a record index: `@` (the newest checkpoint
    /// or pull), `@~N` (its N-th ancestor), or a unique id prefix of at least
    /// 4 hex characters.
    ///
    /// # Errors
    /// [`Error::Snapshot`] for unknown, ambiguous or malformed names.
    pub fn resolve(&self, name: &str) -> Result<usize> {
        self.repo.resolve(name)
    }

    /// The document of snapshot `id`, verified against its hash.
    ///
    /// # Errors
    /// [`Error::Integrity`] when the blob is missing or corrupt; parse errors.
    pub fn snapshot_doc(&mut self, id: &Hash) -> Result<Manifest> {
        self.tx().snapshot_doc(id)
    }

    pub(crate) fn content_bytes(&self, blobs: impl Iterator<Item = Hash>) -> u64 {
        self.unique_content_bytes(&sorted_unique(blobs))
    }

    /// The total size of the contents `unique` names (sorted, each once):
    /// sizes this run noted, the rest from the stores. Sorted lists merged,
    /// not hash sets: at 10,000 contents the sets were a twentieth of a
    /// small checkpoint.
    fn unique_content_bytes(&self, unique: &[Hash]) -> u64 {
        let known = self.work.known_sizes();
        let mut total = 0;
        let mut unknown = Vec::new();
        let mut k = known.iter().peekable();
        for h in unique {
            while k.next_if(|(kh, _)| kh < h).is_some() {}
            match k.peek() {
                Some((kh, n)) if kh == h => total += n,
                _ => unknown.push(*h),
            }
        }
        // The rest from the store, on all cores (a restore into an empty
        // home knows none of its 10,000 sizes yet).
        let (repo, local) = self.repo.stores();
        let found = crate::par::map(&unknown, 256, |h| {
            // The repository's first, then this home's: one `stat` for
            // the common case, not one to pick the store and one more.
            let size = |s: &sgard_store::Store| s.size_of(h).ok().flatten();
            size(repo).or_else(|| local.and_then(size))
        });
        total + found.into_iter().flatten().flatten().sum::<u64>()
    }

    /// Appends records to the repository's log.
    fn push_records(&mut self, recs: Vec<Record>) -> Result<()> {
        self.require_history()?;
        let mut h = self.repo.repo_history.clone();
        h.records.extend(recs);
        let path = self.repo.root.join(HISTORY_FILE);
        let hash = h.save(&path)?;
        self.tx().index_history_written(&path, &h, &hash, false);
        self.set_repo_history(h);
        Ok(())
    }

    /// Replaces the repository's log in memory (it is saved already).
    pub(crate) fn set_repo_history(&mut self, h: History) {
        self.repo.repo_history = h;
        self.repo.history = crate::merged(&self.repo.repo_history, self.repo.local.as_ref());
    }

    /// Appends records to this home's local log (the repository's when
    /// there is no local state).
    pub(crate) fn push_local_records(&mut self, recs: Vec<Record>) -> Result<()> {
        let Some(l) = self.repo.local.as_mut() else {
            return self.push_records(recs);
        };
        let mut h = l.history.clone();
        h.records.extend(recs);
        sgard_store::durable::create_private_dir_all(&l.dir)?;
        let path = l.dir.join(HISTORY_FILE);
        let hash = h.save(&path)?;
        self.tx().index_history_written(&path, &h, &hash, true);
        if let Some(l) = self.repo.local.as_mut() {
            l.history = h;
        }
        self.repo.history = crate::merged(&self.repo.repo_history, self.repo.local.as_ref());
        Ok(())
    }

    /// Saves the head manifest as a snapshot: blob first (durable; with the
    /// open batch, if any, which is committed here), then the log record
    /// (the commit point), then manifest.yaml. A crash between the last two
    /// is finished by the next `open`.
    /// `stored`: the content blobs this run wrote (the count recorded when
    /// the parent snapshot cannot be read).
    pub(crate) fn commit_head(
        &mut self,
        reason: Reason,
        message: Option<String>,
        stored: u64,
    ) -> Result<Record> {
        self.commit_head_after(reason, message, stored, None)
    }

    /// As [`Garden::commit_head`], with the blobs the newest snapshot
    /// references (sorted) when the caller knows them already: its
    /// document was read, or it is the head as it was before this run.
    pub(crate) fn commit_head_after(
        &mut self,
        reason: Reason,
        message: Option<String>,
        stored: u64,
        parent_blobs: Option<&[Hash]>,
    ) -> Result<Record> {
        self.require_exclusive("checkpoint")?;
        self.refresh_data();
        // The blobs the batch holds first, then the document, rendered
        // straight into its blob (and below into manifest.yaml again: at
        // 100,000 entries holding the 20 MB text was a fifth of the peak).
        // A smaller head is rendered once, for both, on another thread
        // while the batch waits for the disk.
        let most = self
            .repo
            .env
            .render_once_max
            .unwrap_or(RENDER_ONCE_MAX_ENTRIES);
        let render_once = self.repo.manifest.files.len() <= most;
        let manifest_path = self.repo.manifest_path();
        let (committed, once) = std::thread::scope(|s| {
            let manifest = &self.repo.manifest;
            let manifest_path = &manifest_path;
            let store = &self.repo.store;
            // Rendered, copied into the store's temp folder as the
            // snapshot's blob and given to `blob` at once (the batch's last
            // flush makes it durable: manifest.yaml's write and sync need
            // not hold the batch up), then written beside manifest.yaml and
            // synced: only its rename waits for the log record below.
            let render = move |blob: &mut dyn FnMut(sgard_store::Spooled)| -> Result<_> {
                let mut text = Vec::new();
                manifest
                    .write_yaml(&mut text)
                    .map_err(|e| Error::io("rendering", manifest_path, e))?;
                blob(store.spool_bytes(&text)?);
                let staged = sgard_store::durable::stage_atomic(manifest_path, &text, 0o600)?;
                Ok((text, staged))
            };
            let (blob_tx, blob_rx) = std::sync::mpsc::sync_channel(1);
            // Where no thread can be started, it is rendered once the
            // batch's blobs are named, on this one.
            let mut rendering = render_once.then(|| {
                std::thread::Builder::new()
                    .name("render-head".into())
                    .spawn_scoped(s, move || {
                        // The channel holds it (it never blocks); when the
                        // batch failed before taking it, it is dropped with
                        // the channel, and its temp file with it.
                        render(&mut |b| drop(blob_tx.send(b)))
                    })
                    .map_err(|_| render)
            });
            let mut here = None;
            let committed = Tx {
                repo: &self.repo,
                work: &mut self.work,
            }
            .commit_batch_with_late(|| {
                if let Some(Err(render)) = rendering.take_if(|r| r.is_err()) {
                    let mut blob = None;
                    here = Some(render(&mut |b| blob = Some(b)));
                    return blob;
                }
                // Nothing comes when rendering failed first: its error
                // follows from the join.
                match &rendering {
                    Some(Ok(_)) => blob_rx.recv().ok(),
                    _ => None,
                }
            });
            let once = match (rendering, here) {
                (Some(Ok(thread)), _) => Some(thread.join().unwrap_or_else(|_| {
                    Err(Error::Invalid("internal error: rendering stopped".into()))
                })),
                (_, Some(rendered)) => Some(rendered),
                _ => None,
            };
            (committed, once)
        });
        let snapshot = committed?;
        let once = once.transpose()?;
        let w = match (&once, snapshot) {
            (Some(_), Some(w)) => w,
            _ => self.repo.store.write_from(&mut |out| match &once {
                Some((text, _)) => out.write_all(text),
                None => self.repo.manifest.write_yaml(out),
            })?,
        };
        self.work.known_size(w.hash, w.size);
        let parent = self.repo.history.head().map(|r| r.id);
        let head_blobs = sorted_unique(self.repo.manifest.referenced_blobs());
        let new_content = self.new_content(parent, stored, parent_blobs, &head_blobs);
        let rec = Record {
            id: w.hash,
            parent,
            time: self.repo.env.now,
            host: identity::short_hostname(&self.repo.env.hostname),
            machine: self.repo.machine.clone(),
            reason,
            message,
            entries: self.repo.manifest.files.len() as u64,
            bytes: self.unique_content_bytes(&head_blobs),
            new_blobs: new_content,
            head_before: Some(self.repo.head_hash),
        };
        self.work.base.prepare()?;
        self.repo.env.crash_point("pending-before-head");
        if let Err(e) = self.push_records(vec![rec.clone()]) {
            // The record may be in place with only its folder's sync
            // failed: then it is committed all the same (the log on disk
            // says, as the next command reads it).
            let path = self.repo.root.join(HISTORY_FILE);
            return Err(match History::load(&path) {
                Ok(log) => after_commit(&rec, &log, self.repo.head_hash, e),
                Err(_) => e,
            });
        }
        let rest = match once {
            Some((_, staged)) => self.install_manifest(staged, w.hash),
            None => self.write_manifest(),
        };
        let log = &self.repo.repo_history;
        rest.map_err(|e| after_commit(&rec, log, self.repo.head_hash, e))?;
        // Rendering is deterministic: manifest.yaml holds the snapshot's
        // bytes (past the commit point, a mismatch could only be reported).
        debug_assert_eq!(self.repo.head_hash, w.hash);
        self.repo.env.crash_point("head-before-base");
        if let Err(e) = self.tx().flush_base() {
            return Err(after_commit(
                &rec,
                &self.repo.repo_history,
                self.repo.head_hash,
                e,
            ));
        }
        Ok(rec)
    }

    /// How many contents the head references that the snapshot `parent`
    /// did not: what a new snapshot adds, whichever command stored it (an
    /// `add` stores content without a snapshot; the next checkpoint records
    /// it). A chunked file counts once; the snapshot's own blob never. With
    /// no parent every content is new; with a parent that cannot be read,
    /// `stored` (what this run wrote) is the best answer there is.
    /// `head` is what the head references, sorted, each once.
    fn new_content(
        &mut self,
        parent: Option<Hash>,
        stored: u64,
        known: Option<&[Hash]>,
        head: &[Hash],
    ) -> u64 {
        let read;
        let old: &[Hash] = match (parent, known) {
            (None, _) => &[],
            (Some(_), Some(blobs)) => blobs,
            (Some(id), None) => match self.snapshot_doc(&id) {
                Ok(doc) => {
                    read = sorted_blobs(&doc);
                    &read
                }
                Err(_) => return stored,
            },
        };
        // Both sorted: one pass.
        let mut old = old.iter().peekable();
        let mut new = 0;
        for h in head {
            while old.next_if(|o| *o < h).is_some() {}
            if old.peek() != Some(&h) {
                new += 1;
            }
        }
        new
    }

    /// Stores the after document of a change to the home folder (the
    /// before one, `b`, is stored already) and returns the two records to
    /// push for them (`before-restore`, then `reason`), before the change
    /// is made. Borrowing only, so the documents may borrow the head.
    pub(crate) fn pair_records(
        &self,
        (before, b): (&DocRef<'_>, sgard_store::Written),
        after: &DocRef<'_>,
        reason: Reason,
        what: &str,
        new_blobs: u64,
    ) -> Result<Vec<Record>> {
        let a = self.store_doc(after)?;
        let host = identity::short_hostname(&self.repo.env.hostname);
        let rec = |id, parent, reason, doc: &DocRef<'_>, new| Record {
            id,
            parent,
            time: self.repo.env.now,
            host: host.clone(),
            machine: self.repo.machine.clone(),
            reason,
            message: Some(what.to_owned()),
            entries: (doc.files().len() + doc.absent().len()) as u64,
            bytes: self.content_bytes(doc.files().iter().filter_map(|e| e.hash)),
            new_blobs: new,
            head_before: None,
        };
        // Content captured from the disk counts; the documents' own blobs
        // do not.
        let rb = rec(
            b.hash,
            self.repo.history.head().map(|r| r.id),
            Reason::BeforeRestore,
            before,
            new_blobs,
        );
        let ra = rec(a.hash, Some(b.hash), reason, after, 0);
        Ok(vec![rb, ra])
    }

    /// Stores a snapshot document in this home's store, rendered straight
    /// into its blob (a 100,000-entry document is 20 MB of text).
    pub(crate) fn store_doc(&self, doc: &DocRef<'_>) -> Result<sgard_store::Written> {
        Ok(self
            .repo
            .local_store()
            .write_from(&mut |out| doc.write_yaml(out))?)
    }

    /// What changed in the snapshot `name` against its parent.
    ///
    /// # Errors
    /// As [`Garden::resolve`] and [`Garden::snapshot_doc`].
    pub fn show(&mut self, name: &str) -> Result<(Record, Vec<ShowChange>)> {
        let idx = self.resolve(name)?;
        let rec = self.repo.history.records[idx].clone();
        let doc = self.snapshot_doc(&rec.id)?;
        let parent = match self.repo.parent_index(idx) {
            Some(p) => {
                let id = self.repo.history.records[p].id;
                Some(self.snapshot_doc(&id)?)
            }
            None => None,
        };
        Ok((
            rec.clone(),
            compare_docs(parent.as_ref(), &doc, rec.reason.is_full()),
        ))
    }

    /// Drops snapshots from the history (never the newest checkpoint, `@`).
    /// A restore's `before-restore` and `restore` records go together.
    /// Returns the records dropped (with `dry_run`: that would be, and
    /// nothing changes). Their blobs stay until `prune`.
    ///
    /// # Errors
    /// [`Error::Snapshot`] for unknown names or for naming `@`.
    pub fn forget(&mut self, policy: &ForgetPolicy, dry_run: bool) -> Result<Vec<Record>> {
        self.require_history()?;
        if !dry_run {
            self.require_exclusive("forget")?;
        }
        let recs = &self.repo.history.records;
        // Group a before-restore record with the record that follows from it.
        let mut group: Vec<usize> = (0..recs.len()).collect();
        for i in 0..recs.len() {
            if let Some(p) = self.repo.parent_index(i)
                && recs[p].reason == Reason::BeforeRestore
                && !recs[i].reason.is_full()
                && recs[i].reason != Reason::BeforeRestore
            {
                group[i] = group[p];
            }
        }
        let head_group = recs
            .iter()
            .rposition(|r| r.reason.is_full())
            .map(|i| group[i]);
        let mut times: BTreeMap<usize, sgard_manifest::Timestamp> = BTreeMap::new();
        for (i, g) in group.iter().enumerate() {
            let t = times.entry(*g).or_insert(recs[i].time);
            if recs[i].time > *t {
                *t = recs[i].time;
            }
        }
        // Newest first.
        let mut order: Vec<usize> = times.keys().copied().collect();
        order.sort_by(|a, b| times[b].cmp(&times[a]).then(b.cmp(a)));
        let mut drop: BTreeSet<usize> = BTreeSet::new();
        match policy {
            ForgetPolicy::Ids(names) => {
                for n in names {
                    let g = group[self.resolve(n)?];
                    if Some(g) == head_group {
                        return Err(Error::Snapshot(format!(
                            "{n} is the newest checkpoint (@); it is never forgotten"
                        )));
                    }
                    drop.insert(g);
                }
            }
            ForgetPolicy::KeepLast(n) => {
                // Count checkpoints, not records: the N-th newest checkpoint
                // is the oldest kept; everything older goes.
                let full: Vec<usize> = order
                    .iter()
                    .copied()
                    .filter(|g| recs[*g].reason.is_full())
                    .collect();
                match full.get(n.saturating_sub(1)).filter(|_| *n > 0) {
                    Some(&oldest) => {
                        let cutoff = (times[&oldest], oldest);
                        drop.extend(order.iter().copied().filter(|g| (times[g], *g) < cutoff));
                    }
                    None if *n == 0 => drop.extend(order.iter().copied()),
                    None => {}
                }
            }
            ForgetPolicy::KeepWithin(d) => {
                let cutoff = self.repo.env.now.datetime() - *d;
                drop.extend(
                    order
                        .iter()
                        .copied()
                        .filter(|g| times[g].datetime() < cutoff),
                );
            }
            ForgetPolicy::KeepDaily(n) => {
                let mut days = BTreeSet::new();
                for g in &order {
                    let day = times[g].datetime().with_timezone(&Utc).date_naive();
                    if days.contains(&day) || days.len() >= *n {
                        drop.insert(*g);
                    } else {
                        days.insert(day);
                    }
                }
            }
        }
        if let Some(h) = head_group {
            drop.remove(&h);
        }
        let dropped_idx: BTreeSet<usize> = (0..recs.len())
            .filter(|i| drop.contains(&group[*i]))
            .collect();
        // Re-parent the survivors past the dropped records.
        let mut kept = Vec::new();
        let mut dropped = Vec::new();
        for (i, r) in recs.iter().enumerate() {
            if dropped_idx.contains(&i) {
                dropped.push(r.clone());
                continue;
            }
            let mut r = r.clone();
            let mut p = self.repo.parent_index(i);
            while let Some(pi) = p {
                if !dropped_idx.contains(&pi) {
                    break;
                }
                p = self.repo.parent_index(pi);
            }
            r.parent = p.map(|pi| recs[pi].id);
            kept.push(r);
        }
        if dropped.is_empty() || dry_run {
            return Ok(dropped);
        }
        // Each survivor goes back to the log it came from.
        let key = |r: &Record| (r.id, r.reason.as_str().to_owned(), r.time, r.host.clone());
        let local_keys: HashSet<_> = self
            .repo
            .local
            .iter()
            .flat_map(|l| l.history.records.iter().map(key))
            .collect();
        let (local, repo): (Vec<Record>, Vec<Record>) =
            kept.into_iter().partition(|r| local_keys.contains(&key(r)));
        let repo = History { records: repo };
        if repo != self.repo.repo_history {
            repo.save(&self.repo.root.join(HISTORY_FILE))?;
        }
        if let Some(l) = self.repo.local.as_mut() {
            let local = History { records: local };
            if local != l.history {
                local.save(&l.dir.join(HISTORY_FILE))?;
            }
            l.history = local;
        }
        self.set_repo_history(repo);
        Ok(dropped)
    }

    /// Checks every snapshot: its blob hashes to its id, it parses, its
    /// parent is in the log, and every blob it references is intact.
    ///
    /// # Errors
    /// Only for store I/O failures.
    pub fn verify_history(&mut self) -> Result<Vec<SnapshotCheck>> {
        self.verify_history_with(&mut HashMap::new())
    }

    /// As [`Garden::verify_history`], with the verdicts on blobs already
    /// re-hashed this run (`seen`, added to): each blob is read once.
    pub(crate) fn verify_history_with(
        &mut self,
        seen: &mut HashMap<Hash, VerifyState>,
    ) -> Result<Vec<SnapshotCheck>> {
        self.require_history()?;
        // The store is picked only for a blob not judged yet: picking
        // looks in the store (at 100,000 entries a `stat` per entry of
        // every snapshot was half of `verify`).
        let mut state = |h: &Hash, repo: &Repo| -> Result<VerifyState> {
            // A blob missing from the repository may be in this home's
            // store (what only a safety snapshot captured): asked again.
            if let Some(s) = seen.get(h).filter(|s| **s != VerifyState::Missing) {
                return Ok(*s);
            }
            let mut s = VerifyState::of(repo.blobs_for(h).verify(h)?);
            if s == VerifyState::Missing && self.repo.head_text(h).is_some() {
                // The head's snapshot is manifest.yaml itself.
                s = VerifyState::Ok;
            }
            seen.insert(*h, s);
            Ok(s)
        };
        let mut out = Vec::new();
        for (i, r) in self.repo.history.records.iter().enumerate() {
            let mut problems = Vec::new();
            match state(&r.id, &self.repo)? {
                VerifyState::Ok => {}
                VerifyState::Missing => problems.push("its snapshot blob is missing".into()),
                VerifyState::Corrupt => problems.push("its snapshot blob is corrupt".into()),
            }
            // A snapshot of this home's own log (a safety snapshot) names
            // the repository's snapshot it was taken over as its parent;
            // a `forget` on another machine may drop that one from the
            // shared log, re-parenting only the logs it can see: no damage.
            let own = self
                .repo
                .local
                .as_ref()
                .is_some_and(|l| l.history.records.contains(r));
            if r.parent.is_some() && self.repo.parent_index(i).is_none() && !own {
                problems.push(format!(
                    "its parent {} is not in the history",
                    r.parent.map(|p| p.short(12)).unwrap_or_default()
                ));
            }
            if problems.is_empty() {
                // The head's snapshot holds the bytes of manifest.yaml, read
                // already: not parsed a second time.
                let parsed = if r.id == self.repo.head_hash {
                    None
                } else {
                    // Its blob was just found sound (`problems` is empty).
                    Some(Tx::new(&self.repo, &mut self.work).snapshot_doc_of(&r.id, true))
                };
                let doc = match &parsed {
                    None => Ok(&self.repo.manifest.files),
                    Some(Ok(d)) => Ok(&d.files),
                    Some(Err(e)) => Err(e),
                };
                match doc {
                    Err(e) => problems.push(format!("its document is unreadable: {e}")),
                    Ok(files) => {
                        let mut bad = BTreeSet::new();
                        for e in files {
                            if let Some(h) = e.hash {
                                match state(&h, &self.repo)? {
                                    VerifyState::Ok => {}
                                    VerifyState::Missing => {
                                        bad.insert(format!(
                                            "{}: blob {} is missing",
                                            e.path,
                                            h.short(12)
                                        ));
                                    }
                                    VerifyState::Corrupt => {
                                        bad.insert(format!(
                                            "{}: blob {} is corrupt",
                                            e.path,
                                            h.short(12)
                                        ));
                                    }
                                }
                            }
                        }
                        problems.extend(bad);
                    }
                }
            }
            out.push(SnapshotCheck {
                record: r.clone(),
                problems,
            });
        }
        Ok(out)
    }

    /// Every blob the head or any snapshot needs (snapshot blobs included).
    ///
    /// # Errors
    /// [`Error::Integrity`] when a snapshot cannot be read: pruning then
    /// could delete blobs it needs, so prune refuses.
    pub(crate) fn live_blobs(&mut self) -> Result<HashSet<Hash>> {
        self.require_history()?;
        let mut live = crate::rules::Live::of(&self.repo.manifest, &self.repo.history.records);
        for id in live.snapshots().to_vec() {
            let doc = self.snapshot_doc(&id)?;
            live.add_doc(&doc);
        }
        Ok(live.into_set())
    }
}

impl Repo {
    /// Where snapshots of this home's changes to its home folder and the
    /// blobs they capture are stored: the local log's store.
    pub(crate) fn local_store(&self) -> &sgard_store::Store {
        self.local.as_ref().map_or(&self.store, |l| &l.store)
    }

    pub(crate) fn require_history(&self) -> Result<()> {
        match &self.history_error {
            None => Ok(()),
            Some(e) => Err(Error::DamagedHistory(format!(
                "the history {} is damaged (repair it or move it aside; its snapshots' \
                 blobs stay in the store until prune): {e}",
                self.root.join(HISTORY_FILE).display()
            ))),
        }
    }

    /// The index of the record `parent` points at: the newest record before
    /// `idx` with that id.
    pub(crate) fn parent_index(&self, idx: usize) -> Option<usize> {
        let p = self.history.records.get(idx)?.parent?;
        (0..idx).rev().find(|&i| self.history.records[i].id == p)
    }

    /// The store holding blob `h`: the repository's, or this home's local
    /// log's for what only a safety snapshot captured.
    pub(crate) fn blobs_for(&self, h: &Hash) -> &sgard_store::Store {
        pick_store(&self.store, self.local.as_ref().map(|l| &l.store), h)
    }

    pub(crate) fn resolve(&self, name: &str) -> Result<usize> {
        self.require_history()?;
        let recs = &self.history.records;
        if let Some(rest) = name.strip_prefix('@') {
            let n: usize = match rest {
                "" => 0,
                r => r
                    .strip_prefix('~')
                    .and_then(|d| {
                        if d.is_empty() {
                            Some(1)
                        } else {
                            d.parse().ok()
                        }
                    })
                    .ok_or_else(|| Error::Snapshot(format!("{name:?}: expected @ or @~N")))?,
            };
            let mut idx = recs
                .iter()
                .rposition(|r| r.reason.is_full())
                .ok_or_else(|| Error::Snapshot("no checkpoint yet: the history is empty".into()))?;
            for step in 0..n {
                idx = self.parent_index(idx).ok_or_else(|| {
                    Error::Snapshot(format!("{name}: the history has only {step} ancestor(s)"))
                })?;
            }
            return Ok(idx);
        }
        let lower = name.to_ascii_lowercase();
        if lower.len() < 4 || lower.len() > 64 || !lower.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(Error::Snapshot(format!(
                "{name:?} is not a snapshot name (use 4 to 64 hex characters of an id, @ or @~N)"
            )));
        }
        let ids: BTreeSet<Hash> = recs
            .iter()
            .filter(|r| r.id.to_hex().starts_with(&lower))
            .map(|r| r.id)
            .collect();
        match ids.len() {
            0 => Err(Error::Snapshot(format!("no snapshot {name}"))),
            1 => Ok(recs
                .iter()
                .rposition(|r| r.id.to_hex().starts_with(&lower))
                .unwrap_or(0)),
            n => Err(Error::Snapshot(format!(
                "snapshot prefix {name} is ambiguous ({n} snapshots match); give more characters"
            ))),
        }
    }

    /// Whether the repository holds snapshot `id`'s document sound: its
    /// blob is there and hashes to its name, or, with no blob, it is the
    /// head's, which manifest.yaml (read and hashed by this run) holds.
    /// Exactly when [`Repo::parse_snapshot_doc`] would read it without an
    /// error of the store, so a cached parse never hides a lost or damaged
    /// snapshot (`verify`, `prune` and `restore --at` see the damage as
    /// before).
    pub(crate) fn has_sound_snapshot(&self, id: &Hash) -> bool {
        let store = self.blobs_for(id);
        match store.verify(id) {
            Ok(sgard_store::BlobState::Ok) => true,
            // Absent, not a chunked blob missing a chunk (damage).
            Ok(sgard_store::BlobState::Missing) => {
                *id == self.head_hash && matches!(store.contains(id), Ok(false))
            }
            _ => false,
        }
    }

    /// Snapshot `id`'s document, read and parsed (see [`Tx::snapshot_doc`]
    /// for the cached way).
    pub(crate) fn parse_snapshot_doc(&self, id: &Hash) -> Result<Manifest> {
        let read = match self.blobs_for(id).read(id) {
            Err(sgard_store::Error::Missing(_)) => {
                self.head_text(id).ok_or(sgard_store::Error::Missing(*id))
            }
            other => other,
        };
        let bytes = read.map_err(|source| {
            if source.is_integrity() {
                Error::Integrity {
                    path: format!("snapshot {}", id.short(12)),
                    source,
                }
            } else {
                Error::Store(source)
            }
        })?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::Invalid(format!("snapshot {} is not UTF-8 text", id.short(12))))?;
        Ok(Manifest::from_yaml(&text)?)
    }

    /// The bytes of manifest.yaml when they are snapshot `id` (the head's
    /// snapshot holds exactly the manifest file).
    fn head_text(&self, id: &Hash) -> Option<Vec<u8>> {
        if *id != self.head_hash {
            return None;
        }
        let text = std::fs::read(self.root.join(sgard_manifest::MANIFEST_FILE)).ok()?;
        (Hash::of(&text) == *id).then_some(text)
    }

    /// The two stores [`Repo::blobs_for`] picks from (`Sync`, for work on
    /// other threads).
    pub(crate) fn stores(&self) -> (&sgard_store::Store, Option<&sgard_store::Store>) {
        (&self.store, self.local.as_ref().map(|l| &l.store))
    }
}

impl Tx<'_> {
    /// Snapshot `id`'s document: from this machine's cache of parsed
    /// documents where that holds it and the repository still does (see
    /// [`crate::docs`]), else read and parsed (and kept in the cache at
    /// once, within its bounds).
    ///
    /// # Errors
    /// The snapshot is missing or damaged, or not a manifest.
    pub(crate) fn snapshot_doc(&mut self, id: &Hash) -> Result<Manifest> {
        self.snapshot_doc_of(id, false)
    }

    /// As [`Tx::snapshot_doc`]; `sound` says the caller has just checked
    /// the snapshot's blob against its name (as `verify` does), so a cached
    /// copy is used without reading the blob again.
    pub(crate) fn snapshot_doc_of(&mut self, id: &Hash, sound: bool) -> Result<Manifest> {
        let dir = self
            .repo
            .local_dir
            .as_ref()
            .map(|d| d.join(crate::docs::DIR));
        if let Some(dir) = &dir
            && let Some(m) = crate::docs::read(dir, id)
            && (sound || self.work.docs.contains(id) || self.repo.has_sound_snapshot(id))
        {
            return Ok(m);
        }
        let m = self.repo.parse_snapshot_doc(id)?;
        // Kept at once rather than held until the run ends: a `verify` of
        // a long history of big documents holds one at a time. A cache of
        // what the repository holds under the document's own name, so it is
        // never wrong to keep, whatever becomes of this run; a failure to
        // keep it costs the next command a parse and is said, never this
        // command's error. A dry run keeps nothing. The newest snapshots'
        // documents are kept (see `docs`): one placed below what the folder
        // was found to keep is not offered again.
        let records = &self.repo.history.records;
        let place = records.iter().rposition(|r| r.id == *id);
        let below_floor = matches!((place, self.work.docs_floor), (Some(p), Some(f)) if p < f);
        if let Some(dir) = dir.filter(|_| !self.repo.dry_run && !self.work.docs_failed)
            && self.work.docs.len() < crate::docs::MAX_FILES
            && !below_floor
        {
            let bytes = crate::docs::encode(id, &m);
            let held = self.work.docs_bytes + bytes.len() as u64;
            // The last place an id has in the log. One the log does not
            // name yet (a pull's incoming snapshots, read again before the
            // log takes them) ranks above all while this run keeps it; any
            // other the log does not name ranks below all (pruned or
            // forgotten: the first to go).
            let ours = &self.work.docs;
            let keep = || {
                let places: std::collections::HashMap<Hash, usize> =
                    records.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
                let rank = |h: &Hash| {
                    places
                        .get(h)
                        .copied()
                        .or_else(|| (h == id || ours.contains(h)).then_some(usize::MAX))
                };
                crate::docs::write(&dir, id, &bytes, &rank)
            };
            match (held <= crate::docs::MAX_BYTES).then(keep) {
                None => {}
                Some(Ok(crate::docs::Kept::Refused { floor })) => {
                    self.work.docs_floor = floor.filter(|_| place.is_some());
                }
                Some(Ok(crate::docs::Kept::Written)) => {
                    self.work.docs.push(*id);
                    self.work.docs_bytes = held;
                }
                Some(Err(e)) => {
                    self.work.docs_failed = true;
                    self.work.note(format!(
                        "could not keep the parsed snapshots for the next command (they are \
                         parsed again): {}",
                        crate::checkpoint::error_chain(&e)
                    ));
                }
            }
        }
        Ok(m)
    }

    /// Puts the head's snapshot blob back from manifest.yaml when it is
    /// gone: the Go sgard's `prune` deletes every blob the manifest does
    /// not name, snapshots included, and the head's is the one the next
    /// checkpoint needs as its parent. A head recorded only in this home's
    /// local log (a restore before the first checkpoint) has its blob in
    /// the local store: it is copied in the same way, without a word, since
    /// nothing was lost.
    pub(crate) fn heal_head_snapshot(&mut self) {
        if !self
            .repo
            .history
            .records
            .iter()
            .any(|r| r.id == self.repo.head_hash)
            || self
                .repo
                .store
                .contains(&self.repo.head_hash)
                .unwrap_or(true)
        {
            return;
        }
        let shared = self
            .repo
            .repo_history
            .records
            .iter()
            .any(|r| r.id == self.repo.head_hash);
        if let Some(text) = self.repo.head_text(&self.repo.head_hash)
            && self.repo.store.write_bytes(&text).is_ok()
            && shared
        {
            self.work.note(format!(
                "snapshot {} (the head) had lost its blob, as the Go sgard's prune does; \
                 put back from manifest.yaml",
                self.repo.head_hash.short(12)
            ));
        }
    }
}

/// The changes from `parent` to `doc`: what `show` lists, and what a
/// checkpoint records (none: no snapshot). For partial documents only the
/// paths they name are compared; full ones also compare the settings of
/// the whole repository (exclusions, encryption, template data, folder
/// modes). Timestamps and messages are no change.
pub(crate) fn compare_docs(
    parent: Option<&Manifest>,
    doc: &Manifest,
    full: bool,
) -> Vec<ShowChange> {
    // Every list is sorted by path: one walk over their union, each side
    // followed by a cursor (at 100,000 entries a set and two lookups per
    // path were a quarter of an unchanged checkpoint).
    let old_files: &[Entry] = parent.map_or(&[], |pm| &pm.files);
    let mut paths: Vec<&str> = doc.files.iter().map(|e| e.path.as_str()).collect();
    paths.extend(doc.absent.iter().map(String::as_str));
    if full {
        paths.extend(old_files.iter().map(|e| e.path.as_str()));
    }
    // Stable: it merges the sorted runs rather than sorting afresh.
    paths.sort();
    paths.dedup();
    fn sorted(list: &[String]) -> Vec<&str> {
        let mut v: Vec<&str> = list.iter().map(String::as_str).collect();
        v.sort_unstable();
        v
    }
    let absent_now = sorted(&doc.absent);
    let absent_then = parent.map(|pm| sorted(&pm.absent)).unwrap_or_default();
    let (mut at_new, mut at_old) = (0, 0);
    let mut out = Vec::new();
    for p in paths {
        let new = cursor(&doc.files, &mut at_new, p);
        let old = cursor(old_files, &mut at_old, p);
        let change = |what, detail: Option<String>| ShowChange {
            path: p.to_owned(),
            what,
            detail,
        };
        match (old, new) {
            (None, Some(_)) => out.push(change("added", None)),
            (Some(_), None) => out.push(change("removed", None)),
            (None, None) => {
                if absent_now.binary_search(&p).is_ok()
                    && parent.is_some()
                    && absent_then.binary_search(&p).is_err()
                {
                    out.push(change("removed", None));
                }
            }
            (Some(o), Some(n)) => {
                out.extend(entry_changes(o, n).into_iter().map(|(w, d)| change(w, d)));
            }
        }
    }
    if full {
        out.extend(settings_changes(parent, doc));
    }
    out
}

/// The entry of `files` (sorted by path) at `path`, `at` moved past every
/// entry before it: asked in path order, a walk of the list.
fn cursor<'a>(files: &'a [Entry], at: &mut usize, path: &str) -> Option<&'a Entry> {
    while files.get(*at).is_some_and(|e| e.path.as_str() < path) {
        *at += 1;
    }
    files.get(*at).filter(|e| e.path == path)
}

/// What changed in the repository's own settings from `parent` to `doc`.
fn settings_changes(parent: Option<&Manifest>, doc: &Manifest) -> Vec<ShowChange> {
    let mut out = Vec::new();
    let change = |path: &str, what, detail: Option<String>| ShowChange {
        path: path.to_owned(),
        what,
        detail,
    };
    let old_rules: &[String] = parent.map_or(&[], |p| &p.exclude);
    for r in &doc.exclude {
        if !old_rules.contains(r) {
            out.push(change(r, "excluded", None));
        }
    }
    for r in old_rules {
        if !doc.exclude.contains(r) {
            out.push(change(r, "included", None));
        }
    }
    let presence = |old: bool, new: bool| match (old, new) {
        (false, true) => "added",
        (true, false) => "removed",
        _ => "modified",
    };
    let (old_enc, old_data) = parent.map_or((None, None), |p| (p.encryption.as_ref(), p.data));
    if old_enc != doc.encryption.as_ref() {
        let what = presence(old_enc.is_some(), doc.encryption.is_some());
        out.push(change("encryption", what, None));
    }
    if old_data != doc.data {
        let what = presence(old_data.is_some(), doc.data.is_some());
        out.push(change("data.yaml", what, None));
    }
    let old_folders: &[sgard_manifest::FolderMode] = parent.map_or(&[], |p| &p.folders);
    let mode_of = |list: &[sgard_manifest::FolderMode], path: &str| {
        list.iter().find(|f| f.path == path).map(|f| f.mode)
    };
    let folders: BTreeSet<&str> = doc
        .folders
        .iter()
        .chain(old_folders)
        .map(|f| f.path.as_str())
        .collect();
    for f in folders {
        let (o, n) = (mode_of(old_folders, f), mode_of(&doc.folders, f));
        if o != n {
            let m = |x: Option<sgard_manifest::Mode>| {
                x.map_or_else(|| "-".to_owned(), |m| m.to_string())
            };
            out.push(change(f, "folder", Some(format!("{} -> {}", m(o), m(n)))));
        }
    }
    out
}

fn entry_changes(o: &Entry, n: &Entry) -> Vec<(&'static str, Option<String>)> {
    let mut v = Vec::new();
    let kind = |e: &Entry| {
        if e.template {
            "template".to_owned()
        } else {
            e.kind.to_string()
        }
    };
    if o.kind != n.kind || o.template != n.template {
        v.push(("type", Some(format!("{} -> {}", kind(o), kind(n)))));
        return v;
    }
    if o.hash != n.hash || o.target != n.target {
        let detail = match (&o.target, &n.target) {
            (Some(a), Some(b)) if a != b => Some(format!("{a} -> {b}")),
            _ => None,
        };
        v.push(("modified", detail));
    }
    if o.mode != n.mode {
        let m = |x: Option<sgard_manifest::Mode>| {
            x.map(|m| m.to_string()).unwrap_or_else(|| "-".into())
        };
        v.push(("mode", Some(format!("{} -> {}", m(o.mode), m(n.mode)))));
    }
    let flags = |e: &Entry| {
        format!(
            "locked={} encrypted={} only=[{}] never=[{}]",
            e.locked,
            e.encrypted,
            e.only.join(","),
            e.never.join(",")
        )
    };
    if o.locked != n.locked || o.encrypted != n.encrypted || o.only != n.only || o.never != n.never
    {
        v.push(("flags", Some(format!("{} -> {}", flags(o), flags(n)))));
    }
    if o.run != n.run {
        let run = |e: &Entry| e.run.map_or("-", sgard_manifest::Run::as_str);
        v.push(("run", Some(format!("{} -> {}", run(o), run(n)))));
    }
    v
}

/// `hashes` sorted, each once.
fn sorted_unique(hashes: impl Iterator<Item = Hash>) -> Vec<Hash> {
    let mut v: Vec<Hash> = hashes.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The blobs `m` references, sorted (for [`Garden::commit_head_after`]).
pub(crate) fn sorted_blobs(m: &Manifest) -> Vec<Hash> {
    let mut v: Vec<Hash> = m.referenced_blobs().collect();
    v.sort_unstable();
    v
}

#[cfg(test)]
mod after_commit_tests {
    use super::*;
    use sgard_manifest::Timestamp;

    fn record(id: &[u8], reason: Reason, head_before: Hash) -> Record {
        Record {
            id: Hash::of(id),
            parent: None,
            time: Timestamp::zero(),
            host: "h".into(),
            machine: None,
            reason,
            message: None,
            entries: 0,
            bytes: 0,
            new_blobs: 0,
            head_before: Some(head_before),
        }
    }

    fn said(rec: &Record, log: &[Record], head: Hash) -> bool {
        let log = History {
            records: log.to_vec(),
        };
        let e = Error::Invalid("disk full".into());
        matches!(after_commit(rec, &log, head, e), Error::AfterCommit { .. })
    }

    #[test]
    fn only_a_snapshot_that_is_the_head_by_the_logs_rule_is_said_committed() {
        let old = Hash::of(b"old head");
        let rec = record(b"new", Reason::Checkpoint, old);
        // In the log, replacing the head manifest.yaml still holds.
        assert!(said(&rec, std::slice::from_ref(&rec), old));
        // manifest.yaml holds it already (the index save failed).
        assert!(said(&rec, std::slice::from_ref(&rec), rec.id));
        // Not in place: the log ends elsewhere, whatever manifest.yaml
        // holds (a head saved by `add` can render as the snapshot does).
        assert!(!said(&rec, &[], old));
        assert!(!said(&rec, &[], rec.id));
        // The same id last in the log, recorded over another head (a pull
        // whose merge renders the server's snapshot): not this record.
        let theirs = record(b"new", Reason::Pull, Hash::of(b"server's head"));
        assert!(!said(&rec, &[theirs], old));
        // A record the head is never taken from (a server's push).
        let push = record(b"new", Reason::Other("push".into()), old);
        assert!(!said(&push, std::slice::from_ref(&push), old));
    }
}
