//! Encrypted entries: storing, comparing and reading them back.
//!
//! The data key is unlocked only when a command really encrypts or decrypts:
//! comparisons first use what needs no key (the Go sgard's `plaintext_hash`,
//! or this machine's fingerprint cache).

use crate::Repo;
use crate::Tx;
use std::io::Read;
use std::path::Path;

use sgard_manifest::Entry;
use sgard_store::Hash;
use zeroize::Zeroizing;

use crate::crypto::{self, Dek};
use crate::{Error, Garden, Result};
use crate::{fsx, keyring, recipients};

/// The largest file sgard encrypts (the envelope is one AEAD message, so the
/// whole plaintext is in memory once).
pub const MAX_ENCRYPTED_BYTES: u64 = 256 << 20;

/// Supplies the passphrase when the data key must be unlocked.
pub type PassphraseSource =
    Box<dyn FnMut() -> std::result::Result<Zeroizing<String>, String> + Send>;

/// The keys of one Garden: where the passphrase comes from, and what was
/// unlocked with it.
#[derive(Default)]
pub(crate) struct Keys {
    pub source: Option<PassphraseSource>,
    /// How many passphrases the source may give before a wrong one fails
    /// (1, or more when a person types them).
    pub tries: u32,
    /// This machine's identity files, in the order they are tried.
    pub candidates: Vec<crate::recipients::Candidate>,
    /// Asks for an encrypted SSH key's passphrase.
    pub key_passphrase: Option<crate::recipients::KeyPassphraseSource>,
    /// The identity file that opened the data key, if one did.
    pub opened_by: Option<std::path::PathBuf>,
    /// The passphrase typed for that file, when it is an encrypted SSH key.
    pub typed: Option<(std::path::PathBuf, Zeroizing<String>)>,
    /// Why no key of this machine opened it (the recipient slots, and what
    /// each file tried gave), once that was found: said again, typed, for
    /// every later secret of the command.
    pub no_key: Option<(Vec<String>, Vec<String>)>,
    pub dek: Option<Dek>,
    pub passphrase: Option<Zeroizing<String>>,
    /// Why the source gave no passphrase, when it failed: it is asked once
    /// per command, so the next secret fails the same way without asking.
    pub refused: Option<String>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys { .. }")
    }
}

impl Garden {
    /// The passphrase this Garden was given, if it needed one (so a
    /// command that opens the repository twice asks once).
    pub fn given_passphrase(&self) -> Option<Zeroizing<String>> {
        self.work.keys.passphrase.clone()
    }

    /// The passphrase typed for the encrypted SSH key that unlocked the
    /// data key, with its path (so a command that opens the repository
    /// twice asks once).
    pub fn given_key_passphrase(&self) -> Option<(std::path::PathBuf, Zeroizing<String>)> {
        self.work.keys.typed.clone()
    }

    /// Whether the repository has encryption set up.
    pub fn encryption_initialized(&self) -> bool {
        self.repo.encryption_initialized()
    }
}

impl Repo {
    pub(crate) fn encryption_initialized(&self) -> bool {
        self.manifest.encryption.is_some()
    }

    /// The `encryption` section.
    ///
    /// # Errors
    /// [`Error::NoEncryption`] when there is none.
    pub(crate) fn encryption(&self) -> Result<&sgard_manifest::Encryption> {
        self.manifest
            .encryption
            .as_ref()
            .ok_or_else(not_initialized)
    }

    /// The `encryption` section, to change it.
    ///
    /// # Errors
    /// [`Error::NoEncryption`] when there is none.
    pub(crate) fn encryption_mut(&mut self) -> Result<&mut sgard_manifest::Encryption> {
        self.manifest
            .encryption
            .as_mut()
            .ok_or_else(not_initialized)
    }

