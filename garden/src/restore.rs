//! `restore`: write tracked entries back to disk, recording what it changes
//! so `undo` can put it back.

use crate::Tx;
use std::ffi::OsString;
use std::fs;
use std::path::Path;

use chrono::DateTime;
use sgard_manifest::history::Reason;
use sgard_manifest::{DocRef, Entry, EntryKind, Manifest, Mode, Timestamp};

use crate::fsx::{self, DiskKind};
use crate::par;
use crate::scan::Found;
use crate::{Error, Garden, Result, State};

/// An answer to a question about overwriting a local change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Overwrite this one.
    Yes,
    /// Keep this one as it is.
    No,
    /// Show the difference, then ask again.
    Diff,
    /// Overwrite this one and every one after it without asking.
    All,
    /// Keep this one and every one after it (each as if answered
    /// [`Answer::No`]); ask nothing more.
    Quit,
    /// No answer can be had (end of input): refuse this and the rest.
    NoInput,
}

/// Asks the user (the CLI reads answers from one stdin reader).
pub trait Prompt {
    /// Asks a yes/no question (e.g. `Delete untracked file ~/x?`); true means
    /// yes.
    fn confirm(&mut self, question: &str) -> bool;

    /// Asks whether to overwrite a local change, offering yes / no / diff /
    /// all / quit. By default only yes and no (from [`Prompt::confirm`]).
    fn ask(&mut self, question: &str) -> Answer {
        if self.confirm(question) {
            Answer::Yes
        } else {
            Answer::No
        }
    }

    /// Shows what the user asked to see (a diff) before asking again.
    fn show(&mut self, _text: &str) {}
}

/// A prompt that always answers the same.
impl Prompt for bool {
    fn confirm(&mut self, _question: &str) -> bool {
        *self
    }
}

/// The answers of one run: `all`, `keep` and `none` hold for every later
/// question.
struct Asker<'a> {
    prompt: &'a mut dyn Prompt,
    /// `a`: overwrite the rest.
    all: bool,
    /// `q`: keep the rest as they are (an answer, like `n`).
    keep: bool,
    /// No answer can be had (end of input): why the rest are refused.
    none: Option<&'static str>,
}

/// What came of asking about one entry.
enum Decision {
    Yes,
    No,
    Refused(String),
}

/// Flags of `restore`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RestoreOptions {
    /// Overwrite without asking.
    pub force: bool,
    /// Say what would happen; change nothing, ask nothing.
    pub dry_run: bool,
}

/// What restore did (or, in a dry run, would do) to one entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreAction {
    /// Created where nothing was.
    Created,
    /// Replaced what was there.
    Overwritten,
    /// Content already matched; only the mode was corrected.
    ModeFixed,
    /// Removed (undo of a creation, or an untracked file in mirror down).
    Deleted,
    /// Already identical; nothing written.
    UpToDate,
    /// The user declined to overwrite it.
    Declined,
    /// No answer could be had (end of input, or the user quit): left as it
    /// is, with why it was asked about.
    Refused(String),
    /// Dry run: it would ask before overwriting (and why).
    WouldAsk(String),
    /// Targeted away from this machine.
    NotTargeted,
    /// The disk changed since the operation being undone: left alone.
    Conflict(String),
    /// It failed; nothing was written for it.
    Failed(String),
    /// Nothing was written for it, and why: a symlink Windows refused
    /// that nothing could stand in for (its target does not exist).
    Skipped(String),
}

impl RestoreAction {
    /// Whether the disk was changed (or, in a dry run, would be).
    pub fn changes_disk(&self) -> bool {
        matches!(
            self,
            RestoreAction::Created
                | RestoreAction::Overwritten
                | RestoreAction::ModeFixed
                | RestoreAction::Deleted
        )
    }
}

/// The result of a restore-like operation.
#[derive(Debug, Default)]
pub struct RestoreReport {
    /// Every selected entry and what happened to it, in order.
    pub actions: Vec<(String, RestoreAction)>,
    /// The errors behind the `Failed` actions.
    pub failures: Vec<(String, Error)>,
    /// The safety snapshot recorded before anything was written, if any.
    pub before: Option<sgard_store::Hash>,
    /// Things worth telling, by entry: the stand-ins written for symlinks
    /// Windows refused.
    pub notes: Vec<(String, String)>,
}

impl RestoreReport {
    /// Whether any failure was an integrity failure (exit code 3).
    pub fn has_integrity_failure(&self) -> bool {
        self.failures.iter().any(|(_, e)| e.is_integrity())
    }

    /// Whether anything was left alone because of a conflict.
    pub fn has_conflicts(&self) -> bool {
        self.actions
            .iter()
            .any(|(_, a)| matches!(a, RestoreAction::Conflict(_)))
    }

    /// The entries left as they are for want of an answer, or because they
    /// changed on disk while sgard was deciding.
    pub fn refused(&self) -> Vec<&str> {
        self.actions
            .iter()
            .filter(|(_, a)| matches!(a, RestoreAction::Refused(_) | RestoreAction::Conflict(_)))
            .map(|(p, _)| p.as_str())
            .collect()
    }

    /// Puts actions in path order (the manifest's order).
    pub(crate) fn sort(&mut self) {
        self.actions.sort_by(|a, b| a.0.cmp(&b.0));
    }

    fn fail(&mut self, path: String, err: Error) {
        let msg = crate::checkpoint::error_chain(&err);
        self.failures.push((path.clone(), err));
        self.actions.push((path, RestoreAction::Failed(msg)));
    }
}

/// The entry a step writes.
#[derive(Clone, Debug)]
pub(crate) enum Src {
    /// The head's entry at this index: a restore of the head planned it,
    /// and copies none of its 100,000 entries.
    Head(usize),
    /// One of its own (from a snapshot, an undo, a merge).
    Own(Box<Entry>),
}

