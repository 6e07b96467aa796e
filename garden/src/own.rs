//! sgard's own files: the repository, this machine's state, cache and
//! configuration folders (wherever XDG puts them, and wherever a symlink
//! there leads), any other sgard repository (a folder holding a
//! `manifest.yaml` beside `blobs/` or a `repo-id`), and the temp files
//! sgard writes beside other files. None of them is ever tracked (a folder
//! walk passes them by, in silence but for another repository; an argument
//! naming one is refused), nothing is written into them for an entry, and
//! `mirror down` never deletes them. [`OwnDirs::judge`] is the one rule; walks,
//! arguments, symlinks and [`crate::home::Confine`] all ask it.

use std::ffi::OsStr;
use std::fs::Metadata;
use std::path::{Path, PathBuf};

use crate::{Env, Garden};

/// What sgard's temp files are named: durable writes (`.sgard-tmp-`, in
/// the repository and the state), staged restores and links in the home
/// (`.sgard-restore-<pid>-`, `.sgard-link-<pid>-`), a script's private
/// folder in the state (`.sgard-run-`).
const TEMP_PREFIXES: [&str; 4] = [
    sgard_store::durable::TMP_PREFIX,
    RESTORE_PREFIX,
    LINK_PREFIX,
    RUN_PREFIX,
];

/// A file a restore stages beside the one it replaces:
/// `.sgard-restore-<pid>-<tag>-<n>`.
pub(crate) const RESTORE_PREFIX: &str = ".sgard-restore-";
/// A symlink staged the same way: `.sgard-link-<pid>-<tag>-<n>`.
pub(crate) const LINK_PREFIX: &str = ".sgard-link-";
/// A script's private folder in the state.
pub(crate) const RUN_PREFIX: &str = ".sgard-run-";

/// Whether `name` is the name of one of sgard's temp files.
fn is_temp_name(name: &OsStr) -> bool {
    let name = name.as_encoded_bytes();
    TEMP_PREFIXES.iter().any(|p| name.starts_with(p.as_bytes()))
}

impl Env {
    /// sgard's machine-local folders and what each is: `sgard` in the XDG
    /// state, cache and configuration homes.
    pub(crate) fn own_folders(&self) -> Vec<(PathBuf, &'static str)> {
        let sgard = |d: &Option<PathBuf>| d.as_ref().map(|d| crate::paths::clean(&d.join("sgard")));
        [
            (sgard(&self.state_dir), "state folder"),
            (sgard(&self.cache_dir), "cache folder"),
            (
                self.config_dir.as_deref().map(crate::paths::clean),
                "configuration folder",
            ),
        ]
        .into_iter()
        .filter_map(|(p, what)| Some((p?, what)))
        .collect()
    }
}

/// What one of sgard's own things is (see [`OwnDirs::judge`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum What {
    /// The repository in use.
    Repository,
    /// This machine's state, cache or configuration folder (which one).
    Folder(&'static str),
    /// Another sgard repository: the default `~/.sgard` while `--repo`
    /// names another, a clone, a Go sgard's.
    OtherRepository,
    /// One of sgard's temp files.
    Temp,
}

/// A path found to be sgard's own: the folder it is or is in (the file
/// itself for a temp file), and what that is.
#[derive(Debug)]
pub(crate) struct Own {
    pub dir: PathBuf,
    pub what: What,
}

impl Own {
    /// What it is, for a refusal to write there.
    pub(crate) fn describe(&self) -> &'static str {
        match self.what {
            What::Repository | What::Folder(_) => "sgard's own repository or state",
            What::OtherRepository => "an sgard repository",
            What::Temp => "named as sgard's temp files are",
        }
    }
}

/// Why a walk passed another repository by (its one note).
pub(crate) const ANOTHER_REPOSITORY: &str = "an sgard repository";

