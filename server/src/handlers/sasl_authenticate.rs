//! SaslAuthenticate, versions 0–2 (KIP-152): one message of the mechanism SaslHandshake named
//! (PLAIN's only one; SCRAM's client-first, then client-final). A refusal waits
//! `connection.failed.authentication.delay.ms`, answers SASL_AUTHENTICATION_FAILED (or
//! ILLEGAL_SASL_STATE out of turn) with a message that does not say whether the user exists,
//! and the connection closes. No session lifetime: re-authentication (KIP-368) is not served.

use std::sync::{Arc, PoisonError};

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Broker;
use crate::security::sasl::Step;

impl Handler for SaslAuthenticateRequest {
    const SERVED: (i16, i16) = (0, 2);

    async fn handle(
        broker: &Arc<Broker>,
        request: SaslAuthenticateRequest,
        ctx: &RequestContext,
    ) -> SaslAuthenticateResponse {
        let step = ctx
            .sasl
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .authenticate(&request.auth_bytes, &broker.security.verifier());
        match step {
            Step::Continue(message) => {
                SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(message))
            }
            Step::Done(principal, message) => {
                tracing::info!(%principal, "authenticated");
                SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(message))
            }
            Step::Failed(error, message) => {
                tracing::info!(peer = %ctx.peer, "{message}");
                broker
                    .metrics
                    .authentication_failed(crate::metrics::AuthFailure::Sasl);
                tokio::time::sleep(broker.security.sasl.failed_authentication_delay).await;
                SaslAuthenticateResponse::default()
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_string(message)))
            }
        }
    }

    fn throttle_time_ms(_: &mut SaslAuthenticateResponse) -> Option<&mut i32> {
        None
    }

    fn each_error(r: &SaslAuthenticateResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}
