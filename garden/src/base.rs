//! The base: what this machine last saw agreed between its disk and the
//! repository, per entry.
//!
//! A repository is shared by several machines; its manifest says what the
//! repository holds, the disk says what this machine holds, and neither can
//! tell "I changed this" from "another machine changed it". The base is the
//! third side of that comparison: for each entry, the state (kind, mode, link
//! target, stored hash and content hash) that disk and repository last
//! agreed on, here. Disk differing from the base is a change made here;
//! the repository differing from it is a change made elsewhere.
//!
//! It is machine-local: under `$XDG_STATE_HOME/sgard/repos/<key>/base`, never
//! in the repository. `<key>` is the repository's identity, the random id in
//! `<repo>/repo-id` (a file of its own, because the Go sgard drops manifest
//! fields it does not know), so the same USB stick mounted at another path
//! is the same repository. A repository without an id that cannot be given
//! one (read-only) is keyed by its canonical path.
//!
//! The file is written atomically and durably, with a checksum; a missing,
//! damaged or foreign base is treated as empty, which is safe: with no base
//! for an entry, a disk that differs from the repository is a conflict (a
//! question), never a silent overwrite.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use sgard_manifest::{Entry, EntryKind, Mode};
use sgard_store::{Hash, durable};

use crate::pathtable::PathTable;
use crate::{Error, Result, index};

/// The file in a repository holding its identity.
pub const ID_FILE: &str = "repo-id";

const MAGIC: &str = "sgard-base 1";

const UNFINISHED_MAGIC: &str = "sgard-pull-unfinished 1";

/// The identity of the repository at `root`, used to key machine-local
/// state: its `repo-id` (created now, with `create`, when it is missing and
/// the folder is writable: only commands that write the repository create
/// it, so a restore never leaves an untracked file in a git checkout), else
/// `path-` and a hash of its canonical path.
pub(crate) fn repo_key(root: &Path, create: bool) -> String {
    let id_path = root.join(ID_FILE);
    if let Some(id) = read_id(&id_path) {
        return id;
    }
    if durable::lstat_exists(&id_path) || !create {
        // Present but not an id we wrote (damaged or hostile): leave it,
        // and key by path.
        return path_key(root);
    }
    match create_id(root) {
        Ok(id) => id,
        Err(_) => path_key(root),
    }
}

fn path_key(root: &Path) -> String {
    let canon = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    format!(
        "path-{}",
        Hash::of(canon.as_os_str().as_encoded_bytes()).short(32)
    )
}

/// An id file's id: 32 lowercase hex digits on the first line.
fn read_id(p: &Path) -> Option<String> {
    let text = durable::read_regular_to_string(p).ok()?;
    let id = text.lines().next()?.trim();
    (id.len() == 32 && id.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')))
        .then(|| id.to_owned())
}

/// The repository id recorded at `root`, if it has one.
pub fn recorded_repo_id(root: &Path) -> Option<String> {
    read_id(&root.join(ID_FILE))
}

/// The identity of the repository at `root`, made now when it has none
/// and the folder is writable (else a key of its canonical path). A server
/// names a folder garden by it.
pub fn repository_id(root: &Path) -> String {
    repo_key(root, true)
}

/// Records `id` (32 lowercase hex digits) as the id of the repository at
/// `root`, replacing the one it had (`sgardd migrate` carries a garden's
/// id into the folder it fills).
///
/// # Errors
/// An id that is not one; write errors.
pub fn set_repo_id(root: &Path, id: &str) -> Result<()> {
    if !(id.len() == 32 && id.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))) {
        return Err(Error::Invalid(format!("{id:?} is not a repository id")));
    }
    durable::write_atomic(&root.join(ID_FILE), format!("{id}\n").as_bytes(), 0o644)?;
    Ok(())
}

/// Writes a new random id without replacing one another process wrote
/// first (then that one is returned).
pub(crate) fn create_id(root: &Path) -> Result<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| Error::Invalid(format!("no randomness: {e}")))?;
    let id: String = b.iter().map(|x| format!("{x:02x}")).collect();
    let p = root.join(ID_FILE);
    durable::write_new(&p, format!("{id}\n").as_bytes(), 0o644)?;
    read_id(&p).ok_or_else(|| Error::Invalid(format!("{} is not a repository id", p.display())))
}

/// This home's id (its machine-local `sgard/machine-id`, created on first
/// use), recorded in history records so `undo` reverses only what this
/// home did; `None` when there is no state folder or it cannot be written.
pub(crate) fn machine_id(state_root: Option<&Path>) -> Option<String> {
    let dir = state_root?.join("sgard");
    let p = dir.join("machine-id");
    if let Some(id) = read_id(&p) {
        return Some(id);
    }
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).ok()?;
    let id: String = b.iter().map(|x| format!("{x:02x}")).collect();
    durable::create_private_dir_all(&dir).ok()?;
    durable::write_new(&p, format!("{id}\n").as_bytes(), 0o600).ok()?;
    read_id(&p)
}

