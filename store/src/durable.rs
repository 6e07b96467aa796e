//! Crash-safe file writes shared by every sgard crate.
//!
//! The protocol for any file that must survive a crash: write a temp file in
//! the destination folder, `sync_all` it, rename it over the destination, then
//! fsync the folder so the rename itself is durable.
//!
//! On Windows three steps differ (each function says how): a folder cannot
//! be opened to be flushed, so [`fsync_dir`] does nothing there (NTFS
//! journals its names itself); a flush needs a handle open for writing
//! ([`open_to_sync`]); and a rename fails while another process holds the
//! target or the file is read-only, so renames go through [`retry_rename`].

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
#[cfg(unix)]
pub fn fsync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).map_err(|e| Error::io("opening folder", dir, e))?;
    match d.sync_all() {
        Ok(()) => Ok(()),
        Err(e) if is_unsupported(&e) => Ok(()),
        Err(e) => Err(Error::io("syncing folder", dir, e)),
    }
}

/// Windows: nothing. A folder cannot be opened for a flush there
/// (`FlushFileBuffers` needs a handle open for writing, which a folder
/// does not give); NTFS logs its name changes in its own journal, so the
/// file's data, flushed before the rename, is what this protocol can
/// promise.
///
/// # Errors
/// None on Windows.
#[cfg(windows)]
pub fn fsync_dir(dir: &Path) -> Result<()> {
    let _ = dir;
    Ok(())
}

#[cfg(unix)]
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
    set_temp_mode(tmp.as_file(), mode).map_err(|e| Error::io("setting mode of", path, e))?;
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
    rename_temp(path, tmp, &dir, mode, durable)
}

/// Gives a filled temp file (see [`filled_temp`]) its name.
fn rename_temp(
    path: &Path,
    tmp: tempfile::NamedTempFile,
    dir: &Path,
    mode: u32,
    durable: bool,
) -> Result<()> {
    let file = retry_rename(path, tmp, |t| {
        t.persist(path).map_err(|e| (e.error, e.file))
    })
    .map_err(|(e, _)| Error::io("renaming temp file to", path, e))?;
    set_renamed_mode(&file, mode, durable).map_err(|e| Error::io("setting mode of", path, e))?;
    if durable { fsync_dir(dir) } else { Ok(()) }
}

/// [`write_atomic`] in two steps: the bytes are written and synced beside
/// `path` now (on any thread, while other writes wait for the disk), and
/// the file takes its name at [`Staged::install`], where the order of a
/// crash-safe sequence of writes wants it. Dropped uninstalled, the temp
/// file is removed and `path` is untouched.
///
/// # Errors
/// [`Error::Io`] naming the path.
pub fn stage_atomic(path: &Path, data: &[u8], mode: u32) -> Result<Staged> {
    let (tmp, dir) = filled_temp(path, mode, true, |f| f.write_all(data))?;
    Ok(Staged {
        path: path.to_path_buf(),
        tmp,
        dir,
        mode,
    })
}

/// A file written and synced beside its name (see [`stage_atomic`]).
#[derive(Debug)]
pub struct Staged {
    path: PathBuf,
    tmp: tempfile::NamedTempFile,
    dir: PathBuf,
    mode: u32,
}

impl Staged {
    /// Renames it to its name, durably (as [`write_atomic`] ends).
    ///
    /// # Errors
    /// [`Error::Io`] naming the path; the old file is then untouched.
    pub fn install(self) -> Result<()> {
        rename_temp(&self.path, self.tmp, &self.dir, self.mode, true)
    }
}

/// The mode of a temp file, set before it is renamed to its name (Unix).
#[cfg(unix)]
fn set_temp_mode(file: &File, mode: u32) -> io::Result<()> {
    set_mode(file, mode)
}

/// Windows: nothing yet. The rename (`tempfile`'s `persist`) resets the
/// file's attributes, the read-only one included; [`set_renamed_mode`]
/// sets it once the file has its name.
#[cfg(windows)]
fn set_temp_mode(file: &File, mode: u32) -> io::Result<()> {
    let _ = (file, mode);
    Ok(())
}

/// Unix: nothing, the temp file had its mode before the rename.
#[cfg(unix)]
fn set_renamed_mode(file: &File, mode: u32, durable: bool) -> io::Result<()> {
    let _ = (file, mode, durable);
    Ok(())
}

/// Windows: a `mode` without the owner's write bit makes the renamed file
/// read-only, flushed again when the write is `durable` (the attribute is
/// the file's metadata); a writable mode needs nothing, the rename left
/// the file writable.
#[cfg(windows)]
fn set_renamed_mode(file: &File, mode: u32, durable: bool) -> io::Result<()> {
    if !is_read_only_mode(mode) {
        return Ok(());
    }
    set_mode(file, mode)?;
    if durable { file.sync_all() } else { Ok(()) }
}

/// Whether a Unix `mode` is read-only as Windows has it: the owner may not
/// write.
pub fn is_read_only_mode(mode: u32) -> bool {
    mode & 0o200 == 0
}

