//! `status`: how each tracked path on disk compares with the repository,
//! judged against this machine's base (see `base.rs`).

use crate::Repo;
use crate::Tx;
use sgard_manifest::{Entry, EntryKind, Mode};
use sgard_store::{Hash, Lack};

use crate::base::{BaseEntry, Seen};
use crate::fsx::{self, DiskKind};
use crate::scan::Found;
use crate::statcache::Stat;
use crate::{Garden, Result};

/// The state of one entry.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
    /// Disk matches the repository.
    Ok,
    /// Changed on disk since the last sync; the repository did not change.
    Modified,
    /// Changed in the repository (by another machine) since the last sync;
    /// the disk did not change.
    Behind,
    /// Changed on both sides, differently; or different with no record of a
    /// sync on this machine.
    Conflict,
    /// A locked entry differs on disk (the repository wins on restore).
    Drifted,
    /// Not on disk.
    Missing,
    /// On disk as another kind of object.
    TypeChange,
    /// Targeted away from this machine.
    Skipped,
    /// Could not be read or cannot be restored (the line's detail says why).
    Error,
}

impl State {
    /// The word printed for it.
    pub fn as_str(&self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Modified => "modified",
            State::Behind => "behind",
            State::Conflict => "conflict",
            State::Drifted => "drifted",
            State::Missing => "missing",
            State::TypeChange => "typechange",
            State::Skipped => "skipped",
            State::Error => "error",
        }
    }

    /// Whether this state means disk and repository disagree.
    pub fn is_change(&self) -> bool {
        !matches!(self, State::Ok | State::Skipped)
    }
}

/// One line of status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusLine {
    /// The entry's path.
    pub path: String,
    /// Its state.
    pub state: State,
    /// Extra detail (what changed, or the error).
    pub detail: Option<String>,
    /// The entry's content is not in the repository (a restore could not
    /// write it): a repository missing its blobs.
    pub blob_missing: bool,
    /// What would settle an error, for the CLI to say.
    pub remedy: Option<crate::why::Remedy>,
}

/// How one entry compares, three ways.
#[derive(Clone, Debug)]
pub(crate) struct Judged {
    pub state: State,
    pub detail: Option<String>,
    /// What is on disk, when it is of the entry's kind.
    pub seen: Option<Seen>,
    /// The lstat of the path, when something is there.
    pub md: Option<Stat>,
    /// Whether disk and repository hold the same content and target (mode
    /// aside); `None` when that cannot be told without the key.
    pub content_same: Option<bool>,
    /// A file's hash came from the stat cache (the file was not read).
    pub vouched: bool,
    /// The file still holds conflict markers a merge wrote (the state is
    /// then [`State::Conflict`]).
    pub unresolved: bool,
}

impl Judged {
    fn new(state: State, detail: Option<String>) -> Self {
        Judged {
            state,
            detail,
            seen: None,
            md: None,
            content_same: None,
            vouched: false,
            unresolved: false,
        }
    }
}

impl Garden {
    /// The state of every entry, in manifest order. Changes nothing in the
    /// repository (this machine's base records entries found in agreement).
    ///
    /// # Errors
    /// Only for inconsistent targeting; per-entry read errors become
    /// [`State::Error`] lines.
    pub fn status(&mut self) -> Result<Vec<StatusLine>> {
        self.tx().status()
    }

    /// The state of the entries `args` select (all when empty).
    ///
    /// # Errors
    /// [`crate::Error::NoMatch`] when `args` select nothing; as
    /// [`Garden::status`].
    pub fn status_of_args(&mut self, args: &[std::ffi::OsString]) -> Result<Vec<StatusLine>> {
        self.tx().status_of_args(args)
    }

    /// Whether the untracked path `tilde` holds what this machine last
    /// synced for it: then another machine stopped tracking it since.
    pub(crate) fn untracked_elsewhere(&self, tilde: &str, abs: &std::path::Path) -> bool {
        let Some(b) = self.work.base.get(tilde).cloned() else {
            return false;
        };
        let Ok(Some(md)) = fsx::lstat(abs) else {
            return false;
        };
        let disk = DiskKind::of(&md);
        let stood_in = b.kind == EntryKind::Link
            && crate::standin::is_stand_in(abs, b.target.as_deref(), disk);
        if !disk.matches(b.kind) && !stood_in {
            return false;
        }
        let content = match b.kind {
            EntryKind::File => fsx::hash_file(abs).ok().map(|(h, _)| h),
            _ => None,
        };
        let target = match b.kind {
            EntryKind::Link if stood_in => b.target.clone(),
            EntryKind::Link => fsx::read_link(abs).ok(),
            _ => None,
        };
        b.matches_disk(&Seen {
            kind: b.kind,
            mode: fsx::mode_to_record(fsx::mode_of(&md), b.mode, abs),
            content,
            target,
        })
    }
}

