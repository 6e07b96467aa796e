//! Running a case: each operation on the world, then every invariant.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::home::{self, Home, Node};
use crate::op::{Fault, GitAct, Op, Repo};
use crate::repo::{self, Manifest};
use crate::world::{MACHINES, Outcome, World};
use crate::{Config, Error};

/// An invariant that did not hold.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The index of the operation after which it was found.
    pub step: usize,
    /// A short name, the same for the same defect (what the shrinker keeps).
    pub invariant: &'static str,
    /// What was seen.
    pub detail: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "after step {}: {}: {}",
            self.step + 1,
            self.invariant,
            self.detail
        )
    }
}

/// What an undoable operation changed in a home.
#[derive(Clone, Debug)]
struct Change {
    paths: Vec<String>,
    before: Home,
    after: Home,
}

/// What the sim knows beyond the disk.
#[derive(Default)]
struct Model {
    /// Per machine and repository, the changes its undoable operations
    /// made, newest last (the local log as the sim knows it).
    undo: BTreeMap<(usize, Repo), Vec<Change>>,
    /// Snapshots already judged, per repository folder.
    judged: BTreeMap<PathBuf, BTreeSet<String>>,
    /// Repository folders the sim damaged.
    damaged: BTreeSet<PathBuf>,
    /// Per machine, the lines of its runs file that a command which did
    /// not finish cleanly under a fault (killed, interrupted, a full disk)
    /// may have left unrecorded: sgard records a script's run only after
    /// it exits 0, so such a run may happen once more (at least once,
    /// never lost). A run's line counts here however late its script
    /// wrote it (a killed sgard leaves its script running), up to the
    /// start of the machine's next command.
    unrecorded: BTreeMap<usize, BTreeSet<usize>>,
    /// Per machine, where the lines of its last such command start.
    unsettled: BTreeMap<usize, usize>,
}

/// The invariants' names.
#[allow(missing_docs)] // Each name says what it holds.
pub mod inv {
    pub const EXIT: &str = "exit code";
    pub const PANIC: &str = "panic";
    pub const HANG: &str = "hang";
    pub const USAGE: &str = "usage error";
    pub const SILENT: &str = "non-zero exit without a message";
    pub const STATUS: &str = "status is truthful";
    pub const LOST: &str = "content lost without error";
    pub const STATUS_EXIT: &str = "an error state exits 3";
    pub const EMPTY_SNAPSHOT: &str = "no snapshot without a change";
    pub const OWN_STATE: &str = "sgard's own files are never tracked";
    pub const DEBRIS: &str = "no temp files left in the home";
    pub const HOME_WRITE: &str = "a command that does not restore leaves the home alone";
    pub const LOST_WORK: &str = "no overwrite loses unrecorded work";
    pub const UNDO: &str = "undo puts back what it replaced";
    pub const VERIFY: &str = "verify tells the truth";
    pub const ONCE: &str = "a once script runs once per content per machine";
    pub const ADD: &str = "add stores what is on disk";
    pub const REMOVE: &str = "remove drops the entry";
    pub const RESTORE_AT: &str = "restore --at brings back the recorded version";
}

/// Runs cases on worlds built from one configuration.
pub struct Runner {
    /// The world the case runs in.
    pub world: World,
    model: Model,
    /// The operations run so far.
    pub done: Vec<Op>,
    /// A log of every command and its outcome (for `--verbose` and failure
    /// reports).
    pub transcript: Vec<String>,
}

fn commands_that_restore(args: &[String]) -> bool {
    matches!(
        args.first().map(String::as_str),
        Some("restore" | "pull" | "merge" | "undo" | "mirror" | "run-scripts")
    )
}

impl Runner {
    /// A runner on a new world.
    pub fn new(cfg: &Config) -> Result<Runner, Error> {
        let world = World::new(cfg)?;
        let mut r = Runner {
            world,
            model: Model::default(),
            done: Vec::new(),
            transcript: Vec::new(),
        };
        // What set-up recorded is not the sim's to judge.
        for m in 0..MACHINES {
            for repo in Repo::ALL {
                let dir = r.world.repo_dir(m, repo);
                let ids = repo::history(&dir).into_iter().map(|s| s.id).collect();
                r.model.judged.insert(dir, ids);
            }
        }
        Ok(r)
    }

