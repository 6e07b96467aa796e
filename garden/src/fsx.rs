//! Filesystem helpers: safe opening, hashing, and atomic restores.

use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::path::Path;

use sgard_manifest::{EntryKind, Mode};
use sgard_store::{Hash, Hasher};

use crate::{Error, Result};

/// What sits at a path on disk.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DiskKind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A symbolic link.
    Link,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A block or character device.
    Device,
}

impl DiskKind {
    /// The kind a `st_mode` says.
    pub fn of_mode(mode: u32) -> Self {
        use crate::platform::{S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFSOCK};
        match mode & S_IFMT {
            S_IFLNK => DiskKind::Link,
            S_IFDIR => DiskKind::Dir,
            S_IFIFO => DiskKind::Fifo,
            S_IFSOCK => DiskKind::Socket,
            S_IFBLK | S_IFCHR => DiskKind::Device,
            _ => DiskKind::File,
        }
    }

    /// Classifies lstat metadata.
    pub fn of(md: &Metadata) -> Self {
        Self::of_mode(crate::platform::st_mode(md))
    }

    /// The words for it in messages.
    pub fn describe(&self) -> &'static str {
        match self {
            DiskKind::File => "a file",
            DiskKind::Dir => "a folder",
            DiskKind::Link => "a symlink",
            DiskKind::Fifo => "a FIFO",
            DiskKind::Socket => "a socket",
            DiskKind::Device => "a device",
        }
    }

    /// Whether an entry of `kind` can be tracked from this.
    pub fn matches(&self, kind: EntryKind) -> bool {
        matches!(
            (self, kind),
            (DiskKind::File, EntryKind::File)
                | (DiskKind::Dir, EntryKind::Directory)
                | (DiskKind::Link, EntryKind::Link)
        )
    }
}

/// `lstat`, with "not there" as `None`.
///
/// # Errors
/// [`Error::Io`] for anything but "not found".
pub fn lstat(path: &Path) -> Result<Option<Metadata>> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotADirectory => Ok(None),
        Err(e) => Err(Error::io("inspecting", path, e)),
    }
}

/// The permission bits of lstat metadata.
pub fn mode_of(md: &Metadata) -> Mode {
    Mode::from_st_mode(crate::platform::st_mode(md))
}

/// The mode to record (and compare) for the file at `path`, whose mode on
/// disk reads `disk`, tracked until now with `recorded` (`None`: new):
/// `disk` on Unix; on Windows, where a file has only a read-only
/// attribute, the recorded mode with its write bits as the attribute says,
/// and for a new file, executable when Windows can run it as a script (by
/// its name, or its first line, read here: unreadable, it counts as
/// empty). See `platform::windows_mode_to_record`.
pub fn mode_to_record(disk: Mode, recorded: Option<Mode>, path: &Path) -> Mode {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let mut head = Vec::new();
    if crate::platform::READS_HEAD
        && recorded.is_none()
        && let Ok(f) = crate::platform::read_nofollow().open(path)
    {
        let _ = std::io::Read::read_to_end(
            &mut std::io::Read::take(f, crate::scripts::HEAD_LEN as u64),
            &mut head,
        );
    }
    crate::platform::mode_to_record(disk, recorded, &name, &head)
}

/// Reads the first `head.len()` bytes of `f` and seeks back to the start;
/// false when the file is shorter.
///
/// # Errors
/// The read or seek error.
pub fn read_head(f: &mut File, head: &mut [u8]) -> std::io::Result<bool> {
    use std::io::{Read, Seek};
    let mut got = 0;
    while got < head.len() {
        match f.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    f.rewind()?;
    Ok(got == head.len())
}

/// `f` at its start, unless it is a SQLite database (or cannot be read).
pub(crate) fn unless_sqlite(mut f: File) -> Option<File> {
    let mut head = [0u8; 16];
    match read_head(&mut f, &mut head) {
        Ok(true) if crate::sqlite::is_header(&head) => None,
        Ok(_) => Some(f),
        Err(_) => None,
    }
}

/// Opens a regular file for reading without following a symlink and
/// without blocking on a FIFO that replaced it, and checks it is still a
/// regular file.
///
/// # Errors
/// [`Error::Io`] or [`Error::Unsupported`] when it is not a regular file.
pub fn open_regular(path: &Path) -> Result<(File, Metadata)> {
    let f = crate::platform::read_nofollow()
        .open(path)
        .map_err(|e| Error::io("opening", path, e))?;
    let md = f.metadata().map_err(|e| Error::io("inspecting", path, e))?;
    if !md.is_file() {
        return Err(Error::Unsupported {
            path: path.display().to_string(),
            reason: format!("is {}, not a regular file", DiskKind::of(&md).describe()),
        });
    }
    Ok((f, md))
}

/// SHA-256 of a regular file's content, streamed.
///
/// # Errors
/// As [`open_regular`], or [`Error::Io`] when reading fails.
pub fn hash_file(path: &Path) -> Result<(Hash, Metadata)> {
    let (mut f, md) = open_regular(path)?;
    let mut h = Hasher::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                h.update(&buf[..n]);
                sgard_store::cancel::check()?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("reading", path, e)),
        }
    }
    Ok((h.finish(), md))
}

/// Reads a symlink's raw target as UTF-8.
///
/// # Errors
/// [`Error::Io`], or [`Error::BadPath`] for a non-UTF-8 target.
pub fn read_link(path: &Path) -> Result<String> {
    let t = fs::read_link(path).map_err(|e| Error::io("reading link", path, e))?;
    t.into_os_string()
        .into_string()
        .map_err(|_| Error::BadPath {
            path: path.display().to_string(),
            reason: "symlink target is not valid UTF-8".into(),
        })
}

/// Whether this process may list and enter the folder `dir` (Unix:
/// `access(R_OK | X_OK)`; Windows: a listing of it).
///
/// # Errors
/// The reason it may not.
pub fn may_read_dir(dir: &Path) -> io::Result<()> {
    crate::platform::may_read_dir(dir)
}

/// Whether this process may write in `dir` (Unix: `access(W_OK)`;
/// Windows: by making and removing a file there).
///
/// # Errors
/// The reason it may not.
pub fn may_write_dir(dir: &Path) -> io::Result<()> {
    crate::platform::may_write(dir, true)
}
