//! The purge log: `<repo>/purges.yaml`, one record per `sgard purge`.
//!
//! A purge removes every stored version of some paths' content (or every
//! one but the current) and rewrites the snapshots that named them without
//! those entries; their ids change. The log says what was purged, when and
//! where, and which snapshots (by their new ids) lost entries, so `log` and
//! `show` can say so.
//!
//! ```yaml
//! version: 1
//! purges:
//!     - time: 2026-12-06T00:00:00Z
//!       host: laptop
//!       paths:
//!           - ~/.netrc
//!       kept_current: true
//!       versions: 2
//!       snapshots:
//!           - 5f1d…
//! ```

use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::yaml::Emitter;
use crate::{Error, Hash, Result, Timestamp};

/// The log's file name inside a repository.
pub const PURGES_FILE: &str = "purges.yaml";

/// The largest purge log read (a line or two per purge).
const MAX_BYTES: u64 = 16 << 20;

/// One purge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Purge {
    /// When.
    pub time: Timestamp,
    /// The short host name of the machine that purged.
    pub host: String,
    /// The paths (`~/…`) whose stored versions were removed.
    pub paths: Vec<String>,
    /// Whether the current version of each was kept.
    pub kept_current: bool,
    /// How many stored contents were removed.
    pub versions: u64,
    /// The snapshots rewritten without those entries (their new ids).
    pub snapshots: Vec<Hash>,
}

/// The whole log, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PurgeLog {
    /// The purges, oldest first.
    pub purges: Vec<Purge>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawLog {
    version: Option<u64>,
    purges: Option<Vec<RawPurge>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawPurge {
    time: Option<String>,
    host: Option<String>,
    paths: Option<Vec<String>>,
    kept_current: Option<bool>,
    versions: Option<u64>,
    snapshots: Option<Vec<String>>,
}

impl PurgeLog {
    /// Loads the log at `path`; a missing file is an empty log.
    ///
    /// # Errors
    /// [`Error::Read`], [`Error::Syntax`], or a record that is not one.
    pub fn load(path: &Path) -> Result<Self> {
        let text = match sgard_store::durable::read_regular_to_string_max(path, MAX_BYTES) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(PurgeLog::default()),
            Err(e) => {
                return Err(Error::Read {
                    path: path.to_path_buf(),
                    source: e,
                });
            }
        };
        Self::parse(&text, path)
    }

    fn parse(text: &str, origin: &Path) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(PurgeLog::default());
        }
        let raw: RawLog = crate::yaml::from_str(text).map_err(|e| Error::syntax(origin, &e))?;
        if raw.version.unwrap_or(1) > 1 {
            return Err(Error::UnsupportedVersion {
                origin: origin.to_path_buf(),
                found: raw.version.unwrap_or(1),
                supported: 1,
            });
        }
        let mut purges = Vec::new();
        for (i, r) in raw.purges.unwrap_or_default().into_iter().enumerate() {
            let bad = |reason: String| Error::Entry {
                origin: PathBuf::from(origin),
                index: i + 1,
                path: "purge".into(),
                reason,
            };
            let time = Timestamp::parse(r.time.as_deref().unwrap_or("")).map_err(bad)?;
            let snapshots = r
                .snapshots
                .unwrap_or_default()
                .iter()
                .map(|s| Hash::parse(s).map_err(|_| bad(format!("malformed snapshot id {s:?}"))))
                .collect::<Result<Vec<_>>>()?;
            purges.push(Purge {
                time,
                host: r.host.unwrap_or_default(),
                paths: r.paths.unwrap_or_default(),
                kept_current: r.kept_current.unwrap_or(false),
                versions: r.versions.unwrap_or(0),
                snapshots,
            });
        }
        Ok(PurgeLog { purges })
    }

    /// Renders the log as YAML.
    pub fn to_yaml(&self) -> String {
        let mut e = Emitter::new();
        e.raw(0, "version", "1");
        if self.purges.is_empty() {
            e.raw(0, "purges", "[]");
            return e.finish();
        }
        e.open(0, "purges");
        for p in &self.purges {
            e.item(4, "time", &p.time.to_string());
            e.str(6, "host", &p.host);
            e.list(6, "paths", &p.paths);
            e.raw(
                6,
                "kept_current",
                if p.kept_current { "true" } else { "false" },
            );
            e.raw(6, "versions", &p.versions.to_string());
            let ids: Vec<String> = p.snapshots.iter().map(Hash::to_hex).collect();
            e.list(6, "snapshots", &ids);
        }
        e.finish()
    }

    /// Writes the log atomically and durably.
    ///
    /// # Errors
    /// [`Error::Write`] naming the file.
    pub fn save(&self, path: &Path) -> Result<()> {
        sgard_store::durable::write_atomic(path, self.to_yaml().as_bytes(), 0o644).map_err(|e| {
            Error::Write {
                path: path.to_path_buf(),
                source: e,
            }
        })
    }

    /// The purges that rewrote snapshot `id`.
    pub fn of(&self, id: &Hash) -> Vec<&Purge> {
        self.purges
            .iter()
            .filter(|p| p.snapshots.contains(id))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_junk() {
        let log = PurgeLog {
            purges: vec![Purge {
                time: Timestamp::parse("2026-12-06T00:00:00Z").unwrap(),
                host: "desk".into(),
                paths: vec!["~/.netrc".into(), "~/a b: c".into()],
                kept_current: true,
                versions: 2,
                snapshots: vec![Hash::of(b"x")],
            }],
        };
        let text = log.to_yaml();
        assert_eq!(PurgeLog::parse(&text, Path::new("p")).unwrap(), log);
        assert_eq!(log.of(&Hash::of(b"x")).len(), 1);
        assert!(PurgeLog::parse("purges:\n  - time: nope\n", Path::new("p")).is_err());
        assert!(PurgeLog::parse("version: 9\n", Path::new("p")).is_err());
        assert_eq!(
            PurgeLog::parse("", Path::new("p")).unwrap(),
            PurgeLog::default()
        );
    }
}
