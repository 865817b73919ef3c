//! One connection's SASL exchange (KIP-152): SaslHandshake names a mechanism, SaslAuthenticate
//! requests carry its messages (one for PLAIN, two for SCRAM), and the connection is then its
//! user's (`User:<name>`). Any failure ends the exchange: the response says why, after
//! `connection.failed.authentication.delay.ms`, and the connection is closed.

use std::path::PathBuf;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
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
    /// `connections.max.reauth.ms` (KIP-368): how long an authentication lasts before the
    /// client must authenticate again on the connection; `None` (0, the default): for its life.
    pub reauthentication: Option<Duration>,
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
            reauthentication: None,
        }
    }
}

/// One connection's exchange: where it stands, and who it authenticated as last.
#[derive(Debug, Default)]
pub struct Exchange {
    stage: Stage,
    /// The principal of the last exchange that succeeded: a re-authentication must keep it.
    authenticated: Option<Principal>,
}

#[derive(Default)]
enum Stage {
    /// Nothing yet: SaslHandshake comes first.
    #[default]
    Start,
    /// The handshake named this mechanism; its first message comes next.
    Named(Mechanism),
    /// SCRAM's server-first-message is out; the client-final-message comes next.
    Scram(Box<ServerExchange>),
    /// Authenticated.
    Done,
    /// Refused: the connection closes once the response is out.
    Failed,
    /// The listener does not use SASL.
    Unavailable,
}

impl std::fmt::Debug for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stage::Start => "Start",
            Stage::Named(_) => "Named",
            Stage::Scram(_) => "Scram",
            Stage::Done => "Done",
            Stage::Failed => "Failed",
            Stage::Unavailable => "Unavailable",
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
    Failed(ResponseError, String),
}

/// What the exchange checks credentials against.
#[derive(Debug)]
pub struct Verifier<'a> {
    /// For SCRAM-SHA-256 and SCRAM-SHA-512.
    pub scram: &'a ScramCredentials,
    /// For PLAIN.
    pub plain: &'a PlainUsers,
}

impl Exchange {
    /// The exchange of a connection on a SASL listener (`sasl`) or another one.
    pub fn new(sasl: bool) -> Exchange {
        Exchange {
            stage: if sasl {
                Stage::Start
            } else {
                Stage::Unavailable
            },
            authenticated: None,
        }
    }

    /// Who the connection authenticated as, once an exchange succeeded.
    pub fn principal(&self) -> Option<&Principal> {
        self.authenticated
            .as_ref()
            .filter(|_| matches!(self.stage, Stage::Done))
    }

    /// Whether the exchange was refused: the connection is to close.
    pub fn failed(&self) -> bool {
        matches!(self.stage, Stage::Failed)
    }

    /// Whether a handshake named the mechanism and its first message is awaited.
    pub fn named(&self) -> bool {
        matches!(self.stage, Stage::Named(_))
    }

    /// SaslHandshake: the mechanism, if enabled. After a successful exchange, only when
    /// `reauthenticate` (KIP-368, `connections.max.reauth.ms`). A refusal is Kafka's error code
    /// and why.
    pub fn handshake(
        &mut self,
        mechanism: &str,
        enabled: &[Mechanism],
        reauthenticate: bool,
    ) -> Result<(), (ResponseError, String)> {
        let illegal = |reason: &str| (ResponseError::IllegalSaslState, reason.to_string());
        match self.stage {
            Stage::Unavailable => return Err(illegal("SaslHandshake on a listener without SASL")),
            Stage::Start => {}
            Stage::Done if reauthenticate => {}
            _ => {
                self.stage = Stage::Failed;
                return Err(illegal("SaslHandshake out of turn (after the exchange began, or without connections.max.reauth.ms)"));
            }
        }
        match Mechanism::from_name(mechanism).filter(|m| enabled.contains(m)) {
            Some(m) => {
                self.stage = Stage::Named(m);
                Ok(())
            }
            None => {
                self.stage = Stage::Failed;
                Err((
                    ResponseError::UnsupportedSaslMechanism,
                    format!("unsupported SASL mechanism {mechanism:?}"),
                ))
            }
        }
    }

    /// SaslAuthenticate: the client's next message.
    pub fn authenticate(&mut self, message: &[u8], verifier: &Verifier<'_>) -> Step {
        use ResponseError::{IllegalSaslState, SaslAuthenticationFailed};
        let failed = |reason: &str| {
            Step::Failed(
                SaslAuthenticationFailed,
                format!("Authentication failed: {reason}"),
            )
        };
        let step = match std::mem::replace(&mut self.stage, Stage::Failed) {
            Stage::Named(Mechanism::Plain) => match sasl::plain::parse(message) {
                Ok(plain) if verifier.plain.check(&plain.username, &plain.password) => {
                    Step::Done(Principal::user(&plain.username), Vec::new())
                }
                Ok(_) => failed("invalid username or password"),
                Err(e) => failed(&e.to_string()),
            },
            Stage::Named(mechanism) => {
                let Some(hash) = mechanism.scram() else {
                    return failed("unsupported mechanism");
                };
                let started =
                    ServerExchange::start(hash, message, |user| verifier.scram.get(user, hash));
                match started {
                    Ok((exchange, first)) => {
                        self.stage = Stage::Scram(Box::new(exchange));
                        return Step::Continue(first);
                    }
                    Err(sasl::scram::ScramError::UnknownUser) => failed("invalid credentials"),
                    Err(e) => failed(&e.to_string()),
                }
            }
            Stage::Scram(exchange) => match exchange.finish(message) {
                Ok((user, last)) => Step::Done(Principal::user(&user), last),
                Err(sasl::scram::ScramError::BadProof) => failed("invalid credentials"),
                Err(e) => failed(&e.to_string()),
            },
            Stage::Start => Step::Failed(
                IllegalSaslState,
                "SaslAuthenticate before SaslHandshake".into(),
            ),
            Stage::Unavailable => {
                self.stage = Stage::Unavailable;
                Step::Failed(IllegalSaslState, "this listener does not use SASL".into())
            }
            Stage::Done | Stage::Failed => Step::Failed(
                IllegalSaslState,
                "SaslAuthenticate after the exchange ended".into(),
            ),
        };
        match step {
            Step::Done(principal, _)
                if self.authenticated.as_ref().is_some_and(|p| *p != principal) =>
            {
                failed("cannot change principals during re-authentication")
            }
            Step::Done(principal, last) => {
                self.stage = Stage::Done;
                self.authenticated = Some(principal.clone());
                Step::Done(principal, last)
            }
            step => step,
        }
    }
}
