//! Raw bytes against the broker: garbage, torn frames, huge lengths, unknown APIs and versions,
//! corrupt batches. Each gets an error response or a closed connection; the broker keeps
//! serving and the log is unchanged (checked with `lograil dump-log`).

use std::io::Write;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use test_support::kafka::{api_versions, produce_request};
use test_support::wire::{call, claiming, closed, connect, frame, read_response};
use test_support::TestBroker;

fn produce(addr: &str, version: i16, records: Bytes) -> ProduceResponse {
    send_produce(addr, version, &produce_request("raw", 0, Some(records)))
}

fn send_produce(addr: &str, version: i16, request: &ProduceRequest) -> ProduceResponse {
    let mut s = connect(addr);
    s.write_all(&frame(ApiKey::Produce, version, 7, request))
        .unwrap();
    let mut body = read_response(&mut s)
        .unwrap_or_else(|| panic!("Produce v{version}: connection closed instead of an answer"));
    ResponseHeader::decode(&mut body, ApiKey::Produce.response_header_version(version)).unwrap();
    ProduceResponse::decode(&mut body, version).unwrap()
}

/// The first Produce version served (0–2 are advertised and refused).
fn produce_legacy_min() -> i16 {
    let produce = lograil::APIS
        .iter()
        .find(|a| a.key == ApiKey::Produce)
        .unwrap();
    assert_eq!(
        (produce.min, produce.max),
        (0, 12),
        "the versions this file covers"
    );
    3
}

