//! The signed head statement: what a machine signs when it pushes (the id
//! of the manifest it installs and the digest of every history record
//! pushed with it, in the OpenSSH `SSHSIG` format, namespace `sgard`), what
//! the server checks and keeps with the head, and what a pulling machine
//! verifies before it takes anything.

use std::collections::BTreeSet;

use sgard_manifest::Hash;
use sgard_manifest::history::Record;
use ssh_key::{HashAlg, PublicKey, SshSig};

/// A head statement or its signature that cannot be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadHead(pub String);

type Result<T> = std::result::Result<T, BadHead>;

macro_rules! bad {
    ($($t:tt)*) => { BadHead(format!($($t)*)) };
}

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
    Hash::of(&crate::convert::record_to_proto(r).encode_to_vec())
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
            return Err(bad!("the head statement is too long"));
        }
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err(bad!("not a head statement"));
        }
        let manifest = lines
            .next()
            .and_then(|l| l.strip_prefix("manifest "))
            .and_then(|h| Hash::parse(h).ok())
            .ok_or_else(|| bad!("the head statement names no manifest"))?;
        let mut records = BTreeSet::new();
        for l in lines {
            let d = l
                .strip_prefix("record ")
                .and_then(|h| Hash::parse(h).ok())
                .ok_or_else(|| bad!("a malformed line in the head statement"))?;
            records.insert(d);
        }
        let st = Statement { manifest, records };
        // Only the exact text this code writes: no second reading of it.
        if st.to_text() != text {
            return Err(bad!("the head statement is not in its canonical form"));
        }
        Ok(st)
    }
}

/// Checks `armored` (an SSHSIG) over `statement`'s text: the key that made
/// it, if the signature is good.
pub fn verify(statement: &str, armored: &str) -> Result<PublicKey> {
    let sig = SshSig::from_pem(armored).map_err(|e| bad!("not an SSH signature: {e}"))?;
    if sig.namespace() != NAMESPACE {
        return Err(bad!(
            "the signature is for {:?}, not for sgard heads",
            sig.namespace()
        ));
    }
    let key = PublicKey::from(sig.public_key().clone());
    key.verify(NAMESPACE, statement.as_bytes(), &sig)
        .map_err(|e| bad!("the signature does not verify: {e}"))?;
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
