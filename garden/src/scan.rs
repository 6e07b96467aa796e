//! One look at the disk for one run.
//!
//! `status`, `checkpoint` and the incoming check of `pull` first call
//! [`Tx::scan`]: per window of [`WINDOW`] selected entries, it
//! `lstat`s each on all cores, hashes the regular files the stat cache
//! cannot vouch for (also on all cores), and, for a checkpoint, copies the
//! files whose hash moved into the store right away. What it found is a
//! [`Scan`]; the per-entry pass that follows (in manifest order, one
//! thread) takes each entry's [`Found`] and consumes it, and taking the
//! first entry past a window scans the next one. So what a scan holds is
//! bounded by the window, not by the manifest (at 100,000 entries, holding
//! every entry's findings at once was 90 MB of a status filling the cache).
//! An entry the scan did not look at ([`Found::Unknown`]) is looked at when
//! it is judged, so every other caller (restore, merge, mirror, add) passes
//! `&Found::Unknown`.
//!
//! Garden keeps the repository; the scan keeps the disk. Nothing here
//! outlives the pass it was made for.

use crate::Tx;
use std::fs::{self, Metadata};
use std::path::Path;

use sgard_manifest::EntryKind;
use sgard_store::{Hash, Spooled};

use crate::statcache::Stat;
use crate::{Garden, Result, fsx, par};

/// What the scan found for one entry.
#[derive(Debug, Default)]
#[allow(
    clippy::large_enum_variant,
    reason = "nearly every entry is Present: one Vec of them beats a box each"
)]
pub(crate) enum Found {
    /// Not looked at ahead: look when judging.
    #[default]
    Unknown,
    /// Nothing at the path.
    Missing,
    /// Something at the path.
    Present(Present),
}

/// An entry's path as the scan found it.
#[derive(Debug)]
pub(crate) struct Present {
    /// `lstat` of the path.
    md: Stat,
    /// The stat cache's hash of the file, if it vouched for `md`.
    cached: Option<Hash>,
    /// The content's SHA-256 and the metadata of the file it was read from,
    /// when the scan had to read it, and whether that same read found it
    /// no SQLite database.
    hashed: Option<Box<(Hash, Stat, bool)>>,
    /// A copy of the file already in the store (a checkpoint of a file
    /// whose hash moved) and the metadata of the file as copied.
    spooled: Option<Box<(Spooled, Metadata)>>,
}

/// From how many files to read in one window they are read on all cores.
const READ_IN_PARALLEL_FROM: usize = 8;

/// How many selected entries one window of a scan looks at together.
pub(crate) const WINDOW: usize = 8192;

/// A scan of the selected entries, looked at one window at a time as the
/// pass takes them (see the module documentation).
#[derive(Debug)]
pub(crate) struct Scan {
    /// The selected manifest indices, ascending.
    picked: Vec<usize>,
    spool: bool,
    /// Per manifest index, whether the stat cache's record stands for the
    /// disk (the watcher vouched for it: see `watch`); empty: none.
    trusted: Vec<bool>,
    /// `picked[lo..lo + found.len()]` is the window scanned.
    lo: usize,
    /// How far into the window the last entry taken was (plus one).
    taken: usize,
    /// Per entry of the window; `None`: taken, or the scan's thread for it
    /// failed (looked at again later).
    found: Vec<Option<Found>>,
}

impl Scan {
    /// What was found for manifest entry `i` ([`Found::Unknown`] once taken
    /// or when `i` was not selected). Taking entries in ascending order
    /// scans each window once.
    pub(crate) fn take(&mut self, g: &mut Tx<'_>, i: usize) -> Found {
        // Taken in order: the entry after the last one taken, else searched.
        let next = self.lo + self.taken;
        let at = if self.picked.get(next) == Some(&i) {
            next
        } else {
            match self.picked.binary_search(&i) {
                Ok(at) => at,
                Err(_) => return Found::Unknown,
            }
        };
        if at < self.lo || at >= self.lo + self.found.len() {
            let end = at
                .saturating_add(g.repo.env.window())
                .min(self.picked.len());
            // The old window goes before the new one is made, not after.
            self.found = Vec::new();
            self.found = g.scan_window(
                self.picked.get(at..end).unwrap_or(&[]),
                self.spool,
                &self.trusted,
            );
            self.lo = at;
            self.taken = 0;
        }
        self.taken = at - self.lo + 1;
        self.found
            .get_mut(at - self.lo)
            .and_then(Option::take)
            .unwrap_or_default()
    }
}

impl Found {
    /// `lstat` of the entry's path: the scan's, else taken now.
    pub(crate) fn lstat(&self, abs: &Path) -> Result<Option<Stat>> {
        match self {
            Found::Unknown => Ok(fsx::lstat(abs)?.as_ref().map(Stat::of)),
            Found::Missing => Ok(None),
            Found::Present(p) => Ok(Some(p.md)),
        }
    }

