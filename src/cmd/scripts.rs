//! Running the scripts that are due (after restore, pull and mirror down,
//! and `sgard run-scripts`).

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode};

use anyhow::{Result, anyhow};
use sgard_garden::Garden;
use sgard_garden::scripts::ScriptCheck;

use crate::ui;

/// What to do with the scripts that are due.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Scripts {
    /// Run them.
    Run,
    /// List them.
    List,
    /// Leave them (`--no-scripts`).
    Skip,
}

/// Runs (or lists) the scripts that are due, in path order; returns the
/// paths of those that failed (each then runs again next time).
///
/// # Errors
/// Reading this machine's record of what ran; an interruption.
pub fn run_due(g: &Garden, what: Scripts, out: &mut dyn Write) -> Result<Vec<String>> {
    if what == Scripts::Skip {
        return Ok(Vec::new());
    }
    let mut failed = Vec::new();
    for check in g.scripts_due(false)? {
        let s = match check {
            ScriptCheck::Due(s) => s,
            ScriptCheck::Broken(path, err) => {
                ui::warn(&format!(
                    "{path}: the script cannot run: {}",
                    sgard_garden::error_chain(&err)
                ));
                failed.push(path);
                continue;
            }
        };
        if what == Scripts::List {
            writeln!(
                out,
                "{:<10} {} ({})",
                "would run",
                ui::clean(&s.path),
                s.run
            )?;
            continue;
        }
        writeln!(out, "{:<10} {}", "running", ui::clean(&s.path))?;
        out.flush()?;
        let staged = g.stage_script(&s)?;
        let env = g.env();
        let mut cmd = Command::new(&staged.file);
        cmd.current_dir(&env.home)
            .env("SGARD_REPO", g.root())
            .env("SGARD_HOSTNAME", &env.hostname)
            .env("SGARD_OS", sgard_garden::identity::go_os())
            .env("SGARD_ARCH", sgard_garden::identity::go_arch());
        // The script owns the terminal while it runs (Ctrl-C is its own;
        // this process stops after it if it died of it).
        sgard_store::cancel::hold(true);
        let status = cmd.status();
        sgard_store::cancel::hold(false);
        drop(staged);
        let status = match status {
            Ok(st) => st,
            Err(e) => {
                ui::warn(&format!("{}: the script could not start: {e}", s.path));
                failed.push(s.path.clone());
                continue;
            }
        };
        if status.success() {
            g.script_ran(&s)?;
            continue;
        }
        if status.signal() == Some(signal_hook::consts::SIGINT) {
            sgard_store::cancel::request();
            return Err(anyhow!(sgard_store::Error::Interrupted));
        }
        ui::warn(&format!(
            "{}: the script failed ({status}); it runs again next time",
            s.path
        ));
        failed.push(s.path.clone());
    }
    Ok(failed)
}

/// The error of a command whose scripts failed.
pub fn failed_error(failed: &[String]) -> anyhow::Error {
    anyhow!(
        "{} script(s) failed: {} (the files were restored; the scripts run again next time)",
        failed.len(),
        failed.join(", ")
    )
}

/// `sgard run-scripts [--dry-run]`.
pub fn run(ctx: &super::Ctx, dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let g = ctx.open_for_home()?;
    let what = if dry_run { Scripts::List } else { Scripts::Run };
    if g.scripts_due(false)?.is_empty() {
        writeln!(out, "No scripts are due.")?;
        return Ok(ExitCode::SUCCESS);
    }
    let failed = run_due(&g, what, out)?;
    if !failed.is_empty() {
        return Err(failed_error(&failed));
    }
    Ok(ExitCode::SUCCESS)
}
