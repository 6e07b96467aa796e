//! Machine keys as key slots: the data key wrapped to age recipients.
//!
//! A recipient slot is named `age/<label>` and holds `type: age`, the
//! recipient's public key in `credential_id` (`age1…`, or `ssh-ed25519 …` /
//! `ssh-rsa …` without its comment) and in `wrapped_dek` the data key as a
//! binary age file (base64) encrypted to that one recipient: the format
//! `age` and `rage` read, so `age -d -i ~/.ssh/id_ed25519` opens it too.
//! These are fields the Go sgard keeps when it writes the manifest; it
//! cannot use such a slot (it unlocks with its passphrase slot).
//!
//! Unlocking tries this machine's identities in a fixed order (see
//! [`candidates`]) and uses one only when a slot names its public key, so an
//! SSH key whose passphrase would have to be asked is asked for only when
//! it can open the repository.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use age::secrecy::SecretString;
use base64::Engine;
use sgard_manifest::{Encryption, KekSlot};
use zeroize::Zeroizing;

use crate::crypto::Dek;
use crate::{Error, Result};

/// The `type` of a recipient slot.
pub const SLOT_KIND: &str = "age";
/// The prefix of a recipient slot's name.
pub const SLOT_PREFIX: &str = "age/";

/// The largest identity or recipients file read (an age identity file is
/// a few lines; an SSH private key a few KiB).
const MAX_KEY_FILE: u64 = 1 << 20;
/// The largest `wrapped_dek` of a recipient slot decoded (one RSA-4096
/// stanza is under 1 KiB): a hostile manifest cannot make sgard decode more.
const MAX_WRAPPED: usize = 64 << 10;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The kind of a recipient's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    /// An age X25519 key (`age1…`).
    X25519,
    /// An `ssh-ed25519` key.
    SshEd25519,
    /// An `ssh-rsa` key.
    SshRsa,
}

impl std::fmt::Display for KeyType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KeyType::X25519 => "x25519",
            KeyType::SshEd25519 => "ssh-ed25519",
            KeyType::SshRsa => "ssh-rsa",
        })
    }
}

#[derive(Clone)]
enum Key {
    X25519(age::x25519::Recipient),
    Ssh(age::ssh::Recipient),
}

/// A public key the data key can be wrapped to.
#[derive(Clone)]
pub struct Recipient {
    key: Key,
    /// The key in its one written form (`age1…`, or `ssh-… BASE64`).
    pub canonical: String,
    /// The kind of key.
    pub kind: KeyType,
    /// An SSH key's comment (`alice@laptop`), if it had one.
    pub comment: Option<String>,
}

impl std::fmt::Debug for Recipient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recipient")
            .field("canonical", &self.canonical)
            .field("comment", &self.comment)
            .finish()
    }
}

