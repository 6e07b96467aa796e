//! `sgard tag add|remove|list`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;

use super::Ctx;
use crate::cli::TagAction;

pub fn run(ctx: &Ctx, action: TagAction, out: &mut dyn Write) -> Result<ExitCode> {
    match action {
        TagAction::Add { name, dry_run } => {
            let mut g = ctx.open_to_change(dry_run)?;
            let t = name.trim();
            match (g.add_tag(&name)?, dry_run) {
                (true, false) => writeln!(out, "Tag {t:?} added.")?,
                (true, true) => writeln!(out, "Dry run: would add tag {t:?}.")?,
                (false, _) => writeln!(out, "Tag {t:?} is already set.")?,
            }
        }
        TagAction::Remove { name, dry_run } => {
            let mut g = ctx.open_to_change(dry_run)?;
            let t = name.trim();
            match (g.remove_tag(&name)?, dry_run) {
                (true, false) => writeln!(out, "Tag {t:?} removed.")?,
                (true, true) => writeln!(out, "Dry run: would remove tag {t:?}.")?,
                (false, _) => writeln!(out, "Tag {t:?} was not set.")?,
            }
        }
        TagAction::List => {
            let g = ctx.open(LockMode::Shared)?;
            let mut tags = g.tags()?;
            tags.sort();
            if tags.is_empty() {
                writeln!(out, "No tags set.")?;
            }
            for t in tags {
                writeln!(out, "{t}")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
