//! The record of what changed: every path an event named, with the number
//! of the event, so "what changed since token T" is the paths whose number
//! is past T's.
//!
//! Git's fsmonitor tokens are the model: a token names the watcher's
//! instance and a point in its count of events. A token of another instance
//! (the watcher was restarted), from before the last overflow, or from the
//! future gets no list: the asker must look at everything.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::Token;

/// How many distinct paths the record keeps before it forgets them all
/// (an old token then means "look at everything"): bounds the watcher's
/// memory whatever happens under the folders it watches.
pub const LIMIT: usize = 65_536;

/// The record (see the module documentation).
#[derive(Debug)]
pub struct Log {
    instance: u64,
    seq: u64,
    /// Tokens before this one get no list; why.
    floor: u64,
    why: String,
    paths: HashMap<PathBuf, u64>,
    limit: usize,
}

impl Log {
    /// An empty record for the watcher `instance`: every token from before
    /// it starts is refused.
    pub fn new(instance: u64) -> Self {
        Log {
            instance,
            seq: 1,
            floor: 1,
            why: "the watcher was started after it".into(),
            paths: HashMap::new(),
            limit: LIMIT,
        }
    }

    /// The same, forgetting everything past `limit` paths (tests).
    pub fn with_limit(instance: u64, limit: usize) -> Self {
        Log {
            limit,
            ..Log::new(instance)
        }
    }

    /// The token that names this moment.
    pub fn token(&self) -> Token {
        Token {
            instance: self.instance,
            seq: self.seq,
        }
    }

    /// An event named `path`.
    pub fn record(&mut self, path: &Path) {
        self.seq += 1;
        if self.paths.len() >= self.limit && !self.paths.contains_key(path) {
            self.forget("more paths changed than the watcher keeps");
            return;
        }
        self.paths.insert(path.to_path_buf(), self.seq);
    }

    /// Events were lost (the kernel's queue overflowed), or what is watched
    /// changed: no earlier token can be answered.
    pub fn forget(&mut self, why: &str) {
        self.seq += 1;
        self.floor = self.seq;
        self.why = why.to_owned();
        self.paths.clear();
    }

    /// The paths changed since `token`, sorted, or why they cannot be told.
    ///
    /// # Errors
    /// The reason, when the token is another instance's, older than the
    /// last loss of events, or newer than anything this record gave out.
    pub fn since(&self, token: Token) -> Result<Vec<PathBuf>, String> {
        if token.instance != self.instance {
            return Err("the watcher was restarted since".into());
        }
        if token.seq > self.seq {
            return Err("the token is not one this watcher gave".into());
        }
        if token.seq < self.floor {
            return Err(format!("{} since", self.why));
        }
        let mut out: Vec<PathBuf> = self
            .paths
            .iter()
            .filter(|&(_, &n)| n > token.seq)
            .map(|(p, _)| p.clone())
            .collect();
        out.sort();
        Ok(out)
    }

    /// How many paths the record holds.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

/// Whether a change at one of `changed` may have changed what is at
/// `path`: the path itself or a folder above it was named (a folder
/// renamed, removed, or replaced by a symlink changes everything under it).
/// To ask about many paths, build one [`Changed`].
pub fn affects(changed: &[PathBuf], path: &Path) -> bool {
    Changed::new(changed).affects(path)
}

/// The paths an answer named, asked of many paths in turn whether a change
/// may have touched them (see [`affects`]). Paths are compared as the bytes
/// the kernel named them by; a status of 100,000 paths asks this 100,000
/// times, so each question costs one hash lookup for the path and, when
/// its folder differs from the last question's, one per folder above it.
#[derive(Debug, Default)]
pub struct Changed {
    names: rustc_hash::FxHashSet<Vec<u8>>,
    /// The folder of the last question, and whether it or a folder above
    /// it was named.
    last: Option<(Vec<u8>, bool)>,
}

impl Changed {
    /// The record of `changed` (any order).
    pub fn new(changed: &[PathBuf]) -> Self {
        Changed {
            names: changed.iter().map(|p| key(p).to_vec()).collect(),
            last: None,
        }
    }

    /// Whether no path was named.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Whether a named path is `folder`, under it or above it: whether
    /// anything in `folder` may have changed.
    pub fn touches(&self, folder: &Path) -> bool {
        let f = key(folder);
        let within = |inner: &[u8], outer: &[u8]| {
            inner.starts_with(outer)
                && (inner.len() == outer.len()
                    || outer.ends_with(b"/")
                    || inner[outer.len()] == b'/')
        };
        self.names.iter().any(|n| within(n, f) || within(f, n))
    }

