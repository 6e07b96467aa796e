//! # sgard-manifest: what a repository tracks
//!
//! `manifest.yaml` lists every tracked path with its type, mode, content
//! hash, timestamps and flags. The format is the Go sgard's schema v1, read
//! and written compatibly:
//!
//! ```yaml
//! version: 1
//! created: 2026-03-23T12:00:00Z
//! updated: 2026-03-23T12:00:00.123456789Z
//! files:
//!     - path: ~/.bashrc
//!       hash: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824
//!       type: file
//!       mode: "0644"
//!       updated: 2026-03-23T12:00:00Z
//! ```
//!
//! ## Invariants of a loaded [`Manifest`]
//! - `version` is at most [`SCHEMA_VERSION`]; a newer file is refused and so
//!   never written back by an older sgard.
//! - Every entry path is `~`, `~/…` or absolute, with no `..`, `.` or empty
//!   components and no NUL; paths are unique; `files` is sorted by path.
//! - Every hash is 64 lowercase hex; `file` entries have one, `link` entries
//!   have a target; modes are octal `0000`–`7777`; `only` and `never` are not
//!   both set.
//!
//! Errors name the file and the entry at fault (or the line, for YAML syntax).
//!
//! ```
//! use sgard_manifest::Manifest;
//! let m = Manifest::from_yaml("version: 1\nfiles: []\n")?;
//! assert!(m.files.is_empty());
//! let err = Manifest::from_yaml("version: 1\nfiles:\n  - path: ~/../etc/passwd\n    type: file\n").unwrap_err();
//! assert!(err.to_string().contains("~/../etc/passwd"));
//! # Ok::<(), sgard_manifest::Error>(())
//! ```

pub mod codec;
mod doc;
mod error;
pub mod exclude;
pub mod externals;
pub mod history;
pub mod purges;

/// A small file of the repository (the purge log, the externals): its
/// text, `None` when it is missing, at most `max` bytes.
pub(crate) fn read_small(path: &Path, max: u64) -> Result<Option<String>> {
    match sgard_store::durable::read_regular_to_string_max(path, max) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Read {
            path: path.to_path_buf(),
            source: e,
        }),
    }
}

/// Writes a small file of the repository atomically and durably.
pub(crate) fn write_small(path: &Path, text: &str) -> Result<()> {
    sgard_store::durable::write_atomic(path, text.as_bytes(), 0o644).map_err(|e| Error::Write {
        path: path.to_path_buf(),
        source: e,
    })
}

/// Refuses a small file of a version newer than 1.
pub(crate) fn version_1(version: Option<u64>, origin: &Path) -> Result<()> {
    match version.unwrap_or(1) {
        0 | 1 => Ok(()),
        found => Err(Error::UnsupportedVersion {
            origin: origin.to_path_buf(),
            found,
            supported: 1,
        }),
    }
}
mod time;
mod yaml;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use doc::DocRef;
pub use error::{Error, Result};
pub use sgard_store::Hash;
pub use time::Timestamp;
pub use yaml::yaml_message;

use yaml::{Emitter, RawEntry, RawManifest, RawSlot};

/// The newest manifest schema this build reads and writes.
pub const SCHEMA_VERSION: u32 = 1;

/// The file name of the manifest inside a repository.
pub const MANIFEST_FILE: &str = "manifest.yaml";

/// The `type` of a template entry (a file whose content is a template
/// source).
pub const TEMPLATE_TYPE: &str = "template";

/// What kind of filesystem object an entry tracks.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum EntryKind {
    /// A regular file; its content is a blob.
    File,
    /// A folder tracked itself (its mode), not its contents.
    Directory,
    /// A symbolic link; its raw target is stored.
    Link,
}

impl EntryKind {
    /// The manifest's word for it.
    pub fn as_str(&self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Directory => "directory",
            EntryKind::Link => "link",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "file" => Some(EntryKind::File),
            "directory" => Some(EntryKind::Directory),
            "link" => Some(EntryKind::Link),
            _ => None,
        }
    }
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Unix permission bits (including setuid, setgid and sticky), written as a
/// quoted 4-digit octal string such as `"0644"`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct Mode(u32);

impl Mode {
    /// The largest mode: every permission and special bit.
    pub const MAX: u32 = 0o7777;

