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

/// Whether a change at one of `changed` (sorted) may have changed what is
/// at `path`: the path itself or a folder above it was named (a folder
/// renamed, removed, or replaced by a symlink changes everything under it).
pub fn affects(changed: &[PathBuf], path: &Path) -> bool {
    path.ancestors()
        .any(|a| changed.binary_search_by(|c| c.as_path().cmp(a)).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(instance: u64, seq: u64) -> Token {
        Token { instance, seq }
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
