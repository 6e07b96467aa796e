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

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use sgard_manifest::history::Record;
use sgard_store::{Hash, durable};
use ssh_key::{HashAlg, PublicKey, SshSig};

use super::client::Signer;

/// The SSHSIG namespace of head statements.
pub const NAMESPACE: &str = "sgard";

/// The first line of a head statement.
const MAGIC: &str = "sgard head statement v1";

/// The largest statement read (a record digest is a line of 72 bytes).
const MAX_STATEMENT: usize = 64 << 20;

/// What a push signs: the manifest it installs and the history records
/// pushed with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// The manifest's id (the SHA-256 of its rendering).
    pub manifest: Hash,
    /// The digest of each history record (see [`record_digest`]).
    pub records: BTreeSet<Hash>,
}

/// The digest a statement names a history record by: the SHA-256 of its
/// wire encoding (deterministic for one record).
pub fn record_digest(r: &Record) -> Hash {
    use prost::Message;
    Hash::of(&sgard_proto::convert::record_to_proto(r).encode_to_vec())
}

impl Statement {
    /// The statement of `manifest` pushed with `history`.
    pub fn of(manifest: Hash, history: &[Record]) -> Statement {
        Statement {
            manifest,
            records: history.iter().map(record_digest).collect(),
        }
    }

    /// Its text: the magic line, `manifest <id>`, one `record <digest>` line
    /// per record in order.
    pub fn to_text(&self) -> String {
        let mut s = format!("{MAGIC}\nmanifest {}\n", self.manifest.to_hex());
        for r in &self.records {
            s.push_str("record ");
            s.push_str(&r.to_hex());
            s.push('\n');
        }
        s
    }

    /// Reads a statement's text; anything else is refused.
    pub fn parse(text: &str) -> Result<Statement> {
        if text.len() > MAX_STATEMENT {
            bail!("the head statement is too long");
        }
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            bail!("not a head statement");
        }
        let manifest = lines
            .next()
            .and_then(|l| l.strip_prefix("manifest "))
            .and_then(|h| Hash::parse(h).ok())
            .ok_or_else(|| anyhow!("the head statement names no manifest"))?;
        let mut records = BTreeSet::new();
        for l in lines {
            let d = l
                .strip_prefix("record ")
                .and_then(|h| Hash::parse(h).ok())
                .ok_or_else(|| anyhow!("a malformed line in the head statement"))?;
            records.insert(d);
        }
        let st = Statement { manifest, records };
        // Only the exact text this code writes: no second reading of it.
        if st.to_text() != text {
            bail!("the head statement is not in its canonical form");
        }
        Ok(st)
    }
}

/// Signs `statement` with `signer`: the armored SSHSIG.
pub(super) fn sign(signer: &Signer, statement: &Statement) -> Result<String> {
    let text = statement.to_text();
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

/// Checks `armored` (an SSHSIG) over `statement`'s text: the key that made
/// it, if the signature is good.
pub fn verify(statement: &str, armored: &str) -> Result<PublicKey> {
    let sig = SshSig::from_pem(armored).map_err(|e| anyhow!("not an SSH signature: {e}"))?;
    if sig.namespace() != NAMESPACE {
        bail!(
            "the signature is for {:?}, not for sgard heads",
            sig.namespace()
        );
    }
    let key = PublicKey::from(sig.public_key().clone());
    key.verify(NAMESPACE, statement.as_bytes(), &sig)
        .map_err(|e| anyhow!("the signature does not verify: {e}"))?;
    Ok(key)
}

/// A name for a key in the trusted-keys file, made of `text` (a host name
/// or a key's comment, which may come from a server): printable, one line,
/// at most 100 characters.
pub fn key_name(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect::<String>()
        .trim()
        .to_owned()
}

/// A key's SHA-256 fingerprint, as OpenSSH prints it.
pub fn fingerprint(k: &PublicKey) -> String {
    k.fingerprint(HashAlg::Sha256).to_string()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_name_is_one_printable_line() {
        assert_eq!(key_name("laptop"), "laptop");
        assert_eq!(
            key_name("x\nssh-ed25519 AAAA evil\r\u{1b}[31m"),
            "xssh-ed25519 AAAA evil[31m"
        );
        assert_eq!(key_name(&"a".repeat(500)).len(), 100);
        assert_eq!(key_name(" \t "), "");
    }

    #[test]
    fn a_statement_reads_back_only_in_its_own_form() {
        let st = Statement {
            manifest: Hash::of(b"m"),
            records: [Hash::of(b"a"), Hash::of(b"b")].into_iter().collect(),
        };
        let text = st.to_text();
        assert_eq!(Statement::parse(&text).unwrap(), st);
        assert!(Statement::parse(&text.replace("record", "Record")).is_err());
        assert!(Statement::parse(&format!("{text}\n")).is_err());
        assert!(Statement::parse("").is_err());
        let swapped: Vec<&str> = text.lines().collect();
        let mut lines = swapped.clone();
        lines.swap(2, 3);
        assert!(Statement::parse(&(lines.join("\n") + "\n")).is_err());
    }
}
