//! `sgard add`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::{AddOptions, AddOutcome};
use sgard_manifest::Run;

use super::Ctx;
use crate::cli::AddArgs;
use crate::ui;

pub fn run(ctx: &Ctx, args: &AddArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open_to_change(args.dry_run)?;
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
    let report = g.add(&args.paths, &opts).map_err(refused_secrets)?;
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
    if args.dry_run {
        for (path, outcome) in &report.entries {
            let word = match outcome {
                AddOutcome::Added => "add",
                AddOutcome::Refreshed => "refresh",
                AddOutcome::Unchanged => continue,
            };
            writeln!(
                out,
                "{} {}",
                ui::word(ctx.colour, word, 10),
                ui::clean(path)
            )?;
        }
        write!(
            out,
            "Dry run: would add {}",
            ui::counts(added as u64, "path")
        )?;
    } else {
        write!(out, "Added {}", ui::counts(added as u64, "path"))?;
    }
    if refreshed > 0 {
        write!(
            out,
            ", refresh{} {refreshed}",
            if args.dry_run { "" } else { "ed" }
        )?;
    }
    if unchanged > 0 {
        write!(out, ", {unchanged} already up to date")?;
    }
    if args.dry_run {
        write!(out, "; nothing was changed.")?;
    }
    writeln!(out)?;
    Ok(ExitCode::SUCCESS)
}

/// A refusal to store files that look like secrets in plaintext, with what
/// to do (exit 4); any other error as it is.
pub fn refused_secrets(e: sgard_garden::Error) -> anyhow::Error {
    match e {
        sgard_garden::Error::LooksSecret { .. } => crate::exit::Fail::conflict(format!(
            "{e}; `sgard add --encrypt PATH` stores a secret encrypted (`sgard encrypt init` \
             sets encryption up), `sgard add --plaintext PATH` stores it as it is, and \
             `sgard exclude PATH` keeps it out"
        )),
        other => other.into(),
    }
}
