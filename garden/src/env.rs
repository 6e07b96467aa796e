//! What a Garden needs to know about the world it runs in.
//!
//! The library never reads environment variables or the clock itself: the
//! CLI builds an [`Env`] once (honouring `SGARD_NOW` and `SGARD_HOSTNAME`)
//! so tests are deterministic.

use std::path::PathBuf;

use sgard_manifest::Timestamp;

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
    /// `FILE` exists, so a test can run another command in between.
    pub wait_at: Option<(String, PathBuf)>,
    /// Test hook (`SGARD_TEST_SCAN_WINDOW`): how many entries one window of
    /// a scan or an add's copying covers (`None`: the default, 8192), so
    /// tests cross window boundaries with a few files.
    pub scan_window: Option<usize>,
    /// Test hook (`SGARD_TEST_CHUNK_STALL`): a chunked write stops for good
    /// (sleeps until killed) after this many commits, so a test can kill -9
    /// it at a known point.
    pub chunk_stall: Option<u32>,
    /// How long a SQLite database locked by another process is waited for
    /// (`SGARD_SQLITE_TIMEOUT_MS`; `None`: 10 s).
    pub sqlite_timeout: Option<std::time::Duration>,
    /// sgard's machine-local configuration folder (`$XDG_CONFIG_HOME/sgard`,
    /// else `~/.config/sgard`): its `data.yaml` overlays the repository's.
    pub config_dir: Option<PathBuf>,
    /// The user's login name (`USER`, else `LOGNAME`), for templates.
    pub username: String,
}

impl Env {
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
        }
    }
}