    /// Whether `f` is of an invariant the configuration passes over (it is
    /// noted in the transcript).
    fn passed_over(&mut self, cfg: &Config, f: &Failure) -> bool {
        let skip = cfg.skips(f.invariant);
        if skip {
            self.transcript.push(format!("(passed over) {f}"));
        }
        skip
    }

    /// Notes as possibly unrecorded the runs-file lines written since the
    /// machine's last unclean command began (see `Model::unrecorded`).
    fn settle_runs(&mut self, m: usize) {
        let Some(from) = self.model.unsettled.get(&m).copied() else {
            return;
        };
        let now = runs_lines(&self.world, m);
        self.model
            .unrecorded
            .entry(m)
            .or_default()
            .extend(from..now);
        self.model.unsettled.insert(m, now);
    }

    /// Every machine's home as it is now.
    pub fn homes(&self) -> Vec<Home> {
        self.world
            .machines
            .iter()
            .map(|m| home::scan(&m.home))
            .collect()
    }

    /// `tracked[m][r]`: the paths repository `r` of machine `m` tracks.
    pub fn tracked(&self) -> Vec<[Vec<String>; 3]> {
        (0..MACHINES)
            .map(|m| {
                Repo::ALL.map(|r| {
                    Manifest::head(&self.world.repo_dir(m, r))
                        .ok()
                        .flatten()
                        .map(|mf| mf.entries.into_iter().map(|e| e.path).collect())
                        .unwrap_or_default()
                })
            })
            .collect()
    }

    /// Carries out `op` and checks every invariant.
    pub fn step(&mut self, op: &Op) -> Result<Option<Failure>, Error> {
        let step = self.done.len();
        self.done.push(op.clone());
        self.world.clock += 60;
        let fail = |invariant, detail: String| {
            Ok(Some(Failure {
                step,
                invariant,
                detail,
            }))
        };
        match op {
            Op::Fs { m, act } => {
                home::apply(&self.world.machines[*m].home, act);
                Ok(None)
            }
            Op::Git { m, act } => {
                let dir = self.world.repo_dir(*m, Repo::Git);
                let git = |args: &[&str]| -> Result<Outcome, Error> {
                    let mut c = self.world.git_command(*m, &dir, args);
                    self.world.run(&mut c, None, None)
                };
                let out = match act {
                    GitAct::Commit => {
                        git(&["add", "-A"])?;
                        git(&["commit", "-q", "-m", &format!("step {}", step + 1)])?
                    }
                    GitAct::Pull => {
                        let o = git(&["pull", "-q", "--no-rebase", "--no-edit", "origin", "main"])?;
                        if !o.ok() {
                            git(&["merge", "--abort"])?;
                        }
                        o
                    }
                    GitAct::Push => git(&["push", "-q", "origin", "main"])?,
                };
                self.transcript
                    .push(format!("{op}\n  -> {}", out.describe()));
                if let Some(f) = self.snapshots(step, &dir) {
                    return Ok(Some(f));
                }
                Ok(None)
            }
            Op::Damage {
                m,
                repo,
                kind,
                pick,
            } => {
                let dir = self.world.repo_dir(*m, *repo);
                let sub = if kind.chunks() { "chunks" } else { "blobs" };
                let files = repo::files_under(&dir.join(sub));
                if !files.is_empty() {
                    let f = &files[*pick as usize % files.len()];
                    if kind.deletes() {
                        let _ = fs::remove_file(f);
                    } else if let Ok(mut data) = fs::read(f) {
                        if data.is_empty() {
                            data.push(0);
                        } else {
                            let i = *pick as usize % data.len();
                            data[i] ^= 0x55;
                        }
                        let _ = fs::write(f, data);
                    }
                    self.transcript.push(format!("{op}\n  -> {}", f.display()));
                    self.model.damaged.insert(dir);
                }
                Ok(None)
            }
            Op::Sgard {
                m,
                repo,
                args,
                stdin,
                fault,
            } => {
                let (m, repo) = (*m, *repo);
                self.settle_runs(m);
                self.model.unsettled.remove(&m);
                let runs_before = runs_lines(&self.world, m);
                let h0 = home::scan(&self.world.machines[m].home);
                let dir = self.world.repo_dir(m, repo);
                let before = Manifest::head(&dir).ok().flatten();
                let mut c = self.world.sgard_command(m, repo, args);
                let out = self.world.run(&mut c, stdin.as_deref(), fault.as_ref())?;
                self.transcript
                    .push(format!("{op}\n  -> {}", out.describe()));
                let h1 = home::scan(&self.world.machines[m].home);
                if let Some((i, d)) = judge_exit(args, fault.as_ref(), &out) {
                    return fail(i, format!("`{op}`: {d}\n  {}", out.describe()));
                }
                let after = Manifest::head(&dir).ok().flatten();
                if let Some((i, d)) = self.home_writes(
                    m,
                    repo,
                    args,
                    fault.as_ref(),
                    &out,
                    &h0,
                    &h1,
                    before.as_ref(),
                    after.as_ref(),
                ) {
                    return fail(i, format!("`{op}`: {d}"));
                }
                if let Some((i, d)) = predictions(
                    &self.world,
                    m,
                    repo,
                    args,
                    fault.as_ref(),
                    &out,
                    &h1,
                    after.as_ref(),
                ) {
                    return fail(i, format!("`{op}`: {d}\n  {}", out.describe()));
                }
                if let Some(d) = own_state(&self.world, m, after.as_ref()) {
                    return fail(inv::OWN_STATE, format!("`{op}`: {d}"));
                }
                if let Some(f) = self.snapshots(step, &dir) {
                    return Ok(Some(f));
                }
                if args.first().map(String::as_str) == Some("verify") && fault.is_none() {
                    let found = repo::damage(&dir);
                    match (&found, out.code) {
                        (Some(d), Some(c)) if c != 3 => {
                            return fail(
                                inv::VERIFY,
                                format!("`{op}` exited {c} though {d}\n  {}", out.describe()),
                            );
                        }
                        (None, Some(c)) if c != 0 && !self.model.damaged.contains(&dir) => {
                            return fail(
                                inv::VERIFY,
                                format!(
                                    "`{op}` exited {c} with nothing damaged\n  {}",
                                    out.describe()
                                ),
                            );
                        }
                        _ => {}
                    }
                }
                if fault.is_some() && out.code != Some(0) && commands_that_restore(args) {
                    self.model.unsettled.insert(m, runs_before);
                    self.settle_runs(m);
                }
                let unrecorded = self.model.unrecorded.get(&m).cloned().unwrap_or_default();
                if let Some(d) = once_scripts(&self.world, m, &unrecorded) {
                    return fail(inv::ONCE, d);
                }
                if let Some((i, d)) = self.status(m, repo)? {
                    return fail(i, format!("after `{op}`: {d}"));
                }
                Ok(None)
            }
        }
    }

