//! `sgard undo`

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use sgard_garden::{Prompt, UndoSummary};

use super::{Ctx, restore};
use crate::exit::{CONFLICT, Fail};
use crate::ui;

/// How many paths the summary lists before it only counts the rest.
const LISTED: usize = 20;

/// Whether `undo` may ask: stdin is a terminal. The one place it decides,
/// so a pseudo-terminal is a terminal and a pipe never is.
pub fn asks() -> bool {
    std::io::stdin().is_terminal()
}

fn run(ctx: &Ctx, dry_run: bool, yes: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open_for_home(dry_run)?;
    let s = g.undo_summary()?;
    let mut text = summary(&s);
    if let Some((what, when)) = &s.latest_changed_nothing {
        text.push_str(&format!(
            "\nThe latest {} ({}) changed nothing; the most recent one that changed files \
             was {} at {}.",
            ui::clean(what),
            when.human(),
            ui::clean(&s.operation),
            s.time.human()
        ));
    }
    // Reaching past an operation that changed nothing is asked about even
    // without a terminal (an answer on stdin, or -y); otherwise a script
    // (no terminal) is not asked.
    let ask = !dry_run && !yes && (s.latest_changed_nothing.is_some() || asks());
    if ask {
        // Part of the question: shown with it, even with -q.
        let mut prompt = ui::StdinPrompt::new();
        out.flush()?;
        prompt.show(&text);
        if !prompt.confirm("Reverse it?") {
            return Err(Fail::conflict(
                "not confirmed; nothing was undone (`sgard undo -y` reverses it without asking)",
            ));
        }
    } else {
        writeln!(out, "{text}")?;
    }
    let r = g.undo(dry_run)?;
    restore::print_actions(ctx.colour, &r.restore, dry_run, out)?;
    if !r.restore.failures.is_empty() {
        let mut msg = format!(
            "{} could not be put back:",
            ui::counts(r.restore.failures.len() as u64, "path")
        );
        for (p, e) in &r.restore.failures {
            let _ = write!(msg, "\n  {p}: {}", restore::chain(e));
        }
        return Err(if r.restore.has_integrity_failure() {
            Fail::integrity(msg)
        } else {
            anyhow!(msg)
        });
    }
    if r.restore.has_conflicts() {
        out.flush()?;
        return Err(anyhow::Error::new(Fail {
            code: CONFLICT,
            message: "some paths changed after that operation and were left as they are \
                      (listed as conflict)"
                .into(),
        }));
    }
    let changed = r.restore.actions.iter().any(|(_, a)| a.changes_disk());
    writeln!(
        out,
        "{}",
        match (dry_run, changed) {
            (true, _) => "Dry run: nothing was changed.",
            (false, true) => "Undo complete.",
            // A record whose operation never reached the disk (cut off
            // by a crash right after recording).
            (false, false) =>
                "Nothing to undo: every path already holds what it held before that operation.",
        }
    )?;
    ctx.finish(g)?;
    Ok(ExitCode::SUCCESS)
}

/// `Undo the restore --at 3f2a… of 2026-03-23 12:00:00 UTC on this
/// machine: 2 paths: ~/a, ~/b` (the paths beyond [`LISTED`] counted).
fn summary(s: &UndoSummary) -> String {
    let n = s.paths.len();
    let mut listed: Vec<String> = s
        .paths
        .iter()
        .take(LISTED)
        .map(|p| ui::clean(p).into_owned())
        .collect();
    if n > LISTED {
        listed.push(format!("and {} more", n - LISTED));
    }
    format!(
        "Undo the {} of {} on this machine: {n} path{}: {}",
        ui::clean(&s.operation),
        s.time.human(),
        if n == 1 { "" } else { "s" },
        listed.join(", ")
    )
}

/// The arguments of `sgard undo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Show what would change; change nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
    /// Do not ask: reverse it
    #[arg(short = 'y', long)]
    yes: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, self.dry_run, self.yes, out)
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }

    fn needs_history(&self) -> bool {
        true
    }
}
