//! The fleet view: what the server knows of each machine of a garden (its
//! host name and key, the head it last said it has, when it last pushed and
//! pulled, its sgard version), kept in the garden's repository as one small
//! file per machine (`fleet/<sha256 of key and host>`), each written whole
//! and atomically, so machines reporting at once never mix their records.

use std::path::Path;

use anyhow::{Context, Result, bail};
use sgard_store::{Hash, durable};

/// The folder of the records, in a garden's repository.
pub const FLEET_DIR: &str = "fleet";

/// What one sync was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A push.
    Push,
    /// A pull.
    Pull,
}

/// What the server knows of one machine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Machine {
    /// Its host name, as it said.
    pub host: String,
    /// The fingerprint of the key it logged in with.
    pub key: String,
    /// The head it said it has.
    pub head: Option<Hash>,
    /// Unix seconds of its last push.
    pub last_push: Option<i64>,
    /// Unix seconds of its last pull.
    pub last_pull: Option<i64>,
    /// Its sgard version, as it said.
    pub version: String,
}

/// Text a machine says of itself is kept short and on one line.
fn checked(what: &str, s: &str, max: usize) -> Result<()> {
    if s.len() > max || s.chars().any(char::is_control) {
        bail!("the {what} must be one line of at most {max} bytes");
    }
    Ok(())
}

fn file_of(repo: &Path, key: &str, host: &str) -> std::path::PathBuf {
    repo.join(FLEET_DIR).join(record_name(key, host))
}

/// Records that the machine `host` (logged in with `key`) has `head` after
/// a `op`, at `now` (unix seconds).
///
/// # Errors
/// A host name or version over 255 bytes or with control characters; I/O
/// errors naming the file.
pub fn record(
    repo: &Path,
    key: &str,
    host: &str,
    version: &str,
    head: Hash,
    op: Op,
    now: i64,
) -> Result<()> {
    check(host, version)?;
    let path = file_of(repo, key, host);
    let mut m = read(&path)?.unwrap_or_default();
    m.update(key, host, version, head, op, now);
    durable::create_dir_all_durable(&repo.join(FLEET_DIR))?;
    durable::write_atomic(&path, m.to_text().as_bytes(), 0o644)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Writes `m` as the record of its machine unless there is one (what
/// `sgardd migrate` brings from another store); `true` when written.
///
/// # Errors
/// I/O errors naming the file.
pub fn adopt(repo: &Path, m: &Machine) -> Result<bool> {
    check(&m.host, &m.version)?;
    let path = file_of(repo, &m.key, &m.host);
    if read(&path)?.is_some() {
        return Ok(false);
    }
    durable::create_dir_all_durable(&repo.join(FLEET_DIR))?;
    durable::write_atomic(&path, m.to_text().as_bytes(), 0o644)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(true)
}

/// The name of a machine's record: the SHA-256 of its key and host name.
pub fn record_name(key: &str, host: &str) -> String {
    Hash::of(format!("{key}\n{host}").as_bytes()).to_hex()
}

impl Machine {
    /// This record after the machine said it has `head` after `op` at `now`.
    pub fn update(&mut self, key: &str, host: &str, version: &str, head: Hash, op: Op, now: i64) {
        host.clone_into(&mut self.host);
        key.clone_into(&mut self.key);
        version.clone_into(&mut self.version);
        self.head = Some(head);
        match op {
            Op::Push => self.last_push = Some(now),
            Op::Pull => self.last_pull = Some(now),
        }
    }

    /// The record's text: `name value` lines.
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "host {}\nkey {}\nversion {}\n",
            self.host, self.key, self.version
        );
        if let Some(h) = self.head {
            text.push_str(&format!("head {}\n", h.to_hex()));
        }
        if let Some(t) = self.last_push {
            text.push_str(&format!("last_push {t}\n"));
        }
        if let Some(t) = self.last_pull {
            text.push_str(&format!("last_pull {t}\n"));
        }
        text
    }

    /// Reads a record's text (unknown or malformed lines are passed over).
    pub fn parse(text: &str) -> Machine {
        let mut m = Machine::default();
        for line in text.lines() {
            let Some((k, v)) = line.split_once(' ') else {
                continue;
            };
            match k {
                "host" => v.clone_into(&mut m.host),
                "key" => v.clone_into(&mut m.key),
                "version" => v.clone_into(&mut m.version),
                "head" => m.head = Hash::parse(v).ok(),
                "last_push" => m.last_push = v.parse().ok(),
                "last_pull" => m.last_pull = v.parse().ok(),
                _ => {}
            }
        }
        m
    }
}

/// Checks what a machine says of itself before it is recorded.
///
/// # Errors
/// A host name or version too long or with control characters.
pub fn check(host: &str, version: &str) -> Result<()> {
    checked("host name", host, 255)?;
    checked("version", version, 64)
}

/// One record (`None`: none there).
fn read(path: &Path) -> Result<Option<Machine>> {
    let text = match durable::read_regular_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    Ok(Some(Machine::parse(&text)))
}

/// Every machine of the garden whose repository is `repo`, by host name.
///
/// # Errors
/// I/O errors naming the folder or file (a damaged record is passed over).
pub fn list(repo: &Path) -> Result<Vec<Machine>> {
    let dir = repo.join(FLEET_DIR);
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut out = Vec::new();
    for e in rd {
        let e = e.with_context(|| format!("reading {}", dir.display()))?;
        let name = e.file_name();
        if name.to_str().is_none_or(|n| Hash::parse(n).is_err()) {
            continue;
        }
        if let Ok(Some(m)) = read(&e.path())
            && !m.key.is_empty()
        {
            out.push(m);
        }
    }
    out.sort_by(|a, b| (&a.host, &a.key).cmp(&(&b.host, &b.key)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_keeps_its_last_push_and_pull() {
        let d = tempfile::tempdir().unwrap();
        let h = Hash::of(b"head");
        record(d.path(), "SHA256:k", "laptop", "0.1.0", h, Op::Push, 10).unwrap();
        record(d.path(), "SHA256:k", "laptop", "0.1.0", h, Op::Pull, 20).unwrap();
        record(d.path(), "SHA256:j", "desk", "0.1.0", h, Op::Pull, 30).unwrap();
        let l = list(d.path()).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[1].host, "laptop");
        assert_eq!((l[1].last_push, l[1].last_pull), (Some(10), Some(20)));
        assert!(record(d.path(), "k", "a\nb", "1", h, Op::Pull, 1).is_err());
        assert!(record(d.path(), "k", &"x".repeat(300), "1", h, Op::Pull, 1).is_err());
    }
}
