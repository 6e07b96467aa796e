//! Sync between repositories: what `sgardd` decides about a push, and how
//! `sgard pull` merges a server's state into the local one.
//!
//! Both sides name a state by its head id: the SHA-256 of the manifest as
//! sgard renders it. A client remembers, per server, the id it last synced
//! with (its *base*); a push is accepted only as a fast-forward of the
//! server's head from that base, and a pull merges entry by entry against it,
//! so neither side's changes are lost. Peers that send no base (the Go
//! sgard) get the Go rule: the newer `updated` wins.

use crate::Tx;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ffi::OsString;

use sgard_manifest::history::{HISTORY_FILE, Reason, Record};
use sgard_manifest::purges::Purge;
use sgard_manifest::{Entry, Manifest, Timestamp};
use sgard_store::Hash;

use crate::base::{BaseEntry, Seen};
pub use crate::syncstate::SyncKey;
use crate::{Error, Garden, Prompt, RestoreOptions, RestoreReport, Result};

/// What a pushing client says it built on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    /// A Go client: no base; the newer `updated` wins.
    Legacy,
    /// This client never synced with this server.
    Never,
    /// The server head this client last synced with.
    Id(Hash),
}

/// The server's answer to a push.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushDecision {
    /// It may go in; these blobs are needed first.
    Accepted(Vec<Hash>),
    /// Not a fast-forward (or older): the server has changes this client
    /// has not pulled.
    Rejected,
    /// The server already has exactly this.
    UpToDate,
}

/// How `pull` settles entries changed on both sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Side {
    /// Leave them conflicts here, as on a shared folder (see
    /// [`Garden::pull_merge`]); where no conflict can hold the change,
    /// refuse the pull and change nothing.
    #[default]
    Merge,
    /// Take the server's version.
    Theirs,
    /// Keep the local version.
    Ours,
}

/// What a pull accepts from a server beyond what it accepts by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trust {
    /// Entries outside the home folder (absolute paths).
    pub absolute: bool,
    /// Setuid and setgid bits in entries' modes (dropped otherwise).
    pub setuid: bool,
}

/// The result of [`Garden::pull_merge`].
#[derive(Debug, Default)]
pub struct PullReport {
    /// Nothing new came from the server.
    pub up_to_date: bool,
    /// Entries the merge took from the server (added, changed, untracked).
    pub taken: Vec<String>,
    /// Entries changed on both sides, settled by `--theirs`/`--ours`.
    pub settled: Vec<String>,
    /// Entries changed on both sides left conflicts here: the server's
    /// version in the repository, the disk as it was (see
    /// [`Garden::pull_merge`]).
    pub conflicts: Vec<String>,
    /// What the restore of the taken entries did.
    pub restore: RestoreReport,
    /// The server head this pull synced with (the new base).
    pub base: Option<Hash>,
    /// Entries taken whose setuid/setgid bits were dropped.
    pub stripped: Vec<String>,
}

/// What a pull would take (see [`Garden::plan_pull`]).
#[derive(Clone, Debug)]
pub struct PullPlan {
    /// Entries the merge takes from the server (added, changed, untracked).
    pub taken: Vec<String>,
    /// Entries changed on both sides, settled by `--theirs`/`--ours`.
    pub settled: Vec<String>,
    /// Entries changed on both sides that the pull leaves conflicts here.
    pub conflicts: Vec<String>,
    /// Entries changed on both sides that no conflict here can hold (see
    /// `stays_a_conflict`): the pull is refused.
    pub unsettled: Vec<String>,
    /// Taken entries outside the home folder the pull would refuse.
    pub outside: Vec<String>,
    /// Taken entries whose setuid/setgid bits are dropped.
    pub stripped: Vec<String>,
    /// The merged entries, by path.
    merged: BTreeMap<String, Entry>,
    /// The state of the last sync the merge is made against.
    base_doc: Manifest,
}