    /// Judges the snapshots of `dir` not judged yet: none may record
    /// nothing new against its parent.
    fn snapshots(&mut self, step: usize, dir: &Path) -> Option<Failure> {
        let judged = self.model.judged.entry(dir.to_path_buf()).or_default();
        for s in repo::history(dir) {
            if !judged.insert(s.id.clone()) || s.reason != "checkpoint" {
                continue;
            }
            let Some(parent) = &s.parent else { continue };
            if let (Some(a), Some(b)) = (repo::snapshot(dir, &s.id), repo::snapshot(dir, parent))
                && a.substance() == b.substance()
            {
                return Some(Failure {
                    step,
                    invariant: inv::EMPTY_SNAPSHOT,
                    detail: format!(
                        "snapshot {} in {} records nothing its parent {} did not",
                        &s.id[..12],
                        dir.display(),
                        &parent[..parent.len().min(12)]
                    ),
                });
            }
        }
        None
    }

    /// What a command did to the home: only restoring commands write, they
    /// keep what they overwrite, leave no temp files, and `undo` puts back
    /// exactly what the operation it reverses replaced.
    #[allow(clippy::too_many_arguments)]
    fn home_writes(
        &mut self,
        m: usize,
        repo: Repo,
        args: &[String],
        fault: Option<&Fault>,
        out: &Outcome,
        h0: &Home,
        h1: &Home,
        before: Option<&Manifest>,
        after: Option<&Manifest>,
    ) -> Option<(&'static str, String)> {
        let changed: Vec<String> = home::changed(h0, h1)
            .into_iter()
            .filter(|p| !is_temp(p) || !h1.contains_key(p))
            .collect();
        let restoring = commands_that_restore(args);
        if !restoring {
            let real: Vec<&String> = changed.iter().filter(|p| !is_temp(p)).collect();
            if !real.is_empty() {
                return Some((inv::HOME_WRITE, format!("changed {real:?} in the home")));
            }
        }
        // A finished command leaves none of its own temp files.
        if out.ok()
            && let Some(p) = h1.keys().find(|p| is_temp(p) && !h0.contains_key(*p))
        {
            return Some((inv::DEBRIS, format!("left ~/{p} behind")));
        }
        // A restoring command that finished and wrote into the home leaves
        // no temp file anywhere in it: an earlier, killed run's included.
        if restoring
            && out.ok()
            && changed.iter().any(|p| !is_temp(p))
            && let Some(p) = h1.keys().find(|p| is_temp(p))
        {
            return Some((
                inv::DEBRIS,
                format!("~/{p} is still there after a restore that wrote into the home"),
            ));
        }
        // What was overwritten or deleted is kept somewhere sgard can give
        // it back from (a repository, or this machine's safety snapshots).
        let secret = |p: &str| {
            let tp = format!("~/{p}");
            [before, after]
                .iter()
                .flatten()
                .any(|mf| mf.get(&tp).is_some_and(|e| e.encrypted))
        };
        for p in changed.iter().filter(|p| !is_temp(p)) {
            if let Some(Node::File { sha, .. }) = h0.get(p) {
                let kept_same = matches!(h1.get(p), Some(Node::File { sha: s, .. }) if s == sha);
                if !kept_same && !secret(p) && !self.recorded(m, sha) {
                    return Some((
                        inv::LOST_WORK,
                        format!(
                            "~/{p} ({}) was replaced, and its content is in no repository nor safety snapshot",
                            &sha[..12]
                        ),
                    ));
                }
            }
        }
        if !restoring {
            return None;
        }
        // The sim's view of the local log.
        let stack = self.model.undo.entry((m, repo)).or_default();
        let interrupted = fault.is_some() || !matches!(out.code, Some(0 | 4));
        let sub = |h: &Home| -> Home {
            changed
                .iter()
                .filter_map(|p| h.get(p).map(|n| (p.clone(), n.clone())))
                .collect()
        };
        if args.first().map(String::as_str) == Some("undo") && !args.iter().any(|a| a == "-n") {
            if out.ok()
                && let Some(top) = stack.pop()
            {
                let leaf = |n: Option<&Node>| n.filter(|n| !matches!(n, Node::Dir { .. })).cloned();
                for p in &top.paths {
                    if leaf(h0.get(p)) == leaf(top.after.get(p))
                        && leaf(h1.get(p)) != leaf(top.before.get(p))
                    {
                        return Some((
                            inv::UNDO,
                            format!(
                                "~/{p} should be back to {:?}, is {:?}",
                                top.before.get(p),
                                h1.get(p)
                            ),
                        ));
                    }
                }
            } else if !out.ok() && !changed.is_empty() {
                stack.clear();
            }
            // An undo run under a fault that still finished (a kill that
            // came too late, a failed write it survives) may or may not
            // have recorded itself: what the next undo reverses is not
            // known. Taken as finished, a late kill left the undo off the
            // stack and the next undo was held to the change below it.
            if interrupted && out.ok() {
                stack.clear();
                return None;
            }
        } else if args.iter().any(|a| a == "-n") {
            // A dry run records nothing.
        } else if interrupted && !changed.is_empty() {
            // Partly done: what the log holds is not known.
            stack.clear();
            return None;
        }
        // What the operation changed, its own temp files apart (a sweep of
        // a dead run's is no change undo reverses).
        let paths: Vec<String> = changed.iter().filter(|p| !is_temp(p)).cloned().collect();
        if !interrupted && !paths.is_empty() && !args.iter().any(|a| a == "-n") {
            let before = sub(h0);
            let after = sub(h1);
            stack.push(Change {
                paths,
                before,
                after,
            });
        }
        None
    }

