//! `sgard doctor`'s look at the sync server: can it be reached, does TLS
//! hold (and if not, why, in words), does it take the key sgard would log
//! in with, and is its clock close to ours.
//!
//! The server's clock comes through the existing protocol: a login's token
//! is a JWT whose `iat` is the server's time when it issued it (sgardd's
//! and the Go sgardd's alike), and a login refused for its timestamp
//! carries, from sgardd, a `ReauthChallenge` dated by the server's clock
//! (a Go sgardd only says it refused, which still tells the clocks are
//! more than 5 minutes apart). Nothing is saved: the token is dropped.

use sgard_proto::wire::span;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use rustls::RootCertStore;
use rustls::pki_types::ServerName;
use sgard_proto::v1;
use sgard_proto::v1::garden_sync_client::GardenSyncClient;
use tokio::net::TcpStream;
use tonic::Code;

use super::auth::{WINDOW_SECS, challenge_payload};
use super::client::{self, Opts, Signer};

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Fine.
    Ok,
    /// Works, but worth a look.
    Warning,
    /// Broken: something fails until it is fixed.
    Error,
}

impl Level {
    /// The word printed for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

/// One check's result: what was found and, unless it is fine, what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The check's name.
    pub check: &'static str,
    /// How it came out.
    pub level: Level,
    /// What was found.
    pub detail: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl Finding {
    /// A check that passed.
    pub fn ok(check: &'static str, detail: impl Into<String>) -> Self {
        Finding {
            check,
            level: Level::Ok,
            detail: detail.into(),
            hint: None,
        }
    }

    /// A check that found something worth a look.
    pub fn warning(
        check: &'static str,
        detail: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Finding {
            check,
            level: Level::Warning,
            detail: detail.into(),
            hint: Some(hint.into()),
        }
    }

    /// A check that failed.
    pub fn error(check: &'static str, detail: impl Into<String>, hint: impl Into<String>) -> Self {
        Finding {
            check,
            level: Level::Error,
            detail: detail.into(),
            hint: Some(hint.into()),
        }
    }
}

/// How far the server's clock may be from ours before doctor says so.
pub const CLOCK_TOLERANCE_SECS: i64 = 60;

/// Probes the server `o` names: `connection`, `tls`, `login` and
/// `server-clock` findings, in that order; a step that fails ends the
/// probe (what follows it cannot be tried).
pub fn probe(o: &Opts) -> Vec<Finding> {
    match client::block_on(probe_async(o)) {
        Ok(mut f) => {
            // The hints name this server.
            for x in &mut f {
                if let Some(h) = &mut x.hint {
                    *h = h.replace("remote set ADDR", &format!("remote set {}", o.remote.addr));
                }
            }
            f
        }
        Err(e) => vec![Finding::error(
            "connection",
            format!("{e:#}"),
            "this machine cannot run network code; see the error",
        )],
    }
}

async fn probe_async(o: &Opts) -> Vec<Finding> {
    let mut out = Vec::new();
    let addr = o.remote.addr.as_str();
    let Some((host, _port)) = addr
        .rsplit_once(':')
        .filter(|_| client::has_port(addr))
        .map(|(h, p)| (h.trim_start_matches('[').trim_end_matches(']'), p))
    else {
        out.push(Finding::error(
            "connection",
            format!("{addr:?} is not a server address"),
            "write HOST:PORT (sgardd listens on :9473 unless told otherwise): \
             `sgard remote set HOST:PORT`",
        ));
        return out;
    };
    let reached = match reach(addr, o.timeouts.connect).await {
        Ok(r) => r,
        Err((detail, hint)) => {
            out.push(Finding::error("connection", detail, hint));
            return out;
        }
    };
    let peer = reached.peer.to_string();
    out.push(Finding::ok(
        "connection",
        if peer == addr {
            format!("{addr} answers")
        } else {
            format!("{addr} answers ({peer})")
        },
    ));
    let loopback = reached.loopback;
    if o.remote.tls {
        match handshake(addr, host, o.remote.tls_ca.as_deref(), o.timeouts.connect).await {
            Ok(version) => out.push(Finding::ok(
                "tls",
                match &o.remote.tls_ca {
                    Some(ca) => format!(
                        "{version}; the server's certificate is trusted through {}",
                        ca.display()
                    ),
                    None => format!(
                        "{version}; the server's certificate is signed by a CA this system trusts"
                    ),
                },
            )),
            Err((detail, hint)) => {
                out.push(Finding::error("tls", detail, hint));
                return out;
            }
        }
    } else if loopback {
        out.push(Finding::ok(
            "tls",
            "not used (a plain connection to this machine)",
        ));
    } else {
        out.push(Finding::warning(
            "tls",
            "not used: tokens and unencrypted file contents cross the network in clear",
            "start sgardd with --tls-cert/--tls-key and run `sgard remote set ADDR --tls-ca \
             cert.pem` here (see the guide, docs/src/how-to/sync.md#tls), or sync over a VPN",
        ));
    }
    login(o, host, &mut out).await;
    out
}

/// Where a connection went.
struct Reached {
    peer: SocketAddr,
    loopback: bool,
}

/// Opens (and closes) one TCP connection to `addr` within `limit`.
async fn reach(addr: &str, limit: Duration) -> Result<Reached, (String, String)> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let addrs: Vec<SocketAddr> =
        match tokio::time::timeout(limit, tokio::net::lookup_host(addr)).await {
            Ok(Ok(a)) => a.collect(),
            Ok(Err(e)) => {
                return Err((
                    format!("cannot find the server {host}: {e}"),
                    "check the name (`sgard remote show`), or use its IP address".into(),
                ));
            }
            Err(_) => {
                return Err((
                    format!("looking up {host} took more than {} s", limit.as_secs()),
                    "check this machine's DNS, or use the server's IP address".into(),
                ));
            }
        };
    let mut last = None;
    for a in &addrs {
        match tokio::time::timeout(limit, TcpStream::connect(a)).await {
            Ok(Ok(_)) => {
                return Ok(Reached {
                    peer: *a,
                    loopback: addrs.iter().all(|a| a.ip().is_loopback()),
                });
            }
            Ok(Err(e)) => last = Some(e),
            Err(_) => {
                return Err((
                    format!("{addr} did not answer within {} s ({a})", limit.as_secs()),
                    "check that the machine is up and reachable from here (a firewall, a \
                     VPN), or give more time with --connect-timeout SECS"
                        .into(),
                ));
            }
        }
    }
    let detail = match last {
        Some(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            format!("nothing is listening at {addr} (connection refused)")
        }
        Some(e) => format!("cannot connect to {addr}: {e}"),
        None => format!("{host} has no address"),
    };
    Err((
        detail,
        "start sgardd there (`sgardd --repo PATH --listen ADDR --authorized-keys FILE`), or \
         check the address and port (`sgard remote show`)"
            .into(),
    ))
}

