//! ApiVersions, versions 0–4. The list is [`super::APIS`], so what is advertised is what is
//! routed. An unsupported version gets a v0 body with UNSUPPORTED_VERSION (KIP-511). v4 (what
//! Kafka 4.x clients ask first) is v3's layout; it only lets a feature's minimum version be 0,
//! and lograil advertises no features.

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::Handler;
use super::{RequestContext, APIS};
use crate::response::Response;

fn body(error_code: i16) -> ApiVersionsResponse {
    let api_keys = APIS
        .iter()
        .map(|api| {
            ApiVersion::default()
                .with_api_key(api.key as i16)
                .with_min_version(api.min)
                .with_max_version(api.max)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys)
}

impl Handler for ApiVersionsRequest {
    const SERVED: (i16, i16) = (0, 4);
    type Needs = ();

    async fn handle(
        (): Self::Needs,
        _: ApiVersionsRequest,
        _: &RequestContext,
    ) -> ApiVersionsResponse {
        body(0)
    }

    fn throttle_time_ms(response: &mut ApiVersionsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &ApiVersionsResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}

/// The response to a version we don't serve: header v0, body v0.
pub fn unsupported(correlation_id: i32) -> Response {
    let body = body(ResponseError::UnsupportedVersion.code());
    let encoded = Response::frame(
        ApiKey::ApiVersions,
        0,
        correlation_id,
        &body,
        &mut BytesMut::new(),
        Vec::new(),
    );
    match encoded {
        Ok(frame) => frame,
        // A v0 ApiVersions body of a fixed table always encodes.
        Err(e) => unreachable!("ApiVersions v0 failed to encode: {e}"),
    }
}
