//! The modes of the folders above tracked paths.
//!
//! A restore on a new machine creates the folders a tracked path needs;
//! without a record it made `~/.ssh` 0755 where it was 0700. The manifest's
//! `folders` lists, for folders under the home (never the home itself)
//! above tracked paths, every mode that is not the default 0755, without
//! making those folders entries. `add`, `checkpoint` and `mirror up` keep
//! the records; a restore creates a missing folder with its record (and
//! never changes the mode of a folder that exists).
//!
//! Several machines share the records, so they follow the rule entries
//! follow (see `base.rs`): this machine keeps, in its state for the
//! repository (`<state>/repos/<key>/folders`, `MODE PATH` lines), the mode
//! each folder had when disk and repository last agreed. A folder whose
//! mode moved here since is recorded; one the repository moved (another
//! machine) is left as it is here; a folder the repository has no record of
//! is recorded as the disk has it; one that differs with no agreement here
//! keeps the repository's record. So a machine whose `~/.ssh` was 0755
//! before sgard came never loosens another machine's 0700. A manifest with
//! no records at all while this machine agreed on some was rewritten by the
//! Go sgard (it drops the list): the agreed modes the disk still has are
//! recorded again.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::PathBuf;

use sgard_manifest::{DEFAULT_FOLDER_MODE, EntryKind, Mode};

use crate::Garden;
use crate::fsx::{self, DiskKind};

/// This machine's record of agreed folder modes, in the repository's state.
const AGREED_FILE: &str = "folders";

/// The folders between the home (exclusive) and `path` (exclusive),
/// outermost first; none for a path outside the home.
pub(crate) fn parents_of(path: &str) -> impl Iterator<Item = &str> {
    let rest = path.strip_prefix("~/").unwrap_or("");
    rest.match_indices('/').map(move |(i, _)| &path[..2 + i])
}

/// The folders above `paths` (see [`parents_of`]). Paths under one folder
/// come together when sorted: each run of them is looked at once, so
/// 100,000 paths in 1,000 folders cost 1,000 folders' work and memory.
pub(crate) fn folders_above<'a>(paths: impl IntoIterator<Item = &'a str>) -> BTreeSet<&'a str> {
    let mut folders = BTreeSet::new();
    let mut last_parent = None;
    for p in paths {
        let parent = parents_of(p).last();
        if parent.is_none() || parent != last_parent {
            last_parent = parent;
            folders.extend(parents_of(p));
        }
    }
    folders
}

/// The mode a restore gives a folder recorded with `mode`: owner read,
/// write and search are always kept, so the restore can write what goes
/// inside.
pub(crate) fn creation_mode(mode: Mode) -> Mode {
    Mode::from_st_mode(mode.bits() | 0o700)
}

impl Garden {
    fn agreed_path(&self) -> Option<PathBuf> {
        self.repo.local_dir.as_ref().map(|d| d.join(AGREED_FILE))
    }

    /// The folder modes this machine last agreed on with the repository (a
    /// missing or unreadable file is no agreement: the repository's
    /// records then win where they differ).
    fn load_agreed(&self) -> BTreeMap<String, Mode> {
        let mut out = BTreeMap::new();
        let Some(text) = self
            .agreed_path()
            .and_then(|p| sgard_store::durable::read_regular_to_string(&p).ok())
        else {
            return out;
        };
        for line in text.lines() {
            if let Some((mode, path)) = line.split_once(' ')
                && let Ok(m) = Mode::parse(mode)
                && path.starts_with("~/")
            {
                out.insert(path.to_owned(), m);
            }
        }
        out
    }

    /// Writes the agreed modes (best effort: without them the repository's
    /// records win, which is safe).
    fn save_agreed(&self, agreed: &BTreeMap<String, Mode>) {
        let Some(path) = self.agreed_path() else {
            return;
        };
        let mut text = String::new();
        for (p, m) in agreed {
            if !p.contains('\n') {
                text.push_str(&format!("{m} {p}\n"));
            }
        }
        let dir = sgard_store::durable::parent_of(&path);
        if sgard_store::durable::create_private_dir_all(&dir).is_ok() {
            let _ = sgard_store::durable::write_atomic(&path, text.as_bytes(), 0o600);
        }
    }

