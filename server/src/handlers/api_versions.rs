//! ApiVersions, versions 0–4. The list is [`super::APIS`], so what is advertised is what is
//! routed. An unsupported version gets a v0 body with UNSUPPORTED_VERSION (KIP-511).
//!
//! From v3 the answer carries the feature levels (KIP-584) of what lograil serves, finalized
//! as Kafka 4.4 finalizes them by default: `group.version` 1 (KIP-848 consumer groups),
//! `share.version` 2 (share groups with dead-letter queues), `streams.version` 1 (KIP-1071's
//! streams groups) and `transaction.version` 2 (KIP-890 part 2: the Java client then ends each
//! transaction with an epoch bump and adds partitions and groups implicitly). Not reported:
//! `metadata.version` and `kraft.version` (there is no KRaft quorum to version) and
//! `eligible.leader.replicas.version` (no replicas). As Kafka does, a v3 answer
//! leaves out supported features whose minimum is 0 (older clients fail to read them:
//! KAFKA-17492), and a finalized level of 0 is never listed.

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

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

/// Each feature lograil serves: its name, the levels it supports and the one it runs at.
const FEATURES: [(&str, (i16, i16), i16); 4] = [
    ("group.version", (0, 1), 1),
    ("share.version", (0, 2), 2),
    ("streams.version", (0, 1), 1),
    ("transaction.version", (0, 2), 2),
];

/// The features never change while the broker runs: one epoch for good.
const FINALIZED_FEATURES_EPOCH: i64 = 1;

/// `response` with the feature levels, as a response of `version` carries them.
fn with_features(response: ApiVersionsResponse, version: i16) -> ApiVersionsResponse {
    if version < 3 {
        return response;
    }
    let supported = FEATURES
        .iter()
        .filter(|(_, (min, _), _)| version >= 4 || *min > 0)
        .map(|(name, (min, max), _)| {
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect();
    let finalized = FEATURES
        .iter()
        .filter(|(_, _, level)| *level != 0)
        .map(|(name, _, level)| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
                .with_min_version_level(*level)
                .with_max_version_level(*level)
        })
        .collect();
    response
        .with_supported_features(supported)
        .with_finalized_features_epoch(FINALIZED_FEATURES_EPOCH)
        .with_finalized_features(finalized)
}

impl Handler for ApiVersionsRequest {
    const SERVED: (i16, i16) = (0, 4);
    type Needs = ();

    async fn handle(
        (): Self::Needs,
        _: ApiVersionsRequest,
        ctx: &RequestContext,
    ) -> ApiVersionsResponse {
        with_features(body(0), ctx.version)
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
