//! The rules of a shared repository, written once as functions of data:
//! what a push may replace ([`push_verdict`], [`with_purges`]), what is
//! live ([`Live`]), what a prune may delete ([`doomed`]) and what a purge
//! does to a snapshot and to the history ([`mark_purged`], [`purge_of`],
//! [`rename_records`]). Every caller asks these: the
//! `Garden` (a repository in a folder, and so sgardd's folder backend) and
//! sgardd's object backend, which keeps no repository and reads its
//! manifests from an object store. (How two manifests merge, the third
//! rule both pull and the git merge driver follow, is `threeway`.)
//!
//! Nothing here reads a file or a clock: the callers gather the facts
//! (the head, its history, which snapshots say what, how old each stored
//! object is) in whatever way their storage allows, and the rule decides.

use std::collections::{BTreeSet, HashMap, HashSet};

use sgard_manifest::Manifest;
use sgard_manifest::history::Record;
use sgard_manifest::purges::PurgeLog;
use sgard_store::Hash;

use crate::Base;
use crate::sync::head_id_of;

/// What a push does to the head, by [`push_verdict`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The head already is what is pushed: nothing to do.
    UpToDate,
    /// It may replace the head (once every object it names is stored).
    Accepted,
    /// It would lose what the head has that the pusher never pulled.
    Rejected,
}

/// Whether a push of `pushed`, built on `base`, may replace `head` (the
/// current head's manifest; `head_has_history` whether its shared history
/// has any record).
///
/// A push is a fast-forward: from the head the client last synced with
/// (`Base::Id`), or from nothing onto an empty garden (`Base::Never`). A Go
/// client names no base (`Base::Legacy`): the newer `updated` wins, as the
/// Go server decides, and the same `updated` is up to date.
pub fn push_verdict(
    head: &Manifest,
    head_has_history: bool,
    pushed: &Manifest,
    base: Base,
) -> Verdict {
    let head_id = head_id_of(head);
    if head_id_of(pushed) == head_id {
        return Verdict::UpToDate;
    }
    let ok = match base {
        Base::Legacy => {
            if pushed.updated == head.updated {
                return Verdict::UpToDate;
            }
            pushed.updated > head.updated
        }
        Base::Never => head.files.is_empty() && !head_has_history,
        Base::Id(b) => b == head_id,
    };
    if ok {
        Verdict::Accepted
    } else {
        Verdict::Rejected
    }
}

/// The verdict on a push that carries purge statements too: one the
/// garden has not applied (`unseen`) makes a push of the head it already
/// has worth installing (its history changed); and a push whose history
/// names a snapshot a purge the garden applied has renamed comes from a
/// machine that has not pulled that purge: it would bring the purged
/// content back, and is refused until it pulls.
pub fn with_purges(v: Verdict, unseen: bool, names_purged: bool) -> Verdict {
    match v {
        _ if names_purged => Verdict::Rejected,
        Verdict::UpToDate if unseen => Verdict::Accepted,
        v => v,
    }
}

/// Whether `history` names a snapshot one of `log`'s purges renamed (the
/// old, purged one).
pub fn names_purged(history: &[Record], log: &PurgeLog) -> bool {
    let old: HashSet<Hash> = log
        .purges
        .iter()
        .flat_map(|p| p.renamed.iter().map(|r| r.0))
        .collect();
    !old.is_empty()
        && history
            .iter()
            .any(|r| old.contains(&r.id) || r.parent.is_some_and(|p| old.contains(&p)))
}

/// Marks, in a snapshot, every entry whose content is in `gone` as purged
/// (its hash moves to `purged`; all else stays, so a merge judging by the
/// snapshot sees the entry as it was, by [`unpurged`]). Whether anything
/// changed.
pub fn mark_purged(doc: &mut Manifest, gone: &BTreeSet<Hash>) -> bool {
    let mut changed = false;
    for e in &mut doc.files {
        if let Some(h) = e.hash
            && gone.contains(&h)
        {
            e.hash = None;
            e.purged = Some(Box::new(h));
            changed = true;
        }
    }
    changed
}

/// Why a purge made on `host` is not applied: it says snapshot `old`
/// became `new`, and `new` is not here (`None`) or not `old` with contents
/// purged (`Some`). The same words from every place that applies one.
pub fn purge_refusal(host: &str, old: &Hash, new: &Hash, new_is_here: bool) -> String {
    if new_is_here {
        format!(
            "the purge made on {host} says snapshot {} became {}, which is not it with \
             contents purged; nothing was purged",
            old.short(12),
            new.short(12)
        )
    } else {
        format!(
            "the purge made on {host} names snapshot {}, which is not here; nothing was purged",
            new.short(12)
        )
    }
}

