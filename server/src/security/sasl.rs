//! One connection's SASL exchange (KIP-152): SaslHandshake names a mechanism, SaslAuthenticate
//! requests carry its messages (one for PLAIN, two for SCRAM), and the connection is then its
//! user's (`User:<name>`). Any failure ends the exchange: the response says why, after
//! `connection.failed.authentication.delay.ms`, and the connection is closed.

use std::path::PathBuf;
use std::time::Duration;

use sasl::scram::ServerExchange;
use sasl::Mechanism;

use super::credentials::{PlainUsers, ScramCredentials};
use super::Principal;

/// The SASL settings of SASL_PLAINTEXT and SASL_SSL listeners.
#[derive(Debug, Clone)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms`.
    pub mechanisms: Vec<Mechanism>,
    /// PLAIN's users: a file of `name=password` lines (lograil's own; Kafka names them in JAAS).
    pub plain_users: Option<PathBuf>,
    /// `sasl.server.max.receive.size`: the largest request before authentication.
    pub max_receive_size: usize,
    /// `connection.failed.authentication.delay.ms`: how long a failed authentication waits
    /// for its answer (a client guessing passwords gets one guess per delay per connection).
    pub failed_authentication_delay: Duration,
    /// lograil's own: the time a connection has, from its first byte, to finish the TLS
    /// handshake and authenticate; it is closed then.
    pub authentication_timeout: Duration,
}

impl Default for SaslSettings {
    fn default() -> Self {
        SaslSettings {
            mechanisms: vec![
                Mechanism::ScramSha256,
                Mechanism::ScramSha512,
                Mechanism::Plain,
            ],
            plain_users: None,
            max_receive_size: 524_288,
            failed_authentication_delay: Duration::from_millis(100),
            authentication_timeout: Duration::from_secs(10),
        }
    }
}

/// Where one connection's exchange stands.
#[derive(Default)]
pub enum Exchange {
    /// Nothing yet: SaslHandshake comes first.
    #[default]
    Start,
    /// The handshake named this mechanism; its first message comes next.
    Named(Mechanism),
    /// SCRAM's server-first-message is out; the client-final-message comes next.
    Scram(Box<ServerExchange>),
    /// Authenticated.
    Done(Principal),
    /// Refused: the connection closes once the response is out.
    Failed,
    /// The listener does not use SASL.
    Unavailable,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Exchange::Start => "Start",
            Exchange::Named(_) => "Named",
            Exchange::Scram(_) => "Scram",
            Exchange::Done(_) => "Done",
            Exchange::Failed => "Failed",
            Exchange::Unavailable => "Unavailable",
        })
    }
}

/// What a SaslAuthenticate step answers.
#[derive(Debug)]
pub enum Step {
    /// The next server message (SCRAM's server-first, or the last one on success).
    Continue(Vec<u8>),
    /// Authenticated; the last server message (empty for PLAIN).
    Done(Principal, Vec<u8>),
    /// Refused, with Kafka's error code and the message the client sees.
    Failed(kafka_protocol::error::ResponseError, String),
}

/// What the exchange checks credentials against.
#[derive(Debug)]
pub struct Verifier<'a> {
    pub scram: &'a ScramCredentials,
    pub plain: &'a PlainUsers,
}

impl Exchange {
    /// SaslHandshake: the mechanism, if enabled.
    pub fn handshake(&mut self, mechanism: &str, enabled: &[Mechanism]) -> Result<(), String> {
        if matches!(self, Exchange::Unavailable) {
            return Err("SaslHandshake on a listener without SASL".into());
        }
        if !matches!(self, Exchange::Start) {
            *self = Exchange::Failed;
            return Err("SaslHandshake after the exchange began (re-authentication, KIP-368, is not served)".into());
        }
        match Mechanism::from_name(mechanism).filter(|m| enabled.contains(m)) {
            Some(m) => {
                *self = Exchange::Named(m);
                Ok(())
            }
            None => {
                *self = Exchange::Failed;
                Err(format!("unsupported SASL mechanism {mechanism:?}"))
            }
        }
    }

    /// SaslAuthenticate: the client's next message.
    pub fn authenticate(&mut self, message: &[u8], verifier: &Verifier<'_>) -> Step {
        use kafka_protocol::error::ResponseError::{IllegalSaslState, SaslAuthenticationFailed};
        let failed = |reason: &str| {
            Step::Failed(
                SaslAuthenticationFailed,
                format!("Authentication failed: {reason}"),
            )
        };
        let step = match std::mem::replace(self, Exchange::Failed) {
            Exchange::Named(Mechanism::Plain) => match sasl::plain::parse(message) {
                Ok(plain) if verifier.plain.check(&plain.username, &plain.password) => {
                    Step::Done(Principal::user(&plain.username), Vec::new())
                }
                Ok(_) => failed("invalid username or password"),
                Err(e) => failed(&e.to_string()),
            },
            Exchange::Named(mechanism) => {
                let Some(hash) = mechanism.scram() else {
                    return failed("unsupported mechanism");
                };
                let started =
                    ServerExchange::start(hash, message, |user| verifier.scram.get(user, hash));
                match started {
                    Ok((exchange, first)) => {
                        *self = Exchange::Scram(Box::new(exchange));
                        return Step::Continue(first);
                    }
                    Err(sasl::scram::ScramError::UnknownUser) => failed("invalid credentials"),
                    Err(e) => failed(&e.to_string()),
                }
            }
            Exchange::Scram(exchange) => match exchange.finish(message) {
                Ok((user, last)) => Step::Done(Principal::user(&user), last),
                Err(sasl::scram::ScramError::BadProof) => failed("invalid credentials"),
                Err(e) => failed(&e.to_string()),
            },
            Exchange::Start => Step::Failed(
                IllegalSaslState,
                "SaslAuthenticate before SaslHandshake".into(),
            ),
            Exchange::Unavailable => {
                *self = Exchange::Unavailable;
                Step::Failed(IllegalSaslState, "this listener does not use SASL".into())
            }
            Exchange::Done(_) | Exchange::Failed => Step::Failed(
                IllegalSaslState,
                "SaslAuthenticate after the exchange ended".into(),
            ),
        };
        if let Step::Done(principal, _) = &step {
            *self = Exchange::Done(principal.clone());
        }
        step
    }
}
