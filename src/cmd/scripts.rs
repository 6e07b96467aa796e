//! Running the scripts that are due (after restore, pull and mirror down,
//! and `sgard run-scripts`).

use std::io::Write;
use std::process::{Command, ExitCode};

use anyhow::{Result, anyhow};
use sgard_garden::Garden;
use sgard_garden::scripts::{DueScript, ScriptCheck, StagedScript};

use crate::ui;

/// What to do with the scripts that are due.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Scripts {
    /// Run them.
    Run,
    /// List them.
    List,
    /// Leave them (`--no-scripts`).
    Skip,
}

/// The scripts that are due, each staged for its run with the command
/// that runs it (or the reason it cannot run), drawn up while the
/// repository is open.
pub struct Plan {
    what: Scripts,
    items: Vec<std::result::Result<Ready, (String, String)>>,
    env: Vec<(&'static str, std::ffi::OsString)>,
    home: std::path::PathBuf,
}

/// A script ready to run: what it is, its staged copy, and the command
/// that runs that.
type Ready = (DueScript, StagedScript, Command);

/// Draws up the scripts that are due (none with [`Scripts::Skip`]).
///
/// # Errors
/// Reading this machine's record of what ran.
pub fn plan(g: &mut Garden, what: Scripts) -> Result<Plan> {
    let env = g.env();
    let mut p = Plan {
        what,
        items: Vec::new(),
        env: vec![
            ("SGARD_REPO", g.root().as_os_str().to_owned()),
            ("SGARD_HOSTNAME", env.hostname.clone().into()),
            ("SGARD_OS", sgard_garden::identity::go_os().into()),
            ("SGARD_ARCH", sgard_garden::identity::go_arch().into()),
        ],
        home: env.home.clone(),
    };
    if what == Scripts::Skip {
        return Ok(p);
    }
    for check in g.scripts_due(false)? {
        p.items.push(match check {
            ScriptCheck::Due(s) => {
                let ready = g
                    .stage_script(&s)
                    .map_err(|e| sgard_garden::error_chain(&e))
                    .and_then(|st| Ok((command(&st)?, st)));
                match ready {
                    Ok((cmd, st)) => Ok((s, st, cmd)),
                    Err(why) => Err((s.path.clone(), why)),
                }
            }
            ScriptCheck::Broken(path, err) => Err((path, sgard_garden::error_chain(&err))),
        });
    }
    Ok(p)
}

/// A script that failed, and why (`the script failed (exit status: 3)`).
pub struct Failed {
    path: String,
    why: String,
}

/// Runs (or lists) what [`plan`] drew up, in path order, with no lock
/// held (call it after the repository is closed: a script may run sgard);
/// returns the scripts that failed (each runs again next time), to be
/// reported once, by [`end`].
///
/// # Errors
/// Writing this machine's record of what ran; an interruption.
pub fn run_plan(p: Plan, out: &mut dyn Write) -> Result<Vec<Failed>> {
    let mut failed = Vec::new();
    for item in p.items {
        // Told to end (during the last script, too): the rest waits.
        sgard_store::cancel::check()?;
        let (s, staged, mut cmd) = match item {
            Ok(x) => x,
            Err((path, why)) => {
                failed.push(Failed {
                    path,
                    why: format!("the script cannot run: {why}"),
                });
                continue;
            }
        };
        let colour = ui::out_colour();
        if p.what == Scripts::List {
            writeln!(
                out,
                "{} {} ({})",
                ui::word(colour, "would run", 10),
                ui::clean(&s.path),
                s.run
            )?;
            continue;
        }
        writeln!(
            out,
            "{} {}",
            ui::word(colour, "running", 10),
            ui::clean(&s.path)
        )?;
        out.flush()?;
        cmd.current_dir(&p.home);
        for (k, v) in &p.env {
            cmd.env(k, v);
        }
        // A script gets no passphrase sgard was given.
        for k in sgard_garden::PASSPHRASE_VARS {
            cmd.env_remove(k);
        }
        // The script owns the terminal while it runs (Ctrl-C is its own;
        // this process stops after it if it died of it).
        sgard_store::cancel::hold(true);
        let status = cmd.status();
        sgard_store::cancel::hold(false);
        drop(staged);
        let status = match status {
            Ok(st) => st,
            Err(e) => {
                failed.push(Failed {
                    path: s.path.clone(),
                    why: format!("the script could not start: {e}"),
                });
                continue;
            }
        };
        if status.success() {
            s.record_success()?;
            continue;
        }
        if died_of_ctrl_c(status) {
            sgard_store::cancel::request();
            return Err(anyhow!(sgard_store::Error::Interrupted));
        }
        failed.push(Failed {
            path: s.path.clone(),
            why: format!("the script failed ({status})"),
        });
    }
    Ok(failed)
}

/// The error of a command whose scripts failed: each script and its cause
/// once (`ui::error` makes the text safe to print).
fn failed_error(failed: &[Failed]) -> anyhow::Error {
    match failed {
        [one] => anyhow!("{}: {}; it runs again next time", one.path, one.why),
        _ => {
            let mut msg = format!(
                "{} failed; each runs again next time:",
                ui::counts(failed.len() as u64, "script")
            );
            for f in failed {
                msg.push_str(&format!("\n  {}: {}", f.path, f.why));
            }
            anyhow!(msg)
        }
    }
}

/// The end of a command that ran scripts after its own work ended with
/// `done`: that result, unless scripts failed. Both failing, each is
/// reported (the scripts first, here), and the exit code is the work's.
///
/// # Errors
/// `done`'s error; else the scripts' failure.
pub fn end(done: Result<ExitCode>, failed: &[Failed]) -> Result<ExitCode> {
    if failed.is_empty() {
        return done;
    }
    match done {
        Ok(_) => Err(failed_error(failed)),
        Err(e) => {
            ui::error(&failed_error(failed));
            Err(e)
        }
    }
}

/// `sgard run-scripts [--dry-run]`.
fn run(ctx: &super::Ctx, dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open_for_home(dry_run)?;
    let what = if dry_run { Scripts::List } else { Scripts::Run };
    let p = plan(&mut g, what)?;
    ctx.finish(g)?;
    if p.items.is_empty() {
        writeln!(out, "No scripts are due.")?;
        return Ok(ExitCode::SUCCESS);
    }
    let failed = run_plan(p, out)?;
    end(Ok(ExitCode::SUCCESS), &failed)
}

/// The arguments of `sgard run-scripts`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// List them; run nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, self.dry_run, out)
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }
}

