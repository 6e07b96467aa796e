//! The kernel's side: inotify, through the `inotify` crate, with the events
//! sgard needs and no others.
//!
//! Not `notify`: its inotify backend always asks for `IN_OPEN`, so every
//! file a status reads in a watched folder is an event, and a status of
//! 100,000 files overflowed the kernel's queue (16,384 events) every time,
//! which made the next status look at everything again. Opening and
//! reading change nothing; only these are asked for: attributes, writes,
//! a close after writing, creation, removal, renames, and the watched
//! folder itself removed or moved.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};

/// One event as read, before it is named.
#[derive(Debug)]
pub(crate) enum Raw {
    /// An event on a watch.
    Event {
        wd: i32,
        mask: EventMask,
        name: Option<OsString>,
    },
    /// The kernel's queue overflowed: events were lost.
    Overflow,
    /// Reading failed: nothing more comes.
    Failed(io::Error),
}

/// What happened, named.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Contents or attributes changed.
    Changed,
    /// Something was made, removed or renamed at the path (or the watched
    /// folder itself went).
    Moved,
}

fn mask() -> WatchMask {
    WatchMask::ATTRIB
        | WatchMask::CLOSE_WRITE
        | WatchMask::MODIFY
        | WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
}

/// The watches, by path and by descriptor.
pub(crate) struct Kernel {
    watches: Watches,
    by_wd: HashMap<i32, (PathBuf, WatchDescriptor)>,
    by_path: HashMap<PathBuf, i32>,
    /// Folders watched with everything under them (new folders in them
    /// are watched as they come).
    trees: Vec<PathBuf>,
    /// Why something under a tree is not watched (a folder that could not
    /// be, a symlink to a folder, another file system): the tree cannot be
    /// vouched for. Taken by [`Kernel::take_failed`].
    failed: Option<io::Error>,
}

impl Kernel {
    /// Starts reading events on a thread of its own, each handed to
    /// `send`; while `stall` exists, it reads none (a test hook).
    pub(crate) fn start(
        send: impl Fn(Raw) -> bool + Send + 'static,
        stall: Option<PathBuf>,
    ) -> io::Result<Kernel> {
        let mut inotify = Inotify::init()?;
        let watches = inotify.watches();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                if let Some(s) = &stall {
                    while s.exists() {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                let events = match inotify.read_events_blocking(&mut buf) {
                    Ok(e) => e,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        send(Raw::Failed(e));
                        return;
                    }
                };
                for e in events {
                    let raw = if e.mask.contains(EventMask::Q_OVERFLOW) {
                        Raw::Overflow
                    } else {
                        Raw::Event {
                            wd: e.wd.get_watch_descriptor_id(),
                            mask: e.mask,
                            name: e.name.map(OsString::from),
                        }
                    };
                    if !send(raw) {
                        return;
                    }
                }
            }
        });
        Ok(Kernel {
            watches,
            by_wd: HashMap::new(),
            by_path: HashMap::new(),
            trees: Vec::new(),
            failed: None,
        })
    }

    /// Watches the folder `p` (what is in it, not below).
    pub(crate) fn add(&mut self, p: &Path) -> io::Result<()> {
        let wd = self.watches.add(p, mask())?;
        let id = wd.get_watch_descriptor_id();
        // The same folder by another path gets the same descriptor: the
        // caller never asks for that (it compares identities first).
        if let Some((old, _)) = self.by_wd.insert(id, (p.to_path_buf(), wd)) {
            self.by_path.remove(&old);
        }
        self.by_path.insert(p.to_path_buf(), id);
        Ok(())
    }

    /// Stops watching `p`.
    pub(crate) fn remove(&mut self, p: &Path) {
        if let Some(id) = self.by_path.remove(p)
            && let Some((_, wd)) = self.by_wd.remove(&id)
        {
            let _ = self.watches.remove(wd);
        }
    }

    /// Watches `root` and every folder under it (symlinks not followed
    /// below it), and folders made in it later.
    pub(crate) fn add_tree(&mut self, root: &Path) -> io::Result<()> {
        self.add(root)?;
        if !self.trees.iter().any(|t| t == root) {
            self.trees.push(root.to_path_buf());
        }
        self.add_below(root)
    }

    fn add_below(&mut self, dir: &Path) -> io::Result<()> {
        let dev = std::fs::metadata(dir).map(|m| dev_of(&m))?;
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            let rd = std::fs::read_dir(&d)?;
            for e in rd {
                let e = e?;
                let t = e.file_type()?;
                let p = e.path();
                if t.is_symlink() && std::fs::metadata(&p).is_ok_and(|m| m.is_dir()) {
                    return Err(io::Error::other(format!(
                        "{} is a symlink to a folder",
                        p.display()
                    )));
                }
                if !t.is_dir() {
                    continue;
                }
                if std::fs::symlink_metadata(&p).map(|m| dev_of(&m))? != dev {
                    return Err(io::Error::other(format!(
                        "{} is another file system",
                        p.display()
                    )));
                }
                self.add(&p)?;
                todo.push(p);
            }
        }
        Ok(())
    }

    /// Why part of a tree is not watched, once (see `failed`).
    pub(crate) fn take_failed(&mut self) -> Option<io::Error> {
        self.failed.take()
    }

    /// Stops watching `root` and everything under it.
    pub(crate) fn remove_tree(&mut self, root: &Path) {
        self.trees.retain(|t| t != root);
        let under: Vec<PathBuf> = self
            .by_path
            .keys()
            .filter(|p| p.starts_with(root))
            .cloned()
            .collect();
        for p in under {
            self.remove(&p);
        }
    }

    /// Names an event: its path and kind (`None`: nothing to count, or a
    /// watch already given up). A folder made inside a tree is watched.
    pub(crate) fn name(
        &mut self,
        wd: i32,
        mask: EventMask,
        name: Option<OsString>,
    ) -> Option<(PathBuf, Kind)> {
        let (dir, _) = self.by_wd.get(&wd)?;
        let path = match &name {
            Some(n) => dir.join(n),
            None => dir.clone(),
        };
        if mask.contains(EventMask::IGNORED) {
            // The kernel dropped the watch (its folder is gone).
            if let Some((p, _)) = self.by_wd.remove(&wd)
                && self.by_path.get(&p) == Some(&wd)
            {
                self.by_path.remove(&p);
            }
            return None;
        }
        let moved = mask.intersects(
            EventMask::CREATE
                | EventMask::DELETE
                | EventMask::MOVED_FROM
                | EventMask::MOVED_TO
                | EventMask::DELETE_SELF
                | EventMask::MOVE_SELF,
        );
        if moved
            && name.is_some()
            && mask.contains(EventMask::ISDIR)
            && mask.intersects(EventMask::CREATE | EventMask::MOVED_TO)
            && self.trees.iter().any(|t| path.starts_with(t))
            && let Err(e) = self.add(&path).and_then(|()| self.add_below(&path))
        {
            self.failed = Some(e);
        }
        Some((path, if moved { Kind::Moved } else { Kind::Changed }))
    }
}

fn dev_of(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    m.dev()
}

/// `ENOSPC`: inotify's "no more watches" (fs.inotify.max_user_watches).
pub(crate) fn libc_enospc() -> i32 {
    rustix::io::Errno::NOSPC.raw_os_error()
}
