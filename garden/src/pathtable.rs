//! A map keyed by entry path, built for what the index loads: tens of
//! thousands of records, read in path order, few of them changed per run.
//!
//! The records loaded from the index lie in one sorted table without a
//! `String` per path (the paths end to end in one buffer), found by binary
//! search. Callers look entries up in manifest order, which is sorted too,
//! so consecutive searches walk the same, cached, steps. A record is changed
//! in place and dropped by emptying its slot; paths the table does not hold
//! go into a small hash map beside it. [`PathTable::sorted`] merges both.

use crate::PathMap;

/// See the module documentation.
#[derive(Debug, Clone)]
pub(crate) struct PathTable<V> {
    names: String,
    /// Per loaded record: where its path ends in `names` (it starts where
    /// the previous one ends), and its value (`None`: dropped since).
    slots: Vec<(usize, Option<V>)>,
    /// Paths added since loading.
    fresh: PathMap<V>,
}

impl<V> Default for PathTable<V> {
    fn default() -> Self {
        PathTable {
            names: String::new(),
            slots: Vec::new(),
            fresh: PathMap::default(),
        }
    }
}

impl<V: PartialEq> PartialEq for PathTable<V> {
    fn eq(&self, other: &Self) -> bool {
        self.sorted() == other.sorted()
    }
}

impl<V> PathTable<V> {
    /// An empty table with room for `n` loaded records.
    pub fn with_capacity(n: usize) -> Self {
        PathTable {
            names: String::with_capacity(n.saturating_mul(32)),
            slots: Vec::with_capacity(n),
            fresh: PathMap::default(),
        }
    }

    /// Makes room for `n` more records arriving after the table's last path
    /// (a first add's), so the table does not grow by doubling.
    pub fn reserve(&mut self, n: usize) {
        let avg = self.names.len().checked_div(self.slots.len()).unwrap_or(32);
        self.slots.reserve(n);
        self.names.reserve(n.saturating_mul(avg));
    }

    /// Appends a loaded record; `false` (and nothing added) unless `path`
    /// sorts after every path loaded so far.
    pub fn push_sorted(&mut self, path: &str, v: V) -> bool {
        if let Some(last) = self.slots.len().checked_sub(1)
            && self.name(last) >= path
        {
            return false;
        }
        self.names.push_str(path);
        self.slots.push((self.names.len(), Some(v)));
        true
    }

    fn name(&self, i: usize) -> &str {
        let start = i.checked_sub(1).map_or(0, |p| self.slots[p].0);
        self.names.get(start..self.slots[i].0).unwrap_or("")
    }

    fn find(&self, path: &str) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.slots.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.name(mid).cmp(path) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// The value of `path`, looked for first at `*hint` and just after it
    /// (where the last lookup left it: callers go through paths in order,
    /// so the next one is usually there), then by binary search; `*hint`
    /// moves to where `path` was found.
    pub fn get_near(&self, path: &str, hint: &mut usize) -> Option<&V> {
        let at = [*hint, hint.saturating_add(1)]
            .into_iter()
            .find(|&i| i < self.slots.len() && self.name(i) == path)
            .or_else(|| self.find(path));
        match at {
            Some(i) => {
                *hint = i + 1;
                self.slots[i].1.as_ref()
            }
            None => self.fresh.get(path),
        }
    }

    /// The value of `path`.
    pub fn get(&self, path: &str) -> Option<&V> {
        match self.find(path) {
            Some(i) => self.slots[i].1.as_ref(),
            None => self.fresh.get(path),
        }
    }

    /// Sets the value of `path`; returns the one it replaces. A path that
    /// sorts after every one in the table joins the table itself (a base
    /// filled for the first time arrives in path order: as a map of owned
    /// keys, 100,000 of them were 25 MB); any other new path goes into the
    /// map beside it, and stays before the table's last path for good.
    pub fn insert(&mut self, path: &str, v: V) -> Option<V> {
        self.insert_slot(path, v).0
    }

    /// As [`PathTable::insert`], also saying which record of the table it
    /// set (`None`: one of the map beside it). A record keeps its position
    /// for the table's life.
    pub fn insert_slot(&mut self, path: &str, v: V) -> (Option<V>, Option<usize>) {
        match self.find(path) {
            Some(i) => (self.slots[i].1.replace(v), Some(i)),
            None if self.slots.is_empty() || self.name(self.slots.len() - 1) < path => {
                self.names.push_str(path);
                self.slots.push((self.names.len(), Some(v)));
                (None, Some(self.slots.len() - 1))
            }
            None => (self.fresh.insert(path.to_owned(), v), None),
        }
    }

    /// Drops the value of `path`; returns it.
    pub fn remove(&mut self, path: &str) -> Option<V> {
        self.remove_slot(path).0
    }

