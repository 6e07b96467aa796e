//! `sgard tag add|remove|list`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;

use super::Ctx;
use crate::cli::TagAction;

pub fn run(ctx: &Ctx, action: TagAction, out: &mut dyn Write) -> Result<ExitCode> {
    match action {
        TagAction::Add { name } => {
            let mut g = ctx.open(LockMode::Exclusive)?;
            let t = name.trim();
            if g.add_tag(&name)? {
                writeln!(out, "Tag {t:?} added.")?;
            } else {
                writeln!(out, "Tag {t:?} is already set.")?;
            }
        }
        TagAction::Remove { name } => {
            let mut g = ctx.open(LockMode::Exclusive)?;
            let t = name.trim();
            if g.remove_tag(&name)? {
                writeln!(out, "Tag {t:?} removed.")?;
            } else {
                writeln!(out, "Tag {t:?} was not set.")?;
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
