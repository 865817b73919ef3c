//! Writes the seed corpus of every fuzz target (`fuzz/corpus/<target>/`) from a capture of real
//! clients (`capture/capture.py`: one file of client->broker bytes per connection, and the
//! broker's data dir), plus frames for every API and version the broker serves and batches from
//! log-core's own builder, so that every API, version and codec has a seed.
//!
//! Usage: `cargo run --manifest-path fuzz/Cargo.toml -p lograil-fuzz-seeds -- CAPTURE_DIR CORPUS_DIR`
//! Each target's folder is emptied first, except for `regression-*` files: inputs of crashes
//! found and fixed, kept so that every run replays them.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{self as m, ApiKey, GroupId, RequestHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use log_core::batch::{self, Compression};

/// Segment seeds are cut to whole batches within this size and below offset 256 (the
/// `segment_chain` target's end offset is one byte).
const SEGMENT_SEED_BYTES: usize = 8 << 10;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, capture, corpus] = &args[..] else {
        bail!("usage: lograil-fuzz-seeds CAPTURE_DIR CORPUS_DIR");
    };
    let (capture, corpus) = (Path::new(capture), Path::new(corpus));
    let sessions = read_sessions(&capture.join("sessions"))?;
    let mut out = Corpus::new(corpus)?;

    // request: each captured connection, and synthetic streams (every version of each API;
    // one client's life through every API at the newest versions).
    for (name, bytes) in &sessions {
        out.write("request", name, bytes)?;
    }
    for api in lograil::APIS.iter() {
        let stream: Vec<u8> = (api.min..=api.max)
            .flat_map(|v| prefixed(&synthetic(api.key, v)))
            .collect();
        out.write("request", &format!("synthetic-{:?}", api.key), &stream)?;
    }
    let life: Vec<u8> = LIFE
        .iter()
        .flat_map(|key| {
            let max = lograil::APIS
                .iter()
                .find(|a| a.key == *key)
                .map_or(0, |a| a.max);
            prefixed(&synthetic(*key, max))
        })
        .collect();
    out.write("request", "synthetic-life", &life)?;

    // request_body: one frame per API and version, a captured one where there is one.
    let captured: Vec<Bytes> = sessions.iter().flat_map(|(_, s)| frames(s)).collect();
    for api in lograil::APIS.iter() {
        for version in api.min..=api.max {
            let real = captured
                .iter()
                .filter(|f| key_version(f) == (api.key as i16, version))
                .max_by_key(|f| f.len());
            let frame = real.cloned().unwrap_or_else(|| synthetic(api.key, version));
            out.write("request_body", &format!("{:?}-v{version}", api.key), &frame)?;
        }
    }

    // frame: `[max selector][read pattern seed]` then a few captured connections.
    for (i, (name, bytes)) in sessions.iter().enumerate().filter(|(i, _)| i % 6 == 2) {
        let selector = if i % 4 == 0 { 20 } else { 255 };
        let mut input = vec![selector, i as u8];
        input.extend_from_slice(bytes);
        out.write("frame", name, &input)?;
    }

    // record_batch: the records of every captured Produce, and log-core's own batches.
    for (name, bytes) in &sessions {
        for (i, records) in produced_records(bytes)?.iter().enumerate() {
            out.write(
                "record_batch",
                &format!("{}-{i}", name.trim_end_matches(".bin")),
                records,
            )?;
        }
    }
    let built = built_batches();
    for (codec, bytes) in &built {
        out.write("record_batch", &format!("built-{codec:?}"), bytes)?;
    }
    let two: Vec<u8> = built.iter().take(2).flat_map(|(_, b)| b.to_vec()).collect();
    out.write("record_batch", "built-two-batches", &two)?;
    let idempotent =
        batch::build_for_producer(&[(None, Some(b"a"), 1), (None, Some(b"b"), 2)], 7, 0, 0);
    out.write("record_batch", "built-idempotent", &idempotent)?;

    // segment_chain: `[end offset - 1]` then the start of each segment the broker wrote, and
    // one of log-core's batches with every codec.
    let mut segments = list_segments(&capture.join("data"))?;
    segments.sort();
    for path in segments {
        let data = fs::read(&path).with_context(|| path.display().to_string())?;
        if let Some(seed) = segment_seed(&data) {
            let topic = path
                .parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.write("segment_chain", &topic, &seed)?;
        }
    }
    let mut chain = Vec::new();
    let mut next = 0i64;
    for (_, bytes) in &built {
        let mut b = bytes.to_vec();
        b[..8].copy_from_slice(&next.to_be_bytes());
        next = record_batch::validate(&b)?.next_offset();
        chain.extend_from_slice(&b);
    }
    if let Some(seed) = segment_seed(&chain) {
        out.write("segment_chain", "built-every-codec", &seed)?;
    }
    out.report();
    Ok(())
}

