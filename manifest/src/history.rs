//! The history log: `<repo>/history.yaml`, one record per snapshot.
//!
//! A snapshot is a manifest document stored as a blob; its id is that blob's
//! hash. Checkpoints (and pulls) store the whole manifest as it stands
//! afterwards; operations that change the home folder (restore, undo, mirror
//! down) store two partial documents: the state of the paths they touch
//! before (`before-restore`, with `absent` for paths they create) and what
//! they write (`restore`, `undo`, with `absent` for paths they delete).
//!
//! ```yaml
//! version: 1
//! snapshots:
//!     - id: 5f1d…
//!       parent: 0c4a…
//!       time: 2026-03-23T12:00:00Z
//!       host: laptop
//!       reason: checkpoint
//!       message: add ll
//!       entries: 12
//!       bytes: 48213
//!       new_blobs: 1
//!       head_before: 9e3b…
//! ```
//!
//! Records are kept oldest first; the file is rewritten atomically, so a
//! record is in the log whole or not at all. Two records may share an id
//! (the same document taken twice); links between records resolve to the
//! newest earlier record with the parent's id.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::yaml::Emitter;
use crate::{Error, Hash, Result, Timestamp};

/// The log's file name inside a repository.
pub const HISTORY_FILE: &str = "history.yaml";

/// The newest history schema this build reads and writes.
pub const HISTORY_VERSION: u32 = 1;

/// Why a snapshot was taken.
#[derive(Clone, PartialEq, Eq, Debug, Hash)]
pub enum Reason {
    /// `checkpoint`: the whole manifest after the checkpoint.
    Checkpoint,
    /// The touched paths as they were before a change to the home folder.
    BeforeRestore,
    /// What a restore (or mirror down) wrote.
    Restore,
    /// What an undo wrote.
    Undo,
    /// The whole manifest after a pull.
    Pull,
    /// A reason from a newer sgard, kept as it is.
    Other(String),
}

impl Reason {
    /// The log's word for it.
    pub fn as_str(&self) -> &str {
        match self {
            Reason::Checkpoint => "checkpoint",
            Reason::BeforeRestore => "before-restore",
            Reason::Restore => "restore",
            Reason::Undo => "undo",
            Reason::Pull => "pull",
            Reason::Other(s) => s,
        }
    }

    /// Parses a word (unknown words are kept as [`Reason::Other`]).
    pub fn parse(s: &str) -> Self {
        match s {
            "checkpoint" => Reason::Checkpoint,
            "before-restore" => Reason::BeforeRestore,
            "restore" => Reason::Restore,
            "undo" => Reason::Undo,
            "pull" => Reason::Pull,
            other => Reason::Other(other.to_owned()),
        }
    }

    /// Whether the snapshot is a whole manifest (checkpoint, pull).
    pub fn is_full(&self) -> bool {
        matches!(self, Reason::Checkpoint | Reason::Pull)
    }

