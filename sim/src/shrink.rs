//! Delta debugging (Zeller's ddmin) over a failing list of operations: the
//! smallest list found that still fails the same invariant.

use std::time::{Duration, Instant};

use crate::op::Op;
use crate::run::{Failure, run_ops};
use crate::{Config, Error};

/// Shrinks `ops` (which failed with `failure`) within `budget`; returns the
/// shortest list that still fails the same invariant, and that failure.
/// Each try runs on a fresh world; a try that fails otherwise (timing
/// faults do not always repeat) is simply not taken.
pub fn shrink(
    cfg: &Config,
    ops: &[Op],
    failure: &Failure,
    budget: Duration,
    mut progress: impl FnMut(usize),
) -> Result<(Vec<Op>, Failure), Error> {
    let start = Instant::now();
    let mut best: Vec<Op> = ops[..=failure.step.min(ops.len().saturating_sub(1))].to_vec();
    let mut best_failure = failure.clone();
    let tries = |cand: &[Op]| -> Result<Option<Failure>, Error> {
        let (f, _) = run_ops(cfg, cand)?;
        Ok(f.filter(|f| f.invariant == failure.invariant))
    };
    let mut n = 2usize;
    while best.len() >= 2 && start.elapsed() < budget {
        let len = best.len();
        let chunk = len.div_ceil(n);
        let mut reduced = false;
        for i in 0..n {
            if start.elapsed() >= budget {
                break;
            }
            let (lo, hi) = (i * chunk, ((i + 1) * chunk).min(len));
            if lo >= hi {
                continue;
            }
            let cand: Vec<Op> = best[..lo].iter().chain(&best[hi..]).cloned().collect();
            if let Some(f) = tries(&cand)? {
                best = cand[..=f.step.min(cand.len() - 1)].to_vec();
                best_failure = f;
                reduced = true;
                progress(best.len());
                break;
            }
        }
        if reduced {
            n = (n - 1).max(2);
        } else {
            if n >= len {
                break;
            }
            n = (n * 2).min(len);
        }
    }
    Ok((best, best_failure))
}