    /// The content's hash as the scan found it: the stat cache's record it
    /// vouched for, or what it read.
    pub(crate) fn hash_seen(&self) -> Option<Hash> {
        match self {
            Found::Present(p) => p.cached.or(p.hashed.as_ref().map(|h| h.0)),
            _ => None,
        }
    }

    /// The hash the stat cache vouched for when the scan looked, if `md`
    /// is still what it looked at.
    fn cached(&self, md: &Stat) -> Option<Hash> {
        match self {
            Found::Present(p) if p.md == *md => p.cached,
            _ => None,
        }
    }

    /// The scan's hash of the file, if it read one that `md` still
    /// describes.
    fn hashed(&self, md: &Stat) -> Option<Hash> {
        match self {
            Found::Present(Present {
                hashed: Some(hashed),
                ..
            }) if hashed.1 == *md => Some(hashed.0),
            _ => None,
        }
    }

    /// Whether the read that [`Found::hashed`] comes from also found the
    /// file no SQLite database (for `md`, as that).
    fn read_plain(&self, md: &Stat) -> bool {
        matches!(self, Found::Present(Present {
            hashed: Some(hashed),
            ..
        }) if hashed.1 == *md && hashed.2)
    }

    /// The scan's copy of the file in the store, taken out of it.
    pub(crate) fn take_spooled(&mut self) -> Option<(Spooled, Metadata)> {
        match self {
            Found::Present(p) => p.spooled.take().map(|b| *b),
            _ => None,
        }
    }
}

impl Garden {}

