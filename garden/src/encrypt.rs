//! `encrypt init|list-slots|remove-slot|change-passphrase|rotate-dek`.

use crate::Tx;
use crate::crypto::{self, KdfParams, PASSPHRASE_SLOT};
use crate::encrypted::not_initialized;
use crate::recipients::{self, Recipient, RecipientSlot};
use crate::{Error, Garden, Prompt, Result};

/// What [`Garden::add_recipients`] did with one recipient.
#[derive(Debug)]
pub struct AddedRecipient {
    /// The slot that holds it.
    pub slot: String,
    /// The recipient.
    pub recipient: Recipient,
    /// `false`: it was a recipient already (in `slot`); nothing changed.
    pub new: bool,
}

/// The slot name for `r`: `age/<label>`, the label from `label`, else the
/// key's comment, else the start of its fingerprint; made unique among
/// `taken` with `-2`, `-3`, ….
fn slot_name(r: &Recipient, label: Option<&str>, taken: &dyn Fn(&str) -> bool) -> String {
    let base = match (label, &r.comment) {
        (Some(l), _) => recipients::clean_label(l),
        (None, Some(c)) => recipients::clean_label(c),
        (None, None) => {
            let fp = r.fingerprint();
            let short: String = match r.kind {
                recipients::KeyType::X25519 => fp.chars().take(12).collect(),
                _ => format!(
                    "{}-{}",
                    r.kind,
                    fp.trim_start_matches("SHA256:")
                        .chars()
                        .filter(char::is_ascii_alphanumeric)
                        .take(8)
                        .collect::<String>()
                ),
            };
            recipients::clean_label(&short)
        }
    };
    let mut name = format!("{}{base}", recipients::SLOT_PREFIX);
    let mut n = 2;
    while taken(&name) {
        name = format!("{}{base}-{n}", recipients::SLOT_PREFIX);
        n += 1;
    }
    name
}

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
        self.tx().remember_key(&dek);
        self.work.keys.dek = Some(dek);
        Ok(())
    }

    /// Sets up encryption with a new data key wrapped to `recipients` (one
    /// slot each) and, when `passphrase` is given, in a passphrase slot
    /// too. At least one of them is needed.
    ///
    /// # Errors
    /// [`Error::Crypto`] when encryption is already set up, nothing would
    /// open the key, or the key cannot be made.
    pub fn encrypt_init_with(
        &mut self,
        recipients: &[Recipient],
        label: Option<&str>,
        passphrase: Option<(&str, KdfParams)>,
    ) -> Result<Vec<AddedRecipient>> {
        self.require_exclusive("encrypt init")?;
        if self.repo.manifest.encryption.is_some() {
            return Err(Error::Crypto("encryption is already initialized".into()));
        }
        if recipients.is_empty() && passphrase.is_none() {
            return Err(Error::Crypto(
                "neither a recipient nor a passphrase: nothing would open the data key".into(),
            ));
        }
        let (mut enc, dek) = match passphrase {
            Some(("", _)) => {
                return Err(Error::Crypto("the passphrase is empty".into()));
            }
            Some((p, params)) => crypto::new_encryption(p, params)?,
            None => crypto::new_recipients_only()?,
        };
        let added = add_slots(&mut enc, &dek, recipients, label)?;
        self.repo.manifest.encryption = Some(enc);
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        self.tx().remember_key(&dek);
        self.work.keys.dek = Some(dek);
        Ok(added)
    }

    /// Wraps the data key (unlocked first) to each of `recipients` in a
    /// slot of its own; one that is a recipient already is left as it is.
    ///
    /// # Errors
    /// [`Error::NoEncryption`], unlocking errors, [`Error::Crypto`].
    pub fn add_recipients(
        &mut self,
        recipients: &[Recipient],
        label: Option<&str>,
    ) -> Result<Vec<AddedRecipient>> {
        self.require_exclusive("encrypt add-recipient")?;
        if self.repo.manifest.encryption.is_none() {
            return Err(not_initialized());
        }
        let dek = self.tx().dek()?;
        let mut enc = self.repo.encryption()?.clone();
        let added = add_slots(&mut enc, &dek, recipients, label)?;
        if added.iter().any(|a| a.new) {
            self.repo.manifest.encryption = Some(enc);
            self.repo.manifest.updated = self.repo.env.now;
            self.save()?;
        }
        Ok(added)
    }

    /// The recipient slots.
    pub fn recipient_slots(&self) -> Vec<RecipientSlot> {
        self.repo
            .manifest
            .encryption
            .as_ref()
            .map(recipients::slots)
            .unwrap_or_default()
    }

    /// Removes the recipient slot `which` names: the slot's name (with or
    /// without `age/`), the key, or its fingerprint. Never the last slot.
    ///
    /// # Errors
    /// [`Error::Crypto`] for no such recipient, one that matches several
    /// slots, or the last slot.
    pub fn remove_recipient(&mut self, which: &str) -> Result<RecipientSlot> {
        self.require_exclusive("encrypt remove-recipient")?;
        let enc = self.repo.encryption()?;
        let key = Recipient::parse(which).ok().map(|r| r.canonical);
        let found: Vec<RecipientSlot> = recipients::slots(enc)
            .into_iter()
            .filter(|s| {
                s.slot == which
                    || s.label == which
                    || s.recipient.as_ref().is_some_and(|r| {
                        Some(&r.canonical) == key.as_ref() || r.fingerprint() == which
                    })
            })
            .collect();
        let slot = match found.len() {
            0 => {
                return Err(Error::Crypto(format!(
                    "no recipient {:?}",
                    recipients::shorten(which)
                )));
            }
            1 => found
                .into_iter()
                .next()
                .ok_or_else(|| Error::Crypto(String::new()))?,
            n => {
                return Err(Error::Crypto(format!(
                    "{which:?} names {n} recipient slots; give the slot's name"
                )));
            }
        };
        // Never the last slot this sgard can open (a FIDO2 slot or one it
        // cannot read does not count).
        let usable_left = enc.kek_slots.iter().any(|(n, s)| {
            *n != slot.slot && (crypto::is_passphrase_slot(s) || rewrappable_recipient(s))
        });
        if !usable_left {
            return Err(Error::Crypto(format!(
                "{:?} is the only key slot this sgard can open; removing it would lock the \
                 data away",
                slot.slot
            )));
        }
        if let Some(e) = self.repo.manifest.encryption.as_mut() {
            e.kek_slots.remove(&slot.slot);
        }
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        Ok(slot)
    }

    /// The identity file that unlocked the data key in this command, if
    /// one did (rather than the passphrase).
    pub fn unlocked_by(&self) -> Option<&std::path::Path> {
        self.work.keys.opened_by.as_deref()
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
        let enc = self.repo.encryption_mut()?;
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
        let enc = self.repo.encryption_mut()?;
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
        let has_passphrase_slot = self
            .repo
            .encryption()?
            .kek_slots
            .values()
            .any(crypto::is_passphrase_slot);
        // The passphrase slot is re-wrapped with the passphrase given now:
        // it must be the one that opens it (a key may have unlocked the
        // data key, and a typo here would lock every passphrase user out).
        let pass = if has_passphrase_slot {
            let p = self.tx().passphrase()?;
            let enc = self.repo.encryption()?;
            let opened = crypto::unlock(enc, &p)?;
            if opened.bytes() != old.bytes() {
                return Err(Error::Crypto(
                    "the passphrase slot holds another data key than the one unlocked; \
                     nothing changed"
                        .into(),
                ));
            }
            Some(p)
        } else {
            None
        };
        let enc = self.repo.encryption()?.clone();
        let mut report = RotateReport::default();
        let foreign: Vec<String> = enc
            .kek_slots
            .iter()
            .filter(|(_, s)| s.kind != "passphrase" && !rewrappable_recipient(s))
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
            e.plaintext_mac = Some(Box::new(new.mac(&plain)));
            e.plaintext_hash = None;
            report.reencrypted.push(e.path.clone());
        }
        let mut new_enc = enc.clone();
        for name in &foreign {
            new_enc.kek_slots.remove(name);
            report.dropped.push(name.clone());
        }
        for (name, slot) in new_enc.kek_slots.iter_mut() {
            if slot.kind == recipients::SLOT_KIND {
                let r = Recipient::parse(slot.credential_id.as_deref().unwrap_or_default())?;
                *slot = r.slot(&new)?;
            } else {
                let params = KdfParams::from_slot(name, slot)?;
                let pass = pass.as_ref().ok_or_else(|| {
                    Error::Crypto(format!("key slot {name:?} needs the passphrase"))
                })?;
                *slot = crypto::passphrase_slot(pass, params, &new)?;
            }
            report.rewrapped.push(name.clone());
        }
        chain.extend(crypto::wrap_retired(&new, std::slice::from_ref(&old))?);
        new_enc.retired_deks = chain;
        self.repo.manifest.files = files;
        self.repo.manifest.encryption = Some(new_enc);
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        self.tx().remember_key(&new);
        self.work.keys.dek = Some(new);
        Ok(report)
    }
}

