//! sgardd: the sgard sync server.
//!
//! Serves one repository over gRPC (`sgard.v1.GardenSync`, wire-compatible
//! with the Go sgardd) to `sgard push` / `sgard pull`, authenticating clients
//! by their SSH keys. Operations: the standard gRPC health service,
//! Prometheus metrics and HTTP health probes on `--metrics ADDR`,
//! `--log-format json` (every line sgardd writes, once its flags are read),
//! health that follows the store (checked every `--store-check-interval`
//! seconds: `NOT_SERVING` while it fails), and a graceful shutdown on
//! SIGTERM/SIGINT: `--shutdown-delay` seconds still serving with health
//! `NOT_SERVING`, then up to `--shutdown-grace` for the calls in progress.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use sgard_garden::Garden;
use sgard_server::auth::Authority;
use sgard_server::local::Local;
use sgard_server::object::Object;
use sgard_server::{Backend, Limits, Service, serve};
use sgard_server::{health, metrics};

/// sgardd serves sgard gardens to `sgard push` and `sgard pull`, from a folder or an object store.
#[derive(Parser, Debug)]
#[command(
    name = "sgardd",
    version,
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Where the gardens are kept: a folder (an sgard repository, the
    /// default garden; the others in gardens/NAME in it), or an object
    /// store, s3://BUCKET/PREFIX (credentials and endpoint from the AWS_*
    /// variables)
    #[arg(
        long,
        visible_alias = "repo",
        value_name = "DIR|s3://BUCKET/PREFIX",
        default_value = "/srv/sgard"
    )]
    store: String,
    /// Create the repository if it does not exist (a folder store)
    #[arg(long)]
    init: bool,
    /// Address to listen on
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9473")]
    listen: SocketAddr,
    /// OpenSSH authorized_keys file of the keys allowed in (reloaded when it changes)
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "insecure_no_auth"
    )]
    authorized_keys: Option<PathBuf>,
    /// Serve without authentication (only on a loopback address)
    #[arg(long, conflicts_with = "authorized_keys")]
    insecure_no_auth: bool,
    /// TLS certificate (PEM); needs --tls-key
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM); needs --tls-cert
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The largest file accepted, in bytes, whether it comes whole or in
    /// chunks (its chunk list names its size); `--max-blob-size` is the old
    /// name
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 30, alias = "max-blob-size")]
    max_file_size: u64,
    /// Push streams served at once
    #[arg(long, value_name = "N", default_value_t = 16)]
    max_streams: usize,
    /// How long a push past --max-streams waits for a free stream before it
    /// is refused (sgard clients then try again after a pause); at most 50,
    /// under the 60 s clients wait for an answer
    #[arg(long, value_name = "SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(0..=50))]
    queue_wait: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics, and health probes
    /// at /healthz (the process is up) and /readyz (200 SERVING, or 503
    /// NOT_SERVING while the store fails or once shutting down) (no
    /// authentication: use a loopback or private address)
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// How log lines are written on stderr; with json, the start-up lines
    /// and a fatal error are JSON log lines on stderr too, and nothing is
    /// written on stdout
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// On SIGTERM or SIGINT, how long to go on serving with health
    /// NOT_SERVING (so that load balancers stop sending calls here) before
    /// closing the listener; the grace period follows
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    shutdown_delay: u64,
    /// On SIGTERM or SIGINT, how long calls in progress may take to finish,
    /// once the listener is closed, before they are cut off
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    shutdown_grace: u64,
    /// How often to check that the store answers (an object store: one
    /// list of its prefix; a folder: its manifest can be read), in seconds,
    /// fractions allowed; 0: never. Two failed checks in a row turn health
    /// NOT_SERVING until two pass; a call that fails UNAVAILABLE brings
    /// the next check forward
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = check_interval)]
    store_check_interval: Duration,
}

/// `--store-check-interval`: seconds (fractions allowed), 0 (never) or
/// 0.1 to 3600.
fn check_interval(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if secs == 0.0 || (0.1..=3600.0).contains(&secs) {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err("give 0 (never) or 0.1 to 3600 seconds".to_owned())
    }
}

/// What sgardd does besides serving.
#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Copy every garden (objects, heads, history, signatures, fleet
    /// records, the token key) of one store into another: a folder into an
    /// object store, or back. Run it again to copy what changed since; it
    /// never replaces a head the source's history does not hold.
    Migrate {
        /// The store to copy from
        #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
        from: String,
        /// The store to copy into (a folder is made if missing)
        #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
        to: String,
        /// Say what would be copied; copy nothing
        #[arg(long, short = 'n')]
        dry_run: bool,
    },
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// One line of text per event
    Text,
    /// One JSON object per line (fields at the top level)
    Json,
}

