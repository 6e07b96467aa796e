//! `sgard purge`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::{Prompt, PurgeOptions, PurgeReport};

use super::Ctx;
use crate::exit::Fail;
use crate::ui::{self, StdinPrompt, bytes, counts};

fn run(ctx: &Ctx, a: &Args, out: &mut dyn Write) -> Result<ExitCode> {
    let args: Vec<&std::ffi::OsStr> = a.paths.iter().map(OsString::as_os_str).collect();
    let opts = PurgeOptions {
        keep_current: a.keep_current,
        dry_run: true,
    };
    let mut g = ctx.open_to_change(a.dry_run)?;
    let plan = g.purge(&args, opts).map_err(refused)?;
    if plan.versions == 0 {
        writeln!(
            out,
            "Nothing to purge: the repository holds no {}version of {}.",
            if a.keep_current { "older " } else { "" },
            names(&a.paths)
        )?;
        if a.dry_run {
            ctx.finish_query(g);
            return Ok(ExitCode::SUCCESS);
        }
        // What an interrupted purge left unreferenced goes now.
        let r = g.purge(
            &args,
            PurgeOptions {
                dry_run: false,
                ..opts
            },
        )?;
        let s = &r.swept;
        let n = s.blobs + s.local_blobs + s.chunks.lists + s.chunks.chunks;
        if n > 0 {
            writeln!(
                out,
                "Deleted {} nothing references any more ({}).",
                counts(n, "stored file"),
                bytes(s.blob_bytes + s.local_bytes + s.chunks.bytes)
            )?;
        }
        ctx.finish(g)?;
        return Ok(ExitCode::SUCCESS);
    }
    print_plan(&plan, a.keep_current, out)?;
    if a.dry_run {
        writeln!(out, "Dry run: nothing was changed.")?;
        ctx.finish_query(g);
        return Ok(ExitCode::SUCCESS);
    }
    if !a.yes {
        out.flush()?;
        let mut prompt = StdinPrompt::new();
        if !prompt.confirm("Purge them? This cannot be undone") {
            return Err(Fail::conflict(
                "nothing was purged (answer yes, or give -y to purge without asking)",
            ));
        }
    }
    let r = g
        .purge(
            &args,
            PurgeOptions {
                dry_run: false,
                ..opts
            },
        )
        .map_err(refused)?;
    for p in &r.untracked {
        writeln!(out, "{:<10} {}", "untracked", ui::clean(p))?;
    }
    let s = &r.swept;
    writeln!(
        out,
        "Purged {} from {}; deleted {} and {} ({}).",
        counts(r.versions as u64, "stored version"),
        counts(r.snapshots as u64, "snapshot"),
        counts(s.blobs + s.local_blobs, "blob"),
        counts(s.chunks.lists + s.chunks.chunks, "chunk file"),
        bytes(s.blob_bytes + s.local_bytes + s.chunks.bytes),
    )?;
    ctx.finish(g)?;
    ui::note(
        "the next `sgard push` carries the purge to the sync server, and the other \
         machines apply it at their next pull; a git history already pushed elsewhere, and \
         copies made outside sgard, keep what they have",
    );
    Ok(ExitCode::SUCCESS)
}

fn names(paths: &[OsString]) -> String {
    paths
        .iter()
        .map(|p| ui::clean(&p.to_string_lossy()).into_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_plan(p: &PurgeReport, keep_current: bool, out: &mut dyn Write) -> Result<()> {
    for (path, n) in &p.paths {
        writeln!(
            out,
            "{:<10} {} ({})",
            "purge",
            ui::clean(path),
            counts(
                *n as u64,
                if keep_current {
                    "older version"
                } else {
                    "version"
                }
            )
        )?;
    }
    writeln!(
        out,
        "{} in {} would go; those snapshots are rewritten with them marked purged.",
        counts(p.versions as u64, "stored version"),
        counts(p.snapshots as u64, "snapshot"),
    )?;
    Ok(())
}

/// A refusal (a content also stored under a path not named) exits 4.
fn refused(e: sgard_garden::Error) -> anyhow::Error {
    match e {
        sgard_garden::Error::Conflict(m) => Fail::conflict(m),
        e => e.into(),
    }
}

/// The arguments of `sgard purge`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The paths whose stored versions go (a folder: everything under it)
    #[arg(required = true, value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<OsString>,
    /// Keep each path's current version (a file encrypted after it leaked): only older versions go
    #[arg(long)]
    keep_current: bool,
    /// Purge without asking
    #[arg(short = 'y', long)]
    yes: bool,
    /// Say what would go; change nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
}

impl super::Run for Args {
    fn run(self, ctx: &super::Ctx, out: &mut dyn std::io::Write) -> Result<ExitCode> {
        run(ctx, &self, out)
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }

    fn needs_history(&self) -> bool {
        true
    }
}
