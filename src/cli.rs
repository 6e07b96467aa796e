//! Command-line interface definition (clap derive).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::TypedValueParser as _;
use clap::{ArgGroup, Args, Parser, Subcommand};

/// sgard checkpoints your dotfiles into a portable repository and restores
/// them on any machine.
#[derive(Parser, Debug)]
#[command(name = "sgard", version, about, long_about = None, disable_version_flag = true)]
pub struct Cli {
    /// Repository folder [default: ~/.sgard]
    #[arg(long, global = true, env = "SGARD_REPO", value_name = "PATH")]
    pub repo: Option<PathBuf>,

    /// Print version
    #[arg(short = 'V', long = "version", action = clap::ArgAction::Version)]
    pub version: Option<bool>,

    /// Re-read every file instead of trusting the machine-local stat cache
    #[arg(long, global = true)]
    pub no_cache: bool,

    /// Print only errors (and what a query such as status or list was asked for); no progress
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Also list every path as it is handled
    #[arg(short, long, global = true)]
    pub verbose: bool,

    /// An age identity file or SSH private key to unlock encrypted files with, tried first (repeatable; SGARD_IDENTITY holds more, `:`-separated)
    #[arg(long = "identity", global = true, value_name = "FILE")]
    pub identity: Vec<PathBuf>,