fn main() -> ExitCode {
    // A usage error (exit 2) is plain text on stderr: the log format is
    // not known yet.
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    let format = args.log_format;
    init_logs(format);
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            fatal(format, &e);
            let refused = e.chain().any(|c| c.downcast_ref::<Refused>().is_some());
            ExitCode::from(if refused { 4 } else { 1 })
        }
    }
}

/// Says the error that stops sgardd: `sgardd: error: …` and its causes
/// (`--log-format text`), or one ERROR log line with a `caused_by` field
/// (`json`).
fn fatal(format: LogFormat, e: &anyhow::Error) {
    // Wrapped errors often repeat their source's text (the S3 client's
    // each do): a cause is said only when nothing said before holds it.
    let mut said = vec![e.to_string()];
    let mut causes = Vec::new();
    for c in e.chain().skip(1) {
        let text = c.to_string();
        if text.trim().is_empty() || said.iter().any(|s| s.contains(&text)) {
            continue;
        }
        said.push(text.clone());
        causes.push(text);
    }
    match format {
        LogFormat::Text => {
            eprintln!("sgardd: error: {e}");
            for c in causes {
                eprintln!("  caused by: {c}");
            }
        }
        LogFormat::Json if causes.is_empty() => tracing::error!("sgardd: error: {e}"),
        LogFormat::Json => {
            tracing::error!(caused_by = causes.join(": "), "sgardd: error: {e}");
        }
    }
}

/// A refusal (exit 4), not a failure.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refused(String);

