//! `sgard target`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::Targeting;

use super::Ctx;
use crate::ui;

fn run(
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
    ctx.finish(g)?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard target`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Tracked paths (a folder selects the entries under it)
    #[arg(required = true, value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Apply only on machines with one of these labels
    #[arg(long, value_delimiter = ',', value_name = "LABEL,...")]
    only: Vec<String>,
    /// Never apply on machines with one of these labels
    #[arg(long, value_delimiter = ',', value_name = "LABEL,...")]
    never: Vec<String>,
    /// Apply everywhere
    #[arg(long)]
    clear: bool,
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
        run(
            ctx,
            &self.paths,
            self.only,
            self.never,
            self.clear,
            self.dry_run,
            out,
        )
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }
}
