//! `sgard external`: content fetched once, checked against its pin,
//! unpacked, and stored in the repository like any other entry (see
//! `sgard_externals` for the fetching and unpacking, and
//! `sgard_manifest::externals` for the record).
//!
//! An external's files are ordinary entries: `status`, `diff`, `restore`
//! and every other command treat them as such, and restore on a machine
//! with no network writes them from the repository. Only `external add`
//! (and, later, `external refresh`) reads the network.

use std::ffi::OsString;
use std::path::PathBuf;

use sgard_externals::{Format, Limits};
use sgard_manifest::externals::{EXTERNALS_FILE, External, ExternalLog};

use crate::{AddOptions, AddReport, Error, Garden, Result};

/// What to fetch, and where it goes.
#[derive(Clone, Debug)]
pub struct ExternalSpec {
    /// The path it goes to (as given: resolved like any path argument).
    pub path: OsString,
    /// Where it comes from.
    pub url: String,
    /// The SHA-256 it must have (hex); `None`: unpinned.
    pub sha256: Option<String>,
    /// `None`: a single file; else the archive's format.
    pub archive: Option<Format>,
    /// Leading name components dropped when unpacking.
    pub strip: u32,
    /// Only the archive's files matching one of these globs.
    pub include: Vec<String>,
    /// How long a fetch stays fresh (`7d`, `12h`…).
    pub refresh: Option<String>,
    /// The bounds on what it may bring.
    pub limits: Limits,
}

/// What [`Garden::add_external`] did.
#[derive(Debug)]
pub struct ExternalReport {
    /// Its path (`~/…`).
    pub path: String,
    /// The SHA-256 of what was fetched.
    pub sha256: String,
    /// Bytes fetched.
    pub fetched: u64,
    /// Files written (1 for a single file).
    pub files: u64,
    /// What adding them did.
    pub add: AddReport,
}

impl Garden {
    /// The externals of the repository.
    ///
    /// # Errors
    /// The file cannot be read or parsed.
    pub fn externals(&self) -> Result<ExternalLog> {
        Ok(ExternalLog::load(&self.repo.root.join(EXTERNALS_FILE))?)
    }

    /// Fetches `spec`'s source, checks it against its pin, writes it (a
    /// file, or the archive unpacked into a new folder) at its path, adds
    /// what it wrote (in plaintext: an external is public content) and
    /// records the external. The path must not exist: nothing of the home
    /// is ever replaced by a download. The download and the unpacking
    /// happen in a temp folder beside the path, renamed into place only
    /// when whole.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the path exists or is an external already;
    /// [`Error::PinMismatch`]; [`Error::External`] (unreachable, too large,
    /// a hostile or damaged archive); add and I/O errors. Nothing is left
    /// at the path on any error.
    pub fn add_external(&mut self, spec: &ExternalSpec) -> Result<ExternalReport> {
        self.require_exclusive("external add")?;
        let abs = self.repo.env.resolve(&spec.path);
        let tilde = self.repo.env.to_tilde(&abs)?;
        let log_path = self.repo.root.join(EXTERNALS_FILE);
        let mut log = ExternalLog::load(&log_path)?;
        if let Some(x) = log.owner(&tilde) {
            return Err(Error::Conflict(format!(
                "{tilde} is inside the external at {} already",
                x.path
            )));
        }
        if log.externals.iter().any(|x| {
            x.path
                .strip_prefix(tilde.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
        }) {
            return Err(Error::Conflict(format!(
                "{tilde} holds an external already"
            )));
        }
        if std::fs::symlink_metadata(&abs).is_ok() {
            return Err(Error::Conflict(format!(
                "{} exists; an external is written to a new path (move that one away first)",
                abs.display()
            )));
        }
        let parent = abs
            .parent()
            .map(PathBuf::from)
            .ok_or_else(|| Error::Invalid(format!("{}: no folder to put it in", abs.display())))?;
        std::fs::create_dir_all(&parent).map_err(|e| Error::io("creating", &parent, e))?;
        let work = tempfile::Builder::new()
            .prefix(".sgard-tmp-ext-")
            .tempdir_in(&parent)
            .map_err(|e| Error::io("creating a temp folder in", &parent, e))?;
        let download = work.path().join("download");
        let got = sgard_externals::fetch(&spec.url, &download, &spec.limits)?;
        if let Some(pin) = &spec.sha256
            && !pin.eq_ignore_ascii_case(&got.sha256)
        {
            return Err(Error::PinMismatch {
                path: tilde,
                url: spec.url.clone(),
                pinned: pin.to_ascii_lowercase(),
                got: got.sha256,
            });
        }
        let (staged, files) = match spec.archive {
            None | Some(Format::File) => (download, 1),
            Some(format) => {
                let stage = work.path().join("stage");
                std::fs::create_dir(&stage).map_err(|e| Error::io("creating", &stage, e))?;
                let u = sgard_externals::unpack(
                    &download,
                    format,
                    &stage,
                    spec.strip as usize,
                    &spec.include,
                    &spec.limits,
                )?;
                (stage, u.files)
            }
        };
        std::fs::rename(&staged, &abs).map_err(|e| Error::io("moving into place", &abs, e))?;
        sgard_store::durable::fsync_dir(&parent)?;
        drop(work);
        let opts = AddOptions {
            no_encrypt: true,
            ..AddOptions::default()
        };
        let add = match self.add(&[abs.clone().into_os_string()], &opts) {
            Ok(a) => a,
            Err(e) => {
                // Nothing of it stays: it was never recorded.
                let _ = if abs.is_dir() {
                    std::fs::remove_dir_all(&abs)
                } else {
                    std::fs::remove_file(&abs)
                };
                return Err(e);
            }
        };
        log.externals.push(External {
            path: tilde.clone(),
            url: spec.url.clone(),
            format: spec.archive.unwrap_or(Format::File).as_str().to_owned(),
            sha256: got.sha256.clone(),
            pinned: spec.sha256.is_some(),
            strip: spec.strip,
            include: spec.include.clone(),
            refresh: spec.refresh.clone(),
            fetched: self.repo.env.now,
        });
        log.save(&log_path)?;
        Ok(ExternalReport {
            path: tilde,
            sha256: got.sha256,
            fetched: got.bytes,
            files,
            add,
        })
    }
}