    /// Whether the snapshot records what a change to the home folder wrote
    /// (the kind `undo` reverses).
    pub fn is_restore_like(&self) -> bool {
        matches!(self, Reason::Restore | Reason::Undo)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One snapshot in the log.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Record {
    /// The snapshot blob's hash.
    pub id: Hash,
    /// The snapshot this one follows: the previous full snapshot for a
    /// checkpoint, the `before-restore` snapshot for a restore or undo.
    pub parent: Option<Hash>,
    /// When it was taken.
    pub time: Timestamp,
    /// The short host name of the machine that took it.
    pub host: String,
    /// The id of the home (machine and user) that took it, from that home's
    /// machine-local state: 32 lowercase hex digits. Lets `undo` pick only
    /// this home's operations when several share one repository.
    pub machine: Option<String>,
    /// Why.
    pub reason: Reason,
    /// The checkpoint message, or a description of the operation.
    pub message: Option<String>,
    /// Entries in the snapshot document.
    pub entries: u64,
    /// Bytes of content the snapshot references.
    pub bytes: u64,
    /// Blobs this operation added to the store.
    pub new_blobs: u64,
    /// For snapshots that install a new head manifest: the hash of the
    /// manifest file they replace (lets an interrupted checkpoint be finished).
    pub head_before: Option<Hash>,
}

/// The whole log, oldest first.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct History {
    /// The records, oldest first.
    pub records: Vec<Record>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct RawHistory {
    pub(crate) version: Option<u64>,
    pub(crate) snapshots: Option<Vec<RawRecord>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct RawRecord {
    pub(crate) id: Option<String>,
    pub(crate) parent: Option<String>,
    pub(crate) time: Option<String>,
    pub(crate) host: Option<String>,
    pub(crate) machine: Option<String>,
    pub(crate) reason: Option<String>,
    pub(crate) message: Option<String>,
    pub(crate) entries: Option<u64>,
    pub(crate) bytes: Option<u64>,
    pub(crate) new_blobs: Option<u64>,
    pub(crate) head_before: Option<String>,
}

impl History {
    /// Loads the log at `path`; a missing file is an empty history.
    ///
    /// # Errors
    /// [`Error::Read`], [`Error::Syntax`] naming the line, or a validation
    /// error naming the record.
    pub fn load(path: &Path) -> Result<Self> {
        let text = match sgard_store::durable::read_regular_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(History::default()),
            Err(e) => {
                return Err(Error::Read {
                    path: path.to_path_buf(),
                    source: e,
                });
            }
        };
        Self::parse(&text, path)
    }

    /// Parses log text.
    ///
    /// # Errors
    /// As [`History::load`].
    pub fn from_yaml(text: &str) -> Result<Self> {
        Self::parse(text, Path::new("<input>"))
    }

    /// Parses log text read from `origin` (named in errors).
    ///
    /// # Errors
    /// As [`History::load`].
    pub fn from_yaml_at(text: &str, origin: &Path) -> Result<Self> {
        Self::parse(text, origin)
    }

    fn parse(text: &str, origin: &Path) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(History::default());
        }
        let raw: RawHistory = crate::yaml::from_str(text).map_err(|e| Error::syntax(origin, &e))?;
        let version = raw.version.unwrap_or(1);
        if version > u64::from(HISTORY_VERSION) {
            return Err(Error::UnsupportedVersion {
                origin: origin.to_path_buf(),
                found: version,
                supported: HISTORY_VERSION,
            });
        }
        let mut records = Vec::new();
        for (i, r) in raw.snapshots.unwrap_or_default().into_iter().enumerate() {
            let shown = r.id.clone().unwrap_or_else(|| "<no id>".into());
            let rec = record(r).map_err(|reason| Error::Entry {
                origin: PathBuf::from(origin),
                index: i + 1,
                path: shown,
                reason,
            })?;
            records.push(rec);
        }
        Ok(History { records })
    }

    /// Renders the log as YAML, oldest first.
    pub fn to_yaml(&self) -> String {
        let mut e = Emitter::new();
        e.raw(0, "version", &HISTORY_VERSION.to_string());
        if self.records.is_empty() {
            e.raw(0, "snapshots", "[]");
            return e.finish();
        }
        e.open(0, "snapshots");
        for r in &self.records {
            e.item(4, "id", &r.id.to_hex());
            if let Some(p) = &r.parent {
                e.raw(6, "parent", &p.to_hex());
            }
            e.raw(6, "time", &r.time.to_string());
            e.str(6, "host", &r.host);
            if let Some(m) = r.machine.as_deref().filter(|m| is_machine_id(m)) {
                // Always quoted: a hex id can look like a number.
                e.raw(6, "machine", &format!("\"{m}\""));
            }
            e.str(6, "reason", r.reason.as_str());
            if let Some(m) = r.message.as_deref().filter(|m| !m.is_empty()) {
                e.str(6, "message", m);
            }
            e.raw(6, "entries", &r.entries.to_string());
            e.raw(6, "bytes", &r.bytes.to_string());
            e.raw(6, "new_blobs", &r.new_blobs.to_string());
            if let Some(h) = &r.head_before {
                e.raw(6, "head_before", &h.to_hex());
            }
        }
        e.finish()
    }

