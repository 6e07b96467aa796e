//! Crash-safe file writes shared by every sgard crate.
//!
//! The protocol for any file that must survive a crash: write a temp file in
//! the destination folder, `sync_all` it, rename it over the destination, then
//! fsync the folder so the rename itself is durable.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Flushes a folder's entries (new names, renames) to disk.
///
/// Filesystems that cannot fsync a folder (some FUSE and network mounts
/// answer `EINVAL` or `ENOTSUP`) are accepted: there is nothing more to do.
///
/// # Errors
/// [`Error::Io`] when the folder cannot be opened or the sync fails.
pub fn fsync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).map_err(|e| Error::io("opening folder", dir, e))?;
    match d.sync_all() {
        Ok(()) => Ok(()),
        Err(e) if is_unsupported(&e) => Ok(()),
        Err(e) => Err(Error::io("syncing folder", dir, e)),
    }
}

fn is_unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOTSUP))
        || e.kind() == io::ErrorKind::Unsupported
}

/// The folder holding `path` (`.` for a bare file name).
pub fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Atomically and durably replaces `path` with `data`, with permission bits `mode`.
///
/// Readers see either the old file or the new one, never a mix, and after a
/// crash the file is one of the two.
///
/// # Errors
/// [`Error::Io`] naming the path on any failure; the old file is then untouched.
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    write_via_temp(path, mode, true, |f| f.write_all(data))
}

/// As [`write_atomic`], the content written by `fill` into the temp file
/// (which it may seek in): for a file too big to build in memory first.
///
/// # Errors
/// [`Error::Io`] naming the path on any failure (`fill`'s too); the old file
/// is then untouched.
pub fn write_atomic_with(
    path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<()> {
    write_via_temp(path, mode, true, fill)
}

/// As [`write_atomic`] but without the fsyncs: readers see the old file or
/// the new one, but after a crash it may be the old one, or a file of the
/// right name with lost content. Only for caches, which check themselves
/// and are rebuilt when damaged; never for repository state.
///
/// # Errors
/// [`Error::Io`] naming the path on any failure; the old file is then untouched.
pub fn write_replace(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    write_via_temp(path, mode, false, |f| f.write_all(data))
}

/// How the temp files of [`write_atomic`] and its kin begin; a file so named
/// is an interrupted write once no writer holds the repository.
pub const TMP_PREFIX: &str = ".sgard-tmp-";

/// A temp file beside `path` holding what `fill` wrote, with mode `mode`
/// (synced with `durable`), and the folder it is in.
fn filled_temp(
    path: &Path,
    mode: u32,
    durable: bool,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<(tempfile::NamedTempFile, PathBuf)> {
    let dir = parent_of(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(TMP_PREFIX)
        .tempfile_in(&dir)
        .map_err(|e| Error::io("creating temp file in", &dir, e))?;
    let written = fill(tmp.as_file_mut());
    written.map_err(|e| Error::io("writing", tmp.path().to_path_buf(), e))?;
    set_mode(tmp.as_file(), mode).map_err(|e| Error::io("setting mode of", path, e))?;
    if durable {
        tmp.as_file()
            .sync_all()
            .map_err(|e| Error::io("syncing", tmp.path().to_path_buf(), e))?;
    }
    Ok((tmp, dir))
}

fn write_via_temp(
    path: &Path,
    mode: u32,
    durable: bool,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<()> {
    let (tmp, dir) = filled_temp(path, mode, durable, fill)?;
    tmp.persist(path)
        .map_err(|e| Error::io("renaming temp file to", path, e.error))?;
    if durable { fsync_dir(&dir) } else { Ok(()) }
}

/// Durably creates `path` holding `data`, unless something is already
/// there (then it is left as it is and this succeeds): the temp file is
/// linked to its name, which never replaces an existing one.
///
/// # Errors
/// [`Error::Io`] naming the path.
pub fn write_new(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    let (tmp, dir) = filled_temp(path, mode, true, |f| f.write_all(data))?;
    match tmp.persist_noclobber(path) {
        Ok(_) => fsync_dir(&dir),
        Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::io("creating", path, e.error)),
    }
}

/// Whether anything (a symlink included) is at `path`.
pub fn lstat_exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// Creates `dir` and its missing ancestors (durably), giving the folders it
/// creates mode 0700: for machine-local state other users must not read.
///
/// # Errors
/// [`Error::Io`] naming the folder.
pub fn create_private_dir_all(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut missing = Vec::new();
    let mut cur = dir;
    while fs::symlink_metadata(cur).is_err() {
        missing.push(cur.to_path_buf());
        match cur.parent() {
            Some(p) if !p.as_os_str().is_empty() => cur = p,
            _ => break,
        }
    }
    create_dir_all_durable(dir)?;
    for d in missing {
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700))
            .map_err(|e| Error::io("setting mode of", &d, e))?;
    }
    Ok(())
}

/// Opens a file for reading without blocking on a FIFO, and refuses
/// anything that is not a regular file (symlinks are followed).
///
/// # Errors
/// The OS error, or `InvalidInput` when the path is not a regular file.
pub fn open_regular_file(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// Whether a read error says the file is not what it should be (not a
/// regular file, not UTF-8, too long, cut short), as the readers here report
/// it, rather than that the system failed to read it (EIO, ENOSPC, a
/// permission, too many open files). Only the first is damage, to be
/// rebuilt or set aside; the second is an error, and the next run reads
/// the same file again.
pub fn is_damage(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput | io::ErrorKind::UnexpectedEof
    )
}

/// Reads a whole regular file as UTF-8 text (see [`open_regular_file`]).
///
/// # Errors
/// As [`open_regular_file`], or the read error.
pub fn read_regular_to_string(path: &Path) -> io::Result<String> {
    use std::io::Read;
    let mut s = String::new();
    open_regular_file(path)?.read_to_string(&mut s)?;
    Ok(s)
}

/// As [`read_regular_to_string`], refusing (`InvalidData`) a file longer
/// than `max` bytes without reading past it: for repository files that a
/// hostile copy could make huge.
///
/// # Errors
/// As [`read_regular_to_string`]; `InvalidData` past `max`.
pub fn read_regular_to_string_max(path: &Path, max: u64) -> io::Result<String> {
    use std::io::Read;
    let mut buf = Vec::new();
    open_regular_file(path)?
        .take(max.saturating_add(1))
        .read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("longer than {max} bytes"),
        ));
    }
    String::from_utf8(buf).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8"))
}

