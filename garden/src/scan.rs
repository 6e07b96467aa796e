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

use crate::{Garden, Result, fsx, par, statcache};

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
    md: Metadata,
    /// The stat cache's hash of the file, if it vouched for `md`.
    cached: Option<Hash>,
    /// The content's SHA-256 and the metadata of the file it was read from,
    /// when the scan had to read it.
    hashed: Option<Box<(Hash, Metadata)>>,
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
    pub(crate) fn lstat(&self, abs: &Path) -> Result<Option<Metadata>> {
        match self {
            Found::Unknown => fsx::lstat(abs),
            Found::Missing => Ok(None),
            Found::Present(p) => Ok(Some(p.md.clone())),
        }
    }

    /// The hash the stat cache vouched for when the scan looked, if `md`
    /// is still what it looked at.
    fn cached(&self, md: &Metadata) -> Option<Hash> {
        match self {
            Found::Present(p)
                if p.cached.is_some() && statcache::Stat::of(&p.md) == statcache::Stat::of(md) =>
            {
                p.cached
            }
            _ => None,
        }
    }

    /// The scan's hash of the file, if it read one that `md` still
    /// describes.
    fn hashed(&self, md: &Metadata) -> Option<(Hash, Metadata)> {
        match self {
            Found::Present(Present {
                hashed: Some(hashed),
                ..
            }) if statcache::Stat::of(&hashed.1) == statcache::Stat::of(md) => {
                Some((hashed.0, hashed.1.clone()))
            }
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
        let found = par::map_indices(files.len(), 512, |i| {
            if !wanted[i] {
                return Found::Unknown;
            }
            let e = &files[i];
            match fsx::lstat(&env.expand(&e.path)) {
                Err(_) => Found::Unknown,
                Ok(None) => Found::Missing,
                Ok(Some(md)) => {
                    let cached = (md.is_file() && e.kind == EntryKind::File)
                        .then(|| cache.lookup(&e.path, &md))
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
                p.hashed = Some(Box::new((h, opened)));
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
        md: &Metadata,
        found: &Found,
    ) -> Result<(Hash, Metadata, bool)> {
        // A hash computed this run comes first: the scan also recorded it in
        // the cache, and the cache vouches only for what an earlier run saw.
        if let Some((h, opened)) = found.hashed(md) {
            return Ok((h, opened, false));
        }
        if let Some(h) = found.cached(md) {
            return Ok((h, md.clone(), true));
        }
        if let Some(h) = self.statcache.borrow().lookup(path, md) {
            return Ok((h, md.clone(), true));
        }
        let (h, opened) = fsx::hash_file(abs)?;
        if let Ok(after) = fs::symlink_metadata(abs) {
            self.statcache.borrow_mut().record(path, &opened, &after, h);
        }
        Ok((h, opened, false))
    }
}
