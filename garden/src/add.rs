//! `add`: start tracking files, symlinks and folders.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use sgard_manifest::{Entry, EntryKind};

use crate::fsx::{self, DiskKind};
use crate::{Error, Garden, Result};

/// Flags of `add`.
#[derive(Clone, Debug, Default)]
pub struct AddOptions {
    /// Track folders themselves (their mode), not their contents.
    pub dir: bool,
    /// Mark the entries locked (repository-authoritative).
    pub lock: bool,
    /// Restrict the entries to machines matching one of these labels.
    pub only: Vec<String>,
    /// Keep the entries off machines matching one of these labels.
    pub never: Vec<String>,
}

/// What happened to one path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AddOutcome {
    /// Newly tracked.
    Added,
    /// Already tracked; content or flags were refreshed.
    Refreshed,
    /// Already tracked and identical.
    Unchanged,
}

/// The result of [`Garden::add`].
#[derive(Clone, Debug, Default)]
pub struct AddReport {
    /// Each entry touched, in order.
    pub entries: Vec<(String, AddOutcome)>,
    /// Paths skipped (FIFOs, sockets, devices, unreadable names), with why.
    pub skipped: Vec<(String, String)>,
}

impl AddReport {
    /// How many entries had `outcome`.
    pub fn count(&self, outcome: AddOutcome) -> usize {
        self.entries.iter().filter(|(_, o)| *o == outcome).count()
    }
}

impl Garden {
    /// Tracks `args`: files and symlinks directly, folders recursively in
    /// lexical order (or as folder entries with `opts.dir`). Paths already
    /// tracked are refreshed, never duplicated. FIFOs, sockets and devices
    /// are skipped (never opened) and reported.
    ///
    /// Every argument is checked before anything is stored: a missing one
    /// fails the command and the manifest is unchanged.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::InsideRepo`], [`Error::BadPath`], or any
    /// read or store error (the manifest is then not saved).
    pub fn add(&mut self, args: &[OsString], opts: &AddOptions) -> Result<AddReport> {
        if !opts.only.is_empty() && !opts.never.is_empty() {
            return Err(Error::Invalid(
                "--only and --never are mutually exclusive".into(),
            ));
        }
        let mut roots = Vec::new();
        for a in args {
            let abs = self.env.resolve(a);
            let Some(md) = fsx::lstat(&abs)? else {
                return Err(Error::NotFound(abs));
            };
            if self.is_in_repo(&abs) {
                return Err(Error::InsideRepo(abs));
            }
            let tilde = self.env.to_tilde(&abs)?;
            if let Some(rule) = self.manifest.excluded_by(&tilde) {
                return Err(Error::Excluded {
                    path: tilde,
                    rule: rule.to_owned(),
                });
            }
            roots.push((abs, DiskKind::of(&md)));
        }
        let mut report = AddReport::default();
        for (abs, kind) in roots {
            match kind {
                DiskKind::Dir if opts.dir => self.add_one(&abs, kind, opts, false, &mut report)?,
                DiskKind::Dir => self.add_tree(&abs, opts, false, &mut report)?,
                _ => self.add_one(&abs, kind, opts, false, &mut report)?,
            }
        }
        self.manifest.updated = self.env.now;
        self.save()?;
        Ok(report)
    }

    pub(crate) fn add_tree(
        &mut self,
        root: &Path,
        opts: &AddOptions,
        new_only: bool,
        report: &mut AddReport,
    ) -> Result<()> {
        let mut walk = walkdir::WalkDir::new(root)
            .follow_links(false)
            .sort_by_file_name()
            .into_iter();
        while let Some(item) = walk.next() {
            let ent = item.map_err(|e| walk_error(root, e))?;
            let md = ent.metadata().map_err(|e| walk_error(ent.path(), e))?;
            let kind = DiskKind::of(&md);
            let path = ent.path().to_path_buf();
            let Ok(tilde) = self.env.to_tilde(&path) else {
                report
                    .skipped
                    .push((path.display().to_string(), "name cannot be stored".into()));
                if kind == DiskKind::Dir {
                    walk.skip_current_dir();
                }
                continue;
            };
            if self.manifest.excluded_by(&tilde).is_some() {
                if kind == DiskKind::Dir {
                    walk.skip_current_dir();
                }
                continue;
            }
            if kind == DiskKind::Dir {
                if self.is_repo_dir(&md) {
                    walk.skip_current_dir();
                }
                continue;
            }
            self.add_one(&path, kind, opts, new_only, report)?;
        }
        Ok(())
    }

