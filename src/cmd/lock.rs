//! `sgard lock` / `sgard unlock`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::Ctx;
use crate::ui;

fn run(
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
    ctx.finish(g)?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard lock`.
#[derive(clap::Args, Debug)]
pub struct LockArgs {
    /// Tracked paths (a folder selects the entries under it)
    #[arg(required = true, value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Show what would change; change nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
}

impl super::Run for LockArgs {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, &self.paths, true, self.dry_run, out)
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }
}

/// The arguments of `sgard unlock`.
#[derive(clap::Args, Debug)]
pub struct UnlockArgs {
    /// Tracked paths (a folder selects the entries under it)
    #[arg(required = true, value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Show what would change; change nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
}

impl super::Run for UnlockArgs {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, &self.paths, false, self.dry_run, out)
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }
}