/// Sets the permission bits of an open file.
///
/// # Errors
/// The OS error of `fchmod`.
pub fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(fs::Permissions::from_mode(mode))
}

/// Creates `dir` and its missing ancestors, fsyncing the parent of each
/// folder it created so the new names are durable. Returns whether anything
/// was created.
///
/// # Errors
/// [`Error::Io`] naming the folder that could not be made.
pub fn create_dir_all_durable(dir: &Path) -> Result<bool> {
    let mut missing = Vec::new();
    let mut cur = dir;
    loop {
        match fs::symlink_metadata(cur) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(cur.to_path_buf());
                match cur.parent() {
                    Some(p) if !p.as_os_str().is_empty() => cur = p,
                    _ => break,
                }
            }
            Err(e) => return Err(Error::io("inspecting", cur, e)),
        }
    }
    if missing.is_empty() {
        return Ok(false);
    }
    for d in missing.iter().rev() {
        match fs::create_dir(d) {
            Ok(()) => {}
            // Another process made it first: fine, it made it durable too.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io("creating folder", d, e)),
        }
        fsync_dir(&parent_of(d))?;
    }
    Ok(true)
}

/// The device of a `stat`, as `std`'s `MetadataExt::dev` gives it (`dev_t`
/// is an `i32` on macOS, a `u64` on Linux).
#[cfg(unix)]
#[allow(clippy::unnecessary_cast)]
pub fn dev_of(st: &rustix::fs::Stat) -> u64 {
    st.st_dev as u64
}

/// The mode of a `stat` (`mode_t` is a `u16` on macOS, a `u32` on Linux).
#[cfg(unix)]
#[allow(clippy::useless_conversion)]
pub fn mode_of(st: &rustix::fs::Stat) -> u32 {
    u32::from(st.st_mode)
}

/// `syncfs` of the file system holding `fd` (Linux); `false` elsewhere or
/// when it fails, and the caller fsyncs one by one.
#[cfg(unix)]
pub fn syncfs_fd<Fd: std::os::fd::AsFd>(fd: Fd) -> bool {
    #[cfg(target_os = "linux")]
    {
        rustix::fs::syncfs(fd).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = fd;
        false
    }
}

/// Flushes a file to the disk itself: `F_FULLFSYNC` on macOS (a plain
/// `fsync` there only reaches the drive's cache; where the file system
/// does not support it, a plain `fsync`), `fsync` elsewhere. `File::sync_all`
/// does the same for a `File`.
///
/// # Errors
/// The `fsync`'s error.
#[cfg(unix)]
pub fn full_fsync<Fd: std::os::fd::AsFd>(fd: Fd) -> rustix::io::Result<()> {
    #[cfg(target_vendor = "apple")]
    {
        if rustix::fs::fcntl_fullfsync(&fd).is_ok() {
            return Ok(());
        }
    }
    rustix::fs::fsync(fd)
}

/// A permission mode as `rustix` takes it (`mode_t` is a `u16` on macOS).
#[cfg(unix)]
#[allow(clippy::unnecessary_cast, clippy::cast_possible_truncation)]
pub fn rmode(bits: u32) -> rustix::fs::Mode {
    rustix::fs::Mode::from_raw_mode((bits & 0o7777) as rustix::fs::RawMode)
}

/// Flushes everything written on the filesystem holding `path` (Linux
/// `syncfs`: one flush for a whole batch instead of one fsync per file).
/// Elsewhere, or if `syncfs` fails, returns false and the caller must fsync
/// what it wrote one by one.
pub fn syncfs(path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        match File::open(path) {
            Ok(f) => rustix::fs::syncfs(&f).is_ok(),
            Err(_) => false,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn write_atomic_replaces_and_sets_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        write_atomic(&p, b"one", 0o644).unwrap();
        write_atomic(&p, b"two", 0o600).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o7777,
            0o600
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "temp file left behind");
    }

    #[test]
    fn create_dir_all_durable_reports_creation() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/c");
        assert!(create_dir_all_durable(&p).unwrap());
        assert!(p.is_dir());
        assert!(!create_dir_all_durable(&p).unwrap());
    }
}