    /// Reads a file's plaintext for encryption (bounded).
    pub(crate) fn read_plain(&self, abs: &Path) -> Result<(Zeroizing<Vec<u8>>, std::fs::Metadata)> {
        let (f, md) = fsx::open_regular(abs)?;
        if md.len() > MAX_ENCRYPTED_BYTES {
            return Err(Error::Unsupported {
                path: abs.display().to_string(),
                reason: format!(
                    "is {} bytes; encrypted files are limited to {MAX_ENCRYPTED_BYTES} bytes",
                    md.len()
                ),
            });
        }
        let mut buf = Zeroizing::new(Vec::with_capacity(md.len() as usize));
        f.take(MAX_ENCRYPTED_BYTES + 1)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io("reading", abs, e))?;
        Ok((buf, md))
    }

    /// The bytes of a file entry's blob (the ciphertext, if encrypted),
    /// verified, from whichever store holds it.
    pub(crate) fn blob_of(&self, e: &Entry) -> Result<Vec<u8>> {
        let h = crate::purge::content_hash(e)?;
        self.blobs_for(&h).read(&h).map_err(|source| {
            if source.is_integrity() {
                Error::Integrity {
                    path: e.path.clone(),
                    source,
                }
            } else {
                Error::Store(source)
            }
        })
    }
}