/// A snapshot as it was before any purge marked it: what a merge compares
/// against (the entries say which content they had; nothing is read).
pub fn unpurged(mut doc: Manifest) -> Manifest {
    for e in &mut doc.files {
        if let Some(h) = e.purged.take() {
            e.hash = Some(*h);
        }
    }
    doc
}

/// Whether `new` is snapshot `old` with some contents purged (by
/// [`mark_purged`], nothing else changed): the contents purged, or `None`
/// (a purge statement that says otherwise is not to be applied).
pub fn purge_of(old: &Manifest, new: &Manifest) -> Option<BTreeSet<Hash>> {
    if old.files.len() != new.files.len() {
        return None;
    }
    let gone: BTreeSet<Hash> = old
        .files
        .iter()
        .zip(&new.files)
        .filter_map(|(o, n)| match (o.hash, n.purged.as_deref().copied()) {
            (Some(h), Some(p)) if h == p => Some(h),
            _ => None,
        })
        .collect();
    let mut marked = old.clone();
    mark_purged(&mut marked, &gone);
    (marked == *new).then_some(gone)
}

/// The history with each snapshot `renamed` names renamed (as its id, its
/// parent, or the head before it); records that become one (the same id,
/// reason and time, as history merges judge them) are kept once.
pub fn rename_records(records: &[Record], renamed: &HashMap<Hash, Hash>) -> Vec<Record> {
    let map = |h: &Hash| renamed.get(h).copied().unwrap_or(*h);
    let mut seen = HashSet::new();
    let mut out: Vec<Record> = Vec::with_capacity(records.len());
    for r in records {
        let mut r = r.clone();
        r.id = map(&r.id);
        r.parent = r.parent.as_ref().map(map);
        r.head_before = r.head_before.as_ref().map(map);
        if seen.insert((r.id, r.reason.as_str().to_owned(), r.time)) {
            out.push(r);
        }
    }
    out
}

/// Records in time order, but never one before its parent: a record whose
/// parent is in the list (a record of that id other than itself) waits
/// until one precedes it. Machines' clocks differ, so time alone can put a
/// pull's record before the snapshot it was made on, when a merge of two
/// histories (or a purge's renamed records) sorts them anew. Records whose
/// parents form a cycle (a damaged history) keep their time order.
pub fn parents_first(mut records: Vec<Record>) -> Vec<Record> {
    records.sort_by_key(|r| r.time);
    let mut count: HashMap<Hash, usize> = HashMap::new();
    for r in &records {
        *count.entry(r.id).or_default() += 1;
    }
    let ready = |r: &Record, placed: &HashSet<Hash>| match r.parent {
        None => true,
        Some(p) => {
            placed.contains(&p) || count.get(&p).copied().unwrap_or(0) <= usize::from(p == r.id)
        }
    };
    let mut placed: HashSet<Hash> = HashSet::new();
    let mut out = Vec::with_capacity(records.len());
    let mut held: Vec<Record> = Vec::new();
    for r in records {
        if !ready(&r, &placed) {
            held.push(r);
            continue;
        }
        placed.insert(r.id);
        out.push(r);
        // What waited for it (or for what it lets in) follows now.
        while let Some(i) = held.iter().position(|h| ready(h, &placed)) {
            let h = held.remove(i);
            placed.insert(h.id);
            out.push(h);
        }
    }
    out.extend(held);
    out
}

/// The objects a repository needs: everything its head names, every
/// snapshot of its history and what each snapshot names, and what the
/// caller adds (pushes in progress, a head's own texts).
///
/// Built in two steps because only the caller can read a snapshot:
/// [`Live::of`] takes the head and the history, [`Live::snapshots`] lists
/// the snapshots to read (each once), and [`Live::add_doc`] takes what each
/// one says. A snapshot that cannot be read must stop the caller's prune:
/// what it names is unknown.
#[derive(Clone, Debug, Default)]
pub struct Live {
    keep: HashSet<Hash>,
    snapshots: Vec<Hash>,
}

impl Live {
    /// What `head` and its `history` need, before the snapshots are read.
    pub fn of(head: &Manifest, history: &[Record]) -> Live {
        let mut keep: HashSet<Hash> = head.referenced_blobs().collect();
        let mut seen = HashSet::new();
        let mut snapshots = Vec::new();
        for r in history {
            keep.insert(r.id);
            if seen.insert(r.id) {
                snapshots.push(r.id);
            }
        }
        Live { keep, snapshots }
    }

    /// The snapshots whose contents are needed too: read each, and give
    /// it to [`Live::add_doc`].
    pub fn snapshots(&self) -> &[Hash] {
        &self.snapshots
    }

