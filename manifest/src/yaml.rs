//! The YAML layer: raw serde structs for reading, a small emitter for writing.
//!
//! Reading goes through serde-saphyr into permissive raw structs (unknown
//! fields ignored, as the Go sgard does); validation into the typed model
//! happens in `lib.rs`. Writing is done by hand so the output matches the Go
//! sgard's yaml.v3 layout (4-space indents, list items indented under their
//! key, plain timestamps, quoted modes) and diffs cleanly under git.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Deserialize;

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct RawManifest {
    pub version: Option<u64>,
    pub created: Option<String>,
    pub updated: Option<String>,
    pub message: Option<String>,
    pub files: Option<Vec<RawEntry>>,
    pub exclude: Option<Vec<String>>,
    pub encryption: Option<RawEncryption>,
    pub absent: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct RawEntry {
    pub path: Option<String>,
    pub hash: Option<String>,
    pub plaintext_hash: Option<String>,
    pub plaintext_mac: Option<String>,
    pub encrypted: Option<bool>,
    pub locked: Option<bool>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub mode: Option<String>,
    pub target: Option<String>,
    pub updated: Option<String>,
    pub only: Option<Vec<String>>,
    pub never: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct RawEncryption {
    pub algorithm: Option<String>,
    pub kek_slots: Option<BTreeMap<String, RawSlot>>,
    pub retired_deks: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct RawSlot {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub argon2_time: Option<u64>,
    pub argon2_memory: Option<u64>,
    pub argon2_threads: Option<u64>,
    pub credential_id: Option<String>,
    pub salt: Option<String>,
    pub wrapped_dek: Option<String>,
}

/// Builds YAML text line by line.
pub(crate) struct Emitter {
    out: String,
}

impl Emitter {
    pub fn new() -> Self {
        Emitter { out: String::new() }
    }

    pub fn finish(self) -> String {
        self.out
    }

    /// `key: value` with the value rendered as a safe scalar.
    pub fn str(&mut self, indent: usize, key: &str, value: &str) {
        let v = scalar(value);
        self.raw(indent, key, &v);
    }

    /// `key: value` with the value written as is (numbers, bools, timestamps).
    pub fn raw(&mut self, indent: usize, key: &str, value: &str) {
        let _ = writeln!(self.out, "{:indent$}{key}: {value}", "");
    }

    /// `key:` opening a nested block.
    pub fn open(&mut self, indent: usize, key: &str) {
        let _ = writeln!(self.out, "{:indent$}{key}:", "");
    }

    /// A list of strings under `key`, items indented 4 deeper than the key.
    pub fn list(&mut self, indent: usize, key: &str, items: &[String]) {
        if items.is_empty() {
            self.raw(indent, key, "[]");
            return;
        }
        self.open(indent, key);
        for it in items {
            let _ = writeln!(self.out, "{:w$}- {}", "", scalar(it), w = indent + 4);
        }
    }

    /// Starts a list item (`- key: value`) at `indent`.
    pub fn item(&mut self, indent: usize, key: &str, value: &str) {
        let _ = writeln!(self.out, "{:indent$}- {key}: {}", "", scalar(value));
    }
}

/// Renders a string as a YAML scalar: plain when that reads back as the same
/// string, double-quoted with escapes otherwise.
pub(crate) fn scalar(s: &str) -> String {
    // serde-saphyr knows which plain scalars are safe (not bool/null/number,
    // no indicators); use it as the oracle, and quote ourselves otherwise.
    if let Ok(text) = serde_saphyr::to_string(&s)
        && text.strip_suffix('\n') == Some(s)
        && !s.is_empty()
        && !s.contains('\n')
        && !s.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c))
    {
        return s.to_owned();
    }
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            '\r' => q.push_str("\\r"),
            c if (c as u32) < 0x20
                || c == '\u{7f}'
                || (('\u{80}'..='\u{9f}').contains(&c) && c != '\u{85}') =>
            {
                let _ = write!(q, "\\x{:02x}", c as u32);
            }
            c if matches!(
                c,
                '\u{85}' | '\u{a0}' | '\u{2028}' | '\u{2029}' | '\u{feff}'
            ) =>
            {
                let _ = write!(q, "\\u{:04x}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}
