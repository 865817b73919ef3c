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
//! One file (over 500 lines) because both sides share the grammar's helpers and the key
//! derivation, and each side reads as one pass over its messages; the tests are in `tests.rs`.

use std::fmt;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ring::rand::{SecureRandom, SystemRandom};
use ring::{digest, hmac, pbkdf2};

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

/// The broker's side of one exchange.
pub struct ServerExchange {
    hash: Hash,
    username: String,
    gs2_header: String,
    nonce: String,
    /// client-first-message-bare "," server-first-message ",".
    auth_prefix: String,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl fmt::Debug for ServerExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerExchange")
            .field("hash", &self.hash)
            .field("username", &self.username)
            .field("nonce", &self.nonce)
            .finish_non_exhaustive()
    }
}

impl ServerExchange {
    /// Reads the client-first-message and answers the server-first-message. `lookup` is given
    /// the username (saslname decoded: `=2C` is `,`, `=3D` is `=`); `None` means no such user:
    /// [`ScramError::UnknownUser`] (worded to the client as a bad password).
    pub fn start(
        hash: Hash,
        client_first: &[u8],
        lookup: impl FnOnce(&str) -> Option<Credential>,
    ) -> Result<(ServerExchange, Vec<u8>), ScramError> {
        ServerExchange::start_with(hash, client_first, lookup, || {
            Ok(nonce_text(&random::<NONCE_BYTES>()?))
        })
    }

    /// [`ServerExchange::start`] with the server's part of the nonce from `server_nonce`.
    fn start_with(
        hash: Hash,
        client_first: &[u8],
        lookup: impl FnOnce(&str) -> Option<Credential>,
        server_nonce: impl FnOnce() -> Result<String, ScramError>,
    ) -> Result<(ServerExchange, Vec<u8>), ScramError> {
        let text = std::str::from_utf8(client_first).map_err(|_| ScramError::NotUtf8)?;
        let (flag, rest) = text
            .split_once(',')
            .ok_or(ScramError::Malformed("client-first-message: no gs2 header"))?;
        match flag {
            "n" | "y" => {}
            _ if flag.starts_with("p=") => return Err(ScramError::Unsupported("channel binding")),
            _ => {
                return Err(ScramError::Malformed(
                    "client-first-message: gs2 flag is not n, y or p=",
                ))
            }
        }
        let (authzid, bare) = rest.split_once(',').ok_or(ScramError::Malformed(
            "client-first-message: gs2 header not closed",
        ))?;
        let gs2_header = text
            .strip_suffix(bare)
            .ok_or(ScramError::Malformed("client-first-message"))?;
        let authzid = match authzid {
            "" => None,
            _ => Some(decode_saslname(attribute(
                authzid,
                'a',
                "client-first-message: gs2 authzid is not a=",
            )?)?),
        };

        let mut attributes = bare.split(',');
        let first = attributes.next().unwrap_or_default();
        if first.starts_with("m=") {
            return Err(ScramError::Unsupported("mandatory extension (m=)"));
        }
        let username = decode_saslname(attribute(
            first,
            'n',
            "client-first-message: n= username missing",
        )?)?;
        let client_nonce = attribute(
            attributes.next().unwrap_or_default(),
            'r',
            "client-first-message: r= nonce missing",
        )?;
        check_nonce(client_nonce)?;
        for extension in attributes {
            let (name, value) = parse_extension(extension)?;
            if name == "tokenauth" && value.eq_ignore_ascii_case("true") {
                return Err(ScramError::Unsupported(
                    "delegation tokens (tokenauth=true)",
                ));
            }
        }
        if authzid.is_some_and(|authzid| authzid != username) {
            return Err(ScramError::AuthzidMismatch);
        }

        let credential = lookup(&username).ok_or(ScramError::UnknownUser)?;
        if credential.hash != hash {
            return Err(ScramError::BadCredential("made for another hash"));
        }
        if credential.stored_key.len() != hash.output_len()
            || credential.server_key.len() != hash.output_len()
        {
            return Err(ScramError::BadCredential(
                "key length does not match the hash",
            ));
        }
        if credential.salt.is_empty() || credential.iterations == 0 {
            return Err(ScramError::BadCredential("empty salt or no iterations"));
        }

        let server_nonce = server_nonce()?;
        let nonce = format!("{client_nonce}{server_nonce}");
        check_nonce(&nonce)?;
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        let exchange = ServerExchange {
            hash,
            username,
            gs2_header: gs2_header.to_owned(),
            nonce,
            auth_prefix: format!("{bare},{server_first},"),
            stored_key: credential.stored_key,
            server_key: credential.server_key,
        };
        Ok((exchange, server_first.into_bytes()))
    }