impl PullPlan {
    /// Why the pull is refused, if it is: changes on both sides that
    /// cannot be left conflicts, or entries outside the home folder.
    pub fn refusal(&self) -> Option<Error> {
        if !self.unsettled.is_empty() {
            return Some(Error::Unsettled {
                paths: self.unsettled.clone(),
            });
        }
        if !self.outside.is_empty() {
            return Some(Error::OutsideHome {
                paths: self.outside.clone(),
            });
        }
        None
    }
}

/// What an unsigned push (a Go client's: it drops these fields) leaves
/// out is kept from the server's manifest `from`: the template data (a
/// manifest without it; emptying data.yaml clears it), the folder modes (a
/// manifest with none) and the scripts' run flags (see [`keep_runs`]).
pub fn keep_go_dropped(m: &mut Manifest, from: &Manifest) {
    if m.data.is_none() {
        m.data = from.data;
    }
    if m.folders.is_empty() {
        m.folders.clone_from(&from.folders);
    }
    keep_runs(m, from);
}

/// A manifest without any run flag (the Go sgard drops the field when it
/// writes one) takes the flags `from` has for the same paths; one with any
/// flag says what it means.
fn keep_runs(m: &mut Manifest, from: &Manifest) {
    if m.files.iter().any(|e| e.run.is_some()) {
        return;
    }
    for e in &mut m.files {
        if let Some(o) = from.get(&e.path)
            && o.kind == e.kind
        {
            e.run = o.run;
        }
    }
}

/// The head id of a manifest: the hash of its rendering.
pub fn head_id_of(m: &Manifest) -> Hash {
    Hash::of(m.to_yaml().as_bytes())
}

pub(crate) use crate::threeway::stays_a_conflict;

impl Garden {}

impl Tx<'_> {
    /// The entries with changes in the repository not yet on this disk:
    /// `behind` ones (unchanged here) and conflicts (changed here too; a
    /// restore asks about those). A file missing here is not among them
    /// (it may have been deleted on purpose); the paths a pull took and did
    /// not get to write are kept apart ([`crate::base::Base::unfinished`]).
    ///
    /// # Errors
    /// Only for inconsistent targeting.
    pub(crate) fn incoming_paths(&mut self) -> Result<Vec<String>> {
        let repo = self.repo;
        let all: Vec<usize> = (0..repo.manifest.files.len()).collect();
        let mut scan = self.scan(&all, false);
        let mut out = Vec::new();
        for (i, e) in repo.manifest.files.iter().enumerate() {
            if !repo.applies(e)? {
                continue;
            }
            let found = scan.take(self, i);
            if self
                .judge(e, false, &found)
                .is_ok_and(|j| matches!(j.state, crate::State::Behind | crate::State::Conflict))
            {
                out.push(e.path.clone());
            }
        }
        Ok(out)
    }

    /// Sets this machine's base of `path` to `b`, the version of the last
    /// sync (none: the two sides never shared one), whatever disk and
    /// repository hold: what a conflict is judged against. It holds from
    /// the head about to be written, whose entry for `path` is `head`:
    /// cut off before that head, this machine's base stays the one that
    /// agrees with the old head (its own recorded change is no conflict
    /// with itself); after it, the conflict is one (never `behind`, which a
    /// restore would overwrite).
    pub(crate) fn base_to_last_sync(&mut self, path: &str, b: Option<&Entry>, head: &Entry) {
        let record = b.map(|b| {
            BaseEntry::agreed(
                b,
                &Seen {
                    kind: b.kind,
                    mode: b
                        .mode
                        .unwrap_or_else(|| sgard_manifest::Mode::from_st_mode(0o644)),
                    content: self.content_of(b),
                    target: b.target.clone(),
                },
            )
        });
        self.work
            .base
            .put_with_head(path, record, BaseEntry::of_head(head));
    }
}

/// The machine-local file remembering, per server, the head last synced.
pub const SYNC_STATE_FILE: &str = "sync-state";

/// Where a server keeps the signature pushed with its head.
pub const HEAD_SIGNATURE_FILE: &str = "head-signature";

