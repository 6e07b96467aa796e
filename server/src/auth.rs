//! The server's half of authentication, wire-compatible with the Go sgard.
//!
//! The client signs `nonce ‖ big-endian unix seconds` with an SSH key and
//! sends the signature (SSH wire format) with its public key; the server
//! checks the key against `authorized_keys` (reloaded when the file
//! changes), the time window (5 minutes) and that the nonce was never used
//! before, then issues an HS256 JWT (`sub` = the key's SHA256 fingerprint,
//! 30 days) signed with `<repo>/jwt.key`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use anyhow::{Context, Result, anyhow};
use base64::Engine;
use hmac::{Hmac, Mac};
use sgard_proto::wire::{
    DEFAULT_GARDEN, TOKEN_TTL_SECS, WINDOW_SECS, challenge_payload, unix_now, valid_garden,
};
use signature::Verifier;
use ssh_encoding::Decode;
use ssh_key::{HashAlg, PublicKey, Signature};

const B64URL: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Checks an RSA signature in SSH wire form (`ssh-rsa`, the SHA-1 one the
/// Go sgard makes, or `rsa-sha2-256/512`) with the `rsa` crate. An error
/// says whether the key is too weak (`true`) or the signature bad.
fn verify_rsa(
    key: &ssh_key::public::RsaPublicKey,
    payload: &[u8],
    sig: &[u8],
) -> Result<(), (bool, String)> {
    use rsa::signature::Verifier as _;
    let bad = |e: String| (false, e);
    let mut r = sig;
    let alg = String::decode(&mut r).map_err(|e| bad(format!("unreadable signature: {e}")))?;
    let blob = Vec::<u8>::decode(&mut r).map_err(|e| bad(format!("unreadable signature: {e}")))?;
    let b = |m: &ssh_key::Mpint| {
        m.as_positive_bytes()
            .map(rsa::BigUint::from_bytes_be)
            .ok_or_else(|| bad("malformed RSA public key".to_owned()))
    };
    let pk =
        rsa::RsaPublicKey::new(b(&key.n)?, b(&key.e)?).map_err(|e| bad(format!("RSA key: {e}")))?;
    if rsa::traits::PublicKeyParts::size(&pk) < 256 {
        return Err((true, "RSA keys under 2048 bits are refused; use an ed25519 key (ssh-keygen -t ed25519) or RSA of 3072 bits".into()));
    }
    let s = rsa::pkcs1v15::Signature::try_from(blob.as_slice())
        .map_err(|e| bad(format!("unreadable signature: {e}")))?;
    let ok = match alg.as_str() {
        "ssh-rsa" => rsa::pkcs1v15::VerifyingKey::<sha1::Sha1>::new(pk).verify(payload, &s),
        "rsa-sha2-256" => {
            rsa::pkcs1v15::VerifyingKey::<rsa::sha2::Sha256>::new(pk).verify(payload, &s)
        }
        "rsa-sha2-512" => {
            rsa::pkcs1v15::VerifyingKey::<rsa::sha2::Sha512>::new(pk).verify(payload, &s)
        }
        other => return Err(bad(format!("unknown RSA signature algorithm {other:?}"))),
    };
    ok.map_err(|_| bad("signature does not verify".into()))
}

/// Why a challenge signed at `ts` (the client's clock) is refused when
/// the server's clock says `now`: which clock is ahead, and by how much.
fn clock_words(ts: i64, now: i64) -> String {
    let ahead = i128::from(ts) - i128::from(now);
    let by = sgard_proto::wire::span(u64::try_from(ahead.unsigned_abs()).unwrap_or(u64::MAX));
    let how = if ahead > 0 { "ahead of" } else { "behind" };
    format!(
        "challenge timestamp outside the 5-minute window: the client's clock is {by} {how} \
         the server's; set the clock right on whichever machine is wrong, with NTP"
    )
}

/// The authorized keys by fingerprint, each with the garden it names.
type KeyTable = HashMap<String, (PublicKey, String)>;

/// The server's side: who may log in, replay protection, token signing.
pub struct Authority {
    keys_path: PathBuf,
    /// The authorized keys by fingerprint, with the garden each names, as
    /// of the file's modification time.
    keys: Mutex<(Option<SystemTime>, KeyTable)>,
    seen: Mutex<HashMap<Vec<u8>, i64>>,
    secret: [u8; 32],
    /// Seconds added to this machine's clock (a test hook; see
    /// [`Authority::with_clock_offset`]).
    offset: i64,
}

/// Why a login was refused: the `reason` label of
/// `sgardd_login_failures_total` (a fixed set, so the label stays
/// bounded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoginFailure {
    /// The key is not in `authorized_keys`.
    UnknownKey,
    /// An RSA key under 2048 bits.
    WeakKey,
    /// Signed more than 5 minutes off the server's clock.
    Clock,
    /// The signature is unreadable or does not verify.
    BadSignature,
    /// The challenge's nonce was used before.
    Replay,
    /// An unreadable public key, or a nonce of the wrong size.
    Malformed,
}

