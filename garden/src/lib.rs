//! # sgard-garden: every operation on a repository and the home it mirrors
//!
//! A [`Garden`] owns one repository: its manifest, its blob store and its
//! lock. The CLI and the sync server call the same methods; no logic lives in
//! command files or RPC handlers.
//!
//! ## Invariants
//! - A Garden opened with [`LockMode::Exclusive`] is the only writer of its
//!   repository; the manifest is loaded *after* the lock is taken, so
//!   concurrent commands never lose each other's updates.
//! - Blobs are durable before the manifest that names them is saved; the
//!   manifest is saved atomically. A crash at any point leaves the old
//!   manifest or the new one, and every blob either names is complete.
//! - Nothing is written into the home folder except through a temp file and
//!   a rename in the destination folder, after the content passed its hash.
//! - The repository folder itself is never tracked.
//!
//! Operations return reports; they print nothing. Questions to the user go
//! through [`Prompt`].

mod add;
mod base;
mod checkpoint;
mod chunking;
pub mod crypto;
mod diff;
mod docs;
pub mod doctor;
pub mod edit;
mod encrypt;
mod encrypted;
mod env;
mod error;
mod externals;
mod fingerprints;
mod flags;
mod folders;
pub mod folding;
pub mod fsx;
mod gitmerge;
mod history;
mod home;
pub mod identity;
mod index;
pub mod why;

/// A map keyed by entry path, with a fast hasher (the keys are the
/// user's own paths; there is no one to flood it).
pub(crate) type PathMap<V> = std::collections::HashMap<String, V, rustc_hash::FxBuildHasher>;
mod info;
mod keyring;
pub mod lock;
pub mod managers;
mod merge;
mod mirror;
mod options;
mod own;
use sgard_store::par;
mod paths;
mod pathtable;
mod platform;
mod present;
mod preview;
mod prune;
mod purge;
pub mod recipients;
mod remove;
mod restore;
pub mod rules;
mod scan;
pub mod scripts;
pub mod secrets;
mod sqlite;
mod standin;
mod statcache;
mod stats;
mod status;
mod sync;
mod syncstate;
mod tags;
pub mod template;
mod threeway;
mod undo;
mod unresolved;
mod verify;
pub mod watch;

use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};

use sgard_manifest::history::{HISTORY_FILE, History};
use sgard_manifest::{MANIFEST_FILE, Manifest, path_is_under};
use sgard_store::chunks::ChunkStore;
use sgard_store::{Store, durable};

pub use add::{AddOptions, AddOutcome, AddReport};
pub use base::{recorded_repo_id, repository_id, set_repo_id};
pub use checkpoint::{CheckpointOptions, CheckpointReport, EntryChange, error_chain};
pub use chunking::ChunkSweep;
pub use diff::Diff;
pub use edit::{EditOutcome, EditSession};
pub use encrypt::{AddedRecipient, RotateReport};
pub use encrypted::PassphraseSource;
pub use env::{Env, PASSPHRASE_VARS};
pub use error::{Error, Result};
pub use externals::{ExternalReport, ExternalSpec, Refreshed, Source};
pub use flags::Targeting;
pub use gitmerge::{GitMerge, git_merge_history, git_merge_manifest_alone};
pub use history::{ForgetPolicy, ShowChange, SnapshotCheck};
pub use info::Info;
pub use lock::{LockMode, RepoLock};
pub use merge::{MergeOutcome, NoMerge, Unmergeable};
pub use mirror::{MirrorDownReport, MirrorUpReport};
pub use options::{Access, NoteFn, Options};
pub use paths::clean;
pub use prune::PruneReport;
pub use purge::{PurgeOptions, PurgeReport};
pub use remove::RemoveReport;
pub use restore::{Answer, Prompt, RestoreAction, RestoreOptions, RestoreReport};
pub use stats::{SnapshotStats, Stats};
pub use status::{State, StatusLine};
pub use sync::{
    Base, PullPlan, PullReport, PushDecision, Side, SyncKey, Trust, head_id_of, keep_go_dropped,
};
pub use undo::{UndoReport, UndoSummary};
pub use verify::{VerifyLine, VerifyState};

pub use sgard_manifest as manifest;
pub use sgard_store as store;

/// The `.gitignore` written by `init`: only machine-local files stay out of
/// git. Blobs go in (content addressed, so git stores each once; encrypted
/// ones are ciphertext), and so does `repo-id` (a clone is the same
/// repository).
pub const GITIGNORE: &str = "lock\nlock.turn\nsync-state\njwt.key\ntags\n.sgard-tmp-*\nblobs/tmp/\nchunks/tmp/\nchunks/journal/\n";

/// The `.gitattributes` written by `init` (and its lines added to a
/// repository in a git work tree that lacks them): git never converts line
/// endings (`* -text`: a clone on Windows with `core.autocrlf` would
/// otherwise rewrite blobs, which are named by their bytes, and tracked
/// files would no longer restore byte for byte), merges the manifest and
/// the history with `sgard git-merge-driver` (the `sgard` driver, defined
/// in each clone's git config by sgard), and the retired data keys, which
/// only ever grow by whole lines, as the union of both sides.
pub const GITATTRIBUTES: &str = "# Written by sgard: git keeps every file byte for byte (blobs are named by their bytes)\n\
* -text\n\
# and merges these files with `sgard git-merge-driver`\n\
manifest.yaml merge=sgard\n\
history.yaml merge=sgard\n\
retired-keys merge=union\n";

/// What a Garden keeps of its index between reading and writing it.
#[derive(Debug, Default)]
struct IndexState {
    /// The manifest section as it is to be written: the manifest as it is
    /// in `manifest.yaml` (none: the index is written without one).
    section: Option<index::ManifestSection>,
    /// The sections of the repository's log and of this home's own log.
    history: Option<Vec<u8>>,
    local: Option<Vec<u8>>,
    /// The file must be written even if the base and stat cache did not
    /// change (a new or refreshed manifest section, a first index).
    dirty: bool,
}

/// Where this machine keeps its state for one repository.
struct Place {
    /// The repository key (see `base::key_for`).
    key: String,
    /// Something to tell the user about it.
    note: Option<String>,
    /// `<state>/sgard/repos/<key>` (none without a state folder).
    dir: Option<PathBuf>,
}

impl Place {
    fn find(root: &Path, env: &Env, exclusive: bool, history: &History) -> Self {
        let (key, note) = base::key_for(root, env.state_dir.as_deref(), exclusive, history);
        let dir = base::state_dir(env.state_dir.as_deref(), &key);
        Place { key, note, dir }
    }
}

/// What [`load_cached`] gave: the file's parsed contents, the SHA-256 of
/// its bytes, its section to keep, and whether the index must be written.
struct Cached<T, S> {
    value: T,
    hash: sgard_store::Hash,
    section: Option<S>,
    dirty: bool,
}

/// A file's contents through its index `section` where that vouches for
/// the file (whose metadata, taken at `observed`, is `md`), else `read`,
/// hashed and `parse`d, with a new section `encode`d when `keep` (there is
/// an index). A section whose fingerprint is too fresh costs a streamed
/// hash of `path`; the text is read (once more) only to be parsed. What
/// is kept of a section that vouched is what `kept` makes of its bytes.
#[allow(clippy::too_many_arguments)]
fn load_cached<T, S>(
    path: &Path,
    md: &fs::Metadata,
    observed: i64,
    section: Option<Vec<u8>>,
    keep: bool,
    kept: impl FnOnce(Vec<u8>) -> Option<S>,
    read: impl Fn() -> Result<String>,
    decode: impl FnOnce(
        &[u8],
        &fs::Metadata,
        &mut dyn FnMut() -> Option<sgard_store::Hash>,
    ) -> Option<(T, sgard_store::Hash, index::Freshness)>,
    parse: impl FnOnce(&str) -> Result<T>,
    encode: impl FnOnce(index::Fingerprint, i64, &sgard_store::Hash, &T) -> S,
) -> Result<Cached<T, S>> {
    if let Some(mut sec) = section {
        // The file is hashed as a stream: when the section vouches for
        // it (the common case: only the fingerprint was too fresh to trust)
        // its text is never held, and when it does not, the parse below
        // costs far more than reading the file a second time.
        let mut read_hash = || fsx::hash_file(path).ok().map(|(h, _)| h);
        if let Some((value, hash, fresh)) = decode(&sec, md, &mut read_hash) {
            let dirty = restamp_pays(&fresh, md, observed);
            if dirty {
                index::restamp(&mut sec, index::Fingerprint::of(md), observed);
            }
            return Ok(Cached {
                value,
                hash,
                section: kept(sec),
                dirty,
            });
        }
    }
    let text = read()?;
    let hash = sgard_store::Hash::of(text.as_bytes());
    let value = parse(&text)?;
    let section = keep.then(|| encode(index::Fingerprint::of(md), observed, &hash, &value));
    Ok(Cached {
        value,
        hash,
        section,
        dirty: keep,
    })
}

