//! `sgard edit`

use std::ffi::OsString;
use std::io::Write;
use std::process::{Command, ExitCode};

use anyhow::{Context as _, Result};
use sgard_garden::{EditOutcome, LockMode};

use super::Ctx;
use crate::ui;
use sgard::context;

/// Edits each path in turn: no lock is held while the editor runs.
pub fn run(ctx: &Ctx, paths: &[OsString], no_apply: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let editor = context::editor();
    let mut failed = 0;
    for p in paths {
        let session = ctx.open(LockMode::Shared)?.edit_begin(p)?;
        let path = session.path.clone();
        // `sh -c 'EDITOR "$@"' sh FILE`: the editor may carry arguments
        // (`code --wait`), and the file name is never parsed by the shell.
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("{editor} \"$@\""))
            .arg("sh")
            .arg(session.file());
        out.flush()?;
        sgard_store::cancel::hold(true);
        let status = cmd.status();
        sgard_store::cancel::hold(false);
        let status = status.with_context(|| format!("running the editor `{editor}`"))?;
        if !status.success() {
            ui::warn(&format!(
                "{path}: the editor `{editor}` exited with {status}; nothing was changed"
            ));
            failed += 1;
            continue;
        }
        let mut g = ctx.open(LockMode::Exclusive)?;
        match g.edit_finish(&session, !no_apply)? {
            EditOutcome::Unchanged => writeln!(out, "unchanged  {}", ui::clean(&path))?,
            EditOutcome::Stored { applied: true } => {
                writeln!(out, "stored     {}", ui::clean(&path))?;
            }
            EditOutcome::Stored { applied: false } => writeln!(
                out,
                "stored     {} (not applied: `sgard restore {}` writes it)",
                ui::clean(&path),
                ui::clean(&path)
            )?,
        }
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
