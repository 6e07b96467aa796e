//! The watcher itself: one thread numbers the events and answers the
//! questions, in the order they happen (see the crate documentation).
//!
//! Linux only for now (inotify, see `kernel`): `notify`'s FSEvents
//! backend (macOS) restarts its stream on every change of what is watched,
//! losing events, and reports real paths (`/private/etc`), and kqueue (the
//! BSDs) does not report writes in a watched folder; `serve` refuses
//! there, and status looks at everything as without a watcher.
#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
use crate::kernel::{Kernel, Kind, Raw};

use crate::{Error, Log, Request, Response, Result, Token, WirePath, io};

/// What to watch: the tracked paths (absolute) and the folder the
/// watching stops at going up (the home).
#[derive(Clone, Debug, Default)]
pub struct Set {
    /// The id askers compare (see [`crate::ask`]).
    pub id: String,
    /// The tracked paths.
    pub paths: Vec<PathBuf>,
    /// The highest folder watched above them (paths outside it are watched
    /// up to `/`).
    pub home: PathBuf,
    /// A folder watched whole (the repository): any change in it is in
    /// every answer after it.
    pub repo: Option<PathBuf>,
    /// Files whose events say nothing (the repository's lock files, which
    /// every command opens for writing and closes).
    pub ignored: Vec<PathBuf>,
}

/// How the watcher runs.
pub struct Config<'a> {
    /// The socket it answers at (created; a dead one is replaced).
    pub socket: PathBuf,
    /// Its lock: one watcher per socket.
    pub lock: PathBuf,
    /// A folder of its own for its cookies (created, emptied).
    pub cookies: PathBuf,
    /// The set to watch; called at the start and whenever an asker
    /// expects another set.
    pub load: &'a mut dyn FnMut() -> std::result::Result<Set, String>,
    /// Whether to stop now (checked every 100 ms).
    pub stop: &'a dyn Fn() -> bool,
    /// Where to say what happens (start, reloads, losses).
    pub say: &'a dyn Fn(&str),
    /// Test hooks: questions may ask for an overflow; while `stall` exists
    /// the watcher takes no event (so the kernel's queue can overflow).
    pub test_hooks: bool,
    /// See `test_hooks`.
    pub stall: Option<PathBuf>,
    /// Once the tracked paths changed and then nothing changed for them
    /// for this long, `on_quiet` is called with the tracked paths those
    /// changes may have touched.
    pub quiet: Option<Duration>,
    /// See `quiet`.
    pub on_quiet: &'a mut dyn FnMut(Vec<PathBuf>),
}

/// How long an answer waits for its cookie before it says "look at
/// everything".
const COOKIE_WAIT: Duration = Duration::from_secs(2);

#[cfg(target_os = "linux")]
enum Msg {
    Event(Raw),
    Ask(Request, mpsc::Sender<Response>),
}

#[cfg(target_os = "linux")]
struct Pending {
    cookie: PathBuf,
    since: Option<String>,
    reply: mpsc::Sender<Response>,
    at: Instant,
}

#[cfg(target_os = "linux")]
struct State {
    kernel: Kernel,
    log: Log,
    set: Set,
    /// Every folder from a tracked path's up to the home.
    wanted: BTreeSet<PathBuf>,
    /// Each watched folder, with the identity (device, inode) of the
    /// folder its path led to when the watch was set: before each answer,
    /// a path that leads elsewhere now (a symlink retargeted, a mount) is a
    /// change, and is watched again.
    watched: BTreeMap<PathBuf, Watched>,
    /// Folders watched since the last answer: checked at the next one
    /// (the folder above may have been watched after them).
    recheck: BTreeSet<PathBuf>,
    /// The mount table at the last answer (`None`: unreadable). A mount or
    /// unmount makes no event: when the table changed, every watched folder
    /// is checked.
    mounts: Option<Vec<u8>>,
    /// The identities watched (one watch per folder: two paths to one
    /// folder would share it, and one of them would go unreported).
    ids: HashSet<(u64, u64)>,
    /// Wanted folders whose changes the kernel may not report (a network
    /// file system: another machine's writes make no event here) or that
    /// could not be watched: every answer names them, so what is under them
    /// is always looked at.
    blind: BTreeSet<PathBuf>,
    /// Why no answer can be trusted (a watch that could not be set).
    broken: Option<String>,
    /// The repository folder, while it is watched whole, and its identity.
    repo_watched: Option<(PathBuf, (u64, u64))>,
    /// Whether to keep `touched` (only for `quiet`).
    collect: bool,
    /// The set's paths, sorted (for `touched`).
    sorted: Vec<PathBuf>,
    /// Changes to tracked paths or the folders above them since the last
    /// call of `on_quiet`, and when the last one came.
    touched: Vec<PathBuf>,
    last_touch: Option<Instant>,
    cookies: PathBuf,
    next_cookie: u64,
    pending: Vec<Pending>,
    /// The wanted folders whose folder above is not wanted (the home, or
    /// `/` for paths outside it).
    roots: Vec<PathBuf>,
    /// Whether the next answer walks every wanted folder to watch those
    /// that appeared (see [`State::verify`]): false only after a walk that
    /// found nothing to do, until an event, a new set or a new watch.
    walk_needed: bool,
}