impl Garden {
    fn sync_state(&self) -> String {
        sgard_store::durable::read_regular_to_string(&self.repo.root.join(SYNC_STATE_FILE))
            .unwrap_or_default()
    }

    /// Whom a sync with the server at `addr` is with, before it answered:
    /// the garden that address served last.
    pub fn sync_key_at(&self, addr: &str) -> SyncKey {
        SyncKey::remembered(&self.sync_state(), addr)
    }

    /// The server head this repository last synced with, with `key`'s
    /// garden (or, for a server that names none, at its address).
    pub fn sync_base(&self, key: &SyncKey) -> Option<Hash> {
        crate::syncstate::base(&self.sync_state(), key)
    }

    /// As [`Garden::sync_base`], judged by the server's head and history:
    /// of the bases this repository holds that may be the garden's (its
    /// own, and those older versions kept per address), the latest the
    /// server has.
    pub fn sync_base_known(&self, key: &SyncKey, head: Hash, history: &[Record]) -> Option<Hash> {
        let rank = |h: &Hash| {
            if *h == head {
                return Some(usize::MAX);
            }
            history.iter().enumerate().rev().find_map(|(i, r)| {
                if r.id == *h {
                    Some(2 * i + 1)
                } else if r.head_before == Some(*h) {
                    Some(2 * i)
                } else {
                    None
                }
            })
        };
        crate::syncstate::base_by_history(&self.sync_state(), key, rank)
    }

    /// Remembers the server head this repository synced with.
    ///
    /// # Errors
    /// Write errors.
    pub fn set_sync_base(&self, key: &SyncKey, id: Hash) -> Result<()> {
        let path = self.repo.root.join(SYNC_STATE_FILE);
        let text = crate::syncstate::record(&self.sync_state(), key, id);
        sgard_store::durable::write_atomic(&path, text.as_bytes(), 0o644)?;
        Ok(())
    }

    /// The size of every stored blob the head and the shared history need
    /// (for a pulling client to bound each blob it receives).
    pub fn blob_sizes(&mut self) -> std::collections::HashMap<Hash, u64> {
        let mut want: BTreeSet<Hash> = self.repo.manifest.referenced_blobs().collect();
        for r in &self.repo.repo_history.records {
            want.insert(r.id);
            if let Ok(doc) = crate::Tx::new(&self.repo, &mut self.work).snapshot_doc(&r.id) {
                want.extend(doc.referenced_blobs());
            }
        }
        want.into_iter()
            .filter_map(|h| Some((h, self.repo.store.size_of(&h).ok()??)))
            .collect()
    }

    /// The head id: the hash of manifest.yaml as sgard wrote or read it.
    pub fn head_id(&self) -> Hash {
        // The rendering's hash, so a manifest.yaml written by another tool
        // (the Go sgard's quoting) still names the same state as the manifest
        // sent over the wire.
        head_id_of(&self.repo.manifest)
    }

    /// Blobs that a manifest and history records need and this store lacks.
    ///
    /// # Errors
    /// Store I/O errors.
    pub fn missing_for(&self, m: &Manifest, history: &[Record]) -> Result<Vec<Hash>> {
        self.missing_among(m, history, &[])
    }

    /// As [`Garden::missing_for`], also checking `extra` hashes.
    ///
    /// # Errors
    /// Store I/O errors.
    pub fn missing_among(
        &self,
        m: &Manifest,
        history: &[Record],
        extra: &[Hash],
    ) -> Result<Vec<Hash>> {
        let mut want: BTreeSet<Hash> = m.referenced_blobs().collect();
        want.extend(history.iter().map(|r| r.id));
        want.extend(extra.iter().copied());
        let mut out = Vec::new();
        for h in want {
            if !self.repo.store.contains(&h)? {
                out.push(h);
            }
        }
        Ok(out)
    }

