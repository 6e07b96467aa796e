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
//!       renamed:
//!           - 9a0c… 5f1d…
//!       signature: |
//!           -----BEGIN SSH SIGNATURE-----
//!           …
//! ```
//!
//! A purge travels between machines (through `sgardd`) as its *statement*
//! ([`Purge::statement`]): a canonical text of what it did, with which
//! snapshot became which; the machine that pushes it signs that text as it
//! signs a head. A machine that applies a purge it was given keeps the
//! signature it came with (`signature`).

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
    /// Each rewritten snapshot of the shared history: its old id and its
    /// new one.
    pub renamed: Vec<(Hash, Hash)>,
    /// The signature of the statement, for a purge this machine was given
    /// (it is handed on with it).
    pub signature: Option<String>,
}

/// The first line of a purge statement.
const STATEMENT_MAGIC: &str = "sgard purge statement v1";

/// The largest purge statement read.
const MAX_STATEMENT: usize = 16 << 20;

impl Purge {
    /// The statement of this purge: what it did, as a canonical text (the
    /// magic line, `time`, `host`, `kept-current`, one `path` line per path
    /// as a JSON string, one `renamed <old> <new>` line per snapshot of the
    /// shared history it rewrote, in order).
    pub fn statement(&self) -> String {
        let mut s = format!(
            "{STATEMENT_MAGIC}\ntime {}\nhost {}\nkept-current {}\nversions {}\n",
            self.time,
            quote(&self.host),
            self.kept_current,
            self.versions
        );
        for p in &self.paths {
            s.push_str("path ");
            s.push_str(&quote(p));
            s.push('\n');
        }
        for (old, new) in &self.renamed {
            s.push_str(&format!("renamed {} {}\n", old.to_hex(), new.to_hex()));
        }
        s
    }

    /// The id of this purge: the SHA-256 of its statement.
    pub fn id(&self) -> Hash {
        Hash::of(self.statement().as_bytes())
    }

    /// Reads a statement (made by [`Purge::statement`]); anything else, or
    /// a text not in its canonical form, is refused.
    ///
    /// # Errors
    /// [`Error::Invalid`] saying what is wrong.
    pub fn from_statement(text: &str) -> Result<Purge> {
        let bad = |why: &str| Error::Invalid(format!("a purge statement: {why}"));
        if text.len() > MAX_STATEMENT {
            return Err(bad("it is too long"));
        }
        let mut lines = text.lines();
        if lines.next() != Some(STATEMENT_MAGIC) {
            return Err(bad("not a purge statement"));
        }
        let mut field = |k: &str| {
            lines
                .next()
                .and_then(|l| l.strip_prefix(k))
                .and_then(|v| v.strip_prefix(' '))
                .ok_or_else(|| bad(&format!("no {k}")))
        };
        let time = Timestamp::parse(field("time")?).map_err(|_| bad("a malformed time"))?;
        let host = unquote(field("host")?).ok_or_else(|| bad("a malformed host"))?;
        let kept_current = match field("kept-current")? {
            "true" => true,
            "false" => false,
            _ => return Err(bad("a malformed kept-current")),
        };
        let versions = field("versions")?
            .parse()
            .map_err(|_| bad("a malformed count"))?;
        let mut p = Purge {
            time,
            host,
            paths: Vec::new(),
            kept_current,
            versions,
            snapshots: Vec::new(),
            renamed: Vec::new(),
            signature: None,
        };
        for l in lines {
            if let Some(v) = l.strip_prefix("path ") {
                p.paths
                    .push(unquote(v).ok_or_else(|| bad("a malformed path"))?);
            } else if let Some(v) = l.strip_prefix("renamed ") {
                let (a, b) = v.split_once(' ').ok_or_else(|| bad("a malformed rename"))?;
                let (a, b) = (
                    Hash::parse(a).map_err(|_| bad("a malformed id"))?,
                    Hash::parse(b).map_err(|_| bad("a malformed id"))?,
                );
                p.renamed.push((a, b));
            } else {
                return Err(bad("a line it does not know"));
            }
        }
        let mut news: Vec<Hash> = p.renamed.iter().map(|r| r.1).collect();
        news.sort();
        news.dedup();
        p.snapshots = news;
        if p.statement() != text {
            return Err(bad("it is not in its canonical form"));
        }
        Ok(p)
    }
}

