//! # sgard-watch: which tracked paths changed, without looking at them
//!
//! A cached `status` of a big home spends its time asking the kernel about
//! every tracked file. `sgard watch` runs a watcher ([`daemon::serve`]):
//! it asks the kernel (inotify, through the `inotify` crate) to report every
//! change in the folders above the tracked paths, numbers the events, and
//! answers, over a private Unix socket, "which paths changed since this
//! token" ([`ask`]). A command then looks only at those.
//!
//! The rules are git's fsmonitor rules:
//! - a token names the watcher's instance and a point in its events; a
//!   token of another instance (a restart), from before an overflow of the
//!   kernel's queue, or for another set of tracked paths gets no list
//!   ("look at everything"), and so does a watcher that is not running;
//! - before it answers, the watcher writes a file of its own (a *cookie*)
//!   in a folder it watches and waits for that event: every change made
//!   before the question is then in the answer (the kernel delivers events
//!   in order);
//! - a change to a folder above a path counts as a change to the path
//!   ([`affects`]): a folder renamed, removed or replaced by a symlink.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod changes;
pub mod daemon;
#[cfg(target_os = "linux")]
mod kernel;

pub use changes::{Changed, LIMIT, Log, affects};

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No watcher answers at the socket.
    #[error("no watcher is running (nothing answers at {0})")]
    NotRunning(PathBuf),
    /// Another watcher already serves this socket.
    #[error("a watcher is already running for this repository (its lock is {0})")]
    AlreadyRunning(PathBuf),
    /// The socket's path is longer than a Unix socket address can hold.
    #[error("the socket path {0} is too long for a Unix socket (at most 100 bytes)")]
    SocketPath(PathBuf),
    /// The watcher said something that is not an answer.
    #[error("the watcher at {path} answered badly: {why}")]
    Protocol {
        /// The socket.
        path: PathBuf,
        /// What was wrong.
        why: String,
    },
    /// An I/O error on a path.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Not on this platform.
    #[error(
        "sgard watch runs on Linux only for now (inotify); here status looks at every tracked file"
    )]
    Unsupported,
}

/// The crate's results.
pub type Result<T> = std::result::Result<T, Error>;

/// The longest socket path used as it is (a Unix socket's address holds
/// 108 bytes with its NUL on Linux, 104 on macOS).
#[cfg(unix)]
const SOCKET_PATH_MAX: usize = 100;

/// A name for `socket` that fits a Unix socket's address: the path itself
/// when it is short enough, else (Linux) the path through `/proc/self/fd`
/// of its folder, opened here: the first element, kept open for as long as
/// the name is used. A state folder deep in a long path (a long
/// `XDG_STATE_HOME`) works like any other.
///
/// # Errors
/// [`Error::SocketPath`] when no short name exists; [`Error::Io`] when the
/// folder cannot be opened.
#[cfg(unix)]
pub(crate) fn socket_name(socket: &Path) -> Result<(Option<rustix::fd::OwnedFd>, PathBuf)> {
    if socket.as_os_str().len() <= SOCKET_PATH_MAX {
        return Ok((None, socket.to_path_buf()));
    }
    #[cfg(target_os = "linux")]
    if let (Some(dir), Some(name)) = (socket.parent(), socket.file_name()) {
        use rustix::fd::AsRawFd;
        use rustix::fs::{Mode, OFlags};
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(dir, flags, Mode::empty()).map_err(|e| io(dir)(e.into()))?;
        let name = Path::new("/proc/self/fd")
            .join(fd.as_raw_fd().to_string())
            .join(name);
        if name.as_os_str().len() <= SOCKET_PATH_MAX {
            return Ok((Some(fd), name));
        }
    }
    Err(Error::SocketPath(socket.to_path_buf()))
}

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A point in one watcher's events (see the crate documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// Which run of the watcher gave it.
    pub instance: u64,
    /// How many events it had numbered.
    pub seq: u64,
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}:{}", self.instance, self.seq)
    }
}

impl std::str::FromStr for Token {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (i, n) = s
            .split_once(':')
            .ok_or_else(|| format!("not a token: {s:?}"))?;
        Ok(Token {
            instance: u64::from_str_radix(i, 16).map_err(|e| format!("token {s:?}: {e}"))?,
            seq: n.parse().map_err(|e| format!("token {s:?}: {e}"))?,
        })
    }
}

