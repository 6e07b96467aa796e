//! `add`: start tracking files, symlinks and folders.

use crate::Tx;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use sgard_manifest::{Entry, EntryKind};

use crate::fsx::{self, DiskKind};
use crate::own::{ANOTHER_REPOSITORY, What};
use crate::scan::Found;
use crate::why::{Remedy, Why};
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
    /// Follow symlinks: one to a folder is walked as the folder (its files
    /// tracked under the link's path); one to a file is tracked as a link
    /// and the file it points to is tracked too.
    pub follow: bool,
    /// Set by `external add` and `external refresh`: new paths inside an
    /// external are its own files. Otherwise they are refused (given) or
    /// skipped (met in a folder): the next refresh replaces what is there.
    pub within_external: bool,
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
    pub skipped: Vec<(String, Why)>,
    /// Things worth telling (e.g. `--encrypt` ignored for a symlink).
    pub notes: Vec<(String, Why)>,
    /// What happened to symlinks met (stored as links though they point to
    /// folders, followed, loops): whole sentences, one per link.
    pub links: Vec<Why>,
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
    /// [`Error::NotFound`], [`Error::InsideRepo`], [`Error::OwnFile`],
    /// [`Error::BadPath`], [`Error::LooksSecret`], or any
    /// read or store error (the manifest is then not saved).
    pub fn add(&mut self, args: &[OsString], opts: &AddOptions) -> Result<AddReport> {
        let r = self.add_inner(args, opts).map_err(|e| match e {
            Error::Io { op, path, source }
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                let rule = self.repo.env.shown(&path);
                Error::Unreadable {
                    op,
                    path,
                    rule,
                    source,
                }
            }
            other => other,
        });
        if r.is_err() {
            // Nothing was saved: what it recorded in the base agrees with
            // nothing in the repository.
            self.work.base.rollback();
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
        let mut unasked = Vec::new();
        let externals = self.externals()?;
        for a in args {
            let abs = self.repo.env.resolve(a);
            let Some(md) = fsx::lstat(&abs)? else {
                return Err(Error::NotFound(abs));
            };
            self.refuse_own(&abs)?;
            let tilde = self.repo.env.to_tilde(&abs)?;
            // An external's files come from its source: a new one inside
            // it would be lost to the next refresh's replacement.
            if let Some(x) = externals.owner(&tilde)
                && !opts.within_external
                && x.path != tilde
                && !self
                    .repo
                    .manifest
                    .files
                    .iter()
                    .any(|e| sgard_manifest::path_is_under(&e.path, &tilde))
            {
                return Err(Error::Conflict(format!(
                    "{tilde} is inside the external at {}, whose files come from its source \
                     (`sgard external list`); track it somewhere else",
                    x.path
                )));
            }
            if let Some(rule) = self.repo.manifest.excluded_by(&tilde) {
                return Err(Error::Excluded {
                    path: tilde,
                    rule: rule.to_owned(),
                });
            }
            let kind = DiskKind::of(&md);
            if kind == DiskKind::File && self.plaintext_unasked(&tilde, opts) {
                unasked.push((abs.clone(), tilde));
            }
            let size = if kind == DiskKind::File { md.len() } else { 0 };
            roots.push((abs, kind, size));
        }
        // Every file that looks like a secret is named at once: those
        // given, then those met in the folders (each tree is refused
        // before anything of it is stored).
        let mut secrets = match self.refuse_secrets(&unasked) {
            Err(Error::LooksSecret { found }) => found,
            other => other.map(|()| Vec::new())?,
        };
        let mut report = AddReport::default();
        if !self.repo.dry_run {
            self.tx().begin_batch();
        }
        let singles = roots
            .iter()
            .filter(|(_, k, _)| *k != DiskKind::Dir || opts.dir);
        let bytes = singles.clone().map(|(_, _, n)| n).sum();
        sgard_store::progress::begin("adding", singles.count() as u64, bytes);
        for (abs, kind, _) in roots {
            let refused = self
                .repo
                .env
                .to_tilde(&abs)
                .is_ok_and(|t| secrets.iter().any(|(p, _)| *p == t));
            if refused {
                continue;
            }
            match self.add_root(&abs, kind, opts, &mut report) {
                Err(Error::LooksSecret { found }) => secrets.extend(found),
                other => other?,
            }
        }
        if !secrets.is_empty() {
            secrets.sort_by(|a, b| a.0.cmp(&b.0));
            secrets.dedup_by(|a, b| a.0 == b.0);
            return Err(Error::LooksSecret { found: secrets });
        }
        // New files met inside an external are not its own: skipped.
        if !opts.within_external && !externals.externals.is_empty() {
            let inside: Vec<(String, String)> = report
                .entries
                .iter()
                .filter(|(_, o)| *o == AddOutcome::Added)
                .filter_map(|(p, _)| externals.owner(p).map(|x| (p.clone(), x.path.clone())))
                .collect();
            if !inside.is_empty() {
                let drop: std::collections::HashSet<&str> =
                    inside.iter().map(|(p, _)| p.as_str()).collect();
                self.repo
                    .manifest
                    .files
                    .retain(|e| !drop.contains(e.path.as_str()));
                report.entries.retain(|(p, _)| !drop.contains(p.as_str()));
                for (p, owner) in &inside {
                    self.work.base.put(p, None);
                    report.skipped.push((
                        p.clone(),
                        Why {
                            what: format!(
                                "inside the external at {owner}, whose files come from its source"
                            ),
                            remedy: None,
                        },
                    ));
                }
            }
        }
        // The folders above what was added, as they are here (see
        // `folders.rs`), so a restore elsewhere makes them alike.
        let added: Vec<String> = report.entries.iter().map(|(p, _)| p.clone()).collect();
        let folders: Vec<String> = crate::folders::folders_above(added.iter().map(String::as_str))
            .into_iter()
            .map(str::to_owned)
            .collect();
        self.refresh_folders(&folders);
        // Two entries that are one file here would overwrite each other.
        let folding = self.folding();
        if folding.folds() {
            let new: std::collections::HashSet<&str> = added.iter().map(String::as_str).collect();
            let is_new = |p: &str| new.contains(p);
            let pairs = crate::folding::collisions(
                folding,
                self.repo.manifest.files.iter().map(|e| e.path.as_str()),
                Some(&is_new),
            );
            if !pairs.is_empty() {
                return Err(Error::Conflict(crate::folding::refusal(folding, &pairs)));
            }
        }
        // A manifest with an entry below a file or a symlink does not load
        // again: refused before it is saved.
        if let Some((below, above)) = self.repo.manifest.below_file_or_link() {
            return Err(below_tracked(below, above));
        }
        self.tx().commit_batch()?;
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        self.tx().flush_base()?;
        // Taken as it is: conflict markers a merge left in it are content.
        self.drop_unresolved(added.iter().map(String::as_str))?;
        Ok(report)
    }

    /// Adds one path given to `add` (checked already).
    fn add_root(
        &mut self,
        abs: &Path,
        kind: DiskKind,
        opts: &AddOptions,
        report: &mut AddReport,
    ) -> Result<()> {
        match kind {
            DiskKind::Dir if opts.dir => self.add_one(abs, kind, opts, false, None, report),
            DiskKind::Dir => self.add_tree(abs, opts, false, report),
            DiskKind::Link => {
                let chain: Vec<PathBuf> = canonical_parent(abs).into_iter().collect();
                match self.link_plan(abs, opts, &chain, report) {
                    LinkPlan::Walk(chain) => self.add_tree_with(abs, opts, false, chain, report),
                    LinkPlan::AlsoFile(real) => {
                        if let Ok(t) = self.repo.env.to_tilde(&real)
                            && self.plaintext_unasked(&t, opts)
                        {
                            self.refuse_secrets(&[(real.clone(), t)])?;
                        }
                        self.add_one(abs, kind, opts, false, None, report)?;
                        self.add_one(&real, DiskKind::File, opts, false, None, report)
                    }
                    LinkPlan::Link => self.add_one(abs, kind, opts, false, None, report),
                    LinkPlan::Skip => Ok(()),
                }
            }
            _ => self.add_one(abs, kind, opts, false, None, report),
        }
    }

    pub(crate) fn add_tree(
        &mut self,
        root: &Path,
        opts: &AddOptions,
        new_only: bool,
        report: &mut AddReport,
    ) -> Result<()> {
        let chain = std::fs::canonicalize(root).into_iter().collect();
        self.add_tree_with(root, opts, new_only, chain, report)
    }

    /// As [`Garden::add_tree`]; `chain` holds the real paths of the
    /// folders this walk is inside (the root's, and those of the symlinks
    /// followed to reach it), so a symlink back into one of them is a loop.
    fn add_tree_with(
        &mut self,
        root: &Path,
        opts: &AddOptions,
        new_only: bool,
        chain: Vec<PathBuf>,
        report: &mut AddReport,
    ) -> Result<()> {
        // Walk first (cheap, in order), then copy the plain files into the
        // store on all cores, then record every path in walk order. A
        // symlink to a folder that is followed is walked after the folder
        // it is in (and a file a followed symlink points to is taken where
        // it lies).
        let mut found: Vec<(PathBuf, DiskKind, bool)> = Vec::new();
        let mut unasked = Vec::new();
        let own = self.own_dirs();
        let mut new = 0;
        let mut also_files = false;
        let mut walks = std::collections::VecDeque::from([(root.to_path_buf(), chain)]);
        while let Some((top, chain)) = walks.pop_front() {
            let mut walk = walkdir::WalkDir::new(&top)
                .follow_links(false)
                .sort_by_file_name()
                .into_iter();
            while let Some(item) = walk.next() {
                let ent = item.map_err(|e| walk_error(&top, e))?;
                // The top of a walk may be a followed symlink: the folder
                // it points to is what is walked.
                let md = if ent.depth() == 0 {
                    std::fs::metadata(ent.path())
                        .map_err(|e| Error::io("inspecting", ent.path(), e))?
                } else {
                    ent.metadata().map_err(|e| walk_error(ent.path(), e))?
                };
                let kind = DiskKind::of(&md);
                let path = ent.path().to_path_buf();
                let Ok(tilde) = self.repo.env.to_tilde(&path) else {
                    report
                        .skipped
                        .push((self.repo.env.shown(&path), "name cannot be stored".into()));
                    if kind == DiskKind::Dir {
                        walk.skip_current_dir();
                    }
                    continue;
                };
                if self.repo.manifest.excluded_by(&tilde).is_some() {
                    if kind == DiskKind::Dir {
                        walk.skip_current_dir();
                    }
                    continue;
                }
                // sgard's own folders and files, and a symlink leading into
                // one: passed by in silence; another repository, saying so.
                if let Some(o) = own.met(&path, &md) {
                    if o.what == What::OtherRepository {
                        report.skipped.push((tilde, ANOTHER_REPOSITORY.into()));
                    }
                    if kind == DiskKind::Dir {
                        walk.skip_current_dir();
                    }
                    continue;
                }
                if kind == DiskKind::Dir {
                    continue;
                }
                // What this item gives: itself, and for a followed symlink
                // to a file, the file it points to.
                let size = if kind == DiskKind::File { md.len() } else { 0 };
                let mut items = vec![(path, kind, tilde, size)];
                if kind == DiskKind::Link && ent.depth() > 0 {
                    let link = items[0].0.clone();
                    match self.link_plan(&link, opts, &chain, report) {
                        LinkPlan::Walk(inner) => {
                            walks.push_back((link, inner));
                            continue;
                        }
                        LinkPlan::AlsoFile(real) => {
                            if let Ok(t) = self.repo.env.to_tilde(&real) {
                                also_files = true;
                                items.push((real, DiskKind::File, t, 0));
                            }
                        }
                        LinkPlan::Link => {}
                        LinkPlan::Skip => continue,
                    }
                }
                for (path, kind, tilde, size) in items {
                    if kind == DiskKind::File
                        && let Some(db) = crate::sqlite::side_file_of(&path)
                    {
                        let db = self.repo.env.shown(&db);
                        report.skipped.push((
                            tilde,
                            format!("part of the SQLite database {db}, which is captured whole")
                                .into(),
                        ));
                        continue;
                    }
                    // Markers a merge wrote are taken only when the file
                    // itself is named (the same test as status).
                    if kind == DiskKind::File && self.tx().unresolved_merge(&tilde, &path) {
                        report
                            .skipped
                            .push((tilde, Why::new(UNRESOLVED_MERGE, Remedy::ResolveOrAdd)));
                        continue;
                    }
                    if kind == DiskKind::File && self.plaintext_unasked(&tilde, opts) {
                        unasked.push((path.clone(), tilde.clone()));
                    }
                    let tracked = self.repo.manifest.get(&tilde);
                    new += usize::from(tracked.is_none());
                    sgard_store::progress::expect(1, size);
                    let plain = kind == DiskKind::File
                        && !opts.encrypt
                        && tracked.is_none_or(|e| !new_only && !e.encrypted);
                    found.push((path, kind, plain));
                }
            }
        }
        // Before anything of them is stored.
        self.refuse_secrets(&unasked)?;
        if also_files {
            // A file a symlink points to may also lie in the walk.
            let mut seen = std::collections::HashSet::new();
            found.retain(|(p, _, _)| seen.insert(p.clone()));
        }
        // The new entries arrive in path order: room for them once, not by
        // doubling (at 100,000 files, a third more than the entries).
        self.repo.manifest.files.reserve(new);
        self.work.base.reserve(new);
        self.work.statcache.reserve(new);
        // Copied into the store a window at a time: every copy waiting at
        // once held a file's metadata per path (25 MB at 100,000 files).
        // The walk's paths are taken a window at a time and dropped once
        // recorded (held to the end, they were 8 MB at 100,000 files).
        let window = self.repo.env.window().max(1);
        let mut rest = found.into_iter();
        let mut first = true;
        loop {
            let part: Vec<(PathBuf, DiskKind, bool)> = rest.by_ref().take(window).collect();
            if part.is_empty() {
                break;
            }
            let plain: Vec<&Path> = part
                .iter()
                .filter(|(_, _, plain)| *plain)
                .map(|(p, _, _)| p.as_path())
                .collect();
            let mut ahead = if self.repo.dry_run {
                Vec::new().into_iter()
            } else {
                self.tx().prespool(&plain).into_iter()
            };
            if std::mem::take(&mut first) {
                self.repo.env.crash_point("add-copied");
            }
            for (path, kind, plain) in &part {
                let copy = if *plain { ahead.next().flatten() } else { None };
                self.add_found(path, *kind, copy, opts, new_only, report)?;
            }
        }
        Ok(())
    }

    /// Records one path the walk found (`copy`: its bytes, already in the
    /// store's temp folder).
    fn add_found(
        &mut self,
        path: &Path,
        kind: DiskKind,
        copy: Option<(sgard_store::Spooled, std::fs::Metadata)>,
        opts: &AddOptions,
        new_only: bool,
        report: &mut AddReport,
    ) -> Result<()> {
        sgard_store::cancel::check()?;
        // An untracked file that holds what this machine last synced was
        // untracked by another machine: mirror up leaves it untracked.
        if new_only
            && let Ok(tilde) = self.repo.env.to_tilde(path)
            && self.repo.manifest.get(&tilde).is_none()
            && self.untracked_elsewhere(&tilde, path)
        {
            report.skipped.push((
                tilde,
                Why::new(
                    "untracked on another machine since this machine last synced it; not \
                         tracked again",
                    Remedy::AddToTrack,
                ),
            ));
            return Ok(());
        }
        // A tracked entry reached through a folder is taken from disk
        // only if the disk changed it: one another machine changed
        // since this machine last synced it (behind, conflict) is left
        // as the repository has it. Name the file to take it anyway.
        if !new_only
            && let Ok(tilde) = self.repo.env.to_tilde(path)
            && let Some(e) = self.repo.manifest.get(&tilde)
            && let Ok(j) = Tx::new(&self.repo, &mut self.work).judge(e, false, &Found::Unknown)
            && matches!(j.state, crate::State::Behind | crate::State::Conflict)
        {
            report.skipped.push((
                tilde,
                Why::new(
                    format!(
                        "{} ({}); not taken from disk",
                        j.state.as_str(),
                        j.detail.unwrap_or_default()
                    ),
                    Remedy::AddItself,
                ),
            ));
            return Ok(());
        }
        self.add_one(path, kind, opts, new_only, copy, report)
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
        let tilde = self.repo.env.to_tilde(abs)?;
        if new_only && self.repo.manifest.get(&tilde).is_some() {
            return Ok(());
        }
        let mut content = None;
        if kind == DiskKind::File
            && !opts.template
            && self.repo.manifest.get(&tilde).is_some_and(|e| e.template)
        {
            report.skipped.push((
                tilde,
                Why::new(
                    "is a template: its rendering is never stored over its source",
                    Remedy::TemplateSource,
                ),
            ));
            return Ok(());
        }
        if self.repo.dry_run {
            return self.tx().preview_add(abs, kind, opts, report);
        }
        // What a platform cannot show (Windows: all but the read-only
        // attribute) is kept as it was recorded.
        let recorded = recorded_mode(&self.repo.manifest, &tilde, kind);
        if kind != DiskKind::File && (opts.template || opts.run.is_some()) {
            report.notes.push((
                tilde.clone(),
                format!(
                    "--template and --run apply to files only; {} is stored as it is",
                    kind.describe()
                )
                .into(),
            ));
        }
        let mut entry = match kind {
            DiskKind::File => {
                let old = self.repo.manifest.get(&tilde).cloned();
                let encrypt =
                    opts.encrypt || (old.as_ref().is_some_and(|e| e.encrypted) && !opts.no_encrypt);
                if encrypt {
                    let (e, sha) =
                        self.tx()
                            .encrypted_file_entry(&tilde, abs, old, opts.template)?;
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
                    let w = self.tx().put_source(&source)?;
                    let mut e = Entry::new(tilde.clone(), EntryKind::File, self.repo.env.now);
                    e.hash = Some(w.hash);
                    e.mode = Some(fsx::mode_to_record(fsx::mode_of(&md), recorded, abs));
                    content = Some(w.hash);
                    e
                } else {
                    let (w, md) = self.tx().store_file(abs, ahead)?;
                    let mut e = Entry::new(tilde.clone(), EntryKind::File, self.repo.env.now);
                    e.hash = Some(w.hash);
                    e.mode = Some(fsx::mode_to_record(fsx::mode_of(&md), recorded, abs));
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
                    )
                    .into(),
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
                let mut e = Entry::new(tilde.clone(), EntryKind::Link, self.repo.env.now);
                e.target = Some(fsx::read_link(abs)?);
                e.mode = Some(fsx::mode_to_record(fsx::mode_of(&md), recorded, abs));
                e
            }
            DiskKind::Dir => {
                let md = fsx::lstat(abs)?.ok_or_else(|| Error::NotFound(abs.to_path_buf()))?;
                let mut e = Entry::new(tilde.clone(), EntryKind::Directory, self.repo.env.now);
                e.mode = Some(fsx::mode_to_record(fsx::mode_of(&md), recorded, abs));
                e
            }
            DiskKind::Fifo | DiskKind::Socket | DiskKind::Device => {
                report.skipped.push((tilde, untrackable(kind).into()));
                return Ok(());
            }
        };
        // Windows runs a script by its name or `#!` line, not a mode bit: a
        // file tracked before without one gets it when `--run` makes it a
        // script Windows can start (on Unix the bit is the file's own).
        if crate::platform::READS_HEAD
            && entry.kind == EntryKind::File
            && opts.run.is_some()
            && let Some(m) = entry.mode
            && m.bits() & 0o111 == 0
        {
            let as_new = fsx::mode_to_record(m, None, abs);
            entry.mode = Some(sgard_manifest::Mode::from_st_mode(
                m.bits() | (as_new.bits() & 0o111),
            ));
        }
        if entry.kind == EntryKind::File
            && opts.run.is_some()
            && entry.mode.is_some_and(|m| m.bits() & 0o111 == 0)
        {
            report
                .skipped
                .push((tilde, Why::new(NOT_EXECUTABLE, Remedy::MakeExecutable)));
            return Ok(());
        }
        if entry.kind == EntryKind::File {
            let old = self.repo.manifest.get(&tilde);
            entry.template = opts.template;
            entry.run = opts.run.or(old.and_then(|o| o.run));
        }
        let mode = entry.mode;
        let outcome = self.merge_added(entry, opts);
        // Disk and repository now agree on this entry: "this content".
        // The disk holds a template's source, which is what belongs there
        // only when it renders to itself; else the rendering is to come
        // (status: behind; restore writes it).
        if let Some(e) = self.repo.manifest.get(&tilde) {
            let pending = Tx::new(&self.repo, &mut self.work)
                .template_pending(e, abs)
                .unwrap_or_else(|err| {
                    report.notes.push((
                        tilde.clone(),
                        Why::new(
                            format!(
                                "stored, but it does not render: {}",
                                crate::checkpoint::error_chain(&err)
                            ),
                            Remedy::EditFixes(tilde.clone()),
                        ),
                    ));
                    true
                });
            if pending {
                self.work.base.settle(
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
                Tx::new(&self.repo, &mut self.work).settle(e, content, mode);
            }
        }
        sgard_store::progress::done(
            &tilde,
            match outcome {
                AddOutcome::Added => "added",
                AddOutcome::Refreshed => "refreshed",
                AddOutcome::Unchanged => "unchanged",
            },
        );
        report.entries.push((tilde, outcome));
        Ok(())
    }

    /// Whether a file at `tilde` would become a new entry stored in
    /// plaintext though the command did not say how to store it: then a
    /// file that looks like a secret is refused (see [`crate::secrets`]).
    fn plaintext_unasked(&self, tilde: &str, opts: &AddOptions) -> bool {
        !opts.encrypt && !opts.no_encrypt && self.repo.manifest.get(tilde).is_none()
    }

    /// Puts a freshly read entry into the manifest, keeping what the user set
    /// before (lock, targeting) unless this command sets it.
    fn merge_added(&mut self, mut fresh: Entry, opts: &AddOptions) -> AddOutcome {
        let old = self.repo.manifest.get(&fresh.path).cloned();
        fresh.locked = opts.lock;
        fresh.only.clone_from(&opts.only);
        fresh.never.clone_from(&opts.never);
        let Some(old) = old else {
            self.repo.manifest.upsert(fresh);
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
        self.repo.manifest.upsert(fresh);
        AddOutcome::Refreshed
    }
}

impl Tx<'_> {
    /// Whether `e` is a template whose rendering differs from what `abs`
    /// holds (its source, just added).
    fn template_pending(&mut self, e: &Entry, abs: &Path) -> Result<bool> {
        if !e.template {
            return Ok(false);
        }
        let source = if e.encrypted {
            self.repo.read_plain(abs)?.0.to_vec()
        } else {
            let (mut f, _) = fsx::open_regular(abs)?;
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut f, &mut buf)
                .map_err(|err| Error::io("reading", abs, err))?;
            buf
        };
        // A source that asks a password manager never renders to itself
        // (its calls are in it), and adding it asks nothing.
        if std::str::from_utf8(&source).is_ok_and(crate::managers::calls_secrets) {
            return Ok(true);
        }
        let out = self.render_source(&e.path, &source)?;
        Ok(out != source)
    }

    /// An encrypted file entry for `abs`; the ciphertext of `old` is kept
    /// when the content did not change (no new blob, no churn).
    fn encrypted_file_entry(
        &mut self,
        tilde: &str,
        abs: &Path,
        old: Option<Entry>,
        template: bool,
    ) -> Result<(Entry, sgard_store::Hash)> {
        if !self.repo.encryption_initialized() {
            return Err(crate::encrypted::not_initialized());
        }
        let (plain, md) = self.repo.read_plain(abs)?;
        let mut e = Entry::new(tilde.to_owned(), EntryKind::File, self.repo.env.now);
        e.encrypted = true;
        let recorded = old
            .as_ref()
            .filter(|o| o.kind == EntryKind::File)
            .and_then(|o| o.mode);
        e.mode = Some(fsx::mode_to_record(fsx::mode_of(&md), recorded, abs));
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
                e.plaintext_mac = Some(Box::new(mac));
            }
        }
        Ok((e, sgard_store::Hash::of(&plain)))
    }
}

