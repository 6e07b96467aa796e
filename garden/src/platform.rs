//! What garden reads from a file's metadata, and the few file operations,
//! where Unix and Windows differ. Each function says what Windows does.
//!
//! On Windows a file has no mode, device or inode in stable Rust's
//! metadata: its mode is made from what it is and its read-only attribute
//! (see [`st_mode`]), its device and inode are 0 (so nothing that compares
//! them can match two files by them: the stat cache and fingerprints rest
//! on size and times there, and sgard's own folders are known by path),
//! and its change time is its write time.

use std::fs::{Metadata, OpenOptions};
use std::path::Path;

/// `st_mode`'s file-type bits, as POSIX numbers them (the same on Linux and
/// macOS; Windows has none, and [`st_mode`] makes them).
pub(crate) const S_IFMT: u32 = 0o170_000;
pub(crate) const S_IFSOCK: u32 = 0o140_000;
pub(crate) const S_IFLNK: u32 = 0o120_000;
#[cfg_attr(unix, allow(dead_code, reason = "made only on Windows"))]
pub(crate) const S_IFREG: u32 = 0o100_000;
pub(crate) const S_IFBLK: u32 = 0o060_000;
pub(crate) const S_IFDIR: u32 = 0o040_000;
pub(crate) const S_IFCHR: u32 = 0o020_000;
pub(crate) const S_IFIFO: u32 = 0o010_000;

/// The file's `st_mode`: its type and permission bits.
#[cfg(unix)]
pub(crate) fn st_mode(md: &Metadata) -> u32 {
    std::os::unix::fs::MetadataExt::mode(md)
}

/// Windows: a folder is `0755`, a symlink `0777`, a file `0644`, less the
/// write bits when it is read-only.
#[cfg(windows)]
pub(crate) fn st_mode(md: &Metadata) -> u32 {
    let ft = md.file_type();
    if ft.is_symlink() {
        return S_IFLNK | 0o777;
    }
    let (kind, perm) = if ft.is_dir() {
        (S_IFDIR, 0o755)
    } else {
        (S_IFREG, 0o644)
    };
    if md.permissions().readonly() {
        kind | (perm & 0o555)
    } else {
        kind | perm
    }
}

/// The file's device and inode.
#[cfg(unix)]
pub(crate) fn dev_ino(md: &Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (md.dev(), md.ino())
}

/// Windows: none in stable Rust's metadata: `(0, 0)`.
#[cfg(windows)]
pub(crate) fn dev_ino(_md: &Metadata) -> (u64, u64) {
    (0, 0)
}

/// Whether [`dev_ino`] tells files apart on this platform.
pub(crate) const HAS_INODES: bool = cfg!(unix);

/// The file's last write: seconds and nanoseconds since the Unix epoch.
#[cfg(unix)]
pub(crate) fn mtime(md: &Metadata) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (md.mtime(), md.mtime_nsec())
}

/// Windows: from `modified()` (100 ns steps).
#[cfg(windows)]
pub(crate) fn mtime(md: &Metadata) -> (i64, i64) {
    md.modified().map_or((0, 0), split_time)
}

/// The file's last change of data or metadata (`st_ctime`).
#[cfg(unix)]
pub(crate) fn ctime(md: &Metadata) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (md.ctime(), md.ctime_nsec())
}

/// Windows: the change time is not in stable Rust's metadata; the write
/// time stands in (a change of the read-only attribute alone is seen by
/// the mode, which every comparison reads too).
#[cfg(windows)]
pub(crate) fn ctime(md: &Metadata) -> (i64, i64) {
    mtime(md)
}

/// A time as seconds and nanoseconds around the Unix epoch.
#[cfg(windows)]
fn split_time(t: std::time::SystemTime) -> (i64, i64) {
    use std::time::UNIX_EPOCH;
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            i64::from(d.subsec_nanos()),
        ),
        Err(e) => {
            let d = e.duration();
            let (s, n) = (
                i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                i64::from(d.subsec_nanos()),
            );
            if n == 0 {
                (-s, 0)
            } else {
                (-s - 1, 1_000_000_000 - n)
            }
        }
    }
}

