//! Read-only probes of a repository and of this machine's state for it,
//! for `sgard doctor`.
//!
//! Nothing here writes: no lock file is created, no index or base is
//! rewritten, no temp file is removed, no state folder is moved (unlike
//! [`crate::Garden::open`], which finishes interrupted work and tidies up as
//! it opens). The probes return facts; the CLI turns them into advice.

use std::collections::BTreeMap;
use std::fs::{self, File, TryLockError};
use std::path::{Path, PathBuf};

use sgard_manifest::Manifest;
use sgard_manifest::history::{HISTORY_FILE, History};
use sgard_store::{Hash, Presence, Store, durable};

use crate::lock::LOCK_FILE;
use crate::{Env, base, index};

/// A process holding the repository lock, as `/proc/locks` tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// Its process id.
    pub pid: u32,
    /// Whether it holds the lock exclusively (a writer).
    pub exclusive: bool,
    /// Its command line (`/proc/<pid>/cmdline`), if it can be read.
    pub command: Option<String>,
    /// Whether it is stopped (Ctrl-Z, SIGSTOP): it holds the lock until it
    /// is continued.
    pub stopped: bool,
}

/// What the repository lock looks like.
#[derive(Debug)]
pub enum LockProbe {
    /// There is no lock file: nothing ever locked the repository (or it is
    /// read-only and was made elsewhere).
    NoFile,
    /// This process holds a shared lock now (kept while the value lives);
    /// `others` are the other processes holding it.
    Shared {
        /// The open lock file, locked.
        guard: File,
        /// Other holders (readers).
        others: Vec<Holder>,
    },
    /// Another process holds it exclusively. `holders` is empty when this
    /// machine cannot see who (a process on another NFS client, or no
    /// `/proc/locks`).
    Held {
        /// Who holds it.
        holders: Vec<Holder>,
    },
    /// The lock could not be tried.
    Failed(String),
}

/// Tries the repository's lock, shared and without waiting (see
/// [`LockProbe`]). Never creates the lock file.
pub fn probe_lock(root: &Path) -> LockProbe {
    let path = root.join(LOCK_FILE);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return LockProbe::NoFile,
        Err(e) => return LockProbe::Failed(format!("opening {}: {e}", path.display())),
    };
    let holders = lock_holders(&path);
    match file.try_lock_shared() {
        Ok(()) => {
            let me = std::process::id();
            LockProbe::Shared {
                guard: file,
                others: holders.into_iter().filter(|h| h.pid != me).collect(),
            }
        }
        Err(TryLockError::WouldBlock) => LockProbe::Held {
            holders: lock_holders(&path)
                .into_iter()
                .filter(|h| h.exclusive)
                .collect(),
        },
        Err(TryLockError::Error(e)) => {
            LockProbe::Failed(format!("locking {}: {e}", path.display()))
        }
    }
}

/// The processes holding an `flock` on the file at `path`, from
/// `/proc/locks` (matched by device and inode); empty where that cannot
/// be read (on Windows, always: no process can be named there).
#[cfg(not(unix))]
pub fn lock_holders(_path: &Path) -> Vec<Holder> {
    Vec::new()
}

/// The processes holding an `flock` on the file at `path`, from
/// `/proc/locks` (matched by device and inode); empty where that cannot
/// be read.
#[cfg(unix)]
pub fn lock_holders(path: &Path) -> Vec<Holder> {
    let Ok(md) = fs::metadata(path) else {
        return Vec::new();
    };
    let Ok(text) = fs::read_to_string("/proc/locks") else {
        return Vec::new();
    };
    let (dev, ino) = crate::platform::dev_ino(&md);
    parse_locks(&text, dev, ino)
        .into_iter()
        .map(|(pid, exclusive)| Holder {
            pid,
            exclusive,
            command: command_line(pid),
            stopped: is_stopped(pid),
        })
        .collect()
}

