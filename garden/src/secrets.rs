//! Files that look like secrets. `add` (and `mirror up`) refuse to store a
//! new one in plaintext unless told how (`--encrypt` or `--plaintext`), and
//! `status` and `doctor` flag those already stored in plaintext.
//!
//! The detector is small on purpose (the guide lists it: docs/src/how-to/secrets.md):
//! - a private key, in any file: a PEM or OpenSSH block (a line
//!   `-----BEGIN … PRIVATE KEY-----` or `… PRIVATE KEY BLOCK-----` and its
//!   `-----END` line) or a PuTTY key, in the first [`HEAD`] bytes;
//! - `.aws/credentials` or `.aws/config` setting `aws_secret_access_key` or
//!   `aws_session_token`;
//! - `.netrc` (or `_netrc`) with a `password`;
//! - `.pgpass` with a line whose password field is set;
//! - a kubeconfig (`.kube/config`, `kubeconfig`, `*.kubeconfig`) with a
//!   `token`, `id-token`, `refresh-token`, `client-key-data` or `password`;
//! - `.git-credentials` with a URL that holds a password.

use std::io::Read;
use std::path::Path;

use sgard_manifest::{Entry, EntryKind};
use sgard_store::Store;

/// How much of a file the detector reads.
pub const HEAD: usize = 64 * 1024;

/// What a file that looks like a secret holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Secret {
    /// A PEM, OpenSSH, PGP or PuTTY private key.
    PrivateKey,
    /// AWS secret keys or a session token.
    Aws,
    /// A `.netrc` password.
    Netrc,
    /// A PostgreSQL password file's password.
    Pgpass,
    /// Kubernetes credentials (a token, a client key, a password).
    Kube,
    /// A password in git's credential store.
    GitCredentials,
}

impl Secret {
    /// What it is, for people (`a private key`).
    pub fn describe(self) -> &'static str {
        match self {
            Secret::PrivateKey => "a private key",
            Secret::Aws => "AWS secret keys",
            Secret::Netrc => "a .netrc password",
            Secret::Pgpass => "a PostgreSQL password",
            Secret::Kube => "Kubernetes credentials",
            Secret::GitCredentials => "git credentials",
        }
    }
}

/// The credential file `path` (a manifest path) is, by its name.
fn credential_file(path: &str) -> Option<Secret> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    let parent = dir.rsplit('/').next().unwrap_or("");
    match name {
        "credentials" | "config" if parent == ".aws" => Some(Secret::Aws),
        ".netrc" | "_netrc" => Some(Secret::Netrc),
        ".pgpass" => Some(Secret::Pgpass),
        "config" if parent == ".kube" => Some(Secret::Kube),
        "kubeconfig" => Some(Secret::Kube),
        n if n.ends_with(".kubeconfig") => Some(Secret::Kube),
        ".git-credentials" => Some(Secret::GitCredentials),
        _ => None,
    }
}

/// Whether `status` and `doctor` look into the stored content of the
/// plaintext entry `path`: the credential files, and the names private
/// keys go by (anything under `.ssh/`, `*.pem`, `*.key`, `id_*`). They read
/// only these, so that they stay cheap on large repositories.
pub fn worth_a_look(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    credential_file(path).is_some()
        || path.contains("/.ssh/")
        || name.ends_with(".pem")
        || name.ends_with(".key")
        || name.starts_with("id_")
}

/// What the file at `path` (its manifest form) holds, judged by its first
/// [`HEAD`] bytes, `head`: `None` when it does not look like a secret.
pub fn detect(path: &str, head: &[u8]) -> Option<Secret> {
    let head = head.get(..HEAD).unwrap_or(head);
    // A key's first line is in the bytes as it is in the text (a lossy
    // conversion never changes an ASCII byte), so only a file holding one
    // of those markers, or a credential file, is read as text: converting
    // every added file was half of the CPU of a T10k `add` (binary files
    // turn into a replacement character per byte).
    let marked = memchr::memmem::find(head, b"-----BEGIN ").is_some()
        || memchr::memmem::find(head, b"PuTTY-User-Key-File-").is_some();
    let credentials = credential_file(path);
    if !marked && credentials.is_none() {
        return None;
    }
    let text = String::from_utf8_lossy(head);
    let lines = || {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
    };
    if marked && has_private_key(lines()) {
        return Some(Secret::PrivateKey);
    }
    let kind = credentials?;
    let holds = match kind {
        Secret::Aws => lines().any(|l| {
            l.split_once('=').is_some_and(|(k, v)| {
                let k = k.trim().to_ascii_lowercase();
                (k == "aws_secret_access_key" || k == "aws_session_token") && !v.trim().is_empty()
            })
        }),
        Secret::Netrc => {
            let mut words = lines().flat_map(str::split_whitespace);
            words.any(|w| w == "password") && words.next().is_some()
        }
        Secret::Pgpass => lines().any(|l| pgpass_fields(l).get(4).is_some_and(|p| !p.is_empty())),
        Secret::Kube => lines().any(|l| {
            let l = l.strip_prefix("- ").unwrap_or(l);
            l.split_once(':').is_some_and(|(k, v)| {
                let v = v.trim().trim_matches(['"', '\'']);
                matches!(
                    k.trim(),
                    "token" | "id-token" | "refresh-token" | "client-key-data" | "password"
                ) && !v.is_empty()
            })
        }),
        Secret::GitCredentials => lines().any(|l| {
            l.split_once("://")
                .and_then(|(_, rest)| rest.split_once('@'))
                .and_then(|(user, _)| user.split_once(':'))
                .is_some_and(|(_, pass)| !pass.is_empty())
        }),
        Secret::PrivateKey => false,
    };
    holds.then_some(kind)
}

