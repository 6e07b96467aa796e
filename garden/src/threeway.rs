//! How two manifests that grew apart from a common one merge: the one rule
//! `pull` (a server's state into this repository) and `git-merge-driver`
//! (the other side of a `git merge` or `git rebase`) both call.
//!
//! Entry by entry against the common ancestor: a change on one side only is
//! taken, the same change on both sides is taken once, and a change made
//! differently on both sides is settled by [`Side`]; with [`Side::Merge`] it
//! is left a *conflict on this disk* where the disk holds this machine's
//! change (see [`stays_a_conflict`]): the other side's version goes into
//! the result, this machine's stays on disk, and this machine's record of
//! the path goes back to the ancestor, so `status` says `conflict` and
//! `merge` has its three versions. Where no disk holds it, it is
//! *unsettled*: the caller refuses (`pull`) or keeps its own side and says
//! so (the merge driver, which cannot refuse).
//!
//! The top-level settings (excluded paths, encryption, template data,
//! folder modes) take the side that changed them; `updated` is the newer
//! of the two and `message` goes with it.

use std::collections::{BTreeMap, BTreeSet};

use sgard_manifest::history::Record;
use sgard_manifest::{Entry, Manifest};
use sgard_store::Hash;

use crate::base::BaseEntry;
use crate::sync::Side;

/// Which of the two merged sides an entry's version comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Which {
    /// The side being merged into (this repository; git's `%A`).
    Local,
    /// The side coming in (the server; git's `%B`).
    Theirs,
}

/// The entries of a three-way merge (see the module documentation).
#[derive(Clone, Debug, Default)]
pub(crate) struct Entries {
    /// The merged entries, by path.
    pub merged: BTreeMap<String, Entry>,
    /// Entries the result takes from the incoming side (added, changed,
    /// untracked there), as a change to the local side.
    pub taken: Vec<String>,
    /// Entries changed on both sides, settled by `--theirs`/`--ours`.
    pub settled: Vec<String>,
    /// Entries changed on both sides left conflicts on this disk, with the
    /// side this machine's version is on (the result holds the other).
    pub conflicts: Vec<(String, Which)>,
    /// Entries changed on both sides no disk here can hold as a conflict
    /// (the result holds the local side's).
    pub unsettled: Vec<String>,
}

/// Whether two entries say the same, whenever they were recorded.
pub(crate) fn same_entry(a: &Entry, b: &Entry) -> bool {
    let mut a = a.clone();
    a.updated = b.updated;
    a == *b
}

fn same_opt(a: Option<&Entry>, b: Option<&Entry>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => same_entry(a, b),
        _ => false,
    }
}

/// Whether an entry changed differently on two sides can be left a
/// conflict on this disk with `mine` as this machine's version and `other`
/// in the repository: that holds only where this machine's whole change is
/// on its disk: both sides still track it, as the same kind, with the same
/// settings (flags, targeting, encryption and scripts are in the
/// repository only), not a template (its disk file is a rendering), and
/// this machine agreed on `mine` (`agreed`: it recorded or restored that
/// version, so the disk holds it or edits of it).
pub(crate) fn stays_a_conflict(
    mine: Option<&Entry>,
    other: Option<&Entry>,
    agreed: Option<&BaseEntry>,
) -> bool {
    let (Some(l), Some(t)) = (mine, other) else {
        return false;
    };
    let settings = |e: &Entry| {
        (
            e.encrypted,
            e.locked,
            e.only.clone(),
            e.never.clone(),
            e.run,
        )
    };
    l.kind == t.kind
        && !l.template
        && !t.template
        && settings(l) == settings(t)
        && agreed.is_some_and(|a| a.matches_repo(l, None))
}

/// Says, for a path changed differently on both sides (its local and
/// incoming entries), which side this disk holds as a conflict.
pub(crate) type MineFn<'a> = dyn Fn(&str, Option<&Entry>, Option<&Entry>) -> Option<Which> + 'a;

/// Merges the entries of `local` and `theirs` against `base`. `mine`
/// says, for an entry changed differently on both sides, which side this
/// disk holds as a conflict (`None`: neither can be).
pub(crate) fn merge_entries(
    base: &Manifest,
    local: &Manifest,
    theirs: &Manifest,
    side: Side,
    mine: &MineFn<'_>,
) -> Entries {
    let mut paths: BTreeSet<&str> = BTreeSet::new();
    for m in [local, theirs, base] {
        paths.extend(m.files.iter().map(|e| e.path.as_str()));
    }
    let mut out = Entries::default();
    for p in paths {
        let (b, l, t) = (base.get(p), local.get(p), theirs.get(p));
        let pick = if same_opt(l, t) || same_opt(t, b) {
            l
        } else if same_opt(l, b) {
            out.taken.push(p.to_owned());
            t
        } else {
            match side {
                Side::Merge => match mine(p, l, t) {
                    Some(Which::Local) => {
                        out.conflicts.push((p.to_owned(), Which::Local));
                        t
                    }
                    Some(Which::Theirs) => {
                        out.conflicts.push((p.to_owned(), Which::Theirs));
                        l
                    }
                    None => {
                        out.unsettled.push(p.to_owned());
                        l
                    }
                },
                Side::Ours => {
                    out.settled.push(p.to_owned());
                    l
                }
                Side::Theirs => {
                    out.settled.push(p.to_owned());
                    out.taken.push(p.to_owned());
                    t
                }
            }
        };
        if let Some(e) = pick {
            out.merged.insert(p.to_owned(), e.clone());
        }
    }
    out
}

