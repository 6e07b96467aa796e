//! Scripts: tracked executable files run after restores.
//!
//! An entry with `run: once` runs once per distinct content on each
//! machine; `run: onchange` whenever its content differs from the last
//! successful run on the machine. What runs is the stored content (the
//! rendering of a template, the plaintext of a secret), from a private
//! copy, so a local edit of the file on disk never runs by surprise. What
//! ran is recorded for the whole machine, whichever repository brought the
//! script (`$XDG_STATE_HOME/sgard/scripts`: one `<sha256 of the content>
//! <sha256 of the path>` line per successful run, so no path can break or
//! forge a line), only after the script exits 0. The per-repository
//! records older versions kept (`repos/<key>/scripts`) count as well until
//! the next record merges them in and removes them. Scripts run with no
//! sgard lock held (a script may run sgard): [`Garden::stage_script`] makes
//! everything a run needs, and [`DueScript::record_success`] needs no
//! [`Garden`].

use crate::Repo;
use crate::Tx;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sgard_manifest::{EntryKind, Run};
use sgard_store::Hash;
use zeroize::Zeroizing;

use crate::{Error, Garden, Result};

/// The machine's record of what ran, in `$XDG_STATE_HOME/sgard/` (and
/// the name of older versions' per-repository records).
const RAN_FILE: &str = "scripts";

/// The largest record read.
const RAN_MAX: u64 = 16 << 20;

/// A script that is due, ready to run.
#[derive(Debug)]
pub struct DueScript {
    /// The entry's path (`~/…`).
    pub path: String,
    /// When it runs.
    pub run: Run,
    /// The SHA-256 of what runs.
    pub hash: Hash,
    content: Zeroizing<Vec<u8>>,
    /// `$XDG_STATE_HOME/sgard`, where this machine's record of runs is
    /// (`None`: none is kept).
    record: Option<PathBuf>,
}

/// A private, executable copy of a script (removed on drop).
#[derive(Debug)]
pub struct StagedScript {
    /// The file to execute.
    pub file: PathBuf,
    _dir: tempfile::TempDir,
}

/// One script's fate when the due list was drawn up.
#[derive(Debug)]
pub enum ScriptCheck {
    /// Due to run.
    Due(DueScript),
    /// Its content cannot be had (a missing blob, no key, a template
    /// error): it does not run, and this says why.
    Broken(String, Error),
}

impl Garden {
    /// Every script that applies to this machine and is due, in path
    /// order; with `all`, every script whether due or not.
    ///
    /// # Errors
    /// Reading this machine's record; targeting errors.
    pub fn scripts_due(&mut self, all: bool) -> Result<Vec<ScriptCheck>> {
        self.tx().scripts_due(all)
    }

