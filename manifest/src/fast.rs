//! A fast reader for the YAML that sgard itself writes.
//!
//! [`Manifest::to_yaml`](crate::Manifest::to_yaml) and
//! [`History::to_yaml`](crate::history::History::to_yaml) emit a small,
//! regular subset of YAML: `key: value` lines at fixed columns, block
//! sequences indented 2 or 4 columns under their key, `[]` for empty lists,
//! and scalars that are either plain or double-quoted with a handful of
//! escapes. The Go sgard's yaml.v3 output for the same data has the same
//! shape (it may also single-quote).
//!
//! This module reads exactly that subset, line by line, into the same raw
//! structs serde-saphyr fills, so validation is unchanged. It gives up
//! (returns `None`) on anything it does not fully understand — comments,
//! flow collections other than `[]`, anchors, tags, block scalars, tabs,
//! other indentation, duplicate or unknown keys, unknown escapes, plain
//! scalars a YAML reader might not read as the same string, the
//! `encryption` section, CR, BOM, blank lines — and the caller then uses
//! serde-saphyr, which stays the reference reader (and the one whose error
//! messages users see).

use crate::history::{RawHistory, RawRecord};
use crate::yaml::{RawEntry, RawFolder, RawManifest};

/// Reads manifest text, or `None` when it is not in the subset.
#[cfg(test)]
pub(crate) fn manifest(text: &str) -> Option<RawManifest> {
    let (mut m, files) = manifest_with(text, Some)?;
    m.files = files;
    Some(m)
}

/// Reads manifest text with each entry converted as soon as it is read
/// (see [`crate::validate_entry`]), or `None` when it is not in the subset
/// or an entry does not convert (the caller's serde-saphyr path then
/// reports that entry as it always did). `raw.files` stays unset.
pub(crate) fn manifest_checked(text: &str) -> Option<(RawManifest, Vec<crate::Entry>)> {
    let (m, files) = manifest_with(text, |r| crate::validate_entry(r).ok())?;
    let mut files = files.unwrap_or_default();
    files.shrink_to_fit();
    Some((m, files))
}

/// Reads manifest text, turning each entry into a `T` with `item` as it
/// goes (so no list of raw entries is held); the list, if the text has a
/// `files` key, is returned beside the rest.
fn manifest_with<T>(
    text: &str,
    mut item: impl FnMut(RawEntry) -> Option<T>,
) -> Option<(RawManifest, Option<Vec<T>>)> {
    let mut p = Parser::new(text)?;
    let mut m = RawManifest::default();
    let mut files = None;
    while let Some(line) = p.next() {
        if line.indent != 0 {
            return None;
        }
        let (key, value) = key_value(line.text)?;
        match key {
            "version" => set(&mut m.version, uint(value?)?)?,
            "created" => set(&mut m.created, string(value?)?)?,
            "updated" => set(&mut m.updated, string(value?)?)?,
            "message" => set(&mut m.message, string(value?)?)?,
            "data" => set(&mut m.data, string(value?)?)?,
            "files" => {
                // Each entry starts with `- path:` (sgard and Go write it
                // first): room for that many, bounded by the text's length,
                // instead of doubling (at 100,000 entries, room for 131,072
                // was 7 MB more than the entries).
                let expected = text.matches("- path:").count();
                let v = p.seq_sized(0, value, expected, |p, first, col| {
                    item(p.entry(first, col)?)
                })?;
                set(&mut files, v)?;
            }
            "exclude" => {
                let v = p.seq(0, value, string_item)?;
                set(&mut m.exclude, v)?;
            }
            "absent" => {
                let v = p.seq(0, value, string_item)?;
                set(&mut m.absent, v)?;
            }
            "folders" => {
                let v = p.seq(0, value, Parser::folder)?;
                set(&mut m.folders, v)?;
            }
            // `encryption` and anything unknown: serde-saphyr's business.
            _ => return None,
        }
    }
    Some((m, files))
}

/// Reads history text, or `None` when it is not in the subset.
pub(crate) fn history(text: &str) -> Option<RawHistory> {
    let mut p = Parser::new(text)?;
    let mut h = RawHistory::default();
    while let Some(line) = p.next() {
        if line.indent != 0 {
            return None;
        }
        let (key, value) = key_value(line.text)?;
        match key {
            "version" => set(&mut h.version, uint(value?)?)?,
            "snapshots" => {
                let records = p.seq(0, value, Parser::record)?;
                set(&mut h.snapshots, records)?;
            }
            _ => return None,
        }
    }
    Some(h)
}

/// One line: its leading spaces and the (non-empty) rest.
#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    text: &'a str,
}

/// Reads lines one at a time (a list of every line of a 100,000-entry
/// manifest was as big as its text).
struct Parser<'a> {
    /// The line under the cursor.
    cur: Option<Line<'a>>,
    /// What follows it.
    rest: Option<&'a str>,
}

impl<'a> Parser<'a> {
    /// Checks `text` for characters and layouts the subset never has:
    /// control characters (tab, CR, …), DEL, C1 controls, BOM and the
    /// Unicode line separators anywhere; blank lines; trailing spaces.
    fn new(text: &'a str) -> Option<Self> {
        if !text.bytes().all(|b| (b >= 0x20 && b != 0x7f) || b == b'\n') {
            return None;
        }
        if !text.is_ascii() && text.chars().any(refused_char) {
            return None;
        }
        let body = text.strip_suffix('\n').unwrap_or(text);
        for raw in body.split('\n') {
            let rest = raw.trim_start_matches(' ');
            if rest.is_empty() || rest.ends_with(' ') {
                return None;
            }
        }
        let mut p = Parser {
            cur: None,
            rest: Some(body),
        };
        p.advance();
        Some(p)
    }

    /// Moves the cursor to the next line.
    fn advance(&mut self) {
        let Some(r) = self.rest else {
            self.cur = None;
            return;
        };
        let (raw, more) = match r.split_once('\n') {
            Some((l, m)) => (l, Some(m)),
            None => (r, None),
        };
        self.rest = more;
        let text = raw.trim_start_matches(' ');
        self.cur = Some(Line {
            indent: raw.len() - text.len(),
            text,
        });
    }