/// The (pid, exclusive) of each `FLOCK` held on (`dev`, `ino`) in the text
/// of `/proc/locks` (`1: FLOCK  ADVISORY  WRITE 1234 08:02:131074 0 EOF`);
/// waiters (`1: -> FLOCK …`) are not holders.
#[cfg(unix)]
#[allow(clippy::unnecessary_cast, clippy::cast_possible_truncation)]
fn parse_locks(text: &str, dev: u64, ino: u64) -> Vec<(u32, bool)> {
    // `dev_t` is an `i32` on macOS (which has no `/proc/locks` anyway).
    let dev = dev as rustix::fs::Dev;
    let want = format!(
        "{:02x}:{:02x}:{ino}",
        rustix::fs::major(dev),
        rustix::fs::minor(dev)
    );
    let mut out = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace().skip(1);
        let (Some(kind), Some(_), Some(mode), Some(pid), Some(id)) = (
            words.next(),
            words.next(),
            words.next(),
            words.next(),
            words.next(),
        ) else {
            continue;
        };
        if kind != "FLOCK" || !same_file(id, &want) {
            continue;
        }
        if let Ok(pid) = pid.parse::<u32>() {
            out.push((pid, mode == "WRITE"));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether a `/proc/locks` file id (`MAJ:MIN:INODE`, the numbers of the
/// device in hex) is `want`, whatever the padding of the hex numbers.
#[cfg(unix)]
fn same_file(id: &str, want: &str) -> bool {
    let norm = |s: &str| -> Option<(u64, u64, u64)> {
        let mut p = s.split(':');
        let maj = u64::from_str_radix(p.next()?, 16).ok()?;
        let min = u64::from_str_radix(p.next()?, 16).ok()?;
        let ino = p.next()?.parse().ok()?;
        Some((maj, min, ino))
    };
    norm(id).is_some_and(|a| norm(want) == Some(a))
}

/// A process's command line, its arguments joined by spaces.
#[cfg(unix)]
fn command_line(pid: u32) -> Option<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// Whether a process is stopped (state `T` or `t` in `/proc/<pid>/stat`).
#[cfg(unix)]
fn is_stopped(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = s.rsplit_once(')')?.1;
            after.split_whitespace().next().map(str::to_owned)
        })
        .is_some_and(|state| state == "T" || state == "t")
}

/// Content the head names that the repository does not hold whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    /// The content's hash.
    pub hash: Hash,
    /// The entries naming it (`data.yaml` for the template data).
    pub paths: Vec<String>,
    /// What is wrong.
    pub why: MissingWhy,
}

/// Why content is not all there (the store's [`sgard_store::Lack`]).
pub use sgard_store::Lack as MissingWhy;

/// What [`probe_content`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContentProbe {
    /// Distinct contents the head names.
    pub contents: usize,
    /// Of them, stored in chunks.
    pub chunked: usize,
    /// Distinct chunks those name.
    pub chunks: usize,
    /// What is not all there.
    pub missing: Vec<Missing>,
}

/// The name the template data goes by in [`Missing::paths`].
pub const DATA_NAME: &str = "data.yaml";

/// Whether every content the manifest `m` names is in the repository at
/// `root`: a blob, or a chunk list whose chunks are all stored. Existence
/// only (sizes and hashes are `verify`'s).
///
/// # Errors
/// [`crate::Error::Store`] when the store cannot be inspected at all.
pub fn probe_content(root: &Path, m: &Manifest) -> crate::Result<ContentProbe> {
    let store = Store::open(root);
    let mut named: BTreeMap<Hash, Vec<String>> = BTreeMap::new();
    for e in &m.files {
        if let Some(h) = e.hash {
            named.entry(h).or_default().push(e.path.clone());
        }
    }
    if let Some(h) = m.data {
        named.entry(h).or_default().push(DATA_NAME.to_owned());
    }
    let mut p = ContentProbe {
        contents: named.len(),
        ..ContentProbe::default()
    };
    let mut seen_chunks = std::collections::HashSet::new();
    let presence = Presence::open(&store);
    for (hash, paths) in named {
        let mut listed = false;
        let lack = presence.lack_with(&hash, &mut |list| {
            listed = true;
            seen_chunks.extend(list.chunks.iter().map(|(c, _)| *c));
        })?;
        if listed || matches!(lack, Some(MissingWhy::BadList(_))) {
            p.chunked += 1;
        }
        if let Some(why) = lack {
            p.missing.push(Missing { hash, paths, why });
        }
    }
    p.chunks = seen_chunks.len();
    Ok(p)
}