/// Options to open a file for reading, never through a symlink at its
/// last component and never blocking on a FIFO.
#[cfg(unix)]
pub(crate) fn read_nofollow() -> OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = OpenOptions::new();
    o.read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    o
}

/// Windows: `FILE_FLAG_OPEN_REPARSE_POINT` opens a symlink itself (which
/// the caller then refuses as not a regular file); there are no FIFOs in
/// folders.
#[cfg(windows)]
pub(crate) fn read_nofollow() -> OpenOptions {
    use std::os::windows::fs::OpenOptionsExt;
    /// `FILE_FLAG_OPEN_REPARSE_POINT`.
    const OPEN_REPARSE_POINT: u32 = 0x0020_0000;
    let mut o = OpenOptions::new();
    o.read(true).custom_flags(OPEN_REPARSE_POINT);
    o
}

/// Gives the file or folder at `path` exactly `mode` (a private folder's
/// `0700`, a key's `0600`).
///
/// # Errors
/// The OS error.
#[cfg(unix)]
pub(crate) fn set_path_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Windows: nothing. What is under the user's profile is private to the
/// user by its folders' access lists; a mode is not one.
///
/// # Errors
/// None.
#[cfg(windows)]
pub(crate) fn set_path_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// Makes `b` create its temp file or folder with `mode` (Unix; Windows:
/// as [`set_path_mode`], nothing).
pub(crate) fn private<'c, 'a, 'b>(
    b: &'c mut tempfile::Builder<'a, 'b>,
    mode: u32,
) -> &'c mut tempfile::Builder<'a, 'b> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(mode))
    }
    #[cfg(windows)]
    {
        let _ = mode;
        b
    }
}

/// Whether this process may create and remove names in the folder `path`
/// (Unix: `access(W_OK | X_OK)`; `write_only`: `W_OK` alone).
#[cfg(unix)]
pub(crate) fn may_write(path: &Path, write_only: bool) -> std::io::Result<()> {
    use rustix::fs::Access;
    let how = if write_only {
        Access::WRITE_OK
    } else {
        Access::WRITE_OK | Access::EXEC_OK
    };
    Ok(rustix::fs::access(path, how)?)
}

/// Windows: a folder's read-only attribute says nothing (Explorer sets it
/// for its own reasons), so the question is asked by making and removing a
/// file there, named as sgard's temp files are (one left by a crash is
/// passed by in walks and deleted by `prune`, as they are).
#[cfg(windows)]
pub(crate) fn may_write(path: &Path, _write_only: bool) -> std::io::Result<()> {
    if !std::fs::metadata(path)?.is_dir() {
        return Ok(());
    }
    tempfile::Builder::new()
        .prefix(sgard_store::durable::TMP_PREFIX)
        .tempfile_in(path)
        .map(drop)
}

/// Whether this process may list and enter the folder `path`.
#[cfg(unix)]
pub(crate) fn may_read_dir(path: &Path) -> std::io::Result<()> {
    use rustix::fs::Access;
    Ok(rustix::fs::access(path, Access::READ_OK | Access::EXEC_OK)?)
}

/// Windows: by listing it.
#[cfg(windows)]
pub(crate) fn may_read_dir(path: &Path) -> std::io::Result<()> {
    std::fs::read_dir(path).map(drop)
}

/// The mode to record, and to compare with the recorded one, for a file
/// named `name` whose content begins with `head` (up to
/// [`crate::scripts::HEAD_LEN`] bytes; read only where a rule needs it:
/// [`READS_HEAD`]) and whose mode on disk reads `disk`, tracked until now
/// with `recorded` (`None`: new). Unix: `disk`, exactly.
#[cfg(unix)]
pub(crate) fn mode_to_record(
    disk: sgard_manifest::Mode,
    _recorded: Option<sgard_manifest::Mode>,
    _name: &str,
    _head: &[u8],
) -> sgard_manifest::Mode {
    disk
}