    /// Keeps the permission and special bits of a `st_mode`.
    pub fn from_st_mode(st_mode: u32) -> Self {
        Mode(st_mode & Self::MAX)
    }

    /// The bits.
    pub fn bits(&self) -> u32 {
        self.0
    }

    /// Parses 1 to 4 octal digits (up to `7777`).
    ///
    /// # Errors
    /// A message for anything else.
    pub fn parse(s: &str) -> Result<Self, String> {
        let ok = !s.is_empty() && s.len() <= 4 && s.bytes().all(|c| (b'0'..=b'7').contains(&c));
        match u32::from_str_radix(s, 8) {
            Ok(v) if ok && v <= Self::MAX => Ok(Mode(v)),
            _ => Err(format!(
                "mode {s:?} is not an octal mode between 0000 and 7777"
            )),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04o}", self.0)
    }
}

/// One tracked path.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Entry {
    /// `~`, `~/…` (relative to the home of whoever restores) or absolute.
    pub path: String,
    /// File, folder or link.
    pub kind: EntryKind,
    /// The blob holding the content (files only; of the ciphertext if encrypted).
    pub hash: Option<Hash>,
    /// SHA-256 of the plaintext, as the Go sgard records for encrypted files
    /// (read, never written by this sgard). This and the other rare hashes
    /// are boxed: an entry is 72 bytes smaller for the many that have none
    /// (every run holds the whole manifest: 7 MB at 100,000 entries).
    pub plaintext_hash: Option<Box<Hash>>,
    /// HMAC-SHA256 of the plaintext under a key derived from the data key:
    /// what this sgard records instead of `plaintext_hash`.
    pub plaintext_mac: Option<Box<Hash>>,
    /// The blob is encrypted with the repository's data key.
    pub encrypted: bool,
    /// The repository is authoritative: disk changes are drift, not edits.
    pub locked: bool,
    /// Permission bits.
    pub mode: Option<Mode>,
    /// Raw symlink target (links only).
    pub target: Option<String>,
    /// When the tracked content last changed.
    pub updated: Timestamp,
    /// Applies only on machines matching one of these labels.
    pub only: Vec<String>,
    /// Never applies on machines matching one of these labels.
    pub never: Vec<String>,
    /// The content is a template source: restore writes its rendering for
    /// the machine (files only). Written as `type: template`, a type the Go
    /// sgard skips in status and restore.
    pub template: bool,
    /// The file is a script run after restores (files only; `run:`).
    pub run: Option<Run>,
    /// The content this entry had was purged (`sgard purge`): its hash,
    /// the content gone from the repository. Only a snapshot of the history
    /// holds such an entry (with no `hash`); it restores nothing.
    pub purged: Option<Box<Hash>>,
}

/// When a script runs (see [`Entry::run`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Run {
    /// Once per distinct content on each machine.
    Once,
    /// Whenever its content differs from the last successful run on the
    /// machine.
    OnChange,
}

impl Run {
    /// The manifest's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Run::Once => "once",
            Run::OnChange => "onchange",
        }
    }

    /// Parses the manifest's word.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "once" => Some(Run::Once),
            "onchange" => Some(Run::OnChange),
            _ => None,
        }
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Entry {
    /// A new entry with no flags.
    pub fn new(path: String, kind: EntryKind, updated: Timestamp) -> Self {
        Entry {
            path,
            kind,
            hash: None,
            plaintext_hash: None,
            plaintext_mac: None,
            encrypted: false,
            locked: false,
            mode: None,
            target: None,
            updated,
            only: Vec::new(),
            never: Vec::new(),
            template: false,
            run: None,
            purged: None,
        }
    }

    /// The manifest's `type`: `template` for a template, else the kind's.
    pub fn type_str(&self) -> &'static str {
        if self.template && self.kind == EntryKind::File {
            TEMPLATE_TYPE
        } else {
            self.kind.as_str()
        }
    }

    /// Whether this entry is `prefix` itself or lies under it
    /// (`~/a` covers `~/a` and `~/a/b`, not `~/ab`).
    pub fn is_under(&self, prefix: &str) -> bool {
        path_is_under(&self.path, prefix)
    }
}