    /// What to do
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create a new repository
    Init(crate::cmd::init::Args),
    /// Track files, symlinks and folders (folders are recursed)
    Add(crate::cmd::add::Args),
    /// Stop tracking paths (an entry, or every entry under a folder)
    #[command(alias = "rm")]
    Remove(crate::cmd::remove::Args),
    /// Record what changed here since the last sync (never another machine's changes)
    Checkpoint(crate::cmd::checkpoint::Args),
    /// Write tracked entries back to disk
    Restore(crate::cmd::restore::Args),
    /// Run the tracked scripts that are due on this machine
    RunScripts(crate::cmd::scripts::Args),
    /// Settle a conflict in a text file with a three-way merge (base, here, repository)
    Merge(crate::cmd::merge::Args),
    /// Run git in the repository folder (`sgard git pull`, `sgard git log -3`)
    Git(crate::cmd::git::Args),
    /// Merge two versions of a repository file for git (sgard sets itself up as git's `sgard` merge driver)
    #[command(name = "git-merge-driver")]
    GitMergeDriver(crate::cmd::git::DriverArgs),
    /// Show how each tracked path compares with the repository
    #[command(alias = "st")]
    Status(crate::cmd::status::Args),
    /// Show a unified diff of tracked files: stored against current
    ///
    /// `diff ID1 ID2 [PATH]...` compares two snapshots instead (when both
    /// name snapshots); `diff --at ID [PATH]...` compares a snapshot with the disk.
    Diff(crate::cmd::diff::Args),
    /// Re-hash every stored blob
    Verify(crate::cmd::verify::Args),
    /// Check the repository, this machine's state, the sync server and the tools sgard uses; say what to do
    ///
    /// One line per check: `ok`, `warning` or `error`, what was found, and
    /// for the last two what to do. Changes nothing. Exits 1 when a check
    /// is an error.
    Doctor(crate::cmd::doctor::Args),
    /// Show what the repository tracks and stores: files, bytes, chunks, dedup, what prune would free
    Stats(crate::cmd::stats::Args),
    /// Show or change how big files are stored (content-defined chunks)
    ///
    /// Files at or above the threshold are split into chunks stored once
    /// each, so a small edit to a big file stores a chunk or two. `--off`
    /// stores every file whole, as the Go sgard reads them (and rewrites the
    /// head's chunked files whole).
    Chunking(crate::cmd::chunking::Args),
    /// List tracked entries (`--remote`: the server's)
    #[command(alias = "ls")]
    List(crate::cmd::list::Args),
    /// Edit tracked files in $VISUAL or $EDITOR: a template's source, a
    /// secret's decrypted copy, or the file itself; stores what changed
    Edit(crate::cmd::edit::Args),
    /// Print a template's rendering for this machine
    Render(crate::cmd::render::Args),
    /// Print the data templates see (the repository's data.yaml overlaid by this machine's)
    Data(crate::cmd::render::DataArgs),
    /// Show everything known about a tracked path
    Info(crate::cmd::info::Args),
    /// Delete stored blobs nothing references, and stale temp files (`--remote`: on the server)
    Prune(crate::cmd::prune::Args),
    /// Remove every stored version of paths' content (a leaked secret) from the repository and its history
    Purge(crate::cmd::purge::Args),
    /// Send this repository to the sync server (a fast-forward of what it last got)
    Push(crate::cmd::push::Args),
    /// Fetch the server's state, merge it entry by entry, and restore what changed
    Pull(crate::cmd::pull::Args),
    /// The machines of this garden as the sync server sees them: where each is, when it was seen
    Fleet(crate::cmd::fleet::Args),
    /// Configure the sync server of this repository
    Remote(crate::cmd::remote::Args),
    /// Show the history of snapshots, newest first
    Log(crate::cmd::log::Args),
    /// Show what a snapshot changed against its parent
    Show(crate::cmd::show::Args),
    /// Reverse this machine's most recent restore, restore --at, pull, merge, mirror down or undo
    ///
    /// Says what it will reverse (the operation, its time, the paths) and,
    /// on a terminal, asks first.
    Undo(crate::cmd::undo::Args),
    /// Drop snapshots from the history (their blobs go at the next prune)
    #[command(group(ArgGroup::new("which").required(true).args(["ids", "keep_last", "keep_within", "keep_daily"])))]
    Forget(crate::cmd::log::ForgetArgs),
    /// Make tracked entries repository-authoritative
    Lock(crate::cmd::lock::LockArgs),
    /// Make locked entries normal again
    Unlock(crate::cmd::lock::UnlockArgs),
    /// Set or clear which machines tracked entries apply to
    #[command(group(ArgGroup::new("how").required(true).args(["only", "never", "clear"])))]
    Target(crate::cmd::target::Args),
    /// Manage this machine's tags (machine-local, not synced)
    Tag(crate::cmd::tag::Args),
    /// Print this machine's targeting labels
    Identity(crate::cmd::identity::Args),
    /// Exclude paths or glob patterns from tracking
    Exclude(crate::cmd::exclude::ExcludeArgs),
    /// Remove exclusion rules
    Include(crate::cmd::exclude::IncludeArgs),
    /// Manage encryption (per-file, XChaCha20-Poly1305 with an Argon2id passphrase)
    Encrypt(crate::cmd::encrypt::Args),
    /// Make a folder in the repository match the disk, or the disk match the repository
    Mirror(crate::cmd::mirror::Args),
    /// Files and archives fetched once, pinned, and stored in the repository
    External(crate::cmd::external::Args),
    /// Watch the tracked paths so status looks only at what changed
    ///
    /// Runs until stopped (Ctrl-C, SIGTERM). While it runs, a `status` of
    /// every entry asks it which tracked files changed since the last one
    /// and looks only at those; a watcher restarted, overflowed or not
    /// running means status looks at everything, as without it.
    Watch(crate::cmd::watch::Args),
    /// The keys this machine trusts to sign this repository's heads (`pull` refuses others)
    Trust(crate::cmd::trust::Args),
    /// Print sgard's version
    Version,
    /// Print a shell completion script
    Completion(crate::cmd::completion::Args),
    /// Print the man page, or write one per command into a folder (`--markdown`: the book's
    /// command reference, as markdown)
    Man(crate::cmd::man::Args),
}

