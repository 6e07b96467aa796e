//! The client's half of authentication, wire-compatible with the Go sgard:
//! reading SSH private keys and signing the login challenge
//! ([`sgard_proto::wire::challenge_payload`]) with them. The server's half
//! (authorized keys, tokens) is in `sgard-server`.

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use signature::Signer;
use ssh_encoding::Encode;
use ssh_key::{HashAlg, PrivateKey, Signature};

pub use sgard_proto::wire::{WINDOW_SECS, challenge_payload, unix_now};

/// Signs with a private key; returns the SSH wire-format signature. RSA
/// keys sign `rsa-sha2-512` here: ssh-key 0.6's own RSA conversion builds
/// the key from `p` twice instead of `p` and `q`, and always fails.
pub fn sign_with_key(key: &PrivateKey, payload: &[u8]) -> Result<Vec<u8>> {
    if let ssh_key::private::KeypairData::Rsa(k) = key.key_data() {
        use rsa::signature::{SignatureEncoding, Signer as _};
        let sk = rsa::pkcs1v15::SigningKey::<rsa::sha2::Sha512>::new(rsa_private(k)?);
        let sig = sk
            .try_sign(payload)
            .map_err(|e| anyhow!("signing with the RSA key: {e}"))?;
        let sig = Signature::new(
            ssh_key::Algorithm::Rsa {
                hash: Some(HashAlg::Sha512),
            },
            sig.to_vec(),
        )
        .map_err(|e| anyhow!("encoding the RSA signature: {e}"))?;
        return encode_sig(&sig);
    }
    let sig: Signature = key.try_sign(payload).map_err(|e| anyhow!("signing: {e}"))?;
    encode_sig(&sig)
}

fn big(m: &ssh_key::Mpint) -> Result<rsa::BigUint> {
    m.as_positive_bytes()
        .map(rsa::BigUint::from_bytes_be)
        .ok_or_else(|| anyhow!("malformed RSA key number"))
}

fn mpint(b: &rsa::BigUint) -> Result<ssh_key::Mpint> {
    ssh_key::Mpint::from_positive_bytes(&b.to_bytes_be())
        .map_err(|e| anyhow!("malformed RSA key number: {e}"))
}

/// An SSH RSA keypair as an `rsa` key (checked).
fn rsa_private(k: &ssh_key::private::RsaKeypair) -> Result<rsa::RsaPrivateKey> {
    let key = rsa::RsaPrivateKey::from_components(
        big(&k.public.n)?,
        big(&k.public.e)?,
        big(&k.private.d)?,
        vec![big(&k.private.p)?, big(&k.private.q)?],
    )
    .map_err(|e| anyhow!("unusable RSA key: {e}"))?;
    key.validate()
        .map_err(|e| anyhow!("unusable RSA key: {e}"))?;
    Ok(key)
}

/// An `rsa` private key as an SSH one.
fn ssh_rsa(key: &rsa::RsaPrivateKey) -> Result<PrivateKey> {
    use rsa::traits::{PrivateKeyParts, PublicKeyParts};
    let primes = key.primes();
    let (Some(p), Some(q)) = (primes.first(), primes.get(1)) else {
        bail!("RSA keys with more than two primes are not supported");
    };
    let iqmp = key
        .crt_coefficient()
        .ok_or_else(|| anyhow!("RSA key without a CRT coefficient"))?;
    let kp = ssh_key::private::RsaKeypair {
        public: ssh_key::public::RsaPublicKey {
            e: mpint(key.e())?,
            n: mpint(key.n())?,
        },
        private: ssh_key::private::RsaPrivateKey {
            d: mpint(key.d())?,
            iqmp: mpint(&iqmp)?,
            p: mpint(p)?,
            q: mpint(q)?,
        },
    };
    PrivateKey::new(ssh_key::private::KeypairData::Rsa(kp), "").map_err(|e| anyhow!("RSA key: {e}"))
}

/// The SSH wire form of a signature.
pub fn encode_sig(sig: &Signature) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    sig.encode(&mut out)
        .map_err(|e| anyhow!("encoding signature: {e}"))?;
    Ok(out)
}

/// Reads an unencrypted private key: OpenSSH format (any key type), or an
/// RSA key in PEM (PKCS#1 `BEGIN RSA PRIVATE KEY`, or PKCS#8 `BEGIN
/// PRIVATE KEY`, as `ssh-keygen -m PEM` writes).
pub fn read_private_key(path: &Path) -> Result<PrivateKey> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading SSH key {}", path.display()))?;
    if text.contains("ENCRYPTED") && !text.contains("BEGIN OPENSSH PRIVATE KEY") {
        bail!(
            "{} is passphrase-protected: load it into ssh-agent (ssh-add) instead",
            path.display()
        );
    }
    let pem = if text.contains("BEGIN RSA PRIVATE KEY") {
        use rsa::pkcs1::DecodeRsaPrivateKey;
        Some(rsa::RsaPrivateKey::from_pkcs1_pem(&text).map_err(|e| anyhow!("{e}")))
    } else if text.contains("BEGIN PRIVATE KEY") {
        use rsa::pkcs8::DecodePrivateKey;
        Some(rsa::RsaPrivateKey::from_pkcs8_pem(&text).map_err(|e| {
            anyhow!("{e} (of PEM keys, only RSA ones are read; convert others with ssh-keygen)")
        }))
    } else {
        None
    };
    if let Some(k) = pem {
        let k = k.with_context(|| format!("reading SSH key {}", path.display()))?;
        return ssh_rsa(&k).with_context(|| format!("reading SSH key {}", path.display()));
    }
    let k = PrivateKey::from_openssh(&text)
        .with_context(|| format!("reading SSH key {}", path.display()))?;
    if k.is_encrypted() {
        bail!(
            "{} is passphrase-protected: load it into ssh-agent (ssh-add) instead",
            path.display()
        );
    }
    Ok(k)
}