/// Whether `lines` (trimmed) hold a private key: a PEM or OpenSSH block
/// with its end, or a PuTTY key.
fn has_private_key<'a>(lines: impl Iterator<Item = &'a str>) -> bool {
    let mut open: Option<&str> = None;
    let mut putty = false;
    for l in lines {
        if let Some(label) = l
            .strip_prefix("-----BEGIN ")
            .and_then(|r| r.strip_suffix("-----"))
            .filter(|label| label.ends_with("PRIVATE KEY") || label.ends_with("PRIVATE KEY BLOCK"))
        {
            open = Some(label);
        } else if let Some(label) = l
            .strip_prefix("-----END ")
            .and_then(|r| r.strip_suffix("-----"))
            && open == Some(label)
        {
            return true;
        } else if l.starts_with("PuTTY-User-Key-File-") {
            putty = true;
        } else if putty && l.starts_with("Private-Lines:") {
            return true;
        }
    }
    false
}

/// The fields of a `.pgpass` line (`host:port:db:user:password`, `\:` and
/// `\\` escaped).
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(n), Some(f)) = (chars.next(), fields.last_mut()) {
                    f.push(n);
                }
            }
            ':' => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c);
                }
            }
        }
    }
    fields
}

/// Why `add` stores none of `found` (files that look like secrets).
pub(crate) fn refusal(found: &[(String, Secret)]) -> String {
    match found {
        [(path, secret)] => format!(
            "{path} looks like {}: not stored in plaintext, and nothing was added",
            secret.describe()
        ),
        _ => format!(
            "{} files look like secrets: not stored in plaintext, and nothing was added: {}",
            found.len(),
            found
                .iter()
                .map(|(p, s)| format!("{p} ({})", s.describe()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl crate::Garden {
    /// Refuses the files of `files` (absolute path, manifest path) that
    /// look like secrets, before anything of them is stored: an `add` or
    /// `mirror up` of new files to be stored in plaintext without being
    /// told to.
    ///
    /// # Errors
    /// [`crate::Error::LooksSecret`] naming every such file; a file that
    /// cannot be read is left to the add itself to report.
    pub(crate) fn refuse_secrets(
        &self,
        files: &[(std::path::PathBuf, String)],
    ) -> crate::Result<()> {
        let found: Vec<(String, Secret)> = crate::par::map(files, 64, |(abs, tilde)| {
            let head = head_of(abs).ok()?;
            Some((tilde.clone(), detect(tilde, &head)?))
        })
        .into_iter()
        .flatten()
        .flatten()
        .collect();
        if found.is_empty() {
            Ok(())
        } else {
            Err(crate::Error::LooksSecret { found })
        }
    }

    /// The tracked entries named by `paths` that are stored in plaintext
    /// though they look like secrets (see [`stored_in_plaintext`]).
    pub fn plaintext_secrets<'a>(
        &self,
        paths: impl Iterator<Item = &'a str>,
    ) -> Vec<(String, Secret)> {
        stored_in_plaintext(
            &self.repo.store,
            // The name first: it rules out nearly every path without a
            // lookup (a status of 100,000 paths asks this of each).
            paths
                .filter(|p| worth_a_look(p))
                .filter_map(|p| self.repo.manifest.get(p)),
        )
    }
}

/// The first [`HEAD`] bytes of the regular file `abs` (never following a
/// symlink, never blocking on a FIFO).
///
/// # Errors
/// As [`crate::fsx::open_regular`]; [`crate::Error::Io`] when reading fails.
pub(crate) fn head_of(abs: &Path) -> crate::Result<Vec<u8>> {
    let (f, md) = crate::fsx::open_regular(abs)?;
    // Room for all of it (and a byte to see the end) up front: grown from
    // nothing, a 20 KiB file took ten reads of 32 bytes and up, a tenth of
    // the system calls of a T10k `add`.
    let room = usize::try_from(md.len().min(HEAD as u64)).unwrap_or(HEAD);
    let mut head = Vec::with_capacity(room + 1);
    f.take(HEAD as u64)
        .read_to_end(&mut head)
        .map_err(|e| crate::Error::io("reading", abs, e))?;
    Ok(head)
}

/// The entries of `entries` stored in plaintext in `store` whose names are
/// [`worth_a_look`] and whose stored content looks like a secret. Content
/// kept in chunks (big files) or missing is not looked at.
pub fn stored_in_plaintext<'a>(
    store: &Store,
    entries: impl Iterator<Item = &'a Entry>,
) -> Vec<(String, Secret)> {
    entries
        .filter(|e| e.kind == EntryKind::File && !e.encrypted && worth_a_look(&e.path))
        .filter_map(|e| {
            let head = head_of(&store.path_of(&e.hash?)).ok()?;
            Some((e.path.clone(), detect(&e.path, &head)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\n";

    #[test]
    fn private_keys_are_found_in_any_file() {
        for text in [
            KEY,
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n",
            "-----BEGIN PRIVATE KEY-----\r\nMIIE\r\n-----END PRIVATE KEY-----\r\n",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIE\n-----END ENCRYPTED PRIVATE KEY-----\n",
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n  -----BEGIN EC PRIVATE KEY-----\nMHc\n  -----END EC PRIVATE KEY-----\n",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQ\n-----END PGP PRIVATE KEY BLOCK-----\n",
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\nAAAA\n",
        ] {
            assert_eq!(
                detect("~/any/name", text.as_bytes()),
                Some(Secret::PrivateKey),
                "{text}"
            );
        }
        for text in [
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
            "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----\n",
            "ssh-ed25519 AAAAC3Nza me@host\n",
            "echo '-----BEGIN OPENSSH PRIVATE KEY-----'\n",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END RSA PRIVATE KEY-----\n",
            "",
        ] {
            assert_eq!(detect("~/.ssh/x", text.as_bytes()), None, "{text}");
        }
        // Binary bytes around it change nothing.
        let mut bin = vec![0xff, 0xfe, b'\n'];
        bin.extend_from_slice(KEY.as_bytes());
        assert_eq!(detect("~/k", &bin), Some(Secret::PrivateKey));
    }

    #[test]
    fn credential_files_need_a_secret_in_them() {
        let cases = [
            (
                "~/.aws/credentials",
                "[p]\naws_secret_access_key = abc\n",
                true,
            ),
            ("~/.aws/config", "[p]\nAWS_SESSION_TOKEN=abc\n", true),
            ("~/.aws/config", "[p]\nregion = eu-west-1\n", false),
            (
                "~/.aws/credentials",
                "[p]\naws_secret_access_key =\n",
                false,
            ),
            ("~/.netrc", "machine m login me password pw\n", true),
            ("~/_netrc", "machine m\n  password pw\n", true),
            ("~/.netrc", "machine m login me\n", false),
            ("~/.netrc", "machine m login password\n", false),
            ("~/.pgpass", "h:5432:*:me:pw\n", true),
            ("~/.pgpass", "h\\:x:5432:*:me:p\\:w\n", true),
            ("~/.pgpass", "# h:5432:*:me:pw\n", false),
            ("~/.pgpass", "h:5432:*:me:\n", false),
            (
                "~/.kube/config",
                "users:\n- name: u\n  user:\n    token: abc\n",
                true,
            ),
            (
                "~/.kube/config",
                "users:\n- user:\n    client-key-data: LS0t\n",
                true,
            ),
            (
                "~/.kube/config",
                "users:\n- user:\n    token: \"\"\n",
                false,
            ),
            ("~/prod.kubeconfig", "    password: pw\n", true),
            ("~/.kube/config", "clusters: []\n", false),
            (
                "~/.git-credentials",
                "https://me:ghp_abc@github.com\n",
                true,
            ),
            ("~/.git-credentials", "https://github.com\n", false),
            // Not a credential file: its content is not looked at.
            (
                "~/notes",
                "aws_secret_access_key = abc\npassword pw\ntoken: x\n",
                false,
            ),
            (
                "~/.config/aws/credentials",
                "aws_secret_access_key = abc\n",
                false,
            ),
        ];
        for (path, text, secret) in cases {
            assert_eq!(
                detect(path, text.as_bytes()).is_some(),
                secret,
                "{path}: {text}"
            );
        }
    }

    #[test]
    fn status_looks_where_keys_and_credentials_are_kept() {
        for p in [
            "~/.ssh/id_ed25519",
            "~/.ssh/deploy",
            "~/certs/server.pem",
            "~/tls.key",
            "~/keys/id_rsa",
            "~/.netrc",
            "~/.aws/credentials",
            "~/.kube/config",
        ] {
            assert!(worth_a_look(p), "{p}");
        }
        for p in ["~/.bashrc", "~/.config/git/config", "~/.ssh", "~/keys.txt"] {
            assert!(!worth_a_look(p), "{p}");
        }
    }
}
