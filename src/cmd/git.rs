//! `sgard git` (git, run in the repository), `sgard git-merge-driver` (how
//! git merges the manifest and the history), and the setup that makes git
//! use it: `.gitattributes` in the repository, the `sgard` driver in the
//! clone's git config (a clone does not carry config, so sgard adds it the
//! first time it meets the clone).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, Result, anyhow, bail};
use sgard_garden::{Access, GITATTRIBUTES, Garden, Options};
use sgard_store::durable;

use super::Ctx;
use crate::ui;

/// The line of [`GITATTRIBUTES`] that says the merge setup is there.
const ATTRIBUTE: &str = "manifest.yaml merge=sgard";

/// The line of [`GITATTRIBUTES`] that keeps git from converting line
/// endings.
const BYTE_EXACT: &str = "* -text";

/// The repository's git settings (`git.yaml`, committed with it).
const SETTINGS_FILE: &str = "git.yaml";

/// What sgard does with git after a checkpoint (`sgard git auto-commit
/// on|off`, `sgard git auto-push on|off`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// Commit the repository after a checkpoint that recorded something.
    pub auto_commit: bool,
    /// Push after that commit.
    pub auto_push: bool,
}

impl Settings {
    /// The settings of `repo` (none written: both off). Two `key: bool`
    /// lines; anything else in the file is ignored.
    pub fn load(repo: &Path) -> Settings {
        let text = durable::read_regular_to_string(&repo.join(SETTINGS_FILE)).unwrap_or_default();
        let mut s = Settings::default();
        for line in text.lines() {
            if let Some((k, v)) = line.split_once(':') {
                let on = v.trim() == "true";
                match k.trim() {
                    "auto_commit" => s.auto_commit = on,
                    "auto_push" => s.auto_push = on,
                    _ => {}
                }
            }
        }
        s
    }

