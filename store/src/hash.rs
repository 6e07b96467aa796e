//! SHA-256 blob names.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use crate::Error;

/// A SHA-256 digest naming a blob. Its text form is 64 lowercase hex digits.
///
/// A `Hash` can only be built from 32 bytes or from text that passed
/// [`Hash::parse`], so every path built from one is safe.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hash([u8; 32]);

/// The bytes' order, four big-endian words at a time: sorting and
/// searching the 10,000 contents of a snapshot called `memcmp` for every
/// comparison, a tenth of a small checkpoint.
impl Ord for Hash {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let (a, _) = self.0.as_chunks::<8>();
        let (b, _) = other.0.as_chunks::<8>();
        for (x, y) in a.iter().zip(b) {
            let (x, y) = (u64::from_be_bytes(*x), u64::from_be_bytes(*y));
            if x != y {
                return x.cmp(&y);
            }
        }
        std::cmp::Ordering::Equal
    }
}

impl PartialOrd for Hash {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl Hash {
    /// Wraps raw digest bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Hash(bytes)
    }

    /// The raw digest bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// SHA-256 of `data`.
    pub fn of(data: &[u8]) -> Self {
        Hash(Sha256::digest(data).into())
    }

    /// Parses 64 lowercase hex characters.
    ///
    /// # Errors
    /// [`Error::InvalidHash`] for anything else (uppercase, other lengths,
    /// `..`, separators): the text never reaches a path.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return Err(Error::InvalidHash(text.to_owned()));
        }
        // Branch-free over the whole string: one table lookup per digit and
        // one check at the end (a manifest and a stat cache of 10,000
        // entries each parse 10,000 of these on every `status`).
        let mut out = [0u8; 32];
        let mut bad = 0u8;
        for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
            let hi = NIBBLE[usize::from(pair[0])];
            let lo = NIBBLE[usize::from(pair[1])];
            bad |= hi | lo;
            *o = (hi << 4) | lo;
        }
        if bad & INVALID != 0 {
            return Err(Error::InvalidHash(text.to_owned()));
        }
        Ok(Hash(out))
    }

    /// The 64-character lowercase hex form.
    pub fn to_hex(&self) -> String {
        self.hex_str(&mut [0u8; 64]).to_owned()
    }

    /// The hex form written into `buf`, without allocating.
    pub fn hex_str<'a>(&self, buf: &'a mut [u8; 64]) -> &'a str {
        for (pair, b) in buf.chunks_exact_mut(2).zip(self.0) {
            pair[0] = HEX[usize::from(b >> 4)];
            pair[1] = HEX[usize::from(b & 0xf)];
        }
        // Only ASCII hex digits were written.
        std::str::from_utf8(buf).unwrap_or_default()
    }

    /// The first `n` hex characters (at most 64), for short displays.
    pub fn short(&self, n: usize) -> String {
        let mut s = self.to_hex();
        s.truncate(n.min(64));
        s
    }
}

/// Set in [`NIBBLE`] for bytes that are not lowercase hex digits.
const INVALID: u8 = 0x10;

/// The value of each lowercase hex digit; [`INVALID`] for every other byte.
const NIBBLE: [u8; 256] = {
    let mut t = [INVALID; 256];
    let mut i = 0;
    while i < 16 {
        t[HEX[i] as usize] = i as u8;
        i += 1;
    }
    t
};

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.hex_str(&mut [0u8; 64]))
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({})", self.to_hex())
    }
}

impl FromStr for Hash {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Hash::parse(s)
    }
}

/// An incremental SHA-256 hasher producing a [`Hash`].
#[derive(Default, Clone)]
pub struct Hasher(Sha256);

impl Hasher {
    /// A fresh hasher.
    pub fn new() -> Self {
        Hasher(Sha256::new())
    }

    /// Feeds bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The digest of everything fed so far.
    pub fn finish(self) -> Hash {
        Hash(self.0.finalize().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes sort as their bytes (and their hex) do: sorted lists of
    /// blobs, and their binary searches, depend on it.
    #[test]
    fn order_is_the_bytes_order() {
        let mut hs: Vec<Hash> = (0..2000u32).map(|i| Hash::of(&i.to_le_bytes())).collect();
        // Hashes that differ only late, in every word.
        for at in [0, 7, 8, 15, 16, 24, 31] {
            let mut b = [0x80u8; 32];
            hs.push(Hash::from_bytes(b));
            b[at] = 0x7f;
            hs.push(Hash::from_bytes(b));
            b[at] = 0xff;
            hs.push(Hash::from_bytes(b));
        }
        for a in hs.iter().take(300) {
            for b in &hs {
                assert_eq!(a.cmp(b), a.as_bytes().cmp(b.as_bytes()), "{a} {b}");
                assert_eq!(a.cmp(b), a.to_hex().cmp(&b.to_hex()));
            }
        }
        let mut by_bytes = hs.clone();
        by_bytes.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        hs.sort_unstable();
        assert_eq!(hs, by_bytes);
    }

    #[test]
    fn hello_hashes_like_sha256sum() {
        assert_eq!(
            Hash::of(b"hello").to_hex(),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
    }

    #[test]
    fn parse_round_trips_and_rejects_hostile_text() {
        let h = Hash::of(b"x");
        assert_eq!(Hash::parse(&h.to_hex()).unwrap(), h);
        for bad in [
            "",
            "../../etc/passwd",
            &h.to_hex().to_uppercase(),
            &h.to_hex()[..63],
            &format!("{}0", h.to_hex()),
            &format!("../{}", &h.to_hex()[3..]),
            "g".repeat(64).as_str(),
        ] {
            assert!(Hash::parse(bad).is_err(), "{bad:?} accepted");
        }
        // Every byte that is not a lowercase hex digit, at either end of
        // either half of a pair, is refused; every digit is read right.
        let text = h.to_hex();
        for b in 0..=255u8 {
            for at in [0, 1, 62, 63] {
                let mut bytes = text.clone().into_bytes();
                bytes[at] = b;
                let Ok(t) = String::from_utf8(bytes) else {
                    continue;
                };
                let ok = HEX.contains(&b);
                assert_eq!(Hash::parse(&t).is_ok(), ok, "byte {b:#x} at {at}");
                if ok {
                    assert_eq!(Hash::parse(&t).unwrap().to_hex(), t);
                }
            }
        }
    }

    #[test]
    fn incremental_equals_one_shot() {
        let mut h = Hasher::new();
        h.update(b"hel");
        h.update(b"lo");
        assert_eq!(h.finish(), Hash::of(b"hello"));
    }
}
