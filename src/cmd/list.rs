//! `sgard list`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::{Value, json};
use sgard_manifest::{Entry, EntryKind};

use super::Ctx;

fn run(ctx: &Ctx, json: bool, remote: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let remote_manifest;
    let g;
    // Which external owns an entry (the record is the repository's own:
    // a server's list has none).
    let mut externals = sgard_manifest::externals::ExternalLog::default();
    let manifest = if remote {
        remote_manifest = sgard::remote::client::remote_manifest(&ctx.remote_opts()?)?;
        &remote_manifest
    } else {
        g = ctx.open_repository_only()?;
        externals = g.externals()?;
        g.manifest()
    };
    let owner = |path: &str| externals.owner(path).map(|x| x.path.as_str());
    if json {
        // Streamed entry by entry: memory stays flat on huge manifests.
        writeln!(out, "{{\n  \"schema\": 1,\n  \"entries\": [")?;
        for (i, e) in manifest.files.iter().enumerate() {
            let sep = if i + 1 == manifest.files.len() {
                ""
            } else {
                ","
            };
            let mut v = entry_json(e);
            v["external"] = json!(owner(&e.path));
            writeln!(out, "    {}{sep}", serde_json::to_string(&v)?)?;
        }
        writeln!(out, "  ]\n}}")?;
        return Ok(ExitCode::SUCCESS);
    }
    for e in &manifest.files {
        let ext = owner(&e.path)
            .map(|x| format!("\texternal {}", crate::ui::clean(x)))
            .unwrap_or_default();
        match e.kind {
            EntryKind::File => {
                let short = e.hash.map(|h| h.short(8)).unwrap_or_default();
                let kind = if e.template { "tmpl" } else { "file" };
                let secret = if e.encrypted { "\tencrypted" } else { "" };
                let run = e.run.map(|r| format!("\trun {r}")).unwrap_or_default();
                writeln!(
                    out,
                    "{kind:<6} {}\t{short}{secret}{run}{ext}",
                    crate::ui::clean(&e.path)
                )?;
            }
            EntryKind::Link => writeln!(
                out,
                "{:<6} {}\t-> {}{ext}",
                "link",
                crate::ui::clean(&e.path),
                crate::ui::clean(e.target.as_deref().unwrap_or(""))
            )?,
            EntryKind::Directory => {
                writeln!(out, "{:<6} {}{ext}", "dir", crate::ui::clean(&e.path))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The JSON form of a manifest entry (shared by `list` and `info`).
pub fn entry_json(e: &Entry) -> Value {
    json!({
        "path": e.path,
        "type": e.type_str(),
        "run": e.run.map(|r| r.as_str()),
        "hash": e.hash.map(|h| h.to_hex()),
        "plaintext_hash": e.plaintext_hash.as_deref().map(sgard_store::Hash::to_hex),
        "mode": e.mode.map(|m| m.to_string()),
        "target": e.target,
        "updated": e.updated.to_string(),
        "locked": e.locked,
        "encrypted": e.encrypted,
        "only": e.only,
        "never": e.never,
    })
}

/// The arguments of `sgard list`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print one JSON document
    #[arg(long)]
    json: bool,
    /// List the sync server's entries instead [default server: SGARD_REMOTE, then <repo>/remote.yaml]
    #[arg(short = 'r', long, value_name = "HOST:PORT", num_args = 0..=1, default_missing_value = "")]
    remote: Option<String>,
    #[command(flatten)]
    net: crate::cli::NetArgs,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        super::buffered(out, |o| run(ctx, self.json, ctx.net.remote.is_some(), o))
    }

    fn answers(&self) -> bool {
        true
    }

    fn net(&self) -> super::Net {
        super::Net::of(self.remote.as_ref(), Some(&self.net))
    }
}
