//! Raw bytes against the broker: garbage, torn frames, huge lengths, unknown APIs and versions,
//! corrupt batches. Each gets an error response or a closed connection; the broker keeps
//! serving and the log is unchanged (checked with `lograil dump-log`).

use std::io::Write;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
    ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use crate::broker::TestBroker;
use crate::wire::{closed, connect, frame, read_response};

fn api_versions(addr: &str) -> ApiVersionsResponse {
    let mut s = connect(addr);
    s.write_all(&frame(
        ApiKey::ApiVersions,
        3,
        1,
        &ApiVersionsRequest::default(),
    ))
    .unwrap();
    let mut body = read_response(&mut s).expect("ApiVersions answered");
    let header = ResponseHeader::decode(&mut body, 0).unwrap();
    assert_eq!(header.correlation_id, 1);
    ApiVersionsResponse::decode(&mut body, 3).unwrap()
}

fn produce(addr: &str, version: i16, records: Bytes) -> ProduceResponse {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("raw")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let mut s = connect(addr);
    s.write_all(&frame(ApiKey::Produce, version, 7, &request))
        .unwrap();
    let mut body = read_response(&mut s).expect("Produce answered");
    ResponseHeader::decode(&mut body, ApiKey::Produce.response_header_version(version)).unwrap();
    ProduceResponse::decode(&mut body, version).unwrap()
}

