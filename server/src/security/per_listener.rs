//! Security settings of one listener, Kafka's `listener.name.<listener>.<setting>`: the
//! TLS settings and `sasl.enabled.mechanisms` a listener serves instead of the broker's, so an
//! SSL listener requiring client certificates can stand beside a SASL_SSL one for users
//! without them. As in Kafka (KIP-684), the broker-wide `ssl.client.auth` applies to SSL
//! listeners only: a SASL_SSL listener asks for a certificate only when its own prefixed
//! setting says so.

use std::collections::BTreeMap;
use std::path::PathBuf;

use sasl::Mechanism;

use super::listener::ListenerConfig;
use super::tls::{ClientAuth, TlsSettings};
use super::{SecurityConfig, SecurityProtocol};

/// What one listener sets for itself; `None` keeps the broker's setting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenerOverrides {
    /// `listener.name.<l>.ssl.keystore.location`.
    pub keystore: Option<PathBuf>,
    /// `listener.name.<l>.ssl.truststore.location`.
    pub truststore: Option<PathBuf>,
    /// `listener.name.<l>.ssl.client.auth`.
    pub client_auth: Option<ClientAuth>,
    /// `listener.name.<l>.ssl.enabled.protocols`: TLS 1.2 allowed beside 1.3.
    pub tls12: Option<bool>,
    /// `listener.name.<l>.sasl.enabled.mechanisms`.
    pub mechanisms: Option<Vec<Mechanism>>,
}

/// Each listener's own settings, by listener name (upper-cased, as listeners are named).
#[derive(Debug, Clone, Default)]
pub struct PerListener(BTreeMap<String, ListenerOverrides>);

impl PerListener {
    /// The overrides of `listener` (any case), to be set.
    pub fn entry(&mut self, listener: &str) -> &mut ListenerOverrides {
        self.0.entry(listener.to_ascii_uppercase()).or_default()
    }

    /// A listener named here that `listeners` does not hold, if any: a setting that would do
    /// nothing.
    pub fn unknown<'a>(&'a self, listeners: &[&str]) -> Option<&'a str> {
        self.0
            .keys()
            .map(String::as_str)
            .find(|name| !listeners.contains(name))
    }

    fn get(&self, listener: &str) -> Option<&ListenerOverrides> {
        self.0.get(listener)
    }
}

impl SecurityConfig {
    /// The TLS settings `listener` serves: the broker's, its own over them, and no client
    /// certificate asked for on SASL_SSL unless the listener's own `ssl.client.auth` says so.
    pub fn tls_for(&self, listener: &ListenerConfig) -> TlsSettings {
        let mut tls = self.tls.clone();
        if listener.protocol == SecurityProtocol::SaslSsl {
            tls.client_auth = ClientAuth::None;
        }
        let Some(own) = self.per_listener.get(&listener.name) else {
            return tls;
        };
        if let Some(keystore) = &own.keystore {
            tls.keystore = Some(keystore.clone());
        }
        if let Some(truststore) = &own.truststore {
            tls.truststore = Some(truststore.clone());
        }
        if let Some(client_auth) = own.client_auth {
            tls.client_auth = client_auth;
        }
        if let Some(tls12) = own.tls12 {
            tls.tls12 = tls12;
        }
        tls
    }

    /// The SASL mechanisms `listener` offers.
    pub fn mechanisms_for(&self, listener: &ListenerConfig) -> Vec<Mechanism> {
        self.per_listener
            .get(&listener.name)
            .and_then(|own| own.mechanisms.clone())
            .unwrap_or_else(|| self.sasl.mechanisms.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(name: &str, protocol: SecurityProtocol) -> ListenerConfig {
        ListenerConfig {
            name: name.to_string(),
            protocol,
            bind: "127.0.0.1:0".to_string(),
            advertised: None,
        }
    }

    #[test]
    fn a_listeners_own_settings_win_and_sasl_ssl_asks_no_certificate_unless_told() {
        let mut config = SecurityConfig::default();
        config.tls.client_auth = ClientAuth::Required;
        config.tls.keystore = Some(PathBuf::from("broker.pem"));
        let internal = listener("INTERNAL", SecurityProtocol::Ssl);
        let external = listener("EXTERNAL", SecurityProtocol::SaslSsl);
        let partner = listener("PARTNER", SecurityProtocol::SaslSsl);
        assert_eq!(config.tls_for(&internal).client_auth, ClientAuth::Required);
        assert_eq!(config.tls_for(&external).client_auth, ClientAuth::None);

        config.per_listener.entry("partner").client_auth = Some(ClientAuth::Requested);
        config.per_listener.entry("external").keystore = Some(PathBuf::from("public.pem"));
        config.per_listener.entry("External").mechanisms = Some(vec![Mechanism::ScramSha512]);
        assert_eq!(config.tls_for(&partner).client_auth, ClientAuth::Requested);
        assert_eq!(
            config.tls_for(&external).keystore,
            Some(PathBuf::from("public.pem"))
        );
        assert_eq!(
            config.tls_for(&internal).keystore,
            Some(PathBuf::from("broker.pem"))
        );
        assert_eq!(
            config.mechanisms_for(&external),
            vec![Mechanism::ScramSha512]
        );
        assert_eq!(config.mechanisms_for(&partner), config.sasl.mechanisms);
        assert_eq!(
            config
                .per_listener
                .unknown(&["INTERNAL", "EXTERNAL", "PARTNER"]),
            None
        );
        assert_eq!(
            config.per_listener.unknown(&["INTERNAL", "EXTERNAL"]),
            Some("PARTNER")
        );
    }
}
