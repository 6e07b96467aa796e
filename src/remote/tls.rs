//! TLS with a user-given certificate file (`--tls-ca`).
//!
//! Each certificate in the file is trusted two ways: as a CA that signs the
//! server's certificate (checked as usual, host name included), and as that
//! exact certificate. The second is what makes a self-signed certificate
//! from `openssl req -x509` work: it is marked `CA:TRUE`, and a certificate
//! path checker refuses a CA certificate as a server's own. A server whose
//! certificate is byte for byte one the user handed us is the server the user
//! meant, whatever its name, so the pinned case skips the host-name check.
//! The handshake signatures are verified in both cases, so the server must
//! hold the certificate's private key.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use hyper_util::rt::TokioIo;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// Reads the certificates of a PEM file (at least one).
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{}: not a PEM certificate file: {e}", path.display()))?;
    if certs.is_empty() {
        bail!(
            "{}: no certificate in it (expected a PEM file with \"BEGIN CERTIFICATE\")",
            path.display()
        );
    }
    Ok(certs)
}

/// The certificates of a PEM file as PEM text again, and nothing else of
/// the file: a private key kept in the same file never leaves it (the text
/// goes into the repository, see `config::save`).
///
/// # Errors
/// As [`read_certs`].
pub fn certs_only_pem(path: &Path) -> Result<String> {
    let mut out = String::new();
    for c in read_certs(path)? {
        let pem =
            pem_rfc7468::encode_string("CERTIFICATE", pem_rfc7468::LineEnding::LF, c.as_ref())
                .map_err(|e| anyhow!("{}: encoding a certificate: {e}", path.display()))?;
        out.push_str(&pem);
    }
    Ok(out)
}

/// Trusts a server whose certificate is one of `pinned`, or is signed by one.
#[derive(Debug)]
struct PinnedOrSigned {
    pinned: Vec<CertificateDer<'static>>,
    signed: Arc<WebPkiServerVerifier>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedOrSigned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self
            .pinned
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            return Ok(ServerCertVerified::assertion());
        }
        self.signed
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Connects over TCP and TLS (ALPN `h2`) trusting the certificates in `ca`.
#[derive(Clone)]
pub struct Connector {
    tls: TlsConnector,
    name: ServerName<'static>,
}

impl Connector {
    /// A connector for `host` (a DNS name or an IP address) trusting `ca`.
    pub fn new(ca: &Path, host: &str) -> Result<Self> {
        let certs = read_certs(ca)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(certs.iter().cloned());
        if added == 0 {
            bail!("{}: no usable certificate in it", ca.display());
        }
        let signed = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| anyhow!("{}: {e}", ca.display()))?;
        let verifier = PinnedOrSigned {
            pinned: certs,
            signed,
            algorithms: provider.signature_verification_algorithms,
        };
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| anyhow!("TLS setup: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| anyhow!("{host:?} is not a host name or IP address"))?;
        Ok(Connector {
            tls: TlsConnector::from(Arc::new(config)),
            name,
        })
    }

    /// Opens one connection to `addr` (`host:port`).
    pub async fn connect(self, addr: String) -> std::io::Result<TokioIo<TlsStream<TcpStream>>> {
        let tcp = TcpStream::connect(&addr).await?;
        tcp.set_nodelay(true)?;
        let tls = self.tls.connect(self.name, tcp).await?;
        Ok(TokioIo::new(tls))
    }
}
