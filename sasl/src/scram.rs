//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the broker's side
//! ([`ServerExchange`]) and the client's ([`ClientExchange`]), and the [`Credential`] a broker
//! stores.
//!
//! As Kafka's `ScramSaslServer`: no channel binding (`p=` is refused, `n` and `y` accepted), no
//! SASLprep (a password is hashed as its UTF-8 bytes), no delegation tokens (`tokenauth=true` is
//! refused), and the error for an unknown user reads as the one for a wrong password.
//! Attribute order is strict, base64 is decoded strictly (canonical padding, no whitespace),
//! and every malformed message is an error.
//!
//! Here: what both sides share (the hash and its key derivation, the credential, the errors,
//! nonces). Each side is one pass over its messages, in `server.rs` and `client.rs`, with the
//! grammar's helpers in `grammar.rs`; the tests are in `tests.rs`.

use std::fmt;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ring::rand::{SecureRandom, SystemRandom};
use ring::{digest, hmac, pbkdf2};

mod client;
mod grammar;
mod server;

pub use client::ClientExchange;
pub use server::ServerExchange;

/// The fewest iterations Kafka accepts in a stored credential, and the fewest a
/// [`ClientExchange`] accepts from a server.
pub const MIN_ITERATIONS: u32 = 4096;
/// The most iterations Kafka accepts in a stored credential.
pub const MAX_ITERATIONS: u32 = 16384;
/// The most iterations a [`ClientExchange`] computes for a server: more is taken as a hostile
/// server burning the client's CPU.
pub const CLIENT_MAX_ITERATIONS: u32 = 1_000_000;

/// Random bytes in a nonce; written in hex (48 characters): letters and digits only, as Kafka's
/// own nonces are (librdkafka 2.0 fails the exchange on a server nonce with base64's `=`).
const NONCE_BYTES: usize = 24;

fn nonce_text(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
/// Bytes of salt [`Credential::generate`] draws.
const SALT_BYTES: usize = 32;
/// The gs2 header [`ClientExchange`] sends: no channel binding, no authzid.
const CLIENT_GS2_HEADER: &str = "n,,";

/// A SCRAM hash function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Hash {
    /// SHA-256: SCRAM-SHA-256.
    Sha256,
    /// SHA-512: SCRAM-SHA-512.
    Sha512,
}

impl Hash {
    /// Kafka's `ScramMechanism` code, as DescribeUserScramCredentials and
    /// AlterUserScramCredentials carry it: 1 for SHA-256, 2 for SHA-512.
    pub fn code(self) -> i8 {
        match self {
            Hash::Sha256 => 1,
            Hash::Sha512 => 2,
        }
    }

    /// The hash of a Kafka `ScramMechanism` code; `None` for 0 (unknown) and any other.
    pub fn from_code(code: i8) -> Option<Hash> {
        match code {
            1 => Some(Hash::Sha256),
            2 => Some(Hash::Sha512),
            _ => None,
        }
    }

    /// The SASL mechanism name: `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub fn mechanism_name(self) -> &'static str {
        match self {
            Hash::Sha256 => "SCRAM-SHA-256",
            Hash::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// Bytes in one digest: the length of keys, proofs and signatures (32 or 64).
    pub fn output_len(self) -> usize {
        self.digest().output_len()
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            Hash::Sha256 => &digest::SHA256,
            Hash::Sha512 => &digest::SHA512,
        }
    }

    fn hmac_key(self, key: &[u8]) -> hmac::Key {
        let algorithm = match self {
            Hash::Sha256 => hmac::HMAC_SHA256,
            Hash::Sha512 => hmac::HMAC_SHA512,
        };
        hmac::Key::new(algorithm, key)
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&self.hmac_key(key), data).as_ref().to_vec()
    }

    fn h(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest(), data).as_ref().to_vec()
    }
}

/// What the broker stores for one user and mechanism (never the password).
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Credential {
    /// The mechanism's hash.
    pub hash: Hash,
    /// The salt the client salts the password with.
    pub salt: Vec<u8>,
    /// PBKDF2's iteration count.
    pub iterations: u32,
    /// H(HMAC(SaltedPassword, "Client Key")).
    pub stored_key: Vec<u8>,
    /// HMAC(SaltedPassword, "Server Key").
    pub server_key: Vec<u8>,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("hash", &self.hash)
            .field("salt", &BASE64.encode(&self.salt))
            .field("iterations", &self.iterations)
            .field("stored_key", &"<redacted>")
            .field("server_key", &"<redacted>")
            .finish()
    }
}