/// A watched folder.
#[derive(Clone, Copy, Debug)]
struct Watched {
    /// The identity (device, inode) of the folder its path led to when the
    /// watch was set.
    id: (u64, u64),
    /// Whether each answer checks that its path still leads there: its
    /// path goes through a symlink, or the folder above it is not watched,
    /// so a change above it may make no event in a watched folder. The
    /// others are checked when the mount table changes (see `verify`).
    always: bool,
}

/// Runs the watcher until `stop` says so.
///
/// # Errors
/// [`Error::AlreadyRunning`], [`Error::SocketPath`], [`Error::Io`] for the
/// socket, lock and cookie folder, and when the kernel's watching cannot
/// start (naming `inotify`); a first set that cannot be loaded is an
/// [`Error::Protocol`] naming the socket.
#[cfg(target_os = "linux")]
pub fn serve(cfg: Config<'_>) -> Result<()> {
    use std::os::unix::net::UnixListener;

    // Its folder stays open while the name through it is used.
    let (_folder, socket_name) = crate::socket_name(&cfg.socket)?;
    let _lock = take_lock(&cfg.lock)?;
    // Ours now: whatever is at the socket is a dead watcher's.
    match std::fs::remove_file(&cfg.socket) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&cfg.socket)(e)),
        _ => {}
    }
    let _ = std::fs::remove_dir_all(&cfg.cookies);
    std::fs::create_dir_all(&cfg.cookies).map_err(io(&cfg.cookies))?;
    let cookies = std::fs::canonicalize(&cfg.cookies).map_err(io(&cfg.cookies))?;

    // Bounded, as the kernel's queue is: events past it are lost, and
    // said to be (an overflow), rather than held without limit.
    let (tx, rx) = mpsc::sync_channel::<Msg>(QUEUE);
    let events = tx.clone();
    let lost = std::sync::atomic::AtomicBool::new(false);
    let forward = move |raw: Raw| -> bool {
        use std::sync::mpsc::TrySendError;
        if lost.load(Ordering::SeqCst) {
            match events.try_send(Msg::Event(Raw::Overflow)) {
                Ok(()) => lost.store(false, Ordering::SeqCst),
                Err(TrySendError::Full(_)) => return true,
                Err(TrySendError::Disconnected(_)) => return false,
            }
        }
        match events.try_send(Msg::Event(raw)) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                lost.store(true, Ordering::SeqCst);
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    };
    let stall = cfg.stall.clone();
    let kernel = Kernel::start(forward, stall).map_err(|e| Error::Io {
        path: PathBuf::from("inotify"),
        source: e,
    })?;
    let set = (cfg.load)().map_err(|why| Error::Protocol {
        path: cfg.socket.clone(),
        why,
    })?;
    let mut st = State {
        kernel,
        log: Log::new(instance_id()),
        set: Set::default(),
        wanted: BTreeSet::new(),
        watched: BTreeMap::new(),
        recheck: BTreeSet::new(),
        mounts: None,
        ids: HashSet::new(),
        blind: BTreeSet::new(),
        broken: None,
        repo_watched: None,
        collect: cfg.quiet.is_some(),
        sorted: Vec::new(),
        touched: Vec::new(),
        last_touch: None,
        cookies: cookies.clone(),
        next_cookie: 0,
        pending: Vec::new(),
        roots: Vec::new(),
        walk_needed: true,
    };
    st.watch_path(&cookies);
    st.replace_set(set);

    let listener = UnixListener::bind(&socket_name).map_err(io(&cfg.socket))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cfg.socket, std::fs::Permissions::from_mode(0o600))
            .map_err(io(&cfg.socket))?;
    }
    let ours = ident(&cfg.socket, false);
    let asks = tx;
    let open = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else {
                // Out of descriptors, say: let them free up.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            if open.load(Ordering::SeqCst) >= MAX_ASKERS {
                continue;
            }
            open.fetch_add(1, Ordering::SeqCst);
            let (asks, open) = (asks.clone(), Arc::clone(&open));
            std::thread::spawn(move || {
                converse(conn, &asks);
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (cfg.say)(&format!(
        "watching {} folders above {} tracked paths; answering at {}",
        st.folders(),
        st.set.paths.len(),
        cfg.socket.display()
    ));
    if let Some(why) = &st.broken {
        (cfg.say)(&format!(
            "every answer will say to look at everything: {why}"
        ));
    }
    while !(cfg.stop)() {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Msg::Event(ev)) => st.on_event(ev, cfg.say),
            Ok(Msg::Ask(req, reply)) if req.info => {
                let mut resp = st.full("a description, not an answer".into());
                resp.info = Some(crate::Info {
                    set: st.set.id.clone(),
                    paths: st.set.paths.len(),
                    folders: st.folders(),
                    broken: st.broken.clone(),
                    blind: st.blind.iter().cloned().collect(),
                    pid: std::process::id(),
                });
                let _ = reply.send(resp);
            }
            Ok(Msg::Ask(req, reply)) => {
                if req.overflow && cfg.test_hooks {
                    st.log.forget("the kernel's event queue overflowed");
                }
                if !req.now && req.set != st.set.id {
                    match (cfg.load)() {
                        Ok(set) => {
                            (cfg.say)(&format!(
                                "the tracked paths changed: now watching {} paths",
                                set.paths.len()
                            ));
                            st.replace_set(set);
                        }
                        Err(why) => {
                            (cfg.say)(&format!("cannot read the tracked paths: {why}"));
                            let _ =
                                reply.send(st.full(format!(
                                    "the watcher cannot read the tracked paths: {why}"
                                )));
                            continue;
                        }
                    }
                }
                st.ask(req, reply);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        st.expire();
        if let Some(quiet) = cfg.quiet {
            // Called on every turn, so what waits for a running checkpoint
            // is taken up once it ends.
            let due = st.last_touch.is_some_and(|at| at.elapsed() >= quiet);
            (cfg.on_quiet)(if due { st.settle() } else { Vec::new() });
        }
    }
    // Only our own socket: a watcher started since (its state folder
    // removed and made again) keeps its.
    if ours.is_some() && ident(&cfg.socket, false) == ours {
        let _ = std::fs::remove_file(&cfg.socket);
        let _ = std::fs::remove_dir_all(&cfg.cookies);
    }
    Ok(())
}

/// How many events wait for the main loop at most (the kernel's own
/// queue holds 16,384 by default).
const QUEUE: usize = 65_536;

/// How many askers are answered at once (more are turned away: they look
/// at everything).
const MAX_ASKERS: usize = 64;

/// The (device, inode) `p` leads to (following symlinks when `follow`).
fn ident(p: &Path, follow: bool) -> Option<(u64, u64)> {
    let md = if follow {
        std::fs::metadata(p)
    } else {
        std::fs::symlink_metadata(p)
    }
    .ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((md.dev(), md.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = md;
        None
    }
}

/// Not on this platform (see the module documentation).
///
/// # Errors
/// Always [`Error::Unsupported`].
#[cfg(not(target_os = "linux"))]
pub fn serve(_cfg: Config<'_>) -> Result<()> {
    Err(Error::Unsupported)
}

/// The lock that makes this the only watcher at its socket.
#[cfg(target_os = "linux")]
fn take_lock(path: &Path) -> Result<std::fs::File> {
    use rustix::fs::{FlockOperation, flock};
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io(path))?;
    match flock(&f, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(f),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(Error::AlreadyRunning(path.to_path_buf())),
        Err(e) => Err(io(path)(e.into())),
    }
}

/// Whether `p` is on a file system whose changes may come from elsewhere
/// without an event here (NFS, SMB, FUSE such as sshfs, 9p, AFS, Ceph,
/// Lustre).
#[cfg(target_os = "linux")]
fn remote(p: &Path) -> bool {
    const REMOTE: [u64; 11] = [
        0x6969,      // NFS
        0x517b,      // SMB
        0xff53_4d42, // CIFS
        0xfe53_4d42, // SMB2
        0x6573_5546, // FUSE
        0x0102_1997, // 9p (also WSL's Windows drives)
        0x5346_414f, // AFS
        0x6b41_4653, // kAFS
        0x00c3_6400, // Ceph
        0x0bd0_0bd0, // Lustre
        0x7375_7245, // Coda
    ];
    rustix::fs::statfs(p).is_ok_and(|s| {
        #[allow(
            clippy::useless_conversion,
            reason = "f_type's width differs per target"
        )]
        let t = u64::try_from(s.f_type).unwrap_or(0);
        REMOTE.contains(&t)
    })
}

