//! What a Garden needs to know about the world it runs in.
//!
//! The library never reads environment variables or the clock itself: the
//! CLI and `sgardd` build an [`Env`] once with [`Env::from_process`]
//! (honouring `SGARD_NOW` and `SGARD_HOSTNAME`), so tests are
//! deterministic.

use std::path::{Path, PathBuf};

use sgard_manifest::Timestamp;

use crate::Error;

/// The variables that carry a passphrase to sgard: never passed on to a
/// program sgard runs (a script, a password manager's client).
pub const PASSPHRASE_VARS: &[&str] = &[
    "SGARD_PASSPHRASE",
    "SGARD_PASSPHRASE_FILE",
    "SGARD_PASSPHRASE_COMMAND",
    "SGARD_NEW_PASSPHRASE",
    "SGARD_NEW_PASSPHRASE_FILE",
];

/// The machine and moment an operation runs in.
#[derive(Clone, Debug)]
pub struct Env {
    /// The user's home folder (absolute); `~` in the manifest means this.
    pub home: PathBuf,
    /// The working folder relative arguments resolve against (absolute).
    pub cwd: PathBuf,
    /// "Now" for every timestamp this command writes.
    pub now: Timestamp,
    /// The machine's host name (any case, possibly fully qualified).
    pub hostname: String,
    /// Where machine-local state lives (`$XDG_STATE_HOME`, else
    /// `~/.local/state`); `None` keeps nothing.
    pub state_dir: Option<PathBuf>,
    /// Where machine-local caches live (`$XDG_CACHE_HOME`, else `~/.cache`);
    /// `None` keeps none. Its `sgard` folder is sgard's own whether or not
    /// the caches are used (see [`Env::no_cache`]).
    pub cache_dir: Option<PathBuf>,
    /// `--no-cache`: the caches are neither read nor written this run (the
    /// cache folder stays where it is, and sgard's own).
    pub no_cache: bool,
    /// Test hook (`SGARD_TEST_CRASH_AT`): the name of a point at which the
    /// process dies at once, as if killed, to test recovery from a crash.
    pub crash_at: Option<String>,
    /// Test hook (`SGARD_TEST_INTERRUPT_AT`): the name of a point at which
    /// the command acts as if Ctrl-C had just been pressed.
    pub interrupt_at: Option<String>,
    /// Test hook (`SGARD_TEST_WAIT_AT=POINT:FILE`): at the named point the
    /// process creates `FILE.reached` and waits (up to a minute) until
    /// `FILE` exists, so a test can run another command in between; a
    /// `FILE` that says `after-signal` then also waits until the signal the
    /// test sent is taken.
    pub wait_at: Option<(String, PathBuf)>,
    /// Test hook (`SGARD_TEST_SCAN_WINDOW`): how many entries one window of
    /// a scan or an add's copying covers (`None`: the default, 8192), so
    /// tests cross window boundaries with a few files.
    pub scan_window: Option<usize>,
    /// Test hook (`SGARD_TEST_RENDER_ONCE_MAX`): the most entries a
    /// checkpoint renders its head document for once, into memory (`None`:
    /// the default, 20,000), so tests take the streamed way with a few.
    pub render_once_max: Option<usize>,
    /// Test hook (`SGARD_TEST_CHUNK_STALL`): a chunked write stops for good
    /// (sleeps until killed) after this many commits, so a test can kill -9
    /// it at a known point.
    pub chunk_stall: Option<u32>,
    /// Test hook (`SGARD_TEST_FOLDING`: `case`, `unicode`, `both`,
    /// `none`): how the home's file system compares names, instead of
    /// asking it (see `folding`).
    pub folding: Option<crate::folding::Folding>,
    /// Test hook (`SGARD_TEST_NO_SYMLINKS`): on Windows, every symlink is
    /// refused as Windows refuses it without Developer Mode, so restores
    /// write their stand-ins (see `standin`). Nothing changes elsewhere.
    pub no_symlinks: bool,
    /// How long a SQLite database locked by another process is waited for
    /// (`SGARD_SQLITE_TIMEOUT_MS`; `None`: 10 s).
    pub sqlite_timeout: Option<std::time::Duration>,
    /// sgard's machine-local configuration folder (`$XDG_CONFIG_HOME/sgard`,
    /// else `~/.config/sgard`): its `data.yaml` overlays the repository's.
    pub config_dir: Option<PathBuf>,
    /// The user's login name (`USER`, else `LOGNAME`), for templates.
    pub username: String,
    /// `SGARD_NO_WATCH`: never ask `sgard watch`, look at every file.
    pub no_watch: bool,
    /// Test hook (`SGARD_TEST_WATCH_STALL`): while this file exists, `sgard
    /// watch` takes no event, so the kernel's queue can overflow.
    pub watch_stall: Option<PathBuf>,
}

