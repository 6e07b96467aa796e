//! `sgard edit`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use sgard_garden::{Access, EditOutcome, LockMode};

use super::Ctx;
use crate::exit::Fail;
use crate::ui;
use sgard::context;

/// Edits each path in turn: no lock is held while the editor runs.
fn run(ctx: &Ctx, paths: &[OsString], no_apply: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let editor = context::editor();
    let mut failed = 0;
    let mut conflicts = 0;
    for p in paths {
        let (session, pass) = {
            let mut g = ctx.open(LockMode::Shared)?;
            let begun = (
                g.edit_begin(p)?,
                (g.given_passphrase(), g.given_key_passphrase()),
            );
            ctx.finish_query(g);
            begun
        };
        let path = session.path.clone();
        // The editor may carry arguments (`code --wait`), and the file name
        // is never parsed by the shell.
        let mut cmd = context::editor_command(&editor, session.file());
        out.flush()?;
        sgard_store::cancel::hold(true);
        let status = cmd.status();
        sgard_store::cancel::hold(false);
        let status = status.with_context(|| format!("running the editor `{editor}`"))?;
        // Told to end meanwhile: nothing is stored, the copy goes.
        sgard_store::cancel::check()?;
        if !status.success() {
            ui::error_line(&format!(
                "{path}: the editor `{editor}` exited with {status}; nothing was changed"
            ));
            failed += 1;
            continue;
        }
        let mut opts = ctx.options(Access::Write);
        let (pass, key_pass) = pass;
        if let Some(pw) = pass {
            // Asked once, at the start of this edit.
            opts.passphrase = Some(Box::new(move || Ok(pw.clone())));
        }
        if let Some((key, pw)) = key_pass {
            // So is an SSH key's passphrase.
            opts.key_passphrase = Some(Box::new(move |path| {
                if path == key {
                    Ok(pw.clone())
                } else {
                    context::key_passphrase(path)
                }
            }));
        }
        let mut g = ctx.open_with(opts)?;
        let outcome = match g.edit_finish(&session, !no_apply) {
            Ok(o) => {
                ctx.finish(g)?;
                o
            }
            Err(e @ sgard_garden::Error::Conflict(_)) => {
                // Nothing was stored: the edit is kept for the user.
                let msg = sgard_garden::error_chain(&e);
                let kept = session.keep();
                ui::error_line(&match kept {
                    Some(f) => format!("{msg}; your edit is kept in {}", f.display()),
                    None => msg,
                });
                conflicts += 1;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        match outcome {
            EditOutcome::StoredDiskKept => writeln!(
                out,
                "stored     {} (not applied: the file on disk has changes of its own; \
                 `sgard diff {}` shows them, `sgard restore -f {}` replaces them)",
                ui::clean(&path),
                ui::clean(&path),
                ui::clean(&path)
            )?,
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
    if conflicts > 0 {
        return Err(Fail::conflict(format!(
            "{} not stored: the entry changed in the repository meanwhile",
            crate::ui::counts(conflicts as u64, "edit")
        )));
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The arguments of `sgard edit`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The tracked files
    #[arg(required = true, value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Store the new content without writing the file on disk
    #[arg(long)]
    no_apply: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, &self.paths, self.no_apply, out)
    }
}