/// A TLS handshake as the client makes it (the certificates of `ca`, else
/// the system's roots; ALPN `h2`): the protocol version, or why it failed,
/// in words, and what to do.
async fn handshake(
    addr: &str,
    host: &str,
    ca: Option<&Path>,
    limit: Duration,
) -> Result<String, (String, String)> {
    let fix_ca = |what: &str| {
        (
            what.to_owned(),
            "give the file holding the server's certificate (or the CA that signed it): \
             `sgard remote set ADDR --tls-ca FILE`"
                .to_owned(),
        )
    };
    let attempt = async {
        match ca {
            Some(ca) => {
                let conn = super::tls::Connector::new(ca, host)
                    .map_err(|e| fix_ca(&format!("cannot use the certificate file: {e:#}")))?;
                let s = conn
                    .connect(addr.to_owned())
                    .await
                    .map_err(|e| tls_words(&e, Some(ca), host))?;
                Ok(version_of(s.inner().get_ref().1))
            }
            None => {
                let tcp = TcpStream::connect(addr)
                    .await
                    .map_err(|e| (format!("cannot connect to {addr}: {e}"), String::new()))?;
                let name = ServerName::try_from(host.to_owned())
                    .map_err(|_| fix_ca(&format!("{host:?} is not a host name or IP address")))?;
                let s = native_connector()
                    .map_err(|e| fix_ca(&e))?
                    .connect(name, tcp)
                    .await
                    .map_err(|e| tls_words(&e, None, host))?;
                Ok(version_of(s.get_ref().1))
            }
        }
    };
    match tokio::time::timeout(limit, attempt).await {
        Ok(r) => r,
        Err(_) => Err((
            format!(
                "the TLS handshake with {addr} did not finish within {} s",
                limit.as_secs()
            ),
            "check that the server speaks TLS (sgardd --tls-cert/--tls-key)".into(),
        )),
    }
}

