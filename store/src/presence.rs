//! Whether content is all there, asked for many contents in a row.
//!
//! Content is there when its blob is, or its chunk list and every chunk
//! the list names are (existence only: sizes and hashes are what reading
//! and `verify` check). [`Presence`] holds the store's folders open, and
//! their first-level fan-out folders (`ab/`) as they are reached, so a
//! question walks one or two components below them (`cd` for a leaf
//! folder, `cd/<sha256>` for an object), not the whole path: `status`
//! asks for every entry. [`Presence::leaf`] gives a leaf folder's
//! identity and times, so a caller that remembers them can tell that
//! nothing was removed from it since (its mtime moves when a name goes).

use std::io;
use std::path::{Path, PathBuf};
#[cfg(unix)]
use std::sync::OnceLock;

#[cfg(unix)]
use rustix::fd::OwnedFd;
#[cfg(unix)]
use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags};
#[cfg(unix)]
use rustix::io::Errno;

use crate::chunks::ChunkList;
use crate::{Error, Hash, Result, Store};

/// What the store lacks of a content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lack {
    /// Neither a blob nor a chunk list of that name.
    Absent,
    /// Its chunk list names this many chunks that are not stored.
    Chunks(usize),
    /// Its chunk list cannot be read (the error, in words).
    BadList(String),
}

/// One of the store's folders in the blob layout (`ab/cd/<sha256>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Area {
    /// Whole blobs (`blobs/`).
    Blobs,
    /// Chunk lists (`chunk-lists/`).
    Lists,
    /// Chunks (`chunks/`).
    Chunks,
}

/// The leaf folder (`ab/cd`, as the number `0xabcd`) a hash lies in.
pub fn leaf_of(hash: &Hash) -> u16 {
    let b = hash.as_bytes();
    u16::from_be_bytes([b[0], b[1]])
}

/// What identifies a leaf folder's version: a name removed from it (or
/// added) moves its mtime and ctime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafStat {
    /// Device (Windows: the volume's serial number).
    pub dev: u64,
    /// Inode (Windows: the file index).
    pub ino: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
    /// Status change time, ns since the epoch (Windows: 0, `std` has no
    /// change time there; a removal moves the folder's last write time).
    pub ctime_ns: i64,
}

/// A store's folders, held open for the questions below.
#[derive(Debug)]
pub struct Presence<'a> {
    store: &'a Store,
    blobs: Folder,
    lists: Folder,
    chunks: Folder,
}

/// A folder of the store in the blob layout, open when it could be opened
/// (Unix; on Windows, which has no `openat`, each name is looked up by its
/// whole path).
#[derive(Debug)]
struct Folder {
    path: PathBuf,
    /// `None` when it does not exist (nothing is in it) or could not be
    /// opened (each name is then looked up by its whole path).
    #[cfg(unix)]
    fd: Option<OwnedFd>,
    missing: bool,
    /// The fan-out folders `00/` … `ff/`, opened when first needed
    /// (`None`: missing, or looked up by path).
    #[cfg(unix)]
    fanout: Box<[OnceLock<Option<OwnedFd>>]>,
}

/// What [`Folder::stat`] finds.
#[cfg(unix)]
type Stat = rustix::fs::Stat;
/// What [`Folder::stat`] finds.
#[cfg(windows)]
type Stat = std::fs::Metadata;

#[cfg(unix)]
fn is_file(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
}

#[cfg(unix)]
fn is_dir(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::Directory
}

#[cfg(windows)]
fn is_file(st: &Stat) -> bool {
    st.is_file()
}

#[cfg(windows)]
fn is_dir(st: &Stat) -> bool {
    st.is_dir()
}

/// The [`LeafStat`] of the folder whose stat is `st` (`path` gives its
/// path).
#[cfg(unix)]
fn leaf_stat(st: &Stat, path: impl FnOnce() -> PathBuf) -> Result<LeafStat> {
    let _ = path;
    Ok(LeafStat {
        dev: crate::durable::dev_of(st),
        ino: st.st_ino,
        mtime_ns: st.st_mtime.saturating_mul(1_000_000_000) + st.st_mtime_nsec as i64,
        ctime_ns: st.st_ctime.saturating_mul(1_000_000_000) + st.st_ctime_nsec as i64,
    })
}