/// What `add` does with a symlink it meets.
enum LinkPlan {
    /// Track it as a link.
    Link,
    /// Walk the folder it points to under its own path (the real paths of
    /// the folders the walk is then inside).
    Walk(Vec<PathBuf>),
    /// Track it as a link, and the file it points to (its real path) too.
    AlsoFile(PathBuf),
    /// Neither: the repository tracks entries below it (another machine has
    /// a folder there), and this machine never chose to follow it.
    Skip,
}

/// The real path of the folder holding `abs`.
fn canonical_parent(abs: &Path) -> Option<PathBuf> {
    abs.parent().and_then(|p| std::fs::canonicalize(p).ok())
}

/// The file in this repository's state where `add --follow` records the
/// symlinks to folders it walked (`~/path<TAB>target` lines).
const FOLLOWED_FILE: &str = "followed";

/// Why a folder walk passes by a file a merge left unresolved.
const UNRESOLVED_MERGE: &str = "unresolved merge: it still holds the conflict markers \
     `sgard merge` wrote";

/// How many symlinks one path may pass through before a walk stops
/// following (a guard beside the loop check, for exotic mounts).
const MAX_FOLLOWS: usize = 40;

/// The symlinks to folders this machine's `add --follow` walked, as
/// absolute path → target (see [`crate::home::Confine::following`]).
pub(crate) fn followed_links(
    local_dir: Option<&Path>,
    env: &crate::Env,
) -> std::collections::HashMap<PathBuf, PathBuf> {
    read_followed(local_dir)
        .into_iter()
        .map(|(p, t)| (env.expand(&p), PathBuf::from(t)))
        .collect()
}

