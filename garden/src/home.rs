//! Writing into the home folder, confined.
//!
//! A manifest comes from outside: a server, or a folder someone else can
//! write. Every path sgard creates, replaces, chmods or deletes for an entry
//! is therefore reached from its root (the home folder, or `/` for the
//! absolute paths a user tracks) one component at a time, with `openat` and
//! `O_NOFOLLOW | O_DIRECTORY` from the folder above: a symlink in a folder
//! above a tracked path is an error for that entry, never a way out, and
//! every operation happens relative to the folder's descriptor, so swapping
//! a folder for a symlink meanwhile leads nowhere. The one exception is a
//! symlink to a folder that this machine's `add --follow` walked (a
//! machine-local list, never from a manifest or a server), while it still
//! points where it did then: its entries are written through it. Nothing
//! of sgard's own (the repository, its state, cache and configuration
//! folders, another sgard repository: [`crate::own`]'s rule) is ever
//! written through an entry.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sgard_manifest::Mode;

use dir::{Dir, Kind};

use crate::own::{Own, OwnDirs, What};
use crate::{Error, Result};

mod dir;

/// Where entries may be written, and what they may never reach.
#[derive(Debug)]
pub(crate) struct Confine {
    home: PathBuf,
    /// sgard's own folders, which no entry may write into (by name, and by
    /// device and inode for those that exist).
    own: OwnDirs,
    /// Folders already opened this run (a bounded cache: restores of many
    /// files in few folders open each once).
    dirs: Mutex<HashMap<PathBuf, OpenDir>>,
    /// The prefix of every file this run stages (`.sgard-restore-PID-TAG-`),
    /// registered once per folder for Ctrl-C, and the next file's number.
    run: Arc<OsStr>,
    staged: AtomicU64,
    /// Symlinks to folders this machine's `add --follow` walked (their
    /// absolute paths and targets as read then): the only symlinks a write
    /// goes through, and only while they still point where they did.
    follow: HashMap<PathBuf, PathBuf>,
    /// This run's list of the folders it writes into (see [`Journal`]).
    journal: Option<Journal>,
    /// The folders [`Confine::stage`] made whose names are not durable
    /// yet: each with the folder it was made in and that one's device.
    /// [`Confine::commit`] makes them durable (its `syncfs` covers them,
    /// or each folder above is synced), not one `fsync` per folder made (a
    /// restore into an empty home makes one per folder of the tree, each a
    /// journal commit: a third of a T10k restore); so does any durable
    /// write at or below one before that (see [`Confine::parent`]).
    unsynced: Mutex<Vec<Made>>,
}

/// A folder made for a staged file (see `Confine::unsynced`).
#[derive(Debug)]
struct Made {
    folder: PathBuf,
    above: PathBuf,
    dev: Option<u64>,
}

/// Whether [`Confine::parent`] makes the missing folders on the way, and
/// how their names are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Create {
    /// None is made: a missing folder is an error.
    No,
    /// Each folder made is durable before the call returns (its parent is
    /// synced).
    Durably,
    /// For a staged file: made durable by [`Confine::commit`], before any
    /// staged file is renamed into place.
    ForCommit,
}

/// The folders a run writes into, one file per run in this machine's
/// `staging/` folder (named by the run's pid and tag), written before the
/// run stages anything in a folder. A run killed part way leaves it behind,
/// and the next sgard that writes into this home clears what the dead run
/// staged in each of those folders, wherever they are (also outside the
/// folders of today's entries), then removes the list. Kept only as long as
/// it can help: it is best effort (a run that cannot write it still sweeps
/// each folder it opens, and doctor names what is left).
#[derive(Debug)]
struct Journal {
    dir: PathBuf,
    path: PathBuf,
    file: Mutex<Option<File>>,
}

/// The journals of [`Journal`]'s folder, of runs that are gone: their
/// folders, and the journal files themselves.
#[derive(Debug, Default)]
pub struct DeadRuns {
    pub folders: Vec<PathBuf>,
    pub journals: Vec<PathBuf>,
}

/// The folder of this machine's state (beside `repos/`) holding the
/// journals of runs that write into the home.
pub(crate) const STAGING_DIR: &str = "staging";