/// The test hook `SGARD_TEST_CLOCK_OFFSET`: seconds added to the server's
/// clock, so a test can run a server whose clock is wrong.
fn clock_offset() -> i64 {
    std::env::var("SGARD_TEST_CLOCK_OFFSET")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// How long unreferenced objects survive a server prune: an hour, or the
/// test hook `SGARD_TEST_PRUNE_GRACE` (seconds), so tests can prune what a
/// killed push left without waiting an hour.
fn prune_grace() -> Duration {
    let secs = std::env::var("SGARD_TEST_PRUNE_GRACE")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(3600);
    Duration::from_secs(secs)
}

/// Where a store is: `s3://…` and `memory:` are object stores, anything
/// else a folder.
fn location_of(text: &str, env: &sgard_garden::Env) -> Result<sgard_depot::Location> {
    Ok(if text.starts_with("s3://") || text == "memory:" {
        sgard_depot::Location::parse(text)?
    } else {
        sgard_depot::Location::Dir(env.resolve(std::ffi::OsStr::new(text)))
    })
}

/// `sgardd migrate`.
fn migrate(from: &str, to: &str, dry: bool) -> Result<()> {
    use sgard_server::migrate::{self, Side};
    let env = sgard_garden::Env::from_process()?;
    let (from_loc, to_loc) = (location_of(from, &env)?, location_of(to, &env)?);
    if from_loc == to_loc {
        bail!("--from and --to name the same store");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let env_fn: Arc<dyn Fn() -> Result<sgard_garden::Env, String> + Send + Sync> =
        Arc::new(|| sgard_garden::Env::from_process().map_err(|e| e.to_string()));
    let side = |loc: sgard_depot::Location, shown: &str| -> Result<Side> {
        Ok(match loc {
            sgard_depot::Location::Dir(dir) => Side::Dir(dir),
            other => {
                let depot = open_depot(&other)?;
                rt.block_on(depot.check())
                    .with_context(|| format!("opening {shown}"))?;
                Side::Objects(Arc::new(Object::new(
                    depot,
                    env_fn.clone(),
                    1 << 30,
                    prune_grace(),
                )))
            }
        })
    };
    let (src, dst) = (side(from_loc, from)?, side(to_loc, to)?);
    let say = |line: &str| println!("{line}");
    let report = rt.block_on(migrate::migrate(&src, &dst, env, dry, &say))?;
    if report.token_key {
        println!(
            "token key {}copied: tokens issued by the old server stay valid",
            if dry { "would be " } else { "" }
        );
    }
    let refused: Vec<&str> = report
        .gardens
        .iter()
        .filter(|g| matches!(g.head, Some(sgard_server::object::Imported::Refused(_))))
        .map(|g| g.name.as_str())
        .collect();
    if !refused.is_empty() {
        return Err(anyhow::Error::new(Refused(format!(
            "{} in {to} already {} another head, not one of {from}'s history: left as {}",
            refused.join(", "),
            if refused.len() == 1 { "has" } else { "have" },
            if refused.len() == 1 {
                "it was"
            } else {
                "they were"
            },
        ))));
    }
    Ok(())
}

/// Logs on stderr, as text or one JSON object per line.
fn init_logs(format: LogFormat) {
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false);
    match format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
}

fn run(args: Args) -> Result<()> {
    if let Some(Command::Migrate { from, to, dry_run }) = &args.command {
        return migrate(from, to, *dry_run);
    }
    if args.insecure_no_auth && !args.listen.ip().is_loopback() {
        bail!("--insecure-no-auth only serves a loopback address (127.0.0.1 or ::1)");
    }
    let env = sgard_garden::Env::from_process()?;
    let location = location_of(&args.store, &env)?;
    let limits = Limits {
        max_blob: args.max_file_size,
        max_streams: args.max_streams,
        queue_wait: Duration::from_secs(args.queue_wait),
        prune_grace: prune_grace(),
    };
    let env_fn: Arc<dyn Fn() -> Result<sgard_garden::Env, String> + Send + Sync> =
        Arc::new(|| sgard_garden::Env::from_process().map_err(|e| e.to_string()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let clock = clock_offset();
    let (backend, auth, repo, shown, store, probe): (
        Arc<dyn Backend>,
        _,
        Option<PathBuf>,
        String,
        String,
        health::Probe,
    ) = match location {
        sgard_depot::Location::Dir(repo) => {
            if !repo.join(sgard_manifest::MANIFEST_FILE).exists() {
                if !args.init {
                    bail!(
                        "no sgard repository at {} (use --init to create one)",
                        repo.display()
                    );
                }
                // Older than any machine's repository, so the Go
                // client's first push (taken only when newer than the
                // server's) is taken.
                Garden::init(&repo, env.clone())?.backdate_empty_head()?;
            }
            let auth = match &args.authorized_keys {
                Some(k) => Some(Arc::new(Authority::new(k, &repo)?.with_clock_offset(clock))),
                None => None,
            };
            let backend = Local::new(
                repo.clone(),
                env_fn,
                auth.clone(),
                limits.max_blob,
                limits.prune_grace,
            );
            let store = repo.display().to_string();
            let shown = format!("repo: {store}");
            let probe = health::file_probe(repo.join(sgard_manifest::MANIFEST_FILE));
            (Arc::new(backend), auth, Some(repo), shown, store, probe)
        }
        other => {
            let shown = format!("store: {}", args.store);
            let depot = open_depot(&other)?;
            rt.block_on(depot.check())?;
            let probe = health::depot_probe(depot.clone());
            let backend = Object::new(depot, env_fn, limits.max_blob, limits.prune_grace);
            let auth = match &args.authorized_keys {
                Some(k) => {
                    let secret = rt.block_on(backend.token_secret())?;
                    Some(Arc::new(
                        Authority::with_secret(k, secret)?.with_clock_offset(clock),
                    ))
                }
                None => None,
            };
            (
                Arc::new(backend),
                auth,
                None,
                shown,
                args.store.clone(),
                probe,
            )
        }
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(c), Some(k)) => {
            let cert = std::fs::read(c).with_context(|| format!("reading {}", c.display()))?;
            let key = std::fs::read(k).with_context(|| format!("reading {}", k.display()))?;
            Some(
                tonic::transport::ServerTlsConfig::new()
                    .identity(tonic::transport::Identity::from_pem(cert, key)),
            )
        }
        _ => None,
    };
    let service = Service::new(backend, auth.clone(), limits);
    let grace = Duration::from_secs(args.shutdown_grace);
    let delay = Duration::from_secs(args.shutdown_delay);
    let check = (!args.store_check_interval.is_zero()).then(|| health::StoreCheck {
        store: store.clone(),
        every: args.store_check_interval,
        probe,
    });
    let served = rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        let local = listener.local_addr()?;
        let metrics_listener = match args.metrics {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("listening on {addr} (--metrics)"))?,
            ),
            None => None,
        };
        // The start-up lines: plain on stdout (scripts wait for `sgardd
        // serving on`), or log lines like every other (JSON).
        let json = args.log_format == LogFormat::Json;
        if tls.is_some() {
            if json {
                tracing::info!(tls = true, "TLS enabled");
            } else {
                println!("TLS enabled");
            }
        }
        match &args.authorized_keys {
            Some(k) => {
                let n = auth.as_ref().map_or(0, |a| a.key_count());
                let line = format!(
                    "Auth enabled: {} ({n} key{})",
                    k.display(),
                    if n == 1 { "" } else { "s" }
                );
                if json {
                    tracing::info!(authorized_keys = %k.display(), keys = n, "{line}");
                } else {
                    println!("{line}");
                }
            }
            None if json => tracing::warn!("authentication disabled (--insecure-no-auth)"),
            None => println!("WARNING: authentication disabled (--insecure-no-auth)"),
        }
        let signals = signals()?;
        if let Some(l) = metrics_listener {
            let url = format!("http://{}/metrics", l.local_addr()?);
            if json {
                tracing::info!(metrics = %url, "sgardd metrics on {url}");
            } else {
                println!("sgardd metrics on {url}");
            }
            tokio::spawn(metrics::serve(l, repo.clone()));
        }
        if json {
            tracing::info!(
                addr = %local,
                store = %store,
                version = env!("CARGO_PKG_VERSION"),
                "sgardd serving on {local} ({shown})"
            );
        } else {
            println!("sgardd serving on {local} ({shown})");
            use std::io::Write;
            let _ = std::io::stdout().flush();
        }
        let mut first = signals.clone();
        let draining = async move {
            // An error: the signal task is gone; serve on.
            if first.wait_for(|n| *n >= 1).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        // Polled once `draining` is over and health says NOT_SERVING (a
        // second signal meanwhile: see `cut_off`).
        let stop = async move {
            if !delay.is_zero() {
                tracing::info!(
                    calls = metrics::calls_in_flight(),
                    delay_secs = delay.as_secs(),
                    "shutting down: health NOT_SERVING; still serving for the delay \
                     (--shutdown-delay) before closing the listener"
                );
                tokio::time::sleep(delay).await;
            }
            tracing::info!(
                calls = metrics::calls_in_flight(),
                grace_secs = grace.as_secs(),
                "shutting down: no new connections; finishing the calls in progress"
            );
        };
        let mut more = signals;
        let cut_off = async move {
            if more.wait_for(|n| *n >= 1).await.is_err() {
                std::future::pending::<()>().await;
            }
            tokio::select! {
                () = tokio::time::sleep(delay.saturating_add(grace)) => {}
                _ = more.wait_for(|n| *n >= 2) => {
                    tracing::info!("a second signal: not waiting any longer");
                }
            }
        };
        tokio::select! {
            served = serve(listener, service, tls, draining, stop, check) => {
                served.context("serving")
            }
            () = cut_off => {
                // Dropping the calls' tasks (below, with the runtime) ends
                // each one where it waits: a push's unfinished blob is
                // dropped with its temp file, and a manifest is installed
                // whole (on its blocking thread) or not at all.
                tracing::warn!(
                    calls = metrics::calls_in_flight(),
                    "grace period over: cutting off the calls still in progress"
                );
                Ok(())
            }
        }
    });
    // Blocking work already running (a blob being written, a manifest
    // being installed) gets a little longer to end by itself.
    rt.shutdown_timeout(Duration::from_secs(10));
    served?;
    tracing::info!("stopped");
    Ok(())
}