impl Tx<'_> {
    /// Whether the data key is unlocked already (nothing would be asked).
    pub(crate) fn is_unlocked(&self) -> bool {
        self.work.keys.dek.is_some()
    }

    pub(crate) fn passphrase(&mut self) -> Result<Zeroizing<String>> {
        let k = &mut self.work.keys;
        if let Some(p) = &k.passphrase {
            return Ok(p.clone());
        }
        if let Some(why) = &k.refused {
            return Err(Error::Crypto(why.clone()));
        }
        let src = k
            .source
            .as_mut()
            .ok_or_else(|| Error::Crypto("a passphrase is needed, but none is available".into()))?;
        let p = match src() {
            Ok(p) if p.is_empty() => Err("the passphrase is empty".to_owned()),
            other => other,
        };
        let p = match p {
            Ok(p) => p,
            Err(why) => {
                k.refused = Some(why.clone());
                return Err(Error::Crypto(why));
            }
        };
        k.passphrase = Some(p.clone());
        Ok(p)
    }

    /// The data key, unlocked on first use.
    pub(crate) fn dek(&mut self) -> Result<Dek> {
        if let Some(d) = &self.work.keys.dek {
            return Ok(d.duplicate());
        }
        if let Some((slots, tried)) = &self.work.keys.no_key {
            return Err(Error::NoKey {
                slots: slots.clone(),
                tried: tried.clone(),
            });
        }
        if let Some(why) = &self.work.keys.refused {
            return Err(Error::Crypto(why.clone()));
        }
        let enc = self.repo.encryption()?;
        let tries = self.work.keys.tries.max(1);
        // This machine's keys first: no passphrase is asked when one of
        // them is a recipient.
        let keys = &mut self.work.keys;
        let attempt =
            recipients::unlock(enc, &keys.candidates, keys.key_passphrase.as_mut(), tries)?;
        if let Some(t) = attempt.typed {
            keys.typed = Some(t);
        }
        let has_passphrase = enc.kek_slots.values().any(crypto::is_passphrase_slot);
        if let Some((dek, path)) = attempt.opened {
            // Anyone who can write the manifest can wrap a key of their own
            // to this machine's public key: a recipient slot's key must be
            // the one this machine last unlocked, or follow from it. The
            // passphrase slot, which cannot be forged so, is used instead
            // when there is one.
            match self.check_known_key(&dek) {
                Ok(()) => {
                    let keys = &mut self.work.keys;
                    keys.opened_by = Some(path);
                    keys.dek = Some(dek.duplicate());
                    self.remember_key(&dek);
                    return Ok(dek);
                }
                Err(e) if has_passphrase => self
                    .work
                    .note(format!("{e}; the passphrase is used instead")),
                Err(e) => return Err(e),
            }
        }
        let enc = self.repo.encryption()?;
        let keys = &mut self.work.keys;
        if !has_passphrase {
            let slots: Vec<String> = recipients::slots(enc).into_iter().map(|s| s.slot).collect();
            if !slots.is_empty() {
                keys.no_key = Some((slots.clone(), attempt.tried.clone()));
                return Err(Error::NoKey {
                    slots,
                    tried: attempt.tried,
                });
            }
        }
        let mut left = tries;
        let dek = loop {
            let pass = self.passphrase()?;
            match crypto::unlock(enc, &pass) {
                Ok(d) => break d,
                Err(Error::Crypto(why)) if left > 1 => {
                    left -= 1;
                    self.work.keys.passphrase = None;
                    self.work.note(format!(
                        "{why}; try again ({left} {} left)",
                        if left == 1 { "try" } else { "tries" }
                    ));
                }
                Err(Error::Crypto(why)) => {
                    // A wrong passphrase stays wrong: the next secret of this
                    // command fails the same way without another Argon2 run.
                    self.work.keys.refused = Some(why.clone());
                    return Err(Error::Crypto(why));
                }
                Err(e) => return Err(e),
            }
        };
        self.work.keys.dek = Some(dek.duplicate());
        self.remember_key(&dek);
        Ok(dek)
    }

    /// Where this machine records which data key it last unlocked.
    fn known_key_file(&self) -> Option<std::path::PathBuf> {
        self.repo.local_dir.as_ref().map(|d| d.join(KNOWN_KEY_FILE))
    }

    /// Fails when this machine last unlocked another data key than `dek`
    /// and `dek`'s retired keys do not include it (a rotation elsewhere
    /// keeps the old key there; a forged slot cannot).
    fn check_known_key(&mut self, dek: &Dek) -> Result<()> {
        let Some(path) = self.known_key_file() else {
            return Ok(());
        };
        let Ok(text) = sgard_store::durable::read_regular_to_string_max(&path, 4096) else {
            return Ok(());
        };
        let Some(known) = text.lines().nth(1).map(str::trim) else {
            return Ok(());
        };
        if key_check(dek) == known {
            return Ok(());
        }
        if self.retired_keys(dek).iter().any(|k| key_check(k) == known) {
            return Ok(());
        }
        Err(Error::KeyChanged { record: path })
    }

    /// Records `dek` as the data key this machine last unlocked (a failure
    /// only costs the check next time).
    pub(crate) fn remember_key(&mut self, dek: &Dek) {
        if self.repo.dry_run {
            return;
        }
        let Some(path) = self.known_key_file() else {
            return;
        };
        let text = format!("{KNOWN_KEY_MAGIC}\n{}\n", key_check(dek));
        if sgard_store::durable::read_regular_to_string_max(&path, 4096).ok() == Some(text.clone())
        {
            return;
        }
        if let Some(dir) = path.parent()
            && std::fs::create_dir_all(dir).is_ok()
        {
            let _ = sgard_store::durable::write_replace(&path, text.as_bytes(), 0o600);
        }
    }

    /// Decrypts a blob with the current data key, or a retired one.
    pub(crate) fn decrypt(&mut self, blob: &[u8]) -> Result<Zeroizing<Vec<u8>>> {
        let dek = self.dek()?;
        if let Ok(p) = dek.open(blob) {
            return Ok(p);
        }
        let retired = self.retired_keys(&dek);
        for k in &retired {
            if let Ok(p) = k.open(blob) {
                return Ok(p);
            }
        }
        Err(Error::Crypto(format!(
            "cannot decrypt: the data key it was sealed with is not the current one nor \
             any of the {} retired key(s) this repository holds (in the manifest and in \
             {}), or the data was altered",
            retired.len(),
            self.repo.root.join(keyring::FILE).display()
        )))
    }

    /// The retired data keys reachable from `dek`: the manifest's and the
    /// repository's `retired-keys` file's, each with the sealed line that
    /// held it (read each time: only blobs from before a rotation need them,
    /// and a pull may have brought new ones in the manifest's `retired_deks`;
    /// the file itself does not travel). A
    /// `retired-keys` file that cannot be read leaves a note and counts as
    /// empty: the manifest's keys still open what they can.
    pub(crate) fn retired_keys_sealed(&mut self, dek: &Dek) -> Vec<(Dek, String)> {
        let mut sealed = self
            .repo
            .manifest
            .encryption
            .as_ref()
            .map(|e| e.retired_deks.clone())
            .unwrap_or_default();
        match keyring::read(&self.repo.root) {
            Ok(more) => sealed.extend(more),
            Err(e) => self
                .work
                .note(format!("{e}; using the manifest's retired keys only")),
        }
        keyring::open_all(dek, &sealed)
    }

    /// As [`Self::retired_keys_sealed`], the keys alone.
    pub(crate) fn retired_keys(&mut self, dek: &Dek) -> Vec<Dek> {
        self.retired_keys_sealed(dek)
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    /// Encrypts and stores a plaintext; returns (ciphertext hash, MAC, new blob).
    /// A template's source goes to the chunk store (see
    /// [`Tx::put_source`]).
    pub(crate) fn store_encrypted(
        &mut self,
        plain: &[u8],
        template: bool,
    ) -> Result<(Hash, Hash, bool)> {
        let dek = self.dek()?;
        let blob = dek.seal(plain)?;
        let w = if template {
            self.put_source(&blob)?
        } else {
            self.put(&mut blob.as_slice())?
        };
        self.work.fingerprints.insert(w.hash, Hash::of(plain));
        Ok((w.hash, dek.mac(plain), w.new))
    }

    /// Whether an encrypted entry holds `disk_sha`, as far as that can be
    /// told without the key (`None`: it cannot).
    pub(crate) fn known_match(&mut self, e: &Entry, disk_sha: Hash) -> Option<bool> {
        if let Some(p) = e.plaintext_hash.as_deref().copied() {
            return Some(p == disk_sha);
        }
        let h = e.hash?;
        self.work.fingerprints.get(&h).map(|p| p == disk_sha)
    }

    /// Whether an encrypted entry holds the plaintext at `abs` (whose SHA-256
    /// is `disk_sha`), unlocking the key if the cheap checks cannot tell.
    pub(crate) fn plain_matches(&mut self, e: &Entry, abs: &Path, disk_sha: Hash) -> Result<bool> {
        if let Some(known) = self.known_match(e, disk_sha) {
            return Ok(known);
        }
        let (plain, _) = self.repo.read_plain(abs)?;
        self.plain_matches_bytes(e, &plain)
    }

    /// Whether an encrypted entry holds `plain` (the key is unlocked only if
    /// the cheap checks cannot tell).
    pub(crate) fn plain_matches_bytes(&mut self, e: &Entry, plain: &[u8]) -> Result<bool> {
        let sha = Hash::of(plain);
        if let Some(known) = self.known_match(e, sha) {
            return Ok(known);
        }
        let Some(h) = e.hash else { return Ok(false) };
        let same = match e.plaintext_mac.as_deref().copied() {
            Some(mac) => self.dek()?.mac(plain) == mac,
            None => Hash::of(&self.stored_plaintext(e)?) == sha,
        };
        if same {
            self.work.fingerprints.insert(h, sha);
        }
        Ok(same)
    }

    /// The plaintext of an encrypted entry, its ciphertext checked first.
    pub(crate) fn stored_plaintext(&mut self, e: &Entry) -> Result<Zeroizing<Vec<u8>>> {
        let blob = self.repo.blob_of(e)?;
        let plain = self.decrypt(&blob)?;
        if let Some(h) = e.hash {
            self.work.fingerprints.insert(h, Hash::of(&plain));
        }
        Ok(plain)
    }
}

/// The file, in this machine's state for a repository, naming the data key
/// it last unlocked (by a keyed check value, never the key).
const KNOWN_KEY_FILE: &str = "data-key";
const KNOWN_KEY_MAGIC: &str = "# sgard: a check value of the data key this machine last unlocked";

/// A value that names a data key without revealing it.
fn key_check(dek: &Dek) -> String {
    dek.mac(b"sgard data key check v1").to_string()
}

pub(crate) fn not_initialized() -> Error {
    Error::NoEncryption
}
