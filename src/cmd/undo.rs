//! `sgard undo`

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, anyhow};

use super::{Ctx, restore};
use crate::exit::{CONFLICT, Fail};

pub fn run(ctx: &Ctx, dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open_for_home()?;
    let r = g.undo(dry_run)?;
    writeln!(out, "Undoing {}", r.undone)?;
    restore::print_actions(ctx.colour, &r.restore, dry_run, out)?;
    if !r.restore.failures.is_empty() {
        let mut msg = format!(
            "{} path(s) could not be put back:",
            r.restore.failures.len()
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
    writeln!(
        out,
        "{}",
        if dry_run {
            "Dry run: nothing was changed."
        } else {
            "Undo complete."
        }
    )?;
    Ok(ExitCode::SUCCESS)
}