    /// Whether content `sha` is kept where sgard can give it back.
    fn recorded(&self, m: usize, sha: &str) -> bool {
        if Repo::ALL
            .iter()
            .any(|r| repo::stored(&self.world.repo_dir(m, *r), sha))
        {
            return true;
        }
        let repos = self.world.state_dir(m).join("repos");
        let Ok(rd) = fs::read_dir(&repos) else {
            return false;
        };
        rd.flatten()
            .any(|e| repo::stored(&e.path().join("undo"), sha))
    }

    /// Runs `status --json` for machine `m`'s repository `repo` and checks
    /// it against the disk and the store.
    fn status(&mut self, m: usize, repo: Repo) -> Result<Option<(&'static str, String)>, Error> {
        let dir = self.world.repo_dir(m, repo);
        let Ok(Some(manifest)) = Manifest::head(&dir) else {
            return Ok(None);
        };
        let args = vec!["status".to_owned(), "--json".to_owned()];
        let mut c = self.world.sgard_command(m, repo, &args);
        let out = self.world.run(&mut c, None, None)?;
        if let Some((i, d)) = judge_exit(&args, None, &out) {
            return Ok(Some((
                i,
                format!("`status --json`: {d}\n  {}", out.describe()),
            )));
        }
        let Ok(doc) = serde_json::from_str::<Value>(&out.stdout) else {
            return Ok(None);
        };
        let home = &self.world.machines[m].home;
        let mut any_error = false;
        for e in doc
            .get("entries")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(path), Some(state)) = (
                e.get("path").and_then(Value::as_str),
                e.get("state").and_then(Value::as_str),
            ) else {
                continue;
            };
            any_error |= state == "error";
            let Some(entry) = manifest.get(path) else {
                continue;
            };
            let lost = entry.has_content()
                && entry
                    .hash
                    .as_deref()
                    .is_some_and(|h| !repo::present(&dir, h));
            if lost && state != "error" && state != "skipped" {
                return Ok(Some((
                    inv::LOST,
                    format!("status says {state} for {path}, whose content the repository lacks"),
                )));
            }
            if state != "ok" {
                continue;
            }
            let disk = expand(home, path);
            let md = fs::symlink_metadata(&disk);
            let wrong = match entry.kind.as_str() {
                "file" if !entry.encrypted => match &md {
                    Ok(md) if md.is_file() => {
                        use std::os::unix::fs::PermissionsExt;
                        let mode = format!("{:04o}", md.permissions().mode() & 0o7777);
                        if repo::sha_file(&disk) != entry.hash {
                            Some("its content differs".to_owned())
                        } else if entry
                            .mode
                            .as_deref()
                            .is_some_and(|m| m.trim_matches('"') != mode)
                        {
                            Some(format!("its mode is {mode}, the entry's {:?}", entry.mode))
                        } else {
                            None
                        }
                    }
                    _ => Some("it is not a file on disk".to_owned()),
                },
                "link" => match fs::read_link(&disk) {
                    Ok(t) if Some(t.to_string_lossy().as_ref()) == entry.target.as_deref() => None,
                    _ => Some("the link on disk is not the entry's".to_owned()),
                },
                "file" | "template" => md.is_err().then(|| "it is not on disk".to_owned()),
                _ => None,
            };
            if let Some(w) = wrong {
                return Ok(Some((
                    inv::STATUS,
                    format!("status says ok for {path}, but {w}"),
                )));
            }
        }
        if any_error && out.code != Some(3) {
            return Ok(Some((
                inv::STATUS_EXIT,
                format!("status showed an error state and exited {:?}", out.code),
            )));
        }
        Ok(None)
    }
}