/// How long [`retry_rename`] tries again while the target is held.
#[cfg(windows)]
const RENAME_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Renames a temp file: `rename` is one attempt (`tempfile`'s `persist` or
/// `persist_noclobber`), which gives the temp file back with its error.
///
/// Unix: one attempt, as it is.
///
/// # Errors
/// The attempt's error, with the temp file.
#[cfg(unix)]
pub fn retry_rename<T, R>(
    target: &Path,
    tmp: T,
    rename: impl FnOnce(T) -> std::result::Result<R, (io::Error, T)>,
) -> std::result::Result<R, (io::Error, T)> {
    let _ = target;
    rename(tmp)
}

/// Windows: a rename fails while another process has the target (or the
/// temp file) open without sharing its deletion (an editor, a virus
/// scanner, an indexer: `ERROR_SHARING_VIOLATION`, `ERROR_LOCK_VIOLATION`,
/// `ERROR_ACCESS_DENIED`), and always over a read-only file, which a Unix
/// rename replaces like any other. So a read-only `target` is made
/// writable (read-only again if the rename still fails), and a held one is
/// tried again for [`RENAME_PATIENCE`] at most.
///
/// # Errors
/// The last attempt's error, with the temp file.
#[cfg(windows)]
pub fn retry_rename<T, R>(
    target: &Path,
    tmp: T,
    rename: impl FnMut(T) -> std::result::Result<R, (io::Error, T)>,
) -> std::result::Result<R, (io::Error, T)> {
    let target = RenameTarget {
        is_read_only_file: &|| {
            fs::symlink_metadata(target).is_ok_and(|m| m.is_file() && m.permissions().readonly())
        },
        set_read_only: &|on| set_path_read_only(target, on),
    };
    retry_rename_to(&target, tmp, rename)
}

/// The target of a rename, as [`retry_rename_to`] needs it: whether it is
/// a read-only file, and how to set or clear its read-only attribute
/// (through a path, or through a folder handle).
#[cfg(windows)]
pub struct RenameTarget<'a> {
    /// Whether the target is a file with its read-only attribute set.
    pub is_read_only_file: &'a dyn Fn() -> bool,
    /// Sets (`true`) or clears the target's read-only attribute.
    pub set_read_only: &'a dyn Fn(bool) -> io::Result<()>,
}

/// [`retry_rename`]'s rule, for any rename of one temp over `target`.
///
/// # Errors
/// The last attempt's error, with the temp file.
#[cfg(windows)]
pub fn retry_rename_to<T, R>(
    target: &RenameTarget<'_>,
    mut tmp: T,
    mut rename: impl FnMut(T) -> std::result::Result<R, (io::Error, T)>,
) -> std::result::Result<R, (io::Error, T)> {
    let deadline = std::time::Instant::now() + RENAME_PATIENCE;
    let mut made_writable = false;
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        let (e, back) = match rename(tmp) {
            Ok(r) => return Ok(r),
            Err(failed) => failed,
        };
        tmp = back;
        if !is_held(&e) || std::time::Instant::now() >= deadline {
            if made_writable {
                let _ = (target.set_read_only)(true);
            }
            return Err((e, tmp));
        }
        if !made_writable
            && e.kind() == io::ErrorKind::PermissionDenied
            && (target.is_read_only_file)()
            && (target.set_read_only)(false).is_ok()
        {
            made_writable = true;
            continue;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(100));
    }
}

/// Whether a failed rename may succeed once another process lets go of
/// the file (Windows).
#[cfg(windows)]
fn is_held(e: &io::Error) -> bool {
    /// `ERROR_SHARING_VIOLATION`: `std` has no `ErrorKind` for it.
    const SHARING_VIOLATION: i32 = 32;
    /// `ERROR_LOCK_VIOLATION`: as above.
    const LOCK_VIOLATION: i32 = 33;
    e.kind() == io::ErrorKind::PermissionDenied
        || matches!(e.raw_os_error(), Some(SHARING_VIOLATION | LOCK_VIOLATION))
}

#[cfg(windows)]
fn set_path_read_only(path: &Path, read_only: bool) -> io::Result<()> {
    let mut p = fs::symlink_metadata(path)?.permissions();
    p.set_readonly(read_only);
    fs::set_permissions(path, p)
}

/// Opens a file whose written bytes are to be flushed (`sync_data`).
///
/// Unix: for reading; `fsync` takes any descriptor.
///
/// # Errors
/// The open's error.
#[cfg(unix)]
pub fn open_to_sync(path: &Path) -> io::Result<File> {
    File::open(path)
}

/// Windows: for writing, as `FlushFileBuffers` requires (a handle opened
/// only for reading fails with `ERROR_ACCESS_DENIED`); nothing is written
/// through it.
///
/// # Errors
/// The open's error.
#[cfg(windows)]
pub fn open_to_sync(path: &Path) -> io::Result<File> {
    fs::OpenOptions::new().write(true).open(path)
}

