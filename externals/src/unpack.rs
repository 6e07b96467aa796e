//! Unpacking an archive into an empty folder, confined to it and bounded.
//!
//! Every entry's name is judged before anything is written: an absolute
//! name, a `..` component or a name that is not UTF-8 refuses the whole
//! archive. A symlink must point inside the folder (judged by its text,
//! from where it stands) and nothing is ever written through one: every
//! folder on the way to an entry must be a real folder the unpacking made
//! or found. Hard links are copies of a file unpacked before them; devices
//! and FIFOs are refused. The bytes written are counted as they are
//! written, whatever sizes the archive declares, and the unpacking stops
//! at `Limits::max_unpacked` (a decompression bomb writes at most that).
//! The caller unpacks into a fresh folder and drops it on any error.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::{Error, Format, Limits, Result};

/// What [`unpack`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unpacked {
    /// Files (and symlinks) written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Unpacks the archive at `archive` (in `format`) into `dest`, an empty
/// folder: the first `strip` components of every name are dropped (entries
/// with no more are skipped), and with `include` only the files whose
/// name (after `strip`) matches one of its globs are written.
///
/// # Errors
/// [`Error::Hostile`] for an entry that would leave `dest` or is no file,
/// folder or symlink; [`Error::TooLarge`] past the limits;
/// [`Error::Damaged`]; [`Error::Pattern`]; [`Error::Io`]. What was written
/// before the error stays in `dest` (the caller drops it).
pub fn unpack(
    archive: &Path,
    format: Format,
    dest: &Path,
    strip: usize,
    include: &[String],
    limits: &Limits,
) -> Result<Unpacked> {
    let mut sink = Sink::new(dest, strip, include, limits)?;
    let file = fs::File::open(archive).map_err(|e| Error::io("opening", archive, e))?;
    let damaged = |e: std::io::Error| Error::Damaged {
        format,
        reason: e.to_string(),
    };
    match format {
        Format::File => {
            return Err(Error::Damaged {
                format,
                reason: "a single file is no archive".into(),
            });
        }
        Format::Tar => tar(file, &mut sink, format)?,
        Format::TarGz => tar(flate2::read::MultiGzDecoder::new(file), &mut sink, format)?,
        Format::TarXz => tar(
            liblzma::read::XzDecoder::new_multi_decoder(file),
            &mut sink,
            format,
        )?,
        Format::TarZst => tar(
            zstd::stream::read::Decoder::new(file).map_err(damaged)?,
            &mut sink,
            format,
        )?,
        Format::Zip => zip(file, &mut sink)?,
    }
    sink.finish()
}

/// Where entries go, and what was written so far.
struct Sink<'a> {
    dest: &'a Path,
    strip: usize,
    include: Option<globset::GlobSet>,
    limits: &'a Limits,
    entries: u64,
    done: Unpacked,
    /// Folders the archive names, with their modes.
    dirs: Vec<(PathBuf, u32)>,
}

fn hostile(entry: &str, why: &str) -> Error {
    Error::Hostile {
        entry: entry.to_owned(),
        why: why.to_owned(),
    }
}

impl<'a> Sink<'a> {
    fn new(dest: &'a Path, strip: usize, include: &[String], limits: &'a Limits) -> Result<Self> {
        let include = if include.is_empty() {
            None
        } else {
            let mut b = globset::GlobSetBuilder::new();
            for g in include {
                b.add(globset::Glob::new(g).map_err(|e| Error::Pattern(g.clone(), e.to_string()))?);
            }
            Some(
                b.build()
                    .map_err(|e| Error::Pattern(include.join(" "), e.to_string()))?,
            )
        };
        Ok(Sink {
            dest,
            strip,
            include,
            limits,
            entries: 0,
            done: Unpacked::default(),
            dirs: Vec::new(),
        })
    }