impl Recipient {
    /// Parses one recipient: `age1…`, or an OpenSSH public key line
    /// (`ssh-ed25519 AAAA… comment`, `ssh-rsa …`).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming what is wrong (an unsupported SSH key type,
    /// an RSA key under 2048 bits, or not a key at all).
    pub fn parse(text: &str) -> Result<Recipient> {
        let text = text.trim();
        let mut words = text.split_whitespace();
        let first = words.next().unwrap_or("");
        if first.starts_with("age1") {
            let r = age::x25519::Recipient::from_str(first)
                .map_err(|e| Error::Invalid(format!("{first:?} is not an age recipient: {e}")))?;
            if words.next().is_some() {
                return Err(Error::Invalid(format!(
                    "{text:?}: an age recipient is one word"
                )));
            }
            return Ok(Recipient {
                canonical: r.to_string(),
                key: Key::X25519(r),
                kind: KeyType::X25519,
                comment: None,
            });
        }
        let Some(body) = words.next() else {
            return Err(Error::Invalid(format!(
                "{:?} is neither an age recipient (age1…) nor an SSH public key \
                 (ssh-ed25519 …, ssh-rsa …)",
                shorten(text)
            )));
        };
        let rest: Vec<&str> = words.collect();
        let comment = (!rest.is_empty()).then(|| rest.join(" "));
        let line = format!("{first} {body}");
        let r = age::ssh::Recipient::from_str(&line).map_err(|e| {
            use age::ssh::ParseRecipientKeyError as P;
            Error::Invalid(match e {
                P::Unsupported(t) => format!(
                    "SSH keys of type {t:?} cannot be recipients (ssh-ed25519 and ssh-rsa can)"
                ),
                P::RsaModulusTooSmall => {
                    "the ssh-rsa key is under 2048 bits, too weak to be a recipient".into()
                }
                P::RsaModulusTooLarge => "the ssh-rsa key is too large to be a recipient".into(),
                _ => format!(
                    "{:?} is neither an age recipient (age1…) nor an SSH public key \
                     (ssh-ed25519 …, ssh-rsa …)",
                    shorten(text)
                ),
            })
        })?;
        let kind = match &r {
            age::ssh::Recipient::SshRsa(..) => KeyType::SshRsa,
            age::ssh::Recipient::SshEd25519(..) => KeyType::SshEd25519,
        };
        Ok(Recipient {
            canonical: r.to_string(),
            key: Key::Ssh(r),
            kind,
            comment,
        })
    }

    /// The recipients an argument names: a key itself, or a file of them
    /// (one per line, `#` comments and blank lines skipped), as age's `-R`
    /// reads; a relative path is taken from `cwd`, and a leading `~/` means
    /// `home`.
    ///
    /// # Errors
    /// [`Error::Invalid`] for an argument that is neither, a file with no
    /// recipient or with a line that is not one (naming the line);
    /// [`Error::Io`] for a file that cannot be read.
    pub fn from_arg(arg: &str, cwd: &Path, home: &Path) -> Result<Vec<Recipient>> {
        if looks_private(arg) {
            return Err(Error::Invalid(
                "that is a private key; give the public key (its .pub file, or the age1… line \
                 `age-keygen -y` prints)"
                    .into(),
            ));
        }
        let looks_like_key = arg.starts_with("age1") || arg.starts_with("ssh-");
        if looks_like_key {
            return Recipient::parse(arg).map(|r| vec![r]);
        }
        let path = match arg.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => cwd.join(arg),
        };
        let text = match read_key_file(&path) {
            Ok(t) => t,
            Err(Error::Io { source, .. })
                if matches!(
                    source.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::InvalidFilename
                ) =>
            {
                return Err(Error::Invalid(format!(
                    "{:?} is neither an age recipient (age1…), an SSH public key, nor a \
                     file of them",
                    shorten(arg)
                )));
            }
            Err(e) => return Err(e),
        };
        if looks_private(&text) {
            return Err(Error::Invalid(format!(
                "{} holds a private key; give the public key (its .pub file, or the age1… \
                 line `age-keygen -y` prints)",
                path.display()
            )));
        }
        let mut out = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            out.push(
                Recipient::parse(line).map_err(|e| {
                    Error::Invalid(format!("{} line {}: {e}", path.display(), n + 1))
                })?,
            );
        }
        if out.is_empty() {
            return Err(Error::Invalid(format!(
                "{} holds no recipient",
                path.display()
            )));
        }
        Ok(out)
    }

    /// How people recognise the key: `SHA256:…` (as `ssh-keygen -l` prints)
    /// for an SSH key, the `age1…` string itself for an age key.
    pub fn fingerprint(&self) -> String {
        match &self.key {
            Key::X25519(_) => self.canonical.clone(),
            Key::Ssh(_) => ssh_fingerprint(&self.canonical),
        }
    }

    /// The data key as an age file to this recipient (base64).
    ///
    /// # Errors
    /// [`Error::Crypto`] when age cannot encrypt.
    pub(crate) fn wrap(&self, dek: &Dek) -> Result<String> {
        let r: &dyn age::Recipient = match &self.key {
            Key::X25519(r) => r,
            Key::Ssh(r) => r,
        };
        let enc = age::Encryptor::with_recipients(std::iter::once(r))
            .map_err(|e| Error::Crypto(format!("wrapping the data key: {e}")))?;
        let mut out = Vec::with_capacity(256);
        let mut w = enc
            .wrap_output(&mut out)
            .map_err(|e| Error::Crypto(format!("wrapping the data key: {e}")))?;
        io::Write::write_all(&mut w, dek.bytes())
            .and_then(|()| w.finish().map(|_| ()))
            .map_err(|e| Error::Crypto(format!("wrapping the data key: {e}")))?;
        Ok(B64.encode(out))
    }

    /// A key slot holding `dek` wrapped to this recipient.
    ///
    /// # Errors
    /// As [`Recipient::wrap`].
    pub(crate) fn slot(&self, dek: &Dek) -> Result<KekSlot> {
        Ok(KekSlot {
            kind: SLOT_KIND.into(),
            argon2_time: None,
            argon2_memory: None,
            argon2_threads: None,
            credential_id: Some(self.canonical.clone()),
            salt: None,
            wrapped_dek: Some(self.wrap(dek)?),
        })
    }
}

