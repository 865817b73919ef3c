//! ApiVersions, versions 0–3. The list is [`super::APIS`], so what is advertised is what is
//! routed. An unsupported version gets a v0 body with UNSUPPORTED_VERSION (KIP-511).

use std::sync::Arc;

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseHeader};

use super::RequestContext;
use super::{encode_frame, APIS};
use crate::broker::Broker;
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

pub async fn handle(
    _: &Arc<Broker>,
    _: ApiVersionsRequest,
    _: &RequestContext,
) -> Option<ApiVersionsResponse> {
    Some(body(0))
}

/// The response to a version we don't serve: header v0, body v0.
pub fn unsupported(correlation_id: i32) -> Response {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let body = body(ResponseError::UnsupportedVersion.code());
    let encoded = Response::encode(&mut BytesMut::new(), Vec::new(), |out| {
        encode_frame(&header, 0, &body, 0, out)
    });
    match encoded {
        Ok(frame) => frame,
        // A v0 ApiVersions body of a fixed table always encodes.
        Err(e) => unreachable!("ApiVersions v0 failed to encode: {e}"),
    }
}
