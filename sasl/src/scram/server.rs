//! The broker's side of one exchange: reads the client-first-message, answers the
//! server-first-message, then checks the client's proof.

use std::fmt;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

use super::grammar::{attribute, check_nonce, decode_base64, decode_saslname, parse_extension};
use super::{constant_time_eq, nonce_text, random, xor, Credential, Hash, ScramError, NONCE_BYTES};

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
    pub(super) fn start_with(
        hash: Hash,
        client_first: &[u8],
        lookup: impl FnOnce(&str) -> Option<Credential>,
        server_nonce: impl FnOnce() -> Result<String, ScramError>,
    ) -> Result<(ServerExchange, Vec<u8>), ScramError> {
        let text = std::str::from_utf8(client_first).map_err(|_| ScramError::NotUtf8)?;
        let (gs2_header, authzid, bare) = split_gs2_header(text)?;
        let (username, client_nonce) = parse_first_bare(bare)?;
        if authzid.is_some_and(|authzid| authzid != username) {
            return Err(ScramError::AuthzidMismatch);
        }

        let credential = lookup(&username).ok_or(ScramError::UnknownUser)?;
        check_credential(&credential, hash)?;

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

/// Splits a client-first-message into its gs2 header (`n,,`, `y,,` or with `a=authzid`), the
/// authzid it names (saslname decoded) and the client-first-message-bare. Channel binding
/// (`p=`) is not supported.
fn split_gs2_header(text: &str) -> Result<(&str, Option<String>, &str), ScramError> {
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
    Ok((gs2_header, authzid, bare))
}

/// Reads a client-first-message-bare: the username (saslname decoded) and the client's nonce.
/// Mandatory extensions (`m=`) and delegation tokens are not supported.
fn parse_first_bare(bare: &str) -> Result<(String, &str), ScramError> {
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
    Ok((username, client_nonce))
}

/// Refuses a stored credential that cannot verify an exchange of `hash`.
fn check_credential(credential: &Credential, hash: Hash) -> Result<(), ScramError> {
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
    Ok(())
}
