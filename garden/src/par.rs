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
    let n = threads();
    if items.len() < min.max(2) || n < 2 {
        return items.iter().map(|t| Some(f(t))).collect();
    }
    let chunk = items.len().div_ceil(n);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                (
                    part.len(),
                    s.spawn(move || part.iter().map(f).collect::<Vec<R>>()),
                )
            })
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for (len, h) in handles {
            match h.join() {
                Ok(rs) => out.extend(rs.into_iter().map(Some)),
                Err(_) => out.extend(std::iter::repeat_with(|| None).take(len)),
            }
        }
        out
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
    }
}
