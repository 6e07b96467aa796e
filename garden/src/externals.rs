//! `sgard external`: content fetched once, checked against its pin,
//! unpacked, and stored in the repository like any other entry (see
//! `sgard_externals` for the fetching and unpacking, and
//! `sgard_manifest::externals` for the record).
//!
//! An external's files are ordinary entries: `status`, `diff`, `restore`
//! and every other command treat them as such, and restore on a machine
//! with no network writes them from the repository. Only `external add`
//! and `external refresh` read the network (and `doctor`, which asks
//! whether the sources still answer).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use sgard_externals::git::{self, RefKind, Resolved};
use sgard_externals::{Format, Limits};
use sgard_manifest::externals::{EXTERNALS_FILE, External, ExternalLog};
use sgard_manifest::path_is_under;

use crate::fsx;
use crate::status::State;
use crate::{AddOptions, AddReport, Error, Garden, Result};

/// What an external's content is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// One file.
    File,
    /// An archive, unpacked into a folder.
    Archive(Format),
    /// A git repository at a branch, tag or commit (`None`: the default
    /// branch), checked out into a folder without `.git`.
    Git(Option<String>),
}

impl Source {
    /// The record's word for it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Archive(f) => f.as_str(),
            Source::Git(_) => "git",
        }
    }

    fn of(x: &External) -> Result<Source> {
        if x.format == "git" {
            return Ok(Source::Git(x.reference.clone()));
        }
        match Format::parse(&x.format) {
            Some(Format::File) => Ok(Source::File),
            Some(f) => Ok(Source::Archive(f)),
            None => Err(Error::Invalid(format!(
                "{EXTERNALS_FILE}: {} has the unknown format {:?}",
                x.path, x.format
            ))),
        }
    }
}

/// What to fetch, and where it goes.
#[derive(Clone, Debug)]
pub struct ExternalSpec {
    /// The path it goes to (as given: resolved like any path argument).
    pub path: OsString,
    /// Where it comes from.
    pub url: String,
    /// The SHA-256 it must have (hex); `None`: unpinned. Not for git,
    /// which a tag or a commit pins.
    pub sha256: Option<String>,
    /// What it is.
    pub source: Source,
    /// Leading name components dropped when unpacking.
    pub strip: u32,
    /// Only the archive's files matching one of these globs.
    pub include: Vec<String>,
    /// How long a fetch stays fresh (`7d`, `12h`…).
    pub refresh: Option<String>,
    /// The bounds on what it may bring.
    pub limits: Limits,
}

/// What [`Garden::add_external`] did.
#[derive(Debug)]
pub struct ExternalReport {
    /// Its path (`~/…`).
    pub path: String,
    /// The SHA-256 of what was fetched (empty for git).
    pub sha256: String,
    /// The commit checked out (git).
    pub commit: Option<String>,
    /// Whether its content is pinned.
    pub pinned: bool,
    /// Bytes fetched (or checked out).
    pub fetched: u64,
    /// Files written (1 for a single file).
    pub files: u64,
    /// What adding them did.
    pub add: AddReport,
}

/// What `external refresh` did with one external.
#[derive(Debug)]
pub enum Refreshed {
    /// Not past its refresh period (and no `--force`): not fetched.
    NotDue,
    /// Fetched; the source gives what is stored.
    Unchanged,
    /// Replaced by the source's new content (`from` and `to` name it: a
    /// SHA-256 or a commit).
    Updated {
        /// What it was.
        from: String,
        /// What it is now.
        to: String,
        /// Files it has now.
        files: u64,
    },
    /// Refused and left as it was: [`Error::PinMismatch`] for a pinned
    /// source that changed, [`Error::Conflict`] for files changed here
    /// since they were stored, or why the fetch failed.
    Kept(Error),
}

/// A fetched, checked, unpacked external, waiting beside its path.
struct Staged {
    /// The scratch folder beside the path (dropped with it).
    work: tempfile::TempDir,
    /// The file or folder to move to the path.
    content: PathBuf,
    sha256: String,
    commit: Option<String>,
    kind: Option<RefKind>,
    bytes: u64,
    files: u64,
}

/// What fetching found, before anything of the home is touched.
enum Fetch {
    /// The source gives what is stored: nothing staged.
    Same,
    /// New content, staged.
    New(Staged),
}

