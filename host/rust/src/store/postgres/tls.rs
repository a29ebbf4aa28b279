//! TLS for the PostgreSQL binding, with libpq's meaning of `sslmode`:
//!
//! | `sslmode` | encryption | server certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `prefer` (default) | when the server offers it | not verified |
//! | `require` | always | not verified |
//! | `verify-ca`, `verify-full` | always | verified against the webpki roots and `sslrootcert` (a PEM file), host name included |
//!
//! `prefer` and `require` protect against passive listeners only, as in
//! libpq; use `verify-full` across untrusted networks.
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, ring};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::OpenError;

/// What the URL asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// `disable`.
    Off,
    /// `prefer` / `require`: encrypt, do not verify.
    Encrypt(SslMode),
    /// `verify-ca` / `verify-full`: encrypt and verify, trusting these extra
    /// roots besides the webpki ones.
    Verify(Option<String>),
}

impl Mode {
    /// The mode of a URL's `sslmode` (and `sslrootcert`) parameters.
    pub fn parse(sslmode: Option<&str>, rootcert: Option<&str>) -> Result<Mode, OpenError> {
        Ok(match sslmode.unwrap_or("prefer") {
            "disable" => Mode::Off,
            "prefer" | "allow" => Mode::Encrypt(SslMode::Prefer),
            "require" => Mode::Encrypt(SslMode::Require),
            "verify-ca" | "verify-full" => Mode::Verify(rootcert.map(str::to_owned)),
            other => {
                return Err(OpenError::BadOption(format!(
                    "sslmode={other} (expected disable, prefer, require, verify-ca or verify-full)"
                )));
            }
        })
    }

    /// The mode of an existing connection configuration.
    pub fn of(ssl: SslMode) -> Mode {
        match ssl {
            SslMode::Disable => Mode::Off,
            other => Mode::Encrypt(other),
        }
    }

    /// The `SslMode` tokio-postgres negotiates with.
    pub fn ssl_mode(&self) -> SslMode {
        match self {
            Mode::Off => SslMode::Disable,
            Mode::Encrypt(mode) => *mode,
            Mode::Verify(_) => SslMode::Require,
        }
    }

    /// The connector, none for `disable`.
    pub fn connector(&self) -> Result<Option<MakeRustlsConnect>, OpenError> {
        let provider = Arc::new(ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| OpenError::BadOption(format!("TLS: {e}")))?;
        let config = match self {
            Mode::Off => return Ok(None),
            Mode::Encrypt(_) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
                .with_no_client_auth(),
            Mode::Verify(rootcert) => {
                let mut roots =
                    RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
                if let Some(path) = rootcert {
                    let certs = CertificateDer::pem_file_iter(path)
                        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                        .map_err(|e| OpenError::BadOption(format!("sslrootcert={path}: {e}")))?;
                    for cert in certs {
                        roots.add(cert).map_err(|e| {
                            OpenError::BadOption(format!("sslrootcert={path}: {e}"))
                        })?;
                    }
                }
                builder.with_root_certificates(roots).with_no_client_auth()
            }
        };
        Ok(Some(MakeRustlsConnect::new(config)))
    }
}

/// libpq's `prefer` / `require`: the session is encrypted, the server is
/// not authenticated (signatures are still checked, so the handshake is
/// sound).
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