    /// Writes the log atomically and durably; returns the SHA-256 of the
    /// bytes written.
    ///
    /// # Errors
    /// [`Error::Write`] naming the file.
    pub fn save(&self, path: &Path) -> Result<Hash> {
        let text = self.to_yaml();
        sgard_store::durable::write_atomic(path, text.as_bytes(), 0o644).map_err(|e| {
            Error::Write {
                path: path.to_path_buf(),
                source: e,
            }
        })?;
        Ok(Hash::of(text.as_bytes()))
    }

    /// The record with this id.
    pub fn get(&self, id: &Hash) -> Option<&Record> {
        self.records.iter().find(|r| r.id == *id)
    }

    /// The newest full snapshot (checkpoint or pull): what `@` names.
    pub fn head(&self) -> Option<&Record> {
        self.records.iter().rev().find(|r| r.reason.is_full())
    }
}

/// Whether `s` is a machine id: 32 lowercase hex digits.
pub fn is_machine_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

fn record(r: RawRecord) -> Result<Record, String> {
    let hash = |what: &str, s: String| {
        Hash::parse(&s).map_err(|_| format!("malformed {what} {s:?}: expected 64 lowercase hex"))
    };
    let id = hash("id", r.id.ok_or("record has no `id`")?)?;
    let parent = r
        .parent
        .filter(|p| !p.is_empty())
        .map(|p| hash("parent", p))
        .transpose()?;
    let head_before = r
        .head_before
        .filter(|p| !p.is_empty())
        .map(|p| hash("head_before", p))
        .transpose()?;
    let time = Timestamp::parse(&r.time.ok_or("record has no `time`")?)?;
    let reason = Reason::parse(&r.reason.ok_or("record has no `reason`")?);
    Ok(Record {
        id,
        parent,
        time,
        host: r.host.unwrap_or_default(),
        // Anything but an id this sgard writes is dropped, never trusted.
        machine: r.machine.filter(|m| is_machine_id(m)),
        reason,
        message: r.message.filter(|m| !m.is_empty()),
        entries: r.entries.unwrap_or(0),
        bytes: r.bytes.unwrap_or(0),
        new_blobs: r.new_blobs.unwrap_or(0),
        head_before,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &[u8], parent: Option<&[u8]>, reason: Reason) -> Record {
        Record {
            id: Hash::of(id),
            parent: parent.map(Hash::of),
            time: Timestamp::parse("2026-03-23T12:00:00.5Z").unwrap(),
            host: "laptop".into(),
            machine: Some("0123456789abcdef0123456789abcdef".into()),
            reason,
            message: Some("a: b # c".into()),
            entries: 3,
            bytes: 42,
            new_blobs: 1,
            head_before: Some(Hash::of(b"old")),
        }
    }

    #[test]
    fn round_trips() {
        let h = History {
            records: vec![
                rec(b"1", None, Reason::Checkpoint),
                rec(b"2", Some(b"1"), Reason::BeforeRestore),
                rec(b"3", Some(b"2"), Reason::Other("future".into())),
            ],
        };
        let back = History::from_yaml(&h.to_yaml()).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.head().unwrap().id, Hash::of(b"1"));
    }

    #[test]
    fn refuses_bad_records() {
        let bad = "version: 1\nsnapshots:\n    - id: ../../etc\n      time: 2026-03-23T12:00:00Z\n      reason: checkpoint\n";
        let err = History::from_yaml(bad).unwrap_err().to_string();
        assert!(err.contains("malformed id"), "{err}");
        let newer = "version: 9\nsnapshots: []\n";
        assert!(History::from_yaml(newer).is_err());
        assert_eq!(History::from_yaml("").unwrap(), History::default());
    }
}
