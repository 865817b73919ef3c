//! # sasl
//!
//! The SASL mechanisms Kafka's SaslHandshake and SaslAuthenticate carry, both sides of each:
//! [`plain`] (PLAIN, RFC 4616) and [`scram`] (SCRAM-SHA-256 and SCRAM-SHA-512, RFC 5802 and
//! RFC 7677, as Kafka's `ScramSaslServer` speaks them). Messages in, messages out: no I/O, no
//! credential store, no Kafka request types. The broker looks credentials up and frames the
//! messages; the client sends them.
//!
//! Not here: channel binding (`-PLUS` mechanisms), delegation tokens (`tokenauth=true`),
//! SASLprep (Kafka does not apply it either: passwords are hashed as their UTF-8 bytes),
//! GSSAPI and OAUTHBEARER.
//!
//! ```
//! use sasl::scram::{ClientExchange, Credential, Hash, ServerExchange};
//!
//! let stored = Credential::generate(Hash::Sha256, "pencil", 4096);
//! let (mut client, client_first) = ClientExchange::new(Hash::Sha256, "user", "pencil");
//! let (server, server_first) =
//!     ServerExchange::start(Hash::Sha256, &client_first, |user| {
//!         (user == "user").then(|| stored.clone())
//!     })?;
//! let client_final = client.respond(&server_first)?;
//! let (user, server_final) = server.finish(&client_final)?;
//! assert_eq!(user, "user");
//! client.verify(&server_final)?;
//! # Ok::<(), sasl::scram::ScramError>(())
//! ```

#![warn(missing_docs, unreachable_pub)]

pub mod plain;
pub mod scram;

/// A mechanism by its SASL name, as SaslHandshake names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// `PLAIN`.
    Plain,
    /// `SCRAM-SHA-256`.
    ScramSha256,
    /// `SCRAM-SHA-512`.
    ScramSha512,
}

impl Mechanism {
    /// Every mechanism, in the order a broker lists them.
    pub const ALL: [Mechanism; 3] = [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
    ];

    /// The SASL name: `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => scram::Hash::Sha256.mechanism_name(),
            Mechanism::ScramSha512 => scram::Hash::Sha512.mechanism_name(),
        }
    }

    /// The mechanism of a SASL name; names are case-sensitive, as Kafka compares them.
    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The hash of a SCRAM mechanism; `None` for PLAIN.
    pub fn scram(self) -> Option<scram::Hash> {
        match self {
            Mechanism::Plain => None,
            Mechanism::ScramSha256 => Some(scram::Hash::Sha256),
            Mechanism::ScramSha512 => Some(scram::Hash::Sha512),
        }
    }
}

impl From<scram::Hash> for Mechanism {
    fn from(hash: scram::Hash) -> Mechanism {
        match hash {
            scram::Hash::Sha256 => Mechanism::ScramSha256,
            scram::Hash::Sha512 => Mechanism::ScramSha512,
        }
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::Mechanism;

    #[test]
    fn names_round_trip() {
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::from_name(m.name()), Some(m));
        }
        assert_eq!(Mechanism::from_name("scram-sha-256"), None);
        assert_eq!(Mechanism::from_name("GSSAPI"), None);
        assert_eq!(Mechanism::Plain.scram(), None);
        assert_eq!(
            Mechanism::ScramSha512.scram().map(Mechanism::from),
            Some(Mechanism::ScramSha512)
        );
    }
}
