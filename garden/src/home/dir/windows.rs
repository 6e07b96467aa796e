//! [`Dir`] on Windows: `cap-std`'s folder handles.
//!
//! What differs from Unix, on purpose:
//! - A folder cannot be opened to be flushed, so [`Dir::sync`] does
//!   nothing, and there is no `syncfs`: each staged file is flushed through
//!   its own writable handle before it is closed
//!   ([`super::FLUSH_WHEN_STAGED`]).
//! - Of a mode only the owner's write bit is kept: a file without it gets
//!   the read-only attribute. Folders keep no mode.
//! - Files have no device and inode numbers on stable Rust: sgard's own
//!   folders are known by their paths alone ([`Stat::dev_ino`] is `None`).
//! - A rename whose target another process holds open is retried for a
//!   moment (virus scanners and indexers open new files briefly).
//! - cap-std resolves names under a handle without following symlinks
//!   where asked; on Windows that resolution is its own, as strong as
//!   cap-std makes it.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt, OpenOptionsMaybeDirExt};
use cap_std::ambient_authority;
use cap_std::fs::OpenOptions;

use super::{Kind, Stat};

/// An opened folder.
#[derive(Debug)]
pub(crate) struct Dir(cap_std::fs::Dir);

/// `FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES`: enough to set the
/// read-only attribute of a file that has it.
const ATTRIBUTES: u32 = 0x80 | 0x100;

fn stat_of(md: &cap_std::fs::Metadata) -> Stat {
    let ft = md.file_type();
    let kind = if ft.is_symlink() {
        Kind::Symlink
    } else if ft.is_dir() {
        Kind::Dir
    } else {
        Kind::Other
    };
    Stat {
        kind,
        dev_ino: None,
    }
}

impl Dir {
    /// Opens the folder at `path` (following symlinks: a root).
    pub fn open_root(path: &Path) -> io::Result<Dir> {
        Ok(Dir(cap_std::fs::Dir::open_ambient_dir(
            path,
            ambient_authority(),
        )?))
    }

    /// Opens the folder `name` in this one; a symlink is an error.
    pub fn open_dir_nofollow(&self, name: &OsStr) -> io::Result<Dir> {
        Ok(Dir(self.0.open_dir_nofollow(name)?))
    }

    /// Opens `name` in this one as a folder, through a symlink.
    pub fn open_dir_following(&self, name: &OsStr) -> io::Result<Dir> {
        Ok(Dir(self.0.open_dir(name)?))
    }

    /// Creates the folder `name` (no mode on Windows). One that exists is
    /// [`io::ErrorKind::AlreadyExists`].
    pub fn create_dir(&self, name: &OsStr, _mode: u32) -> io::Result<()> {
        self.0.create_dir(name)
    }

    /// What `name` is (only its last component is not followed). Nothing
    /// there is [`io::ErrorKind::NotFound`].
    pub fn stat(&self, name: &Path) -> io::Result<Stat> {
        Ok(stat_of(&self.0.symlink_metadata(name)?))
    }

    /// What this folder is.
    pub fn identity(&self) -> io::Result<Stat> {
        Ok(stat_of(&self.0.dir_metadata()?))
    }

    /// Where the symlink `name` points.
    pub fn read_link(&self, name: &OsStr) -> io::Result<PathBuf> {
        self.0.read_link_contents(name)
    }

