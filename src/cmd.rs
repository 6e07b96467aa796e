//! One module per subcommand: parse, call one Garden method, render.

pub(crate) mod add;
pub(crate) mod checkpoint;
pub(crate) mod chunking;
pub(crate) mod completion;
pub(crate) mod diff;
pub(crate) mod doctor;
pub(crate) mod edit;
pub(crate) mod encrypt;
pub(crate) mod exclude;
pub(crate) mod external;
pub(crate) mod fleet;
pub(crate) mod git;
pub(crate) mod identity;
pub(crate) mod info;
pub(crate) mod init;
pub(crate) mod list;
pub(crate) mod lock;
pub(crate) mod log;
pub(crate) mod man;
pub(crate) mod merge;
pub(crate) mod mirror;
pub(crate) mod prune;
pub(crate) mod pull;
pub(crate) mod purge;
pub(crate) mod push;
pub(crate) mod remote;
pub(crate) mod remove;
pub(crate) mod render;
pub(crate) mod restore;
pub(crate) mod scripts;
pub(crate) mod show;
pub(crate) mod stats;
pub(crate) mod status;
pub(crate) mod tag;
pub(crate) mod target;
pub(crate) mod trust;
pub(crate) mod undo;
pub(crate) mod verify;
pub(crate) mod watch;

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::{Access, Env, Garden, LockMode, Options};

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
    /// Identity files named by `--identity` and `SGARD_IDENTITY`.
    pub identities: Vec<PathBuf>,
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
    pub fn of(remote: Option<&String>, a: Option<&crate::cli::NetArgs>) -> Self {
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
        self.open_with(self.options(Access::from(mode)))
    }

    /// Opens the repository with `opts` (see [`Ctx::options`]).
    pub fn open_with(&self, opts: Options<'static>) -> Result<Garden> {
        let write = opts.access == Access::Write;
        let g = Garden::open(&self.repo, self.env.clone(), opts).map_err(|e| {
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
        if write && self.git_setup {
            git::set_up(&self.repo, git::Attributes::Upgrade);
        }
        self.ready(g)
    }

    /// Opens the repository to change it (exclusively), or with `dry_run`
    /// to say what would change: a shared lock, and nothing written.
    pub fn open_to_change(&self, dry_run: bool) -> Result<Garden> {
        if !dry_run {
            return self.open(LockMode::Exclusive);
        }
        self.open_with(Options {
            dry_run: true,
            ..self.options(Access::Read)
        })
    }

    /// Opens the repository to read it alone (verify, list, log, identity):
    /// this machine's base and stat cache are neither loaded nor written.
    pub fn open_repository_only(&self) -> Result<Garden> {
        let g = Garden::open(
            &self.repo,
            self.env.clone(),
            self.options(Access::RepositoryOnly),
        )?;
        self.ready(g)
    }

    /// Opens the repository to change the home folder only (restore, undo,
    /// mirror down, merge), or with `dry_run` to say what would change (no
    /// home lock, nothing written): it may be read-only, and then says so.
    pub fn open_for_home(&self, dry_run: bool) -> Result<Garden> {
        let g = Garden::open(
            &self.repo,
            self.env.clone(),
            Options {
                dry_run,
                ..self.options(Access::Home)
            },
        )?;
        if g.repository_is_read_only() {
            ui::note(&format!(
                "{} is read-only: restoring from it; the safety snapshot (for `sgard \
                 undo`) is kept in this machine's state, as always",
                self.repo.display()
            ));
        }
        self.ready(g)
    }

    /// Ends a command's work with the repository it changed (see
    /// [`Garden::finish`]): this machine's index is saved, and a failure to
    /// save it is the command's error.
    pub fn finish(&self, g: Garden) -> Result<()> {
        g.finish().map_err(|e| {
            anyhow::Error::new(e).context("saving this machine's index of the repository")
        })
    }

    /// Ends a query's work with the repository: what it cached is saved,
    /// and a failure to save it is said (the next command reads every file
    /// again), not the query's error.
    pub fn finish_query(&self, g: Garden) {
        if let Err(e) = g.finish() {
            ui::warn(&format!(
                "could not save this machine's index of the repository (the next command \
                 reads every file again): {}",
                sgard_garden::error_chain(&e)
            ));
        }
    }

    /// How this command opens the repository for `access`: notes and
    /// waits said as they happen, the passphrase asked when needed (three
    /// tries at a terminal), the Garden's memory left to the exit.
    pub fn options(&self, access: Access) -> Options<'static> {
        Options {
            access,
            on_wait: Some(&ui::note),
            process_ends: true,
            note_sink: Some(Box::new(|w| ui::note(&ui::why(w)))),
            passphrase: Some(Box::new(|| {
                let _bar = ui::progress::pause();
                context::passphrase("Passphrase: ")
            })),
            passphrase_tries: if context::passphrase_is_typed() { 3 } else { 1 },
            machine_keys: true,
            identities: self.identities.clone(),
            key_passphrase: Some(Box::new(|path| {
                let _bar = ui::progress::pause();
                context::key_passphrase(path)
            })),
            dry_run: false,
            presence_ahead: false,
        }
    }

    fn ready(&self, g: Garden) -> Result<Garden> {
        // A git clone gets the merge driver defined on first use.
        if self.git_setup {
            git::set_up(&self.repo, git::Attributes::Leave);
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
    let command = match cli.command {
        Command::Version => {
            writeln!(out, "sgard {}", env!("CARGO_PKG_VERSION"))?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Completion(a) => return completion::run(a.shell, &mut out),
        Command::Man(a) => return man::run(&a, &mut out),
        other => other,
    };
    let mut env = context::env()?;
    env.no_cache = cli.no_cache;
    let repo = context::repo_path(&env, cli.repo.as_deref());
    let ctx_cwd = env.cwd.clone();
    let ctx = Ctx {
        env,
        repo,
        net: each!(&command, a => a.net()),
        colour,
        needs_history: each!(&command, a => a.needs_history()),
        git_setup: each!(&command, a => a.git_setup()),
        identities: context::identities(&ctx_cwd, cli.identity),
    };
    let _progress = ui::progress::View::start(verbosity, context::progress_delay());
    // With -q a command that does something prints only errors (on
    // stderr, naming what failed); a query still prints its answer.
    let mut sink = io::sink();
    let out: &mut dyn Write =
        if verbosity == ui::Verbosity::Quiet && !each!(&command, a => a.answers()) {
            &mut sink
        } else {
            &mut out
        };
    let code = each!(command, a => a.run(&ctx, out)?);
    out.flush()?;
    Ok(code)
}

/// A command's arguments: each `cmd/<name>.rs` defines its own (a
/// `clap::Args` struct) and says here how it runs and what the run around
/// it needs to know.
pub trait Run {
    /// Runs the command.
    fn run(self, ctx: &Ctx, out: &mut dyn Write) -> Result<ExitCode>;

    /// Whether it was asked for a dry run.
    fn dry_run(&self) -> bool {
        false
    }

    /// Whether its output is what it was asked for (a query), kept with
    /// `-q`; the output of the others is a report of what they did (a dry
    /// run's report is what it was asked for).
    fn answers(&self) -> bool {
        self.dry_run()
    }

    /// Whether it refuses on a damaged history (it reads or rewrites the
    /// log): it then fails at once with that error, and the others go on
    /// with a warning.
    fn needs_history(&self) -> bool {
        false
    }

    /// Its flags about the sync server (only the commands that talk to
    /// one have any).
    fn net(&self) -> Net {
        Net::of(None, None)
    }

    /// Whether opening the repository may set up git's merge driver (not
    /// for `doctor`, which changes nothing and reports what is missing).
    fn git_setup(&self) -> bool {
        true
    }
}

/// `each!(command, a => expr)`: `expr` with `a` bound to the arguments of
/// whichever command it is. The one list of the commands that run against
/// a repository (`version`, `completion` and `man` are answered first).
macro_rules! each {
    ($c:expr, $a:ident => $e:expr) => {
        match $c {
            Command::Init($a) => $e,
            Command::Add($a) => $e,
            Command::Remove($a) => $e,
            Command::Checkpoint($a) => $e,
            Command::Restore($a) => $e,
            Command::RunScripts($a) => $e,
            Command::Merge($a) => $e,
            Command::Git($a) => $e,
            Command::GitMergeDriver($a) => $e,
            Command::Status($a) => $e,
            Command::Diff($a) => $e,
            Command::Verify($a) => $e,
            Command::Doctor($a) => $e,
            Command::Stats($a) => $e,
            Command::Chunking($a) => $e,
            Command::List($a) => $e,
            Command::Edit($a) => $e,
            Command::Render($a) => $e,
            Command::Data($a) => $e,
            Command::Info($a) => $e,
            Command::Prune($a) => $e,
            Command::Purge($a) => $e,
            Command::Push($a) => $e,
            Command::Pull($a) => $e,
            Command::Fleet($a) => $e,
            Command::Remote($a) => $e,
            Command::Log($a) => $e,
            Command::Show($a) => $e,
            Command::Undo($a) => $e,
            Command::Forget($a) => $e,
            Command::Lock($a) => $e,
            Command::Unlock($a) => $e,
            Command::Target($a) => $e,
            Command::Tag($a) => $e,
            Command::Identity($a) => $e,
            Command::Exclude($a) => $e,
            Command::Include($a) => $e,
            Command::Encrypt($a) => $e,
            Command::Mirror($a) => $e,
            Command::External($a) => $e,
            Command::Watch($a) => $e,
            Command::Trust($a) => $e,
            Command::Version | Command::Completion(_) | Command::Man(_) => {
                return Ok(ExitCode::SUCCESS);
            }
        }
    };
}
use each;

/// Runs a command that may print thousands of lines and never prompts with
/// its standard output buffered: one write per 64 KiB instead of one per
/// line (10,000 `write` calls were a tenth of `status` on a big tree).
pub(crate) fn buffered(
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