/// Snapshots of `history` whose documents the repository at `root` does
/// not hold (existence only).
///
/// # Errors
/// [`crate::Error::Store`] when the store cannot be inspected.
pub fn missing_snapshots(root: &Path, history: &History) -> crate::Result<Vec<Hash>> {
    let store = Store::open(root);
    let mut out = Vec::new();
    for r in &history.records {
        if !store.contains(&r.id)? && !out.contains(&r.id) {
            out.push(r.id);
        }
    }
    Ok(out)
}

/// The snapshot of a checkpoint recorded in `history` whose write of
/// `manifest.yaml` (hashing to `head`) was lost: the next command that
/// writes finishes it.
pub fn interrupted_checkpoint(history: &History, head: Hash) -> Option<Hash> {
    crate::history::interrupted_head(history, head)
}

/// Temp files of interrupted writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Debris {
    /// In the repository (`.sgard-tmp-*`, `blobs/tmp/`, the Go sgard's
    /// `.blob-*`, the same in the chunk store).
    pub repo: Vec<PathBuf>,
    /// Their bytes.
    pub repo_bytes: u64,
    /// In this machine's state for the repository.
    pub state: Vec<PathBuf>,
    /// In the home, beside tracked paths, of processes that are gone
    /// (`.sgard-restore-<pid>-*`, `.sgard-link-<pid>-*`).
    pub home: Vec<PathBuf>,
}

/// The temp files interrupted writes left (what `prune` and the next
/// writing command remove): in the repository at `root`, in `state_dir`
/// (this machine's state for it) and in the folders of the manifest's
/// entries.
pub fn probe_debris(
    root: &Path,
    state_dir: Option<&Path>,
    m: Option<&Manifest>,
    env: &Env,
) -> Debris {
    let mut d = Debris::default();
    let is_tmp = |n: &str| n.starts_with(durable::TMP_PREFIX);
    let add = |p: PathBuf, d: &mut Debris| {
        if let Ok(md) = fs::symlink_metadata(&p)
            && (md.is_file() || md.file_type().is_symlink())
        {
            d.repo_bytes += md.len();
            d.repo.push(p);
        }
    };
    for n in names(root) {
        if is_tmp(&n) {
            add(root.join(n), &mut d);
        }
    }
    let stores = [
        root.join("blobs"),
        root.join(sgard_store::chunks::CHUNKS_DIR),
        root.join(sgard_store::chunks::LISTS_DIR),
    ];
    let temp = |n: &str| n.starts_with(".blob-") || is_tmp(n);
    for s in &stores {
        for n in names(&s.join("tmp")) {
            add(s.join("tmp").join(n), &mut d);
        }
        for l1 in names(s) {
            let p1 = s.join(&l1);
            if !is_fanout(&l1) {
                if temp(&l1) {
                    add(p1, &mut d);
                }
                continue;
            }
            for l2 in names(&p1) {
                let p2 = p1.join(&l2);
                if !is_fanout(&l2) {
                    if temp(&l2) {
                        add(p2, &mut d);
                    }
                    continue;
                }
                for n in names(&p2) {
                    if temp(&n) {
                        add(p2.join(n), &mut d);
                    }
                }
            }
        }
    }
    // Journals of interrupted chunked stores are kept (a later store
    // resumes from them); only their interrupted rewrites are debris.
    let journals = root.join(sgard_store::chunks::CHUNKS_DIR).join("journal");
    for n in names(&journals) {
        if is_tmp(&n) {
            add(journals.join(n), &mut d);
        }
    }
    if let Some(dir) = state_dir {
        for n in names(dir) {
            if is_tmp(&n) {
                d.state.push(dir.join(n));
            }
        }
    }
    if let Some(m) = m {
        let dirs: std::collections::BTreeSet<PathBuf> = m
            .files
            .iter()
            .filter_map(|e| env.expand(&e.path).parent().map(Path::to_path_buf))
            .collect();
        for dir in dirs {
            for n in names(&dir) {
                if crate::home::is_debris(&n, &dir) {
                    d.home.push(dir.join(n));
                }
            }
        }
    }
    d
}

