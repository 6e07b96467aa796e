//! The YAML layer: raw serde structs for reading, a small emitter for writing.
//!
//! Reading goes through serde-saphyr into permissive raw structs (unknown
//! fields ignored, as the Go sgard does); validation into the typed model
//! happens in `lib.rs`. Writing is done by hand so the output matches the Go
//! sgard's yaml.v3 layout (4-space indents, list items indented under their
//! key, plain timestamps, quoted modes) and diffs cleanly under git.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;
use serde::de::{IgnoredAny, SeqAccess, Visitor};

use crate::Entry;

/// serde-saphyr's options for reading `text`: its defaults, with the
/// budget of nodes, events and scalar bytes raised to what text of that
/// length can hold. The defaults (250,000 nodes) refuse a manifest of
/// 25,000 entries, which sgard itself writes; a budget that grows with the
/// input still keeps the reader's work and memory linear in it (aliases,
/// which could multiply it, keep their default limits).
pub(crate) fn options_for(text: &str) -> serde_saphyr::Options {
    let n = text.len();
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = budget.max_nodes.max(n);
    budget.max_events = budget.max_events.max(n.saturating_mul(2));
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(n);
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// Parses `text` as YAML into `T` (see [`options_for`]).
pub(crate) fn from_str<'de, T: Deserialize<'de>>(text: &'de str) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, options_for(text))
}

/// What serde-saphyr says about YAML it cannot read from `origin`: the
/// line and column, then the offending lines marked, named by the file's
/// name. Its own `error: ` in front is dropped, since whoever prints the
/// message says it is an error.
pub fn yaml_message(e: &serde_saphyr::Error, origin: &Path) -> String {
    let name = origin
        .file_name()
        .map_or_else(|| origin.to_string_lossy(), |n| n.to_string_lossy());
    let text = e.render_with_options(serde_saphyr::render_options! {
        source_name: Some(&name),
    });
    let text = text.trim_end();
    text.strip_prefix("error: ").unwrap_or(text).to_owned()
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct RawManifest {
    pub version: Option<u64>,
    pub created: Option<String>,
    pub updated: Option<String>,
    pub message: Option<String>,
    pub files: Option<Files>,
    pub exclude: Option<Vec<String>>,
    pub encryption: Option<RawEncryption>,
    pub absent: Option<Vec<String>>,
    pub data: Option<String>,
    pub folders: Option<Vec<RawFolder>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct RawFolder {
    pub path: Option<String>,
    pub mode: Option<String>,
}

/// A string as read: borrowed from the text where it stands there as it
/// is (most do), owned where quoting or escapes made it differ. An entry's
/// hashes, type, mode and time are parsed and dropped, so borrowing them
/// saves five allocations an entry.
#[derive(Default)]
pub(crate) struct Text<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }
        d.deserialize_str(V).map(Text)
    }
}

impl std::fmt::Debug for Text<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct RawEntry<'a> {
    #[serde(borrow)]
    pub path: Option<Text<'a>>,
    #[serde(borrow)]
    pub hash: Option<Text<'a>>,
    #[serde(borrow)]
    pub plaintext_hash: Option<Text<'a>>,
    #[serde(borrow)]
    pub plaintext_mac: Option<Text<'a>>,
    #[serde(borrow)]
    pub purged: Option<Text<'a>>,
    pub encrypted: Option<bool>,
    pub locked: Option<bool>,
    #[serde(rename = "type", borrow)]
    pub kind: Option<Text<'a>>,
    #[serde(borrow)]
    pub mode: Option<Text<'a>>,
    pub target: Option<String>,
    #[serde(borrow)]
    pub updated: Option<Text<'a>>,
    pub only: Option<Vec<String>>,
    pub never: Option<Vec<String>>,
    #[serde(borrow)]
    pub run: Option<Text<'a>>,
}

/// The `files` list, each entry converted ([`crate::validate_entry`]) as
/// soon as it is read, so a big manifest never holds the raw form of all
/// its entries at once. The first entry that does not convert is kept
/// (its number from 1, its path as written, why); the rest are read past.
#[derive(Default)]
pub(crate) struct Files {
    pub entries: Vec<Entry>,
    pub failed: Option<(usize, String, String)>,
}

impl<'de> Deserialize<'de> for Files {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Files;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of entries")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Files, A::Error> {
                let mut files = Files::default();
                let room = seq.size_hint().unwrap_or(0).min(crate::codec::MAX_RESERVE);
                files.entries.reserve_exact(room);
                while let Some(mut raw) = seq.next_element::<RawEntry<'de>>()? {
                    let path = raw.path.take();
                    match crate::validate_entry(path.as_deref(), raw) {
                        Ok(e) => files.entries.push(e),
                        Err(reason) => {
                            let shown = path.map_or_else(|| "<no path>".into(), |p| p.0.into());
                            files.failed = Some((files.entries.len() + 1, shown, reason));
                            while seq.next_element::<IgnoredAny>()?.is_some() {}
                            break;
                        }
                    }
                }
                files.entries.shrink_to_fit();
                Ok(files)
            }
        }
        d.deserialize_seq(V)
    }
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

/// Builds YAML text line by line: into one string, or (with a sink) in
/// pieces of about [`SPILL_AT`] bytes handed to the sink as they fill.
pub(crate) struct Emitter<'a> {
    out: String,
    sink: Option<&'a mut dyn std::io::Write>,
    /// The first error of the sink; nothing more is written after it.
    failed: Option<std::io::Error>,
}

