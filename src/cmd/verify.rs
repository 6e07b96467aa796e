//! `sgard verify`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use sgard_garden::{LockMode, VerifyState};

use super::{Ctx, print_json};
use crate::exit::Fail;

pub fn run(ctx: &Ctx, json: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let g = ctx.open(LockMode::Shared)?;
    let lines = g.verify()?;
    let bad = lines.iter().filter(|l| l.state != VerifyState::Ok).count();
    if json {
        let entries: Vec<_> = lines
            .iter()
            .map(|l| json!({"path": l.path, "state": l.state.as_str()}))
            .collect();
        print_json(
            out,
            &json!({"schema": 1, "ok": bad == 0, "entries": entries}),
        )?;
    } else {
        for l in &lines {
            writeln!(out, "{:<10} {}", l.state.as_str(), l.path)?;
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