/// Whether `text` holds a private key (an age identity, a PEM or OpenSSH
/// private key block).
pub fn looks_private(text: &str) -> bool {
    text.contains("PRIVATE KEY") || text.contains("AGE-SECRET-KEY-")
}

/// The start of `s`, for an error (never a whole pasted key).
pub fn shorten(s: &str) -> String {
    let mut t: String = s.chars().take(40).collect();
    if t.len() < s.len() {
        t.push('…');
    }
    t
}

/// `SHA256:<base64, no padding>` of an SSH public key line's key blob.
fn ssh_fingerprint(canonical: &str) -> String {
    use sha2::Digest;
    let blob = canonical
        .split_whitespace()
        .nth(1)
        .and_then(|b| B64.decode(b).ok())
        .unwrap_or_default();
    let digest = sha2::Sha256::digest(&blob);
    format!(
        "SHA256:{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest)
    )
}

/// A recipient slot, as `encrypt list-recipients` shows it.
#[derive(Clone, Debug)]
pub struct RecipientSlot {
    /// The slot's name (`age/<label>`).
    pub slot: String,
    /// The label (the name without `age/`).
    pub label: String,
    /// The key (`None`: the slot's `credential_id` is not one this sgard
    /// reads; the slot is kept as it is).
    pub recipient: Option<Recipient>,
}

/// The recipient slots of `enc`, sorted by name.
pub fn slots(enc: &Encryption) -> Vec<RecipientSlot> {
    enc.kek_slots
        .iter()
        .filter(|(_, s)| s.kind == SLOT_KIND)
        .map(|(name, s)| RecipientSlot {
            slot: name.clone(),
            label: name.strip_prefix(SLOT_PREFIX).unwrap_or(name).to_owned(),
            recipient: s
                .credential_id
                .as_deref()
                .and_then(|c| Recipient::parse(c).ok()),
        })
        .collect()
}

/// A slot label made of `wanted` (a key's comment, a `--label`, a host
/// name): letters, digits and `._@-`, anything else a `-`, at most 64
/// characters; never empty.
pub fn clean_label(wanted: &str) -> String {
    let l: String = wanted
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    let l = l.trim_matches('-').to_owned();
    if l.is_empty() { "key".into() } else { l }
}

/// Where this machine's identities are looked for, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The file.
    pub path: PathBuf,
    /// Named by the user (`--identity`, `SGARD_IDENTITY`): a missing or
    /// unreadable one is an error, not passed over.
    pub explicit: bool,
}

/// The file of age identities sgard looks for in its configuration folder
/// (`encrypt keygen` writes it).
pub const IDENTITY_FILE: &str = "keys.txt";

