//! `sgard checkpoint`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};
use sgard_garden::{CheckpointOptions, EntryChange};

use super::Ctx;
use crate::exit::Fail;

pub fn run(
    ctx: &Ctx,
    message: Option<&str>,
    paths: &[OsString],
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let mut g = ctx.open_to_change(dry_run)?;
    let report = g.checkpoint(message, paths, CheckpointOptions { dry_run })?;
    let mut failed = Vec::new();
    for (path, change) in &report.changes {
        let (word, detail) = match change {
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
            crate::ui::word(ctx.colour, word, 10),
            crate::ui::clean(path),
            crate::ui::clean(&detail)
        )?;
    }
    if !failed.is_empty() && !dry_run {
        // Not "complete": say what was recorded and what was not.
        let recorded = report
            .changes
            .iter()
            .filter(|(_, c)| matches!(c, EntryChange::Content | EntryChange::Mode))
            .count();
        let done = match (report.unchanged, report.snapshot) {
            (false, Some(id)) => format!(
                "Checkpoint recorded snapshot {} ({})",
                id.short(12),
                entries(recorded)
            ),
            _ => "Checkpoint recorded nothing".to_owned(),
        };
        writeln!(
            out,
            "{done}; {} failed: {}.",
            entries(failed.len()),
            failed.join(", ")
        )?;
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
    match (dry_run, report.unchanged, report.snapshot) {
        (true, _, _) => writeln!(out, "Dry run: nothing was recorded.")?,
        (false, true, _) => {
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
        (false, false, Some(id)) => {
            writeln!(out, "Checkpoint complete: snapshot {}.", id.short(12))?;
        }
        (false, false, None) => writeln!(out, "Checkpoint complete.")?,
    }
    if !failed.is_empty() {
        bail!(
            "{} could not be checkpointed: {}",
            entries(failed.len()),
            failed.join(", ")
        );
    }
    let conflicts = report.conflicts();
    if !conflicts.is_empty() {
        let n = conflicts.len();
        return Err(Fail::conflict(format!(
            "{n} entr{} changed both here and in the repository {} not recorded: {}; \
             settle {} with `sgard merge PATH`, `sgard add PATH` (keep this one) or \
             `sgard restore -f PATH` (take the repository's version)",
            plural_y(n),
            if n == 1 { "was" } else { "were" },
            conflicts.join(", "),
            if n == 1 { "it" } else { "each" },
        )));
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
