//! `sgardd`'s Prometheus metrics and the tiny HTTP server behind
//! `--metrics ADDR`, which also answers the health probes of load
//! balancers and Kubernetes that cannot speak gRPC over TLS.
//!
//! The counters live in one process-wide [`Metrics`] (the RPC handlers feed
//! it through [`rpc_done`], [`bytes_received`] and [`bytes_sent`], whether
//! or not `--metrics` is given); `GET /metrics` encodes them in the format
//! the scraper asks for: OpenMetrics when its `Accept` header prefers it
//! (Prometheus does), else the Prometheus text format 0.0.4, each under its
//! own content type. `GET /healthz` says the process is up; `GET /readyz`
//! says whether it takes calls (`SERVING`) or not (`NOT_SERVING`, 503: it
//! is shutting down, or its store fails, named on a second line), as the
//! gRPC health service does (see [`set_serving`] and `crate::health`). `sgardd_objects_stored` is counted from the store
//! when scraped: at the first scrape, then again only when a push or prune
//! finished since the last count or the last count is older than
//! [`OBJECTS_MAX_AGE`], so a busy scraper does not walk the store each time.

use std::convert::Infallible;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use tonic::Code;

/// How stale `sgardd_objects_stored` may get when nothing was pushed or
/// pruned (the store may also be written by hand or by a local `sgard`).
pub const OBJECTS_MAX_AGE: Duration = Duration::from_secs(60);