impl Tx<'_> {
    /// Looks at every entry of `picked` that applies to this machine (see
    /// the module documentation). With `spool` (a checkpoint, with a batch
    /// open), a file whose hash differs from its plain entry's is also
    /// copied into the store, on the same core: a changed file is then read
    /// twice in parallel (once to hash it, once to store it, the second time
    /// from the page cache) instead of twice in a row, and an unchanged one
    /// is still read once.
    ///
    /// The kernel's path walk is most of a cached `status`; git splits its
    /// `lstat`s across threads the same way. A path that cannot be looked at
    /// is left [`Found::Unknown`]: the pass looks again and reports its
    /// error where it belongs.
    pub(crate) fn scan(&self, picked: &[usize], spool: bool) -> Scan {
        self.scan_trusting(picked, spool, Vec::new())
    }

    /// As [`Tx::scan`], taking the stat cache's record for what is on disk
    /// for the entries `trusted` names (see `watch`).
    pub(crate) fn scan_trusting(&self, picked: &[usize], spool: bool, trusted: Vec<bool>) -> Scan {
        Scan {
            picked: picked.to_vec(),
            trusted,
            spool: spool && self.work.batch_open(),
            lo: 0,
            taken: 0,
            found: Vec::new(),
        }
    }

    /// Looks at the entries `window` names (manifest indices): one
    /// [`Found`] per index, in the same order.
    fn scan_window(
        &mut self,
        window: &[usize],
        spool: bool,
        trusted: &[bool],
    ) -> Vec<Option<Found>> {
        let files = &self.repo.manifest.files;
        let wanted: Vec<bool> = window
            .iter()
            .map(|&i| {
                files
                    .get(i)
                    .is_some_and(|e| self.repo.applies(e).unwrap_or(false))
            })
            .collect();
        // lstat, and the stat cache's hash if it vouches for the file; each
        // result straight into its entry's slot.
        let cache = &self.work.statcache;
        let env = &self.repo.env;
        let mut found = par::map_indices_with(window.len(), 512, Folder::default, |folder, k| {
            if !wanted[k] {
                return Found::Unknown;
            }
            let e = &files[window[k]];
            if trusted.get(window[k]) == Some(&true)
                && let Some((md, hash)) = cache.record_near(&e.path, &mut folder.hint)
            {
                return Found::Present(Present {
                    md,
                    cached: Some(hash),
                    hashed: None,
                    spooled: None,
                });
            }
            match folder.lstat(&env.expand(&e.path)) {
                Err(_) => Found::Unknown,
                Ok(None) => Found::Missing,
                Ok(Some(md)) => {
                    let cached = (md.is_file() && e.kind == EntryKind::File)
                        .then(|| cache.lookup_stat_near(&e.path, &md, &mut folder.hint))
                        .flatten();
                    Found::Present(Present {
                        md,
                        cached,
                        hashed: None,
                        spooled: None,
                    })
                }
            }
        });
        // The files the cache cannot vouch for are read: (position in the
        // window, manifest index, whether it surely differs from what is
        // stored: the cache saw the stored content on disk at another
        // size). Only how it is read depends on it.
        let mut hint = 0;
        let work: Vec<(usize, usize, bool, u64)> = found
            .iter()
            .zip(window)
            .enumerate()
            .filter_map(|(k, (f, &i))| match f {
                Some(Found::Present(p))
                    if p.cached.is_none() && p.md.is_file() && files[i].kind == EntryKind::File =>
                {
                    let e = &files[i];
                    let resized = cache
                        .record_near(&e.path, &mut hint)
                        .is_some_and(|(st, h)| Some(h) == e.hash && st.len() != p.md.len());
                    Some((k, i, resized, p.md.len()))
                }
                _ => None,
            })
            .collect();
        // A few files are hashed as they are judged: threads would cost
        // more. From a handful on they pay (a changed file is read, hashed
        // and copied: a tenth of a millisecond and more, where starting
        // the threads is a few hundredths).
        if work.len() < READ_IN_PARALLEL_FROM {
            return found;
        }
        let store = &self.repo.store;
        let big = self.chunk_threshold().unwrap_or(u64::MAX);
        let results = par::map(&work, READ_IN_PARALLEL_FROM, |&(_, i, resized, len)| {
            let e = &files[i];
            let abs = env.expand(&e.path);
            // A file that cannot hold the stored content any more is copied
            // into the store as it is hashed: read once, hashed once.
            let storable = |len: u64| spool && !e.encrypted && !e.locked && len < big;
            if resized
                && storable(len)
                && let Some(read) = hash_spooling(store, &abs, e.hash, big)
            {
                return Some(read);
            }
            let (h, opened) = fsx::hash_file(&abs).ok()?;
            let after = fs::symlink_metadata(&abs).ok()?;
            let storable = storable(opened.len());
            let copy = match e.hash {
                Some(expected) if storable && expected != h => {
                    spool_plain(store, &abs).map(Box::new)
                }
                _ => None,
            };
            // Stats, not `Metadata`s (144 bytes each), wait for the pass.
            Some((h, Stat::of(&opened), Stat::of(&after), copy, false))
        });
        let cache = &mut self.work.statcache;
        for (&(k, i, ..), r) in work.iter().zip(results) {
            let Some(Some((h, opened, after, copy, plain))) = r else {
                continue;
            };
            cache.record_stats(&files[i].path, opened, after, h);
            if let Some(Some(Found::Present(p))) = found.get_mut(k) {
                p.hashed = Some(Box::new((h, opened, plain)));
                p.spooled = copy;
            }
        }
        found
    }

    /// SHA-256 of a tracked file's content: the scan's when it read the
    /// file, else from the stat cache when its metadata did not change, else
    /// by reading it now (and caching the result). Also says whether the
    /// hash came from the stat cache (the file was not read this run).
    pub(crate) fn hash_tracked(
        &mut self,
        path: &str,
        abs: &Path,
        md: &Stat,
        found: &Found,
        stored: Option<Hash>,
    ) -> Result<(Hash, bool)> {
        let (h, vouched) = self.hash_raw(path, abs, md, found)?;
        // A database whose bytes differ from what is stored may hold the
        // same transactions (SQLite rewrites its file, its WAL holds rows):
        // it is compared by what a capture of it holds.
        if stored.is_some_and(|s| s != h)
            && !found.read_plain(md)
            && crate::sqlite::is_database(abs)
        {
            let tmp = self.repo.capture_sqlite(abs)?;
            let (logical, _) = fsx::hash_file(tmp.path())?;
            return Ok((logical, false));
        }
        Ok((h, vouched))
    }

    fn hash_raw(
        &mut self,
        path: &str,
        abs: &Path,
        md: &Stat,
        found: &Found,
    ) -> Result<(Hash, bool)> {
        // A hash computed this run comes first: the scan also recorded it in
        // the cache, and the cache vouches only for what an earlier run saw.
        if let Some(h) = found.hashed(md) {
            return Ok((h, false));
        }
        if let Some(h) = found.cached(md) {
            return Ok((h, true));
        }
        if let Some(h) = self.work.statcache.lookup_stat(path, md) {
            return Ok((h, true));
        }
        let (h, opened) = fsx::hash_file(abs)?;
        if let Ok(after) = fs::symlink_metadata(abs) {
            self.work.statcache.record(path, &opened, &after, h);
        }
        Ok((h, false))
    }
}

/// One scanning thread's open folder: the entries of a folder sit next to
/// each other in the manifest (it is sorted by path), so each folder is
/// opened once and its files are `fstatat`ed by name. The kernel then
/// walks one path component per file instead of every component of an
/// absolute path (what `lstat` of 100,000 files spent most of its time on).
/// Same answers as `lstat`: symlinks in the folder's own path are followed,
/// the last component is not.
/// (Windows: each file is looked up by its whole path.)
#[derive(Default)]
struct Folder {
    #[cfg(unix)]
    open: Option<(std::path::PathBuf, rustix::fd::OwnedFd)>,
    /// Where in the stat cache this thread's last lookup ended (its entries
    /// come in path order).
    hint: usize,
}

