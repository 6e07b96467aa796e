//! `sgard restore`

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use sgard_garden::{RestoreAction, RestoreOptions, RestoreReport};

use super::Ctx;
use super::scripts::{self, Scripts};
use crate::exit::Fail;
use crate::ui::{StdinPrompt, clean};

/// The flags of `restore`.
pub struct Flags {
    pub force: bool,
    pub dry_run: bool,
    pub no_scripts: bool,
    pub refresh: bool,
}

fn run(
    ctx: &Ctx,
    paths: &[OsString],
    flags: Flags,
    at: Option<&str>,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let Flags {
        force,
        dry_run,
        no_scripts,
        refresh,
    } = flags;
    let mut g = ctx.open_for_home(dry_run)?;
    if refresh {
        g.refresh_secrets();
    }
    if no_scripts {
        g.forbid_template_commands();
    }
    let mut prompt = StdinPrompt::new();
    let opts = RestoreOptions { force, dry_run };
    let report = match at {
        Some(at) => g.restore_at(at, paths, opts, &mut prompt)?,
        None => g.restore(paths, opts, &mut prompt)?,
    };
    print_actions(ctx.colour, &report, dry_run, out)?;
    // A restore of an older snapshot runs no scripts: they run for the head.
    let scripts = match (no_scripts || at.is_some(), dry_run) {
        (true, _) => Scripts::Skip,
        (false, true) => Scripts::List,
        (false, false) => Scripts::Run,
    };
    // Run with the repository closed: a script may run sgard.
    let plan = scripts::plan(&mut g, scripts)?;
    ctx.finish(g)?;
    let failed = scripts::run_plan(plan, out)?;
    scripts::end(finish(&report, dry_run, out), &failed)
}

/// The end of a restore-like command: success (with a summary that counts
/// what was kept at the user's answer), or the error naming what failed
/// (exit 1, or 3 for integrity failures) or what was left as it is for
/// want of an answer (exit 4).
pub fn finish(report: &RestoreReport, dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let refused = report.refused();
    if report.failures.is_empty() && refused.is_empty() {
        let count =
            |f: fn(&RestoreAction) -> bool| report.actions.iter().filter(|(_, a)| f(a)).count();
        let changed = count(RestoreAction::changes_disk);
        let kept = count(|a| *a == RestoreAction::Declined);
        match (dry_run, changed, kept) {
            (true, _, _) => writeln!(out, "Dry run: nothing was changed.")?,
            (false, _, 1..) => writeln!(
                out,
                "Restored {changed}, kept {kept} as {} here.",
                if kept == 1 { "it is" } else { "they are" }
            )?,
            (false, 1.., 0) => writeln!(out, "Restore complete.")?,
            (false, 0, 0) => writeln!(out, "Nothing to restore: every entry is up to date here.")?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    if report.failures.is_empty() {
        let n = refused.len();
        return Err(Fail::conflict(format!(
            "{} differ{} here and {} left as {}: {}; answer the question at a \
             terminal, or settle {} with `sgard restore -f PATH` (take the repository's \
             version), `sgard add PATH` (keep this one) or `sgard merge PATH`",
            crate::ui::count(n as u64, "entry", "entries"),
            if n == 1 { "s" } else { "" },
            if n == 1 { "was" } else { "were" },
            if n == 1 { "it is" } else { "they are" },
            refused.join(", "),
            if n == 1 { "it" } else { "each" },
        )));
    }
    let mut msg = format!(
        "{} could not be restored:",
        crate::ui::count(report.failures.len() as u64, "entry", "entries")
    );
    for (path, err) in &report.failures {
        let _ = write!(msg, "\n  {path}: {}", chain(err));
    }
    if report.has_integrity_failure() {
        Err(Fail::integrity(msg))
    } else {
        Err(anyhow!(msg))
    }
}

/// One line per entry that restore changed, declined or failed.
pub fn print_actions(
    colour: bool,
    report: &RestoreReport,
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<()> {
    // One write per screenful rather than per line (stdout writes each line
    // on its own: 10,000 system calls for a restore into an empty home);
    // flushed before anything goes to stderr, so the two stay in order.
    let mut out = std::io::BufWriter::with_capacity(32 << 10, out);
    for (path, action) in &report.actions {
        match action {
            RestoreAction::Refused(why) => {
                let w = crate::ui::word(colour, "refused", 10);
                writeln!(out, "{w} {} ({})", clean(path), clean(why))?;
                continue;
            }
            RestoreAction::WouldAsk(why) => {
                let w = crate::ui::word(colour, "ask", 10);
                writeln!(out, "{w} {} ({})", clean(path), clean(why))?;
                continue;
            }
            RestoreAction::Skipped(why) => {
                out.flush()?;
                crate::ui::warn(&format!("{}: {}", clean(path), clean(why)));
                continue;
            }
            _ => {}
        }
        let word = match (action, dry_run) {
            (RestoreAction::Created, false) => "created",
            (RestoreAction::Created, true) => "create",
            (RestoreAction::Overwritten, false) => "restored",
            (RestoreAction::Overwritten, true) => "overwrite",
            (RestoreAction::ModeFixed, false) => "mode",
            (RestoreAction::ModeFixed, true) => "fix mode",
            (RestoreAction::Deleted, false) => "deleted",
            (RestoreAction::Deleted, true) => "delete",
            (RestoreAction::Conflict(_), _) => "conflict",
            (RestoreAction::Declined, _) => "kept",
            (RestoreAction::Failed(_), _) => "failed",
            (
                RestoreAction::UpToDate
                | RestoreAction::NotTargeted
                | RestoreAction::Refused(_)
                | RestoreAction::WouldAsk(_)
                | RestoreAction::Skipped(_),
                _,
            ) => continue,
        };
        writeln!(out, "{} {}", crate::ui::word(colour, word, 10), clean(path))?;
    }
    out.flush()?;
    // What stood in for symlinks Windows refused, once each.
    for (path, what) in &report.notes {
        crate::ui::warn(&format!("{}: {}", clean(path), clean(what)));
    }
    Ok(())
}

/// An error and its causes on one line.
pub fn chain(e: &dyn std::error::Error) -> String {
    sgard_garden::error_chain(e)
}

/// The arguments of `sgard restore`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Entries (or folders of entries) to restore [default: all]
    #[arg(value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Overwrite without asking
    #[arg(short, long)]
    force: bool,
    /// Show what would change; change nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
    /// Restore from this snapshot (an id prefix, @ or @~N) instead of the head
    #[arg(long, value_name = "ID")]
    at: Option<String>,
    /// Do not run the scripts that are due
    #[arg(long)]
    no_scripts: bool,
    /// Render templates that read a password manager (asking it) even where the file is as sgard last wrote it, to bring in changed secrets
    #[arg(long)]
    refresh: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(
            ctx,
            &self.paths,
            Flags {
                force: self.force,
                dry_run: self.dry_run,
                no_scripts: self.no_scripts,
                refresh: self.refresh,
            },
            self.at.as_deref(),
            out,
        )
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }

    fn needs_history(&self) -> bool {
        self.at.is_some()
    }
}