fn read_followed(local_dir: Option<&Path>) -> Vec<(String, String)> {
    let Some(text) = local_dir
        .and_then(|d| sgard_store::durable::read_regular_to_string(&d.join(FOLLOWED_FILE)).ok())
    else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .filter(|(p, _)| p.starts_with("~/") || p.starts_with('/'))
        .map(|(p, t)| (p.to_owned(), t.to_owned()))
        .collect()
}

impl Garden {
    /// Decides what to do with the symlink at `abs` met by `add` (`chain`:
    /// the real paths of the folders the walk is inside), saying so in
    /// `report.links` where that is news.
    fn link_plan(
        &mut self,
        abs: &Path,
        opts: &AddOptions,
        chain: &[PathBuf],
        report: &mut AddReport,
    ) -> LinkPlan {
        let shown = self.repo.env.shown(abs);
        let Ok(target) = fsx::read_link(abs) else {
            return LinkPlan::Link;
        };
        let Ok(md) = std::fs::metadata(abs) else {
            if opts.follow {
                report.links.push(
                    format!("{shown} is a symlink to nothing ({target}): stored as a link").into(),
                );
            }
            return LinkPlan::Link;
        };
        let Ok(real) = std::fs::canonicalize(abs) else {
            return LinkPlan::Link;
        };
        if md.is_dir() {
            // Followed here before: its entries are under it, and a link
            // entry there would be refused; so it is walked again.
            let followed = self.repo.env.to_tilde(abs).ok().is_some_and(|t| {
                read_followed(self.repo.local_dir.as_deref())
                    .iter()
                    .any(|(p, x)| *p == t && *x == target)
            });
            // Tracked below it already (a folder on another machine): a link
            // entry there would be refused, and following it is this
            // machine's choice alone (restores would write through it), so
            // it is skipped unless --follow says so.
            let below = self.repo.env.to_tilde(abs).ok().is_some_and(|t| {
                let prefix = format!("{t}/");
                let at = self
                    .repo
                    .manifest
                    .files
                    .partition_point(|e| e.path.as_str() < prefix.as_str());
                self.repo
                    .manifest
                    .files
                    .get(at)
                    .is_some_and(|e| e.path.starts_with(&prefix))
            });
            if !opts.follow && !followed && below {
                report.links.push(Why::new(
                    format!(
                        "{shown} is a symlink to a folder ({target}) here, and the repository \
                         tracks entries below it: skipped"
                    ),
                    Remedy::Follow(shown.clone()),
                ));
                return LinkPlan::Skip;
            }
            if !opts.follow && !followed {
                report.links.push(Why::new(
                    format!("{shown} is a symlink to a folder ({target}): stored as a link"),
                    Remedy::FollowStores,
                ));
                return LinkPlan::Link;
            }
            let inside = canonical_parent(abs)
                .into_iter()
                .chain(chain.iter().cloned())
                .any(|c| c.starts_with(&real));
            if inside || chain.len() >= MAX_FOLLOWS {
                report.links.push(
                    format!(
                        "{shown} is a symlink to a folder it is inside ({target}): not followed \
                     (the walk would never end); stored as a link"
                    )
                    .into(),
                );
                return LinkPlan::Link;
            }
            if let Ok(t) = self.repo.env.to_tilde(abs) {
                if opts.follow {
                    self.remember_followed(&t, &target);
                }
                if self
                    .repo
                    .manifest
                    .get(&t)
                    .is_some_and(|e| e.kind == sgard_manifest::EntryKind::Link)
                {
                    report.links.push(
                        format!(
                            "{shown} was tracked as a symlink; it is followed now, and its entry \
                         is replaced by the files below it"
                        )
                        .into(),
                    );
                    self.repo.manifest.remove(&t);
                }
            }
            let mut inner = chain.to_vec();
            inner.push(real);
            return LinkPlan::Walk(inner);
        }
        if !opts.follow || !md.is_file() {
            return LinkPlan::Link;
        }
        match self.repo.env.to_tilde(&real) {
            // sgard's own were refused or passed by before (see `own.rs`).
            Ok(t) if self.repo.manifest.excluded_by(&t).is_none() => {
                report.links.push(
                    format!(
                        "{shown} is a symlink to a file: tracked the link and the file it points \
                     to, {t}"
                    )
                    .into(),
                );
                LinkPlan::AlsoFile(real)
            }
            _ => {
                report.links.push(
                    format!(
                        "{shown} is a symlink to {}, which sgard does not track: stored as a link",
                        self.repo.env.shown(&real)
                    )
                    .into(),
                );
                LinkPlan::Link
            }
        }
    }

