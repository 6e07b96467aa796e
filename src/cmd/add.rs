//! `sgard add`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::{AddOptions, AddOutcome};
use sgard_manifest::Run;

use super::Ctx;
use crate::ui;

fn run(ctx: &Ctx, args: &Args, out: &mut dyn Write) -> Result<ExitCode> {
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
        within_external: false,
    };
    let report = g.add(&args.paths, &opts).map_err(refused_secrets)?;
    for (path, why) in &report.skipped {
        ui::warn(&format!("skipped {path}: {}", ui::why(why)));
    }
    for (path, why) in &report.notes {
        ui::warn(&format!("{path}: {}", ui::why(why)));
    }
    for note in &report.links {
        ui::note(&ui::why(note));
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
    ctx.finish(g)?;
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

/// The arguments of `sgard add`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Files, symlinks or folders to track
    #[arg(required = true, value_name = "PATH", value_parser = crate::cli::path_arg())]
    pub paths: Vec<std::ffi::OsString>,
    /// Track folders themselves (their mode), not their contents
    #[arg(long)]
    pub dir: bool,
    /// Lock the entries: the repository's version always wins
    #[arg(long)]
    pub lock: bool,
    /// Apply only on machines with one of these labels
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LABEL,...",
        conflicts_with = "never"
    )]
    pub only: Vec<String>,
    /// Never apply on machines with one of these labels
    #[arg(long, value_delimiter = ',', value_name = "LABEL,...")]
    pub never: Vec<String>,
    /// Encrypt the files (also turns tracked plain files into encrypted ones)
    #[arg(long, conflicts_with = "no_encrypt")]
    pub encrypt: bool,
    /// Store the files in plaintext, also those that look like secrets
    /// (turns encrypted entries into plain ones)
    #[arg(long, visible_alias = "plaintext")]
    pub no_encrypt: bool,
    /// Track the files as templates (Jinja): what they hold now is the
    /// source; restore writes its rendering for each machine
    #[arg(long)]
    pub template: bool,
    /// Mark the files as scripts run after restore, pull and mirror down:
    /// once per content, or whenever the content changes
    #[arg(long, value_name = "WHEN", value_parser = ["once", "onchange"])]
    pub run: Option<String>,
    /// Follow symlinks: one to a folder is walked as that folder (its files
    /// tracked under the link's path); one to a file is tracked with the
    /// file it points to
    #[arg(long)]
    pub follow: bool,
    /// Show what would be tracked or refreshed; store nothing
    #[arg(short = 'n', long)]
    pub dry_run: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, &self, out)
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }
}
