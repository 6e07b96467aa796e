//! `sgard remove`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;

use super::Ctx;

pub fn run(ctx: &Ctx, paths: &[OsString], out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open(LockMode::Exclusive)?;
    let report = g.remove(paths)?;
    writeln!(out, "Removed {} path(s)", report.removed.len())?;
    Ok(ExitCode::SUCCESS)
}
