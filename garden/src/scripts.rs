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
    /// How Windows starts it ([`windows_start`] of its name and first
    /// line); Unix executes the file.
    pub start: Start,
    _dir: tempfile::TempDir,
}

/// How much of a file's beginning [`windows_start`] reads: a longer `#!`
/// line is cut there (Linux reads 256 bytes of it too).
pub const HEAD_LEN: usize = 256;

/// Why Windows cannot run a file as a script ([`Start::Refused`]).
pub const WINDOWS_REFUSED: &str =
    "on Windows a script runs by its extension (.cmd, .bat, .ps1, .exe) or its #! line";

/// How Windows starts a file as a script: by its extension, as Windows
/// does, else by its `#!` line, as Unix does (a mode bit means nothing
/// there). The same rule says which new files a Windows machine records
/// executable (`platform::windows_mode_to_record`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// A program (`.exe`, `.com`): the file itself.
    Program,
    /// A batch file (`.cmd`, `.bat`): the file itself, which Rust's std
    /// runs through the system's `cmd.exe /e:ON /v:OFF /d /c` (no AutoRun,
    /// no delayed expansion, the path quoted as `cmd` reads it), not
    /// through `%COMSPEC%`, which any environment may point elsewhere.
    Batch,
    /// A PowerShell script (`.ps1`): `powershell.exe -NoProfile
    /// -NonInteractive -ExecutionPolicy Bypass -File` and the file.
    PowerShell,
    /// The program its `#!` line names (its last path component, or the
    /// word after `env`), or `sh` for a `.sh` file without one: found on
    /// `PATH` (Git for Windows has `sh` and `bash`), given `args` and then
    /// the file.
    Interpreter {
        /// The program's name, to find on `PATH`.
        program: String,
        /// The arguments before the file: the rest of the `#!` line, one
        /// argument as Unix passes it (split into words after `env`).
        args: Vec<String>,
    },
    /// Nothing says how: Windows cannot run it ([`WINDOWS_REFUSED`]).
    Refused,
}

/// How Windows starts a script named `name` (its file name) whose content
/// begins with `head` (up to [`HEAD_LEN`] bytes): `.exe`, `.com`, `.cmd`,
/// `.bat` and `.ps1` (any case) by their extension; else a `#!` line's
/// program; else `sh` for a `.sh` file; else [`Start::Refused`].
pub fn windows_start(name: &str, head: &[u8]) -> Start {
    let ext = std::path::Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match ext.as_deref() {
        Some("exe" | "com") => return Start::Program,
        Some("cmd" | "bat") => return Start::Batch,
        Some("ps1") => return Start::PowerShell,
        _ => {}
    }
    if let Some(start) = shebang(head) {
        return start;
    }
    if ext.as_deref() == Some("sh") {
        return Start::Interpreter {
            program: "sh".into(),
            args: Vec::new(),
        };
    }
    Start::Refused
}

/// The program and arguments of a `#!` line at the start of `head`
/// (`None`: there is none, or it names no program).
fn shebang(head: &[u8]) -> Option<Start> {
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = std::str::from_utf8(line)
        .ok()?
        .trim_end_matches('\r')
        .trim();
    let (first, tail) = line
        .split_once([' ', '\t'])
        .map_or((line, ""), |(a, b)| (a, b.trim()));
    let last = |w: &str| w.rsplit(['/', '\\']).next().unwrap_or_default().to_owned();
    let named = |program: String, args: Vec<String>| {
        (!program.is_empty() && program != "." && program != "..")
            .then_some(Start::Interpreter { program, args })
    };
    if last(first) == "env" {
        // `env [-S] [NAME=value]... program args...`
        let mut words = tail
            .split_whitespace()
            .skip_while(|w| w.starts_with('-') || w.contains('='));
        let program = last(words.next()?);
        return named(program, words.map(str::to_owned).collect());
    }
    let args = if tail.is_empty() {
        Vec::new()
    } else {
        vec![tail.to_owned()]
    };
    named(last(first), args)
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
        let staged_name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let head = &s.content[..s.content.len().min(HEAD_LEN)];
        Ok(StagedScript {
            start: windows_start(&staged_name, head),
            file,
            _dir: dir,
        })
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

#[cfg(test)]
mod tests {
    use super::{Start, windows_start};

    fn via(program: &str, args: &[&str]) -> Start {
        Start::Interpreter {
            program: program.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    /// Windows' own kinds go by their extension, in any case, whatever the
    /// first line says.
    #[test]
    fn windows_runs_a_script_by_its_extension() {
        assert_eq!(windows_start("setup.exe", b"MZ"), Start::Program);
        assert_eq!(windows_start("SETUP.COM", b""), Start::Program);
        assert_eq!(windows_start("setup.cmd", b"@echo off\r\n"), Start::Batch);
        assert_eq!(windows_start("Setup.BAT", b"#!/bin/sh\n"), Start::Batch);
        assert_eq!(
            windows_start("setup.ps1", b"#!/usr/bin/env pwsh\n"),
            Start::PowerShell
        );
        assert_eq!(windows_start("setup.sh", b"echo hi\n"), via("sh", &[]));
    }

    /// Else the `#!` line names the program: its last path component, or
    /// the word after `env`; the rest of the line is one argument, as on
    /// Unix (words after `env`).
    #[test]
    fn windows_runs_a_script_by_its_shebang() {
        assert_eq!(windows_start("setup", b"#!/bin/sh\necho"), via("sh", &[]));
        assert_eq!(
            windows_start("setup", b"#!/bin/bash\r\necho"),
            via("bash", &[])
        );
        assert_eq!(
            windows_start("s.sh", b"#! /usr/bin/env bash\n"),
            via("bash", &[])
        );
        assert_eq!(
            windows_start("s.py", b"#!/usr/bin/env -S python3 -u\n"),
            via("python3", &["-u"])
        );
        assert_eq!(
            windows_start("s", b"#!/usr/bin/env LC_ALL=C perl -w\n"),
            via("perl", &["-w"])
        );
        assert_eq!(
            windows_start("s", b"#!/bin/bash -e -u\n"),
            via("bash", &["-e -u"])
        );
        assert_eq!(
            windows_start("s", br"#!C:\Git\bin\sh.exe"),
            via("sh.exe", &[])
        );
        // A line cut by the head still names its program.
        assert_eq!(windows_start("s", b"#!/bin/zsh"), via("zsh", &[]));
    }

    /// Anything else is refused, and so is a `#!` line that names nothing.
    #[test]
    fn windows_refuses_what_nothing_says_how_to_run() {
        for (name, head) in [
            ("setup", &b"echo hi\n"[..]),
            ("setup.txt", b"#"),
            ("setup", b""),
            ("setup", b"#!\n/bin/sh"),
            ("setup", b"#!/usr/bin/env\n"),
            ("setup", b"#!/usr/bin/env -S\n"),
            ("setup", b"#!/bin/..\n"),
            ("setup", b"#!/bin/\n"),
            ("setup", b"#!/bin/\xff\n"),
            ("cmd", b"@echo off"),
            ("setup.cmd.txt", b""),
            (" #!/bin/sh", b" #!/bin/sh"),
        ] {
            assert_eq!(windows_start(name, head), Start::Refused, "{name}");
        }
    }
}
