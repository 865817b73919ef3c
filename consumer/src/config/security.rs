//! `security.protocol` and its companions, under the Java client's names (and librdkafka's
//! where they differ): TLS from PEM (`ssl.truststore.*`, `ssl.keystore.*`,
//! `ssl.endpoint.identification.algorithm`) and SASL credentials (`sasl.mechanism`,
//! `sasl.jaas.config`, `sasl.username` / `sasl.password`).
//!
//! Everything is checked when the configuration is parsed: the PEM files are read and the TLS
//! configuration built then, so a missing file or a bad key is an error of `from_config`, not
//! of the first connection. No secret (password, JAAS config, private key) appears in a
//! `Debug` print or an error message.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::{ConfigError, Reader};

/// `security.protocol`: how the client talks to brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SecurityProtocol {
    /// Plain TCP (the default).
    #[default]
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL authentication over plain TCP.
    SaslPlaintext,
    /// SASL authentication over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Parses Kafka's name, case-insensitively as the Java client.
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    /// Whether connections are TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// `sasl.mechanism`: the SASL mechanisms this client speaks (the `sasl` crate's).
pub use sasl::Mechanism as SaslMechanism;

/// A secret that prints as `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(pub(crate) String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// SASL credentials and mechanism.
#[derive(Debug, Clone)]
pub(crate) struct SaslSettings {
    pub(crate) mechanism: SaslMechanism,
    pub(crate) username: String,
    pub(crate) password: Secret,
}

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

/// How connections are secured: `security.protocol` and what it needs (a TLS configuration, SASL
/// credentials). Built from the properties by the clients' `from_config`; the default is
/// PLAINTEXT. Its `Debug` print shows no secret.
#[derive(Debug, Clone, Default)]
pub struct Security {
    protocol: SecurityProtocol,
    pub(crate) tls: Option<TlsSettings>,
    pub(crate) sasl: Option<SaslSettings>,
}

impl Security {
    /// `security.protocol`.
    pub fn protocol(&self) -> SecurityProtocol {
        self.protocol
    }

    /// The SASL mechanism, under SASL_PLAINTEXT and SASL_SSL.
    pub fn sasl_mechanism(&self) -> Option<SaslMechanism> {
        self.sasl.as_ref().map(|s| s.mechanism)
    }

    /// The SASL user name, under SASL_PLAINTEXT and SASL_SSL.
    pub fn sasl_username(&self) -> Option<&str> {
        self.sasl.as_ref().map(|s| s.username.as_str())
    }

    /// Reads every security property (those of the protocols not in use too, which are then
    /// ignored, as the Java client does).
    pub(super) fn read(r: &mut Reader<'_>) -> Result<Security, ConfigError> {
        let protocol = match r.raw("security.protocol") {
            None | Some("") => SecurityProtocol::Plaintext,
            Some(v) => SecurityProtocol::from_name(v).ok_or_else(|| ConfigError::Invalid {
                name: "security.protocol",
                value: v.to_string(),
                expected: "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
            })?,
        };
        let tls = TlsProperties::read(r);
        let sasl = SaslProperties::read(r);
        Ok(Security {
            protocol,
            tls: if protocol.uses_tls() {
                Some(tls.build()?)
            } else {
                None
            },
            sasl: if protocol.uses_sasl() {
                Some(sasl.build(protocol)?)
            } else {
                None
            },
        })
    }
}

