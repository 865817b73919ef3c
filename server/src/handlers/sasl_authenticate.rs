//! SaslAuthenticate, versions 0–2 (KIP-152): one message of the mechanism SaslHandshake named
//! (PLAIN's only one; SCRAM's client-first, then client-final). A refusal waits
//! `connection.failed.authentication.delay.ms`, answers SASL_AUTHENTICATION_FAILED (or
//! ILLEGAL_SASL_STATE out of turn) with a message that does not say whether the user exists,
//! and the connection closes. With `connections.max.reauth.ms` the answer carries the session's
//! lifetime (KIP-368): the client authenticates again on the same connection, as the same
//! principal, before it runs out, or its next request closes the connection.

use std::sync::{Arc, PoisonError};

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Access;
use crate::metrics::Metrics;
use crate::security::sasl::Step;

impl Handler for SaslAuthenticateRequest {
    const SERVED: (i16, i16) = (0, 2);
    type Needs = (Arc<Access>, Arc<Metrics>);

    async fn handle(
        (access, metrics): Self::Needs,
        request: SaslAuthenticateRequest,
        ctx: &RequestContext,
    ) -> SaslAuthenticateResponse {
        let step = ctx
            .sasl
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .authenticate(&request.auth_bytes, &access.security.verifier());
        match step {
            Step::Continue(message) => {
                SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(message))
            }
            Step::Done(principal, message) => {
                tracing::info!(%principal, "authenticated");
                // KIP-368: the client authenticates again before this runs out.
                let lifetime = access
                    .security
                    .sasl
                    .reauthentication
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
                SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from(message))
                    .with_session_lifetime_ms(lifetime)
            }
            Step::Failed(error, message) => {
                let failed = access
                    .security
                    .failed_logins
                    .note(ctx.peer.ip(), std::time::Instant::now());
                if let Some(held_back) = failed {
                    tracing::info!(peer = %ctx.peer, held_back, "{message}");
                }
                metrics.authentication_failed(crate::metrics::AuthFailure::Sasl);
                tokio::time::sleep(access.security.sasl.failed_authentication_delay).await;
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