    pub(crate) fn add_one(
        &mut self,
        abs: &Path,
        kind: DiskKind,
        opts: &AddOptions,
        new_only: bool,
        report: &mut AddReport,
    ) -> Result<()> {
        let tilde = self.env.to_tilde(abs)?;
        if new_only && self.manifest.get(&tilde).is_some() {
            return Ok(());
        }
        let entry = match kind {
            DiskKind::File => {
                if self.manifest.get(&tilde).is_some_and(|e| e.encrypted) {
                    return Err(Error::Unsupported {
                        path: tilde,
                        reason: "entry is encrypted and this sgard cannot encrypt yet; \
                                 refusing to store it in plaintext"
                            .into(),
                    });
                }
                let (mut f, md) = fsx::open_regular(abs)?;
                let w = self.store.write(&mut f).map_err(|e| match e {
                    sgard_store::Error::Source(source) => Error::io("reading", abs, source),
                    other => Error::Store(other),
                })?;
                let mut e = Entry::new(tilde.clone(), EntryKind::File, self.env.now);
                e.hash = Some(w.hash);
                e.mode = Some(fsx::mode_of(&md));
                e
            }
            DiskKind::Link => {
                let md = fsx::lstat(abs)?.ok_or_else(|| Error::NotFound(abs.to_path_buf()))?;
                let mut e = Entry::new(tilde.clone(), EntryKind::Link, self.env.now);
                e.target = Some(fsx::read_link(abs)?);
                e.mode = Some(fsx::mode_of(&md));
                e
            }
            DiskKind::Dir => {
                let md = fsx::lstat(abs)?.ok_or_else(|| Error::NotFound(abs.to_path_buf()))?;
                let mut e = Entry::new(tilde.clone(), EntryKind::Directory, self.env.now);
                e.mode = Some(fsx::mode_of(&md));
                e
            }
            DiskKind::Fifo | DiskKind::Socket | DiskKind::Device => {
                report.skipped.push((
                    tilde,
                    format!(
                        "is {}; only files, symlinks and folders are tracked",
                        kind.describe()
                    ),
                ));
                return Ok(());
            }
        };
        let outcome = self.merge(entry, opts);
        report.entries.push((tilde, outcome));
        Ok(())
    }

    /// Puts a freshly read entry into the manifest, keeping what the user set
    /// before (lock, targeting) unless this command sets it.
    fn merge(&mut self, mut fresh: Entry, opts: &AddOptions) -> AddOutcome {
        let old = self.manifest.get(&fresh.path).cloned();
        fresh.locked = opts.lock;
        fresh.only.clone_from(&opts.only);
        fresh.never.clone_from(&opts.never);
        let Some(old) = old else {
            self.manifest.upsert(fresh);
            return AddOutcome::Added;
        };
        fresh.locked |= old.locked;
        if opts.only.is_empty() && opts.never.is_empty() {
            fresh.only = old.only.clone();
            fresh.never = old.never.clone();
        }
        let same_content =
            old.kind == fresh.kind && old.hash == fresh.hash && old.target == fresh.target;
        if same_content {
            fresh.updated = old.updated;
        }
        if fresh == old {
            return AddOutcome::Unchanged;
        }
        self.manifest.upsert(fresh);
        AddOutcome::Refreshed
    }
}

fn walk_error(at: &Path, e: walkdir::Error) -> Error {
    let path = e
        .path()
        .map_or_else(|| PathBuf::from(at), Path::to_path_buf);
    Error::io("walking", path, e.into())
}
