//! `sgard status`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use sgard_garden::{Access, Options, State};

use super::{Ctx, print_json};
use crate::ui;

fn run(
    ctx: &Ctx,
    paths: &[OsString],
    exit_code: bool,
    json: bool,
    refresh: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    use sgard_garden::watch::{Form, Used};
    let form = (!json).then_some(Form { colour: ctx.colour });
    // Nothing changed since the last status (the watcher says so): its
    // lines stand, and the repository is not even opened.
    if paths.is_empty()
        && !refresh
        && let Some(kept) = sgard_garden::watch::cached_status(&ctx.repo, &ctx.env, form, &ui::note)
    {
        if let Some((text, changed)) = kept.text {
            // What the last status printed, printed as it was.
            text.write_to(out)?;
            return Ok(if exit_code && changed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            });
        }
        let watch = json!({"state": "unchanged"});
        return show(ctx, &kept.lines, &kept.secrets, watch, exit_code, json, out);
    }
    let whole = paths.is_empty() && !refresh;
    // Noted before anything is read: what the lines will rest on.
    let before = whole
        .then(|| sgard_garden::watch::before_status(&ctx.repo, &ctx.env))
        .flatten();
    let said = ui::said();
    // While the index is read, the store's folders are looked at.
    let mut g = ctx.open_with(Options {
        presence_ahead: true,
        ..ctx.options(Access::Read)
    })?;
    if refresh {
        g.refresh_secrets();
    }
    let lines = g.status_of_args(paths)?;
    let secrets: Vec<(String, String)> = g
        .plaintext_secrets(lines.iter().map(|l| l.path.as_str()))
        .into_iter()
        .map(|(p, s)| (p, s.describe().to_owned()))
        .collect();
    let watch = g.watch_used().map(|u| match u {
        Used::NotRunning => json!({"state": "not-running"}),
        Used::Full(why) => json!({"state": "full", "why": why}),
        Used::Narrowed { skipped } => json!({"state": "narrowed", "skipped": skipped}),
    });
    // Printed only on stdout (no error, no warning, no note while opening
    // either): what was printed can be printed again as it is.
    let silent = secrets.is_empty()
        && ui::said() == said
        && !lines
            .iter()
            .any(|l| l.state == State::Error || l.blob_missing);
    let code = match form {
        Some(form) if whole && silent => {
            let mut text = Vec::new();
            let code = show(
                ctx,
                &lines,
                &secrets,
                serde_json::Value::Null,
                exit_code,
                json,
                &mut text,
            );
            g.keep_status(&lines, &secrets, Some((form, &text)), before);
            out.write_all(&text)?;
            code
        }
        _ => {
            if whole && ui::said() == said {
                g.keep_status(&lines, &secrets, None, before);
            }
            show(
                ctx,
                &lines,
                &secrets,
                watch.unwrap_or_default(),
                exit_code,
                json,
                out,
            )
        }
    };
    ctx.finish_query(g);
    code
}

/// Prints the status `lines` (and warns of the plaintext `secrets`); the
/// exit code they make.
fn show(
    ctx: &Ctx,
    lines: &[sgard_garden::StatusLine],
    secrets: &[(String, String)],
    watch: serde_json::Value,
    exit_code: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let changed = lines.iter().any(|l| l.state.is_change());
    if json {
        let entries: Vec<_> = lines
            .iter()
            .map(|l| json!({"path": l.path, "state": l.state.as_str(), "detail": l.detail}))
            .collect();
        print_json(
            out,
            &json!({"schema": 1, "clean": !changed, "entries": entries, "watch": watch}),
        )?;
        // What made an entry an error goes to stderr too, as without
        // --json: a script that reads only the exit code still sees why.
        out.flush()?;
        for l in lines.iter().filter(|l| l.state == State::Error) {
            if let Some(d) = &l.detail {
                let advice = l.remedy.as_ref().map(ui::remedy).unwrap_or_default();
                ui::error_line(&format!("{}: {d}{advice}", l.path));
            }
        }
    } else {
        // Each state's word, styled once (not once per line).
        let mut words: Vec<(State, String)> = Vec::new();
        for l in lines {
            let word = match words.iter().find(|(s, _)| *s == l.state) {
                Some((_, w)) => w,
                None => {
                    let w = ui::styled(ctx.colour, ui::state_style(l.state), l.state.as_str(), 10);
                    words.push((l.state, w));
                    &words[words.len() - 1].1
                }
            };
            match &l.detail {
                Some(d) if l.state != State::Error => {
                    writeln!(out, "{word} {}  ({})", ui::clean(&l.path), ui::clean(d))?;
                }
                _ => writeln!(out, "{word} {}", ui::clean(&l.path))?,
            }
            if l.state == State::Error
                && let Some(d) = &l.detail
            {
                // Keep the warning after the lines before it.
                out.flush()?;
                let advice = l.remedy.as_ref().map(ui::remedy).unwrap_or_default();
                ui::error_line(&format!("{}: {d}{advice}", l.path));
            }
        }
    }
    if !secrets.is_empty() {
        out.flush()?;
    }
    for (path, what) in secrets {
        ui::warn(&format!(
            "{path} looks like {what} and is stored in plaintext: `sgard add --encrypt {path}` \
             encrypts it"
        ));
    }
    let lacking = lines.iter().filter(|l| l.blob_missing).count();
    if lacking > 0 {
        // Each entry was an error line of its own: what is left to say is
        // where to look, once, and the exit code.
        out.flush()?;
        ui::note(&format!(
            "the repository at {} lacks the content of {} (`sgard verify` lists what is \
             lost; a git clone made with an old .gitignore that left out blobs/ lacks it all)",
            ctx.repo.display(),
            ui::count(lacking as u64, "entry", "entries"),
        ));
        return Ok(ExitCode::from(crate::exit::INTEGRITY));
    }
    if lines.iter().any(|l| l.state == State::Error) {
        // Each was named on stderr already.
        out.flush()?;
        return Ok(ExitCode::from(crate::exit::INTEGRITY));
    }
    Ok(if exit_code && changed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The arguments of `sgard status`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Entries (or folders of entries) to show [default: all]
    #[arg(value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Exit with status 1 when anything is not ok
    #[arg(long)]
    exit_code: bool,
    /// Print one JSON document
    #[arg(long)]
    json: bool,
    /// Render templates that read a password manager (asking it) instead of judging them by what sgard last wrote here
    #[arg(long)]
    refresh: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        super::buffered(out, |o| {
            run(ctx, &self.paths, self.exit_code, self.json, self.refresh, o)
        })
    }

    fn answers(&self) -> bool {
        true
    }
}