/// Whether `path` is `prefix` or lies under it, component-wise.
pub fn path_is_under(path: &str, prefix: &str) -> bool {
    if prefix == "/" {
        return path.starts_with('/');
    }
    path == prefix
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'/')
}

/// The manifest's encryption section, kept verbatim for encrypted repositories.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Encryption {
    /// `xchacha20-poly1305`.
    pub algorithm: String,
    /// Key-encryption-key slots by name.
    pub kek_slots: BTreeMap<String, KekSlot>,
    /// Data keys replaced by `encrypt rotate-dek`, each wrapped by the
    /// current one (base64), so older snapshots stay readable. Not a Go
    /// sgard field.
    pub retired_deks: Vec<String>,
}

/// One way to unlock the data key.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct KekSlot {
    /// `passphrase` or `fido2`.
    pub kind: String,
    /// Argon2id time cost.
    pub argon2_time: Option<u64>,
    /// Argon2id memory in KiB.
    pub argon2_memory: Option<u64>,
    /// Argon2id lanes.
    pub argon2_threads: Option<u64>,
    /// FIDO2 credential id (base64).
    pub credential_id: Option<String>,
    /// KDF salt (base64).
    pub salt: Option<String>,
    /// The data key wrapped by this slot's key (base64).
    pub wrapped_dek: Option<String>,
}

/// The whole manifest.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Manifest {
    /// Schema version (always [`SCHEMA_VERSION`] once loaded).
    pub version: u32,
    /// When the repository was created.
    pub created: Timestamp,
    /// When the manifest last changed.
    pub updated: Timestamp,
    /// The last checkpoint's message.
    pub message: Option<String>,
    /// Tracked entries, sorted by path.
    pub files: Vec<Entry>,
    /// Excluded path prefixes.
    pub exclude: Vec<String>,
    /// Encryption settings, when set up.
    pub encryption: Option<Encryption>,
    /// Paths recorded as not existing. Only history snapshots use this (a
    /// "before" snapshot lists the paths an operation created); the head
    /// manifest never has any. Not a Go sgard field; the Go tool ignores it.
    pub absent: Vec<String>,
    /// The blob holding the repository's `data.yaml` (template data) as
    /// last recorded, so it travels with the manifest through sync and
    /// history. Not a Go sgard field (the Go tool drops it when it saves).
    pub data: Option<Hash>,
    /// The modes of folders above tracked paths (under the home, never the
    /// home itself) that are not `0755`, so a restore creates them as they
    /// were where they were added (`~/.ssh` 0700). Sorted by path, unique.
    /// Not a Go sgard field (the Go tool ignores it, and drops it when it
    /// saves).
    pub folders: Vec<FolderMode>,
}

/// The mode of a folder above tracked paths (see [`Manifest::folders`]).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FolderMode {
    /// A `~/…` path.
    pub path: String,
    /// Its permission bits.
    pub mode: Mode,
}

/// The mode a folder is assumed to have when [`Manifest::folders`] has no
/// record of it.
pub const DEFAULT_FOLDER_MODE: u32 = 0o755;

impl Manifest {
    /// An empty manifest created at `now`.
    pub fn new(now: Timestamp) -> Self {
        Manifest {
            version: SCHEMA_VERSION,
            created: now,
            updated: now,
            message: None,
            data: None,
            folders: Vec::new(),
            files: Vec::new(),
            exclude: Vec::new(),
            encryption: None,
            absent: Vec::new(),
        }
    }

