//! TLS for the PostgreSQL binding, with libpq's meaning of `sslmode`:
//!
//! | `sslmode` | encryption | server certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `prefer` (default) | when the server offers it | not verified |
//! | `require` | always | not verified |
//! | `verify-ca` | always | its chain verified against `sslrootcert` only |
//! | `verify-full` | always | as `verify-ca`, and the host name too |
//!
//! As in libpq, `sslrootcert` is a PEM file of the only roots trusted
//! (default `~/.postgresql/root.crt`); `sslrootcert=system` trusts the
//! public web roots instead. A verified mode without any root is refused at
//! open. `prefer` and `require` protect against passive listeners only;
//! use `verify-full` across untrusted networks.
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
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
    /// `verify-ca` / `verify-full`: encrypt and verify against these roots
    /// only (`sslrootcert`: a PEM file, or `system`); `host_name` for
    /// `verify-full`.
    Verify {
        rootcert: Option<String>,
        host_name: bool,
    },
}

impl Mode {
    /// The mode of a URL's `sslmode` (and `sslrootcert`) parameters.
    pub fn parse(sslmode: Option<&str>, rootcert: Option<&str>) -> Result<Mode, OpenError> {
        Ok(match sslmode.unwrap_or("prefer") {
            "disable" => Mode::Off,
            "prefer" | "allow" => Mode::Encrypt(SslMode::Prefer),
            "require" => Mode::Encrypt(SslMode::Require),
            "verify-ca" | "verify-full" => Mode::Verify {
                rootcert: rootcert.map(str::to_owned),
                host_name: sslmode == Some("verify-full"),
            },
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
            Mode::Verify { .. } => SslMode::Require,
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
            Mode::Verify {
                rootcert,
                host_name,
            } => {
                let roots = Arc::new(roots(rootcert.as_deref())?);
                let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| OpenError::BadOption(format!("TLS: {e}")))?;
                let verifier: Arc<dyn ServerCertVerifier> = if *host_name {
                    webpki
                } else {
                    Arc::new(AnyName(webpki))
                };
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(verifier)
                    .with_no_client_auth()
            }
        };
        Ok(Some(MakeRustlsConnect::new(config)))
    }
}

/// The roots a verified mode trusts: exactly those of `sslrootcert` (libpq's
/// default file when absent), or the public web roots for `system`.
pub(super) fn roots(rootcert: Option<&str>) -> Result<RootCertStore, OpenError> {
    let path = match rootcert {
        Some("system") => {
            return Ok(RootCertStore::from_iter(
                webpki_roots::TLS_SERVER_ROOTS.iter().cloned(),
            ));
        }
        Some(path) => path.to_owned(),
        None => {
            let default = std::env::var_os("HOME")
                .map(|h| std::path::Path::new(&h).join(".postgresql/root.crt"))
                .filter(|p| p.is_file());
            match default {
                Some(p) => p.display().to_string(),
                None => {
                    return Err(OpenError::BadOption(
                        "sslmode=verify-ca / verify-full needs sslrootcert (a PEM file of the roots to trust, or `system` for the public web roots); ~/.postgresql/root.crt does not exist".into(),
                    ));
                }
            }
        }
    };
    let certs = CertificateDer::pem_file_iter(&path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| OpenError::BadOption(format!("sslrootcert={path}: {e}")))?;
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| OpenError::BadOption(format!("sslrootcert={path}: {e}")))?;
    }
    if roots.is_empty() {
        return Err(OpenError::BadOption(format!(
            "sslrootcert={path}: no certificate in the file"
        )));
    }
    Ok(roots)
}

/// libpq's `verify-ca`: the chain must lead to a trusted root; the name in
/// the certificate is not compared with the host.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
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

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "-----BEGIN CERTIFICATE-----
MIIBiDCCAS2gAwIBAgIUDLYuw2t0EBa7rOXaMKhbfKdkFN0wCgYIKoZIzj0EAwIw
GDEWMBQGA1UEAwwNZ2FrLXRlc3Qtcm9vdDAgFw0yNjEyMDEyMDE0NDRaGA8yMTI2
MTEwNzIwMTQ0NFowGDEWMBQGA1UEAwwNZ2FrLXRlc3Qtcm9vdDBZMBMGByqGSM49
AgEGCCqGSM49AwEHA0IABFF4WxCxj6CK255tU6ux6Mw9wPw3BEv4R9vetUHu9Jqa
svtLD4hzVO9HtVGTwAbg2l/ef+V7H/tDkCSBrJA+Q0ujUzBRMB0GA1UdDgQWBBQe
43J7Xsz0dmqdBZPF1GKrkRL+pTAfBgNVHSMEGDAWgBQe43J7Xsz0dmqdBZPF1GKr
kRL+pTAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0kAMEYCIQCUNRr56jqI
WXhUG6jStwYsLn7xOp5wgDM+C8PUSP9mEgIhAIgqTq5yp3pSanEYi927Vqp7XLgv
xB5uhsqsQbT0POdr
-----END CERTIFICATE-----
";

    /// libpq trusts only `sslrootcert`: a verified connection must not
    /// also accept every public web root.
    #[test]
    fn a_given_root_is_the_only_one_trusted() {
        let dir = std::env::temp_dir().join(format!("gak-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("root.crt");
        std::fs::write(&path, ROOT).unwrap();
        let only = roots(Some(path.to_str().unwrap())).unwrap();
        assert_eq!(only.len(), 1);
        let system = roots(Some("system")).unwrap();
        assert!(system.len() > 50, "the public roots: {}", system.len());
        let empty = dir.join("empty.crt");
        std::fs::write(&empty, "").unwrap();
        assert!(roots(Some(empty.to_str().unwrap())).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn verify_full_checks_the_host_name_and_verify_ca_does_not() {
        let full = Mode::parse(Some("verify-full"), Some("x.pem")).unwrap();
        let ca = Mode::parse(Some("verify-ca"), Some("x.pem")).unwrap();
        assert!(matches!(
            full,
            Mode::Verify {
                host_name: true,
                ..
            }
        ));
        assert!(matches!(
            ca,
            Mode::Verify {
                host_name: false,
                ..
            }
        ));
    }
}