/// Windows: counts Ctrl-C, Ctrl-Break, a closed console and a system
/// shutdown, as SIGINT and SIGTERM are counted on Unix.
#[cfg(windows)]
fn signals() -> Result<tokio::sync::watch::Receiver<u32>> {
    use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close, ctrl_shutdown};
    let mut c = ctrl_c().context("handling Ctrl-C")?;
    let mut b = ctrl_break().context("handling Ctrl-Break")?;
    let mut close = ctrl_close().context("handling the console's close")?;
    let mut down = ctrl_shutdown().context("handling a shutdown")?;
    let (tx, rx) = tokio::sync::watch::channel(0u32);
    tokio::spawn(async move {
        loop {
            let got = tokio::select! {
                s = c.recv() => s,
                s = b.recv() => s,
                s = close.recv() => s,
                s = down.recv() => s,
            };
            if got.is_none() {
                break;
            }
            tx.send_modify(|n| *n += 1);
        }
    });
    Ok(rx)
}

/// Counts the SIGTERMs and SIGINTs received from now on (the handlers
/// are in place when this returns, before the server says it serves): the
/// first starts the shutdown, a second ends the grace period at once.
#[cfg(unix)]
fn signals() -> Result<tokio::sync::watch::Receiver<u32>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    let (tx, rx) = tokio::sync::watch::channel(0u32);
    tokio::spawn(async move {
        loop {
            let got = tokio::select! {
                s = term.recv() => s,
                s = int.recv() => s,
            };
            if got.is_none() {
                break;
            }
            tx.send_modify(|n| *n += 1);
        }
    });
    Ok(rx)
}

/// Opens an object store, saying what to do when an https store has no CA
/// certificate to be verified with (a slim container image).
fn open_depot(loc: &sgard_depot::Location) -> Result<sgard_depot::Depot> {
    sgard_depot::Depot::open(loc, &sgard_depot::AwsEnv::from_env()).map_err(|e| {
        let text = e.to_string();
        let e = anyhow::Error::new(e);
        if text.contains("CA certificates") {
            e.context(
                "no CA certificate to verify the store's https with: install the system's CA \
                 certificates (Debian: ca-certificates) or set SSL_CERT_FILE to a PEM bundle",
            )
        } else {
            e
        }
    })
}
