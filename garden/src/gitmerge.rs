//! What `sgard git-merge-driver` does with the files git merges: the
//! manifest entry by entry with the rule `pull` uses (see `threeway`), the
//! history as the union of both logs. Neither ever holds conflict markers.

use sgard_manifest::history::History;
use sgard_manifest::{Manifest, Timestamp};

use crate::threeway::{self, Which};
use crate::{Garden, Result, Side};

/// The result of merging two versions of `manifest.yaml`.
#[derive(Clone, Debug)]
pub struct GitMerge {
    /// The merged manifest, rendered.
    pub text: String,
    /// Entries changed differently on both sides and left conflicts on this
    /// disk: the result holds the other side's version, the disk this
    /// machine's, and `status` says `conflict`.
    pub conflicts: Vec<String>,
    /// Entries changed differently on both sides that this disk cannot
    /// hold as a conflict: the result keeps the version of the side being
    /// merged into; the other stays in the history.
    pub unsettled: Vec<String>,
    /// The template data changed differently on both sides (this side's is
    /// kept).
    pub data_conflict: bool,
}

/// Merges three versions of `manifest.yaml` (ancestor, the side merged
/// into, the side coming in) with no machine state: every entry changed
/// differently on both sides is unsettled. [`Garden::git_merge_manifest`]
/// is the same with this machine's records.
///
/// # Errors
/// A version that does not parse, naming it.
pub fn git_merge_manifest_alone(base: &str, ours: &str, theirs: &str) -> Result<GitMerge> {
    let [b, o, t] = parse_three(base, ours, theirs)?;
    Ok(merge(&b, &o, &t, &|_, _, _| None).0)
}

/// Merges three versions of `history.yaml`: the union of both sides'
/// records (the ancestor's are in both), in time order.
///
/// # Errors
/// A version that does not parse, naming it.
pub fn git_merge_history(ours: &str, theirs: &str) -> Result<String> {
    let o = History::from_yaml_at(ours, std::path::Path::new("history.yaml (this side)"))?;
    let t = History::from_yaml_at(theirs, std::path::Path::new("history.yaml (other side)"))?;
    let merged = History {
        records: threeway::union_records(&o.records, &t.records),
    };
    Ok(merged.to_yaml())
}

fn parse_three(base: &str, ours: &str, theirs: &str) -> Result<[Manifest; 3]> {
    let parse = |text: &str, what: &str| -> Result<Manifest> {
        if text.trim().is_empty() {
            return Ok(Manifest::new(Timestamp::zero()));
        }
        Ok(Manifest::from_yaml_at(
            text,
            std::path::Path::new(&format!("manifest.yaml ({what})")),
        )?)
    };
    Ok([
        parse(base, "common ancestor")?,
        parse(ours, "this side")?,
        parse(theirs, "other side")?,
    ])
}

/// The merge, the merged manifest, and the conflicts with the side this
/// machine's version is on.
fn merge(
    b: &Manifest,
    o: &Manifest,
    t: &Manifest,
    mine: &threeway::MineFn<'_>,
) -> (GitMerge, Manifest, Vec<(String, Which)>) {
    let entries = threeway::merge_entries(b, o, t, Side::Merge, mine);
    let top = threeway::merge_top(b, o, t, Side::Merge);
    let mut m = o.clone();
    m.files = entries.merged.into_values().collect();
    m.exclude = top.exclude;
    m.encryption = top.encryption;
    m.data = top.data;
    m.folders = crate::folders::merge(&b.folders, &o.folders, &t.folders, true).0;
    m.created = o.created.min(t.created);
    if t.updated > o.updated {
        m.updated = t.updated;
        m.message.clone_from(&t.message);
    }
    let out = GitMerge {
        text: m.to_yaml(),
        conflicts: entries.conflicts.iter().map(|(p, _)| p.clone()).collect(),
        unsettled: entries.unsettled,
        data_conflict: top.data_conflict,
    };
    (out, m, entries.conflicts)
}

impl Garden {
    /// Merges three versions of this repository's `manifest.yaml`
    /// (ancestor, the side merged into, the side coming in) for git. An
    /// entry changed differently on both sides becomes a conflict on this
    /// disk when this machine recorded or restored one side's version (in
    /// a merge, the side merged into; in a rebase, the side coming in):
    /// the result holds the other version and this machine's record of the
    /// path goes back to the ancestor's, taken once the repository holds
    /// the result (git writes it after the driver returns).
    ///
    /// # Errors
    /// A version that does not parse; writing this machine's records.
    pub fn git_merge_manifest(&mut self, base: &str, ours: &str, theirs: &str) -> Result<GitMerge> {
        let [b, o, t] = parse_three(base, ours, theirs)?;
        let (out, merged, conflicts) = {
            let agreed = &self.work.base;
            merge(&b, &o, &t, &|p, l, t| {
                if threeway::stays_a_conflict(l, t, agreed.get(p)) {
                    Some(Which::Local)
                } else if threeway::stays_a_conflict(t, l, agreed.get(p)) {
                    Some(Which::Theirs)
                } else {
                    None
                }
            })
        };
        if conflicts.is_empty() {
            return Ok(out);
        }
        for (p, _) in &conflicts {
            if let Some(head) = merged.get(p) {
                self.tx().base_to_last_sync(p, b.get(p), head);
            }
        }
        self.tx().flush_base()?;
        Ok(out)
    }
}