/// Whether a home path is one of sgard's temp files.
fn is_temp(p: &str) -> bool {
    p.rsplit('/')
        .next()
        .is_some_and(|n| n.starts_with(".sgard-"))
}

/// `~/x` under `home`, or an absolute path.
fn expand(home: &Path, path: &str) -> PathBuf {
    match path.strip_prefix("~/") {
        Some(rel) => home.join(rel),
        None => PathBuf::from(path),
    }
}

/// The exit code is one sgard documents, no panic, a message for each
/// failure.
fn judge_exit(
    args: &[String],
    fault: Option<&Fault>,
    out: &Outcome,
) -> Option<(&'static str, String)> {
    if out.hung {
        return Some((inv::HANG, "ran past the limit".into()));
    }
    if out.stderr.contains("panicked at") || out.code == Some(101) {
        return Some((inv::PANIC, "panicked".into()));
    }
    match (out.code, out.signal, fault) {
        (None, Some(9), Some(Fault::Kill(_) | Fault::KillAt { .. }))
        | (None, Some(2), Some(Fault::Int(_))) => None,
        (None, s, _) => Some((inv::EXIT, format!("ended by signal {s:?}"))),
        (Some(2), _, _) => Some((
            inv::USAGE,
            "exit 2: the sim asked for something this sgard does not take".into(),
        )),
        (Some(c), _, _) if ![0, 1, 3, 4, 130].contains(&c) => {
            Some((inv::EXIT, format!("exit {c}")))
        }
        (Some(c), _, _) => {
            let exit_code_flag = args.iter().any(|a| a == "--exit-code") && c == 1;
            let quiet_ok =
                c == 0 || c == 130 || exit_code_flag || matches!(fault, Some(Fault::Enospc { .. }));
            (!quiet_ok && out.stderr.trim().is_empty())
                .then(|| (inv::SILENT, format!("exit {c} with nothing on stderr")))
        }
    }
}

