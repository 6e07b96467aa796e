//! Whether `sgardd` takes calls, as its health says it (the gRPC health
//! service's `""` and `sgard.v1.GardenSync`, `/readyz` on the metrics
//! listener): `SERVING` while its store answers and no shutdown has begun.
//!
//! A [`StoreCheck`] asks the store every `--store-check-interval` seconds
//! (an object store: one list of its prefix, without retrying, within
//! [`sgard_depot::PROBE_LIMIT`]; a folder: that the repository's manifest
//! can be read), and sooner when a call just failed `UNAVAILABLE` (see
//! [`suspect`]). Health does not flap on one bad answer: [`DOWN_AFTER`]
//! failed checks in a row turn it `NOT_SERVING`, logged once at WARN with
//! the cause; [`UP_AFTER`] good checks in a row turn it back `SERVING`,
//! logged once at INFO. A check that disagrees with the state is repeated
//! after [`CONFIRM`] (or the interval, if shorter) rather than a whole
//! interval. `sgardd_store_up` (0 or 1) says the same, and `/readyz` names
//! the cause. A shutdown's `NOT_SERVING` stands whatever the store does.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio::sync::Notify;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// Failed checks in a row that turn health `NOT_SERVING`.
pub const DOWN_AFTER: u32 = 2;
/// Good checks in a row that turn it `SERVING` again.
pub const UP_AFTER: u32 = 2;
/// The longest wait before a check that disagreed with the state is
/// repeated.
pub const CONFIRM: Duration = Duration::from_secs(2);
/// The shortest time between two checks brought forward by failed calls.
const MIN_GAP: Duration = Duration::from_secs(1);
/// How long a check may take before it counts as failed (a little over
/// the depot's own limit, which names what it waited for).
const CHECK_LIMIT: Duration = Duration::from_secs(sgard_depot::PROBE_LIMIT.as_secs() + 1);

/// One question to the store: `Ok`, or why not, in words.
pub type Probe = Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// The store check `serve` runs.
#[derive(Clone)]
pub struct StoreCheck {
    /// The store, as logs name it (`s3://bucket/prefix`, a folder).
    pub store: String,
    /// How often to ask it.
    pub every: Duration,
    /// The question.
    pub probe: Probe,
}

impl std::fmt::Debug for StoreCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreCheck")
            .field("store", &self.store)
            .field("every", &self.every)
            .finish_non_exhaustive()
    }
}

/// The check of an object store (S3, or a folder or memory through the
/// depot): [`sgard_depot::Depot::probe`].
pub fn depot_probe(depot: sgard_depot::Depot) -> Probe {
    Arc::new(move || {
        let depot = depot.clone();
        Box::pin(async move { depot.probe().await.map_err(|e| e.to_string()) })
    })
}

/// The check of a folder repository: its file `path` (the manifest) can
/// be read. One check at a time: while a read hangs (a dead network
/// mount) the next checks fail without starting another.
pub fn file_probe(path: PathBuf) -> Probe {
    let busy = Arc::new(AtomicBool::new(false));
    Arc::new(move || {
        let (path, busy) = (path.clone(), busy.clone());
        Box::pin(async move {
            if busy.swap(true, Ordering::AcqRel) {
                return Err(format!(
                    "reading {}: the previous check is still waiting for it",
                    path.display()
                ));
            }
            let shown = path.display().to_string();
            let done = busy.clone();
            let read = tokio::task::spawn_blocking(move || {
                let got = std::fs::File::open(&path).and_then(|f| f.metadata());
                done.store(false, Ordering::Release);
                got
            })
            .await;
            match read {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(format!("reading {shown}: {e}")),
                Err(_) => {
                    busy.store(false, Ordering::Release);
                    Err(format!("reading {shown}: the check was interrupted"))
                }
            }
        })
    })
}

fn suspicions() -> &'static Notify {
    static SUSPECT: OnceLock<Notify> = OnceLock::new();
    SUSPECT.get_or_init(Notify::new)
}

/// A call just failed `UNAVAILABLE`: check the store now (not sooner than
/// a second after the last check) rather than at the next interval.
pub fn suspect() {
    suspicions().notify_one();
}

/// What health says, and why: the one place that sets it, so that the
/// store check and a shutdown never undo each other.
#[derive(Clone)]
pub(crate) struct Gate(Arc<tokio::sync::Mutex<GateState>>);

struct GateState {
    reporter: HealthReporter,
    /// The gRPC service whose status is set beside `""`.
    service: &'static str,
    /// A shutdown has begun: `NOT_SERVING` for good.
    draining: bool,
    /// Why the store fails, while it does.
    store_down: Option<String>,
    /// What health says now (`None`: not set yet).
    shown: Option<bool>,
}

impl Gate {
    /// Health `SERVING` for `""` and `service`.
    pub(crate) async fn new(reporter: HealthReporter, service: &'static str) -> Gate {
        let gate = Gate(Arc::new(tokio::sync::Mutex::new(GateState {
            reporter,
            service,
            draining: false,
            store_down: None,
            shown: None,
        })));
        gate.0.lock().await.apply().await;
        gate
    }

    /// A shutdown began: `NOT_SERVING` from now on.
    pub(crate) async fn drain(&self) {
        let mut s = self.0.lock().await;
        s.draining = true;
        s.apply().await;
    }

    /// The store fails (`Some(cause)`) or answers again (`None`).
    async fn store(&self, down: Option<String>) {
        let mut s = self.0.lock().await;
        crate::metrics::set_store_down(down.as_deref());
        s.store_down = down;
        s.apply().await;
    }
}