    /// Adds what a manifest (a snapshot, a pending push's) names.
    pub fn add_doc(&mut self, doc: &Manifest) {
        self.keep.extend(doc.referenced_blobs());
    }

    /// Adds objects named otherwise.
    pub fn add(&mut self, hashes: impl IntoIterator<Item = Hash>) {
        self.keep.extend(hashes);
    }

    /// Whether `h` is live.
    pub fn contains(&self, h: &Hash) -> bool {
        self.keep.contains(h)
    }

    /// The set.
    pub fn into_set(self) -> HashSet<Hash> {
        self.keep
    }
}

/// Of the `stored` objects, those a prune deletes: not in `keep` and not
/// `young` (younger than the grace period; asked only of those not kept).
/// A young object may belong to a push in progress whose manifest comes
/// next; it survives this prune whatever names it.
///
/// The same rule holds for each kind of object, with its own `keep`:
/// blobs and chunk lists by the [`Live`] set; chunks by the chunks every
/// staying chunk list names (a list stays when it is live or young).
pub fn doomed(
    keep: &HashSet<Hash>,
    stored: impl IntoIterator<Item = Hash>,
    mut young: impl FnMut(&Hash) -> bool,
) -> Vec<Hash> {
    stored
        .into_iter()
        .filter(|h| !keep.contains(h) && !young(h))
        .collect()
}

