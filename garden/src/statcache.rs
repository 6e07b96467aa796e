//! The stat cache: skip re-hashing files whose metadata did not change.
//!
//! Per machine and repository, a section of the index ([`crate::index`],
//! never in the portable repository): for each tracked path, `(dev, ino,
//! size, mode, mtime ns, ctime ns) → SHA-256`. A file whose `lstat`
//! matches is not read.
//!
//! Racy-clean safety, as git and borg do it: an entry is stored only when
//! the file's mtime and ctime are more than 2 seconds older than the start
//! of this run, and the file's stat was the same before and after hashing.
//! So a file rewritten in place, at the same size, within a filesystem's
//! timestamp granule of being cached can never match a stored entry: any
//! later write gives it a newer ctime, which userland cannot set back. A
//! missing, damaged or foreign index starts the cache empty, never trusted.

use std::fs::Metadata;
use std::time::{SystemTime, UNIX_EPOCH};

use sgard_store::Hash;

pub use crate::index::RACY_WINDOW;
use sgard_manifest::codec::{Reader, Writer};

/// The metadata a cache entry is keyed on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Stat {
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    /// Nanoseconds since the epoch; [`UNKNOWN_NS`] when out of an i64's
    /// range (kept at 8 bytes: 100,000 records are loaded by every run).
    mtime_ns: i64,
    ctime_ns: i64,
}

/// A time out of an i64's range of nanoseconds (before 1678, after 2262):
/// such a stat is never recorded.
const UNKNOWN_NS: i64 = i64::MIN;

/// `secs` and `nsec` as nanoseconds since the epoch, or [`UNKNOWN_NS`].
/// (Their types differ between platforms and between `stat` and
/// `Metadata`.)
fn ns(secs: impl TryInto<i64>, nsec: impl TryInto<i64>) -> i64 {
    let (Ok(secs), Ok(nsec)) = (secs.try_into(), nsec.try_into()) else {
        return UNKNOWN_NS;
    };
    secs.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(nsec))
        .filter(|n| *n != UNKNOWN_NS)
        .unwrap_or(UNKNOWN_NS)
}

/// The stat cache's records, by path.
pub(crate) type Table = crate::pathtable::PathTable<(Stat, Hash)>;

impl Stat {
    /// The stat of `st`, as `fstatat` returns it (the same values as
    /// [`Stat::of`] the metadata of the same file).
    #[cfg(unix)]
    pub fn of_stat(st: &rustix::fs::Stat) -> Self {
        Stat {
            dev: sgard_store::durable::dev_of(st),
            ino: st.st_ino,
            size: u64::try_from(st.st_size).unwrap_or(0),
            mode: sgard_store::durable::mode_of(st),
            mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
            ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
        }
    }

    /// What kind of file it is.
    pub fn kind(&self) -> crate::fsx::DiskKind {
        crate::fsx::DiskKind::of_mode(self.mode)
    }

    /// Whether it is a regular file.
    pub fn is_file(&self) -> bool {
        self.kind() == crate::fsx::DiskKind::File
    }

    /// Its permission bits.
    pub fn perm(&self) -> sgard_manifest::Mode {
        sgard_manifest::Mode::from_st_mode(self.mode)
    }

    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        self.size
    }

    pub fn of(md: &Metadata) -> Self {
        let (dev, ino) = crate::platform::dev_ino(md);
        let (m, c) = (crate::platform::mtime(md), crate::platform::ctime(md));
        Stat {
            dev,
            ino,
            size: md.len(),
            mode: crate::platform::st_mode(md),
            mtime_ns: ns(m.0, m.1),
            ctime_ns: ns(c.0, c.1),
        }
    }

    /// Whether the times fit the index's encoding (nanoseconds in an i64:
    /// until the year 2262).
    fn encodable(&self) -> bool {
        self.mtime_ns != UNKNOWN_NS && self.ctime_ns != UNKNOWN_NS
    }

    pub(crate) fn put(&self, w: &mut Writer) {
        w.u64(self.dev);
        w.u64(self.ino);
        w.u64(self.size);
        w.u32(self.mode);
        w.i64(self.mtime_ns);
        w.i64(self.ctime_ns);
    }

    pub(crate) fn get(r: &mut Reader<'_>) -> Option<Self> {
        Some(Stat {
            dev: r.u64()?,
            ino: r.u64()?,
            size: r.u64()?,
            mode: r.u32()?,
            mtime_ns: r.i64()?,
            ctime_ns: r.i64()?,
        })
    }
}