impl Env {
    /// The environment of this run, read from the process: `HOME`, the
    /// working folder, `SGARD_NOW` (an RFC 3339 time used as "now"),
    /// `SGARD_HOSTNAME` (overrides the host name), the XDG folders, `USER`
    /// and the test hooks. The CLI and `sgardd` call this once; nothing
    /// else in the libraries reads the environment or the clock.
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] when `HOME` is unset or relative, the
    /// working folder cannot be read, or `SGARD_NOW` is not a time.
    pub fn from_process() -> crate::Result<Env> {
        let home = std::env::home_dir()
            .filter(|h| !h.as_os_str().is_empty())
            .ok_or_else(|| Error::Invalid("cannot tell the home folder: set HOME".into()))?;
        if !home.is_absolute() {
            return Err(Error::Invalid(format!(
                "HOME must be an absolute path, not {}",
                home.display()
            )));
        }
        let cwd = std::env::current_dir()
            .map_err(|e| Error::Invalid(format!("cannot read the working folder: {e}")))?;
        let now = match std::env::var("SGARD_NOW") {
            Ok(s) if !s.is_empty() => {
                Timestamp::parse(&s).map_err(|e| Error::Invalid(format!("SGARD_NOW: {e}")))?
            }
            _ => Timestamp::from_datetime(chrono::Utc::now()),
        };
        let hostname = match std::env::var("SGARD_HOSTNAME") {
            Ok(s) if !s.is_empty() => s,
            _ => gethostname::gethostname().to_string_lossy().into_owned(),
        };
        let state_dir = match std::env::var_os("XDG_STATE_HOME") {
            Some(s) if Path::new(&s).is_absolute() => Some(PathBuf::from(s)),
            _ => Some(home.join(".local/state")),
        };
        let cache_dir = match std::env::var_os("XDG_CACHE_HOME") {
            Some(s) if Path::new(&s).is_absolute() => Some(PathBuf::from(s)),
            _ => Some(home.join(".cache")),
        };
        let config_dir = match std::env::var_os("XDG_CONFIG_HOME") {
            Some(s) if Path::new(&s).is_absolute() => Some(PathBuf::from(s).join("sgard")),
            _ => Some(home.join(".config/sgard")),
        };
        let username = ["USER", "LOGNAME", "USERNAME"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
            .unwrap_or_default();
        let hook = |name| std::env::var(name).ok().filter(|s: &String| !s.is_empty());
        let crash_at = hook("SGARD_TEST_CRASH_AT");
        let interrupt_at = hook("SGARD_TEST_INTERRUPT_AT");
        let wait_at = hook("SGARD_TEST_WAIT_AT").and_then(|s| {
            let (point, file) = s.split_once(':')?;
            Some((point.to_owned(), PathBuf::from(file)))
        });
        let scan_window = hook("SGARD_TEST_SCAN_WINDOW").and_then(|s| s.parse().ok());
        let chunk_stall = hook("SGARD_TEST_CHUNK_STALL").and_then(|s| s.parse().ok());
        let render_once_max = hook("SGARD_TEST_RENDER_ONCE_MAX").and_then(|s| s.parse().ok());
        let folding = hook("SGARD_TEST_FOLDING").and_then(|s| crate::folding::Folding::parse(&s));
        let sqlite_timeout = hook("SGARD_SQLITE_TIMEOUT_MS")
            .and_then(|s| s.parse().ok())
            .map(std::time::Duration::from_millis);
        Ok(Env {
            home: crate::clean(&home),
            cwd: crate::clean(&cwd),
            now,
            hostname,
            state_dir,
            cache_dir,
            no_cache: false,
            crash_at,
            interrupt_at,
            wait_at,
            scan_window,
            chunk_stall,
            render_once_max,
            folding,
            no_symlinks: hook("SGARD_TEST_NO_SYMLINKS").is_some(),
            sqlite_timeout,
            config_dir,
            username,
            no_watch: hook("SGARD_NO_WATCH").is_some(),
            watch_stall: hook("SGARD_TEST_WATCH_STALL").map(PathBuf::from),
        })
    }

    /// The folder machine-local caches live in, when this run uses them.
    pub(crate) fn caches(&self) -> Option<&std::path::Path> {
        self.cache_dir.as_deref().filter(|_| !self.no_cache)
    }

    /// How many entries one window of a scan covers (see
    /// [`Env::scan_window`]).
    pub(crate) fn window(&self) -> usize {
        self.scan_window.unwrap_or(crate::scan::WINDOW).max(1)
    }

    /// Dies here, without unwinding or flushing anything, when the test
    /// hook names this point.
    pub fn crash_point(&self, name: &str) {
        if self.crash_at.as_deref() == Some(name) {
            std::process::abort();
        }
        if self.interrupt_at.as_deref() == Some(name) {
            sgard_store::cancel::request();
        }
        if let Some((point, file)) = &self.wait_at
            && point == name
        {
            let mut reached = file.as_os_str().to_owned();
            reached.push(".reached");
            let _ = std::fs::write(&reached, name);
            let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while !file.exists() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            // A gate that says so opens only once the signal the test sent
            // is taken (the signal thread may not have run yet).
            if std::fs::read(file).is_ok_and(|b| b == b"after-signal") {
                while !sgard_store::cancel::requested() && std::time::Instant::now() < until {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
        }
    }
}