    /// Checks the client-final-message's channel binding, nonce and proof; answers the
    /// authenticated username and the server-final-message (`v=...`).
    pub fn finish(self, client_final: &[u8]) -> Result<(String, Vec<u8>), ScramError> {
        let text = std::str::from_utf8(client_final).map_err(|_| ScramError::NotUtf8)?;
        let (without_proof, proof) = text.rsplit_once(',').ok_or(ScramError::Malformed(
            "client-final-message: too few attributes",
        ))?;
        let proof = attribute(proof, 'p', "client-final-message: p= proof not last")?;
        let mut attributes = without_proof.split(',');
        let binding = attribute(
            attributes.next().unwrap_or_default(),
            'c',
            "client-final-message: c= channel binding not first",
        )?;
        let nonce = attribute(
            attributes.next().unwrap_or_default(),
            'r',
            "client-final-message: r= nonce not second",
        )?;
        for extension in attributes {
            parse_extension(extension)?;
        }
        let binding = decode_base64(binding, "client-final-message: c= is not base64")?;
        let proof = decode_base64(proof, "client-final-message: p= is not base64")?;
        if proof.len() != self.hash.output_len() {
            return Err(ScramError::Malformed(
                "client-final-message: p= proof length does not match the hash",
            ));
        }
        if binding != self.gs2_header.as_bytes() {
            return Err(ScramError::ChannelBinding);
        }
        // RFC 5802 wants the nonce itself; Kafka's server accepts one that ends with it, and
        // librdkafka before 2.1 sends its own nonce before the whole one: accepted as Kafka
        // does (the proof still covers the nonce as sent, and the server's random part).
        if !nonce.ends_with(&self.nonce) {
            return Err(ScramError::NonceMismatch);
        }

        let auth_message = format!("{}{without_proof}", self.auth_prefix);
        let client_signature = self.hash.hmac(&self.stored_key, auth_message.as_bytes());
        let client_key = xor(&proof, &client_signature);
        if !constant_time_eq(&self.hash.h(&client_key), &self.stored_key) {
            return Err(ScramError::BadProof);
        }
        let server_signature = self.hash.hmac(&self.server_key, auth_message.as_bytes());
        let server_final = format!("v={}", BASE64.encode(server_signature));
        Ok((self.username, server_final.into_bytes()))
    }
}

/// The client's side of one exchange.
pub struct ClientExchange {
    hash: Hash,
    nonce: String,
    client_first_bare: String,
    state: ClientState,
}

enum ClientState {
    Started {
        password: String,
    },
    Responded {
        server_key: hmac::Key,
        auth_message: String,
    },
    Spent,
}

