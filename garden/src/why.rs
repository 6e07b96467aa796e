//! What a report says about one path: what happened, in the library's
//! words, and what would change it as a [`Remedy`] the CLI puts into words
//! (the library names no command, as its errors name none).

use std::fmt;

/// Why a path was skipped, kept or noted, and what would change that.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Why {
    /// What happened.
    pub what: String,
    /// What the user can do about it, if there is something.
    pub remedy: Option<Remedy>,
}

/// What settles a [`Why`], for the CLI to say.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Remedy {
    /// Adding the path by name tracks it again.
    AddToTrack,
    /// Adding the file itself (by name) takes it from disk.
    AddItself,
    /// Adding the file takes it from disk (a mirror kept the entry).
    AddFile,
    /// Resolve the merge's markers, or add the file itself as it is.
    ResolveOrAdd,
    /// A template's source: edit it, or add the disk's file as the new
    /// source.
    TemplateSource,
    /// Editing the template (this path) fixes it.
    EditFixes(String),
    /// Removing the entry drops it.
    RemoveDrops,
    /// Following this symlink (with add's `--follow`) on this machine.
    Follow(String),
    /// Adding with `--follow` stores what a symlink points to.
    FollowStores,
    /// Making the file executable, then adding it as a script.
    MakeExecutable,
    /// Adding the file (this path) stores its content again.
    AddStoresAgain(String),
    /// Pulling with `--theirs` takes the server's version.
    PullTheirs,
    /// Removing the tags that are not this machine's.
    RemoveTags,
    /// Turning chunking off keeps the repository readable by the Go sgard.
    ChunkingOff,
}

impl Why {
    /// `what` with `remedy`.
    pub fn new(what: impl Into<String>, remedy: Remedy) -> Why {
        Why {
            what: what.into(),
            remedy: Some(remedy),
        }
    }
}

impl fmt::Display for Why {
    /// What happened (the remedy is the CLI's to say).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

impl From<String> for Why {
    fn from(what: String) -> Why {
        Why { what, remedy: None }
    }
}

impl From<&str> for Why {
    fn from(what: &str) -> Why {
        Why::from(what.to_owned())
    }
}
