//! `restore`: write tracked entries back to disk.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sgard_manifest::{Entry, EntryKind, Mode};

use crate::fsx::{self, DiskKind};
use crate::{Error, Garden, Result};

/// Answers yes/no questions (the CLI reads them from one stdin reader).
pub trait Prompt {
    /// Asks `question` (e.g. `Overwrite ~/.bashrc?`); true means yes.
    fn confirm(&mut self, question: &str) -> bool;
}

/// A prompt that always answers the same.
impl Prompt for bool {
    fn confirm(&mut self, _question: &str) -> bool {
        *self
    }
}

/// Flags of `restore`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RestoreOptions {
    /// Overwrite without asking.
    pub force: bool,
    /// Say what would happen; change nothing, ask nothing.
    pub dry_run: bool,
}

/// What restore did (or, in a dry run, would do) to one entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreAction {
    /// Created where nothing was.
    Created,
    /// Replaced what was there.
    Overwritten,
    /// Content already matched; only the mode was corrected.
    ModeFixed,
    /// Already identical; nothing written.
    UpToDate,
    /// The user declined to overwrite it.
    Declined,
    /// Dry run: it would ask before overwriting.
    WouldAsk,
    /// Targeted away from this machine.
    NotTargeted,
    /// It failed; nothing was written for it.
    Failed(String),
}

/// The result of [`Garden::restore`].
#[derive(Debug, Default)]
pub struct RestoreReport {
    /// Every selected entry and what happened to it, in manifest order.
    pub actions: Vec<(String, RestoreAction)>,
    /// The errors behind the `Failed` actions.
    pub failures: Vec<(String, Error)>,
}

impl RestoreReport {
    /// Whether any failure was an integrity failure (exit code 3).
    pub fn has_integrity_failure(&self) -> bool {
        self.failures.iter().any(|(_, e)| e.is_integrity())
    }
}

enum Plan {
    Write { existed: bool },
    Ask,
    FixMode(Mode),
    Nothing,
}

impl Garden {
    /// Restores the entries selected by `args` (all when empty; a folder
    /// selects everything under it).
    ///
    /// For each entry that applies here: a path whose content already matches
    /// is not rewritten (only its mode is corrected); a locked entry is put
    /// back without asking; otherwise, without `force`, a path whose mtime is
    /// not older than the entry's `updated` (whole seconds) is only
    /// overwritten if `prompt` says yes. Files are written through a temp
    /// file and a rename, with their exact mode, after their content passed
    /// its hash. One failing entry does not stop the others.
    ///
    /// # Errors
    /// [`Error::NoMatch`] when `args` select nothing. Per-entry failures are
    /// in the report.
    pub fn restore(
        &self,
        args: &[OsString],
        opts: RestoreOptions,
        prompt: &mut dyn Prompt,
    ) -> Result<RestoreReport> {
        let mut report = RestoreReport::default();
        for i in self.select(args)? {
            let e = &self.manifest.files[i];
            let action = match self.restore_entry(e, opts, prompt) {
                Ok(a) => a,
                Err(err) => {
                    let msg = crate::checkpoint::error_chain(&err);
                    report.failures.push((e.path.clone(), err));
                    RestoreAction::Failed(msg)
                }
            };
            report.actions.push((e.path.clone(), action));
        }
        Ok(report)
    }

    fn restore_entry(
        &self,
        e: &Entry,
        opts: RestoreOptions,
        prompt: &mut dyn Prompt,
    ) -> Result<RestoreAction> {
        if !self.applies(e)? {
            return Ok(RestoreAction::NotTargeted);
        }
        if e.encrypted {
            return Err(Error::Unsupported {
                path: e.path.clone(),
                reason: "entry is encrypted and this sgard cannot decrypt yet".into(),
            });
        }
        let abs = self.env.expand(&e.path);
        let plan = self.plan(e, &abs, opts)?;
        let existed = match plan {
            Plan::Nothing => return Ok(RestoreAction::UpToDate),
            Plan::FixMode(mode) => {
                if !opts.dry_run {
                    fsx::chmod(&abs, mode)?;
                }
                return Ok(RestoreAction::ModeFixed);
            }
            Plan::Ask if opts.dry_run => return Ok(RestoreAction::WouldAsk),
            Plan::Ask => {
                if !prompt.confirm(&format!("Overwrite {}?", e.path)) {
                    return Ok(RestoreAction::Declined);
                }
                true
            }
            Plan::Write { existed } => existed,
        };
        if !opts.dry_run {
            self.write_entry(e, &abs)?;
        }
        Ok(if existed {
            RestoreAction::Overwritten
        } else {
            RestoreAction::Created
        })
    }

    fn plan(&self, e: &Entry, abs: &Path, opts: RestoreOptions) -> Result<Plan> {
        let Some(md) = fsx::lstat(abs)? else {
            return Ok(Plan::Write { existed: false });
        };
        let disk = DiskKind::of(&md);
        let want_mode = e.mode;
        if disk.matches(e.kind) {
            let same = match e.kind {
                EntryKind::File => Some(fsx::hash_file(abs)?.0) == e.hash,
                EntryKind::Link => e.target.as_deref() == Some(fsx::read_link(abs)?.as_str()),
                EntryKind::Directory => true,
            };
            if same {
                return Ok(match want_mode {
                    Some(m) if e.kind != EntryKind::Link && m != fsx::mode_of(&md) => {
                        Plan::FixMode(m)
                    }
                    _ => Plan::Nothing,
                });
            }
        } else if disk == DiskKind::Dir {
            return Err(Error::Unsupported {
                path: e.path.clone(),
                reason: format!(
                    "is a folder on disk, tracked as a {}; not replacing it",
                    e.kind
                ),
            });
        } else if e.kind == EntryKind::Directory {
            return Err(Error::Unsupported {
                path: e.path.clone(),
                reason: format!(
                    "is {} on disk, tracked as a folder; not replacing it",
                    disk.describe()
                ),
            });
        }
        if e.locked || opts.force {
            return Ok(Plan::Write { existed: true });
        }
        let disk_secs = md.mtime();
        if disk_secs >= e.updated.unix_seconds() {
            Ok(Plan::Ask)
        } else {
            Ok(Plan::Write { existed: true })
        }
    }

    fn write_entry(&self, e: &Entry, abs: &Path) -> Result<()> {
        match e.kind {
            EntryKind::File => {
                let hash = e
                    .hash
                    .ok_or_else(|| Error::Invalid(format!("{}: no hash", e.path)))?;
                let mode = e.mode.unwrap_or(Mode::from_st_mode(0o644));
                fsx::write_file_atomic(abs, mode, |f| {
                    self.store
                        .read_to(&hash, f)
                        .map_err(|source| match source {
                            sgard_store::Error::Source(io) => Error::io("writing", abs, io),
                            s if s.is_integrity() => Error::Integrity {
                                path: e.path.clone(),
                                source: s,
                            },
                            s => Error::Store(s),
                        })?;
                    Ok(())
                })
            }
            EntryKind::Link => {
                let target = e
                    .target
                    .as_deref()
                    .ok_or_else(|| Error::Invalid(format!("{}: no target", e.path)))?;
                fsx::symlink_atomic(target, abs)
            }
            EntryKind::Directory => {
                sgard_store::durable::create_dir_all_durable(abs)?;
                if let Some(m) = e.mode {
                    fsx::chmod(abs, m)?;
                }
                Ok(())
            }
        }
    }
}
