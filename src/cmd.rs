//! One module per subcommand: parse, call one Garden method, render.

mod add;
mod checkpoint;
mod chunking;
mod completion;
mod diff;
mod doctor;
mod edit;
mod encrypt;
mod exclude;
mod fleet;
mod git;
mod identity;
mod info;
mod init;
mod list;
mod lock;
mod log;
mod man;
mod merge;
mod mirror;
mod prune;
mod pull;
mod push;
mod remote;
mod remove;
mod render;
mod restore;
mod scripts;
mod show;
mod stats;
mod status;
mod tag;
mod target;
mod trust;
mod undo;
mod verify;

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::{Env, Garden, LockMode};

use crate::cli::{Cli, Command};
use crate::ui;
use sgard::context;

/// What every command gets.
pub struct Ctx {
    /// The environment of this run.
    pub env: Env,
    /// The repository folder (absolute).
    pub repo: PathBuf,
    /// Remote flags.
    pub net: Net,
    /// Whether stdout gets colour.
    pub colour: bool,
    /// Whether the command refuses without the history (see
    /// [`needs_history`]).
    pub needs_history: bool,
    /// Whether opening the repository may set up git's merge driver (not
    /// for `doctor`, which changes nothing and reports what is missing).
    pub git_setup: bool,
}

/// The global flags about the sync server.
pub struct Net {
    /// `--remote`.
    pub remote: Option<String>,
    /// `--ssh-key`.
    pub ssh_key: Option<PathBuf>,
    /// `--tls` / `--no-tls`.
    pub tls: Option<bool>,
    /// `--tls-ca`.
    pub tls_ca: Option<PathBuf>,
    /// The timeouts and the blob bound.
    pub timeouts: sgard::remote::client::Timeouts,
    /// `--max-blob-size`.
    pub max_blob: u64,
}

impl Net {
    /// The network flags of a command (`remote`: its `--remote`).
    fn of(remote: Option<&String>, a: Option<&crate::cli::NetArgs>) -> Self {
        let d = crate::cli::NetArgs {
            connect_timeout: 10,
            timeout: 60,
            deadline: 3600,
            max_blob_size: sgard::remote::client::DEFAULT_MAX_BLOB,
            ..crate::cli::NetArgs::default()
        };
        let a = a.unwrap_or(&d);
        let secs = |s: u64| std::time::Duration::from_secs(s.max(1));
        Net {
            remote: remote.cloned(),
            ssh_key: a.ssh_key.clone(),
            tls: if a.tls || a.tls_ca.is_some() {
                Some(true)
            } else if a.no_tls {
                Some(false)
            } else {
                None
            },
            tls_ca: a.tls_ca.clone(),
            timeouts: sgard::remote::client::Timeouts {
                connect: secs(a.connect_timeout),
                idle: secs(a.timeout),
                total: secs(a.deadline),
            },
            max_blob: a.max_blob_size,
        }
    }
}

impl Ctx {
    /// Opens the repository with the lock `mode`, saying so if it must wait.
    pub fn open(&self, mode: LockMode) -> Result<Garden> {
        let g = Garden::open(&self.repo, self.env.clone(), mode, &ui::note).map_err(|e| {
            if matches!(e, sgard_garden::Error::ReadOnly { .. }) {
                let hint = format!(
                    "{e}: this command writes to it; status, diff, list, log, verify and \
                     restore work from it"
                );
                anyhow::Error::new(e).context(hint)
            } else {
                e.into()
            }
        })?;
        // A command that writes the repository also adds what git needs
        // to merge it (`.gitattributes`), when it is under git.
        if mode == LockMode::Exclusive && self.git_setup {
            git::set_up(&self.repo, true);
        }
        self.ready(g)
    }

    /// Opens the repository to change it (exclusively), or with `dry_run`
    /// to say what would change: a shared lock, and nothing written.
    pub fn open_to_change(&self, dry_run: bool) -> Result<Garden> {
        if !dry_run {
            return self.open(LockMode::Exclusive);
        }
        let mut g = self.open(LockMode::Shared)?;
        g.set_dry_run();
        Ok(g)
    }