    /// What the server says to a push of `m` built on `base`, carrying
    /// `purges` (see [`crate::rules::with_purges`]).
    ///
    /// # Errors
    /// Store I/O errors; the purge log cannot be read.
    pub fn push_decision(
        &self,
        m: &Manifest,
        base: Base,
        history: &[Record],
        extra: &[Hash],
        purges: &[Purge],
    ) -> Result<PushDecision> {
        let log = self.purges()?;
        let known: HashSet<Hash> = log.purges.iter().map(Purge::id).collect();
        // A purge cut off here in the middle counts as unseen: the push
        // finishes it.
        let mut unseen = false;
        for p in purges {
            if !known.contains(&p.id()) || !self.purge_done(p)? {
                unseen = true;
                break;
            }
        }
        let verdict = crate::rules::push_verdict(
            &self.repo.manifest,
            !self.repo.repo_history.records.is_empty(),
            m,
            base,
        );
        match crate::rules::with_purges(verdict, unseen, crate::rules::names_purged(history, &log))
        {
            crate::rules::Verdict::UpToDate => return Ok(PushDecision::UpToDate),
            crate::rules::Verdict::Rejected => {
                return Ok(PushDecision::Rejected);
            }
            crate::rules::Verdict::Accepted => {}
        }
        Ok(PushDecision::Accepted(
            self.missing_among(m, history, extra)?,
        ))
    }

    /// Installs a pushed manifest (and merges the pushed history): only if
    /// every blob it and the records name is stored and intact in size.
    /// Returns the new head id.
    ///
    /// # Errors
    /// [`Error::Conflict`] when blobs are missing (nothing changes then).
    /// With `signature` (the head statement and its signature, checked by
    /// the caller to name exactly this manifest), the manifest is installed
    /// exactly as pushed and the signature is kept with it (see
    /// [`Garden::head_signature`]); without, what a Go client drops is kept
    /// from the server's (template data, folder modes, run flags) and any
    /// signature of an earlier head is dropped.
    pub fn install_push(
        &mut self,
        m: Manifest,
        history: Vec<Record>,
        who: &str,
        signature: Option<(&str, &str)>,
    ) -> Result<Hash> {
        self.install_push_purging(m, history, who, signature, &[], &HashSet::new(), None)
            .map(|(h, _)| h)
    }

    /// As [`Garden::install_push`], then applies the pushed `purges` this
    /// repository has not (see [`Garden::apply_purge`]; `protect` and
    /// `grace` as for [`Garden::prune_with`]): the head and its history are
    /// installed first, so what the purge renames is there. A content the
    /// new head names stays stored (the purge's report says which path).
    ///
    /// # Errors
    /// As [`Garden::install_push`] and [`Garden::apply_purge`].
    #[allow(clippy::too_many_arguments)]
    pub fn install_push_purging(
        &mut self,
        m: Manifest,
        history: Vec<Record>,
        who: &str,
        signature: Option<(&str, &str)>,
        purges: &[Purge],
        protect: &HashSet<Hash>,
        grace: Option<std::time::Duration>,
    ) -> Result<(Hash, Vec<crate::PurgeReport>)> {
        let head = self.install_push_only(m, history, who, signature)?;
        let mut reports = Vec::new();
        for p in purges {
            if let Some(r) = self.apply_purge(p, protect, grace)? {
                reports.push(r);
            }
        }
        Ok((head, reports))
    }

    fn install_push_only(
        &mut self,
        m: Manifest,
        history: Vec<Record>,
        who: &str,
        signature: Option<(&str, &str)>,
    ) -> Result<Hash> {
        self.require_exclusive("push")?;
        let missing = self.missing_for(&m, &history)?;
        if !missing.is_empty() {
            return Err(Error::Conflict(format!(
                "the push names {} blob(s) the server does not have (first: {})",
                missing.len(),
                missing[0].short(12)
            )));
        }
        self.merge_history(history)?;
        let mut m = m;
        if signature.is_none() {
            keep_go_dropped(&mut m, &self.repo.manifest);
        }
        let id = head_id_of(&m);
        // The old head's signature goes first: a crash between the two
        // writes leaves a head without one, never a signature on a head it
        // does not name.
        self.set_head_signature(None)?;
        self.repo.manifest = m;
        // The repository's data.yaml is the pushed one (what saving records).
        self.tx().install_data()?;
        if self.repo.history.records.iter().any(|r| r.id == id) {
            // The client's own checkpoint: its snapshot is already the head.
            self.write_manifest()?;
            debug_assert_eq!(self.repo.head_hash, id);
        } else {
            self.commit_head(
                Reason::Other("push".into()),
                Some(format!("pushed by {who}")),
                0,
            )?;
        }
        let head = self.head_id();
        if let Some(sig) = signature {
            self.set_head_signature(Some(sig))?;
        }
        Ok(head)
    }