impl From<Entry> for Src {
    fn from(e: Entry) -> Self {
        Src::Own(Box::new(e))
    }
}

/// One change to the home folder.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// Make the path hold this entry.
    Write { entry: Src, existed: bool },
    /// Only change the mode (the content is already `entry`'s).
    FixMode { entry: Src, mode: Mode },
    /// Remove the path.
    Delete,
}

/// A planned change to one path.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub path: String,
    pub op: Op,
    /// What the disk held when the step was decided (`None`: not checked):
    /// if it holds something else when the step is carried out (edited
    /// while sgard was asking about other files), the step is dropped.
    pub expect: Expect,
}

/// What a step expects on disk (see [`Step::expect`]).
/// Boxed: most steps expect nothing there (a restore into an empty home),
/// and an inline `Seen` was half of every step.
pub(crate) type Expect = Option<Option<Box<crate::base::Seen>>>;

impl Step {
    pub(crate) fn action(&self) -> RestoreAction {
        match &self.op {
            Op::Write { existed: true, .. } => RestoreAction::Overwritten,
            Op::Write { existed: false, .. } => RestoreAction::Created,
            Op::FixMode { .. } => RestoreAction::ModeFixed,
            Op::Delete => RestoreAction::Deleted,
        }
    }
}

/// What carrying out one step gathered (see [`Garden::execute_with`]).
#[derive(Default)]
struct Slot {
    /// Still going ahead (not failed, not changed meanwhile).
    live: bool,
    /// What the disk held, for the safety snapshot (`None`: nothing).
    captured: Option<Box<Entry>>,
    /// Capturing stored a new blob.
    new: bool,
    /// The file, staged beside its destination.
    tmp: Option<crate::home::Staged>,
}

/// The entry `op` writes, `head` being the head's entries (none for a
/// deletion, or for a head entry gone since the step was planned).
fn entry_of<'a>(head: &'a [Entry], op: &'a Op) -> Option<&'a Entry> {
    match op {
        Op::Write { entry, .. } | Op::FixMode { entry, .. } => match entry {
            Src::Head(i) => head.get(*i),
            Src::Own(e) => Some(e),
        },
        Op::Delete => None,
    }
}

/// The entry a write step writes (see [`entry_of`]).
fn written<'a>(head: &'a [Entry], op: &'a Op) -> Option<&'a Entry> {
    match op {
        Op::Write { .. } => entry_of(head, op),
        _ => None,
    }
}

enum Plan {
    Write { existed: bool },
    FixMode(Mode),
    Nothing,
}

impl Garden {
    /// Restores the entries selected by `args` (all when empty; a folder
    /// selects everything under it) from the head manifest.
    ///
    /// For each entry that applies here: a path whose content already matches
    /// is not rewritten (only its mode is corrected); a locked entry is put
    /// back without asking; otherwise, without `force`, a path whose mtime is
    /// not older than the entry's `updated` (whole seconds) is only
    /// overwritten if `prompt` says yes. Before anything is written, the
    /// current state of every path about to change is stored and recorded as
    /// a `before-restore` snapshot (and what will be written as a `restore`
    /// snapshot), so `undo` can put it back. Files are written through a temp
    /// file and a rename, with their exact mode, after their content passed
    /// its hash. One failing entry does not stop the others.
    ///
    /// # Errors
    /// [`Error::NoMatch`] when `args` select nothing; history write errors.
    /// Per-entry failures are in the report.
    pub fn restore(
        &mut self,
        args: &[OsString],
        opts: RestoreOptions,
        prompt: &mut dyn Prompt,
    ) -> Result<RestoreReport> {
        // Planned from the head in place: a copy of it was the biggest
        // single cost of a restore's memory.
        let mut tx = self.tx();
        let files = &tx.repo.manifest.files;
        let (report, steps) = tx.plan_restore(files, args, opts, prompt)?;
        let report = self.carry_out(report, steps, opts, "restore")?;
        // A path a cut-off pull left to write is settled once a restore of
        // the head dealt with it (wrote it, found it equal, was told no).
        let unfinished = self.work.base.unfinished();
        if !opts.dry_run && !unfinished.is_empty() {
            let dealt: std::collections::HashSet<&str> = report
                .actions
                .iter()
                .filter(|(_, a)| !matches!(a, RestoreAction::Failed(_)))
                .map(|(p, _)| p.as_str())
                .collect();
            let left: Vec<String> = unfinished
                .into_iter()
                .filter(|p| !dealt.contains(p.as_str()))
                .collect();
            self.work.base.set_unfinished(&left)?;
        }
        Ok(report)
    }

    /// Restores entries of the snapshot named by `at` (an id prefix, `@` or
    /// `@~N`), with the same rules as [`Garden::restore`].
    ///
    /// # Errors
    /// Unknown or ambiguous snapshot; as [`Garden::restore`].
    pub fn restore_at(
        &mut self,
        at: &str,
        args: &[OsString],
        opts: RestoreOptions,
        prompt: &mut dyn Prompt,
    ) -> Result<RestoreReport> {
        let idx = self.resolve(at)?;
        let id = self.repo.history.records[idx].id;
        let doc = self.snapshot_doc(&id)?;
        let what = format!("restore --at {}", id.short(12));
        self.restore_entries(&doc.files, args, opts, prompt, &what)
    }

    /// Restores the entries of `files` selected by `args` (one history pair
    /// named `what`).
    pub(crate) fn restore_selected(
        &mut self,
        files: &[Entry],
        args: &[OsString],
        opts: RestoreOptions,
        prompt: &mut dyn Prompt,
        what: &str,
    ) -> Result<RestoreReport> {
        self.restore_entries(files, args, opts, prompt, what)
    }

