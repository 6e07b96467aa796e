//! One look at the disk for one run.
//!
//! `status`, `checkpoint` and the incoming check of `pull` first call
//! [`Garden::scan`]: it `lstat`s every selected entry on all cores, hashes
//! the regular files the stat cache cannot vouch for (also on all cores),
//! and, for a checkpoint, copies the files whose hash moved into the store
//! right away. What it found is a [`Scan`], indexed like the manifest's
//! entries; the per-entry pass that follows (in manifest order, one thread)
//! takes each entry's [`Found`] and consumes it. An entry the scan did not
//! look at ([`Found::Unknown`]) is looked at when it is judged, so every
//! other caller (restore, merge, mirror, add) passes `&Found::Unknown`.
//!
//! Garden keeps the repository; the scan keeps the disk. Nothing here
//! outlives the pass it was made for.

use std::fs::{self, Metadata};
use std::path::{Path, PathBuf};

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
    /// when the scan had to read it.
    hashed: Option<Box<(Hash, Stat)>>,
    /// A copy of the file already in the store (a checkpoint of a file
    /// whose hash moved) and the metadata of the file as copied.
    spooled: Option<Box<(Spooled, Metadata)>>,
}

/// What the scan found, one [`Found`] per manifest entry.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// `None`: the scan's thread for it failed (looked at again later).
    found: Vec<Option<Found>>,
}

impl Scan {
    /// What was found for entry `i` ([`Found::Unknown`] once taken or when
    /// `i` was not scanned).
    pub(crate) fn take(&mut self, i: usize) -> Found {
        self.found
            .get_mut(i)
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

    /// The scan's copy of the file in the store, taken out of it.
    pub(crate) fn take_spooled(&mut self) -> Option<(Spooled, Metadata)> {
        match self {
            Found::Present(p) => p.spooled.take().map(|b| *b),
            _ => None,
        }
    }
}

impl Garden {
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
        let spool = spool && self.batch_open();
        let files = &self.manifest.files;
        let mut wanted = vec![false; files.len()];
        for &i in picked {
            if let Some(e) = files.get(i) {
                wanted[i] = self.applies(e).unwrap_or(false);
            }
        }
        // lstat, and the stat cache's hash if it vouches for the file; each
        // result straight into its entry's slot.
        let borrowed = self.statcache.borrow();
        let cache = &*borrowed;
        let env = &self.env;
        let found = par::map_indices_with(files.len(), 512, Folder::default, |folder, i| {
            if !wanted[i] {
                return Found::Unknown;
            }
            let e = &files[i];
            match folder.lstat(&env.expand(&e.path)) {
                Err(_) => Found::Unknown,
                Ok(None) => Found::Missing,
                Ok(Some(md)) => {
                    let cached = (md.is_file() && e.kind == EntryKind::File)
                        .then(|| cache.lookup_stat(&e.path, &md))
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
        drop(borrowed);
        let mut scan = Scan { found };
        // The files the cache cannot vouch for are read.
        let work: Vec<(usize, PathBuf)> = scan
            .found
            .iter()
            .enumerate()
            .filter_map(|(i, f)| match f {
                Some(Found::Present(p))
                    if p.cached.is_none() && p.md.is_file() && files[i].kind == EntryKind::File =>
                {
                    Some((i, self.env.expand(&files[i].path)))
                }
                _ => None,
            })
            .collect();
        // A few files are hashed as they are judged: threads would cost more.
        if work.len() < 64 {
            return scan;
        }
        let store = &self.store;
        let results = par::map(&work, 64, |(i, abs)| {
            let i = *i;
            let (h, opened) = fsx::hash_file(abs).ok()?;
            let after = fs::symlink_metadata(abs).ok()?;
            let e = &files[i];
            let storable = spool && !e.encrypted && !e.locked;
            let copy = match e.hash {
                Some(expected) if storable && expected != h => fsx::open_regular(abs)
                    .ok()
                    .and_then(|(mut f, md)| Some((store.spool_blob(&mut f).ok()?, md))),
                _ => None,
            };
            Some((h, opened, after, copy))
        });
        let mut cache = self.statcache.borrow_mut();
        for (&(i, _), r) in work.iter().zip(results) {
            let Some(Some((h, opened, after, copy))) = r else {
                continue;
            };
            cache.record(&files[i].path, &opened, &after, h);
            if let Some(Found::Present(p)) = &mut scan.found[i] {
                p.hashed = Some(Box::new((h, Stat::of(&opened))));
                p.spooled = copy.map(Box::new);
            }
        }
        scan
    }

    /// SHA-256 of a tracked file's content: the scan's when it read the
    /// file, else from the stat cache when its metadata did not change, else
    /// by reading it now (and caching the result). Also says whether the
    /// hash came from the stat cache (the file was not read this run).
    pub(crate) fn hash_tracked(
        &self,
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
        if let Some(h) = self.statcache.borrow().lookup_stat(path, md) {
            return Ok((h, true));
        }
        let (h, opened) = fsx::hash_file(abs)?;
        if let Ok(after) = fs::symlink_metadata(abs) {
            self.statcache.borrow_mut().record(path, &opened, &after, h);
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
#[derive(Default)]
struct Folder {
    open: Option<(PathBuf, rustix::fd::OwnedFd)>,
}

impl Folder {
    /// `lstat` of `abs` (`None`: nothing there).
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

#[cfg(test)]
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