/// Beside a `manifest.yaml` file, the names of which one marks a folder as
/// an sgard repository, each with whether it is a folder: the `blobs`
/// folder (the Go sgard's repositories and ours), or our `repo-id` file (a
/// fresh git clone has no `blobs` yet: git keeps no empty folder).
const MARKS: [(&str, bool); 2] = [("blobs", true), (crate::base::ID_FILE, false)];

/// Whether a folder holds a repository's marks, `kind(name)` saying what
/// the name in it is without following a symlink: a folder (`Some(true)`),
/// something else (`Some(false)`) or nothing (`None`). An ordinary folder
/// costs one look (it has no `manifest.yaml`).
pub(crate) fn holds_repository(kind: impl Fn(&str) -> Option<bool>) -> bool {
    kind(sgard_manifest::MANIFEST_FILE) == Some(false)
        && MARKS.iter().any(|(name, dir)| kind(name) == Some(*dir))
}

/// Whether the folder `dir` holds a repository's marks.
fn is_repository(dir: &Path) -> bool {
    holds_repository(|name| {
        std::fs::symlink_metadata(dir.join(name))
            .ok()
            .map(|m| m.is_dir())
    })
}

/// sgard's own folders as they are now: the repository and the
/// machine-local ones, by path and by device and inode (so a symlink or a
/// bind mount leading into one is known too).
#[derive(Debug)]
pub(crate) struct OwnDirs {
    dirs: Vec<OwnDir>,
}

/// One of [`OwnDirs`].
#[derive(Debug)]
struct OwnDir {
    path: PathBuf,
    what: What,
    /// Its device and inode, if it exists.
    id: Option<(u64, u64)>,
}

/// The device and inode of a file.
fn id_of(md: &Metadata) -> Option<(u64, u64)> {
    crate::platform::HAS_INODES.then(|| crate::platform::dev_ino(md))
}

impl OwnDirs {
    /// Those of the repository at `root`, for the world in `env`.
    pub(crate) fn of(root: &Path, env: &Env) -> Self {
        let dirs = std::iter::once((crate::paths::clean(root), What::Repository))
            .chain(
                env.own_folders()
                    .into_iter()
                    .map(|(p, what)| (p, What::Folder(what))),
            )
            .map(|(path, what)| {
                let id = std::fs::metadata(&path).ok().as_ref().and_then(id_of);
                OwnDir { path, what, id }
            })
            .collect();
        OwnDirs { dirs }
    }

    /// The rule: what of sgard's own the file or folder at `path` is, if
    /// anything, from what is known of it. By name: it is, or is inside,
    /// one of the folders, or its name is a temp file's. By identity: `id`
    /// (the device and inode of what it leads to) is one of the folders'.
    /// Last, `repository()`: whether it is a folder holding a repository's
    /// marks (see [`holds_repository`]), asked only when nothing else said.
    pub(crate) fn judge(
        &self,
        path: &Path,
        id: Option<(u64, u64)>,
        repository: impl FnOnce() -> bool,
    ) -> Option<Own> {
        let found = self.dirs.iter().find(|d| {
            crate::platform::path_is_under(path, &d.path) || (id.is_some() && d.id == id)
        });
        if let Some(d) = found {
            return Some(Own {
                dir: d.path.clone(),
                what: d.what,
            });
        }
        let what = if path.file_name().is_some_and(is_temp_name) {
            What::Temp
        } else if repository() {
            What::OtherRepository
        } else {
            return None;
        };
        Some(Own {
            dir: path.to_path_buf(),
            what,
        })
    }