    fn peek(&self) -> Option<Line<'a>> {
        self.cur
    }

    fn next(&mut self) -> Option<Line<'a>> {
        let line = self.cur?;
        self.advance();
        Some(line)
    }

    /// The value of a list-valued key at column `key_col`: `[]`, or a block
    /// sequence on the following lines with its dashes 2 or 4 columns deeper
    /// than the key. `item` reads one item from the text after `- ` (at
    /// column `dash + 2`) and any further lines that belong to it.
    fn seq<T>(
        &mut self,
        key_col: usize,
        value: Option<&str>,
        item: impl FnMut(&mut Self, &'a str, usize) -> Option<T>,
    ) -> Option<Vec<T>> {
        self.seq_sized(key_col, value, 0, item)
    }

    /// As [`Parser::seq`], with room for `expected` items reserved up front.
    fn seq_sized<T>(
        &mut self,
        key_col: usize,
        value: Option<&str>,
        expected: usize,
        mut item: impl FnMut(&mut Self, &'a str, usize) -> Option<T>,
    ) -> Option<Vec<T>> {
        match value {
            Some("[]") => return Some(Vec::new()),
            Some(_) => return None,
            None => {}
        }
        // `key:` with nothing under it is null, and a sequence at the key's
        // own column is legal YAML but not ours: leave both to serde.
        let dash = self.peek()?.indent;
        if dash != key_col + 2 && dash != key_col + 4 {
            return None;
        }
        let mut out = Vec::with_capacity(expected);
        while let Some(line) = self.peek() {
            if line.indent < dash {
                break;
            }
            if line.indent > dash {
                return None;
            }
            let rest = line.text.strip_prefix("- ")?;
            self.advance();
            out.push(item(self, rest, dash + 2)?);
        }
        Some(out)
    }

    /// The lines of one mapping item whose first `key: value` is `first`,
    /// all keys at column `col`, each handled by `field`.
    fn mapping<T: Default>(
        &mut self,
        first: &'a str,
        col: usize,
        field: fn(&mut Self, &mut T, &'a str, Option<&'a str>, usize) -> Option<()>,
    ) -> Option<T> {
        let mut t = T::default();
        let (key, value) = key_value(first)?;
        field(self, &mut t, key, value, col)?;
        while let Some(line) = self.peek() {
            if line.indent < col {
                break;
            }
            if line.indent > col {
                return None;
            }
            self.advance();
            let (key, value) = key_value(line.text)?;
            field(self, &mut t, key, value, col)?;
        }
        Some(t)
    }

    fn entry(&mut self, first: &'a str, col: usize) -> Option<RawEntry> {
        self.mapping(first, col, Self::entry_field)
    }

    fn entry_field(
        &mut self,
        e: &mut RawEntry,
        key: &str,
        value: Option<&'a str>,
        col: usize,
    ) -> Option<()> {
        match key {
            "path" => set(&mut e.path, string(value?)?),
            "hash" => set(&mut e.hash, string(value?)?),
            "plaintext_hash" => set(&mut e.plaintext_hash, string(value?)?),
            "plaintext_mac" => set(&mut e.plaintext_mac, string(value?)?),
            "encrypted" => set(&mut e.encrypted, boolean(value?)?),
            "locked" => set(&mut e.locked, boolean(value?)?),
            "type" => set(&mut e.kind, string(value?)?),
            "mode" => set(&mut e.mode, string(value?)?),
            "target" => set(&mut e.target, string(value?)?),
            "run" => set(&mut e.run, string(value?)?),
            "updated" => set(&mut e.updated, string(value?)?),
            "only" => {
                let v = self.seq(col, value, string_item)?;
                set(&mut e.only, v)
            }
            "never" => {
                let v = self.seq(col, value, string_item)?;
                set(&mut e.never, v)
            }
            _ => None,
        }
    }

    fn folder(&mut self, first: &'a str, col: usize) -> Option<RawFolder> {
        self.mapping(first, col, Self::folder_field)
    }

    fn folder_field(
        &mut self,
        f: &mut RawFolder,
        key: &str,
        value: Option<&'a str>,
        _col: usize,
    ) -> Option<()> {
        match key {
            "path" => set(&mut f.path, string(value?)?),
            "mode" => set(&mut f.mode, string(value?)?),
            _ => None,
        }
    }

    fn record(&mut self, first: &'a str, col: usize) -> Option<RawRecord> {
        self.mapping(first, col, Self::record_field)
    }

    fn record_field(
        &mut self,
        r: &mut RawRecord,
        key: &str,
        value: Option<&'a str>,
        _col: usize,
    ) -> Option<()> {
        let value = value?;
        match key {
            "id" => set(&mut r.id, string(value)?),
            "parent" => set(&mut r.parent, string(value)?),
            "time" => set(&mut r.time, string(value)?),
            "host" => set(&mut r.host, string(value)?),
            "machine" => set(&mut r.machine, string(value)?),
            "reason" => set(&mut r.reason, string(value)?),
            "message" => set(&mut r.message, string(value)?),
            "entries" => set(&mut r.entries, uint(value)?),
            "bytes" => set(&mut r.bytes, uint(value)?),
            "new_blobs" => set(&mut r.new_blobs, uint(value)?),
            "head_before" => set(&mut r.head_before, string(value)?),
            _ => None,
        }
    }
}

/// Fills a field once; a second time (a duplicate key) refuses.
fn set<T>(slot: &mut Option<T>, v: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(v);
    Some(())
}

/// Characters refused anywhere in the text (beyond ASCII controls): C1
/// controls, NEL and NBSP (which the emitter escapes), the Unicode line and
/// paragraph separators, BOM and the two non-characters.
fn refused_char(c: char) -> bool {
    matches!(
        c,
        '\u{80}'..='\u{a0}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
    )
}

/// Splits `key: value` or `key:`; the key must be a lowercase word and the
/// value must follow a single space.
fn key_value(text: &str) -> Option<(&str, Option<&str>)> {
    let colon = text.find(':')?;
    let key = &text[..colon];
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return None;
    }
    let after = &text[colon + 1..];
    if after.is_empty() {
        return Some((key, None));
    }
    let value = after.strip_prefix(' ')?;
    if value.is_empty() || value.starts_with(' ') {
        return None;
    }
    Some((key, Some(value)))
}

