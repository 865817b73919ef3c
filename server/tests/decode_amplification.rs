//! How much memory decoding a request takes per byte of it, at worst, for the requests the
//! broker decodes: arrays of the smallest elements the wire allows, in flexible versions with
//! an unknown tagged field on each element. Measured with a counting allocator: the peak of
//! live heap bytes during one decode, over the request's size.
//!
//! Unpatched, kafka-protocol kept unknown tagged fields in a `BTreeMap` per struct, whose first
//! entry allocates a whole B-tree node: 5-byte elements decoded to ~100 times their size. The
//! vendored copy skips them (vendor/kafka-protocol/LOGRAIL-PATCH.md); what remains is the size
//! of the structs themselves, worst for arrays of empty strings (32 bytes each).
//!
//! The size caps (`--max-non-produce-request-bytes`, 1 MiB by default) times these factors
//! bound what one request can take while decoding. Produce requests may be far larger; they
//! are counted before they are decoded (`handlers::bounds::scan_produce`). This test keeps the
//! factors from growing unnoticed (a kafka-protocol upgrade, a new API).
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded as is to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// About 1 MiB of encoded request.
const TARGET: usize = 1 << 20;

fn tagged() -> BTreeMap<i32, Bytes> {
    BTreeMap::from([(100, Bytes::new())])
}

/// Peak heap bytes live while decoding `encoded` as `T` at `version`, per byte of it.
fn factor<T: Decodable>(encoded: &Bytes, version: i16) -> f64 {
    let mut buf = encoded.clone();
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let decoded = T::decode(&mut buf, version).unwrap();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    drop(decoded);
    peak as f64 / encoded.len() as f64
}

fn encode<T: Encodable>(request: &T, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    request.encode(&mut buf, version).unwrap();
    buf.freeze()
}

/// Grows `n` until the encoded request reaches [`TARGET`], then measures.
fn measure<T: Encodable + Decodable>(
    name: &str,
    version: i16,
    build: impl Fn(usize) -> T,
) -> (String, usize, f64) {
    let one = encode(&build(1), version).len();
    let two = encode(&build(2), version).len();
    let n = TARGET / (two - one).max(1);
    let encoded = encode(&build(n), version);
    let f = factor::<T>(&encoded, version);
    (format!("{name} v{version}"), two - one, f)
}

#[test]
fn decoding_takes_a_bounded_multiple_of_the_request_size() {
    let empty = || StrBytes::default();
    let results = vec![
        measure("DescribeGroups (empty group ids)", 5, |n| {
            DescribeGroupsRequest::default().with_groups(vec![GroupId(empty()); n])
        }),
        measure("DeleteGroups (empty group ids)", 2, |n| {
            DeleteGroupsRequest::default().with_groups_names(vec![GroupId(empty()); n])
        }),
        measure("Metadata (tagged topics)", 12, |n| {
            MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default()
                    .with_name(None)
                    .with_unknown_tagged_fields(tagged());
                n
            ]))
        }),
        measure("OffsetFetch (tagged topics)", 7, |n| {
            OffsetFetchRequest::default()
                .with_group_id(GroupId(empty()))
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_unknown_tagged_fields(tagged());
                    n
                ]))
        }),
        measure("Fetch (tagged partitions)", 12, |n| {
            FetchRequest::default().with_topics(vec![fetch_request::FetchTopic::default()
                .with_partitions(vec![
                    fetch_request::FetchPartition::default()
                        .with_unknown_tagged_fields(tagged());
                    n
                ])])
        }),
        measure("ListOffsets (tagged partitions)", 7, |n| {
            ListOffsetsRequest::default().with_topics(vec![
                list_offsets_request::ListOffsetsTopic::default().with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default()
                        .with_unknown_tagged_fields(tagged());
                    n
                ]),
            ])
        }),
        measure("OffsetCommit (tagged partitions)", 8, |n| {
            OffsetCommitRequest::default().with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default().with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_committed_metadata(None)
                        .with_unknown_tagged_fields(tagged());
                    n
                ]),
            ])
        }),
        measure("CreateTopics (tagged configs)", 5, |n| {
            CreateTopicsRequest::default().with_topics(vec![
                create_topics_request::CreatableTopic::default().with_configs(vec![
                    create_topics_request::CreatableTopicConfig::default()
                        .with_value(None)
                        .with_unknown_tagged_fields(tagged());
                    n
                ]),
            ])
        }),
        measure("DescribeConfigs (tagged resources)", 4, |n| {
            DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_configuration_keys(None)
                    .with_unknown_tagged_fields(tagged());
                n
            ])
        }),
        measure("Produce (tagged partitions)", 9, |n| {
            ProduceRequest::default().with_topic_data(vec![
                produce_request::TopicProduceData::default().with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_records(None)
                        .with_unknown_tagged_fields(tagged());
                    n
                ]),
            ])
        }),
        measure("Produce (empty partitions, counted first)", 7, |n| {
            ProduceRequest::default().with_topic_data(vec![
                produce_request::TopicProduceData::default().with_partition_data(vec![
                    produce_request::PartitionProduceData::default().with_records(None);
                    n
                ]),
            ])
        }),
        measure("Produce (empty partitions, counted first)", 9, |n| {
            ProduceRequest::default().with_topic_data(vec![
                produce_request::TopicProduceData::default().with_partition_data(vec![
                    produce_request::PartitionProduceData::default().with_records(None);
                    n
                ]),
            ])
        }),
        measure("ApiVersions (distinct unknown tags)", 3, |n| {
            ApiVersionsRequest::default()
                .with_unknown_tagged_fields((0..n as i32).map(|t| (t, Bytes::new())).collect())
        }),
        measure("JoinGroup (protocols, not flexible)", 5, |n| {
            JoinGroupRequest::default().with_protocols(vec![
                join_group_request::JoinGroupRequestProtocol::default();
                n
            ])
        }),
        measure("LeaveGroup (members, not flexible)", 3, |n| {
            LeaveGroupRequest::default().with_members(vec![
                leave_group_request::MemberIdentity::default()
                    .with_group_instance_id(None);
                n
            ])
        }),
    ];
    let mut worst = 0f64;
    for (name, element, f) in &results {
        println!("{name:45} {element:>3} B per element: {f:6.1}x");
        worst = worst.max(*f);
    }
    // Measured at kafka-protocol 0.18.0 (patched): 32x for arrays of empty strings, 100x
    // before the patch.
    assert!(worst <= 40.0, "a request decodes to {worst:.0}x its size");
}
