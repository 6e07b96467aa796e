//! A binary encoding of the manifest and the history log, for caches of
//! their parsed form (sgard-garden's machine-local index): little-endian
//! integers, length-prefixed byte strings, the manifest written field by
//! field. It is no exchange format: a cache written by another build may
//! not decode (the caller then parses the YAML again), and nothing but a
//! cache should hold it.
//!
//! Decoding never panics and never trusts a length: every count is checked
//! against the bytes left, so damaged bytes fail with `None`, whatever they
//! are.

use std::collections::BTreeMap;

use crate::history::{History, Reason, Record};
use crate::{Encryption, Entry, EntryKind, FolderMode, KekSlot, Manifest, Mode, Run, Timestamp};
use chrono::DateTime;
use sgard_store::Hash;

/// Decoded counts never reserve more than this many items up front. A count
/// is already bounded by the bytes left (each item takes at least a few), so
/// damaged bytes reserve at most a small multiple of what was read; the cap
/// keeps that multiple from mattering. Real counts get exactly their room.
pub const MAX_RESERVE: usize = 1 << 21;

/// Appends values to a buffer.
#[derive(Default)]
pub struct Writer {
    /// What was written so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// One byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// A `u32`, little-endian.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A `u64`, little-endian.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// An `i64`, little-endian.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A length (u32) then the bytes. Longer than 4 GiB is cut to nothing
    /// (never the case: paths and keys are short).
    pub fn bytes(&mut self, b: &[u8]) {
        let b = if u32::try_from(b.len()).is_ok() {
            b
        } else {
            &[]
        };
        self.u32(b.len() as u32);
        self.buf.extend_from_slice(b);
    }
    /// A string as its UTF-8 bytes (see [`Writer::bytes`]).
    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    /// A hash as its 32 bytes.
    pub fn hash(&mut self, h: &Hash) {
        self.buf.extend_from_slice(h.as_bytes());
    }
    /// A count of items (a `u32`; more than `u32::MAX` is written as that).
    pub fn count(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }
    /// A count, then each string.
    pub fn strs(&mut self, v: &[String]) {
        self.count(v.len());
        for s in v {
            self.str(s);
        }
    }
    /// `0`, or `1` then the string.
    pub fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
            None => self.u8(0),
        }
    }
    /// `0`, or `1` then the number.
    pub fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            Some(v) => {
                self.u8(1);
                self.u64(v);
            }
            None => self.u8(0),
        }
    }
    /// A timestamp: seconds since the epoch (`i64`), then nanoseconds (`u32`).
    pub fn time(&mut self, t: &Timestamp) {
        let d = t.datetime();
        self.i64(d.timestamp());
        self.u32(d.timestamp_subsec_nanos());
    }
}

/// Reads values back; every read is bounds-checked.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }
    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.buf.len() {
            return None;
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Some(a)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    /// One byte.
    pub fn u8(&mut self) -> Option<u8> {
        Some(self.array::<1>()?[0])
    }
    /// A `u32`.
    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.array()?))
    }
    /// A `u64`.
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.array()?))
    }
    /// An `i64`.
    pub fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.array()?))
    }
    /// What [`Writer::bytes`] wrote.
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// What [`Writer::str`] wrote (`None` if it is not UTF-8).
    pub fn str(&mut self) -> Option<String> {
        std::str::from_utf8(self.bytes()?).ok().map(str::to_owned)
    }
    /// What [`Writer::hash`] wrote.
    pub fn hash(&mut self) -> Option<Hash> {
        Some(Hash::from_bytes(self.array()?))
    }
    /// A count of items each at least `min` bytes long: never more than
    /// the bytes left could hold.
    pub fn count(&mut self, min: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n.saturating_mul(min.max(1)) <= self.buf.len()).then_some(n)
    }
    /// What [`Writer::strs`] wrote.
    pub fn strs(&mut self) -> Option<Vec<String>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.str()).collect()
    }
    /// What [`Writer::opt_str`] wrote.
    pub fn opt_str(&mut self) -> Option<Option<String>> {
        match self.u8()? {
            0 => Some(None),
            1 => self.str().map(Some),
            _ => None,
        }
    }
    /// What [`Writer::opt_u64`] wrote.
    pub fn opt_u64(&mut self) -> Option<Option<u64>> {
        match self.u8()? {
            0 => Some(None),
            1 => self.u64().map(Some),
            _ => None,
        }
    }
    /// What [`Writer::time`] wrote (`None` out of range).
    pub fn time(&mut self) -> Option<Timestamp> {
        let secs = self.i64()?;
        let nanos = self.u32()?;
        DateTime::from_timestamp(secs, nanos).map(Timestamp::from_datetime)
    }
}