    /// Counts one entry of the archive, whatever becomes of it.
    fn count(&mut self) -> Result<()> {
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(Error::TooLarge {
                what: "the archive's list of entries".into(),
                limit: self.limits.max_entries,
            });
        }
        Ok(())
    }

    /// The name's components, judged (see the module).
    fn components(name: &str) -> Result<Vec<&str>> {
        if name.starts_with('/') || name.starts_with('\\') {
            return Err(hostile(name, "is an absolute path"));
        }
        let mut out = Vec::new();
        for c in name.split(['/', '\\']) {
            match c {
                "" | "." => {}
                ".." => return Err(hostile(name, "climbs out with `..`")),
                c if c.len() >= 2 && c.as_bytes()[1] == b':' && out.is_empty() => {
                    return Err(hostile(name, "is an absolute path"));
                }
                c => {
                    if let Some(why) = unfit_here(c) {
                        return Err(hostile(name, why));
                    }
                    out.push(c);
                }
            }
        }
        Ok(out)
    }

    /// Where entry `name` goes, relative to the folder (`None`: skipped by
    /// `strip` or `include`).
    fn target(&self, name: &str, is_file: bool) -> Result<Option<PathBuf>> {
        let comps = Self::components(name)?;
        if comps.len() <= self.strip {
            return Ok(None);
        }
        let rel: PathBuf = comps[self.strip..].iter().collect();
        if is_file
            && let Some(set) = &self.include
            && !set.is_match(&rel)
        {
            return Ok(None);
        }
        Ok(Some(rel))
    }

    /// Makes every folder on the way to `rel` (never through a symlink) and
    /// returns where `rel` goes; something already there (the same name
    /// twice) is removed if it is a file, refused otherwise.
    fn place(&self, name: &str, rel: &Path) -> Result<PathBuf> {
        let path = self.parents(name, rel)?;
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => {
                fs::remove_file(&path).map_err(|e| Error::io("replacing", &path, e))?;
            }
            Ok(_) => return Err(hostile(name, "is given twice, once as no file")),
            Err(_) => {}
        }
        Ok(path)
    }

    /// Makes every folder on the way to `rel` (never through a symlink)
    /// and returns where `rel` goes.
    fn parents(&self, name: &str, rel: &Path) -> Result<PathBuf> {
        let mut cur = self.dest.to_path_buf();
        let parts: Vec<_> = rel.components().collect();
        for c in &parts[..parts.len().saturating_sub(1)] {
            cur.push(c);
            match fs::symlink_metadata(&cur) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(hostile(name, "would be written through a symlink"));
                }
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(hostile(name, "is below a file")),
                Err(_) => fs::create_dir(&cur).map_err(|e| Error::io("creating", &cur, e))?,
            }
        }
        Ok(self.dest.join(rel))
    }

    /// A folder: made (empty ones too), its mode applied once everything
    /// is written (a read-only folder would refuse its own files).
    fn dir(&mut self, name: &str, rel: &Path, mode: u32) -> Result<()> {
        let path = self.parents(name, rel)?;
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(hostile(name, "is a folder where something else is")),
            Err(_) => fs::create_dir(&path).map_err(|e| Error::io("creating", &path, e))?,
        }
        self.dirs.push((path, mode));
        Ok(())
    }

    /// Applies the folders' modes, deepest first.
    fn finish(mut self) -> Result<Unpacked> {
        self.dirs
            .sort_by_key(|(p, _)| std::cmp::Reverse(p.components().count()));
        for (path, mode) in &self.dirs {
            set_dir_mode(path, *mode)?;
        }
        Ok(self.done)
    }

    fn file(&mut self, name: &str, rel: &Path, mode: u32, from: &mut dyn Read) -> Result<()> {
        let path = self.place(name, rel)?;
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io("creating", &path, e))?;
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let k = from.read(&mut buf).map_err(|e| Error::Damaged {
                format: Format::Tar,
                reason: format!("{name}: {e}"),
            })?;
            if k == 0 {
                break;
            }
            self.limits.tick(k as u64)?;
            self.done.bytes += k as u64;
            if self.done.bytes > self.limits.max_unpacked {
                return Err(Error::TooLarge {
                    what: "the unpacked archive".into(),
                    limit: self.limits.max_unpacked,
                });
            }
            out.write_all(&buf[..k])
                .map_err(|e| Error::io("writing", &path, e))?;
        }
        set_mode(&path, mode)?;
        self.done.files += 1;
        Ok(())
    }

    fn symlink(&mut self, name: &str, rel: &Path, target: &str) -> Result<()> {
        judge_link(name, rel, target)?;
        let path = self.place(name, rel)?;
        make_symlink(target, &path).map_err(|e| match e {
            Some(e) => Error::io("making the symlink", &path, e),
            None => hostile(name, "is a symlink, which this system cannot make"),
        })?;
        self.done.files += 1;
        Ok(())
    }

    /// A hard link: a copy of `to` (a file this archive wrote before).
    fn hard_link(&mut self, name: &str, rel: &Path, to: &Path) -> Result<()> {
        let src = self.dest.join(to);
        let ok = to.components().count() > 0
            && fs::symlink_metadata(&src).is_ok_and(|m| m.is_file())
            && !through_symlink(self.dest, to);
        if !ok {
            return Err(hostile(name, "is a hard link to no file of the archive"));
        }
        let mode = file_mode(&src);
        let mut from = fs::File::open(&src).map_err(|e| Error::io("opening", &src, e))?;
        self.file(name, rel, mode, &mut from)
    }
}