    /// The entry tracking exactly `path`.
    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.index_of(path).ok().map(|i| &self.files[i])
    }

    /// The entry tracking exactly `path`, mutably.
    pub fn get_mut(&mut self, path: &str) -> Option<&mut Entry> {
        self.index_of(path).ok().map(|i| &mut self.files[i])
    }

    fn index_of(&self, path: &str) -> std::result::Result<usize, usize> {
        self.files.binary_search_by(|e| e.path.as_str().cmp(path))
    }

    /// Inserts `entry`, replacing any entry of the same path (kept sorted).
    /// Returns the entry it replaced.
    pub fn upsert(&mut self, entry: Entry) -> Option<Entry> {
        match self.index_of(&entry.path) {
            Ok(i) => Some(std::mem::replace(&mut self.files[i], entry)),
            Err(i) => {
                self.files.insert(i, entry);
                None
            }
        }
    }

    /// Removes the entry tracking exactly `path`.
    pub fn remove(&mut self, path: &str) -> Option<Entry> {
        self.index_of(path).ok().map(|i| self.files.remove(i))
    }

    /// The first exclusion rule that excludes `path`, if any.
    pub fn excluded_by(&self, path: &str) -> Option<&str> {
        self.exclude
            .iter()
            .find(|r| exclude::excludes(r, path))
            .map(String::as_str)
    }

    /// The recorded mode of the folder `path`, if any.
    pub fn folder_mode(&self, path: &str) -> Option<Mode> {
        self.folders
            .binary_search_by(|f| f.path.as_str().cmp(path))
            .ok()
            .map(|i| self.folders[i].mode)
    }

    /// Records the mode of the folder `path` (`None`, or the default
    /// `0755`: no record). Returns whether the record changed.
    pub fn set_folder_mode(&mut self, path: &str, mode: Option<Mode>) -> bool {
        let mode = mode.filter(|m| m.bits() != DEFAULT_FOLDER_MODE);
        match (
            self.folders.binary_search_by(|f| f.path.as_str().cmp(path)),
            mode,
        ) {
            (Ok(i), Some(m)) if self.folders[i].mode == m => false,
            (Ok(i), Some(m)) => {
                self.folders[i].mode = m;
                true
            }
            (Ok(i), None) => {
                self.folders.remove(i);
                true
            }
            (Err(i), Some(m)) => {
                self.folders.insert(
                    i,
                    FolderMode {
                        path: path.to_owned(),
                        mode: m,
                    },
                );
                true
            }
            (Err(_), None) => false,
        }
    }

    /// The first entry tracked below a file or a symlink entry, and that
    /// entry's path (what loading refuses; see [`Manifest::from_yaml`]):
    /// for a command to check before it saves.
    pub fn below_file_or_link(&self) -> Option<(&str, &str)> {
        let files = &self.files;
        files.iter().enumerate().find_map(|(i, e)| {
            if e.kind == EntryKind::Directory {
                return None;
            }
            let prefix = format!("{}/", e.path);
            let at = i + 1 + files[i + 1..].partition_point(|x| x.path.as_str() < prefix.as_str());
            files
                .get(at)
                .filter(|x| x.path.starts_with(&prefix))
                .map(|x| (x.path.as_str(), e.path.as_str()))
        })
    }

    /// Every blob hash the manifest references.
    pub fn referenced_blobs(&self) -> impl Iterator<Item = Hash> + '_ {
        self.files.iter().filter_map(|e| e.hash).chain(self.data)
    }

    /// Parses and validates manifest text.
    ///
    /// # Errors
    /// [`Error::Syntax`] naming the line, or a validation error naming the entry.
    pub fn from_yaml(text: &str) -> Result<Self> {
        Self::parse(text, Path::new("<input>"))
    }

    /// Parses and validates manifest text read from `origin` (named in
    /// errors).
    ///
    /// # Errors
    /// [`Error::Syntax`] or a validation error, naming `origin`.
    pub fn from_yaml_at(text: &str, origin: &Path) -> Result<Self> {
        Self::parse(text, origin)
    }

    /// Reads a manifest file's text (a regular file only).
    ///
    /// # Errors
    /// [`Error::Read`] naming the file.
    pub fn read_text(path: &Path) -> Result<String> {
        sgard_store::durable::read_regular_to_string(path).map_err(|e| Error::Read {
            path: path.to_path_buf(),
            source: e,
        })
    }

    /// Loads a manifest file and the SHA-256 of its exact bytes.
    ///
    /// # Errors
    /// As [`Manifest::load`].
    pub fn load_with_hash(path: &Path) -> Result<(Self, Hash)> {
        let text = sgard_store::durable::read_regular_to_string(path).map_err(|e| Error::Read {
            path: path.to_path_buf(),
            source: e,
        })?;
        let h = Hash::of(text.as_bytes());
        Ok((Self::parse(&text, path)?, h))
    }

    /// Loads and validates a manifest file.
    ///
    /// # Errors
    /// [`Error::Read`], [`Error::Syntax`] or a validation error, each naming the file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = sgard_store::durable::read_regular_to_string(path).map_err(|e| Error::Read {
            path: path.to_path_buf(),
            source: e,
        })?;
        Self::parse(&text, path)
    }

    fn parse(text: &str, origin: &Path) -> Result<Self> {
        let raw: RawManifest = if text.trim().is_empty() {
            return Err(Error::Syntax {
                origin: origin.to_path_buf(),
                message: "the manifest is empty".into(),
            });
        } else {
            yaml::from_str(text).map_err(|e| Error::syntax(origin, &e))?
        };
        validate(raw, origin)
    }

    /// Renders the manifest as YAML, entries sorted by path.
    pub fn to_yaml(&self) -> String {
        let mut e = Emitter::new();
        self.emit(&mut e);
        e.finish()
    }

    /// Writes the text of [`Manifest::to_yaml`] to `out` in pieces of about
    /// 64 KiB, never holding all of it (a 100,000-entry manifest is 20 MB).
    ///
    /// # Errors
    /// The first error `out` returned; what was written before it is a
    /// prefix of the text.
    pub fn write_yaml(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        self.view().write_yaml(out)
    }

    fn emit(&self, e: &mut Emitter<'_>) {
        self.view().emit(e);
    }

    /// This manifest as a [`DocRef`].
    pub fn view(&self) -> DocRef<'_> {
        DocRef::new(
            self,
            self.files.iter().collect(),
            self.absent.iter().map(String::as_str).collect(),
        )
    }

    /// Writes the manifest atomically and durably (temp file, fsync, rename,
    /// fsync of the folder).
    ///
    /// # Errors
    /// [`Error::Write`]; the previous file is then intact.
    pub fn save(&self, path: &Path) -> Result<()> {
        sgard_store::durable::write_atomic_with(path, 0o600, |f| self.write_yaml(f)).map_err(|e| {
            Error::Write {
                path: path.to_path_buf(),
                source: e,
            }
        })
    }
}