fn security(name: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Security {
        name,
        reason: reason.into(),
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

struct TlsProperties<'a> {
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
    fn read(r: &mut Reader<'a>) -> TlsProperties<'a> {
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

    fn build(self) -> Result<TlsSettings, ConfigError> {
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
        let verify_hostname = match self.identification {
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
        };

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
        let trust_name = self
            .truststore_location
            .as_ref()
            .or(self.truststore_certificates.as_ref())
            .map_or("ssl.truststore.location", Pem::name);
        let mut roots = RootCertStore::empty();
        for cert in trusted {
            roots
                .add(cert)
                .map_err(|e| security(trust_name, format!("a certificate rustls refuses: {e}")))?;
        }

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| security(trust_name, e.to_string()))?;
        let verifier: Arc<dyn ServerCertVerifier> = if verify_hostname {
            webpki
        } else {
            Arc::new(AnyName(webpki))
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| security("security.protocol", e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);

        let (chain, key) = match (self.keystore_location, self.chain, self.key) {
            (Some(store), None, None) => (Some(store.certificates()?), Some(store.private_key()?)),
            (Some(store), chain, key) => {
                let other = chain.or(key).map_or("ssl.keystore.key", |p| p.name());
                return Err(security(
                    other,
                    format!("set {} or {other}, not both", store.name()),
                ));
            }
            (None, Some(chain), Some(key)) => {
                (Some(chain.certificates()?), Some(key.private_key()?))
            }
            (None, Some(chain), None) => {
                return Err(security(
                    chain.name(),
                    "a client certificate needs its private key: set ssl.keystore.key (or \
                     ssl.key.location)",
                ))
            }
            (None, None, Some(key)) => {
                return Err(security(
                    key.name(),
                    "a private key needs its certificate chain: set \
                     ssl.keystore.certificate.chain (or ssl.certificate.location)",
                ))
            }
            (None, None, None) => (None, None),
        };
        let client_certificate = chain.is_some();
        let config = match (chain, key) {
            (Some(chain), Some(key)) => builder.with_client_auth_cert(chain, key).map_err(|e| {
                security(
                    "ssl.keystore.location",
                    format!("the client certificate and key do not go together: {e}"),
                )
            })?,
            _ => builder.with_no_client_auth(),
        };
        Ok(TlsSettings {
            config: Arc::new(config),
            verify_hostname,
            client_certificate,
        })
    }
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

struct SaslProperties<'a> {
    mechanism: Option<&'a str>,
    jaas: Option<&'a str>,
    username: Option<&'a str>,
    password: Option<&'a str>,
}

impl<'a> SaslProperties<'a> {
    fn read(r: &mut Reader<'a>) -> SaslProperties<'a> {
        SaslProperties {
            mechanism: r.raw("sasl.mechanism").filter(|v| !v.is_empty()),
            jaas: r.raw("sasl.jaas.config").filter(|v| !v.is_empty()),
            username: r.raw("sasl.username").filter(|v| !v.is_empty()),
            // (Trimmed, as every value: a password with outer spaces goes in sasl.jaas.config,
            // quoted.)
            password: r.raw("sasl.password"),
        }
    }

    fn build(self, protocol: SecurityProtocol) -> Result<SaslSettings, ConfigError> {
        let mechanism = match self.mechanism {
            None => {
                return Err(security(
                    "sasl.mechanism",
                    format!(
                        "{} needs a mechanism this client speaks: PLAIN, SCRAM-SHA-256 or \
                         SCRAM-SHA-512 (the Java client's default, GSSAPI, is not supported)",
                        protocol.name()
                    ),
                ))
            }
            Some(v) => SaslMechanism::from_name(v).ok_or_else(|| ConfigError::Invalid {
                name: "sasl.mechanism",
                value: v.to_string(),
                expected: "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (GSSAPI and OAUTHBEARER are \
                           not supported)",
            })?,
        };
        let (username, password) = match (self.jaas, self.username, self.password) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(security(
                    "sasl.jaas.config",
                    "set sasl.jaas.config or sasl.username and sasl.password, not both",
                ))
            }
            (Some(jaas), None, None) => parse_jaas(jaas)?,
            (None, Some(user), Some(password)) => (user.to_string(), password.to_string()),
            (None, Some(_), None) => {
                return Err(security(
                    "sasl.password",
                    "sasl.username needs sasl.password",
                ))
            }
            (None, None, Some(_)) => {
                return Err(security(
                    "sasl.username",
                    "sasl.password needs sasl.username",
                ))
            }
            (None, None, None) => {
                return Err(security(
                    "sasl.jaas.config",
                    format!(
                        "{} needs credentials: set sasl.jaas.config (e.g. \
                         org.apache.kafka.common.security.scram.ScramLoginModule required \
                         username=\"alice\" password=\"...\";) or sasl.username and \
                         sasl.password",
                        protocol.name()
                    ),
                ))
            }
        };
        Ok(SaslSettings {
            mechanism,
            username,
            password: Secret(password),
        })
    }
}

const PLAIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
const SCRAM_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// The user name and password of a `sasl.jaas.config` of one PlainLoginModule or
/// ScramLoginModule (either serves any of PLAIN and SCRAM, as in the Java client):
/// `<module> required username="alice" password="secret";`, values quoted (with `\` escapes)
/// or bare. Errors never quote the text (it holds the password).
fn parse_jaas(text: &str) -> Result<(String, String), ConfigError> {
    let err = |reason: &str| security("sasl.jaas.config", reason.to_string());
    let mut lexer = Lexer {
        rest: text.trim_start(),
    };
    let module = lexer.word();
    if module != PLAIN_MODULE && module != SCRAM_MODULE {
        return Err(security(
            "sasl.jaas.config",
            format!(
                "login module {module:?} is not supported: use {PLAIN_MODULE} or {SCRAM_MODULE}"
            ),
        ));
    }
    let flag = lexer.word();
    if !["required", "requisite", "sufficient", "optional"].contains(&flag) {
        return Err(err(
            "expected a control flag (required) after the login module's name",
        ));
    }
    let (mut username, mut password) = (None, None);
    loop {
        lexer.skip_space();
        if lexer.eat(';') {
            break;
        }
        if lexer.rest.is_empty() {
            return Err(err("the login module's options must end with ';'"));
        }
        let key = lexer.word().to_string();
        if key.is_empty() {
            return Err(err("expected an option name=value"));
        }
        lexer.skip_space();
        if !lexer.eat('=') {
            return Err(security(
                "sasl.jaas.config",
                format!("option {key:?} needs '=' and a value"),
            ));
        }
        lexer.skip_space();
        let value = lexer
            .value()
            .map_err(|reason| security("sasl.jaas.config", format!("option {key:?}: {reason}")))?;
        match key.as_str() {
            "username" => username = Some(value),
            "password" => password = Some(value),
            "tokenauth" if value.eq_ignore_ascii_case("true") => {
                return Err(err("delegation tokens (tokenauth=true) are not supported"))
            }
            // Other options (user_<name> of a broker's config, …) mean nothing to a client.
            _ => {}
        }
    }
    lexer.skip_space();
    if !lexer.rest.is_empty() {
        return Err(err(
            "holds more than one login module (one is allowed, ending with ';')",
        ));
    }
    match (username, password) {
        (Some(u), Some(p)) if !u.is_empty() => Ok((u, p)),
        _ => Err(err(
            "the login module needs username=\"...\" and password=\"...\"",
        )),
    }
}

struct Lexer<'a> {
    rest: &'a str,
}

impl<'a> Lexer<'a> {
    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn eat(&mut self, c: char) -> bool {
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    /// A bare token: up to white space, `=` or `;`.
    fn word(&mut self) -> &'a str {
        self.skip_space();
        let end = self
            .rest
            .find(|c: char| c.is_whitespace() || c == '=' || c == ';')
            .unwrap_or(self.rest.len());
        let (word, rest) = self.rest.split_at(end);
        self.rest = rest;
        word
    }

    /// A quoted value (`"..."`, `\` escaping the next character) or a bare token.
    fn value(&mut self) -> Result<String, &'static str> {
        if !self.eat('"') {
            let word = self.word();
            if word.is_empty() {
                return Err("expected a value");
            }
            return Ok(word.to_string());
        }
        let mut out = String::new();
        let mut chars = self.rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.rest = &self.rest[i + 1..];
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, 'r')) => out.push('\r'),
                    Some((_, c)) => out.push(c),
                    None => break,
                },
                c => out.push(c),
            }
        }
        Err("a quoted value is not closed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaas_configs_parse_with_quotes_and_escapes() {
        let (u, p) = parse_jaas(
            "org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"alice\" password=\"s3c\\\"r;e t\\\\\";",
        )
        .unwrap();
        assert_eq!(u, "alice");
        assert_eq!(p, "s3c\"r;e t\\");
        let (u, p) = parse_jaas(
            "  org.apache.kafka.common.security.plain.PlainLoginModule   required\n username=bob \
             password = \"x\" ; ",
        )
        .unwrap();
        assert_eq!((u.as_str(), p.as_str()), ("bob", "x"));
    }

    #[test]
    fn bad_jaas_configs_are_refused_without_the_password() {
        let cases = [
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;",
            "org.apache.kafka.common.security.plain.PlainLoginModule username=\"a\" password=\"hunter2\";",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"hunter2\"",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"hunter2;",
            "org.apache.kafka.common.security.plain.PlainLoginModule required password=\"hunter2\";",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"hunter2\"; \
             org.apache.kafka.common.security.plain.PlainLoginModule required username=\"b\" password=\"c\";",
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\" password=\"hunter2\" tokenauth=true;",
        ];
        for case in cases {
            let e = parse_jaas(case).unwrap_err();
            let text = format!("{e} {e:?}");
            assert!(
                matches!(
                    e,
                    ConfigError::Security {
                        name: "sasl.jaas.config",
                        ..
                    }
                ),
                "{case}: {e:?}"
            );
            assert!(!text.contains("hunter2"), "{text}");
        }
    }

    #[test]
    fn protocols_are_case_insensitive_and_mechanisms_exact() {
        assert_eq!(
            SecurityProtocol::from_name("sasl_ssl"),
            Some(SecurityProtocol::SaslSsl)
        );
        assert_eq!(SecurityProtocol::from_name("TLS"), None);
        assert_eq!(
            SaslMechanism::from_name("SCRAM-SHA-512"),
            Some(SaslMechanism::ScramSha512)
        );
        assert_eq!(SaslMechanism::from_name("GSSAPI"), None);
    }

    #[test]
    fn secrets_do_not_print() {
        let s = SaslSettings {
            mechanism: SaslMechanism::Plain,
            username: "alice".into(),
            password: Secret("hunter2".into()),
        };
        let text = format!("{s:?}");
        assert!(
            text.contains("alice") && !text.contains("hunter2"),
            "{text}"
        );
    }
}