impl LoginFailure {
    /// Every reason, for counters that start at 0.
    pub const ALL: [LoginFailure; 6] = [
        LoginFailure::UnknownKey,
        LoginFailure::WeakKey,
        LoginFailure::Clock,
        LoginFailure::BadSignature,
        LoginFailure::Replay,
        LoginFailure::Malformed,
    ];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            LoginFailure::UnknownKey => "unknown_key",
            LoginFailure::WeakKey => "weak_key",
            LoginFailure::Clock => "clock",
            LoginFailure::BadSignature => "bad_signature",
            LoginFailure::Replay => "replay",
            LoginFailure::Malformed => "malformed",
        }
    }
}

/// A refused login: why, and what the client is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginRefused {
    /// Why.
    pub reason: LoginFailure,
    /// What the client is told (and the log says).
    pub message: String,
}

impl LoginRefused {
    fn new(reason: LoginFailure, message: impl Into<String>) -> Self {
        LoginRefused {
            reason,
            message: message.into(),
        }
    }

    /// A challenge whose nonce was already used.
    pub fn replay() -> Self {
        LoginRefused::new(
            LoginFailure::Replay,
            "challenge replayed: this nonce was already used",
        )
    }
}

/// What a token check found.
pub enum TokenCheck {
    /// Valid for this fingerprint.
    Ok(String),
    /// Well signed but expired, and the key is still authorized.
    Expired,
    /// Well signed, but the key is no longer authorized.
    Revoked,
    /// Not a valid token.
    Invalid,
}

impl Authority {
    /// Loads `authorized_keys` and `<repo>/jwt.key` (made, 0600, when missing
    /// or shorter than 32 bytes).
    pub fn new(keys_path: &Path, repo: &Path) -> Result<Self> {
        Authority::with_secret(keys_path, load_secret(&repo.join("jwt.key"))?)
    }

    /// Loads `authorized_keys`; tokens are signed with `secret` (shared by
    /// every replica of a server on object storage).
    pub fn with_secret(keys_path: &Path, secret: [u8; 32]) -> Result<Self> {
        let a = Authority {
            keys_path: keys_path.to_path_buf(),
            keys: Mutex::new((None, HashMap::new())),
            seen: Mutex::new(HashMap::new()),
            secret,
            offset: 0,
        };
        a.reload()?;
        Ok(a)
    }

    /// This authority with its clock `secs` off the machine's (a test
    /// hook, so a test can run a server whose clock is wrong).
    #[must_use]
    pub fn with_clock_offset(mut self, secs: i64) -> Self {
        self.offset = secs;
        self
    }

    /// The server's time: unix seconds, by which challenges and tokens
    /// are judged and dated.
    pub fn now(&self) -> i64 {
        unix_now().saturating_add(self.offset)
    }

    /// Whether a challenge signed at `ts` is too far from the server's
    /// clock to be accepted.
    pub fn outside_window(&self, ts: i64) -> bool {
        // The client's number: any i64 (a difference could overflow).
        self.now().abs_diff(ts) > WINDOW_SECS.unsigned_abs()
    }

    /// The number of authorized keys.
    pub fn key_count(&self) -> usize {
        self.keys.lock().map_or(0, |k| k.1.len())
    }

    fn reload(&self) -> Result<()> {
        let mtime = std::fs::metadata(&self.keys_path)
            .and_then(|m| m.modified())
            .with_context(|| format!("reading {}", self.keys_path.display()))?;
        let mut guard = self
            .keys
            .lock()
            .map_err(|_| anyhow!("key table poisoned"))?;
        if guard.0 == Some(mtime) {
            return Ok(());
        }
        let text = std::fs::read_to_string(&self.keys_path)
            .with_context(|| format!("reading {}", self.keys_path.display()))?;
        let mut map = HashMap::new();
        for (n, line) in text
            .lines()
            .map(str::trim)
            .enumerate()
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        {
            // Options before the key type, as sshd allows: `garden="home"`
            // names the key's garden; others are passed over.
            let start = line
                .find("ssh-")
                .or_else(|| line.find("ecdsa-"))
                .unwrap_or(0);
            let Ok(k) = PublicKey::from_openssh(&line[start..]) else {
                continue;
            };
            let garden = match garden_option(&line[..start]) {
                Ok(g) => g,
                Err(why) => {
                    tracing::warn!(
                        "{} line {}: {why}; the key is not authorized",
                        self.keys_path.display(),
                        n + 1
                    );
                    continue;
                }
            };
            map.insert(k.fingerprint(HashAlg::Sha256).to_string(), (k, garden));
        }
        *guard = (Some(mtime), map);
        Ok(())
    }

