//! `sgard diff`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use sgard_garden::{Diff, LockMode};

use super::{Ctx, print_json};
use crate::exit::{ERROR, INTEGRITY};

/// The flags of `diff`.
pub struct Flags {
    pub at: Option<String>,
    pub exit_code: bool,
    pub stat: bool,
    pub json: bool,
}

fn run(ctx: &Ctx, paths: &[OsString], f: Flags, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open(LockMode::Shared)?;
    let as_ids = |a: &OsString, b: &OsString| match (a.to_str(), b.to_str()) {
        (Some(a), Some(b)) => g.resolve(a).is_ok() && g.resolve(b).is_ok(),
        _ => false,
    };
    let two_ids = paths.len() >= 2 && as_ids(&paths[0], &paths[1]);
    let results = if let Some(at) = &f.at {
        g.diff_at(at, paths)?
    } else if two_ids {
        let (a, b) = (paths[0].to_string_lossy(), paths[1].to_string_lossy());
        g.diff_snapshots(&a, &b, &paths[2..])?
            .into_iter()
            .map(|(p, d)| (p, Ok(d)))
            .collect()
    } else if paths.len() == 1 {
        // One path names one file exactly (a folder still works through diff_many).
        match g.entry_at(&paths[0]).map(|e| e.path.clone()) {
            Ok(tilde) => match g.diff(&paths[0]) {
                Err(err) if err.is_interrupted() => return Err(err.into()),
                r => vec![(tilde, r)],
            },
            // Not an entry: maybe a folder of entries; else say it is not tracked.
            Err(e @ sgard_garden::Error::NotTracked(_)) => match g.diff_many(paths) {
                Err(sgard_garden::Error::NoMatch) => return Err(e.into()),
                other => other?,
            },
            Err(e) => return Err(e.into()),
        }
    } else {
        g.diff_many(paths)?
    };
    ctx.finish_query(g);
    // Each file that could not be diffed is named once, on stderr; the
    // others are shown all the same, and the command fails at the end.
    let mut diffs = Vec::with_capacity(results.len());
    let mut failed = Vec::new();
    for (path, r) in results {
        match r {
            Ok(d) => diffs.push((path, d)),
            Err(e) => {
                let why = sgard_garden::error_chain(&e);
                let line = if why.starts_with(path.as_str()) {
                    why
                } else {
                    format!("{path}: {why}")
                };
                crate::ui::error_line(&line);
                failed.push((path, e));
            }
        }
    }
    let differs = diffs.iter().any(|(_, d)| *d != Diff::Same);
    if f.stat {
        stat(&diffs, &failed, f.json, out)?;
    } else if !differs {
        if failed.is_empty() {
            writeln!(out, "No changes.")?;
        } else if !diffs.is_empty() {
            writeln!(out, "No changes in the other files.")?;
        }
    } else {
        for (_, d) in &diffs {
            match d {
                Diff::Same => {}
                Diff::Text { text, .. } if ctx.colour => {
                    out.write_all(crate::ui::paint_diff(text).as_bytes())?;
                }
                Diff::Text { text, .. } => out.write_all(text.as_bytes())?,
                Diff::Binary { path } => {
                    writeln!(
                        out,
                        "Binary files {path} (stored) and {path} (current) differ"
                    )?;
                }
                Diff::Secret { path } => {
                    writeln!(
                        out,
                        "{path} differs from what sgard last wrote only where its secrets stand \
                         (masked; `sgard status --refresh` asks the password manager)"
                    )?;
                }
            }
        }
    }
    if !failed.is_empty() {
        // An error, not a difference: 1 even with --exit-code, 3 when
        // stored content failed its check.
        out.flush()?;
        return Ok(ExitCode::from(
            if failed.iter().any(|(_, e)| e.is_integrity()) {
                INTEGRITY
            } else {
                ERROR
            },
        ));
    }
    Ok(if f.exit_code && differs {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn stat(
    diffs: &[(String, Diff)],
    failed: &[(String, sgard_garden::Error)],
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let changed: Vec<_> = diffs.iter().filter(|(_, d)| *d != Diff::Same).collect();
    if json {
        let errors: Vec<_> = failed
            .iter()
            .map(|(path, e)| json!({"path": path, "error": sgard_garden::error_chain(e)}))
            .collect();
        let files: Vec<_> = changed
            .iter()
            .map(|(path, d)| match d {
                Diff::Text {
                    insertions,
                    deletions,
                    ..
                } => json!({"path": path, "binary": false, "insertions": insertions, "deletions": deletions}),
                Diff::Secret { .. } => json!({"path": path, "binary": false, "secret": true, "insertions": null, "deletions": null}),
                _ => json!({"path": path, "binary": true, "insertions": null, "deletions": null}),
            })
            .collect();
        let (ins, del) = totals(&changed);
        return print_json(
            out,
            &json!({"schema": 1, "files": files, "files_changed": changed.len(),
                    "insertions": ins, "deletions": del, "errors": errors}),
        );
    }
    let width = changed.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
    for (path, d) in &changed {
        match d {
            Diff::Text {
                insertions,
                deletions,
                ..
            } => writeln!(
                out,
                " {path:<width$} | {:>4} {}{}",
                insertions + deletions,
                "+".repeat((*insertions).min(40)),
                "-".repeat((*deletions).min(40))
            )?,
            Diff::Secret { .. } => writeln!(out, " {path:<width$} | secret (masked)")?,
            _ => writeln!(out, " {path:<width$} | Bin")?,
        }
    }
    let (ins, del) = totals(&changed);
    writeln!(
        out,
        " {} changed, {}(+), {}(-)",
        crate::ui::counts(changed.len() as u64, "file"),
        crate::ui::counts(ins as u64, "insertion"),
        crate::ui::counts(del as u64, "deletion")
    )?;
    Ok(())
}

fn totals(changed: &[&(String, Diff)]) -> (usize, usize) {
    changed.iter().fold((0, 0), |(i, d), (_, x)| match x {
        Diff::Text {
            insertions,
            deletions,
            ..
        } => (i + insertions, d + deletions),
        _ => (i, d),
    })
}

/// The arguments of `sgard diff`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Tracked files or folders [default: every tracked file]
    #[arg(value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Compare this snapshot (an id prefix, @ or @~N) with the disk
    #[arg(long, value_name = "ID")]
    at: Option<String>,
    /// Exit with status 1 when a file differs
    #[arg(long)]
    exit_code: bool,
    /// Only count changed lines per file
    #[arg(long)]
    stat: bool,
    /// Print one JSON document (with --stat)
    #[arg(long, requires = "stat")]
    json: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(
            ctx,
            &self.paths,
            Flags {
                at: self.at,
                exit_code: self.exit_code,
                stat: self.stat,
                json: self.json,
            },
            out,
        )
    }

    fn answers(&self) -> bool {
        true
    }

    fn needs_history(&self) -> bool {
        self.at.is_some()
    }
}