/// The identities to try, in order: `explicit` (from `--identity` and
/// `SGARD_IDENTITY`), then `<config>/keys.txt`, then `~/.ssh/id_ed25519` and
/// `~/.ssh/id_rsa`.
pub fn candidates(explicit: &[PathBuf], config_dir: Option<&Path>, home: &Path) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = explicit
        .iter()
        .map(|p| Candidate {
            path: p.clone(),
            explicit: true,
        })
        .collect();
    let defaults = config_dir
        .map(|c| c.join(IDENTITY_FILE))
        .into_iter()
        .chain(["id_ed25519", "id_rsa"].map(|k| home.join(".ssh").join(k)));
    for path in defaults {
        if !out.iter().any(|c| c.path == path) {
            out.push(Candidate {
                path,
                explicit: false,
            });
        }
    }
    out
}

/// Writes a new age identity to `path` (mode 0600, in a folder made 0700
/// if missing), in `age-keygen`'s layout; returns its recipient. An
/// existing file is kept unless `force`.
///
/// # Errors
/// [`Error::Invalid`] when the file exists and not `force`;
/// [`Error::Io`] / store errors when it cannot be written.
pub fn keygen(path: &Path, force: bool, now: sgard_manifest::Timestamp) -> Result<String> {
    if !force && std::fs::symlink_metadata(path).is_ok() {
        return Err(Error::Invalid(format!(
            "{} exists already: it may be the only key that opens a repository; \
             keep it (its recipient is on its `# public key:` line)",
            path.display()
        )));
    }
    if let Some(dir) = path.parent() {
        let made = sgard_store::durable::create_dir_all_durable(dir)?;
        if made {
            crate::platform::set_path_mode(dir, 0o700)
                .map_err(|e| Error::io("setting the mode of", dir, e))?;
        }
    }
    let id = age::x25519::Identity::generate();
    let public = id.to_public().to_string();
    let secret = {
        use age::secrecy::ExposeSecret;
        Zeroizing::new(id.to_string().expose_secret().to_owned())
    };
    let text = Zeroizing::new(format!(
        "# created: {now}\n# public key: {public}\n{}\n",
        secret.as_str()
    ));
    if force {
        sgard_store::durable::write_atomic(path, text.as_bytes(), 0o600)?;
        return Ok(public);
    }
    // A key appearing meanwhile (a second keygen) is never replaced: the
    // new file is written beside it and linked into place, which fails if
    // the name is taken.
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = crate::platform::private(tempfile::Builder::new().prefix(".sgard-keygen-"), 0o600)
        .tempfile_in(dir)
        .map_err(|e| Error::io("creating a file in", dir, e))?;
    {
        use std::io::Write;
        let mut f = tmp.as_file();
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| Error::io("writing", tmp.path(), e))?;
    }
    std::fs::hard_link(tmp.path(), path).map_err(|e| {
        if e.kind() == io::ErrorKind::AlreadyExists {
            Error::Invalid(format!("{} exists already; it was kept", path.display()))
        } else {
            Error::io("writing", path, e)
        }
    })?;
    drop(tmp);
    sgard_store::durable::fsync_dir(dir)?;
    Ok(public)
}

/// Asks for the passphrase of an encrypted SSH key (named by its path);
/// `Err` says why none can be had (no terminal).
pub type KeyPassphraseSource =
    Box<dyn FnMut(&Path) -> std::result::Result<Zeroizing<String>, String> + Send>;

/// Reads a key file, bounded. Symlinks are followed (a key kept elsewhere
/// and linked into `~/.ssh` is common, and a key file is no tracked
/// content); the file itself must be a regular one (a FIFO never blocks).
fn read_key_file(path: &Path) -> Result<Zeroizing<String>> {
    let io_err = |e: io::Error| Error::io("reading", path, e);
    let f = sgard_store::durable::open_regular_file(path).map_err(|e| {
        if e.kind() == io::ErrorKind::InvalidInput {
            Error::Invalid(format!("{} is not a regular file", path.display()))
        } else {
            Error::io("opening", path, e)
        }
    })?;
    let md = f.metadata().map_err(|e| Error::io("inspecting", path, e))?;
    if md.len() > MAX_KEY_FILE {
        return Err(Error::Invalid(format!(
            "{} is over {MAX_KEY_FILE} bytes: not a key file",
            path.display()
        )));
    }
    let mut buf = Zeroizing::new(Vec::new());
    f.take(MAX_KEY_FILE).read_to_end(&mut buf).map_err(io_err)?;
    let text = std::str::from_utf8(&buf)
        .map_err(|_| Error::Invalid(format!("{} is not a text key file", path.display())))?;
    Ok(Zeroizing::new(text.to_owned()))
}

