//! Whether the repository still holds every content the entries name,
//! looked at cheaply enough for every `status`.
//!
//! A content is there when its blob is, or its chunk list and every chunk
//! of it are (`sgard_store::Presence`). A `stat` per content was as much
//! again as the rest of a cached `status` at 100,000 entries (the kernel's
//! walk of `blobs/ab/cd/<hash>` for names no other lookup shares), so this
//! machine remembers what it found, per leaf folder of the store
//! (`blobs/ab/cd`): the folder's identity and times when
//! it was looked at, and a digest of the contents asked for in it, all of
//! which were there. A name removed from a folder moves its mtime and
//! ctime, so while they are what was remembered (and were already over
//! 2 seconds old when remembered: git's racy-clean rule, for a removal in
//! the same timestamp tick) and the same contents are asked for, they are
//! all still there, and the folder is not looked into: one `stat` of the
//! folder, one component below its open fan-out folder, instead of one
//! per content (at 100,000 entries about 51,000 folders, each a cheaper
//! lookup). Anything else about a folder, and it is looked into again.
//! The contents found held in chunks (big files, template sources) are
//! remembered too, and looked at whole every time (their list, each
//! chunk): they are few.
//!
//! The memory is machine-local (`repos/<key>/present`, binary, with a
//! checksum); a missing or damaged one is no memory (everything is looked
//! at), and `--no-cache` neither reads nor writes it.

use crate::Repo;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sgard_store::{Area, Hash, Lack, LeafStat, Presence, Store, durable, leaf_of};

use crate::par;

const MAGIC: &[u8] = b"sgard-present\n";
const VERSION: u32 = 1;
pub(crate) const FILE: &str = "present";
/// Bytes of one folder record: leaf, dev, ino, mtime, ctime, observed,
/// digest.
const RECORD: usize = 2 + 8 * 6;

/// What was found in one leaf folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    stat: LeafStat,
    /// When the folder was looked at (ns since the epoch).
    observed_ns: i64,
    /// [`digest`] of the contents asked for in it, all of which were there.
    digest: u64,
}

impl Seen {
    /// Whether `now` (the folder's stat) and the contents asked for
    /// (`digest`) say that nothing was removed since.
    fn vouches(&self, now: &LeafStat, digest: u64) -> bool {
        let settled = self
            .stat
            .mtime_ns
            .max(self.stat.ctime_ns)
            .saturating_add(2_000_000_000);
        self.stat == *now && self.digest == digest && self.observed_ns > settled
    }
}

/// This machine's memory of the store (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Memory {
    /// By leaf folder of `blobs/`, sorted.
    folders: Vec<(u16, Seen)>,
    /// Contents found held in chunks, sorted.
    chunked: Vec<Hash>,
}

/// A digest of the sorted, distinct `contents` (their count and the sum
/// of a slice of each name: they are SHA-256 values).
pub(crate) fn digest(contents: &[Hash]) -> u64 {
    contents.iter().fold(contents.len() as u64, |d, h| {
        let b = h.as_bytes();
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[8..16]);
        d.wrapping_add(u64::from_le_bytes(x))
    })
}

impl Memory {
    fn load(dir: &Path) -> Memory {
        std::fs::read(dir.join(FILE))
            .ok()
            .and_then(|b| Memory::decode(&b))
            .unwrap_or_default()
    }

    fn decode(b: &[u8]) -> Option<Memory> {
        let rest = b.strip_prefix(MAGIC)?;
        let (version, rest) = rest.split_first_chunk::<4>()?;
        let (sum, body) = rest.split_first_chunk::<4>()?;
        if u32::from_le_bytes(*version) != VERSION
            || u32::from_le_bytes(*sum) != crc32fast::hash(body)
        {
            return None;
        }
        let (n, mut rest) = body.split_first_chunk::<4>()?;
        let n = u32::from_le_bytes(*n) as usize;
        if n > rest.len() / RECORD {
            return None;
        }
        let mut m = Memory::default();
        m.folders.reserve_exact(n);
        let i64_at = |r: &[u8], at: usize| -> Option<i64> {
            Some(i64::from_le_bytes(*r.get(at..at + 8)?.first_chunk::<8>()?))
        };
        for _ in 0..n {
            let (r, tail) = rest.split_at_checked(RECORD)?;
            rest = tail;
            let key = u16::from_le_bytes([r[0], r[1]]);
            let seen = Seen {
                stat: LeafStat {
                    dev: i64_at(r, 2)?.cast_unsigned(),
                    ino: i64_at(r, 10)?.cast_unsigned(),
                    mtime_ns: i64_at(r, 18)?,
                    ctime_ns: i64_at(r, 26)?,
                },
                observed_ns: i64_at(r, 34)?,
                digest: i64_at(r, 42)?.cast_unsigned(),
            };
            if m.folders.last().is_some_and(|(k, _)| *k >= key) {
                return None;
            }
            m.folders.push((key, seen));
        }
        let (n, mut rest) = rest.split_first_chunk::<4>()?;
        let n = u32::from_le_bytes(*n) as usize;
        if rest.len() != n.checked_mul(32)? {
            return None;
        }
        m.chunked.reserve_exact(n);
        while let Some((h, tail)) = rest.split_first_chunk::<32>() {
            m.chunked.push(Hash::from_bytes(*h));
            rest = tail;
        }
        m.chunked.is_sorted().then_some(m)
    }

