//! An action's Kafka request, run as the viewer: through the broker's own handler with the
//! viewer's principal and address, so the authorizer and every check the handler makes decide
//! exactly as for a client sending it.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::broker::{Broker, Pick};
use crate::console::access::Viewer;
use crate::handlers::{Handler, RequestContext};
use crate::security::Listener;

/// The client id the console's requests carry (in the broker's request log and metrics).
const CLIENT_ID: &str = "lograil-console";

/// Answers `request` (of API version `version`) as `viewer` would be answered. Blocks: call
/// it on the blocking pool (the console's responder runs there).
pub fn call<H>(broker: &Broker, viewer: &Viewer, version: i16, request: H) -> H::Response
where
    H: Handler,
    H::Response: Send,
{
    let peer = SocketAddr::new(viewer.host(), 0);
    let ctx = RequestContext {
        version,
        client_id: CLIENT_ID.to_string(),
        peer,
        principal: viewer.principal.clone(),
        listener: Arc::new(Listener::plaintext(peer)),
        sasl: Arc::default(),
        authorizer: broker.access().authorizer.clone(),
    };
    tokio::runtime::Handle::current().block_on(H::handle(Pick::pick(broker), request, &ctx))
}

pub use crate::metrics::errors::error_name;

/// Whether `code` is an authorization failure (the answer is then 403).
pub fn is_denied(code: i16) -> bool {
    use kafka_protocol::error::ResponseError as E;
    [
        E::TopicAuthorizationFailed,
        E::GroupAuthorizationFailed,
        E::ClusterAuthorizationFailed,
        E::TransactionalIdAuthorizationFailed,
    ]
    .iter()
    .any(|e| e.code() == code)
}