/// The most a journal may hold before it is taken for damage and only
/// removed.
const JOURNAL_MAX: u64 = 16 << 20;

/// An opened folder and its path, shared by every path in it.
type OpenDir = (Arc<Dir>, Arc<Path>);

/// The folder holding a path, opened, and the path's last component.
#[derive(Debug)]
pub(crate) struct Parent {
    fd: Arc<Dir>,
    name: OsString,
    /// Shared by every path in the folder.
    dir: Arc<Path>,
}

/// A file written next to its destination under a temp name, waiting for
/// [`Confine::commit`]; removed if dropped before that.
#[derive(Debug)]
pub(crate) struct Staged {
    parent: Parent,
    /// The run's temp-name prefix and this file's number in the run: its
    /// temp name (see [`Staged::tmp`]), not held as a string of its own.
    run: Arc<OsStr>,
    n: u64,
    done: bool,
}

impl Staged {
    /// Where the file goes (for messages).
    fn dest(&self) -> PathBuf {
        self.parent.dir.join(&self.parent.name)
    }

    /// Its temp name: the run's prefix, its number, and the start of the
    /// destination's name (kept short enough for any file system).
    fn tmp(&self) -> OsString {
        let mut n = OsString::from(&*self.run);
        n.push(format!("{}-", self.n));
        let tail: String = self
            .parent
            .name
            .to_string_lossy()
            .chars()
            .take(40)
            .collect();
        n.push(tail);
        n
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.parent.fd.remove_file(&self.tmp());
        }
    }
}

const CACHE_MAX: usize = 512;

/// How many staged files [`Confine::commit`] renames on all cores at a
/// time (their results are held until the window is done).
const RENAME_WINDOW: usize = 1024;

/// Syncs the folder above each of `made` once, but those on a device that
/// `flushed` says a `syncfs` covered; returns each made folder with how
/// its folder's sync went. A folder is reached by its path here (a
/// descriptor kept per folder made could run out of them; a path swapped
/// for a symlink meanwhile syncs another folder, which is no write).
fn sync_made(
    mut made: Vec<Made>,
    flushed: impl Fn(u64) -> bool,
) -> Vec<(Made, std::io::Result<()>)> {
    made.sort_unstable_by(|a, b| a.above.cmp(&b.above));
    let mut out: Vec<(Made, std::io::Result<()>)> = Vec::with_capacity(made.len());
    for m in made {
        let result = match out.last() {
            Some((prev, r)) if prev.above == m.above => {
                r.as_ref().map(|_| ()).map_err(copy_io_error)
            }
            _ if m.dev.is_some_and(&flushed) => Ok(()),
            _ => Dir::open_root(&m.above).and_then(|fd| fd.sync()),
        };
        out.push((m, result));
    }
    out
}

/// The same error again (an `io::Error` is not `Clone`).
fn copy_io_error(e: &std::io::Error) -> std::io::Error {
    e.raw_os_error().map_or_else(
        || std::io::Error::new(e.kind(), e.to_string()),
        std::io::Error::from_raw_os_error,
    )
}

fn io_err(op: &'static str, path: &Path, e: std::io::Error) -> Error {
    Error::io(op, path, e)
}

/// What `name` in the folder `fd` is, without following a symlink: a
/// folder (`Some(true)`), something else, or nothing (`None`).
fn kind_at(fd: &Dir, name: &Path) -> Option<bool> {
    Some(fd.stat(name).ok()?.kind == Kind::Dir)
}

/// A temp-name prefix no other process or run uses: `KIND` (one of
/// [`crate::own`]'s prefixes) then `PID-TAG-` with a random tag.
fn run_prefix(kind: &str) -> OsString {
    let mut b = [0u8; 6];
    let _ = getrandom::fill(&mut b);
    let tag: String = b.iter().map(|x| format!("{x:02x}")).collect();
    OsString::from(format!("{kind}{}-{tag}-", std::process::id()))
}

/// A fresh temp name for `name` in its folder.
fn temp_name(kind: &str, name: &OsStr) -> OsString {
    let mut n = run_prefix(kind);
    // Keep the name short enough for any file system.
    let tail: String = name.to_string_lossy().chars().take(40).collect();
    n.push(tail);
    n
}