/// How to reach and log in to the sync server (only on the commands that
/// talk to one).
#[derive(Args, Debug, Clone, Default)]
pub struct NetArgs {
    /// SSH private key to log in with [default: SGARD_SSH_KEY, ssh-agent, ~/.ssh/id_*]
    #[arg(long, value_name = "FILE")]
    pub ssh_key: Option<PathBuf>,
    /// Use TLS to the server
    #[arg(long)]
    pub tls: bool,
    /// Do not use TLS, even if remote.yaml says so
    #[arg(long, conflicts_with_all = ["tls", "tls_ca"])]
    pub no_tls: bool,
    /// Trust this PEM certificate or CA bundle for the server (implies --tls; replaces the system roots)
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Seconds to wait for a connection
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub connect_timeout: u64,
    /// Seconds to wait for any one answer or message from the server
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub timeout: u64,
    /// Seconds the whole exchange may take
    #[arg(long, value_name = "SECS", default_value_t = 3600)]
    pub deadline: u64,
    /// Largest blob accepted from a server that does not declare blob sizes
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 30)]
    pub max_blob_size: u64,
}

/// Parses an age such as `30d`, `12h`, `2w`, `6m` (30-day months) or `1y`.
pub(crate) fn parse_age(s: &str) -> Result<chrono::Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: i64 = n
        .parse()
        .map_err(|_| format!("{s:?}: expected a number and a unit, like 30d"))?;
    let hours = match unit {
        "h" => 1,
        "d" | "" => 24,
        "w" => 24 * 7,
        "m" => 24 * 30,
        "y" => 24 * 365,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?} (use h, d, w, m or y)"
            ));
        }
    };
    n.checked_mul(hours)
        .and_then(chrono::TimeDelta::try_hours)
        .ok_or_else(|| format!("{s:?} is too long"))
}

/// The parser of every path argument: any bytes but none at all. An empty
/// argument is nearly always an unset shell variable (`sgard add "$TYPO"`),
/// and read as the working folder it would walk or untrack all of it.
pub(crate) fn path_arg() -> impl clap::builder::TypedValueParser<Value = OsString> {
    clap::builder::OsStringValueParser::new().try_map(|s| {
        if s.is_empty() {
            Err("an empty path names nothing (an unset shell variable?)")
        } else {
            Ok(s)
        }
    })
}

/// A mistyped subcommand gets the one nearest subcommand as its hint (by
/// edit distance, transpositions counting once: `chekpoint` → `checkpoint`),
/// or none when nothing is near; clap's own hint lists every name that
/// merely shares letters (`chekpoint` suggested `completion` too).
pub fn better_suggestion(e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::InvalidSubcommand {
        return e;
    }
    let Some(ContextValue::String(typed)) = e.get(ContextKind::InvalidSubcommand) else {
        return e;
    };
    let typed = typed.clone();
    let cmd = <Cli as clap::CommandFactory>::command();
    // The command the mistyped name was given to (`sgard mirror dwon`: the
    // subcommands of `mirror`): the names before it that name subcommands.
    let mut parent = &cmd;
    for arg in std::env::args().skip(1) {
        if arg == typed {
            break;
        }
        if let Some(sub) = parent.find_subcommand(&arg) {
            parent = sub;
        }
    }
    let near: Vec<(usize, &str)> = parent
        .get_subcommands()
        .flat_map(|s| std::iter::once(s.get_name()).chain(s.get_all_aliases()))
        .map(|name| (strsim::damerau_levenshtein(&typed, name), name))
        .filter(|(d, name)| *d <= 2.max(name.len() / 4) && *d < name.len())
        .collect();
    let nearest: Vec<String> = near
        .iter()
        .filter(|(d, _)| near.iter().all(|(o, _)| d <= o))
        .map(|(_, name)| (*name).to_owned())
        .collect();
    let mut better = clap::Error::new(ErrorKind::InvalidSubcommand).with_cmd(&cmd);
    better.insert(ContextKind::InvalidSubcommand, ContextValue::String(typed));
    if !nearest.is_empty() {
        better.insert(
            ContextKind::SuggestedSubcommand,
            ContextValue::Strings(nearest),
        );
    }
    if let Some(usage) = e.get(ContextKind::Usage) {
        better.insert(ContextKind::Usage, usage.clone());
    }
    better
}