/// The key of the repository at `root`, after carrying this machine's state
/// over when the repository's id changed (a `repo-id` replaced by a git
/// merge of two clones, or made for an older repository). For each path
/// this machine remembers the key it used and the newest history record it
/// saw there; the old key's state folder moves to the new key only when the
/// repository now at the path holds that record (the same repository under
/// a new id), never for another repository mounted at the same place.
/// Returns a note when it moved.
pub(crate) fn key_for(
    root: &Path,
    state_root: Option<&Path>,
    create: bool,
    history: &sgard_manifest::history::History,
) -> (String, Option<String>) {
    let key = repo_key(root, create);
    let Some(state) = state_root else {
        return (key, None);
    };
    let map = path_map(root, state);
    let text = durable::read_regular_to_string(&map).unwrap_or_default();
    let mut words = text.split_whitespace();
    let old = words.next().filter(|k| valid_key(k)).map(str::to_owned);
    let seen = words.next().and_then(|h| Hash::parse(h).ok());
    let newest = history.records.last().map(|r| r.id);
    let mut note = None;
    if let Some(old) = old.as_deref().filter(|o| *o != key) {
        // The same repository: its log holds what was seen; or, for the
        // state of a repository keyed by its path until it got an id (one
        // the Go sgard made), neither then nor now has a log at all.
        let same = seen.is_some_and(|s| history.records.iter().any(|r| r.id == s))
            || (old.starts_with("path-") && seen.is_none() && newest.is_none());
        let repos = state.join("sgard").join("repos");
        let (from, to) = (repos.join(old), repos.join(&key));
        if same
            && from.is_dir()
            && !durable::lstat_exists(&to)
            && std::fs::rename(&from, &to).is_ok()
        {
            note = Some(format!(
                "the repository at {} has a new id ({old} -> {key}); this machine's \
                 record of it was carried over",
                root.display()
            ));
        }
    }
    if old.as_deref() != Some(key.as_str()) || seen != newest {
        remember(root, state, &key, newest);
    }
    (key, note)
}

/// The file remembering the key used at `root` (and the newest record
/// seen there).
fn path_map(root: &Path, state: &Path) -> PathBuf {
    let canon = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    state
        .join("sgard")
        .join("paths")
        .join(Hash::of(canon.as_os_str().as_encoded_bytes()).short(32))
}

/// Remembers that `root` is the repository keyed `key`, whose newest
/// history record is `newest` (best effort; see [`key_for`]).
pub(crate) fn remember(root: &Path, state: &Path, key: &str, newest: Option<Hash>) {
    let map = path_map(root, state);
    let line = match newest {
        Some(h) => format!("{key} {}\n", h.to_hex()),
        None => format!("{key}\n"),
    };
    if durable::read_regular_to_string(&map).is_ok_and(|t| t == line) {
        return;
    }
    if let Some(dir) = map.parent()
        && durable::create_private_dir_all(dir).is_ok()
    {
        let _ = durable::write_replace(&map, line.as_bytes(), 0o600);
    }
}

/// Whether `k` is a key this sgard makes (a safe path component).
fn valid_key(k: &str) -> bool {
    let hex = |s: &str| s.len() == 32 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    hex(k) || k.strip_prefix("path-").is_some_and(hex)
}

/// The folder of machine-local state for the repository keyed `key`.
pub(crate) fn state_dir(state_root: Option<&Path>, key: &str) -> Option<PathBuf> {
    Some(state_root?.join("sgard").join("repos").join(key))
}

/// What disk and repository last agreed on for one entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BaseEntry {
    pub kind: EntryKind,
    /// Permission bits (not for links).
    pub mode: Option<Mode>,
    /// Link target.
    pub target: Option<String>,
    /// The entry's `hash` in the repository (the ciphertext's, if encrypted).
    pub stored: Option<Hash>,
    /// SHA-256 of the content on disk (the plaintext's, if encrypted).
    pub content: Option<Hash>,
}

/// What is on disk at a tracked path of the same kind as its entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub kind: EntryKind,
    pub mode: Mode,
    /// SHA-256 of a file's content.
    pub content: Option<Hash>,
    pub target: Option<String>,
}

impl BaseEntry {
    /// The agreement of `e` with a disk holding `seen`.
    pub fn agreed(e: &Entry, seen: &Seen) -> Self {
        BaseEntry {
            kind: e.kind,
            mode: (e.kind != EntryKind::Link).then_some(seen.mode),
            target: e.target.clone(),
            stored: e.hash,
            content: seen.content,
        }
    }

    /// Whether the repository's entry is what was agreed. `plain` is the
    /// content of the entry's blob where known otherwise (an encrypted
    /// entry re-encrypted since holds the same plaintext under a new hash).
    pub fn matches_repo(&self, e: &Entry, plain: Option<Hash>) -> bool {
        self.kind == e.kind
            && (self.stored == e.hash || (plain.is_some() && plain == self.content))
            && self.target == e.target
            && (e.kind == EntryKind::Link || e.mode.is_none() || e.mode == self.mode)
    }

    /// The repository's entry `e` as a condition on the head (see
    /// [`Base::put_with_head`]), never an agreement with a disk: a head
    /// holds it when [`BaseEntry::is_head`] says so.
    pub fn of_head(e: &Entry) -> Self {
        BaseEntry {
            kind: e.kind,
            mode: e.mode.filter(|_| e.kind != EntryKind::Link),
            target: e.target.clone(),
            stored: e.hash,
            content: None,
        }
    }