    fn save(self, repo: &Path) -> Result<()> {
        let text = format!(
            "# sgard's git settings (`sgard git auto-commit on|off`, `sgard git auto-push on|off`)\n\
             auto_commit: {}\nauto_push: {}\n",
            self.auto_commit, self.auto_push
        );
        let path = repo.join(SETTINGS_FILE);
        durable::write_atomic(&path, text.as_bytes(), 0o644)
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// `sgard git auto-commit|auto-push [on|off]`: shows or changes a setting.
fn setting(ctx: &Ctx, which: &str, value: Option<&str>) -> Result<ExitCode> {
    let _g = ctx.open(sgard_garden::LockMode::Exclusive)?;
    let mut s = Settings::load(&ctx.repo);
    let slot = if which == "auto-commit" {
        &mut s.auto_commit
    } else {
        &mut s.auto_push
    };
    match value {
        None => {}
        Some("on") => *slot = true,
        Some("off") => *slot = false,
        Some(other) => {
            return Err(crate::exit::Fail::usage(format!(
                "`sgard git {which}` takes `on` or `off`, not `{other}`"
            )));
        }
    }
    if value.is_some() {
        // Pushing commits first.
        if which == "auto-push" && s.auto_push {
            s.auto_commit = true;
        }
        if which == "auto-commit" && !s.auto_commit {
            s.auto_push = false;
        }
        s.save(&ctx.repo)?;
    }
    let word = |b: bool| if b { "on" } else { "off" };
    println!(
        "auto-commit {}, auto-push {}",
        word(s.auto_commit),
        word(s.auto_push)
    );
    Ok(ExitCode::SUCCESS)
}

/// After a checkpoint that recorded a snapshot: commits what changed in
/// the repository folder with `message` and, with `push`, pushes. What
/// fails is a warning naming git's words (the checkpoint is recorded
/// whatever git says); returns the lines to print.
pub fn commit_checkpoint(repo: &Path, message: &str, push: bool) -> Vec<String> {
    let mut said = Vec::new();
    if git_config_file(repo).is_none() {
        ui::warn(&format!(
            "not committed: {} is not in a git work tree (`sgard git init`)",
            repo.display()
        ));
        return said;
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .stdin(Stdio::null())
            .output()
    };
    let failed = |what: &str, out: std::io::Result<std::process::Output>| -> bool {
        match out {
            Ok(o) if o.status.success() => false,
            Ok(o) => {
                ui::warn(&format!(
                    "the checkpoint is recorded, but `git {what}` failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                true
            }
            Err(e) => {
                ui::warn(&format!(
                    "the checkpoint is recorded, but git could not run: {e}"
                ));
                true
            }
        }
    };
    if failed("add", git(&["add", "-A", "--", "."])) {
        return said;
    }
    // Nothing staged in the repository folder: nothing to commit.
    if git(&["diff", "--cached", "--quiet", "--", "."]).is_ok_and(|o| o.status.success()) {
        return said;
    }
    if failed("commit", git(&["commit", "-q", "-m", message, "--", "."])) {
        return said;
    }
    let head = git(&["rev-parse", "--short", "HEAD"])
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    said.push(format!("Committed {head}: {message}"));
    if push {
        if failed("push", git(&["push", "-q"])) {
            return said;
        }
        said.push("Pushed.".to_owned());
    }
    said
}

/// `sgard git ARGS…`: git in the repository folder, its exit code passed
/// on; `sgard git auto-commit|auto-push [on|off]` are sgard's settings.
fn run(ctx: &Ctx, args: &[OsString]) -> Result<ExitCode> {
    let words: Vec<Option<&str>> = args.iter().map(|a| a.to_str()).collect();
    if let Some(Some(which @ ("auto-commit" | "auto-push"))) = words.first() {
        if args.len() > 2 {
            return Err(crate::exit::Fail::usage(format!(
                "`sgard git {which}` takes one word: `on` or `off`"
            )));
        }
        return setting(ctx, which, words.get(1).copied().flatten());
    }
    set_up(&ctx.repo, Attributes::Route);
    let status = Command::new("git")
        .arg("-C")
        .arg(&ctx.repo)
        .args(args)
        .status()
        .map_err(|e| anyhow!("cannot run git: {e}"))
        .context("`sgard git` runs git in the repository; is git installed?")?;
    Ok(match status.code() {
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::from(crate::exit::INTERRUPTED),
    })
}

/// `sgard git-merge-driver BASE OURS THEIRS PATH`: merges the versions of
/// `manifest.yaml` or `history.yaml` git hands over, writing the result
/// into OURS. Exit 0 with a file sgard reads, never conflict markers; a
/// version that does not parse is an error (git then keeps OURS as it is
/// and marks the file unmerged).
fn merge_driver(
    ctx: &Ctx,
    base: &Path,
    ours: &Path,
    theirs: &Path,
    path: &Path,
) -> Result<ExitCode> {
    let read =
        |p: &Path| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
    let (b, o, t) = (read(base)?, read(ours)?, read(theirs)?);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let text = match name {
        sgard_manifest::history::HISTORY_FILE => sgard_garden::git_merge_history(&o, &t)
            .with_context(|| format!("merging {}", path.display()))?,
        sgard_manifest::MANIFEST_FILE => {
            let repo = std::env::current_dir()
                .context("reading the current folder")?
                .join(path)
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            let merged = match Garden::open(
                &repo,
                ctx.env.clone(),
                Options {
                    on_wait: Some(&ui::note),
                    ..Options::from(Access::Home)
                },
            ) {
                Ok(mut g) => {
                    let merged = g.git_merge_manifest(&b, &o, &t);
                    ctx.finish_query(g);
                    merged
                }
                Err(e) => {
                    ui::warn(&format!(
                        "cannot read this machine's records of {} ({e}); entries changed on \
                         both sides keep this side's version",
                        repo.display()
                    ));
                    sgard_garden::git_merge_manifest_alone(&b, &o, &t)
                }
            }
            .with_context(|| format!("merging {}", path.display()))?;
            for p in &merged.conflicts {
                ui::warn(&format!(
                    "{p} changed on both sides: a conflict on this machine, your version kept \
                     on disk (`sgard status`, then `sgard merge {p}` or `sgard add`/`sgard \
                     restore -f`)"
                ));
            }
            for p in &merged.unsettled {
                ui::warn(&format!(
                    "{p} changed on both sides, and this machine holds neither version as it \
                     was recorded: the merge keeps this side's; the other side's is in the \
                     history (`sgard log`, `sgard restore --at ID {p}`)"
                ));
            }
            if merged.data_conflict {
                ui::warn(
                    "the template data changed on both sides: this side's is kept (edit \
                     data.yaml to settle it)",
                );
            }
            merged.text
        }
        _ => bail!(
            "{} is not a file sgard merges (only {} and {})",
            path.display(),
            sgard_manifest::MANIFEST_FILE,
            sgard_manifest::history::HISTORY_FILE
        ),
    };
    durable::write_atomic(ours, text.as_bytes(), 0o644)
        .with_context(|| format!("writing {}", ours.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// Where git keeps the work tree's config, if `repo` is in a git work
/// tree: `.git/config` of the nearest folder above holding `.git` (a
/// `.git` file, of a linked work tree or a submodule, names the folder).
fn git_config_file(repo: &Path) -> Option<PathBuf> {
    let mut dir = Some(repo);
    while let Some(d) = dir {
        let dot = d.join(".git");
        match std::fs::symlink_metadata(&dot) {
            Ok(md) if md.is_dir() => return Some(dot.join("config")),
            Ok(md) if md.is_file() => {
                let text = std::fs::read_to_string(&dot).ok()?;
                let gitdir = d.join(text.strip_prefix("gitdir:")?.trim());
                // A linked work tree shares the config of the main one.
                let common = std::fs::read_to_string(gitdir.join("commondir"))
                    .map(|c| gitdir.join(c.trim()))
                    .unwrap_or(gitdir);
                return Some(common.join("config"));
            }
            _ => dir = d.parent(),
        }
    }
    None
}

/// The `sgard` merge driver's command in git config `text`, if defined.
fn configured_driver(text: &str) -> Option<String> {
    let mut inside = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            inside = l.replace(' ', "").eq_ignore_ascii_case("[merge\"sgard\"]");
            continue;
        }
        if inside
            && let Some((k, v)) = l.split_once('=')
            && k.trim().eq_ignore_ascii_case("driver")
        {
            return Some(v.trim().to_owned());
        }
    }
    None
}

/// Whether the program a driver command starts exists (a bare name is
/// looked up on `PATH`).
fn program_exists(command: &str) -> bool {
    let Some(words) = shlex::split(command.trim_matches('"')) else {
        return false;
    };
    let Some(program) = words.first() else {
        return false;
    };
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    which(program).is_some()
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The command git runs to merge: `sgard` when that is this program on
/// `PATH` (it survives upgrades), otherwise this program's full path.
fn driver_command() -> Option<String> {
    let me = std::env::current_exe().ok()?;
    let me = std::fs::canonicalize(&me).unwrap_or(me);
    let on_path = which("sgard").and_then(|p| std::fs::canonicalize(p).ok());
    let program = if on_path.as_deref() == Some(me.as_path()) {
        "sgard".to_owned()
    } else {
        shlex::try_quote(me.to_str()?).ok()?.into_owned()
    };
    Some(format!("{program} git-merge-driver %O %A %B %P"))
}

/// A part of the git setup that is missing: what, and whether it is the
/// line that keeps blobs byte-exact (else the merge driver's setup).
pub struct Missing {
    /// What is missing, naming the file.
    pub what: String,
    /// The `* -text` line, not the merge driver's setup.
    pub byte_exact: bool,
}

/// What is missing of the git setup of `repo` (empty: all there, or not
/// in a git work tree): for `doctor`.
pub fn missing_setup(repo: &Path) -> Vec<Missing> {
    let Some(config) = git_config_file(repo) else {
        return Vec::new();
    };
    let merge = |what: String| Missing {
        what,
        byte_exact: false,
    };
    let mut out = Vec::new();
    match std::fs::read_to_string(&config)
        .ok()
        .and_then(|t| configured_driver(&t))
    {
        None => out.push(merge(format!(
            "the clone's git config ({}) does not define the `sgard` merge driver: git merges \
             manifest.yaml and history.yaml as text and stops with conflict markers",
            config.display()
        ))),
        Some(c) if !program_exists(&c) => out.push(merge(format!(
            "the `sgard` merge driver in {} runs a program that is not there ({c})",
            config.display()
        ))),
        Some(_) => {}
    }
    let missing = missing_attributes(repo);
    if missing.contains(&ATTRIBUTE) {
        out.push(merge(format!(
            "{} does not route manifest.yaml and history.yaml to the `sgard` merge driver",
            repo.join(".gitattributes").display()
        )));
    }
    if missing.contains(&BYTE_EXACT) {
        out.push(Missing {
            what: format!(
                "{} does not say `{BYTE_EXACT}`: a clone with core.autocrlf (git on Windows) \
                 changes the line endings of blobs, which then fail their hash",
                repo.join(".gitattributes").display()
            ),
            byte_exact: true,
        });
    }
    out
}

/// The lines of [`GITATTRIBUTES`] (but its comments) that the
/// repository's `.gitattributes` lacks.
fn missing_attributes(repo: &Path) -> Vec<&'static str> {
    missing_lines(&std::fs::read_to_string(repo.join(".gitattributes")).unwrap_or_default())
}

/// The lines of [`GITATTRIBUTES`] (but its comments) that `text` lacks.
fn missing_lines(text: &str) -> Vec<&'static str> {
    GITATTRIBUTES
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| !text.lines().any(|t| t.trim() == *l))
        .collect()
}

/// What [`set_up`] may do to the repository's `.gitattributes`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Attributes {
    /// Nothing (a reader never dirties the checkout).
    Leave,
    /// Add sgard's lines when the merge routing is missing (a repository
    /// no sgard set up: before `sgard git pull` merges it).
    Route,
    /// As `Route`, and add `* -text` where an older sgard wrote the lines
    /// without it (a command that writes the repository).
    Upgrade,
}

/// Makes git merge this repository with sgard, when it is in a git work
/// tree: defines the `sgard` driver in the clone's config where it is
/// missing (or runs a program that is gone), and as `attributes` says,
/// adds the lines of `.gitattributes` that route the files to it and keep
/// git from converting them. Lines a user changed or removed otherwise
/// are left as they are.
/// Best effort: what fails is a warning, and `doctor` says it again.
pub fn set_up(repo: &Path, attributes: Attributes) {
    let Some(config) = git_config_file(repo) else {
        return;
    };
    let driver = std::fs::read_to_string(&config)
        .ok()
        .and_then(|t| configured_driver(&t));
    if !driver.as_deref().is_some_and(program_exists)
        && let Some(command) = driver_command()
    {
        let set = |key: &str, value: &str| {
            Command::new("git")
                .arg("-C")
                .arg(repo)
                .args(["config", "--local", key, value])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !(set("merge.sgard.name", "sgard manifest and history merge")
            && set("merge.sgard.driver", &command))
        {
            ui::warn(&format!(
                "could not define git's `sgard` merge driver in {} (`sgard doctor` says what \
                 to do)",
                config.display()
            ));
        }
    }
    if attributes == Attributes::Leave {
        return;
    }
    let path = repo.join(".gitattributes");
    let mut text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            // Not text, or not readable: never replaced by sgard's lines.
            ui::warn(&format!(
                "{} cannot be read ({e}); sgard's git lines were not added",
                path.display()
            ));
            return;
        }
    };
    let missing = missing_lines(&text);
    let add: Vec<&str> = if missing.contains(&ATTRIBUTE) {
        vec![GITATTRIBUTES]
    } else if attributes == Attributes::Upgrade && missing.contains(&BYTE_EXACT) {
        // Written by an older sgard: the line that keeps bytes exact.
        vec![BYTE_EXACT, "\n"]
    } else {
        return;
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    for a in add {
        text.push_str(a);
    }
    {
        if let Err(e) = durable::write_atomic(&path, text.as_bytes(), 0o644) {
            ui::warn(&format!("could not write {}: {e}", path.display()));
        }
    }
}

/// The arguments of `sgard git`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// git's arguments, passed as they are
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<std::ffi::OsString>,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        _out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, &self.args)
    }
}

/// The arguments of `sgard git-merge-driver`.
#[derive(clap::Args, Debug)]
pub struct DriverArgs {
    /// The common ancestor's version (git's %O)
    base: std::path::PathBuf,
    /// This side's version; the result is written here (git's %A)
    ours: std::path::PathBuf,
    /// The other side's version (git's %B)
    theirs: std::path::PathBuf,
    /// The file's path in the work tree (git's %P)
    path: std::path::PathBuf,
}

impl super::Run for DriverArgs {
    fn run(
        self,
        ctx: &super::Ctx,
        _out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        merge_driver(ctx, &self.base, &self.ours, &self.theirs, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_is_found_in_its_section_only() {
        let text = "[core]\n\tdriver = no\n[merge \"sgard\"]\n\tname = x\n\tdriver = sgard \
                    git-merge-driver %O %A %B %P\n[merge \"other\"]\n\tdriver = y\n";
        assert_eq!(
            configured_driver(text).as_deref(),
            Some("sgard git-merge-driver %O %A %B %P")
        );
        assert_eq!(configured_driver("[merge \"other\"]\n\tdriver = y\n"), None);
    }
}