impl Repo {
    /// Whether the head's entry for `e.path` has `e`'s content, target,
    /// kind and mode (the base records agreement with the head only).
    pub(crate) fn head_holds(&self, e: &Entry) -> bool {
        self.manifest.get(&e.path).is_some_and(|h| {
            h.kind == e.kind && h.hash == e.hash && h.target == e.target && h.mode == e.mode
        })
    }
}

impl Tx<'_> {
    pub(crate) fn status(&mut self) -> Result<Vec<StatusLine>> {
        self.status_of_args(&[])
    }

    pub(crate) fn status_of_args(
        &mut self,
        args: &[std::ffi::OsString],
    ) -> Result<Vec<StatusLine>> {
        let repo = self.repo;
        let picked = repo.select(args)?;
        // Whether the repository still holds each content: a machine
        // learns of a loss before it needs the file, whatever its disk
        // holds (see `present.rs` for how this stays cheap).
        let mut contents: Vec<Hash> = picked
            .iter()
            .map(|&i| &self.repo.manifest.files[i])
            .filter(|e| e.kind == EntryKind::File && self.repo.applies(e).unwrap_or(false))
            .filter_map(|e| e.hash)
            .collect();
        contents.sort_unstable();
        contents.dedup();
        // Only a status of everything asks the watcher: the token it keeps
        // speaks for every entry. It is asked before anything is looked
        // at, so that what this run finds is kept with a token from before.
        let all = args.is_empty();
        self.repo.env.crash_point("status-before-watcher");
        let trusted = if all { self.ask_watcher(&picked) } else { None };
        // What was looked at while the repository was opened; not when the
        // watcher answered: what this run finds is kept with its token, so
        // it must be looked at after the token was asked for (a blob
        // removed in between would be taken as held until the next change).
        let early = self
            .work
            .ahead
            .take()
            .and_then(crate::present::Ahead::finish)
            .filter(|_| self.work.watch.is_none());
        let lacking = if all && self.all_held(&contents) {
            std::collections::HashMap::new()
        } else {
            self.repo.lacking(&contents, all, early)
        };
        if all {
            self.note_held(&contents, lacking.is_empty());
        }
        let mut scan = self.scan_trusting(&picked, false, trusted.unwrap_or_default());
        let mut out = Vec::with_capacity(picked.len());
        for i in picked {
            let e = &repo.manifest.files[i];
            let lack = e.hash.and_then(|h| lacking.get(&h).cloned());
            let found = scan.take(self, i);
            out.push(self.status_of(e, &found, lack)?);
        }
        Ok(out)
    }

    /// The status of `e`, the scan having found `found` on disk and the
    /// repository lacking `lack` of its content (see [`Repo::lacking`]).
    pub(crate) fn status_of(
        &mut self,
        e: &Entry,
        found: &Found,
        lack: Option<Lack>,
    ) -> Result<StatusLine> {
        let line = |state, detail: Option<String>| StatusLine {
            path: e.path.clone(),
            state,
            detail,
            blob_missing: false,
            remedy: None,
        };
        if !self.repo.applies(e)? {
            // Not looked at: its stat cache record may be old by the time
            // it applies here again (a tag added back).
            if e.kind == EntryKind::File {
                self.unvouched(&e.path);
            }
            return Ok(line(State::Skipped, None));
        }
        let judged = self.judge(e, false, found);
        // What the stat cache now holds for the file stands for the disk
        // as this run saw it: its record vouched, or this run read the file
        // and recorded it (see `watch`).
        if e.kind == EntryKind::File
            && !judged.as_ref().is_ok_and(|j| {
                j.vouched
                    || j.md
                        .is_some_and(|md| self.work.statcache.lookup_stat(&e.path, &md).is_some())
            })
        {
            self.unvouched(&e.path);
        }
        let (Some(lack), Some(h)) = (lack, e.hash) else {
            return Ok(match judged {
                Ok(j) => line(j.state, j.detail),
                Err(err) => line(State::Error, Some(crate::checkpoint::error_chain(&err))),
            });
        };
        // The repository lost the content: whatever the disk holds, a
        // restore could not write this entry.
        let what = match lack {
            Lack::Absent => format!(
                "its content (blob {}) is missing from the repository",
                h.short(12)
            ),
            Lack::Chunks(n) => format!(
                "{n} chunk{} of its content ({}) {} missing from the repository",
                if n == 1 { "" } else { "s" },
                h.short(12),
                if n == 1 { "is" } else { "are" }
            ),
            Lack::BadList(why) => format!(
                "its content ({}) cannot be read from the repository: {why}",
                h.short(12)
            ),
        };
        let (detail, remedy) = match judged.map(|j| j.state) {
            Ok(State::Ok) => (
                format!("{what}; the file here still holds it"),
                Some(crate::why::Remedy::AddStoresAgain(e.path.clone())),
            ),
            Ok(state) => (format!("{}; {what}", state.as_str()), None),
            Err(_) => (what, None),
        };
        let mut l = line(State::Error, Some(detail));
        l.blob_missing = true;
        l.remedy = remedy;
        Ok(l)
    }

    /// Compares one entry three ways: disk, repository, and this machine's
    /// base. With `unlock`, an encrypted entry that cannot be compared
    /// otherwise is decrypted (status never asks for the passphrase).
    /// An entry found in agreement is recorded in the base.
    pub(crate) fn judge(&mut self, e: &Entry, unlock: bool, found: &Found) -> Result<Judged> {
        let abs = self.repo.env.expand(&e.path);
        let Some(md) = found.lstat(&abs)? else {
            return Ok(Judged::new(State::Missing, None));
        };
        let disk = md.kind();
        // A stand-in for a link Windows refused (a junction, a copy that
        // still matches) is judged as the link it stands in for.
        let stood_in = e.kind == EntryKind::Link
            && crate::standin::is_stand_in(&abs, e.target.as_deref(), disk);
        if !disk.matches(e.kind) && !stood_in {
            let detail = match (e.kind, disk) {
                (EntryKind::Link, DiskKind::File) => crate::standin::mismatch(e.target.as_deref()),
                _ => None,
            };
            let mut j = Judged::new(
                State::TypeChange,
                Some(detail.unwrap_or_else(|| {
                    format!("tracked as a {}, now {}", e.kind, disk.describe())
                })),
            );
            j.md = Some(md);
            return Ok(j);
        }
        let mut vouched = false;
        let mut seen = Seen {
            kind: e.kind,
            mode: fsx::mode_to_record(md.perm(), e.mode, &abs),
            content: None,
            target: None,
        };
        // A template's disk file is compared with its rendering.
        let rendered = if e.template && e.kind == EntryKind::File {
            self.rendered_hash(e, unlock)?
        } else {
            None
        };
        match e.kind {
            EntryKind::File => {
                let stored = if e.encrypted || e.template {
                    None
                } else {
                    e.hash
                };
                let (h, v) = self.hash_tracked(&e.path, &abs, &md, found, stored)?;
                seen.content = Some(h);
                vouched = v;
            }
            EntryKind::Link if stood_in => seen.target.clone_from(&e.target),
            EntryKind::Link => seen.target = Some(fsx::read_link(&abs)?),
            EntryKind::Directory => {}
        }
        let base = self.work.base.get(&e.path).cloned();
        let disk_moved = base.as_ref().map(|b| !b.matches_disk(&seen));
        // An encrypted entry whose ciphertext is not the one agreed on may
        // only have been re-encrypted (`rotate-dek` on another machine):
        // with the key at hand, look at its plaintext before calling it a
        // change there.
        let plain = match (e.encrypted && !e.template, self.content_of(e)) {
            (false, _) => None,
            (true, Some(p)) => Some(p),
            (true, None) if unlock && base.as_ref().is_some_and(|b| b.stored != e.hash) => {
                self.stored_plaintext(e).ok().map(|p| Hash::of(&p))
            }
            (true, None) => None,
        };
        let repo_moved = base
            .as_ref()
            .map(|b| !b.matches_repo(e, plain) || rendered.is_some_and(|r| Some(r) != b.content));
        let content_same = match e.kind {
            EntryKind::File if e.template => match rendered {
                Some(r) => Some(seen.content == Some(r)),
                // Encrypted, and the key is not unlocked: only the base can
                // say nothing moved.
                None if disk_moved == Some(false) && repo_moved == Some(false) => Some(true),
                None => None,
            },
            EntryKind::File if e.encrypted => {
                let sha = seen.content.unwrap_or(Hash::of(b""));
                match self.known_match(e, sha) {
                    Some(k) => Some(k),
                    None if disk_moved == Some(false) && repo_moved == Some(false) => {
                        // The base says this ciphertext holds this plaintext.
                        self.work.fingerprints.insert(e.hash.unwrap_or(sha), sha);
                        Some(true)
                    }
                    None if unlock => Some(self.plain_matches(e, &abs, sha)?),
                    None => None,
                }
            }
            EntryKind::File => Some(e.hash == seen.content),
            EntryKind::Link => Some(e.target == seen.target),
            EntryKind::Directory => Some(true),
        };
        let mode_same = e.kind == EntryKind::Link || e.mode.is_none_or(|m| m == seen.mode);
        let mut j = Judged {
            state: State::Ok,
            detail: None,
            seen: Some(seen.clone()),
            md: Some(md),
            content_same,
            vouched,
            unresolved: false,
        };
        if content_same == Some(true) && mode_same {
            let agreed = disk_moved == Some(false) && repo_moved == Some(false);
            if !agreed && self.repo.head_holds(e) {
                self.work.base.settle(&e.path, BaseEntry::agreed(e, &seen));
            }
            return Ok(j);
        }
        let here = |b: &BaseEntry| {
            differences(
                (b.content, b.mode, b.target.as_deref()),
                (seen.content, Some(seen.mode), seen.target.as_deref()),
                e.kind,
            )
        };
        let there = |b: &BaseEntry| {
            if e.template && b.stored == e.hash && e.mode.is_none_or(|m| b.mode == Some(m)) {
                return "its rendering (the data or this machine's variables changed)".to_owned();
            }
            differences(
                (b.stored, b.mode, b.target.as_deref()),
                (e.hash, e.mode.or(b.mode), e.target.as_deref()),
                e.kind,
            )
        };
        let against_repo = || {
            let mut d = Vec::new();
            if content_same != Some(true) {
                d.push(if e.kind == EntryKind::Link {
                    "target".to_owned()
                } else {
                    "content".to_owned()
                });
            }
            if !mode_same && let Some(m) = e.mode {
                d.push(format!("mode {m} -> {}", seen.mode));
            }
            d.join(", ")
        };
        if e.locked {
            j.state = State::Drifted;
            j.detail = Some(against_repo());
            return Ok(j);
        }
        let (state, detail) = match (base.as_ref(), disk_moved, repo_moved) {
            (Some(b), Some(true), Some(false)) => (State::Modified, here(b)),
            (Some(b), Some(false), Some(true)) => (
                State::Behind,
                format!("changed in the repository: {}", there(b)),
            ),
            (Some(b), Some(true), Some(true)) => (
                State::Conflict,
                format!(
                    "changed here ({}) and in the repository ({})",
                    here(b),
                    there(b)
                ),
            ),
            // A base that contradicts the disk and repository is not trusted.
            (Some(_), _, _) => (
                State::Conflict,
                format!("differs from the repository: {}", against_repo()),
            ),
            (None, _, _) if content_same.is_none() => (
                State::Conflict,
                "encrypted; cannot compare without the passphrase, and this machine has no \
                 record of syncing it"
                    .to_owned(),
            ),
            (None, _, _) => (
                State::Conflict,
                format!(
                    "differs from the repository ({}), and this machine has no record of \
                     syncing it",
                    against_repo()
                ),
            ),
        };
        j.state = state;
        j.detail = Some(detail);
        // A file holding the markers a merge wrote is not a change to
        // record, whatever the base says of it.
        if matches!(state, State::Modified | State::Conflict)
            && self.unresolved_merge(&e.path, &abs)
        {
            j.state = State::Conflict;
            j.detail = Some(
                "unresolved merge: it still holds the conflict markers `sgard merge` wrote".into(),
            );
            j.unresolved = true;
        }
        Ok(j)
    }

    /// Records that the disk now holds exactly `e` (just written or just
    /// recorded), whose content has SHA-256 `content` (the plaintext's for an
    /// encrypted file), with the mode `mode` on disk.
    pub(crate) fn settle(&mut self, e: &Entry, content: Option<Hash>, mode: Option<Mode>) {
        if !self.repo.head_holds(e) {
            // An older version (restore --at, undo): the disk now differs
            // from the repository, as a local change would.
            return;
        }
        let seen = Seen {
            kind: e.kind,
            mode: mode.or(e.mode).unwrap_or_else(|| Mode::from_st_mode(0o644)),
            content,
            target: e.target.clone(),
        };
        self.work.base.settle(&e.path, BaseEntry::agreed(e, &seen));
    }

    /// The SHA-256 of an entry's content on disk, where it is known without
    /// reading anything (an encrypted entry's plaintext is known only from
    /// the fingerprint cache or the Go `plaintext_hash`; a template's
    /// rendering only once it was rendered).
    pub(crate) fn content_of(&mut self, e: &Entry) -> Option<Hash> {
        let h = e.hash?;
        if e.template {
            return self.rendered_of(e);
        }
        if !e.encrypted {
            return Some(h);
        }
        self.work
            .fingerprints
            .get(&h)
            .or(e.plaintext_hash.as_deref().copied())
    }

    /// Gives a machine that never kept a base for this repository (sgard
    /// was upgraded here) the base it would have had, from the history: the
    /// newest full snapshot this host recorded before machine ids existed,
    /// each of whose entries its disk then held, updated by what its
    /// restores of the head since wrote. Without any (a fresh
    /// machine) there is no base, and every difference is a question. A
    /// wrong seed (two machines with one host name) can only let a restore
    /// overwrite a file whose content is in that history.
    pub(crate) fn seed_base(&mut self) {
        if !self.work.base.is_new() {
            return;
        }
        let recs = &self.repo.history.records;
        // Only records made before this machine kept a base (they carry no
        // machine id): since then a checkpoint keeps other machines'
        // versions of what it did not take, so its snapshot is no record
        // of this disk. A base lost after that stays lost (every difference
        // a question).
        let host = crate::identity::short_hostname(&self.repo.env.hostname);
        if recs
            .iter()
            .any(|r| r.machine.is_some() && r.machine == self.repo.machine)
        {
            return;
        }
        let mine = |r: &sgard_manifest::history::Record| r.machine.is_none() && r.host == host;
        if !recs.iter().any(mine) {
            return;
        }
        let start = recs
            .iter()
            .rposition(|r| r.reason.is_full() && mine(r))
            .unwrap_or(0);
        let mut agreed: std::collections::BTreeMap<String, Entry> =
            std::collections::BTreeMap::new();
        for r in &recs[start..] {
            // What a restore of the head wrote agreed with the repository;
            // an older version (restore --at, undo, merge) did not.
            let head_restore = r.reason == sgard_manifest::history::Reason::Restore
                && r.message.as_deref().is_some_and(|m| {
                    m == "restore" || m.starts_with("pull from ") || m.starts_with("mirror down ")
                });
            if !mine(r) || !(r.reason.is_full() || head_restore) {
                continue;
            }
            let Ok(doc) = Tx::new(self.repo, &mut *self.work).snapshot_doc(&r.id) else {
                return;
            };
            if r.reason.is_full() {
                agreed.clear();
            }
            for p in &doc.absent {
                agreed.remove(p);
            }
            for e in doc.files {
                agreed.insert(e.path.clone(), e);
            }
        }
        for e in agreed.values() {
            let content = match e.kind {
                EntryKind::File => match self.content_of(e) {
                    Some(c) => Some(c),
                    None => continue,
                },
                _ => None,
            };
            let seen = Seen {
                kind: e.kind,
                mode: e.mode.unwrap_or_else(|| Mode::from_st_mode(0o644)),
                content,
                target: e.target.clone(),
            };
            self.work.base.settle(&e.path, BaseEntry::agreed(e, &seen));
        }
    }

    /// Writes the base if it changed. Records of paths no longer tracked
    /// stay: they say another machine untracked a file this machine had
    /// (see `mirror up`); `remove` here drops its own.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    pub(crate) fn flush_base(&mut self) -> Result<()> {
        self.save_index()
    }
}

/// What differs between two states of an entry, in words.
fn differences(
    a: (Option<Hash>, Option<Mode>, Option<&str>),
    b: (Option<Hash>, Option<Mode>, Option<&str>),
    kind: EntryKind,
) -> String {
    let mut d = Vec::new();
    match kind {
        EntryKind::File if a.0 != b.0 => d.push("content".to_owned()),
        EntryKind::Link if a.2 != b.2 => d.push(format!(
            "target {} -> {}",
            a.2.unwrap_or("?"),
            b.2.unwrap_or("?")
        )),
        _ => {}
    }
    if kind != EntryKind::Link
        && a.1 != b.1
        && let (Some(x), Some(y)) = (a.1, b.1)
    {
        d.push(format!("mode {x} -> {y}"));
    }
    if d.is_empty() {
        d.push("content".to_owned());
    }
    d.join(", ")
}