    /// Brings the folder records of the entries `args` select (those that
    /// apply here) up to date with the disk (see the module documentation).
    /// Returns whether the manifest changed.
    pub(crate) fn refresh_folders_for(&mut self, args: &[OsString]) -> bool {
        let Ok(picked) = self.repo.select(args) else {
            return false;
        };
        let folders: Vec<String> = folders_above(
            picked
                .into_iter()
                .map(|i| &self.repo.manifest.files[i])
                .filter(|e| self.repo.applies(e).unwrap_or(false))
                .map(|e| e.path.as_str()),
        )
        .into_iter()
        .map(str::to_owned)
        .collect();
        self.refresh_folders(&folders)
    }

    /// Brings the records of `folders` (sorted, distinct: see
    /// [`folders_above`]) up to date with the disk, three ways (see the
    /// module documentation). Returns whether the manifest changed.
    pub(crate) fn refresh_folders(&mut self, folders: &[String]) -> bool {
        // Records of folders with nothing tracked below them any more go.
        let files = &self.repo.manifest.files;
        let count = self.repo.manifest.folders.len();
        self.repo.manifest.folders.retain(|f| {
            let prefix = format!("{}/", f.path);
            let at = files.partition_point(|e| e.path.as_str() < prefix.as_str());
            files.get(at).is_some_and(|e| e.path.starts_with(&prefix))
        });
        let pruned = self.repo.manifest.folders.len() != count;
        if folders.is_empty() {
            return pruned;
        }
        let mut agreed = self.load_agreed();
        let before = agreed.clone();
        // No record at all where this machine agreed on some: the Go sgard
        // rewrote the manifest (it drops the list), which is no news; what
        // this disk still has as agreed is recorded again.
        let dropped = self.repo.manifest.folders.is_empty()
            && agreed.values().any(|m| m.bits() != DEFAULT_FOLDER_MODE);
        let mut changed = Vec::new();
        // Looked at on every thread: one per folder above the entries.
        let env = &self.repo.env;
        let seen = crate::par::map(folders, 512, |f| fsx::lstat(&env.expand(f)).ok().flatten());
        for (f, md) in folders.iter().zip(seen) {
            // A tracked folder keeps its own mode in its entry.
            if self
                .repo
                .manifest
                .get(f)
                .is_some_and(|e| e.kind == EntryKind::Directory)
            {
                continue;
            }
            let Some(Some(md)) = md else {
                continue;
            };
            // A symlink to a folder is not a folder of ours to describe.
            if DiskKind::of(&md) != DiskKind::Dir {
                continue;
            }
            let recorded = self.repo.manifest.folder_mode(f);
            let disk = fsx::mode_to_record(fsx::mode_of(&md), recorded, &env.expand(f));
            let repo = recorded.unwrap_or(Mode::from_st_mode(DEFAULT_FOLDER_MODE));
            let take = match agreed.get(f) {
                // Not moved here (the repository may have moved: left),
                // unless the whole list was dropped.
                Some(a) if *a == disk => dropped && recorded.is_none(),
                // Moved here only.
                Some(a) => *a == repo,
                None => disk != repo && recorded.is_none(),
            };
            if take && self.repo.manifest.set_folder_mode(f, Some(disk)) {
                changed.push(format!("{f} ({disk})"));
            }
            let repo = self
                .repo
                .manifest
                .folder_mode(f)
                .unwrap_or(Mode::from_st_mode(DEFAULT_FOLDER_MODE));
            if repo == disk {
                agreed.insert(f.to_owned(), disk);
            }
        }
        if agreed != before && !self.repo.dry_run {
            self.save_agreed(&agreed);
        }
        if !changed.is_empty() {
            self.work.note(format!(
                "{} the mode of folder{} {}",
                if self.repo.dry_run {
                    "would record"
                } else {
                    "recorded"
                },
                if changed.len() == 1 { "" } else { "s" },
                changed.join(", ")
            ));
        }
        pruned || !changed.is_empty()
    }

