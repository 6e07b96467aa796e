//! `verify`: re-hash every blob the manifest names.

use std::collections::HashMap;

use sgard_store::BlobState;

use crate::{Garden, Result};

/// The verdict on one entry's blob.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum VerifyState {
    /// Present and intact.
    Ok,
    /// Not in the store.
    Missing,
    /// Its bytes do not hash to its name.
    Corrupt,
}

impl VerifyState {
    /// The word printed for it.
    pub fn as_str(&self) -> &'static str {
        match self {
            VerifyState::Ok => "ok",
            VerifyState::Missing => "missing",
            VerifyState::Corrupt => "corrupt",
        }
    }
}

/// One line of verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyLine {
    /// The entry's path.
    pub path: String,
    /// The verdict.
    pub state: VerifyState,
}

impl Garden {
    /// Re-hashes the blob of every file entry (each distinct blob once).
    ///
    /// # Errors
    /// [`crate::Error::Store`] when a blob exists but cannot be read at all.
    pub fn verify(&self) -> Result<Vec<VerifyLine>> {
        let mut seen: HashMap<sgard_store::Hash, VerifyState> = HashMap::new();
        let mut out = Vec::new();
        for e in &self.manifest.files {
            let Some(h) = e.hash else { continue };
            let state = match seen.get(&h) {
                Some(s) => *s,
                None => {
                    let s = match self.store.verify(&h)? {
                        BlobState::Ok => VerifyState::Ok,
                        BlobState::Missing => VerifyState::Missing,
                        BlobState::Corrupt(_) => VerifyState::Corrupt,
                    };
                    seen.insert(h, s);
                    s
                }
            };
            out.push(VerifyLine {
                path: e.path.clone(),
                state,
            });
        }
        Ok(out)
    }
}