/// Windows: [`windows_mode_to_record`].
#[cfg(windows)]
pub(crate) use windows_mode_to_record as mode_to_record;

/// Whether [`mode_to_record`] reads a new file's first bytes here.
pub(crate) const READS_HEAD: bool = cfg!(windows);

/// What a Windows machine records for a file. Its only mode is the
/// read-only attribute, which [`st_mode`] shows as the write bits, and
/// Windows runs a file by its extension, not a mode bit. So:
/// - a tracked file's recorded mode stands, with its write bits cleared
///   when the file is read-only, and the owner's set when it is writable
///   and had none: a `0600` key stays `0600` (never `0644`), and only a
///   change of the attribute is a change of mode;
/// - a new file is executable (`0755`, `0555` read-only) when Windows can
///   run it as a script ([`crate::scripts::windows_start`]: `.exe`,
///   `.com`, `.cmd`, `.bat`, `.ps1`, `.sh`, any case, or a `#!` first
///   line, as Unix runs it), so what a Windows machine adds and can run
///   runs on Unix too; else `0644` (`0444`).
///
/// Written for any platform, so Linux tests it too.
#[cfg_attr(unix, allow(dead_code, reason = "used on Windows; tested everywhere"))]
pub(crate) fn windows_mode_to_record(
    disk: sgard_manifest::Mode,
    recorded: Option<sgard_manifest::Mode>,
    name: &str,
    head: &[u8],
) -> sgard_manifest::Mode {
    use crate::scripts::{Start, windows_start};
    use sgard_manifest::Mode;
    let Some(r) = recorded else {
        if windows_start(name, head) == Start::Refused {
            return disk;
        }
        // Executable wherever it is readable.
        return Mode::from_st_mode(disk.bits() | ((disk.bits() & 0o444) >> 2));
    };
    let writable = |m: Mode| m.bits() & 0o200 != 0;
    match (writable(disk), writable(r)) {
        (true, true) | (false, false) => r,
        (true, false) => Mode::from_st_mode(r.bits() | 0o200),
        (false, true) => Mode::from_st_mode(r.bits() & !0o222),
    }
}

/// Whether `path` is `base` or under it, as the file system tells names
/// apart. Unix: component by component, exactly.
#[cfg(unix)]
pub(crate) fn path_is_under(path: &Path, base: &Path) -> bool {
    path.starts_with(base)
}

/// Windows: names are compared without case, and a `\\?\` path (what
/// `canonicalize` returns) is the same as its plain form, so
/// `~/.Local/State/sgard` is sgard's state folder however it is spelt.
#[cfg(windows)]
pub(crate) fn path_is_under(path: &Path, base: &Path) -> bool {
    let (p, b) = (comparable(path), comparable(base));
    p.len() >= b.len() && p[..b.len()] == b[..]
}

