//! `add`: start tracking files, symlinks and folders.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use sgard_manifest::{Entry, EntryKind};

use crate::fsx::{self, DiskKind};
use crate::scan::Found;
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
    /// Encrypt the files (also turns tracked plain files into encrypted ones).
    pub encrypt: bool,
    /// Store the files in plaintext (turns encrypted entries into plain ones).
    pub no_encrypt: bool,
    /// Track the files as templates: their content now is the source.
    pub template: bool,
    /// Mark the files as scripts run after restores.
    pub run: Option<sgard_manifest::Run>,
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
    /// Things worth telling (e.g. `--encrypt` ignored for a symlink).
    pub notes: Vec<(String, String)>,
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
        let r = self.add_inner(args, opts);
        if r.is_err() {
            // Nothing was saved: what it recorded in the base agrees with
            // nothing in the repository.
            self.base.borrow_mut().rollback();
        }
        r
    }

    fn add_inner(&mut self, args: &[OsString], opts: &AddOptions) -> Result<AddReport> {
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
        self.begin_batch();
        for (abs, kind) in roots {
            match kind {
                DiskKind::Dir if opts.dir => {
                    self.add_one(&abs, kind, opts, false, None, &mut report)?;
                }
                DiskKind::Dir => self.add_tree(&abs, opts, false, &mut report)?,
                _ => self.add_one(&abs, kind, opts, false, None, &mut report)?,
            }
        }
        // The folders above what was added, as they are here (see
        // `folders.rs`), so a restore elsewhere makes them alike.
        let added: Vec<String> = report.entries.iter().map(|(p, _)| p.clone()).collect();
        self.refresh_folders(&added);
        self.commit_batch()?;
        self.manifest.updated = self.env.now;
        self.save()?;
        self.flush_base()?;
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
        // Walk first (cheap, in order), then copy the plain files into the
        // store on all cores, then record every path in walk order.
        let mut found = Vec::new();
        let mut new = 0;
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
            if kind == DiskKind::File
                && let Some(db) = crate::sqlite::side_file_of(&path)
            {
                let db = self
                    .env
                    .to_tilde(&db)
                    .unwrap_or_else(|_| db.display().to_string());
                report.skipped.push((
                    tilde,
                    format!("part of the SQLite database {db}, which is captured whole"),
                ));
                continue;
            }
            let tracked = self.manifest.get(&tilde);
            new += usize::from(tracked.is_none());
            let plain = kind == DiskKind::File
                && !opts.encrypt
                && tracked.is_none_or(|e| !new_only && !e.encrypted);
            found.push((path, kind, plain));
        }
        // The new entries arrive in path order: room for them once, not by
        // doubling (at 100,000 files, a third more than the entries).
        self.manifest.files.reserve(new);
        self.base.borrow_mut().reserve(new);
        self.statcache.borrow_mut().reserve(new);
        // Copied into the store a window at a time: every copy waiting at
        // once held a file's metadata per path (25 MB at 100,000 files).
        let window = self.env.window();
        let mut ahead = Vec::new().into_iter();
        for (k, (path, kind, plain)) in found.iter().enumerate() {
            if k % window == 0 {
                let plain: Vec<&Path> = found
                    .get(k..)
                    .unwrap_or(&[])
                    .iter()
                    .take(window)
                    .filter(|(_, _, plain)| *plain)
                    .map(|(p, _, _)| p.as_path())
                    .collect();
                ahead = self.prespool(&plain).into_iter();
                if k == 0 {
                    self.env.crash_point("add-copied");
                }
            }
            let copy = if *plain { ahead.next().flatten() } else { None };
            sgard_store::cancel::check()?;
            // An untracked file that holds what this machine last synced was
            // untracked by another machine: mirror up leaves it untracked.
            if new_only
                && let Ok(tilde) = self.env.to_tilde(path)
                && self.manifest.get(&tilde).is_none()
                && self.untracked_elsewhere(&tilde, path)
            {
                report.skipped.push((
                    tilde,
                    "untracked on another machine since this machine last synced it; not \
                     tracked again (`sgard add` it to track it)"
                        .into(),
                ));
                continue;
            }
            // A tracked entry reached through a folder is taken from disk
            // only if the disk changed it: one another machine changed
            // since this machine last synced it (behind, conflict) is left
            // as the repository has it. Name the file to take it anyway.
            if !new_only
                && let Ok(tilde) = self.env.to_tilde(path)
                && let Some(e) = self.manifest.get(&tilde)
                && let Ok(j) = self.judge(e, false, &Found::Unknown)
                && matches!(j.state, crate::State::Behind | crate::State::Conflict)
            {
                report.skipped.push((
                    tilde,
                    format!(
                        "{} ({}); not taken from disk: `sgard add` the file itself to take it",
                        j.state.as_str(),
                        j.detail.unwrap_or_default()
                    ),
                ));
                continue;
            }
            self.add_one(path, *kind, opts, new_only, copy, report)?;
        }
        Ok(())
    }

    pub(crate) fn add_one(
        &mut self,
        abs: &Path,
        kind: DiskKind,
        opts: &AddOptions,
        new_only: bool,
        ahead: Option<(sgard_store::Spooled, std::fs::Metadata)>,
        report: &mut AddReport,
    ) -> Result<()> {
        let tilde = self.env.to_tilde(abs)?;
        if new_only && self.manifest.get(&tilde).is_some() {
            return Ok(());
        }
        let mut content = None;
        if kind == DiskKind::File
            && !opts.template
            && self.manifest.get(&tilde).is_some_and(|e| e.template)
        {
            report.skipped.push((
                tilde,
                "is a template: its rendering is never stored over its source (`sgard edit` \
                 changes the source; `sgard add --template` takes the file on disk as the new \
                 source)"
                    .into(),
            ));
            return Ok(());
        }
        if kind != DiskKind::File && (opts.template || opts.run.is_some()) {
            report.notes.push((
                tilde.clone(),
                format!(
                    "--template and --run apply to files only; {} is stored as it is",
                    kind.describe()
                ),
            ));
        }
        let mut entry = match kind {
            DiskKind::File => {
                let old = self.manifest.get(&tilde).cloned();
                let encrypt =
                    opts.encrypt || (old.as_ref().is_some_and(|e| e.encrypted) && !opts.no_encrypt);
                if encrypt {
                    let (e, sha) = self.encrypted_file_entry(&tilde, abs, old, opts.template)?;
                    content = Some(sha);
                    e
                } else if opts.template {
                    let (f, md) = fsx::open_regular(abs)?;
                    let mut source = Vec::new();
                    std::io::Read::read_to_end(
                        &mut std::io::Read::take(f, crate::template::SOURCE_MAX as u64 + 1),
                        &mut source,
                    )
                    .map_err(|err| Error::io("reading", abs, err))?;
                    if source.len() > crate::template::SOURCE_MAX {
                        return Err(Error::Unsupported {
                            path: tilde,
                            reason: format!(
                                "more than the {} MiB a template may have",
                                crate::template::SOURCE_MAX >> 20
                            ),
                        });
                    }
                    let w = self.put_source(&source)?;
                    let mut e = Entry::new(tilde.clone(), EntryKind::File, self.env.now);
                    e.hash = Some(w.hash);
                    e.mode = Some(fsx::mode_of(&md));
                    content = Some(w.hash);
                    e
                } else {
                    let (w, md) = self.store_file(abs, ahead)?;
                    let mut e = Entry::new(tilde.clone(), EntryKind::File, self.env.now);
                    e.hash = Some(w.hash);
                    e.mode = Some(fsx::mode_of(&md));
                    content = Some(w.hash);
                    e
                }
            }
            DiskKind::Link | DiskKind::Dir if opts.encrypt => {
                report.notes.push((
                    tilde.clone(),
                    format!(
                        "--encrypt applies to files only; {} is stored as it is",
                        kind.describe()
                    ),
                ));
                return self.add_one(
                    abs,
                    kind,
                    &AddOptions {
                        encrypt: false,
                        ..opts.clone()
                    },
                    new_only,
                    None,
                    report,
                );
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
        if entry.kind == EntryKind::File
            && opts.run.is_some()
            && entry.mode.is_some_and(|m| m.bits() & 0o111 == 0)
        {
            report.skipped.push((
                tilde,
                "is not executable; a script must be (`chmod +x` it, then add it with --run)"
                    .into(),
            ));
            return Ok(());
        }
        if entry.kind == EntryKind::File {
            let old = self.manifest.get(&tilde);
            entry.template = opts.template;
            entry.run = opts.run.or(old.and_then(|o| o.run));
        }
        let mode = entry.mode;
        let outcome = self.merge_added(entry, opts);
        // Disk and repository now agree on this entry: "this content".
        // The disk holds a template's source, which is what belongs there
        // only when it renders to itself; else the rendering is to come
        // (status: behind; restore writes it).
        if let Some(e) = self.manifest.get(&tilde) {
            let pending = self.template_pending(e, abs).unwrap_or_else(|err| {
                report.notes.push((
                    tilde.clone(),
                    format!(
                        "stored, but it does not render: {} (`sgard edit {tilde}` fixes it)",
                        crate::checkpoint::error_chain(&err)
                    ),
                ));
                true
            });
            if pending {
                self.base.borrow_mut().settle(
                    &tilde,
                    crate::base::BaseEntry {
                        kind: e.kind,
                        mode,
                        target: None,
                        stored: None,
                        content,
                    },
                );
            } else {
                self.settle(e, content, mode);
            }
        }
        report.entries.push((tilde, outcome));
        Ok(())
    }

    /// Whether `e` is a template whose rendering differs from what `abs`
    /// holds (its source, just added).
    fn template_pending(&self, e: &Entry, abs: &Path) -> Result<bool> {
        if !e.template {
            return Ok(false);
        }
        let source = if e.encrypted {
            self.read_plain(abs)?.0.to_vec()
        } else {
            let (mut f, _) = fsx::open_regular(abs)?;
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut f, &mut buf)
                .map_err(|err| Error::io("reading", abs, err))?;
            buf
        };
        let out = self.render_source(&e.path, &source)?;
        Ok(out != source)
    }

    /// An encrypted file entry for `abs`; the ciphertext of `old` is kept
    /// when the content did not change (no new blob, no churn).
    fn encrypted_file_entry(
        &self,
        tilde: &str,
        abs: &Path,
        old: Option<Entry>,
        template: bool,
    ) -> Result<(Entry, sgard_store::Hash)> {
        if !self.encryption_initialized() {
            return Err(crate::encrypted::not_initialized());
        }
        let (plain, md) = self.read_plain(abs)?;
        let mut e = Entry::new(tilde.to_owned(), EntryKind::File, self.env.now);
        e.encrypted = true;
        e.mode = Some(fsx::mode_of(&md));
        match old.filter(|o| o.encrypted && o.kind == EntryKind::File) {
            // Kept only where it lies as this entry needs (a template's
            // source in chunks).
            Some(o) if o.template == template && self.plain_matches_bytes(&o, &plain)? => {
                e.hash = o.hash;
                e.plaintext_mac = o.plaintext_mac;
                e.plaintext_hash = o.plaintext_hash;
            }
            _ => {
                let (h, mac, _) = self.store_encrypted(&plain, template)?;
                e.hash = Some(h);
                e.plaintext_mac = Some(mac);
            }
        }
        Ok((e, sgard_store::Hash::of(&plain)))
    }

    /// Puts a freshly read entry into the manifest, keeping what the user set
    /// before (lock, targeting) unless this command sets it.
    fn merge_added(&mut self, mut fresh: Entry, opts: &AddOptions) -> AddOutcome {
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
