//! [`Dir`] on Unix: `rustix`'s `*at` calls on a descriptor.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, FileType, Mode as RMode, OFlags};
use rustix::io::Errno;

use super::{Kind, Stat};

/// An opened folder.
#[derive(Debug)]
pub(crate) struct Dir(OwnedFd);

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::RDONLY)
    .union(OFlags::CLOEXEC);

fn stat_of(st: &rustix::fs::Stat) -> Stat {
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    };
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let ino = u64::from(st.st_ino as u64);
    Stat {
        kind,
        dev_ino: Some((sgard_store::durable::dev_of(st), ino)),
    }
}

impl Dir {
    /// Opens the folder at `path` (following symlinks: a root).
    pub fn open_root(path: &Path) -> io::Result<Dir> {
        Ok(Dir(rustix::fs::openat(
            CWD,
            path,
            DIR_FLAGS,
            RMode::empty(),
        )?))
    }

    /// Opens the folder `name` in this one; a symlink is an error.
    pub fn open_dir_nofollow(&self, name: &OsStr) -> io::Result<Dir> {
        let flags = DIR_FLAGS | OFlags::NOFOLLOW;
        Ok(Dir(rustix::fs::openat(
            &self.0,
            name,
            flags,
            RMode::empty(),
        )?))
    }

    /// Opens `name` in this one as a folder, through a symlink.
    pub fn open_dir_following(&self, name: &OsStr) -> io::Result<Dir> {
        Ok(Dir(rustix::fs::openat(
            &self.0,
            name,
            DIR_FLAGS,
            RMode::empty(),
        )?))
    }

    /// Creates the folder `name` with `mode` (less the umask). One that
    /// exists is [`io::ErrorKind::AlreadyExists`].
    pub fn create_dir(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        Ok(rustix::fs::mkdirat(
            &self.0,
            name,
            sgard_store::durable::rmode(mode),
        )?)
    }

    /// What `name` is (a relative path: only its last component is not
    /// followed). Nothing there is [`io::ErrorKind::NotFound`].
    pub fn stat(&self, name: &Path) -> io::Result<Stat> {
        let st = rustix::fs::statat(&self.0, name, AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(stat_of(&st))
    }

    /// What this folder is.
    pub fn identity(&self) -> io::Result<Stat> {
        Ok(stat_of(&rustix::fs::fstat(&self.0)?))
    }

    /// Where the symlink `name` points.
    pub fn read_link(&self, name: &OsStr) -> io::Result<PathBuf> {
        let target = rustix::fs::readlinkat(&self.0, name, Vec::new())?;
        Ok(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
    }

    /// Creates the symlink `name` to `target`.
    pub fn symlink(&self, target: &str, name: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::symlinkat(target, &self.0, name)?)
    }

    /// There are no directory junctions on Unix (a symlink is always
    /// made): an error.
    pub fn junction(&self, _dir: &Path, _target: &Path, _name: &OsStr) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Renames `from` to `to` in this folder, replacing what `to` names.
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.0, from, &self.0, to)?)
    }

    /// Removes the file or symlink `name`.
    pub fn remove_file(&self, name: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.0, name, AtFlags::empty())?)
    }

    /// Removes the empty folder `name`.
    pub fn remove_dir(&self, name: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.0, name, AtFlags::REMOVEDIR)?)
    }

    /// Creates the file `name`, which must not exist, for writing, with
    /// mode 0600 until [`set_mode`] gives it its own.
    pub fn create_new(&self, name: &OsStr) -> io::Result<File> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.0, name, flags, RMode::from_raw_mode(0o600))?;
        Ok(File::from(fd))
    }

    /// Opens the file or folder `name` (never through a symlink) to set
    /// its mode; a FIFO does not block the open.
    pub fn open_nofollow(&self, name: &OsStr) -> io::Result<File> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.0, name, flags, RMode::empty())?;
        Ok(File::from(fd))
    }

    /// Sets this folder's mode.
    pub fn set_mode(&self, mode: u32) -> io::Result<()> {
        Ok(rustix::fs::fchmod(
            &self.0,
            sgard_store::durable::rmode(mode),
        )?)
    }

    /// Makes the file `name`'s bytes durable (never through a symlink).
    pub fn sync_file(&self, name: &OsStr) -> io::Result<()> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.0, name, flags, RMode::empty())?;
        Ok(sgard_store::durable::full_fsync(&fd)?)
    }

    /// Makes this folder's names durable (`F_FULLFSYNC` where there is).
    pub fn sync(&self) -> io::Result<()> {
        Ok(sgard_store::durable::full_fsync(&self.0)?)
    }

    /// Flushes the whole file system holding this folder; `false` where
    /// that cannot be done (the caller then syncs file by file).
    pub fn sync_file_system(&self) -> bool {
        sgard_store::durable::syncfs_fd(&self.0)
    }

    /// The names in this folder that `keep` picks (a failure to read is
    /// no names).
    pub fn names_where(&self, mut keep: impl FnMut(&OsStr) -> bool) -> Vec<std::ffi::OsString> {
        let Ok(entries) = rustix::fs::Dir::read_from(&self.0) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| keep(OsStr::from_bytes(e.file_name().to_bytes())))
            .map(|e| OsStr::from_bytes(e.file_name().to_bytes()).to_os_string())
            .collect()
    }
}

/// Sets `mode` on an opened file or folder.
pub(crate) fn set_mode(f: &File, mode: u32) -> io::Result<()> {
    Ok(rustix::fs::fchmod(f, sgard_store::durable::rmode(mode))?)
}

/// Whether an open of a folder failed because something other than a
/// folder is there.
pub(crate) fn not_a_folder(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error().map(Errno::from_raw_os_error),
        Some(Errno::NOTDIR | Errno::LOOP)
    )
}

/// A path as bytes, for a file of paths (see [`path_of_bytes`]).
pub(crate) fn path_bytes(p: &Path) -> Option<Vec<u8>> {
    Some(p.as_os_str().as_bytes().to_vec())
}

/// The path [`path_bytes`] made.
pub(crate) fn path_of_bytes(b: &[u8]) -> Option<PathBuf> {
    Some(PathBuf::from(OsStr::from_bytes(b)))
}