/// The command that runs a staged script: the file itself (its mode and
/// `#!` line say how).
#[cfg(unix)]
#[allow(clippy::unnecessary_wraps, reason = "Windows may refuse")]
fn command(staged: &StagedScript) -> std::result::Result<Command, String> {
    Ok(Command::new(&staged.file))
}

/// Windows: as its extension or `#!` line says
/// ([`sgard_garden::scripts::windows_start`]); the error says why it
/// cannot run.
#[cfg(windows)]
fn command(staged: &StagedScript) -> std::result::Result<Command, String> {
    use sgard_garden::scripts::{Start, WINDOWS_REFUSED};
    let file = &staged.file;
    Ok(match &staged.start {
        // std runs a batch file through the system's `cmd.exe /d /c`,
        // quoting its path as cmd reads it.
        Start::Program | Start::Batch => Command::new(file),
        Start::PowerShell => {
            let mut c = Command::new("powershell.exe");
            c.args([
                "-NoProfile",
                "-NonInteractive",
                "-ExecutionPolicy",
                "Bypass",
                "-File",
            ])
            .arg(file);
            c
        }
        Start::Interpreter { program, args } => {
            let found = sgard::context::find_program(program).ok_or_else(|| {
                format!(
                    "it runs with {program}, which is not on PATH (Git for Windows has sh and \
                     bash)"
                )
            })?;
            let mut c = Command::new(found);
            c.args(args).arg(file);
            c
        }
        Start::Refused => return Err(WINDOWS_REFUSED.to_owned()),
    })
}

/// Whether a child ended because of Ctrl-C (`SIGINT`).
#[cfg(unix)]
fn died_of_ctrl_c(status: std::process::ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(signal_hook::consts::SIGINT)
}

/// Windows: a console process Ctrl-C ended exits with
/// `STATUS_CONTROL_C_EXIT` (0xC000013A).
#[cfg(windows)]
fn died_of_ctrl_c(status: std::process::ExitStatus) -> bool {
    status.code().map(|c| c as u32) == Some(0xC000_013A)
}
