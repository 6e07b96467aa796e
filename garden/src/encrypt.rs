//! `encrypt init|list-slots|remove-slot|change-passphrase|rotate-dek`.

use crate::Tx;
use crate::crypto::{self, KdfParams, PASSPHRASE_SLOT};
use crate::encrypted::not_initialized;
use crate::{Error, Garden, Prompt, Result};

/// The result of [`Garden::rotate_dek`].
#[derive(Debug, Default)]
pub struct RotateReport {
    /// Entries re-encrypted under the new key.
    pub reencrypted: Vec<String>,
    /// Key slots re-wrapped.
    pub rewrapped: Vec<String>,
    /// Key slots dropped (after the user agreed) because this sgard cannot
    /// re-wrap them.
    pub dropped: Vec<String>,
}

impl Garden {
    /// Sets up encryption: a new data key wrapped in a `passphrase` slot.
    ///
    /// # Errors
    /// [`Error::Crypto`] when encryption is already set up (checked before
    /// any passphrase is asked for) or the key cannot be made.
    pub fn encrypt_init(&mut self, passphrase: &str, params: KdfParams) -> Result<()> {
        self.require_exclusive("encrypt init")?;
        if self.repo.manifest.encryption.is_some() {
            return Err(Error::Crypto("encryption is already initialized".into()));
        }
        if passphrase.is_empty() {
            return Err(Error::Crypto("the passphrase is empty".into()));
        }
        let (enc, dek) = crypto::new_encryption(passphrase, params)?;
        self.repo.manifest.encryption = Some(enc);
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        self.work.keys.dek = Some(dek);
        Ok(())
    }

    /// Unlocks the data key now (asking for the passphrase), to check it.
    ///
    /// # Errors
    /// [`Error::Crypto`] for a wrong passphrase.
    pub fn verify_passphrase(&mut self) -> Result<()> {
        self.tx().verify_passphrase()
    }

    /// The key slots: (name, type), sorted by name.
    pub fn key_slots(&self) -> Vec<(String, String)> {
        self.repo
            .manifest
            .encryption
            .iter()
            .flat_map(|e| e.kek_slots.iter())
            .map(|(n, s)| (n.clone(), s.kind.clone()))
            .collect()
    }

    /// Removes a key slot (never the last one).
    ///
    /// # Errors
    /// [`Error::Crypto`] for an unknown or the last slot.
    pub fn remove_slot(&mut self, name: &str) -> Result<()> {
        self.require_exclusive("encrypt remove-slot")?;
        let enc = self
            .repo
            .manifest
            .encryption
            .as_mut()
            .ok_or_else(not_initialized)?;
        if !enc.kek_slots.contains_key(name) {
            return Err(Error::Crypto(format!("no key slot {name:?}")));
        }
        if enc.kek_slots.len() == 1 {
            return Err(Error::Crypto(format!(
                "{name:?} is the only key slot; removing it would lock the data away"
            )));
        }
        enc.kek_slots.remove(name);
        self.repo.manifest.updated = self.repo.env.now;
        self.save()
    }

    /// Re-wraps the data key under a new passphrase (the current one, from
    /// the passphrase source, unlocks it first). A wrong current passphrase
    /// changes nothing.
    ///
    /// # Errors
    /// [`Error::Crypto`].
    pub fn change_passphrase(&mut self, new: &str, params: Option<KdfParams>) -> Result<()> {
        self.require_exclusive("encrypt change-passphrase")?;
        if new.is_empty() {
            return Err(Error::Crypto("the new passphrase is empty".into()));
        }
        let dek = self.tx().dek()?;
        let enc = self
            .repo
            .manifest
            .encryption
            .as_mut()
            .ok_or_else(not_initialized)?;
        let params = match (params, enc.kek_slots.get(PASSPHRASE_SLOT)) {
            (Some(p), _) => p,
            (None, Some(s)) => KdfParams::from_slot(PASSPHRASE_SLOT, s)?,
            (None, None) => KdfParams::DEFAULT,
        };
        let slot = crypto::passphrase_slot(new, params, &dek)?;
        enc.kek_slots.insert(PASSPHRASE_SLOT.into(), slot);
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        self.work.keys.passphrase = Some(zeroize::Zeroizing::new(new.to_owned()));
        Ok(())
    }

    /// Replaces the data key: every encrypted entry is re-encrypted under a
    /// new key and every slot re-wrapped (the passphrase slot with the same
    /// passphrase and a new salt). The old key is kept wrapped under the new
    /// one so older snapshots stay readable. Slots this sgard cannot re-wrap
    /// (FIDO2) are dropped only if `prompt` agrees; otherwise nothing changes.
    ///
    /// # Errors
    /// [`Error::Crypto`] (wrong passphrase, refused), store errors. Nothing is
    /// saved unless everything was re-encrypted.
    pub fn rotate_dek(&mut self, prompt: &mut dyn Prompt) -> Result<RotateReport> {
        self.require_exclusive("encrypt rotate-dek")?;
        let old = self.tx().dek()?;
        let pass = self.tx().passphrase()?;
        let enc = self
            .repo
            .manifest
            .encryption
            .clone()
            .ok_or_else(not_initialized)?;
        let mut report = RotateReport::default();
        let foreign: Vec<String> = enc
            .kek_slots
            .iter()
            .filter(|(_, s)| s.kind != "passphrase")
            .map(|(n, _)| n.clone())
            .collect();
        for name in &foreign {
            let q = format!(
                "Key slot {name:?} cannot be re-wrapped by this sgard (no FIDO2 support); \
                 continuing drops it. Continue?"
            );
            if !prompt.confirm(&q) {
                return Err(Error::Crypto(format!(
                    "rotation cancelled: key slot {name:?} would be dropped; nothing changed"
                )));
            }
        }
        let new = crypto::Dek::generate()?;
        // The chain: every line that opens a retired key stays as it is, and
        // one new line seals the outgoing key under the new one.
        let mut chain: Vec<String> = self
            .tx()
            .retired_keys_sealed(&old)
            .into_iter()
            .map(|(_, line)| line)
            .collect();
        // Re-encrypt into a copy; the manifest changes only if all succeed.
        let mut files = self.repo.manifest.files.clone();
        for e in files.iter_mut().filter(|e| e.encrypted) {
            let plain = self.tx().stored_plaintext(e)?;
            let blob = new.seal(&plain)?;
            let w = if e.template {
                self.tx().put_source(&blob)?
            } else {
                self.repo.store.write_bytes(&blob)?
            };
            self.work
                .fingerprints
                .insert(w.hash, sgard_store::Hash::of(&plain));
            e.hash = Some(w.hash);
            e.plaintext_mac = Some(new.mac(&plain));
            e.plaintext_hash = None;
            report.reencrypted.push(e.path.clone());
        }
        let mut new_enc = enc.clone();
        for name in &foreign {
            new_enc.kek_slots.remove(name);
            report.dropped.push(name.clone());
        }
        for (name, slot) in new_enc.kek_slots.iter_mut() {
            let params = KdfParams::from_slot(name, slot)?;
            *slot = crypto::passphrase_slot(&pass, params, &new)?;
            report.rewrapped.push(name.clone());
        }
        chain.extend(crypto::wrap_retired(&new, std::slice::from_ref(&old))?);
        new_enc.retired_deks = chain;
        self.repo.manifest.files = files;
        self.repo.manifest.encryption = Some(new_enc);
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        self.work.keys.dek = Some(new);
        Ok(report)
    }
}

impl Tx<'_> {
    pub(crate) fn verify_passphrase(&mut self) -> Result<()> {
        self.dek().map(|_| ())
    }
}
