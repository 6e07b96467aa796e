//! `sgard lock` / `sgard unlock`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;

use super::Ctx;

pub fn run(ctx: &Ctx, paths: &[OsString], lock: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open(LockMode::Exclusive)?;
    let changed = g.set_locked(paths, lock)?;
    let word = if lock { "Locked" } else { "Unlocked" };
    writeln!(out, "{word} {} path(s).", changed.len())?;
    Ok(ExitCode::SUCCESS)
}