/// The head manifest and its hash: from the index where it vouches for
/// `manifest.yaml`, else read (and hashed, and parsed) from the file.
fn load_head(
    path: &Path,
    found: Option<&mut index::Found>,
) -> Result<(Manifest, sgard_store::Hash, IndexState)> {
    let observed = index::now_ns();
    let md = fs::symlink_metadata(path).map_err(|e| Error::io("reading", path, e))?;
    let keep = found.is_some();
    let section = match found {
        Some(index::Found::Usable(l)) => l.manifest.take(),
        _ => None,
    };
    let c = load_cached(
        path,
        &md,
        observed,
        section,
        keep,
        |sec| index::ManifestSection::of_bytes(&sec),
        || Ok(Manifest::read_text(path)?),
        |sec, md, read_hash| index::cached_manifest(sec, md, read_hash),
        |text| Ok(Manifest::from_yaml_at(text, path)?),
        index::ManifestSection::of_manifest,
    )?;
    Ok((
        c.value,
        c.hash,
        IndexState {
            section: c.section,
            dirty: c.dirty,
            ..IndexState::default()
        },
    ))
}

/// Whether a section found by hashing its file should be stamped with the
/// fingerprint seen now: only if that fingerprint is settled, so the next
/// command can skip reading the file. A file still inside the racy window
/// is hashed again next time anyway, and rewriting the index for nothing
/// costs more than the hash.
fn restamp_pays(fresh: &index::Freshness, md: &fs::Metadata, observed: i64) -> bool {
    *fresh == index::Freshness::Hashed && index::Fingerprint::of(md).settled_at(observed)
}

/// A history log from `path`, through its index `section` where that
/// vouches for the file; returns the section to keep (`keep`: there is an
/// index) and whether it changed.
fn load_history(
    path: &Path,
    section: Option<Vec<u8>>,
    keep: bool,
) -> (Result<History>, Option<Vec<u8>>, bool) {
    let observed = index::now_ns();
    let Ok(md) = fs::symlink_metadata(path) else {
        // Missing (an empty log) or unreadable: as the loader says.
        return (History::load(path).map_err(Error::from), None, false);
    };
    let loaded = load_cached(
        path,
        &md,
        observed,
        section,
        keep,
        Some,
        || {
            sgard_store::durable::read_regular_to_string(path).map_err(|source| {
                sgard_manifest::Error::Read {
                    path: path.to_path_buf(),
                    source,
                }
                .into()
            })
        },
        |sec, md, read_hash| index::cached_history(sec, md, read_hash),
        |text| Ok(History::from_yaml_at(text, path)?),
        index::history_section,
    );
    match loaded {
        Ok(c) => (Ok(c.value), c.section, c.dirty),
        Err(e) => (Err(e), None, false),
    }
}

/// A file being written that hashes what goes into it.
pub(crate) struct HashingWriter<'a> {
    pub(crate) file: &'a mut fs::File,
    pub(crate) hasher: sgard_store::Hasher,
}

impl std::io::Write for HashingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Where a Garden's notes go as they happen.
struct NoteSink(NoteFn);

impl std::fmt::Debug for NoteSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NoteSink")
    }
}

/// One repository, opened and locked: the repository as read ([`Repo`]),
/// and this run's work on it ([`Work`]), ended by [`Garden::finish`].
#[derive(Debug)]
pub struct Garden {
    pub(crate) repo: Repo,
    pub(crate) work: Work,
    /// The process ends with this Garden (see [`Options::process_ends`]).
    process_ends: bool,
    _lock: RepoLock,
}

/// The repository as this run read it: its folder, manifest, logs and
/// store, and where this machine may write. Commands change the manifest
/// and logs through [`Garden`]'s `&mut self` methods; what judges the
/// disk against it borrows it shared (see [`Tx`]).
#[derive(Debug)]
pub(crate) struct Repo {
    pub(crate) root: PathBuf,
    pub(crate) env: Env,
    pub(crate) manifest: Manifest,
    /// SHA-256 of manifest.yaml's bytes as last read or written.
    pub(crate) head_hash: sgard_store::Hash,
    /// Every snapshot this home can see, oldest first: the repository's
    /// log and this home's local log merged (see [`LocalLog`]).
    pub(crate) history: History,
    /// The repository's own log (`<repo>/history.yaml`).
    pub(crate) repo_history: History,
    /// This home's log of its changes to the home folder.
    pub(crate) local: Option<LocalLog>,
    /// Held by a Garden opened to change the home folder only
    /// ([`Access::Home`]): one such command per home at a time.
    pub(crate) home_lock: Option<fs::File>,
    pub(crate) store: Store,
    /// This machine's labels (host name and tags) for targeting.
    pub(crate) labels: Vec<String>,
    /// This repository's folder of machine-local state (`None`: no state).
    pub(crate) local_dir: Option<PathBuf>,
    /// Where entries may be written in the home (never through a symlink,
    /// never into the repository or sgard's state).
    pub(crate) confine: home::Confine,
    /// The key of this repository's machine-local state.
    pub(crate) key: Option<String>,
    /// This home's id, recorded in history records (see `base::machine_id`).
    pub(crate) machine: Option<String>,
    /// Why `history.yaml` could not be read (it is then treated as empty,
    /// and whatever needs it refuses).
    pub(crate) history_error: Option<String>,
    /// The head was taken from an interrupted checkpoint's snapshot and not
    /// written to manifest.yaml (a reader's open).
    pub(crate) head_from_log: bool,
    /// Nothing is written (see [`Options::dry_run`]).
    pub(crate) dry_run: bool,
}

