//! Order-preserving parallel map over a slice, on scoped threads.

/// The number of worker threads for file-system work (at most 8).
pub(crate) fn threads() -> usize {
    // Asked once: on Linux each call reads cgroup files.
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, std::num::NonZero::get)
            .min(8)
    })
}

/// `items.iter().map(f).collect()`, computed in `threads()` contiguous
/// chunks at once when there are at least `min` items (below that, thread
/// start-up costs more than it saves). Results keep the items' order. A
/// chunk whose thread panicked yields `None` for each of its items.
pub(crate) fn map<T: Sync, R: Send>(
    items: &[T],
    min: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<Option<R>> {
    map_indices(items.len(), min, |i| f(&items[i]))
}

/// `(0..n).map(f).collect()`, in parallel as [`map`] does. Each thread
/// writes its results in place: there is one vector of results, never a
/// second one to gather them (at 100,000 `lstat`s that copy was 20 MB).
pub(crate) fn map_indices<R: Send>(
    n: usize,
    min: usize,
    f: impl Fn(usize) -> R + Sync,
) -> Vec<Option<R>> {
    map_indices_with(n, min, || (), |(), i| f(i))
}

/// As [`map_indices`], each thread with its own state (made by `init`,
/// passed to every `f` it runs): one open folder reused across the files
/// in it, say.
pub(crate) fn map_indices_with<S, R: Send>(
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
    let (f, init) = (&f, &init);
    in_chunks(
        n,
        n.div_ceil(threads),
        std::iter::repeat(()),
        |first, (), part| {
            let mut state = init();
            for (k, slot) in part.iter_mut().enumerate() {
                *slot = Some(f(&mut state, first + k));
            }
        },
    )
}

/// `n` results made on scoped threads, one per `chunk` of them (at least
/// one each): each thread fills its contiguous chunk (`work` gets the
/// chunk's first index, its share of `inputs`, and its slots). A chunk whose thread panicked yields `None`
/// for each of its items.
fn in_chunks<I: Send, R: Send>(
    n: usize,
    chunk: usize,
    inputs: impl Iterator<Item = I>,
    work: impl Fn(usize, I, &mut [Option<R>]) + Sync,
) -> Vec<Option<R>> {
    let mut out: Vec<Option<R>> = std::iter::repeat_with(|| None).take(n).collect();
    let chunk = chunk.max(1);
    let work = &work;
    let failed: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = out
            .chunks_mut(chunk)
            .zip(inputs)
            .enumerate()
            .map(|(c, (part, input))| s.spawn(move || work(c * chunk, input, part)))
            .collect();
        handles
            .into_iter()
            .enumerate()
            .filter_map(|(c, h)| h.join().is_err().then_some(c))
            .collect()
    });
    for c in failed {
        for slot in out.iter_mut().skip(c * chunk).take(chunk) {
            *slot = None;
        }
    }
    out
}

/// `items.iter_mut().enumerate().map(f).collect()`, in parallel as [`map`]
/// does: `f` may change its item in place, so what a step produces can lie
/// where the step is rather than in a second vector beside it.
pub(crate) fn update<T: Send, R: Send>(
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
    let chunk = n.div_ceil(threads);
    in_chunks(n, chunk, items.chunks_mut(chunk), |first, mine, part| {
        for (k, (slot, item)) in part.iter_mut().zip(mine).enumerate() {
            *slot = Some(f(first + k, item));
        }
    })
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
}