/// One identity read from a file: the public key it answers to, and how to
/// get at its secret.
enum Secret {
    X25519(age::x25519::Identity),
    SshPlain(age::ssh::Identity),
    SshEncrypted(age::ssh::EncryptedKey),
}

/// The identities in one file's text: age identities (`AGE-SECRET-KEY-1…`
/// lines) or one SSH private key. An SSH key type age cannot use is `Ok`
/// with nothing in it and a reason.
fn identities_in(path: &Path, text: &str) -> std::result::Result<Vec<(String, Secret)>, String> {
    if text.contains("AGE-SECRET-KEY-") {
        let mut out = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let id = age::x25519::Identity::from_str(line).map_err(|_| {
                format!("line {} is not an age identity (AGE-SECRET-KEY-1…)", n + 1)
            })?;
            out.push((id.to_public().to_string(), Secret::X25519(id)));
        }
        return Ok(out);
    }
    let id = age::ssh::Identity::from_buffer(
        io::BufReader::new(text.as_bytes()),
        Some(path.display().to_string()),
    )
    .map_err(|_| "not an age identity file nor an SSH private key age can use".to_owned())?;
    let public = age::ssh::Recipient::try_from(id.clone())
        .map(|r| r.to_string())
        .map_err(|e| {
            use age::ssh::ParseRecipientKeyError as P;
            match e {
                P::Unsupported(t) => format!("an SSH key of type {t}, which age cannot use"),
                _ => "an SSH key age cannot use".to_owned(),
            }
        })?;
    let secret = match id {
        age::ssh::Identity::Encrypted(k) => Secret::SshEncrypted(k),
        other => Secret::SshPlain(other),
    };
    Ok(vec![(public, secret)])
}

/// What one of this machine's identity files is to a repository, found
/// without asking for anything (`doctor`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// It is a recipient: the slot that names it, and whether its
    /// passphrase will be asked (an encrypted SSH key).
    Recipient {
        /// The slot.
        slot: String,
        /// An encrypted SSH key.
        encrypted: bool,
    },
    /// A key, but not one of the repository's recipients.
    NotRecipient,
    /// Not a key sgard can use, or unreadable: why.
    Unusable(String),
}

/// What each of `candidates` that exists is to `enc`'s recipient slots,
/// without decrypting or asking anything.
pub fn probe(enc: &Encryption, candidates: &[Candidate]) -> Vec<(PathBuf, Probe)> {
    let wanted: Vec<(String, String)> = slots(enc)
        .into_iter()
        .filter_map(|s| Some((s.slot, s.recipient?.canonical)))
        .collect();
    let mut out = Vec::new();
    for c in candidates {
        let text = match read_key_file(&c.path) {
            Ok(t) => t,
            Err(Error::Io { source, .. })
                if !c.explicit && source.kind() == io::ErrorKind::NotFound =>
            {
                continue;
            }
            Err(e) => {
                out.push((c.path.clone(), Probe::Unusable(e.to_string())));
                continue;
            }
        };
        let found = match identities_in(&c.path, &text) {
            Err(why) => Probe::Unusable(why),
            Ok(ids) => ids
                .iter()
                .find_map(|(public, secret)| {
                    let (slot, _) = wanted.iter().find(|(_, k)| k == public)?;
                    Some(Probe::Recipient {
                        slot: slot.clone(),
                        encrypted: matches!(secret, Secret::SshEncrypted(_)),
                    })
                })
                .unwrap_or(Probe::NotRecipient),
        };
        out.push((c.path.clone(), found));
    }
    out
}

