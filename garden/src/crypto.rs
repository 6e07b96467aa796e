//! Per-file encryption, in the Go sgard's formats.
//!
//! - A random 32-byte data key (DEK) encrypts each blob with
//!   XChaCha20-Poly1305: `nonce(24) ‖ ciphertext ‖ tag(16)`, a fresh random
//!   nonce per blob, no associated data.
//! - Each key slot in the manifest's `encryption.kek_slots` holds the DEK
//!   wrapped the same way by a key-encryption key (KEK). The `passphrase`
//!   slot derives its KEK with Argon2id from the slot's salt and parameters.
//! - Instead of the Go tool's unkeyed `plaintext_hash` (which lets anyone
//!   with the repository confirm a guess of a short secret), sgard records
//!   `plaintext_mac`: HMAC-SHA256 of the plaintext under a key derived from
//!   the DEK.
//!
//! Keys live in [`Zeroizing`] buffers and never appear in `Debug` output or
//! errors.

use base64::Engine;
use chacha20poly1305::aead::Aead;
use chacha20poly1305::{KeyInit, XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use sgard_manifest::{Encryption, KekSlot};
use sgard_store::Hash;
use zeroize::Zeroizing;

use crate::{Error, Result};

/// The manifest's name for the cipher.
pub const ALGORITHM: &str = "xchacha20-poly1305";
/// The name of the passphrase slot.
pub const PASSPHRASE_SLOT: &str = "passphrase";
/// Bytes the envelope adds to a plaintext (nonce + tag).
pub const OVERHEAD: usize = 24 + 16;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A data key. Not `Debug`, not `Clone` by accident: cloning is explicit.
pub struct Dek(Zeroizing<[u8; 32]>);

impl Dek {
    /// A fresh random key.
    ///
    /// # Errors
    /// [`Error::Crypto`] when the OS has no randomness to give.
    pub fn generate() -> Result<Self> {
        Ok(Dek(Zeroizing::new(random()?)))
    }

    /// A key from its bytes (unwrapped from a key slot).
    pub(crate) fn from_bytes(bytes: [u8; 32]) -> Self {
        Dek(Zeroizing::new(bytes))
    }

    /// The raw bytes (for wrapping).
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A copy of this key.
    pub fn duplicate(&self) -> Self {
        Dek(Zeroizing::new(*self.0))
    }

    /// Encrypts a blob.
    ///
    /// # Errors
    /// [`Error::Crypto`] without randomness.
    pub fn seal(&self, plaintext: &[u8]) -> Result<Vec<u8>> {
        seal(&self.0, plaintext)
    }

    /// Decrypts a blob, checking its tag.
    ///
    /// # Errors
    /// [`Error::Crypto`] when the blob was not made with this key or was altered.
    pub fn open(&self, blob: &[u8]) -> Result<Zeroizing<Vec<u8>>> {
        open(&self.0, blob).ok_or_else(|| {
            Error::Crypto("cannot decrypt: wrong key, or the data was altered".into())
        })
    }

    /// The keyed fingerprint of a plaintext (`plaintext_mac`).
    pub fn mac(&self, plaintext: &[u8]) -> Hash {
        let mut k = hmac(&self.0[..], b"sgard plaintext mac v1");
        let key = Zeroizing::new(std::mem::take(&mut k));
        Hash::from_bytes(hmac(&key[..], plaintext))
    }
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC accepts keys of any length.
    let mut m = <Hmac<sha2::Sha256> as hmac::KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable_hmac());
    m.update(data);
    m.finalize().into_bytes().into()
}

#[cold]
fn unreachable_hmac() -> Hmac<sha2::Sha256> {
    // new_from_slice never fails for HMAC; fall back to an empty key rather
    // than panic.
    <Hmac<sha2::Sha256> as hmac::KeyInit>::new(&Default::default())
}

fn random<const N: usize>() -> Result<[u8; N]> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| Error::Crypto(format!("no randomness available: {e}")))?;
    Ok(b)
}

fn seal(key: &[u8; 32], plaintext: &[u8]) -> Result<Vec<u8>> {
    let nonce: [u8; 24] = random()?;
    let c = XChaCha20Poly1305::new_from_slice(key)
        .map_err(|_| Error::Crypto("bad key length".into()))?;
    let n = XNonce::try_from(&nonce[..]).map_err(|_| Error::Crypto("bad nonce length".into()))?;
    let ct = c
        .encrypt(&n, plaintext)
        .map_err(|_| Error::Crypto("encryption failed".into()))?;
    let mut out = Vec::with_capacity(24 + ct.len());
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ct);
    Ok(out)
}

