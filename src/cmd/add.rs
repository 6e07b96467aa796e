//! `sgard add`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::{AddOptions, AddOutcome, LockMode};
use sgard_manifest::Run;

use super::Ctx;
use crate::cli::AddArgs;
use crate::ui;

pub fn run(ctx: &Ctx, args: &AddArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open(LockMode::Exclusive)?;
    let opts = AddOptions {
        dir: args.dir,
        lock: args.lock,
        only: args.only.clone(),
        never: args.never.clone(),
        encrypt: args.encrypt,
        no_encrypt: args.no_encrypt,
        template: args.template,
        run: args.run.as_deref().and_then(Run::parse),
        follow: args.follow,
    };
    let report = g.add(&args.paths, &opts)?;
    for (path, why) in &report.skipped {
        ui::warn(&format!("skipped {path}: {why}"));
    }
    for (path, why) in &report.notes {
        ui::warn(&format!("{path}: {why}"));
    }
    for note in &report.links {
        ui::note(note);
    }
    let added = report.count(AddOutcome::Added);
    let refreshed = report.count(AddOutcome::Refreshed);
    let unchanged = report.count(AddOutcome::Unchanged);
    write!(out, "Added {added} path(s)")?;
    if refreshed > 0 {
        write!(out, ", refreshed {refreshed}")?;
    }
    if unchanged > 0 {
        write!(out, ", {unchanged} already up to date")?;
    }
    writeln!(out)?;
    Ok(ExitCode::SUCCESS)
}