/// The top-level settings of a merge (see the module documentation).
#[derive(Clone, Debug)]
pub(crate) struct Top {
    pub exclude: Vec<String>,
    pub encryption: Option<sgard_manifest::Encryption>,
    pub data: Option<Hash>,
    /// The template data changed differently on both sides (the local
    /// side's is kept).
    pub data_conflict: bool,
}

/// Merges the top-level settings of `local` and `theirs` against `base`:
/// each takes the side that changed it (both: the local side's, unless
/// `side` is [`Side::Theirs`]). An incoming side without template data
/// (the Go sgard drops the field) is no news.
pub(crate) fn merge_top(base: &Manifest, local: &Manifest, theirs: &Manifest, side: Side) -> Top {
    let exclude = if local.exclude == base.exclude {
        theirs.exclude.clone()
    } else {
        local.exclude.clone()
    };
    let take_theirs = (local.encryption == base.encryption && theirs.encryption.is_some())
        || (theirs.encryption != base.encryption && side == Side::Theirs);
    let encryption = if take_theirs {
        theirs.encryption.clone()
    } else {
        local.encryption.clone()
    };
    let take_data = local.data == base.data || (theirs.data != base.data && side == Side::Theirs);
    let (data, data_conflict) = if theirs.data.is_none() {
        (local.data, false)
    } else if take_data {
        (theirs.data, false)
    } else {
        (
            local.data,
            theirs.data != base.data && theirs.data != local.data,
        )
    };
    Top {
        exclude,
        encryption,
        data,
        data_conflict,
    }
}

/// The records of two histories, each once (same id, reason and time), in
/// time order (a stable sort: records of the same time keep their order,
/// `local`'s first).
pub(crate) fn union_records(local: &[Record], theirs: &[Record]) -> Vec<Record> {
    let key = |r: &Record| (r.id, r.reason.as_str().to_owned(), r.time);
    let have: BTreeSet<_> = local.iter().map(key).collect();
    let mut out: Vec<Record> = local.to_vec();
    out.extend(theirs.iter().filter(|r| !have.contains(&key(r))).cloned());
    crate::rules::parents_first(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sgard_manifest::{EntryKind, Mode, Timestamp};

    fn file(path: &str, content: &str) -> Entry {
        let mut e = Entry::new(path.into(), EntryKind::File, Timestamp::zero());
        e.hash = Some(Hash::of(content.as_bytes()));
        e.mode = Some(Mode::from_st_mode(0o644));
        e
    }

    fn manifest(entries: &[Entry]) -> Manifest {
        let mut m = Manifest::new(Timestamp::zero());
        m.files = entries.to_vec();
        m
    }

    fn agreed(e: &Entry) -> BaseEntry {
        BaseEntry::of_head(e)
    }

    #[test]
    fn changes_on_different_entries_are_both_taken_and_the_same_change_once() {
        let b = manifest(&[file("~/a", "a"), file("~/b", "b"), file("~/c", "c")]);
        let l = manifest(&[file("~/a", "a2"), file("~/b", "b"), file("~/c", "c3")]);
        let t = manifest(&[file("~/a", "a"), file("~/b", "b2"), file("~/c", "c3")]);
        let m = merge_entries(&b, &l, &t, Side::Merge, &|_, _, _| None);
        assert_eq!(m.merged["~/a"], file("~/a", "a2"));
        assert_eq!(m.merged["~/b"], file("~/b", "b2"));
        assert_eq!(m.merged["~/c"], file("~/c", "c3"));
        assert_eq!(m.taken, ["~/b"]);
        assert!(m.conflicts.is_empty() && m.unsettled.is_empty());
    }

    #[test]
    fn a_conflict_takes_the_other_sides_version_whichever_side_is_mine() {
        let b = manifest(&[file("~/a", "a")]);
        let l = manifest(&[file("~/a", "mine")]);
        let t = manifest(&[file("~/a", "theirs")]);
        // A merge: this machine recorded the side merged into.
        let mine_rec = agreed(&file("~/a", "mine"));
        let pick = |p: &str, l: Option<&Entry>, t: Option<&Entry>| {
            let a = (p == "~/a").then_some(&mine_rec);
            if stays_a_conflict(l, t, a) {
                Some(Which::Local)
            } else if stays_a_conflict(t, l, a) {
                Some(Which::Theirs)
            } else {
                None
            }
        };
        let m = merge_entries(&b, &l, &t, Side::Merge, &pick);
        assert_eq!(m.conflicts, [("~/a".to_owned(), Which::Local)]);
        assert_eq!(m.merged["~/a"], file("~/a", "theirs"));
        // A rebase: git swaps the sides; the result is the same.
        let m = merge_entries(&b, &t, &l, Side::Merge, &pick);
        assert_eq!(m.conflicts, [("~/a".to_owned(), Which::Theirs)]);
        assert_eq!(m.merged["~/a"], file("~/a", "theirs"));
        // Neither side recorded here: unsettled, the local side kept.
        let m = merge_entries(&b, &l, &t, Side::Merge, &|_, _, _| None);
        assert_eq!(m.unsettled, ["~/a"]);
        assert_eq!(m.merged["~/a"], file("~/a", "mine"));
    }

    #[test]
    fn an_entry_untracked_on_one_side_and_unchanged_on_the_other_goes() {
        let b = manifest(&[file("~/a", "a"), file("~/b", "b")]);
        let l = manifest(&[file("~/a", "a"), file("~/b", "b")]);
        let t = manifest(&[file("~/b", "b")]);
        let m = merge_entries(&b, &l, &t, Side::Merge, &|_, _, _| None);
        assert!(!m.merged.contains_key("~/a"));
        assert_eq!(m.taken, ["~/a"]);
    }
}
