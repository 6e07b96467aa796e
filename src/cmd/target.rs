//! `sgard target`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::Targeting;

use super::Ctx;
use crate::ui;

pub fn run(
    ctx: &Ctx,
    paths: &[OsString],
    only: Vec<String>,
    never: Vec<String>,
    clear: bool,
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let t = if clear {
        Targeting::Clear
    } else if !only.is_empty() {
        Targeting::Only(only)
    } else {
        Targeting::Never(never)
    };
    let what = match &t {
        Targeting::Clear => "everywhere".to_owned(),
        Targeting::Only(l) => format!("only on {}", l.join(", ")),
        Targeting::Never(l) => format!("never on {}", l.join(", ")),
    };
    let mut g = ctx.open_to_change(dry_run)?;
    let changed = g.set_target(paths, &t)?;
    for p in &changed {
        if dry_run {
            writeln!(
                out,
                "{} {} ({})",
                ui::word(ctx.colour, "target", 10),
                ui::clean(p),
                ui::clean(&what)
            )?;
        } else {
            writeln!(
                out,
                "Updated targeting for {}: {}.",
                ui::clean(p),
                ui::clean(&what)
            )?;
        }
    }
    if dry_run {
        writeln!(
            out,
            "Dry run: would set the targeting of {}; nothing was changed.",
            ui::counts(changed.len() as u64, "path")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
