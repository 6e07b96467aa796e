//! The machine-local fingerprint cache of encrypted files.
//!
//! Maps a ciphertext blob hash to the SHA-256 of its plaintext, as last seen
//! on this machine (when sgard encrypted or decrypted it). `status` and
//! `checkpoint` use it to tell that an encrypted file is unchanged without
//! the passphrase. It lives in `$XDG_STATE_HOME/sgard/fingerprints` (mode
//! 0600), never in the portable repository.
//!
//! One cache for the whole machine, keyed by the ciphertext alone: the same
//! blob is the same content whichever repository holds it, so a copy of a
//! repository, or a new one a pull filled, knows its secrets at once. The
//! per-repository files older versions kept (`fingerprints-<key>`) are
//! merged in by the first write and then removed. The file is read only
//! when a command first asks about a secret, holds at most [`MAX`] records
//! (the least recently used go first) and lists them oldest first. A
//! damaged line is ignored (the cache is rebuilt), never trusted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sgard_store::{Hash, durable};

/// The file's name in `$XDG_STATE_HOME/sgard/`.
const FILE: &str = "fingerprints";

/// The name prefix of the per-repository files of older versions.
const OLD_PREFIX: &str = "fingerprints-";

/// The most records kept: about 13 MB of text, far more secrets than one
/// machine has; beyond it the least recently used are dropped.
pub(crate) const MAX: usize = 100_000;

/// One record: the plaintext's SHA-256 and when it was last used (a
/// counter: the file's order, then this run's uses after it).
#[derive(Clone, Copy, Debug)]
struct Seen {
    plain: Hash,
    used: u64,
}

/// The machine's cache, read at first use.
#[derive(Debug, Default)]
pub(crate) struct Fingerprints {
    /// `$XDG_STATE_HOME/sgard` (none: no cache at all).
    dir: Option<PathBuf>,
    map: Option<HashMap<Hash, Seen>>,
    /// The next use's counter.
    clock: u64,
    /// Records this run added or used, to write even if another process
    /// rewrote the file meanwhile.
    touched: Vec<Hash>,
    dirty: bool,
}

impl Fingerprints {
    /// The cache of this machine (`state_dir`: `$XDG_STATE_HOME`); nothing
    /// is read until it is asked.
    pub fn load(state_dir: Option<&Path>) -> Self {
        Fingerprints {
            dir: state_dir.map(|d| d.join("sgard")),
            ..Fingerprints::default()
        }
    }

    /// The records, read on first use.
    fn map(&mut self) -> &mut HashMap<Hash, Seen> {
        if self.map.is_none() {
            let mut map = HashMap::new();
            if let Some(dir) = &self.dir {
                // Older versions' files count until the next write merges
                // them in; the machine's own records come first.
                for f in old_files(dir) {
                    read_into(&f, &mut map, &mut 0);
                }
                let mut clock = 0;
                let mut mine = HashMap::new();
                read_into(&dir.join(FILE), &mut mine, &mut clock);
                for s in map.values_mut() {
                    s.used = 0;
                }
                for (c, s) in mine {
                    map.insert(
                        c,
                        Seen {
                            plain: s.plain,
                            used: s.used + 1,
                        },
                    );
                }
            }
            self.clock = map.values().map(|s| s.used + 1).max().unwrap_or(0);
            self.map = Some(map);
        }
        self.map.get_or_insert_with(HashMap::new)
    }

    /// The plaintext SHA-256 last seen for a ciphertext.
    pub fn get(&mut self, cipher: &Hash) -> Option<Hash> {
        let used = self.clock;
        let seen = self.map().get_mut(cipher)?;
        seen.used = used;
        let plain = seen.plain;
        self.clock += 1;
        // A use counts at the next write, not as a reason to write.
        self.touched.push(*cipher);
        Some(plain)
    }

    /// Records a ciphertext's plaintext SHA-256.
    pub fn insert(&mut self, cipher: Hash, plain: Hash) {
        let used = self.clock;
        let old = self.map().insert(cipher, Seen { plain, used });
        self.clock += 1;
        self.touched.push(cipher);
        if old.is_none_or(|s| s.plain != plain) {
            self.dirty = true;
        }
    }

