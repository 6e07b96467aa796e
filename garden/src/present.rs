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
use std::path::Path;

use sgard_store::{Area, Hash, Lack, LeafStat, Presence, durable, leaf_of};

use crate::{Garden, par};

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
        // moves it past what is remembered.
        let observed_ns = crate::index::now_ns();
        let stat = presence.leaf(Area::Blobs, leaf).ok().flatten();
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

impl Garden {}

impl Repo {
    /// What the repository lacks of each of `contents` (sorted, distinct):
    /// only the ones it lacks are in the answer. With `all`, the contents
    /// are every entry's (the memory keeps nothing else). A store that
    /// cannot be asked about a content counts as holding it (`verify` says
    /// more).
    pub(crate) fn lacking(&self, contents: &[Hash], all: bool) -> HashMap<Hash, Lack> {
        debug_assert!(contents.windows(2).all(|w| w[0] < w[1]));
        let presence = Presence::open(&self.store);
        let dir = self
            .local_dir
            .as_deref()
            .filter(|_| self.env.caches().is_some());
        let mut memory = dir.map(Memory::load).unwrap_or_default();
        let before = memory.clone();
        let (as_blobs, known_chunked): (Vec<Hash>, Vec<Hash>) = contents
            .iter()
            .partition(|h| memory.chunked.binary_search(h).is_err());
        let (not_blobs, looked) = missing_blobs(&presence, &as_blobs, &memory);
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
}