/// Windows: the folder's identity (volume serial number and file index)
/// needs a handle to it; its last write time is the mtime, and there is
/// no ctime (0).
#[cfg(windows)]
fn leaf_stat(st: &Stat, path: impl FnOnce() -> PathBuf) -> Result<LeafStat> {
    use std::os::windows::fs::MetadataExt;
    let path = path();
    /// 100 ns ticks from 1601-01-01 (a `FILETIME`) to the Unix epoch.
    const EPOCH_TICKS: u64 = 116_444_736_000_000_000;
    let h = winapi_util::Handle::from_path_any(&path)
        .and_then(|h| winapi_util::file::information(&h))
        .map_err(|e| Error::io("inspecting", &path, e))?;
    let ticks = i64::try_from(st.last_write_time().saturating_sub(EPOCH_TICKS)).unwrap_or(i64::MAX);
    Ok(LeafStat {
        dev: h.volume_serial_number(),
        ino: h.file_index(),
        mtime_ns: ticks.saturating_mul(100),
        ctime_ns: 0,
    })
}

#[cfg(unix)]
fn open_dir(at: &OwnedFd, name: &str) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::openat(at, name, flags, Mode::empty())
}

fn is_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

impl Folder {
    #[cfg(unix)]
    fn open(path: Option<&Path>) -> Folder {
        let fanout = (0..256).map(|_| OnceLock::new()).collect();
        let Some(path) = path else {
            return Folder {
                path: PathBuf::new(),
                fd: None,
                missing: true,
                fanout,
            };
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let (fd, missing) = match rustix::fs::openat(CWD, path, flags, Mode::empty()) {
            Ok(fd) => (Some(fd), false),
            Err(e) => (None, matches!(e, Errno::NOENT | Errno::NOTDIR)),
        };
        Folder {
            path: path.to_path_buf(),
            fd,
            missing,
            fanout,
        }
    }

    /// Windows: nothing is held open; whether the folder is there is all
    /// that is asked now.
    #[cfg(windows)]
    fn open(path: Option<&Path>) -> Folder {
        let Some(path) = path else {
            return Folder {
                path: PathBuf::new(),
                missing: true,
            };
        };
        let missing = match std::fs::metadata(path) {
            Ok(m) => !m.is_dir(),
            Err(e) => is_gone(&e),
        };
        Folder {
            path: path.to_path_buf(),
            missing,
        }
    }

    /// `stat` of `rest` below the fan-out folder `first` (symlinks
    /// followed, as every read of the store follows them); `None` when
    /// nothing is there.
    #[cfg(unix)]
    fn stat(&self, first: u8, rest: &str) -> Result<Option<Stat>> {
        if self.missing {
            return Ok(None);
        }
        let top = format!("{first:02x}");
        let below = self
            .fd
            .as_ref()
            .map(|fd| self.fanout[usize::from(first)].get_or_init(|| open_dir(fd, &top).ok()));
        let found = match below {
            Some(Some(fd)) => {
                rustix::fs::statat(fd, rest, AtFlags::empty()).map_err(io::Error::from)
            }
            // The fan-out folder is missing: so is everything in it.
            Some(None)
                if self.fd.as_ref().is_some_and(|fd| {
                    matches!(
                        rustix::fs::statat(fd, top.as_str(), AtFlags::SYMLINK_NOFOLLOW),
                        Err(Errno::NOENT)
                    )
                }) =>
            {
                return Ok(None);
            }
            _ => rustix::fs::stat(self.path.join(&top).join(rest)).map_err(io::Error::from),
        };
        match found {
            Ok(st) => Ok(Some(st)),
            Err(e) if is_gone(&e) => Ok(None),
            Err(e) => Err(Error::io("inspecting", self.path.join(top).join(rest), e)),
        }
    }

    /// As [`Folder::stat`], by the path below the folder itself, opening
    /// no fan-out folder.
    #[cfg(unix)]
    fn stat_alone(&self, first: u8, rest: &str) -> Result<Option<Stat>> {
        if self.missing {
            return Ok(None);
        }
        let below = format!("{first:02x}/{rest}");
        let found = match &self.fd {
            Some(fd) => rustix::fs::statat(fd, below.as_str(), AtFlags::empty()),
            None => rustix::fs::stat(self.path.join(&below)),
        };
        match found.map_err(io::Error::from) {
            Ok(st) => Ok(Some(st)),
            Err(e) if is_gone(&e) => Ok(None),
            Err(e) => Err(Error::io("inspecting", self.below(first, rest), e)),
        }
    }

    /// Windows: nothing is held open by [`Folder::stat`] either.
    #[cfg(windows)]
    fn stat_alone(&self, first: u8, rest: &str) -> Result<Option<Stat>> {
        self.stat(first, rest)
    }

    /// Windows: by the whole path, `rest`'s components joined with the
    /// platform's separator.
    #[cfg(windows)]
    fn stat(&self, first: u8, rest: &str) -> Result<Option<Stat>> {
        if self.missing {
            return Ok(None);
        }
        let path = self.below(first, rest);
        match std::fs::metadata(&path) {
            Ok(st) => Ok(Some(st)),
            Err(e) if is_gone(&e) => Ok(None),
            Err(e) => Err(Error::io("inspecting", path, e)),
        }
    }

    /// The path of `rest` (components apart with `/`) below the fan-out
    /// folder `first`.
    fn below(&self, first: u8, rest: &str) -> PathBuf {
        let mut p = self.path.join(format!("{first:02x}"));
        p.extend(rest.split('/'));
        p
    }

    /// Whether a regular file named `hash` is in the folder.
    fn has(&self, hash: &Hash) -> Result<bool> {
        let hex = hash.to_hex();
        let st = self.stat(hash.as_bytes()[0], &format!("{}/{hex}", &hex[2..4]))?;
        Ok(st.is_some_and(|st| is_file(&st)))
    }
}

impl<'a> Presence<'a> {
    /// Opens `store`'s folders (a missing one holds nothing).
    pub fn open(store: &'a Store) -> Self {
        let chunked = store.chunked();
        Presence {
            store,
            blobs: Folder::open(Some(store.root())),
            lists: Folder::open(chunked.map(|c| c.lists_root())),
            chunks: Folder::open(chunked.map(|c| c.objects().root())),
        }
    }

