//! The broker's side of SCRAM-SHA-256 on arbitrary bytes: the input up to its first NUL as the
//! client-first-message to `sasl::scram::ServerExchange::start`, against a fixed credential for
//! "user"; if the exchange starts, the rest as the client-final-message to `finish`, once as
//! given and once (on a second exchange) with each `r=` value replaced by that exchange's nonce,
//! which the fuzzer cannot guess, so that the checks past the nonce are reached too.
//!
//! Checked: no panic; a started exchange answers `r=<nonce>,s=<the salt>,i=4096` with a nonce
//! of at least 24 characters more than the client's; no client-final-message authenticates
//! (its proof would have to hold for a server nonce drawn after it was written).

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sasl::scram::{Credential, Hash, ServerExchange};

/// RFC 7677's example: user "user", password "pencil".
fn credential() -> Credential {
    static CREDENTIAL: OnceLock<Credential> = OnceLock::new();
    CREDENTIAL
        .get_or_init(|| {
            let salt = b"\x5b\x6d\x99\x68\x9d\x12\x35\x8e\xec\xa0\x4b\x14\x12\x36\xfa\x81";
            Credential::from_password(Hash::Sha256, "pencil", salt.to_vec(), 4096)
        })
        .clone()
}

/// A started exchange and the nonce of its server-first-message.
fn start(client_first: &[u8]) -> Option<(ServerExchange, String)> {
    let (exchange, server_first) = ServerExchange::start(Hash::Sha256, client_first, |user| {
        (user == "user").then(credential)
    })
    .ok()?;
    let server_first = String::from_utf8(server_first).expect("server-first-message is UTF-8");
    let nonce = server_first
        .strip_prefix("r=")
        .and_then(|rest| rest.strip_suffix(",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"))
        .unwrap_or_else(|| panic!("server-first-message {server_first:?}"));
    assert!(!nonce.contains(','), "{server_first:?}");
    Some((exchange, nonce.to_owned()))
}

/// `message` with the value of each `r=` attribute replaced by `nonce`.
fn splice_nonce(message: &[u8], nonce: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + nonce.len());
    for (i, attribute) in message.split(|&b| b == b',').enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if attribute.starts_with(b"r=") {
            out.extend_from_slice(b"r=");
            out.extend_from_slice(nonce.as_bytes());
        } else {
            out.extend_from_slice(attribute);
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let (client_first, client_final) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let Some((exchange, nonce)) = start(client_first) else {
        return;
    };
    let client_nonce = std::str::from_utf8(client_first)
        .ok()
        .and_then(|text| text.split(",r=").nth(1))
        .and_then(|rest| rest.split(',').next())
        .expect("an accepted client-first-message has r=");
    assert!(
        nonce.starts_with(client_nonce) && nonce.len() >= client_nonce.len() + 24,
        "client nonce {client_nonce:?}, server nonce {nonce:?}"
    );
    assert!(
        exchange.finish(client_final).is_err(),
        "authenticated: {client_final:?}"
    );

    let (exchange, nonce) =
        start(client_first).expect("the same client-first-message starts again");
    let spliced = splice_nonce(client_final, &nonce);
    assert!(
        exchange.finish(&spliced).is_err(),
        "authenticated: {spliced:?}"
    );
});