/// What trying this machine's identities found.
#[derive(Default)]
pub struct Attempt {
    /// The data key, when one opened it, and which file did.
    pub opened: Option<(Dek, PathBuf)>,
    /// What each file tried gave (`path: what`), for an error or `doctor`.
    pub tried: Vec<String>,
    /// The passphrase typed for the SSH key that opened it, if it was an
    /// encrypted one (a command that opens the repository again asks once).
    pub typed: Option<(PathBuf, Zeroizing<String>)>,
}

impl std::fmt::Debug for Attempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attempt")
            .field("opened_by", &self.opened.as_ref().map(|(_, p)| p))
            .field("tried", &self.tried)
            .finish()
    }
}

/// Tries `candidates` against the recipient slots of `enc`, in order. An
/// identity is used only when a slot names its public key; an encrypted SSH
/// key's passphrase is asked (`tries` times at most) only then, and a key
/// that cannot be asked for is passed over.
///
/// # Errors
/// [`Error::Io`] / [`Error::Invalid`] for an explicit candidate that is
/// missing or not a key file.
pub(crate) fn unlock(
    enc: &Encryption,
    candidates: &[Candidate],
    mut ask: Option<&mut KeyPassphraseSource>,
    tries: u32,
) -> Result<Attempt> {
    let wanted: Vec<(&String, &KekSlot, String)> = enc
        .kek_slots
        .iter()
        .filter(|(_, s)| s.kind == SLOT_KIND)
        .filter_map(|(n, s)| {
            let c = Recipient::parse(s.credential_id.as_deref()?).ok()?;
            Some((n, s, c.canonical))
        })
        .collect();
    let mut attempt = Attempt::default();
    if wanted.is_empty() {
        return Ok(attempt);
    }
    for c in candidates {
        let shown = c.path.display().to_string();
        let text = match read_key_file(&c.path) {
            Ok(t) => t,
            Err(Error::Io { source, .. })
                if !c.explicit && source.kind() == io::ErrorKind::NotFound =>
            {
                continue;
            }
            Err(e) if c.explicit => return Err(e),
            Err(e) => {
                attempt.tried.push(format!("{shown}: {e}"));
                continue;
            }
        };
        let ids = match identities_in(&c.path, &text) {
            Ok(ids) => ids,
            Err(why) if c.explicit => {
                return Err(Error::Invalid(format!("{shown}: {why}")));
            }
            Err(why) => {
                attempt.tried.push(format!("{shown}: {why}"));
                continue;
            }
        };
        let mut matched = false;
        for (public, secret) in ids {
            let Some((name, slot, _)) = wanted.iter().find(|(_, _, k)| *k == public) else {
                continue;
            };
            matched = true;
            let plain;
            let mut typed = None;
            let identity: &dyn age::Identity = match &secret {
                Secret::X25519(i) => i,
                Secret::SshPlain(i) => i,
                Secret::SshEncrypted(k) => {
                    let Some(ask) = ask.as_deref_mut() else {
                        attempt.tried.push(format!(
                            "{shown}: is encrypted, and its passphrase cannot be asked here"
                        ));
                        continue;
                    };
                    match decrypt_ssh_key(k, ask, &c.path, tries) {
                        Ok((k, pass)) => {
                            typed = Some((c.path.clone(), pass));
                            plain = k;
                            &plain
                        }
                        Err(why) => {
                            attempt.tried.push(format!("{shown}: {why}"));
                            continue;
                        }
                    }
                }
            };
            match open_slot(slot, identity) {
                Ok(dek) => {
                    attempt.opened = Some((dek, c.path.clone()));
                    attempt.typed = typed;
                    return Ok(attempt);
                }
                Err(why) => attempt
                    .tried
                    .push(format!("{shown}: key slot {name:?}: {why}")),
            }
        }
        if !matched {
            attempt
                .tried
                .push(format!("{shown}: not a recipient of this repository"));
        }
    }
    Ok(attempt)
}