    fn restore_entries(
        &mut self,
        files: &[Entry],
        args: &[OsString],
        opts: RestoreOptions,
        prompt: &mut dyn Prompt,
        what: &str,
    ) -> Result<RestoreReport> {
        let (report, steps) = self.tx().plan_restore(files, args, opts, prompt)?;
        self.carry_out(report, steps, opts, what)
    }

    /// Carries out planned `steps` (or, in a dry run, says what they would
    /// do), completing `report`.
    fn carry_out(
        &mut self,
        mut report: RestoreReport,
        steps: Vec<Step>,
        opts: RestoreOptions,
        what: &str,
    ) -> Result<RestoreReport> {
        if !opts.dry_run {
            self.execute(steps, Reason::Restore, what, &mut report)?;
        } else {
            for s in &steps {
                report.actions.push((s.path.clone(), s.action()));
            }
        }
        report.sort();
        Ok(report)
    }

    /// Carries out `steps`: first stores the current state of every path
    /// (the safety snapshot) and records the before/after pair in the
    /// history, then changes the disk. Results land in `report`.
    pub(crate) fn execute(
        &mut self,
        steps: Vec<Step>,
        reason: Reason,
        what: &str,
        report: &mut RestoreReport,
    ) -> Result<()> {
        self.execute_with(steps, reason, what, report, None)
    }