    /// As [`PathTable::remove`], also saying which record of the table it
    /// dropped (as [`PathTable::insert_slot`]).
    pub fn remove_slot(&mut self, path: &str) -> (Option<V>, Option<usize>) {
        match self.find(path) {
            Some(i) => (self.slots[i].1.take(), Some(i)),
            None => (self.fresh.remove(path), None),
        }
    }

    /// The path and value (`None`: dropped) of the table's record at
    /// position `i`.
    pub fn slot(&self, i: usize) -> Option<(&str, Option<&V>)> {
        let v = self.slots.get(i)?.1.as_ref();
        Some((self.name(i), v))
    }

    /// Every record, in path order.
    pub fn sorted(&self) -> Vec<(&str, &V)> {
        let mut fresh: Vec<(&str, &V)> = self.fresh.iter().map(|(k, v)| (k.as_str(), v)).collect();
        fresh.sort_unstable_by_key(|(k, _)| *k);
        let mut out = Vec::with_capacity(self.slots.len() + fresh.len());
        let mut old = (0..self.slots.len())
            .filter_map(|i| Some((self.name(i), self.slots[i].1.as_ref()?)))
            .peekable();
        let mut new = fresh.into_iter().peekable();
        loop {
            let take_old = match (old.peek(), new.peek()) {
                (Some(a), Some(b)) => a.0 < b.0,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            out.extend(if take_old { old.next() } else { new.next() });
        }
        out
    }
}

impl<V> FromIterator<(String, V)> for PathTable<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(iter: I) -> Self {
        let mut t = PathTable::default();
        for (k, v) in iter {
            t.insert(&k, v);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_and_added_records_are_found_changed_and_listed_in_order() {
        let mut t = PathTable::with_capacity(3);
        for (i, p) in ["~/b", "~/d", "~/f"].into_iter().enumerate() {
            assert!(t.push_sorted(p, i));
        }
        assert!(!t.push_sorted("~/c", 9), "out of order is refused");
        assert!(!t.push_sorted("~/f", 9), "a repeated path is refused");
        assert_eq!(
            (t.get("~/b"), t.get("~/d"), t.get("~/f")),
            (Some(&0), Some(&1), Some(&2))
        );
        assert_eq!(
            (t.get("~/a"), t.get("~/e"), t.get("~/g")),
            (None, None, None)
        );
        assert_eq!(t.insert("~/c", 7), None);
        assert_eq!(t.insert("~/f", 8), Some(2));
        assert_eq!(t.remove("~/b"), Some(0));
        assert_eq!(t.remove("~/b"), None);
        assert_eq!(t.insert("~/b", 5), None, "a dropped record comes back");
        assert_eq!(t.remove("~/c"), Some(7));
        t.insert("~/a", 4);
        assert_eq!(
            t.sorted(),
            [("~/a", &4), ("~/b", &5), ("~/d", &1), ("~/f", &8)]
        );
        // Paths after the last join the table; the rest the map; both list.
        let mut grown = PathTable::default();
        for (p, v) in [("~/m", 1), ("~/p", 2), ("~/n", 3), ("~/q", 4), ("~/a", 5)] {
            assert_eq!(grown.insert(p, v), None);
        }
        assert_eq!(grown.insert("~/n", 6), Some(3));
        assert_eq!(grown.insert("~/q", 7), Some(4));
        assert_eq!(grown.remove("~/p"), Some(2));
        assert_eq!(grown.insert("~/r", 8), None);
        assert_eq!(
            grown.sorted(),
            [
                ("~/a", &5),
                ("~/m", &1),
                ("~/n", &6),
                ("~/q", &7),
                ("~/r", &8)
            ]
        );
        assert_eq!((grown.slots.len(), grown.fresh.len()), (4, 2));
        let same: PathTable<usize> = [("~/f", 8), ("~/a", 4), ("~/d", 1), ("~/b", 5)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        assert_eq!(t, same);
    }

    /// A lookup near a hint answers exactly what `get` answers, whatever
    /// the hint (stale, past the end, far off), for paths in the table, in
    /// the map beside it, dropped, or never there.
    #[test]
    fn lookups_near_a_hint_answer_as_get_does() {
        let mut t = PathTable::default();
        for (i, p) in ["~/b", "~/d", "~/f", "~/h"].into_iter().enumerate() {
            assert!(t.push_sorted(p, i));
        }
        t.insert("~/c", 9);
        t.remove("~/f");
        let paths = ["~/a", "~/b", "~/c", "~/d", "~/e", "~/f", "~/h", "~/z"];
        for start in [0, 1, 2, 3, 4, 99, usize::MAX] {
            let mut hint = start;
            for p in paths.iter().chain(paths.iter().rev()) {
                assert_eq!(t.get_near(p, &mut hint), t.get(p), "{p} from {start}");
            }
        }
        let mut hint = 0;
        assert_eq!(t.get_near("~/d", &mut hint), Some(&1));
        assert_eq!(hint, 2, "the hint moves past what was found");
        assert_eq!(t.get_near("~/h", &mut hint), Some(&3));
    }
}
