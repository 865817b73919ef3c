//! `security.protocol` and its companions, under the Java client's names (and librdkafka's
//! where they differ): TLS from PEM (`ssl.truststore.*`, `ssl.keystore.*`,
//! `ssl.endpoint.identification.algorithm`) and SASL credentials (`sasl.mechanism`,
//! `sasl.jaas.config`, `sasl.username` / `sasl.password`).
//!
//! Everything is checked when the configuration is parsed: the PEM files are read and the TLS
//! configuration built then, so a missing file or a bad key is an error of `from_config`, not
//! of the first connection. No secret (password, JAAS config, private key) appears in a
//! `Debug` print or an error message.
//!
//! - `tls`: the TLS client configuration from the `ssl.*` properties (PEM stores, verifier).
//! - `credentials`: the SASL credentials, from `sasl.jaas.config` or `sasl.username` /
//!   `sasl.password`.

mod credentials;
mod tls;

pub(crate) use credentials::SaslSettings;

use super::{ConfigError, Reader};
use credentials::SaslProperties;
use tls::{TlsProperties, TlsSettings};

/// `security.protocol`: how the client talks to brokers (the default is PLAINTEXT); the
/// broker's listeners use the same type.
pub use vocabulary::SecurityProtocol;

/// `sasl.mechanism`: the SASL mechanisms this client speaks (the `sasl` crate's).
pub use sasl::Mechanism as SaslMechanism;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
