//! `sgard show`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use sgard_garden::LockMode;

use super::{Ctx, log::record_json, print_json};

fn run(ctx: &Ctx, id: &str, json: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open(LockMode::Shared)?;
    let (rec, changes) = g.show(id)?;
    let purges = super::log::purge_log(&g);
    ctx.finish_query(g);
    if json {
        let ch: Vec<_> = changes
            .iter()
            .map(|c| json!({"path": c.path, "change": c.what, "detail": c.detail}))
            .collect();
        print_json(
            out,
            &json!({"schema": 1, "snapshot": record_json(&rec), "changes": ch,
                    "purged": super::log::purged_json(&purges, &rec)}),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let c = ctx.colour;
    writeln!(
        out,
        "snapshot {}",
        crate::ui::paint(c, crate::ui::Role::Id, &rec.id.to_hex())
    )?;
    if let Some(p) = rec.parent {
        writeln!(out, "parent   {}", p.to_hex())?;
    }
    writeln!(out, "time     {}", rec.time.human())?;
    writeln!(out, "host     {}", crate::ui::clean(&rec.host))?;
    writeln!(out, "reason   {}", crate::ui::clean(rec.reason.as_str()))?;
    if let Some(m) = &rec.message {
        writeln!(out, "message  {}", crate::ui::clean(m))?;
    }
    for line in super::log::purged_lines(&purges, &rec) {
        writeln!(out, "{line}")?;
    }
    writeln!(out)?;
    if changes.is_empty() {
        writeln!(out, "No changes against its parent.")?;
    }
    for c in &changes {
        match &c.detail {
            Some(d) => writeln!(
                out,
                "{} {} ({})",
                crate::ui::word(ctx.colour, c.what, 10),
                crate::ui::clean(&c.path),
                crate::ui::clean(d)
            )?,
            None => writeln!(
                out,
                "{} {}",
                crate::ui::word(ctx.colour, c.what, 10),
                crate::ui::clean(&c.path)
            )?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard show`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The snapshot (an id prefix, @ or @~N)
    #[arg(value_name = "ID")]
    id: String,
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
        run(ctx, &self.id, self.json, out)
    }

    fn answers(&self) -> bool {
        true
    }

    fn needs_history(&self) -> bool {
        true
    }
}