/// This run's work with the repository, in plain fields: what the machine
/// knows (base, stat cache, index, fingerprints, keys) as this run changed
/// it, the blobs it is writing, the notes for the user. Nothing here is
/// saved until [`Garden::finish`] (parsed snapshot documents excepted: a
/// cache under each document's own name, kept as they are parsed).
#[derive(Debug, Default)]
pub(crate) struct Work {
    pub(crate) keys: encrypted::Keys,
    pub(crate) fingerprints: fingerprints::Fingerprints,
    /// What this machine last saw agreed between disk and repository.
    pub(crate) base: base::Base,
    /// The files a merge left conflict markers in.
    pub(crate) unresolved: unresolved::Unresolved,
    /// Things the user should be told (see [`Garden::take_notes`]).
    pub(crate) notes: Vec<why::Why>,
    /// Where notes go as they happen, once the caller has said
    /// ([`Options::note_sink`]); until then they wait in `notes`.
    pub(crate) note_sink: Option<NoteSink>,
    pub(crate) statcache: statcache::StatCache,
    /// The manifest section of this machine's index, and whether the index
    /// must be written (see [`index`]).
    pub(crate) index: IndexState,
    /// The repository's open write transaction (see [`Writes`]).
    pub(crate) writes: Writes,
    /// The repository's chunking setting, read at the first write that
    /// needs it.
    pub(crate) chunking: Option<sgard_store::chunks::Setting>,
    /// Template variables and renderings, built at first use.
    pub(crate) templates: template::Templates,
    /// Snapshot documents this run parsed from their sound blobs and put
    /// in this machine's cache of them ([`docs`]): read back from there
    /// without checking the blob again.
    pub(crate) docs: Vec<sgard_store::Hash>,
    /// Bytes of the documents this run put in the cache: a run keeps no
    /// more than the cache's bounds (a `log` of hundreds of big snapshots
    /// keeps the first ones, and does not write the rest only to trim them).
    pub(crate) docs_bytes: u64,
    /// Keeping a document failed once: this run keeps no more (and says so
    /// once).
    pub(crate) docs_failed: bool,
    /// The place in the log of the oldest snapshot whose document the
    /// cache was found to keep when one was refused: this run offers none
    /// older (a `verify` of thousands of snapshots lists the folder once,
    /// not once for each).
    pub(crate) docs_floor: Option<usize>,
    /// The leaf folders of `blobs/` being looked at while the repository
    /// was opened ([`Options::presence_ahead`]), for the status.
    pub(crate) ahead: Option<present::Ahead>,
    /// What this run's status asked the watcher, kept by
    /// [`Garden::finish`] for the next one ([`watch`]).
    pub(crate) watch: Option<watch::WatchRun>,
    /// How that status used it.
    pub(crate) watch_used: Option<watch::Used>,
    /// A status's lines to keep for the next one (see `watch::cache`):
    /// the head of the file and its lines, encoded.
    pub(crate) status_cache: Option<watch::Keep>,
}

/// One run's work over the repository as read: the judging of the disk
/// against the repository (status, diff, checkpoint's and restore's
/// passes), which changes only this run's [`Work`]. The repository is
/// borrowed shared, so what it holds (the manifest's entries) can be held
/// across calls that change the work.
#[derive(Debug)]
pub(crate) struct Tx<'a> {
    pub(crate) repo: &'a Repo,
    pub(crate) work: &'a mut Work,
}

impl<'a> Tx<'a> {
    /// The work `work` over `repo`. [`Garden::tx`] is the usual way; this
    /// one is for a caller holding entries of the manifest.
    pub(crate) fn new(repo: &'a Repo, work: &'a mut Work) -> Self {
        Tx { repo, work }
    }
}

/// The repository side of one run's work: the blobs being written as one
/// batch (one flush for all; see `Batch`), and the size of every blob the
/// run wrote or matched against a file on disk, so a history record's byte
/// count needs no `stat` per blob (a plain list: it is only looked at when
/// a record is written).
#[derive(Debug, Default)]
struct Writes {
    batch: Option<sgard_store::Batch>,
    sizes: Vec<(sgard_store::Hash, u64)>,
    /// What a round of the batch said when it failed: its blobs are not all
    /// named, so every later write and the batch's commit fail with it
    /// (nothing may come to name them), whichever entry was being stored
    /// when the round ran.
    failed: Option<String>,
}

/// Blobs a batch holds before they are named: each waiting one costs its
/// temp file's path (at 100,000 files, 13 MB at the end of
/// a first add), so a big run names them in rounds of this many, two
/// flushes a round. Named early, a blob is only durable early: until a
/// manifest names it, it is an unreferenced blob like any other.
#[cfg(not(test))]
const BATCH_ROUND: usize = 16_384;
#[cfg(test)]
const BATCH_ROUND: usize = 3;

impl Writes {
    /// Names the open batch's blobs when it holds a round of them.
    fn commit_if_full(&mut self) -> sgard_store::Result<()> {
        self.refuse_after_failure()?;
        match self.batch.as_mut() {
            Some(b) if b.len() >= BATCH_ROUND => b
                .commit_round()
                .inspect_err(|e| self.failed = Some(crate::checkpoint::error_chain(e))),
            _ => Ok(()),
        }
    }

    /// The failure of an earlier round, if one failed (see
    /// [`Writes::failed`]).
    fn refuse_after_failure(&self) -> sgard_store::Result<()> {
        match (&self.failed, &self.batch) {
            (Some(why), Some(b)) => Err(sgard_store::Error::Io {
                op: "naming blobs in (an earlier round of them failed)",
                path: b.root().to_path_buf(),
                source: std::io::Error::other(why.clone()),
            }),
            _ => Ok(()),
        }
    }
}

/// The machine-local log of this home's changes to its home folder: the
/// safety snapshots of `restore`, `restore --at`, `mirror down`, `merge`
/// and `undo` (records and the blobs they captured), under
/// `$XDG_STATE_HOME/sgard/repos/<key>/undo/` in the repository layout
/// (`history.yaml`, `blobs/`). They describe one home, not the shared
/// repository: kept here, they never dirty a git checkout of it, never
/// reach another machine's `undo`, and work from a read-only repository.
#[derive(Debug)]
pub(crate) struct LocalLog {
    pub dir: PathBuf,
    pub store: Store,
    pub history: History,
}

impl LocalLog {
    /// Loads the local log in `dir`, through the index's `index` section
    /// (updated in place).
    ///
    /// # Errors
    /// When the system fails to read the log (EIO, ENOSPC): that is no
    /// damage, and the log is left where it is for the next run. A log that
    /// does not parse is set aside.
    fn load(dir: PathBuf, notes: &mut Vec<String>, index: &mut IndexState) -> Result<Self> {
        let (loaded, section, dirty) =
            load_history(&dir.join(HISTORY_FILE), index.local.take(), true);
        index.local = section;
        index.dirty |= dirty;
        let history = match loaded {
            Ok(h) => h,
            Err(e) if e.is_io_failure() => return Err(e),
            Err(e) => {
                notes.push(format!(
                    "this machine's log of its restores is unreadable and is set aside \
                     (undo cannot reach what it held): {}",
                    error_chain(&e)
                ));
                let p = dir.join(HISTORY_FILE);
                let _ = fs::rename(&p, dir.join("history.yaml.damaged"));
                History::default()
            }
        };
        Ok(LocalLog {
            store: Store::open(&dir),
            dir,
            history,
        })
    }
}

/// The records of the repository's log and this home's local log in one.
/// Each keeps its own order (the order it was written, whatever the clocks
/// of the machines said), and a local record goes right after the record it
/// follows: a `before-restore` record's parent is the head the restore was
/// made from, so it goes after the newest record of that id (never before
/// an earlier local record); the records after it follow it.
fn merged(a: &History, b: Option<&LocalLog>) -> History {
    let Some(l) = b.filter(|l| !l.history.records.is_empty()) else {
        return a.clone();
    };
    let (x, y) = (&a.records, &l.history.records);
    let mut records = Vec::with_capacity(x.len() + y.len());
    let mut pos = 0;
    for r in y {
        if r.reason == sgard_manifest::history::Reason::BeforeRestore
            && let Some(p) = r.parent
            && let Some(k) = x.iter().rposition(|c| c.id == p)
            && k + 1 > pos
        {
            records.extend(x[pos..=k].iter().cloned());
            pos = k + 1;
        }
        records.push(r.clone());
    }
    records.extend(x[pos..].iter().cloned());
    History { records }
}

impl Drop for Garden {
    /// Saves nothing (see [`Garden::finish`]): only, when the process ends
    /// with this Garden, leaves its big lists to the exit.
    fn drop(&mut self) {
        if self.process_ends {
            // Freed by the exit, all at once: freeing 100,000 entries one
            // by one was a tenth of a command's time. Locks, open batches
            // and temp files are dropped as always.
            std::mem::forget(std::mem::take(&mut self.repo.manifest.files));
            std::mem::forget(std::mem::take(&mut self.repo.history.records));
            std::mem::forget(std::mem::take(&mut self.repo.repo_history.records));
        }
    }
}

