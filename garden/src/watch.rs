//! What `sgard watch` tells a `status`: the tracked files that cannot have
//! changed since the last one, so they are not looked at.
//!
//! The watcher (crate `sgard-watch`) answers "which paths changed since this
//! token". What a token vouches for is kept beside the index, in
//! `repos/<key>/watch-token`: the token, the set of tracked paths it was
//! asked for, the index file it goes with (its fingerprint: every write of
//! the index is a new file) and the files that run could not vouch for.
//! A status then takes, for a tracked file that is none of those and that
//! no change since the token names (itself or a folder above it), the stat
//! cache's record as what is on disk: one `stat` fewer per file.
//!
//! Why that never misses a change:
//! - the token was asked for *before* the run looked at the disk, and the
//!   watcher answers only after it has seen every change made before the
//!   question (its cookie), so a change after the look has a later number;
//! - a file the run did not vouch for (its hash did not come from a stat
//!   cache record that matched the disk: it was read, was missing, changed,
//!   or could not be looked at) is listed, and looked at next time
//!   whatever the watcher says;
//! - the record a file is vouched by is the one in the index the token
//!   names: another command that rewrote the index (a checkpoint, a
//!   restore, a run without the watcher) made the token worthless;
//! - a watcher restarted, overflowed, watching another set, or not running
//!   answers "look at everything", and the run does.
//!
//! Hard links are a known limit, as for git's fsmonitor: a change made
//! through another link to a tracked file, in a folder the watcher does
//! not watch, reports nothing.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use sgard_manifest::EntryKind;
use sgard_store::durable;
use sgard_watch::Token;

use crate::{Garden, Tx};

mod cache;
pub(crate) use cache::Keep;
pub use cache::{Before, Cached, Form, Text, before_status, cached_status};

/// The token file's name in the repository's state folder.
pub const TOKEN_FILE: &str = "watch-token";
/// The watcher's socket's name there.
pub const SOCKET: &str = "watch.sock";
/// Its lock's name there.
pub const LOCK: &str = "watch.lock";
/// Its cookies' folder there.
pub const COOKIES: &str = "watch-cookies";

/// How long a status waits for the watcher before it looks itself.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// What this run asked the watcher, to be kept for the next one.
#[derive(Debug)]
pub(crate) struct WatchRun {
    token: Token,
    set: String,
    /// Tracked files this run did not vouch for (see the module
    /// documentation).
    pub(crate) unvouched: Vec<String>,
    /// The contents the last run found all held, when the answer names
    /// nothing in the repository: they still are.
    held_before: Option<u64>,
    /// The contents this run found all held (see [`Tx::all_held`]).
    held: Option<u64>,
}

/// What the watcher's answer lets a scan skip: per manifest index, whether
/// the entry's stat cache record is what is on disk.
pub(crate) type Trusted = Vec<bool>;

/// How a status used the watcher, for `doctor` and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Used {
    /// No watcher answers.
    NotRunning,
    /// The watcher said to look at everything, and why.
    Full(String),
    /// Only what changed was looked at.
    Narrowed {
        /// How many tracked files were not looked at.
        skipped: usize,
    },
}

/// The id of the set of tracked paths of `head` in `home`: the watcher and
/// the asker compute it alike.
pub(crate) fn set_id(head: &sgard_store::Hash, home: &Path, root: &Path) -> String {
    let mut bytes = head.as_bytes().to_vec();
    bytes.extend_from_slice(home.as_os_str().as_encoded_bytes());
    // Two clones share a state folder (it is named by the repository's
    // id): the set names the folder watched.
    bytes.push(0);
    bytes.extend_from_slice(root.as_os_str().as_encoded_bytes());
    sgard_store::Hash::of(&bytes).to_string()
}

impl Garden {
    /// What `sgard watch` watches: the id of the set, every tracked path
    /// (absolute), and the home.
    pub fn watch_set(&self) -> sgard_watch::daemon::Set {
        let env = &self.repo.env;
        sgard_watch::daemon::Set {
            id: set_id(&self.repo.head_hash, &env.home, &self.repo.root),
            paths: self
                .repo
                .manifest
                .files
                .iter()
                .map(|e| env.expand(&e.path))
                .collect(),
            home: env.home.clone(),
            repo: Some(self.repo.root.clone()),
            ignored: [crate::lock::LOCK_FILE, crate::lock::TURN_FILE]
                .iter()
                .map(|f| self.repo.root.join(f))
                .collect(),
        }
    }

    /// Where the watcher of this repository keeps its socket, lock and
    /// cookies (`None` without a state folder).
    pub fn watch_places(&self) -> Option<(PathBuf, PathBuf, PathBuf)> {
        let d = self.repo.local_dir.as_ref()?;
        Some((d.join(SOCKET), d.join(LOCK), d.join(COOKIES)))
    }

    /// How the last status of this run used the watcher.
    pub fn watch_used(&self) -> Option<&Used> {
        self.work.watch_used.as_ref()
    }

    /// Keeps what this run's status learned from the watcher for the next
    /// one (after the index is saved: the token names the index file).
    pub(crate) fn keep_watch_token(&mut self) {
        let Some(run) = self.work.watch.take() else {
            return;
        };
        let Some(dir) = self.repo.local_dir.as_ref() else {
            return;
        };
        let file = dir.join(TOKEN_FILE);
        let Some(fp) = self.work.base.file() else {
            let _ = std::fs::remove_file(&file);
            return;
        };
        let doc = json!({
            "v": 1,
            "index": fp.to_string(),
            "set": run.set,
            "token": run.token.to_string(),
            "unvouched": run.unvouched,
            "held": run.held.map(|d| format!("{d:016x}")),
        });
        let Ok(text) = serde_json::to_vec(&doc) else {
            return;
        };
        // A cache: failing to keep it (or losing it in a crash: it goes
        // with the index file it names, written durably before it) costs
        // the next status a full look.
        if durable::write_replace(&file, &text, 0o600).is_err() {
            let _ = std::fs::remove_file(&file);
        }
    }
}