    /// Whether the repository's entry `e` is exactly the one
    /// [`BaseEntry::of_head`] made this condition of: stricter than
    /// [`BaseEntry::matches_repo`], which takes an entry without a mode
    /// for any mode, so that the head before a pull (this machine's
    /// version, which may differ from the server's in its mode alone) is
    /// never taken for the head the pull writes.
    pub fn is_head(&self, e: &Entry) -> bool {
        *self == BaseEntry::of_head(e)
    }

    /// Whether the disk holds what was agreed.
    pub fn matches_disk(&self, s: &Seen) -> bool {
        self.kind == s.kind
            && self.content == s.content
            && self.target == s.target
            && (s.kind == EntryKind::Link || self.mode == Some(s.mode))
    }
}

/// The base of one repository on this machine.
#[derive(Debug, Default)]
pub(crate) struct Base {
    /// `<state>/base`: the file of older builds (read once, then removed),
    /// and the name the crash-journal files sit beside.
    path: Option<PathBuf>,
    /// The index file that holds it.
    index: Option<PathBuf>,
    map: PathTable<BaseEntry>,
    /// The file was there but could not be trusted.
    damaged: bool,
    /// There was no file: this machine never kept a base for this
    /// repository (a fresh machine, or one sgard upgraded).
    new: bool,
    /// It came from the file of an older build: the next save moves it
    /// into the index and removes that file.
    legacy: bool,
    dirty: bool,
    /// Which records changed since it was loaded or last saved: what
    /// [`Base::prepare`] journals. Those of the table by position (a flag
    /// each: a set of their paths was 9 MB of a 100,000-file restore into
    /// an empty home), the others by path.
    changed_slots: Vec<bool>,
    changed: std::collections::BTreeSet<String>,
    /// Records set for a head not written yet, by path: the entry that
    /// head holds (see [`Base::put_with_head`]).
    awaiting: BTreeMap<String, BaseEntry>,
    /// The index file this base was read from or last saved to: while it is
    /// still there unchanged, the base on disk is this one.
    file: Option<index::Fingerprint>,
    /// Where the last lookup ended (see [`PathTable::get_near`]).
    hint: std::cell::Cell<usize>,
}

impl Base {
    /// The base kept in `dir` (`None`: keep no base at all), from what the
    /// index held there (`found`); without an index, from the text file of
    /// older builds.
    ///
    /// # Errors
    /// [`Error::Io`] when the system fails to read that file: no damage,
    /// nothing is rebuilt.
    pub fn load(dir: Option<&Path>, found: Option<&mut index::Found>) -> Result<Self> {
        let Some(dir) = dir else {
            return Ok(Base::default());
        };
        let mut b = Base {
            path: Some(dir.join("base")),
            index: Some(dir.join(index::FILE)),
            ..Base::default()
        };
        let path = dir.join("base");
        match found {
            Some(index::Found::Usable(l)) => {
                b.file = l.file;
                match l.base.take() {
                    Some(m) => b.map = m,
                    None => b.new = true,
                }
                // The index is the base; a text file beside it is an older
                // build's, older than it.
                if std::fs::remove_file(&path).is_ok() {
                    let _ = durable::fsync_dir(dir);
                }
                return Ok(b);
            }
            // Never the older text file instead: it is older than the index.
            Some(index::Found::Unusable) => {
                b.damaged = true;
                return Ok(b);
            }
            _ => {}
        }
        match durable::read_regular_to_string(&path) {
            Ok(t) => match parse(&t) {
                Some(m) => {
                    b.map = m;
                    b.legacy = true;
                }
                None => b.damaged = true,
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => b.new = true,
            Err(e) if durable::is_damage(&e) => b.damaged = true,
            Err(e) => return Err(Error::io("reading", path, e)),
        }
        Ok(b)
    }

    /// The file of agreements written just before the repository's
    /// manifest (see [`Base::prepare`]).
    fn pending_path(&self) -> Option<PathBuf> {
        self.path.as_ref().map(|p| p.with_file_name("base.pending"))
    }

    /// Writes the agreements not yet saved to `base.pending`, durably,
    /// just before the repository's manifest that makes them true is
    /// written. A crash between the two leaves the base behind the
    /// repository, which would make this machine's own change look like
    /// another machine's; [`Base::resolve_pending`] applies the pending
    /// records whose entries the repository now holds, and drops the rest.
    /// A record set with [`Base::put_with_head`] is written with the entry
    /// it waits for, and applied only when the repository holds that one.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file.
    pub fn prepare(&self) -> Result<()> {
        let Some(p) = self.pending_path() else {
            return Ok(());
        };
        if !self.dirty {
            return Ok(());
        }
        // Only what changed since the base was loaded or saved: a record
        // the journal does not name is the one the index holds already (a
        // 1% checkpoint of 10,000 entries wrote all 10,000). A record
        // waiting for a head goes in even when it did not change, as the
        // head it waits for is the point. So the journal completes the
        // index's base and is no copy of it: an index lost as well after
        // a crash leaves only these records, and the rest is rebuilt the
        // safe way (a difference is a question, never an overwrite).
        let table = self
            .changed_slots
            .iter()
            .enumerate()
            .filter(|(_, c)| **c)
            .filter_map(|(i, _)| self.map.slot(i));
        let others: std::collections::BTreeSet<&str> = self
            .changed
            .iter()
            .chain(self.awaiting.keys())
            .map(String::as_str)
            .collect();
        write_records_when(
            &p,
            merge_by_path(table, others.into_iter().map(|k| (k, self.map.get(k)))),
            self.awaiting.iter().map(|(k, v)| (k.as_str(), v)),
        )
    }

    /// After a crash between [`Base::prepare`] and the base's own write:
    /// takes each pending record the repository's entry (`head`) agrees
    /// with (a record written with the entry it waits for: when the
    /// repository holds that entry), then saves the base and removes the
    /// pending file.
    ///
    /// # Errors
    /// [`Error::Io`] when the system fails to read the journal (it is kept
    /// for the next run; one that is not ours is dropped).
    pub fn resolve_pending(&mut self, head: impl Fn(&str) -> Option<Entry>) -> Result<()> {
        let Some(p) = self.pending_path() else {
            return Ok(());
        };
        let text = match durable::read_regular_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound || durable::is_damage(&e) => {
                return Ok(());
            }
            Err(e) => return Err(Error::io("reading", p, e)),
        };
        let (records, awaited) = parse_records_when(&text).unwrap_or_default();
        let awaited: BTreeMap<String, BaseEntry> = awaited.into_iter().collect();
        for (path, b) in records {
            let holds = |e: &Entry| match awaited.get(&path) {
                Some(wanted) => wanted.is_head(e),
                None => b.as_ref().is_some_and(|b| b.matches_repo(e, None)),
            };
            if self.map.get(&path) != b.as_ref() && head(&path).is_some_and(|e| holds(&e)) {
                self.put(&path, b);
            }
        }
        // Applied records are saved with the index, which then drops the
        // pending file; with none to apply it goes now.
        if !self.dirty {
            self.drop_pending();
        }
        Ok(())
    }

