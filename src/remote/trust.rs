//! Signed heads: what a machine signs when it pushes, and which keys a
//! machine trusts when it pulls.
//!
//! A push carries a *head statement*: the id of the manifest it installs
//! and the digest of every history record pushed with it, signed with the
//! pushing machine's SSH key in the OpenSSH `SSHSIG` format (namespace
//! `sgard`). The server stores both with the head and hands them out with
//! it. A pull checks that a key this machine trusts signed the statement,
//! that the manifest it got is the one signed, and takes only the history
//! records the statement names: a server (or whoever can write its store)
//! cannot make a machine restore what none of the user's machines signed.
//!
//! The keys a machine trusts for a repository are kept in its state for
//! that repository (`trusted-keys`, authorized_keys lines), with a marker
//! (`signed-heads`) once it has seen a signed head there: from then on an
//! unsigned head is refused too.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
pub use sgard_proto::head::{NAMESPACE, Statement, fingerprint, key_name, record_digest, verify};
use sgard_store::durable;
use ssh_key::{HashAlg, PublicKey, SshSig};

use super::client::Signer;

/// Signs `statement` with `signer`: the armored SSHSIG.
pub(super) fn sign(signer: &Signer, statement: &Statement) -> Result<String> {
    sign_text(signer, &statement.to_text())
}

/// Signs `text` (a head or purge statement) as [`sign`] does.
pub(super) fn sign_text(signer: &Signer, text: &str) -> Result<String> {
    let data = SshSig::signed_data(NAMESPACE, HashAlg::Sha512, text.as_bytes())
        .map_err(|e| anyhow!("preparing the head signature: {e}"))?;
    let (line, sig) = signer.sign(&data)?;
    let public = PublicKey::from_openssh(&line).map_err(|e| anyhow!("reading the key: {e}"))?;
    let sig = {
        use ssh_encoding::Decode;
        ssh_key::Signature::decode(&mut sig.as_slice())
            .map_err(|e| anyhow!("reading the signature: {e}"))?
    };
    let sshsig = SshSig::new(public.key_data().clone(), NAMESPACE, HashAlg::Sha512, sig)
        .map_err(|e| anyhow!("making the head signature: {e}"))?;
    sshsig
        .to_pem(ssh_key::LineEnding::LF)
        .map_err(|e| anyhow!("encoding the head signature: {e}"))
}

/// The keys this machine trusts to sign a repository's heads.
pub struct TrustStore {
    file: PathBuf,
    seen: PathBuf,
}

/// The trusted-keys file of a repository's machine-local state.
pub const TRUSTED_KEYS: &str = "trusted-keys";
/// The marker: a signed head was seen here.
const SIGNED_SEEN: &str = "signed-heads";

impl TrustStore {
    /// The store in `state` (this machine's folder for the repository).
    pub fn in_dir(state: &Path) -> TrustStore {
        TrustStore {
            file: state.join(TRUSTED_KEYS),
            seen: state.join(SIGNED_SEEN),
        }
    }

    /// The trusted keys, with their comments (names).
    pub fn keys(&self) -> Result<Vec<PublicKey>> {
        let text = match durable::read_regular_to_string(&self.file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("reading {}", self.file.display())),
        };
        let mut out = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let k = PublicKey::from_openssh(line).map_err(|e| {
                anyhow!(
                    "{} line {}: not an SSH public key: {e}",
                    self.file.display(),
                    n + 1
                )
            })?;
            out.push(k);
        }
        Ok(out)
    }

    /// Whether `key` is trusted.
    pub fn trusts(&self, key: &PublicKey) -> Result<bool> {
        Ok(self.keys()?.iter().any(|k| k.key_data() == key.key_data()))
    }

    /// Trusts `key` (named by its comment); false if it was already. A
    /// key trusted without a name (by an older sgard) takes `key`'s.
    pub fn add(&self, key: &PublicKey) -> Result<bool> {
        let mut keys = self.keys()?;
        if let Some(k) = keys.iter_mut().find(|k| k.key_data() == key.key_data()) {
            if k.comment().is_empty() && !key.comment().is_empty() {
                k.set_comment(key.comment());
                self.write(&keys)?;
            }
            return Ok(false);
        }
        keys.push(key.clone());
        self.write(&keys)?;
        Ok(true)
    }

    /// Stops trusting the keys whose fingerprint or comment is `which`;
    /// the keys removed.
    pub fn remove(&self, which: &str) -> Result<Vec<PublicKey>> {
        let keys = self.keys()?;
        let (gone, kept): (Vec<_>, Vec<_>) = keys
            .into_iter()
            .partition(|k| fingerprint(k) == which || (!which.is_empty() && k.comment() == which));
        if !gone.is_empty() {
            self.write(&kept)?;
        }
        Ok(gone)
    }

    fn write(&self, keys: &[PublicKey]) -> Result<()> {
        let mut text = String::new();
        for k in keys {
            text.push_str(&k.to_openssh().map_err(|e| anyhow!("{e}"))?);
            text.push('\n');
        }
        let dir = durable::parent_of(&self.file);
        durable::create_private_dir_all(&dir)?;
        durable::write_atomic(&self.file, text.as_bytes(), 0o600)
            .with_context(|| format!("writing {}", self.file.display()))?;
        Ok(())
    }

    /// Whether a signed head was seen for this repository here.
    pub fn signed_seen(&self) -> bool {
        self.seen.exists()
    }

    /// Notes that a signed head was seen (from now on, unsigned heads are
    /// refused).
    pub fn note_signed(&self) -> Result<()> {
        if self.signed_seen() {
            return Ok(());
        }
        let dir = durable::parent_of(&self.seen);
        durable::create_private_dir_all(&dir)?;
        durable::write_atomic(
            &self.seen,
            b"a signed head was seen for this repository\n",
            0o600,
        )
        .with_context(|| format!("writing {}", self.seen.display()))?;
        Ok(())
    }
}
