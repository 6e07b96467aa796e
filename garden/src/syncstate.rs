//! What a repository remembers of its last sync with each server: the
//! server head it synced with (its *base*, see [`crate::Base`]), in the
//! machine-local file `sync-state`.
//!
//! The base belongs to a garden, not to an address: an sgard server names
//! the garden it serves by an id it keeps with the garden (the same through
//! every replica, balancer and address), and the base is kept under that id,
//! so a machine that syncs through replica A and then through replica B, or
//! whose server moved to a new address, carries on where it was. A server
//! that names no garden (the Go sgardd) is known by its address, as before.
//!
//! One line per fact, sorted:
//!
//! ```text
//! garden 0f3c…  4be1…   the head last synced with garden 0f3c…
//! via host:9473 0f3c…   the garden host:9473 served last (to build a push
//!                       on the right base before the server has answered)
//! host:9473 4be1…       the head last synced at host:9473, for a server
//!                       that names no garden (and as older sgard wrote)
//! ```
//!
//! An address never holds a space, so the two-field lines of older sgard
//! versions stay readable, and those versions skip the new lines.

use sgard_store::Hash;

/// Whom a sync is with: the address dialled and, when the server names
/// one, the garden's id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncKey {
    /// The server's address as given (`host:port`).
    pub addr: String,
    /// The garden's id, as the server named it.
    pub garden: Option<String>,
}

impl SyncKey {
    /// The key for a server at `addr` that named the garden `garden`
    /// (empty: it named none). An id that is not one (longer than 64
    /// bytes, or other than lowercase letters, digits and `-`: a hostile
    /// or damaged answer) is taken as none.
    pub fn new(addr: &str, garden: &str) -> SyncKey {
        let ok = !garden.is_empty()
            && garden.len() <= 64
            && garden
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
        SyncKey {
            addr: addr.to_owned(),
            garden: ok.then(|| garden.to_owned()),
        }
    }

    /// The key for a server at `addr` before it answered: the garden it
    /// served last, as `state` remembers it.
    pub fn remembered(state: &str, addr: &str) -> SyncKey {
        let garden = lines(state).find_map(|l| match l {
            Line::Via(a, g) if a == addr => Some(g.to_owned()),
            _ => None,
        });
        SyncKey {
            addr: addr.to_owned(),
            garden,
        }
    }
}

enum Line<'a> {
    Garden(&'a str, Hash),
    Via(&'a str, &'a str),
    Addr(&'a str, Hash),
    Other,
}

fn lines(state: &str) -> impl Iterator<Item = Line<'_>> {
    state.lines().map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.as_slice() {
            ["garden", g, h] => Hash::parse(h).map_or(Line::Other, |h| Line::Garden(g, h)),
            ["via", a, g] => Line::Via(a, g),
            [a, h] => Hash::parse(h).map_or(Line::Other, |h| Line::Addr(a, h)),
            _ => Line::Other,
        }
    })
}

/// The base `state` holds for `key`: the garden's, else (a machine that
/// last synced before servers named their gardens) the address's.
pub fn base(state: &str, key: &SyncKey) -> Option<Hash> {
    let by_addr = || {
        lines(state).find_map(|l| match l {
            Line::Addr(a, h) if a == key.addr => Some(h),
            _ => None,
        })
    };
    match &key.garden {
        Some(g) => lines(state)
            .find_map(|l| match l {
                Line::Garden(x, h) if x == g => Some(h),
                _ => None,
            })
            .or_else(by_addr),
        None => by_addr(),
    }
}

/// Every base `state` holds that may be `key`'s, best first: the garden's,
/// the address's own, then the lines of other addresses (left by versions
/// that kept the base per address: one of them may be this garden's,
/// synced through another replica).
fn candidates(state: &str, key: &SyncKey) -> Vec<Hash> {
    let mut out: Vec<Hash> = base(state, key).into_iter().collect();
    let mine = |a: &str| a == key.addr;
    for l in lines(state) {
        if let Line::Addr(a, h) = l
            && !out.contains(&h)
        {
            if mine(a) {
                out.insert(out.len().min(1), h);
            } else {
                out.push(h);
            }
        }
    }
    out
}

/// The base for `key`, judged by what the server has: among the bases
/// `state` holds that may be this garden's, the one `rank` puts latest in
/// the server's history (`None`: not in it). That is the last sync, made
/// through whichever address (or by an older sgard, which keeps it per
/// address). When the history names none of them, [`base`].
pub fn base_by_history(
    state: &str,
    key: &SyncKey,
    rank: impl Fn(&Hash) -> Option<usize>,
) -> Option<Hash> {
    let c = candidates(state, key);
    // The latest in the history; of equals, the first candidate.
    let mut best: Option<(usize, Hash)> = None;
    for h in c {
        if let Some(r) = rank(&h)
            && best.is_none_or(|(b, _)| r > b)
        {
            best = Some((r, h));
        }
    }
    best.map(|(_, h)| h).or_else(|| base(state, key))
}

