//! Network failures in words: what went wrong reaching a server and what
//! to do, instead of the names of a library's error variants
//! (`InvalidContentType`, `CaUsedAsEndEntity`, `h2 protocol error`).

use std::error::Error as StdError;

use rustls::CertificateError;
use std::io;
use std::path::Path;

use tonic::Status;

/// A CamelCase name (`HandshakeFailure`) as words (`handshake failure`).
pub fn words(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                out.push(' ');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The errors a failure is made of, outermost first; an `io::Error` that
/// wraps another error is followed by that error (its `source` skips it).
fn causes<'a>(e: &'a (dyn StdError + 'static)) -> Vec<&'a (dyn StdError + 'static)> {
    let mut out = Vec::new();
    let mut next = Some(e);
    while let Some(c) = next {
        out.push(c);
        if let Some(inner) = c.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            out.push(inner);
        }
        next = c.source();
    }
    out
}

/// A failed TLS handshake in words (never a rustls or webpki enum name),
/// and what to do: `(what, hint)`. `ca` is the file given with
/// `--tls-ca`, `host` the name the server was reached by.
pub fn tls(r: &rustls::Error, ca: Option<&Path>, host: &str) -> (String, String) {
    let give_ca = "give the file holding the server's certificate (or the CA that signed it): \
                   `sgard remote set ADDR --tls-ca FILE` (or --tls-ca FILE on the command)";
    let not_tls = "the server may not speak TLS: if sgardd runs without --tls-cert, drop TLS \
                   here (`sgard remote set ADDR` without --tls, or --no-tls)";
    let cert =
        |what: String, hint: &str| (format!("the server's certificate {what}"), hint.to_owned());
    match r {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => match ca {
                Some(ca) => cert(
                    format!(
                        "is not one of the certificates in {} and is not signed by one of them",
                        ca.display()
                    ),
                    "give the file holding this server's certificate (or its CA): `sgard remote \
                     set ADDR --tls-ca FILE`; if the server's certificate was replaced, fetch \
                     the new one",
                ),
                None => cert(
                    "is not signed by a certificate authority this system trusts".into(),
                    give_ca,
                ),
            },
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => cert(
                match c {
                    CertificateError::ExpiredContext { not_after, .. } => {
                        format!("expired on {}", date(not_after.as_secs()))
                    }
                    _ => "has expired".into(),
                },
                "renew the server's certificate (or check this machine's clock)",
            ),
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => cert(
                match c {
                    CertificateError::NotValidYetContext { not_before, .. } => {
                        format!("is not valid before {}", date(not_before.as_secs()))
                    }
                    _ => "is not valid yet".into(),
                },
                "check this machine's clock (and the server's)",
            ),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                cert(
                    match c {
                        CertificateError::NotValidForNameContext { presented, .. }
                            if !presented.is_empty() =>
                        {
                            format!("is for {}, not for {host}", presented.join(", "))
                        }
                        _ => format!("is not for {host}"),
                    },
                    "reach the server by a name its certificate carries, or make it a certificate \
                 for this name (openssl -addext \"subjectAltName=DNS:NAME\")",
                )
            }
            CertificateError::Revoked => cert("has been revoked".into(), give_ca),
            CertificateError::BadSignature => match ca {
                Some(ca) => cert(
                    format!(
                        "is not signed by a certificate in {}: one there bears its issuer's \
                         name but has another key (a CA made again under the same name, or the \
                         wrong file)",
                        ca.display()
                    ),
                    give_ca,
                ),
                None => cert("is not correctly signed by its issuer".into(), give_ca),
            },
            CertificateError::BadEncoding => cert("is malformed".into(), give_ca),
            CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
                cert(
                    "is not meant for a TLS server".into(),
                    "give the server a certificate for TLS servers",
                )
            }
            CertificateError::Other(o) => {
                let text = o.to_string();
                let what = if text.contains("CaUsedAsEndEntity") {
                    "is a CA certificate, used as the server's own; trust that exact \
                     certificate with --tls-ca FILE (sgard then pins it)"
                        .to_owned()
                } else if text.contains("EndEntityUsedAsCa") {
                    "is signed by a certificate that is not a CA".to_owned()
                } else if text.contains("UnsupportedSignatureAlgorithm") {
                    "is signed with an algorithm sgard does not support".to_owned()
                } else {
                    "was refused by the certificate checks".to_owned()
                };
                cert(what, give_ca)
            }
            _ => cert("was refused by the certificate checks".into(), give_ca),
        },
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            ("the server did not answer in TLS".into(), not_tls.into())
        }
        rustls::Error::NoCertificatesPresented => (
            "the server presented no certificate".into(),
            "check sgardd's --tls-cert file".into(),
        ),
        rustls::Error::PeerIncompatible(_) => (
            "the server and sgard share no TLS version or cipher suite".into(),
            "use a current TLS setup on the server (TLS 1.2 or 1.3)".into(),
        ),
        rustls::Error::AlertReceived(_) => (
            "the server ended the TLS handshake with an alert".into(),
            "see the server's log".into(),
        ),
        rustls::Error::DecryptError => (
            "the TLS handshake failed: the server's key does not match its certificate".into(),
            "check sgardd's --tls-cert and --tls-key files".into(),
        ),
        _ => (
            "the TLS handshake failed".into(),
            format!("{not_tls}; otherwise see the server's log"),
        ),
    }
}

