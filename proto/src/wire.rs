//! What client and server must agree on beyond the messages: the garden
//! names, the "busy" refusal, the reauthentication detail, the login
//! challenge.

use std::time::SystemTime;

/// What a push refused for want of a free stream is told (sgard clients
/// recognise it and try again).
pub const BUSY: &str = "too many pushes at once; try again";

/// The garden of keys that name none.
pub const DEFAULT_GARDEN: &str = "default";

/// The type URL of the challenge detail of an `Unauthenticated` status.
pub const REAUTH_TYPE_URL: &str = "type.googleapis.com/sgard.v1.ReauthChallenge";

/// How far a challenge timestamp may be from the server's clock.
pub const WINDOW_SECS: i64 = 300;

/// How long a token is valid.
pub const TOKEN_TTL_SECS: i64 = 30 * 24 * 3600;

/// `google.rpc.Status`, to carry a `ReauthChallenge` the way grpc-go does.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    /// The code.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// The message.
    #[prost(string, tag = "2")]
    pub message: String,
    /// Typed details.
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<prost_types::Any>,
}

/// The message a client signs to log in: the nonce, then the big-endian
/// unix seconds.
pub fn challenge_payload(nonce: &[u8], ts: i64) -> Vec<u8> {
    let mut p = nonce.to_vec();
    p.extend_from_slice(&ts.to_be_bytes());
    p
}

/// Unix seconds now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Whether `name` may name a garden: a folder name, and a key in object
/// storage, that nothing can read as something else.
pub fn valid_garden(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"._-".contains(c))
}

/// A span of seconds for people: `45 s`, `7 min 12 s`, `2 h 5 min`,
/// `3 days` (how far apart two clocks are, said alike by `sgardd` and
/// `sgard doctor`).
pub fn span(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => match s % 60 {
            0 => format!("{} min", s / 60),
            r => format!("{} min {r} s", s / 60),
        },
        s if s < 86_400 => match (s % 3600) / 60 {
            0 => format!("{} h", s / 3600),
            m => format!("{} h {m} min", s / 3600),
        },
        s => format!("{} days", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garden_names_are_plain() {
        assert!(!valid_garden(&"a".repeat(65)));
        assert!(valid_garden("0x"));
        assert!(!valid_garden("../etc"));
        assert!(!valid_garden("Home"));
    }
}