impl Credential {
    /// From the salted password AlterUserScramCredentials carries (the client salts and
    /// iterates).
    pub fn from_salted_password(
        hash: Hash,
        salted_password: &[u8],
        salt: Vec<u8>,
        iterations: u32,
    ) -> Credential {
        let client_key = hash.hmac(salted_password, b"Client Key");
        Credential {
            hash,
            salt,
            iterations,
            stored_key: hash.h(&client_key),
            server_key: hash.hmac(salted_password, b"Server Key"),
        }
    }

    /// From a password, salted with `salt` over `iterations` (0 counts as 1, as in Kafka).
    pub fn from_password(hash: Hash, password: &str, salt: Vec<u8>, iterations: u32) -> Credential {
        let salted = Credential::salted_password(hash, password, &salt, iterations);
        Credential::from_salted_password(hash, &salted, salt, iterations)
    }

    /// From a password, with a random 32-byte salt (what a client tool does).
    ///
    /// Panics only if the operating system has no random source.
    pub fn generate(hash: Hash, password: &str, iterations: u32) -> Credential {
        Credential::from_password(
            hash,
            password,
            random_or_panic::<SALT_BYTES>().to_vec(),
            iterations,
        )
    }

    /// SaltedPassword = Hi(password, salt, iterations), PBKDF2 with HMAC over `hash` (0
    /// iterations count as 1, as in Kafka): what AlterUserScramCredentials sends.
    pub fn salted_password(hash: Hash, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        let algorithm = match hash {
            Hash::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            Hash::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        };
        let iterations = std::num::NonZeroU32::new(iterations).unwrap_or(std::num::NonZeroU32::MIN);
        let mut out = vec![0; hash.output_len()];
        pbkdf2::derive(algorithm, iterations, salt, password.as_bytes(), &mut out);
        out
    }
}

/// Why a SCRAM exchange failed.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// A message is not UTF-8.
    #[error("invalid SCRAM message: not UTF-8")]
    NotUtf8,
    /// A message breaks RFC 5802's grammar; the text names what is wrong.
    #[error("invalid SCRAM message: {0}")]
    Malformed(&'static str),
    /// A message asks for something not supported: channel binding, a mandatory extension,
    /// delegation tokens.
    #[error("unsupported in SCRAM: {0}")]
    Unsupported(&'static str),
    /// The client-first-message's authzid is not its username.
    #[error("authentication failed: authorization id differs from the username")]
    AuthzidMismatch,
    /// No credential for the username (worded as [`ScramError::BadProof`]).
    #[error("authentication failed: invalid credentials")]
    UnknownUser,
    /// The client's proof does not verify: a wrong password.
    #[error("authentication failed: invalid credentials")]
    BadProof,
    /// Server side: the client-final-message's nonce is not this exchange's. Client side: the
    /// server's nonce does not extend ours.
    #[error("authentication failed: nonce mismatch")]
    NonceMismatch,
    /// The client-final-message's channel binding is not the client-first-message's gs2
    /// header.
    #[error("authentication failed: channel binding differs from the gs2 header")]
    ChannelBinding,
    /// The server asks for an iteration count outside
    /// [`MIN_ITERATIONS`]`..=`[`CLIENT_MAX_ITERATIONS`].
    #[error("iteration count {0} outside {MIN_ITERATIONS}..={CLIENT_MAX_ITERATIONS}")]
    Iterations(u64),
    /// The credential the lookup gave cannot serve this exchange.
    #[error("stored credential unusable: {0}")]
    BadCredential(&'static str),
    /// The server-final-message's signature does not verify: the server does not know the
    /// password.
    #[error("server signature does not verify")]
    ServerSignature,
    /// The server-final-message carries `e=` with this text.
    #[error("server refused authentication: {}", .0.escape_debug())]
    Server(String),
    /// A [`ClientExchange`] step called twice, out of order or after a failed step.
    #[error("SCRAM exchange step out of order")]
    OutOfOrder,
    /// The operating system's random source failed.
    #[error("no random bytes from the operating system")]
    Random,
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// `a == b` in time that depends on the lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .fold(0u8, |acc, (x, y)| acc | std::hint::black_box(x ^ y))
            == 0
}

fn random<const N: usize>() -> Result<[u8; N], ScramError> {
    let mut bytes = [0; N];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| ScramError::Random)?;
    Ok(bytes)
}

#[allow(clippy::expect_used)] // Only where the OS has no random source (no getrandom(2)).
fn random_or_panic<const N: usize>() -> [u8; N] {
    random().expect("the operating system's random source failed")
}

#[cfg(test)]
mod tests;