    /// The file of paths a pull took and has not written here yet.
    fn unfinished_path(&self) -> Option<PathBuf> {
        self.path
            .as_ref()
            .map(|p| p.with_file_name("pull.unfinished"))
    }

    /// The paths a pull took from the server and has not written to this
    /// disk yet (it stopped first). A file this disk never had is only
    /// `missing`, which a pull does not restore by itself (it may have been
    /// deleted on purpose), so these are kept apart.
    pub fn unfinished(&self) -> Vec<String> {
        let Some(p) = self.unfinished_path() else {
            return Vec::new();
        };
        let Ok(text) = durable::read_regular_to_string(&p) else {
            return Vec::new();
        };
        let mut lines = text.lines();
        if lines.next() != Some(UNFINISHED_MAGIC) {
            return Vec::new();
        }
        lines.filter_map(unescape).collect()
    }

    /// Records `paths` as [`Base::unfinished`] (durably; none removes the
    /// file).
    ///
    /// # Errors
    /// [`Error::Io`] naming the file.
    pub fn set_unfinished(&self, paths: &[String]) -> Result<()> {
        let Some(p) = self.unfinished_path() else {
            return Ok(());
        };
        if paths.is_empty() {
            if std::fs::remove_file(&p).is_ok() {
                durable::fsync_dir(&durable::parent_of(&p))?;
            }
            return Ok(());
        }
        let mut paths: Vec<&String> = paths.iter().collect();
        paths.sort();
        paths.dedup();
        let mut text = format!("{UNFINISHED_MAGIC}\n");
        for path in paths {
            text.push_str(&escape(path));
            text.push('\n');
        }
        if let Some(dir) = p.parent() {
            durable::create_private_dir_all(dir)?;
        }
        durable::write_atomic(&p, text.as_bytes(), 0o600)?;
        Ok(())
    }

    /// Removes `base.pending` (durably: a stale one must not come back).
    fn drop_pending(&self) {
        if let Some(p) = self.pending_path()
            && std::fs::remove_file(&p).is_ok()
        {
            let _ = durable::fsync_dir(&durable::parent_of(&p));
        }
    }

    /// Whether a base file was found damaged (and is being rebuilt).
    pub fn damaged(&self) -> bool {
        self.damaged
    }

    /// Whether this machine never kept a base for this repository.
    pub fn is_new(&self) -> bool {
        self.new
    }

    /// Makes room for `n` more records (see [`PathTable::reserve`]).
    pub fn reserve(&mut self, n: usize) {
        self.map.reserve(n);
    }

    pub fn get(&self, path: &str) -> Option<&BaseEntry> {
        // Passes go through entries in path order: look where the last
        // lookup ended first.
        let mut hint = self.hint.get();
        let found = self.map.get_near(path, &mut hint);
        self.hint.set(hint);
        found
    }

    /// Records that disk and repository agree on `b` for `path`.
    pub fn settle(&mut self, path: &str, b: BaseEntry) {
        if self.get(path) != Some(&b) {
            let (_, slot) = self.map.insert_slot(path, b);
            self.changed(path, slot);
        }
    }

    /// Notes that the record of `path` (at `slot` of the table, if it is
    /// one of it) changed (for [`Base::prepare`]).
    fn changed(&mut self, path: &str, slot: Option<usize>) {
        self.dirty = true;
        match slot {
            Some(i) => {
                if self.changed_slots.len() <= i {
                    self.changed_slots.resize(i + 1, false);
                }
                self.changed_slots[i] = true;
            }
            None => {
                if !self.changed.contains(path) {
                    self.changed.insert(path.to_owned());
                }
            }
        }
    }

