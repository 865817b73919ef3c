//! What every API's handler implements ([`Handler`]), and what a handler is told of its
//! request ([`RequestContext`]).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use kafka_protocol::protocol::Request;

use super::bounds::Counts;
use crate::authorizer::Authorizer;
use crate::broker::Pick;
use crate::security::sasl::Exchange;
use crate::security::{Listener, Principal};

/// Who sent a request, and in which version.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub version: i16,
    pub client_id: String,
    pub peer: SocketAddr,
    /// Who the connection authenticated as (`User:ANONYMOUS` when it did not): what the
    /// authorizer decides for (`authorize.rs`).
    pub principal: Principal,
    /// The listener the connection came in on: Metadata advertises its endpoint.
    pub listener: Arc<Listener>,
    /// The connection's SASL exchange: SaslHandshake and SaslAuthenticate take it forward.
    pub sasl: Arc<Mutex<Exchange>>,
    /// What the principal may do (`authorize.rs`).
    pub authorizer: Arc<Authorizer>,
}

/// One API: how its requests are answered. `Self` is the decoded request; the response type
/// is kafka-protocol's for it.
pub(crate) trait Handler: Request + Send + 'static
where
    Self::Response: Send,
{
    /// The versions advertised in ApiVersions (`min..=max`); a request in any other version
    /// closes the connection (ApiVersions answers it: KIP-511).
    const SERVED: (i16, i16);

    /// The parts of the broker the handler works on: a facade or a tuple of them, handed to
    /// [`Handler::handle`] by the request path.
    type Needs: Pick;

    /// What the request names, checked against the broker's caps before it is handled
    /// ([`bounds`]).
    fn counts(&self) -> Counts {
        Counts::default()
    }

    /// Whether the request gets a response at all: only a Produce with acks=0 does not.
    fn answered(&self) -> bool {
        true
    }

    /// Answers the request. Every failure is an answer: a Kafka error code in the response.
    fn handle(
        needs: Self::Needs,
        request: Self,
        ctx: &RequestContext,
    ) -> impl Future<Output = Self::Response> + Send;

    /// The response's `throttle_time_ms` (KIP-219: every response but SaslHandshake's and
    /// SaslAuthenticate's has one in its recent versions; older versions drop it when encoded).
    fn throttle_time_ms(response: &mut Self::Response) -> Option<&mut i32>;

    /// Calls `f` with every error code in the response (top level, per topic, partition,
    /// group, member), 0 included: counted in `lograil_response_errors_total`.
    fn each_error(response: &Self::Response, f: &mut dyn FnMut(i16));

    /// The record slices of the response, written from where they lie instead of copied
    /// (see [`crate::response`]).
    fn shared(_: &Self::Response) -> Vec<Bytes> {
        Vec::new()
    }
}

/// Something to do with the handler of one API, given its request type: how the request path
/// (`request`) reaches a handler through the table without the table knowing the path.
pub(crate) trait Route {
    type Output;

    fn route<H: Handler>(self) -> impl Future<Output = Self::Output> + Send
    where
        H::Response: Send;
}