fn open(key: &[u8; 32], blob: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    if blob.len() < OVERHEAD {
        return None;
    }
    let c = XChaCha20Poly1305::new_from_slice(key).ok()?;
    let n = XNonce::try_from(&blob[..24]).ok()?;
    c.decrypt(&n, &blob[24..]).ok().map(Zeroizing::new)
}

/// Argon2id cost parameters of a passphrase slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KdfParams {
    /// Passes.
    pub time: u32,
    /// Memory in KiB.
    pub memory_kib: u32,
    /// Lanes.
    pub threads: u32,
}

impl KdfParams {
    /// The Go sgard's defaults (t=3, 64 MiB, p=4).
    pub const DEFAULT: KdfParams = KdfParams {
        time: 3,
        memory_kib: 64 * 1024,
        threads: 4,
    };
    /// Tiny parameters, only for tests (through `SGARD_TEST_ARGON2`).
    pub const TEST: KdfParams = KdfParams {
        time: 1,
        memory_kib: 8,
        threads: 1,
    };
    /// The most memory a slot may ask for (1 GiB, 16 times the default): a
    /// hostile manifest cannot make sgard allocate more.
    pub const MAX_MEMORY_KIB: u64 = 1024 * 1024;
    /// The most passes a slot may ask for (about 10 times the default).
    pub const MAX_TIME: u64 = 32;
    /// The most lanes a slot may ask for.
    pub const MAX_THREADS: u64 = 64;

    /// Reads and bounds the parameters stored in a slot.
    ///
    /// # Errors
    /// [`Error::Crypto`] for missing or out-of-bounds values.
    pub fn from_slot(name: &str, s: &KekSlot) -> Result<Self> {
        let bad = |what: &str, v: Option<u64>, max: u64| {
            Error::Crypto(format!(
                "key slot {name:?}: {what} {} is out of bounds (1..={max}); refusing to derive",
                v.map_or_else(|| "missing".into(), |v| v.to_string())
            ))
        };
        let get = |what: &str, v: Option<u64>, max: u64| -> Result<u32> {
            match v {
                Some(x) if (1..=max).contains(&x) => {
                    u32::try_from(x).map_err(|_| bad(what, v, max))
                }
                _ => Err(bad(what, v, max)),
            }
        };
        Ok(KdfParams {
            time: get("argon2_time", s.argon2_time, Self::MAX_TIME)?,
            memory_kib: get("argon2_memory", s.argon2_memory, Self::MAX_MEMORY_KIB)?,
            threads: get("argon2_threads", s.argon2_threads, Self::MAX_THREADS)?,
        })
    }

    fn derive(&self, passphrase: &[u8], salt: &[u8]) -> Result<Zeroizing<[u8; 32]>> {
        let params = argon2::Params::new(self.memory_kib, self.time, self.threads, Some(32))
            .map_err(|e| Error::Crypto(format!("invalid Argon2 parameters: {e}")))?;
        let a = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
        let mut out = Zeroizing::new([0u8; 32]);
        a.hash_password_into(passphrase, salt, &mut out[..])
            .map_err(|e| Error::Crypto(format!("deriving the key: {e}")))?;
        Ok(out)
    }
}

/// A new `encryption` section: a fresh DEK wrapped in a passphrase slot.
///
/// # Errors
/// [`Error::Crypto`].
pub fn new_encryption(passphrase: &str, params: KdfParams) -> Result<(Encryption, Dek)> {
    let dek = Dek::generate()?;
    let mut enc = Encryption {
        algorithm: ALGORITHM.into(),
        ..Encryption::default()
    };
    enc.kek_slots.insert(
        PASSPHRASE_SLOT.into(),
        passphrase_slot(passphrase, params, &dek)?,
    );
    Ok((enc, dek))
}

/// Whether `s` is a passphrase slot.
pub fn is_passphrase_slot(s: &KekSlot) -> bool {
    s.kind == "passphrase"
}

/// A new `encryption` section with no slot yet, and its fresh DEK (the
/// caller adds recipient slots).
///
/// # Errors
/// [`Error::Crypto`] without randomness.
pub fn new_recipients_only() -> Result<(Encryption, Dek)> {
    Ok((
        Encryption {
            algorithm: ALGORITHM.into(),
            ..Encryption::default()
        },
        Dek::generate()?,
    ))
}

/// A passphrase slot wrapping `dek` (fresh salt).
///
/// # Errors
/// [`Error::Crypto`].
pub fn passphrase_slot(passphrase: &str, params: KdfParams, dek: &Dek) -> Result<KekSlot> {
    let salt: [u8; 16] = random()?;
    let kek = params.derive(passphrase.as_bytes(), &salt)?;
    let wrapped = seal(&kek, dek.bytes())?;
    Ok(KekSlot {
        kind: "passphrase".into(),
        argon2_time: Some(u64::from(params.time)),
        argon2_memory: Some(u64::from(params.memory_kib)),
        argon2_threads: Some(u64::from(params.threads)),
        credential_id: None,
        salt: Some(B64.encode(salt)),
        wrapped_dek: Some(B64.encode(wrapped)),
    })
}

