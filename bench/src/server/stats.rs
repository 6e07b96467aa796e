//! Latency records of the `server` scenario and what the report makes of
//! them: throughput, percentiles, errors.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// What one timed `sgard` run was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    /// `sgard push` of the whole tree into an empty garden.
    FirstPush,
    /// `sgard pull` of the whole tree into an empty HOME.
    FirstPull,
    /// `sgard checkpoint` after a round's edits (local, not a server call).
    Checkpoint,
    /// `sgard push` of a round's checkpoint.
    Push,
    /// `sgard pull` of a round's push.
    Pull,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::FirstPush => "first push",
            Op::FirstPull => "first pull",
            Op::Checkpoint => "checkpoint (local)",
            Op::Push => "push",
            Op::Pull => "pull",
        }
    }

    /// Whether the operation talks to the server (counted in throughput).
    pub fn remote(self) -> bool {
        !matches!(self, Op::Checkpoint)
    }
}

/// One timed run.
#[derive(Clone, Debug)]
pub struct Record {
    pub op: Op,
    /// When the process was spawned.
    pub started: Instant,
    /// Spawn to exit.
    pub wall: Duration,
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Which machine and round, for the error report.
    pub who: String,
    /// Standard error, kept only when the run failed.
    pub stderr: String,
}

impl Record {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    pub fn ended(&self) -> Instant {
        self.started + self.wall
    }
}

/// The `p`-th percentile (0 < p ≤ 100) of sorted `v` by the nearest-rank
/// method: the smallest value with at least p% of the values at or below
/// it. `None` for an empty slice.
pub fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// One line of the report: an operation over one phase.
pub struct Summary {
    pub count: usize,
    pub errors: usize,
    pub p50: Option<Duration>,
    pub p99: Option<Duration>,
    pub max: Option<Duration>,
}

impl Summary {
    /// The summary of `op` in `records` (failed runs are counted as errors
    /// and left out of the latencies).
    pub fn of(op: Op, records: &[Record]) -> Summary {
        let mine: Vec<&Record> = records.iter().filter(|r| r.op == op).collect();
        let mut ok: Vec<Duration> = mine.iter().filter(|r| r.ok()).map(|r| r.wall).collect();
        ok.sort_unstable();
        Summary {
            count: mine.len(),
            errors: mine.iter().filter(|r| !r.ok()).count(),
            p50: percentile(&ok, 50.0),
            p99: percentile(&ok, 99.0),
            max: ok.last().copied(),
        }
    }
}

/// The wall time from the first spawn to the last exit of `records`.
pub fn span(records: &[Record]) -> Duration {
    let first = records.iter().map(|r| r.started).min();
    let last = records.iter().map(Record::ended).max();
    match (first, last) {
        (Some(a), Some(b)) => b.saturating_duration_since(a),
        _ => Duration::ZERO,
    }
}

/// Milliseconds with one decimal, or `-`.
pub fn ms(d: Option<Duration>) -> String {
    d.map_or_else(
        || "-".to_owned(),
        |d| format!("{:.1}", d.as_secs_f64() * 1e3),
    )
}

/// The Markdown table header of [`phase_rows`].
pub fn table_header() -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| store | phase | operation | runs | errors | ops/s | p50 ms | p99 ms | max ms |"
    );
    let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|---:|---:|");
    s
}

/// The table rows of one phase: each operation, then the server calls
/// together. ops/s is runs ÷ the phase's span (first spawn to last exit),
/// all clients together.
pub fn phase_rows(store: &str, phase: &str, records: &[Record], ops: &[Op]) -> String {
    let wall = span(records).as_secs_f64().max(1e-9);
    let mut s = String::new();
    let mut row = |name: &str, sm: &Summary| {
        let _ = writeln!(
            s,
            "| {store} | {phase} | {name} | {} | {} | {:.1} | {} | {} | {} |",
            sm.count,
            sm.errors,
            sm.count as f64 / wall,
            ms(sm.p50),
            ms(sm.p99),
            ms(sm.max)
        );
    };
    for &op in ops {
        row(op.name(), &Summary::of(op, records));
    }
    let remote: Vec<Record> = records.iter().filter(|r| r.op.remote()).cloned().collect();
    let mut all: Vec<Duration> = remote.iter().filter(|r| r.ok()).map(|r| r.wall).collect();
    all.sort_unstable();
    let together = Summary {
        count: remote.len(),
        errors: remote.iter().filter(|r| !r.ok()).count(),
        p50: percentile(&all, 50.0),
        p99: percentile(&all, 99.0),
        max: all.last().copied(),
    };
    row("**server calls**", &together);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms_list(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(percentile(&[], 50.0), None);
        let one = ms_list(&[7]);
        assert_eq!(percentile(&one, 50.0), Some(Duration::from_millis(7)));
        assert_eq!(percentile(&one, 99.0), Some(Duration::from_millis(7)));
        let v = ms_list(&(1..=100).collect::<Vec<_>>());
        assert_eq!(percentile(&v, 50.0), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&v, 99.0), Some(Duration::from_millis(99)));
        assert_eq!(percentile(&v, 100.0), Some(Duration::from_millis(100)));
        // 50 values: p99 is the largest (rank 50), p50 the 25th.
        let v = ms_list(&(1..=50).collect::<Vec<_>>());
        assert_eq!(percentile(&v, 99.0), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&v, 50.0), Some(Duration::from_millis(25)));
    }

    #[test]
    fn failures_are_errors_not_latencies() {
        let t0 = Instant::now();
        let rec = |wall, code| Record {
            op: Op::Push,
            started: t0,
            wall: Duration::from_millis(wall),
            code,
            who: String::new(),
            stderr: String::new(),
        };
        let rs = [
            rec(10, Some(0)),
            rec(999, Some(1)),
            rec(30, Some(0)),
            rec(5, None),
        ];
        let s = Summary::of(Op::Push, &rs);
        assert_eq!((s.count, s.errors), (4, 2));
        assert_eq!(s.max, Some(Duration::from_millis(30)));
        assert_eq!(span(&rs), Duration::from_millis(999));
    }
}
