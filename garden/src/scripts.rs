//! Scripts: tracked executable files run after restores.
//!
//! An entry with `run: once` runs once per distinct content on each
//! machine; `run: onchange` whenever its content differs from the last
//! successful run on the machine. What runs is the stored content (the
//! rendering of a template, the plaintext of a secret), from a private
//! copy, so a local edit of the file on disk never runs by surprise. What
//! ran is recorded in this machine's state for the repository
//! (`scripts`: one `<sha256 of the content> <sha256 of the path>` line per
//! successful run, so no path can break or forge a line), only after the
//! script exits 0. Scripts run with no sgard lock held (a script may run
//! sgard): [`Garden::stage_script`] makes everything a run needs, and
//! [`DueScript::record_success`] needs no [`Garden`].

use std::collections::HashMap;
use std::path::PathBuf;

use sgard_manifest::{EntryKind, Run};
use sgard_store::Hash;
use zeroize::Zeroizing;

use crate::{Error, Garden, Result};

/// The machine-local record of what ran.
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
    /// This machine's record of runs (`None`: none is kept).
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
    fn ran_path(&self) -> Option<PathBuf> {
        self.local_dir.as_ref().map(|d| d.join(RAN_FILE))
    }

    /// What ran here: per path's SHA-256, the contents that ran, oldest
    /// first.
    fn ran(&self) -> Result<HashMap<String, Vec<Hash>>> {
        let mut out: HashMap<String, Vec<Hash>> = HashMap::new();
        let Some(p) = self.ran_path() else {
            return Ok(out);
        };
        let text = match sgard_store::durable::read_regular_to_string_max(&p, RAN_MAX) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(Error::io("reading", p, e)),
        };
        for line in text.lines() {
            // A line that does not parse is not a record: the script runs.
            if let Some((h, path)) = line.split_once(' ')
                && let Ok(h) = Hash::parse(h)
            {
                out.entry(path.to_owned()).or_default().push(h);
            }
        }
        Ok(out)
    }

    /// Every script that applies to this machine and is due, in path
    /// order; with `all`, every script whether due or not.
    ///
    /// # Errors
    /// Reading this machine's record; targeting errors.
    pub fn scripts_due(&self, all: bool) -> Result<Vec<ScriptCheck>> {
        let ran = self.ran()?;
        let mut scripts: Vec<_> = self
            .manifest
            .files
            .iter()
            .filter(|e| e.kind == EntryKind::File && e.run.is_some())
            .collect();
        scripts.sort_by(|a, b| a.path.cmp(&b.path));
        let mut out = Vec::new();
        for e in scripts {
            let Some(run) = e.run else { continue };
            if !self.applies(e)? {
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
                    record: self.ran_path(),
                }));
            }
        }
        Ok(out)
    }

    /// What a script entry runs: its stored content, decrypted, rendered.
    fn script_content(&self, e: &sgard_manifest::Entry) -> Result<Zeroizing<Vec<u8>>> {
        if e.template {
            return Ok(Zeroizing::new(self.rendering(e)?));
        }
        if e.encrypted {
            return self.stored_plaintext(e);
        }
        Ok(Zeroizing::new(self.blob_of(e)?))
    }

    /// A private executable copy of `s` in this machine's state folder
    /// (not the system temp folder, which may be mounted noexec).
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::Invalid`] without a state folder.
    pub fn stage_script(&self, s: &DueScript) -> Result<StagedScript> {
        let base = self
            .local_dir
            .clone()
            .ok_or_else(|| Error::Invalid("scripts need a state folder (XDG_STATE_HOME)".into()))?;
        sgard_store::durable::create_private_dir_all(&base)?;
        let dir = tempfile::Builder::new()
            .prefix(".sgard-run-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
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

impl DueScript {
    /// Records that this script ran here and exited 0.
    ///
    /// # Errors
    /// [`Error::Io`] writing the record.
    pub fn record_success(&self) -> Result<()> {
        let Some(p) = self.record.clone() else {
            return Ok(());
        };
        let s = self;
        let old = match sgard_store::durable::read_regular_to_string_max(&p, RAN_MAX) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(Error::io("reading", p, e)),
        };
        // One line per distinct run, the newest last: a content that ran
        // before moves to the end.
        let line = format!(
            "{} {}",
            s.hash.to_hex(),
            Hash::of(s.path.as_bytes()).to_hex()
        );
        let mut text: String = old
            .lines()
            .filter(|l| *l != line)
            .flat_map(|l| [l, "\n"])
            .collect();
        text.push_str(&line);
        text.push('\n');
        if let Some(dir) = p.parent() {
            sgard_store::durable::create_private_dir_all(dir)?;
        }
        sgard_store::durable::write_atomic(&p, text.as_bytes(), 0o600)?;
        Ok(())
    }
}
