//! Kafka's `security.protocol` (the client's) and a listener's protocol (the broker's
//! `listener.security.protocol.map`): one set of four names.

use std::fmt;
use std::str::FromStr;

/// How connections are secured: a client's `security.protocol`, a broker listener's protocol.
/// The default is PLAINTEXT, as Kafka's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SecurityProtocol {
    /// Plain TCP.
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
    /// The four, in Kafka's order.
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    /// Kafka's name: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Parses Kafka's name, ignoring ASCII case as the Java client and broker do; `None` for
    /// any other text (surrounding spaces included).
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        SecurityProtocol::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    /// Whether connections speak TLS (SSL, SASL_SSL).
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL before any other request (SASL_PLAINTEXT,
    /// SASL_SSL).
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// A name that is none of Kafka's four security protocols; it keeps the text as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown security protocol {0:?} (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)")]
pub struct UnknownSecurityProtocol(pub String);

impl FromStr for SecurityProtocol {
    type Err = UnknownSecurityProtocol;

    /// [`SecurityProtocol::from_name`], with the text in the error.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SecurityProtocol::from_name(s).ok_or_else(|| UnknownSecurityProtocol(s.to_string()))
    }
}

impl fmt::Display for SecurityProtocol {
    /// Kafka's name ([`SecurityProtocol::name`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_ignore_case() {
        for p in SecurityProtocol::ALL {
            assert_eq!(p.name().parse::<SecurityProtocol>(), Ok(p));
            assert_eq!(p.to_string(), p.name());
        }
        assert_eq!(
            SecurityProtocol::from_name("sasl_ssl"),
            Some(SecurityProtocol::SaslSsl)
        );
        assert_eq!(
            "TLS".parse::<SecurityProtocol>(),
            Err(UnknownSecurityProtocol("TLS".to_string()))
        );
        assert_eq!(SecurityProtocol::from_name(" SSL"), None);
    }

    #[test]
    fn tls_and_sasl() {
        let flags = SecurityProtocol::ALL.map(|p| (p.uses_tls(), p.uses_sasl()));
        assert_eq!(
            flags,
            [(false, false), (true, false), (false, true), (true, true)]
        );
    }
}