/// Whether `s` is a recipient slot this sgard can wrap a new key to.
fn rewrappable_recipient(s: &sgard_manifest::KekSlot) -> bool {
    s.kind == recipients::SLOT_KIND
        && s.credential_id
            .as_deref()
            .is_some_and(|c| Recipient::parse(c).is_ok())
}

/// Adds a slot per recipient to `enc` (none for one already there).
fn add_slots(
    enc: &mut sgard_manifest::Encryption,
    dek: &crypto::Dek,
    recipients: &[Recipient],
    label: Option<&str>,
) -> Result<Vec<AddedRecipient>> {
    let mut out = Vec::new();
    for r in recipients {
        let existing = recipients::slots(enc).into_iter().find(|s| {
            s.recipient
                .as_ref()
                .is_some_and(|k| k.canonical == r.canonical)
        });
        if let Some(s) = existing {
            out.push(AddedRecipient {
                slot: s.slot,
                recipient: r.clone(),
                new: false,
            });
            continue;
        }
        let name = slot_name(r, label, &|n| enc.kek_slots.contains_key(n));
        enc.kek_slots.insert(name.clone(), r.slot(dek)?);
        out.push(AddedRecipient {
            slot: name,
            recipient: r.clone(),
            new: true,
        });
    }
    Ok(out)
}

impl Tx<'_> {
    pub(crate) fn verify_passphrase(&mut self) -> Result<()> {
        self.dek().map(|_| ())
    }
}