/// Whether a Go client's push that has waited `waited` for its blobs is
/// given up (never installed, protecting nothing from a prune): past the
/// grace period, counted in whole seconds by every server (an object store
/// keeps the time in seconds).
pub fn go_push_expired(waited: std::time::Duration, grace: std::time::Duration) -> bool {
    waited.as_secs() > grace.as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(hashes: &[Hash], min: u32) -> Manifest {
        let mut y = format!(
            "version: 1\ncreated: '2026-03-23T12:00:00Z'\nupdated: '2026-03-23T12:{min:02}:00Z'\nfiles:\n"
        );
        for (i, h) in hashes.iter().enumerate() {
            y.push_str(&format!(
                "  - path: ~/f{i}\n    hash: {}\n    type: file\n    mode: '0644'\n    updated: '2026-03-23T12:{min:02}:00Z'\n",
                h.to_hex()
            ));
        }
        Manifest::from_yaml(&y).unwrap()
    }

    /// A checkpoint record of `id` after `parent` (also its head before).
    fn record(id: Hash, parent: Option<Hash>, time: sgard_manifest::Timestamp) -> Record {
        Record {
            id,
            parent,
            time,
            host: "h".into(),
            machine: None,
            reason: sgard_manifest::history::Reason::Checkpoint,
            message: None,
            entries: 1,
            bytes: 1,
            new_blobs: 1,
            head_before: parent,
        }
    }

    #[test]
    fn a_push_is_a_fast_forward_of_the_head_it_was_built_on() {
        let (a, b) = (Hash::of(b"a"), Hash::of(b"b"));
        let head = manifest(&[a], 1);
        let next = manifest(&[b], 2);
        let id = head_id_of(&head);
        assert_eq!(
            push_verdict(&head, true, &next, Base::Id(id)),
            Verdict::Accepted
        );
        assert_eq!(
            push_verdict(&head, true, &next, Base::Id(Hash::of(b"old"))),
            Verdict::Rejected
        );
        assert_eq!(
            push_verdict(&head, true, &head, Base::Id(Hash::of(b"old"))),
            Verdict::UpToDate
        );
        assert_eq!(
            push_verdict(&head, false, &next, Base::Never),
            Verdict::Rejected
        );
        let empty = manifest(&[], 0);
        assert_eq!(
            push_verdict(&empty, false, &next, Base::Never),
            Verdict::Accepted
        );
        assert_eq!(
            push_verdict(&empty, true, &next, Base::Never),
            Verdict::Rejected
        );
        // A Go client: the newer wins, the same time is up to date.
        assert_eq!(
            push_verdict(&head, true, &next, Base::Legacy),
            Verdict::Accepted
        );
        assert_eq!(
            push_verdict(&next, true, &head, Base::Legacy),
            Verdict::Rejected
        );
        assert_eq!(
            push_verdict(&head, true, &manifest(&[b], 1), Base::Legacy),
            Verdict::UpToDate
        );
    }

    #[test]
    fn live_is_the_head_the_snapshots_and_what_they_name() {
        let (a, b, c) = (Hash::of(b"a"), Hash::of(b"b"), Hash::of(b"c"));
        let head = manifest(&[a], 2);
        let snap = manifest(&[b], 1);
        let id = head_id_of(&snap);
        let rec = |id| record(id, None, head.updated);
        let history = vec![rec(id), rec(id)];
        let mut live = Live::of(&head, &history);
        assert_eq!(live.snapshots(), &[id], "each snapshot is read once");
        live.add_doc(&snap);
        let set = live.into_set();
        assert!(set.contains(&a) && set.contains(&b) && set.contains(&id));
        assert!(!set.contains(&c));
        let young = Hash::of(b"young");
        assert_eq!(doomed(&set, [a, b, c, young], |h| *h == young), vec![c]);
    }

    #[test]
    fn a_purge_marks_entries_and_is_told_from_any_other_change() {
        let (a, b) = (Hash::of(b"a"), Hash::of(b"b"));
        let old = manifest(&[a, b], 1);
        let gone: BTreeSet<Hash> = [a].into_iter().collect();
        let mut new = old.clone();
        assert!(mark_purged(&mut new, &gone));
        assert!(!mark_purged(&mut new.clone(), &gone), "once");
        assert_eq!(new.files[0].hash, None);
        assert_eq!(new.files[0].purged.as_deref(), Some(&a));
        assert_eq!(new.referenced_blobs().collect::<Vec<_>>(), vec![b]);
        assert_eq!(purge_of(&old, &new), Some(gone));
        assert_eq!(unpurged(new.clone()), old);
        // Anything else changed, an entry dropped, a purge of a content
        // the entry did not have: not a purge.
        let mut other = new.clone();
        other.files[1].mode = None;
        assert_eq!(purge_of(&old, &other), None);
        let mut fewer = new.clone();
        fewer.files.pop();
        assert_eq!(purge_of(&old, &fewer), None);
        let mut wrong = new.clone();
        wrong.files[0].purged = Some(Box::new(b));
        assert_eq!(purge_of(&old, &wrong), None);
    }

    #[test]
    fn a_rename_follows_ids_parents_and_heads_before_and_keeps_one_of_each() {
        let (x, y, z) = (Hash::of(b"x"), Hash::of(b"y"), Hash::of(b"z"));
        let head = manifest(&[], 1);
        let rec = |id, parent| record(id, parent, head.updated);
        let renamed: HashMap<Hash, Hash> = [(x, y)].into_iter().collect();
        let out = rename_records(&[rec(x, None), rec(z, Some(x)), rec(y, None)], &renamed);
        assert_eq!(
            out.len(),
            2,
            "the renamed record and the pushed one are one"
        );
        assert_eq!(out[0].id, y);
        assert_eq!(out[1].parent, Some(y));
        assert_eq!(out[1].head_before, Some(y));

        let mut log = PurgeLog::default();
        assert!(!names_purged(&out, &log));
        log.purges.push(sgard_manifest::purges::Purge {
            time: head.updated,
            host: "h".into(),
            paths: vec![],
            kept_current: true,
            versions: 1,
            snapshots: vec![y],
            renamed: vec![(x, y)],
            signature: None,
        });
        assert!(!names_purged(&out, &log));
        assert!(names_purged(&[rec(x, None)], &log));
        assert!(names_purged(&[rec(z, Some(x))], &log));
        assert_eq!(
            with_purges(Verdict::UpToDate, true, false),
            Verdict::Accepted
        );
        assert_eq!(
            with_purges(Verdict::UpToDate, false, false),
            Verdict::UpToDate
        );
        assert_eq!(
            with_purges(Verdict::Accepted, false, true),
            Verdict::Rejected
        );
    }

    #[test]
    fn a_record_never_goes_before_its_parent_whatever_the_clocks_say() {
        let (x, y) = (Hash::of(b"x"), Hash::of(b"y"));
        let t = |min: u32| {
            sgard_manifest::Timestamp::parse(&format!("2026-03-23T12:{min:02}:00Z")).unwrap()
        };
        // A pull on a machine whose clock is behind: its record (y after
        // y, the head it took) is older than the checkpoint it follows.
        let pulled = record(y, Some(y), t(0));
        let recs = vec![
            record(x, None, t(1)),
            record(y, Some(x), t(5)),
            pulled.clone(),
        ];
        let out = parents_first(recs);
        assert_eq!(
            out.iter().map(|r| r.time).collect::<Vec<_>>(),
            [t(1), t(5), t(0)]
        );
        assert_eq!(out[2], pulled);
        // A cycle keeps its time order; a parent not in the list is none.
        let cyc = parents_first(vec![record(x, Some(y), t(1)), record(y, Some(x), t(2))]);
        assert_eq!(cyc.len(), 2);
        let alone = parents_first(vec![record(x, Some(Hash::of(b"gone")), t(1))]);
        assert_eq!(alone.len(), 1);
    }
}