const SCRATCH: &str = ".sgard-tmp-ext-";

/// A scratch folder in `parent` (`.sgard-tmp-ext-<pid>-…`), after removing
/// those of sgard processes that were killed before they could.
fn scratch(parent: &Path) -> Result<tempfile::TempDir> {
    std::fs::create_dir_all(parent).map_err(|e| Error::io("creating", parent, e))?;
    if let Ok(rd) = std::fs::read_dir(parent) {
        for ent in rd.flatten() {
            let name = ent.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(SCRATCH))
                .and_then(|rest| rest.split('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            let path = ent.path();
            if crate::home::pid_is_gone(pid, &path) {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
    tempfile::Builder::new()
        .prefix(&format!("{SCRATCH}{}-", std::process::id()))
        .tempdir_in(parent)
        .map_err(|e| Error::io("creating a temp folder in", parent, e))
}

/// Fetches `url` as `source` into a scratch folder in `parent`. With
/// `known` (what is stored now), a source that still gives it is
/// [`Fetch::Same`] and nothing is unpacked; `pin` is checked before any
/// unpacking. Touches nothing outside the scratch folder.
#[allow(clippy::too_many_arguments)]
fn stage(
    tilde: &str,
    url: &str,
    source: &Source,
    strip: u32,
    include: &[String],
    parent: &Path,
    known: Option<&str>,
    pin: Option<&str>,
    limits: &Limits,
) -> Result<Fetch> {
    let mismatch = |pinned: &str, got: &str, what: &'static str| Error::PinMismatch {
        path: tilde.to_owned(),
        url: url.to_owned(),
        what,
        pinned: pinned.to_ascii_lowercase(),
        got: got.to_owned(),
    };
    if let Source::Git(reference) = source {
        let at: Resolved = git::resolve(url, reference.as_deref(), limits)?;
        if known == Some(at.commit.as_str()) {
            return Ok(Fetch::Same);
        }
        if let Some(p) = pin {
            return Err(mismatch(p, &at.commit, "commit"));
        }
        let work = scratch(parent)?;
        let dest = work.path().join("stage");
        let s = work.path().join("git");
        std::fs::create_dir(&s).map_err(|e| Error::io("creating", &s, e))?;
        let done = git::checkout(url, &at, &s, &dest, limits)?;
        return Ok(Fetch::New(Staged {
            work,
            content: dest,
            sha256: String::new(),
            commit: Some(at.commit),
            kind: Some(at.kind),
            bytes: done.bytes,
            files: done.files,
        }));
    }
    let work = scratch(parent)?;
    let download = work.path().join("download");
    let got = sgard_externals::fetch(url, &download, limits)?;
    if known == Some(got.sha256.as_str()) {
        return Ok(Fetch::Same);
    }
    if let Some(p) = pin
        && !p.eq_ignore_ascii_case(&got.sha256)
    {
        return Err(mismatch(p, &got.sha256, "sha256"));
    }
    let (content, files) = match source {
        Source::Archive(format) => {
            let dest = work.path().join("stage");
            std::fs::create_dir(&dest).map_err(|e| Error::io("creating", &dest, e))?;
            let u = sgard_externals::unpack(
                &download,
                *format,
                &dest,
                strip as usize,
                include,
                limits,
            )?;
            (dest, u.files)
        }
        _ => (download, 1),
    };
    Ok(Fetch::New(Staged {
        work,
        content,
        sha256: got.sha256,
        commit: None,
        kind: None,
        bytes: got.bytes,
        files,
    }))
}

/// The files, symlinks and folders under `root`, parents first, by their
/// path relative to it (`true`: a folder).
fn walk(root: &Path) -> Result<Vec<(PathBuf, bool)>> {
    let mut out = Vec::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let dir = root.join(&rel);
        let mut names: Vec<OsString> = std::fs::read_dir(&dir)
            .map_err(|e| Error::io("reading", &dir, e))?
            .map(|d| d.map(|d| d.file_name()))
            .collect::<std::io::Result<_>>()
            .map_err(|e| Error::io("reading", &dir, e))?;
        names.sort();
        for n in names {
            let r = rel.join(&n);
            let is_dir = fsx::lstat(&root.join(&r))?.is_some_and(|m| m.is_dir());
            out.push((r.clone(), is_dir));
            if is_dir {
                todo.push(r);
            }
        }
    }
    out.sort_by_key(|(r, _)| r.components().count());
    Ok(out)
}

/// The limits with this process's Ctrl-C and progress counters.
fn watched(limits: &Limits) -> Limits {
    Limits {
        interrupted: Some(sgard_store::cancel::requested),
        progress: Some(sgard_store::progress::bytes),
        ..*limits
    }
}

impl Garden {
    /// The externals of the repository.
    ///
    /// # Errors
    /// The file cannot be read or parsed.
    pub fn externals(&self) -> Result<ExternalLog> {
        Ok(ExternalLog::load(&self.repo.root.join(EXTERNALS_FILE))?)
    }

    pub(crate) fn save_externals(&self, log: &ExternalLog) -> Result<()> {
        if self.repo.dry_run {
            return Ok(());
        }
        Ok(log.save(&self.repo.root.join(EXTERNALS_FILE))?)
    }

    /// Fetches `spec`'s source, checks it against its pin, writes it (a
    /// file, or a folder for an archive or a git repository) at its path,
    /// adds what it wrote (in plaintext: an external is public content)
    /// and records the external. The path must not exist: nothing of the
    /// home is ever replaced by a download. The download and the unpacking
    /// happen in a temp folder beside the path, renamed into place only
    /// when whole.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the path exists or is an external already;
    /// [`Error::PinMismatch`]; [`Error::External`] (unreachable, too large,
    /// a hostile or damaged archive); add and I/O errors. Nothing is left
    /// at the path on any error.
    pub fn add_external(&mut self, spec: &ExternalSpec) -> Result<ExternalReport> {
        self.require_exclusive("external add")?;
        let abs = self.repo.env.resolve(&spec.path);
        let tilde = self.repo.env.to_tilde(&abs)?;
        let mut log = self.externals()?;
        if let Some(x) = log.owner(&tilde) {
            return Err(Error::Conflict(format!(
                "{tilde} is inside the external at {} already",
                x.path
            )));
        }
        if log.externals.iter().any(|x| path_is_under(&x.path, &tilde)) {
            return Err(Error::Conflict(format!(
                "{tilde} holds an external already"
            )));
        }
        if fsx::lstat(&abs)?.is_some() {
            return Err(Error::Conflict(format!(
                "{} exists; an external is written to a new path (move that one away first)",
                abs.display()
            )));
        }
        // Entries there (missing here, or for other machines) would become
        // its own, and a refresh would drop them.
        if let Some(e) = self
            .repo
            .manifest
            .files
            .iter()
            .find(|e| path_is_under(&e.path, &tilde))
        {
            return Err(Error::Conflict(format!(
                "{} is tracked already; an external goes to a path nothing is tracked at",
                e.path
            )));
        }
        let parent = abs
            .parent()
            .map(PathBuf::from)
            .ok_or_else(|| Error::Invalid(format!("{}: no folder to put it in", abs.display())))?;
        sgard_store::progress::begin("fetching", 1, 0);
        let staged = match stage(
            &tilde,
            &spec.url,
            &spec.source,
            spec.strip,
            &spec.include,
            &parent,
            None,
            spec.sha256.as_deref(),
            &watched(&spec.limits),
        )? {
            Fetch::New(s) => s,
            // Nothing is known, so nothing is the same.
            Fetch::Same => return Err(Error::Invalid("nothing was fetched".into())),
        };
        std::fs::rename(&staged.content, &abs)
            .map_err(|e| Error::io("moving into place", &abs, e))?;
        sgard_store::durable::fsync_dir(&parent)?;
        sgard_store::progress::done(&tilde, "fetched");
        let opts = AddOptions {
            no_encrypt: true,
            within_external: true,
            ..AddOptions::default()
        };
        let add = match self.add(&[abs.clone().into_os_string()], &opts) {
            Ok(a) => a,
            Err(e) => {
                // Nothing of it stays: it was never recorded.
                let _ = if abs.is_dir() {
                    std::fs::remove_dir_all(&abs)
                } else {
                    std::fs::remove_file(&abs)
                };
                return Err(e);
            }
        };
        drop(staged.work);
        let pinned = match &spec.source {
            Source::Git(_) => staged.kind.is_some_and(RefKind::pins),
            _ => spec.sha256.is_some(),
        };
        log.externals.push(External {
            path: tilde.clone(),
            url: spec.url.clone(),
            format: spec.source.as_str().to_owned(),
            sha256: staged.sha256.clone(),
            pinned,
            reference: match &spec.source {
                Source::Git(r) => r.clone(),
                _ => None,
            },
            commit: staged.commit.clone(),
            strip: spec.strip,
            include: spec.include.clone(),
            refresh: spec.refresh.clone(),
            fetched: self.repo.env.now,
        });
        self.save_externals(&log)?;
        Ok(ExternalReport {
            path: tilde,
            sha256: staged.sha256,
            commit: staged.commit,
            pinned,
            fetched: staged.bytes,
            files: staged.files,
            add,
        })
    }

    /// Fetches the externals `paths` name (all when empty; a path inside
    /// one names it) that are past their refresh period, or all of them
    /// with `force`, several at once. A source that gives what is stored
    /// only has its time renewed. A pinned external whose source changed
    /// is kept as it is; so is one whose files changed here since they
    /// were stored. Any other takes the new content: its path is replaced
    /// whole (files the source dropped are untracked), and the record
    /// names the new content.
    ///
    /// # Errors
    /// A path that is no external ([`Error::NotTracked`]); reading or
    /// saving the repository. Per-external failures are in the report.
    pub fn refresh_externals(
        &mut self,
        paths: &[OsString],
        force: bool,
        limits: &Limits,
    ) -> Result<Vec<(String, Refreshed)>> {
        self.require_exclusive("external refresh")?;
        let mut log = self.externals()?;
        let mut chosen: Vec<String> = Vec::new();
        for p in self.repo.tilde_args(paths)? {
            match log.owner(&p) {
                Some(x) if !chosen.contains(&x.path) => chosen.push(x.path.clone()),
                Some(_) => {}
                None => return Err(Error::NotTracked(format!("{p} (as an external)"))),
            }
        }
        if paths.is_empty() {
            chosen = log.externals.iter().map(|x| x.path.clone()).collect();
        }
        let now = self.repo.env.now;
        let mut jobs: Vec<(External, PathBuf, Source)> = Vec::new();
        let mut out: Vec<(String, Refreshed)> = Vec::new();
        for x in log.externals.iter().filter(|x| chosen.contains(&x.path)) {
            if !force && !x.is_due(now) {
                out.push((x.path.clone(), Refreshed::NotDue));
                continue;
            }
            let abs = self.repo.env.expand(&x.path);
            let parent = abs.parent().map(PathBuf::from).unwrap_or_default();
            jobs.push((x.clone(), parent, Source::of(x)?));
        }
        sgard_store::progress::begin("fetching", jobs.len() as u64, 0);
        let limits = watched(limits);
        let next = AtomicUsize::new(0);
        let results: Vec<std::sync::Mutex<Option<Result<Fetch>>>> =
            jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for _ in 0..jobs.len().min(8) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some((x, parent, source)) = jobs.get(i) else {
                            break;
                        };
                        let pin = x.pinned.then(|| x.content_id());
                        let r = stage(
                            &x.path,
                            &x.url,
                            source,
                            x.strip,
                            &x.include,
                            parent,
                            Some(x.content_id()),
                            pin,
                            &limits,
                        );
                        sgard_store::progress::done(&x.path, "fetched");
                        if let Ok(mut slot) = results[i].lock() {
                            *slot = Some(r);
                        }
                    }
                });
            }
        });
        let mut interrupted = false;
        for ((x, _, _), r) in jobs.into_iter().zip(results) {
            // Ctrl-C: what is installed so far is recorded, nothing more.
            if sgard_store::cancel::requested() {
                interrupted = true;
                break;
            }
            let r = r
                .into_inner()
                .ok()
                .flatten()
                .unwrap_or_else(|| Err(Error::Invalid("the fetch stopped".into())));
            let outcome = match r {
                Ok(Fetch::Same) => {
                    if let Some(rec) = log.get_mut(&x.path) {
                        rec.fetched = now;
                    }
                    Refreshed::Unchanged
                }
                Ok(Fetch::New(staged)) => match self.replace_external(&x, staged) {
                    Err(e) if e.is_interrupted() => {
                        interrupted = true;
                        break;
                    }
                    Err(e) => Refreshed::Kept(e),
                    Ok(Ok((rec, files))) => {
                        let from = x.content_id().to_owned();
                        let to = rec.content_id().to_owned();
                        if let Some(slot) = log.get_mut(&x.path) {
                            *slot = rec;
                        }
                        Refreshed::Updated { from, to, files }
                    }
                    Ok(Err(e)) => Refreshed::Kept(e),
                },
                Err(e) if e.is_interrupted() => {
                    interrupted = true;
                    break;
                }
                Err(e) => Refreshed::Kept(e),
            };
            out.push((x.path.clone(), outcome));
        }
        self.save_externals(&log)?;
        if interrupted {
            return Err(Error::Interrupted);
        }
        let order: Vec<&String> = log.externals.iter().map(|x| &x.path).collect();
        out.sort_by_key(|(p, _)| order.iter().position(|o| *o == p));
        Ok(out)
    }

    /// Puts `staged` at `x`'s path and stores it, unless its files changed
    /// here since they were stored or something that is not its own is in
    /// the way (then `Ok(Err(conflict))`, nothing touched). A folder is
    /// updated in place: files the source dropped are removed, the new ones
    /// renamed over the old one by one, and nothing that is not an entry of
    /// it is ever moved or removed. The new record and the number of files
    /// on success.
    fn replace_external(
        &mut self,
        x: &External,
        staged: Staged,
    ) -> Result<std::result::Result<(External, u64), Error>> {
        let abs = self.repo.env.expand(&x.path);
        let tilde: OsString = x.path.clone().into();
        let changed: Vec<String> = match self.status_of_args(std::slice::from_ref(&tilde)) {
            Ok(lines) => lines
                .into_iter()
                .filter(|l| {
                    matches!(
                        l.state,
                        State::Modified
                            | State::Conflict
                            | State::TypeChange
                            | State::Drifted
                            | State::Error
                    )
                })
                .map(|l| l.path)
                .collect(),
            Err(Error::NoMatch) => Vec::new(),
            Err(e) => return Err(e),
        };
        if !changed.is_empty() {
            let n = changed.len();
            return Ok(Err(Error::Conflict(format!(
                "{} changed here since it was stored ({}{}); checkpoint or restore {} first",
                x.path,
                changed[..n.min(3)].join(", "),
                if n > 3 { ", …" } else { "" },
                if n == 1 { "it" } else { "them" },
            ))));
        }
        // Its entries, by their path below it ("" for a file external).
        let tracked: std::collections::HashMap<PathBuf, Option<sgard_manifest::Mode>> = self
            .repo
            .manifest
            .files
            .iter()
            .filter(|e| path_is_under(&e.path, &x.path))
            .map(|e| {
                let rel = e.path.strip_prefix(x.path.as_str()).unwrap_or("");
                (PathBuf::from(rel.trim_start_matches('/')), e.mode)
            })
            .collect();
        let in_the_way = |what: String| {
            Error::Conflict(format!(
                "{what} is in the way of the external at {} and is none of its files; \
                 move it away, then refresh again",
                x.path
            ))
        };
        let parent = abs.parent().map(PathBuf::from).unwrap_or_default();
        let here = fsx::lstat(&abs)?;
        let mut gone: Vec<String> = Vec::new();
        let files: Vec<PathBuf>;
        if !staged.content.is_dir() {
            // One file: it replaces the stored one, keeping its mode (an
            // executable made so by hand stays executable).
            match (&here, tracked.get(Path::new(""))) {
                (None, _) => {}
                (Some(m), Some(_)) if !m.is_dir() => {}
                _ => return Ok(Err(in_the_way(abs.display().to_string()))),
            }
            #[cfg(unix)]
            if let Some(Some(mode)) = tracked.get(Path::new("")) {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(
                    &staged.content,
                    std::fs::Permissions::from_mode(mode.bits() & 0o777),
                )
                .map_err(|e| Error::io("setting the mode of", &staged.content, e))?;
            }
            std::fs::rename(&staged.content, &abs)
                .map_err(|e| Error::io("moving into place", &abs, e))?;
            sgard_store::durable::fsync_dir(&parent)?;
            files = vec![abs.clone()];
        } else if here.is_none() {
            let items = walk(&staged.content)?;
            gone = tracked
                .keys()
                .filter(|r| !items.iter().any(|(i, d)| i == *r && !d))
                .map(|r| join_tilde(&x.path, r))
                .collect();
            std::fs::rename(&staged.content, &abs)
                .map_err(|e| Error::io("moving into place", &abs, e))?;
            sgard_store::durable::fsync_dir(&parent)?;
            files = items
                .into_iter()
                .filter(|(_, d)| !d)
                .map(|(r, _)| abs.join(r))
                .collect();
        } else if !here.as_ref().is_some_and(std::fs::Metadata::is_dir) {
            return Ok(Err(in_the_way(abs.display().to_string())));
        } else {
            let items = walk(&staged.content)?;
            let new: std::collections::HashMap<&Path, bool> =
                items.iter().map(|(r, d)| (r.as_path(), *d)).collect();
            // Refused before anything moves: a path of the new content
            // where something that is not an entry of it is.
            let mut blocked = Vec::new();
            for (rel, is_dir) in &items {
                let Some(m) = fsx::lstat(&abs.join(rel))? else {
                    continue;
                };
                if (m.is_dir() && *is_dir) || tracked.contains_key(rel) {
                    continue;
                }
                blocked.push(join_tilde(&x.path, rel));
            }
            if !blocked.is_empty() {
                let n = blocked.len();
                return Ok(Err(in_the_way(format!(
                    "{}{}",
                    blocked[..n.min(3)].join(", "),
                    if n > 3 { ", …" } else { "" }
                ))));
            }
            // Its files the source dropped, or that become folders.
            let mut old: Vec<&PathBuf> = tracked
                .keys()
                .filter(|r| new.get(r.as_path()).is_none_or(|d| *d))
                .collect();
            old.sort_by_key(|r| std::cmp::Reverse(r.components().count()));
            let mut dirs: std::collections::BTreeSet<PathBuf> = std::collections::BTreeSet::new();
            for rel in old {
                let p = abs.join(rel);
                if let Some(m) = fsx::lstat(&p)?
                    && !m.is_dir()
                {
                    std::fs::remove_file(&p).map_err(|e| Error::io("removing", &p, e))?;
                    dirs.insert(p.parent().map(PathBuf::from).unwrap_or_default());
                }
                gone.push(join_tilde(&x.path, rel));
            }
            let mut put = Vec::new();
            for (rel, is_dir) in &items {
                let (from, to) = (staged.content.join(rel), abs.join(rel));
                if *is_dir {
                    if fsx::lstat(&to)?.is_none() {
                        std::fs::create_dir(&to).map_err(|e| Error::io("creating", &to, e))?;
                    }
                    if let Ok(m) = std::fs::metadata(&from) {
                        let _ = std::fs::set_permissions(&to, m.permissions());
                    }
                } else {
                    std::fs::rename(&from, &to)
                        .map_err(|e| Error::io("moving into place", &to, e))?;
                    put.push(to.clone());
                }
                dirs.insert(to.parent().map(PathBuf::from).unwrap_or_default());
            }
            for d in &dirs {
                sgard_store::durable::fsync_dir(d)?;
            }
            files = put;
        }
        self.repo.manifest.files.retain(|e| !gone.contains(&e.path));
        for p in &gone {
            self.work.base.put(p, None);
        }
        let opts = AddOptions {
            no_encrypt: true,
            within_external: true,
            ..AddOptions::default()
        };
        let args: Vec<OsString> = files.into_iter().map(PathBuf::into_os_string).collect();
        if !args.is_empty() {
            self.add(&args, &opts)?;
        } else {
            self.save()?;
        }
        drop(staged.work);
        let mut rec = x.clone();
        rec.sha256 = staged.sha256;
        rec.commit = staged.commit;
        rec.fetched = self.repo.env.now;
        Ok(Ok((rec, staged.files)))
    }
}

/// `tilde/rel` (`tilde` for an empty `rel`).
fn join_tilde(tilde: &str, rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        tilde.to_owned()
    } else {
        format!("{tilde}/{}", rel.to_string_lossy())
    }
}
