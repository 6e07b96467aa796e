//! `sgard render` and `sgard data`

use std::ffi::OsStr;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use sgard_garden::LockMode;

use super::{Ctx, print_json};

/// Prints a template's rendering for this machine, byte for byte.
fn run(ctx: &Ctx, path: &OsStr, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open(LockMode::Shared)?;
    let e = g.entry_at(path)?.clone();
    let tilde = e.path.clone();
    if !e.template {
        bail!("{tilde} is not a template (`sgard add --template {tilde}` makes it one)");
    }
    let text = g.rendering(&e).with_context(|| tilde.clone())?;
    ctx.finish_query(g);
    out.write_all(&text).context("writing the rendering")?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the merged template data: YAML, or JSON with `--json`.
fn data(ctx: &Ctx, as_json: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let g = ctx.open(LockMode::Shared)?;
    let data = g.template_data()?;
    if as_json {
        print_json(
            out,
            &serde_json::json!({
                "schema": 1,
                "data": data,
                "sources": {
                    "repository": g.data_path().display().to_string(),
                    "machine": g.local_data_path().map(|p| p.display().to_string()),
                },
            }),
        )?;
    } else {
        let text = serde_saphyr::to_string(&data).context("writing the data as YAML")?;
        out.write_all(text.as_bytes())?;
        if !text.ends_with('\n') {
            writeln!(out)?;
        }
    }
    ctx.finish_query(g);
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard render`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The tracked template
    #[arg(value_name = "PATH", value_parser = crate::cli::path_arg())]
    path: std::ffi::OsString,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, &self.path, out)
    }

    fn answers(&self) -> bool {
        true
    }
}

/// The arguments of `sgard data`.
#[derive(clap::Args, Debug)]
pub struct DataArgs {
    /// Print one JSON document
    #[arg(long)]
    json: bool,
}

impl super::Run for DataArgs {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        data(ctx, self.json, out)
    }

    fn answers(&self) -> bool {
        true
    }
}
