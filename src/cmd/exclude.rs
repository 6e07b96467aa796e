//! `sgard exclude` / `sgard include`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;

use super::Ctx;
use crate::ui;

fn run_exclude(
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
        ctx.finish_query(g);
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
    ctx.finish(g)?;
    Ok(ExitCode::SUCCESS)
}

fn run_include(
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
    ctx.finish(g)?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard exclude`.
#[derive(clap::Args, Debug)]
pub struct ExcludeArgs {
    /// Paths or globs (`~/.config/*/cache`); quote globs from the shell
    #[arg(value_name = "PATH", value_parser = crate::cli::path_arg(), required_unless_present = "list")]
    paths: Vec<std::ffi::OsString>,
    /// List the exclusion rules
    #[arg(short, long)]
    list: bool,
    /// Show what would change; change nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
}

impl super::Run for ExcludeArgs {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run_exclude(ctx, &self.paths, self.list, self.dry_run, out)
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }

    fn answers(&self) -> bool {
        self.list || self.dry_run
    }
}

/// The arguments of `sgard include`.
#[derive(clap::Args, Debug)]
pub struct IncludeArgs {
    /// Rules to remove, as given to `exclude`
    #[arg(required = true, value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Show what would change; change nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
}

impl super::Run for IncludeArgs {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run_include(ctx, &self.paths, self.dry_run, out)
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }
}
