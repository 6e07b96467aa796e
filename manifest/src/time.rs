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

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
}
