//! `sgard merge`

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use sgard_garden::MergeOutcome;

use super::Ctx;
use crate::exit::Fail;
use crate::ui;

fn run(ctx: &Ctx, paths: &[OsString], dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open_for_home(dry_run)?;
    let results = g.merge(paths)?;
    if dry_run {
        return preview(ctx, &results, out);
    }
    let mut failed = String::new();
    let mut marked = Vec::new();
    for (path, r) in &results {
        match r {
            Ok(MergeOutcome::Clean) => writeln!(
                out,
                "{:<10} {path} (no conflicts; `sgard checkpoint` records it)",
                "merged"
            )?,
            Ok(MergeOutcome::Conflicts(n)) => {
                writeln!(
                    out,
                    "{:<10} {} ({n} conflict{} marked <<<<<<< ours … >>>>>>> theirs; \
                     edit {} away, then `sgard checkpoint`)",
                    "conflicts",
                    crate::ui::clean(path),
                    if *n == 1 { "" } else { "s" },
                    if *n == 1 { "it" } else { "them" },
                )?;
                marked.push(crate::ui::clean(path));
            }
            Ok(MergeOutcome::NotNeeded(why)) => {
                writeln!(
                    out,
                    "{:<10} {} ({})",
                    "skipped",
                    crate::ui::clean(path),
                    ui::no_merge(*why)
                )?;
            }
            Err(e) => {
                let path = crate::ui::clean(path);
                writeln!(out, "{:<10} {path}", "failed")?;
                let _ = write!(failed, "\n  {path}: {}", ui::explained(e));
            }
        }
    }
    if !failed.is_empty() {
        return Err(anyhow!("could not merge:{failed}"));
    }
    if !marked.is_empty() {
        return Err(Fail::conflict(format!(
            "conflict markers written to {}: resolve them, then `sgard checkpoint` records \
             the result (it refuses the file while the markers remain; `sgard undo` puts the file \
             back as it was before the merge)",
            marked.join(", ")
        )));
    }
    ctx.finish(g)?;
    Ok(ExitCode::SUCCESS)
}

/// What `merge --dry-run` found: each file's outcome; nothing was written.
fn preview(
    ctx: &Ctx,
    results: &[(String, sgard_garden::Result<MergeOutcome>)],
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let mut failed = String::new();
    for (path, r) in results {
        let (word, detail) = match r {
            Ok(MergeOutcome::Clean) => ("merge", "would merge with no conflicts".to_owned()),
            Ok(MergeOutcome::Conflicts(n)) => (
                "conflict",
                format!(
                    "would write {} to settle by hand",
                    ui::count(*n as u64, "conflict region", "conflict regions")
                ),
            ),
            Ok(MergeOutcome::NotNeeded(why)) => ("skipped", ui::no_merge(*why)),
            Err(e) => {
                let _ = write!(failed, "\n  {path}: {}", ui::explained(e));
                ("failed", ui::explained(e))
            }
        };
        writeln!(
            out,
            "{} {} ({})",
            ui::word(ctx.colour, word, 10),
            ui::clean(path),
            ui::clean(&detail)
        )?;
    }
    writeln!(out, "Dry run: nothing was written.")?;
    if !failed.is_empty() {
        return Err(anyhow!("could not merge:{failed}"));
    }
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard merge`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Conflicting tracked files (or folders of them)
    #[arg(required = true, value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Show the merge's outcome for each file; write nothing
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
