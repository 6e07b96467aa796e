//! `sgard list`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;
use sgard_manifest::EntryKind;

use super::Ctx;

pub fn run(ctx: &Ctx, out: &mut dyn Write) -> Result<ExitCode> {
    let g = ctx.open(LockMode::Shared)?;
    for e in &g.manifest().files {
        match e.kind {
            EntryKind::File => {
                let short = e.hash.map(|h| h.short(8)).unwrap_or_default();
                writeln!(out, "{:<6} {}\t{short}", "file", e.path)?;
            }
            EntryKind::Link => writeln!(
                out,
                "{:<6} {}\t-> {}",
                "link",
                e.path,
                e.target.as_deref().unwrap_or("")
            )?,
            EntryKind::Directory => writeln!(out, "{:<6} {}", "dir", e.path)?,
        }
    }
    Ok(ExitCode::SUCCESS)
}