impl Garden {
    /// Creates a repository at `root` (an absolute path): the folder and its
    /// parents, `blobs/`, `.gitignore`, then an empty manifest (written last,
    /// so a repository exists only once it is complete).
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] if `root` holds a manifest; [`Error::Io`].
    pub fn init(root: &Path, env: Env) -> Result<Garden> {
        let manifest_path = root.join(MANIFEST_FILE);
        if fsx::lstat(&manifest_path)?.is_some() {
            return Err(Error::AlreadyExists(root.to_path_buf()));
        }
        durable::create_dir_all_durable(root)?;
        let lock = RepoLock::acquire(root, LockMode::Exclusive, &|_| {})?;
        if fsx::lstat(&manifest_path)?.is_some() {
            return Err(Error::AlreadyExists(root.to_path_buf()));
        }
        let store = Store::init(root)?;
        base::create_id(root)?;
        durable::write_atomic(&root.join(".gitignore"), GITIGNORE.as_bytes(), 0o644)?;
        durable::write_atomic(
            &root.join(".gitattributes"),
            GITATTRIBUTES.as_bytes(),
            0o644,
        )?;
        // A repository made here has chosen how big files are stored (the
        // defaults); only one that never chose hears about it on its first
        // big file (see `store_file`).
        sgard_store::chunks::Setting::default().save(root)?;
        let manifest = Manifest::new(env.now);
        let text = manifest.to_yaml();
        durable::write_atomic(&manifest_path, text.as_bytes(), 0o600)?;
        let head_hash = sgard_store::Hash::of(text.as_bytes());
        let history = History::default();
        let place = Place::find(root, &env, true, &history);
        let index = IndexState {
            dirty: place.dir.is_some(),
            ..IndexState::default()
        };
        Garden::assemble(
            root,
            env,
            (manifest, head_hash),
            history,
            store,
            lock,
            (place, None, index),
            false,
        )
    }

    /// Opens the repository at `root` (an absolute path) for what
    /// `opts.access` says (see [`Access`]): takes its lock (telling
    /// `opts.on_wait` if it has to wait), then loads the manifest.
    ///
    /// # Errors
    /// [`Error::NotARepo`] when there is no manifest (nothing is created
    /// then); manifest validation errors; [`Error::Io`] (also for the
    /// home's lock of [`Access::Home`]).
    pub fn open(root: &Path, env: Env, opts: Options<'_>) -> Result<Garden> {
        fn quiet(_: &str) {}
        let on_wait = opts.on_wait.unwrap_or(&quiet);
        let ahead = opts.presence_ahead && env.caches().is_some();
        let mut g = match opts.access {
            Access::Read => {
                let mut g = Garden::open_with(root, env, LockMode::Shared, on_wait, false, ahead)?;
                // Looked for in another folder (the repository's id
                // moved): of no use, and stopped when dropped.
                g.work.ahead = g
                    .work
                    .ahead
                    .take()
                    .filter(|a| g.repo.local_dir.as_deref() == Some(a.dir()));
                g
            }
            Access::Write => {
                Garden::open_with(root, env, LockMode::Exclusive, on_wait, false, false)?
            }
            Access::RepositoryOnly => {
                Garden::open_with(root, env, LockMode::Shared, on_wait, true, false)?
            }
            // A dry run changes nothing here: no home lock.
            Access::Home if opts.dry_run => {
                Garden::open_with(root, env, LockMode::Shared, on_wait, false, false)?
            }
            Access::Home => Garden::open_for_home(root, env, on_wait)?,
        };
        g.repo.dry_run = opts.dry_run;
        g.process_ends = opts.process_ends;
        if let Some(sink) = opts.note_sink {
            for n in g.work.notes.drain(..) {
                sink(&n);
            }
            g.work.note_sink = Some(NoteSink(sink));
        }
        g.work.keys.source = opts.passphrase;
        g.work.keys.tries = opts.passphrase_tries;
        if opts.machine_keys {
            g.work.keys.candidates = recipients::candidates(
                &opts.identities,
                g.repo.env.config_dir.as_deref(),
                &g.repo.env.home,
            );
        }
        g.work.keys.key_passphrase = opts.key_passphrase;
        Ok(g)
    }

    fn open_with(
        root: &Path,
        env: Env,
        mode: LockMode,
        on_wait: &dyn Fn(&str),
        repo_only: bool,
        presence_ahead: bool,
    ) -> Result<Garden> {
        let read_index = |d: &Path| {
            let file = d.join(index::FILE);
            if repo_only {
                index::read_sections(&file)
            } else {
                index::read(&file)
            }
        };
        let manifest_path = root.join(MANIFEST_FILE);
        if fsx::lstat(&manifest_path)?.is_none() {
            return Err(Error::NotARepo(root.to_path_buf()));
        }
        let lock = RepoLock::acquire(root, mode, on_wait)?;
        let exclusive = mode == LockMode::Exclusive;
        // The index is found by the repository's id; finding the state of a
        // repository whose id changed needs the log, which the index holds.
        let first_dir = base::state_dir(env.state_dir.as_deref(), &base::repo_key(root, exclusive));
        // Started once the lock is held (what it looks at is the store a
        // writer has finished with), before the index is read and decoded:
        // one core's work.
        // On one core it would only take turns with the open.
        let ahead = first_dir
            .as_deref()
            .filter(|_| presence_ahead && par::threads() > 1)
            .and_then(|dir| present::Ahead::start(root, dir));
        let mut found = first_dir.as_deref().map(read_index).transpose()?;
        let history_section = match &mut found {
            Some(index::Found::Usable(l)) => l.history.take(),
            _ => None,
        };
        let (loaded, history_section, history_dirty) =
            load_history(&root.join(HISTORY_FILE), history_section, found.is_some());
        // A damaged log must not stop what does not need it (status, list,
        // diff, a restore of the head); what does need it refuses.
        let (history, history_error) = match loaded {
            Ok(h) => (h, None),
            // A passing I/O error is the command's error, not damage.
            Err(e) if e.is_io_failure() => return Err(e),
            Err(e) => (History::default(), Some(error_chain(&e))),
        };
        let place = Place::find(root, &env, exclusive, &history);
        if place.note.is_some() || place.dir != first_dir {
            // Carried over from an older id: its state is where it moved.
            found = place.dir.as_deref().map(read_index).transpose()?;
        }
        let (manifest, head_hash, mut index) = load_head(&manifest_path, found.as_mut())?;
        index.history = history_section;
        index.dirty |= history_dirty;
        if let Some(index::Found::Usable(l)) = &mut found {
            index.local = l.local.take();
        }
        let store = Store::open(root);
        let mut head = (manifest, head_hash);
        let mut from_log = false;
        if let Some(id) = history::interrupted_head(&history, head_hash) {
            // A checkpoint was recorded in the log but its manifest write was
            // lost (a crash between the two): finish it from the snapshot.
            let text = store.read(&id).map_err(|source| Error::Integrity {
                path: format!("snapshot {}", id.short(12)),
                source,
            })?;
            let m = Manifest::from_yaml(&String::from_utf8_lossy(&text))?;
            if mode == LockMode::Exclusive {
                durable::write_atomic(&manifest_path, &text, 0o600)?;
            } else {
                from_log = true;
            }
            head = (m, id);
            // The section describes what manifest.yaml held, not this.
            index.section = None;
            index.dirty = true;
        }
        let mut g = Garden::assemble(
            root,
            env,
            head,
            history,
            store,
            lock,
            (place, found, index),
            repo_only,
        )?;
        g.repo.head_from_log = from_log;
        if repo_only {
            // Never written back (see `save_index`): the encoded sections
            // (the manifest's is 9 MB at 100,000 entries) are done with.
            g.work.index = IndexState::default();
        }
        // Agreements taken from `base.pending` (a crash between a manifest
        // write and the base's) are made durable now, as they were made.
        // One that fails stays dirty: `finish` writes it again and reports.
        if g.work.base.dirty() {
            let _ = g.tx().save_index();
        }
        if mode == LockMode::Exclusive {
            g.sweep_repo_temps();
            g.tx().heal_head_snapshot();
        }
        // Not a note: whether it is a warning or the command's error is
        // the caller's to say (see `history_damage`).
        g.repo.history_error = history_error;
        if !repo_only {
            g.tx().seed_base();
        }
        g.work.ahead = ahead;
        Ok(g)
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "each is one loaded part of the repository, built by open and init"
    )]
    fn assemble(
        root: &Path,
        env: Env,
        (manifest, head_hash): (Manifest, sgard_store::Hash),
        history: History,
        store: Store,
        lock: RepoLock,
        (place, mut found, mut index): (Place, Option<index::Found>, IndexState),
        repo_only: bool,
    ) -> Result<Garden> {
        let Place {
            key,
            note: key_note,
            dir: local_dir,
        } = place;
        let env_stall = env.chunk_stall;
        let (tags, tag_note) = tags::load(root, local_dir.as_deref())?;
        let labels = identity::labels(&env.hostname, &tags);
        // Said in this order: the repository's key, its tags, then what
        // loading found.
        let first: Vec<why::Why> = key_note
            .map(why::Why::from)
            .into_iter()
            .chain(tag_note)
            .collect();
        let mut notes: Vec<String> = Vec::new();
        let local = local_dir
            .as_ref()
            .map(|d| LocalLog::load(d.join("undo"), &mut notes, &mut index))
            .transpose()?;
        let fingerprints = fingerprints::Fingerprints::load(env.state_dir.as_deref());
        let stat = match &mut found {
            Some(index::Found::Usable(l)) => std::mem::take(&mut l.stat),
            _ => statcache::Table::default(),
        };
        let statcache = statcache::StatCache::new(stat, env.caches().is_some() && !repo_only);
        // Reading the repository alone: no base (and none saved, see
        // `save_index`), and a pending journal left for the next full open.
        let mut base = if repo_only {
            base::Base::default()
        } else {
            base::Base::load(local_dir.as_deref(), found.as_mut())?
        };
        base.resolve_pending(|p| manifest.get(p).cloned())?;
        if base.damaged() {
            notes.push(format!(
                "this machine's record of the last sync with {} was damaged and is rebuilt: \
                 entries that differ from the repository are conflicts until settled",
                root.display()
            ));
        }
        let unresolved = if repo_only {
            unresolved::Unresolved::default()
        } else {
            unresolved::Unresolved::load(local_dir.as_deref())
        };
        Ok(Garden {
            repo: Repo {
                machine: base::machine_id(env.state_dir.as_deref()),
                head_from_log: false,
                history_error: None,
                key: Some(key),
                confine: home::Confine::new(&env.home, own::OwnDirs::of(root, &env))
                    .following(add::followed_links(local_dir.as_deref(), &env))
                    .journaled(
                        env.state_dir
                            .as_ref()
                            .map(|d| d.join("sgard").join(home::STAGING_DIR)),
                    ),
                local_dir,
                dry_run: false,
                root: root.to_path_buf(),
                env,
                manifest,
                head_hash,
                history: merged(&history, local.as_ref()),
                repo_history: history,
                local,
                home_lock: None,
                store: match env_stall {
                    Some(n) => store.with_chunk_store(ChunkStore::open(root).stalling_after(n)),
                    None => store,
                },
                labels,
            },
            work: Work {
                notes: first
                    .into_iter()
                    .chain(notes.into_iter().map(why::Why::from))
                    .collect(),
                base,
                unresolved,
                fingerprints,
                statcache,
                index,
                ..Work::default()
            },
            process_ends: false,
            _lock: lock,
        })
    }

    /// This run's work over the repository as read (see [`Tx`]).
    pub(crate) fn tx(&mut self) -> Tx<'_> {
        Tx {
            repo: &self.repo,
            work: &mut self.work,
        }
    }

    /// Things worth telling the user that are not errors (tags taken over
    /// from `<repo>/tags`, a damaged base being rebuilt); each once.
    pub fn take_notes(&mut self) -> Vec<why::Why> {
        self.tx().take_notes()
    }

    /// This machine's folder of state for this repository (`None`: no
    /// machine-local state).
    pub fn local_state_dir(&self) -> Option<&Path> {
        self.repo.local_dir.as_deref()
    }

    /// The repository folder.
    pub fn root(&self) -> &Path {
        &self.repo.root
    }

    /// The manifest as loaded (and as changed by this Garden).
    pub fn manifest(&self) -> &Manifest {
        &self.repo.manifest
    }

    /// The blob store.
    pub fn store(&self) -> &Store {
        &self.repo.store
    }

    /// How the home's file system compares names (asked of it; the test
    /// hook decides in tests).
    pub fn folding(&self) -> folding::Folding {
        self.repo
            .env
            .folding
            .unwrap_or_else(|| folding::Folding::probe(&self.repo.env.home))
    }

    /// The environment this Garden works in.
    pub fn env(&self) -> &Env {
        &self.repo.env
    }

    /// This machine's targeting labels.
    pub fn labels(&self) -> &[String] {
        &self.repo.labels
    }

    /// Opens the repository at `root` to change the home folder only (see
    /// [`Access::Home`]).
    fn open_for_home(root: &Path, env: Env, on_wait: &dyn Fn(&str)) -> Result<Garden> {
        // A shared lock: questions may wait on the user for minutes, and
        // other machines' readers must not wait with them. An interrupted
        // checkpoint is finished first, under a brief exclusive lock, where
        // the repository can be written.
        let mut g = Garden::open_with(root, env.clone(), LockMode::Shared, on_wait, false, false)?;
        if g.repo.head_from_log && !g.repository_is_read_only() {
            drop(g);
            drop(Garden::open_with(
                root,
                env.clone(),
                LockMode::Exclusive,
                on_wait,
                false,
                false,
            )?);
            g = Garden::open_with(root, env, LockMode::Shared, on_wait, false, false)?;
        }
        let Some(dir) = g.repo.local.as_ref().map(|l| l.dir.clone()) else {
            return Err(Error::Invalid(
                "no folder for machine-local state (set XDG_STATE_HOME or HOME)".into(),
            ));
        };
        durable::create_private_dir_all(&dir)?;
        let path = dir.join(lock::LOCK_FILE);
        let f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io("opening lock file", &path, e))?;
        if f.try_lock().is_err() {
            on_wait(&format!(
                "waiting for the lock on {} (another sgard is changing this home)",
                path.display()
            ));
            f.lock().map_err(|e| Error::io("locking", &path, e))?;
        }
        g.repo.home_lock = Some(f);
        g.sweep_home();
        Ok(g)
    }

    /// Removes what killed sgard processes left in the home (temp files
    /// beside tracked paths). Returns how many.
    /// The folders swept are those of the entries and those the journals
    /// of dead runs name (see `home::Journal`); the journals are then removed.
    pub(crate) fn sweep_home(&self) -> usize {
        let dead = self.repo.confine.dead_runs();
        let dirs: std::collections::BTreeSet<PathBuf> = self
            .repo
            .manifest
            .files
            .iter()
            .filter_map(|e| {
                self.repo
                    .env
                    .expand(&e.path)
                    .parent()
                    .map(Path::to_path_buf)
            })
            .chain(dead.folders)
            .collect();
        let n = self.repo.confine.sweep(dirs);
        for j in dead.journals {
            let _ = fs::remove_file(j);
        }
        n
    }

    /// Removes the temp files of interrupted writes in the repository's
    /// root and this machine's state for it (`.sgard-tmp-*`), which only an
    /// exclusive holder may do. Returns how many.
    pub(crate) fn sweep_repo_temps(&self) -> usize {
        let mut n = 0;
        // The repository's are an exclusive holder's alone; this machine's
        // state is also written by readers (the base), so only old ones.
        let dirs = [
            (Some(self.repo.root.clone()), std::time::Duration::ZERO),
            (
                self.repo.local_dir.clone(),
                std::time::Duration::from_secs(60),
            ),
        ];
        for (dir, min_age) in dirs {
            let Some(dir) = dir else { continue };
            let Ok(rd) = fs::read_dir(&dir) else { continue };
            for e in rd.flatten() {
                let is_tmp = e
                    .file_name()
                    .to_str()
                    .is_some_and(|s| s.starts_with(".sgard-tmp-"));
                let old = e
                    .metadata()
                    .ok()
                    .filter(|m| m.is_file())
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age >= min_age);
                if is_tmp && old && fs::remove_file(e.path()).is_ok() {
                    n += 1;
                }
            }
        }
        n
    }

    /// Whether the repository folder can be written by this process.
    pub fn repository_is_read_only(&self) -> bool {
        platform::may_write(&self.repo.root, true).is_err()
    }

    /// Checks this Garden may change the home folder (and record it).
    fn require_home_writer(&self, what: &str) -> Result<()> {
        if self.repo.home_lock.is_some() {
            return Ok(());
        }
        self.require_exclusive(what)
    }

    fn require_exclusive(&self, what: &str) -> Result<()> {
        // A dry run holds a shared lock and writes nothing (see
        // `Options::dry_run`): its saves are no-ops.
        if self._lock.mode() != LockMode::Exclusive && !self.repo.dry_run {
            return Err(Error::Invalid(format!(
                "internal error: {what} without the exclusive lock"
            )));
        }
        Ok(())
    }

    /// Saves the manifest, and with it what this command recorded in the
    /// base (pending first, so a crash between the two is resolved).
    pub(crate) fn save(&mut self) -> Result<()> {
        if self.repo.dry_run {
            return Ok(());
        }
        self.require_exclusive("manifest save")?;
        self.refresh_data();
        self.work.base.prepare()?;
        self.write_manifest()?;
        self.repo.env.crash_point("manifest-before-base");
        self.tx().flush_base()
    }

    /// Ends this run's work with the repository: saves this machine's
    /// index (the base, the stat cache, the manifest section) when it
    /// changed, the fingerprints of encrypted contents, and which state
    /// belongs to this repository's folder. Its error is the caller's to
    /// report, as jj's `tx.finish`: nothing is saved when a Garden is
    /// dropped. (What an operation relies on — the agreements of a restore,
    /// a checkpoint, a merge — it made durable itself; a Garden dropped
    /// without `finish`, as on an error, costs the next command a full
    /// read of the files, never a wrong answer.)
    ///
    /// # Errors
    /// [`Error::Io`] naming the index file when it cannot be written.
    pub fn finish(mut self) -> Result<()> {
        if self.repo.dry_run {
            return Ok(());
        }
        self.work.fingerprints.flush();
        let saved = self.tx().save_index();
        if saved.is_ok() {
            self.keep_watch_token();
        }
        // What this command added to the log, for `base::key_for`.
        if let (Some(state), Some(key)) =
            (self.repo.env.state_dir.as_deref(), self.repo.key.as_deref())
        {
            base::remember(
                &self.repo.root,
                state,
                key,
                self.repo.repo_history.records.last().map(|r| r.id),
            );
        }
        if saved.is_ok() {
            self.write_status_cache();
        }
        saved
    }

    /// Writes `manifest.yaml` from the current manifest, its retired data
    /// keys first into `retired-keys` (where a Go write cannot drop them);
    /// the head hash follows. The text is rendered straight into the temp
    /// file and hashed on the way, never held whole (a `lock` on a
    /// 100,000-entry manifest held a 20 MB string for it).
    pub(crate) fn write_manifest(&mut self) -> Result<()> {
        self.tx().keep_retired_keys();
        let mut hash = None;
        durable::write_atomic_with(&self.repo.manifest_path(), 0o600, |f| {
            let mut w = HashingWriter {
                file: f,
                hasher: sgard_store::Hasher::new(),
            };
            self.repo.manifest.write_yaml(&mut w)?;
            hash = Some(w.hasher.finish());
            Ok(())
        })?;
        let hash =
            hash.ok_or_else(|| Error::Invalid("internal error: manifest not hashed".into()))?;
        self.manifest_written(hash);
        Ok(())
    }

    /// Installs `staged`, the rendering of `self.repo.manifest` whose hash
    /// is `hash` written beside manifest.yaml, as manifest.yaml (as
    /// [`Garden::write_manifest`], which renders it).
    pub(crate) fn install_manifest(
        &mut self,
        staged: sgard_store::durable::Staged,
        hash: sgard_store::Hash,
    ) -> Result<()> {
        self.tx().keep_retired_keys();
        staged.install()?;
        self.manifest_written(hash);
        Ok(())
    }

    /// The head hash and the index's manifest section follow a manifest
    /// file just written (every caller writes the rendering of
    /// `self.repo.manifest`).
    fn manifest_written(&mut self, hash: sgard_store::Hash) {
        self.repo.head_hash = hash;
        self.tx().index_manifest_written(&hash);
    }

    /// The repository's chunking setting (see `sgard_store::chunks::Setting`).
    ///
    /// # Errors
    /// [`Error::Store`] when `<repo>/chunking` is malformed or unreadable.
    pub fn chunking(&mut self) -> Result<sgard_store::chunks::Setting> {
        self.tx().chunking()
    }

    /// Changes the repository's chunking setting (new content only: what is
    /// stored stays as it is).
    ///
    /// # Errors
    /// [`Error::Io`]/[`Error::Store`] when it cannot be written.
    pub fn set_chunking(&mut self, s: sgard_store::chunks::Setting) -> Result<()> {
        s.save(&self.repo.root)?;
        self.work.chunking = Some(s);
        Ok(())
    }

    /// The entry tracking the path `arg` (resolved like any argument).
    ///
    /// # Errors
    /// [`Error::NotTracked`]; a path outside what the manifest can name.
    pub fn entry_at(&self, arg: &OsStr) -> Result<&sgard_manifest::Entry> {
        self.repo.entry_at(arg)
    }
}