fn string_item<'a>(_: &mut Parser<'a>, text: &'a str, _: usize) -> Option<String> {
    string(text)
}

/// A string scalar that ends its line: double-quoted, single-quoted or plain.
fn string(v: &str) -> Option<String> {
    match *v.as_bytes().first()? {
        b'"' => double_quoted(&v[1..]),
        b'\'' => single_quoted(&v[1..]),
        _ => plain_is_string(v).then(|| v.to_owned()),
    }
}

/// The rest of a double-quoted scalar after its opening quote; only the
/// escapes [`crate::yaml::scalar`] writes are understood.
fn double_quoted(body: &str) -> Option<String> {
    let inner = body.strip_suffix('"')?;
    if !inner.contains(['"', '\\']) {
        return Some(inner.to_owned());
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return None,
            '\\' => {
                let c = match chars.next()? {
                    '"' => '"',
                    '\\' => '\\',
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    'x' => char::from_u32(hex(&mut chars, 2)?).filter(char::is_ascii)?,
                    'u' => char::from_u32(hex(&mut chars, 4)?)?,
                    _ => return None,
                };
                out.push(c);
            }
            c => out.push(c),
        }
    }
    Some(out)
}

fn hex(chars: &mut std::str::Chars<'_>, digits: usize) -> Option<u32> {
    let mut v = 0;
    for _ in 0..digits {
        v = v * 16 + chars.next()?.to_digit(16)?;
    }
    Some(v)
}

/// The rest of a single-quoted scalar after its opening quote (`''` is a
/// quote).
fn single_quoted(body: &str) -> Option<String> {
    let inner = body.strip_suffix('\'')?;
    let mut out = String::with_capacity(inner.len());
    for (i, part) in inner.split("''").enumerate() {
        if part.contains('\'') {
            return None;
        }
        if i > 0 {
            out.push('\'');
        }
        out.push_str(part);
    }
    Some(out)
}

/// Whether a plain scalar (already known to have no control characters and
/// no leading or trailing space) reads as exactly this string under any YAML
/// 1.1 or 1.2 resolver: it does not start with an indicator, contains no
/// `: ` or ` #`, does not end with `:`, and is not null, a boolean, a number
/// or a date. Deliberately stricter than YAML (`-x` and `?x` are refused);
/// a refusal only costs the slow path.
fn plain_is_string(v: &str) -> bool {
    let Some(&first) = v.as_bytes().first() else {
        return false;
    };
    if b" -?:,[]{}#&*!|>'\"%@`".contains(&first)
        || v.ends_with(':')
        || v.contains(": ")
        || v.contains(" #")
        || v.starts_with("---")
        || v.starts_with("...")
        || looks_typed(v)
    {
        return false;
    }
    // Unicode spaces: YAML only knows ASCII ones, but stay clear of readers
    // that treat them as separators.
    v.is_ascii() || !v.chars().any(|c| c != ' ' && c.is_whitespace())
}

/// Whether a plain scalar could resolve to something other than a string:
/// null, a YAML 1.1 or 1.2 boolean, an integer or float in any spelling
/// (sign, radix, underscores, exponent, base 60, `.inf`), or a bare date.
fn looks_typed(v: &str) -> bool {
    const WORDS: [&str; 18] = [
        "~", "null", "true", "false", "yes", "no", "on", "off", "y", "n", "nan", "inf", ".inf",
        ".nan", "<<", "=", "", ".",
    ];
    let unsigned = v.strip_prefix(['+', '-']).unwrap_or(v);
    if WORDS.iter().any(|w| unsigned.eq_ignore_ascii_case(w)) {
        return true;
    }
    let b = v.as_bytes();
    if !matches!(b.first(), Some(b'0'..=b'9' | b'+' | b'-' | b'.' | b'_')) {
        return false;
    }
    let numeric = |c: &u8| {
        matches!(
            c,
            b'0'..=b'9' | b'+' | b'-' | b'.' | b'_' | b':' | b'e' | b'E'
        )
    };
    if b.iter().all(numeric) {
        return true;
    }
    let digits = |rest: &str, ok: fn(u8) -> bool| {
        rest.bytes()
            .all(|c| ok(c) || matches!(c, b'_' | b'+' | b'-'))
    };
    match unsigned.as_bytes() {
        [b'0', b'x' | b'X', ..] => digits(&unsigned[2..], |c| c.is_ascii_hexdigit()),
        [b'0', b'o' | b'O', ..] => digits(&unsigned[2..], |c| (b'0'..=b'7').contains(&c)),
        [b'0', b'b' | b'B', ..] => digits(&unsigned[2..], |c| c == b'0' || c == b'1'),
        _ => false,
    }
}

/// An unsigned integer as sgard writes it: decimal digits, no leading zero.
fn uint(v: &str) -> Option<u64> {
    if !v.bytes().all(|b| b.is_ascii_digit()) || (v.len() > 1 && v.starts_with('0')) {
        return None;
    }
    v.parse().ok()
}

