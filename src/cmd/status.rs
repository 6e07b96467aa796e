//! `sgard status`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use sgard_garden::{LockMode, State};

use super::{Ctx, print_json};
use crate::ui;

fn run(
    ctx: &Ctx,
    paths: &[OsString],
    exit_code: bool,
    json: bool,
    refresh: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let mut g = ctx.open(LockMode::Shared)?;
    if refresh {
        g.refresh_secrets();
    }
    let lines = g.status_of_args(paths)?;
    let changed = lines.iter().any(|l| l.state.is_change());
    if json {
        let entries: Vec<_> = lines
            .iter()
            .map(|l| json!({"path": l.path, "state": l.state.as_str(), "detail": l.detail}))
            .collect();
        use sgard_garden::watch::Used;
        let watch = g.watch_used().map(|u| match u {
            Used::NotRunning => json!({"state": "not-running"}),
            Used::Full(why) => json!({"state": "full", "why": why}),
            Used::Narrowed { skipped } => json!({"state": "narrowed", "skipped": skipped}),
        });
        print_json(
            out,
            &json!({"schema": 1, "clean": !changed, "entries": entries, "watch": watch}),
        )?;
        // What made an entry an error goes to stderr too, as without
        // --json: a script that reads only the exit code still sees why.
        out.flush()?;
        for l in lines.iter().filter(|l| l.state == State::Error) {
            if let Some(d) = &l.detail {
                let advice = l.remedy.as_ref().map(ui::remedy).unwrap_or_default();
                ui::error_line(&format!("{}: {d}{advice}", l.path));
            }
        }
    } else {
        for l in &lines {
            let word = ui::styled(ctx.colour, ui::state_style(l.state), l.state.as_str(), 10);
            match &l.detail {
                Some(d) if l.state != State::Error => {
                    writeln!(out, "{word} {}  ({})", ui::clean(&l.path), ui::clean(d))?;
                }
                _ => writeln!(out, "{word} {}", ui::clean(&l.path))?,
            }
            if l.state == State::Error
                && let Some(d) = &l.detail
            {
                // Keep the warning after the lines before it.
                out.flush()?;
                let advice = l.remedy.as_ref().map(ui::remedy).unwrap_or_default();
                ui::error_line(&format!("{}: {d}{advice}", l.path));
            }
        }
    }
    flag_secrets(&g, &lines, out)?;
    ctx.finish_query(g);
    let lacking = lines.iter().filter(|l| l.blob_missing).count();
    if lacking > 0 {
        // Each entry was an error line of its own: what is left to say is
        // where to look, once, and the exit code.
        out.flush()?;
        ui::note(&format!(
            "the repository at {} lacks the content of {} (`sgard verify` lists what is \
             lost; a git clone made with an old .gitignore that left out blobs/ lacks it all)",
            ctx.repo.display(),
            ui::count(lacking as u64, "entry", "entries"),
        ));
        return Ok(ExitCode::from(crate::exit::INTEGRITY));
    }
    if lines.iter().any(|l| l.state == State::Error) {
        // Each was named on stderr already.
        out.flush()?;
        return Ok(ExitCode::from(crate::exit::INTEGRITY));
    }
    Ok(if exit_code && changed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Warns of the entries shown that are stored in plaintext though they
/// look like secrets (private keys, credentials).
fn flag_secrets(
    g: &sgard_garden::Garden,
    lines: &[sgard_garden::StatusLine],
    out: &mut dyn Write,
) -> Result<()> {
    let found = g.plaintext_secrets(lines.iter().map(|l| l.path.as_str()));
    if !found.is_empty() {
        out.flush()?;
    }
    for (path, secret) in found {
        ui::warn(&format!(
            "{path} looks like {} and is stored in plaintext: `sgard add --encrypt {path}` \
             encrypts it",
            secret.describe()
        ));
    }
    Ok(())
}

/// The arguments of `sgard status`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Entries (or folders of entries) to show [default: all]
    #[arg(value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Exit with status 1 when anything is not ok
    #[arg(long)]
    exit_code: bool,
    /// Print one JSON document
    #[arg(long)]
    json: bool,
    /// Render templates that read a password manager (asking it) instead of judging them by what sgard last wrote here
    #[arg(long)]
    refresh: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        super::buffered(out, |o| {
            run(ctx, &self.paths, self.exit_code, self.json, self.refresh, o)
        })
    }

    fn answers(&self) -> bool {
        true
    }
}