/// The service whose pushes `sgardd_pushes_in_flight` counts.
const PUSH_PATHS: [&str; 2] = [
    "/sgard.v1.GardenSync/PushBlobs",
    "/sgard.v1.GardenSync/PushManifest",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcCode {
    rpc: String,
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Rpc {
    rpc: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: &'static str,
}

/// The counters of one `sgardd` process.
pub struct Metrics {
    registry: Registry,
    requests: Family<RpcCode, Counter>,
    duration: Family<Rpc, Histogram>,
    refused: Family<Reason, Counter>,
    login_failures: Family<Reason, Counter>,
    bytes_in: Counter,
    bytes_out: Counter,
    objects: Gauge,
    pushes: Gauge,
    store_up: Gauge,
    store_failures: Counter,
    /// Why the store fails its checks, while it does (`/readyz`).
    store_down: Mutex<Option<String>>,
    /// Calls (of any RPC) being served now.
    calls: AtomicU64,
    /// The server takes calls: not before it serves, nor once it shuts
    /// down (`/readyz`).
    serving: AtomicBool,
    /// A push or prune finished since `objects` was counted.
    store_changed: AtomicBool,
    /// When `objects` was last counted.
    counted: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RpcCode, Counter>::default();
        registry.register(
            "sgardd_requests",
            "RPCs served, by method and gRPC status code",
            requests.clone(),
        );
        // 1 ms to ~65 s.
        let duration = Family::<Rpc, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 4.0, 9))
        });
        registry.register(
            "sgardd_request_duration_seconds",
            "Time to answer an RPC, by method (for PullBlobs: until its stream starts)",
            duration.clone(),
        );
        let refused = Family::<Reason, Counter>::default();
        registry.register(
            "sgardd_refusals",
            "Requests refused, by reason: a login or a token refused (`denied`, `unauthenticated`), an object too large (`too_large`), a busy server (`busy`), a push that must pull first (`pull_first`)",
            refused.clone(),
        );
        let login_failures = Family::<Reason, Counter>::default();
        registry.register(
            "sgardd_login_failures",
            "Logins refused, by reason: `unknown_key` (not in authorized_keys), `weak_key` (RSA under 2048 bits), `clock` (signed more than 5 minutes off the server's clock), `bad_signature`, `replay` (a nonce used before), `malformed` (an unreadable key, a bad nonce); each is also one `sgardd_refusals_total` (`denied` for `unknown_key`, else `unauthenticated`)",
            login_failures.clone(),
        );
        // Every reason from the start, so that a rate is defined before
        // the first failure.
        for reason in crate::auth::LoginFailure::ALL {
            login_failures.get_or_create_owned(&Reason {
                reason: reason.as_str(),
            });
        }
        registry.register(
            "sgardd_build",
            "The sgardd build serving: its version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        let bytes_in = Counter::default();
        registry.register(
            "sgardd_bytes_received",
            "Object bytes received from pushes",
            bytes_in.clone(),
        );
        let bytes_out = Counter::default();
        registry.register(
            "sgardd_bytes_sent",
            "Object bytes sent to pulls",
            bytes_out.clone(),
        );
        let objects = Gauge::default();
        registry.register(
            "sgardd_objects_stored",
            "Contents in the store: whole blobs plus chunked contents (counted when scraped, at most once a minute unless a push or prune finished)",
            objects.clone(),
        );
        let pushes = Gauge::default();
        registry.register(
            "sgardd_pushes_in_flight",
            "PushBlobs and PushManifest calls being served",
            pushes.clone(),
        );
        let store_up = Gauge::default();
        store_up.set(1);
        registry.register(
            "sgardd_store_up",
            "1 while the store answers its health checks, 0 while it fails them (--store-check-interval; health is NOT_SERVING then)",
            store_up.clone(),
        );
        let store_failures = Counter::default();
        registry.register(
            "sgardd_store_check_failures",
            "Store health checks that failed (each one, also those that did not turn health NOT_SERVING)",
            store_failures.clone(),
        );
        Metrics {
            registry,
            requests,
            duration,
            refused,
            login_failures,
            bytes_in,
            bytes_out,
            objects,
            pushes,
            store_up,
            store_failures,
            store_down: Mutex::new(None),
            calls: AtomicU64::new(0),
            serving: AtomicBool::new(false),
            store_changed: AtomicBool::new(true),
            counted: Mutex::new(None),
        }
    }

    /// The exposition in `format`, with `sgardd_objects_stored` brought up
    /// to date from the store at `repo` when it is due (see the module's
    /// doc; an object store is not counted: listing it costs requests).
    fn render(&self, repo: Option<&Path>, format: Format) -> String {
        if let Some(repo) = repo {
            self.refresh_objects(repo);
        }
        let mut out = String::new();
        let encoded = match format {
            Format::OpenMetrics => {
                prometheus_client::encoding::text::encode(&mut out, &self.registry)
            }
            Format::Text => {
                prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
            }
        };
        if let Err(e) = encoded {
            tracing::warn!("encoding the metrics: {e}");
        }
        out
    }

    fn refresh_objects(&self, repo: &Path) {
        let Ok(mut counted) = self.counted.lock() else {
            return;
        };
        let stale = counted.is_none_or(|t| t.elapsed() >= OBJECTS_MAX_AGE);
        // Cleared before counting: a push ending during the count makes
        // the next scrape count again.
        let changed = self.store_changed.swap(false, Ordering::AcqRel);
        if !stale && !changed {
            return;
        }
        match count_objects(repo) {
            Ok(n) => {
                self.objects.set(i64::try_from(n).unwrap_or(i64::MAX));
                *counted = Some(Instant::now());
            }
            Err(e) => tracing::warn!(
                "counting the stored objects: {}",
                sgard_garden::error_chain(&e)
            ),
        }
    }
}

/// Whole blobs plus chunked contents (chunk lists) in the repository's
/// store; the chunks themselves are not counted.
fn count_objects(repo: &Path) -> sgard_store::Result<usize> {
    let store = sgard_store::Store::open(repo);
    let mut n = store.list()?.len();
    if let Some(cs) = store.chunked() {
        n += cs.lists()?.len();
    }
    Ok(n)
}

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

/// Records an RPC that ended with `code` after `took`.
pub fn rpc_done(rpc: &str, code: Code, took: Duration) {
    let m = global();
    m.requests
        .get_or_create(&RpcCode {
            rpc: rpc.to_owned(),
            code: code_name(code),
        })
        .inc();
    m.duration
        .get_or_create(&Rpc {
            rpc: rpc.to_owned(),
        })
        .observe(took.as_secs_f64());
    if code == Code::Ok && matches!(rpc, "PushBlobs" | "PushManifest" | "Prune") {
        m.store_changed.store(true, Ordering::Release);
    }
}

/// Counts one refusal, by reason (see `sgardd_refusals`).
pub fn refused(reason: &'static str) {
    global().refused.get_or_create(&Reason { reason }).inc();
}