    /// Creates the symlink `name` to `target`: a folder link when `target`
    /// is a folder now, a file link otherwise. Windows allows it only in
    /// developer mode or with the privilege; the error says which.
    pub fn symlink(&self, target: &str, name: &OsStr) -> io::Result<()> {
        let t = Path::new(target);
        let is_dir = if t.is_absolute() {
            std::fs::metadata(t).is_ok_and(|m| m.is_dir())
        } else {
            self.0.metadata(t).is_ok_and(|m| m.is_dir())
        };
        if is_dir {
            self.0.symlink_dir(target, name)?;
        } else {
            self.0.symlink_file(target, name)?;
        }
        // Wine 8 says a symlink was made and makes none: that is a
        // refusal too (see `crate::standin::refused`).
        match self.0.symlink_metadata(name) {
            Ok(m) if m.file_type().is_symlink() => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "Windows said the symlink was made, but there is none",
            )),
        }
    }

    /// Creates the directory junction `name` (this folder is at `dir`) to
    /// the folder `target` (absolute): the stand-in for a folder symlink,
    /// which needs no privilege. The junction is made by path (Windows
    /// has no call relative to a handle for it), then checked to be a link
    /// in this very folder; a junction the path led elsewhere is an error.
    pub fn junction(&self, dir: &Path, target: &Path, name: &OsStr) -> io::Result<()> {
        if let Err(e) = junction::create(target, dir.join(name)) {
            // It makes the (temp-named) folder first: a failure after that
            // leaves it, empty.
            let _ = self.0.remove_dir(name);
            return Err(e);
        }
        match self.0.symlink_metadata(name) {
            Ok(m) if m.file_type().is_symlink() => Ok(()),
            _ => Err(io::Error::other(
                "the junction is not in the folder sgard opened",
            )),
        }
    }

    /// Renames `from` to `to` in this folder, replacing what `to` names,
    /// retried for a moment while another process holds `to`. Windows
    /// never renames over a read-only file, which a Unix rename replaces
    /// like any other: its attribute is cleared first (and put back if the
    /// rename still fails).
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        let target = sgard_store::durable::RenameTarget {
            is_read_only_file: &|| {
                self.0
                    .symlink_metadata(to)
                    .is_ok_and(|m| m.is_file() && m.permissions().readonly())
            },
            set_read_only: &|on| self.set_read_only(to, on),
        };
        sgard_store::durable::retry_rename_to(&target, (), |()| {
            self.0.rename(from, &self.0, to).map_err(|e| (e, ()))
        })
        .map_err(|(e, ())| e)
    }

    /// Sets or clears the read-only attribute of the file `name`.
    fn set_read_only(&self, name: &OsStr, on: bool) -> io::Result<()> {
        let f = self.open_nofollow(name)?;
        let mut p = f.metadata()?.permissions();
        p.set_readonly(on);
        f.set_permissions(p)
    }

    /// Removes the file or symlink `name` (a folder symlink too).
    pub fn remove_file(&self, name: &OsStr) -> io::Result<()> {
        self.0.remove_file_or_symlink(name)
    }

    /// Removes the empty folder `name`.
    pub fn remove_dir(&self, name: &OsStr) -> io::Result<()> {
        self.0.remove_dir(name)
    }

    /// Creates the file `name`, which must not exist, for writing.
    pub fn create_new(&self, name: &OsStr) -> io::Result<File> {
        let mut o = OpenOptions::new();
        o.write(true).create_new(true).follow(FollowSymlinks::No);
        Ok(self.0.open_with(name, &o)?.into_std())
    }

    /// Opens the file or folder `name` (never through a symlink) to set
    /// its mode.
    pub fn open_nofollow(&self, name: &OsStr) -> io::Result<File> {
        use cap_std::fs::OpenOptionsExt;
        let mut o = OpenOptions::new();
        o.access_mode(ATTRIBUTES)
            .follow(FollowSymlinks::No)
            .maybe_dir(true);
        Ok(self.0.open_with(name, &o)?.into_std())
    }

    /// Sets this folder's mode: folders keep none on Windows.
    pub fn set_mode(&self, _mode: u32) -> io::Result<()> {
        Ok(())
    }

    /// Staged files were flushed through their own handle when written.
    pub fn sync_file(&self, _name: &OsStr) -> io::Result<()> {
        Ok(())
    }

    /// A folder cannot be flushed on Windows: its names are as durable as
    /// the file system makes them.
    pub fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    /// There is no `syncfs` on Windows.
    pub fn sync_file_system(&self) -> bool {
        false
    }

    /// The names in this folder that `keep` picks (a failure to read is
    /// no names).
    pub fn names_where(&self, mut keep: impl FnMut(&OsStr) -> bool) -> Vec<OsString> {
        let Ok(entries) = self.0.entries() else {
            return Vec::new();
        };
        entries
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| keep(n))
            .collect()
    }
}

/// Sets `mode` on an opened file: read-only unless the owner may write.
pub(crate) fn set_mode(f: &File, mode: u32) -> io::Result<()> {
    let mut p = f.metadata()?.permissions();
    let read_only = mode & 0o200 == 0;
    if p.readonly() != read_only {
        p.set_readonly(read_only);
        f.set_permissions(p)?;
    }
    Ok(())
}

/// Whether an open of a folder failed because something other than a
/// folder is there.
pub(crate) fn not_a_folder(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotADirectory || e.raw_os_error() == Some(267)
}

/// A path as bytes, for a file of paths: its UTF-8 (a path that has none
/// is not written; see [`path_of_bytes`]).
pub(crate) fn path_bytes(p: &Path) -> Option<Vec<u8>> {
    p.to_str().map(|s| s.as_bytes().to_vec())
}

/// The path [`path_bytes`] made.
pub(crate) fn path_of_bytes(b: &[u8]) -> Option<PathBuf> {
    std::str::from_utf8(b).ok().map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wine 8 says yes to a symlink and makes none: sgard must take that
    /// for the refusal it is, as it takes Windows' want of privilege.
    #[test]
    fn a_symlink_is_made_or_refused_never_pretended() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("target"), b"x").unwrap();
        let d = Dir::open_root(t.path()).unwrap();
        match d.symlink("target", OsStr::new("link")) {
            Ok(()) => assert_eq!(
                d.read_link(OsStr::new("link")).unwrap(),
                Path::new("target")
            ),
            Err(e) => {
                assert!(crate::standin::refused(&e), "{e}");
                assert!(d.stat(Path::new("link")).is_err());
            }
        }
    }

    /// A junction is a link to its folder, and the stand-in for a link
    /// entry to that folder; where none can be made (wine has none),
    /// nothing is left behind.
    #[test]
    fn a_junction_stands_in_or_leaves_nothing() {
        let t = tempfile::tempdir().unwrap();
        let root = crate::clean(t.path());
        std::fs::create_dir(root.join("folder")).unwrap();
        let d = Dir::open_root(&root).unwrap();
        match d.junction(&root, &root.join("folder"), OsStr::new("j")) {
            Ok(()) => {
                assert_eq!(d.stat(Path::new("j")).unwrap().kind, Kind::Symlink);
                assert!(crate::standin::is_stand_in(
                    &root.join("j"),
                    Some("folder"),
                    crate::fsx::DiskKind::Link
                ));
                assert!(!crate::standin::is_stand_in(
                    &root.join("j"),
                    Some("elsewhere"),
                    crate::fsx::DiskKind::Link
                ));
            }
            Err(e) => {
                eprintln!("no junction here: {e}");
                assert!(d.stat(Path::new("j")).is_err());
            }
        }
    }
}