impl Confine {
    /// Confinement to `home`, never writing into `own` nor anything else
    /// of sgard's own.
    pub fn new(home: &Path, own: OwnDirs) -> Self {
        Confine {
            home: home.to_path_buf(),
            own,
            dirs: Mutex::new(HashMap::new()),
            run: Arc::from(run_prefix(crate::own::RESTORE_PREFIX).as_os_str()),
            staged: AtomicU64::new(0),
            follow: HashMap::new(),
            journal: None,
            unsynced: Mutex::new(Vec::new()),
        }
    }

    /// Keeps this run's journal of the folders it writes into in
    /// `staging` (this machine's `staging/` folder; `None`: none is kept).
    pub fn journaled(mut self, staging: Option<PathBuf>) -> Self {
        self.journal = staging.map(|dir| {
            // The run's prefix without its leading dot: `sgard-restore-PID-TAG-`.
            let name = self
                .run
                .to_string_lossy()
                .trim_matches(['.', '-'])
                .to_owned();
            Journal {
                path: dir.join(name),
                dir,
                file: Mutex::new(None),
            }
        });
        self
    }

    /// Notes in this run's journal that it writes into `dir` (best effort:
    /// see [`Journal`]).
    fn journal_folder(&self, dir: &Path) {
        use std::io::Write;
        let Some(j) = &self.journal else { return };
        let Ok(mut file) = j.file.lock() else { return };
        if file.is_none() {
            if sgard_store::durable::create_private_dir_all(&j.dir).is_err() {
                return;
            }
            *file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&j.path)
                .ok();
        }
        if let Some(f) = file.as_mut()
            && let Some(mut line) = dir::path_bytes(dir)
        {
            line.push(0);
            let _ = f.write_all(&line);
        }
    }

    /// What the journals of runs that are gone name (a journal too big to
    /// be one is only removed).
    pub fn dead_runs(&self) -> DeadRuns {
        let mut out = DeadRuns::default();
        let Some(j) = &self.journal else { return out };
        let Ok(rd) = std::fs::read_dir(&j.dir) else {
            return out;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(&crate::own::RESTORE_PREFIX[1..]))
                .and_then(|rest| rest.split('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if !pid_is_gone(pid, &e.path()) {
                continue;
            }
            let small = e
                .metadata()
                .is_ok_and(|m| m.is_file() && m.len() <= JOURNAL_MAX);
            if small && let Ok(bytes) = std::fs::read(e.path()) {
                out.folders.extend(
                    bytes
                        .split(|b| *b == 0)
                        .filter_map(dir::path_of_bytes)
                        .filter(|d| d.is_absolute()),
                );
            }
            out.journals.push(e.path());
        }
        out.folders.sort();
        out.folders.dedup();
        out
    }

    /// Lets writes go through these symlinks to folders (absolute path →
    /// target as read when `add --follow` walked them), while each still
    /// points there: the folders of followed entries. Any other symlink on
    /// the way stays an error.
    pub fn following(mut self, links: HashMap<PathBuf, PathBuf>) -> Self {
        self.follow = links;
        self
    }

    /// Opens the symlink `part` in `cur` (at `at`) as the folder it points
    /// to, if it is one this machine followed and it still points there.
    fn open_followed(&self, cur: &Dir, part: &OsStr, at: &Path) -> Option<Dir> {
        let want = self.follow.get(at)?;
        if cur.read_link(part).ok()? != *want {
            return None;
        }
        cur.open_dir_following(part).ok()
    }

    fn refuse(abs: &Path, reason: impl Into<String>) -> Error {
        Error::Unsupported {
            path: abs.display().to_string(),
            reason: reason.into(),
        }
    }

    /// The refusal of `abs`, which is or is inside `own`.
    fn refuse_own(abs: &Path, own: &Own) -> Error {
        let why = match own.what {
            What::Temp => "is named as sgard's temp files are".to_owned(),
            _ => format!("is inside {}, {}", own.dir.display(), own.describe()),
        };
        Self::refuse(abs, format!("{why}; refusing to write there"))
    }

    /// Refuses `abs` when the folder `fd` (at `at`) on its way is sgard's
    /// own.
    fn check(&self, abs: &Path, fd: &Dir, at: &Path) -> Result<()> {
        let st = fd.identity().map_err(|e| io_err("inspecting", at, e))?;
        let own = self.own.judge(at, st.dev_ino, || {
            crate::own::holds_repository(|name| kind_at(fd, Path::new(name)))
        });
        match own {
            Some(own) => Err(Self::refuse_own(abs, &own)),
            None => Ok(()),
        }
    }

    /// The folder holding `abs`, reached from its root without following a
    /// symlink, and its last component. Missing folders are made (mode
    /// 0755, less the umask) as `create` says.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a symlink or a non-folder on the way, or a
    /// path inside the repository or sgard's state; [`Error::Io`].
    pub fn parent(&self, abs: &Path, create: Create) -> Result<Parent> {
        if abs == self.home {
            return Err(Self::refuse(
                abs,
                "is the home folder itself; refusing to replace it",
            ));
        }
        if let Some(own) = self.own.judge(abs, None, || false) {
            return Err(Self::refuse_own(abs, &own));
        }
        let dir = abs
            .parent()
            .ok_or_else(|| Self::refuse(abs, "has no folder above it"))?;
        let name = abs
            .file_name()
            .ok_or_else(|| Self::refuse(abs, "has no name"))?
            .to_os_string();
        if create == Create::Durably {
            self.flush_made(abs)?;
        }
        let cached = self.dirs.lock().ok().and_then(|m| m.get(dir).cloned());
        let (fd, dir) = match cached {
            Some(c) => c,
            None => {
                let fd = Arc::new(self.open_dir(abs, dir, create)?);
                // The first write into a folder this run clears what dead
                // sgard processes left there, and notes the folder for the
                // next run, should this one be killed.
                sweep_folder(&fd, dir);
                self.journal_folder(dir);
                let dir: Arc<Path> = Arc::from(dir);
                if let Ok(mut m) = self.dirs.lock() {
                    if m.len() >= CACHE_MAX {
                        m.clear();
                    }
                    m.insert(dir.to_path_buf(), (fd.clone(), dir.clone()));
                }
                (fd, dir)
            }
        };
        // The last component itself must not be sgard's own either (an
        // entry for the repository folder).
        if let Ok(st) = fd.stat(Path::new(&name)) {
            let dir = st.kind == Kind::Dir;
            let own = self.own.judge(abs, st.dev_ino, || {
                dir && crate::own::holds_repository(|n| kind_at(&fd, &Path::new(&name).join(n)))
            });
            if let Some(own) = own {
                return Err(Self::refuse(
                    abs,
                    format!("is {}; refusing to change it", own.describe()),
                ));
            }
        }
        Ok(Parent { fd, name, dir })
    }

    fn open_dir(&self, abs: &Path, dir: &Path, create: Create) -> Result<Dir> {
        // A path outside the home is reached from its root (`/`, or a
        // drive's on Windows).
        let top: PathBuf;
        let (root, rel) = match dir.strip_prefix(&self.home) {
            Ok(rel) => (self.home.as_path(), rel),
            Err(_) => {
                top = dir
                    .components()
                    .take_while(|c| matches!(c, Component::Prefix(_) | Component::RootDir))
                    .collect();
                if top.as_os_str().is_empty() || !top.is_absolute() {
                    return Err(Self::refuse(abs, "is not an absolute path"));
                }
                (top.as_path(), dir.strip_prefix(&top).unwrap_or(dir))
            }
        };
        let mut cur = Dir::open_root(root).map_err(|e| io_err("opening", root, e))?;
        self.check(abs, &cur, root)?;
        let mut at = root.to_path_buf();
        for c in rel.components() {
            let Component::Normal(part) = c else {
                return Err(Self::refuse(abs, "is not a clean path"));
            };
            at.push(part);
            let next = match cur.open_dir_nofollow(part) {
                Ok(fd) => fd,
                Err(e) if create != Create::No && e.kind() == ErrorKind::NotFound => {
                    match cur.create_dir(part, 0o755) {
                        Ok(()) => {}
                        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(io_err("creating folder", &at, e)),
                    }
                    let above = at.parent().unwrap_or(root);
                    if create == Create::ForCommit && dir::FOLDERS_SYNC {
                        let dev = cur
                            .identity()
                            .ok()
                            .and_then(|st| st.dev_ino)
                            .map(|(d, _)| d);
                        self.unsynced
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(Made {
                                folder: at.clone(),
                                above: above.to_path_buf(),
                                dev,
                            });
                    } else {
                        cur.sync().map_err(|e| io_err("syncing", above, e))?;
                    }
                    cur.open_dir_nofollow(part)
                        .map_err(|e| self.why(abs, &cur, part, &at, e))?
                }
                Err(e) => match self.open_followed(&cur, part, &at) {
                    Some(fd) => fd,
                    None => return Err(self.why(abs, &cur, part, &at, e)),
                },
            };
            self.check(abs, &next, &at)?;
            cur = next;
        }
        Ok(cur)
    }

    /// Why a folder on the way could not be opened.
    fn why(&self, abs: &Path, cur: &Dir, part: &OsStr, at: &Path, e: std::io::Error) -> Error {
        match cur.stat(Path::new(part)) {
            Ok(st) if st.kind == Kind::Symlink => Self::refuse(
                abs,
                format!(
                    "{} above it is a symlink; sgard never writes through one (a tracked \
                         symlink cannot hold other tracked paths)",
                    at.display()
                ),
            ),
            Ok(_) if dir::not_a_folder(&e) => {
                Self::refuse(abs, format!("{} above it is not a folder", at.display()))
            }
            _ => io_err("opening folder", at, e),
        }
    }

    /// Writes a file beside `abs` under a temp name, filled by `fill`, with
    /// exactly `mode`: ready for [`Confine::commit`].
    ///
    /// # Errors
    /// As [`Confine::parent`]; whatever `fill` returns; [`Error::Io`].
    pub fn stage(
        &self,
        abs: &Path,
        mode: Mode,
        fill: impl FnOnce(&mut File) -> Result<()>,
    ) -> Result<Staged> {
        let parent = self.parent(abs, Create::ForCommit)?;
        let staged = Staged {
            parent,
            run: self.run.clone(),
            n: self.staged.fetch_add(1, Ordering::Relaxed),
            // Until it exists, there is nothing to remove.
            done: true,
        };
        // Registered before it exists, so an interrupt never misses it.
        sgard_store::cancel::register_prefix(&staged.parent.dir, &self.run);
        let mut f = staged
            .parent
            .fd
            .create_new(&staged.tmp())
            .map_err(|e| io_err("creating temp file in", &staged.parent.dir, e))?;
        let mut staged = staged;
        staged.done = false;
        fill(&mut f)?;
        dir::set_mode(&f, mode.bits()).map_err(|e| io_err("setting mode of", abs, e))?;
        if dir::FLUSH_WHEN_STAGED {
            f.sync_all().map_err(|e| io_err("syncing", abs, e))?;
        }
        Ok(staged)
    }

    /// Puts staged files in place durably at a constant number of flushes:
    /// one `syncfs` per file system (their bytes), the renames, one more
    /// `syncfs` (the names); where `syncfs` fails, each file and folder is
    /// fsynced instead. Returns the files that failed, by position, in
    /// order (a result per file was 100 bytes each at 100,000 files).
    pub fn commit(&self, mut staged: Vec<&mut Staged>) -> Vec<(usize, Error)> {
        let mut per_dev: HashMap<u64, Arc<Dir>> = HashMap::new();
        let mut seen: std::collections::HashSet<*const Dir> = std::collections::HashSet::new();
        for s in &staged {
            if !seen.insert(Arc::as_ptr(&s.parent.fd)) {
                continue;
            }
            if let Ok(Some((dev, _))) = s.parent.fd.identity().map(|st| st.dev_ino) {
                per_dev.entry(dev).or_insert_with(|| s.parent.fd.clone());
            }
        }
        drop(seen);
        let sync_all = || !per_dev.is_empty() && per_dev.values().all(|fd| fd.sync_file_system());
        let flushed = sync_all();
        let mut failed = Vec::new();
        // The folders staging made: the flush above made their names
        // durable where it covered their file system; any other folder
        // that gained one is synced now, before anything is renamed into
        // place (reached by its path: a descriptor kept per folder made
        // could run out of them). A file below one that cannot be synced
        // is not put in place.
        let made = std::mem::take(
            &mut *self
                .unsynced
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let mut lost: Vec<(Made, std::io::Error)> = Vec::new();
        for (m, result) in sync_made(made, |dev| flushed && per_dev.contains_key(&dev)) {
            if let Err(e) = result {
                lost.push((m, e));
            }
        }
        let mut dirs: Vec<(Arc<Dir>, Arc<Path>)> = Vec::new();
        // Per folder (by descriptor), its index in `dirs`; per file put in
        // place, the index of its folder (`u32::MAX`: it failed).
        let mut dir_of: HashMap<*const Dir, u32> = HashMap::new();
        let mut placed: Vec<u32> = Vec::with_capacity(staged.len());
        // The renames on all cores: each is one folder's business (the
        // files of a folder come in a row, so two threads seldom share
        // one), and their order does not matter. Each file's bytes are
        // durable before its rename (the flush above, or its own sync just
        // before it where that flush failed; on Windows, when staged), and
        // the names once every rename is done (the flush below, or each
        // folder's sync).
        // A window at a time: a result per file at once was 8 MB at
        // 100,000 files, and put a restore's peak over its budget.
        let lost = &lost;
        let rename = |_: usize, s: &mut &mut Staged| -> Result<()> {
            if let Some((m, e)) = lost
                .iter()
                .find(|(m, _)| s.parent.dir.starts_with(&m.folder))
            {
                return Err(io_err("syncing folder", &m.above, copy_io_error(e)));
            }
            if !flushed {
                s.parent
                    .fd
                    .sync_file(&s.tmp())
                    .map_err(|e| io_err("syncing", &s.dest(), e))?;
            }
            s.parent
                .fd
                .rename(&s.tmp(), &s.parent.name)
                .map_err(|e| io_err("renaming into place", &s.dest(), e))?;
            s.done = true;
            Ok(())
        };
        sgard_store::par::update_in_windows(&mut staged, RENAME_WINDOW, 256, rename, |k, s, r| {
            // A worker that stopped short (it panicked) left its files
            // either renamed (`done`) or not put in place.
            let r = match r {
                Some(r) => r,
                None if s.done => Ok(()),
                None => Err(io_err(
                    "renaming into place",
                    &s.dest(),
                    std::io::Error::other("not put in place: a worker thread failed"),
                )),
            };
            match r {
                Ok(()) => {
                    let next = u32::try_from(dirs.len()).unwrap_or(u32::MAX);
                    let d = *dir_of.entry(Arc::as_ptr(&s.parent.fd)).or_insert_with(|| {
                        dirs.push((s.parent.fd.clone(), s.parent.dir.clone()));
                        next
                    });
                    placed.push(d);
                }
                Err(e) => {
                    placed.push(u32::MAX);
                    failed.push((k, e));
                }
            }
            std::ops::ControlFlow::Continue(())
        });
        if !(flushed && sync_all()) {
            let mut unsynced = false;
            for (d, (fd, dir)) in dirs.iter().enumerate() {
                // A folder whose new names may not survive a crash: every
                // file put in place there failed (the base must not record
                // any of them as agreed).
                if let Err(e) = fd.sync() {
                    let d = u32::try_from(d).unwrap_or(u32::MAX);
                    for (k, _) in placed.iter().enumerate().filter(|(_, p)| **p == d) {
                        failed.push((k, io_err("syncing folder", dir, copy_io_error(&e))));
                    }
                    unsynced = true;
                }
            }
            if unsynced {
                failed.sort_by_key(|(k, _)| *k);
            }
        }
        failed
    }

    /// Makes durable the folders [`Confine::stage`] made at or above
    /// `abs`, before a durable write there (a link or a folder entry is
    /// recorded as it is made, before the staged files are committed).
    fn flush_made(&self, abs: &Path) -> Result<()> {
        let mine = {
            let mut v = self
                .unsynced
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if v.is_empty() {
                return Ok(());
            }
            let (mine, rest) = std::mem::take(&mut *v)
                .into_iter()
                .partition(|m: &Made| abs.starts_with(&m.folder));
            *v = rest;
            mine
        };
        for (m, result) in sync_made(mine, |_| false) {
            result.map_err(|e| io_err("syncing folder", &m.above, e))?;
        }
        Ok(())
    }

    /// Replaces `abs` durably with a file of exactly `mode` filled by `fill`.
    ///
    /// # Errors
    /// As [`Confine::stage`] and [`Confine::commit`].
    pub fn write_file(
        &self,
        abs: &Path,
        mode: Mode,
        fill: impl FnOnce(&mut File) -> Result<()>,
    ) -> Result<()> {
        let mut s = self.stage(abs, mode, fill)?;
        match self.commit(vec![&mut s]).pop() {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// Replaces `abs` durably with a symlink to `target`.
    ///
    /// # Errors
    /// As [`Confine::parent`]; [`Error::Io`].
    pub fn symlink(&self, target: &str, abs: &Path) -> Result<()> {
        let p = self.parent(abs, Create::Durably)?;
        let tmp = temp_name(crate::own::LINK_PREFIX, &p.name);
        p.fd.symlink(target, &tmp)
            .map_err(|e| io_err("creating symlink in", &p.dir, e))?;
        if let Err(e) = p.fd.rename(&tmp, &p.name) {
            let _ = p.fd.remove_file(&tmp);
            return Err(io_err("renaming into place", abs, e));
        }
        p.fd.sync().map_err(|e| io_err("syncing folder", &p.dir, e))
    }

    /// Replaces `abs` with a directory junction to the folder `target`
    /// (absolute): the stand-in for a folder symlink Windows refused (see
    /// [`crate::standin`]). Made under a temp name and renamed into
    /// place; a file or link in the way is removed first, as Windows never
    /// renames a folder over one.
    ///
    /// # Errors
    /// As [`Confine::parent`]; [`Error::Io`] (on Unix, always: it has no
    /// junctions).
    pub fn junction(&self, target: &Path, abs: &Path) -> Result<()> {
        let p = self.parent(abs, Create::Durably)?;
        let tmp = temp_name(crate::own::LINK_PREFIX, &p.name);
        p.fd.junction(&p.dir, target, &tmp)
            .map_err(|e| io_err("creating a junction in", &p.dir, e))?;
        let placed =
            p.fd.rename(&tmp, &p.name)
                .or_else(|e| match p.fd.stat(Path::new(&p.name)) {
                    Ok(st) if st.kind != Kind::Dir => {
                        p.fd.remove_file(&p.name)?;
                        p.fd.rename(&tmp, &p.name)
                    }
                    // Never replaced: what a folder holds is not sgard's.
                    Ok(_) => Err(std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "a folder is in the way",
                    )),
                    Err(_) => Err(e),
                });
        if let Err(e) = placed {
            let _ = p.fd.remove_file(&tmp);
            return Err(io_err("renaming into place", abs, e));
        }
        p.fd.sync().map_err(|e| io_err("syncing folder", &p.dir, e))
    }

    /// Sets the mode of the file or folder at `abs` (never a symlink's
    /// target).
    ///
    /// # Errors
    /// As [`Confine::parent`]; [`Error::Io`].
    pub fn chmod(&self, abs: &Path, mode: Mode) -> Result<()> {
        let p = self.parent(abs, Create::No)?;
        let f =
            p.fd.open_nofollow(&p.name)
                .map_err(|e| io_err("opening", abs, e))?;
        dir::set_mode(&f, mode.bits()).map_err(|e| io_err("setting mode of", abs, e))
    }

    /// Creates the folder `abs` unless it exists, and sets `mode` on it
    /// (on an existing folder too).
    ///
    /// # Errors
    /// As [`Confine::parent`]; [`Error::Io`].
    pub fn mkdir(&self, abs: &Path, mode: Option<Mode>) -> Result<()> {
        self.make_dir(abs, mode, true).map(|_| ())
    }

    /// Creates the folder `abs` with exactly `mode` if nothing is there;
    /// what is there already (a folder, or anything else) is left as it is.
    /// Returns whether it created it.
    ///
    /// # Errors
    /// As [`Confine::parent`]; [`Error::Io`].
    pub fn create_dir(&self, abs: &Path, mode: Mode) -> Result<bool> {
        self.make_dir(abs, Some(mode), false)
    }

    /// Creates the folder `abs` (0700 until its mode is set; the umask
    /// does not decide it) unless something is there, then sets `mode` on
    /// it when it was created, or on what is there when `existing`. The
    /// folder holding it is synced after a creation. Returns whether it
    /// created it.
    fn make_dir(&self, abs: &Path, mode: Option<Mode>, existing: bool) -> Result<bool> {
        let p = self.parent(abs, Create::Durably)?;
        let created = match p.fd.create_dir(&p.name, 0o700) {
            Ok(()) => true,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => false,
            Err(e) => return Err(io_err("creating folder", abs, e)),
        };
        if !created && !existing {
            return Ok(false);
        }
        if let Some(m) = mode {
            let d =
                p.fd.open_dir_nofollow(&p.name)
                    .map_err(|e| io_err("opening folder", abs, e))?;
            d.set_mode(m.bits())
                .map_err(|e| io_err("setting mode of", abs, e))?;
        }
        if created {
            p.fd.sync()
                .map_err(|e| io_err("syncing folder", &p.dir, e))?;
        }
        Ok(created)
    }

    /// Removes the file, symlink or empty folder at `abs` (nothing there is
    /// fine).
    ///
    /// # Errors
    /// As [`Confine::parent`]; [`Error::Io`].
    pub fn remove(&self, abs: &Path) -> Result<()> {
        let p = self.parent(abs, Create::No)?;
        let st = match p.fd.stat(Path::new(&p.name)) {
            Ok(st) => st,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err("inspecting", abs, e)),
        };
        let is_dir = st.kind == Kind::Dir;
        if is_dir {
            // Folders this run opened at or under it are gone with it: a
            // handle kept would write into a removed folder (and, on
            // Windows, keeps it from being removed at all).
            if let Ok(mut m) = self.dirs.lock() {
                m.retain(|d, _| !d.starts_with(abs));
            }
        }
        let r = if is_dir {
            p.fd.remove_dir(&p.name)
        } else {
            p.fd.remove_file(&p.name)
        };
        r.map_err(|e| {
            io_err(
                if is_dir {
                    "removing folder"
                } else {
                    "deleting"
                },
                abs,
                e,
            )
        })?;
        p.fd.sync().map_err(|e| io_err("syncing folder", &p.dir, e))
    }
}

