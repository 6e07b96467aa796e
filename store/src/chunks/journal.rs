//! The journal of a chunked write in progress:
//! `<repo>/chunks/journal/<sha256 of the source's key>`.
//!
//! ```text
//! sgard-journal 1
//! path ~/big.db
//! size 73400320
//! mtime 1764770000 123456789
//! fastcdc-2020 16384 65536 262144
//! <sha256> <length>        one line per chunk made durable, in order
//! ```
//!
//! Lines are appended after each commit of the write's chunks, so every
//! chunk a journal names is durable. A journal that survives its write (Ctrl-C,
//! kill -9, a full disk) is compared with the next write of the same source:
//! the same size, modification time and chunker sizes, and then chunk by
//! chunk the same digests, and the next write reports that it resumed (the
//! chunks are stored already and are not written again). Anything else and
//! the journal is refused, saying why, and started afresh. A journal is
//! never what names content: only a chunk list does, written at the end.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{ALGORITHM, ChunkStore, Params};
use crate::{Error, Hash, Result, durable};

/// The journals' folder inside `chunks/`.
pub(super) const DIR: &str = "journal";
const MAGIC: &str = "sgard-journal 1";
/// A journal is never longer than a chunk list and its header.
const JOURNAL_MAX: u64 = super::MAX_LIST_BYTES + (64 << 10);

/// What is being stored, as far as its journal must know it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// What names the source (the entry's path).
    pub key: String,
    /// Its size when the write began.
    pub size: u64,
    /// Its modification time then (seconds, nanoseconds).
    pub mtime: (i64, i64),
}

/// What a write made of an earlier, interrupted write of the same source.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Resume {
    /// There was none.
    #[default]
    Fresh,
    /// Its first `chunks` chunks (`bytes` bytes) were found stored and
    /// were not written again.
    Resumed {
        /// Chunks reused.
        chunks: usize,
        /// Their bytes.
        bytes: u64,
    },
    /// Its journal was not reused, for this reason.
    Refused(String),
}

/// A journal left in the repository.
#[derive(Clone, Debug)]
pub struct JournalInfo {
    /// Its file.
    pub file: PathBuf,
    /// The source it was for; `None` when the journal is damaged.
    pub source: Option<Source>,
    /// The chunks it names.
    pub chunks: Vec<Hash>,
    /// How long since it was last written (`None`: unknown, or in the
    /// future).
    pub age: Option<std::time::Duration>,
}

struct Parsed {
    source: Source,
    params: Params,
    chunks: Vec<(Hash, u32)>,
}

fn escape(key: &str) -> String {
    key.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut it = text.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

fn header(source: &Source, params: Params) -> String {
    let (min, avg, max) = params.sizes();
    format!(
        "{MAGIC}\npath {}\nsize {}\nmtime {} {}\n{ALGORITHM} {min} {avg} {max}\n",
        escape(&source.key),
        source.size,
        source.mtime.0,
        source.mtime.1
    )
}

fn parse(text: &str) -> std::result::Result<Parsed, String> {
    // A line without its newline was torn by a crash: not part of it.
    let whole = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    let mut lines = whole.lines();
    if lines.next() != Some(MAGIC) {
        return Err("not a journal".into());
    }
    let mut field = |name: &str| {
        lines
            .next()
            .and_then(|l| l.strip_prefix(name))
            .and_then(|l| l.strip_prefix(' '))
            .ok_or_else(|| format!("no {name} line"))
    };
    let key = unescape(field("path")?);
    let size = field("size")?.parse().map_err(|_| "bad size")?;
    let mtime = field("mtime")?;
    let (s, n) = mtime.split_once(' ').ok_or("bad mtime")?;
    let mtime = (
        s.parse().map_err(|_| "bad mtime")?,
        n.parse().map_err(|_| "bad mtime")?,
    );
    let sizes: Vec<u32> = field(ALGORITHM)?
        .split(' ')
        .map(str::parse)
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| "bad chunker line")?;
    let [min, avg, max] = sizes[..] else {
        return Err("bad chunker line".into());
    };
    let params = Params::new(min, avg, max)?;
    let mut chunks = Vec::new();
    for line in lines {
        let (h, len) = line.split_once(' ').ok_or("bad chunk line")?;
        let h = Hash::parse(h).map_err(|_| "bad chunk line")?;
        let len = len.parse().map_err(|_| "bad chunk line")?;
        chunks.push((h, len));
    }
    Ok(Parsed {
        source: Source { key, size, mtime },
        params,
        chunks,
    })
}

/// The journal of one write.
pub(super) struct Journal {
    path: PathBuf,
    /// The journal open for appending (`None` while it is being replaced,
    /// then opened again: Windows refuses to rename over, or at once
    /// remove, a file still open).
    file: Option<File>,
    /// The chunks an earlier write made durable, when it is reused.
    expected: Vec<(Hash, u32)>,
    /// How many chunk lines the file holds.
    written: usize,
    /// Why the earlier write's journal is not reused.
    refused: Option<String>,
    /// Set when a chunk differed: the file must be started again.
    restart: bool,
    matched: usize,
    matched_bytes: u64,
}

impl ChunkStore {
    fn journal_path(&self, key: &str) -> PathBuf {
        self.journals.join(Hash::of(key.as_bytes()).to_hex())
    }

