//! Network failures in words: what went wrong reaching a server and what
//! to do, instead of the names of a library's error variants
//! (`InvalidContentType`, `CaUsedAsEndEntity`, `h2 protocol error`).

use std::error::Error as StdError;
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

/// What the TLS library's error means for the user, with what to do.
fn tls(e: &rustls::Error, addr: &str, host: &str, ca: Option<&Path>) -> String {
    use rustls::{CertificateError, Error};
    let trust = match ca {
        Some(ca) => format!(
            "{} (and it is not a certificate in that file)",
            ca.display()
        ),
        None => "this system's trusted CAs (give the server's certificate or its CA with \
                 --tls-ca FILE)"
            .to_owned(),
    };
    match e {
        Error::InvalidMessage(_) | Error::InappropriateMessage { .. } => format!(
            "{addr} does not speak TLS (its answer is not a TLS record): drop --tls, or check \
             the port"
        ),
        Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => {
                format!("its certificate is not signed by a CA in {trust}")
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!(
                    "its certificate is not valid for the name {host:?} (connect by a name the \
                     certificate lists, or give sgardd a certificate for this one)"
                )
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "its certificate has expired (or this machine's clock is wrong)".to_owned()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "its certificate is not valid yet (is this machine's clock wrong?)".to_owned()
            }
            CertificateError::Revoked => "its certificate has been revoked".to_owned(),
            CertificateError::BadEncoding => "its certificate cannot be parsed".to_owned(),
            CertificateError::BadSignature => {
                "its certificate's signature does not verify".to_owned()
            }
            CertificateError::Other(o) if format!("{o:?}").contains("CaUsedAsEndEntity") => {
                "it presents a CA certificate as its own: give sgardd a certificate signed by \
                 that CA (and the CA to sgard with --tls-ca), or pass that exact certificate \
                 with --tls-ca"
                    .to_owned()
            }
            other => format!(
                "its certificate was refused ({})",
                words(
                    format!("{other:?}")
                        .split(['(', ' ', '{'])
                        .next()
                        .unwrap_or("")
                )
            ),
        },
        Error::AlertReceived(a) => format!(
            "it refused the TLS handshake ({}); does it expect a client certificate, or other \
             TLS settings?",
            words(&format!("{a:?}"))
        ),
        Error::NoCertificatesPresented => "it sent no certificate".to_owned(),
        other => format!(
            "the TLS handshake failed ({})",
            words(
                format!("{other:?}")
                    .split(['(', ' ', '{'])
                    .next()
                    .unwrap_or("")
            )
        ),
    }
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
            return Some(tls(t, addr, host, ca));
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