    /// A private executable copy of `s` in this machine's state folder
    /// (not the system temp folder, which may be mounted noexec).
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::Invalid`] without a state folder.
    pub fn stage_script(&self, s: &DueScript) -> Result<StagedScript> {
        let base =
            self.repo.local_dir.clone().ok_or_else(|| {
                Error::Invalid("scripts need a state folder (XDG_STATE_HOME)".into())
            })?;
        sgard_store::durable::create_private_dir_all(&base)?;
        let dir = crate::platform::private(
            tempfile::Builder::new().prefix(crate::own::RUN_PREFIX),
            0o700,
        )
        .tempdir_in(&base)
        .map_err(|e| Error::io("creating a private folder in", &base, e))?;
        if let Some(name) = dir.path().file_name() {
            sgard_store::cancel::register_prefix(&base, name);
        }
        let name = std::path::Path::new(&s.path)
            .file_name()
            .map_or_else(|| "script".into(), |n| n.to_string_lossy().into_owned());
        let name = name.trim_start_matches('.');
        let file = dir
            .path()
            .join(if name.is_empty() { "script" } else { name });
        sgard_store::durable::write_atomic(&file, &s.content, 0o700)?;
        Ok(StagedScript { file, _dir: dir })
    }
}

impl Repo {
    /// `$XDG_STATE_HOME/sgard`, which holds the machine's record of runs.
    fn ran_dir(&self) -> Option<PathBuf> {
        self.env.state_dir.as_ref().map(|d| d.join("sgard"))
    }

    /// What ran here: per path's SHA-256, the contents that ran, oldest
    /// first.
    fn ran(&self) -> Result<HashMap<String, Vec<Hash>>> {
        let mut out: HashMap<String, Vec<Hash>> = HashMap::new();
        let Some(dir) = self.ran_dir() else {
            return Ok(out);
        };
        for line in ran_lines(&dir)?.0 {
            // A line that does not parse is not a record: the script runs.
            if let Some((h, path)) = line.split_once(' ')
                && let Ok(h) = Hash::parse(h)
            {
                out.entry(path.to_owned()).or_default().push(h);
            }
        }
        Ok(out)
    }
}

impl Tx<'_> {
    pub(crate) fn scripts_due(&mut self, all: bool) -> Result<Vec<ScriptCheck>> {
        let ran = self.repo.ran()?;
        let mut scripts: Vec<_> = self
            .repo
            .manifest
            .files
            .iter()
            .filter(|e| e.kind == EntryKind::File && e.run.is_some())
            .collect();
        scripts.sort_by(|a, b| a.path.cmp(&b.path));
        let mut out = Vec::new();
        for e in scripts {
            let Some(run) = e.run else { continue };
            if !self.repo.applies(e)? {
                continue;
            }
            let content = match self.script_content(e) {
                Ok(c) => c,
                Err(err) => {
                    out.push(ScriptCheck::Broken(e.path.clone(), err));
                    continue;
                }
            };
            let hash = Hash::of(&content);
            let key = Hash::of(e.path.as_bytes()).to_hex();
            let past = ran.get(&key).map(Vec::as_slice).unwrap_or_default();
            let due = match run {
                Run::Once => !past.contains(&hash),
                Run::OnChange => past.last() != Some(&hash),
            };
            if due || all {
                out.push(ScriptCheck::Due(DueScript {
                    path: e.path.clone(),
                    run,
                    hash,
                    content,
                    record: self.repo.ran_dir(),
                }));
            }
        }
        Ok(out)
    }

    /// What a script entry runs: its stored content, decrypted, rendered.
    fn script_content(&mut self, e: &sgard_manifest::Entry) -> Result<Zeroizing<Vec<u8>>> {
        if e.template {
            return Ok(Zeroizing::new(self.rendering(e)?));
        }
        if e.encrypted {
            return self.stored_plaintext(e);
        }
        Ok(Zeroizing::new(self.repo.blob_of(e)?))
    }
}

impl DueScript {
    /// Records that this script ran here and exited 0 (under a lock, so
    /// two commands recording at once both count), merging in the records
    /// older versions kept per repository and removing them once the
    /// machine's record holds them.
    ///
    /// # Errors
    /// [`Error::Io`] writing the record.
    pub fn record_success(&self) -> Result<()> {
        let Some(dir) = self.record.clone() else {
            return Ok(());
        };
        // `scripts.lock`, beside it.
        let _lock = crate::index::WriteLock::take(&dir.join(RAN_FILE))?;
        let (lines, older) = ran_lines(&dir)?;
        // One line per distinct run, the newest last: a content that ran
        // before moves to the end.
        let line = format!(
            "{} {}",
            self.hash.to_hex(),
            Hash::of(self.path.as_bytes()).to_hex()
        );
        let mut seen = std::collections::HashSet::from([line.as_str()]);
        let mut kept: Vec<&str> = lines
            .iter()
            .rev()
            .filter(|l| seen.insert(l.as_str()))
            .map(String::as_str)
            .collect();
        kept.reverse();
        kept.push(&line);
        let mut text = kept.join("\n");
        text.push('\n');
        sgard_store::durable::write_atomic(&dir.join(RAN_FILE), text.as_bytes(), 0o600)?;
        for f in older {
            let _ = std::fs::remove_file(f);
        }
        Ok(())
    }
}

/// The record's lines, oldest first: those of the per-repository records
/// older versions kept under `dir` (`repos/<key>/scripts`, in path order),
/// then the machine's; and the older records' files.
fn ran_lines(dir: &Path) -> Result<(Vec<String>, Vec<PathBuf>)> {
    let read = |p: &Path| match sgard_store::durable::read_regular_to_string_max(p, RAN_MAX) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("reading", p, e)),
    };
    let mut older: Vec<PathBuf> = match std::fs::read_dir(dir.join("repos")) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.path().join(RAN_FILE))
            .filter(|p| p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    older.sort();
    let mut lines = Vec::new();
    let mut found = Vec::new();
    for p in older.iter().chain(std::iter::once(&dir.join(RAN_FILE))) {
        if let Some(t) = read(p)? {
            lines.extend(t.lines().map(str::to_owned));
            found.push(p.clone());
        }
    }
    found.retain(|p| *p != dir.join(RAN_FILE));
    Ok((lines, found))
}