/// The watcher's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The token to ask with next time: it covers everything before the
    /// question.
    pub token: Token,
    /// The paths changed since the token asked with (sorted); `Err`: they
    /// cannot be told, and why (look at everything).
    pub changed: std::result::Result<Vec<PathBuf>, String>,
}

/// A path on the wire: text when it is UTF-8, else its bytes.
#[derive(Serialize, Deserialize, Debug)]
#[serde(untagged)]
enum WirePath {
    Text(String),
    Bytes(Vec<u8>),
}

impl WirePath {
    /// Only the watcher (Linux) sends paths.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn of(p: &Path) -> Self {
        match p.to_str() {
            Some(s) => WirePath::Text(s.to_owned()),
            None => WirePath::Bytes(bytes_of(p)),
        }
    }

    fn into_path(self) -> PathBuf {
        match self {
            WirePath::Text(s) => PathBuf::from(s),
            WirePath::Bytes(b) => path_of(b),
        }
    }
}

#[cfg(unix)]
fn bytes_of(p: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes().to_vec()
}

#[cfg(not(unix))]
fn bytes_of(p: &Path) -> Vec<u8> {
    p.to_string_lossy().into_owned().into_bytes()
}

#[cfg(unix)]
fn path_of(b: Vec<u8>) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(b))
}

#[cfg(not(unix))]
fn path_of(b: Vec<u8>) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(&b).into_owned())
}

/// A question, one JSON line.
#[derive(Serialize, Deserialize, Debug)]
pub(crate) struct Request {
    v: u32,
    /// The set of tracked paths the asker expects the watcher to watch.
    set: String,
    /// The token to answer from.
    since: Option<String>,
    /// Test hook: act as if the kernel's queue had overflowed first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    overflow: bool,
    /// Not a question: say what is watched ([`probe`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    info: bool,
    /// Only the token that names this moment, whatever the set ([`now`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    now: bool,
}

impl Request {
    /// A question that is not about a set: a description, or a token.
    fn plain(info: bool, now: bool) -> Self {
        Request {
            v: 1,
            set: String::new(),
            since: None,
            overflow: false,
            info,
            now,
        }
    }
}

/// An answer, one JSON line.
#[derive(Serialize, Deserialize, Debug)]
pub(crate) struct Response {
    v: u32,
    token: String,
    changed: Option<Vec<WirePath>>,
    #[serde(default)]
    why: Option<String>,
    /// For [`probe`]: what is watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    info: Option<Info>,
}

/// What a watcher says of itself ([`probe`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Info {
    /// The id of the set of tracked paths it watches.
    pub set: String,
    /// How many tracked paths.
    pub paths: usize,
    /// How many folders it watches.
    pub folders: usize,
    /// Why every answer says to look at everything, if it does.
    pub broken: Option<String>,
    /// Folders it cannot vouch for (a network file system, a folder it
    /// cannot watch): what is under them is always looked at.
    #[serde(default)]
    pub blind: Vec<PathBuf>,
    /// Its process id.
    pub pid: u32,
}

/// The token that names this moment at the watcher at `socket` (every
/// change made before the call is before it), whatever set it watches.
///
/// # Errors
/// As [`ask`].
pub fn now(socket: &Path, timeout: Duration) -> Result<Token> {
    let resp = exchange(socket, &Request::plain(false, true), timeout)?;
    resp.token.parse().map_err(|why| Error::Protocol {
        path: socket.to_path_buf(),
        why,
    })
}

/// Asks the watcher at `socket` what it watches, changing nothing.
///
/// # Errors
/// As [`ask`].
pub fn probe(socket: &Path, timeout: Duration) -> Result<Info> {
    let resp = exchange(socket, &Request::plain(true, false), timeout)?;
    resp.info.ok_or_else(|| Error::Protocol {
        path: socket.to_path_buf(),
        why: "no description in the answer".into(),
    })
}

/// The longest answer read (a watcher keeps at most [`LIMIT`] paths).
#[cfg(unix)]
const MAX_ANSWER: u64 = 256 << 20;

/// Asks the watcher at `socket` what changed since `since`, for the set of
/// tracked paths `set` (an id the asker and the watcher compute alike; a
/// watcher watching another set starts watching this one and answers that
/// everything must be looked at).
///
/// # Errors
/// [`Error::NotRunning`] when nothing answers at the socket; [`Error::Io`]
/// or [`Error::Protocol`] when the answer fails or is not one.
pub fn ask(socket: &Path, set: &str, since: Option<Token>, timeout: Duration) -> Result<Answer> {
    ask_with(socket, set, since, timeout, false)
}