    fn authorized(&self, fp: &str) -> bool {
        self.garden_of(fp).is_some()
    }

    /// The garden of the authorized key `fp` (`None`: not authorized),
    /// as `authorized_keys` says now.
    pub fn garden_of(&self, fp: &str) -> Option<String> {
        let _ = self.reload();
        self.keys.lock().ok()?.1.get(fp).map(|(_, g)| g.clone())
    }

    /// Checks a challenge response but for a replayed nonce (see
    /// [`Authority::first_use`]): the key's fingerprint and the server's
    /// time, to [`Authority::issue`] a token with once the nonce is known to
    /// be fresh.
    pub fn verify_login(
        &self,
        nonce: &[u8],
        ts: i64,
        sig: &[u8],
        public_key: &str,
    ) -> std::result::Result<(String, i64), LoginRefused> {
        use LoginFailure::{BadSignature, Clock, Malformed, UnknownKey, WeakKey};
        let key = PublicKey::from_openssh(public_key.trim())
            .map_err(|e| LoginRefused::new(Malformed, format!("unreadable public key: {e}")))?;
        let fp = key.fingerprint(HashAlg::Sha256).to_string();
        if !self.authorized(&fp) {
            return Err(LoginRefused::new(
                UnknownKey,
                format!("key {fp} not authorized"),
            ));
        }
        let now = self.now();
        if self.outside_window(ts) {
            return Err(LoginRefused::new(Clock, clock_words(ts, now)));
        }
        if nonce.len() < 16 || nonce.len() > 64 {
            return Err(LoginRefused::new(
                Malformed,
                "challenge nonce must be 16 to 64 bytes",
            ));
        }
        let payload = challenge_payload(nonce, ts);
        if let ssh_key::public::KeyData::Rsa(rk) = key.key_data() {
            verify_rsa(rk, &payload, sig).map_err(|(weak, e)| {
                LoginRefused::new(if weak { WeakKey } else { BadSignature }, e)
            })?;
        } else {
            let signature = Signature::decode(&mut &sig[..]).map_err(|e| {
                LoginRefused::new(BadSignature, format!("unreadable signature: {e}"))
            })?;
            Verifier::verify(&key, &payload, &signature)
                .map_err(|_| LoginRefused::new(BadSignature, "signature does not verify"))?;
        }
        Ok((fp, now))
    }

    /// Whether `nonce` (signed at `ts`) is used for the first time in this
    /// process (a server on one folder; replicas on object storage keep
    /// theirs in the store). Nonces are forgotten once their window closed.
    pub fn first_use(&self, nonce: &[u8], ts: i64) -> bool {
        let now = self.now();
        let Ok(mut seen) = self.seen.lock() else {
            return false;
        };
        seen.retain(|_, t| now.abs_diff(*t) <= 2 * WINDOW_SECS.unsigned_abs());
        seen.insert(nonce.to_vec(), ts).is_none()
    }

    /// A token for `fp`, issued at `iat`.
    pub fn issue(&self, fp: &str, iat: i64) -> String {
        let header = B64URL.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let claims = serde_json::json!({"sub": fp, "iat": iat, "exp": iat + TOKEN_TTL_SECS});
        let body = B64URL.encode(claims.to_string());
        let signing = format!("{header}.{body}");
        let sig = B64URL.encode(hmac(&self.secret, signing.as_bytes()));
        format!("{signing}.{sig}")
    }

    /// Checks a token.
    pub fn check(&self, token: &str) -> TokenCheck {
        let parts: Vec<&str> = token.split('.').collect();
        let [h, b, s] = parts[..] else {
            return TokenCheck::Invalid;
        };
        let Ok(sig) = B64URL.decode(s) else {
            return TokenCheck::Invalid;
        };
        let mut m = <Hmac<sha2::Sha256> as hmac::KeyInit>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| <Hmac<sha2::Sha256> as hmac::KeyInit>::new(&Default::default()));
        m.update(format!("{h}.{b}").as_bytes());
        if m.verify_slice(&sig).is_err() {
            return TokenCheck::Invalid;
        }
        let Ok(claims) = B64URL
            .decode(b)
            .map_err(|_| ())
            .and_then(|c| serde_json::from_slice::<serde_json::Value>(&c).map_err(|_| ()))
        else {
            return TokenCheck::Invalid;
        };
        let (Some(sub), Some(exp)) = (claims["sub"].as_str(), claims["exp"].as_i64()) else {
            return TokenCheck::Invalid;
        };
        let authorized = self.authorized(sub);
        match (exp > self.now(), authorized) {
            (true, true) => TokenCheck::Ok(sub.to_owned()),
            (false, true) => TokenCheck::Expired,
            (_, false) => TokenCheck::Revoked,
        }
    }
}