    fn folder(&self, area: Area) -> &Folder {
        match area {
            Area::Blobs => &self.blobs,
            Area::Lists => &self.lists,
            Area::Chunks => &self.chunks,
        }
    }

    /// Whether the object `hash` is in `area` (a regular file of that
    /// name).
    ///
    /// # Errors
    /// [`Error::Io`] when the store cannot be inspected.
    pub fn has(&self, area: Area, hash: &Hash) -> Result<bool> {
        self.folder(area).has(hash)
    }

    /// The leaf folder `leaf` (see [`leaf_of`]) of `area`: `None` when
    /// there is none (nothing is in it).
    ///
    /// # Errors
    /// [`Error::Io`] when the store cannot be inspected.
    pub fn leaf(&self, area: Area, leaf: u16) -> Result<Option<LeafStat>> {
        self.leaf_by(area, leaf, Folder::stat)
    }

    /// As [`Presence::leaf`], without opening the fan-out folder above it
    /// (`leaf` keeps every one it met open for the questions that follow:
    /// up to 256 descriptors, too many for a thread that runs beside
    /// others on a system whose limit is 256). The kernel walks one more
    /// component.
    ///
    /// # Errors
    /// [`Error::Io`] when the store cannot be inspected.
    pub fn leaf_alone(&self, area: Area, leaf: u16) -> Result<Option<LeafStat>> {
        self.leaf_by(area, leaf, Folder::stat_alone)
    }

    /// The leaf folder `leaf` of `area`, its `stat` taken by `stat`.
    fn leaf_by(
        &self,
        area: Area,
        leaf: u16,
        stat: fn(&Folder, u8, &str) -> Result<Option<Stat>>,
    ) -> Result<Option<LeafStat>> {
        let [first, second] = leaf.to_be_bytes();
        let folder = self.folder(area);
        let rest = format!("{second:02x}");
        match stat(folder, first, &rest)? {
            Some(st) if is_dir(&st) => leaf_stat(&st, || folder.below(first, &rest)).map(Some),
            _ => Ok(None),
        }
    }

    /// The chunk list of the content `hash`, or what is wrong with it
    /// ([`Lack::Absent`]: there is none).
    ///
    /// # Errors
    /// [`Error::Io`] when the store cannot be inspected.
    fn list(&self, hash: &Hash) -> Result<std::result::Result<ChunkList, Lack>> {
        let Some(cs) = self.store.chunked() else {
            return Ok(Err(Lack::Absent));
        };
        if !self.lists.has(hash)? {
            return Ok(Err(Lack::Absent));
        }
        match cs.list(hash) {
            Ok(l) => Ok(Ok(l)),
            Err(Error::Missing(_)) => Ok(Err(Lack::Absent)),
            Err(e @ Error::BadChunkList { .. }) => Ok(Err(Lack::BadList(e.to_string()))),
            Err(e) => Err(e),
        }
    }

    /// What the store lacks of the content named `hash`; `None` when it is
    /// all there.
    ///
    /// # Errors
    /// [`Error::Io`] when the store cannot be inspected.
    pub fn lack(&self, hash: &Hash) -> Result<Option<Lack>> {
        self.lack_with(hash, &mut |_| {})
    }

