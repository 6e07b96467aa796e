//! The externals of a repository: `<repo>/externals.yaml`, one record per
//! `sgard external add`: where its content came from, what it was checked
//! against, how it was unpacked and where it lives. Its files are ordinary
//! entries of the manifest (the Go sgard restores them too); this file
//! says which external owns them and how to fetch it again.
//!
//! ```yaml
//! version: 1
//! externals:
//!     - path: ~/.local/share/fonts/fira
//!       url: https://example.org/fira.tar.gz
//!       format: tar.gz
//!       sha256: 5f1d…
//!       pinned: true
//!       strip: 1
//!       fetched: 2026-12-06T00:00:00Z
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::yaml::Emitter;
use crate::{Error, Result, Timestamp};

/// The file's name inside a repository.
pub const EXTERNALS_FILE: &str = "externals.yaml";

const MAX_BYTES: u64 = 16 << 20;

/// One external.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct External {
    /// Where it lives (`~/…` or absolute): a file, or a folder for an
    /// archive.
    pub path: String,
    /// Where it comes from.
    pub url: String,
    /// `file`, `tar`, `tar.gz`, `tar.xz`, `tar.zst`, `zip` or `git`.
    pub format: String,
    /// The SHA-256 of what was fetched last (the pin, when pinned); empty
    /// for `git`, whose content is named by `commit`.
    pub sha256: String,
    /// Whether its content is pinned: a source that changed is refused.
    /// For `git`: the reference is a tag or a commit.
    pub pinned: bool,
    /// `git`: the branch, tag or commit asked for (`None`: the default
    /// branch).
    pub reference: Option<String>,
    /// `git`: the commit checked out.
    pub commit: Option<String>,
    /// Leading name components dropped when unpacking.
    pub strip: u32,
    /// Only the archive's files matching one of these globs.
    pub include: Vec<String>,
    /// How long a fetch stays fresh (`7d`, `12h`…; `None`: never stale).
    pub refresh: Option<String>,
    /// When it was fetched last.
    pub fetched: Timestamp,
}

