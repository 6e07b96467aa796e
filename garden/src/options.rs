//! How a repository is opened: one [`Options`] value for what a run does
//! with it and how it behaves, instead of a constructor per purpose and a
//! setter per option.

use crate::PassphraseSource;
use crate::lock::LockMode;

/// Where a Garden's notes go as they come up (see [`Options::note_sink`]).
pub type NoteFn = Box<dyn Fn(&crate::why::Why) + Send>;

/// What a run does with the repository it opens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Access {
    /// Read it, with this machine's state (status, diff, info): a shared
    /// lock; what the run learns (the stat cache, the base) is saved by
    /// [`crate::Garden::finish`].
    #[default]
    Read,
    /// Change it: the exclusive lock; an interrupted checkpoint is
    /// finished and temp files of killed runs are swept at the open.
    Write,
    /// Read the repository alone (verify, list, log, identity): a shared
    /// lock; this machine's base and stat cache are neither loaded (at
    /// 100,000 entries, 30 MB decoded for nothing) nor written. Nothing that
    /// compares the disk with the repository may be asked of it.
    RepositoryOnly,
    /// Change the home folder only (restore, undo, mirror down, merge): a
    /// shared lock on the repository (it is only read; it may be
    /// read-only) and an exclusive one on this home's state, so two such
    /// commands never run at once here. Safety snapshots go to this home's
    /// local log. With [`Options::dry_run`], no home lock and nothing
    /// written.
    Home,
}

impl From<LockMode> for Access {
    fn from(mode: LockMode) -> Self {
        match mode {
            LockMode::Shared => Access::Read,
            LockMode::Exclusive => Access::Write,
        }
    }
}

/// How to open a repository (see [`crate::Garden::open`]). `Options::from`
/// an [`Access`] gives the defaults: nobody told of waits or notes, notes
/// kept for [`crate::Garden::take_notes`], one try at the passphrase, no
/// passphrase source.
#[derive(Default)]
pub struct Options<'a> {
    /// What the run does with the repository.
    pub access: Access,
    /// Told when the lock is held by another process and the open waits.
    pub on_wait: Option<&'a dyn Fn(&str)>,
    /// Write nothing: the manifest, this machine's base and index are
    /// changed in memory only, so a command that changes only those
    /// (remove, lock, target, exclude, include) reports what it would do.
    /// Commands that store content or write the home have dry runs of
    /// their own; this is not one for them.
    pub dry_run: bool,
    /// The process exits soon after the Garden is dropped: the drop leaves
    /// the in-memory manifest and logs to the exit instead of freeing them
    /// entry by entry. Not for a long-lived process (a server): their
    /// memory would never come back.
    pub process_ends: bool,
    /// Where notes go as they come up in the middle of a command (those of
    /// the open first); without one they wait for `take_notes`.
    pub note_sink: Option<NoteFn>,
    /// Where the passphrase comes from when a command needs the data key;
    /// called at most once per Garden, and only when needed.
    pub passphrase: Option<PassphraseSource>,
    /// Whether this machine's keys may unlock the data key (a person's
    /// command; never a server): `identities`, then the default identity
    /// files of [`crate::recipients::candidates`].
    pub machine_keys: bool,
    /// Identity files named by the user (`--identity`, `SGARD_IDENTITY`),
    /// tried first when a recipient slot could unlock the data key (see
    /// [`crate::recipients::candidates`] for the rest).
    pub identities: Vec<std::path::PathBuf>,
    /// Where the passphrase of an encrypted SSH key comes from, when that
    /// key is a recipient of the repository.
    pub key_passphrase: Option<crate::recipients::KeyPassphraseSource>,
    /// How many times a wrong passphrase is asked for (a person at a
    /// terminal mistypes; a variable or a file would only repeat it); 0
    /// counts as 1.
    pub passphrase_tries: u32,
    /// The run asks whether the repository holds every content (a status):
    /// the folders of `blobs/` this machine remembers are looked at on a
    /// second thread while the open reads the index and the manifest on
    /// one (see `present.rs`).
    pub presence_ahead: bool,
}

impl std::fmt::Debug for Options<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("access", &self.access)
            .field("dry_run", &self.dry_run)
            .field("process_ends", &self.process_ends)
            .field("passphrase_tries", &self.passphrase_tries)
            .field("presence_ahead", &self.presence_ahead)
            .finish_non_exhaustive()
    }
}

impl From<Access> for Options<'_> {
    fn from(access: Access) -> Self {
        Options {
            access,
            ..Options::default()
        }
    }
}
