//! `status`: how each tracked path on disk compares with the repository.

use sgard_manifest::{Entry, EntryKind};

use crate::fsx::{self, DiskKind};
use crate::{Garden, Result};

/// The state of one entry.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
    /// Disk matches the repository.
    Ok,
    /// Content, link target or mode differs.
    Modified,
    /// A locked entry differs on disk (the repository wins on restore).
    Drifted,
    /// Not on disk.
    Missing,
    /// On disk as another kind of object.
    TypeChange,
    /// Targeted away from this machine.
    Skipped,
    /// Could not be read (the line's detail says why).
    Error,
}

impl State {
    /// The word printed for it.
    pub fn as_str(&self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Modified => "modified",
            State::Drifted => "drifted",
            State::Missing => "missing",
            State::TypeChange => "typechange",
            State::Skipped => "skipped",
            State::Error => "error",
        }
    }

    /// Whether this state means disk and repository disagree.
    pub fn is_change(&self) -> bool {
        !matches!(self, State::Ok | State::Skipped)
    }
}

/// One line of status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusLine {
    /// The entry's path.
    pub path: String,
    /// Its state.
    pub state: State,
    /// Extra detail (what changed, or the error).
    pub detail: Option<String>,
}

impl Garden {
    /// The state of every entry, in manifest order. Never modifies anything.
    ///
    /// # Errors
    /// Only for inconsistent targeting; per-entry read errors become
    /// [`State::Error`] lines.
    pub fn status(&self) -> Result<Vec<StatusLine>> {
        self.prehash(false);
        let mut out = Vec::with_capacity(self.manifest.files.len());
        for e in &self.manifest.files {
            out.push(self.status_of(e)?);
        }
        Ok(out)
    }

    pub(crate) fn status_of(&self, e: &Entry) -> Result<StatusLine> {
        let line = |state, detail: Option<String>| StatusLine {
            path: e.path.clone(),
            state,
            detail,
        };
        if !self.applies(e)? {
            return Ok(line(State::Skipped, None));
        }
        match self.compare(e) {
            Ok((state, detail)) => Ok(line(state, detail)),
            Err(err) => Ok(line(
                State::Error,
                Some(crate::checkpoint::error_chain(&err)),
            )),
        }
    }

    /// Compares one entry with the disk.
    fn compare(&self, e: &Entry) -> Result<(State, Option<String>)> {
        let abs = self.env.expand(&e.path);
        let Some(md) = self.lstat_tracked(&e.path, &abs)? else {
            return Ok((State::Missing, None));
        };
        let disk = DiskKind::of(&md);
        if !disk.matches(e.kind) {
            return Ok((
                State::TypeChange,
                Some(format!("tracked as a {}, now {}", e.kind, disk.describe())),
            ));
        }
        let changed = |what: &str| {
            let state = if e.locked {
                State::Drifted
            } else {
                State::Modified
            };
            Ok((state, Some(what.to_owned())))
        };
        let mode_differs =
            e.kind != EntryKind::Link && e.mode.is_some_and(|m| m != fsx::mode_of(&md));
        match e.kind {
            EntryKind::File if e.encrypted => {
                let (sha, _) = self.hash_tracked(&e.path, &abs, &md)?;
                match self.known_match(e, sha) {
                    Some(true) => {}
                    Some(false) => return changed("content"),
                    // Never ask for the passphrase in status.
                    None => {
                        return changed(
                            "encrypted; cannot compare without the passphrase \
                             (no fingerprint on this machine)",
                        );
                    }
                }
            }
            EntryKind::File => {
                let (hash, _) = self.hash_tracked(&e.path, &abs, &md)?;
                if e.hash != Some(hash) {
                    return changed("content");
                }
            }
            EntryKind::Link => {
                if e.target.as_deref() != Some(fsx::read_link(&abs)?.as_str()) {
                    return changed("target");
                }
            }
            EntryKind::Directory => {}
        }
        if mode_differs {
            return changed("mode");
        }
        Ok((State::Ok, None))
    }
}