/// Why the file system here cannot hold a name component `c` as the
/// archive means it (Unix: any name is a file's).
#[cfg(unix)]
fn unfit_here(c: &str) -> Option<&'static str> {
    let _ = c;
    None
}

/// Windows: `a:b` is a stream of the file `a`, a DOS device name (`CON`,
/// `NUL`, `COM1`, … with or without an extension, in any case) opens the
/// device instead of a file, and a trailing dot or space is dropped (the
/// entry would land on another name).
#[cfg(windows)]
fn unfit_here(c: &str) -> Option<&'static str> {
    if c.contains(':') {
        return Some("has a `:` in a name, a stream of another file on Windows");
    }
    if c.ends_with(['.', ' ']) {
        return Some("ends a name with a dot or a space, which Windows drops");
    }
    let stem = c.split('.').next().unwrap_or(c).trim_end_matches(' ');
    let upper = stem.to_ascii_uppercase();
    let device = matches!(
        upper.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) || (upper.len() == 4
        && (upper.starts_with("COM") || upper.starts_with("LPT"))
        && upper.as_bytes()[3].is_ascii_digit());
    device.then_some("is a device name on Windows")
}

/// Refuses a symlink at `rel` (entry `name`) whose `target` is empty,
/// absolute, or climbs above the folder from where the link stands.
pub(crate) fn judge_link(name: &str, rel: &Path, target: &str) -> Result<()> {
    if target.is_empty() {
        return Err(hostile(name, "is a symlink to nothing"));
    }
    if target.starts_with('/') || target.starts_with('\\') {
        return Err(hostile(name, "is a symlink to an absolute path"));
    }
    let mut depth = rel.components().count().saturating_sub(1);
    // `..` only before any name: after one, it would climb from wherever
    // that name leads (another symlink's target), which its text cannot
    // tell.
    let mut named = false;
    for c in target.split(['/', '\\']) {
        match c {
            "" | "." => {}
            ".." if named => {
                return Err(hostile(name, "is a symlink that climbs back after a name"));
            }
            ".." if depth == 0 => {
                return Err(hostile(name, "is a symlink that points outside"));
            }
            ".." => depth -= 1,
            c if c.len() >= 2 && c.as_bytes()[1] == b':' => {
                return Err(hostile(name, "is a symlink to an absolute path"));
            }
            _ => {
                named = true;
                depth += 1;
            }
        }
    }
    Ok(())
}

/// Whether a folder on the way to `rel` under `dest` is a symlink.
fn through_symlink(dest: &Path, rel: &Path) -> bool {
    let mut cur = dest.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    parts[..parts.len().saturating_sub(1)].iter().any(|c| {
        cur.push(c);
        fs::symlink_metadata(&cur).is_ok_and(|m| m.file_type().is_symlink())
    })
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // Never setuid, setgid or sticky; always readable and writable by the
    // owner (a read-only file would block the next refresh).
    let bits = (mode & 0o777) | 0o600;
    fs::set_permissions(path, fs::Permissions::from_mode(bits))
        .map_err(|e| Error::io("setting the mode of", path, e))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> Result<()> {
    Ok(())
}

#[cfg(unix)]
fn set_dir_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // Never setgid or sticky; always open to its owner.
    let bits = (mode & 0o777) | 0o700;
    fs::set_permissions(path, fs::Permissions::from_mode(bits))
        .map_err(|e| Error::io("setting the mode of", path, e))
}

