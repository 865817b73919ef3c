//! Who a connection is: the listener it came in on ([`listener`]: Kafka's listener model) and
//! the principal it authenticated as ([`Principal`]).

pub mod listener;
mod principal;

pub use listener::{Listener, ListenerConfig, ListenersError, SecurityProtocol};
pub use principal::Principal;