/// The APIs a client's life goes through, in order.
const LIFE: &[ApiKey] = &[
    ApiKey::ApiVersions,
    ApiKey::Metadata,
    ApiKey::CreateTopics,
    ApiKey::DescribeConfigs,
    ApiKey::InitProducerId,
    ApiKey::Produce,
    ApiKey::ListOffsets,
    ApiKey::Fetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::ListGroups,
    ApiKey::DescribeGroups,
    ApiKey::LeaveGroup,
    ApiKey::OffsetDelete,
    ApiKey::DeleteGroups,
    ApiKey::DeleteTopics,
];

/// Writes seed files, one folder per target, emptied on first use.
struct Corpus {
    root: PathBuf,
    written: Vec<(String, usize, usize)>,
}

impl Corpus {
    fn new(root: &Path) -> anyhow::Result<Corpus> {
        Ok(Corpus {
            root: root.to_path_buf(),
            written: Vec::new(),
        })
    }

    fn write(&mut self, target: &str, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        let dir = self.root.join(target);
        if !self.written.iter().any(|(t, _, _)| t == target) {
            fs::create_dir_all(&dir)?;
            for entry in fs::read_dir(&dir)? {
                let path = entry?.path();
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
                if !name.unwrap_or_default().starts_with("regression-") {
                    fs::remove_file(&path)?;
                }
            }
            self.written.push((target.to_string(), 0, 0));
        }
        let file = name.trim_end_matches(".bin").to_string() + ".bin";
        fs::write(dir.join(&file), bytes).with_context(|| file.clone())?;
        if let Some(entry) = self.written.iter_mut().find(|(t, _, _)| t == target) {
            entry.1 += 1;
            entry.2 += bytes.len();
        }
        Ok(())
    }

    fn report(&self) {
        for (target, files, bytes) in &self.written {
            println!("{target}: {files} files, {bytes} bytes");
        }
    }
}

fn read_sessions(dir: &Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut sessions = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let path = entry?.path();
        let bytes = fs::read(&path)?;
        if !bytes.is_empty() {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            sessions.push((name.unwrap_or_default(), bytes));
        }
    }
    sessions.sort();
    Ok(sessions)
}

/// The whole frames of a stream, without their length prefixes.
fn frames(stream: &[u8]) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut rest = stream;
    while let Some((prefix, body)) = rest.split_first_chunk::<4>() {
        let len = u32::from_be_bytes(*prefix) as usize;
        let Some(frame) = body.get(..len) else { break };
        out.push(Bytes::copy_from_slice(frame));
        rest = &body[len..];
    }
    out
}

fn prefixed(frame: &[u8]) -> Vec<u8> {
    let mut out = (frame.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(frame);
    out
}

fn key_version(frame: &[u8]) -> (i16, i16) {
    (
        i16::from_be_bytes([frame[0], frame[1]]),
        i16::from_be_bytes([frame[2], frame[3]]),
    )
}

/// The record sets of every Produce (v3 and later) in a stream.
fn produced_records(stream: &[u8]) -> anyhow::Result<Vec<Bytes>> {
    let mut out = Vec::new();
    for frame in frames(stream) {
        let (key, version) = key_version(&frame);
        if key != ApiKey::Produce as i16 || version < 3 {
            continue;
        }
        let mut body = frame.clone();
        RequestHeader::decode(&mut body, ApiKey::Produce.request_header_version(version))?;
        let request = m::ProduceRequest::decode(&mut body, version)?;
        for topic in request.topic_data {
            out.extend(topic.partition_data.into_iter().filter_map(|p| p.records));
        }
    }
    Ok(out)
}

fn built_batches() -> Vec<(Compression, Bytes)> {
    let values: Vec<String> = (0..20)
        .map(|i| format!("value {i} {}", "y".repeat(i)))
        .collect();
    let records: Vec<batch::NewRecord> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let key: Option<&[u8]> = (i % 3 != 0).then_some(b"key");
            (key, Some(v.as_bytes()), 1_700_000_000_000 + i as i64)
        })
        .collect();
    [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
    .into_iter()
    .map(|codec| (codec, batch::build_with(&records, codec)))
    .collect()
}