impl Work {
    /// Every blob size this run noted, sorted by hash, each once (the
    /// last noted, as it was when this was a map).
    pub(crate) fn known_sizes(&self) -> Vec<(sgard_store::Hash, u64)> {
        let mut v: Vec<_> = self.writes.sizes.iter().rev().copied().collect();
        // Stable: of one hash's sizes the last noted comes first, and stays.
        v.sort_by_key(|a| a.0);
        v.dedup_by(|a, b| a.0 == b.0);
        v
    }

    /// Whether blob writes are being batched.
    pub(crate) fn batch_open(&self) -> bool {
        self.writes.batch.is_some()
    }

    /// Tells the user `text` (see [`Options::note_sink`] and
    /// [`Garden::take_notes`]); a repeat of one already waiting is dropped.
    pub(crate) fn note(&mut self, text: impl Into<why::Why>) {
        let text = text.into();
        if let Some(sink) = &self.note_sink {
            (sink.0)(&text);
            return;
        }
        let notes = &mut self.notes;
        if !notes.contains(&text) {
            notes.push(text);
        }
    }

    /// Notes the size of blob `hash` (see [`Writes`]).
    pub(crate) fn known_size(&mut self, hash: sgard_store::Hash, size: u64) {
        self.writes.sizes.push((hash, size));
    }