    /// As [`Garden::execute`]; with `prior` (an undo), the base records of
    /// the touched paths are set to it (a path it lacks: no record) and
    /// saved before anything on disk changes, so a crash part way leaves
    /// every path judged right: still as the undone operation left it
    /// (equal to the repository, so `ok`), or put back and judged as before
    /// that operation.
    pub(crate) fn execute_with(
        &mut self,
        steps: Vec<Step>,
        reason: Reason,
        what: &str,
        report: &mut RestoreReport,
        prior: Option<&std::collections::HashMap<String, Option<crate::base::BaseEntry>>>,
    ) -> Result<()> {
        if steps.is_empty() {
            self.note_changed_nothing(what);
            return Ok(());
        }
        self.require_home_writer("restore")?;
        // Where names fold, an entry written over another that is one file
        // with it would replace it silently: refused before anything.
        let folding = self.folding();
        if folding.folds() {
            let written: std::collections::HashSet<&str> =
                steps.iter().map(|s| s.path.as_str()).collect();
            let is_written = |p: &str| written.contains(p);
            let pairs = crate::folding::collisions(
                folding,
                self.repo
                    .manifest
                    .files
                    .iter()
                    .map(|e| e.path.as_str())
                    .chain(steps.iter().map(|s| s.path.as_str())),
                Some(&is_written),
            );
            if !pairs.is_empty() {
                return Err(Error::Conflict(crate::folding::refusal(folding, &pairs)));
            }
        }
        // Unlock the key before recording anything: a wrong passphrase must
        // leave neither the disk nor the history changed.
        let head = self.repo.manifest.files.as_slice();
        let needs_key = |s: &Step| {
            written(head, &s.op).is_some_and(|e| e.encrypted)
                || self.repo.manifest.get(&s.path).is_some_and(|e| e.encrypted)
        };
        let mut steps = steps;
        // A step naming a head entry that is gone (nothing changes the head
        // between planning and this; checked so nothing below can miss it).
        steps.retain(|s| {
            let ok = matches!(s.op, Op::Delete) || entry_of(head, &s.op).is_some();
            if !ok {
                report.fail(
                    s.path.clone(),
                    Error::Invalid(format!("{}: the head changed while restoring", s.path)),
                );
            }
            ok
        });
        if steps.iter().any(needs_key)
            && let Err(e) = Tx::new(&self.repo, &mut self.work).dek()
        {
            let msg = crate::checkpoint::error_chain(&e);
            let (locked, rest): (Vec<Step>, Vec<Step>) = steps.into_iter().partition(needs_key);
            for s in locked {
                report.fail(s.path.clone(), Error::Crypto(msg.clone()));
            }
            steps = rest;
        }
        // 1. What the disk holds now is captured into this home's local log,
        // and each path is checked against what was seen when its step was
        // decided (a file edited meanwhile is left alone). The steps stay
        // where they are; what each one gathers lies beside it (moving them
        // from vector to vector held two copies at once).
        if let Some(l) = &self.repo.local {
            sgard_store::durable::create_private_dir_all(&l.dir)?;
        }
        self.work.begin_batch_in(self.repo.local_store());
        let mut slots: Vec<Slot> = Vec::with_capacity(steps.len());
        for s in &steps {
            sgard_store::cancel::check()?;
            let secret = written(head, &s.op).is_some_and(|e| e.encrypted)
                || self.repo.manifest.get(&s.path).is_some_and(|e| e.encrypted);
            let mut slot = Slot::default();
            match Tx::new(&self.repo, &mut self.work).capture(
                &s.path,
                &self.repo.env.expand(&s.path),
                secret,
            ) {
                Err(e) => report.fail(s.path.clone(), e),
                Ok((captured, new, content)) => {
                    if let Some(expect) = &s.expect
                        && !still_as_seen(expect.as_deref(), captured.as_ref(), content)
                    {
                        report.actions.push((
                            s.path.clone(),
                            RestoreAction::Conflict(
                                "changed on disk while sgard was deciding; left as it is".into(),
                            ),
                        ));
                    } else {
                        // Boxed: most restores capture nothing (the path is
                        // missing), and an inline entry is 200-odd bytes.
                        slot = Slot {
                            live: true,
                            captured: captured.map(Box::new),
                            new,
                            tmp: None,
                        };
                    }
                }
            }
            slots.push(slot);
        }
        // Missing folders the repository has a mode for are made first,
        // with it (folders that exist keep theirs).
        self.create_recorded_folders(
            steps
                .iter()
                .zip(&slots)
                .filter(|(s, slot)| slot.live && matches!(s.op, Op::Write { .. }))
                .map(|(s, _)| s.path.as_str()),
        );
        // 2. Every file is staged: its content verified (and decrypted) into
        // a temp file beside its destination before anything is recorded, so
        // a missing or corrupt blob fails its entry and never reaches the
        // history, and a restore that can write nothing records nothing.
        // Plain files are staged on all cores.
        let (repo, local) = self.repo.stores();
        let (confine, env) = (&self.repo.confine, &self.repo.env);
        let live = slots.iter().filter(|s| s.live).count();
        sgard_store::progress::begin("restoring", live as u64, 0);
        // Each staged file goes straight into its slot (a vector of them
        // beside the slots was 10 MB at 100,000 files); what a step gives
        // back is whether it was staged here, and how it failed.
        let staged = par::update(&mut slots, 64, |i, slot| {
            match written(head, &steps[i].op) {
                Some(entry)
                    if slot.live
                        && entry.kind == EntryKind::File
                        && !entry.encrypted
                        && !entry.template =>
                {
                    let r = stage_plain(confine, (repo, local), entry, &env.expand(&steps[i].path));
                    sgard_store::progress::done(&steps[i].path, "restoring");
                    Some(r.map(|t| slot.tmp = Some(t)).map_err(Box::new))
                }
                _ => None,
            }
        });
        let mut new_blobs = 0;
        let mut any = false;
        for ((s, slot), plain) in steps.iter().zip(&mut slots).zip(staged) {
            if !slot.live {
                continue;
            }
            let tmp = match (plain, written(head, &s.op)) {
                (Some(Some(Ok(()))), _) => Ok(slot.tmp.take()).transpose(),
                (Some(Some(Err(e))), _) => Some(Err(*e)),
                (_, Some(entry)) if entry.kind == EntryKind::File => {
                    let r = Tx::new(&self.repo, &mut self.work)
                        .stage_entry(entry, &self.repo.env.expand(&s.path));
                    sgard_store::progress::done(&s.path, "restoring");
                    Some(r)
                }
                _ => {
                    sgard_store::progress::done(&s.path, "restoring");
                    None
                }
            };
            match tmp.transpose() {
                Ok(t) => slot.tmp = t,
                Err(e) => {
                    report.fail(s.path.clone(), e);
                    slot.live = false;
                    continue;
                }
            }
            new_blobs += u64::from(slot.new);
            any = true;
        }
        // The commit point: from the records on, what they name is put in
        // place to the end, whatever signal comes (it is seen after). A
        // stop asked for before it records nothing and writes nothing: the
        // staged files are dropped (removed) on the way out.
        self.repo.env.crash_point("restore-before-snapshot");
        let section = sgard_store::cancel::commit_section();
        sgard_store::cancel::check()?;
        Tx::new(&self.repo, &mut self.work).commit_batch()?;
        if !any {
            self.note_changed_nothing(what);
            return Ok(());
        }
        // 3. The before/after documents of what will be done, over the
        // entries the steps hold (a mode fix records the captured entry
        // with its new mode).
        let fixed: Vec<Entry> = steps
            .iter()
            .zip(&slots)
            .filter(|(_, slot)| slot.live)
            .filter_map(|(s, slot)| match (&s.op, &slot.captured) {
                (Op::FixMode { mode, .. }, Some(c)) => {
                    let mut e = c.as_ref().clone();
                    e.mode = Some(*mode);
                    Some(e)
                }
                _ => None,
            })
            .collect();
        let header = Manifest::new(self.repo.env.now);
        let live = || steps.iter().zip(&slots).filter(|(_, slot)| slot.live);
        let before = DocRef::new(
            &header,
            live()
                .filter_map(|(_, slot)| slot.captured.as_deref())
                .collect(),
            live()
                .filter(|(_, slot)| slot.captured.is_none())
                .map(|(s, _)| s.path.as_str())
                .collect(),
        );
        let after = DocRef::new(
            &header,
            live()
                .filter_map(|(s, _)| written(head, &s.op))
                .chain(&fixed)
                .collect(),
            live()
                .filter(|(s, _)| matches!(s.op, Op::Delete))
                .map(|(s, _)| s.path.as_str())
                .collect(),
        );
        // What a merge left unresolved in a path written or deleted here
        // rests, unless the merge's own content is written again.
        // (The steps' own paths, not copies: 100,000 of them at a time
        // the documents are written.)
        let overwritten: Vec<(&str, Option<sgard_store::Hash>)> = live()
            .filter_map(|(s, _)| match &s.op {
                Op::Write { .. } => Some((s.path.as_str(), written(head, &s.op)?.hash)),
                Op::Delete => Some((s.path.as_str(), None)),
                Op::FixMode { .. } => None,
            })
            .collect();
        let b = self.store_doc(&before)?;
        // What the base said of these paths, so an undo can say it again.
        if let Some(l) = &self.repo.local {
            let paths: Vec<&str> = live().map(|(s, _)| s.path.as_str()).collect();
            self.work
                .base
                .save_prior(&l.dir.join("bases").join(b.hash.to_hex()), &paths)?;
        }
        let id = b.hash;
        let records = self.pair_records((&before, b), &after, reason, what, new_blobs)?;
        drop((before, after));
        drop(fixed);
        self.push_local_records(records)?;
        self.repo.env.crash_point("restore-recorded");
        self.clear_changed_nothing();
        report.before = Some(id);
        if let Some(prior) = prior {
            {
                let base = &mut self.work.base;
                for (s, _) in live() {
                    base.put(&s.path, prior.get(&s.path).cloned().flatten());
                }
            }
            self.tx().flush_base()?;
        }
        self.note_overwritten(overwritten.iter().copied())?;
        self.repo.env.crash_point("restore-after-snapshot");
        // Room for what follows, once: an action per live step, and the
        // base's records of paths it does not hold yet (a restore into an
        // empty home adds one per file, in path order).
        {
            let base = &mut self.work.base;
            let (mut n, mut fresh) = (0, 0);
            for (s, _) in live() {
                n += 1;
                fresh += usize::from(base.get(&s.path).is_none());
            }
            report.actions.reserve(n);
            base.reserve(fresh);
        }
        // Links, folders, modes and deletions one by one, in order; then the
        // staged files are put in place together, at a constant number of
        // flushes.
        let mut staged = Vec::new();
        let mut staged_steps = Vec::new();
        // Where a link may be stood in for by a copy of its target
        // (Windows), links are made after the files, so a copy is of what
        // this restore wrote there.
        let mut links_after = Vec::new();
        for (s, slot) in steps.iter().zip(&mut slots) {
            if !slot.live {
                continue;
            }
            if let Some(tmp) = slot.tmp.as_mut() {
                staged.push(tmp);
                staged_steps.push(s);
                continue;
            }
            if crate::standin::ACTIVE
                && written(&self.repo.manifest.files, &s.op)
                    .is_some_and(|e| e.kind == EntryKind::Link)
            {
                links_after.push(s);
                continue;
            }
            self.perform_step(s, report);
        }
        self.repo.env.crash_point("restore-staged");
        let mut failed = self.repo.confine.commit(staged).into_iter().peekable();
        for (k, s) in staged_steps.into_iter().enumerate() {
            match failed.next_if(|(j, _)| *j == k) {
                None => {
                    self.tx().settle_step(s);
                    report.actions.push((s.path.clone(), s.action()));
                }
                Some((_, e)) => report.fail(s.path.clone(), e),
            }
        }
        // A link to another link comes after it: a stand-in needs what it
        // stands in for to be there.
        let links: Vec<(std::path::PathBuf, String)> = links_after
            .iter()
            .map(|s| {
                let target = written(&self.repo.manifest.files, &s.op)
                    .and_then(|e| e.target.clone())
                    .unwrap_or_default();
                (self.repo.env.expand(&s.path), target)
            })
            .collect();
        for i in crate::standin::link_order(&links) {
            self.perform_step(links_after[i], report);
        }
        self.repo.env.crash_point("restore-before-base");
        self.tx().flush_base()?;
        drop(section);
        // Done as recorded; a stop asked for meanwhile ends the command.
        sgard_store::cancel::check()?;
        Ok(())
    }