/// The byte an entry kind is written as.
pub fn kind_code(k: EntryKind) -> u8 {
    match k {
        EntryKind::File => 0,
        EntryKind::Directory => 1,
        EntryKind::Link => 2,
    }
}

/// The entry kind [`kind_code`] wrote as `c`.
pub fn kind_of(c: u8) -> Option<EntryKind> {
    Some(match c {
        0 => EntryKind::File,
        1 => EntryKind::Directory,
        2 => EntryKind::Link,
        _ => return None,
    })
}

/// A mode from its permission bits (`None` above [`Mode::MAX`]).
pub fn mode_of(bits: u32) -> Option<Mode> {
    (bits <= Mode::MAX).then(|| Mode::from_st_mode(bits))
}

const ENCRYPTED: u8 = 1;
const LOCKED: u8 = 2;
const HASH: u8 = 4;
const PLAINTEXT_HASH: u8 = 8;
const PLAINTEXT_MAC: u8 = 16;
const MODE: u8 = 32;
const TARGET: u8 = 64;

/// The second flags byte: template, and a script's run policy.
const TEMPLATE: u8 = 1;
const RUN_ONCE: u8 = 2;
const RUN_ONCHANGE: u8 = 4;
const PURGED: u8 = 8;

/// Writes a whole manifest.
pub fn put_manifest(w: &mut Writer, m: &Manifest) {
    let _ = put_manifest_with(w, m, &mut |_| Ok(()));
}

/// As [`put_manifest`], handing `w` to `drain` after each entry, which may
/// take what it holds: an encoding streamed to a file, or measured,
/// without the whole of it in memory (10 MB at 100,000 entries).
///
/// # Errors
/// What `drain` returns.
pub fn put_manifest_with(
    w: &mut Writer,
    m: &Manifest,
    drain: &mut dyn FnMut(&mut Writer) -> std::io::Result<()>,
) -> std::io::Result<()> {
    w.u32(m.version);
    w.time(&m.created);
    w.time(&m.updated);
    w.opt_str(m.message.as_deref());
    match &m.data {
        None => w.u8(0),
        Some(h) => {
            w.u8(1);
            w.hash(h);
        }
    }
    w.count(m.files.len());
    for e in &m.files {
        put_entry(w, e);
        drain(w)?;
    }
    w.strs(&m.exclude);
    match &m.encryption {
        None => w.u8(0),
        Some(enc) => {
            w.u8(1);
            w.str(&enc.algorithm);
            w.count(enc.kek_slots.len());
            for (name, s) in &enc.kek_slots {
                w.str(name);
                w.str(&s.kind);
                w.opt_u64(s.argon2_time);
                w.opt_u64(s.argon2_memory);
                w.opt_u64(s.argon2_threads);
                w.opt_str(s.credential_id.as_deref());
                w.opt_str(s.salt.as_deref());
                w.opt_str(s.wrapped_dek.as_deref());
            }
            w.strs(&enc.retired_deks);
        }
    }
    w.strs(&m.absent);
    // Last: a section an older build wrote ends before it, and then does
    // not decode (the manifest is parsed again).
    w.count(m.folders.len());
    for f in &m.folders {
        w.str(&f.path);
        w.u32(f.mode.bits());
    }
    drain(w)
}

fn put_entry(w: &mut Writer, e: &Entry) {
    w.str(&e.path);
    w.u8(kind_code(e.kind));
    let mut flags = 0;
    for (on, bit) in [
        (e.encrypted, ENCRYPTED),
        (e.locked, LOCKED),
        (e.hash.is_some(), HASH),
        (e.plaintext_hash.is_some(), PLAINTEXT_HASH),
        (e.plaintext_mac.is_some(), PLAINTEXT_MAC),
        (e.mode.is_some(), MODE),
        (e.target.is_some(), TARGET),
    ] {
        if on {
            flags |= bit;
        }
    }
    w.u8(flags);
    let run = match e.run {
        None => 0,
        Some(Run::Once) => RUN_ONCE,
        Some(Run::OnChange) => RUN_ONCHANGE,
    };
    let purged = if e.purged.is_some() { PURGED } else { 0 };
    w.u8(if e.template { TEMPLATE } else { 0 } | run | purged);
    for h in [
        e.hash.as_ref(),
        e.plaintext_hash.as_deref(),
        e.plaintext_mac.as_deref(),
        e.purged.as_deref(),
    ]
    .into_iter()
    .flatten()
    {
        w.hash(h);
    }
    if let Some(m) = e.mode {
        w.u32(m.bits());
    }
    if let Some(t) = &e.target {
        w.str(t);
    }
    w.time(&e.updated);
    w.strs(&e.only);
    w.strs(&e.never);
}