    fn encode(&self) -> Vec<u8> {
        let mut body =
            Vec::with_capacity(8 + self.folders.len() * RECORD + self.chunked.len() * 32);
        body.extend_from_slice(&(self.folders.len() as u32).to_le_bytes());
        for (leaf, s) in &self.folders {
            body.extend_from_slice(&leaf.to_le_bytes());
            for v in [
                s.stat.dev.cast_signed(),
                s.stat.ino.cast_signed(),
                s.stat.mtime_ns,
                s.stat.ctime_ns,
                s.observed_ns,
                s.digest.cast_signed(),
            ] {
                body.extend_from_slice(&v.to_le_bytes());
            }
        }
        body.extend_from_slice(&(self.chunked.len() as u32).to_le_bytes());
        for h in &self.chunked {
            body.extend_from_slice(h.as_bytes());
        }
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    fn get(&self, leaf: u16) -> Option<&Seen> {
        self.folders
            .binary_search_by(|(k, _)| k.cmp(&leaf))
            .ok()
            .map(|i| &self.folders[i].1)
    }

    /// Takes the folders looked at this run.
    fn update(&mut self, fresh: Vec<(u16, Option<Seen>)>) {
        let mut changes: HashMap<u16, Option<Seen>> = fresh
            .into_iter()
            .filter(|(leaf, seen)| self.get(*leaf) != seen.as_ref())
            .collect();
        if changes.is_empty() {
            return;
        }
        self.folders.retain_mut(|(k, s)| match changes.remove(k) {
            Some(Some(new)) => {
                *s = new;
                true
            }
            Some(None) => false,
            None => true,
        });
        self.folders
            .extend(changes.into_iter().filter_map(|(k, s)| s.map(|s| (k, s))));
        self.folders.sort_unstable_by_key(|(k, _)| *k);
    }
}

/// The blobs in `wanted` (sorted, distinct) that are not there, each leaf
/// folder looked into only when `memory` cannot vouch for it; and what to
/// remember of each folder looked at (`None`: not all there, forget it).
fn missing_blobs(
    presence: &Presence<'_>,
    wanted: &[Hash],
    memory: &Memory,
    early: &[Look],
) -> (Vec<Hash>, Vec<(u16, Option<Seen>)>) {
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..=wanted.len() {
        if i == wanted.len() || leaf_of(&wanted[i]) != leaf_of(&wanted[start]) {
            runs.push(start..i);
            start = i;
        }
    }
    let found = par::map(&runs, 256, |run| {
        let names = &wanted[run.clone()];
        let leaf = leaf_of(&names[0]);
        let d = digest(names);
        // The folder first: a removal while the names are looked at
        // moves it past what is remembered. Looked at already while the
        // repository was opened, or now.
        let Look {
            stat, observed_ns, ..
        } = match early.binary_search_by_key(&leaf, |l| l.leaf) {
            Ok(k) => early[k],
            Err(_) => Look::now(presence, leaf),
        };
        if let Some(stat) = stat
            && memory.get(leaf).is_some_and(|s| s.vouches(&stat, d))
        {
            return (Vec::new(), None);
        }
        let gone: Vec<Hash> = names
            .iter()
            .filter(|h| !presence.has(Area::Blobs, h).unwrap_or(true))
            .copied()
            .collect();
        let seen = stat.filter(|_| gone.is_empty()).map(|stat| Seen {
            stat,
            observed_ns,
            digest: d,
        });
        (gone, Some((leaf, seen)))
    });
    let mut gone = Vec::new();
    let mut looked = Vec::new();
    for r in found.into_iter().flatten() {
        gone.extend(r.0);
        looked.extend(r.1);
    }
    (gone, looked)
}

/// One look at a leaf folder of `blobs/`.
#[derive(Clone, Copy, Debug)]
struct Look {
    leaf: u16,
    /// `None`: no folder there (or none that could be looked at).
    stat: Option<LeafStat>,
    /// When it was looked at (ns since the epoch), just before the `stat`.
    observed_ns: i64,
}

impl Look {
    fn now(presence: &Presence<'_>, leaf: u16) -> Look {
        Look::by(leaf, || presence.leaf(Area::Blobs, leaf))
    }

