//! `sgard verify`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::{LockMode, VerifyState};

use super::Ctx;
use crate::exit::Fail;

pub fn run(ctx: &Ctx, out: &mut dyn Write) -> Result<ExitCode> {
    let g = ctx.open(LockMode::Shared)?;
    let lines = g.verify()?;
    let mut bad = 0;
    for l in &lines {
        writeln!(out, "{:<10} {}", l.state.as_str(), l.path)?;
        if l.state != VerifyState::Ok {
            bad += 1;
        }
    }
    if bad > 0 {
        out.flush()?;
        return Err(Fail::integrity(format!(
            "verification failed: {bad} entr{} with a corrupt or missing blob",
            if bad == 1 { "y" } else { "ies" }
        )));
    }
    Ok(ExitCode::SUCCESS)
}