    /// Opens the repository to read it alone (verify, list, log, identity):
    /// this machine's base and stat cache are neither loaded nor written.
    pub fn open_repository_only(&self) -> Result<Garden> {
        let g = Garden::open_repository_only(&self.repo, self.env.clone(), &ui::note)?;
        self.ready(g)
    }

    /// Opens the repository to change the home folder only (restore, undo,
    /// mirror down, merge), or with `dry_run` to say what would change (no
    /// home lock, nothing written): it may be read-only, and then says so.
    pub fn open_for_home(&self, dry_run: bool) -> Result<Garden> {
        let g = if dry_run {
            Garden::open_for_home_dry_run(&self.repo, self.env.clone(), &ui::note)?
        } else {
            Garden::open_for_home(&self.repo, self.env.clone(), &ui::note)?
        };
        if g.repository_is_read_only() {
            ui::note(&format!(
                "{} is read-only: restoring from it; the safety snapshot (for `sgard \
                 undo`) is kept in this machine's state, as always",
                self.repo.display()
            ));
        }
        self.ready(g)
    }

    fn ready(&self, mut g: Garden) -> Result<Garden> {
        g.set_note_sink(Box::new(ui::note));
        // A git clone gets the merge driver defined on first use.
        if self.git_setup {
            git::set_up(&self.repo, false);
        }
        // A damaged history is the error of a command that needs it, said
        // once, before it starts; for the others, a warning.
        if let Some(e) = g.history_damage() {
            if self.needs_history {
                g.require_history()?;
            }
            // Said once a run, however often the command opens the
            // repository (`edit` opens it twice a file).
            static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                ui::warn(&format!(
                    "the history is damaged (log, show, checkpoint, pull, push, prune, forget, \
                     verify, undo and restore --at refuse until {} is repaired or moved aside; \
                     status, list, diff and restore work): {e}",
                    self.repo
                        .join(sgard_manifest::history::HISTORY_FILE)
                        .display()
                ));
            }
        }
        g.set_process_ends();
        g.set_passphrase_source(Box::new(|| {
            let _bar = ui::progress::pause();
            context::passphrase("Passphrase: ")
        }));
        g.set_passphrase_tries(if context::passphrase_is_typed() { 3 } else { 1 });
        Ok(g)
    }
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    // Colour is decided once, here (NO_COLOR, CLICOLOR_FORCE, TERM, whether
    // stdout is a terminal); when it is off nothing styled is written. A
    // terminal still gets anstream's filter, so with colour off no escape
    // from the user's data (a path, a diffed file) reaches it either. A
    // pipe gets the bytes as they are: filtering there scanned every byte of
    // a 10,000-line status, and `sgard diff > file` keeps the file's bytes.
    let choice = anstream::AutoStream::choice(&io::stdout());
    let colour = choice != anstream::ColorChoice::Never;
    let mode = if io::stdout().is_terminal() {
        choice
    } else {
        anstream::ColorChoice::AlwaysAnsi
    };
    let verbosity = match (cli.quiet, cli.verbose) {
        (true, _) => ui::Verbosity::Quiet,
        (_, true) => ui::Verbosity::Verbose,
        _ => ui::Verbosity::Normal,
    };
    ui::configure(
        verbosity,
        colour,
        anstream::AutoStream::choice(&io::stderr()) != anstream::ColorChoice::Never,
    );
    let mut out = anstream::AutoStream::new(io::stdout().lock(), mode);
    match cli.command {
        Command::Version => {
            writeln!(out, "sgard {}", env!("CARGO_PKG_VERSION"))?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Completion { shell } => return completion::run(shell, &mut out),
        Command::Man { dir } => return man::run(dir.as_deref(), &mut out),
        _ => {}
    }
    let mut env = context::env()?;
    env.no_cache = cli.no_cache;
    let repo = context::repo_path(&env, cli.repo.as_deref());
    let net = match &cli.command {
        Command::Push { remote, net, .. }
        | Command::Pull { remote, net, .. }
        | Command::List { remote, net, .. }
        | Command::Prune { remote, net, .. }
        | Command::Doctor { remote, net, .. }
        | Command::Fleet { remote, net, .. } => Net::of(remote.as_ref(), Some(net)),
        Command::Remote {
            action: crate::cli::RemoteAction::Set { tls, tls_ca, .. },
        } => Net::of(
            None,
            Some(&crate::cli::NetArgs {
                tls: *tls,
                tls_ca: tls_ca.clone(),
                ..crate::cli::NetArgs::default()
            }),
        ),
        _ => Net::of(None, None),
    };
    let ctx = Ctx {
        env,
        repo,
        net,
        colour,
        needs_history: needs_history(&cli.command),
        git_setup: !matches!(cli.command, Command::Doctor { .. }),
    };
    let _progress = ui::progress::View::start(verbosity, context::progress_delay());
    // With -q a command that does something prints only errors (on
    // stderr, naming what failed); a query still prints its answer.
    let mut sink = io::sink();
    let out: &mut dyn Write = if verbosity == ui::Verbosity::Quiet && !answers(&cli.command) {
        &mut sink
    } else {
        &mut out
    };
    let code = match cli.command {
        Command::Init { dry_run } => init::run(&ctx, dry_run, out)?,
        Command::Add(a) => add::run(&ctx, &a, out)?,
        Command::Remove { paths, dry_run } => remove::run(&ctx, &paths, dry_run, out)?,
        Command::Merge { paths, dry_run } => merge::run(&ctx, &paths, dry_run, out)?,
        Command::Git { args } => git::run(&ctx, &args)?,
        Command::GitMergeDriver {
            base,
            ours,
            theirs,
            path,
        } => git::merge_driver(&ctx, &base, &ours, &theirs, &path)?,
        Command::Checkpoint {
            message,
            paths,
            dry_run,
            commit,
            push,
        } => checkpoint::run(
            &ctx,
            message.as_deref(),
            &paths,
            checkpoint::Then {
                dry_run,
                commit,
                push,
            },
            out,
        )?,
        Command::Restore {
            paths,
            force,
            dry_run,
            at,
            no_scripts,
        } => restore::run(
            &ctx,
            &paths,
            restore::Flags {
                force,
                dry_run,
                no_scripts,
            },
            at.as_deref(),
            out,
        )?,
        Command::RunScripts { dry_run } => scripts::run(&ctx, dry_run, out)?,
        Command::Status {
            paths,
            exit_code,
            json,
        } => buffered(out, |o| status::run(&ctx, &paths, exit_code, json, o))?,
        Command::Diff {
            paths,
            at,
            exit_code,
            stat,
            json,
        } => diff::run(
            &ctx,
            &paths,
            diff::Flags {
                at,
                exit_code,
                stat,
                json,
            },
            out,
        )?,
        Command::Verify { json } => buffered(out, |o| verify::run(&ctx, json, o))?,
        Command::Doctor { json, .. } => doctor::run(&ctx, json, out)?,
        Command::List { json, .. } => {
            buffered(out, |o| list::run(&ctx, json, ctx.net.remote.is_some(), o))?
        }
        Command::Info { path, json } => info::run(&ctx, &path, json, out)?,
        Command::Prune { dry_run, .. } => prune::run(&ctx, ctx.net.remote.is_some(), dry_run, out)?,
        Command::Stats { snapshots, json } => stats::run(&ctx, snapshots, json, out)?,
        Command::Render { path } => render::run(&ctx, &path, out)?,
        Command::Edit { paths, no_apply } => edit::run(&ctx, &paths, no_apply, out)?,
        Command::Data { json } => render::data(&ctx, json, out)?,
        Command::Chunking {
            off,
            on,
            threshold,
            sizes,
            dry_run,
        } => chunking::run(
            &ctx,
            chunking::Change {
                off,
                on,
                threshold,
                sizes,
            },
            dry_run,
            out,
        )?,
        Command::Push { dry_run, .. } => push::run(&ctx, dry_run, out)?,
        Command::Pull {
            theirs,
            ours,
            force,
            allow_absolute,
            allow_setuid,
            no_scripts,
            allow_unsigned,
            dry_run,
            ..
        } => pull::run(
            &ctx,
            pull::Flags {
                theirs,
                ours,
                force,
                allow_absolute,
                allow_setuid,
                no_scripts,
                allow_unsigned,
                dry_run,
            },
            out,
        )?,
        Command::Remote { action } => remote::run(&ctx, action, out)?,
        Command::Log { max, json } => buffered(out, |o| log::run(&ctx, max, json, o))?,
        Command::Show { id, json } => show::run(&ctx, &id, json, out)?,
        Command::Undo { dry_run, yes } => undo::run(&ctx, dry_run, yes, out)?,
        Command::Forget {
            ids,
            keep_last,
            keep_within,
            keep_daily,
            dry_run,
        } => log::forget(&ctx, ids, keep_last, keep_within, keep_daily, dry_run, out)?,
        Command::Lock { paths, dry_run } => lock::run(&ctx, &paths, true, dry_run, out)?,
        Command::Unlock { paths, dry_run } => lock::run(&ctx, &paths, false, dry_run, out)?,
        Command::Target {
            paths,
            only,
            never,
            clear,
            dry_run,
        } => target::run(&ctx, &paths, only, never, clear, dry_run, out)?,
        Command::Tag { action } => tag::run(&ctx, action, out)?,
        Command::Trust { action } => trust::run(&ctx, action, out)?,
        Command::Fleet { json, .. } => fleet::run(&ctx, json, out)?,
        Command::Identity { json } => identity::run(&ctx, json, out)?,
        Command::Exclude {
            paths,
            list,
            dry_run,
        } => exclude::run_exclude(&ctx, &paths, list, dry_run, out)?,
        Command::Include { paths, dry_run } => exclude::run_include(&ctx, &paths, dry_run, out)?,
        Command::Mirror { direction } => mirror::run(&ctx, direction, out)?,
        Command::Encrypt { action } => encrypt::run(&ctx, action, out)?,
        Command::Version | Command::Completion { .. } | Command::Man { .. } => ExitCode::SUCCESS,
    };
    out.flush()?;
    Ok(code)
}