    /// Does one step that is not a staged file, recording what came of it
    /// (a stand-in for a refused symlink is said in the report's notes; a
    /// link nothing could stand in for is skipped, and not settled).
    fn perform_step(&mut self, s: &Step, report: &mut RestoreReport) {
        match self.tx().perform(s) {
            Ok(Done::Skipped(why)) => {
                report
                    .actions
                    .push((s.path.clone(), RestoreAction::Skipped(why)));
            }
            Ok(done) => {
                if let Done::StoodIn(what) = done {
                    report.notes.push((s.path.clone(), what));
                }
                self.tx().settle_step(s);
                report.actions.push((s.path.clone(), s.action()));
            }
            Err(e) => report.fail(s.path.clone(), e),
        }
    }

    /// Writes `bytes` as the file of `e` at `abs` (durably, with its mode).
    pub(crate) fn write_bytes(&self, e: &Entry, abs: &Path, bytes: &[u8]) -> Result<()> {
        self.repo.confine.write_file(abs, template_mode(e), |f| {
            std::io::Write::write_all(f, bytes).map_err(|err| Error::io("writing", abs, err))
        })
    }
}

impl Tx<'_> {
    /// Decides, entry by entry (asking where the rules say so), what a
    /// restore of `files` selected by `args` will change.
    pub(crate) fn plan_restore(
        &mut self,
        files: &[Entry],
        args: &[OsString],
        opts: RestoreOptions,
        prompt: &mut dyn Prompt,
    ) -> Result<(RestoreReport, Vec<Step>)> {
        let mut report = RestoreReport::default();
        let mut asker = Asker {
            prompt,
            all: false,
            keep: false,
            none: None,
        };
        // Planned from the head itself, a step names its entry by index.
        let from_head = std::ptr::eq(files, self.repo.manifest.files.as_slice());
        let picked = self.repo.select_in(files, args)?;
        let mut steps = Vec::with_capacity(picked.len());
        for i in picked {
            let Some(e) = files.get(i) else { continue };
            let src = || {
                if from_head {
                    Src::Head(i)
                } else {
                    Src::from(e.clone())
                }
            };
            match self.plan_entry(e, src, opts, &mut asker) {
                Ok(Ok(step)) => steps.push(step),
                Ok(Err(action)) => report.actions.push((e.path.clone(), action)),
                Err(err) => report.fail(e.path.clone(), err),
            }
        }
        Ok((report, steps))
    }

    /// A step, or the action that needs no step.
    fn plan_entry(
        &mut self,
        e: &Entry,
        src: impl FnOnce() -> Src,
        opts: RestoreOptions,
        asker: &mut Asker<'_>,
    ) -> Result<std::result::Result<Step, RestoreAction>> {
        if !self.repo.applies(e)? {
            return Ok(Err(RestoreAction::NotTargeted));
        }
        let (plan, why, seen) = self.plan(e, opts)?;
        let op = match plan {
            Plan::Nothing => return Ok(Err(RestoreAction::UpToDate)),
            Plan::FixMode(mode) => Op::FixMode { entry: src(), mode },
            Plan::Write { existed } => Op::Write {
                entry: src(),
                existed,
            },
        };
        if let Some(why) = why {
            if opts.dry_run {
                return Ok(Err(RestoreAction::WouldAsk(why)));
            }
            match self.decide(e, &why, asker) {
                Decision::Yes => {}
                Decision::No => return Ok(Err(RestoreAction::Declined)),
                Decision::Refused(why) => return Ok(Err(RestoreAction::Refused(why))),
            }
        }
        Ok(Ok(Step {
            path: e.path.clone(),
            op,
            expect: seen,
        }))
    }

    /// Asks whether to overwrite `e` (`why` says what would be lost).
    fn decide(&mut self, e: &Entry, why: &str, asker: &mut Asker<'_>) -> Decision {
        loop {
            if asker.all {
                return Decision::Yes;
            }
            if asker.keep {
                return Decision::No;
            }
            if let Some(reason) = asker.none {
                return Decision::Refused(format!("{why}; {reason}"));
            }
            match asker
                .prompt
                .ask(&format!("{}: {why}. Overwrite it?", e.path))
            {
                Answer::Yes => return Decision::Yes,
                Answer::No => return Decision::No,
                Answer::All => asker.all = true,
                Answer::Quit => asker.keep = true,
                Answer::NoInput => asker.none = Some("no answer (end of input)"),
                Answer::Diff => {
                    let text = match self.diff_entry(e, "repository") {
                        Ok(crate::Diff::Same) => format!("{}: the content is the same\n", e.path),
                        Ok(crate::Diff::Text { text, .. }) => text,
                        Ok(crate::Diff::Binary { path }) => {
                            format!("{path}: binary content differs\n")
                        }
                        Ok(crate::Diff::Secret { path }) => {
                            format!("{path}: differs only where its secrets stand (masked)\n")
                        }
                        Err(_) if e.kind != EntryKind::File => {
                            format!(
                                "{}: the repository has a {}{}\n",
                                e.path,
                                e.kind,
                                e.target
                                    .as_deref()
                                    .map(|t| format!(" to {t}"))
                                    .unwrap_or_default()
                            )
                        }
                        Err(err) => format!(
                            "{}: cannot diff: {}\n",
                            e.path,
                            crate::checkpoint::error_chain(&err)
                        ),
                    };
                    asker.prompt.show(&text);
                }
            }
        }
    }

    /// What to do for `e`, and why to ask first (`None`: no question).
    ///
    /// Judged three ways (see [`Tx::judge`]): an entry that is missing,
    /// or changed only in the repository (`behind`), is written without
    /// asking; a local change (`modified`), a `conflict` or a type change is
    /// asked about, unless the entry is locked or `force` is set.
    fn plan(&mut self, e: &Entry, opts: RestoreOptions) -> Result<(Plan, Option<String>, Expect)> {
        let j = self.judge(e, true, &Found::Unknown)?;
        // A type change has no content to check again before the write.
        let seen = match j.state {
            State::Missing => Some(None),
            State::TypeChange => None,
            _ => Some(j.seen.clone().map(Box::new)),
        };
        let plan = match j.state {
            State::Ok => return Ok((Plan::Nothing, None, seen)),
            State::Missing => return Ok((Plan::Write { existed: false }, None, seen)),
            State::TypeChange => {
                let disk =
                    j.md.as_ref()
                        .map_or(DiskKind::File, crate::statcache::Stat::kind);
                if disk == DiskKind::Dir {
                    return Err(Error::Unsupported {
                        path: e.path.clone(),
                        reason: format!(
                            "is a folder on disk, tracked as a {}; not replacing it",
                            e.kind
                        ),
                    });
                } else if e.kind == EntryKind::Directory {
                    return Err(Error::Unsupported {
                        path: e.path.clone(),
                        reason: format!(
                            "is {} on disk, tracked as a folder; not replacing it",
                            disk.describe()
                        ),
                    });
                }
                Plan::Write { existed: true }
            }
            _ => match (j.content_same, e.mode) {
                (Some(true), Some(m)) if e.kind != EntryKind::Link => Plan::FixMode(m),
                (Some(true), _) => return Ok((Plan::Nothing, None, seen)),
                _ => Plan::Write { existed: true },
            },
        };
        if matches!(plan, Plan::Write { existed: true }) && e.kind == EntryKind::File {
            // A database with a live WAL next to it: replacing the file
            // under it would have SQLite replay the old WAL onto the new
            // file. The program using it must close it first.
            let abs = self.repo.env.expand(&e.path);
            let mut wal = abs.clone().into_os_string();
            wal.push("-wal");
            if fs::symlink_metadata(&wal).is_ok_and(|m| m.len() > 0)
                && crate::sqlite::is_database(&abs)
            {
                return Err(Error::Unsupported {
                    path: e.path.clone(),
                    reason: "is a SQLite database with a live -wal file (a program has it open, \
                             or did not close it cleanly); close that program, then restore"
                        .into(),
                });
            }
        }
        if e.locked || opts.force {
            return Ok((plan, None, seen));
        }
        // What the disk holds against this machine's base decides: judged
        // against the head (for an older version from a snapshot too, so a
        // restore --at asks exactly when the disk holds a local change).
        let local = if self.repo.head_holds(e) {
            j
        } else {
            match self.repo.manifest.get(&e.path) {
                Some(h) => self.judge(h, true, &Found::Unknown)?,
                None => j,
            }
        };
        let detail = local.detail.unwrap_or_default();
        let why = match local.state {
            State::Ok | State::Behind | State::Drifted | State::Missing => None,
            State::Modified => Some(format!("changed here since the last sync ({detail})")),
            _ => Some(detail),
        };
        Ok((plan, why, seen))
    }

    /// The current state of a path as an entry (storing a file's content), or
    /// `None` when nothing is there. Returns whether a new blob was stored,
    /// and the SHA-256 of a file's content (its plaintext's, if encrypted).
    pub(crate) fn capture(
        &mut self,
        path: &str,
        abs: &Path,
        encrypt: bool,
    ) -> Result<(Option<Entry>, bool, Option<sgard_store::Hash>)> {
        let Some(md) = fsx::lstat(abs)? else {
            return Ok((None, false, None));
        };
        let (secs, nsec) = crate::platform::mtime(&md);
        let mtime = DateTime::from_timestamp(secs, u32::try_from(nsec).unwrap_or(0))
            .map_or(self.repo.env.now, Timestamp::from_datetime);
        let kind = DiskKind::of(&md);
        let mut e = match kind {
            DiskKind::File => Entry::new(path.to_owned(), EntryKind::File, mtime),
            DiskKind::Link => Entry::new(path.to_owned(), EntryKind::Link, mtime),
            DiskKind::Dir => Entry::new(path.to_owned(), EntryKind::Directory, mtime),
            // A FIFO, socket or device holds no content to keep: it is
            // recorded as absent (undo then removes what replaced it).
            _ => return Ok((None, false, None)),
        };
        let mut content = None;
        e.mode = Some(fsx::mode_to_record(fsx::mode_of(&md), e.mode, abs));
        let mut new = false;
        match kind {
            DiskKind::File if encrypt => {
                // A secret's old content is kept encrypted, never in plaintext.
                let (plain, fmd) = self.repo.read_plain(abs)?;
                let (h, mac, is_new) = self.store_encrypted(&plain, false)?;
                e.hash = Some(h);
                e.plaintext_mac = Some(Box::new(mac));
                e.encrypted = true;
                e.mode = Some(fsx::mode_to_record(fsx::mode_of(&fmd), e.mode, abs));
                new = is_new;
                content = Some(sgard_store::Hash::of(&plain));
            }
            DiskKind::File => {
                let (mut f, fmd) = fsx::open_regular(abs)?;
                // A database is kept as a consistent copy, and compared by
                // it (as status judged it).
                let mut head = [0u8; 16];
                let _copy = if fsx::read_head(&mut f, &mut head)
                    .map_err(|e| Error::io("reading", abs, e))?
                    && crate::sqlite::is_header(&head)
                {
                    let t = self.repo.capture_sqlite(abs)?;
                    f = t.reopen().map_err(|e| Error::io("opening", t.path(), e))?;
                    Some(t)
                } else {
                    None
                };
                let w = self.put(&mut f).map_err(|err| match err {
                    sgard_store::Error::Source(s) => Error::io("reading", abs, s),
                    other => Error::Store(other),
                })?;
                e.hash = Some(w.hash);
                e.mode = Some(fsx::mode_to_record(fsx::mode_of(&fmd), e.mode, abs));
                new = w.new;
                content = Some(w.hash);
            }
            DiskKind::Link => e.target = Some(fsx::read_link(abs)?),
            _ => {}
        }
        Ok((Some(e), new, content))
    }

    /// Records in the base what a step just put on disk (where that is the
    /// repository's version).
    fn settle_step(&mut self, s: &Step) {
        let Some(entry) = entry_of(&self.repo.manifest.files, &s.op) else {
            return;
        };
        let mode = match &s.op {
            Op::FixMode { mode, .. } => Some(*mode),
            _ => entry.mode,
        };
        let content = self.content_of(entry);
        self.settle(entry, content, mode);
    }

    /// A file entry's content, verified (and decrypted), in a temp file next
    /// to `abs` with the exact mode: ready for [`crate::home::Confine::commit`].
    fn stage_entry(&mut self, e: &Entry, abs: &Path) -> Result<crate::home::Staged> {
        if e.template {
            let out = self.rendering(e)?;
            return self.repo.confine.stage(abs, template_mode(e), |f| {
                std::io::Write::write_all(f, &out).map_err(|err| Error::io("writing", abs, err))
            });
        }
        if e.encrypted {
            let plain = self.stored_plaintext(e)?;
            let mode = e.mode.unwrap_or(Mode::from_st_mode(0o600));
            return self.repo.confine.stage(abs, mode, |f| {
                std::io::Write::write_all(f, &plain).map_err(|err| Error::io("writing", abs, err))
            });
        }
        stage_plain(&self.repo.confine, self.repo.stores(), e, abs)
    }

    fn perform(&mut self, s: &Step) -> Result<Done> {
        let abs = self.repo.env.expand(&s.path);
        match &s.op {
            Op::Write { .. } => match written(&self.repo.manifest.files, &s.op) {
                Some(entry) => self.write_entry(entry, &abs),
                None => Err(Error::Invalid(format!(
                    "{}: the head changed while restoring",
                    s.path
                ))),
            },
            Op::FixMode { mode, .. } => {
                self.repo.confine.chmod(&abs, *mode).map(|()| Done::Written)
            }
            Op::Delete => self.repo.confine.remove(&abs).map(|()| Done::Written),
        }
    }

    pub(crate) fn write_entry(&mut self, e: &Entry, abs: &Path) -> Result<Done> {
        if e.kind == EntryKind::Link {
            let target = e
                .target
                .as_deref()
                .ok_or_else(|| Error::Invalid(format!("{}: no target", e.path)))?;
            let made = if crate::standin::ACTIVE && self.repo.env.no_symlinks {
                Err(crate::standin::refusal(abs))
            } else {
                self.repo.confine.symlink(target, abs)
            };
            return match made {
                Err(err) if crate::standin::ACTIVE && crate::standin::is_refusal(&err) => {
                    self.stand_in(target, abs)
                }
                r => r.map(|()| Done::Written),
            };
        }
        self.write_file_entry(e, abs).map(|()| Done::Written)
    }

    /// Writes the stand-in for the link at `abs` to `target` that Windows
    /// refused (see [`crate::standin`]): a junction to a folder, a copy of
    /// a file (written as any restored file is), or nothing.
    fn stand_in(&self, target: &str, abs: &Path) -> Result<Done> {
        use crate::standin::{HINT, Plan};
        Ok(
            match crate::standin::plan(abs, target, &self.repo.env.home) {
                Plan::Junction(t) => match self.repo.confine.junction(&t, abs) {
                    Ok(()) => Done::StoodIn(format!(
                        "wrote a directory junction to {} in place of the symlink to {target}; {HINT}",
                        t.display()
                    )),
                    Err(err) => Done::Skipped(format!(
                        "not restored: its target {} is a folder, and neither a symlink nor a \
                     junction could be made here ({}); {HINT}",
                        t.display(),
                        crate::checkpoint::error_chain(&err)
                    )),
                },
                Plan::Copy(t) => {
                    self.repo
                        .confine
                        .write_file(abs, Mode::from_st_mode(0o644), |f| {
                            let (mut src, _) = fsx::open_regular(&t)?;
                            std::io::copy(&mut src, f)
                                .map_err(|err| Error::io("copying", &t, err))?;
                            Ok(())
                        })?;
                    Done::StoodIn(format!(
                        "wrote a copy of {} in place of the symlink to {target} (a copy does not \
                     follow later changes of its target); {HINT}",
                        t.display()
                    ))
                }
                Plan::Skip(why) => Done::Skipped(format!("not restored: {why}; {HINT}")),
            },
        )
    }

    fn write_file_entry(&mut self, e: &Entry, abs: &Path) -> Result<()> {
        match e.kind {
            EntryKind::File if e.template => {
                let out = self.rendering(e)?;
                self.repo.confine.write_file(abs, template_mode(e), |f| {
                    std::io::Write::write_all(f, &out).map_err(|err| Error::io("writing", abs, err))
                })
            }
            EntryKind::File if e.encrypted => {
                let plain = self.stored_plaintext(e)?;
                let mode = e.mode.unwrap_or(Mode::from_st_mode(0o600));
                self.repo.confine.write_file(abs, mode, |f| {
                    std::io::Write::write_all(f, &plain)
                        .map_err(|err| Error::io("writing", abs, err))
                })
            }
            EntryKind::File => {
                let hash = crate::purge::content_hash(e)?;
                let mode = e.mode.unwrap_or(Mode::from_st_mode(0o644));
                self.repo.confine.write_file(abs, mode, |f| {
                    copy_blob(self.repo.stores(), e, &hash, abs, f)
                })
            }
            EntryKind::Link => Err(Error::Invalid(format!("{}: a link, not a file", e.path))),
            EntryKind::Directory => self.repo.confine.mkdir(abs, e.mode),
        }
    }
}