    /// Every journal left by an interrupted write.
    ///
    /// # Errors
    /// [`Error::Io`] when the folder cannot be listed.
    pub fn journals(&self) -> Result<Vec<JournalInfo>> {
        let rd = match fs::read_dir(&self.journals) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("listing", &self.journals, e)),
        };
        let mut out = Vec::new();
        for ent in rd {
            let ent = ent.map_err(|e| Error::io("listing", &self.journals, e))?;
            let file = ent.path();
            // Only 64-hex regular files are journals (not a temp file of an
            // interrupted journal write, not a stray folder).
            let named = ent
                .file_name()
                .to_str()
                .is_some_and(|n| Hash::parse(n).is_ok());
            if !named || !ent.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let parsed = durable::read_regular_to_string_max(&file, JOURNAL_MAX)
                .ok()
                .and_then(|t| parse(&t).ok());
            let age = ent
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok());
            out.push(match parsed {
                Some(p) => JournalInfo {
                    file,
                    source: Some(p.source),
                    chunks: p.chunks.into_iter().map(|(h, _)| h).collect(),
                    age,
                },
                None => JournalInfo {
                    file,
                    source: None,
                    chunks: Vec::new(),
                    age,
                },
            });
        }
        out.sort_by(|a, b| a.file.cmp(&b.file));
        Ok(out)
    }

    /// Deletes a journal [`ChunkStore::journals`] found.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn delete_journal(&self, j: &JournalInfo) -> Result<()> {
        match fs::remove_file(&j.file) {
            Ok(()) => durable::fsync_dir(&self.journals),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("removing journal", &j.file, e)),
        }
    }
}

impl Journal {
    /// Starts the journal of writing `source` with `params`: reuses the
    /// one an interrupted write left when it matches, else says why not.
    pub(super) fn begin(cs: &ChunkStore, source: &Source, params: Params) -> Result<Journal> {
        durable::create_dir_all_durable(&cs.journals)?;
        let path = cs.journal_path(&source.key);
        let old = match durable::read_regular_to_string_max(&path, JOURNAL_MAX) {
            Ok(t) => Some(parse(&t).map_err(|_| "its journal was damaged".to_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(_) => Some(Err("its journal was unreadable".to_owned())),
        };
        let (expected, refused) = match old {
            None => (Vec::new(), None),
            Some(Err(why)) => (Vec::new(), Some(why)),
            Some(Ok(p)) if p.source.key != source.key => (Vec::new(), None),
            Some(Ok(p)) if p.source.size != source.size => (
                Vec::new(),
                Some(format!(
                    "its size changed since ({} bytes then, {} now)",
                    p.source.size, source.size
                )),
            ),
            Some(Ok(p)) if p.source.mtime != source.mtime => {
                (Vec::new(), Some("it was modified since".to_owned()))
            }
            Some(Ok(p)) if p.params != params => {
                let s = |p: Params| {
                    let (a, b, c) = p.sizes();
                    format!("{a}/{b}/{c}")
                };
                (
                    Vec::new(),
                    Some(format!(
                        "the chunker settings changed ({} then, {} now)",
                        s(p.params),
                        s(params)
                    )),
                )
            }
            Some(Ok(p)) => (p.chunks, None),
        };
        let mut text = header(source, params);
        for (h, len) in &expected {
            text.push_str(&format!("{} {len}\n", h.to_hex()));
        }
        durable::write_atomic(&path, text.as_bytes(), 0o644)?;
        let file = open_to_append(&path)?;
        Ok(Journal {
            path,
            file: Some(file),
            written: expected.len(),
            expected,
            refused,
            restart: false,
            matched: 0,
            matched_bytes: 0,
        })
    }

    /// Compares chunk `i` (given in order) with the interrupted write's.
    pub(super) fn check(&mut self, i: usize, chunk: (Hash, u32)) {
        if self.refused.is_some() || self.restart {
            return;
        }
        match self.expected.get(i) {
            Some(want) if *want == chunk => {
                self.matched += 1;
                self.matched_bytes += u64::from(chunk.1);
            }
            Some(_) => {
                self.restart = true;
                self.refused = Some(format!("its chunk {} differs", i + 1));
            }
            None => {}
        }
    }

    /// Records `durable`, the chunks known durable so far (in order).
    pub(super) fn record(
        &mut self,
        source: &Source,
        params: Params,
        durable: &[(Hash, u32)],
    ) -> Result<()> {
        if self.restart {
            self.file = None;
            durable::write_atomic(&self.path, header(source, params).as_bytes(), 0o644)?;
            self.file = Some(open_to_append(&self.path)?);
            self.written = 0;
            self.restart = false;
            self.expected.clear();
        }
        let Some(new) = durable.get(self.written..).filter(|n| !n.is_empty()) else {
            return Ok(());
        };
        let mut text = String::with_capacity(new.len() * 72);
        for (h, len) in new {
            text.push_str(&format!("{} {len}\n", h.to_hex()));
        }
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(open_to_append(&self.path)?),
        };
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_data())
            .map_err(|e| Error::io("writing journal", &self.path, e))?;
        self.written = durable.len();
        Ok(())
    }

    /// The write is done (its list is durable): the journal goes.
    pub(super) fn finish(mut self) -> Resume {
        self.file = None;
        let _ = fs::remove_file(&self.path);
        if let Some(why) = self.refused {
            Resume::Refused(why)
        } else if self.matched > 0 {
            Resume::Resumed {
                chunks: self.matched,
                bytes: self.matched_bytes,
            }
        } else {
            Resume::Fresh
        }
    }
}

/// Opens a journal to append chunk lines to.
fn open_to_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(|e| Error::io("opening journal", path, e))
}