    /// As [`Look::now`], holding no fan-out folder open (see
    /// [`Presence::leaf_alone`]): what the thread ahead uses, beside an
    /// open that opens files of its own.
    fn alone(presence: &Presence<'_>, leaf: u16) -> Look {
        Look::by(leaf, || presence.leaf_alone(Area::Blobs, leaf))
    }

    /// The time, then the `stat` that `look` takes.
    fn by(leaf: u16, look: impl FnOnce() -> sgard_store::Result<Option<LeafStat>>) -> Look {
        let observed_ns = crate::index::now_ns();
        Look {
            leaf,
            stat: look().ok().flatten(),
            observed_ns,
        }
    }
}

/// How much older than the check that uses it a look taken ahead may be:
/// past it, the folder is looked at again.
const LOOK_AHEAD_MAX_AGE_NS: i64 = 500_000_000;

/// The leaf folders this machine remembers, looked at on a thread of their
/// own while the command opens the repository (reads the index, decodes
/// the manifest: one core's work), so that the status that follows finds
/// most of them looked at already (see [`crate::Options::presence_ahead`]).
/// A look taken early is as good as one taken later: each is a `stat`
/// taken before the folder's names would be looked into, as
/// [`missing_blobs`] takes it.
#[derive(Debug)]
pub(crate) struct Ahead {
    dir: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(Memory, Vec<Look>)>>,
}

/// What [`Ahead`] found: the memory it went by and its looks (sorted by
/// leaf), for the state folder `dir`.
#[derive(Debug)]
pub(crate) struct Early {
    dir: PathBuf,
    memory: Memory,
    looks: Vec<Look>,
}

impl Ahead {
    /// Starts looking at the folders remembered in the state folder `dir`
    /// of the repository at `root`; `None` when no thread could be started
    /// (the status then looks at every folder itself).
    pub(crate) fn start(root: &Path, dir: &Path) -> Option<Ahead> {
        let stop = Arc::new(AtomicBool::new(false));
        let (root, memory_dir, halt) = (root.to_path_buf(), dir.to_path_buf(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("sgard-presence".into())
            .spawn(move || {
                let memory = Memory::load(&memory_dir);
                let store = Store::open(&root);
                let presence = Presence::open(&store);
                let mut looks = Vec::with_capacity(memory.folders.len());
                for (leaf, _) in &memory.folders {
                    if halt.load(Ordering::Relaxed) {
                        break;
                    }
                    looks.push(Look::alone(&presence, *leaf));
                }
                (memory, looks)
            })
            .ok()?;
        Some(Ahead {
            dir: dir.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    /// The state folder it looks for.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops it (the folder it is looking at is finished) and takes what
    /// it found: the looks taken in the last [`LOOK_AHEAD_MAX_AGE_NS`] (an
    /// open that waited longer is looked at again, so the check is never
    /// much older than the status).
    pub(crate) fn finish(mut self) -> Option<Early> {
        self.stop.store(true, Ordering::Relaxed);
        let (memory, mut looks) = self.thread.take()?.join().ok()?;
        let oldest = crate::index::now_ns().saturating_sub(LOOK_AHEAD_MAX_AGE_NS);
        looks.retain(|l| l.observed_ns >= oldest);
        Some(Early {
            dir: std::mem::take(&mut self.dir),
            memory,
            looks,
        })
    }
}

impl Drop for Ahead {
    /// Not finished (the command did not get as far as a status): the
    /// thread stops at its next folder and ends on its own.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Repo {
    /// What the repository lacks of each of `contents` (sorted, distinct):
    /// only the ones it lacks are in the answer. With `all`, the contents
    /// are every entry's (the memory keeps nothing else). A store that
    /// cannot be asked about a content counts as holding it (`verify` says
    /// more). `early`: what [`Ahead`] found while the repository was
    /// opened.
    pub(crate) fn lacking(
        &self,
        contents: &[Hash],
        all: bool,
        early: Option<Early>,
    ) -> HashMap<Hash, Lack> {
        debug_assert!(contents.windows(2).all(|w| w[0] < w[1]));
        let presence = Presence::open(&self.store);
        let dir = self
            .local_dir
            .as_deref()
            .filter(|_| self.env.caches().is_some());
        let (mut memory, looks) = match (dir, early) {
            (Some(dir), Some(e)) if e.dir == dir => (e.memory, e.looks),
            (dir, _) => (dir.map(Memory::load).unwrap_or_default(), Vec::new()),
        };
        let before = memory.clone();
        let (as_blobs, known_chunked): (Vec<Hash>, Vec<Hash>) = contents
            .iter()
            .partition(|h| memory.chunked.binary_search(h).is_err());
        let (not_blobs, looked) = missing_blobs(&presence, &as_blobs, &memory, &looks);
        memory.update(looked);
        // The rest are held in chunks, or gone: looked at whole.
        let mut out = HashMap::new();
        let mut held = Vec::new();
        for h in not_blobs.iter().chain(&known_chunked) {
            let mut chunked = false;
            // Unreadable: counted as there (`verify` says more).
            if let Ok(Some(lack)) = presence.lack_with(h, &mut |_| chunked = true) {
                out.insert(*h, lack);
            }
            if chunked {
                held.push(*h);
            }
        }
        if !all {
            held.extend(
                memory
                    .chunked
                    .iter()
                    .filter(|h| contents.binary_search(h).is_err()),
            );
        }
        held.sort_unstable();
        held.dedup();
        memory.chunked = held;
        if let Some(dir) = dir
            && memory != before
            && !self.dry_run
        {
            // A cache: a memory that could not be written is made again.
            if durable::create_private_dir_all(dir).is_ok() {
                let _ = durable::write_atomic(&dir.join(FILE), &memory.encode(), 0o600);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(mtime_ns: i64, observed_ns: i64, digest: u64) -> Seen {
        Seen {
            stat: LeafStat {
                dev: 1,
                ino: 2,
                mtime_ns,
                ctime_ns: mtime_ns,
            },
            observed_ns,
            digest,
        }
    }

    #[test]
    fn a_folder_is_vouched_for_only_unchanged_settled_and_for_the_same_contents() {
        let s = seen(10_000_000_000, 13_000_000_000, 7);
        assert!(s.vouches(&s.stat, 7));
        assert!(!s.vouches(&s.stat, 8), "other contents asked for");
        let mut moved = s.stat;
        moved.mtime_ns += 1;
        assert!(!s.vouches(&moved, 7), "a name came or went");
        let racy = seen(10_000_000_000, 11_000_000_000, 7);
        assert!(
            !racy.vouches(&racy.stat, 7),
            "looked at too soon after a change"
        );
    }

    #[test]
    fn the_memory_round_trips_and_anything_damaged_is_none() {
        let mut m = Memory::default();
        m.update(vec![
            (0xabcd, Some(seen(1, 5_000_000_000, 3))),
            (0x0001, None),
        ]);
        m.update(vec![(0xffff, Some(seen(-1, 2, u64::MAX)))]);
        m.chunked = vec![Hash::of(b"a"), Hash::of(b"b")];
        m.chunked.sort_unstable();
        let bytes = m.encode();
        assert_eq!(Memory::decode(&bytes), Some(m.clone()));
        for cut in 0..bytes.len() {
            assert_eq!(Memory::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(Memory::decode(&flipped), None);
        // A folder looked at again and found wanting is forgotten.
        m.update(vec![(0xffff, None)]);
        assert_eq!(m.get(0xffff), None);
        assert!(m.get(0xabcd).is_some());
    }

    #[test]
    fn the_digest_tells_sets_apart() {
        let (a, b, c) = (Hash::of(b"a"), Hash::of(b"b"), Hash::of(b"c"));
        assert_ne!(digest(&[a]), digest(&[a, b]));
        assert_ne!(digest(&[a, b]), digest(&[a, c]));
        assert_eq!(digest(&[a, b]), digest(&[a, b]));
    }

    /// Three blobs in three leaf folders whose mtimes are an hour back (so
    /// a removal surely moves them), remembered as all there and settled.
    #[cfg(unix)]
    fn remembered() -> (tempfile::TempDir, Store, Vec<Hash>, Memory) {
        let d = tempfile::tempdir().unwrap();
        let store = Store::init(d.path()).unwrap();
        let mut wanted: Vec<Hash> = [&b"a\n"[..], b"b\n", b"c\n"]
            .iter()
            .map(|b| store.write(&mut &b[..]).unwrap().hash)
            .collect();
        wanted.sort_unstable();
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for h in &wanted {
            let leaf = store.path_of(h).parent().unwrap().to_path_buf();
            std::fs::File::open(&leaf)
                .unwrap()
                .set_modified(hour_ago)
                .unwrap();
        }
        let p = Presence::open(&store);
        let mut memory = Memory::default();
        memory.update(
            wanted
                .iter()
                .map(|h| {
                    let stat = p.leaf(Area::Blobs, leaf_of(h)).unwrap().unwrap();
                    let seen = Seen {
                        stat,
                        // Setting the times moved the ctime to now: as if
                        // looked at once that had settled.
                        observed_ns: stat.ctime_ns.max(stat.mtime_ns) + 3_000_000_000,
                        digest: digest(&[*h]),
                    };
                    (leaf_of(h), Some(seen))
                })
                .collect(),
        );
        assert_eq!(memory.folders.len(), 3, "three leaf folders");
        (d, store, wanted, memory)
    }

    /// A state folder in `root` holding `memory`, saved.
    #[cfg(unix)]
    fn saved(root: &Path, memory: &Memory) -> PathBuf {
        let dir = root.join("state");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(FILE), memory.encode()).unwrap();
        dir
    }

    #[cfg(unix)]
    fn looks(p: &Presence<'_>, memory: &Memory) -> Vec<Look> {
        memory
            .folders
            .iter()
            .map(|(leaf, _)| Look::now(p, *leaf))
            .collect()
    }

    #[cfg(unix)]
    #[test]
    fn looks_taken_while_opening_stand_for_their_folders() {
        let (_d, store, wanted, memory) = remembered();
        let p = Presence::open(&store);
        let early = looks(&p, &memory);
        let (gone, looked) = missing_blobs(&p, &wanted, &memory, &early);
        assert!(
            gone.is_empty() && looked.is_empty(),
            "vouched for: not looked into"
        );
        // Removed after the looks were taken: the run is as of the looks
        // (which shows it went by them, not by a look of its own).
        std::fs::remove_file(store.path_of(&wanted[1])).unwrap();
        let (gone, _) = missing_blobs(&p, &wanted, &memory, &early);
        assert!(gone.is_empty());
        // Looks taken after the removal find it, and so does a run with
        // no look taken ahead, or with the look of that folder missing.
        let fresh = looks(&p, &memory);
        let without: Vec<Look> = early
            .iter()
            .filter(|l| l.leaf != leaf_of(&wanted[1]))
            .copied()
            .collect();
        for early in [&fresh[..], &[], &without[..]] {
            let (gone, looked) = missing_blobs(&p, &wanted, &memory, early);
            assert_eq!(gone, vec![wanted[1]]);
            assert_eq!(looked, vec![(leaf_of(&wanted[1]), None)], "forgotten");
        }
    }

    #[cfg(unix)]
    #[test]
    fn the_thread_ahead_goes_by_the_saved_memory_and_stops_when_told() {
        let (d, store, wanted, memory) = remembered();
        let dir = saved(d.path(), &memory);
        std::fs::remove_file(store.path_of(&wanted[0])).unwrap();
        let ahead = Ahead::start(d.path(), &dir).unwrap();
        assert_eq!(ahead.dir(), dir);
        // Stopped as soon as it started, it may have looked at any first
        // few folders, in order; each look is the folder as it is.
        let early = ahead.finish().unwrap();
        assert_eq!(early.memory, memory);
        assert!(early.looks.len() <= 3);
        let p = Presence::open(&store);
        for (look, (leaf, _)) in early.looks.iter().zip(&memory.folders) {
            assert_eq!(look.leaf, *leaf);
            assert_eq!(look.stat, p.leaf(Area::Blobs, *leaf).unwrap());
        }
        let (gone, _) = missing_blobs(&p, &wanted, &early.memory, &early.looks);
        assert_eq!(gone, vec![wanted[0]], "removed before it looked");
        // Dropped unfinished, it stops on its own.
        drop(Ahead::start(d.path(), &dir));
    }

    #[cfg(unix)]
    #[test]
    fn looks_older_than_the_bound_are_looked_at_again() {
        let (d, _store, _wanted, memory) = remembered();
        let dir = saved(d.path(), &memory);
        let ahead = Ahead::start(d.path(), &dir).unwrap();
        let bound = std::time::Duration::from_nanos(LOOK_AHEAD_MAX_AGE_NS.cast_unsigned());
        std::thread::sleep(bound + std::time::Duration::from_millis(100));
        let early = ahead.finish().unwrap();
        assert!(early.looks.is_empty(), "{:?}", early.looks);
        assert_eq!(early.memory, memory);
    }
}
