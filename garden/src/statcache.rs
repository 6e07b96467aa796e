//! The stat cache: skip re-hashing files whose metadata did not change.
//!
//! Per machine and repository, under `$XDG_CACHE_HOME/sgard/` (never in the
//! portable repository): for each tracked path, `(dev, ino, size, mode,
//! mtime ns, ctime ns) → SHA-256`. A file whose `lstat` matches is not read.
//!
//! Racy-clean safety, as git and borg do it: an entry is stored only when
//! the file's mtime and ctime are more than 2 seconds older than the start
//! of this run, and the file's stat was the same before and after hashing.
//! So a file rewritten in place, at the same size, within a filesystem's
//! timestamp granule of being cached can never match a stored entry: any
//! later write gives it a newer ctime, which userland cannot set back. A
//! missing, damaged or foreign cache is ignored (rebuilt), never trusted.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sgard_store::{Hash, durable};

const MAGIC: &str = "sgard-statcache 1";
/// How much older than the run a file must be to be cached.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The metadata a cache entry is keyed on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Stat {
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stat {
    pub fn of(md: &Metadata) -> Self {
        Stat {
            dev: md.dev(),
            ino: md.ino(),
            size: md.size(),
            mode: md.mode(),
            mtime_ns: i128::from(md.mtime()) * 1_000_000_000 + i128::from(md.mtime_nsec()),
            ctime_ns: i128::from(md.ctime()) * 1_000_000_000 + i128::from(md.ctime_nsec()),
        }
    }
}

/// The cache of one repository on this machine.
#[derive(Debug, Default)]
pub(crate) struct StatCache {
    path: Option<PathBuf>,
    map: HashMap<String, (Stat, Hash)>,
    /// Files changed at or after this (ns since the epoch) are not stored.
    trust_before_ns: i128,
    dirty: bool,
}

impl StatCache {
    /// Loads the cache for `repo` from `cache_dir` (`None`: no cache at all).
    pub fn load(cache_dir: Option<&Path>, repo: &Path) -> Self {
        let started = SystemTime::now()
            .checked_sub(RACY_WINDOW)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(0));
        let Some(dir) = cache_dir else {
            return StatCache::default();
        };
        let key = Hash::of(repo.as_os_str().as_encoded_bytes()).short(16);
        let path = dir.join("sgard").join(format!("statcache-{key}"));
        let map = durable::read_regular_to_string(&path)
            .ok()
            .and_then(|t| parse(&t))
            .unwrap_or_default();
        StatCache {
            path: Some(path),
            map,
            trust_before_ns: started,
            dirty: false,
        }
    }

    /// The cached hash of `path`, if its metadata still matches.
    pub fn lookup(&self, path: &str, md: &Metadata) -> Option<Hash> {
        self.path.as_ref()?;
        let (st, h) = self.map.get(path)?;
        (*st == Stat::of(md)).then_some(*h)
    }

    /// Records a hash computed from a file whose metadata was `before` when
    /// opened and `after` once read; stores it only when both agree and the
    /// file is older than the racy window.
    pub fn record(&mut self, path: &str, before: &Metadata, after: &Metadata, hash: Hash) {
        if self.path.is_none() || path.contains('\n') {
            return;
        }
        let (b, a) = (Stat::of(before), Stat::of(after));
        let settled = b == a && b.mtime_ns.max(b.ctime_ns) < self.trust_before_ns;
        if settled {
            if self.map.get(path) != Some(&(b, hash)) {
                self.map.insert(path.to_owned(), (b, hash));
                self.dirty = true;
            }
        } else if b != a && self.map.remove(path).is_some() {
            // Changed while it was read: forget it.
            self.dirty = true;
        }
        // A file too fresh to cache keeps its old entry, if any: that entry
        // can never match again (the file's ctime moved on, and userland
        // cannot set it back), and leaving it spares rewriting the whole
        // cache after every edit.
    }

    /// Writes the cache if it changed (best effort).
    pub fn flush(&mut self) {
        let Some(path) = &self.path else { return };
        if !self.dirty {
            return;
        }
        let mut body = String::with_capacity(self.map.len() * 140);
        let mut keys: Vec<&String> = self.map.keys().collect();
        keys.sort();
        for k in keys {
            let (s, h) = &self.map[k];
            // Straight into the buffer: no string per line.
            let _ = writeln!(
                body,
                "{h} {} {} {} {} {} {} {k}",
                s.dev, s.ino, s.size, s.mode, s.mtime_ns, s.ctime_ns
            );
        }
        let text = format!("{MAGIC} {}\n{body}", Hash::of(body.as_bytes()).to_hex());
        let dir = durable::parent_of(path);
        // Atomic but not fsynced: after a crash the cache is the old one,
        // the new one, or fails its checksum and is rebuilt.
        if std::fs::create_dir_all(&dir).is_ok()
            && durable::write_replace(path, text.as_bytes(), 0o600).is_ok()
        {
            self.dirty = false;
        }
    }
}