/// A string as one JSON string (a line of a statement).
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn unquote(s: &str) -> Option<String> {
    serde_json::from_str::<String>(s).ok()
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
    renamed: Option<Vec<String>>,
    signature: Option<String>,
}

impl PurgeLog {
    /// Loads the log at `path`; a missing file is an empty log.
    ///
    /// # Errors
    /// [`Error::Read`], [`Error::Syntax`], or a record that is not one.
    pub fn load(path: &Path) -> Result<Self> {
        match crate::read_small(path, MAX_BYTES)? {
            Some(text) => Self::parse(&text, path),
            None => Ok(Self::default()),
        }
    }

    /// Reads a log from its text (`origin` names it in errors).
    ///
    /// # Errors
    /// As [`PurgeLog::load`].
    pub fn parse(text: &str, origin: &Path) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(PurgeLog::default());
        }
        let raw: RawLog = crate::yaml::from_str(text).map_err(|e| Error::syntax(origin, &e))?;
        crate::version_1(raw.version, origin)?;
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
            let renamed = r
                .renamed
                .unwrap_or_default()
                .iter()
                .map(|s| {
                    let (a, b) = s.split_once(' ')?;
                    Some((Hash::parse(a).ok()?, Hash::parse(b).ok()?))
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("a malformed rename".into()))?;
            purges.push(Purge {
                time,
                host: r.host.unwrap_or_default(),
                paths: r.paths.unwrap_or_default(),
                kept_current: r.kept_current.unwrap_or(false),
                versions: r.versions.unwrap_or(0),
                snapshots,
                renamed,
                signature: r.signature.filter(|s| !s.is_empty()),
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
            if !p.renamed.is_empty() {
                let r: Vec<String> = p
                    .renamed
                    .iter()
                    .map(|(a, b)| format!("{} {}", a.to_hex(), b.to_hex()))
                    .collect();
                e.list(6, "renamed", &r);
            }
            if let Some(sig) = &p.signature {
                e.str(6, "signature", sig);
            }
        }
        e.finish()
    }

    /// Writes the log atomically and durably.
    ///
    /// # Errors
    /// [`Error::Write`] naming the file.
    pub fn save(&self, path: &Path) -> Result<()> {
        crate::write_small(path, &self.to_yaml())
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
                renamed: vec![(Hash::of(b"w"), Hash::of(b"x"))],
                signature: Some("-----BEGIN SSH SIGNATURE-----\nabc\n".into()),
            }],
        };
        let text = log.to_yaml();
        assert_eq!(PurgeLog::parse(&text, Path::new("p")).unwrap(), log);
        assert_eq!(log.of(&Hash::of(b"x")).len(), 1);
        // Its statement reads back, but for the signature it is not part of.
        let p = &log.purges[0];
        let st = Purge::from_statement(&p.statement()).unwrap();
        assert_eq!(st.id(), p.id());
        assert_eq!(st.paths, p.paths);
        assert_eq!(st.renamed, p.renamed);
        assert_eq!(st.signature, None);
        assert!(Purge::from_statement(&p.statement().replace("renamed", "Renamed")).is_err());
        assert!(Purge::from_statement(&format!("{}\n", p.statement())).is_err());
        assert!(Purge::from_statement(&p.statement().replace("\"desk\"", "desk")).is_err());
        assert!(PurgeLog::parse("purges:\n  - time: nope\n", Path::new("p")).is_err());
        assert!(PurgeLog::parse("version: 9\n", Path::new("p")).is_err());
        assert_eq!(
            PurgeLog::parse("", Path::new("p")).unwrap(),
            PurgeLog::default()
        );
    }
}