    /// Records that this machine followed the symlink `path` (pointing to
    /// `target`), so a restore writes its entries through it (best effort:
    /// without the record a restore refuses to, and says why).
    fn remember_followed(&self, path: &str, target: &str) {
        let Some(dir) = self
            .repo
            .local_dir
            .as_deref()
            .filter(|_| !self.repo.dry_run)
        else {
            return;
        };
        if path.contains(['\t', '\n']) || target.contains(['\t', '\n']) {
            return;
        }
        let mut all = read_followed(Some(dir));
        if all.iter().any(|(p, t)| p == path && t == target) {
            return;
        }
        all.retain(|(p, _)| p != path);
        all.push((path.to_owned(), target.to_owned()));
        all.sort();
        let text: String = all.iter().map(|(p, t)| format!("{p}\t{t}\n")).collect();
        if sgard_store::durable::create_private_dir_all(dir).is_ok() {
            let _ = sgard_store::durable::write_atomic(
                &dir.join(FOLLOWED_FILE),
                text.as_bytes(),
                0o600,
            );
        }
    }
}

/// The refusal of an entry below one tracked as a file or a symlink.
pub(crate) fn below_tracked(below: &str, above: &str) -> Error {
    Error::BelowTracked {
        path: below.to_owned(),
        above: above.to_owned(),
    }
}

/// The mode `manifest` records for `tilde` when it tracks it as what
/// `kind` is (`None`: new, or another kind now).
pub(crate) fn recorded_mode(
    manifest: &sgard_manifest::Manifest,
    tilde: &str,
    kind: DiskKind,
) -> Option<sgard_manifest::Mode> {
    manifest
        .get(tilde)
        .filter(|e| kind.matches(e.kind))
        .and_then(|e| e.mode)
}

/// Why a script that is not executable is not added.
pub(crate) const NOT_EXECUTABLE: &str = "is not executable; a script must be";

/// Why a FIFO, socket or device is not tracked.
pub(crate) fn untrackable(kind: DiskKind) -> String {
    format!(
        "is {}; only files, symlinks and folders are tracked",
        kind.describe()
    )
}

fn walk_error(at: &Path, e: walkdir::Error) -> Error {
    let path = e
        .path()
        .map_or_else(|| PathBuf::from(at), Path::to_path_buf);
    Error::io("walking", path, e.into())
}