fn list_segments(data: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(data).with_context(|| data.display().to_string())? {
        let dir = entry?.path();
        let first = dir.join("00000000000000000000.log");
        if dir.is_dir() && first.is_file() {
            out.push(first);
        }
    }
    Ok(out)
}

/// `[end offset - 1]` and the whole batches at the start of `data` that fit the seed's
/// bounds; `None` if not even one does.
fn segment_seed(data: &[u8]) -> Option<Vec<u8>> {
    let mut at = 0;
    let mut end = 0;
    while let Ok(header) = record_batch::validate(&data[at..]) {
        let size = header.size as usize;
        if at + size > SEGMENT_SEED_BYTES || header.next_offset() > 256 {
            break;
        }
        at += size;
        end = header.next_offset();
    }
    (at > 0).then(|| {
        let mut seed = vec![(end - 1) as u8];
        seed.extend_from_slice(&data[..at]);
        seed
    })
}

fn text(s: &'static str) -> StrBytes {
    StrBytes::from_static_str(s)
}

fn topic(s: &'static str) -> TopicName {
    TopicName(text(s))
}

fn group(s: &'static str) -> GroupId {
    GroupId(text(s))
}

/// A frame (no length prefix) of `key` at `version` with a plausible body: topic `seeds`,
/// group `seeds-group`.
fn synthetic(key: ApiKey, version: i16) -> Bytes {
    if key == ApiKey::Produce && version < 3 {
        return legacy_produce(version);
    }
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(i32::from(version) + 1)
        .with_client_id(Some(text("seeds")));
    let mut buf = BytesMut::new();
    let encoded = header
        .encode(&mut buf, key.request_header_version(version))
        .and_then(|()| encode_body(key, version, &mut buf));
    if let Err(e) = encoded {
        panic!("{key:?} v{version}: {e}");
    }
    buf.freeze()
}