/// A connector trusting the system's CA roots, as the client's `--tls`.
fn native_connector() -> Result<tokio_rustls::TlsConnector, String> {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

fn version_of(c: &rustls::ClientConnection) -> String {
    match c.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLS 1.3".into(),
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLS 1.2".into(),
        _ => "TLS".into(),
    }
}

/// A failed handshake in words (never a rustls or webpki enum name), and
/// what to do.
fn tls_words(e: &io::Error, ca: Option<&Path>, host: &str) -> (String, String) {
    let not_tls = "the server may not speak TLS: if sgardd runs without --tls-cert, drop TLS \
                   here (`sgard remote set ADDR` without --tls, or --no-tls)";
    if e.kind() == io::ErrorKind::UnexpectedEof || e.kind() == io::ErrorKind::ConnectionReset {
        return (
            "the server closed the connection during the TLS handshake".into(),
            not_tls.into(),
        );
    }
    let Some(r) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return (format!("the TLS handshake failed: {e}"), not_tls.into());
    };
    super::explain::tls(r, ca, host)
}

/// Unix seconds now, with the fraction.
fn now_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The `iat` (issued at, the server's unix seconds) of a JWT.
fn issued_at(token: &str) -> Option<i64> {
    let body = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(body.trim_end_matches('='))
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v.get("iat")?.as_i64()
}

/// How far ahead of ours (negative: behind) a server clock is that said
/// `server` (whole seconds, truncated: its time was in `server..server+1`)
/// when ours said `mid`.
fn offset(server: i64, mid: f64) -> i64 {
    (server as f64 + 0.5 - mid).round() as i64
}

/// The finding about a server clock `offset` seconds off ours (positive:
/// ahead).
fn clock_finding(offset: i64) -> Finding {
    let d = offset.unsigned_abs();
    let how = if offset >= 0 { "ahead of" } else { "behind" };
    let word = if offset >= 0 { "ahead" } else { "behind" };
    let fix = "set the clock right on whichever machine is wrong (NTP: `timedatectl set-ntp \
               true`, or the system's time settings)";
    if d <= CLOCK_TOLERANCE_SECS.unsigned_abs() {
        Finding::ok(
            "server-clock",
            if d == 0 {
                "within a minute of this machine's clock (the same second)".to_owned()
            } else {
                format!(
                    "within a minute of this machine's clock ({} {word})",
                    span(d)
                )
            },
        )
    } else if d <= WINDOW_SECS.unsigned_abs() {
        Finding::warning(
            "server-clock",
            format!(
                "{} {how} this machine's clock; logins fail beyond 5 minutes",
                span(d)
            ),
            fix,
        )
    } else {
        Finding::error(
            "server-clock",
            format!(
                "{} {how} this machine's clock: the server refuses logins signed more than \
                 5 minutes off its clock",
                span(d)
            ),
            fix,
        )
    }
}

/// A key's name and fingerprint.
fn key_name(s: &Signer) -> String {
    match s {
        Signer::File(k, _) => format!(
            "{} ({})",
            s.name(),
            k.public_key().fingerprint(ssh_key::HashAlg::Sha256)
        ),
        Signer::Agent(..) => s.name(),
    }
}

/// Default key files that exist but cannot be used (passphrase-protected,
/// unreadable): the client passes over them without a word.
fn skipped_keys(o: &Opts) -> Vec<String> {
    if o.ssh_key.is_some() {
        return Vec::new();
    }
    ["id_ed25519", "id_ecdsa", "id_rsa"]
        .iter()
        .map(|n| o.home.join(".ssh").join(n))
        .filter(|p| p.exists())
        .filter_map(|p| super::auth::read_private_key(&p).err())
        .map(|e| format!("{e:#}"))
        .collect()
}

/// Logs in as the client would (each key in turn), without keeping the
/// token: the `login` and `server-clock` findings.
async fn login(o: &Opts, host: &str, out: &mut Vec<Finding>) {
    let ch = match client::channel(&o.remote, &o.timeouts).await {
        Ok(c) => c,
        Err(e) => {
            out.push(Finding::error(
                "login",
                format!("cannot open a gRPC connection: {e:#}"),
                "see the error; `sgard push` fails the same way",
            ));
            return;
        }
    };
    let c = GardenSyncClient::new(ch);
    let signers = match client::Client::signers_for(o) {
        Ok(s) => s,
        Err(e) => {
            out.push(Finding::error(
                "login",
                format!("cannot use the SSH key: {e:#}"),
                "give an unencrypted private key with --ssh-key or SGARD_SSH_KEY, or load the \
                 key into ssh-agent (ssh-add)",
            ));
            return;
        }
    };
    let skipped = skipped_keys(o);
    let also = if skipped.is_empty() {
        String::new()
    } else {
        format!(" (passed over: {})", skipped.join("; "))
    };
    let ask = |req: v1::AuthenticateRequest| {
        let mut c = c.clone();
        async move {
            let t0 = now_f64();
            let r = tokio::time::timeout(o.timeouts.idle, c.authenticate(req)).await;
            let t1 = now_f64();
            (r, (t0 + t1) / 2.0)
        }
    };
    if signers.is_empty() {
        let (r, _) = ask(v1::AuthenticateRequest::default()).await;
        match r {
            Ok(Err(s)) if s.code() == Code::Unimplemented => no_login_needed(out),
            Ok(Err(s)) if !matches!(s.code(), Code::PermissionDenied | Code::Unauthenticated) => {
                transport_failure(o, host, &s, out).await;
            }
            _ => out.push(Finding::error(
                "login",
                format!("no SSH key to log in with{also}"),
                "make one (`ssh-keygen -t ed25519`) and add its .pub line to the server's \
                 authorized_keys, or pass --ssh-key FILE, set SGARD_SSH_KEY, or start ssh-agent",
            )),
        }
        return;
    }
    let mut refused = Vec::new();
    for s in &signers {
        let mut nonce = vec![0u8; 32];
        if getrandom::fill(&mut nonce).is_err() {
            out.push(Finding::error(
                "login",
                "no randomness for a challenge",
                "see the system's random source",
            ));
            return;
        }
        let ts = super::auth::unix_now();
        let (public_key, signature) = match s.sign(&challenge_payload(&nonce, ts)) {
            Ok(x) => x,
            Err(e) => {
                refused.push(format!("{}: cannot sign: {e:#}", key_name(s)));
                continue;
            }
        };
        let req = v1::AuthenticateRequest {
            nonce,
            timestamp: ts,
            signature,
            public_key,
        };
        let (r, mid) = ask(req).await;
        let Ok(answer) = r else {
            out.push(Finding::error(
                "login",
                format!(
                    "the server did not answer the login within {} s",
                    o.timeouts.idle.as_secs()
                ),
                "see the server's log; give more time with --timeout SECS",
            ));
            return;
        };
        match answer {
            Ok(r) => {
                out.push(Finding::ok(
                    "login",
                    format!("the server accepted {}", key_name(s)),
                ));
                let token = r.into_inner().token;
                out.push(match issued_at(&token) {
                    // The token was issued between the question and the
                    // answer: our clock then was `mid`, within half the
                    // round trip (and the second `iat` truncates).
                    Some(iat) => clock_finding(offset(iat, mid)),
                    None => Finding::ok(
                        "server-clock",
                        "not known: the server's token carries no time (not an sgard server?)",
                    ),
                });
                return;
            }
            Err(st) if st.code() == Code::Unimplemented => {
                no_login_needed(out);
                return;
            }
            Err(st) if st.code() == Code::PermissionDenied => {
                refused.push(format!("{}: {}", key_name(s), st.message()));
            }
            Err(st) if st.code() == Code::Unauthenticated && is_clock(&st) => {
                let server = client::challenge_of(&st).map(|(_, t)| t);
                out.push(Finding::error(
                    "login",
                    format!(
                        "the server knows {} but refused the login: its clock and this \
                         machine's are more than 5 minutes apart",
                        key_name(s)
                    ),
                    "see server-clock",
                ));
                out.push(match server {
                    Some(t) => clock_finding(offset(t, mid)),
                    None => Finding::error(
                        "server-clock",
                        "more than 5 minutes off this machine's clock (the server refused a \
                         login for its time)",
                        "set the clock right on whichever machine is wrong (NTP: `timedatectl \
                         set-ntp true`, or the system's time settings)",
                    ),
                });
                return;
            }
            Err(st) if st.code() == Code::Unauthenticated => {
                refused.push(format!("{}: {}", key_name(s), st.message()));
            }
            // Anything else did not come from a login check: the
            // connection failed (a TLS server spoken to in plain text ends
            // it at once), or the server did.
            Err(st) => {
                transport_failure(o, host, &st, out).await;
                return;
            }
        }
    }
    out.push(Finding::error(
        "login",
        format!(
            "the server refused every key sgard would log in with: {}{also}",
            refused.join("; ")
        ),
        "add the key's public half (its .pub line) to the server's authorized_keys file \
         (sgardd re-reads it), or log in with an authorized key: --ssh-key FILE or \
         SGARD_SSH_KEY",
    ));
}

fn no_login_needed(out: &mut Vec<Finding>) {
    out.push(Finding::ok(
        "login",
        "the server asks for no login (sgardd --insecure-no-auth)",
    ));
    out.push(Finding::ok(
        "server-clock",
        "not checked: without logins, the server's clock does not matter to sgard",
    ));
}

/// Whether a refused login was refused for its timestamp.
fn is_clock(s: &tonic::Status) -> bool {
    client::challenge_of(s).is_some()
        || ["timestamp", "window", "clock"]
            .iter()
            .any(|w| s.message().contains(w))
}

/// The login could not even be asked: say why, and whether the server
/// speaks TLS where this client does not.
async fn transport_failure(o: &Opts, host: &str, s: &tonic::Status, out: &mut Vec<Finding>) {
    let speaks_tls = !o.remote.tls
        && match handshake(&o.remote.addr, host, None, o.timeouts.connect).await {
            Ok(_) => true,
            Err((detail, _)) => detail.starts_with("the server's certificate"),
        };
    if speaks_tls {
        // It is the TLS check that failed, not the login.
        out.retain(|f| f.check != "tls");
        out.push(Finding::error(
            "tls",
            format!(
                "not used, but the server speaks TLS: nothing gets through ({})",
                s.message()
            ),
            "use TLS: `sgard remote set ADDR --tls-ca cert.pem` (the server's certificate), \
             or --tls when a CA this system trusts signed it",
        ));
    } else {
        out.push(Finding::error(
            "login",
            format!("the login failed: {}", s.message()),
            "see the server's log; `sgard push` fails the same way",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_well() {
        assert_eq!(span(5), "5 s");
        assert_eq!(span(600), "10 min");
        assert_eq!(span(601), "10 min 1 s");
        assert_eq!(span(7500), "2 h 5 min");
        assert_eq!(span(3 * 86_400 + 5), "3 days");
    }

    #[test]
    fn clocks_are_judged_by_the_minute_and_the_login_window() {
        assert_eq!(clock_finding(3).level, Level::Ok);
        assert_eq!(clock_finding(-59).level, Level::Ok);
        assert_eq!(clock_finding(120).level, Level::Warning);
        let f = clock_finding(-600);
        assert_eq!(f.level, Level::Error);
        assert!(f.detail.starts_with("10 min behind"), "{}", f.detail);
    }

    #[test]
    fn a_token_tells_when_it_was_issued() {
        let body = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"sub":"SHA256:x","iat":1774267200,"exp":1776859200}"#);
        assert_eq!(issued_at(&format!("h.{body}.s")), Some(1_774_267_200));
        assert_eq!(issued_at("not a token"), None);
    }
}