/// What a finished command promises about the repository and the disk.
#[allow(clippy::too_many_arguments)]
fn predictions(
    world: &World,
    m: usize,
    repo: Repo,
    args: &[String],
    fault: Option<&Fault>,
    out: &Outcome,
    h1: &Home,
    after: Option<&Manifest>,
) -> Option<(&'static str, String)> {
    if fault.is_some() || !out.ok() {
        return None;
    }
    let mf = after?;
    let home = &world.machines[m].home;
    let first = args.first().map(String::as_str);
    let plain_flags = args.iter().skip(1).all(|a| !a.starts_with('-'));
    match first {
        Some("add") if plain_flags => {
            for p in &args[1..] {
                let Some(rel) = p.strip_prefix("~/") else {
                    continue;
                };
                if let Some(Node::File { sha, .. }) = h1.get(rel)
                    && let Some(e) = mf.get(p)
                    && e.plain_file()
                    && e.hash.as_deref() != Some(sha.as_str())
                {
                    return Some((
                        inv::ADD,
                        format!(
                            "{p} is on disk as {}, the entry says {:?}",
                            &sha[..12],
                            e.hash
                        ),
                    ));
                }
            }
            None
        }
        Some("remove") => {
            let p = args.get(1)?;
            mf.get(p)
                .map(|_| (inv::REMOVE, format!("{p} is still an entry")))
        }
        Some("restore") if args.iter().any(|a| a == "--at") && args.iter().any(|a| a == "-f") => {
            let at = args
                .iter()
                .position(|a| a == "--at")
                .and_then(|i| args.get(i + 1))?;
            let path = args.iter().skip(1).find(|a| a.starts_with("~/"))?;
            let dir = world.repo_dir(m, repo);
            let id = resolve(&dir, at)?;
            let snap = repo::snapshot(&dir, &id)?;
            let e = snap.get(path)?;
            if !e.plain_file() {
                return None;
            }
            let disk = repo::sha_file(&expand(home, path));
            (disk != e.hash).then(|| {
                (
                    inv::RESTORE_AT,
                    format!(
                        "{path} holds {disk:?} after restore --at {at} ({}), which recorded {:?}",
                        &id[..12],
                        e.hash
                    ),
                )
            })
        }
        _ => None,
    }
}

/// `@`, `@~N` in the history of `dir`.
fn resolve(dir: &Path, at: &str) -> Option<String> {
    let hist = repo::history(dir);
    let newest = hist.iter().rev().find(|s| s.reason == "checkpoint")?;
    let n: usize = match at.strip_prefix("@~") {
        Some(n) => n.parse().ok()?,
        None if at == "@" => 0,
        None => return None,
    };
    let mut id = newest.id.clone();
    for _ in 0..n {
        id = hist.iter().find(|s| s.id == id)?.parent.clone()?;
    }
    Some(id)
}

/// An entry under sgard's own folders, a repository or a temp file.
fn own_state(world: &World, m: usize, mf: Option<&Manifest>) -> Option<String> {
    let mf = mf?;
    let usb = world.repo_dir(m, Repo::Usb).display().to_string();
    for e in &mf.entries {
        let bad = match e.path.strip_prefix("~/") {
            Some(rel) => {
                home::NOT_THE_USERS
                    .iter()
                    .any(|d| rel == *d || rel.starts_with(&format!("{d}/")))
                    || rel.split('/').any(|c| c.starts_with(".sgard-"))
            }
            None => e.path.starts_with(&format!("{usb}/")),
        };
        if bad {
            return Some(format!("the repository tracks {}", e.path));
        }
    }
    None
}

/// How many lines machine `m`'s runs file holds.
fn runs_lines(world: &World, m: usize) -> usize {
    fs::read_to_string(world.runs_file(m)).map_or(0, |t| t.lines().count())
}