    /// What of sgard's own `abs` is or is in, wherever it leads: by its
    /// name, then by the real path of what it leads to (or, if that is
    /// nothing, of the folder holding it) and each folder above that. For a
    /// path named on the command line, and a symlink met by a walk.
    pub(crate) fn containing(&self, abs: &Path) -> Option<Own> {
        if let Some(own) = self.judge(abs, None, || false) {
            return Some(own);
        }
        let real = std::fs::canonicalize(abs).ok().or_else(|| {
            let dir = std::fs::canonicalize(abs.parent()?).ok()?;
            Some(dir.join(abs.file_name()?))
        })?;
        real.ancestors().find_map(|a| {
            let md = std::fs::symlink_metadata(a).ok();
            let id = md.as_ref().and_then(id_of);
            let dir = md.is_some_and(|m| m.is_dir());
            self.judge(a, id, || dir && is_repository(a))
        })
    }

    /// What of sgard's own an item a folder walk meets is (the folders
    /// above it were met before, and passed): a folder by its name, its
    /// device and inode (`md`: of the folder, or at the top of a walk of
    /// what it leads to) and a repository's marks; a symlink by where it
    /// leads ([`OwnDirs::containing`]); anything else by its name.
    pub(crate) fn met(&self, path: &Path, md: &Metadata) -> Option<Own> {
        let ft = md.file_type();
        if ft.is_dir() {
            self.judge(path, id_of(md), || is_repository(path))
        } else if ft.is_symlink() {
            self.containing(path)
        } else {
            self.judge(path, None, || false)
        }
    }
}

impl Garden {
    /// sgard's own folders for this repository, as they are now.
    pub(crate) fn own_dirs(&self) -> OwnDirs {
        OwnDirs::of(&self.repo.root, &self.repo.env)
    }

    /// Refuses a path named on the command line that is one of sgard's own
    /// files: in the repository, in one of its machine-local folders, in
    /// another sgard repository, or one of its temp files.
    ///
    /// # Errors
    /// [`crate::Error::InsideRepo`] or [`crate::Error::OwnFile`].
    pub(crate) fn refuse_own(&self, abs: &Path) -> crate::Result<()> {
        let Some(own) = self.own_dirs().containing(abs) else {
            return Ok(());
        };
        let dir = self.repo.env.shown(&own.dir);
        let what = match own.what {
            What::Repository => return Err(crate::Error::InsideRepo(abs.to_path_buf())),
            What::Folder(what) => format!("{what} ({dir}): it is this machine's, never shared"),
            What::OtherRepository => {
                format!("files: {dir} is {ANOTHER_REPOSITORY}, and none is ever tracked")
            }
            What::Temp => "temp file: a write interrupted or under way".to_owned(),
        };
        Err(crate::Error::OwnFile {
            path: self.repo.env.shown(abs),
            what,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_is_a_manifest_beside_blobs_or_a_repo_id() {
        let looks = |names: &'static [(&'static str, bool)]| {
            move |n: &str| names.iter().find(|(m, _)| *m == n).map(|(_, dir)| *dir)
        };
        for yes in [
            &[("manifest.yaml", false), ("blobs", true)][..],
            &[("manifest.yaml", false), ("repo-id", false)],
        ] {
            assert!(holds_repository(looks(yes)), "{yes:?}");
        }
        for no in [
            &[("manifest.yaml", false)][..],
            &[("blobs", true), ("repo-id", false)],
            &[("manifest.yaml", true), ("blobs", true)],
            &[("manifest.yaml", false), ("blobs", false)],
            &[("manifest.yaml", false), ("repo-id", true)],
        ] {
            assert!(!holds_repository(looks(no)), "{no:?}");
        }
    }

    #[test]
    fn temp_names_are_sgards_own() {
        for n in [
            ".sgard-tmp-AbC",
            ".sgard-restore-12-ab-0-x",
            ".sgard-link-12-ab-y",
            ".sgard-run-x",
        ] {
            assert!(is_temp_name(OsStr::new(n)), "{n}");
        }
        for n in [
            ".sgard",
            ".sgardrc",
            "sgard-tmp-x",
            ".sgard-notes",
            "x.sgard-tmp-",
        ] {
            assert!(!is_temp_name(OsStr::new(n)), "{n}");
        }
    }
}