    /// As [`Presence::lack`], showing `on_list` the content's chunk list
    /// when it is chunked (not for a blob).
    ///
    /// # Errors
    /// As [`Presence::lack`].
    pub fn lack_with(
        &self,
        hash: &Hash,
        on_list: &mut dyn FnMut(&ChunkList),
    ) -> Result<Option<Lack>> {
        if self.blobs.has(hash)? {
            return Ok(None);
        }
        let list = match self.list(hash)? {
            Ok(l) => l,
            Err(lack) => return Ok(Some(lack)),
        };
        on_list(&list);
        let mut lacking = 0;
        for (c, _) in &list.chunks {
            if !self.chunks.has(c)? {
                lacking += 1;
            }
        }
        Ok((lacking > 0).then_some(Lack::Chunks(lacking)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_or_a_whole_chunk_list_is_there_and_anything_less_is_not() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::init(d.path()).unwrap();
        let blob = store.write(&mut &b"hello\n"[..]).unwrap().hash;
        let cs = store.chunked().unwrap();
        let data: Vec<u8> = (0..400_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        let params = crate::chunks::Params::new(4096, 16384, 65536).unwrap();
        let w = cs.write(&mut &data[..], params, None).unwrap();
        let p = Presence::open(&store);
        assert_eq!(p.lack(&blob).unwrap(), None);
        assert_eq!(p.lack(&w.hash).unwrap(), None);
        assert_eq!(
            p.lack(&Hash::of(b"never stored")).unwrap(),
            Some(Lack::Absent)
        );
        // A chunk gone, and the blob.
        let list = cs.list(&w.hash).unwrap();
        assert!(list.chunks.len() > 2);
        std::fs::remove_file(cs.objects().path_of(&list.chunks[1].0)).unwrap();
        std::fs::remove_file(store.path_of(&blob)).unwrap();
        let p = Presence::open(&store);
        let mut named = 0;
        assert_eq!(
            p.lack_with(&w.hash, &mut |l| named += l.chunks.len())
                .unwrap(),
            Some(Lack::Chunks(1))
        );
        assert_eq!(named, list.chunks.len());
        assert_eq!(p.lack(&blob).unwrap(), Some(Lack::Absent));
        // A damaged list.
        std::fs::write(cs.list_path(&w.hash), "not a list\n").unwrap();
        assert!(matches!(p.lack(&w.hash).unwrap(), Some(Lack::BadList(_))));
        // No store folders at all (a clone that left them out).
        let empty = tempfile::tempdir().unwrap();
        let none = Store::open(empty.path());
        let p = Presence::open(&none);
        assert_eq!(p.lack(&blob).unwrap(), Some(Lack::Absent));
        assert_eq!(p.leaf(Area::Blobs, leaf_of(&blob)).unwrap(), None);
        assert_eq!(p.leaf_alone(Area::Blobs, leaf_of(&blob)).unwrap(), None);
    }

    /// A folder opened so that its times can be set.
    #[cfg(unix)]
    fn open_folder_for_times(p: &Path) -> std::fs::File {
        std::fs::File::open(p).unwrap()
    }

    /// Windows: a folder opens only with `FILE_FLAG_BACKUP_SEMANTICS`, and
    /// its times are set through a handle allowed to write attributes.
    #[cfg(windows)]
    fn open_folder_for_times(p: &Path) -> std::fs::File {
        use std::os::windows::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .access_mode(0x100) // FILE_WRITE_ATTRIBUTES
            .custom_flags(0x0200_0000) // FILE_FLAG_BACKUP_SEMANTICS
            .open(p)
            .unwrap()
    }

    #[test]
    fn a_leaf_folders_times_move_when_a_name_goes() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::init(d.path()).unwrap();
        let a = store.write(&mut &b"a\n"[..]).unwrap().hash;
        // The folder's times an hour back, so the removal surely moves them.
        let leaf = store.path_of(&a).parent().unwrap().to_path_buf();
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        open_folder_for_times(&leaf).set_modified(hour_ago).unwrap();
        let p = Presence::open(&store);
        let before = p.leaf(Area::Blobs, leaf_of(&a)).unwrap().unwrap();
        assert_eq!(p.leaf(Area::Blobs, leaf_of(&a)).unwrap(), Some(before));
        assert_eq!(
            p.leaf_alone(Area::Blobs, leaf_of(&a)).unwrap(),
            Some(before)
        );
        std::fs::remove_file(store.path_of(&a)).unwrap();
        let after = p.leaf(Area::Blobs, leaf_of(&a)).unwrap().unwrap();
        assert_ne!(after, before);
        assert_eq!(p.leaf_alone(Area::Blobs, leaf_of(&a)).unwrap(), Some(after));
        assert!(!p.has(Area::Blobs, &a).unwrap());
    }
}