impl fmt::Debug for ClientExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            ClientState::Started { .. } => "started",
            ClientState::Responded { .. } => "responded",
            ClientState::Spent => "spent",
        };
        f.debug_struct("ClientExchange")
            .field("hash", &self.hash)
            .field("nonce", &self.nonce)
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl ClientExchange {
    /// Starts an exchange: the client-first-message `n,,n=<user>,r=<nonce>` (the username
    /// saslname-encoded).
    ///
    /// Panics only if the operating system has no random source.
    pub fn new(hash: Hash, username: &str, password: &str) -> (ClientExchange, Vec<u8>) {
        let nonce = nonce_text(&random_or_panic::<NONCE_BYTES>());
        ClientExchange::with_nonce(hash, username, password, nonce)
    }

    /// [`ClientExchange::new`] with a given nonce.
    fn with_nonce(
        hash: Hash,
        username: &str,
        password: &str,
        nonce: String,
    ) -> (ClientExchange, Vec<u8>) {
        let client_first_bare = format!("n={},r={nonce}", encode_saslname(username));
        let client_first = format!("{CLIENT_GS2_HEADER}{client_first_bare}").into_bytes();
        let exchange = ClientExchange {
            hash,
            nonce,
            client_first_bare,
            state: ClientState::Started {
                password: password.to_owned(),
            },
        };
        (exchange, client_first)
    }

    /// Reads the server-first-message and answers the client-final-message. Refuses a nonce
    /// that does not extend ours, an iteration count outside
    /// [`MIN_ITERATIONS`]`..=`[`CLIENT_MAX_ITERATIONS`] and an empty or non-base64 salt.
    pub fn respond(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        let ClientState::Started { password } =
            std::mem::replace(&mut self.state, ClientState::Spent)
        else {
            return Err(ScramError::OutOfOrder);
        };
        let text = std::str::from_utf8(server_first).map_err(|_| ScramError::NotUtf8)?;
        let mut attributes = text.split(',');
        let first = attributes.next().unwrap_or_default();
        if first.starts_with("m=") {
            return Err(ScramError::Unsupported("mandatory extension (m=)"));
        }
        if let Some(error) = first.strip_prefix("e=") {
            return Err(ScramError::Server(error.to_owned()));
        }
        let nonce = attribute(first, 'r', "server-first-message: r= nonce not first")?;
        let salt = attribute(
            attributes.next().unwrap_or_default(),
            's',
            "server-first-message: s= salt not second",
        )?;
        let iterations = attribute(
            attributes.next().unwrap_or_default(),
            'i',
            "server-first-message: i= iteration count not third",
        )?;
        for extension in attributes {
            parse_extension(extension)?;
        }
        check_nonce(nonce)?;
        if nonce.len() <= self.nonce.len() || !nonce.starts_with(&self.nonce) {
            return Err(ScramError::NonceMismatch);
        }
        let salt = decode_base64(salt, "server-first-message: s= is not base64")?;
        if salt.is_empty() {
            return Err(ScramError::Malformed(
                "server-first-message: s= salt is empty",
            ));
        }
        let iterations = parse_iterations(iterations)?;

        let salted = Credential::salted_password(self.hash, &password, &salt, iterations);
        let client_key = self.hash.hmac(&salted, b"Client Key");
        let stored_key = self.hash.h(&client_key);
        let without_proof = format!("c={},r={nonce}", BASE64.encode(CLIENT_GS2_HEADER));
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_signature = self.hash.hmac(&stored_key, auth_message.as_bytes());
        let proof = xor(&client_key, &client_signature);
        self.state = ClientState::Responded {
            server_key: self.hash.hmac_key(&self.hash.hmac(&salted, b"Server Key")),
            auth_message,
        };
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks the server-final-message's signature (`v=`, in constant time); `e=...` is
    /// [`ScramError::Server`].
    pub fn verify(self, server_final: &[u8]) -> Result<(), ScramError> {
        let ClientState::Responded {
            server_key,
            auth_message,
        } = self.state
        else {
            return Err(ScramError::OutOfOrder);
        };
        let text = std::str::from_utf8(server_final).map_err(|_| ScramError::NotUtf8)?;
        let mut attributes = text.split(',');
        let first = attributes.next().unwrap_or_default();
        if let Some(error) = first.strip_prefix("e=") {
            return Err(ScramError::Server(error.to_owned()));
        }
        let verifier = attribute(first, 'v', "server-final-message: neither v= nor e=")?;
        for extension in attributes {
            parse_extension(extension)?;
        }
        let signature = decode_base64(verifier, "server-final-message: v= is not base64")?;
        hmac::verify(&server_key, auth_message.as_bytes(), &signature)
            .map_err(|_| ScramError::ServerSignature)
    }
}

/// The value of `field` if it is `key=value` with a value; else `Malformed(what)`.
fn attribute<'a>(field: &'a str, key: char, what: &'static str) -> Result<&'a str, ScramError> {
    field
        .strip_prefix(key)
        .and_then(|rest| rest.strip_prefix('='))
        .filter(|value| !value.is_empty())
        .ok_or(ScramError::Malformed(what))
}

/// An extension `name=value`: the name ASCII letters (Kafka allows more than RFC 5802's one),
/// the value without NUL.
fn parse_extension(field: &str) -> Result<(&str, &str), ScramError> {
    let (name, value) = field
        .split_once('=')
        .ok_or(ScramError::Malformed("extension is not name=value"))?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(ScramError::Malformed("extension name is not letters"));
    }
    if value.is_empty() || value.contains('\0') {
        return Err(ScramError::Malformed("extension value empty or with NUL"));
    }
    Ok((name, value))
}

/// A nonce is printable ASCII without `,`.
fn check_nonce(nonce: &str) -> Result<(), ScramError> {
    if nonce.is_empty()
        || !nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
    {
        return Err(ScramError::Malformed("nonce is not printable ASCII"));
    }
    Ok(())
}

/// An iteration count: a positive decimal (no sign, no leading zero) within bounds.
fn parse_iterations(text: &str) -> Result<u32, ScramError> {
    if text.starts_with('0') || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ScramError::Malformed(
            "server-first-message: i= is not a positive number",
        ));
    }
    let value = text.bytes().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    u32::try_from(value)
        .ok()
        .filter(|n| (MIN_ITERATIONS..=CLIENT_MAX_ITERATIONS).contains(n))
        .ok_or(ScramError::Iterations(value))
}

fn decode_base64(text: &str, what: &'static str) -> Result<Vec<u8>, ScramError> {
    BASE64.decode(text).map_err(|_| ScramError::Malformed(what))
}

/// A username as a saslname: `=` as `=3D`, `,` as `=2C`.
fn encode_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// A saslname decoded: non-empty, no NUL, `=` only in `=2C` or `=3D`.
fn decode_saslname(saslname: &str) -> Result<String, ScramError> {
    if saslname.is_empty() || saslname.contains('\0') {
        return Err(ScramError::Malformed("saslname empty or with NUL"));
    }
    let mut name = String::with_capacity(saslname.len());
    let mut rest = saslname;
    while let Some((before, after)) = rest.split_once('=') {
        name.push_str(before);
        rest = if let Some(after) = after.strip_prefix("2C") {
            name.push(',');
            after
        } else if let Some(after) = after.strip_prefix("3D") {
            name.push('=');
            after
        } else {
            return Err(ScramError::Malformed(
                "saslname: = not followed by 2C or 3D",
            ));
        };
    }
    name.push_str(rest);
    Ok(name)
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
