//! Test support: a `moto_server` (PyPI `moto[server]`) on loopback, an
//! S3-compatible API to run the depot's tests against.
//!
//! The executable is `$SGARD_MOTO_SERVER` (CI sets it), else `moto_server`
//! on `PATH`. moto checks `If-Match` / `If-None-Match` on `PutObject` and
//! `CompleteMultipartUpload`, but checks and then stores without a lock, so
//! two conditional writes that arrive together can both pass (measured: 2
//! of 1200 rounds of eight racing writers, on a loaded 2-core machine). S3
//! itself is atomic there. So [`MotoServer`] runs moto's own WSGI app
//! through the executable's Python interpreter with its requests handled
//! one at a time, which makes each check-and-store atomic.
//!
//! The server lives in a small `sh` that kills it when the test process's
//! end of its standard input closes: on [`Drop`], and also when the test
//! process dies without dropping it.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::AwsEnv;

/// The variable naming the `moto_server` executable.
pub const ENV_VAR: &str = "SGARD_MOTO_SERVER";

/// Runs moto's app with one request at a time (see the module's doc).
const SERIAL_MOTO: &str = r#"
import sys, threading
from werkzeug.serving import run_simple
from moto.moto_server import werkzeug_app
app = werkzeug_app.DomainDispatcherApplication(werkzeug_app.create_backend_app)
lock = threading.Lock()
def one_at_a_time(environ, start_response):
    with lock:
        return list(app(environ, start_response))
handler = getattr(werkzeug_app, "MotoRequestHandler", None)
extra = {"request_handler": handler} if handler else {}
run_simple("127.0.0.1", int(sys.argv[1]), one_at_a_time, threaded=True, **extra)
"#;

/// Starts `"$@"` (the server's command, its last argument the port), its
/// output to `$SGARD_MOTO_LOG`, and stops it (and deletes the log) when
/// standard input reaches its end; exits when the server does.
const WATCHDOG: &str = r#"
exec 3<&0
"$@" </dev/null >"$SGARD_MOTO_LOG" 2>&1 3<&- &
server=$!
{ read -r _line <&3; kill "$server" 2>/dev/null; rm -f "$SGARD_MOTO_LOG"; } &
watcher=$!
wait "$server"
kill "$watcher" 2>/dev/null
exit 0
"#;

/// How long a starting server may take to listen.
const START_LIMIT: Duration = Duration::from_secs(60);

/// A running `moto_server` on `127.0.0.1`, stopped when dropped.
#[derive(Debug)]
pub struct MotoServer {
    child: Child,
    stdin: Option<ChildStdin>,
    port: u16,
    /// The server's output (deleted with the server).
    log: tempfile::NamedTempFile,
}

