//! `sgard stats`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use sgard_garden::LockMode;

use super::{Ctx, print_json};
use crate::ui::bytes;

fn run(ctx: &Ctx, per_snapshot: bool, as_json: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open(LockMode::Shared)?;
    let s = g.stats(per_snapshot)?;
    ctx.finish_query(g);
    if as_json {
        let snapshots: Vec<_> = s
            .snapshots
            .iter()
            .map(|p| {
                json!({"id": p.record.id.to_hex(), "time": p.record.time.to_string(),
                       "reason": p.record.reason.as_str(), "files": p.files,
                       "bytes": p.bytes, "added_bytes": p.added_bytes})
            })
            .collect();
        let mut doc = json!({
            "schema": 1,
            "tracked": {"files": s.tracked_files, "bytes": s.tracked_bytes,
                        "chunked_files": s.chunked_files},
            "stored": {"blobs": s.blobs.0, "blob_bytes": s.blobs.1,
                       "chunks": s.chunks.0, "chunk_bytes": s.chunks.1,
                       "lists": s.lists.0, "list_bytes": s.lists.1,
                       "bytes": s.stored_bytes()},
            "logical_bytes": s.logical_bytes,
            "dedup_ratio": (s.dedup_ratio() * 100.0).round() / 100.0,
            "prunable_bytes": s.prunable_bytes,
        });
        if per_snapshot {
            doc["snapshots"] = json!(snapshots);
        }
        print_json(out, &doc)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "Tracked files:     {} ({}), {} stored in chunks",
        s.tracked_files,
        bytes(s.tracked_bytes),
        s.chunked_files
    )?;
    writeln!(
        out,
        "Stored:            {} {}, {} {}, {} {}: {} in all",
        crate::ui::counts(s.blobs.0, "blob"),
        bytes(s.blobs.1),
        crate::ui::counts(s.chunks.0, "chunk"),
        bytes(s.chunks.1),
        crate::ui::counts(s.lists.0, "chunk list"),
        bytes(s.lists.1),
        bytes(s.stored_bytes())
    )?;
    writeln!(
        out,
        "Every version whole: {} (dedup ratio {:.2})",
        bytes(s.logical_bytes),
        s.dedup_ratio()
    )?;
    writeln!(out, "Prune would free:  {}", bytes(s.prunable_bytes))?;
    if per_snapshot {
        writeln!(out)?;
        let head = format!(
            "{:<12}  {:<23}  {:<15}  {:>7}  {:>11}  {:>11}",
            "SNAPSHOT", "TIME", "REASON", "FILES", "BYTES", "ADDED"
        );
        let c = ctx.colour;
        writeln!(
            out,
            "{}",
            crate::ui::paint(c, crate::ui::Role::Heading, &head)
        )?;
        for p in &s.snapshots {
            writeln!(
                out,
                "{}  {:<23}  {:<15}  {:>7}  {:>11}  {:>11}",
                crate::ui::paint(
                    c,
                    crate::ui::Role::Id,
                    &format!("{:<12}", p.record.id.short(12))
                ),
                p.record.time.human(),
                p.record.reason.as_str(),
                p.files,
                bytes(p.bytes),
                bytes(p.added_bytes)
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard stats`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Also show what each snapshot costs
    #[arg(long)]
    snapshots: bool,
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
        run(ctx, self.snapshots, self.json, out)
    }

    fn answers(&self) -> bool {
        true
    }
}
