//! `sgard tag add|remove|list`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;

use super::Ctx;

fn run(ctx: &Ctx, action: Action, out: &mut dyn Write) -> Result<ExitCode> {
    match action {
        Action::Add { name, dry_run } => {
            let mut g = ctx.open_to_change(dry_run)?;
            let t = name.trim();
            match (g.add_tag(&name)?, dry_run) {
                (true, false) => writeln!(out, "Tag {t:?} added.")?,
                (true, true) => writeln!(out, "Dry run: would add tag {t:?}.")?,
                (false, _) => writeln!(out, "Tag {t:?} is already set.")?,
            }
            ctx.finish(g)?;
        }
        Action::Remove { name, dry_run } => {
            let mut g = ctx.open_to_change(dry_run)?;
            let t = name.trim();
            match (g.remove_tag(&name)?, dry_run) {
                (true, false) => writeln!(out, "Tag {t:?} removed.")?,
                (true, true) => writeln!(out, "Dry run: would remove tag {t:?}.")?,
                (false, _) => writeln!(out, "Tag {t:?} was not set.")?,
            }
            ctx.finish(g)?;
        }
        Action::List => {
            let g = ctx.open(LockMode::Shared)?;
            let mut tags = g.tags()?;
            tags.sort();
            if tags.is_empty() {
                writeln!(out, "No tags set.")?;
            }
            for t in tags {
                writeln!(out, "{t}")?;
            }
            ctx.finish_query(g);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard tag`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to do with tags
    #[command(subcommand)]
    action: Action,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, self.action, out)
    }

    fn answers(&self) -> bool {
        matches!(self.action, Action::List) || self.dry_run()
    }

    fn dry_run(&self) -> bool {
        matches!(
            self.action,
            Action::Add { dry_run: true, .. } | Action::Remove { dry_run: true, .. }
        )
    }
}

/// `tag` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Add a tag to this machine
    Add {
        /// The tag
        name: String,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Remove a tag from this machine
    Remove {
        /// The tag
        name: String,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// List this machine's tags
    List,
}
