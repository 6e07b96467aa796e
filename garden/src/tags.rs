//! `tag add|remove|list`: this machine's tags for a repository.
//!
//! Tags say what this machine is (`work`, `laptop`) for targeting, so they
//! belong to the machine, not to the repository that several machines
//! share: they live in the repository's machine-local state folder
//! (`$XDG_STATE_HOME/sgard/repos/<key>/tags`). Older versions (and the Go
//! sgard) keep them in `<repo>/tags`; that file is read once, when this
//! machine has no tags of its own yet, copied, and never written again.

use crate::Repo;
use std::path::Path;

use crate::identity::{TAGS_FILE, check_tag, labels, read_tags, write_tags};
use crate::{Garden, Result};

/// This machine's tags for the repository at `root`, and a note when they
/// were just taken over from `<root>/tags`.
pub(crate) fn load(
    root: &Path,
    local: Option<&Path>,
) -> Result<(Vec<String>, Option<crate::why::Why>)> {
    let Some(local) = local else {
        return Ok((read_tags(root)?, None));
    };
    if sgard_store::durable::lstat_exists(&local.join(TAGS_FILE)) {
        return Ok((read_tags(local)?, None));
    }
    let old = read_tags(root)?;
    if old.is_empty() {
        return Ok((old, None));
    }
    let note = match write_tags(local, &old) {
        Ok(()) => crate::why::Why::new(
            format!(
                "tags are machine-local now: took {} from {} for this machine",
                old.join(", "),
                root.join(TAGS_FILE).display()
            ),
            crate::why::Remedy::RemoveTags,
        ),
        Err(e) => format!(
            "using the tags in {} ({}); they could not be copied to this machine's \
             state: {}",
            root.join(TAGS_FILE).display(),
            old.join(", "),
            crate::error_chain(&e)
        )
        .into(),
    };
    Ok((old, Some(note)))
}

impl Garden {
    /// Where this machine's tags are kept.
    fn tags_dir(&self) -> &Path {
        self.repo.local_dir.as_deref().unwrap_or(&self.repo.root)
    }

    /// The tags of this machine, in file order.
    ///
    /// # Errors
    /// [`crate::Error::Io`] when the tags file cannot be read.
    pub fn tags(&self) -> Result<Vec<String>> {
        self.repo.tags()
    }

    /// Adds a tag; returns false if it was already set.
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] for a bad name; write errors.
    pub fn add_tag(&mut self, tag: &str) -> Result<bool> {
        let t = check_tag(tag)?;
        let mut tags = self.tags()?;
        if tags.contains(&t) {
            return Ok(false);
        }
        tags.push(t);
        if !self.repo.dry_run {
            write_tags(self.tags_dir(), &tags)?;
        }
        self.repo.labels = labels(&self.repo.env.hostname, &tags);
        Ok(true)
    }

    /// Removes a tag; returns false if it was not set.
    ///
    /// # Errors
    /// Write errors.
    pub fn remove_tag(&mut self, tag: &str) -> Result<bool> {
        let t = tag.trim();
        let mut tags = self.tags()?;
        let before = tags.len();
        tags.retain(|x| x != t);
        if tags.len() == before {
            return Ok(false);
        }
        if !self.repo.dry_run {
            write_tags(self.tags_dir(), &tags)?;
        }
        self.repo.labels = labels(&self.repo.env.hostname, &tags);
        Ok(true)
    }
}

impl Repo {
    pub(crate) fn tags(&self) -> Result<Vec<String>> {
        Ok(load(&self.root, self.local_dir.as_deref())?.0)
    }
}