/// Reads back what [`put_manifest`] wrote.
pub fn get_manifest(r: &mut Reader<'_>) -> Option<Manifest> {
    let version = r.u32()?;
    let created = r.time()?;
    let updated = r.time()?;
    let message = r.opt_str()?;
    let data = match r.u8()? {
        0 => None,
        1 => Some(r.hash()?),
        _ => return None,
    };
    // An entry is at least its path length, kind, flags, time and lists.
    let n = r.count(4 + 3 + 12 + 8)?;
    let mut files = Vec::with_capacity(n.min(MAX_RESERVE));
    for _ in 0..n {
        files.push(get_entry(r)?);
    }
    let exclude = r.strs()?;
    let encryption = match r.u8()? {
        0 => None,
        1 => {
            let algorithm = r.str()?;
            let n = r.count(8)?;
            let mut kek_slots = BTreeMap::new();
            for _ in 0..n {
                let name = r.str()?;
                let slot = KekSlot {
                    kind: r.str()?,
                    argon2_time: r.opt_u64()?,
                    argon2_memory: r.opt_u64()?,
                    argon2_threads: r.opt_u64()?,
                    credential_id: r.opt_str()?,
                    salt: r.opt_str()?,
                    wrapped_dek: r.opt_str()?,
                };
                kek_slots.insert(name, slot);
            }
            Some(Encryption {
                algorithm,
                kek_slots,
                retired_deks: r.strs()?,
            })
        }
        _ => return None,
    };
    let absent = r.strs()?;
    let n = r.count(4 + 4)?;
    let mut folders = Vec::with_capacity(n.min(MAX_RESERVE));
    for _ in 0..n {
        let path = r.str()?;
        let mode = Mode::parse(&format!("{:o}", r.u32()?)).ok()?;
        folders.push(FolderMode { path, mode });
    }
    Some(Manifest {
        version,
        created,
        updated,
        message,
        data,
        folders,
        files,
        exclude,
        encryption,
        absent,
    })
}

fn get_entry(r: &mut Reader<'_>) -> Option<Entry> {
    let path = r.str()?;
    let kind = kind_of(r.u8()?)?;
    let flags = r.u8()?;
    let more = r.u8()?;
    let run = match more & (RUN_ONCE | RUN_ONCHANGE) {
        0 => None,
        RUN_ONCE => Some(Run::Once),
        RUN_ONCHANGE => Some(Run::OnChange),
        _ => return None,
    };
    let mut opt_hash = |bit: u8| -> Option<Option<Hash>> {
        if flags & bit != 0 {
            r.hash().map(Some)
        } else {
            Some(None)
        }
    };
    let hash = opt_hash(HASH)?;
    let plaintext_hash = opt_hash(PLAINTEXT_HASH)?;
    let plaintext_mac = opt_hash(PLAINTEXT_MAC)?;
    let purged = if more & PURGED != 0 {
        Some(r.hash()?)
    } else {
        None
    };
    let mode = if flags & MODE != 0 {
        Some(mode_of(r.u32()?)?)
    } else {
        None
    };
    let target = if flags & TARGET != 0 {
        Some(r.str()?)
    } else {
        None
    };
    Some(Entry {
        path,
        kind,
        hash,
        plaintext_hash: plaintext_hash.map(Box::new),
        plaintext_mac: plaintext_mac.map(Box::new),
        encrypted: flags & ENCRYPTED != 0,
        locked: flags & LOCKED != 0,
        mode,
        target,
        updated: r.time()?,
        only: r.strs()?,
        never: r.strs()?,
        template: more & TEMPLATE != 0,
        run,
        purged: purged.map(Box::new),
    })
}

/// Writes a whole log.
pub fn put_history(w: &mut Writer, h: &History) {
    w.count(h.records.len());
    for r in &h.records {
        w.hash(&r.id);
        match &r.parent {
            Some(p) => {
                w.u8(1);
                w.hash(p);
            }
            None => w.u8(0),
        }
        w.time(&r.time);
        w.str(&r.host);
        w.opt_str(r.machine.as_deref());
        w.str(r.reason.as_str());
        w.opt_str(r.message.as_deref());
        w.u64(r.entries);
        w.u64(r.bytes);
        w.u64(r.new_blobs);
        match &r.head_before {
            Some(p) => {
                w.u8(1);
                w.hash(p);
            }
            None => w.u8(0),
        }
    }
}

fn opt_hash(r: &mut Reader<'_>) -> Option<Option<Hash>> {
    match r.u8()? {
        0 => Some(None),
        1 => r.hash().map(Some),
        _ => None,
    }
}