/// Counts one refused login, by reason (see `sgardd_login_failures`).
pub fn login_failed(reason: crate::auth::LoginFailure) {
    global()
        .login_failures
        .get_or_create(&Reason {
            reason: reason.as_str(),
        })
        .inc();
}

/// Whether the server takes calls: `true` once it serves, `false` from
/// the moment it shuts down. `GET /readyz` answers by it.
pub fn set_serving(serving: bool) {
    global().serving.store(serving, Ordering::Release);
}

/// The store fails its health checks (`Some(why)`), or answers them
/// (`None`): `sgardd_store_up`, and the cause `/readyz` gives.
pub fn set_store_down(why: Option<&str>) {
    let m = global();
    m.store_up.set(i64::from(why.is_none()));
    if let Ok(mut down) = m.store_down.lock() {
        *down = why.map(str::to_owned);
    }
}

/// Counts one failed store health check.
pub fn store_check_failed() {
    global().store_failures.inc();
}

/// Counts `n` object bytes received from a push.
pub fn bytes_received(n: usize) {
    global().bytes_in.inc_by(n as u64);
}

/// Counts `n` object bytes sent to a pull.
pub fn bytes_sent(n: usize) {
    global().bytes_out.inc_by(n as u64);
}

/// Calls being served now (of any RPC).
pub fn calls_in_flight() -> u64 {
    global().calls.load(Ordering::Acquire)
}

/// The name of a gRPC status code, as gRPC's Go library and most
/// dashboards spell it (`OK`, `NotFound`, `Unavailable`, ...).
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

/// A tower layer counting the calls in flight (all of them, and pushes
/// for `sgardd_pushes_in_flight`) until each handler has answered.
#[derive(Clone, Copy, Debug, Default)]
pub struct InFlightLayer;

impl<S> tower::Layer<S> for InFlightLayer {
    type Service = InFlight<S>;

    fn layer(&self, inner: S) -> InFlight<S> {
        InFlight(inner)
    }
}

/// The service of [`InFlightLayer`].
#[derive(Clone, Debug)]
pub struct InFlight<S>(S);

/// Counts one call while alive.
struct CallGuard {
    push: bool,
}

impl CallGuard {
    fn new(path: &str) -> Self {
        let m = global();
        m.calls.fetch_add(1, Ordering::AcqRel);
        let push = PUSH_PATHS.contains(&path);
        if push {
            m.pushes.inc();
        }
        CallGuard { push }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let m = global();
        m.calls.fetch_sub(1, Ordering::AcqRel);
        if self.push {
            m.pushes.dec();
        }
    }
}

impl<S, B> tower::Service<http::Request<B>> for InFlight<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let guard = CallGuard::new(req.uri().path());
        let fut = self.0.call(req);
        Box::pin(async move {
            let out = fut.await;
            drop(guard);
            out
        })
    }
}

/// An exposition format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// OpenMetrics 1.0 text (`# EOF` at the end, counters typed by their
    /// family's name).
    OpenMetrics,
    /// The Prometheus text format 0.0.4.
    Text,
}

impl Format {
    fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        }
    }
}

/// The format a scraper's `Accept` header asks for, as Prometheus'
/// own libraries negotiate it: the media ranges by decreasing quality
/// (`q`, 1 when absent; 0 refuses), the first that names OpenMetrics or
/// the text format wins (`*/*` and `text/*` take text); with none of
/// them, or no header, text.
fn negotiate<'a>(accept: impl Iterator<Item = &'a str>) -> Format {
    let mut ranges: Vec<(f32, Option<Format>)> = accept
        .flat_map(|v| v.split(','))
        .map(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(1.0, |(_, v)| v.trim().parse::<f32>().unwrap_or(0.0));
            let format = match media.as_str() {
                "application/openmetrics-text" => Some(Format::OpenMetrics),
                "text/plain" | "text/*" | "*/*" => Some(Format::Text),
                _ => None,
            };
            (q, format)
        })
        .filter(|(q, f)| *q > 0.0 && f.is_some())
        .collect();
    // Stable: among equals, the scraper's order.
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0));
    ranges.first().and_then(|(_, f)| *f).unwrap_or(Format::Text)
}