/// Other systems: no such check (FSEvents and ReadDirectoryChangesW come
/// with the platforms work).
#[cfg(not(target_os = "linux"))]
fn remote(_p: &Path) -> bool {
    false
}

/// A number no earlier run of the watcher used (time and process id).
fn instance_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos() % (1 << 64)).unwrap_or(0))
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 40)
}

/// One asker: a line in, a line out.
#[cfg(target_os = "linux")]
fn converse(conn: std::os::unix::net::UnixStream, asks: &mpsc::SyncSender<Msg>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(5)));
    let mut line = Vec::new();
    let Ok(read) = conn.try_clone() else {
        return;
    };
    if BufReader::new(read.take(1 << 20))
        .read_until(b'\n', &mut line)
        .is_err()
    {
        return;
    }
    let Ok(req) = serde_json::from_slice::<Request>(&line) else {
        return;
    };
    if req.v != 1 {
        return;
    }
    let (tx, rx) = mpsc::channel();
    if asks.send(Msg::Ask(req, tx)).is_err() {
        return;
    }
    let Ok(resp) = rx.recv_timeout(COOKIE_WAIT * 3) else {
        return;
    };
    let Ok(mut out) = serde_json::to_vec(&resp) else {
        return;
    };
    out.push(b'\n');
    let mut conn = conn;
    let _ = conn.write_all(&out);
}