/// A path's names, lower case, without a verbatim prefix (Windows).
#[cfg(windows)]
fn comparable(p: &Path) -> Vec<String> {
    let s = p.to_string_lossy();
    let s = if let Some(r) = s.strip_prefix(r"\\?\UNC\") {
        format!(r"\\{r}")
    } else if let Some(r) = s.strip_prefix(r"\\?\") {
        r.to_owned()
    } else {
        s.into_owned()
    };
    s.replace('/', "\\")
        .to_lowercase()
        .split('\\')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{mode_to_record, path_is_under, windows_mode_to_record};
    use sgard_manifest::Mode;
    use std::path::Path;

    fn m(bits: u32) -> Mode {
        Mode::from_st_mode(bits)
    }

    /// Unix records the disk's mode; Windows, which shows only a read-only
    /// attribute, keeps the recorded mode and changes only its write bits.
    #[test]
    fn a_recorded_mode_stands_where_the_disk_cannot_show_it() {
        let here = |disk, recorded| mode_to_record(disk, recorded, "f", b"");
        assert_eq!(here(m(0o644), None), m(0o644));
        if cfg!(unix) {
            assert_eq!(here(m(0o644), Some(m(0o600))), m(0o644));
            assert_eq!(here(m(0o444), Some(m(0o755))), m(0o444));
        } else {
            assert_eq!(here(m(0o644), Some(m(0o600))), m(0o600));
        }
        let win = |disk, recorded| windows_mode_to_record(disk, recorded, "f", b"");
        // A writable key stays private.
        assert_eq!(win(m(0o644), Some(m(0o600))), m(0o600));
        assert_eq!(win(m(0o644), Some(m(0o755))), m(0o755));
        // Read-only now: no write bits left.
        assert_eq!(win(m(0o444), Some(m(0o664))), m(0o444));
        assert_eq!(win(m(0o444), Some(m(0o700))), m(0o500));
        // Writable now: the owner's bit, nothing wider.
        assert_eq!(win(m(0o644), Some(m(0o400))), m(0o600));
        assert_eq!(win(m(0o444), Some(m(0o444))), m(0o444));
    }

    /// Unix records the disk's execute bits; Windows makes a new file
    /// executable when it can run it as a script (its extension, or a `#!`
    /// line), and leaves a tracked file's execute bits as recorded.
    #[test]
    fn windows_records_a_new_file_executable_by_its_extension_or_shebang() {
        let win = |name, head: &[u8], disk, recorded| {
            windows_mode_to_record(m(disk), recorded, name, head)
        };
        for name in ["a.exe", "a.COM", "a.bat", "a.Cmd", "a.ps1", "a.sh", "a.SH"] {
            assert_eq!(win(name, b"", 0o644, None), m(0o755), "{name}");
            assert_eq!(win(name, b"", 0o444, None), m(0o555), "{name}");
        }
        assert_eq!(
            win("bin/tool", b"#!/usr/bin/env bash\n", 0o644, None),
            m(0o755)
        );
        assert_eq!(win("a.txt", b"#!/bin/sh\r\n", 0o444, None), m(0o555));
        for (name, head) in [
            ("a.txt", &b""[..]),
            ("a", b"echo"),
            ("a.cmd.bak", b""),
            ("a.py", b"#"),
        ] {
            assert_eq!(win(name, head, 0o644, None), m(0o644), "{name}");
        }
        // Tracked: the recorded mode stands, whatever the name says.
        assert_eq!(win("a.cmd", b"", 0o644, Some(m(0o600))), m(0o600));
        assert_eq!(win("a.txt", b"", 0o644, Some(m(0o755))), m(0o755));
        let unix = mode_to_record(m(0o644), None, "a.cmd", b"#!/bin/sh\n");
        if cfg!(unix) {
            assert_eq!(unix, m(0o644));
        } else {
            assert_eq!(unix, m(0o755));
        }
    }

    /// sgard's own folders are known however the file system spells them.
    #[test]
    fn a_path_is_under_a_folder_as_the_file_system_names_it() {
        assert!(path_is_under(
            Path::new("/h/.sgard/x"),
            Path::new("/h/.sgard")
        ));
        assert!(!path_is_under(
            Path::new("/h/.sgardx"),
            Path::new("/h/.sgard")
        ));
        #[cfg(unix)]
        assert!(!path_is_under(
            Path::new("/h/.SGARD/x"),
            Path::new("/h/.sgard")
        ));
        #[cfg(windows)]
        {
            let state = Path::new(r"C:\Users\a\.local\state\sgard");
            assert!(path_is_under(
                Path::new(r"c:\users\A\.Local\State\sgard\x"),
                state
            ));
            assert!(path_is_under(
                Path::new(r"\\?\C:\Users\a\.local\state\sgard"),
                state
            ));
            assert!(path_is_under(
                Path::new("C:/Users/a/.local/state/sgard/y"),
                state
            ));
            assert!(!path_is_under(
                Path::new(r"C:\Users\a\.local\state\sgardx"),
                state
            ));
        }
    }
}
