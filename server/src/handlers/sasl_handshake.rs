//! SaslHandshake, versions 0–1 (KIP-152): names the mechanism the connection's SaslAuthenticate
//! requests will carry (after version 0, the mechanism's messages come as bare frames instead:
//! `request::raw_token`; librdkafka only uses version 1 when version 0 is advertised too). An unknown or disabled mechanism answers UNSUPPORTED_SASL_MECHANISM with the
//! enabled ones, and the connection closes, as Kafka's does.

use std::sync::{Arc, PoisonError};

use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Access;

impl Handler for SaslHandshakeRequest {
    const SERVED: (i16, i16) = (0, 1);
    type Needs = Arc<Access>;

    async fn handle(
        access: Self::Needs,
        request: SaslHandshakeRequest,
        ctx: &RequestContext,
    ) -> SaslHandshakeResponse {
        let enabled = &ctx.listener.mechanisms;
        let mechanisms = enabled
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect();
        let response = SaslHandshakeResponse::default().with_mechanisms(mechanisms);
        let mut exchange = ctx.sasl.lock().unwrap_or_else(PoisonError::into_inner);
        let reauthenticate = access.security.sasl.reauthentication.is_some();
        match exchange.handshake(&request.mechanism, enabled, reauthenticate) {
            Ok(()) => response,
            Err((code, reason)) => {
                tracing::info!(mechanism = %request.mechanism, "{reason}");
                response.with_error_code(code.code())
            }
        }
    }

    fn throttle_time_ms(_: &mut SaslHandshakeResponse) -> Option<&mut i32> {
        None
    }

    fn each_error(r: &SaslHandshakeResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}
