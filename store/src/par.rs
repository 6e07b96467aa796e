//! Order-preserving parallel map over a slice, on scoped threads that
//! take contiguous blocks of it in turn: the one way the store and the
//! crates above it spread file-system work over the cores.

/// The number of worker threads for file-system work (at most 8).
pub fn threads() -> usize {
    // Asked once: on Linux each call reads cgroup files.
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, std::num::NonZero::get)
            .min(8)
    })
}

/// `items.iter().map(f).collect()`, computed on `threads()` threads when
/// there are at least `min` items (below that, thread start-up costs more
/// than it saves). Results keep the items' order. A block whose work
/// panicked yields `None` for each of its items.
pub fn map<T: Sync, R: Send>(
    items: &[T],
    min: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<Option<R>> {
    map_indices(items.len(), min, |i| f(&items[i]))
}

/// `(0..n).map(f).collect()`, in parallel as [`map`] does. Each thread
/// writes its results in place: there is one vector of results, never a
/// second one to gather them (at 100,000 `lstat`s that copy was 20 MB).
pub fn map_indices<R: Send>(n: usize, min: usize, f: impl Fn(usize) -> R + Sync) -> Vec<Option<R>> {
    map_indices_with(n, min, || (), |(), i| f(i))
}

/// As [`map_indices`], each thread with its own state (made by `init`,
/// passed to every `f` it runs): one open folder reused across the files
/// in it, say.
pub fn map_indices_with<S, R: Send>(
    n: usize,
    min: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize) -> R + Sync,
) -> Vec<Option<R>> {
    let threads = threads();
    if n < min.max(2) || threads < 2 {
        let mut state = init();
        return (0..n).map(|i| Some(f(&mut state, i))).collect();
    }
    let f = &f;
    in_blocks(
        n,
        threads,
        block_len(n, threads),
        std::iter::repeat(()),
        &init,
        |state, first, (), part| {
            for (k, slot) in part.iter_mut().enumerate() {
                *slot = Some(f(state, first + k));
            }
        },
    )
}

/// How many items a block holds: each thread takes about
/// [`BLOCKS_PER_THREAD`] of them, one at a time, so that a thread whose
/// items were quick takes more of them instead of waiting at the end for a
/// slower one (contiguous halves left one core idle for the last part of
/// every phase: the files of one half were in cache, a leaf folder of one
/// half had been looked at already).
fn block_len(n: usize, threads: usize) -> usize {
    n.div_ceil(threads.max(1) * BLOCKS_PER_THREAD).max(1)
}

const BLOCKS_PER_THREAD: usize = 16;

/// `n` results made on `threads` scoped threads (the calling thread in
/// place of those that cannot be started), each with its own state
/// (`init`), taking contiguous blocks of `block` of them in turn (see
/// [`block_len`]): `work` gets the block's first index, its share of
/// `inputs` (one per block, cut to the same length) and its slots. A block
/// whose work panicked yields `None` for each of its items; the thread goes
/// on with the next block.
fn in_blocks<S, I: Send, R: Send>(
    n: usize,
    threads: usize,
    block: usize,
    inputs: impl Iterator<Item = I> + Send,
    init: &(impl Fn() -> S + Sync),
    work: impl Fn(&mut S, usize, I, &mut [Option<R>]) + Sync,
) -> Vec<Option<R>> {
    let mut out: Vec<Option<R>> = std::iter::repeat_with(|| None).take(n).collect();
    let block = block.max(1);
    let queue = std::sync::Mutex::new(out.chunks_mut(block).zip(inputs).enumerate());
    let (queue, work) = (&queue, &work);
    let worker = move || {
        let mut state = init();
        loop {
            // Held only to take the next block, which cannot panic; were
            // it poisoned, the blocks in it are still whole.
            let next = queue
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .next();
            let Some((b, (part, input))) = next else {
                break;
            };
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                work(&mut state, b * block, input, part);
            }));
            if done.is_err() {
                part.iter_mut().for_each(|slot| *slot = None);
                // The state may be half-changed: start afresh.
                state = init();
            }
        }
    };
    // A thread that cannot be started (a process limit) leaves its blocks
    // to the others, and the calling thread takes its place: a step that
    // must finish (the renames of a restore's commit) never stops for want
    // of a thread.
    std::thread::scope(|s| {
        for _ in 0..threads.min(n.div_ceil(block)) {
            if std::thread::Builder::new().spawn_scoped(s, worker).is_err() {
                worker();
                break;
            }
        }
    });
    out
}

