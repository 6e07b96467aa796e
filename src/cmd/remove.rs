//! `sgard remove`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::Ctx;
use crate::ui;

pub fn run(ctx: &Ctx, paths: &[OsString], dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open_to_change(dry_run)?;
    let report = g.remove(paths)?;
    let n = ui::counts(report.removed.len() as u64, "path");
    if dry_run {
        for p in &report.removed {
            writeln!(
                out,
                "{} {}",
                ui::word(ctx.colour, "untrack", 10),
                ui::clean(p)
            )?;
        }
        writeln!(
            out,
            "Dry run: would stop tracking {n}; nothing was changed."
        )?;
    } else {
        writeln!(out, "Removed {n}")?;
    }
    Ok(ExitCode::SUCCESS)
}
