//! sgard's own files: the repository, this machine's state, cache and
//! configuration folders (wherever XDG puts them), and the temp files sgard
//! writes beside other files. None of them is ever tracked (a folder walk
//! passes them by, an argument naming one is refused), nothing is written
//! into them for an entry, and `mirror down` never deletes them.

use std::ffi::OsStr;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
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
pub(crate) fn is_temp_name(name: &OsStr) -> bool {
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
    what: &'static str,
    /// Its device and inode, if it exists.
    id: Option<(u64, u64)>,
}

/// What the repository is called among [`OwnDirs`].
const REPOSITORY: &str = "repository";

/// The device and inode of a file.
fn id_of(md: &Metadata) -> Option<(u64, u64)> {
    Some((md.dev(), md.ino()))
}

impl OwnDirs {
    /// Those of the repository at `root`, for the world in `env`.
    pub(crate) fn of(root: &Path, env: &Env) -> Self {
        let dirs = std::iter::once((crate::paths::clean(root), REPOSITORY))
            .chain(env.own_folders())
            .map(|(path, what)| {
                let id = std::fs::metadata(&path).ok().as_ref().and_then(id_of);
                OwnDir { path, what, id }
            })
            .collect();
        OwnDirs { dirs }
    }

    /// Every folder, by path (for [`crate::home::Confine`]).
    pub(crate) fn paths(&self) -> impl Iterator<Item = &Path> {
        self.dirs.iter().map(|d| d.path.as_path())
    }

    /// The one whose device and inode `md` has.
    fn with_id(&self, md: &Metadata) -> Option<&OwnDir> {
        let id = id_of(md);
        self.dirs.iter().find(|d| d.id.is_some() && d.id == id)
    }

    /// Whether the folder `md` describes is one of them.
    pub(crate) fn holds(&self, md: &Metadata) -> bool {
        self.with_id(md).is_some()
    }

    /// The folder `abs` is (or is inside) and what it is: by name, or by
    /// the device and inode of a folder above it.
    pub(crate) fn containing(&self, abs: &Path) -> Option<(&Path, &'static str)> {
        let by_name = self.dirs.iter().find(|d| abs.starts_with(&d.path));
        by_name
            .or_else(|| {
                abs.ancestors()
                    .find_map(|a| self.with_id(&std::fs::metadata(a).ok()?))
            })
            .map(|d| (d.path.as_path(), d.what))
    }
}

impl Garden {
    /// sgard's own folders for this repository, as they are now.
    pub(crate) fn own_dirs(&self) -> OwnDirs {
        OwnDirs::of(&self.root, &self.env)
    }

    /// Refuses a path named on the command line that is one of sgard's own
    /// files: in the repository, in one of its machine-local folders, or
    /// one of its temp files.
    ///
    /// # Errors
    /// [`crate::Error::InsideRepo`] or [`crate::Error::OwnFile`].
    pub(crate) fn refuse_own(&self, abs: &Path) -> crate::Result<()> {
        let what = match self.own_dirs().containing(abs) {
            Some((_, REPOSITORY)) => return Err(crate::Error::InsideRepo(abs.to_path_buf())),
            Some((dir, what)) => format!(
                "{what} ({}): it is this machine's, never shared",
                self.env.shown(dir)
            ),
            None if abs.file_name().is_some_and(is_temp_name) => {
                "temp file: a write interrupted or under way".to_owned()
            }
            None => return Ok(()),
        };
        Err(crate::Error::OwnFile {
            path: self.env.shown(abs),
            what,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