/// Reads back what [`put_history`] wrote.
pub fn get_history(r: &mut Reader<'_>) -> Option<History> {
    let n = r.count(32 + 1 + 12 + 4 + 1 + 4 + 1 + 24 + 1)?;
    let mut records = Vec::with_capacity(n.min(MAX_RESERVE));
    for _ in 0..n {
        records.push(Record {
            id: r.hash()?,
            parent: opt_hash(r)?,
            time: r.time()?,
            host: r.str()?,
            machine: r.opt_str()?,
            reason: Reason::parse(&r.str()?),
            message: r.opt_str()?,
            entries: r.u64()?,
            bytes: r.u64()?,
            new_blobs: r.u64()?,
            head_before: opt_hash(r)?,
        });
    }
    Some(History { records })
}

/// A manifest encoded whole (see [`put_manifest`]).
pub fn encode_manifest(m: &Manifest) -> Vec<u8> {
    let mut w = Writer::default();
    w.buf.reserve(m.files.len() * 96 + 128);
    put_manifest(&mut w, m);
    w.buf
}

/// The manifest [`encode_manifest`] wrote, if `bytes` are that and nothing
/// more.
pub fn decode_manifest(bytes: &[u8]) -> Option<Manifest> {
    let mut r = Reader::new(bytes);
    let m = get_manifest(&mut r)?;
    r.is_empty().then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        let text = "version: 1\ncreated: 2026-03-23T12:00:00Z\nupdated: 2026-03-23T12:00:00.123456789Z\n\
            message: \"hi\\nthere\"\ndata: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\nfiles:\n\
            - path: ~/.bashrc\n  hash: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\n  \
              type: file\n  mode: \"0644\"\n  updated: 2026-03-23T12:00:00Z\n  only: [linux, work]\n\
            - path: ~/.gitconfig\n  hash: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\n  \
              type: template\n  run: onchange\n  updated: 2026-03-23T12:00:00Z\n\
            - path: ~/bin/setup\n  hash: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\n  \
              type: file\n  run: once\n  updated: 2026-03-23T12:00:00Z\n\
            - path: ~/.config\n  type: directory\n  mode: \"0700\"\n  updated: 2026-03-23T12:00:00Z\n\
            - path: ~/l ink\n  type: link\n  target: ../x y\n  locked: true\n  updated: 2026-03-23T12:00:00Z\n  never: [mac]\n\
            exclude: [~/.cache]\n\
            folders:\n- path: ~/.ssh\n  mode: \"0700\"\n- path: ~/bin\n  mode: \"2750\"\n";
        Manifest::from_yaml(text).unwrap()
    }

    #[test]
    fn a_manifest_round_trips() {
        let m = sample();
        let mut w = Writer::default();
        put_manifest(&mut w, &m);
        let back = get_manifest(&mut Reader::new(&w.buf)).unwrap();
        assert_eq!(back, m);
        assert!(back.data.is_some());
        assert_eq!(back.folders.len(), 2);
        let t = back.get("~/.gitconfig").unwrap();
        assert!(t.template && t.run == Some(Run::OnChange));
        assert_eq!(back.get("~/bin/setup").unwrap().run, Some(Run::Once));
        assert_eq!(back.to_yaml(), m.to_yaml());
        assert_eq!(decode_manifest(&encode_manifest(&m)), Some(m.clone()));
        let mut longer = encode_manifest(&m);
        longer.push(0);
        assert_eq!(decode_manifest(&longer), None, "a trailing byte");
    }

    #[test]
    fn a_history_round_trips() {
        let text = "version: 1\nsnapshots:\n\
            - id: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\n  \
              time: 2026-03-23T12:00:00.5Z\n  host: desk\n  reason: checkpoint\n  \
              message: \"one\\ntwo\"\n  entries: 3\n  bytes: 10\n  new_blobs: 2\n\
            - id: 3cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\n  \
              parent: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\n  \
              time: 2026-03-23T12:00:01Z\n  host: lap\n  reason: from-the-future\n  \
              machine: 0123456789abcdef0123456789abcdef\n";
        let h = History::from_yaml(text).unwrap();
        assert_eq!(h.records.len(), 2);
        let mut w = Writer::default();
        put_history(&mut w, &h);
        let mut r = Reader::new(&w.buf);
        assert_eq!(get_history(&mut r).unwrap(), h);
        assert!(r.is_empty());
        for n in 0..w.buf.len() {
            assert!(get_history(&mut Reader::new(&w.buf[..n])).is_none(), "{n}");
        }
    }

    #[test]
    fn every_truncation_and_flipped_byte_fails_without_panicking() {
        let mut w = Writer::default();
        put_manifest(&mut w, &sample());
        for n in 0..w.buf.len() {
            assert!(get_manifest(&mut Reader::new(&w.buf[..n])).is_none(), "{n}");
        }
        for i in 0..w.buf.len() {
            let mut b = w.buf.clone();
            b[i] ^= 0xff;
            let _ = get_manifest(&mut Reader::new(&b));
        }
    }
}