/// A plain-text answer.
fn plain(status: http::StatusCode, body: &'static str) -> http::Response<Full<Bytes>> {
    text(status, body.to_owned())
}

/// A plain-text answer made at run time.
fn text(status: http::StatusCode, body: String) -> http::Response<Full<Bytes>> {
    let mut resp = http::Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

async fn answer<B>(
    req: http::Request<B>,
    repo: Option<PathBuf>,
) -> Result<http::Response<Full<Bytes>>, Infallible> {
    let path = if req.method() == http::Method::GET {
        req.uri().path()
    } else {
        ""
    };
    match path {
        "/metrics" => {}
        // The process is up (a liveness probe).
        "/healthz" => return Ok(plain(http::StatusCode::OK, "ok\n")),
        // It takes calls (a readiness probe): as the gRPC health service.
        "/readyz" if global().serving.load(Ordering::Acquire) => {
            return Ok(plain(http::StatusCode::OK, "SERVING\n"));
        }
        "/readyz" => {
            let why = global().store_down.lock().ok().and_then(|d| d.clone());
            let body = match why {
                Some(why) => format!("NOT_SERVING\nthe store fails: {why}\n"),
                None => "NOT_SERVING\n".to_owned(),
            };
            return Ok(text(http::StatusCode::SERVICE_UNAVAILABLE, body));
        }
        _ => {
            return Ok(plain(
                http::StatusCode::NOT_FOUND,
                "not found: try GET /metrics, /healthz or /readyz\n",
            ));
        }
    }
    let format = negotiate(
        req.headers()
            .get_all(http::header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );
    let text = tokio::task::spawn_blocking(move || global().render(repo.as_deref(), format))
        .await
        .unwrap_or_default();
    let mut resp = http::Response::new(Full::new(Bytes::from(text)));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(format.content_type()),
    );
    Ok(resp)
}

/// Serves `GET /metrics`, `/healthz` and `/readyz` (everything else: 404)
/// on `listener` until the process ends; the object count comes from the
/// repository at `repo`.
pub async fn serve(listener: tokio::net::TcpListener, repo: Option<PathBuf>) {
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of file descriptors and the like: pause, go on.
                tracing::warn!("metrics: accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let repo = repo.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| answer(req, repo.clone()));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
            if let Err(e) = conn.await {
                tracing::debug!("metrics: connection: {e}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_is_the_one_the_scraper_prefers() {
        let f = |accept: &[&str]| negotiate(accept.iter().copied());
        assert_eq!(f(&[]), Format::Text);
        assert_eq!(f(&["*/*"]), Format::Text);
        assert_eq!(f(&["application/json"]), Format::Text);
        assert_eq!(f(&["application/openmetrics-text"]), Format::OpenMetrics);
        // Prometheus 2 and 3.
        assert_eq!(
            f(&[
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                 version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
            ]),
            Format::OpenMetrics
        );
        assert_eq!(
            f(&["text/plain;version=0.0.4;q=0.5, application/openmetrics-text;q=0.4"]),
            Format::Text
        );
        assert_eq!(
            f(&["application/openmetrics-text;q=0", "text/plain"]),
            Format::Text
        );
        assert_eq!(f(&["application/openmetrics-text;q=oops"]), Format::Text);
        // Equal quality: the scraper's order.
        assert_eq!(
            f(&["application/openmetrics-text, text/plain"]),
            Format::OpenMetrics
        );
    }

    #[test]
    fn each_format_is_what_its_content_type_names() {
        let m = Metrics::new();
        let om = m.render(None, Format::OpenMetrics);
        assert!(om.ends_with("# EOF\n"), "{om}");
        assert!(om.contains("# TYPE sgardd_login_failures counter"), "{om}");
        assert!(
            om.contains("sgardd_login_failures_total{reason=\"clock\"} 0"),
            "{om}"
        );
        assert!(om.contains("sgardd_build_info{version=\""), "{om}");
        let text = m.render(None, Format::Text);
        assert!(!text.contains("# EOF"), "{text}");
        assert!(
            text.contains("# TYPE sgardd_login_failures_total counter"),
            "{text}"
        );
        assert!(
            text.contains("sgardd_login_failures_total{reason=\"clock\"} 0"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "sgardd_build_info{{version=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION")
            )),
            "{text}"
        );
    }
}