/// A whole frame whose request body is cut in half (the length prefix matches what is sent).
fn truncated_body<T: Encodable>(key: ApiKey, version: i16, request: &T) -> BytesMut {
    let mut body = BytesMut::new();
    request.encode(&mut body, version).unwrap();
    let mut whole = frame(key, version, 13, request);
    let keep = whole.len() - body.len().div_ceil(2);
    whole.truncate(keep);
    let len = (whole.len() - 4) as i32;
    whole[..4].copy_from_slice(&len.to_be_bytes());
    whole
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
    let broker = TestBroker::start_temp(&["--max-request-bytes", "1048576"]);
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
        .any(|k| k.api_key == ApiKey::Produce as i16 && k.max_version == 12));

    // Produce v0–2 are advertised but refused with UNSUPPORTED_VERSION (the three share a
    // request layout and the start of their response).
    for version in 0..produce_legacy_min() {
        let mut s = connect(&addr);
        let mut legacy = BytesMut::new();
        legacy.put_i32(0);
        legacy.put_i16(ApiKey::Produce as i16);
        legacy.put_i16(version);
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
        let mut body = read_response(&mut s)
            .unwrap_or_else(|| panic!("Produce v{version}: closed instead of answered"));
        assert_eq!(body.get_i32(), 9);
        assert_eq!(body.get_i32(), 1);
        assert_eq!(body.get_i16(), 3);
        body.advance(3);
        assert_eq!(body.get_i32(), 1);
        assert_eq!(body.get_i32(), 0);
        assert_eq!(
            body.get_i16(),
            35,
            "Produce v{version}: UNSUPPORTED_VERSION"
        );
    }

    // Every bad-input check at every served version of Produce (3–12): each gets Kafka's error
    // code for the partition, or (a body that cannot be decoded) a closed connection; nothing
    // reaches the log.
    let evil = log_core::batch::build(&[(Some(b"k"), Some(b"evil"), 2_000)]);
    let mut bad_crc = evil.to_vec();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0x55;
    let mut bad_magic = evil.to_vec();
    bad_magic[16] = 1; // magic: v1 message sets are not RecordBatch v2
    let values: Vec<String> = (0..10)
        .map(|i| format!("a value of some length {i}"))
        .collect();
    let ten = log_core::batch::build(
        &values
            .iter()
            .map(|v| (None, Some(v.as_bytes()), 3_000))
            .collect::<Vec<_>>(),
    );
    let cases: Vec<(&str, ProduceRequest, i16)> = vec![
        (
            "an uncompressed batch saying 5 records over 10",
            produce_request("raw", 0, Some(claiming(&ten, 5))),
            2,
        ),
        (
            "an uncompressed batch saying 11 records over 10",
            produce_request("raw", 0, Some(claiming(&ten, 11))),
            2,
        ),
        (
            "a batch with a bad CRC",
            produce_request("raw", 0, Some(Bytes::from(bad_crc.clone()))),
            2, // CORRUPT_MESSAGE
        ),
        (
            "a batch cut short",
            produce_request("raw", 0, Some(Bytes::from(bad_crc[..40].to_vec()))),
            2,
        ),
        (
            "a batch of magic 1",
            produce_request("raw", 0, Some(Bytes::from(bad_magic))),
            2,
        ),
        (
            "a batch with trailing garbage",
            produce_request(
                "raw",
                0,
                Some(Bytes::from([evil.as_ref(), &[0xff; 7]].concat())),
            ),
            2,
        ),
        ("null records", produce_request("raw", 0, None), 2),
        (
            "empty records",
            produce_request("raw", 0, Some(Bytes::new())),
            2,
        ),
        (
            "a negative partition",
            produce_request("raw", -1, Some(evil.clone())),
            3, // UNKNOWN_TOPIC_OR_PARTITION
        ),
        (
            "a partition past the topic's",
            produce_request("raw", 7, Some(evil.clone())),
            3,
        ),
        (
            "an unknown topic",
            produce_request("never-created", 0, Some(evil.clone())),
            3,
        ),
        (
            "an internal topic",
            produce_request("__consumer_offsets", 0, Some(evil.clone())),
            17, // INVALID_TOPIC_EXCEPTION
        ),
        (
            "acks = 2",
            produce_request("raw", 0, Some(evil.clone())).with_acks(2),
            21, // INVALID_REQUIRED_ACKS
        ),
        (
            "acks = -2",
            produce_request("raw", 0, Some(evil.clone())).with_acks(-2),
            21,
        ),
        (
            "a transactional id the coordinator does not know",
            produce_request("raw", 0, Some(evil.clone()))
                .with_transactional_id(Some(StrBytes::from_static_str("tx").into())),
            48, // INVALID_TXN_STATE: the partition is in no transaction of it
        ),
    ];
    for version in produce_legacy_min()..=12 {
        for (what, request, expected) in &cases {
            let response = send_produce(&addr, version, request);
            let partition = &response.responses[0].partition_responses[0];
            assert_eq!(
                partition.error_code, *expected,
                "Produce v{version}, {what}: {:?}",
                partition.error_message
            );
            assert_eq!(partition.base_offset, -1, "Produce v{version}, {what}");
        }
        // A body cut in half (the frame length says so, so the frame itself is whole): the
        // connection is closed.
        let mut s = connect(&addr);
        s.write_all(&truncated_body(
            ApiKey::Produce,
            version,
            &produce_request("raw", 0, Some(evil.clone())),
        ))
        .unwrap();
        assert!(closed(&mut s), "Produce v{version}: a truncated body");
    }

    // Still serving, and the log is exactly as before.
    assert!(api_versions(&addr).api_keys.len() >= 9);
    let (code, after) = dump_log(&broker);
    assert_eq!(code, 0, "{after}");
    assert_eq!(before, after);
    drop(stalled);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let broker = TestBroker::start_temp(&[]);
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
    let broker = TestBroker::start_temp(&[]);
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
            ApiKey::ConsumerGroupHeartbeat => {
                frame(key, max, 1, &m::ConsumerGroupHeartbeatRequest::default())
            }
            ApiKey::ConsumerGroupDescribe => {
                frame(key, max, 1, &m::ConsumerGroupDescribeRequest::default())
            }
            ApiKey::ShareGroupHeartbeat => {
                frame(key, max, 1, &m::ShareGroupHeartbeatRequest::default())
            }
            ApiKey::ShareGroupDescribe => {
                frame(key, max, 1, &m::ShareGroupDescribeRequest::default())
            }
            ApiKey::StreamsGroupHeartbeat => {
                frame(key, max, 1, &m::StreamsGroupHeartbeatRequest::default())
            }
            ApiKey::StreamsGroupDescribe => {
                frame(key, max, 1, &m::StreamsGroupDescribeRequest::default())
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
            ApiKey::DescribeClientQuotas => {
                frame(key, max, 1, &m::DescribeClientQuotasRequest::default())
            }
            ApiKey::AlterClientQuotas => {
                frame(key, max, 1, &m::AlterClientQuotasRequest::default())
            }
            ApiKey::DescribeUserScramCredentials => frame(
                key,
                max,
                1,
                &m::DescribeUserScramCredentialsRequest::default(),
            ),
            ApiKey::CreateAcls => frame(key, max, 1, &m::CreateAclsRequest::default()),
            ApiKey::DescribeAcls => frame(key, max, 1, &m::DescribeAclsRequest::default()),
            ApiKey::DeleteAcls => frame(key, max, 1, &m::DeleteAclsRequest::default()),
            // On a PLAINTEXT listener: ILLEGAL_SASL_STATE, answered.
            ApiKey::SaslHandshake => frame(key, max, 1, &m::SaslHandshakeRequest::default()),
            ApiKey::SaslAuthenticate => frame(key, max, 1, &m::SaslAuthenticateRequest::default()),
            ApiKey::AlterUserScramCredentials => {
                frame(key, max, 1, &m::AlterUserScramCredentialsRequest::default())
            }
            ApiKey::AddPartitionsToTxn => {
                frame(key, max, 1, &m::AddPartitionsToTxnRequest::default())
            }
            ApiKey::AddOffsetsToTxn => frame(key, max, 1, &m::AddOffsetsToTxnRequest::default()),
            ApiKey::EndTxn => frame(key, max, 1, &m::EndTxnRequest::default()),
            ApiKey::TxnOffsetCommit => frame(key, max, 1, &m::TxnOffsetCommitRequest::default()),
            ApiKey::DescribeTransactions => {
                frame(key, max, 1, &m::DescribeTransactionsRequest::default())
            }
            ApiKey::ListTransactions => frame(key, max, 1, &m::ListTransactionsRequest::default()),
            ApiKey::WriteTxnMarkers => frame(key, max, 1, &m::WriteTxnMarkersRequest::default()),
            other => panic!("{other:?} advertised but not exercised here"),
        };
        s.write_all(&request).unwrap();
        let mut body =
            read_response(&mut s).unwrap_or_else(|| panic!("{key:?} v{max} got no answer"));
        assert_eq!(body.get_i32(), 1);
    }
}