/// The garden an `authorized_keys` line's options name (`garden="home"`),
/// else the default one. OpenSSH's syntax: options separated by commas,
/// values in double quotes (a `\"` inside is a quote).
fn garden_option(options: &str) -> std::result::Result<String, String> {
    let mut garden = None;
    let mut opt = String::new();
    let mut quoted = false;
    let mut escaped = false;
    let mut all = Vec::new();
    for c in options.trim().chars() {
        match c {
            '\\' if quoted && !escaped => escaped = true,
            '"' if !escaped => quoted = !quoted,
            ',' if !quoted => all.push(std::mem::take(&mut opt)),
            c => {
                escaped = false;
                opt.push(c);
            }
        }
    }
    if quoted {
        return Err("an option's quote is not closed".into());
    }
    all.push(opt);
    for o in all {
        if let Some(v) = o.strip_prefix("garden=") {
            if garden.is_some() {
                return Err("two garden options".into());
            }
            if v == DEFAULT_GARDEN {
                return Err(format!(
                    "garden {v:?} is reserved: it is the garden of every key without a \
                     garden option; leave the option out to share it, or choose another name"
                ));
            }
            if !valid_garden(v) {
                return Err(format!(
                    "garden {v:?} is not a garden name (a-z, 0-9, `.`, `_`, `-`, up to 64, \
                     starting with a letter or digit)"
                ));
            }
            garden = Some(v.to_owned());
        }
    }
    Ok(garden.unwrap_or_else(|| DEFAULT_GARDEN.to_owned()))
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = <Hmac<sha2::Sha256> as hmac::KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| <Hmac<sha2::Sha256> as hmac::KeyInit>::new(&Default::default()));
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

fn load_secret(path: &Path) -> Result<[u8; 32]> {
    if let Ok(b) = std::fs::read(path)
        && b.len() >= 32
    {
        let mut k = [0u8; 32];
        k.copy_from_slice(&b[..32]);
        return Ok(k);
    }
    let mut k = [0u8; 32];
    getrandom::fill(&mut k).map_err(|e| anyhow!("no randomness for jwt.key: {e}"))?;
    sgard_store::durable::write_atomic(path, &k, 0o600)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timestamp_at_the_ends_of_time_is_outside_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("authorized_keys");
        std::fs::write(&keys, "").unwrap();
        let a = Authority::with_secret(&keys, [7; 32]).unwrap();
        for ts in [i64::MIN, i64::MIN + 1, i64::MAX] {
            assert!(a.outside_window(ts), "{ts}");
        }
        assert!(!a.outside_window(a.now()));
        assert!(a.first_use(b"0123456789abcdef", i64::MIN));
        assert!(a.first_use(b"0123456789abcdeg", a.now()));
    }

    #[test]
    fn a_refused_login_says_which_clock_is_ahead_and_by_how_much() {
        let w = clock_words(1_000_432, 1_000_000);
        assert!(
            w.contains("the client's clock is 7 min 12 s ahead of the server's"),
            "{w}"
        );
        let w = clock_words(1_000_000, 1_007_500);
        assert!(w.contains("is 2 h 5 min behind the server's"), "{w}");
        assert!(w.starts_with("challenge timestamp outside the 5-minute window"));
        // The ends of time: no overflow.
        assert!(clock_words(i64::MIN, i64::MAX).contains("days behind"));
        assert!(clock_words(i64::MAX, i64::MIN).contains("days ahead of"));
    }

    #[test]
    fn a_key_names_its_garden_in_its_options() {
        assert_eq!(garden_option("").unwrap(), "default");
        assert_eq!(garden_option(r#"garden="home" "#).unwrap(), "home");
        assert_eq!(
            garden_option(r#"no-pty,garden="team-a.1",command="x,y""#).unwrap(),
            "team-a.1"
        );
        for bad in [
            r#"garden="../etc""#,
            r#"garden="Home""#,
            r#"garden="""#,
            r#"garden="a/b""#,
            r#"garden="a",garden="b""#,
            r#"garden="open"#,
            r#"garden="default""#,
        ] {
            assert!(garden_option(bad).is_err(), "{bad}");
        }
    }
}