#[cfg(target_os = "linux")]
impl State {
    /// Watches `set` from now on; no earlier token can be answered.
    fn replace_set(&mut self, set: Set) {
        let mut wanted = BTreeSet::new();
        for p in &set.paths {
            for a in p.ancestors().skip(1) {
                if !wanted.insert(a.to_path_buf()) || a == set.home {
                    break;
                }
            }
        }
        let gone: Vec<PathBuf> = self
            .watched
            .keys()
            .filter(|p| !wanted.contains(*p) && **p != self.cookies)
            .cloned()
            .collect();
        for p in gone {
            self.unwatch(&p);
        }
        self.roots = wanted
            .iter()
            .filter(|p| p.parent().is_none_or(|up| !wanted.contains(up)))
            .cloned()
            .collect();
        self.walk_needed = true;
        self.wanted = wanted;
        self.sorted = set.paths.clone();
        self.sorted.sort();
        self.set = set;
        self.broken = None;
        self.blind.clear();
        self.sync_under(Path::new("/"));
        self.watch_repo();
        self.log.forget("the tracked paths changed");
    }

    /// Watches every wanted folder at or under `top` that exists and is
    /// not watched yet.
    fn sync_under(&mut self, top: &Path) {
        let todo: Vec<PathBuf> = self
            .wanted
            .range(top.to_path_buf()..)
            .take_while(|p| p.starts_with(top))
            .filter(|p| !self.watched.contains_key(*p))
            .cloned()
            .collect();
        for p in todo {
            self.watch_path(&p);
        }
    }

    fn unwatch(&mut self, p: &Path) {
        if let Some(w) = self.watched.remove(p) {
            self.kernel.remove(p);
            self.ids.remove(&w.id);
        }
        self.recheck.remove(p);
        // The folders right under it lose the folder that reported on
        // them.
        for (c, w) in self
            .watched
            .range_mut(p.to_path_buf()..)
            .take_while(|(c, _)| c.starts_with(p))
        {
            if c.parent() == Some(p) {
                w.always = true;
            }
        }
    }

