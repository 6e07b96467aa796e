//! Timestamps as the Go sgard writes them: RFC 3339 in UTC, nanoseconds kept.

use std::fmt;

use chrono::{DateTime, Datelike, Timelike, Utc};

/// A point in time, always UTC, with nanosecond precision.
///
/// Its text form is Go's `time.RFC3339Nano` in UTC: fractional seconds with
/// trailing zeros dropped (`2026-03-23T12:00:00.5Z`, `2026-03-23T12:00:00Z`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Timestamp(DateTime<Utc>);

impl Timestamp {
    /// Wraps a chrono time.
    pub fn from_datetime(t: DateTime<Utc>) -> Self {
        Timestamp(t)
    }

    /// The chrono time.
    pub fn datetime(&self) -> DateTime<Utc> {
        self.0
    }

    /// Go's zero time, `0001-01-01T00:00:00Z`.
    pub fn zero() -> Self {
        Timestamp(
            DateTime::<Utc>::MIN_UTC
                .with_year(1)
                .unwrap_or(DateTime::<Utc>::MIN_UTC),
        )
    }

    /// Parses RFC 3339 with any offset (converted to UTC).
    ///
    /// # Errors
    /// A message saying what was expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        DateTime::parse_from_rfc3339(text.trim())
            .map(|t| Timestamp(t.with_timezone(&Utc)))
            .map_err(|e| format!("invalid timestamp {text:?} ({e}); expected RFC 3339"))
    }

    /// Unix seconds (floor).
    pub fn unix_seconds(&self) -> i64 {
        self.0.timestamp()
    }

    /// `YYYY-MM-DD HH:MM:SS UTC`, for people.
    pub fn human(&self) -> String {
        self.0.format("%Y-%m-%d %H:%M:%S UTC").to_string()
    }
}

impl Timestamp {
    /// The general form, for years outside 0–9999.
    fn fmt_any_year(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.0;
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        )?;
        let ns = t.nanosecond() % 1_000_000_000;
        if ns != 0 {
            let digits = format!("{ns:09}");
            write!(f, ".{}", digits.trim_end_matches('0'))?;
        }
        f.write_str("Z")
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.0;
        let year = match u32::try_from(t.year()) {
            Ok(y) if y <= 9999 => y,
            _ => return self.fmt_any_year(f),
        };
        // Written digit by digit: a manifest of 10,000 entries has 10,000 of
        // these, and the formatting machinery was a good part of saving it.
        let mut buf = [0u8; 30];
        let mut n = 0;
        let mut put = |value: u32, width: usize, sep: u8| {
            for i in (0..width).rev() {
                buf[n + i] = b'0' + (value / 10u32.pow((width - 1 - i) as u32) % 10) as u8;
            }
            n += width;
            buf[n] = sep;
            n += 1;
        };
        put(year, 4, b'-');
        put(t.month(), 2, b'-');
        put(t.day(), 2, b'T');
        put(t.hour(), 2, b':');
        put(t.minute(), 2, b':');
        let ns = t.nanosecond() % 1_000_000_000;
        if ns == 0 {
            put(t.second(), 2, b'Z');
        } else {
            put(t.second(), 2, b'.');
            put(ns, 9, b'Z');
            // Drop the fraction's trailing zeros, keeping the `Z`.
            let mut end = n - 1;
            while buf[end - 1] == b'0' {
                end -= 1;
            }
            buf[end] = b'Z';
            n = end + 1;
        }
        f.write_str(std::str::from_utf8(&buf[..n]).map_err(|_| fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_go_rfc3339nano() {
        for s in [
            "2026-03-23T12:00:00.123456789Z",
            "2026-03-23T12:00:00.5Z",
            "2026-03-23T12:00:00Z",
            "0001-01-01T00:00:00Z",
            "2026-12-01T23:37:57.44336763Z",
            "9999-12-31T23:59:59.000000001Z",
            "1970-01-01T00:00:00.1Z",
        ] {
            assert_eq!(Timestamp::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(Timestamp::zero().to_string(), "0001-01-01T00:00:00Z");
        assert_eq!(
            Timestamp::parse("2026-03-23T14:00:00+02:00")
                .unwrap()
                .to_string(),
            "2026-03-23T12:00:00Z"
        );
        assert!(Timestamp::parse("yesterday").is_err());
    }

    /// The general formatter (the one every year goes through).
    struct Slow(Timestamp);

    impl fmt::Display for Slow {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.fmt_any_year(f)
        }
    }

    #[test]
    fn digit_writer_agrees_with_the_general_one() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let secs = (x % 400_000_000_000) as i64 - 62_000_000_000;
            let ns = if x.is_multiple_of(3) {
                0
            } else {
                ((x >> 20) % 1_000_000_000) as u32
            };
            let Some(t) = DateTime::from_timestamp(secs, ns) else {
                continue;
            };
            let want = Slow(Timestamp(t)).to_string();
            assert_eq!(Timestamp(t).to_string(), want, "{secs} {ns}");
        }
    }
}