fn fetch_request(topic: &str, partitions: &[(i32, i64)]) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&(partition, offset)| {
                        FetchPartition::default()
                            .with_partition(partition)
                            .with_current_leader_epoch(-1)
                            .with_fetch_offset(offset)
                            .with_log_start_offset(-1)
                            .with_partition_max_bytes(1 << 20)
                    })
                    .collect(),
            )])
}

/// How many whole, valid batches a partition's records hold (none for null or empty).
fn batches(partition: &PartitionData) -> usize {
    match &partition.records {
        Some(records) if !records.is_empty() => record_batch::validate_all(records)
            .expect("whole, valid batches")
            .len(),
        _ => 0,
    }
}

#[test]
fn fetch_bad_input_at_every_served_version() {
    let broker = TestBroker::start_temp(&[]);
    let addr = broker.addr.clone();
    let fetch = lograil::APIS
        .iter()
        .find(|a| a.key == ApiKey::Fetch)
        .unwrap();
    assert_eq!(
        (fetch.min, fetch.max),
        (4, 12),
        "the versions this test covers"
    );

    // One topic of one partition holding two batches (offsets 0 and 1).
    let mut s = connect(&addr);
    let metadata = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("raw")))),
    ]));
    let metadata: MetadataResponse = call(&mut s, ApiKey::Metadata, 9, &metadata);
    assert_eq!(metadata.topics[0].error_code, 0, "auto-created");
    assert_eq!(metadata.topics[0].partitions.len(), 1);
    for value in [&b"first"[..], b"second"] {
        let records = log_core::batch::build(&[(None, Some(value), 1_000)]);
        let response = produce(&addr, 9, records);
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    }

    for version in 4..=12i16 {
        let mut s = connect(&addr);
        let mut fetch = |request: &FetchRequest| -> FetchResponse {
            call(&mut s, ApiKey::Fetch, version, request)
        };
        let only = |response: &FetchResponse| -> PartitionData {
            assert_eq!(response.error_code, 0, "Fetch v{version}: top-level error");
            assert_eq!(response.responses.len(), 1);
            assert_eq!(response.responses[0].partitions.len(), 1);
            response.responses[0].partitions[0].clone()
        };

        // A good fetch first: both batches, so the answers below are not just empty.
        let good = only(&fetch(&fetch_request("raw", &[(0, 0)])));
        assert_eq!(
            (good.error_code, batches(&good)),
            (0, 2),
            "Fetch v{version}"
        );
        assert_eq!(good.high_watermark, 2);

        // Partitions and topics that do not exist: UNKNOWN_TOPIC_OR_PARTITION, no records.
        for (what, request) in [
            ("a negative partition", fetch_request("raw", &[(-1, 0)])),
            (
                "a partition past the topic's",
                fetch_request("raw", &[(7, 0)]),
            ),
            ("partition i32::MIN", fetch_request("raw", &[(i32::MIN, 0)])),
            (
                "an unknown topic",
                fetch_request("never-created", &[(0, 0)]),
            ),
            ("an empty topic name", fetch_request("", &[(0, 0)])),
        ] {
            let p = only(&fetch(&request));
            assert_eq!(p.error_code, 3, "Fetch v{version}, {what}");
            assert_eq!(batches(&p), 0, "Fetch v{version}, {what}");
            assert_eq!(p.high_watermark, -1, "Fetch v{version}, {what}");
        }
        // Offsets outside [log start, log end]: OFFSET_OUT_OF_RANGE, no records.
        for (what, offset) in [
            ("offset -1", -1),
            ("offset i64::MIN", i64::MIN),
            ("an offset past the log end", 3),
            ("offset i64::MAX", i64::MAX),
        ] {
            let p = only(&fetch(&fetch_request("raw", &[(0, offset)])));
            assert_eq!(p.error_code, 1, "Fetch v{version}, {what}");
            assert_eq!(batches(&p), 0, "Fetch v{version}, {what}");
            assert_eq!(p.high_watermark, 2, "Fetch v{version}, {what}");
        }
        // At the log end exactly: no error, nothing to return.
        let p = only(&fetch(&fetch_request("raw", &[(0, 2)])));
        assert_eq!((p.error_code, batches(&p)), (0, 0), "Fetch v{version}");

        // One bad partition beside a good one: each answered on its own.
        let mixed = fetch(&fetch_request("raw", &[(5, 0), (0, 1), (0, -7)]));
        let codes: Vec<(i16, usize)> = mixed.responses[0]
            .partitions
            .iter()
            .map(|p| (p.error_code, batches(p)))
            .collect();
        assert_eq!(codes, [(3, 0), (0, 1), (1, 0)], "Fetch v{version}");

        // Absurd sizes: capped or ignored, never an error or a closed connection. The first
        // batch comes whole whatever max_bytes says (KIP-74). A partition limit of 0 or less
        // gets at most that one batch: lograil returns none, Kafka's minOneMessage would
        // return the first batch for 0 (and refuse a negative limit internally).
        let mut huge = fetch_request("raw", &[(0, 0)]);
        huge.max_bytes = i32::MAX;
        huge.topics[0].partitions[0].partition_max_bytes = i32::MAX;
        let p = only(&fetch(&huge));
        assert_eq!(
            (p.error_code, batches(&p)),
            (0, 2),
            "Fetch v{version}, 2^31-1"
        );
        let mut negative = fetch_request("raw", &[(0, 0)]);
        negative.max_bytes = -1;
        let p = only(&fetch(&negative));
        assert_eq!(
            (p.error_code, batches(&p)),
            (0, 1),
            "Fetch v{version}, max_bytes -1"
        );
        for partition_max in [0, -1, i32::MIN] {
            let mut none = fetch_request("raw", &[(0, 0)]);
            none.topics[0].partitions[0].partition_max_bytes = partition_max;
            let p = only(&fetch(&none));
            assert_eq!(
                p.error_code, 0,
                "Fetch v{version}, partition_max_bytes {partition_max}"
            );
            assert!(
                batches(&p) <= 1,
                "Fetch v{version}, partition_max_bytes {partition_max}: {} batches",
                batches(&p)
            );
        }
        // min_bytes beyond anything there is, with a negative wait: answered at once.
        let mut impatient = fetch_request("raw", &[(0, 0)]);
        impatient.min_bytes = i32::MAX;
        impatient.max_wait_ms = -1;
        let p = only(&fetch(&impatient));
        assert_eq!((p.error_code, batches(&p)), (0, 2), "Fetch v{version}");

        // A body cut in half: the connection is closed.
        let mut s = connect(&addr);
        s.write_all(&truncated_body(
            ApiKey::Fetch,
            version,
            &fetch_request("raw", &[(0, 0), (0, 1)]),
        ))
        .unwrap();
        assert!(closed(&mut s), "Fetch v{version}: a truncated body");
        // A partition count the frame cannot hold: closed, not allocated.
        let mut s = connect(&addr);
        s.write_all(&huge_partition_count(version)).unwrap();
        assert!(
            closed(&mut s),
            "Fetch v{version}: 2^31-1 partitions claimed"
        );
    }

    // Still serving, and the log untouched.
    assert!(api_versions(&addr).api_keys.len() >= 9);
    let (code, after) = dump_log(&broker);
    assert_eq!(code, 0, "{after}");
    assert_eq!(after.matches("baseOffset").count(), 2, "{after}");
}

