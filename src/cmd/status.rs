//! `sgard status`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::{LockMode, State};

use super::Ctx;
use crate::ui;

pub fn run(ctx: &Ctx, exit_code: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let g = ctx.open(LockMode::Shared)?;
    let lines = g.status()?;
    let mut changed = false;
    for l in &lines {
        writeln!(out, "{:<10} {}", l.state.as_str(), l.path)?;
        if l.state == State::Error
            && let Some(d) = &l.detail
        {
            ui::warn(&format!("{}: {d}", l.path));
        }
        changed |= l.state.is_change();
    }
    Ok(if exit_code && changed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