    fn watch_path(&mut self, p: &Path) {
        match std::fs::metadata(p) {
            Ok(md) if md.is_dir() => {}
            // Not there (yet), or not a folder: the folder above reports
            // when that changes.
            _ => return,
        }
        let Some(id) = ident(p, true) else { return };
        // Another path to a folder already watched (a symlink), or one on
        // a network file system: never vouched for.
        if (remote(p) || self.ids.contains(&id)) && p != self.cookies {
            self.blind.insert(p.to_path_buf());
            return;
        }
        self.blind.remove(p);
        match self.kernel.add(p) {
            Ok(()) => {
                let always = std::fs::canonicalize(p).ok().as_deref() != Some(p)
                    || !p.parent().is_some_and(|up| self.watched.contains_key(up));
                self.watched.insert(p.to_path_buf(), Watched { id, always });
                self.ids.insert(id);
                self.recheck.insert(p.to_path_buf());
            }
            Err(e) if e.raw_os_error() == Some(crate::kernel::libc_enospc()) => {
                self.broken = Some(
                    "the system's limit of watched folders is reached (raise \
                     fs.inotify.max_user_watches)"
                        .into(),
                );
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) => {}
            Err(e) if p == self.cookies => {
                self.broken = Some(format!("cannot watch its own folder {}: {e}", p.display()));
            }
            Err(_) => {
                self.blind.insert(p.to_path_buf());
            }
        }
    }

    /// Forgets the watches on `p` and every folder under it (a folder
    /// renamed away is still watched under its old name), then watches
    /// again what is there now.
    fn rewatch(&mut self, p: &Path) {
        let stale: Vec<PathBuf> = self
            .watched
            .range(p.to_path_buf()..)
            .map(|(w, _)| w)
            .take_while(|w| w.starts_with(p))
            .filter(|w| **w != self.cookies)
            .cloned()
            .collect();
        for w in stale {
            self.unwatch(&w);
        }
        let blind: Vec<PathBuf> = self
            .blind
            .range(p.to_path_buf()..)
            .take_while(|w| w.starts_with(p))
            .cloned()
            .collect();
        for b in blind {
            self.blind.remove(&b);
        }
        self.sync_under(p);
        // The repository under it is watched (or named blind) afresh too:
        // forgetting that it was blind must never leave it unwatched and
        // unnamed. What changed in it meanwhile counts as changed.
        if let Some(repo) = self.set.repo.clone()
            && repo.starts_with(p)
        {
            self.log.record(&repo);
            self.watch_repo();
        }
    }