/// `items.iter_mut().enumerate().map(f).collect()`, in parallel as [`map`]
/// does: `f` may change its item in place, so what a step produces can lie
/// where the step is rather than in a second vector beside it.
pub fn update<T: Send, R: Send>(
    items: &mut [T],
    min: usize,
    f: impl Fn(usize, &mut T) -> R + Sync,
) -> Vec<Option<R>> {
    let n = items.len();
    let threads = threads();
    if n < min.max(2) || threads < 2 {
        return items
            .iter_mut()
            .enumerate()
            .map(|(i, t)| Some(f(i, t)))
            .collect();
    }
    let block = block_len(n, threads);
    in_blocks(
        n,
        threads,
        block,
        items.chunks_mut(block),
        &|| (),
        |(), first, mine, part| {
            for (k, (slot, item)) in part.iter_mut().zip(mine).enumerate() {
                *slot = Some(f(first + k, item));
            }
        },
    )
}

/// [`update`] over `items` a window of `window` items at a time, each
/// result handed to `done` with its index and item, in order, as its
/// window finishes: only one window's results are held at once (a result
/// per item, at 100,000 items, can be megabytes). When `done` breaks, the
/// rest of that window's results are dropped and no later window begins.
pub fn update_in_windows<T: Send, R: Send>(
    items: &mut [T],
    window: usize,
    min: usize,
    f: impl Fn(usize, &mut T) -> R + Sync,
    mut done: impl FnMut(usize, &mut T, Option<R>) -> std::ops::ControlFlow<()>,
) {
    let window = window.max(1);
    for (w, part) in items.chunks_mut(window).enumerate() {
        let first = w * window;
        let results = update(part, min, |i, t| f(first + i, t));
        for (i, (t, r)) in part.iter_mut().zip(results).enumerate() {
            if done(first + i, t, r).is_break() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_order_above_and_below_the_threshold() {
        let items: Vec<u32> = (0..1000).collect();
        let want: Vec<Option<u32>> = items.iter().map(|i| Some(i * 2)).collect();
        assert_eq!(super::map(&items, 10, |i| i * 2), want);
        assert_eq!(super::map(&items, 10_000, |i| i * 2), want);
        assert!(super::map(&[] as &[u32], 0, |i| *i).is_empty());
        let idx: Vec<Option<usize>> = (0..1001).map(|i| Some(i + 1)).collect();
        assert_eq!(super::map_indices(1001, 10, |i| i + 1), idx);
        for min in [10, 10_000] {
            let mut items: Vec<usize> = (0..1001).collect();
            let got = super::update(&mut items, min, |i, t| {
                *t += 1;
                i * 2
            });
            let want: Vec<Option<usize>> = (0..1001).map(|i| Some(i * 2)).collect();
            assert_eq!(got, want);
            assert_eq!(items, (1..1002).collect::<Vec<_>>());
        }
    }

    #[test]
    fn windows_hand_over_every_result_in_order_and_stop_when_told() {
        for (n, window, min) in [(1000, 64, 10), (1000, 64, 10_000), (5, 64, 0), (0, 8, 0)] {
            let mut items: Vec<usize> = (0..n).collect();
            let mut seen = Vec::new();
            super::update_in_windows(
                &mut items,
                window,
                min,
                |i, t| {
                    *t += 1;
                    i * 2
                },
                |i, t, r| {
                    assert_eq!(*t, i + 1);
                    seen.push((i, r));
                    std::ops::ControlFlow::Continue(())
                },
            );
            let want: Vec<(usize, Option<usize>)> = (0..n).map(|i| (i, Some(i * 2))).collect();
            assert_eq!(seen, want);
        }
        // Stopped at item 100: the rest of its window was done but not
        // handed over, and no later window began.
        let mut items: Vec<usize> = vec![0; 1000];
        let mut last = 0;
        super::update_in_windows(
            &mut items,
            64,
            10,
            |_, t| *t = 1,
            |i, _, _| {
                last = i;
                if i == 100 {
                    std::ops::ControlFlow::Break(())
                } else {
                    std::ops::ControlFlow::Continue(())
                }
            },
        );
        assert_eq!(last, 100);
        assert!(items[..128].iter().all(|t| *t == 1));
        assert!(items[128..].iter().all(|t| *t == 0));
    }

    #[test]
    fn a_panicking_block_yields_none_and_the_others_still_finish() {
        // Two threads at least, as on every machine that runs `par` in
        // parallel (one thread runs everything in line, and a panic there
        // is the caller's).
        if super::threads() < 2 {
            return;
        }
        let n = 1000;
        let got = super::map_indices(n, 10, |i| {
            assert!(i != 500, "a hostile item");
            i
        });
        let block = super::block_len(n, super::threads());
        let bad = (500 / block) * block..((500 / block + 1) * block).min(n);
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r.is_none(), bad.contains(&i), "item {i}");
        }
    }

    #[test]
    fn blocks_are_small_enough_to_share_and_never_empty() {
        assert_eq!(super::block_len(0, 2), 1);
        assert_eq!(super::block_len(1, 2), 1);
        assert_eq!(super::block_len(10_000, 2), 313);
        assert_eq!(super::block_len(10_000, 0), 625);
    }
}
