//! `sgard exclude` / `sgard include`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;

use super::Ctx;

pub fn run_exclude(
    ctx: &Ctx,
    paths: &[OsString],
    list: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    if paths.is_empty() && list {
        let g = ctx.open(LockMode::Shared)?;
        for r in &g.manifest().exclude {
            writeln!(out, "{r}")?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut g = ctx.open(LockMode::Exclusive)?;
    let (added, dropped) = g.exclude(paths)?;
    writeln!(out, "Excluded {} path(s)", added.len())?;
    if !dropped.is_empty() {
        writeln!(
            out,
            "Stopped tracking {} excluded entr{}:",
            dropped.len(),
            if dropped.len() == 1 { "y" } else { "ies" }
        )?;
        for d in &dropped {
            writeln!(out, "  {d}")?;
        }
    }
    if list {
        for r in &g.manifest().exclude {
            writeln!(out, "{r}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_include(ctx: &Ctx, paths: &[OsString], out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open(LockMode::Exclusive)?;
    let removed = g.include(paths)?;
    writeln!(out, "Included {} path(s)", removed.len())?;
    Ok(ExitCode::SUCCESS)
}