fn dump_log(broker: &TestBroker) -> (i32, String) {
    let segment = broker.data_dir.join("raw-0/00000000000000000000.log");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lograil"))
        .arg("dump-log")
        .arg(segment)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn bad_input_never_takes_the_broker_down_or_touches_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(
        &tmp.path().join("data"),
        &["--max-request-bytes", "1048576"],
    );
    let addr = broker.addr.clone();

    // A good batch first, so there is a log to keep intact.
    let mut s = connect(&addr);
    let metadata = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("raw")))),
    ]));
    s.write_all(&frame(ApiKey::Metadata, 9, 2, &metadata))
        .unwrap();
    let mut body = read_response(&mut s).unwrap();
    ResponseHeader::decode(&mut body, ApiKey::Metadata.response_header_version(9)).unwrap();
    let metadata = MetadataResponse::decode(&mut body, 9).unwrap();
    assert_eq!(metadata.topics[0].error_code, 0, "auto-created");
    let good = log_core::batch::build(&[(Some(b"k"), Some(b"good"), 1_000)]);
    let response = produce(&addr, 7, good);
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    let (code, before) = dump_log(&broker);
    assert_eq!(code, 0, "{before}");

    // Random bytes.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let garbage: Vec<u8> = (0..4096)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect();
    let mut s = connect(&addr);
    let _ = s.write_all(&garbage);
    assert!(closed(&mut s), "garbage closes the connection");

    // A huge length prefix: refused before anything is allocated.
    let mut s = connect(&addr);
    s.write_all(&i32::MAX.to_be_bytes()).unwrap();
    assert!(closed(&mut s));
    // Just over --max-request-bytes.
    let mut s = connect(&addr);
    s.write_all(&(1_048_577i32).to_be_bytes()).unwrap();
    assert!(closed(&mut s));
    // A negative length.
    let mut s = connect(&addr);
    s.write_all(&(-1i32).to_be_bytes()).unwrap();
    assert!(closed(&mut s));

    // A truncated frame: one client goes away mid-frame, another stalls there for the rest of
    // the test while everyone else is served.
    let mut s = connect(&addr);
    s.write_all(&100i32.to_be_bytes()).unwrap();
    s.write_all(&[0u8; 10]).unwrap();
    drop(s);
    let mut stalled = connect(&addr);
    stalled.write_all(&100i32.to_be_bytes()).unwrap();
    stalled.write_all(&[0u8; 10]).unwrap();

    // An unknown API key, and a known API at a version not served.
    let mut s = connect(&addr);
    let mut unknown = frame(ApiKey::ApiVersions, 0, 3, &ApiVersionsRequest::default());
    unknown[4..6].copy_from_slice(&9999i16.to_be_bytes());
    s.write_all(&unknown).unwrap();
    assert!(closed(&mut s));
    let mut s = connect(&addr);
    s.write_all(&frame(ApiKey::Metadata, 9, 4, &MetadataRequest::default()))
        .unwrap();
    assert!(read_response(&mut s).is_some());
    let mut too_new = frame(ApiKey::Metadata, 9, 5, &MetadataRequest::default());
    too_new[6..8].copy_from_slice(&13i16.to_be_bytes());
    s.write_all(&too_new).unwrap();
    assert!(closed(&mut s));
    // A malformed body of a valid API and version.
    let mut s = connect(&addr);
    // Metadata v1 ends with its topic array's length (-1: all topics); claim 2^31-1 topics
    // that never come.
    let mut bad_body = frame(ApiKey::Metadata, 1, 6, &MetadataRequest::default());
    let n = bad_body.len();
    bad_body[n - 4..].copy_from_slice(&i32::MAX.to_be_bytes());
    s.write_all(&bad_body).unwrap();
    assert!(closed(&mut s));

    // ApiVersions at a version we don't serve: a v0 body with UNSUPPORTED_VERSION and our ranges.
    let mut s = connect(&addr);
    let mut future = frame(ApiKey::ApiVersions, 0, 8, &ApiVersionsRequest::default());
    future[6..8].copy_from_slice(&99i16.to_be_bytes());
    s.write_all(&future).unwrap();
    let mut body = read_response(&mut s).unwrap();
    assert_eq!(body.get_i32(), 8);
    let v0 = ApiVersionsResponse::decode(&mut body, 0).unwrap();
    assert_eq!(v0.error_code, 35);
    assert!(v0
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::Produce as i16 && k.max_version == 9));

    // Produce v2 is advertised but refused with UNSUPPORTED_VERSION.
    let mut s = connect(&addr);
    let mut legacy = BytesMut::new();
    legacy.put_i32(0);
    legacy.put_i16(ApiKey::Produce as i16);
    legacy.put_i16(2);
    legacy.put_i32(9);
    legacy.put_i16(-1); // client id
    legacy.put_i16(1); // acks
    legacy.put_i32(1000);
    legacy.put_i32(1);
    legacy.put_i16(3);
    legacy.put_slice(b"raw");
    legacy.put_i32(1);
    legacy.put_i32(0);
    legacy.put_i32(4);
    legacy.put_slice(b"junk");
    let len = (legacy.len() - 4) as i32;
    legacy[..4].copy_from_slice(&len.to_be_bytes());
    s.write_all(&legacy).unwrap();
    let mut body = read_response(&mut s).unwrap();
    assert_eq!(body.get_i32(), 9);
    assert_eq!(body.get_i32(), 1);
    assert_eq!(body.get_i16(), 3);
    body.advance(3);
    assert_eq!(body.get_i32(), 1);
    assert_eq!(body.get_i32(), 0);
    assert_eq!(body.get_i16(), 35, "UNSUPPORTED_VERSION");

    // A batch with a bad CRC, and one that is cut short: CORRUPT_MESSAGE, nothing stored.
    let mut bad = log_core::batch::build(&[(Some(b"k"), Some(b"evil"), 2_000)]).to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0x55;
    let response = produce(&addr, 7, Bytes::from(bad.clone()));
    assert_eq!(response.responses[0].partition_responses[0].error_code, 2);
    let response = produce(&addr, 9, Bytes::from(bad[..40].to_vec()));
    assert_eq!(response.responses[0].partition_responses[0].error_code, 2);

    // Still serving, and the log is exactly as before.
    assert!(api_versions(&addr).api_keys.len() >= 9);
    let (code, after) = dump_log(&broker);
    assert_eq!(code, 0, "{after}");
    assert_eq!(before, after);
    drop(stalled);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(&tmp.path().join("data"), &[]);
    let mut s = connect(&broker.addr);
    let mut all = BytesMut::new();
    for id in 0..20 {
        if id % 2 == 0 {
            all.extend_from_slice(&frame(
                ApiKey::ApiVersions,
                3,
                id,
                &ApiVersionsRequest::default(),
            ));
        } else {
            all.extend_from_slice(&frame(
                ApiKey::Metadata,
                12,
                id,
                &MetadataRequest::default(),
            ));
        }
    }
    s.write_all(&all).unwrap();
    for id in 0..20 {
        let mut body = read_response(&mut s).unwrap();
        assert_eq!(body.get_i32(), id, "responses in request order");
    }
}

