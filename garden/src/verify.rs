//! `verify`: re-hash every blob the manifest names.

use std::collections::HashMap;

use sgard_store::BlobState;

use crate::history::SnapshotCheck;
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
    /// The verdict for what the store found.
    pub(crate) fn of(s: BlobState) -> Self {
        match s {
            BlobState::Ok => VerifyState::Ok,
            BlobState::Missing => VerifyState::Missing,
            BlobState::Corrupt => VerifyState::Corrupt,
        }
    }

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifyLine {
    /// The entry's place in the manifest's files ([`Garden::manifest`]),
    /// where its path is: a copy of every path was 7 MB of the peak of a
    /// `verify` of 100,000 entries.
    pub entry: usize,
    /// The verdict.
    pub state: VerifyState,
}

impl Garden {
    /// Re-hashes the blob of every file entry (each distinct blob once).
    ///
    /// # Errors
    /// [`crate::Error::Store`] when a blob exists but cannot be read at all.
    pub fn verify(&self) -> Result<Vec<VerifyLine>> {
        self.verify_with(&mut HashMap::new())
    }

    /// [`Garden::verify`] and [`Garden::verify_history`] together, each
    /// blob read once (the head's are most of every snapshot's).
    ///
    /// # Errors
    /// As the two.
    pub fn verify_all(&mut self) -> Result<(Vec<VerifyLine>, Vec<SnapshotCheck>)> {
        let mut seen = HashMap::with_capacity(self.repo.manifest.files.len());
        let lines = self.verify_with(&mut seen)?;
        let snaps = self.verify_history_with(&mut seen)?;
        Ok((lines, snaps))
    }

    /// As [`Garden::verify`], noting each verdict in `seen`.
    fn verify_with(
        &self,
        seen: &mut HashMap<sgard_store::Hash, VerifyState>,
    ) -> Result<Vec<VerifyLine>> {
        let files = &self.repo.manifest.files;
        let mut out = Vec::with_capacity(files.iter().filter(|e| e.hash.is_some()).count());
        sgard_store::progress::begin("verifying", out.capacity() as u64, 0);
        for (entry, e) in files.iter().enumerate() {
            let Some(h) = e.hash else { continue };
            sgard_store::progress::done(&e.path, "verifying");
            let state = match seen.get(&h) {
                Some(s) => *s,
                None => {
                    let s = VerifyState::of(self.repo.store.verify(&h)?);
                    seen.insert(h, s);
                    s
                }
            };
            out.push(VerifyLine { entry, state });
        }
        Ok(out)
    }
}