fn decrypt_ssh_key(
    k: &age::ssh::EncryptedKey,
    ask: &mut KeyPassphraseSource,
    path: &Path,
    tries: u32,
) -> std::result::Result<(age::ssh::Identity, Zeroizing<String>), String> {
    // Typed on a terminal: three tries, whatever the repository's
    // passphrase source allows.
    for _ in 0..tries.max(3) {
        let pass = ask(path)?;
        match k.decrypt(SecretString::from(pass.to_string())) {
            Ok(k) => return Ok((age::ssh::Identity::from(k), pass)),
            Err(_) => continue,
        }
    }
    Err("wrong passphrase for this SSH key".into())
}

/// The data key in a recipient slot, opened by `identity`.
fn open_slot(slot: &KekSlot, identity: &dyn age::Identity) -> std::result::Result<Dek, String> {
    let text = slot
        .wrapped_dek
        .as_deref()
        .ok_or_else(|| "it has no wrapped_dek".to_owned())?;
    if text.len() > MAX_WRAPPED * 4 / 3 + 4 {
        return Err("its wrapped_dek is far larger than a wrapped key".into());
    }
    let bytes = B64
        .decode(text)
        .map_err(|_| "its wrapped_dek is not base64".to_owned())?;
    let d = age::Decryptor::new_buffered(&bytes[..])
        .map_err(|e| format!("its wrapped_dek is not an age file: {e}"))?;
    let mut r = d
        .decrypt(std::iter::once(identity))
        .map_err(|e| format!("cannot open it: {e}"))?;
    let mut raw = Zeroizing::new(Vec::with_capacity(32));
    (&mut r)
        .take(33)
        .read_to_end(&mut raw)
        .map_err(|e| format!("cannot open it: {e}"))?;
    let bytes: [u8; 32] = raw
        .as_slice()
        .try_into()
        .map_err(|_| "it holds a key of the wrong size".to_owned())?;
    Ok(Dek::from_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x25519_recipients_round_trip_through_a_slot() {
        let id = age::x25519::Identity::generate();
        let r = Recipient::parse(&id.to_public().to_string()).unwrap();
        assert_eq!(r.kind, KeyType::X25519);
        assert_eq!(r.fingerprint(), r.canonical);
        let dek = Dek::generate().unwrap();
        let slot = r.slot(&dek).unwrap();
        let back = open_slot(&slot, &id).unwrap();
        assert_eq!(back.bytes(), dek.bytes());
        let other = age::x25519::Identity::generate();
        assert!(open_slot(&slot, &other).is_err());
    }

    #[test]
    fn bad_recipients_are_named() {
        for bad in [
            "",
            "hello",
            "age1xyz",
            "ssh-dss AAAAB3Nza",
            "ssh-ed25519 !!!",
        ] {
            let e = Recipient::parse(bad).unwrap_err().to_string();
            assert!(!e.is_empty(), "{bad}");
        }
    }

    #[test]
    fn labels_are_cleaned() {
        assert_eq!(clean_label("alice@laptop"), "alice@laptop");
        assert_eq!(clean_label("a b/c"), "a-b-c");
        assert_eq!(clean_label("///"), "key");
    }

    #[test]
    fn hostile_slots_are_refused_without_panic() {
        let id = age::x25519::Identity::generate();
        let mut s = Recipient::parse(&id.to_public().to_string())
            .unwrap()
            .slot(&Dek::generate().unwrap())
            .unwrap();
        for w in ["", "!!!", "AAAA", &"A".repeat(MAX_WRAPPED * 2)] {
            s.wrapped_dek = Some(w.to_owned());
            assert!(open_slot(&s, &id).is_err());
        }
        s.wrapped_dek = None;
        assert!(open_slot(&s, &id).is_err());
    }
}
