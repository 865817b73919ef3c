//! TLS from the `ssl.*` properties: the truststore's and keystore's PEM (files or inline),
//! the broker's name checked or not, built into a rustls client configuration when the
//! properties are read. Encrypted keys, JKS and PKCS12 are refused.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::security;
use crate::config::{ConfigError, Reader};

/// A TLS client configuration built from the `ssl.*` properties.
#[derive(Clone)]
pub(crate) struct TlsSettings {
    pub(crate) config: Arc<rustls::ClientConfig>,
    verify_hostname: bool,
    client_certificate: bool,
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSettings")
            .field("verify_hostname", &self.verify_hostname)
            .field("client_certificate", &self.client_certificate)
            .finish_non_exhaustive()
    }
}

/// A PEM source: a file (property name, path) or inline text (property name, text).
enum Pem<'a> {
    File(&'static str, &'a str),
    Inline(&'static str, &'a str),
}

impl Pem<'_> {
    fn name(&self) -> &'static str {
        match self {
            Pem::File(name, _) | Pem::Inline(name, _) => name,
        }
    }

    fn bytes(&self) -> Result<Vec<u8>, ConfigError> {
        match self {
            Pem::File(name, path) => {
                std::fs::read(path).map_err(|e| security(name, format!("cannot read {path}: {e}")))
            }
            Pem::Inline(_, text) => Ok(text.as_bytes().to_vec()),
        }
    }

    fn certificates(&self) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
        let bytes = self.bytes()?;
        let certs = CertificateDer::pem_slice_iter(&bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| security(self.name(), format!("not PEM: {e}")))?;
        if certs.is_empty() {
            return Err(security(
                self.name(),
                "holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            ));
        }
        Ok(certs)
    }

    fn private_key(&self) -> Result<PrivateKeyDer<'static>, ConfigError> {
        let bytes = self.bytes()?;
        if contains(&bytes, b"ENCRYPTED PRIVATE KEY") || contains(&bytes, b"Proc-Type: 4,ENCRYPTED")
        {
            return Err(encrypted_key(self.name()));
        }
        PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => security(
                self.name(),
                "holds no PEM private key (-----BEGIN PRIVATE KEY-----, RSA PRIVATE KEY or EC \
                 PRIVATE KEY)",
            ),
            // (The error names a line or a base64 fault, never the key's bytes.)
            e => security(self.name(), format!("not a PEM private key: {e}")),
        })
    }
}

fn encrypted_key(name: &'static str) -> ConfigError {
    security(
        name,
        "encrypted keys are not supported: decrypt it (openssl pkcs8 -in key.pem -out \
         plain.pem, for one) and unset ssl.key.password",
    )
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

pub(super) struct TlsProperties<'a> {
    truststore_type: Option<&'a str>,
    truststore_location: Option<Pem<'a>>,
    truststore_certificates: Option<Pem<'a>>,
    keystore_type: Option<&'a str>,
    keystore_location: Option<Pem<'a>>,
    chain: Option<Pem<'a>>,
    key: Option<Pem<'a>>,
    key_password: bool,
    identification: Option<&'a str>,
}

/// The first of the properties given that is set (not empty).
fn first<'a>(r: &mut Reader<'a>, names: &[&'static str]) -> Option<(&'static str, &'a str)> {
    let mut found = None;
    for name in names {
        if let Some(v) = r.raw(name).filter(|v| !v.is_empty()) {
            found = found.or(Some((*name, v)));
        }
    }
    found
}

impl<'a> TlsProperties<'a> {
    pub(super) fn read(r: &mut Reader<'a>) -> TlsProperties<'a> {
        let file = |found: Option<(&'static str, &'a str)>| found.map(|(n, v)| Pem::File(n, v));
        let inline = |found: Option<(&'static str, &'a str)>| found.map(|(n, v)| Pem::Inline(n, v));
        TlsProperties {
            truststore_type: r.raw("ssl.truststore.type").filter(|v| !v.is_empty()),
            truststore_location: file(first(r, &["ssl.truststore.location", "ssl.ca.location"])),
            truststore_certificates: inline(first(r, &["ssl.truststore.certificates"])),
            keystore_type: r.raw("ssl.keystore.type").filter(|v| !v.is_empty()),
            keystore_location: file(first(r, &["ssl.keystore.location"])),
            chain: inline(first(r, &["ssl.keystore.certificate.chain"]))
                .or_else(|| file(first(r, &["ssl.certificate.location"]))),
            key: inline(first(r, &["ssl.keystore.key"]))
                .or_else(|| file(first(r, &["ssl.key.location"]))),
            key_password: r.raw("ssl.key.password").is_some_and(|v| !v.is_empty()),
            identification: r.raw("ssl.endpoint.identification.algorithm"),
        }
    }

    pub(super) fn build(self) -> Result<TlsSettings, ConfigError> {
        self.check_pem_only()?;
        let verify_hostname = verify_hostname(self.identification)?;
        let trust_name = self.trust_name();
        let roots = self.trusted_roots(trust_name)?;
        let builder = client_builder(roots, trust_name, verify_hostname)?;
        let identity = self.client_identity()?;
        let client_certificate = identity.is_some();
        let config = match identity {
            Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(|e| {
                security(
                    "ssl.keystore.location",
                    format!("the client certificate and key do not go together: {e}"),
                )
            })?,
            None => builder.with_no_client_auth(),
        };
        Ok(TlsSettings {
            config: Arc::new(config),
            verify_hostname,
            client_certificate,
        })
    }

    /// Refuses stores that are not PEM, and keys with a password.
    fn check_pem_only(&self) -> Result<(), ConfigError> {
        for (name, value) in [
            ("ssl.truststore.type", self.truststore_type),
            ("ssl.keystore.type", self.keystore_type),
        ] {
            if let Some(v) = value.filter(|v| !v.eq_ignore_ascii_case("PEM")) {
                return Err(ConfigError::Invalid {
                    name,
                    value: v.to_string(),
                    expected: "PEM (this client reads no JKS or PKCS12 stores)",
                });
            }
        }
        if self.key_password {
            return Err(encrypted_key("ssl.key.password"));
        }
        Ok(())
    }

    /// The property the CA certificates come from, to name in errors.
    fn trust_name(&self) -> &'static str {
        self.truststore_location
            .as_ref()
            .or(self.truststore_certificates.as_ref())
            .map_or("ssl.truststore.location", Pem::name)
    }