/// Whether the command's output is what it was asked for (a query), kept
/// with `-q`; the output of the others is a report of what they did.
fn answers(c: &Command) -> bool {
    use crate::cli::{EncryptAction, RemoteAction, TagAction};
    match c {
        Command::Status { .. }
        | Command::Diff { .. }
        | Command::List { .. }
        | Command::Info { .. }
        | Command::Log { .. }
        | Command::Show { .. }
        | Command::Stats { .. }
        | Command::Render { .. }
        | Command::Data { .. }
        | Command::Identity { .. }
        | Command::Doctor { .. }
        | Command::Fleet { .. }
        | Command::Version
        | Command::Completion { .. }
        | Command::Man { dir: None } => true,
        Command::Tag { action } => matches!(action, TagAction::List),
        Command::Trust { action } => matches!(action, crate::cli::TrustAction::List),
        Command::Exclude { list, .. } => *list,
        Command::Remote { action } => matches!(action, RemoteAction::Show),
        Command::Encrypt { action } => matches!(action, EncryptAction::ListSlots),
        Command::Chunking {
            off,
            on,
            threshold,
            sizes,
            ..
        } => !off && !on && threshold.is_none() && sizes.is_none(),
        // A dry run's report is what it was asked for.
        _ => dry_run_of(c),
    }
}