    /// Forgets every change not yet written (the command that made them
    /// failed before the repository was saved, so they agree with nothing).
    pub fn rollback(&mut self) {
        if !self.dirty {
            return;
        }
        let Some(file) = self.index.clone() else {
            return;
        };
        let dir = durable::parent_of(&file);
        match index::read(&file).and_then(|mut found| Base::load(Some(&dir), Some(&mut found))) {
            Ok(b) => *self = b,
            // The base on disk cannot be read back (an I/O error; the
            // command has failed already): keep none of this one's changes
            // for a save, which then writes the one on disk.
            Err(_) => {
                self.dirty = false;
                self.changed_slots.clear();
                self.changed.clear();
                self.legacy = false;
                self.awaiting.clear();
                self.not_on_disk();
            }
        }
    }

    /// Sets or clears the record of `path` for the head about to be
    /// written, whose entry for it is `head` (a pull leaving a conflict
    /// puts back the version of the last sync, which neither the head
    /// before nor the new one holds): saved with that head, as any record
    /// is, but a crash before the head keeps the record it replaces, and
    /// one after applies it (see [`Base::prepare`]).
    pub fn put_with_head(&mut self, path: &str, b: Option<BaseEntry>, head: BaseEntry) {
        self.put(path, b);
        self.awaiting.insert(path.to_owned(), head);
    }

    /// Sets or clears the record of `path` as it is (used by undo, which
    /// puts back the base an operation replaced).
    pub fn put(&mut self, path: &str, b: Option<BaseEntry>) {
        let (changed, slot) = match b {
            Some(b) => {
                let (old, slot) = self.map.insert_slot(path, b.clone());
                (old != Some(b), slot)
            }
            None => {
                let (old, slot) = self.map.remove_slot(path);
                (old.is_some(), slot)
            }
        };
        if changed {
            self.changed(path, slot);
        }
    }

    /// Whether it changed since loaded or last saved (or must move out of
    /// an older build's file).
    pub fn dirty(&self) -> bool {
        self.dirty || self.legacy
    }

    /// The index file it is saved in.
    pub fn index(&self) -> Option<&Path> {
        self.index.as_deref()
    }

    /// What to save: none while this machine keeps no base at all (so the
    /// next command still seeds one, see `Garden::seed_base`).
    pub fn to_write(&self) -> Option<&PathTable<BaseEntry>> {
        (!self.new || self.dirty()).then_some(&self.map)
    }

    /// Whether the index on disk still holds this base: the file is the one
    /// it was read from or saved to.
    pub fn is_on_disk(&self) -> bool {
        self.file.is_some() && self.index.as_deref().and_then(index::fingerprint_of) == self.file
    }

    /// The index file as this run last read or wrote it (`None`: unknown,
    /// or another command's).
    pub fn file(&self) -> Option<index::Fingerprint> {
        self.file
    }

    /// The index now on disk holds this base (it was just written with it).
    pub fn written(&mut self) {
        self.file = self.index.as_deref().and_then(index::fingerprint_of);
    }

    /// The index on disk holds another base than this one.
    pub fn not_on_disk(&mut self) {
        self.file = None;
    }

    /// It was saved durably in the index: the pending journal and an older
    /// build's file are no longer needed.
    pub fn saved(&mut self) {
        self.dirty = false;
        self.changed_slots.clear();
        self.changed.clear();
        self.awaiting.clear();
        self.damaged = false;
        self.new = false;
        self.drop_pending();
        if self.legacy {
            if let Some(p) = &self.path
                && std::fs::remove_file(p).is_ok()
            {
                let _ = durable::fsync_dir(&durable::parent_of(p));
            }
            self.legacy = false;
        }
    }

    /// The records of `paths` as they are now (`None`: no record), written
    /// durably to `file`: what an operation is about to replace, so its
    /// undo can put it back (see [`load_prior`]).
    ///
    /// # Errors
    /// [`Error::Io`] naming the file.
    pub fn save_prior(&self, file: &Path, paths: &[&str]) -> Result<()> {
        write_records_when(
            file,
            paths.iter().map(|p| (*p, self.map.get(p))),
            std::iter::empty(),
        )
    }
}

/// Two lists of records sorted by path, as one (a path in both, once).
fn merge_by_path<'a>(
    a: impl Iterator<Item = (&'a str, Option<&'a BaseEntry>)>,
    b: impl Iterator<Item = (&'a str, Option<&'a BaseEntry>)>,
) -> impl Iterator<Item = (&'a str, Option<&'a BaseEntry>)> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if x.0 == y.0 => {
            b.next();
            a.next()
        }
        (Some(x), Some(y)) if x.0 < y.0 => a.next(),
        (Some(_), Some(_)) | (None, _) => b.next(),
        (Some(_), None) => a.next(),
    })
}