/// `state` after a sync with `key` ended at `head`. For a named garden the
/// address's own line goes (what it held is the garden's now), and the
/// address is remembered as serving that garden.
pub fn record(state: &str, key: &SyncKey, head: Hash) -> String {
    let mut out: Vec<String> = state
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                ["garden", g, _] => key.garden.as_deref() != Some(*g),
                ["via", a, _] | [a, _] => *a != key.addr,
                _ => true,
            }
        })
        .map(str::to_owned)
        .collect();
    match &key.garden {
        Some(g) => {
            out.push(format!("garden {g} {}", head.to_hex()));
            out.push(format!("via {} {g}", key.addr));
        }
        None => out.push(format!("{} {}", key.addr, head.to_hex())),
    }
    out.sort();
    let mut text = out.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(b: &[u8]) -> Hash {
        Hash::of(b)
    }

    #[test]
    fn a_garden_is_one_server_through_every_address() {
        let a = SyncKey::new("a:9473", "0123456789abcdef0123456789abcdef");
        let b = SyncKey::new("b:9473", "0123456789abcdef0123456789abcdef");
        let s = record("", &a, h(b"1"));
        assert_eq!(base(&s, &b), Some(h(b"1")));
        let s = record(&s, &b, h(b"2"));
        assert_eq!(base(&s, &a), Some(h(b"2")));
        // Before either answered, each address names the garden.
        assert_eq!(SyncKey::remembered(&s, "a:9473"), a);
        assert_eq!(SyncKey::remembered(&s, "b:9473"), b);
        assert_eq!(SyncKey::remembered(&s, "c:9473").garden, None);
        // Another garden at the same address starts afresh.
        let other = SyncKey::new("a:9473", "ffffffffffffffffffffffffffffffff");
        assert_eq!(base(&s, &other), None);
    }

    #[test]
    fn an_address_base_from_before_carries_over_to_its_garden() {
        let old = format!("a:9473 {}\nz:1 {}\n", h(b"1").to_hex(), h(b"9").to_hex());
        let g = SyncKey::new("a:9473", "0123456789abcdef0123456789abcdef");
        assert_eq!(base(&old, &g), Some(h(b"1")));
        let s = record(&old, &g, h(b"2"));
        // The address's own line went; the other server's stays.
        assert!(!s.lines().any(|l| l.starts_with("a:9473 ")), "{s}");
        assert_eq!(base(&s, &SyncKey::new("z:1", "")), Some(h(b"9")));
        assert_eq!(base(&s, &g), Some(h(b"2")));
        // A Go server at an address is keyed by the address.
        let go = SyncKey::new("go:1", "");
        let s = record(&s, &go, h(b"3"));
        assert_eq!(base(&s, &go), Some(h(b"3")));
        assert_eq!(base(&s, &g), Some(h(b"2")));
    }

    /// A machine that alternated replicas before servers named their
    /// gardens has a line per address; the one the server's history puts
    /// latest is its last sync, whichever address it is dialling now. A
    /// line newer than the garden's (an older sgard synced since) wins too.
    #[test]
    fn the_latest_base_in_the_servers_history_wins() {
        let (h3, h5, h9) = (h(b"3"), h(b"5"), h(b"9"));
        let rank = |x: &Hash| [h3, h5].iter().position(|y| y == x);
        let old = format!(
            "a:1 {}
b:1 {}
x:1 {}
",
            h5.to_hex(),
            h3.to_hex(),
            h9.to_hex()
        );
        let via_b = SyncKey::new("b:1", "0123456789abcdef0123456789abcdef");
        assert_eq!(base(&old, &via_b), Some(h3));
        assert_eq!(base_by_history(&old, &via_b, rank), Some(h5));
        // Another server's line (not in this history) is never taken.
        let none = |_: &Hash| None;
        assert_eq!(base_by_history(&old, &via_b, none), Some(h3));
        let s = record(&old, &via_b, h3);
        let later = format!(
            "{s}a:1 {}
",
            h5.to_hex()
        );
        assert_eq!(base_by_history(&later, &via_b, rank), Some(h5));
        // Of equals, the garden's own.
        let same = |_: &Hash| Some(0);
        assert_eq!(base_by_history(&s, &via_b, same), Some(h3));
    }

    #[test]
    fn a_hostile_garden_id_is_no_id() {
        for bad in ["", "a b", "A", "x\ny", &"a".repeat(65), "../x", "garden"] {
            let k = SyncKey::new("a:1", bad);
            if bad == "garden" {
                // A word like any other id.
                assert!(k.garden.is_some());
                continue;
            }
            assert_eq!(k.garden, None, "{bad:?}");
        }
        // Damaged lines are skipped, and kept.
        let s = "garbage\nvia a:1\n";
        let k = SyncKey::new("a:1", "0123");
        assert_eq!(base(s, &k), None);
        let out = record(s, &k, h(b"1"));
        assert!(out.contains("garbage"), "{out}");
        assert_eq!(base(&out, &k), Some(h(b"1")));
    }
}