/// Whether the command refuses on a damaged history (it reads or rewrites
/// the log): it then fails at once with that error, and the others go on
/// with a warning.
fn needs_history(c: &Command) -> bool {
    match c {
        Command::Log { .. }
        | Command::Show { .. }
        | Command::Checkpoint { .. }
        | Command::Forget { .. }
        | Command::Verify { .. }
        | Command::Undo { .. }
        | Command::Push { .. }
        | Command::Pull { .. } => true,
        Command::Prune { remote, .. } => remote.is_none(),
        Command::Restore { at, .. } | Command::Diff { at, .. } => at.is_some(),
        _ => false,
    }
}

/// Whether the command was asked for a dry run.
fn dry_run_of(c: &Command) -> bool {
    use crate::cli::{EncryptAction, MirrorDirection, RemoteAction, TagAction};
    match c {
        Command::Add(a) => a.dry_run,
        Command::Init { dry_run }
        | Command::Remove { dry_run, .. }
        | Command::Checkpoint { dry_run, .. }
        | Command::Restore { dry_run, .. }
        | Command::RunScripts { dry_run }
        | Command::Merge { dry_run, .. }
        | Command::Prune { dry_run, .. }
        | Command::Chunking { dry_run, .. }
        | Command::Push { dry_run, .. }
        | Command::Pull { dry_run, .. }
        | Command::Undo { dry_run, .. }
        | Command::Forget { dry_run, .. }
        | Command::Lock { dry_run, .. }
        | Command::Unlock { dry_run, .. }
        | Command::Target { dry_run, .. }
        | Command::Exclude { dry_run, .. }
        | Command::Include { dry_run, .. } => *dry_run,
        Command::Tag {
            action: TagAction::Add { dry_run, .. } | TagAction::Remove { dry_run, .. },
        }
        | Command::Trust {
            action:
                crate::cli::TrustAction::Add { dry_run, .. }
                | crate::cli::TrustAction::Remove { dry_run, .. },
        }
        | Command::Remote {
            action: RemoteAction::Set { dry_run, .. } | RemoteAction::Unset { dry_run },
        }
        | Command::Mirror {
            direction: MirrorDirection::Up { dry_run, .. } | MirrorDirection::Down { dry_run, .. },
        }
        | Command::Encrypt {
            action:
                EncryptAction::Init { dry_run }
                | EncryptAction::RemoveSlot { dry_run, .. }
                | EncryptAction::ChangePassphrase { dry_run }
                | EncryptAction::RotateDek { dry_run },
        } => *dry_run,
        _ => false,
    }
}

