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

    /// What to do
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create a new repository
    Init {
        /// Say what would be created; create nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Track files, symlinks and folders (folders are recursed)
    Add(AddArgs),
    /// Stop tracking paths (an entry, or every entry under a folder)
    #[command(alias = "rm")]
    Remove {
        /// Paths to untrack
        #[arg(required = true, value_name = "PATH", value_parser = path_arg())]
        paths: Vec<OsString>,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Record what changed here since the last sync (never another machine's changes)
    Checkpoint {
        /// A message describing this checkpoint
        #[arg(short, long)]
        message: Option<String>,
        /// Entries (or folders of entries) to record [default: all]
        #[arg(value_name = "PATH", value_parser = path_arg())]
        paths: Vec<OsString>,
        /// Show what would be recorded; record nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
        /// Then commit the repository with git (when it recorded a snapshot)
        #[arg(long)]
        commit: bool,
        /// Then commit and push with git (when it recorded a snapshot)
        #[arg(long)]
        push: bool,
    },
    /// Write tracked entries back to disk
    Restore {
        /// Entries (or folders of entries) to restore [default: all]
        #[arg(value_name = "PATH", value_parser = path_arg())]
        paths: Vec<OsString>,
        /// Overwrite without asking
        #[arg(short, long)]
        force: bool,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
        /// Restore from this snapshot (an id prefix, @ or @~N) instead of the head
        #[arg(long, value_name = "ID")]
        at: Option<String>,
        /// Do not run the scripts that are due
        #[arg(long)]
        no_scripts: bool,
    },
    /// Run the tracked scripts that are due on this machine
    RunScripts {
        /// List them; run nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Settle a conflict in a text file with a three-way merge (base, here, repository)
    Merge {
        /// Conflicting tracked files (or folders of them)
        #[arg(required = true, value_name = "PATH", value_parser = path_arg())]
        paths: Vec<OsString>,
        /// Show the merge's outcome for each file; write nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Run git in the repository folder (`sgard git pull`, `sgard git log -3`)
    Git {
        /// git's arguments, passed as they are
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<OsString>,
    },
    /// Merge two versions of a repository file for git (sgard sets itself up as git's `sgard` merge driver)
    #[command(name = "git-merge-driver")]
    GitMergeDriver {
        /// The common ancestor's version (git's %O)
        base: PathBuf,
        /// This side's version; the result is written here (git's %A)
        ours: PathBuf,
        /// The other side's version (git's %B)
        theirs: PathBuf,
        /// The file's path in the work tree (git's %P)
        path: PathBuf,
    },
    /// Show how each tracked path compares with the repository
    #[command(alias = "st")]
    Status {
        /// Entries (or folders of entries) to show [default: all]
        #[arg(value_name = "PATH", value_parser = path_arg())]
        paths: Vec<OsString>,
        /// Exit with status 1 when anything is not ok
        #[arg(long)]
        exit_code: bool,
        /// Print one JSON document
        #[arg(long)]
        json: bool,
    },
    /// Show a unified diff of tracked files: stored against current
    ///
    /// `diff ID1 ID2 [PATH]...` compares two snapshots instead (when both
    /// name snapshots); `diff --at ID [PATH]...` compares a snapshot with the disk.
    Diff {
        /// Tracked files or folders [default: every tracked file]
        #[arg(value_name = "PATH", value_parser = path_arg())]
        paths: Vec<OsString>,
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
    },
    /// Re-hash every stored blob
    Verify {
        /// Print one JSON document
        #[arg(long)]
        json: bool,
    },
    /// Check the repository, this machine's state, the sync server and the tools sgard uses; say what to do
    ///
    /// One line per check: `ok`, `warning` or `error`, what was found, and
    /// for the last two what to do. Changes nothing. Exits 1 when a check
    /// is an error.
    Doctor {
        /// Print one JSON document
        #[arg(long)]
        json: bool,
        /// The sync server to check [default: SGARD_REMOTE, then <repo>/remote.yaml]
        #[arg(short = 'r', long, value_name = "HOST:PORT")]
        remote: Option<String>,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Show what the repository tracks and stores: files, bytes, chunks, dedup, what prune would free
    Stats {
        /// Also show what each snapshot costs
        #[arg(long)]
        snapshots: bool,
        /// Print one JSON document
        #[arg(long)]
        json: bool,
    },
    /// Show or change how big files are stored (content-defined chunks)
    ///
    /// Files at or above the threshold are split into chunks stored once
    /// each, so a small edit to a big file stores a chunk or two. `--off`
    /// stores every file whole, as the Go sgard reads them (and rewrites the
    /// head's chunked files whole).
    Chunking {
        /// Store every file as one blob (readable by the Go sgard)
        #[arg(long, conflicts_with_all = ["on", "threshold", "sizes"])]
        off: bool,
        /// Say what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
        /// Chunk files at or above the threshold
        #[arg(long)]
        on: bool,
        /// Files at least this big are chunked (bytes, or with K, M, G)
        #[arg(long, value_name = "SIZE")]
        threshold: Option<String>,
        /// The chunker's minimum, average and maximum chunk sizes [default: 16K,64K,256K]
        #[arg(long, value_name = "MIN,AVG,MAX")]
        sizes: Option<String>,
    },
    /// List tracked entries (`--remote`: the server's)
    #[command(alias = "ls")]
    List {
        /// Print one JSON document
        #[arg(long)]
        json: bool,
        /// List the sync server's entries instead [default server: SGARD_REMOTE, then <repo>/remote.yaml]
        #[arg(short = 'r', long, value_name = "HOST:PORT", num_args = 0..=1, default_missing_value = "")]
        remote: Option<String>,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Edit tracked files in $VISUAL or $EDITOR: a template's source, a
    /// secret's decrypted copy, or the file itself; stores what changed
    Edit {
        /// The tracked files
        #[arg(required = true, value_name = "PATH", value_parser = path_arg())]
        paths: Vec<OsString>,
        /// Store the new content without writing the file on disk
        #[arg(long)]
        no_apply: bool,
    },
    /// Print a template's rendering for this machine
    Render {
        /// The tracked template
        #[arg(value_name = "PATH", value_parser = path_arg())]
        path: OsString,
    },
    /// Print the data templates see (the repository's data.yaml overlaid by this machine's)
    Data {
        /// Print one JSON document
        #[arg(long)]
        json: bool,
    },
    /// Show everything known about a tracked path
    Info {
        /// The tracked path
        #[arg(value_name = "PATH", value_parser = path_arg())]
        path: OsString,
        /// Print one JSON document
        #[arg(long)]
        json: bool,
    },
    /// Delete stored blobs nothing references, and stale temp files (`--remote`: on the server)
    Prune {
        /// Say what would be deleted and how much it would free; delete nothing
        #[arg(short = 'n', long, conflicts_with = "remote")]
        dry_run: bool,
        /// Prune the sync server's store instead [default server: SGARD_REMOTE, then <repo>/remote.yaml]
        #[arg(short = 'r', long, value_name = "HOST:PORT", num_args = 0..=1, default_missing_value = "")]
        remote: Option<String>,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Send this repository to the sync server (a fast-forward of what it last got)
    Push {
        /// The sync server [default: SGARD_REMOTE, then <repo>/remote.yaml]
        #[arg(short = 'r', long, value_name = "HOST:PORT")]
        remote: Option<String>,
        /// Ask the server what it would take; send nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Fetch the server's state, merge it entry by entry, and restore what changed
    Pull {
        /// Settle entries changed on both sides with the server's version
        #[arg(long, conflicts_with = "ours")]
        theirs: bool,
        /// Settle entries changed on both sides with the local version
        #[arg(long)]
        ours: bool,
        /// Overwrite local files without asking
        #[arg(short, long)]
        force: bool,
        /// Accept entries outside the home folder (absolute paths) from the server
        #[arg(long)]
        allow_absolute: bool,
        /// Keep setuid/setgid bits the server's entries carry (dropped by default)
        #[arg(long)]
        allow_setuid: bool,
        /// Do not run the scripts that are due
        #[arg(long)]
        no_scripts: bool,
        /// Take a head no key signed, though this repository's heads are signed (a Go client's push)
        #[arg(long)]
        allow_unsigned: bool,
        /// Fetch what the server has and show what the pull would change; change nothing here
        #[arg(short = 'n', long)]
        dry_run: bool,
        /// The sync server [default: SGARD_REMOTE, then <repo>/remote.yaml]
        #[arg(short = 'r', long, value_name = "HOST:PORT")]
        remote: Option<String>,
        #[command(flatten)]
        net: NetArgs,
    },
    /// The machines of this garden as the sync server sees them: where each is, when it was seen
    Fleet {
        /// Print one JSON document
        #[arg(long)]
        json: bool,
        /// The sync server [default: SGARD_REMOTE, then <repo>/remote.yaml]
        #[arg(short = 'r', long, value_name = "HOST:PORT")]
        remote: Option<String>,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Configure the sync server of this repository
    Remote {
        /// What to do
        #[command(subcommand)]
        action: RemoteAction,
    },
    /// Show the history of snapshots, newest first
    Log {
        /// Show at most N snapshots
        #[arg(short = 'n', long, value_name = "N")]
        max: Option<usize>,
        /// Print one JSON document
        #[arg(long)]
        json: bool,
    },
    /// Show what a snapshot changed against its parent
    Show {
        /// The snapshot (an id prefix, @ or @~N)
        #[arg(value_name = "ID")]
        id: String,
        /// Print one JSON document
        #[arg(long)]
        json: bool,
    },
    /// Reverse this machine's most recent restore, restore --at, pull, merge, mirror down or undo
    ///
    /// Says what it will reverse (the operation, its time, the paths) and,
    /// on a terminal, asks first.
    Undo {
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
        /// Do not ask: reverse it
        #[arg(short = 'y', long)]
        yes: bool,
    },
    /// Drop snapshots from the history (their blobs go at the next prune)
    #[command(group(ArgGroup::new("which").required(true).args(["ids", "keep_last", "keep_within", "keep_daily"])))]
    Forget {
        /// Snapshots to forget (id prefixes, @~N)
        #[arg(value_name = "ID")]
        ids: Vec<String>,
        /// Keep only the newest N checkpoints (and the restores since the oldest of them)
        #[arg(long, value_name = "N", conflicts_with_all = ["ids", "keep_within", "keep_daily"])]
        keep_last: Option<usize>,
        /// Keep only operations within this age (e.g. 30d, 12h, 2w, 1y)
        #[arg(long, value_name = "AGE", value_parser = parse_age, conflicts_with_all = ["ids", "keep_daily"])]
        keep_within: Option<chrono::Duration>,
        /// Keep the newest operation of each of the last N days that have one
        #[arg(long, value_name = "N", conflicts_with = "ids")]
        keep_daily: Option<usize>,
        /// Show what would be forgotten; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Make tracked entries repository-authoritative
    Lock {
        /// Tracked paths (a folder selects the entries under it)
        #[arg(required = true, value_name = "PATH", value_parser = path_arg())]
        paths: Vec<OsString>,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Make locked entries normal again
    Unlock {
        /// Tracked paths (a folder selects the entries under it)
        #[arg(required = true, value_name = "PATH", value_parser = path_arg())]
        paths: Vec<OsString>,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Set or clear which machines tracked entries apply to
    #[command(group(ArgGroup::new("how").required(true).args(["only", "never", "clear"])))]
    Target {
        /// Tracked paths (a folder selects the entries under it)
        #[arg(required = true, value_name = "PATH", value_parser = path_arg())]
        paths: Vec<OsString>,
        /// Apply only on machines with one of these labels
        #[arg(long, value_delimiter = ',', value_name = "LABEL,...")]
        only: Vec<String>,
        /// Never apply on machines with one of these labels
        #[arg(long, value_delimiter = ',', value_name = "LABEL,...")]
        never: Vec<String>,
        /// Apply everywhere
        #[arg(long)]
        clear: bool,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Manage this machine's tags (machine-local, not synced)
    Tag {
        /// What to do with tags
        #[command(subcommand)]
        action: TagAction,
    },
    /// Print this machine's targeting labels
    Identity {
        /// Print one JSON document
        #[arg(long)]
        json: bool,
    },
    /// Exclude paths or glob patterns from tracking
    Exclude {
        /// Paths or globs (`~/.config/*/cache`); quote globs from the shell
        #[arg(value_name = "PATH", value_parser = path_arg(), required_unless_present = "list")]
        paths: Vec<OsString>,
        /// List the exclusion rules
        #[arg(short, long)]
        list: bool,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Remove exclusion rules
    Include {
        /// Rules to remove, as given to `exclude`
        #[arg(required = true, value_name = "PATH", value_parser = path_arg())]
        paths: Vec<OsString>,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Manage encryption (per-file, XChaCha20-Poly1305 with an Argon2id passphrase)
    Encrypt {
        /// What to do
        #[command(subcommand)]
        action: EncryptAction,
    },
    /// Make a folder in the repository match the disk, or the disk match the repository
    Mirror {
        /// Which way
        #[command(subcommand)]
        direction: MirrorDirection,
    },
    /// The keys this machine trusts to sign this repository's heads (`pull` refuses others)
    Trust {
        /// What to do
        #[command(subcommand)]
        action: TrustAction,
    },
    /// Print sgard's version
    Version,
    /// Print a shell completion script
    Completion {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the man page, or write one per command into a folder
    Man {
        /// Write sgard.1 and sgard-<command>.1 into this folder
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
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

/// Arguments of `add`.
#[derive(Args, Debug)]
pub struct AddArgs {
    /// Files, symlinks or folders to track
    #[arg(required = true, value_name = "PATH", value_parser = path_arg())]
    pub paths: Vec<OsString>,
    /// Track folders themselves (their mode), not their contents
    #[arg(long)]
    pub dir: bool,
    /// Lock the entries: the repository's version always wins
    #[arg(long)]
    pub lock: bool,
    /// Apply only on machines with one of these labels
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LABEL,...",
        conflicts_with = "never"
    )]
    pub only: Vec<String>,
    /// Never apply on machines with one of these labels
    #[arg(long, value_delimiter = ',', value_name = "LABEL,...")]
    pub never: Vec<String>,
    /// Encrypt the files (also turns tracked plain files into encrypted ones)
    #[arg(long, conflicts_with = "no_encrypt")]
    pub encrypt: bool,
    /// Store the files in plaintext, also those that look like secrets
    /// (turns encrypted entries into plain ones)
    #[arg(long, visible_alias = "plaintext")]
    pub no_encrypt: bool,
    /// Track the files as templates (Jinja): what they hold now is the
    /// source; restore writes its rendering for each machine
    #[arg(long)]
    pub template: bool,
    /// Mark the files as scripts run after restore, pull and mirror down:
    /// once per content, or whenever the content changes
    #[arg(long, value_name = "WHEN", value_parser = ["once", "onchange"])]
    pub run: Option<String>,
    /// Follow symlinks: one to a folder is walked as that folder (its files
    /// tracked under the link's path); one to a file is tracked with the
    /// file it points to
    #[arg(long)]
    pub follow: bool,
    /// Show what would be tracked or refreshed; store nothing
    #[arg(short = 'n', long)]
    pub dry_run: bool,
}

/// `encrypt` subcommands.
#[derive(Subcommand, Debug)]
pub enum EncryptAction {
    /// Set up encryption with a passphrase
    Init {
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// List the key slots
    ListSlots,
    /// Remove a key slot (never the last one)
    RemoveSlot {
        /// The slot's name
        name: String,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Re-wrap the data key under a new passphrase
    ChangePassphrase {
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Replace the data key and re-encrypt every encrypted file
    RotateDek {
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
}

/// `trust` subcommands.
#[derive(Subcommand, Debug)]
pub enum TrustAction {
    /// Trust the key in a public key file (KEY.pub) to sign heads
    Add {
        /// The public key file (one OpenSSH public key line)
        #[arg(value_name = "KEY.pub")]
        key: PathBuf,
        /// Say what would be trusted; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// List the trusted keys
    List,
    /// Stop trusting a key (its SHA256 fingerprint, or its comment)
    Remove {
        /// The key's fingerprint (`SHA256:…`) or comment
        #[arg(value_name = "KEY")]
        which: String,
        /// Say what would be removed; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
}

/// `tag` subcommands.
#[derive(Subcommand, Debug)]
pub enum TagAction {
    /// Add a tag to this machine
    Add {
        /// The tag
        name: String,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Remove a tag from this machine
    Remove {
        /// The tag
        name: String,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// List this machine's tags
    List,
}

/// `mirror` directions.
#[derive(Subcommand, Debug)]
pub enum MirrorDirection {
    /// Disk → repository: track new files, drop deleted ones, refresh changed ones
    Up {
        /// Folders to mirror
        #[arg(required = true, value_name = "DIR", value_parser = path_arg())]
        dirs: Vec<OsString>,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Repository → disk: restore, then delete untracked files
    Down {
        /// Folders to mirror
        #[arg(required = true, value_name = "DIR", value_parser = path_arg())]
        dirs: Vec<OsString>,
        /// Overwrite and delete without asking
        #[arg(short, long)]
        force: bool,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
        /// Do not run the scripts that are due
        #[arg(long)]
        no_scripts: bool,
    },
}

/// Parses an age such as `30d`, `12h`, `2w`, `6m` (30-day months) or `1y`.
fn parse_age(s: &str) -> Result<chrono::Duration, String> {
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

/// `remote` subcommands.
#[derive(Subcommand, Debug)]
pub enum RemoteAction {
    /// Save the server address (and --tls / --tls-ca) in <repo>/remote.yaml
    Set {
        /// HOST:PORT
        addr: String,
        /// Use TLS to the server
        #[arg(long)]
        tls: bool,
        /// Trust this PEM certificate or CA bundle for the server (implies --tls)
        #[arg(long, value_name = "FILE")]
        tls_ca: Option<PathBuf>,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Show the saved server
    Show,
    /// Forget the saved server
    Unset {
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
}

/// The parser of every path argument: any bytes but none at all. An empty
/// argument is nearly always an unset shell variable (`sgard add "$TYPO"`),
/// and read as the working folder it would walk or untrack all of it.
fn path_arg() -> impl clap::builder::TypedValueParser<Value = OsString> {
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