#[test]
fn api_versions_advertises_exactly_what_is_routed() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(&tmp.path().join("data"), &[]);
    let advertised: Vec<(i16, i16, i16)> = api_versions(&broker.addr)
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    let table: Vec<(i16, i16, i16)> = lograil::APIS
        .iter()
        .map(|a| (a.key as i16, a.min, a.max))
        .collect();
    assert_eq!(advertised, table);
    // And each advertised API at its highest version gets an answer, not a closed connection.
    for (key, _, max) in table {
        let key = ApiKey::try_from(key).unwrap();
        if key == ApiKey::Produce || key == ApiKey::Fetch {
            continue; // exercised with real clients
        }
        let mut s = connect(&broker.addr);
        use kafka_protocol::messages as m;
        let request = match key {
            ApiKey::ApiVersions => frame(key, max, 1, &ApiVersionsRequest::default()),
            ApiKey::Metadata => frame(key, max, 1, &MetadataRequest::default()),
            ApiKey::ListOffsets => frame(
                key,
                max,
                1,
                &kafka_protocol::messages::ListOffsetsRequest::default(),
            ),
            ApiKey::CreateTopics => frame(
                key,
                max,
                1,
                &kafka_protocol::messages::CreateTopicsRequest::default(),
            ),
            ApiKey::DeleteTopics => frame(
                key,
                max,
                1,
                &kafka_protocol::messages::DeleteTopicsRequest::default(),
            ),
            ApiKey::DescribeConfigs => frame(
                key,
                max,
                1,
                &kafka_protocol::messages::DescribeConfigsRequest::default(),
            ),
            ApiKey::InitProducerId => frame(
                key,
                max,
                1,
                &kafka_protocol::messages::InitProducerIdRequest::default()
                    .with_producer_id((-1).into())
                    .with_producer_epoch(-1),
            ),
            ApiKey::FindCoordinator => frame(key, max, 1, &m::FindCoordinatorRequest::default()),
            ApiKey::JoinGroup => frame(key, max, 1, &m::JoinGroupRequest::default()),
            ApiKey::SyncGroup => frame(key, max, 1, &m::SyncGroupRequest::default()),
            ApiKey::Heartbeat => frame(key, max, 1, &m::HeartbeatRequest::default()),
            ApiKey::LeaveGroup => frame(key, max, 1, &m::LeaveGroupRequest::default()),
            ApiKey::OffsetCommit => frame(key, max, 1, &m::OffsetCommitRequest::default()),
            ApiKey::OffsetFetch => frame(key, max, 1, &m::OffsetFetchRequest::default()),
            ApiKey::ListGroups => frame(key, max, 1, &m::ListGroupsRequest::default()),
            ApiKey::DescribeGroups => frame(key, max, 1, &m::DescribeGroupsRequest::default()),
            ApiKey::DeleteGroups => frame(key, max, 1, &m::DeleteGroupsRequest::default()),
            ApiKey::OffsetDelete => frame(key, max, 1, &m::OffsetDeleteRequest::default()),
            ApiKey::IncrementalAlterConfigs => {
                frame(key, max, 1, &m::IncrementalAlterConfigsRequest::default())
            }
            ApiKey::ShareGroupHeartbeat => {
                frame(key, max, 1, &m::ShareGroupHeartbeatRequest::default())
            }
            ApiKey::ShareGroupDescribe => {
                frame(key, max, 1, &m::ShareGroupDescribeRequest::default())
            }
            ApiKey::ShareFetch => frame(key, max, 1, &m::ShareFetchRequest::default()),
            ApiKey::ShareAcknowledge => frame(key, max, 1, &m::ShareAcknowledgeRequest::default()),
            ApiKey::DescribeShareGroupOffsets => {
                frame(key, max, 1, &m::DescribeShareGroupOffsetsRequest::default())
            }
            ApiKey::AlterShareGroupOffsets => {
                frame(key, max, 1, &m::AlterShareGroupOffsetsRequest::default())
            }
            ApiKey::DeleteShareGroupOffsets => {
                frame(key, max, 1, &m::DeleteShareGroupOffsetsRequest::default())
            }
            ApiKey::AlterConfigs => frame(key, max, 1, &m::AlterConfigsRequest::default()),
            ApiKey::CreatePartitions => frame(key, max, 1, &m::CreatePartitionsRequest::default()),
            ApiKey::DeleteRecords => frame(key, max, 1, &m::DeleteRecordsRequest::default()),
            ApiKey::DescribeCluster => frame(key, max, 1, &m::DescribeClusterRequest::default()),
            ApiKey::DescribeLogDirs => frame(key, max, 1, &m::DescribeLogDirsRequest::default()),
            ApiKey::DescribeProducers => {
                frame(key, max, 1, &m::DescribeProducersRequest::default())
            }
            other => panic!("{other:?} advertised but not exercised here"),
        };
        s.write_all(&request).unwrap();
        let mut body =
            read_response(&mut s).unwrap_or_else(|| panic!("{key:?} v{max} got no answer"));
        assert_eq!(body.get_i32(), 1);
    }
}