/// The cache of one repository on this machine.
#[derive(Debug, Default)]
pub(crate) struct StatCache {
    table: Table,
    /// Off (`--no-cache`): nothing is looked up or recorded, and what was
    /// loaded is written back as it was.
    enabled: bool,
    /// Files changed at or after this (ns since the epoch) are not stored.
    trust_before_ns: i64,
    dirty: bool,
}

impl StatCache {
    /// The cache holding `table` (from the index), used only if `enabled`.
    pub fn new(table: Table, enabled: bool) -> Self {
        let started = SystemTime::now()
            .checked_sub(RACY_WINDOW)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        StatCache {
            table,
            enabled,
            trust_before_ns: started,
            dirty: false,
        }
    }

    /// The cached hash of `path`, if its metadata still matches.
    #[cfg(test)]
    pub fn lookup(&self, path: &str, md: &Metadata) -> Option<Hash> {
        self.lookup_stat(path, &Stat::of(md))
    }

    /// The cached hash of `path`, if it was cached under `now`.
    pub fn lookup_stat(&self, path: &str, now: &Stat) -> Option<Hash> {
        self.lookup_stat_near(path, now, &mut 0)
    }

    /// As [`StatCache::lookup_stat`], looking near `hint` first (see
    /// [`crate::pathtable::PathTable::get_near`]).
    pub fn lookup_stat_near(&self, path: &str, now: &Stat, hint: &mut usize) -> Option<Hash> {
        if !self.enabled {
            return None;
        }
        let (st, h) = self.table.get_near(path, hint)?;
        (st == now).then_some(*h)
    }

    /// The record of `path` itself, looking near `hint` first: what a
    /// watcher's "unchanged since" vouches for without a `stat`.
    pub fn record_near(&self, path: &str, hint: &mut usize) -> Option<(Stat, Hash)> {
        if !self.enabled {
            return None;
        }
        self.table.get_near(path, hint).copied()
    }

    /// Records a hash computed from a file whose metadata was `before` when
    /// opened and `after` once read; stores it only when both agree and the
    /// file is older than the racy window.
    pub fn record(&mut self, path: &str, before: &Metadata, after: &Metadata, hash: Hash) {
        self.record_stats(path, Stat::of(before), Stat::of(after), hash);
    }

    /// As [`StatCache::record`], from the two files' [`Stat`]s.
    pub fn record_stats(&mut self, path: &str, b: Stat, a: Stat, hash: Hash) {
        if !self.enabled {
            return;
        }
        let settled = b == a && b.mtime_ns.max(b.ctime_ns) < self.trust_before_ns;
        if settled && b.encodable() {
            if self.table.insert(path, (b, hash)) != Some((b, hash)) {
                self.dirty = true;
            }
        } else if b != a && self.table.remove(path).is_some() {
            // Changed while it was read: forget it.
            self.dirty = true;
        }
        // A file too fresh to cache keeps its old entry, if any: that entry
        // can never match again (the file's ctime moved on, and userland
        // cannot set it back), and leaving it spares rewriting the whole
        // index after every edit.
    }

    /// Makes room for `n` more records (see
    /// [`crate::pathtable::PathTable::reserve`]).
    pub fn reserve(&mut self, n: usize) {
        if self.enabled {
            self.table.reserve(n);
        }
    }

    /// Whether it changed since loaded or last saved.
    pub fn dirty(&self) -> bool {
        self.dirty
    }