/// A `once` script that ran twice with the same content on one machine,
/// but for a repeat of a run that may have gone unrecorded.
fn once_scripts(world: &World, m: usize, unrecorded: &BTreeSet<usize>) -> Option<String> {
    let text = fs::read_to_string(world.runs_file(m)).ok()?;
    repeated_once(&text, unrecorded)
        .map(|line| format!("{} ran `{line}` twice", world.machines[m].name))
}

/// The first `once` line of a runs file that repeats an earlier run with
/// no excuse: each run at a line in `unrecorded` (numbered from 0 among
/// all lines) allows one later repeat of its line, and a repeat is itself
/// such a run when its line is in `unrecorded`.
fn repeated_once<'t>(text: &'t str, unrecorded: &BTreeSet<usize>) -> Option<&'t str> {
    let mut spare: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if !line.contains("/once-") {
            continue;
        }
        let excused = usize::from(unrecorded.contains(&i));
        match spare.get_mut(line) {
            None => {
                spare.insert(line, excused);
            }
            Some(n) if *n > 0 => *n = *n - 1 + excused,
            Some(_) => return Some(line),
        }
    }
    None
}

/// Runs `ops` on a fresh world; the first failure, if any.
pub fn run_ops(cfg: &Config, ops: &[Op]) -> Result<(Option<Failure>, Vec<String>), Error> {
    let mut r = Runner::new(cfg)?;
    let mut failure = None;
    for op in ops {
        if let Some(f) = r.step(op)?.filter(|f| !r.passed_over(cfg, f)) {
            failure = Some(f);
            break;
        }
    }
    // A replay's world is kept, failing or not, when asked: it is for a
    // look by hand.
    if cfg.keep {
        let root = r.world.keep();
        eprintln!("world kept at {}", root.display());
    }
    Ok((failure, r.transcript))
}

/// What a seed's run did.
#[derive(Debug)]
pub struct SeedRun {
    /// The operations generated and run.
    pub ops: Vec<Op>,
    /// The first invariant that did not hold.
    pub failure: Option<Failure>,
    /// Every command and how it ended.
    pub transcript: Vec<String>,
}

/// Generates and runs `steps` operations from `seed`.
pub fn run_seed(cfg: &Config, seed: u64) -> Result<SeedRun, Error> {
    let mut r = Runner::new(cfg)?;
    let mut g = crate::generate::Gen::new(seed, cfg.strace);
    for _ in 0..cfg.steps {
        let op = g.next(&r.homes(), &r.tracked());
        if let Some(f) = r.step(&op)?.filter(|f| !r.passed_over(cfg, f)) {
            if cfg.keep {
                let root = r.world.keep();
                eprintln!("world kept at {}", root.display());
            }
            return Ok(SeedRun {
                ops: r.done,
                failure: Some(f),
                transcript: r.transcript,
            });
        }
    }
    Ok(SeedRun {
        ops: r.done,
        failure: None,
        transcript: r.transcript,
    })
}

#[cfg(test)]
mod tests {
    use super::repeated_once;

    #[test]
    fn a_once_script_may_repeat_only_a_run_that_may_have_gone_unrecorded() {
        use std::collections::BTreeSet;
        let runs = "/h/.scripts/once-a.sh aa\n/h/.scripts/change-a.sh bb\n\
                    /h/.scripts/change-a.sh bb\n/h/.scripts/once-a.sh cc\n\
                    /h/.scripts/once-a.sh aa\n/h/.scripts/once-a.sh aa\n";
        let lines = |l: &[usize]| l.iter().copied().collect::<BTreeSet<usize>>();
        // `change` scripts repeat freely; the `once` one with content aa
        // ran at lines 0, 4 and 5.
        assert_eq!(
            repeated_once(runs, &lines(&[])),
            Some("/h/.scripts/once-a.sh aa")
        );
        // The first run may have gone unrecorded: one repeat is excused.
        assert_eq!(
            repeated_once(runs, &lines(&[0])),
            Some("/h/.scripts/once-a.sh aa")
        );
        // So may the repeat: the third run is excused too.
        assert_eq!(repeated_once(runs, &lines(&[0, 4])), None);
        // An unclean run of another script excuses nothing here.
        assert_eq!(
            repeated_once(runs, &lines(&[1, 2, 3])),
            Some("/h/.scripts/once-a.sh aa")
        );
        // A repeat that is itself in an unclean command, with nothing
        // unrecorded before it, is a double run all the same.
        assert_eq!(
            repeated_once(runs, &lines(&[4, 5])),
            Some("/h/.scripts/once-a.sh aa")
        );
    }
}
