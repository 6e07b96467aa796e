//! `sgard remove`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::Ctx;
use crate::ui;

fn run(ctx: &Ctx, paths: &[OsString], dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open_to_change(dry_run)?;
    let report = match g.remove(paths) {
        Err(sgard_garden::Error::Conflict(msg)) => return Err(crate::exit::Fail::conflict(msg)),
        other => other?,
    };
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
    ctx.finish(g)?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard remove`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Paths to untrack
    #[arg(required = true, value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Show what would change; change nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, &self.paths, self.dry_run, out)
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }
}
