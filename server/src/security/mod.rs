//! Who a connection is and how it proves it: the listener it came in on ([`listener`]: Kafka's
//! listener model), TLS on it ([`tls`]), the SASL exchange ([`sasl`]) against the credentials
//! the broker keeps ([`credentials`]), and the principal that results ([`Principal`]).

pub mod credentials;
pub mod failed_logins;
pub mod listener;
pub mod per_listener;
mod principal;
pub mod sasl;
pub mod tls;

pub use listener::{Listener, ListenerConfig, ListenerSettings, ListenersError, SecurityProtocol};
pub use principal::Principal;

use credentials::{CredentialsError, PlainUsers, ScramCredentials};

/// The security settings: TLS for SSL and SASL_SSL listeners, SASL for SASL_* ones.
#[derive(Debug, Clone, Default)]
pub struct SecurityConfig {
    /// `listeners`, `listener.security.protocol.map` and `advertised.listeners`, unparsed.
    pub listeners: listener::ListenerSettings,
    /// The `ssl.*` settings of SSL and SASL_SSL listeners.
    pub tls: tls::TlsSettings,
    /// The `sasl.*` settings of SASL_PLAINTEXT and SASL_SSL listeners.
    pub sasl: sasl::SaslSettings,
    /// `listener.name.<listener>.*`: what one listener serves instead of the above.
    pub per_listener: per_listener::PerListener,
}

/// What the broker checks connections against.
#[derive(Debug)]
pub struct Security {
    /// [`SecurityConfig::sasl`], as the broker started with it.
    pub sasl: sasl::SaslSettings,
    /// SCRAM credentials of `<data-dir>/scram-credentials`, changed by
    /// AlterUserScramCredentials while the broker runs.
    pub scram: ScramCredentials,
    /// PLAIN's users, read from `--sasl-plain-users-file` once at start; none without it.
    pub plain: PlainUsers,
    /// Failed logins of the Kafka listeners and the console, logged without a flood.
    pub failed_logins: failed_logins::FailedLogins,
}

impl Security {
    /// Reads the SCRAM credentials in `data_dir` and the PLAIN users' file, if any.
    pub fn open(
        data_dir: &std::path::Path,
        config: &SecurityConfig,
    ) -> Result<Security, CredentialsError> {
        let plain = match &config.sasl.plain_users {
            Some(path) => PlainUsers::load(path)?,
            None => PlainUsers::default(),
        };
        Ok(Security {
            sasl: config.sasl.clone(),
            scram: ScramCredentials::open(data_dir)?,
            plain,
            failed_logins: failed_logins::FailedLogins::default(),
        })
    }

    /// What a SASL exchange checks passwords and SCRAM proofs against.
    pub fn verifier(&self) -> sasl::Verifier<'_> {
        sasl::Verifier {
            scram: &self.scram,
            plain: &self.plain,
        }
    }
}
