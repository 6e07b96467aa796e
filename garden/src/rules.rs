//! The rules of a shared repository, written once as functions of data:
//! what a push may replace ([`push_verdict`]), what is live ([`Live`]) and
//! what a prune may delete ([`doomed`]). Every caller asks these: the
//! `Garden` (a repository in a folder, and so sgardd's folder backend) and
//! sgardd's object backend, which keeps no repository and reads its
//! manifests from an object store. (How two manifests merge, the third
//! rule both pull and the git merge driver follow, is `threeway`.)
//!
//! Nothing here reads a file or a clock: the callers gather the facts
//! (the head, its history, which snapshots say what, how old each stored
//! object is) in whatever way their storage allows, and the rule decides.

use std::collections::HashSet;

use sgard_manifest::Manifest;
use sgard_manifest::history::Record;
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
        let rec = |id| Record {
            id,
            parent: None,
            time: head.updated,
            host: "h".into(),
            machine: None,
            reason: sgard_manifest::history::Reason::Checkpoint,
            message: None,
            entries: 1,
            bytes: 1,
            new_blobs: 1,
            head_before: None,
        };
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
}