/// Checks that `path` is a storable manifest path: `~`, `~/…` or absolute,
/// with no empty, `.` or `..` components, no trailing `/` and no NUL.
///
/// # Errors
/// A message saying what is wrong.
pub fn validate_path(path: &str) -> Result<(), String> {
    if path.contains('\0') {
        return Err("path contains a NUL byte".into());
    }
    let rest = if path == "~" {
        return Ok(());
    } else if let Some(r) = path.strip_prefix("~/") {
        r
    } else if path == "/" {
        return Ok(());
    } else if let Some(r) = path.strip_prefix('/') {
        r
    } else {
        return Err("path must be `~`, start with `~/`, or be absolute".into());
    };
    for comp in rest.split('/') {
        match comp {
            "" => return Err("path has an empty component (`//` or a trailing `/`)".into()),
            "." | ".." => return Err(format!("path has a `{comp}` component")),
            _ => {}
        }
    }
    Ok(())
}

fn parse_hash(s: &str, what: &str) -> Result<Hash, String> {
    Hash::parse(s)
        .map_err(|_| format!("malformed {what} {s:?}: expected 64 lowercase hex characters"))
}

/// The manifest `raw` describes, its entries converted as they were read
/// (see [`yaml::Files`]).
fn validate(raw: RawManifest, origin: &Path) -> Result<Manifest> {
    let origin_buf = || PathBuf::from(origin);
    let field = |field: &'static str, reason: String| Error::Field {
        origin: origin_buf(),
        field,
        reason,
    };
    let version = raw.version.unwrap_or(1);
    if version > u64::from(SCHEMA_VERSION) {
        return Err(Error::UnsupportedVersion {
            origin: origin_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if version == 0 {
        return Err(field(
            "version",
            "version 0 is not a manifest version".into(),
        ));
    }
    let ts = |name: &'static str, v: Option<String>| -> Result<Timestamp> {
        match v {
            None => Ok(Timestamp::zero()),
            Some(s) => Timestamp::parse(&s).map_err(|r| field(name, r)),
        }
    };
    let created = ts("created", raw.created)?;
    let updated = ts("updated", raw.updated)?;
    let files = raw.files.unwrap_or_default();
    if let Some((index, path, reason)) = files.failed {
        return Err(Error::Entry {
            origin: origin_buf(),
            index,
            path,
            reason,
        });
    }
    let files = check_files(files.entries, origin)?;
    let mut absent = raw.absent.unwrap_or_default();
    for x in &absent {
        validate_path(x).map_err(|r| field("absent", format!("{x:?}: {r}")))?;
    }
    absent.sort();
    let exclude = raw.exclude.unwrap_or_default();
    for x in &exclude {
        validate_path(x).map_err(|r| field("exclude", format!("{x:?}: {r}")))?;
    }
    let encryption = raw.encryption.map(|e| Encryption {
        retired_deks: e.retired_deks.unwrap_or_default(),
        algorithm: e.algorithm.unwrap_or_default(),
        kek_slots: e
            .kek_slots
            .unwrap_or_default()
            .into_iter()
            .map(|(k, s)| (k, slot(s)))
            .collect(),
    });
    let data = raw
        .data
        .filter(|h| !h.is_empty())
        .map(|h| parse_hash(&h, "data"))
        .transpose()
        .map_err(|r| field("data", r))?;
    let folders =
        validate_folders(raw.folders.unwrap_or_default()).map_err(|r| field("folders", r))?;
    Ok(Manifest {
        version: SCHEMA_VERSION,
        created,
        updated,
        message: raw.message.filter(|m| !m.is_empty()),
        data,
        folders,
        files,
        exclude,
        encryption,
        absent,
    })
}

/// The folder modes as read: each a clean `~/…` path (the home itself and
/// absolute paths are not recorded) with a mode; sorted, no path twice.
fn validate_folders(raw: Vec<yaml::RawFolder>) -> Result<Vec<FolderMode>, String> {
    let mut out = Vec::with_capacity(raw.len());
    for r in raw {
        let path = r.path.ok_or("a folder has no `path`")?;
        validate_path(&path).map_err(|e| format!("{path:?}: {e}"))?;
        if !path.starts_with("~/") {
            return Err(format!(
                "{path:?}: only folders under the home (`~/…`) are recorded"
            ));
        }
        let mode = Mode::parse(r.mode.as_deref().unwrap_or_default())
            .map_err(|e| format!("{path:?}: {e}"))?;
        out.push(FolderMode { path, mode });
    }
    if !out.is_sorted_by(|a, b| a.path < b.path) {
        out.sort_by(|a, b| a.path.cmp(&b.path));
        if let Some(w) = out.windows(2).find(|w| w[0].path == w[1].path) {
            return Err(format!("{:?} is listed twice", w[0].path));
        }
    }
    Ok(out)
}

/// Puts `files` (in the order read) in path order and refuses duplicates
/// and anything tracked below a file or a symlink; messages number entries
/// as they were read. What sgard and the Go tool write is sorted already,
/// and is checked where it lies.
fn check_files(mut files: Vec<Entry>, origin: &Path) -> Result<Vec<Entry>> {
    // Where each sorted entry was read (empty: where it lies).
    let mut order: Vec<usize> = Vec::new();
    if !files.windows(2).all(|w| w[0].path < w[1].path) {
        order = (0..files.len()).collect();
        // Stable: of two duplicates the one read first comes first.
        order.sort_by(|&a, &b| files[a].path.cmp(&files[b].path));
        let mut slots: Vec<Option<Entry>> = files.into_iter().map(Some).collect();
        files = order.iter().filter_map(|&i| slots[i].take()).collect();
    }
    let index = |k: usize| order.get(k).copied().unwrap_or(k) + 1;
    let err = |k: usize, reason: String| Error::Entry {
        origin: PathBuf::from(origin),
        index: index(k),
        path: files[k].path.clone(),
        reason,
    };
    for k in 1..files.len() {
        if files[k - 1].path == files[k].path {
            return Err(err(k, format!("duplicate of entry {}", index(k - 1))));
        }
    }
    // Nothing is tracked below a file or a symlink: restoring such a pair
    // would write through the symlink (outside the home), or fail.
    for (i, e) in files.iter().enumerate() {
        if e.kind == EntryKind::Directory {
            continue;
        }
        let prefix = format!("{}/", e.path);
        let at = i + 1 + files[i + 1..].partition_point(|x| x.path.as_str() < prefix.as_str());
        if files.get(at).is_some_and(|x| x.path.starts_with(&prefix)) {
            return Err(err(
                at,
                format!(
                    "is below entry {} ({}), a {}: nothing can be tracked below a {}",
                    index(i),
                    e.path,
                    e.kind,
                    if e.kind == EntryKind::Link {
                        "symlink (it would be written through it)"
                    } else {
                        "file"
                    }
                ),
            ));
        }
    }
    Ok(files)
}

fn slot(s: RawSlot) -> KekSlot {
    KekSlot {
        kind: s.kind.unwrap_or_default(),
        argon2_time: s.argon2_time,
        argon2_memory: s.argon2_memory,
        argon2_threads: s.argon2_threads,
        credential_id: s.credential_id,
        salt: s.salt,
        wrapped_dek: s.wrapped_dek,
    }
}

/// The entry `r` describes, its path (taken out of `r`) being `path`.
pub(crate) fn validate_entry(path: Option<&str>, r: RawEntry<'_>) -> Result<Entry, String> {
    let path = path.ok_or("entry has no `path`")?;
    validate_path(path)?;
    let path = path.to_owned();
    let kind_text = r.kind.ok_or("entry has no `type`")?;
    let template = &*kind_text == TEMPLATE_TYPE;
    let kind = if template {
        EntryKind::File
    } else {
        EntryKind::parse(&kind_text).ok_or_else(|| {
            format!("unknown type {kind_text:?} (expected file, template, directory or link)")
        })?
    };
    let run = r
        .run
        .filter(|s| !s.is_empty())
        .map(|s| {
            Run::parse(&s).ok_or_else(|| format!("unknown run {s:?} (expected once or onchange)"))
        })
        .transpose()?;
    if run.is_some() && kind != EntryKind::File {
        return Err(format!("{kind} entries cannot be scripts (`run`)"));
    }
    let hash = r
        .hash
        .filter(|h| !h.is_empty())
        .map(|h| parse_hash(&h, "hash"))
        .transpose()?;
    let plaintext_hash = r
        .plaintext_hash
        .filter(|h| !h.is_empty())
        .map(|h| parse_hash(&h, "plaintext_hash").map(Box::new))
        .transpose()?;
    let plaintext_mac = r
        .plaintext_mac
        .filter(|h| !h.is_empty())
        .map(|h| parse_hash(&h, "plaintext_mac").map(Box::new))
        .transpose()?;
    let purged = r
        .purged
        .filter(|h| !h.is_empty())
        .map(|h| parse_hash(&h, "purged").map(Box::new))
        .transpose()?;
    let mode = r
        .mode
        .filter(|m| !m.is_empty())
        .map(|m| Mode::parse(&m))
        .transpose()?;
    let updated = match r.updated {
        None => Timestamp::zero(),
        Some(s) => Timestamp::parse(&s)?,
    };
    let only = r.only.unwrap_or_default();
    let never = r.never.unwrap_or_default();
    if !only.is_empty() && !never.is_empty() {
        return Err("`only` and `never` are both set (they are mutually exclusive)".into());
    }
    let encrypted = r.encrypted.unwrap_or(false);
    let target = r.target.filter(|t| !t.is_empty());
    match kind {
        EntryKind::File if hash.is_some() && purged.is_some() => {
            return Err("a purged entry has a `hash`".into());
        }
        EntryKind::File if hash.is_none() && purged.is_none() => {
            return Err("file entry has no `hash`".into());
        }
        EntryKind::Link | EntryKind::Directory if purged.is_some() => {
            return Err(format!("{kind} entries have no content to purge"));
        }
        EntryKind::Link if target.is_none() => return Err("link entry has no `target`".into()),
        EntryKind::Link | EntryKind::Directory if encrypted => {
            return Err(format!("{kind} entries cannot be encrypted"));
        }
        _ => {}
    }
    if target.as_deref().is_some_and(|t| t.contains('\0')) {
        return Err("link target contains a NUL byte".into());
    }
    Ok(Entry {
        path,
        kind,
        hash: if kind == EntryKind::File { hash } else { None },
        plaintext_hash,
        plaintext_mac,
        encrypted,
        locked: r.locked.unwrap_or(false),
        mode,
        target: if kind == EntryKind::Link {
            target
        } else {
            None
        },
        updated,
        only,
        never,
        template,
        run,
        purged,
    })
}

#[cfg(test)]
mod tests;
