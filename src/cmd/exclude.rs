//! `sgard exclude` / `sgard include`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;

use super::Ctx;
use crate::ui;

pub fn run_exclude(
    ctx: &Ctx,
    paths: &[OsString],
    list: bool,
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    if paths.is_empty() && list {
        let g = ctx.open(LockMode::Shared)?;
        for r in &g.manifest().exclude {
            writeln!(out, "{}", ui::clean(r))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut g = ctx.open_to_change(dry_run)?;
    let (added, dropped) = g.exclude(paths)?;
    let rules = ui::counts(added.len() as u64, "rule");
    if dry_run {
        writeln!(out, "Dry run: would add {rules}; nothing was changed.")?;
    } else if added.is_empty() {
        writeln!(out, "Every rule was already in the exclusion list.")?;
    } else {
        writeln!(out, "Excluded {}.", added.join(", "))?;
    }
    if !dropped.is_empty() {
        writeln!(
            out,
            "{} tracking {}:",
            if dry_run { "Would stop" } else { "Stopped" },
            ui::count(dropped.len() as u64, "excluded entry", "excluded entries"),
        )?;
        for d in &dropped {
            writeln!(out, "  {}", ui::clean(d))?;
        }
    }
    if list {
        for r in &g.manifest().exclude {
            writeln!(out, "{}", ui::clean(r))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_include(
    ctx: &Ctx,
    paths: &[OsString],
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let mut g = ctx.open_to_change(dry_run)?;
    let removed = g.include(paths)?;
    if dry_run {
        writeln!(
            out,
            "Dry run: would remove {} from the exclusion list; nothing was changed.",
            ui::counts(removed.len() as u64, "rule")
        )?;
    } else {
        writeln!(
            out,
            "Removed {} from the exclusion list (entries it dropped come back with `sgard add`).",
            removed.join(", ")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
