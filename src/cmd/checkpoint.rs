//! `sgard checkpoint`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};
use sgard_garden::{CheckpointOptions, EntryChange, LockMode};

use super::Ctx;
use crate::exit::Fail;

pub fn run(
    ctx: &Ctx,
    message: Option<&str>,
    paths: &[OsString],
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let mut g = ctx.open(LockMode::Exclusive)?;
    let report = g.checkpoint(message, paths, CheckpointOptions { dry_run })?;
    let mut failed = 0;
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
                failed += 1;
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
            "{word:<10} {}{}",
            crate::ui::clean(path),
            crate::ui::clean(&detail)
        )?;
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
    if failed > 0 {
        bail!(
            "{failed} entr{} could not be checkpointed (kept as before)",
            plural_y(failed)
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

fn plural_y(n: usize) -> &'static str {
    if n == 1 { "y" } else { "ies" }
}