/// A Fetch frame naming one topic whose partition array claims 2^31-1 entries (none follow).
fn huge_partition_count(version: i16) -> BytesMut {
    let request = fetch_request("raw", &[]);
    let mut whole = frame(ApiKey::Fetch, version, 14, &request);
    // The empty partition array is the last thing of the topic: find it from the end.
    let mut tail = BytesMut::new();
    if version >= 12 {
        // compact array length 0+1, the topic's tagged fields, then forgotten topics
        // (compact, empty), rack id (compact string, empty) and the request's tagged fields.
        tail.put_slice(&[1, 0, 1, 1, 0]);
    } else if version >= 11 {
        tail.put_i32(0); // partitions
        tail.put_i32(0); // forgotten topics
        tail.put_i16(0); // rack id ""
    } else if version >= 7 {
        tail.put_i32(0);
        tail.put_i32(0);
    } else {
        tail.put_i32(0);
    }
    assert!(whole.ends_with(&tail), "Fetch v{version} layout");
    let at = whole.len() - tail.len();
    whole.truncate(at);
    if version >= 12 {
        // unsigned varint of 2^31 (count + 1)
        whole.put_slice(&[0x80, 0x80, 0x80, 0x80, 0x08]);
        whole.put_slice(&tail[1..]);
    } else {
        whole.put_i32(i32::MAX);
        whole.put_slice(&tail[4..]);
    }
    let len = (whole.len() - 4) as i32;
    whole[..4].copy_from_slice(&len.to_be_bytes());
    whole
}