fn boolean(v: &str) -> Option<bool> {
    match v {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::history::{History, Reason, Record};
    use crate::{Entry, EntryKind, Hash, Manifest, Mode, Timestamp, validate};

    const H1: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

    fn ts(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    fn dump_entry(e: &RawEntry) -> String {
        format!(
            "{:?}",
            (
                &e.path,
                &e.hash,
                &e.plaintext_hash,
                &e.plaintext_mac,
                e.encrypted,
                e.locked,
                &e.kind,
                &e.mode,
                &e.target,
                &e.updated,
                &e.only,
                (&e.never, &e.run),
            )
        )
    }

    /// Everything in a raw manifest, for comparison (serde's structs have
    /// no `PartialEq`).
    fn dump(m: &RawManifest) -> String {
        let files: Option<Vec<String>> =
            m.files.as_ref().map(|f| f.iter().map(dump_entry).collect());
        format!(
            "{:?}",
            (
                m.version,
                &m.created,
                &m.updated,
                &m.message,
                files,
                &m.exclude,
                m.encryption.is_some(),
                &m.absent,
                m.folders
                    .as_ref()
                    .map(|v| v.iter().map(|f| (&f.path, &f.mode)).collect::<Vec<_>>()),
            )
        )
    }

    fn dump_history(h: &RawHistory) -> String {
        let records: Option<Vec<String>> = h.snapshots.as_ref().map(|s| {
            s.iter()
                .map(|r| {
                    format!(
                        "{:?}",
                        (
                            &r.id,
                            &r.parent,
                            &r.time,
                            &r.host,
                            &r.machine,
                            &r.reason,
                            &r.message,
                            r.entries,
                            r.bytes,
                            r.new_blobs,
                            &r.head_before,
                        )
                    )
                })
                .collect()
        });
        format!("{:?}", (h.version, records))
    }

    /// When the fast reader accepts `text`, checks that serde-saphyr reads
    /// the very same raw manifest and that both validate alike. Returns
    /// whether the fast path was taken.
    fn agrees(text: &str) -> bool {
        let Some(fast) = manifest(text) else {
            return false;
        };
        let slow: RawManifest = match serde_saphyr::from_str(text) {
            Ok(raw) => raw,
            Err(e) => panic!("fast path accepted what serde-saphyr refuses ({e}):\n{text}"),
        };
        assert_eq!(
            dump(&fast),
            dump(&slow),
            "raw manifests differ for:\n{text}"
        );
        let origin = Path::new("<test>");
        let a = validate(fast, origin).map_err(|e| e.to_string());
        let b = validate(slow, origin).map_err(|e| e.to_string());
        assert_eq!(a, b, "validated manifests differ for:\n{text}");
        // The real reader converts entries as it reads them.
        let c = Manifest::from_yaml_at(text, origin).map_err(|e| e.to_string());
        assert_eq!(c, b, "the entry-by-entry reader differs for:\n{text}");
        true
    }

    fn agrees_history(text: &str) -> bool {
        let Some(fast) = history(text) else {
            return false;
        };
        let slow: RawHistory = match serde_saphyr::from_str(text) {
            Ok(raw) => raw,
            Err(e) => panic!("fast path accepted what serde-saphyr refuses ({e}):\n{text}"),
        };
        assert_eq!(dump_history(&fast), dump_history(&slow), "for:\n{text}");
        true
    }

    /// Strings the emitter writes either plain or quoted, all of which the
    /// fast reader must take.
    const HOSTILE: &[&str] = &[
        "plain",
        "with space",
        "a#b",
        "a #b",
        "#start",
        "a: b",
        "a:b",
        "ends:",
        ":start",
        "'single'",
        "\"double\"",
        "it's",
        "say \"hi\"",
        "é",
        "日本語",
        "😀 emoji",
        "~",
        "~/x",
        "null",
        "Null",
        "NULL",
        "true",
        "False",
        "yes",
        "No",
        "on",
        "y",
        "123",
        "-1",
        "0644",
        "0x1F",
        "0o17",
        "0b101",
        "1e5",
        "1_000",
        ".inf",
        "-.inf",
        ".nan",
        "12:30:45",
        "2026-01-01",
        "2026-01-01T00:00:00Z",
        "",
        " lead",
        "trail ",
        "  ",
        "[x]",
        "x[y]",
        "{y: z}",
        "a{b}",
        "a,b",
        ",start",
        "*alias",
        "&anchor",
        "!tag",
        "!!str x",
        "|block",
        ">fold",
        "%dir",
        "@at",
        "`tick",
        "- dash",
        "-",
        "?",
        "? q",
        "---",
        "...",
        "--- x",
        "<<",
        "=",
        "back\\slash",
        "\\",
        "\\n",
        "ctl\u{1}x",
        "nul\0x",
        "bell\u{7}",
        "esc\u{1b}",
        "del\u{7f}",
        "tab\tx",
        "line\nbreak",
        "cr\rlf",
        "crlf\r\n",
        "nel\u{85}x",
        "ls\u{2028}x",
        "ps\u{2029}x",
        "bom\u{feff}x",
        "\u{feff}",
        "a/b/c.d",
    ];

    /// Strings the emitter writes plain that the fast reader refuses on
    /// purpose (it only costs the slow path).
    const SLOW_OK: &[&str] = &[
        "-dash",
        "?query",
        "nbsp\u{a0}x",
        "ideo\u{3000}space",
        "em\u{2003}space",
    ];

    fn hash(n: u64) -> Hash {
        Hash::of(&n.to_le_bytes())
    }

    fn rich_manifest(s: &str, n: u64) -> Manifest {
        let now = ts("2026-03-23T12:00:00.123456789Z");
        let mut m = Manifest::new(now);
        m.updated = ts("2026-03-24T08:30:00.5Z");
        m.message = Some(s.to_owned());
        // (Beside the folder entry below, not above it: nothing may be
        // tracked below a symlink.)
        let mut link = Entry::new(format!("~/{s}.l"), EntryKind::Link, now);
        link.target = Some(s.to_owned());
        link.mode = Some(Mode::from_st_mode(0o777));
        link.only = vec![s.to_owned(), "os:linux".into()];
        m.upsert(link);
        let mut file = Entry::new(format!("/{s}/f"), EntryKind::File, Timestamp::zero());
        file.hash = Some(hash(n));
        file.plaintext_mac = Some(hash(n + 1));
        file.plaintext_hash = Some(hash(n + 2));
        file.encrypted = true;
        file.locked = true;
        file.mode = Some(Mode::from_st_mode(0o4755));
        file.never = vec!["work".into(), s.to_owned()];
        m.upsert(file);
        let mut dir = Entry::new(format!("~/{s}/d"), EntryKind::Directory, now);
        dir.mode = Some(Mode::from_st_mode(0o700));
        m.upsert(dir);
        // Invalid paths still round-trip through the text; validation then
        // fails the same way on both paths.
        m.upsert(Entry::new(s.to_owned(), EntryKind::Directory, now));
        m.exclude = vec![format!("~/{s}"), s.to_owned()];
        m.absent = vec![format!("~/gone/{s}"), s.to_owned()];
        m.folders = vec![
            crate::FolderMode {
                path: format!("~/{s}"),
                mode: Mode::from_st_mode(0o700),
            },
            crate::FolderMode {
                path: s.to_owned(),
                mode: Mode::from_st_mode(0o2750),
            },
        ];
        m
    }

    /// [`rich_manifest`] without the entries and rules that fail validation.
    fn valid_rich_manifest(s: &str) -> Manifest {
        let mut m = rich_manifest(s, 1);
        m.files.retain(|e| crate::validate_path(&e.path).is_ok());
        m.exclude.retain(|p| crate::validate_path(p).is_ok());
        m.absent.retain(|p| crate::validate_path(p).is_ok());
        m.folders
            .retain(|f| f.path.starts_with("~/") && crate::validate_path(&f.path).is_ok());
        m
    }

    fn emitted_manifests() -> Vec<Manifest> {
        let now = ts("2026-03-23T12:00:00Z");
        let mut out = vec![Manifest::new(now)];
        let mut all = Manifest::new(now);
        for (i, s) in HOSTILE.iter().enumerate() {
            let m = rich_manifest(s, i as u64);
            for e in &m.files {
                all.upsert(e.clone());
            }
            out.push(m);
        }
        all.message = Some("multi\nline\n\tmessage: with # all \"sorts\"".into());
        out.push(all);
        let mut plain = Manifest::new(now);
        let mut e = Entry::new("~/.bashrc".into(), EntryKind::File, now);
        e.hash = Some(hash(7));
        e.mode = Some(Mode::from_st_mode(0o644));
        plain.upsert(e);
        plain.exclude = vec!["~/.cache".into()];
        out.push(plain);
        out
    }

    #[test]
    fn takes_and_matches_everything_the_emitter_writes() {
        for m in emitted_manifests() {
            let text = m.to_yaml();
            assert!(agrees(&text), "fast path not taken for:\n{text}");
            // And the public entry point gives the same manifest.
            let slow: RawManifest = serde_saphyr::from_str(&text).unwrap();
            let slow = validate(slow, Path::new("<input>")).map_err(|e| e.to_string());
            assert_eq!(Manifest::from_yaml(&text).map_err(|e| e.to_string()), slow);
        }
    }

    #[test]
    fn falls_back_on_emitted_text_it_does_not_claim() {
        for s in SLOW_OK {
            let m = rich_manifest(s, 1);
            let text = m.to_yaml();
            assert!(!agrees(&text), "{text}");
            let valid = valid_rich_manifest(s);
            let text = valid.to_yaml();
            assert!(manifest(&text).is_none(), "{text}");
            assert_eq!(Manifest::from_yaml(&text).unwrap(), valid);
        }
        // Encryption is always left to serde-saphyr.
        let mut m = valid_rich_manifest("x");
        m.encryption = Some(crate::Encryption {
            algorithm: "xchacha20-poly1305".into(),
            ..Default::default()
        });
        let text = m.to_yaml();
        assert!(manifest(&text).is_none());
        assert_eq!(Manifest::from_yaml(&text).unwrap(), m);
    }

    fn go_body() -> String {
        format!(
            "version: 1
created: 2026-03-23T12:00:00.123456789Z
updated: \"2026-03-24T08:30:00Z\"
message: first
files:
    - path: ~/.zshrc
      hash: {H1}
      type: file
      mode: \"0644\"
      updated: 2026-03-23T12:00:00.5Z
    - path: ~/.bashrc
      hash: {H1}
      locked: true
      type: file
      mode: \"0600\"
      updated: 2026-03-23T12:00:00Z
      only:
        - os:linux
        - work
    - path: ~/.hl
      type: link
      mode: \"0777\"
      target: /etc/hosts
      updated: 2026-03-23T12:00:00Z
    - path: /etc/app
      type: directory
      mode: \"0755\"
      updated: 0001-01-01T00:00:00Z
exclude:
    - ~/.config/app/sub
"
        )
    }

    fn go_samples() -> Vec<String> {
        let body = go_body();
        vec![
            body.clone(),
            body.trim_end().to_owned(),
            // Two-space sequences, as in the crate docs.
            format!(
                "version: 1\nfiles:\n  - path: ~/.bashrc\n    hash: {H1}\n    type: file\n    never:\n      - server\n"
            ),
            // Nested list 4 deeper than its key, as our emitter writes.
            body.replace("        - os:linux\n        - work", "          - os:linux\n          - work"),
            // Single quotes and quoted timestamps.
            format!(
                "version: 1\ncreated: '2026-03-23T12:00:00Z'\nmessage: 'it''s: fine # really'\nfiles:\n    - path: '~'\n      type: directory\n      mode: '0700'\n      updated: \"2026-03-23T12:00:00Z\"\n    - path: ~/l\n      type: link\n      target: ''\n    - path: ~/f\n      hash: {H1}\n      plaintext_hash: {H1}\n      encrypted: false\n      locked: false\n      type: file\n      only: []\n      never: []\n"
            ),
            "version: 1\nfiles: []\n".into(),
            "version: 1\nfiles: []\nexclude: []\nabsent: []\n".into(),
            "files: []\nversion: 1\n".into(),
            "version: 1\n".into(),
            "version: 2\nfiles: []\n".into(),
            "version: 0\n".into(),
            // Validation errors must come out the same.
            "version: 1\nfiles:\n    - path: ~/../x\n      type: directory\n".into(),
            "version: 1\nfiles:\n    - path: ~/x\n      type: file\n".into(),
            "version: 1\nfiles:\n    - type: file\n".into(),
            "version: 1\nfiles:\n    - path: \"\"\n      type: directory\n".into(),
            "version: 1\nfiles:\n    - path: ~/d\n      type: directory\n    - path: ~/d\n      type: directory\n".into(),
            format!("version: 1\nfiles:\n    - path: ~/f\n      hash: {H1}\n      type: file\n      mode: \"9999\"\n"),
            "version: 1\ncreated: soon\n".into(),
            "version: 1\nexclude:\n    - relative\n".into(),
        ]
    }

    #[test]
    fn takes_and_matches_go_style_manifests() {
        for text in go_samples() {
            assert!(agrees(&text), "fast path not taken for:\n{text}");
        }
        // The full Go sample (encryption, a future field) goes to serde.
        let full = format!(
            "{}encryption:\n    algorithm: xchacha20-poly1305\n    kek_slots: {{}}\nsome_future_field: ignored\n",
            go_body()
        );
        assert!(manifest(&full).is_none());
        assert!(Manifest::from_yaml(&full).unwrap().encryption.is_some());
    }

    #[test]
    fn refuses_what_it_does_not_understand() {
        let entry = "    - path: ~/a\n      type: directory\n";
        let cases: Vec<String> = vec![
            // Comments.
            format!("# comment\nversion: 1\nfiles:\n{entry}"),
            format!("version: 1 # comment\nfiles:\n{entry}"),
            format!("version: 1\nfiles: # comment\n{entry}"),
            "version: 1\nfiles: [] # comment\n".into(),
            "version: 1\nfiles:\n    - path: ~/a # comment\n      type: directory\n".into(),
            "version: 1\nfiles:\n    - path: \"~/a\" # comment\n      type: directory\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      # comment\n      type: directory\n".into(),
            // Anchors, aliases, tags, merge keys.
            "version: 1\nmessage: &m hello\n".into(),
            "version: 1\nmessage: *m\n".into(),
            "version: 1\nmessage: !!str hello\n".into(),
            "version: 1\nfiles:\n    - &e\n      path: ~/a\n".into(),
            "version: 1\nfiles:\n    - <<: *e\n".into(),
            // Flow collections.
            "version: 1\nfiles:\n    - {path: ~/d, type: directory}\n".into(),
            "version: 1\nfiles: [{path: ~/d, type: directory}]\n".into(),
            "version: 1\nfiles: [ ]\n".into(),
            "version: 1\nexclude: [~/a]\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: directory\n      only: [a]\n".into(),
            "{version: 1}\n".into(),
            // Tabs.
            "version:\t1\n".into(),
            "version: 1\nfiles:\n\t- path: ~/a\n".into(),
            "version: 1\nmessage: a\tb\n".into(),
            // Block scalars.
            "version: 1\nmessage: |\n  hello\n".into(),
            "version: 1\nmessage: >-\n  hello\n".into(),
            // Nulls and other non-strings in string fields.
            "version: 1\nfiles:\n    - path: null\n      type: directory\n".into(),
            "version: 1\nfiles:\n    - path: ~\n      type: directory\n".into(),
            "version: 1\nfiles:\n    - path:\n      type: directory\n".into(),
            "version: 1\nfiles:\n    - path: Null\n      type: directory\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: true\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: file\n      mode: 0644\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: file\n      mode: 644\n".into(),
            "version: 1\nmessage: 12.5\n".into(),
            "version: 1\nmessage: 1e5\n".into(),
            "version: 1\nmessage: 0x1f\n".into(),
            "version: 1\nmessage: .inf\n".into(),
            "version: 1\nmessage: yes\n".into(),
            "version: 1\ncreated: 2026-03-23\n".into(),
            "version: \"1\"\n".into(),
            "version: 01\n".into(),
            "version: 1.0\n".into(),
            "version: +1\n".into(),
            "version: 99999999999999999999999\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: directory\n      locked: yes\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: directory\n      locked: True\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: directory\n      locked: \"true\"\n".into(),
            // Plain scalars YAML reads differently.
            "version: 1\nmessage: a: b\n".into(),
            "version: 1\nmessage: a #b\n".into(),
            "version: 1\nmessage: ends:\n".into(),
            "version: 1\nmessage: -x\n".into(),
            "version: 1\nmessage: - x\n".into(),
            "version: 1\nmessage: ?x\n".into(),
            "version: 1\nmessage: :x\n".into(),
            "version: 1\nmessage: ,x\n".into(),
            "version: 1\nmessage: [x]\n".into(),
            "version: 1\nmessage: |x\n".into(),
            "version: 1\nmessage: >x\n".into(),
            "version: 1\nmessage: %x\n".into(),
            "version: 1\nmessage: @x\n".into(),
            "version: 1\nmessage: `x\n".into(),
            "version: 1\nmessage: ---\n".into(),
            "version: 1\nmessage: a\u{3000}#b\n".into(),
            // Quoting we do not understand.
            "version: 1\nmessage: \"unterminated\n".into(),
            "version: 1\nmessage: \"a\" b\n".into(),
            "version: 1\nmessage: \"a\"b\"\n".into(),
            "version: 1\nmessage: \"a\\\"\n".into(),
            "version: 1\nmessage: \"multi\n  line\"\n".into(),
            "version: 1\nmessage: \"\\a\"\n".into(),
            "version: 1\nmessage: \"\\0\"\n".into(),
            "version: 1\nmessage: \"\\x80\"\n".into(),
            "version: 1\nmessage: \"\\x4\"\n".into(),
            "version: 1\nmessage: \"\\ud800\"\n".into(),
            "version: 1\nmessage: \"\\U0001F600\"\n".into(),
            "version: 1\nmessage: \"\\N\"\n".into(),
            "version: 1\nmessage: \"\\\n".into(),
            "version: 1\nmessage: 'it's'\n".into(),
            "version: 1\nmessage: 'open\n".into(),
            "version: 1\nmessage: 'a' b\n".into(),
            // Odd indentation and layout.
            "version: 1\nfiles:\n   - path: ~/a\n     type: directory\n".into(),
            "version: 1\nfiles:\n- path: ~/a\n  type: directory\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n       type: directory\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n     type: directory\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n        type: directory\n".into(),
            "version: 1\nfiles:\n    -   path: ~/a\n        type: directory\n".into(),
            "version: 1\nfiles:\n    -\n      path: ~/a\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: directory\n  - path: ~/b\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: directory\n      only:\n      - a\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: directory\n      only:\n         - a\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: directory\n      only:\n        - a\n          b\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n        b\n      type: directory\n".into(),
            "version: 1\nmessage: a\n  continued\n".into(),
            " version: 1\n".into(),
            "version:  1\n".into(),
            "version :1\n".into(),
            "version: 1 \n".into(),
            "version: 1\n\nfiles: []\n".into(),
            "version: 1\nfiles:\n".into(),
            "version: 1\nfiles:\nexclude: []\n".into(),
            "version: 1\nexclude:\n    -\n".into(),
            "version: 1\nexclude:\n    - \"a\"\n    -  b\n".into(),
            "version: 1\nfiles:\n    - ~/a\n".into(),
            "---\nversion: 1\n".into(),
            "version: 1\n...\n".into(),
            "%YAML 1.2\n---\nversion: 1\n".into(),
            "- just\n- a list\n".into(),
            // Line endings, BOM, control characters.
            "version: 1\r\nfiles: []\r\n".into(),
            "version: 1\rfiles: []\r".into(),
            "\u{feff}version: 1\nfiles: []\n".into(),
            "version: 1\nmessage: a\u{feff}b\n".into(),
            "version: 1\nmessage: a\u{85}b\n".into(),
            "version: 1\nmessage: a\u{2028}b\n".into(),
            "version: 1\nmessage: \"a\u{81}b\"\n".into(),
            "version: 1\nmessage: a\u{7f}b\n".into(),
            "version: 1\nmessage: a\u{0}b\n".into(),
            // Duplicate and unknown keys, encryption.
            "version: 1\nversion: 1\n".into(),
            "version: 1\nfiles: []\nfiles: []\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: directory\n      type: file\n".into(),
            "version: 1\nfuture: x\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      color: red\n".into(),
            "version: 1\n\"version\": 1\n".into(),
            "version: 1\nVersion: 1\n".into(),
            "version: 1\nencryption:\n    algorithm: x\n".into(),
            "version: 1\nfiles:\n    - path: ~/a\n      type: directory\n      only:\n        - a\n      only:\n        - b\n".into(),
        ];
        for text in &cases {
            assert!(manifest(text).is_none(), "fast path took:\n{text}");
        }
        for text in [
            "version: 1\nsnapshots:\n    - id: x # c\n",
            "version: 1\nsnapshots:\n    - id: x\n      entries: 1.5\n",
            "version: 1\nsnapshots:\n    - id: x\n      entries: \"1\"\n",
            "version: 1\nsnapshots:\n    - id: x\n      host: null\n",
            "version: 1\nsnapshots:\n    - id: x\n      host: 123\n",
            "version: 1\nsnapshots:\n    - id: x\n      id: y\n",
            "version: 1\nsnapshots:\n    - id: x\n      future: y\n",
            "version: 1\nsnapshots:\n    - {id: x}\n",
            "version: 1\nsnapshots: []\nfiles: []\n",
            "version: 1\r\nsnapshots: []\r\n",
        ] {
            assert!(history(text).is_none(), "fast path took:\n{text}");
        }
    }

    #[test]
    fn history_matches_serde() {
        let now = ts("2026-03-23T12:00:00.5Z");
        let mut records = Vec::new();
        for (i, s) in HOSTILE.iter().enumerate() {
            let i = i as u64;
            records.push(Record {
                id: hash(i),
                parent: i.is_multiple_of(2).then(|| hash(i + 100)),
                time: now,
                host: (*s).to_owned(),
                machine: i
                    .is_multiple_of(2)
                    .then(|| format!("{:032x}", u128::from(i) * 7919)),
                reason: if i.is_multiple_of(3) {
                    Reason::Other((*s).to_owned())
                } else {
                    Reason::BeforeRestore
                },
                message: Some(format!("{s} then: more # stuff")),
                entries: i,
                bytes: i * 1_000_000_007,
                new_blobs: u64::MAX - i,
                head_before: (i % 3 == 1).then(|| hash(i + 200)),
            });
        }
        for h in [
            History::default(),
            History {
                records: records.clone(),
            },
        ] {
            let text = h.to_yaml();
            assert!(agrees_history(&text), "fast path not taken for:\n{text}");
            assert_eq!(History::from_yaml(&text).unwrap(), h);
        }
        for r in &mut records {
            r.host = "-dash".into();
        }
        let h = History { records };
        let text = h.to_yaml();
        assert!(!agrees_history(&text));
        assert_eq!(History::from_yaml(&text).unwrap(), h);
    }

    /// xorshift64*: deterministic, no dependencies.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn chance(&mut self, percent: usize) -> bool {
            self.below(100) < percent
        }

        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len())]
        }

        fn string(&mut self) -> String {
            const PIECES: &[&str] = &[
                "a",
                "b",
                "Z",
                "0",
                "7",
                "x",
                " ",
                " ",
                "#",
                ":",
                ": ",
                " #",
                "-",
                "- ",
                "?",
                "'",
                "\"",
                "\\",
                "~",
                "~/",
                "/",
                "[",
                "]",
                "{",
                "}",
                ",",
                "&",
                "*",
                "!",
                "|",
                ">",
                "%",
                "@",
                "`",
                ".",
                "_",
                "+",
                "e",
                "\n",
                "\t",
                "\r",
                "\u{1}",
                "\u{7f}",
                "é",
                "日",
                "😀",
                "\u{85}",
                "\u{a0}",
                "\u{2028}",
                "\u{feff}",
                "\u{3000}",
                "\u{2003}",
                "null",
                "~",
                "true",
                "yes",
                "No",
                "123",
                "0x1F",
                "0b1",
                "1e5",
                "2026-01-01",
                ".inf",
                "<<",
                "=",
                "---",
                "...",
                "\\n",
                "\\x41",
                "''",
                "T12:00:00Z",
            ];
            let n = self.below(5);
            (0..n).map(|_| *self.pick(PIECES)).collect()
        }

        fn label(&mut self) -> String {
            if self.chance(60) {
                self.pick(&["work", "os:linux", "host:laptop", "arch:arm64"])
                    .to_string()
            } else {
                self.string()
            }
        }

        fn path(&mut self) -> String {
            match self.below(10) {
                0 => self.string(),
                1 => "~".into(),
                2..=4 => format!("/etc/{}", self.string()),
                _ => format!("~/{}", self.string()),
            }
        }

        fn time(&mut self) -> Timestamp {
            let secs = (self.next() % 4_000_000_000) as i64;
            let nanos = match self.below(3) {
                0 => 0,
                1 => 500_000_000,
                _ => (self.next() % 1_000_000_000) as u32,
            };
            Timestamp::from_datetime(
                chrono::DateTime::from_timestamp(secs, nanos).unwrap_or_default(),
            )
        }
    }

    fn random_manifest(rng: &mut Rng) -> Manifest {
        let mut m = Manifest::new(rng.time());
        m.updated = rng.time();
        if rng.chance(50) {
            m.message = Some(rng.string());
        }
        for _ in 0..rng.below(8) {
            let kind = *rng.pick(&[EntryKind::File, EntryKind::Directory, EntryKind::Link]);
            let mut e = Entry::new(rng.path(), kind, rng.time());
            if kind == EntryKind::File || rng.chance(10) {
                e.hash = Some(hash(rng.next()));
            }
            if rng.chance(20) {
                e.plaintext_mac = Some(hash(rng.next()));
            }
            if rng.chance(10) {
                e.plaintext_hash = Some(hash(rng.next()));
            }
            e.encrypted = rng.chance(20);
            e.locked = rng.chance(20);
            if rng.chance(80) {
                e.mode = Some(Mode::from_st_mode(rng.next() as u32));
            }
            if kind == EntryKind::Link || rng.chance(10) {
                e.target = Some(rng.string());
            }
            let labels: Vec<String> = (0..rng.below(3)).map(|_| rng.label()).collect();
            if rng.chance(50) {
                e.only = labels;
            } else {
                e.never = labels;
            }
            m.upsert(e);
        }
        if rng.chance(30) {
            m.exclude = (0..1 + rng.below(3)).map(|_| rng.path()).collect();
        }
        if rng.chance(30) {
            m.absent = (0..1 + rng.below(3)).map(|_| rng.path()).collect();
        }
        m
    }

    /// A small random edit of YAML text: a character inserted or deleted,
    /// a line duplicated, dropped or re-indented.
    fn mutate(rng: &mut Rng, text: &str) -> String {
        let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
        let i = rng.below(lines.len());
        match rng.below(6) {
            0 => {
                let mut chars: Vec<char> = lines[i].chars().collect();
                let at = rng.below(chars.len() + 1);
                chars.insert(
                    at,
                    *rng.pick(&[' ', '#', ':', '-', '"', '\'', '[', '\\', '~', 'x']),
                );
                lines[i] = chars.into_iter().collect();
            }
            1 => {
                let mut chars: Vec<char> = lines[i].chars().collect();
                if !chars.is_empty() {
                    chars.remove(rng.below(chars.len()));
                }
                lines[i] = chars.into_iter().collect();
            }
            2 => {
                let dup = lines[i].clone();
                lines.insert(i, dup);
            }
            3 => {
                lines.remove(i);
            }
            4 => {
                let pad: &str = rng.pick::<&str>(&[" ", "  ", "    "]);
                lines[i].insert_str(0, pad);
            }
            _ => {
                let trimmed = lines[i].trim_start_matches(' ').to_owned();
                let indent = lines[i].len() - trimmed.len();
                let cut = rng.below(indent + 1);
                lines[i] = format!("{}{trimmed}", " ".repeat(indent - cut));
            }
        }
        lines.join("\n")
    }

    #[test]
    fn random_manifests_agree_with_serde() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut taken, mut mutated_taken, mut raw_taken) = (0, 0, 0);
        const ROUNDS: usize = 300;
        for _ in 0..ROUNDS {
            let m = random_manifest(&mut rng);
            let text = m.to_yaml();
            if agrees(&text) {
                taken += 1;
            } else {
                // Whatever the fast path refuses still loads the slow way.
                let slow = serde_saphyr::from_str::<RawManifest>(&text).map(|r| dump(&r));
                assert!(slow.is_ok(), "emitter output unreadable:\n{text}");
            }
            // Raw text straight into a value slot, unquoted or quoted by hand.
            let v = rng.string();
            let v = match rng.below(3) {
                0 => v,
                1 => format!("\"{v}\""),
                _ => format!("'{v}'"),
            };
            for raw in [
                format!("version: 1\nmessage: {v}\n"),
                format!("version: 1\nexclude:\n    - {v}\n"),
                format!(
                    "version: 1\nfiles:\n    - path: ~/a\n      type: link\n      target: {v}\n"
                ),
            ] {
                if agrees(&raw) {
                    raw_taken += 1;
                }
            }
            let mut t = text;
            for _ in 0..4 {
                t = mutate(&mut rng, &t);
                if agrees(&t) {
                    mutated_taken += 1;
                }
            }
        }
        eprintln!(
            "fast path taken for {taken}/{ROUNDS} emitted, {mutated_taken}/{} mutated and {raw_taken}/{} hand-written manifests",
            ROUNDS * 4,
            ROUNDS * 3
        );
        assert!(taken > ROUNDS / 4, "fast path rarely taken: {taken}");
    }

    fn big_manifest(n: usize) -> Manifest {
        let now = ts("2026-03-23T12:00:00.123456789Z");
        let mut m = Manifest::new(now);
        m.files = (0..n)
            .map(|i| {
                let path = format!(
                    "~/tree/a{}/b{}/c{}/f{i:04}.bin",
                    i % 10,
                    i / 10 % 10,
                    i / 100 % 10
                );
                let mut e = Entry::new(path, EntryKind::File, now);
                e.hash = Some(hash(i as u64));
                e.mode = Some(Mode::from_st_mode(0o644));
                e
            })
            .collect();
        m.files.sort_by(|a, b| a.path.cmp(&b.path));
        m
    }

    fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
        let mut best = Duration::MAX;
        let mut out = None;
        for _ in 0..runs {
            let t = Instant::now();
            let v = f();
            best = best.min(t.elapsed());
            out = Some(v);
        }
        (best, out.unwrap())
    }

    /// `cargo test --release -p sgard-manifest -- --ignored --nocapture`
    #[test]
    #[ignore = "timing; run in release"]
    fn time_10k_entries() {
        let m = big_manifest(10_000);
        let (save, text) = best_of(5, || m.to_yaml());
        let (load, back) = best_of(5, || Manifest::from_yaml(&text).unwrap());
        let (slow, slow_back) = best_of(3, || {
            let raw: RawManifest = serde_saphyr::from_str(&text).unwrap();
            validate(raw, Path::new("<input>")).unwrap()
        });
        let (fast_raw, _) = best_of(5, || manifest(&text).unwrap());
        assert_eq!(back, m);
        assert_eq!(slow_back, m);
        eprintln!(
            "10,000 entries, {} bytes: to_yaml {save:?}, from_yaml {load:?} (fast parse alone {fast_raw:?}; serde-saphyr + validate {slow:?}); load + save {:?}",
            text.len(),
            save + load
        );
    }
}