/// [`ask`], telling the watcher first to act as if its queue overflowed
/// (a test hook: the watcher honours it only when started with it).
///
/// # Errors
/// As [`ask`].
pub fn ask_overflowed(
    socket: &Path,
    set: &str,
    since: Option<Token>,
    timeout: Duration,
) -> Result<Answer> {
    ask_with(socket, set, since, timeout, true)
}

fn ask_with(
    socket: &Path,
    set: &str,
    since: Option<Token>,
    timeout: Duration,
    overflow: bool,
) -> Result<Answer> {
    let req = Request {
        v: 1,
        set: set.to_owned(),
        since: since.map(|t| t.to_string()),
        overflow,
        info: false,
        now: false,
    };
    let resp = exchange(socket, &req, timeout)?;
    let bad = |why: String| Error::Protocol {
        path: socket.to_path_buf(),
        why,
    };
    let token = resp.token.parse().map_err(bad)?;
    let changed = match resp.changed {
        Some(list) => {
            let mut v: Vec<PathBuf> = list.into_iter().map(WirePath::into_path).collect();
            v.sort();
            Ok(v)
        }
        None => Err(resp
            .why
            .unwrap_or_else(|| "the watcher did not say why".into())),
    };
    Ok(Answer { token, changed })
}

/// One question, one answer.
#[cfg(unix)]
fn exchange(socket: &Path, req: &Request, timeout: Duration) -> Result<Response> {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::unix::net::UnixStream;
    // A state folder not made yet: nothing can be answering there.
    let (_folder, name) = match socket_name(socket) {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NotRunning(socket.to_path_buf()));
        }
        other => other?,
    };
    let mut s = match UnixStream::connect(&name) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Err(Error::NotRunning(socket.to_path_buf()));
        }
        Err(e) => return Err(io(socket)(e)),
    };
    s.set_read_timeout(Some(timeout)).map_err(io(socket))?;
    s.set_write_timeout(Some(timeout)).map_err(io(socket))?;
    let mut line = serde_json::to_vec(req).map_err(|e| Error::Protocol {
        path: socket.to_path_buf(),
        why: e.to_string(),
    })?;
    line.push(b'\n');
    s.write_all(&line).map_err(io(socket))?;
    let mut text = Vec::new();
    BufReader::new(s.take(MAX_ANSWER))
        .read_until(b'\n', &mut text)
        .map_err(io(socket))?;
    let bad = |why: String| Error::Protocol {
        path: socket.to_path_buf(),
        why,
    };
    let resp: Response = serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))?;
    if resp.v != 1 {
        return Err(bad(format!("version {}", resp.v)));
    }
    Ok(resp)
}

/// Windows: no watcher runs there (no inotify; `std` has no Unix sockets),
/// so nothing answers: the caller looks at everything.
#[cfg(not(unix))]
fn exchange(_socket: &Path, _req: &Request, _timeout: Duration) -> Result<Response> {
    Err(Error::Unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_read_back_as_written() {
        let t = Token {
            instance: 0xdead_beef,
            seq: 42,
        };
        assert_eq!(t.to_string().parse::<Token>().unwrap(), t);
        assert!("x".parse::<Token>().is_err());
        assert!("zz:1".parse::<Token>().is_err());
        assert!("1:-1".parse::<Token>().is_err());
    }

    /// Windows: no watcher runs, so every question gets "unsupported",
    /// and the asker looks at everything.
    #[cfg(not(unix))]
    #[test]
    fn no_watcher_answers_here() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("watch.sock");
        let t = Duration::from_secs(1);
        assert!(matches!(ask(&s, "set", None, t), Err(Error::Unsupported)));
        assert!(matches!(now(&s, t), Err(Error::Unsupported)));
        assert!(matches!(probe(&s, t), Err(Error::Unsupported)));
    }

    #[test]
    fn paths_that_are_not_utf8_travel_as_bytes() {
        #[cfg(unix)]
        {
            let p = path_of(vec![b'/', 0xff, b'x']);
            let wire = serde_json::to_string(&WirePath::of(&p)).unwrap();
            let back: WirePath = serde_json::from_str(&wire).unwrap();
            assert_eq!(back.into_path(), p);
        }
        let wire = serde_json::to_string(&WirePath::of(Path::new("/h/é"))).unwrap();
        assert_eq!(wire, "\"/h/é\"");
    }
}