    /// Writes the cache if it changed (best effort: a cache that cannot be
    /// written only costs passphrase prompts later). What another process
    /// wrote since it was read is kept; the older versions' files are
    /// merged in and removed once the write succeeded.
    pub fn flush(&mut self) {
        let Some(dir) = self.dir.clone() else { return };
        let old_files = old_files(&dir);
        if !self.dirty && old_files.is_empty() {
            return;
        }
        // What is on disk now (another command may have written since),
        // then the old files' records where there is none, then this run's.
        let mut merged: HashMap<Hash, Seen> = HashMap::new();
        let mut clock = 0;
        read_into(&dir.join(FILE), &mut merged, &mut clock);
        for f in &old_files {
            let mut older = HashMap::new();
            read_into(f, &mut older, &mut 0);
            for (c, s) in older {
                merged.entry(c).or_insert(Seen {
                    plain: s.plain,
                    used: 0,
                });
            }
        }
        let mine = self.map().clone();
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_by_key(|c| mine.get(c).map_or(0, |s| s.used));
        touched.dedup();
        for c in touched {
            if let Some(s) = mine.get(&c) {
                merged.insert(
                    c,
                    Seen {
                        plain: s.plain,
                        used: clock,
                    },
                );
                clock += 1;
            }
        }
        let mut records: Vec<(Hash, Seen)> = merged.into_iter().collect();
        // Oldest first (ties by hash, so the text is stable); the least
        // recently used beyond the bound go.
        records.sort_by_key(|a| (a.1.used, a.0));
        let drop = records.len().saturating_sub(MAX);
        let mut text = String::with_capacity((records.len() - drop) * 130);
        for (c, s) in &records[drop..] {
            text.push_str(&c.to_hex());
            text.push(' ');
            text.push_str(&s.plain.to_hex());
            text.push('\n');
        }
        if durable::create_dir_all_durable(&dir).is_err() {
            return;
        }
        let _ = crate::platform::set_path_mode(&dir, 0o700);
        if durable::write_atomic(&dir.join(FILE), text.as_bytes(), 0o600).is_ok() {
            self.dirty = false;
            for f in old_files {
                let _ = std::fs::remove_file(f);
            }
        }
    }
}

/// Reads the records of `path` into `map` (a record already there is
/// kept), numbering them from `clock` in the file's order. A missing or
/// unreadable file adds nothing; a line that is not two hashes is skipped.
fn read_into(path: &Path, map: &mut HashMap<Hash, Seen>, clock: &mut u64) {
    let Ok(text) = durable::read_regular_to_string(path) else {
        return;
    };
    for line in text.lines() {
        let mut it = line.split(' ');
        if let (Some(c), Some(p), None) = (it.next(), it.next(), it.next())
            && let (Ok(c), Ok(p)) = (Hash::parse(c), Hash::parse(p))
        {
            map.insert(
                c,
                Seen {
                    plain: p,
                    used: *clock,
                },
            );
            *clock += 1;
        }
    }
}

/// The per-repository caches older versions left in `dir`.
fn old_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(OLD_PREFIX))
        })
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: u8) -> Hash {
        Hash::of(&[n])
    }

    #[test]
    fn the_old_files_are_merged_in_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("sgard");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("fingerprints-0123"),
            format!("{} {}\nnot a record\n", h(1).to_hex(), h(2).to_hex()),
        )
        .unwrap();
        let mut f = Fingerprints::load(Some(d.path()));
        f.insert(h(3), h(4));
        f.flush();
        assert!(!dir.join("fingerprints-0123").exists());
        let mut again = Fingerprints::load(Some(d.path()));
        assert_eq!(again.get(&h(1)), Some(h(2)));
        assert_eq!(again.get(&h(3)), Some(h(4)));
    }

    #[test]
    fn another_process_s_records_are_kept() {
        let d = tempfile::tempdir().unwrap();
        let mut a = Fingerprints::load(Some(d.path()));
        let mut b = Fingerprints::load(Some(d.path()));
        assert_eq!(a.get(&h(9)), None);
        assert_eq!(b.get(&h(9)), None);
        a.insert(h(1), h(2));
        b.insert(h(3), h(4));
        a.flush();
        b.flush();
        let mut c = Fingerprints::load(Some(d.path()));
        assert_eq!(c.get(&h(1)), Some(h(2)));
        assert_eq!(c.get(&h(3)), Some(h(4)));
    }

    #[test]
    fn the_least_recently_used_go_beyond_the_bound() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("sgard");
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = String::new();
        for i in 0..MAX as u64 + 10 {
            let c = Hash::of(&i.to_le_bytes());
            text.push_str(&format!("{} {}\n", c.to_hex(), c.to_hex()));
        }
        std::fs::write(dir.join(FILE), text).unwrap();
        let first = Hash::of(&0u64.to_le_bytes());
        let second = Hash::of(&1u64.to_le_bytes());
        let mut f = Fingerprints::load(Some(d.path()));
        // The oldest record is used: it is kept, the next oldest go.
        assert_eq!(f.get(&first), Some(first));
        f.insert(h(1), h(2));
        f.flush();
        let lines = std::fs::read_to_string(dir.join(FILE)).unwrap();
        assert_eq!(lines.lines().count(), MAX);
        let mut again = Fingerprints::load(Some(d.path()));
        assert_eq!(again.get(&first), Some(first));
        assert_eq!(again.get(&second), None);
        assert_eq!(again.get(&h(1)), Some(h(2)));
    }
}
