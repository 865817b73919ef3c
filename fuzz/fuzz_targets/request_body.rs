//! Each request the broker decodes, alone: no broker, so many more inputs per second than
//! `request` for the decoders of the (patched) kafka-protocol crate.
//!
//! Input: one request frame without its length prefix (as `handlers::handle` gets it): API
//! key, version, the rest of the header, the body. An API key the broker does not serve is
//! taken modulo the number of served APIs, and a version it does not serve modulo that API's
//! range, so every input decodes some served request. The header is decoded at that API's
//! header version, then the body, as the broker does. Checked: no panic, and (with run.sh's
//! `-malloc_limit_mb`) no allocation far beyond the input's size.

#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::{self as m, ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;
use libfuzzer_sys::fuzz_target;

/// Decodes a request body of `key` at `version` as the broker does (the APIs in `lograil::APIS`).
fn decode_request(key: ApiKey, body: &mut Bytes, version: i16) -> anyhow::Result<()> {
    match key {
        ApiKey::Produce => m::ProduceRequest::decode(body, version).map(drop),
        ApiKey::Fetch => m::FetchRequest::decode(body, version).map(drop),
        ApiKey::ListOffsets => m::ListOffsetsRequest::decode(body, version).map(drop),
        ApiKey::Metadata => m::MetadataRequest::decode(body, version).map(drop),
        ApiKey::ApiVersions => m::ApiVersionsRequest::decode(body, version).map(drop),
        ApiKey::CreateTopics => m::CreateTopicsRequest::decode(body, version).map(drop),
        ApiKey::DeleteTopics => m::DeleteTopicsRequest::decode(body, version).map(drop),
        ApiKey::DescribeConfigs => m::DescribeConfigsRequest::decode(body, version).map(drop),
        ApiKey::InitProducerId => m::InitProducerIdRequest::decode(body, version).map(drop),
        ApiKey::FindCoordinator => m::FindCoordinatorRequest::decode(body, version).map(drop),
        ApiKey::JoinGroup => m::JoinGroupRequest::decode(body, version).map(drop),
        ApiKey::SyncGroup => m::SyncGroupRequest::decode(body, version).map(drop),
        ApiKey::Heartbeat => m::HeartbeatRequest::decode(body, version).map(drop),
        ApiKey::LeaveGroup => m::LeaveGroupRequest::decode(body, version).map(drop),
        ApiKey::OffsetCommit => m::OffsetCommitRequest::decode(body, version).map(drop),
        ApiKey::OffsetFetch => m::OffsetFetchRequest::decode(body, version).map(drop),
        ApiKey::ListGroups => m::ListGroupsRequest::decode(body, version).map(drop),
        ApiKey::DescribeGroups => m::DescribeGroupsRequest::decode(body, version).map(drop),
        ApiKey::DeleteGroups => m::DeleteGroupsRequest::decode(body, version).map(drop),
        ApiKey::OffsetDelete => m::OffsetDeleteRequest::decode(body, version).map(drop),
        other => anyhow::bail!("{other:?} is not served"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(([k0, k1, v0, v1], _)) = data.split_first_chunk::<4>() else {
        return;
    };
    let (key, version) = (
        i16::from_be_bytes([*k0, *k1]),
        i16::from_be_bytes([*v0, *v1]),
    );
    let api = lograil::APIS
        .iter()
        .find(|a| a.key as i16 == key)
        .unwrap_or(&lograil::APIS[usize::from(key as u16) % lograil::APIS.len()]);
    let version = if (api.min..=api.max).contains(&version) {
        version
    } else {
        api.min + (version as u16 % (api.max - api.min + 1) as u16) as i16
    };
    if api.key == ApiKey::Produce && version < 3 {
        // Answered by hand, never decoded (the `request` target covers that path).
        return;
    }
    // The header is decoded from the frame's start, as the broker does.
    let mut buf = Bytes::copy_from_slice(data);
    if RequestHeader::decode(&mut buf, api.key.request_header_version(version)).is_err() {
        return;
    }
    let _ = decode_request(api.key, &mut buf, version);
});