impl Folder {
    /// `lstat` of `abs` (`None`: nothing there).
    #[cfg(not(unix))]
    fn lstat(&mut self, abs: &Path) -> Result<Option<Stat>> {
        Ok(fsx::lstat(abs)?.as_ref().map(Stat::of))
    }

    /// `lstat` of `abs` (`None`: nothing there).
    #[cfg(unix)]
    fn lstat(&mut self, abs: &Path) -> Result<Option<Stat>> {
        use rustix::fs::{AtFlags, CWD, Mode, OFlags};
        use rustix::io::Errno;
        let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
            return Ok(fsx::lstat(abs)?.as_ref().map(Stat::of));
        };
        if self.open.as_ref().is_none_or(|(p, _)| p != parent) {
            self.open = None;
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            match rustix::fs::openat(CWD, parent, flags, Mode::empty()) {
                Ok(fd) => self.open = Some((parent.to_path_buf(), fd)),
                Err(Errno::NOENT | Errno::NOTDIR) => return Ok(None),
                // A folder that cannot be read but can be searched: the
                // whole path, as `lstat` takes it.
                Err(_) => return Ok(fsx::lstat(abs)?.as_ref().map(Stat::of)),
            }
        }
        let Some((_, fd)) = &self.open else {
            return Ok(fsx::lstat(abs)?.as_ref().map(Stat::of));
        };
        match rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Stat::of_stat(&st))),
            Err(Errno::NOENT | Errno::NOTDIR) => Ok(None),
            Err(_) => Ok(fsx::lstat(abs)?.as_ref().map(Stat::of)),
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// The scan's `fstatat` by folder answers what `lstat` of the whole
    /// path answers, whatever is at the path.
    #[test]
    fn a_folder_lstat_answers_as_lstat_does() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir(root.join("dir")).unwrap();
        std::fs::write(root.join("dir/file"), b"x").unwrap();
        std::fs::write(root.join("plain"), b"y").unwrap();
        std::os::unix::fs::symlink("file", root.join("dir/link")).unwrap();
        std::os::unix::fs::symlink("dir", root.join("via")).unwrap();
        let paths = [
            "dir/file",
            "dir/link",
            "dir",
            "dir/missing",
            "gone/file",
            "plain/under",
            "via/file",
            "plain",
        ];
        let mut folder = Folder::default();
        for rel in paths {
            let abs = root.join(rel);
            let want = fsx::lstat(&abs).unwrap().as_ref().map(Stat::of);
            assert_eq!(folder.lstat(&abs).unwrap(), want, "{rel}");
        }
        let link = folder.lstat(&root.join("dir/link")).unwrap().unwrap();
        assert_eq!(
            link.kind(),
            fsx::DiskKind::Link,
            "the last component is not followed"
        );
    }
}

/// Copies the file at `abs` into the store's temp folder, hashing it, with
/// its metadata as opened: `None` for a SQLite database (captured, never
/// copied) or on any error (the slower path reports it).
fn spool_plain(store: &sgard_store::Store, abs: &Path) -> Option<(Spooled, Metadata)> {
    let (f, opened) = fsx::open_regular(abs).ok()?;
    let mut f = fsx::unless_sqlite(f)?;
    Some((store.spool_blob(&mut f).ok()?, opened))
}

/// What the scan learned by reading a file: its hash, its metadata as
/// opened and after, its copy in the store when it is not `expected`, and
/// whether that read found it no SQLite database.
type Read = (Hash, Stat, Stat, Option<Box<(Spooled, Metadata)>>, bool);

/// Reads the file at `abs` once, copying it into the store's temp folder
/// while hashing it; the copy is kept only when the hash is not
/// `expected`. `None` when it cannot be read so: a SQLite database is
/// captured, not copied; a file that changed while it was read, or grew
/// to `big` bytes (chunked, not one blob), is read the slower way, which
/// also reports errors.
fn hash_spooling(
    store: &sgard_store::Store,
    abs: &Path,
    expected: Option<Hash>,
    big: u64,
) -> Option<Read> {
    let (spooled, opened) = spool_plain(store, abs)?;
    let after = fs::symlink_metadata(abs).ok()?;
    let h = spooled.hash();
    let (before, after) = (Stat::of(&opened), Stat::of(&after));
    // The header was read before the copy: only a file that stayed as it
    // was opened is known to be no database.
    if before != after || spooled.size() >= big {
        return None;
    }
    let copy = (Some(h) != expected).then(|| Box::new((spooled, opened)));
    Some((h, before, after, copy, true))
}