/// Writes base lines for `entries` under their checked header to `file`,
/// durably, rendered straight into the temp file (the header's checksum
/// filled in last): at 100,000 entries the text is 10 MB, and building it
/// first held it twice over. After them, a `?` line for each path of
/// `awaited`: the head entry its record waits for (see
/// [`Base::put_with_head`]).
fn write_records_when<'a>(
    file: &Path,
    entries: impl Iterator<Item = (&'a str, Option<&'a BaseEntry>)>,
    awaited: impl Iterator<Item = (&'a str, &'a BaseEntry)>,
) -> Result<()> {
    use std::io::{Seek, Write};
    durable::create_private_dir_all(&durable::parent_of(file))?;
    durable::write_atomic_with(file, 0o600, |f| {
        let placeholder = "0".repeat(64);
        writeln!(f, "{MAGIC} {placeholder}")?;
        let mut out = io::BufWriter::with_capacity(
            1 << 16,
            crate::HashingWriter {
                file: &mut *f,
                hasher: sgard_store::Hasher::new(),
            },
        );
        render_to(&mut out, entries)?;
        for (k, b) in awaited {
            out.write_all(b"? ")?;
            render_to(&mut out, std::iter::once((k, Some(b))))?;
        }
        let sum = out
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?
            .hasher
            .finish();
        f.seek(io::SeekFrom::Start(MAGIC.len() as u64 + 1))?;
        f.write_all(sum.to_hex().as_bytes())
    })?;
    Ok(())
}

/// Reads what [`Base::save_prior`] wrote; `None` when it is missing or
/// damaged (an undo then leaves the base as it is, which is safe).
pub(crate) fn load_prior(file: &Path) -> Option<Vec<(String, Option<BaseEntry>)>> {
    let text = durable::read_regular_to_string(file).ok()?;
    parse_records(&text)
}

/// Base lines for `entries` (a `-` line for a path with no record).
#[cfg(test)]
fn render<'a>(entries: impl Iterator<Item = (&'a str, Option<&'a BaseEntry>)>) -> String {
    let mut body = Vec::new();
    let _ = render_to(&mut body, entries);
    String::from_utf8(body).unwrap_or_default()
}

/// Writes base lines for `entries` to `body` (see [`render`]).
fn render_to<'a>(
    body: &mut dyn io::Write,
    entries: impl Iterator<Item = (&'a str, Option<&'a BaseEntry>)>,
) -> io::Result<()> {
    let hex = |h: Option<Hash>| h.map_or_else(|| "-".to_owned(), |h| h.to_hex());
    for (k, b) in entries {
        let Some(b) = b else {
            writeln!(body, "- - - - {}", escape(k))?;
            continue;
        };
        let kind = match b.kind {
            EntryKind::File => 'f',
            EntryKind::Directory => 'd',
            EntryKind::Link => 'l',
        };
        let content = if b.content.is_some() && b.content == b.stored {
            "=".to_owned()
        } else {
            hex(b.content)
        };
        let mode = b.mode.map_or_else(|| "-".to_owned(), |m| m.to_string());
        write!(
            body,
            "{kind} {mode} {} {content} {}",
            hex(b.stored),
            escape(k)
        )?;
        if let Some(t) = &b.target {
            write!(body, " {}", escape(t))?;
        }
        body.write_all(b"\n")?;
    }
    Ok(())
}

/// Escapes a path or target so it holds no space, tab, CR or newline.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ' ' => out.push_str("\\s"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

pub(crate) fn unescape(s: &str) -> Option<String> {
    if !s.contains('\\') {
        return Some(s.to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match it.next()? {
            '\\' => '\\',
            's' => ' ',
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            _ => return None,
        });
    }
    Some(out)
}

/// Parses a base file; `None` when anything is off.
pub(crate) fn parse(text: &str) -> Option<PathTable<BaseEntry>> {
    let mut map = PathTable::default();
    for (p, b) in parse_records(text)? {
        map.insert(&p, b?);
    }
    Some(map)
}

/// Parses base lines under a checked header; `-` lines are paths with no
/// record. A file with `?` lines (see [`write_records_when`]) is none.
fn parse_records(text: &str) -> Option<Vec<(String, Option<BaseEntry>)>> {
    parse_records_when(text)
        .filter(|(_, awaited)| awaited.is_empty())
        .map(|(records, _)| records)
}

/// The records and head entries awaited of a file [`write_records_when`]
/// wrote.
type Awaited = (Vec<(String, Option<BaseEntry>)>, Vec<(String, BaseEntry)>);

