//! The client's side of one exchange: sends the client-first-message, answers the
//! server-first-message with its proof, then verifies the server's signature.

use std::fmt;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ring::hmac;

use super::grammar::{
    attribute, check_nonce, decode_base64, encode_saslname, parse_extension, parse_iterations,
};
use super::{
    nonce_text, random_or_panic, xor, Credential, Hash, ScramError, CLIENT_GS2_HEADER, NONCE_BYTES,
};

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
    pub(super) fn with_nonce(
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
    ///
    /// [`MIN_ITERATIONS`]: super::MIN_ITERATIONS
    /// [`CLIENT_MAX_ITERATIONS`]: super::CLIENT_MAX_ITERATIONS
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
