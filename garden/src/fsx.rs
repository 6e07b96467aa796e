//! Filesystem helpers: safe opening, hashing, and atomic restores.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sgard_manifest::{EntryKind, Mode};
use sgard_store::{Hash, Hasher, durable};

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
    /// Classifies lstat metadata.
    pub fn of(md: &Metadata) -> Self {
        let ft = md.file_type();
        if ft.is_symlink() {
            DiskKind::Link
        } else if ft.is_dir() {
            DiskKind::Dir
        } else if ft.is_fifo() {
            DiskKind::Fifo
        } else if ft.is_socket() {
            DiskKind::Socket
        } else if ft.is_block_device() || ft.is_char_device() {
            DiskKind::Device
        } else {
            DiskKind::File
        }
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
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Ok(None),
        Err(e) => Err(Error::io("inspecting", path, e)),
    }
}

/// The permission bits of lstat metadata.
pub fn mode_of(md: &Metadata) -> Mode {
    Mode::from_st_mode(md.mode())
}

/// Opens a regular file for reading without following a symlink and
/// without blocking on a FIFO that replaced it, and checks it is still a
/// regular file.
///
/// # Errors
/// [`Error::Io`] or [`Error::Unsupported`] when it is not a regular file.
pub fn open_regular(path: &Path) -> Result<(File, Metadata)> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
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
            Ok(n) => h.update(&buf[..n]),
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

/// Creates the parent folders of `path` durably (mode 0755 less the umask).
///
/// # Errors
/// [`Error::Io`] naming the folder.
pub fn ensure_parent(path: &Path) -> Result<PathBuf> {
    let dir = durable::parent_of(path);
    durable::create_dir_all_durable(&dir)?;
    Ok(dir)
}

/// Replaces `dest` atomically with a regular file of exactly `mode`, filled
/// by `fill`: temp file in the same folder, fill, chmod, `sync_all`, rename,
/// fsync of the folder. A symlink at `dest` is replaced, never written
/// through. If `fill` fails, `dest` is untouched and the temp file removed.
///
/// # Errors
/// Whatever `fill` returns, or [`Error::Io`].
pub fn write_file_atomic(
    dest: &Path,
    mode: Mode,
    fill: impl FnOnce(&mut File) -> Result<()>,
) -> Result<()> {
    let (tmp, dir) = fill_temp(dest, mode, fill)?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| Error::io("syncing", tmp.path().to_path_buf(), e))?;
    tmp.persist(dest)
        .map_err(|e| Error::io("renaming into place", dest, e.error))?;
    durable::fsync_dir(&dir)?;
    Ok(())
}

/// Replaces `dest` atomically with a symlink to `target`.
///
/// # Errors
/// [`Error::Io`].
pub fn symlink_atomic(target: &str, dest: &Path) -> Result<()> {
    let dir = ensure_parent(dest)?;
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut attempt = 0u32;
    let tmp = loop {
        let candidate = dir.join(format!(
            ".sgard-link-{}-{}-{attempt}",
            std::process::id(),
            name
        ));
        match std::os::unix::fs::symlink(target, &candidate) {
            Ok(()) => break candidate,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => return Err(Error::io("creating symlink", candidate, e)),
        }
    };
    if let Err(e) = fs::rename(&tmp, dest) {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io("renaming into place", dest, e));
    }
    durable::fsync_dir(&dir)?;
    Ok(())
}

/// Sets the mode of a path that lstat says is a file or folder (not a link).
///
/// # Errors
/// [`Error::Io`].
pub fn chmod(path: &Path, mode: Mode) -> Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode.bits()))
        .map_err(|e| Error::io("setting mode of", path, e))
}

/// Prepares `dest`'s replacement as a temp file in the same folder (filled,
/// exact mode) without syncing or renaming it: see [`commit_staged`].
///
/// # Errors
/// Whatever `fill` returns, or [`Error::Io`]; the temp file is then removed.
pub fn stage_file(
    dest: &Path,
    mode: Mode,
    fill: impl FnOnce(&mut File) -> Result<()>,
) -> Result<tempfile::TempPath> {
    Ok(fill_temp(dest, mode, fill)?.0.into_temp_path())
}

/// A temp file next to `dest` (its parents created), filled by `fill` and
/// given exactly `mode`; also returns the folder it is in.
fn fill_temp(
    dest: &Path,
    mode: Mode,
    fill: impl FnOnce(&mut File) -> Result<()>,
) -> Result<(tempfile::NamedTempFile, PathBuf)> {
    let dir = ensure_parent(dest)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".sgard-restore-")
        .tempfile_in(&dir)
        .map_err(|e| Error::io("creating temp file in", &dir, e))?;
    fill(tmp.as_file_mut())?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(mode.bits()))
        .map_err(|e| Error::io("setting mode of", dest, e))?;
    Ok((tmp, dir))
}

/// Puts staged files in place durably at a constant number of flushes:
/// one `syncfs` per filesystem (the temp files' bytes), the renames, and one
/// more `syncfs` (the new names); where `syncfs` is unavailable, each file
/// and folder is fsynced instead. Returns one result per file, in order.
pub fn commit_staged(staged: Vec<(tempfile::TempPath, PathBuf)>) -> Vec<Result<()>> {
    use std::collections::BTreeMap;
    // One representative folder per filesystem.
    let mut per_dev: BTreeMap<u64, PathBuf> = BTreeMap::new();
    for (_, dest) in &staged {
        let dir = durable::parent_of(dest);
        if let Ok(m) = fs::metadata(&dir) {
            per_dev.entry(m.dev()).or_insert(dir);
        }
    }
    let flushed = !per_dev.is_empty() && per_dev.values().all(|d| durable::syncfs(d));
    let mut out = Vec::with_capacity(staged.len());
    let mut dirs = std::collections::BTreeSet::new();
    for (tmp, dest) in staged {
        let r = (|| {
            if !flushed {
                File::open(&tmp)
                    .and_then(|f| f.sync_all())
                    .map_err(|e| Error::io("syncing", tmp.to_path_buf(), e))?;
            }
            tmp.persist(&dest)
                .map_err(|e| Error::io("renaming into place", &dest, e.error))?;
            Ok(())
        })();
        if r.is_ok() {
            dirs.insert(durable::parent_of(&dest));
        }
        out.push(r);
    }
    let flushed_again = flushed && per_dev.values().all(|d| durable::syncfs(d));
    if !flushed_again {
        for d in dirs {
            if let Err(e) = durable::fsync_dir(&d)
                && let Some(last) = out.iter_mut().rev().find(|r| r.is_ok())
            {
                *last = Err(e.into());
            }
        }
    }
    out
}