    /// The CA certificates of the one truststore property set, as rustls' roots.
    fn trusted_roots(&self, trust_name: &'static str) -> Result<RootCertStore, ConfigError> {
        let trusted = match (&self.truststore_location, &self.truststore_certificates) {
            (Some(a), Some(b)) => {
                return Err(security(
                    b.name(),
                    format!("set {} or {}, not both", a.name(), b.name()),
                ))
            }
            (Some(source), None) | (None, Some(source)) => source.certificates()?,
            (None, None) => {
                return Err(security(
                    "ssl.truststore.location",
                    "TLS needs the CA certificates that signed the brokers' certificates: set \
                     ssl.truststore.location (a PEM file), ssl.truststore.certificates (inline \
                     PEM) or ssl.ca.location; this client has no built-in roots",
                ))
            }
        };
        let mut roots = RootCertStore::empty();
        for cert in trusted {
            roots
                .add(cert)
                .map_err(|e| security(trust_name, format!("a certificate rustls refuses: {e}")))?;
        }
        Ok(roots)
    }

    /// The client certificate chain and its key, from the keystore or the chain and key
    /// properties (never both); none when no property of them is set.
    fn client_identity(self) -> Result<Option<ClientIdentity>, ConfigError> {
        match (self.keystore_location, self.chain, self.key) {
            (Some(store), None, None) => Ok(Some((store.certificates()?, store.private_key()?))),
            (Some(store), chain, key) => {
                let other = chain.or(key).map_or("ssl.keystore.key", |p| p.name());
                Err(security(
                    other,
                    format!("set {} or {other}, not both", store.name()),
                ))
            }
            (None, Some(chain), Some(key)) => Ok(Some((chain.certificates()?, key.private_key()?))),
            (None, Some(chain), None) => Err(security(
                chain.name(),
                "a client certificate needs its private key: set ssl.keystore.key (or \
                 ssl.key.location)",
            )),
            (None, None, Some(key)) => Err(security(
                key.name(),
                "a private key needs its certificate chain: set \
                 ssl.keystore.certificate.chain (or ssl.certificate.location)",
            )),
            (None, None, None) => Ok(None),
        }
    }
}

/// A client certificate chain and its private key.
type ClientIdentity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// A rustls client configuration that only lacks its client certificate (or none).
type NeedsClientAuth = rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>;

/// `ssl.endpoint.identification.algorithm`: `https` (or unset) checks the broker's name,
/// empty does not.
fn verify_hostname(identification: Option<&str>) -> Result<bool, ConfigError> {
    Ok(match identification {
        None => true,
        Some(v) if v.eq_ignore_ascii_case("https") => true,
        Some("") => false,
        Some(v) => {
            return Err(ConfigError::Invalid {
                name: "ssl.endpoint.identification.algorithm",
                value: v.to_string(),
                expected: "https (check the broker's name against its certificate) or empty",
            })
        }
    })
}

/// A rustls client configuration that trusts `roots` (checking the broker's name or not),
/// still to be given its client certificate.
fn client_builder(
    roots: RootCertStore,
    trust_name: &'static str,
    verify_hostname: bool,
) -> Result<NeedsClientAuth, ConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| security(trust_name, e.to_string()))?;
    let verifier: Arc<dyn ServerCertVerifier> = if verify_hostname {
        webpki
    } else {
        Arc::new(AnyName(webpki))
    };
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| security("security.protocol", e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier))
}

/// `ssl.endpoint.identification.algorithm=` (empty): the chain is verified, the name is not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
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