/// Parses a cache file; `None` when anything is off (then it is rebuilt).
fn parse(text: &str) -> Option<HashMap<String, (Stat, Hash)>> {
    let (head, body) = text.split_once('\n')?;
    let sum = head.strip_prefix(MAGIC)?.trim();
    if Hash::parse(sum).ok()? != Hash::of(body.as_bytes()) {
        return None;
    }
    let mut map = HashMap::with_capacity(body.len() / 128);
    for line in body.lines() {
        let mut it = line.splitn(8, ' ');
        let h = Hash::parse(it.next()?).ok()?;
        let st = Stat {
            dev: it.next()?.parse().ok()?,
            ino: it.next()?.parse().ok()?,
            size: it.next()?.parse().ok()?,
            mode: it.next()?.parse().ok()?,
            mtime_ns: it.next()?.parse().ok()?,
            ctime_ns: it.next()?.parse().ok()?,
        };
        map.insert(it.next()?.to_owned(), (st, h));
    }
    Some(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"one").unwrap();
        (d, f)
    }

    fn age(p: &Path, secs: u64) {
        let t = SystemTime::now() - Duration::from_secs(secs);
        std::fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    #[test]
    fn fresh_files_are_not_trusted_settled_ones_are() {
        let (d, f) = setup();
        let mut c = StatCache::load(Some(d.path()), Path::new("/repo"));
        let md = std::fs::symlink_metadata(&f).unwrap();
        c.record("~/f", &md, &md, Hash::of(b"one"));
        // mtime is now (and so is ctime): inside the racy window.
        assert_eq!(c.lookup("~/f", &md), None);
        age(&f, 10);
        let md = std::fs::symlink_metadata(&f).unwrap();
        c.record("~/f", &md, &md, Hash::of(b"one"));
        // An old mtime does not help: set_modified just bumped the ctime.
        assert_eq!(c.lookup("~/f", &md), None);
        // A run starting well after the last change trusts it.
        c.trust_before_ns = i128::MAX;
        c.record("~/f", &md, &md, Hash::of(b"one"));
        assert_eq!(c.lookup("~/f", &md), Some(Hash::of(b"one")));
        // Stat changing while it was hashed: not stored, old entry dropped.
        let other = std::fs::symlink_metadata(d.path()).unwrap();
        c.record("~/f", &md, &other, Hash::of(b"one"));
        assert_eq!(c.lookup("~/f", &md), None);
    }

    #[test]
    fn same_size_rewrite_with_old_mtime_is_seen() {
        // Simulate an entry cached long ago (old ctime) and a rewrite that
        // keeps size and mtime: the real ctime moves, so no match.
        let (d, f) = setup();
        let mut c = StatCache::load(Some(d.path()), Path::new("/repo"));
        let md = std::fs::symlink_metadata(&f).unwrap();
        let mut old = Stat::of(&md);
        old.ctime_ns -= 60_000_000_000;
        old.mtime_ns -= 60_000_000_000;
        c.map.insert("~/f".into(), (old, Hash::of(b"one")));
        std::fs::write(&f, b"two").unwrap();
        let md = std::fs::symlink_metadata(&f).unwrap();
        assert_eq!(c.lookup("~/f", &md), None);
    }

    #[test]
    fn an_edit_inside_the_racy_window_leaves_the_cache_clean() {
        let (d, f) = setup();
        let mut c = StatCache::load(Some(d.path()), Path::new("/repo"));
        c.trust_before_ns = i128::MAX;
        let md = std::fs::symlink_metadata(&f).unwrap();
        c.record("~/f", &md, &md, Hash::of(b"one"));
        c.flush();
        assert!(!c.dirty);
        // Edited just now: not cached, nothing to write, and the old entry
        // cannot vouch for the new state.
        c.trust_before_ns = 0;
        std::fs::write(&f, b"two").unwrap();
        let now = std::fs::symlink_metadata(&f).unwrap();
        c.record("~/f", &now, &now, Hash::of(b"two"));
        assert!(!c.dirty, "a fresh file made the cache dirty");
        assert_eq!(c.lookup("~/f", &now), None);
    }

    #[test]
    fn round_trips_and_rejects_damage() {
        let d = tempfile::tempdir().unwrap();
        let mut c = StatCache::load(Some(d.path()), Path::new("/repo"));
        c.trust_before_ns = i128::MAX;
        let f = d.path().join("x");
        std::fs::write(&f, b"x").unwrap();
        let md = std::fs::symlink_metadata(&f).unwrap();
        c.record("~/a b", &md, &md, Hash::of(b"x"));
        c.flush();
        let again = StatCache::load(Some(d.path()), Path::new("/repo"));
        assert_eq!(again.lookup("~/a b", &md), Some(Hash::of(b"x")));
        // Damage any byte: the whole cache is ignored.
        let p = again.path.clone().unwrap();
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("junk\n");
        std::fs::write(&p, text).unwrap();
        let damaged = StatCache::load(Some(d.path()), Path::new("/repo"));
        assert_eq!(damaged.lookup("~/a b", &md), None);
    }
}
