//! `sgard merge`

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use sgard_garden::MergeOutcome;

use super::Ctx;
use super::restore::chain;
use crate::exit::Fail;

pub fn run(ctx: &Ctx, paths: &[OsString], out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open_for_home()?;
    let results = g.merge(paths)?;
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
                    "{:<10} {path} ({n} conflict{} marked <<<<<<< ours … >>>>>>> theirs; \
                     edit {} away, then `sgard checkpoint`)",
                    "conflicts",
                    if *n == 1 { "" } else { "s" },
                    if *n == 1 { "it" } else { "them" },
                )?;
                marked.push(path.as_str());
            }
            Ok(MergeOutcome::NotNeeded(why)) => {
                writeln!(out, "{:<10} {} ({why})", "skipped", crate::ui::clean(path))?;
            }
            Err(e) => {
                writeln!(out, "{:<10} {path}", "failed")?;
                let _ = write!(failed, "\n  {path}: {}", chain(e));
            }
        }
    }
    if !failed.is_empty() {
        return Err(anyhow!("could not merge:{failed}"));
    }
    if !marked.is_empty() {
        return Err(Fail::conflict(format!(
            "conflict markers written to {}; the repository's version is recorded as \
             merged, so the next checkpoint takes the file as you leave it",
            marked.join(", ")
        )));
    }
    Ok(ExitCode::SUCCESS)
}
