//! The console's CSRF tokens: what proves that a POST comes from the confirmation page the
//! console wrote for this viewer and this action, not from another site's form riding on the
//! browser's Basic credentials.
//!
//! A token is `<issued ms>.<HMAC-SHA256 of principal, action, its fields and issued ms>` under
//! a key drawn at start (so a restart voids every token). It is good for [`VALID_MS`] and
//! once: a token used is kept until it expires, and a second POST with it (a double click, a
//! replay) is refused. At most [`USED_KEPT`] are kept; past that, actions wait for tokens to
//! expire.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

use crate::console::access::same;

/// How long a confirmation page's token is good for.
pub const VALID_MS: i64 = 10 * 60 * 1000;
/// Used tokens remembered at most.
const USED_KEPT: usize = 10_000;

/// Why a token is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not a token this console wrote for this viewer, action and fields.
    Forged,
    Expired,
    Used,
    /// [`USED_KEPT`] tokens are in their validity: try again later.
    Busy,
}

impl Refused {
    pub fn reason(&self) -> &'static str {
        match self {
            Refused::Forged => "the form's token is not valid for this action (CSRF check)",
            Refused::Expired => "the confirmation page is over 10 minutes old: load it again",
            Refused::Used => "this confirmation was already used: load the page again",
            Refused::Busy => "too many actions in the last 10 minutes: try again later",
        }
    }
}

/// The key and the tokens used.
pub struct Tokens {
    key: hmac::Key,
    /// Used tokens, with when they expire.
    used: Mutex<HashMap<String, i64>>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens").finish_non_exhaustive()
    }
}

impl Tokens {
    /// Tokens under a fresh random key; `None` when the OS gives no random bytes.
    pub fn new() -> Option<Tokens> {
        let mut key = [0u8; 32];
        SystemRandom::new().fill(&mut key).ok()?;
        Some(Tokens {
            key: hmac::Key::new(hmac::HMAC_SHA256, &key),
            used: Mutex::default(),
        })
    }

    /// A token for `principal` doing `action` with `fields`, issued at `now`.
    pub fn issue(
        &self,
        principal: &str,
        action: &str,
        fields: &[(&str, String)],
        now: i64,
    ) -> String {
        format!("{now}.{}", self.mac(principal, action, fields, now))
    }

    /// Spends `token`: `Ok` when this console issued it for `principal`, `action` and `fields`
    /// within [`VALID_MS`] of `now` and it was not spent before.
    pub fn spend(
        &self,
        token: &str,
        principal: &str,
        action: &str,
        fields: &[(&str, String)],
        now: i64,
    ) -> Result<(), Refused> {
        let (issued, mac) = token.split_once('.').ok_or(Refused::Forged)?;
        let issued: i64 = issued.parse().map_err(|_| Refused::Forged)?;
        let expected = self.mac(principal, action, fields, issued);
        if !same(mac.as_bytes(), expected.as_bytes()) {
            return Err(Refused::Forged);
        }
        if now < issued || now - issued > VALID_MS {
            return Err(Refused::Expired);
        }
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        if used.contains_key(token) {
            return Err(Refused::Used);
        }
        if used.len() >= USED_KEPT {
            used.retain(|_, expires| *expires > now);
            if used.len() >= USED_KEPT {
                return Err(Refused::Busy);
            }
        }
        used.insert(token.to_string(), issued + VALID_MS);
        Ok(())
    }

    fn mac(&self, principal: &str, action: &str, fields: &[(&str, String)], issued: i64) -> String {
        let mut context = hmac::Context::with_key(&self.key);
        // Each part length-prefixed, so no two inputs run together the same way.
        let mut part = |bytes: &[u8]| {
            context.update(&(bytes.len() as u64).to_be_bytes());
            context.update(bytes);
        };
        part(principal.as_bytes());
        part(action.as_bytes());
        for (name, value) in fields {
            part(name.as_bytes());
            part(value.as_bytes());
        }
        part(&issued.to_be_bytes());
        context
            .sign()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_good_once_for_its_viewer_action_and_fields_within_its_time() {
        let tokens = Tokens::new().unwrap();
        let fields = vec![("group", "g".to_string()), ("to", "earliest".to_string())];
        let now = 1_700_000_000_000;
        let token = tokens.issue("User:alice", "reset-offsets", &fields, now);
        let other = vec![("group", "h".to_string()), ("to", "earliest".to_string())];
        let spend = |token: &str, who, action, fields: &[(&str, String)], at| {
            tokens.spend(token, who, action, fields, at)
        };
        assert_eq!(
            spend(&token, "User:bob", "reset-offsets", &fields, now),
            Err(Refused::Forged)
        );
        assert_eq!(
            spend(&token, "User:alice", "delete-records", &fields, now),
            Err(Refused::Forged)
        );
        assert_eq!(
            spend(&token, "User:alice", "reset-offsets", &other, now),
            Err(Refused::Forged)
        );
        assert_eq!(
            spend("1.abc", "User:alice", "reset-offsets", &fields, now),
            Err(Refused::Forged)
        );
        assert_eq!(
            spend("", "User:alice", "reset-offsets", &fields, now),
            Err(Refused::Forged)
        );
        let late = now + VALID_MS + 1;
        assert_eq!(
            spend(&token, "User:alice", "reset-offsets", &fields, late),
            Err(Refused::Expired)
        );
        assert_eq!(
            spend(&token, "User:alice", "reset-offsets", &fields, now + 5),
            Ok(())
        );
        assert_eq!(
            spend(&token, "User:alice", "reset-offsets", &fields, now + 6),
            Err(Refused::Used)
        );
        // Another console (another key) never accepts it.
        let elsewhere = Tokens::new().unwrap();
        let fresh = tokens.issue("User:alice", "reset-offsets", &fields, now);
        assert_eq!(
            elsewhere.spend(&fresh, "User:alice", "reset-offsets", &fields, now),
            Err(Refused::Forged)
        );
    }

    #[test]
    fn fields_cannot_run_together() {
        let tokens = Tokens::new().unwrap();
        let a = tokens.issue("p", "x", &[("ab", "c".to_string())], 1);
        assert_eq!(
            tokens.spend(&a, "p", "x", &[("a", "bc".to_string())], 1),
            Err(Refused::Forged)
        );
    }
}