    /// Creates the missing folders above `paths` that the repository has a
    /// mode for, outermost first, with that mode (see [`creation_mode`]);
    /// folders that exist are left as they are, and folders without a
    /// record are made as ever when a file is put inside. A folder that
    /// cannot be made here is left to the write that needs it, which
    /// reports it.
    pub(crate) fn create_recorded_folders<'p>(&self, paths: impl Iterator<Item = &'p str>) {
        if self.repo.manifest.folders.is_empty() {
            return;
        }
        let wanted = folders_above(paths);
        let mut agreed: Option<BTreeMap<String, Mode>> = None;
        for f in wanted {
            let Some(mode) = self.repo.manifest.folder_mode(f) else {
                continue;
            };
            let abs = self.repo.env.expand(f);
            if !matches!(fsx::lstat(&abs), Ok(None)) {
                continue;
            }
            let mode = creation_mode(mode);
            if let Ok(true) = self.repo.confine.create_dir(&abs, mode) {
                agreed
                    .get_or_insert_with(|| self.load_agreed())
                    .insert(f.to_owned(), mode);
            }
        }
        if let Some(a) = agreed {
            self.save_agreed(&a);
        }
    }
}

/// Merges the folder records of a pull: per folder, the side that changed
/// it since `base` (both: this one), special bits (setuid, setgid, sticky)
/// dropped from what is taken from the server unless `setuid` is trusted.
/// A server manifest with no records at all (the Go sgard drops the field)
/// is no news. Returns the merged records and the folders whose special
/// bits were dropped.
pub(crate) fn merge(
    base: &[sgard_manifest::FolderMode],
    local: &[sgard_manifest::FolderMode],
    theirs: &[sgard_manifest::FolderMode],
    setuid: bool,
) -> (Vec<sgard_manifest::FolderMode>, Vec<String>) {
    if theirs.is_empty() {
        return (local.to_vec(), Vec::new());
    }
    let map = |v: &[sgard_manifest::FolderMode]| -> BTreeMap<String, Mode> {
        v.iter().map(|f| (f.path.clone(), f.mode)).collect()
    };
    let (b, l, t) = (map(base), map(local), map(theirs));
    let paths: BTreeSet<&String> = b.keys().chain(l.keys()).chain(t.keys()).collect();
    let mut out = Vec::new();
    let mut stripped = Vec::new();
    for p in paths {
        let (bm, lm, tm) = (b.get(p), l.get(p), t.get(p));
        let pick = if lm == tm || tm == bm {
            lm.copied()
        } else if lm == bm {
            match tm {
                Some(m) if !setuid && m.bits() & 0o7000 != 0 => {
                    stripped.push(p.clone());
                    Some(Mode::from_st_mode(m.bits() & 0o777))
                }
                other => other.copied(),
            }
        } else {
            lm.copied()
        };
        if let Some(mode) = pick.filter(|m| m.bits() != DEFAULT_FOLDER_MODE) {
            out.push(sgard_manifest::FolderMode {
                path: p.clone(),
                mode,
            });
        }
    }
    (out, stripped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_are_the_folders_between_home_and_the_path() {
        let v: Vec<&str> = parents_of("~/a/b/c").collect();
        assert_eq!(v, ["~/a", "~/a/b"]);
        assert_eq!(parents_of("~/a").count(), 0);
        assert_eq!(parents_of("/etc/x/y").count(), 0);
        assert_eq!(parents_of("~").count(), 0);
    }

    #[test]
    fn a_pull_takes_what_the_server_changed_without_special_bits() {
        let f = |p: &str, m: u32| sgard_manifest::FolderMode {
            path: p.into(),
            mode: Mode::from_st_mode(m),
        };
        let base = [f("~/a", 0o700)];
        let local = [f("~/a", 0o700), f("~/b", 0o750)];
        let theirs = [f("~/a", 0o2750), f("~/c", 0o700)];
        let (out, stripped) = merge(&base, &local, &theirs, false);
        assert_eq!(out, [f("~/a", 0o750), f("~/b", 0o750), f("~/c", 0o700)]);
        assert_eq!(stripped, ["~/a"]);
        let (out, _) = merge(&base, &local, &theirs, true);
        assert_eq!(out[0], f("~/a", 0o2750));
        // A server with no records (a Go peer) changes nothing.
        assert_eq!(merge(&base, &local, &[], false).0, local);
    }
}