/// Durably creates `path` holding `data`, unless something is already
/// there (then it is left as it is and this succeeds): the temp file is
/// linked to its name, which never replaces an existing one.
///
/// # Errors
/// [`Error::Io`] naming the path.
pub fn write_new(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    let (tmp, dir) = filled_temp(path, mode, true, |f| f.write_all(data))?;
    let linked = retry_rename(path, tmp, |t| {
        t.persist_noclobber(path).map_err(|e| (e.error, e.file))
    });
    match linked {
        Ok(file) => {
            set_renamed_mode(&file, mode, true)
                .map_err(|e| Error::io("setting mode of", path, e))?;
            fsync_dir(&dir)
        }
        Err((e, _)) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err((e, _)) => Err(Error::io("creating", path, e)),
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
        make_private(&d).map_err(|e| Error::io("setting mode of", &d, e))?;
    }
    Ok(())
}

/// Gives a folder mode 0700.
#[cfg(unix)]
fn make_private(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

/// Windows: nothing. Access is by ACL there, inherited from the parent:
/// the user's profile (where machine-local state lives) is already theirs
/// alone, and a mode has nothing to say about it.
#[cfg(windows)]
fn make_private(dir: &Path) -> io::Result<()> {
    let _ = dir;
    Ok(())
}

/// Opens a file for reading without blocking on a FIFO, and refuses
/// anything that is not a regular file (symlinks are followed).
///
/// # Errors
/// The OS error, or `InvalidInput` when the path is not a regular file.
pub fn open_regular_file(path: &Path) -> io::Result<File> {
    open_regular(path).map(|(f, _)| f)
}

/// As [`open_regular_file`], with the metadata it looked at (one `fstat`
/// for both the check and the caller's size or fingerprint).
///
/// # Errors
/// As [`open_regular_file`].
pub fn open_regular(path: &Path) -> io::Result<(File, fs::Metadata)> {
    let f = regular_read_options().open(path)?;
    let md = f.metadata()?;
    if !md.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok((f, md))
}

/// Unix: never blocking on a FIFO (`O_NONBLOCK`), not inherited by
/// children.
#[cfg(unix)]
fn regular_read_options() -> fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = fs::OpenOptions::new();
    o.read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC);
    o
}

/// Windows: no FIFO can be opened by a path in a folder (named pipes live
/// under `\\.\pipe\`), so nothing blocks. A folder opens only with
/// `FILE_FLAG_BACKUP_SEMANTICS` (else it is `PermissionDenied`, which
/// reads as a system failure): asked for, so a folder is refused with
/// `InvalidInput` as on Unix.
#[cfg(windows)]
fn regular_read_options() -> fs::OpenOptions {
    use std::os::windows::fs::OpenOptionsExt;
    /// `FILE_FLAG_BACKUP_SEMANTICS`.
    const BACKUP_SEMANTICS: u32 = 0x0200_0000;
    let mut o = fs::OpenOptions::new();
    o.read(true).custom_flags(BACKUP_SEMANTICS);
    o
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
#[cfg(unix)]
pub fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(fs::Permissions::from_mode(mode))
}

/// Windows: a file has no permission bits, only the read-only attribute,
/// set when the owner may not write (see [`is_read_only_mode`]); the mode
/// itself is kept in the data only.
///
/// # Errors
/// The OS error of setting the attribute.
#[cfg(windows)]
pub fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    let mut p = file.metadata()?.permissions();
    if p.readonly() == is_read_only_mode(mode) {
        return Ok(());
    }
    p.set_readonly(is_read_only_mode(mode));
    file.set_permissions(p)
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

    #[cfg(unix)]
    #[test]
    fn write_atomic_replaces_and_sets_mode() {
        use std::os::unix::fs::PermissionsExt;
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

    /// A read-only file is replaced like any other (Windows refuses to
    /// rename over one until it is made writable), and each write leaves
    /// the read-only-ness its mode says.
    #[test]
    fn write_atomic_replaces_a_read_only_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        write_atomic(&p, b"one", 0o444).unwrap();
        assert!(fs::metadata(&p).unwrap().permissions().readonly());
        write_atomic(&p, b"two", 0o400).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert!(fs::metadata(&p).unwrap().permissions().readonly());
        write_replace(&p, b"three", 0o644).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"three");
        assert!(!fs::metadata(&p).unwrap().permissions().readonly());
        write_new(&dir.path().join("g"), b"new", 0o444).unwrap();
        assert!(
            fs::metadata(dir.path().join("g"))
                .unwrap()
                .permissions()
                .readonly()
        );
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["f", "g"], "temp file left behind");
        // Writable again, so the folder can be removed on Windows.
        let mut w = fs::metadata(dir.path().join("g")).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        w.set_readonly(false);
        fs::set_permissions(dir.path().join("g"), w).unwrap();
    }

    #[test]
    fn open_regular_file_refuses_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        let e = open_regular_file(dir.path()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(is_damage(&e));
        let e = open_regular_file(&dir.path().join("none")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
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