    /// Starts flushing the open batch's bytes ahead of its commit (see
    /// `Batch::start_flush`): call once nothing more is spooled for it.
    pub(crate) fn start_batch_flush(&mut self) {
        if let Some(b) = self.writes.batch.as_mut() {
            b.start_flush();
        }
    }

    /// Starts batching blob writes into `store` (until
    /// [`Tx::commit_batch`]).
    pub(crate) fn begin_batch_in(&mut self, store: &Store) {
        self.writes.batch = Some(store.batch());
    }
}

impl Repo {
    fn manifest_path(&self) -> PathBuf {
        self.root.join(MANIFEST_FILE)
    }

    /// A consistent copy of the SQLite database `abs` (see [`sqlite`]), in
    /// this machine's cache folder (else the system's temp folder): never
    /// in the repository, which a reader must not write.
    pub(crate) fn capture_sqlite(&self, abs: &Path) -> Result<tempfile::NamedTempFile> {
        let dir = match self.env.caches() {
            Some(c) => c.join("sgard").join("capture"),
            None => std::env::temp_dir(),
        };
        sqlite::capture(
            abs,
            &dir,
            self.env.sqlite_timeout.unwrap_or(sqlite::DEFAULT_TIMEOUT),
        )
    }

    pub(crate) fn entry_at(&self, arg: &OsStr) -> Result<&sgard_manifest::Entry> {
        let path = self.env.to_tilde(&self.env.resolve(arg))?;
        self.manifest.get(&path).ok_or(Error::NotTracked(path))
    }

