//! Changes to existing topics: partitions added, configs altered, records deleted (Kafka's
//! CreatePartitions, AlterConfigs and DeleteRecords), each durable across a reopen.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use log_core::{batch, DeleteRecordsError, Log, ReadError, TopicConfig, TopicError};

fn small_segments() -> TopicConfig {
    TopicConfig {
        segment_bytes: 1024,
        index_interval_bytes: 128,
        ..TopicConfig::default()
    }
}

#[test]
fn added_partitions_are_empty_writable_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    let topic = log.create_topic("grow", 2, TopicConfig::default()).unwrap();
    let id = topic.id();
    topic
        .partition(0)
        .unwrap()
        .append(&batch::build(&[(Some(b"k"), Some(b"v"), 1)]))
        .unwrap();
    assert!(matches!(
        log.add_partitions("grow", 2),
        Err(TopicError::PartitionsNotIncreased {
            current: 2,
            requested: 2,
            ..
        })
    ));
    assert!(matches!(
        log.add_partitions("missing", 3),
        Err(TopicError::UnknownTopic(_))
    ));
    let grown = log.add_partitions("grow", 5).unwrap();
    assert_eq!(grown.partitions().len(), 5);
    assert_eq!(grown.id(), id);
    assert_eq!(grown.partition(0).unwrap().log_end_offset(), 1);
    let p4 = grown.partition(4).unwrap();
    assert_eq!(p4.log_end_offset(), 0);
    p4.append(&batch::build(&[(None, Some(b"new"), 2)]))
        .unwrap();
    assert!(dir
        .path()
        .join("grow-4")
        .join("00000000000000000000.log")
        .exists());
    drop(log);
    let log = Log::open(dir.path()).unwrap();
    let topic = log.topic("grow").unwrap();
    assert_eq!(topic.partitions().len(), 5);
    assert_eq!(topic.id(), id);
    assert_eq!(topic.partition(4).unwrap().log_end_offset(), 1);
}

#[test]
fn an_altered_config_applies_at_once_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    log.create_topic("conf", 2, TopicConfig::default()).unwrap();
    let mut config = TopicConfig::default();
    config.set("retention.ms", "12345").unwrap();
    log.set_topic_config("conf", config).unwrap();
    let topic = log.topic("conf").unwrap();
    for p in topic.partitions() {
        assert_eq!(p.config().retention_ms, Some(12345));
    }
    drop(topic);
    drop(log);
    let log = Log::open(dir.path()).unwrap();
    assert_eq!(
        log.topic("conf").unwrap().config().retention_ms,
        Some(12345)
    );
}

#[test]
fn deleted_records_move_the_log_start_durably_and_drop_whole_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    let topic = log.create_topic("del", 1, small_segments()).unwrap();
    let p = topic.partition(0).unwrap().clone();
    let value = [b'x'; 200];
    for i in 0..30 {
        p.append(&batch::build(&[(None, Some(&value[..]), i)]))
            .unwrap();
    }
    let segments_before = p.segment_count();
    assert!(segments_before > 3, "{segments_before} segments");
    assert!(matches!(
        p.delete_records_before(31),
        Err(DeleteRecordsError::OffsetOutOfRange {
            offset: 31,
            high_watermark: 30,
            ..
        })
    ));
    assert!(matches!(
        p.delete_records_before(-5),
        Err(DeleteRecordsError::OffsetOutOfRange { .. })
    ));
    assert_eq!(p.delete_records_before(17).unwrap(), 17);
    assert_eq!(p.log_start_offset(), 17);
    assert!(p.segment_count() < segments_before);
    assert!(p.segment_base_offsets()[0] <= 17);
    assert!(matches!(
        p.read(16, 1 << 20),
        Err(ReadError::OffsetOutOfRange { log_start: 17, .. })
    ));
    assert!(!p.read(17, 1 << 20).unwrap().records.is_empty());
    // Going back is a no-op.
    assert_eq!(p.delete_records_before(5).unwrap(), 17);
    drop(p);
    drop(topic);
    drop(log);
    let log = Log::open(dir.path()).unwrap();
    let p = log.topic("del").unwrap().partition(0).unwrap().clone();
    assert_eq!(p.log_start_offset(), 17);
    assert!(p.read(16, 1 << 20).is_err());
    // -1 is the high watermark: everything goes.
    assert_eq!(p.delete_records_before(-1).unwrap(), 30);
    assert_eq!(p.log_start_offset(), 30);
    assert!(p.read(30, 1 << 20).unwrap().records.is_empty());
}
