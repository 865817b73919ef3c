//! TLS on SSL and SASL_SSL listeners: rustls from PEM files with Kafka's setting names
//! (`ssl.keystore.location` holding the key and its certificate chain, `ssl.truststore.location`
//! the CAs that sign client certificates), TLS 1.2 and 1.3, and `ssl.client.auth`. With a
//! client certificate the connection's principal is its subject (`User:CN=alice,O=acme`, the
//! RFC 2253 form Kafka's default `ssl.principal.mapping.rules` gives).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// `ssl.client.auth`: whether a client must present a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// No certificate asked for (Kafka's default): the client is `User:ANONYMOUS` unless SASL
    /// authenticates it.
    #[default]
    None,
    /// Asked for; a client without one connects as `User:ANONYMOUS` (or authenticates with SASL).
    Requested,
    /// A client without a certificate that chains to the truststore fails the handshake.
    Required,
}

impl std::str::FromStr for ClientAuth {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(ClientAuth::None),
            "requested" => Ok(ClientAuth::Requested),
            "required" => Ok(ClientAuth::Required),
            _ => Err(format!("{s:?} is not none, requested or required")),
        }
    }
}

/// The TLS settings of the broker's SSL and SASL_SSL listeners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `ssl.keystore.location`: a PEM file of the private key and the certificate chain (leaf
    /// first).
    pub keystore: Option<PathBuf>,
    /// `ssl.truststore.location`: a PEM file of the CA certificates client certificates must
    /// chain to (needed when `client_auth` is not `none`).
    pub truststore: Option<PathBuf>,
    /// `ssl.client.auth`; anything but `none` needs `truststore`.
    pub client_auth: ClientAuth,
    /// `ssl.enabled.protocols`: TLS 1.2 allowed besides 1.3 (the default, as Kafka's).
    pub tls12: bool,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            keystore: None,
            truststore: None,
            client_auth: ClientAuth::None,
            tls12: true,
        }
    }
}

/// Why TLS could not be set up; the broker does not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// An SSL or SASL_SSL listener, and no `ssl.keystore.location`.
    #[error("a listener uses TLS, but --ssl-keystore-location is not set")]
    NoKeystore,
    /// `ssl.client.auth` `requested` or `required`, and no `ssl.truststore.location`.
    #[error(
        "--ssl-client-auth {0:?} needs --ssl-truststore-location (the CAs of client certificates)"
    )]
    NoTruststore(ClientAuth),
    /// The keystore or truststore file cannot be read, or is not valid PEM.
    #[error("{path}: {reason}")]
    Pem {
        /// The keystore or truststore file.
        path: PathBuf,
        /// The PEM reader's error (an I/O error included).
        reason: String,
    },
    /// The keystore has no certificate or no (unencrypted) private key, or the truststore no
    /// CA certificate.
    #[error("{path}: no {what} in the file")]
    Missing {
        /// The keystore or truststore file.
        path: PathBuf,
        /// What it lacks, as the message names it.
        what: &'static str,
    },
    /// rustls refused a CA certificate, or the keystore's private key (a kind it cannot use,
    /// or not the key of the leaf certificate).
    #[error("TLS settings: {0}")]
    Rustls(#[from] rustls::Error),
    /// No client-certificate verifier could be built from the truststore's CAs.
    #[error("--ssl-truststore-location: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

impl TlsSettings {
    /// The rustls acceptor for these settings (files read now; the keystore again whenever it
    /// changes: [`Keystore`]).
    pub fn acceptor(&self) -> Result<tokio_rustls::TlsAcceptor, TlsError> {
        let keystore = self.keystore.as_ref().ok_or(TlsError::NoKeystore)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions: &[&rustls::SupportedProtocolVersion] = if self.tls12 {
            &[&rustls::version::TLS13, &rustls::version::TLS12]
        } else {
            &[&rustls::version::TLS13]
        };
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)?;
        let builder = match self.client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            auth => {
                let path = self
                    .truststore
                    .as_ref()
                    .ok_or(TlsError::NoTruststore(auth))?;
                let pem = |reason: rustls_pki_types::pem::Error| TlsError::Pem {
                    path: path.clone(),
                    reason: reason.to_string(),
                };
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(path).map_err(pem)? {
                    roots.add(cert.map_err(pem)?)?;
                }
                if roots.is_empty() {
                    return Err(TlsError::Missing {
                        path: path.clone(),
                        what: "CA certificate",
                    });
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
                let verifier = if auth == ClientAuth::Requested {
                    verifier.allow_unauthenticated().build()?
                } else {
                    verifier.build()?
                };
                builder.with_client_cert_verifier(verifier)
            }
        };
        let keystore = Keystore::open(keystore.clone(), provider)?;
        let config = builder.with_cert_resolver(Arc::new(keystore));
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

/// The broker's key and certificate chain, read again when the keystore file changes (its
/// modification time, looked at on each handshake: a `stat` beside a handshake's signatures),
/// so a renewed certificate is served without a restart. A file that no longer reads as a
/// keystore is logged and the previous one kept.
pub(crate) struct Keystore {
    path: PathBuf,
    provider: Arc<rustls::crypto::CryptoProvider>,
    current: Mutex<(Option<SystemTime>, Arc<CertifiedKey>)>,
}

impl std::fmt::Debug for Keystore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keystore({})", self.path.display())
    }
}

