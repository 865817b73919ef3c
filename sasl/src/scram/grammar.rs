//! The grammar of RFC 5802's messages, as both sides read and write them: `key=value`
//! attributes, extensions, nonces, iteration counts, base64 and saslnames.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

use super::{ScramError, CLIENT_MAX_ITERATIONS, MIN_ITERATIONS};

/// The value of `field` if it is `key=value` with a value; else `Malformed(what)`.
pub(super) fn attribute<'a>(
    field: &'a str,
    key: char,
    what: &'static str,
) -> Result<&'a str, ScramError> {
    field
        .strip_prefix(key)
        .and_then(|rest| rest.strip_prefix('='))
        .filter(|value| !value.is_empty())
        .ok_or(ScramError::Malformed(what))
}

/// An extension `name=value`: the name ASCII letters (Kafka allows more than RFC 5802's one),
/// the value without NUL.
pub(super) fn parse_extension(field: &str) -> Result<(&str, &str), ScramError> {
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
pub(super) fn check_nonce(nonce: &str) -> Result<(), ScramError> {
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
pub(super) fn parse_iterations(text: &str) -> Result<u32, ScramError> {
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

pub(super) fn decode_base64(text: &str, what: &'static str) -> Result<Vec<u8>, ScramError> {
    BASE64.decode(text).map_err(|_| ScramError::Malformed(what))
}

/// A username as a saslname: `=` as `=3D`, `,` as `=2C`.
pub(super) fn encode_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// A saslname decoded: non-empty, no NUL, `=` only in `=2C` or `=3D`.
pub(super) fn decode_saslname(saslname: &str) -> Result<String, ScramError> {
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