    fn applies(&self, e: &sgard_manifest::Entry) -> Result<bool> {
        identity::applies(e, &self.labels)
    }

    /// The tilde forms of command-line arguments.
    fn tilde_args(&self, args: &[OsString]) -> Result<Vec<String>> {
        args.iter()
            .map(|a| self.env.to_tilde(&self.env.resolve(a)))
            .collect()
    }

    /// Indices of the entries selected by `args` (each arg selects the entry
    /// of that path and every entry under it); all entries when `args` is
    /// empty.
    ///
    /// # Errors
    /// [`Error::NoMatch`] when args were given and none matched.
    fn select(&self, args: &[OsString]) -> Result<Vec<usize>> {
        self.select_in(&self.manifest.files, args)
    }

    /// As [`Repo::select`], over any list of entries (a snapshot's).
    fn select_in(&self, files: &[sgard_manifest::Entry], args: &[OsString]) -> Result<Vec<usize>> {
        if args.is_empty() {
            return Ok((0..files.len()).collect());
        }
        let wanted = self.tilde_args(args)?;
        let picked: Vec<usize> = files
            .iter()
            .enumerate()
            .filter(|(_, e)| wanted.iter().any(|w| path_is_under(&e.path, w)))
            .map(|(i, _)| i)
            .collect();
        if picked.is_empty() {
            return Err(Error::NotTracked(wanted.join(", ")));
        }
        Ok(picked)
    }
}