/// Unwraps the DEK from the passphrase slot.
///
/// # Errors
/// [`Error::Crypto`] for a missing slot, bounded-out parameters, or a wrong
/// passphrase (which changes nothing).
pub fn unlock(enc: &Encryption, passphrase: &str) -> Result<Dek> {
    if enc.algorithm != ALGORITHM {
        return Err(Error::Crypto(format!(
            "unsupported encryption algorithm {:?}",
            enc.algorithm
        )));
    }
    let (name, slot) = enc
        .kek_slots
        .iter()
        .find(|(_, s)| is_passphrase_slot(s))
        .ok_or_else(|| {
            Error::Crypto(
                "no usable key slot: this repository has no passphrase slot \
                 (FIDO2 slots are not supported by this sgard)"
                    .into(),
            )
        })?;
    let params = KdfParams::from_slot(name, slot)?;
    let field = |v: &Option<String>, what: &str| -> Result<Vec<u8>> {
        let s = v
            .as_deref()
            .ok_or_else(|| Error::Crypto(format!("key slot {name:?} has no {what}")))?;
        B64.decode(s)
            .map_err(|_| Error::Crypto(format!("key slot {name:?}: {what} is not base64")))
    };
    let salt = field(&slot.salt, "salt")?;
    let wrapped = field(&slot.wrapped_dek, "wrapped_dek")?;
    let kek = params.derive(passphrase.as_bytes(), &salt)?;
    let raw = open(&kek, &wrapped)
        .ok_or_else(|| Error::Crypto("wrong passphrase (or a damaged key slot)".into()))?;
    let bytes: [u8; 32] = raw
        .as_slice()
        .try_into()
        .map_err(|_| Error::Crypto(format!("key slot {name:?} holds a key of the wrong size")))?;
    Ok(Dek(Zeroizing::new(bytes)))
}

/// Wraps old data keys under the current one (kept so snapshots taken before
/// a key rotation stay readable).
///
/// # Errors
/// [`Error::Crypto`].
pub fn wrap_retired(current: &Dek, old: &[Dek]) -> Result<Vec<String>> {
    old.iter()
        .map(|k| current.seal(k.bytes()).map(|b| B64.encode(b)))
        .collect()
}

/// Unwraps the retired keys stored under `current` (unreadable ones skipped).
pub fn unwrap_retired(current: &Dek, wrapped: &[String]) -> Vec<Dek> {
    wrapped
        .iter()
        .filter_map(|w| B64.decode(w).ok())
        .filter_map(|b| open(current.bytes(), &b))
        .filter_map(|raw| <[u8; 32]>::try_from(raw.as_slice()).ok())
        .map(|b| Dek(Zeroizing::new(b)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_open_round_trip_and_envelope_size() {
        let k = Dek::generate().unwrap();
        let blob = k.seal(b"secret").unwrap();
        assert_eq!(blob.len(), 6 + OVERHEAD);
        assert_eq!(&k.open(&blob).unwrap()[..], b"secret");
        let other = Dek::generate().unwrap();
        assert!(other.open(&blob).is_err());
        let mut bad = blob.clone();
        bad[30] ^= 1;
        assert!(k.open(&bad).is_err());
        assert!(k.open(&blob[..10]).is_err());
        // Fresh nonce every time.
        assert_ne!(k.seal(b"secret").unwrap(), blob);
    }

    #[test]
    fn passphrase_unlocks_and_wrong_one_does_not() {
        let (enc, dek) = new_encryption("correct horse", KdfParams::TEST).unwrap();
        let back = unlock(&enc, "correct horse").unwrap();
        assert_eq!(back.bytes(), dek.bytes());
        let err = unlock(&enc, "wrong").err().unwrap().to_string();
        assert!(err.contains("wrong passphrase"), "{err}");
    }

    #[test]
    fn hostile_parameters_are_refused_before_allocation() {
        let (mut enc, _) = new_encryption("pw", KdfParams::TEST).unwrap();
        let slot = enc.kek_slots.get_mut(PASSPHRASE_SLOT).unwrap();
        slot.argon2_memory = Some(1 << 40);
        let err = unlock(&enc, "pw").err().unwrap().to_string();
        assert!(err.contains("out of bounds"), "{err}");
    }

    #[test]
    fn mac_is_keyed() {
        let a = Dek::generate().unwrap();
        let b = Dek::generate().unwrap();
        assert_eq!(a.mac(b"x"), a.mac(b"x"));
        assert_ne!(a.mac(b"x"), b.mac(b"x"));
        assert_ne!(a.mac(b"x"), Hash::of(b"x"));
    }
}