/// A date for people (UTC).
fn date(secs: u64) -> String {
    i64::try_from(secs)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map_or_else(
            || format!("{secs} s after 1970"),
            |d| d.format("%Y-%m-%d %H:%M UTC").to_string(),
        )
}

/// What a failure to reach `addr` (`host` its host name; `ca`: the
/// certificate file given with `--tls-ca`) means, if it is one sgard knows:
/// a refused or unreachable port, a name that does not resolve, a TLS or
/// HTTP/2 mismatch.
pub fn reaching(
    e: &(dyn StdError + 'static),
    addr: &str,
    host: &str,
    ca: Option<&Path>,
) -> Option<String> {
    let all = causes(e);
    for c in &all {
        if let Some(t) = c.downcast_ref::<rustls::Error>() {
            let (what, hint) = tls(t, ca, host);
            return Some(format!("{what}; {hint}"));
        }
    }
    for c in &all {
        if let Some(io) = c.downcast_ref::<io::Error>() {
            let why = match io.kind() {
                io::ErrorKind::ConnectionRefused => Some(format!(
                    "nothing is listening at {addr} (connection refused): is sgardd running \
                     there, and is the port right?"
                )),
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof => Some(not_sgard(addr)),
                io::ErrorKind::TimedOut => Some(format!("{addr} did not answer (timed out)")),
                io::ErrorKind::HostUnreachable | io::ErrorKind::NetworkUnreachable => {
                    Some(format!("{addr} cannot be reached from here (no route)"))
                }
                _ => None,
            };
            if why.is_some() {
                return why;
            }
        }
    }
    let text: String = all.iter().map(|c| format!("{c} / ")).collect();
    if text.contains("dns error") || text.contains("failed to lookup address") {
        return Some(format!(
            "the name {host:?} does not resolve (check the address)"
        ));
    }
    if text.contains("h2 protocol error")
        || text.contains("http2 error")
        || text.contains("frame with invalid size")
        || text.contains("connection closed before message completed")
        || text.contains("invalid HTTP version")
    {
        return Some(not_sgard(addr));
    }
    None
}

/// The server at `addr` closed or garbled the conversation: not an sgard
/// server on this port, or one that speaks TLS to a client that does not.
fn not_sgard(addr: &str) -> String {
    format!(
        "{addr} did not answer as an sgard server (not gRPC over HTTP/2): if it uses TLS, add \
         --tls (and --tls-ca FILE for its certificate); else check the port"
    )
}

/// A gRPC status that is really a failure to reach the server, in words.
pub fn status(s: &Status, addr: &str, host: &str, ca: Option<&Path>) -> Option<String> {
    if let Some(src) = StdError::source(s)
        && let Some(why) = reaching(src, addr, host, ca)
    {
        return Some(why);
    }
    let m = s.message();
    let cancelled = s.code() == tonic::Code::Cancelled && m == "operation was canceled";
    if cancelled || m.contains("h2 protocol error") || m.contains("transport error") {
        return Some(not_sgard(addr));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_words() {
        assert_eq!(words("HandshakeFailure"), "handshake failure");
        assert_eq!(words("ok"), "ok");
    }

    #[test]
    fn a_refused_connection_says_nothing_listens() {
        let e = io::Error::from(io::ErrorKind::ConnectionRefused);
        let why = reaching(&e, "h:1", "h", None).unwrap();
        assert!(why.contains("nothing is listening at h:1"), "{why}");
    }

    #[test]
    fn tls_errors_are_words_without_enum_names() {
        let cases = [
            rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
            rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName),
            rustls::Error::AlertReceived(rustls::AlertDescription::HandshakeFailure),
        ];
        for c in cases {
            let wrapped = io::Error::new(io::ErrorKind::InvalidData, c);
            let why = reaching(&wrapped, "h:1", "h", None).unwrap();
            for name in [
                "InvalidContentType",
                "UnknownIssuer",
                "NotValidForName",
                "HandshakeFailure",
            ] {
                assert!(!why.contains(name), "{why}");
            }
        }
    }
}