#[cfg(not(unix))]
fn set_dir_mode(_path: &Path, _mode: u32) -> Result<()> {
    Ok(())
}

#[cfg(unix)]
fn file_mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).map_or(0o644, |m| m.permissions().mode())
}

#[cfg(not(unix))]
fn file_mode(_path: &Path) -> u32 {
    0o644
}

#[cfg(unix)]
fn make_symlink(target: &str, path: &Path) -> std::result::Result<(), Option<std::io::Error>> {
    std::os::unix::fs::symlink(target, path).map_err(Some)
}

#[cfg(not(unix))]
fn make_symlink(_target: &str, _path: &Path) -> std::result::Result<(), Option<std::io::Error>> {
    Err(None)
}

fn utf8(bytes: &[u8]) -> Result<&str> {
    std::str::from_utf8(bytes).map_err(|_| {
        hostile(
            &String::from_utf8_lossy(bytes),
            "has a name that is not UTF-8",
        )
    })
}

fn tar(from: impl Read, sink: &mut Sink<'_>, format: Format) -> Result<()> {
    let damaged = |e: std::io::Error| Error::Damaged {
        format,
        reason: e.to_string(),
    };
    let mut a = tar::Archive::new(from);
    for entry in a.entries().map_err(damaged)? {
        let mut entry = entry.map_err(damaged)?;
        sink.count()?;
        let name_bytes = entry.path_bytes().into_owned();
        let name = utf8(&name_bytes)?.to_owned();
        let kind = entry.header().entry_type();
        let is_file = kind.is_file() || kind.is_hard_link() || kind.is_symlink();
        if kind.is_pax_global_extensions()
            || kind.is_pax_local_extensions()
            || kind.is_gnu_longname()
            || kind.is_gnu_longlink()
        {
            continue;
        }
        let Some(rel) = sink.target(&name, is_file)? else {
            continue;
        };
        if kind.is_file() {
            let mode = entry.header().mode().unwrap_or(0o644);
            sink.file(&name, &rel, mode, &mut entry)?;
        } else if kind.is_dir() {
            let mode = entry.header().mode().unwrap_or(0o755);
            sink.dir(&name, &rel, mode)?;
        } else if kind.is_symlink() {
            let target = entry
                .link_name_bytes()
                .map(|b| b.into_owned())
                .unwrap_or_default();
            let target = utf8(&target)?.to_owned();
            sink.symlink(&name, &rel, &target)?;
        } else if kind.is_hard_link() {
            let target = entry
                .link_name_bytes()
                .map(|b| b.into_owned())
                .unwrap_or_default();
            let target = utf8(&target)?.to_owned();
            let Some(to) = sink.target(&target, false)? else {
                return Err(hostile(&name, "is a hard link to no file of the archive"));
            };
            sink.hard_link(&name, &rel, &to)?;
        } else {
            return Err(hostile(&name, "is a device, FIFO or other special file"));
        }
    }
    Ok(())
}

fn zip(file: fs::File, sink: &mut Sink<'_>) -> Result<()> {
    let damaged = |e: zip::result::ZipError| Error::Damaged {
        format: Format::Zip,
        reason: e.to_string(),
    };
    let mut z = zip::ZipArchive::new(file).map_err(damaged)?;
    for i in 0..z.len() {
        sink.count()?;
        let mut f = z.by_index(i).map_err(damaged)?;
        let name = f.name().map_err(damaged)?.into_owned();
        let is_dir = f.is_dir();
        let is_link = f.is_symlink();
        let Some(rel) = sink.target(&name, !is_dir)? else {
            continue;
        };
        if is_dir {
            let mode = f.unix_mode().unwrap_or(0o755);
            sink.dir(&name, &rel, mode)?;
        } else if is_link {
            let mut target = Vec::new();
            (&mut f)
                .take(4097)
                .read_to_end(&mut target)
                .map_err(|e| Error::Damaged {
                    format: Format::Zip,
                    reason: format!("{name}: {e}"),
                })?;
            let target = utf8(&target)?.to_owned();
            sink.symlink(&name, &rel, &target)?;
        } else {
            let mode = f.unix_mode().unwrap_or(0o644);
            sink.file(&name, &rel, mode, &mut f)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