    /// The statement and signature pushed with the current head, if it was
    /// signed (a signature kept for another head, after the repository was
    /// changed here, is no signature of this one).
    pub fn head_signature(&self) -> Option<(String, String)> {
        let text =
            sgard_store::durable::read_regular_to_string(&self.repo.root.join(HEAD_SIGNATURE_FILE))
                .ok()?;
        let (first, rest) = text.split_once('\n')?;
        let id = Hash::parse(first.strip_prefix("head ")?).ok()?;
        if id != self.head_id() {
            return None;
        }
        let at = rest.find("-----BEGIN SSH SIGNATURE-----")?;
        Some((rest[..at].to_owned(), rest[at..].to_owned()))
    }

    /// Keeps (or, with `None`, drops) the signature of the current head:
    /// `<repo>/head-signature`, the head's id, the statement, the signature.
    fn set_head_signature(&self, sig: Option<(&str, &str)>) -> Result<()> {
        let path = self.repo.root.join(HEAD_SIGNATURE_FILE);
        match sig {
            Some((statement, signature)) => sgard_store::durable::write_atomic(
                &path,
                format!("head {}\n{statement}{signature}", self.head_id().to_hex()).as_bytes(),
                0o644,
            )?,
            None => match std::fs::remove_file(&path) {
                Ok(()) => sgard_store::durable::fsync_dir(&self.repo.root)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("removing", &path, e)),
            },
        }
        Ok(())
    }

    /// Blobs that the snapshots of `records` reference and this store lacks
    /// (for snapshots whose documents are stored here; the others are
    /// reported by [`Garden::missing_for`] first).
    ///
    /// # Errors
    /// Store I/O errors.
    pub fn snapshot_blobs_missing(&mut self, records: &[Record]) -> Result<Vec<Hash>> {
        let mut out = BTreeSet::new();
        let mut seen = HashSet::new();
        for r in records {
            if !seen.insert(r.id) || !self.repo.store.contains(&r.id)? {
                continue;
            }
            if let Ok(doc) = self.snapshot_doc(&r.id) {
                for h in doc.referenced_blobs() {
                    if !self.repo.store.contains(&h)? {
                        out.insert(h);
                    }
                }
            }
        }
        Ok(out.into_iter().collect())
    }

    /// Every blob the snapshots of `records` reference (their documents
    /// must be stored here).
    pub fn snapshot_blobs(&mut self, records: &[Record]) -> Vec<Hash> {
        let mut out = BTreeSet::new();
        let mut seen = HashSet::new();
        for r in records {
            if seen.insert(r.id)
                && let Ok(doc) = self.snapshot_doc(&r.id)
            {
                out.extend(doc.referenced_blobs());
            }
        }
        out.into_iter().collect()
    }

    /// Adds records this log does not have (same id, reason and time),
    /// keeping the log in time order.
    fn merge_history(&mut self, incoming: Vec<Record>) -> Result<()> {
        self.require_history()?;
        let have: HashSet<(Hash, String, Timestamp)> = self
            .repo
            .repo_history
            .records
            .iter()
            .map(|r| (r.id, r.reason.as_str().to_owned(), r.time))
            .collect();
        let new: Vec<Record> = incoming
            .into_iter()
            .filter(|r| !have.contains(&(r.id, r.reason.as_str().to_owned(), r.time)))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        for r in &new {
            if !self.repo.store.contains(&r.id)? {
                return Err(Error::Conflict(format!(
                    "history record {} has no snapshot blob",
                    r.id.short(12)
                )));
            }
        }
        let lacking = self.snapshot_blobs_missing(&new)?;
        if let Some(h) = lacking.first() {
            return Err(Error::Conflict(format!(
                "{} blob(s) the incoming snapshots reference are missing (first: {})",
                lacking.len(),
                h.short(12)
            )));
        }
        let mut h = self.repo.repo_history.clone();
        h.records = crate::threeway::union_records(&h.records, &new);
        let path = self.repo.root.join(HISTORY_FILE);
        let hash = h.save(&path)?;
        self.tx().index_history_written(&path, &h, &hash, false);
        self.set_repo_history(h);
        Ok(())
    }

    /// Makes an empty head older than any push: the Go client pushes only
    /// a manifest newer than the server's (by `updated`), so a server made
    /// after the machines' last changes must not look newer than them
    /// (`sgardd --init`). A head with anything in it is left alone.
    ///
    /// # Errors
    /// Saving the manifest.
    pub fn backdate_empty_head(&mut self) -> Result<()> {
        if !self.repo.manifest.files.is_empty() || self.repo.manifest.encryption.is_some() {
            return Ok(());
        }
        self.repo.manifest.updated = Timestamp::zero();
        self.save()
    }

    /// Moves the manifest's `updated` past `t` and saves: a Go server takes
    /// a push only of a manifest newer than its own, and an empty server
    /// made after this repository's last change holds nothing to pull.
    ///
    /// # Errors
    /// Saving the manifest.
    pub fn move_updated_past(&mut self, t: Timestamp) -> Result<()> {
        if self.repo.manifest.updated > t {
            return Ok(());
        }
        self.repo.manifest.updated =
            Timestamp::from_datetime(t.datetime() + chrono::TimeDelta::milliseconds(1));
        self.save()
    }

    /// The state of the last sync with a server, `b`, as a merge compares
    /// against it: its snapshot as it was before any purge (a snapshot a
    /// purge renamed is found by its new id); an empty one when it is not
    /// here.
    fn base_doc(&mut self, b: &Hash) -> Manifest {
        let renames: Vec<(Hash, Hash)> = self
            .purges()
            .map(|log| log.purges.into_iter().flat_map(|p| p.renamed).collect())
            .unwrap_or_default();
        let mut id = *b;
        // Each purge renames once: a chain is at most as long as the log.
        for _ in 0..=renames.len() {
            if let Ok(d) = self.snapshot_doc(&id) {
                return crate::rules::unpurged(d);
            }
            match renames.iter().find(|(old, _)| *old == id) {
                Some((_, new)) => id = *new,
                None => break,
            }
        }
        Manifest::new(Timestamp::zero())
    }

    /// Decides, entry by entry, what a pull of `theirs` would take (see
    /// [`Garden::pull_merge`]): nothing is written. `pull --dry-run` shows
    /// it; `pull_merge` carries it out.
    ///
    /// # Errors
    /// Reading the base snapshot's document.
    pub fn plan_pull(
        &mut self,
        theirs: &Manifest,
        base: Option<Hash>,
        side: Side,
        trust: Trust,
    ) -> Result<PullPlan> {
        // A manifest the Go sgard wrote has no run flags: that is no news.
        let mut with_runs;
        let theirs = if theirs.files.iter().any(|e| e.run.is_some()) {
            theirs
        } else {
            with_runs = theirs.clone();
            keep_runs(&mut with_runs, &self.repo.manifest);
            &with_runs
        };
        let base_doc = match base {
            Some(b) => self.base_doc(&b),
            None => Manifest::new(Timestamp::zero()),
        };
        let agreed = &self.work.base;
        let e = crate::threeway::merge_entries(
            &base_doc,
            &self.repo.manifest,
            theirs,
            side,
            &|p, l, t| {
                stays_a_conflict(l, t, agreed.get(p)).then_some(crate::threeway::Which::Local)
            },
        );
        let mut plan = PullPlan {
            taken: e.taken,
            settled: e.settled,
            conflicts: e.conflicts.into_iter().map(|(p, _)| p).collect(),
            unsettled: e.unsettled,
            outside: Vec::new(),
            stripped: Vec::new(),
            merged: e.merged,
            base_doc: Manifest::new(Timestamp::zero()),
        };
        // A server may not reach outside the home folder unless allowed
        // (what a conflict takes into the repository a restore may write).
        if !trust.absolute {
            plan.outside = plan
                .taken
                .iter()
                .chain(&plan.conflicts)
                .filter(|p| p.starts_with('/') && plan.merged.contains_key(p.as_str()))
                .cloned()
                .collect();
        }
        if !trust.setuid {
            for p in plan.taken.iter().chain(&plan.conflicts) {
                if let Some(e) = plan.merged.get_mut(p)
                    && let Some(m) = e.mode
                    && m.bits() & 0o6000 != 0
                {
                    e.mode = Some(sgard_manifest::Mode::from_st_mode(m.bits() & !0o6000));
                    plan.stripped.push(p.clone());
                }
            }
        }
        plan.base_doc = base_doc;
        Ok(plan)
    }

    /// Merges a server's state into this repository, entry by entry against
    /// `base` (the server head this repository last synced with): entries
    /// changed on one side only are taken; entries changed on both sides are
    /// settled by `side`, or with [`Side::Merge`] left conflicts here, as a
    /// shared folder leaves them (see `stays_a_conflict`): the server's
    /// version goes into the repository, the file on disk is not touched,
    /// and this machine's base of it goes back to the version of the last
    /// sync, so `status` says `conflict` and `merge` has its three versions
    /// ([`PullReport::conflicts`]). A change on both sides no conflict can
    /// hold refuses the pull ([`Error::Conflict`] listing them, nothing
    /// written). The merged result is recorded as a `pull`
    /// snapshot and the entries it changed are restored with the normal
    /// prompt rules, after a safety snapshot, so `undo` reverts the pull.
    /// An entry the server untracked is untracked here; its file stays.
    /// An empty server never empties this repository.
    ///
    /// The blobs of `theirs` and of `history` must already be stored.
    ///
    /// # Errors
    /// [`Error::Conflict`]; restore and history errors.
    #[allow(clippy::too_many_arguments)]
    pub fn pull_merge(
        &mut self,
        theirs: Manifest,
        history: Vec<Record>,
        base: Option<Hash>,
        side: Side,
        opts: RestoreOptions,
        trust: Trust,
        prompt: &mut dyn Prompt,
        from: &str,
    ) -> Result<PullReport> {
        self.require_exclusive("pull")?;
        let their_id = head_id_of(&theirs);
        let mut report = PullReport {
            base: Some(their_id),
            ..PullReport::default()
        };
        if theirs.files.is_empty() && theirs.encryption.is_none() && base.is_none() {
            report.up_to_date = true;
            report.base = None;
            return Ok(report);
        }
        // An edit of data.yaml here is a change here.
        self.refresh_data();
        let plan = self.plan_pull(&theirs, base, side, trust)?;
        if let Some(e) = plan.refusal() {
            return Err(e);
        }
        // A pull writes into the home as a restore does: what killed runs
        // left there goes first.
        self.sweep_home();
        let PullPlan {
            base_doc,
            merged,
            taken,
            settled,
            conflicts,
            stripped,
            ..
        } = plan;
        report.taken = taken;
        report.settled = settled;
        report.conflicts = conflicts;
        report.stripped = stripped;
        let local = self.repo.manifest.clone();
        let mut result = local.clone();
        result.files = merged.into_values().collect();
        // Top-level settings: taken from the server unless changed here.
        let top = crate::threeway::merge_top(&base_doc, &local, &theirs, side);
        result.exclude = top.exclude;
        result.encryption = top.encryption;
        result.data = top.data;
        if top.data_conflict {
            self.work.note(crate::why::Why::new(
                format!(
                    "{} changed both here and on the server; this one is kept",
                    self.data_path().display()
                ),
                crate::why::Remedy::PullTheirs,
            ));
        }
        // Folder modes, per folder (a Go server keeps none: then kept).
        let (folders, stripped) = crate::folders::merge(
            &base_doc.folders,
            &local.folders,
            &theirs.folders,
            trust.setuid,
        );
        result.folders = folders;
        report
            .stripped
            .extend(stripped.into_iter().map(|p| format!("{p} (folder)")));
        self.merge_history(history)?;
        // Keep the server's state as a blob: it is the next pull's base.
        self.repo.store.write_bytes(theirs.to_yaml().as_bytes())?;
        let new_head = result.files != local.files
            || result.exclude != local.exclude
            || result.encryption != local.encryption
            || result.data != local.data
            || result.folders != local.folders;
        let data_changed = result.data != local.data;
        if new_head {
            result.updated = self.repo.env.now;
            if theirs.updated > result.updated {
                result.updated = theirs.updated;
            }
            result.message.clone_from(&theirs.message);
            self.repo.manifest = result;
            if data_changed {
                self.tx().install_data()?;
            }
            // What the merge took is written below; if that never happens
            // (a crash, an I/O error), the next pull must still write it,
            // even a file this disk never had (no state says "behind").
            let mut unfinished: Vec<String> = report
                .taken
                .iter()
                .filter(|p| self.repo.manifest.get(p).is_some())
                .cloned()
                .collect();
            unfinished.extend(self.work.base.unfinished());
            self.work.base.set_unfinished(&unfinished)?;
            // A conflict left here is judged against the last sync, from
            // the new head on (saved with it).
            for p in &report.conflicts {
                if let Some(head) = self.repo.manifest.get(p) {
                    Tx::new(&self.repo, &mut self.work).base_to_last_sync(p, base_doc.get(p), head);
                }
            }
            if let Err(e) = self.commit_head(Reason::Pull, Some(format!("pull from {from}")), 0) {
                // Not written: those bases agree with nothing.
                self.work.base.rollback();
                return Err(e);
            }
        }
        self.repo.env.crash_point("pull-after-merge");
        // Restore what the merge took, what an earlier pull took and did
        // not write, and every entry changed in the repository that this
        // disk does not have yet: that finishes a pull or restore that was
        // interrupted (or refused). Files edited here since the last sync
        // are asked about, as by restore.
        let mut wanted: BTreeSet<String> = report
            .taken
            .iter()
            .chain(&self.work.base.unfinished())
            .filter(|p| self.repo.manifest.get(p).is_some())
            .cloned()
            .collect();
        wanted.extend(self.tx().incoming_paths()?);
        // A conflict left here keeps its file as it is.
        for p in &report.conflicts {
            wanted.remove(p);
        }
        if data_changed {
            // New data: every template may render differently.
            wanted.extend(
                self.repo
                    .manifest
                    .files
                    .iter()
                    .filter(|e| e.template)
                    .map(|e| e.path.clone()),
            );
        }
        if !wanted.is_empty() {
            let args: Vec<OsString> = wanted
                .iter()
                .map(|p| self.repo.env.expand(p).into_os_string())
                .collect();
            let files = self.repo.manifest.files.clone();
            report.restore =
                self.restore_selected(&files, &args, opts, prompt, &format!("pull from {from}"))?;
        }
        // Done, but for what failed (a refusal is a local change, which the
        // next pull finds by its state).
        let failed: Vec<String> = report
            .restore
            .actions
            .iter()
            .filter(|(_, a)| matches!(a, crate::RestoreAction::Failed(_)))
            .map(|(p, _)| p.clone())
            .collect();
        self.work.base.set_unfinished(&failed)?;
        report.up_to_date = !new_head
            && report.taken.is_empty()
            && report.restore.actions.iter().all(|(_, a)| {
                matches!(
                    a,
                    crate::RestoreAction::UpToDate | crate::RestoreAction::NotTargeted
                )
            });
        Ok(report)
    }
}