impl Tx<'_> {
    /// Whether blob writes go to the repository's store (not this home's
    /// local log: only the repository keeps chunks).
    fn writes_to_repo(&self) -> bool {
        self.work
            .writes
            .batch
            .as_ref()
            .is_none_or(|b| b.root() == self.repo.store.root())
    }

    pub(crate) fn take_notes(&mut self) -> Vec<why::Why> {
        std::mem::take(&mut self.work.notes)
    }

    /// `manifest.yaml` now holds `self.repo.manifest` (just written): the index's
    /// manifest section follows it. Its fingerprint is taken after the
    /// write, and is not yet settled, so the next command hashes the file
    /// once before trusting it.
    fn index_manifest_written(&mut self, hash: &sgard_store::Hash) {
        let idx = &mut self.work.index;
        idx.dirty = true;
        idx.section = None;
        if self.repo.local_dir.is_none() {
            return;
        }
        let observed = index::now_ns();
        if let Ok(md) = fs::symlink_metadata(self.repo.manifest_path()) {
            idx.section = Some(index::ManifestSection::of_manifest(
                index::Fingerprint::of(&md),
                observed,
                hash,
                &self.repo.manifest,
            ));
        }
    }

    /// A log was just written to `path` (SHA-256 `hash`): the index's
    /// section for it (`local`: this home's own log) follows.
    pub(crate) fn index_history_written(
        &mut self,
        path: &Path,
        h: &History,
        hash: &sgard_store::Hash,
        local: bool,
    ) {
        if self.repo.local_dir.is_none() {
            return;
        }
        let observed = index::now_ns();
        let section = fs::symlink_metadata(path)
            .ok()
            .map(|md| index::history_section(index::Fingerprint::of(&md), observed, hash, h));
        let idx = &mut self.work.index;
        idx.dirty = true;
        if local {
            idx.local = section;
        } else {
            idx.history = section;
        }
    }

    /// Writes this machine's index if anything in it changed: the base,
    /// the stat cache, the manifest section (durably; see [`index`]).
    ///
    /// # Errors
    /// [`Error::Io`] naming the file.
    pub(crate) fn save_index(&mut self) -> Result<()> {
        if self.repo.dry_run {
            return Ok(());
        }
        let base = &mut self.work.base;
        let Some(file) = base.index().map(Path::to_path_buf) else {
            return Ok(());
        };
        let idx = &mut self.work.index;
        let stat = &mut self.work.statcache;
        let base_changed = base.dirty();
        if !(idx.dirty || base_changed || stat.dirty()) {
            return Ok(());
        }
        self.repo.env.crash_point("index-save");
        // One writer at a time per index; a command that did not change
        // the base keeps the one on disk (another command may have saved
        // agreements since this one read it).
        let _turn = index::WriteLock::take(&file)?;
        let on_disk;
        // Unchanged on disk since this command read it (the common case):
        // that base is this one, no need to read it again.
        let keep_ours = base_changed || base.is_on_disk();
        let base_to_write = if keep_ours {
            base.to_write()
        } else {
            on_disk = match index::read_base(&file)? {
                index::Found::Usable(l) => Some(l.base),
                _ => None,
            };
            match &on_disk {
                Some(b) => b.as_ref(),
                None => base.to_write(),
            }
        };
        // The manifest's section only while it still describes the file.
        let manifest = &self.repo.manifest;
        index::write(
            &file,
            idx.section
                .as_ref()
                .filter(|s| s.holds(manifest))
                .map(|s| (s, manifest)),
            [idx.history.as_deref(), idx.local.as_deref()],
            base_to_write,
            &stat.entries(),
        )?;
        idx.dirty = false;
        if keep_ours {
            base.written();
        } else {
            // It holds another command's base now, not this one.
            base.not_on_disk();
        }
        if base_changed {
            base.saved();
        }
        stat.saved();
        Ok(())
    }

    /// Copies the retired data keys into `retired-keys`, where a Go write of
    /// the manifest cannot drop them.
    fn keep_retired_keys(&mut self) {
        // The manifest still holds the keys; the copy is a safeguard against
        // Go writes, not a reason to refuse this one.
        if let Some(enc) = &self.repo.manifest.encryption
            && !enc.retired_deks.is_empty()
            && let Err(e) = keyring::add(&self.repo.root, &enc.retired_deks)
        {
            self.work.note(format!(
                "{e}; the retired data keys are kept only in the manifest"
            ));
        }
    }

    /// Stores a blob: into the open batch if there is one, else durably now.
    pub(crate) fn put(
        &mut self,
        r: &mut dyn std::io::Read,
    ) -> sgard_store::Result<sgard_store::Written> {
        let writes = &mut self.work.writes;
        let w = match writes.batch.as_mut() {
            Some(b) => b.write(r),
            None => self.repo.store.write(r),
        }?;
        writes.sizes.push((w.hash, w.size));
        writes.commit_if_full()?;
        Ok(w)
    }

    /// Starts batching blob writes into the repository's store.
    pub(crate) fn begin_batch(&mut self) {
        self.work.begin_batch_in(&self.repo.store);
    }

    pub(crate) fn chunking(&mut self) -> Result<sgard_store::chunks::Setting> {
        if let Some(s) = self.work.chunking {
            return Ok(s);
        }
        let s = sgard_store::chunks::Setting::load(&self.repo.root)?;
        self.work.chunking = Some(s);
        Ok(s)
    }

    /// The size past which a file is stored in chunks (`None`: never), for
    /// the copying done ahead of time, which stores whole blobs only.
    pub(crate) fn chunk_threshold(&mut self) -> Option<u64> {
        match self.chunking() {
            Ok(sgard_store::chunks::Setting::On { threshold, .. }) => Some(threshold),
            Ok(sgard_store::chunks::Setting::Off) => None,
            // Unreadable: the in-order pass reports it.
            Err(_) => Some(0),
        }
    }

    /// Copies the regular files `paths` into the store on all cores, for
    /// [`Tx::store_file`] to adopt: one copy per path, in order. Only
    /// while a batch is open (else none). A file that fails here gets none:
    /// the in-order pass that follows reads it again and reports its error
    /// where it belongs.
    pub(crate) fn prespool(
        &mut self,
        paths: &[&Path],
    ) -> Vec<Option<(sgard_store::Spooled, fs::Metadata)>> {
        if !self.work.batch_open() {
            return paths.iter().map(|_| None).collect();
        }
        let store = &self.repo.store;
        let big = self.chunk_threshold().unwrap_or(u64::MAX);
        par::map(paths, 64, |abs| {
            let (f, md) = fsx::open_regular(abs).ok()?;
            if md.len() >= big {
                return None;
            }
            // A database is captured, not copied: the in-order pass does it.
            let mut f = fsx::unless_sqlite(f)?;
            Some((store.spool_blob(&mut f).ok()?, md))
        })
        .into_iter()
        .map(Option::flatten)
        .collect()
    }

    /// Stores the regular file `abs`: the copy made `ahead` of time if
    /// there is one, else by reading it now. Returns what was written and
    /// the metadata of the file as opened.
    pub(crate) fn store_file(
        &mut self,
        abs: &Path,
        ahead: Option<(sgard_store::Spooled, fs::Metadata)>,
    ) -> Result<(sgard_store::Written, fs::Metadata)> {
        if let Some((spooled, md)) = ahead {
            return Ok((self.adopt(spooled)?, md));
        }
        let (mut f, md) = fsx::open_regular(abs)?;
        let reading = |e| match e {
            sgard_store::Error::Source(source) => Error::io("reading", abs, source),
            sgard_store::Error::TooManyChunks { chunks } => Error::TooManyChunks {
                path: abs.to_path_buf(),
                chunks,
            },
            other => Error::Store(other),
        };
        let mut head = [0u8; 16];
        let captured = if fsx::read_head(&mut f, &mut head)
            .map_err(|e| Error::io("reading", abs, e))?
            && crate::sqlite::is_header(&head)
        {
            let tmp = self.repo.capture_sqlite(abs)?;
            f = tmp
                .reopen()
                .map_err(|e| Error::io("opening", tmp.path(), e))?;
            Some(tmp)
        } else {
            None
        };
        let size = match &captured {
            Some(t) => t
                .as_file()
                .metadata()
                .map_err(|e| Error::io("inspecting", t.path(), e))?
                .len(),
            None => md.len(),
        };
        if let Some(params) = self.chunking()?.params_for(size)
            && let Some(cs) = self.repo.store.chunked()
            && self.writes_to_repo()
        {
            let source = sgard_store::chunks::Source {
                key: abs.to_string_lossy().into_owned(),
                size,
                mtime: platform::mtime(&md),
            };
            let c = cs.write(&mut f, params, Some(&source)).map_err(reading)?;
            let tilde = self.repo.env.shown(abs);
            let setting = self.repo.root.join(sgard_store::chunks::SETTING_FILE);
            if !durable::lstat_exists(&setting) {
                // The first chunked file of a repository that never chose
                // (made by the Go sgard, or by an older sgard): say what it
                // means once, and record the choice. A repository `init`
                // made has chosen; doctor says what chunking means there.
                let chosen = self.chunking()?;
                chosen.save(&self.repo.root)?;
                if let sgard_store::chunks::Setting::On { threshold, .. } = chosen {
                    self.work.note(why::Why::new(
                        format!(
                            "{tilde} is stored in chunks, as every file of {threshold} bytes \
                             and more now is: the Go sgard cannot restore those"
                        ),
                        why::Remedy::ChunkingOff,
                    ));
                }
            }
            match &c.resume {
                sgard_store::chunks::Resume::Fresh => {}
                sgard_store::chunks::Resume::Resumed { chunks, bytes } => self.work.note(format!(
                    "{tilde}: resumed an interrupted store ({chunks} of {} chunks, {} bytes, were stored already)",
                    c.chunks, bytes
                )),
                sgard_store::chunks::Resume::Refused(why) => self.work.note(format!(
                    "{tilde}: not resuming an interrupted store of it: {why}; stored afresh"
                )),
            }
            let w = sgard_store::Written {
                hash: c.hash,
                size: c.size,
                new: c.new_chunks > 0 || c.new_list,
            };
            self.work.writes.sizes.push((w.hash, w.size));
            return Ok((w, md));
        }
        let w = self.put(&mut f).map_err(reading)?;
        Ok((w, md))
    }

    /// Names a prespooled blob through the open batch.
    fn adopt(&mut self, spooled: sgard_store::Spooled) -> Result<sgard_store::Written> {
        let writes = &mut self.work.writes;
        match writes.batch.as_mut() {
            Some(b) => {
                let w = b.adopt(spooled);
                writes.sizes.push((w.hash, w.size));
                writes.commit_if_full()?;
                Ok(w)
            }
            None => Err(Error::Invalid(
                "internal error: a prespooled blob without a batch".into(),
            )),
        }
    }

    /// As [`Tx::commit_batch`], with a blob of the repository's store whose
    /// bytes are still being written when the commit starts: `late` gives
    /// it once the batch's blobs are named (it is not asked when naming
    /// them fails), and the batch's last flush makes it durable too (see
    /// `Batch::commit_with_late`). With no batch of that store open,
    /// `late` is asked first and its blob stored on its own after the
    /// batch; after an earlier round of the batch failed, it is asked and
    /// that failure returned. Returns what became of the late blob.
    pub(crate) fn commit_batch_with_late(
        &mut self,
        late: impl FnOnce() -> Option<sgard_store::Spooled>,
    ) -> Result<Option<sgard_store::Written>> {
        let writes = &mut self.work.writes;
        let refused = writes.refuse_after_failure();
        writes.failed = None;
        let b = writes.batch.take();
        let store = &self.repo.store;
        match b {
            Some(b) if refused.is_ok() && b.root() == store.root() => Ok(b.commit_with_late(late)?),
            b => {
                let late = late();
                refused?;
                if let Some(b) = b {
                    b.commit()?;
                }
                match late {
                    Some(spooled) => Ok(store.batch().commit_with_late(|| Some(spooled))?),
                    None => Ok(None),
                }
            }
        }
    }

    /// Makes every batched blob durable under its name. Call before anything
    /// that names them (a manifest, a history record) is written.
    pub(crate) fn commit_batch(&mut self) -> Result<()> {
        let writes = &mut self.work.writes;
        let refused = writes.refuse_after_failure();
        writes.failed = None;
        let b = writes.batch.take();
        refused?;
        if let Some(b) = b {
            b.commit()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod writes_tests {
    use super::Writes;
    use sgard_store::{Hash, Store};

    #[test]
    fn a_failed_round_fails_every_later_write_and_the_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path()).unwrap();
        let mut w = Writes {
            batch: Some(store.batch()),
            ..Writes::default()
        };
        let put = |w: &mut Writes, bytes: &[u8]| {
            let b = w.batch.as_mut().unwrap();
            b.write(&mut &bytes[..]).unwrap();
            w.commit_if_full()
        };
        // The first round is named.
        for i in 0..3u8 {
            put(&mut w, &[i]).unwrap();
        }
        assert!(store.contains(&Hash::of(&[0u8])).unwrap());
        // The second cannot be: a file stands where a blob's folder goes.
        let blocked = Hash::of(b"blocked");
        let fanout = store.path_of(&blocked);
        let fanout = fanout.parent().unwrap().parent().unwrap();
        put(&mut w, b"blocked").unwrap();
        put(&mut w, b"more").unwrap();
        std::fs::remove_dir_all(fanout).ok();
        std::fs::write(fanout, b"not a folder").unwrap();
        assert!(put(&mut w, b"the round").is_err());
        // Whatever is stored next fails, and so does the commit.
        assert!(put(&mut w, b"after").is_err());
        assert!(w.refuse_after_failure().is_err());
        assert!(!matches!(store.contains(&blocked), Ok(true)));
    }
}