/// Parses what [`write_records_when`] wrote.
fn parse_records_when(text: &str) -> Option<Awaited> {
    let (head, body) = text.split_once('\n')?;
    let sum = head.strip_prefix(MAGIC)?.trim();
    if Hash::parse(sum).ok()? != Hash::of(body.as_bytes()) {
        return None;
    }
    let hash = |s: &str| -> Option<Option<Hash>> {
        if s == "-" {
            Some(None)
        } else {
            Hash::parse(s).ok().map(Some)
        }
    };
    let mut out = Vec::with_capacity(body.len() / 150);
    let mut awaited = Vec::new();
    for line in body.lines() {
        let (line, awaits) = match line.strip_prefix("? ") {
            Some(rest) => (rest, true),
            None => (line, false),
        };
        // At most six fields; no allocation per line.
        let mut f = [""; 6];
        let mut n = 0;
        for part in line.split(' ') {
            *f.get_mut(n)? = part;
            n += 1;
        }
        if n != 5 && n != 6 {
            return None;
        }
        let kind = match f[0] {
            "f" => EntryKind::File,
            "d" => EntryKind::Directory,
            "l" => EntryKind::Link,
            "-" if n == 5 && !awaits => {
                out.push((unescape(f[4])?, None));
                continue;
            }
            _ => return None,
        };
        let mode = if f[1] == "-" {
            None
        } else {
            Some(Mode::parse(f[1]).ok()?)
        };
        let stored = hash(f[2])?;
        let content = if f[3] == "=" { stored } else { hash(f[3])? };
        let path = unescape(f[4])?;
        let target = if n == 6 { Some(unescape(f[5])?) } else { None };
        let b = BaseEntry {
            kind,
            mode,
            target,
            stored,
            content,
        };
        if awaits {
            awaited.push((path, b));
        } else {
            out.push((path, Some(b)));
        }
    }
    Some((out, awaited))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn entry(kind: EntryKind) -> BaseEntry {
        BaseEntry {
            kind,
            mode: Some(Mode::parse("0644").unwrap()),
            target: None,
            stored: Some(Hash::of(b"a")),
            content: Some(Hash::of(b"a")),
        }
    }

    #[test]
    fn round_trips_odd_paths_and_targets() {
        // Through the index, and through the text records of undo's
        // saved priors.
        let d = tempfile::tempdir().unwrap();
        let mut b = Base::load(Some(d.path()), None).unwrap();
        let mut link = entry(EntryKind::Link);
        link.mode = None;
        link.stored = None;
        link.content = None;
        link.target = Some("../a b\\c\nd".into());
        b.settle("~/x y\n\\z", entry(EntryKind::File));
        b.settle("~/l", link.clone());
        let mut enc = entry(EntryKind::File);
        enc.content = Some(Hash::of(b"plain"));
        b.settle("~/secret", enc.clone());
        let file = b.index().unwrap();
        index::write(file, None, [None; 2], b.to_write(), &[]).unwrap();
        let mut found = index::read(file).unwrap();
        let again = Base::load(Some(d.path()), Some(&mut found)).unwrap();
        assert!(!again.damaged());
        assert_eq!(again.get("~/x y\n\\z"), Some(&entry(EntryKind::File)));
        assert_eq!(again.get("~/l"), Some(&link));
        assert_eq!(again.get("~/secret"), Some(&enc));
        let prior = d.path().join("prior");
        b.save_prior(&prior, &["~/x y\n\\z", "~/l", "~/secret", "~/none"])
            .unwrap();
        let back: HashMap<String, Option<BaseEntry>> =
            load_prior(&prior).unwrap().into_iter().collect();
        assert_eq!(back["~/l"], Some(link));
        assert_eq!(back["~/secret"], Some(enc));
        assert_eq!(back["~/none"], None);
    }

    /// A record set for a head not yet written holds only once the
    /// repository holds that head's entry: a crash before the head keeps
    /// the record it replaced, one after applies it.
    #[test]
    fn a_record_waiting_for_a_head_is_applied_only_with_that_head() {
        let with = |s: &[u8]| {
            let mut e = Entry::new(
                "~/c".into(),
                EntryKind::File,
                sgard_manifest::Timestamp::zero(),
            );
            e.hash = Some(Hash::of(s));
            e
        };
        let (old, mut new) = (with(b"a"), with(b"theirs"));
        new.mode = Some(sgard_manifest::Mode::from_st_mode(0o600));
        // The head before may differ from the one awaited in its mode
        // alone, and hold none (which `matches_repo` takes for any).
        let modeless = with(b"theirs");
        let mut last_sync = entry(EntryKind::File);
        last_sync.stored = Some(Hash::of(b"last sync"));
        last_sync.content = last_sync.stored;
        for (head, applied) in [(&old, false), (&modeless, false), (&new, true)] {
            let d = tempfile::tempdir().unwrap();
            let mut b = Base::load(Some(d.path()), None).unwrap();
            b.settle("~/c", entry(EntryKind::File));
            b.settle("~/gone", entry(EntryKind::File));
            let file = b.index().unwrap().to_path_buf();
            index::write(&file, None, [None; 2], b.to_write(), &[]).unwrap();
            b.saved();
            b.put_with_head("~/c", Some(last_sync.clone()), BaseEntry::of_head(&new));
            b.put_with_head("~/gone", None, BaseEntry::of_head(&new));
            b.prepare().unwrap();
            // Cut off here: the next run reads the base saved before.
            let mut found = index::read(&file).unwrap();
            let mut again = Base::load(Some(d.path()), Some(&mut found)).unwrap();
            again
                .resolve_pending(|p| match p {
                    "~/c" | "~/gone" => Some(head.clone()),
                    _ => None,
                })
                .unwrap();
            let (c, gone) = if applied {
                (Some(&last_sync), None)
            } else {
                (Some(&entry(EntryKind::File)), Some(&entry(EntryKind::File)))
            };
            assert_eq!(again.get("~/c"), c, "applied: {applied}");
            assert_eq!(again.get("~/gone"), gone, "applied: {applied}");
            assert_eq!(again.dirty(), applied);
        }
        // Undo's priors never hold a waiting record.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("prior");
        let e = entry(EntryKind::File);
        write_records_when(&p, std::iter::empty(), std::iter::once(("~/c", &e))).unwrap();
        assert!(load_prior(&p).is_none());
    }

    /// The crash journal names only what changed since the base was
    /// saved; a run cut off after it still ends with the whole base.
    #[test]
    fn the_journal_holds_only_changed_records_and_recovery_completes_the_base() {
        let d = tempfile::tempdir().unwrap();
        let mut b = Base::load(Some(d.path()), None).unwrap();
        let names: Vec<String> = (0..50).map(|i| format!("~/f{i:02}")).collect();
        for n in &names {
            b.settle(n, entry(EntryKind::File));
        }
        let file = b.index().unwrap().to_path_buf();
        index::write(&file, None, [None; 2], b.to_write(), &[]).unwrap();
        b.saved();
        let mut changed = entry(EntryKind::File);
        changed.stored = Some(Hash::of(b"new"));
        changed.content = changed.stored;
        b.settle("~/f07", changed.clone());
        b.settle("~/f08", entry(EntryKind::File)); // the same: no change
        b.put("~/f09", None);
        b.prepare().unwrap();
        let pending = d.path().join("base.pending");
        let (records, awaited) =
            parse_records_when(&std::fs::read_to_string(&pending).unwrap()).unwrap();
        assert!(awaited.is_empty());
        assert_eq!(
            records,
            vec![
                ("~/f07".to_owned(), Some(changed.clone())),
                ("~/f09".to_owned(), None),
            ]
        );
        // Cut off before the index: the next run reads the saved base and
        // takes the change the repository holds.
        let mut found = index::read(&file).unwrap();
        let mut again = Base::load(Some(d.path()), Some(&mut found)).unwrap();
        again
            .resolve_pending(|p| {
                let mut e =
                    Entry::new(p.into(), EntryKind::File, sgard_manifest::Timestamp::zero());
                e.hash = Some(Hash::of(if p == "~/f07" { b"new" } else { b"a" }));
                Some(e)
            })
            .unwrap();
        assert_eq!(again.get("~/f07"), Some(&changed));
        for n in names.iter().filter(|n| *n != "~/f07") {
            assert_eq!(again.get(n), Some(&entry(EntryKind::File)), "{n}");
        }
        // Saved, nothing is journalled again.
        b.saved();
        assert!(!pending.exists());
        b.settle("~/f10", changed.clone());
        b.prepare().unwrap();
        let (records, _) = parse_records_when(&std::fs::read_to_string(&pending).unwrap()).unwrap();
        assert_eq!(records, vec![("~/f10".to_owned(), Some(changed.clone()))]);
        // Records of the loaded table (noted by position), a path beside it
        // (before its first) and one awaiting a head, in path order, once.
        b.saved();
        b.settle("~/a", changed.clone());
        b.put_with_head("~/f11", Some(changed.clone()), entry(EntryKind::File));
        b.put("~/f12", None);
        b.settle("~/f11", changed.clone());
        b.prepare().unwrap();
        let (records, awaited) =
            parse_records_when(&std::fs::read_to_string(&pending).unwrap()).unwrap();
        assert_eq!(
            records,
            vec![
                ("~/a".to_owned(), Some(changed.clone())),
                ("~/f11".to_owned(), Some(changed)),
                ("~/f12".to_owned(), None),
            ]
        );
        assert_eq!(awaited.len(), 1);
    }

    #[test]
    fn damage_is_detected_and_treated_as_empty() {
        // The text file of older builds: read when there is no index,
        // refused when damaged.
        let d = tempfile::tempdir().unwrap();
        let e = entry(EntryKind::File);
        let body = render(std::iter::once(("~/f", Some(&e))));
        let good = format!("{MAGIC} {}\n{body}", Hash::of(body.as_bytes()).to_hex());
        let p = d.path().join("base");
        std::fs::write(&p, &good).unwrap();
        let b = Base::load(Some(d.path()), None).unwrap();
        assert!(
            !b.damaged() && b.dirty(),
            "an old file is moved into the index"
        );
        assert_eq!(b.get("~/f"), Some(&e));
        std::fs::write(&p, good.replace("~/f", "~/g")).unwrap();
        let again = Base::load(Some(d.path()), None).unwrap();
        assert!(again.damaged());
        assert!(again.get("~/f").is_none() && again.get("~/g").is_none());
        std::fs::write(&p, "garbage").unwrap();
        assert!(Base::load(Some(d.path()), None).unwrap().damaged());
        // An index that cannot be used is damage, even with an older file
        // beside it (older than the index, so never taken instead).
        std::fs::write(&p, &good).unwrap();
        let mut found = index::Found::Unusable;
        let b = Base::load(Some(d.path()), Some(&mut found)).unwrap();
        assert!(b.damaged() && b.get("~/f").is_none());
        // A usable index is the base; the older file goes.
        let mut found = index::Found::Usable(Box::default());
        let b = Base::load(Some(d.path()), Some(&mut found)).unwrap();
        assert!(b.is_new() && b.to_write().is_none(), "no base kept yet");
        assert!(!p.exists());
        let mut found = index::Found::Unusable;
        let b = Base::load(Some(d.path()), Some(&mut found)).unwrap();
        assert!(b.damaged() && !b.is_new());
        assert!(Base::load(Some(d.path()), None).unwrap().is_new());
    }

    #[test]
    fn ids_are_created_once_and_hostile_ones_ignored() {
        let d = tempfile::tempdir().unwrap();
        let p = repo_key(d.path(), false);
        assert!(p.starts_with("path-"), "{p}");
        let a = repo_key(d.path(), true);
        assert_eq!(a.len(), 32);
        assert_eq!(repo_key(d.path(), false), a);
        std::fs::write(d.path().join(ID_FILE), "../../etc\n").unwrap();
        let k = repo_key(d.path(), true);
        assert!(k.starts_with("path-"), "{k}");
        assert!(!k.contains('/'));
    }
}