/// Every external of a repository.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExternalLog {
    /// In the order they were added.
    pub externals: Vec<External>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawLog {
    version: Option<u64>,
    externals: Option<Vec<RawExternal>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawExternal {
    path: Option<String>,
    url: Option<String>,
    format: Option<String>,
    sha256: Option<String>,
    pinned: Option<bool>,
    #[serde(rename = "ref")]
    reference: Option<String>,
    commit: Option<String>,
    strip: Option<u32>,
    include: Option<Vec<String>>,
    refresh: Option<String>,
    fetched: Option<String>,
}

impl ExternalLog {
    /// Loads the file at `path`; a missing file is no externals.
    ///
    /// # Errors
    /// [`Error::Read`], [`Error::Syntax`], or a record that is not one.
    pub fn load(path: &Path) -> Result<Self> {
        match crate::read_small(path, MAX_BYTES)? {
            Some(text) => Self::parse(&text, path),
            None => Ok(Self::default()),
        }
    }

    /// Reads the file's text (`origin` names it in errors).
    ///
    /// # Errors
    /// As [`ExternalLog::load`].
    pub fn parse(text: &str, origin: &Path) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let raw: RawLog = crate::yaml::from_str(text).map_err(|e| Error::syntax(origin, &e))?;
        crate::version_1(raw.version, origin)?;
        let mut externals = Vec::new();
        for (i, r) in raw.externals.unwrap_or_default().into_iter().enumerate() {
            let path = r.path.unwrap_or_default();
            let bad = |reason: String| Error::Entry {
                origin: PathBuf::from(origin),
                index: i + 1,
                path: path.clone(),
                reason,
            };
            crate::validate_path(&path).map_err(&bad)?;
            if path == "~" || path == "/" || path.trim_end_matches('/').is_empty() {
                return Err(bad(
                    "an external is never the home folder or the root".into()
                ));
            }
            if let Some(x) = externals.iter().find(|x: &&External| {
                crate::path_is_under(&path, &x.path) || crate::path_is_under(&x.path, &path)
            }) {
                return Err(bad(format!("overlaps the external at {}", x.path)));
            }
            let format = r.format.unwrap_or_else(|| "file".into());
            let hex = |s: &str, lens: &[usize]| {
                lens.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
            };
            let sha256 = r.sha256.unwrap_or_default();
            let commit = r.commit.filter(|c| !c.is_empty() && format == "git");
            if format == "git" {
                match &commit {
                    Some(c) if hex(c, &[40, 64]) => {}
                    other => return Err(bad(format!("malformed commit {other:?}"))),
                }
            } else if !hex(&sha256, &[64]) {
                return Err(bad(format!("malformed sha256 {sha256:?}")));
            }
            let url = r
                .url
                .filter(|u| !u.is_empty())
                .ok_or_else(|| bad("no url".into()))?;
            externals.push(External {
                url,
                format,
                sha256: sha256.to_ascii_lowercase(),
                pinned: r.pinned.unwrap_or(false),
                reference: r.reference.filter(|s| !s.is_empty()),
                commit: commit.map(|c| c.to_ascii_lowercase()),
                strip: r.strip.unwrap_or(0),
                include: r.include.unwrap_or_default(),
                refresh: r.refresh.filter(|s| !s.is_empty()),
                fetched: Timestamp::parse(r.fetched.as_deref().unwrap_or(""))
                    .unwrap_or_else(|_| Timestamp::zero()),
                path,
            });
        }
        Ok(ExternalLog { externals })
    }

    /// The file's text.
    pub fn to_yaml(&self) -> String {
        let mut e = Emitter::new();
        e.raw(0, "version", "1");
        if self.externals.is_empty() {
            e.raw(0, "externals", "[]");
            return e.finish();
        }
        e.open(0, "externals");
        for x in &self.externals {
            e.item(4, "path", &x.path);
            e.str(6, "url", &x.url);
            e.str(6, "format", &x.format);
            if !x.sha256.is_empty() {
                e.raw(6, "sha256", &x.sha256);
            }
            e.raw(6, "pinned", if x.pinned { "true" } else { "false" });
            if let Some(r) = &x.reference {
                e.str(6, "ref", r);
            }
            if let Some(c) = &x.commit {
                e.raw(6, "commit", c);
            }
            if x.strip > 0 {
                e.raw(6, "strip", &x.strip.to_string());
            }
            if !x.include.is_empty() {
                e.list(6, "include", &x.include);
            }
            if let Some(r) = &x.refresh {
                e.str(6, "refresh", r);
            }
            e.raw(6, "fetched", &x.fetched.to_string());
        }
        e.finish()
    }

    /// Writes the file atomically and durably.
    ///
    /// # Errors
    /// [`Error::Write`] naming the file.
    pub fn save(&self, path: &Path) -> Result<()> {
        crate::write_small(path, &self.to_yaml())
    }

    /// The external at exactly `path`, to change it.
    pub fn get_mut(&mut self, path: &str) -> Option<&mut External> {
        self.externals.iter_mut().find(|x| x.path == path)
    }

    /// The external that owns `path` (`~/…`): the one at it or above it.
    pub fn owner(&self, path: &str) -> Option<&External> {
        self.externals.iter().find(|x| {
            path == x.path
                || path
                    .strip_prefix(x.path.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    }
}

/// A period (`30s`, `15m`, `12h`, `7d`, `2w`) in seconds; `None` for
/// anything else (zero included).
pub fn period_secs(s: &str) -> Option<u64> {
    let (i, _) = s.char_indices().last()?;
    let (n, unit) = s.split_at(i);
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return None,
    };
    n.parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .and_then(|n| n.checked_mul(mult))
}

impl External {
    /// Whether its refresh period has passed at `now` (never, with none).
    pub fn is_due(&self, now: Timestamp) -> bool {
        self.refresh
            .as_deref()
            .and_then(period_secs)
            .is_some_and(|p| {
                now.unix_seconds()
                    .saturating_sub(self.fetched.unix_seconds())
                    >= i64::try_from(p).unwrap_or(i64::MAX)
            })
    }

    /// What names its content: the commit of a git external, else the
    /// SHA-256 of what was fetched.
    pub fn content_id(&self) -> &str {
        self.commit.as_deref().unwrap_or(&self.sha256)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_finds_owners_and_refuses_junk() {
        let log = ExternalLog {
            externals: vec![External {
                path: "~/.local/share/fonts/fira".into(),
                url: "https://example.org/fira: 1.tar.gz".into(),
                format: "tar.gz".into(),
                sha256: "ab".repeat(32),
                pinned: true,
                reference: None,
                commit: None,
                strip: 1,
                include: vec!["*.ttf".into()],
                refresh: Some("7d".into()),
                fetched: Timestamp::parse("2026-12-06T00:00:00Z").unwrap(),
            }],
        };
        let back = ExternalLog::parse(&log.to_yaml(), Path::new("x")).unwrap();
        assert_eq!(back, log);
        assert!(log.owner("~/.local/share/fonts/fira/a.ttf").is_some());
        assert!(log.owner("~/.local/share/fonts/fira").is_some());
        assert!(log.owner("~/.local/share/fonts/firacode").is_none());
        let mut git = log.externals[0].clone();
        git.format = "git".into();
        git.sha256 = String::new();
        git.reference = Some("v1.0".into());
        git.commit = Some("cd".repeat(20));
        git.refresh = None;
        let glog = ExternalLog {
            externals: vec![git],
        };
        assert_eq!(
            ExternalLog::parse(&glog.to_yaml(), Path::new("x")).unwrap(),
            glog
        );
        assert_eq!(period_secs("7d"), Some(604_800));
        assert_eq!(period_secs("0d"), None);
        assert_eq!(period_secs("d"), None);
        assert_eq!(period_secs(""), None);
        assert_eq!(period_secs("7é"), None);
        assert_eq!(period_secs("é"), None);
        let x = &log.externals[0];
        let day =
            |d: i64| Timestamp::from_datetime(x.fetched.datetime() + chrono::Duration::days(d));
        assert!(!x.is_due(day(6)));
        assert!(x.is_due(day(7)));
        let h = "ab".repeat(32);
        for junk in [
            "externals:\n  - path: ~/x\n    url: u\n    format: git\n".to_owned(),
            format!("externals:\n  - path: ~\n    url: u\n    sha256: {h}\n"),
            format!(
                "externals:\n  - path: ~/x\n    url: u\n    sha256: {h}\n  - path: ~/x/y\n    \
                 url: u\n    sha256: {h}\n"
            ),
            "externals:\n  - path: ~/x\n    url: u\n    sha256: nope\n".to_owned(),
            "externals:\n  - path: ../x\n    url: u\n    sha256: ab\n".to_owned(),
            "version: 7\n".to_owned(),
        ] {
            assert!(ExternalLog::parse(&junk, Path::new("x")).is_err(), "{junk}");
        }
    }
}
