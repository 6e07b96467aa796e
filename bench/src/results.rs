//! The `compare` rows as JSON: `compare --json FILE` writes them, `chart`
//! reads them back.
//!
//! One file holds one `compare` invocation: its metadata (when, which
//! commit, how many runs, which machine) and one row per target, with the
//! best run's values, every run's ratio and the limit.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

/// The version of the file's layout; `chart` refuses any other.
pub const SCHEMA: u32 = 1;

/// One `compare` invocation.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Results {
    pub schema: u32,
    pub meta: Meta,
    pub rows: Vec<ResultRow>,
}

/// Where and when the numbers were taken.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Meta {
    /// When the comparison finished, UTC, RFC 3339 to the second.
    pub date: String,
    /// The commit of the source tree `sgard-bench` was built from, when
    /// that tree is still there and is a git checkout.
    pub commit: Option<String>,
    /// Whether that tree had uncommitted changes to tracked files.
    pub dirty: Option<bool>,
    /// `sgard version` of the binary measured.
    pub sgard_version: String,
    /// How many times everything ran.
    pub runs: usize,
    /// The parts that ran (`T10k`, `T100k`, `BIG`, `GROW`).
    pub parts: Vec<String>,
    /// The whole comparison's wall time, seconds.
    pub seconds: f64,
    pub machine: Machine,
}

/// The machine the numbers come from.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Machine {
    /// `model name` of `/proc/cpuinfo`.
    pub cpu: String,
    /// The cores this process may use.
    pub cores: usize,
    /// The kernel release.
    pub kernel: String,
}

/// One target: the best run of each, every run's ratio.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ResultRow {
    /// The target, as the report's table names it.
    pub name: String,
    /// The part (tree) it belongs to: `T10k`, `T100k`, `BIG` or `GROW`.
    pub tree: String,
    /// What was measured on sgard's side.
    pub sgard_what: String,
    /// sgard's value in the best run.
    pub sgard: Quantity,
    /// What sgard is measured against (a tool's command or a budget).
    pub reference_what: String,
    /// The reference's value in the best run.
    pub reference: Quantity,
    /// The best run's ratio (lowest for `at_most`, highest for
    /// `at_least`); `None` when no run measured it.
    pub best_ratio: Option<f64>,
    /// Every run's ratio, in run order (`None`: not measured).
    pub ratios: Vec<Option<f64>>,
    pub limit: Limit,
    /// Whether the best ratio meets the limit; `None`: not measured.
    pub met: Option<bool>,
}

/// A measured value as the report prints it, and as a number and unit when
/// the text is `NUMBER UNIT…` (`0.123 s`, `2.50 ms`, `96.6 MiB`, `412 MB/s`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Quantity {
    pub text: String,
    pub value: Option<f64>,
    pub unit: Option<String>,
}

impl Quantity {
    /// Reads the number and unit at the start of `text`.
    pub fn parse(text: &str) -> Self {
        let mut words = text.split_whitespace();
        let value = words.next().and_then(|w| w.parse::<f64>().ok());
        let unit = value
            .and(words.next())
            .map(|u| u.trim_end_matches([',', ';']).to_owned());
        Quantity {
            text: text.to_owned(),
            value,
            unit,
        }
    }
}

/// A bound on a ratio.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Limit {
    AtMost(f64),
    AtLeast(f64),
}

impl Limit {
    pub fn met(self, ratio: f64) -> bool {
        match self {
            Limit::AtMost(l) => ratio <= l,
            Limit::AtLeast(l) => ratio >= l,
        }
    }

    pub fn value(self) -> f64 {
        match self {
            Limit::AtMost(l) | Limit::AtLeast(l) => l,
        }
    }

    pub fn describe(self) -> String {
        match self {
            Limit::AtMost(l) => format!("≤ {l:.2}"),
            Limit::AtLeast(l) => format!("≥ {l:.2}"),
        }
    }
}

/// A ratio to two decimals, or three when two would round it onto the limit
/// (so a "no" never reads `1.00 ≤ 1.00`).
pub fn ratio_text(x: f64, limit: Limit) -> String {
    let l = limit.value();
    let two = format!("{x:.2}");
    if two == format!("{l:.2}") && x != l {
        format!("{x:.3}")
    } else {
        two
    }
}

impl Results {
    /// Writes the results, pretty-printed, to `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut text = serde_json::to_string_pretty(self).context("encoding the results")?;
        text.push('\n');
        fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    }

    /// Reads a file `write` wrote.
    pub fn read(path: &Path) -> Result<Self> {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let r: Results = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a `compare --json` file", path.display()))?;
        if r.schema != SCHEMA {
            bail!(
                "{}: schema {}, this sgard-bench reads schema {SCHEMA}",
                path.display(),
                r.schema
            );
        }
        Ok(r)
    }
}

/// The current time, UTC, to the second.
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The commit of the source tree this binary was built from, and whether
/// its tracked files have changes; `(None, None)` when that tree is gone or
/// git cannot tell.
pub fn source_commit() -> (Option<String>, Option<bool>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "HEAD"]).filter(|c| !c.is_empty());
    let dirty = commit
        .as_ref()
        .and_then(|_| git(&["status", "--porcelain", "--untracked-files=no"]))
        .map(|s| !s.is_empty());
    (commit, dirty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_number_and_unit() {
        let q = Quantity::parse("2.50 ms");
        assert_eq!((q.value, q.unit.as_deref()), (Some(2.5), Some("ms")));
        let q = Quantity::parse("64.0 MiB (12.3 MiB)");
        assert_eq!((q.value, q.unit.as_deref()), (Some(64.0), Some("MiB")));
        let q = Quantity::parse("n/a");
        assert_eq!((q.value, q.unit), (None, None));
        assert_eq!(q.text, "n/a");
    }

    #[test]
    fn limits_round_trip_as_kind_and_value() {
        let json = serde_json::to_string(&Limit::AtLeast(0.8)).unwrap_or_default();
        assert_eq!(json, r#"{"kind":"at_least","value":0.8}"#);
        let back: Limit = serde_json::from_str(&json).unwrap_or(Limit::AtMost(0.0));
        assert_eq!(back, Limit::AtLeast(0.8));
    }
}
