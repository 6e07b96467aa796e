//! `sgard lock` / `sgard unlock`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::Ctx;
use crate::ui;

pub fn run(
    ctx: &Ctx,
    paths: &[OsString],
    lock: bool,
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let mut g = ctx.open_to_change(dry_run)?;
    let changed = g.set_locked(paths, lock)?;
    let (verb, done) = if lock {
        ("lock", "Locked")
    } else {
        ("unlock", "Unlocked")
    };
    let n = ui::counts(changed.len() as u64, "path");
    if dry_run {
        for p in &changed {
            writeln!(out, "{} {}", ui::word(ctx.colour, verb, 10), ui::clean(p))?;
        }
        writeln!(out, "Dry run: would {verb} {n}; nothing was changed.")?;
    } else {
        writeln!(out, "{done} {n}.")?;
    }
    Ok(ExitCode::SUCCESS)
}