impl Keystore {
    fn open(
        path: PathBuf,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Keystore, TlsError> {
        let modified = modified(&path);
        let key = load(&path, &provider)?;
        Ok(Keystore {
            path,
            provider,
            current: Mutex::new((modified, Arc::new(key))),
        })
    }
}

impl ResolvesServerCert for Keystore {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let modified = modified(&self.path);
        if modified != current.0 {
            current.0 = modified;
            match load(&self.path, &self.provider) {
                Ok(key) => {
                    tracing::info!(path = %self.path.display(), "keystore changed: serving its certificate");
                    current.1 = Arc::new(key);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "keystore changed but cannot be read: serving the previous certificate")
                }
            }
        }
        Some(current.1.clone())
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// A PEM keystore: the certificate chain (leaf first) and the private key, which must match.
fn load(path: &Path, provider: &rustls::crypto::CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let pem = |reason: rustls_pki_types::pem::Error| TlsError::Pem {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(pem)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem)?;
    if chain.is_empty() {
        return Err(TlsError::Missing {
            path: path.to_path_buf(),
            what: "certificate",
        });
    }
    let key = PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => TlsError::Missing {
            path: path.to_path_buf(),
            what: "private key (an encrypted key is not supported: ssl.key.password)",
        },
        e => pem(e),
    })?;
    Ok(CertifiedKey::from_der(chain, key, provider)?)
}

/// The subject of a client certificate as RFC 2253 writes it (the last RDN first, `CN=alice,O=acme`),
/// as Java's `X500Principal.getName()` and so Kafka's default principal mapping give it.
pub fn subject(certificate: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(certificate).ok()?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter_rdn() {
        let mut parts = Vec::new();
        for attribute in rdn.iter() {
            let oid = attribute.attr_type().to_id_string();
            let value = match attribute.as_str() {
                Ok(text) => escape(text),
                Err(_) => format!("#{}", hex(attribute.attr_value().data)),
            };
            parts.push(format!("{}={value}", keyword(&oid).unwrap_or(&oid)));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// The attribute keywords RFC 2253 (and Java) write by name.
fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// RFC 2253 §2.4: `,+"\<>;` escaped, and a leading `#` or space and a trailing space.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let edge = (i == 0 && (c == '#' || c == ' ')) || (i == last && c == ' ');
        if edge || matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc2253_escapes_what_it_must() {
        assert_eq!(escape("alice"), "alice");
        assert_eq!(escape("Smith, John"), "Smith\\, John");
        assert_eq!(escape("#1 "), "\\#1\\ ");
        assert_eq!(escape("a+b;c"), "a\\+b\\;c");
    }
}
