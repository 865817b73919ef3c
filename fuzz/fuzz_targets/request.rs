//! The broker's whole request path, in-process, against a real broker state on a fresh data
//! dir: the input is what one client sends on one connection (length-prefixed frames, as
//! captured from real clients), served by `lograil::fuzzing::FuzzBroker` through the frame
//! reader, header decode, dispatch by API key and version through `lograil::APIS`, body
//! decode, the handler and response encoding. Every API and version the broker serves is
//! reachable; waits (long-poll fetches, JoinGroup, SyncGroup) run on a paused clock.
//!
//! Checked: no panic, no connection closed because a response could not be encoded, and every
//! response is one whole frame a client decodes (header at the API's response header version,
//! the request's correlation id, a body of the request's API and version with no byte left;
//! Produce v0–2, answered by hand, have no decoder in kafka-protocol: header only).

#![no_main]

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{self as m, ApiKey, ResponseHeader};
use kafka_protocol::protocol::Decodable;
use libfuzzer_sys::fuzz_target;
use lograil::fuzzing::{Exchange, FuzzBroker, Outcome};

/// Decodes a response body of `key` at `version` (the APIs in `lograil::APIS`).
fn decode_response(key: ApiKey, body: &mut Bytes, version: i16) -> anyhow::Result<()> {
    match key {
        ApiKey::Produce => m::ProduceResponse::decode(body, version).map(drop),
        ApiKey::Fetch => m::FetchResponse::decode(body, version).map(drop),
        ApiKey::ListOffsets => m::ListOffsetsResponse::decode(body, version).map(drop),
        ApiKey::Metadata => m::MetadataResponse::decode(body, version).map(drop),
        ApiKey::ApiVersions => m::ApiVersionsResponse::decode(body, version).map(drop),
        ApiKey::CreateTopics => m::CreateTopicsResponse::decode(body, version).map(drop),
        ApiKey::DeleteTopics => m::DeleteTopicsResponse::decode(body, version).map(drop),
        ApiKey::DescribeConfigs => m::DescribeConfigsResponse::decode(body, version).map(drop),
        ApiKey::InitProducerId => m::InitProducerIdResponse::decode(body, version).map(drop),
        ApiKey::FindCoordinator => m::FindCoordinatorResponse::decode(body, version).map(drop),
        ApiKey::JoinGroup => m::JoinGroupResponse::decode(body, version).map(drop),
        ApiKey::SyncGroup => m::SyncGroupResponse::decode(body, version).map(drop),
        ApiKey::Heartbeat => m::HeartbeatResponse::decode(body, version).map(drop),
        ApiKey::LeaveGroup => m::LeaveGroupResponse::decode(body, version).map(drop),
        ApiKey::OffsetCommit => m::OffsetCommitResponse::decode(body, version).map(drop),
        ApiKey::OffsetFetch => m::OffsetFetchResponse::decode(body, version).map(drop),
        ApiKey::ListGroups => m::ListGroupsResponse::decode(body, version).map(drop),
        ApiKey::DescribeGroups => m::DescribeGroupsResponse::decode(body, version).map(drop),
        ApiKey::DeleteGroups => m::DeleteGroupsResponse::decode(body, version).map(drop),
        ApiKey::OffsetDelete => m::OffsetDeleteResponse::decode(body, version).map(drop),
        other => anyhow::bail!("{other:?} is not served"),
    }
}

fn check(exchange: &Exchange) {
    let mut request = &exchange.request[..];
    let key = request.get_i16();
    let version = request.get_i16();
    let correlation_id = request.get_i32();
    let frame = match &exchange.outcome {
        Outcome::Response(frame) => frame.clone(),
        Outcome::NoResponse | Outcome::Refused(_) => return,
        Outcome::EncodeFailed(reason) => {
            panic!("a handled request closed the connection: {reason}")
        }
    };
    let Ok(key) = ApiKey::try_from(key) else {
        panic!("a response to unknown API key {key}");
    };
    let (mut prefix, mut body) = (frame.slice(..4), frame.slice(4..));
    assert_eq!(
        prefix.get_i32() as usize,
        body.len(),
        "{key:?} v{version}: length prefix"
    );
    // An unsupported ApiVersions version is answered in v0 (KIP-511).
    let served = lograil::APIS
        .iter()
        .any(|a| a.key == key && (a.min..=a.max).contains(&version));
    let version = if key == ApiKey::ApiVersions && !served {
        0
    } else {
        version
    };
    let header = ResponseHeader::decode(&mut body, key.response_header_version(version))
        .unwrap_or_else(|e| panic!("{key:?} v{version}: response header: {e}"));
    assert_eq!(header.correlation_id, correlation_id, "{key:?} v{version}");
    if key == ApiKey::Produce && version < 3 {
        // Answered by hand (kafka-protocol has no Produce v0–2): header checked, body not.
        return;
    }
    let mut rest: Bytes = body;
    if let Err(e) = decode_response(key, &mut rest, version) {
        panic!("{key:?} v{version}: response body does not decode: {e}");
    }
    assert!(
        rest.is_empty(),
        "{key:?} v{version}: {} bytes after the response body",
        rest.len()
    );
}

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::Builder::new()
        .prefix("lograil-fuzz-request-")
        .tempdir()
        .expect("a temporary data dir");
    let broker = FuzzBroker::open(dir.path()).expect("the broker opens an empty data dir");
    for exchange in broker.serve(data) {
        check(&exchange);
    }
});