/// What came of a step, beyond its action.
pub(crate) enum Done {
    /// Written as the entry says.
    Written,
    /// A stand-in was written for a symlink Windows refused (what, in words).
    StoodIn(String),
    /// Nothing could stand in for a refused symlink (why).
    Skipped(String),
}

/// The mode a template's rendering is written with.
fn template_mode(e: &Entry) -> Mode {
    e.mode
        .unwrap_or(Mode::from_st_mode(if e.encrypted { 0o600 } else { 0o644 }))
}

/// Whether the disk, as just captured (`now`, with its content's SHA-256),
/// still holds what was seen when the step was decided.
fn still_as_seen(
    seen: Option<&crate::base::Seen>,
    now: Option<&Entry>,
    content: Option<sgard_store::Hash>,
) -> bool {
    match (seen, now) {
        (None, None) => true,
        (Some(s), Some(n)) => {
            s.kind == n.kind
                && s.target == n.target
                && (s.kind == EntryKind::Link || Some(s.mode) == n.mode)
                && (s.kind != EntryKind::File || s.content == content)
        }
        _ => false,
    }
}

/// A plain file entry's content, verified, in a temp file next to `abs`
/// with the exact mode (needs only the store, so it runs on any thread).
/// (The record's count of bytes asks the store for each size again: a
/// size noted per file was 4 MB more at the peak of a 100,000-file
/// restore, for a `stat` per file on all cores.)
fn stage_plain(
    confine: &crate::home::Confine,
    store: Stores<'_>,
    e: &Entry,
    abs: &Path,
) -> Result<crate::home::Staged> {
    let hash = crate::purge::content_hash(e)?;
    let mode = e.mode.unwrap_or(Mode::from_st_mode(0o644));
    confine.stage(abs, mode, |f| copy_blob(store, e, &hash, abs, f))
}

/// The repository's store and this home's (see [`crate::Repo::stores`]).
type Stores<'a> = (&'a sgard_store::Store, Option<&'a sgard_store::Store>);

/// Copies blob `hash` of entry `e` into `f` (the file being written for
/// `abs`), verified on the way: from the repository's store, else (what
/// only a safety snapshot captured) from this home's. Tried in that order
/// rather than looked up first: a missing blob is found missing when it is
/// opened, before anything reaches `f`, and a restore saves a `stat` per
/// file.
fn copy_blob(
    (repo, local): Stores<'_>,
    e: &Entry,
    hash: &sgard_store::Hash,
    abs: &Path,
    f: &mut fs::File,
) -> Result<()> {
    let copied = match (repo.read_to(hash, f), local) {
        (Err(sgard_store::Error::Missing(_)), Some(local)) => local.read_to(hash, f),
        (r, _) => r,
    };
    copied.map_err(|source| match source {
        sgard_store::Error::Source(io) => Error::io("writing", abs, io),
        s if s.is_integrity() => Error::Integrity {
            path: e.path.clone(),
            source: s,
        },
        s => Error::Store(s),
    })?;
    Ok(())
}