/// How much text an emitter with a sink holds before handing it on.
const SPILL_AT: usize = 64 * 1024;

impl<'a> Emitter<'a> {
    pub fn new() -> Self {
        Emitter {
            out: String::new(),
            sink: None,
            failed: None,
        }
    }

    /// An emitter writing to `sink` as it goes (see [`Emitter::spill`]).
    pub fn to_sink(sink: &'a mut dyn std::io::Write) -> Self {
        Emitter {
            out: String::with_capacity(SPILL_AT * 2),
            sink: Some(sink),
            failed: None,
        }
    }

    /// With a sink: hands it the text so far once there is enough of it
    /// (called between items, so memory stays bounded whatever the size).
    pub fn spill(&mut self) {
        if self.out.len() >= SPILL_AT {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if let Some(sink) = self.sink.as_mut() {
            if self.failed.is_none()
                && let Err(e) = sink.write_all(self.out.as_bytes())
            {
                self.failed = Some(e);
            }
            self.out.clear();
        }
    }

    pub fn finish(self) -> String {
        self.out
    }

    /// With a sink: writes what is left; the sink's first error, if any.
    pub fn finish_to_sink(mut self) -> std::io::Result<()> {
        self.flush();
        match self.failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// `key: value` with the value rendered as a safe scalar.
    pub fn str(&mut self, indent: usize, key: &str, value: &str) {
        let v = scalar(value);
        self.raw(indent, key, &v);
    }

    fn pad(&mut self, indent: usize) {
        self.out.extend(std::iter::repeat_n(' ', indent));
    }

    /// `key: value` with the value written as is (numbers, bools, timestamps).
    pub fn raw(&mut self, indent: usize, key: &str, value: &str) {
        self.pad(indent);
        self.out.push_str(key);
        self.out.push_str(": ");
        self.out.push_str(value);
        self.out.push('\n');
    }

    /// `key: value` with the value written by its `Display` (no temporary
    /// string).
    pub fn display(&mut self, indent: usize, key: &str, value: &dyn std::fmt::Display) {
        self.pad(indent);
        let _ = writeln!(self.out, "{key}: {value}");
    }

    /// `key:` opening a nested block.
    pub fn open(&mut self, indent: usize, key: &str) {
        self.pad(indent);
        self.out.push_str(key);
        self.out.push_str(":\n");
    }

    /// A list of strings under `key`, items indented 4 deeper than the key.
    pub fn list<S: AsRef<str>>(&mut self, indent: usize, key: &str, items: &[S]) {
        if items.is_empty() {
            self.raw(indent, key, "[]");
            return;
        }
        self.open(indent, key);
        for it in items {
            self.spill();
            self.pad(indent + 4);
            self.out.push_str("- ");
            self.out.push_str(&scalar(it.as_ref()));
            self.out.push('\n');
        }
    }

    /// Starts a list item (`- key: value`) at `indent`.
    pub fn item(&mut self, indent: usize, key: &str, value: &str) {
        self.pad(indent);
        self.out.push_str("- ");
        self.raw(0, key, &scalar(value));
    }
}

/// Whether `s` is a path that reads back as itself as a plain scalar without
/// asking the oracle: `~/` or `/` then only letters, digits and `/._-`.
/// Nearly every tracked path is one, and asking serde-saphyr costs a whole
/// serializer run per string.
fn plain_path(s: &str) -> bool {
    let rest = match s.strip_prefix("~/") {
        Some(r) => r,
        None => match s.strip_prefix('/') {
            Some(r) => r,
            None => return false,
        },
    };
    rest.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-'))
}

/// Renders a string as a YAML scalar: plain when that reads back as the same
/// string, double-quoted with escapes otherwise.
pub(crate) fn scalar(s: &str) -> std::borrow::Cow<'_, str> {
    if plain_path(s) || oracle_says_plain(s) {
        return std::borrow::Cow::Borrowed(s);
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
    std::borrow::Cow::Owned(q)
}

/// serde-saphyr knows which plain scalars are safe (not bool/null/number, no
/// indicators): it is the oracle; we quote ourselves otherwise.
fn oracle_says_plain(s: &str) -> bool {
    matches!(serde_saphyr::to_string(&s), Ok(text) if text.strip_suffix('\n') == Some(s))
        && !s.is_empty()
        && !s.contains('\n')
        && !s.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_are_what_the_oracle_calls_plain() {
        // Every short string over the alphabet, behind each prefix, plus
        // longer deterministic ones.
        let alphabet = ["a", "Z", "0", "9", "/", ".", "_", "-"];
        let mut cases = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = cases
                .iter()
                .flat_map(|c| alphabet.iter().map(move |a| format!("{c}{a}")))
                .collect();
            cases.extend(longer);
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut s = String::new();
            for _ in 0..(x % 40) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                s.push_str(alphabet[(x % 8) as usize]);
            }
            cases.push(s);
        }
        for c in &cases {
            for prefix in ["~/", "/", "", "~", "a/"] {
                let s = format!("{prefix}{c}");
                if plain_path(&s) {
                    assert!(oracle_says_plain(&s), "{s:?} is not plain");
                }
            }
        }
        assert!(plain_path("~/.config/nvim/init.lua"));
        assert!(!plain_path("~"));
        assert!(!plain_path("~/a b"));
        assert!(!plain_path("~/a:b"));
        assert!(!plain_path("relative"));
    }
}
