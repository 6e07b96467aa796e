//! `sgard identity`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use sgard_garden::identity;

use super::{Ctx, print_json};

pub fn run(ctx: &Ctx, json: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let g = ctx.open_repository_only()?;
    let labels = g.labels();
    if json {
        print_json(
            out,
            &json!({
                "schema": 1,
                "labels": labels,
                "hostname": identity::short_hostname(&g.env().hostname),
                "os": identity::go_os(),
                "arch": identity::go_arch(),
                "tags": g.tags()?,
            }),
        )?;
    } else {
        for l in labels {
            writeln!(out, "{l}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
