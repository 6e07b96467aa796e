//! `info`: everything known about one tracked path.

use crate::Tx;
use std::ffi::OsStr;

use chrono::DateTime;
use sgard_manifest::{Entry, EntryKind, Timestamp};
use sgard_store::Hash;

use crate::fsx;
use crate::scan::Found;
use crate::{Garden, Result, State};

/// The result of [`Garden::info`].
#[derive(Clone, Debug)]
pub struct Info {
    /// The manifest entry.
    pub entry: Entry,
    /// Its status on this machine.
    pub state: State,
    /// Whether it applies to this machine.
    pub applies: bool,
    /// The file's mtime, when it exists and applies here.
    pub disk_mtime: Option<Timestamp>,
    /// The current content hash, when it differs from the stored one.
    pub disk_hash: Option<Hash>,
    /// The current link target, when it differs from the stored one.
    pub disk_target: Option<String>,
    /// Whether the blob is in the store (files only).
    pub blob_stored: Option<bool>,
}

impl Garden {
    /// Details of the entry tracking `arg`.
    ///
    /// # Errors
    /// [`Error::NotTracked`].
    pub fn info(&mut self, arg: &OsStr) -> Result<Info> {
        self.tx().info(arg)
    }
}

impl Tx<'_> {
    pub(crate) fn info(&mut self, arg: &OsStr) -> Result<Info> {
        let e = self.repo.entry_at(arg)?.clone();
        let applies = self.repo.applies(&e)?;
        let lack = match e.hash {
            Some(h) if e.kind == EntryKind::File && applies => {
                self.repo.lacking(&[h], false, None).remove(&h)
            }
            _ => None,
        };
        let state = self.status_of(&e, &Found::Unknown, lack)?.state;
        let abs = self.repo.env.expand(&e.path);
        let md = if applies { fsx::lstat(&abs)? } else { None };
        let disk_mtime = md.as_ref().and_then(|m| {
            let (secs, nsec) = crate::platform::mtime(m);
            DateTime::from_timestamp(secs, u32::try_from(nsec).unwrap_or(0))
                .map(Timestamp::from_datetime)
        });
        let mut info = Info {
            state,
            applies,
            disk_mtime,
            disk_hash: None,
            disk_target: None,
            blob_stored: None,
            entry: e,
        };
        let e = &info.entry;
        match e.kind {
            EntryKind::File => {
                info.blob_stored = Some(match e.hash {
                    Some(h) => self.repo.store.contains(&h)?,
                    None => false,
                });
                if md.as_ref().is_some_and(|m| m.is_file())
                    && let Ok((h, _)) = fsx::hash_file(&abs)
                {
                    let want = if e.encrypted {
                        e.plaintext_hash.as_deref().copied()
                    } else {
                        e.hash
                    };
                    if Some(h) != want || e.encrypted {
                        info.disk_hash = Some(h);
                    }
                }
            }
            EntryKind::Link => {
                if md.as_ref().is_some_and(|m| m.file_type().is_symlink())
                    && let Ok(t) = fsx::read_link(&abs)
                    && e.target.as_deref() != Some(t.as_str())
                {
                    info.disk_target = Some(t);
                }
            }
            EntryKind::Directory => {}
        }
        Ok(info)
    }
}