    /// What to save: every entry, in path order.
    pub fn entries(&self) -> Vec<(&str, &(Stat, Hash))> {
        self.table.sorted()
    }

    /// It was saved.
    pub fn saved(&mut self) {
        self.dirty = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};
    use std::time::Duration;

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
        let mut c = StatCache::new(Table::default(), true);
        let md = std::fs::symlink_metadata(&f).unwrap();
        c.record("~/f", &md, &md, Hash::of(b"one"));
        // mtime is now (and so is ctime): inside the racy window.
        assert_eq!(c.lookup("~/f", &md), None);
        age(&f, 10);
        let md = std::fs::symlink_metadata(&f).unwrap();
        c.record("~/f", &md, &md, Hash::of(b"one"));
        // An old mtime does not help: set_modified just bumped the ctime.
        // (Windows has no change time in stable Rust's metadata: there the
        // write time stands in, and a file whose write time was set back
        // is trusted; see `platform`.)
        if cfg!(unix) {
            assert_eq!(c.lookup("~/f", &md), None);
        }
        // A run starting well after the last change trusts it.
        c.trust_before_ns = i64::MAX;
        c.record("~/f", &md, &md, Hash::of(b"one"));
        assert_eq!(c.lookup("~/f", &md), Some(Hash::of(b"one")));
        // Stat changing while it was hashed: not stored, old entry dropped.
        let other = std::fs::symlink_metadata(d.path()).unwrap();
        c.record("~/f", &md, &other, Hash::of(b"one"));
        assert_eq!(c.lookup("~/f", &md), None);
    }

    #[cfg(unix)]
    #[test]
    fn fstatat_and_metadata_give_the_same_stat() {
        let (d, f) = setup();
        for p in [f.as_path(), d.path()] {
            let md = std::fs::symlink_metadata(p).unwrap();
            let st = rustix::fs::statat(rustix::fs::CWD, p, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .unwrap();
            assert_eq!(Stat::of_stat(&st), Stat::of(&md));
            assert_eq!(Stat::of(&md).kind(), crate::fsx::DiskKind::of(&md));
            assert_eq!(Stat::of(&md).perm(), crate::fsx::mode_of(&md));
        }
    }

    #[test]
    fn same_size_rewrite_with_old_mtime_is_seen() {
        // Simulate an entry cached long ago (old ctime) and a rewrite that
        // keeps size and mtime: the real ctime moves, so no match.
        let (_d, f) = setup();
        let mut c = StatCache::new(Table::default(), true);
        let md = std::fs::symlink_metadata(&f).unwrap();
        let mut old = Stat::of(&md);
        old.ctime_ns -= 60_000_000_000;
        old.mtime_ns -= 60_000_000_000;
        c.table.insert("~/f", (old, Hash::of(b"one")));
        std::fs::write(&f, b"two").unwrap();
        let md = std::fs::symlink_metadata(&f).unwrap();
        assert_eq!(c.lookup("~/f", &md), None);
    }

    #[test]
    fn an_edit_inside_the_racy_window_leaves_the_cache_clean() {
        let (_d, f) = setup();
        let mut c = StatCache::new(Table::default(), true);
        c.trust_before_ns = i64::MAX;
        let md = std::fs::symlink_metadata(&f).unwrap();
        c.record("~/f", &md, &md, Hash::of(b"one"));
        c.saved();
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
    fn a_disabled_cache_vouches_for_nothing_and_keeps_what_it_held() {
        let (_d, f) = setup();
        let md = std::fs::symlink_metadata(&f).unwrap();
        let mut table = Table::default();
        assert!(table.push_sorted("~/f", (Stat::of(&md), Hash::of(b"one"))));
        let mut c = StatCache::new(table, false);
        assert_eq!(c.lookup("~/f", &md), None);
        c.trust_before_ns = i64::MAX;
        c.record("~/g", &md, &md, Hash::of(b"one"));
        assert!(!c.dirty());
        assert_eq!(
            c.entries(),
            vec![("~/f", &(Stat::of(&md), Hash::of(b"one")))]
        );
    }
}
