//! `sgard mirror up` / `sgard mirror down`

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use sgard_garden::RestoreOptions;

use super::{Ctx, restore};
use crate::exit::Fail;
use crate::ui::{self, StdinPrompt};

fn run(ctx: &Ctx, dir: Direction, out: &mut dyn Write) -> Result<ExitCode> {
    match dir {
        Direction::Up { dirs, dry_run } => {
            let mut g = ctx.open_to_change(dry_run)?;
            let r = g.mirror_up(&dirs).map_err(super::add::refused_secrets)?;
            for (p, why) in &r.skipped {
                ui::warn(&format!("skipped {p}: {}", ui::why(why)));
            }
            let words = if dry_run {
                ["add", "remove", "update"]
            } else {
                ["added", "removed", "updated"]
            };
            for (word, paths) in words.iter().zip([&r.added, &r.removed, &r.refreshed]) {
                for p in paths {
                    writeln!(out, "{} {}", ui::word(ctx.colour, word, 10), ui::clean(p))?;
                }
            }
            for (p, why) in &r.kept {
                writeln!(
                    out,
                    "{} {} ({})",
                    ui::word(ctx.colour, "kept", 10),
                    ui::clean(p),
                    ui::clean(&ui::why(why))
                )?;
            }
            let counts = format!(
                "{} added, {} removed, {} updated",
                r.added.len(),
                r.removed.len(),
                r.refreshed.len()
            );
            if dry_run {
                writeln!(out, "Dry run: would be {counts}; nothing was changed.")?;
            } else {
                writeln!(out, "Mirror up complete: {counts}.")?;
            }
            ctx.finish(g)?;
            Ok(ExitCode::SUCCESS)
        }
        Direction::Down {
            dirs,
            force,
            dry_run,
            no_scripts,
        } => {
            let mut g = ctx.open_for_home(dry_run)?;
            if no_scripts {
                g.forbid_template_commands();
            }
            let mut prompt = StdinPrompt::new();
            let r = g.mirror_down(&dirs, RestoreOptions { force, dry_run }, &mut prompt)?;
            for (p, why) in &r.skipped {
                ui::warn(&format!("skipped {p}: {}", ui::why(why)));
            }
            restore::print_actions(ctx.colour, &r.restore, dry_run, out)?;
            let scripts = match (no_scripts, dry_run) {
                (true, _) => super::scripts::Scripts::Skip,
                (false, true) => super::scripts::Scripts::List,
                (false, false) => super::scripts::Scripts::Run,
            };
            let plan = super::scripts::plan(&mut g, scripts)?;
            ctx.finish(g)?;
            let failed_scripts = super::scripts::run_plan(plan, out)?;
            let (del, keep) = if dry_run {
                ("delete", "ask")
            } else {
                ("deleted", "kept")
            };
            for p in &r.deleted {
                writeln!(out, "{} {}", ui::word(ctx.colour, del, 10), ui::clean(p))?;
            }
            for p in &r.kept {
                writeln!(out, "{} {}", ui::word(ctx.colour, keep, 10), ui::clean(p))?;
            }
            for p in &r.removed_dirs {
                writeln!(
                    out,
                    "{} {}/",
                    ui::word(ctx.colour, "rmdir", 10),
                    ui::clean(p)
                )?;
            }
            let mut failures: Vec<(String, String)> = r
                .restore
                .failures
                .iter()
                .map(|(p, e)| (p.clone(), restore::chain(e)))
                .collect();
            failures.extend(
                r.failures
                    .iter()
                    .map(|(p, e)| (p.clone(), restore::chain(e))),
            );
            let done = if failures.is_empty() {
                writeln!(
                    out,
                    "{}",
                    if dry_run {
                        "Dry run: nothing was changed."
                    } else {
                        "Mirror down complete."
                    }
                )?;
                Ok(ExitCode::SUCCESS)
            } else {
                let mut msg = format!(
                    "{} could not be mirrored:",
                    ui::counts(failures.len() as u64, "path")
                );
                for (p, e) in &failures {
                    let _ = write!(msg, "\n  {p}: {e}");
                }
                if r.restore.has_integrity_failure() {
                    Err(Fail::integrity(msg))
                } else {
                    Err(anyhow!(msg))
                }
            };
            super::scripts::end(done, &failed_scripts)
        }
    }
}

/// The arguments of `sgard mirror`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which way
    #[command(subcommand)]
    direction: Direction,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, self.direction, out)
    }

    fn dry_run(&self) -> bool {
        matches!(
            self.direction,
            Direction::Up { dry_run: true, .. } | Direction::Down { dry_run: true, .. }
        )
    }
}

/// `mirror` directions.
#[derive(clap::Subcommand, Debug)]
pub enum Direction {
    /// Disk → repository: track new files, drop deleted ones, refresh changed ones
    Up {
        /// Folders to mirror
        #[arg(required = true, value_name = "DIR", value_parser = crate::cli::path_arg())]
        dirs: Vec<std::ffi::OsString>,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Repository → disk: restore, then delete untracked files
    Down {
        /// Folders to mirror
        #[arg(required = true, value_name = "DIR", value_parser = crate::cli::path_arg())]
        dirs: Vec<std::ffi::OsString>,
        /// Overwrite and delete without asking
        #[arg(short, long)]
        force: bool,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
        /// Do not run the scripts that are due
        #[arg(long)]
        no_scripts: bool,
    },
}
