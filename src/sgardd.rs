//! sgardd: the sgard sync server.
//!
//! Serves one repository over gRPC (`sgard.v1.GardenSync`, wire-compatible
//! with the Go sgardd) to `sgard push` / `sgard pull`, authenticating clients
//! by their SSH keys.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use sgard::context;
use sgard::remote::auth::Authority;
use sgard::remote::server::{Limits, Service, serve};
use sgard_garden::Garden;

/// sgardd serves an sgard repository to `sgard push` and `sgard pull`.
#[derive(Parser, Debug)]
#[command(name = "sgardd", version, about)]
struct Args {
    /// The repository to serve
    #[arg(long, value_name = "PATH", default_value = "/srv/sgard")]
    repo: PathBuf,
    /// Create the repository if it does not exist
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
    /// The largest blob accepted, in bytes
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 30)]
    max_blob_size: u64,
    /// Push streams served at once
    #[arg(long, value_name = "N", default_value_t = 16)]
    max_streams: usize,
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sgardd: error: {e}");
            let mut last = e.to_string();
            for c in e.chain().skip(1) {
                let text = c.to_string();
                if text != last {
                    eprintln!("  caused by: {text}");
                }
                last = text;
            }
            ExitCode::from(1)
        }
    }
}

fn run(args: Args) -> Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .init();
    if args.insecure_no_auth && !args.listen.ip().is_loopback() {
        bail!("--insecure-no-auth only serves a loopback address (127.0.0.1 or ::1)");
    }
    let env = context::env()?;
    let repo = env.resolve(args.repo.as_os_str());
    if !repo.join(sgard_manifest::MANIFEST_FILE).exists() {
        if !args.init {
            bail!(
                "no sgard repository at {} (use --init to create one)",
                repo.display()
            );
        }
        // Older than any machine's repository, so the Go client's first
        // push (taken only when newer than the server's) is taken.
        Garden::init(&repo, env.clone())?.backdate_empty_head()?;
    }
    let auth = match &args.authorized_keys {
        Some(k) => Some(Arc::new(
            Authority::new(k, &repo)?.with_clock_offset(context::server_clock_offset()),
        )),
        None => None,
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
    let limits = Limits {
        max_blob: args.max_blob_size,
        max_streams: args.max_streams,
        prune_grace: Duration::from_secs(3600),
    };
    let env_fn: Arc<dyn Fn() -> Result<sgard_garden::Env, String> + Send + Sync> =
        Arc::new(|| context::env().map_err(|e| e.to_string()));
    let service = Service::new(repo.clone(), env_fn, auth.clone(), limits);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        let local = listener.local_addr()?;
        if tls.is_some() {
            println!("TLS enabled");
        }
        match &args.authorized_keys {
            Some(k) => println!(
                "Auth enabled: {} ({} key{})",
                k.display(),
                auth.as_ref().map_or(0, |a| a.key_count()),
                if auth.as_ref().map_or(0, |a| a.key_count()) == 1 {
                    ""
                } else {
                    "s"
                }
            ),
            None => println!("WARNING: authentication disabled (--insecure-no-auth)"),
        }
        println!("sgardd serving on {local} (repo: {})", repo.display());
        use std::io::Write;
        let _ = std::io::stdout().flush();
        serve(listener, service, tls, shutdown_signal()).await
    })
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        () = term => {},
    }
    tracing::info!("shutting down: finishing calls in progress");
}
