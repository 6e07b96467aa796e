//! `sgard checkpoint`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};
use sgard_garden::{CheckpointOptions, EntryChange};

use super::Ctx;
use crate::exit::Fail;

/// How the checkpoint runs and what follows it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Then {
    /// Record nothing; say what would be recorded.
    pub dry_run: bool,
    /// Commit the repository with git after a snapshot.
    pub commit: bool,
    /// Commit and push.
    pub push: bool,
}

fn run(
    ctx: &Ctx,
    message: Option<&str>,
    paths: &[OsString],
    then: Then,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let dry_run = then.dry_run;
    let mut g = ctx.open_to_change(dry_run)?;
    let report = g.checkpoint(message, paths, CheckpointOptions { dry_run })?;
    // One write for the report's lines rather than one per line (a 1%
    // checkpoint of 10,000 files prints 100), flushed before `finish` may
    // say anything on stderr, so the two stay in order.
    let raw = out;
    let mut lines = std::io::BufWriter::with_capacity(32 << 10, &mut *raw);
    let out = &mut lines;
    let word = |w: &str| crate::ui::word(ctx.colour, w, 10);
    // What the head changed since the newest snapshot: recorded too.
    for c in &report.staged {
        let detail = c
            .detail
            .as_ref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        writeln!(
            out,
            "{} {}{}",
            word(c.what),
            crate::ui::clean(&c.path),
            crate::ui::clean(&detail)
        )?;
    }
    let mut failed = Vec::new();
    for (path, change) in &report.changes {
        let (w, detail) = match change {
            EntryChange::Content if dry_run => ("update", String::new()),
            EntryChange::Content => ("updated", String::new()),
            EntryChange::Mode => ("mode", String::new()),
            EntryChange::Missing => ("missing", " (kept the stored version)".to_owned()),
            EntryChange::TypeChange(why) => ("typechange", format!(" ({why}; entry kept)")),
            EntryChange::Locked => ("locked", " (differs on disk; repository kept)".to_owned()),
            EntryChange::Behind(why) => (
                "behind",
                format!(" ({why}; not recorded: `sgard restore` brings it here)"),
            ),
            EntryChange::Conflict(why) => (
                "conflict",
                format!(" ({why}; the repository's version is kept)"),
            ),
            EntryChange::Unresolved(why) => ("conflict", format!(" ({why}; not recorded)")),
            EntryChange::Failed(why) => {
                failed.push(crate::ui::clean(path).into_owned());
                ("failed", format!(" ({why})"))
            }
            EntryChange::Template => (
                "template",
                format!(
                    " (the rendering was edited on disk; the template source is kept: \
                     `sgard edit {path}` changes it, `sgard restore {path}` renders it again)"
                ),
            ),
        };
        writeln!(
            out,
            "{} {}{}",
            word(w),
            crate::ui::clean(path),
            crate::ui::clean(&detail)
        )?;
    }
    let conflicts = report.conflicts();
    let unresolved = report.unresolved();
    let held: Vec<&str> = conflicts.iter().chain(&unresolved).copied().collect();
    let recorded = report.recorded();
    if dry_run {
        if report.unchanged {
            writeln!(out, "Dry run: nothing to record.")?;
        } else {
            writeln!(
                out,
                "Dry run: would record a snapshot ({}); nothing was recorded.",
                entries(recorded)
            )?;
        }
    } else if !failed.is_empty() || !held.is_empty() {
        // Not "complete": say what was recorded and what was not.
        let mut done = match (report.unchanged, report.snapshot) {
            (false, Some(id)) => format!(
                "Checkpoint recorded snapshot {} ({})",
                id.short(12),
                entries(recorded)
            ),
            _ => "Checkpoint recorded nothing".to_owned(),
        };
        if !failed.is_empty() {
            done.push_str(&format!(
                "; {} failed: {}",
                entries(failed.len()),
                failed.join(", ")
            ));
        }
        if !held.is_empty() {
            let held: Vec<_> = held.iter().map(|p| crate::ui::clean(p)).collect();
            done.push_str(&format!(
                "; {} in conflict: {}",
                entries(held.len()),
                held.join(", ")
            ));
        }
        writeln!(out, "{done}.")?;
    } else {
        match (report.unchanged, report.snapshot) {
            (true, _) | (false, None) => {
                let at = g
                    .history()
                    .head()
                    .map(|r| r.id.short(12))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "Checkpoint complete: nothing changed since snapshot {at}."
                )?;
            }
            (false, Some(id)) => {
                writeln!(out, "Checkpoint complete: snapshot {}.", id.short(12))?;
            }
        }
    }
    out.flush()?;
    drop(lines);
    let out = raw;
    ctx.finish(g)?;
    // A snapshot recorded: committed (and pushed) as asked or as the
    // repository's git settings say; git's failure is only a warning.
    if !dry_run
        && !report.unchanged
        && let Some(id) = report.snapshot
    {
        let settings = super::git::Settings::load(&ctx.repo);
        let push = then.push || settings.auto_push;
        if then.commit || push || settings.auto_commit {
            let text = match message.filter(|m| !m.trim().is_empty()) {
                Some(m) => m.to_owned(),
                None => format!("sgard checkpoint {} on {}", id.short(12), ctx.env.hostname),
            };
            for line in super::git::commit_checkpoint(&ctx.repo, &text, push) {
                writeln!(out, "{line}")?;
            }
        }
    }
    if !failed.is_empty() && !dry_run {
        bail!(
            "{} could not be checkpointed and {} kept as {} (see `failed` above): {}",
            entries(failed.len()),
            if failed.len() == 1 { "is" } else { "are" },
            if failed.len() == 1 {
                "it was"
            } else {
                "they were"
            },
            failed.join(", ")
        );
    }
    if !failed.is_empty() {
        bail!(
            "{} could not be checkpointed: {}",
            entries(failed.len()),
            failed.join(", ")
        );
    }
    let mut refusals = Vec::new();
    if !conflicts.is_empty() {
        let n = conflicts.len();
        refusals.push(format!(
            "{n} entr{} changed both here and in the repository {} not recorded: {}; \
             settle {} with `sgard merge PATH`, `sgard add PATH` (keep this one) or \
             `sgard restore -f PATH` (take the repository's version)",
            plural_y(n),
            if n == 1 { "was" } else { "were" },
            conflicts.join(", "),
            if n == 1 { "it" } else { "each" },
        ));
    }
    if !unresolved.is_empty() {
        let n = unresolved.len();
        refusals.push(format!(
            "{} still {} the conflict markers `sgard merge` wrote and {} not recorded: \
             edit them away, then `sgard checkpoint` (`sgard restore -f PATH` takes the \
             repository's version instead)",
            unresolved.join(", "),
            if n == 1 { "holds" } else { "hold" },
            if n == 1 { "was" } else { "were" },
        ));
    }
    if !refusals.is_empty() {
        return Err(Fail::conflict(refusals.join("; ")));
    }
    Ok(ExitCode::SUCCESS)
}

/// `1 entry`, `2 entries`.
fn entries(n: usize) -> String {
    format!("{n} entr{}", plural_y(n))
}

fn plural_y(n: usize) -> &'static str {
    if n == 1 { "y" } else { "ies" }
}

/// The arguments of `sgard checkpoint`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A message describing this checkpoint
    #[arg(short, long)]
    message: Option<String>,
    /// Entries (or folders of entries) to record [default: all]
    #[arg(value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Show what would be recorded; record nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
    /// Then commit the repository with git (when it recorded a snapshot)
    #[arg(long)]
    commit: bool,
    /// Then commit and push with git (when it recorded a snapshot)
    #[arg(long)]
    push: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(
            ctx,
            self.message.as_deref(),
            &self.paths,
            Then {
                dry_run: self.dry_run,
                commit: self.commit,
                push: self.push,
            },
            out,
        )
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }

    fn needs_history(&self) -> bool {
        true
    }
}
