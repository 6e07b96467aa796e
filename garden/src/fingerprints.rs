//! The machine-local fingerprint cache of encrypted files.
//!
//! Maps a ciphertext blob hash to the SHA-256 of its plaintext, as last seen
//! on this machine (when sgard encrypted or decrypted it). `status` and
//! `checkpoint` use it to tell that an encrypted file is unchanged without
//! the passphrase. It lives under `$XDG_STATE_HOME/sgard/` (mode 0600), never
//! in the portable repository, one file per repository. A damaged cache is
//! ignored (rebuilt), never trusted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sgard_store::{Hash, durable};

/// The cache of one repository.
#[derive(Debug, Default)]
pub(crate) struct Fingerprints {
    path: Option<PathBuf>,
    map: HashMap<Hash, Hash>,
    dirty: bool,
}

impl Fingerprints {
    /// Loads the cache for the repository at `repo` from `state_dir`.
    pub fn load(state_dir: Option<&Path>, repo: &Path) -> Self {
        let Some(dir) = state_dir else {
            return Fingerprints::default();
        };
        let key = Hash::of(repo.as_os_str().as_encoded_bytes()).short(16);
        let path = dir.join("sgard").join(format!("fingerprints-{key}"));
        let mut map = HashMap::new();
        if let Ok(text) = durable::read_regular_to_string(&path) {
            for line in text.lines() {
                let mut it = line.split(' ');
                if let (Some(c), Some(p), None) = (it.next(), it.next(), it.next())
                    && let (Ok(c), Ok(p)) = (Hash::parse(c), Hash::parse(p))
                {
                    map.insert(c, p);
                }
            }
        }
        Fingerprints {
            path: Some(path),
            map,
            dirty: false,
        }
    }

    /// The plaintext SHA-256 last seen for a ciphertext.
    pub fn get(&self, cipher: &Hash) -> Option<Hash> {
        self.map.get(cipher).copied()
    }

    /// Records a ciphertext's plaintext SHA-256.
    pub fn insert(&mut self, cipher: Hash, plain: Hash) {
        if self.map.insert(cipher, plain) != Some(plain) {
            self.dirty = true;
        }
    }

    /// Writes the cache if it changed (best effort: a cache that cannot be
    /// written only costs passphrase prompts later).
    pub fn flush(&mut self) {
        let Some(path) = &self.path else { return };
        if !self.dirty {
            return;
        }
        let mut lines: Vec<String> = self
            .map
            .iter()
            .map(|(c, p)| format!("{} {}\n", c.to_hex(), p.to_hex()))
            .collect();
        lines.sort();
        let dir = durable::parent_of(path);
        if durable::create_dir_all_durable(&dir).is_ok() {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
            if durable::write_atomic(path, lines.concat().as_bytes(), 0o600).is_ok() {
                self.dirty = false;
            }
        }
    }
}
