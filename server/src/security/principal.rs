//! Who sent a request: Kafka's `KafkaPrincipal`, `Type:name`.

use std::fmt;
use std::sync::Arc;

/// A principal as ACLs name it (`User:alice`). A connection that did not authenticate is
/// `User:ANONYMOUS`, as in Kafka.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Principal(Arc<str>);

impl Principal {
    /// `User:ANONYMOUS`: a connection on a listener without authentication.
    pub fn anonymous() -> Principal {
        static ANONYMOUS: std::sync::LazyLock<Principal> =
            std::sync::LazyLock::new(|| Principal(Arc::from("User:ANONYMOUS")));
        ANONYMOUS.clone()
    }

    /// `User:<name>`: a SASL username or a certificate's subject.
    pub fn user(name: &str) -> Principal {
        Principal(Arc::from(format!("User:{name}")))
    }

    /// `Type:name`, as ACLs and `super.users` spell it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name after `User:`.
    pub fn name(&self) -> &str {
        self.0.split_once(':').map_or(&self.0, |(_, name)| name)
    }

    /// Whether this is `User:ANONYMOUS`: unauthenticated, or a SASL user named `ANONYMOUS`
    /// (the same principal, as in Kafka).
    pub fn is_anonymous(&self) -> bool {
        self.as_str() == "User:ANONYMOUS"
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
