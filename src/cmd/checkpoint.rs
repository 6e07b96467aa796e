//! `sgard checkpoint`

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};
use sgard_garden::{EntryChange, LockMode};

use super::Ctx;

pub fn run(ctx: &Ctx, message: Option<&str>, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open(LockMode::Exclusive)?;
    let report = g.checkpoint(message)?;
    let mut failed = 0;
    for (path, change) in &report.changes {
        let (word, detail) = match change {
            EntryChange::Content => ("updated", String::new()),
            EntryChange::Mode => ("mode", String::new()),
            EntryChange::Missing => ("missing", " (kept the stored version)".to_owned()),
            EntryChange::TypeChange(why) => ("typechange", format!(" ({why}; entry kept)")),
            EntryChange::Locked => ("locked", " (differs on disk; repository kept)".to_owned()),
            EntryChange::Failed(why) => {
                failed += 1;
                ("failed", format!(" ({why})"))
            }
        };
        writeln!(out, "{word:<10} {path}{detail}")?;
    }
    match (report.unchanged, report.snapshot) {
        (true, _) => {
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
        (false, Some(id)) => writeln!(out, "Checkpoint complete: snapshot {}.", id.short(12))?,
        (false, None) => writeln!(out, "Checkpoint complete.")?,
    }
    if failed > 0 {
        bail!(
            "{failed} entr{} could not be checkpointed (kept as before)",
            plural_y(failed)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn plural_y(n: usize) -> &'static str {
    if n == 1 { "y" } else { "ies" }
}