    /// Before an answer: every watched folder's path still leads to the
    /// folder watched, and every wanted folder that exists now is watched.
    /// A path that leads elsewhere (a symlink above it retargeted, a file
    /// system mounted or unmounted there, a folder renamed away and another
    /// made) counts as changed, and is watched afresh. Which paths are
    /// looked at: see [`Watched::always`] and the comment below.
    fn verify(&mut self) {
        // A watched folder whose path is plain (no symlink in it) and whose
        // folder above is watched too cannot lead elsewhere without an
        // event in that folder (a rename, a removal, a symlink put in its
        // place), except by a mount: those are checked only when the mount
        // table changed. 11,000 folders cost ~28 ms to check each time.
        let mounts = std::fs::read("/proc/self/mountinfo").ok();
        let all = mounts.is_none() || mounts != self.mounts;
        // A mount inside the repository (watched whole) makes no event
        // either: seen to change, the table means watching it afresh.
        let remount = all && mounts.is_some() && self.mounts.is_some();
        self.mounts = mounts;
        if remount && let Some((repo, _)) = self.repo_watched.clone() {
            self.log.record(&repo);
            self.watch_repo();
        }
        let recheck = std::mem::take(&mut self.recheck);
        let moved: Vec<PathBuf> = self
            .watched
            .iter()
            .filter(|(p, w)| all || w.always || recheck.contains(*p))
            .filter(|(p, w)| **p != self.cookies && ident(p, true) != Some(w.id))
            .map(|(p, _)| p.clone())
            .collect();
        for p in &moved {
            self.log.record(p);
            self.rewatch(p);
        }
        // Which wanted folders exist unwatched can change only through an
        // event (every wanted folder's folder above is wanted too, up to a
        // root: watched, an appearance there is an event; blind, what is
        // under it is named in every answer), a mount, a new set or a new
        // watch. Without any of those since a walk that found nothing to
        // do, walking again (~2 ms at 11,000 folders) would find nothing.
        let roots_watched = self
            .roots
            .iter()
            .all(|r| self.watched.contains_key(r) || self.blind.contains(r));
        if !self.walk_needed && !all && moved.is_empty() && recheck.is_empty() && roots_watched {
            return self.check_repo();
        }
        // Both sorted alike: walked side by side (a lookup per folder
        // compares paths component by component, ~11,000 times a question).
        let mut watched = self.watched.keys().peekable();
        let appeared: Vec<PathBuf> = self
            .wanted
            .iter()
            .filter(|p| {
                while watched.next_if(|w| *w < *p).is_some() {}
                watched.next_if(|w| *w == *p).is_none()
            })
            .filter(|p| !self.blind.contains(*p))
            .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_dir()))
            .cloned()
            .collect();
        self.walk_needed = !appeared.is_empty() || !moved.is_empty();
        for p in appeared {
            self.log.record(&p);
            self.watch_path(&p);
        }
        self.check_repo();
    }

    /// The repository folder's path still leads to the folder watched.
    fn check_repo(&mut self) {
        if let Some((repo, id)) = self.repo_watched.clone()
            && ident(&repo, true) != Some(id)
        {
            self.log.record(&repo);
            self.watch_repo();
        }
    }

    /// Watches the set's repository folder whole (afresh).
    fn watch_repo(&mut self) {
        if let Some((old, _)) = self.repo_watched.take() {
            self.kernel.remove_tree(&old);
        }
        let Some(repo) = self.set.repo.clone() else {
            return;
        };
        if remote(&repo) {
            self.blind.insert(repo);
            return;
        }
        let Some(id) = ident(&repo, true) else {
            self.blind.insert(repo);
            return;
        };
        match self.kernel.add_tree(&repo) {
            Ok(()) => {
                self.blind.remove(&repo);
                self.repo_watched = Some((repo, id));
            }
            Err(e) if e.raw_os_error() == Some(crate::kernel::libc_enospc()) => {
                self.broken = Some(
                    "the system's limit of watched folders is reached (raise \
                     fs.inotify.max_user_watches)"
                        .into(),
                );
            }
            Err(_) => {
                self.kernel.remove_tree(&repo);
                self.blind.insert(repo);
            }
        }
    }

    /// How many folders are watched for the set (the cookie folder aside).
    fn folders(&self) -> usize {
        self.watched.keys().filter(|w| **w != self.cookies).count()
    }

    /// Keeps `p` for `settle`, at most a bounded number of them (beyond,
    /// everything counts as touched).
    fn touch(&mut self, p: PathBuf) {
        if self.touched.len() >= crate::LIMIT {
            self.touched.clear();
            self.touched.push(PathBuf::from("/"));
        } else {
            self.touched.push(p);
        }
        self.last_touch = Some(Instant::now());
    }

    /// The tracked paths the changes since the last call may have touched
    /// (forgetting those changes).
    fn settle(&mut self) -> Vec<PathBuf> {
        self.last_touch = None;
        let mut touched = crate::Changed::new(&std::mem::take(&mut self.touched));
        self.sorted
            .iter()
            .filter(|p| touched.affects(p))
            .cloned()
            .collect()
    }

    /// Watches the cookie folder afresh.
    fn rewatch_cookies(&mut self) {
        let c = self.cookies.clone();
        self.unwatch(&c);
        self.watch_path(&c);
    }

    fn on_event(&mut self, raw: Raw, say: &dyn Fn(&str)) {
        // Any event but a cookie's may make or unmake a wanted folder.
        let walk_was_needed = self.walk_needed;
        self.walk_needed = true;
        let (wd, mask, name) = match raw {
            Raw::Failed(e) => {
                say(&format!("reading the kernel's events failed: {e}"));
                self.log.forget("the watching failed");
                self.broken = Some(format!("reading the kernel's events failed: {e}"));
                return;
            }
            Raw::Overflow => {
                say(
                    "the kernel's event queue overflowed: the next answers say to look at everything",
                );
                self.log.forget("the kernel's event queue overflowed");
                self.rewatch(Path::new("/"));
                self.rewatch_cookies();
                self.watch_repo();
                // Anything may have changed.
                if self.collect {
                    self.touch(PathBuf::from("/"));
                }
                return;
            }
            Raw::Event { wd, mask, name } => (wd, mask, name),
        };
        let created = mask.contains(inotify::EventMask::CREATE);
        let named = self.kernel.name(wd, mask, name);
        if let Some(e) = self.kernel.take_failed() {
            // A folder made in the repository could not be watched: the
            // repository is no longer vouched for.
            if e.raw_os_error() == Some(crate::kernel::libc_enospc()) {
                self.broken = Some(
                    "the system's limit of watched folders is reached (raise \
                     fs.inotify.max_user_watches)"
                        .into(),
                );
            }
            say(&format!(
                "the repository cannot be watched whole any more: {e}"
            ));
            if let Some((repo, _)) = self.repo_watched.take() {
                self.kernel.remove_tree(&repo);
                self.blind.insert(repo);
            }
        }
        let Some((p, kind)) = named else {
            return;
        };
        if self.set.ignored.contains(&p) {
            // sgard's own lock files: never a folder.
            self.walk_needed = walk_was_needed;
            return;
        }
        if p.starts_with(&self.cookies) {
            self.walk_needed = walk_was_needed;
            if created {
                self.cookie_seen(&p);
            }
            return;
        }
        self.log.record(&p);
        if self.collect && (self.wanted.contains(&p) || self.sorted.binary_search(&p).is_ok()) {
            self.touch(p.clone());
        }
        // A wanted folder made, removed or renamed: its watch (and those
        // under it) must follow. Its own metadata changing is not that.
        if kind == Kind::Moved && self.wanted.contains(&p) {
            self.rewatch(&p);
        }
        if kind == Kind::Moved && self.set.repo.as_deref() == Some(p.as_path()) {
            // The repository folder itself was made, moved or removed.
            self.watch_repo();
        }
    }

    fn ask(&mut self, req: Request, reply: mpsc::Sender<Response>) {
        self.next_cookie += 1;
        let cookie = self.cookies.join(format!("{}", self.next_cookie));
        if let Err(e) = std::fs::File::create(&cookie) {
            let _ = reply.send(self.full(format!("the watcher cannot write its cookie: {e}")));
            return;
        }
        self.pending.push(Pending {
            cookie,
            since: req.since,
            reply,
            at: Instant::now(),
        });
    }

    /// The cookie `p` arrived: every change before the questions up to it
    /// has been counted.
    fn cookie_seen(&mut self, p: &Path) {
        let Some(at) = self.pending.iter().position(|q| q.cookie == p) else {
            return;
        };
        self.verify();
        let done: Vec<Pending> = self.pending.drain(..=at).collect();
        for q in done {
            let _ = std::fs::remove_file(&q.cookie);
            let resp = self.answer(q.since.as_deref());
            let _ = q.reply.send(resp);
        }
    }

    /// Questions whose cookie never came.
    fn expire(&mut self) {
        let now = Instant::now();
        while self
            .pending
            .first()
            .is_some_and(|q| now.duration_since(q.at) > COOKIE_WAIT)
        {
            let q = self.pending.remove(0);
            let _ = std::fs::remove_file(&q.cookie);
            let _ = q.reply.send(
                self.full("the watcher did not see its own write in time (it is too busy)".into()),
            );
        }
    }

    fn answer(&self, since: Option<&str>) -> Response {
        if let Some(why) = &self.broken {
            return self.full(why.clone());
        }
        let Some(since) = since else {
            return self.full("there was no token to answer from".into());
        };
        let token: Token = match since.parse() {
            Ok(t) => t,
            Err(why) => return self.full(why),
        };
        match self.log.since(token) {
            Ok(paths) => Response {
                v: 1,
                token: self.log.token().to_string(),
                changed: Some(
                    paths
                        .iter()
                        .chain(&self.blind)
                        .map(|p| WirePath::of(p))
                        .collect(),
                ),
                why: None,
                info: None,
            },
            Err(why) => self.full(why),
        }
    }

    fn full(&self, why: String) -> Response {
        Response {
            v: 1,
            token: self.log.token().to_string(),
            changed: None,
            why: Some(why),
            info: None,
        }
    }
}