/// Runs a command that may print thousands of lines and never prompts with
/// its standard output buffered: one write per 64 KiB instead of one per
/// line (10,000 `write` calls were a tenth of `status` on a big tree).
fn buffered(
    out: &mut dyn Write,
    f: impl FnOnce(&mut dyn Write) -> Result<ExitCode>,
) -> Result<ExitCode> {
    let mut buf = io::BufWriter::with_capacity(64 * 1024, out);
    let code = f(&mut buf)?;
    buf.flush()?;
    Ok(code)
}

impl Ctx {
    /// How to reach the server, resolved from the flags and the repository.
    pub fn remote_opts(&self) -> Result<sgard::remote::client::Opts> {
        let remote = sgard::remote::config::resolve(
            &self.repo,
            self.net.remote.as_deref().filter(|r| !r.is_empty()),
            self.net.tls,
            self.net.tls_ca.as_deref(),
        )?;
        Ok(sgard::remote::client::Opts {
            remote,
            ssh_key: self.net.ssh_key.clone(),
            home: self.env.home.clone(),
            state_dir: self.env.state_dir.clone(),
            agent: context::ssh_agent_socket(),
            timeouts: self.net.timeouts,
            max_blob: self.net.max_blob,
            note: crate::ui::note,
        })
    }
}

/// Writes a JSON document and a newline.
pub fn print_json(out: &mut dyn Write, v: &serde_json::Value) -> Result<()> {
    serde_json::to_writer_pretty(&mut *out, v).map_err(io::Error::from)?;
    writeln!(out)?;
    Ok(())
}