fn encode_body(key: ApiKey, version: i16, buf: &mut BytesMut) -> anyhow::Result<()> {
    let records = batch::build(&[(Some(b"k"), Some(b"seed value"), 1_700_000_000_000)]);
    match key {
        ApiKey::Produce => m::ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![m::produce_request::TopicProduceData::default()
                .with_name(topic("seeds"))
                .with_partition_data(vec![
                    m::produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records)),
                ])])
            .encode(buf, version),
        ApiKey::Fetch => m::FetchRequest::default()
            .with_replica_id((-1).into())
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![m::fetch_request::FetchTopic::default()
                .with_topic(topic("seeds"))
                .with_partitions(vec![m::fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20)])])
            .encode(buf, version),
        ApiKey::ListOffsets => m::ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![m::list_offsets_request::ListOffsetsTopic::default()
                .with_name(topic("seeds"))
                .with_partitions(vec![
                    m::list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ])])
            .encode(buf, version),
        ApiKey::Metadata => m::MetadataRequest::default()
            .with_topics(Some(vec![
                m::metadata_request::MetadataRequestTopic::default()
                    .with_name(Some(topic("seeds"))),
            ]))
            .with_allow_auto_topic_creation(true)
            .encode(buf, version),
        ApiKey::ApiVersions => {
            let request = if version >= 3 {
                m::ApiVersionsRequest::default()
                    .with_client_software_name(text("seeds"))
                    .with_client_software_version(text("1"))
            } else {
                m::ApiVersionsRequest::default()
            };
            request.encode(buf, version)
        }
        ApiKey::CreateTopics => m::CreateTopicsRequest::default()
            .with_timeout_ms(1000)
            .with_topics(vec![m::create_topics_request::CreatableTopic::default()
                .with_name(topic("seeds-created"))
                .with_num_partitions(2)
                .with_replication_factor(1)
                .with_configs(vec![
                    m::create_topics_request::CreatableTopicConfig::default()
                        .with_name(text("retention.ms"))
                        .with_value(Some(text("3600000"))),
                ])])
            .encode(buf, version),
        ApiKey::DeleteTopics => m::DeleteTopicsRequest::default()
            .with_timeout_ms(1000)
            .with_topic_names(vec![topic("seeds-created")])
            .encode(buf, version),
        ApiKey::DescribeConfigs => m::DescribeConfigsRequest::default()
            .with_resources(vec![
                m::describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(text("seeds"))
                    .with_configuration_keys(None),
            ])
            .encode(buf, version),
        ApiKey::InitProducerId => m::InitProducerIdRequest::default()
            .with_transaction_timeout_ms(60_000)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1)
            .encode(buf, version),
        ApiKey::FindCoordinator => {
            let request = if version >= 4 {
                m::FindCoordinatorRequest::default()
                    .with_coordinator_keys(vec![text("seeds-group")])
            } else {
                m::FindCoordinatorRequest::default().with_key(text("seeds-group"))
            };
            request.encode(buf, version)
        }
        ApiKey::JoinGroup => m::JoinGroupRequest::default()
            .with_group_id(group("seeds-group"))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(if version >= 1 { 10_000 } else { -1 })
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![
                m::join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(text("range"))
                    .with_metadata(Bytes::from_static(
                        b"\0\0\0\0\0\x01\0\x05seeds\xff\xff\xff\xff",
                    )),
            ])
            .encode(buf, version),
        ApiKey::SyncGroup => m::SyncGroupRequest::default()
            .with_group_id(group("seeds-group"))
            .with_generation_id(1)
            .with_member_id(text("seeds-member"))
            .encode(buf, version),
        ApiKey::Heartbeat => m::HeartbeatRequest::default()
            .with_group_id(group("seeds-group"))
            .with_generation_id(1)
            .with_member_id(text("seeds-member"))
            .encode(buf, version),
        ApiKey::LeaveGroup => {
            let request = m::LeaveGroupRequest::default().with_group_id(group("seeds-group"));
            let request = if version >= 3 {
                request.with_members(vec![m::leave_group_request::MemberIdentity::default()
                    .with_member_id(text("seeds-member"))])
            } else {
                request.with_member_id(text("seeds-member"))
            };
            request.encode(buf, version)
        }
        ApiKey::OffsetCommit => m::OffsetCommitRequest::default()
            .with_group_id(group("seeds-group"))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![
                m::offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(topic("seeds"))
                    .with_partitions(vec![
                        m::offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(1)
                            .with_committed_metadata(Some(text("seed"))),
                    ]),
            ])
            .encode(buf, version),
        ApiKey::OffsetFetch => m::OffsetFetchRequest::default()
            .with_group_id(group("seeds-group"))
            .with_topics(Some(vec![
                m::offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(topic("seeds"))
                    .with_partition_indexes(vec![0]),
            ]))
            .encode(buf, version),
        ApiKey::ListGroups => m::ListGroupsRequest::default().encode(buf, version),
        ApiKey::DescribeGroups => m::DescribeGroupsRequest::default()
            .with_groups(vec![group("seeds-group")])
            .encode(buf, version),
        ApiKey::DeleteGroups => m::DeleteGroupsRequest::default()
            .with_groups_names(vec![group("seeds-group")])
            .encode(buf, version),
        ApiKey::OffsetDelete => m::OffsetDeleteRequest::default()
            .with_group_id(group("seeds-group"))
            .with_topics(vec![
                m::offset_delete_request::OffsetDeleteRequestTopic::default()
                    .with_name(topic("seeds"))
                    .with_partitions(vec![
                        m::offset_delete_request::OffsetDeleteRequestPartition::default()
                            .with_partition_index(0),
                    ]),
            ])
            .encode(buf, version),
        other => bail!("{other:?} is not served"),
    }
}

/// Produce v0–2 (kafka-protocol has no encoder for them): header v1, acks, timeout, one topic
/// of one partition holding a few bytes (the broker skips the message set unread).
fn legacy_produce(version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(ApiKey::Produce as i16);
    buf.put_i16(version);
    buf.put_i32(1);
    buf.put_i16(5);
    buf.put_slice(b"seeds");
    buf.put_i16(-1); // acks
    buf.put_i32(1000); // timeout
    buf.put_i32(1); // topics
    buf.put_i16(5);
    buf.put_slice(b"seeds");
    buf.put_i32(1); // partitions
    buf.put_i32(0);
    buf.put_i32(4);
    buf.put_slice(b"\0\0\0\0");
    buf.freeze()
}