/// The token file's contents, when it goes with this index and set.
struct Kept {
    token: Token,
    unvouched: HashSet<String>,
    /// The digest of the contents that run found all held.
    held: Option<u64>,
}

fn read_kept(file: &Path, index: &str, set: &str) -> Option<Kept> {
    let text = durable::read_regular_to_string_max(file, 256 << 20).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    if v.get("v")?.as_u64()? != 1
        || v.get("index")?.as_str()? != index
        || v.get("set")?.as_str()? != set
    {
        return None;
    }
    let token = v.get("token")?.as_str()?.parse().ok()?;
    let unvouched = v
        .get("unvouched")?
        .as_array()?
        .iter()
        .map(|p| p.as_str().map(str::to_owned))
        .collect::<Option<HashSet<String>>>()?;
    let held = v
        .get("held")
        .and_then(|h| h.as_str())
        .and_then(|h| u64::from_str_radix(h, 16).ok());
    Some(Kept {
        token,
        unvouched,
        held,
    })
}

impl Tx<'_> {
    /// Asks the watcher, for a status of every entry: which of `picked`
    /// (manifest indices) need no look (see the module documentation).
    /// Starts this run's [`WatchRun`] whenever a watcher answers.
    pub(crate) fn ask_watcher(&mut self, picked: &[usize]) -> Option<Trusted> {
        let env = &self.repo.env;
        if env.no_cache || env.no_watch {
            return None;
        }
        let dir = self.repo.local_dir.as_ref()?;
        let socket = dir.join(SOCKET);
        if !durable::lstat_exists(&socket) {
            self.work.watch_used = Some(Used::NotRunning);
            return None;
        }
        let set = set_id(&self.repo.head_hash, &env.home, &self.repo.root);
        let index = self.work.base.file().map(|f| f.to_string());
        let kept = index
            .as_deref()
            .and_then(|i| read_kept(&dir.join(TOKEN_FILE), i, &set));
        let answer =
            match sgard_watch::ask(&socket, &set, kept.as_ref().map(|k| k.token), ASK_TIMEOUT) {
                Ok(a) => a,
                Err(sgard_watch::Error::NotRunning(_)) => {
                    self.work.watch_used = Some(Used::NotRunning);
                    return None;
                }
                Err(e) => {
                    self.work.watch_used = Some(Used::Full(e.to_string()));
                    return None;
                }
            };
        self.work.watch = Some(WatchRun {
            token: answer.token,
            set,
            unvouched: Vec::new(),
            held_before: None,
            held: None,
        });
        let changed = match (answer.changed, kept) {
            (Ok(c), Some(k)) => (c, k),
            (Err(why), _) => {
                self.work.watch_used = Some(Used::Full(why));
                return None;
            }
            (Ok(_), None) => {
                self.work.watch_used = Some(Used::Full(
                    "no earlier status under the watcher goes with this index".into(),
                ));
                return None;
            }
        };
        let (changed, kept) = changed;
        let mut changed = sgard_watch::Changed::new(&changed);
        if !changed.touches(&self.repo.root)
            && let Some(w) = self.work.watch.as_mut()
        {
            w.held_before = kept.held;
        }
        let files = &self.repo.manifest.files;
        let mut trusted = vec![false; files.len()];
        let mut skipped = 0;
        let mut hint = 0;
        for &i in picked {
            let Some(e) = files.get(i) else { continue };
            if e.kind != EntryKind::File || kept.unvouched.contains(&e.path) {
                continue;
            }
            if (!changed.is_empty() && changed.affects(&env.expand(&e.path)))
                || self
                    .work
                    .statcache
                    .record_near(&e.path, &mut hint)
                    .is_none()
            {
                continue;
            }
            trusted[i] = true;
            skipped += 1;
        }
        self.work.watch_used = Some(Used::Narrowed { skipped });
        Some(trusted)
    }

    /// Whether the repository holds every one of `contents` (sorted,
    /// distinct: a status's contents of every entry), said without looking:
    /// the last status under the watcher found them all held, and nothing
    /// in the repository changed since its token (the token was asked for
    /// before that run looked). Only a status of every entry may ask: the
    /// digest kept speaks for those contents.
    pub(crate) fn all_held(&self, contents: &[sgard_store::Hash]) -> bool {
        self.work.watch.as_ref().is_some_and(|w| {
            w.held_before
                .is_some_and(|d| d == crate::present::digest(contents))
        })
    }

    /// Notes whether this run found every one of `contents` (sorted,
    /// distinct) held, for the next status under the watcher.
    pub(crate) fn note_held(&mut self, contents: &[sgard_store::Hash], held: bool) {
        if let Some(w) = self.work.watch.as_mut() {
            w.held = held.then(|| crate::present::digest(contents));
        }
    }

    /// Notes that `path`, a tracked file, was not vouched for this run.
    pub(crate) fn unvouched(&mut self, path: &str) {
        if let Some(w) = self.work.watch.as_mut() {
            w.unvouched.push(path.to_owned());
        }
    }
}