impl GateState {
    async fn apply(&mut self) {
        let serving = !self.draining && self.store_down.is_none();
        if self.shown == Some(serving) {
            return;
        }
        self.shown = Some(serving);
        crate::metrics::set_serving(serving);
        let status = if serving {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        self.reporter.set_service_status("", status).await;
        self.reporter.set_service_status(self.service, status).await;
    }
}

/// What one check changed.
#[derive(Debug, PartialEq, Eq)]
enum Change {
    /// The store fails: health `NOT_SERVING`.
    Down(String),
    /// It fails still, for another reason.
    Cause(String),
    /// It answers again, after failing this long.
    Up(Duration),
}

/// The checks' outcomes, with hysteresis (see the module's doc).
#[derive(Debug, Default)]
struct Tracker {
    /// Since when the store fails, and why (the latest cause).
    down: Option<(Instant, String)>,
    /// Checks in a row that disagreed with the state.
    streak: u32,
}

impl Tracker {
    fn observe(&mut self, got: Result<(), String>, now: Instant) -> Option<Change> {
        match (&mut self.down, got) {
            (None, Ok(())) => {
                // A lone bad answer before this one is forgotten.
                self.streak = 0;
                None
            }
            (None, Err(cause)) => {
                self.streak += 1;
                if self.streak < DOWN_AFTER {
                    return None;
                }
                self.streak = 0;
                self.down = Some((now, cause.clone()));
                Some(Change::Down(cause))
            }
            (Some((_, was)), Err(cause)) => {
                // A lone good answer before this one is forgotten.
                self.streak = 0;
                if *was == cause {
                    return None;
                }
                *was = cause.clone();
                Some(Change::Cause(cause))
            }
            (Some((since, _)), Ok(())) => {
                let after = now.saturating_duration_since(*since);
                self.streak += 1;
                if self.streak < UP_AFTER {
                    return None;
                }
                self.streak = 0;
                self.down = None;
                Some(Change::Up(after))
            }
        }
    }

    /// A check disagreed with the state: confirm it soon.
    fn unsure(&self) -> bool {
        self.streak > 0
    }
}

/// Runs `check` for as long as the server serves, telling `gate`.
pub(crate) async fn watch(check: StoreCheck, gate: Gate) {
    crate::metrics::set_store_down(None);
    let confirm = check.every.min(CONFIRM);
    let gap = check.every.min(MIN_GAP);
    let mut tracker = Tracker::default();
    let mut last = Instant::now();
    loop {
        let wait = if tracker.unsure() {
            confirm
        } else {
            check.every
        };
        let next = tokio::time::Instant::from_std(last) + wait;
        let soon = tokio::time::Instant::from_std(last) + gap;
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = async {
                suspicions().notified().await;
                tokio::time::sleep_until(soon).await;
            } => {}
        }
        let got = match tokio::time::timeout(CHECK_LIMIT, (check.probe)()).await {
            Ok(got) => got,
            Err(_) => Err(format!("no answer within {} s", CHECK_LIMIT.as_secs())),
        };
        last = Instant::now();
        if let Err(cause) = &got {
            crate::metrics::store_check_failed();
            tracing::debug!(store = %check.store, cause = %cause, "store check failed");
        }
        match tracker.observe(got, last) {
            None => {}
            Some(Change::Down(cause)) => {
                tracing::warn!(
                    store = %check.store,
                    cause = %cause,
                    "the store fails its checks: health NOT_SERVING until it answers again"
                );
                gate.store(Some(cause)).await;
            }
            Some(Change::Cause(cause)) => {
                tracing::info!(
                    store = %check.store,
                    cause = %cause,
                    "the store still fails its checks, for another cause"
                );
                gate.store(Some(cause)).await;
            }
            Some(Change::Up(after)) => {
                tracing::info!(
                    store = %check.store,
                    down_secs = after.as_secs(),
                    "the store answers again: health SERVING"
                );
                gate.store(None).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bad_answer_changes_nothing_two_in_a_row_do() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut t = Tracker::default();
        let bad = || Err::<(), _>("connection refused".to_owned());
        assert_eq!(t.observe(Ok(()), at(0)), None);
        assert_eq!(t.observe(bad(), at(1)), None);
        assert!(t.unsure());
        assert_eq!(t.observe(Ok(()), at(2)), None);
        assert!(!t.unsure());
        assert_eq!(t.observe(bad(), at(3)), None);
        assert_eq!(
            t.observe(bad(), at(4)),
            Some(Change::Down("connection refused".into()))
        );
        // Down: the same cause again says nothing, another cause is news.
        assert_eq!(t.observe(bad(), at(5)), None);
        assert_eq!(
            t.observe(Err("NoSuchBucket".into()), at(6)),
            Some(Change::Cause("NoSuchBucket".into()))
        );
        // One good answer is not enough to come back.
        assert_eq!(t.observe(Ok(()), at(7)), None);
        assert!(t.unsure());
        assert_eq!(t.observe(Err("NoSuchBucket".into()), at(8)), None);
        assert_eq!(t.observe(Ok(()), at(9)), None);
        assert_eq!(
            t.observe(Ok(()), at(10)),
            Some(Change::Up(Duration::from_secs(6)))
        );
        assert!(!t.unsure());
        assert_eq!(t.observe(Ok(()), at(11)), None);
    }
}