/// Whether a temp file name of ours (`.sgard-restore-<pid>-…`,
/// `.sgard-link-<pid>-…`) belongs to a process that is gone.
pub(crate) fn is_debris(name: &str, dir: &Path) -> bool {
    let Some(rest) = name
        .strip_prefix(crate::own::RESTORE_PREFIX)
        .or_else(|| name.strip_prefix(crate::own::LINK_PREFIX))
    else {
        return false;
    };
    let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
        return false;
    };
    pid_is_gone(pid, &dir.join(name))
}

/// Whether the process `pid` that made `file` is gone (never this one;
/// without `/proc`, when the file is over an hour old).
pub(crate) fn pid_is_gone(pid: u32, file: &Path) -> bool {
    if pid == std::process::id() {
        return false;
    }
    let proc = Path::new("/proc");
    if proc.is_dir() {
        return !proc.join(pid.to_string()).exists();
    }
    std::fs::symlink_metadata(file)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > std::time::Duration::from_secs(3600))
}

/// Removes the temp files killed sgard processes left in the folder `fd`
/// (at `dir`: see [`is_debris`]), syncing it after. Returns how many.
fn sweep_folder(fd: &Dir, dir: &Path) -> usize {
    let debris = fd.names_where(|name| name.to_str().is_some_and(|s| is_debris(s, dir)));
    let n = debris
        .iter()
        .filter(|name| fd.remove_file(name).is_ok())
        .count();
    if n > 0 {
        let _ = fd.sync();
    }
    n
}

impl Confine {
    /// Removes the temp files killed sgard processes left in `dirs` (the
    /// folders of tracked paths), each reached as a write would reach it.
    /// Returns how many.
    pub fn sweep(&self, dirs: impl IntoIterator<Item = PathBuf>) -> usize {
        dirs.into_iter()
            .filter_map(|dir| {
                self.open_dir(&dir, &dir, Create::No)
                    .ok()
                    .map(|fd| (fd, dir))
            })
            .map(|(fd, dir)| sweep_folder(&fd, &dir))
            .sum()
    }
}
