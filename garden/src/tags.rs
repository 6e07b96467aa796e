//! `tag add|remove|list`: the machine-local tags of this repository.

use crate::identity::{check_tag, labels, read_tags, write_tags};
use crate::{Garden, Result};

impl Garden {
    /// The tags of this machine, in file order.
    ///
    /// # Errors
    /// [`crate::Error::Io`] when the tags file cannot be read.
    pub fn tags(&self) -> Result<Vec<String>> {
        read_tags(&self.root)
    }

    /// Adds a tag; returns false if it was already set.
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] for a bad name; write errors.
    pub fn add_tag(&mut self, tag: &str) -> Result<bool> {
        let t = check_tag(tag)?;
        let mut tags = read_tags(&self.root)?;
        if tags.contains(&t) {
            return Ok(false);
        }
        tags.push(t);
        write_tags(&self.root, &tags)?;
        self.labels = labels(&self.env.hostname, &tags);
        Ok(true)
    }

    /// Removes a tag; returns false if it was not set.
    ///
    /// # Errors
    /// Write errors.
    pub fn remove_tag(&mut self, tag: &str) -> Result<bool> {
        let t = tag.trim();
        let mut tags = read_tags(&self.root)?;
        let before = tags.len();
        tags.retain(|x| x != t);
        if tags.len() == before {
            return Ok(false);
        }
        write_tags(&self.root, &tags)?;
        self.labels = labels(&self.env.hostname, &tags);
        Ok(true)
    }
}
