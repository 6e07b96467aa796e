//! `sgard info`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use sgard_garden::LockMode;
use sgard_manifest::EntryKind;

use super::{Ctx, list::entry_json, print_json};

fn run(ctx: &Ctx, path: &OsString, json: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open(LockMode::Shared)?;
    let i = g.info(path)?;
    ctx.finish_query(g);
    let e = &i.entry;
    if json {
        print_json(
            out,
            &json!({
                "schema": 1,
                "entry": entry_json(e),
                "status": i.state.as_str(),
                "applies": i.applies,
                "disk_mtime": i.disk_mtime.map(|t| t.to_string()),
                "disk_hash": i.disk_hash.map(|h| h.to_hex()),
                "disk_target": i.disk_target,
                "blob": i.blob_stored.map(|s| if s { "stored" } else { "missing" }),
            }),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let line = |out: &mut dyn Write, k: &str, v: &str| {
        writeln!(out, "{:<12}{}", format!("{k}:"), crate::ui::clean(v))
    };
    line(out, "Path", &e.path)?;
    line(out, "Type", e.type_str())?;
    if let Some(r) = e.run {
        line(out, "Run", r.as_str())?;
    }
    line(out, "Status", i.state.as_str())?;
    if let Some(m) = e.mode {
        line(out, "Mode", &m.to_string())?;
    }
    if e.locked {
        line(out, "Locked", "yes")?;
    }
    if e.encrypted {
        line(out, "Encrypted", "yes")?;
    }
    line(out, "Updated", &e.updated.human())?;
    if let Some(t) = i.disk_mtime {
        line(out, "Disk mtime", &t.human())?;
    }
    match e.kind {
        EntryKind::File => {
            if let Some(h) = e.hash {
                line(out, "Hash", &h.to_hex())?;
            }
            if let Some(h) = i.disk_hash {
                line(out, "Disk hash", &h.to_hex())?;
            }
            if let Some(h) = e.plaintext_hash.as_deref() {
                line(out, "PT hash", &h.to_hex())?;
            }
            if let Some(stored) = i.blob_stored {
                line(out, "Blob", if stored { "stored" } else { "missing" })?;
            }
        }
        EntryKind::Link => {
            line(out, "Target", e.target.as_deref().unwrap_or(""))?;
            if let Some(t) = &i.disk_target {
                line(out, "Disk target", t)?;
            }
        }
        EntryKind::Directory => {}
    }
    if !e.only.is_empty() {
        line(out, "Only", &e.only.join(", "))?;
    }
    if !e.never.is_empty() {
        line(out, "Never", &e.never.join(", "))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard info`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The tracked path
    #[arg(value_name = "PATH", value_parser = crate::cli::path_arg())]
    path: std::ffi::OsString,
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
        run(ctx, &self.path, self.json, out)
    }

    fn answers(&self) -> bool {
        true
    }
}