/// The UTF-8 names in a folder, sorted (none when it cannot be listed).
fn names(dir: &Path) -> Vec<String> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    v.sort();
    v
}

fn is_fanout(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// What this machine keeps for one repository (see ARCHITECTURE.md,
/// *Machine-local state*).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateProbe {
    /// The key the state is kept under (the repository's id, or
    /// `path-…`).
    pub key: String,
    /// `<state>/sgard/repos/<key>` (`None`: no state folder at all).
    pub dir: Option<PathBuf>,
    /// Why sgard could not write its state there (`None`: it can).
    pub unwritable: Option<String>,
    /// The index.
    pub index: IndexProbe,
    /// An older sgard's text base file (`<dir>/base`): `Some(records)`,
    /// `Some(None)` when damaged.
    pub legacy_base: Option<Option<usize>>,
    /// `base.pending` (an interrupted command's journal) is there.
    pub pending: bool,
    /// Paths a cut-off pull still has to write (`pull.unfinished`).
    pub unfinished: usize,
    /// This home's log of its restores: records, or why it cannot be read.
    pub local_log: Result<usize, Unread>,
}

/// Why a file of this machine's state was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unread {
    /// Its bytes do not parse: the next command sets it aside.
    Damaged(String),
    /// The system failed to read it (EIO, a permission): commands fail
    /// until it reads; nothing is set aside.
    Failed(String),
}

/// What the index file is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexProbe {
    /// There is none yet.
    Missing,
    /// It is there but cannot be used (damaged, foreign, from another
    /// version of sgard).
    Unusable,
    /// The system failed to read it (an I/O error, a permission):
    /// commands fail until it reads; it is not damage.
    Unreadable(String),
    /// Sound.
    Usable {
        /// Base records (`None`: no base kept yet).
        base: Option<usize>,
        /// Of the manifest's entries, how many have a base record.
        base_covers: usize,
        /// Stat cache records.
        stat: usize,
    },
}

/// This machine's state folder for the repository at `root`, found as
/// every command finds it (without creating a `repo-id`).
pub fn state_folder(root: &Path, env: &Env) -> Option<PathBuf> {
    base::state_dir(env.state_dir.as_deref(), &base::repo_key(root, false))
}