impl MotoServer {
    /// The executable to run: `$SGARD_MOTO_SERVER` when set, else
    /// `moto_server` on `PATH`, else `None`.
    ///
    /// # Errors
    /// When `$SGARD_MOTO_SERVER` is set but names no file: a run that asked
    /// for moto must not quietly skip its tests.
    pub fn executable() -> io::Result<Option<PathBuf>> {
        if let Some(path) = std::env::var_os(ENV_VAR).filter(|v| !v.is_empty()) {
            let path = PathBuf::from(path);
            return if path.is_file() {
                Ok(Some(path))
            } else {
                Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{ENV_VAR}={} is not a file", path.display()),
                ))
            };
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        Ok(std::env::split_paths(&path)
            .map(|dir| dir.join("moto_server"))
            .find(|candidate| candidate.is_file()))
    }

    /// Starts the server found by [`MotoServer::executable`]; `None` (with a
    /// note on standard error) when there is none.
    ///
    /// # Errors
    /// As [`MotoServer::executable`] and [`MotoServer::start_with`].
    pub fn start() -> io::Result<Option<MotoServer>> {
        match Self::executable()? {
            Some(exe) => Self::start_with(&exe).map(Some),
            None => {
                eprintln!(
                    "note: moto_server not found (set {ENV_VAR} or put it on PATH): skipping the S3 tests"
                );
                Ok(None)
            }
        }
    }

    /// Starts `exe` on a free loopback port and waits until it listens.
    ///
    /// # Errors
    /// When it cannot be started or does not listen in time (tried on three
    /// ports, in case another process took the free port first).
    pub fn start_with(exe: &Path) -> io::Result<MotoServer> {
        let mut last = io::Error::other("not tried");
        for _ in 0..3 {
            match Self::try_start(exe) {
                Ok(server) => return Ok(server),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn try_start(exe: &Path) -> io::Result<MotoServer> {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        let mut command = Command::new("sh");
        command.arg("-c").arg(WATCHDOG).arg("sgard-moto");
        match python_of(exe) {
            Some(python) => command.arg(python).arg("-c").arg(SERIAL_MOTO),
            None => {
                eprintln!(
                    "note: no Python found for {}: running it as it is, with conditional writes that are not atomic",
                    exe.display()
                );
                command.arg(exe).arg("-H").arg("127.0.0.1").arg("-p")
            }
        };
        let log = tempfile::Builder::new()
            .prefix("sgard-moto-")
            .suffix(".log")
            .tempfile()?;
        let mut child = command
            .arg(port.to_string())
            .env("SGARD_MOTO_LOG", log.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take();
        let mut server = MotoServer {
            child,
            stdin,
            port,
            log,
        };
        let started = Instant::now();
        loop {
            if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                return Ok(server);
            }
            if let Some(status) = server.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "{} exited ({status}) before listening on port {port}; its output ends:\n{}",
                    exe.display(),
                    server.log_tail()
                )));
            }
            if started.elapsed() > START_LIMIT {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{} did not listen on port {port}", exe.display()),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of the server's output.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The server's port on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Settings for a depot on this server (fixed test credentials, plain
    /// http allowed).
    pub fn aws_env(&self) -> AwsEnv {
        AwsEnv {
            access_key_id: Some("testing".into()),
            secret_access_key: Some("testing".into()),
            session_token: None,
            region: Some("us-east-1".into()),
            endpoint: Some(self.endpoint()),
            allow_http: Some("true".into()),
        }
    }

    /// Creates the bucket `name` (moto accepts an unsigned request).
    ///
    /// # Errors
    /// When the request fails or is not answered `200`.
    pub fn create_bucket(&self, name: &str) -> io::Result<()> {
        self.request("PUT", &format!("/{name}"))
            .map_err(|e| io::Error::other(format!("creating bucket {name}: {e}")))
    }

    /// Resets the store, as an operator wiping it would: every bucket and
    /// everything in it is gone (moto's `POST /moto-api/reset`).
    ///
    /// # Errors
    /// When the request fails or is not answered `200`.
    pub fn reset(&self) -> io::Result<()> {
        self.request("POST", "/moto-api/reset")
            .map_err(|e| io::Error::other(format!("resetting moto: {e}")))
    }

    /// Sends `METHOD path` with no body; `Ok` when answered `200`.
    fn request(&self, method: &str, path: &str) -> io::Result<()> {
        let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port))?;
        stream.set_read_timeout(Some(START_LIMIT))?;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )?;
        let mut status = String::new();
        BufReader::new(&mut stream).read_line(&mut status)?;
        let mut rest = Vec::new();
        // The body is not needed; read it so the server is not cut off.
        let _ = stream.read_to_end(&mut rest);
        if status.split_whitespace().nth(1) == Some("200") {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "moto answered {:?}",
                status.trim_end()
            )))
        }
    }
}

/// The Python interpreter that runs `exe`: the one on its `#!` line (a
/// console script), else a `python3` beside it (a pyenv shim, say).
fn python_of(exe: &Path) -> Option<PathBuf> {
    shebang_python(exe).or_else(|| {
        let beside = exe.parent()?.join("python3");
        beside.is_file().then_some(beside)
    })
}

fn shebang_python(exe: &Path) -> Option<PathBuf> {
    let mut first = String::new();
    BufReader::new(std::fs::File::open(exe).ok()?)
        .take(4096)
        .read_line(&mut first)
        .ok()?;
    let interpreter = first.strip_prefix("#!")?.split_whitespace().next()?;
    let name = Path::new(interpreter).file_name()?.to_str()?;
    name.starts_with("python")
        .then(|| PathBuf::from(interpreter))
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        // End of input: the watchdog kills the server and exits.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