    /// Whether `path` or a folder above it was named.
    pub fn affects(&mut self, path: &Path) -> bool {
        if self.names.is_empty() {
            return false;
        }
        let path = key(path);
        if self.names.contains(path) {
            return true;
        }
        let Some(folder) = parent(path) else {
            return false;
        };
        if let Some((last, hit)) = &self.last
            && last.as_slice() == folder
        {
            return *hit;
        }
        let mut hit = false;
        let mut at = Some(folder);
        while let Some(a) = at {
            if self.names.contains(a) {
                hit = true;
                break;
            }
            at = parent(a);
        }
        self.last = Some((folder.to_vec(), hit));
        hit
    }
}

/// A path's bytes without trailing separators (but the root's own).
fn key(p: &Path) -> &[u8] {
    let mut b = p.as_os_str().as_encoded_bytes();
    while b.len() > 1 && b.ends_with(b"/") {
        b = &b[..b.len() - 1];
    }
    b
}

/// The folder above `b` (a [`key`]), as [`Path::parent`] names it; `None`
/// for the root or a bare name.
fn parent(b: &[u8]) -> Option<&[u8]> {
    let at = b.iter().rposition(|&c| c == b'/')?;
    match (at, b.len()) {
        (0, 1) => None,
        (0, _) => Some(&b[..1]),
        _ => {
            let mut p = &b[..at];
            while p.len() > 1 && p.ends_with(b"/") {
                p = &p[..p.len() - 1];
            }
            Some(p)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(instance: u64, seq: u64) -> Token {
        Token { instance, seq }
    }

    #[test]
    fn a_change_counts_for_the_path_and_everything_under_it() {
        let changed = [
            PathBuf::from("/h/a/b"),
            PathBuf::from("/h/c/"),
            PathBuf::from("/x"),
        ];
        let mut c = Changed::new(&changed);
        for (p, hit) in [
            ("/h/a/b", true),
            ("/h/a/b/c/d", true),
            ("/h/a/bc", false),
            ("/h/a/c", false),
            ("/h/a", false),
            ("/h/c", true),
            ("/h/c/d", true),
            ("/h/cd/e", false),
            ("/x/y", true),
            ("/xy", false),
            ("/h/a/b/e", true),
            ("/h/a/x", false),
        ] {
            assert_eq!(c.affects(Path::new(p)), hit, "{p}");
            assert_eq!(affects(&changed, Path::new(p)), hit, "{p}");
        }
        assert!(c.touches(Path::new("/h/a")));
        assert!(c.touches(Path::new("/h/a/b/c")));
        assert!(c.touches(Path::new("/h/c/")));
        assert!(!c.touches(Path::new("/h/ab")));
        assert!(!c.touches(Path::new("/h/d")));
        let mut root = Changed::new(&[PathBuf::from("/")]);
        assert!(root.touches(Path::new("/h")));
        assert!(root.affects(Path::new("/h/a")));
        assert!(!Changed::new(&[]).affects(Path::new("/h")));
    }

    #[test]
    fn a_token_gets_what_changed_after_it() {
        let mut log = Log::new(7);
        let start = log.token();
        log.record(Path::new("/h/a"));
        let mid = log.token();
        log.record(Path::new("/h/b"));
        log.record(Path::new("/h/a"));
        assert_eq!(
            log.since(start).unwrap(),
            vec![PathBuf::from("/h/a"), PathBuf::from("/h/b")]
        );
        assert_eq!(
            log.since(mid).unwrap(),
            vec![PathBuf::from("/h/a"), PathBuf::from("/h/b")],
            "a path changed again after the token is listed"
        );
        assert!(log.since(log.token()).unwrap().is_empty());
    }

    #[test]
    fn a_token_of_another_instance_before_a_loss_or_from_the_future_gets_none() {
        let mut log = Log::new(7);
        let before = log.token();
        assert!(log.since(t(8, before.seq)).is_err(), "another instance");
        assert!(log.since(t(7, 0)).is_err(), "before the start");
        assert!(log.since(t(7, 99)).is_err(), "from the future");
        log.record(Path::new("/h/a"));
        log.forget("events were lost");
        let err = log.since(before).unwrap_err();
        assert!(err.contains("events were lost"), "{err}");
        let after = log.token();
        assert!(log.since(after).unwrap().is_empty());
    }

    #[test]
    fn too_many_paths_forget_everything_rather_than_grow() {
        let mut log = Log::with_limit(1, 2);
        let start = log.token();
        log.record(Path::new("/a"));
        log.record(Path::new("/b"));
        log.record(Path::new("/a"));
        assert_eq!(log.since(start).unwrap().len(), 2);
        log.record(Path::new("/c"));
        assert!(log.since(start).is_err());
        assert!(log.is_empty());
    }

    #[test]
    fn a_change_to_a_folder_above_affects_the_path() {
        let changed = vec![PathBuf::from("/h/.config"), PathBuf::from("/h/.zshrc")];
        assert!(affects(&changed, Path::new("/h/.zshrc")));
        assert!(affects(&changed, Path::new("/h/.config/nvim/init.lua")));
        assert!(!affects(&changed, Path::new("/h/.bashrc")));
        assert!(!affects(&changed, Path::new("/h/.config2/x")));
        assert!(!affects(&changed, Path::new("/h")));
    }
}
