//! `sgard identity`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use sgard_garden::identity;

use super::{Ctx, print_json};

fn run(ctx: &Ctx, json: bool, out: &mut dyn Write) -> Result<ExitCode> {
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
    ctx.finish_query(g);
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard identity`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print one JSON document
    #[arg(long)]
    json: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, self.json, out)
    }

    fn answers(&self) -> bool {
        true
    }
}
