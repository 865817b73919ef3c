//! PLAIN (RFC 4616): one message, `authzid NUL username NUL password`, in clear text (so only
//! over TLS or on a trusted network).
//!
//! ```
//! let message = sasl::plain::encode("alice", "secret");
//! let parsed = sasl::plain::parse(&message)?;
//! assert_eq!((parsed.username.as_str(), parsed.password.as_str()), ("alice", "secret"));
//! assert!(!format!("{parsed:?}").contains("secret"));
//! # Ok::<(), sasl::plain::PlainError>(())
//! ```

use std::fmt;

/// A parsed PLAIN message.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainMessage {
    /// The authorization identity: empty, or the username (Kafka refuses any other).
    pub authzid: String,
    /// The authentication identity.
    pub username: String,
    /// The password, in clear.
    pub password: String,
}

impl fmt::Debug for PlainMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainMessage")
            .field("authzid", &self.authzid)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Why a PLAIN message was refused. No variant carries any part of the message.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    /// The message is not UTF-8.
    #[error("invalid SASL/PLAIN message: not UTF-8")]
    NotUtf8,
    /// The message does not have exactly two NUL separators.
    #[error("invalid SASL/PLAIN message: expected 2 NUL separators, found {0}")]
    Separators(usize),
    /// The username is empty.
    #[error("invalid SASL/PLAIN message: username not specified")]
    EmptyUsername,
    /// The password is empty.
    #[error("invalid SASL/PLAIN message: password not specified")]
    EmptyPassword,
    /// The authzid is neither empty nor the username.
    #[error("invalid SASL/PLAIN message: authorization id differs from the username")]
    AuthzidMismatch,
}

/// Parses a client's PLAIN message, `authzid NUL username NUL password`.
pub fn parse(message: &[u8]) -> Result<PlainMessage, PlainError> {
    let text = std::str::from_utf8(message).map_err(|_| PlainError::NotUtf8)?;
    let mut fields = text.split('\0');
    let (Some(authzid), Some(username), Some(password), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(PlainError::Separators(
            text.bytes().filter(|&b| b == 0).count(),
        ));
    };
    if username.is_empty() {
        return Err(PlainError::EmptyUsername);
    }
    if password.is_empty() {
        return Err(PlainError::EmptyPassword);
    }
    if !authzid.is_empty() && authzid != username {
        return Err(PlainError::AuthzidMismatch);
    }
    Ok(PlainMessage {
        authzid: authzid.to_owned(),
        username: username.to_owned(),
        password: password.to_owned(),
    })
}

/// A client's PLAIN message with an empty authzid. A username or password holding a NUL makes
/// a message the broker refuses.
pub fn encode(username: &str, password: &str) -> Vec<u8> {
    let mut message = Vec::with_capacity(username.len() + password.len() + 2);
    message.push(0);
    message.extend_from_slice(username.as_bytes());
    message.push(0);
    message.extend_from_slice(password.as_bytes());
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(message: &[u8]) -> (String, String, String) {
        let m = parse(message).unwrap();
        (m.authzid, m.username, m.password)
    }

    #[test]
    fn accepts_rfc_4616_forms() {
        let s = |v: &str| v.to_owned();
        assert_eq!(
            ok(b"\0tim\0tanstaaftanstaaf"),
            (s(""), s("tim"), s("tanstaaftanstaaf"))
        );
        assert_eq!(ok(b"tim\0tim\0pw"), (s("tim"), s("tim"), s("pw")));
        assert_eq!(ok("\0j\u{f6}rg\0p\u{e4}ss".as_bytes()).1, "j\u{f6}rg");
        assert_eq!(ok(b"\0u\0p w=,x").2, "p w=,x");
    }

    #[test]
    fn encode_round_trips() {
        let m = parse(&encode("alice", "s3cr\u{e9}t")).unwrap();
        assert_eq!(m.authzid, "");
        assert_eq!(m.username, "alice");
        assert_eq!(m.password, "s3cr\u{e9}t");
        assert_eq!(encode("u", "p"), b"\0u\0p");
    }

    #[test]
    fn refuses_malformed() {
        assert_eq!(parse(b""), Err(PlainError::Separators(0)));
        assert_eq!(parse(b"user"), Err(PlainError::Separators(0)));
        assert_eq!(parse(b"\0user"), Err(PlainError::Separators(1)));
        assert_eq!(parse(b"\0user\0pass\0"), Err(PlainError::Separators(3)));
        assert_eq!(parse(b"\0user\0pa\0ss"), Err(PlainError::Separators(3)));
        assert_eq!(parse(b"\0\0pass"), Err(PlainError::EmptyUsername));
        assert_eq!(parse(b"\0user\0"), Err(PlainError::EmptyPassword));
        assert_eq!(parse(b"\0\0"), Err(PlainError::EmptyUsername));
        assert_eq!(
            parse(b"admin\0user\0pass"),
            Err(PlainError::AuthzidMismatch)
        );
        assert_eq!(parse(b"\0us\xffer\0pass"), Err(PlainError::NotUtf8));
    }

    #[test]
    fn never_shows_the_password() {
        let m = parse(b"\0user\0hunter2").unwrap();
        assert!(!format!("{m:?}").contains("hunter2"));
        for bad in [
            &b"x\0user\0hunter2"[..],
            b"\0user\0hunter2\0",
            b"\0\0hunter2",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(!format!("{e} {e:?}").contains("hunter2"));
        }
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(
            proptest::prop_oneof![proptest::strategy::Just(0u8), proptest::num::u8::ANY],
            0..64,
        )) {
            if let Ok(m) = parse(&bytes) {
                proptest::prop_assert!(!m.username.is_empty() && !m.password.is_empty());
                proptest::prop_assert_eq!(
                    bytes.len(),
                    m.authzid.len() + m.username.len() + m.password.len() + 2
                );
            }
        }

        #[test]
        fn encode_then_parse(user in "[^\0]{1,16}", pass in "[^\0]{1,16}") {
            let m = parse(&encode(&user, &pass)).unwrap();
            proptest::prop_assert_eq!((m.username, m.password), (user, pass));
        }
    }
}