/// Looks at this machine's state for the repository at `root` (keyed as
/// every command keys it, without creating a `repo-id`): the index with its
/// base and stat cache, the journals beside it, this home's log.
pub fn probe_state(root: &Path, env: &Env, m: Option<&Manifest>) -> StateProbe {
    let key = base::repo_key(root, false);
    let dir = base::state_dir(env.state_dir.as_deref(), &key);
    let Some(d) = dir.clone() else {
        return StateProbe {
            key,
            dir: None,
            unwritable: Some("no state folder (HOME or XDG_STATE_HOME)".into()),
            index: IndexProbe::Missing,
            legacy_base: None,
            pending: false,
            unfinished: 0,
            local_log: Ok(0),
        };
    };
    let index = match index::read(&d.join(index::FILE)) {
        Err(e) => IndexProbe::Unreadable(crate::error_chain(&e)),
        Ok(index::Found::Missing) => IndexProbe::Missing,
        Ok(index::Found::Unusable) => IndexProbe::Unusable,
        Ok(index::Found::Usable(l)) => {
            let covers = match (&l.base, m) {
                (Some(b), Some(m)) => m.files.iter().filter(|e| b.get(&e.path).is_some()).count(),
                _ => 0,
            };
            IndexProbe::Usable {
                base: l.base.as_ref().map(|b| b.sorted().len()),
                base_covers: covers,
                stat: l.stat.sorted().len(),
            }
        }
    };
    let legacy_base = match durable::read_regular_to_string(&d.join("base")) {
        Ok(t) => Some(base::parse(&t).map(|b| b.sorted().len())),
        Err(_) => None,
    };
    let unfinished = durable::read_regular_to_string(&d.join("pull.unfinished"))
        .map(|t| t.lines().skip(1).filter(|l| !l.is_empty()).count())
        .unwrap_or(0);
    let local_log = History::load(&d.join("undo").join(HISTORY_FILE))
        .map(|h| h.records.len())
        .map_err(|e| {
            let why = crate::error_chain(&e);
            if crate::Error::from(e).is_io_failure() {
                Unread::Failed(why)
            } else {
                Unread::Damaged(why)
            }
        });
    StateProbe {
        key,
        unwritable: writable(&d).err(),
        dir,
        index,
        legacy_base,
        pending: durable::lstat_exists(&d.join("base.pending")),
        unfinished,
        local_log,
    }
}

/// Whether this process could create files in `dir`, or create `dir` (its
/// nearest existing ancestor is writable).
fn writable(dir: &Path) -> Result<(), String> {
    let mut p = dir;
    loop {
        if fs::symlink_metadata(p).is_ok() {
            return crate::platform::may_write(p, false)
                .map_err(|e| format!("{} is not writable ({e})", p.display()));
        }
        match p.parent() {
            Some(q) => p = q,
            None => return Err(format!("{} cannot be created", dir.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn locks_are_matched_by_device_and_inode() {
        let text = "1: FLOCK  ADVISORY  WRITE 4242 08:02:131074 0 EOF\n\
                    1: -> FLOCK  ADVISORY  WRITE 4343 08:02:131074 0 EOF\n\
                    2: FLOCK  ADVISORY  READ 77 08:02:131074 0 EOF\n\
                    3: POSIX  ADVISORY  WRITE 88 08:02:131074 0 EOF\n\
                    4: FLOCK  ADVISORY  WRITE 99 08:02:5 0 EOF\n\
                    garbage\n";
        #[allow(clippy::unnecessary_cast)]
        let dev = rustix::fs::makedev(8, 2) as u64;
        assert_eq!(
            parse_locks(text, dev, 131_074),
            vec![(77, false), (4242, true)]
        );
        assert!(parse_locks(text, dev, 7).is_empty());
        assert!(same_file("fd:00:12", "fd:0:12"));
        assert!(!same_file("fd:00:12", "fd:01:12"));
    }

    #[test]
    fn a_held_lock_names_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(probe_lock(dir.path()), LockProbe::NoFile));
        let l = crate::RepoLock::acquire(dir.path(), crate::LockMode::Shared, &|_| {}).unwrap();
        match probe_lock(dir.path()) {
            LockProbe::Shared { others, .. } => {
                // This process holds the other shared lock: not an other.
                assert!(others.is_empty(), "{others:?}");
            }
            other => panic!("{other:?}"),
        }
        drop(l);
        let f = File::open(dir.path().join(LOCK_FILE)).unwrap();
        f.lock().unwrap();
        // A lock of this very process blocks a second open file (flock
        // locks belong to the open file).
        match probe_lock(dir.path()) {
            LockProbe::Held { holders } => {
                // (Wine shows the Linux `/proc` to Windows programs.)
                if cfg!(unix) && Path::new("/proc/locks").exists() {
                    assert!(
                        holders
                            .iter()
                            .any(|h| h.pid == std::process::id() && h.exclusive),
                        "{holders:?}"
                    );
                }
            }
            other => panic!("{other:?}"),
        }
    }
}
