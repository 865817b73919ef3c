//! Changes to existing topics: partitions added, configs altered, records deleted (Kafka's
//! CreatePartitions, AlterConfigs and DeleteRecords), each durable across a reopen.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

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

#[test]
fn partition_dirs_no_topic_holds_are_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let record = batch::build(&[(Some(b"k"), Some(b"v"), 1)]);
    let log = Log::open(dir.path()).unwrap();
    log.create_topic("grow", 2, TopicConfig::default()).unwrap();
    let gone = log.create_topic("gone", 3, TopicConfig::default()).unwrap();
    gone.partition(1).unwrap().append(&record).unwrap();
    log.create_topic("broken", 2, TopicConfig::default())
        .unwrap()
        .partition(0)
        .unwrap()
        .append(&record)
        .unwrap();
    drop(gone);
    drop(log);
    let path = |name: &str| dir.path().join(name);
    // A growth interrupted before its commit point (the `.topic` file rewritten): one more
    // partition directory than the topic has.
    std::fs::create_dir(path("grow-2")).unwrap();
    std::fs::write(path("grow-2").join("00000000000000000000.log"), b"").unwrap();
    // A delete interrupted after its commit point (the `.topic` file removed).
    std::fs::remove_file(path("gone.topic")).unwrap();
    // A topic whose `.topic` file is damaged stays offline with its data kept.
    std::fs::write(path("broken.topic"), b"not a topic file").unwrap();
    std::fs::create_dir(path("keep-me")).unwrap();

    let log = Log::open(dir.path()).unwrap();
    for removed in ["grow-2", "gone-0", "gone-1", "gone-2"] {
        assert!(!path(removed).exists(), "{removed} left behind");
    }
    for kept in ["grow-0", "grow-1", "broken-0", "broken-1", "keep-me"] {
        assert!(path(kept).exists(), "{kept} removed");
    }
    assert_eq!(log.offline_topics().len(), 1);
    // The grown partition's name is free again: a real growth starts it empty.
    let grown = log.add_partitions("grow", 3).unwrap();
    assert_eq!(grown.partition(2).unwrap().log_end_offset(), 0);
    assert_eq!(
        log.create_topic("gone", 2, TopicConfig::default())
            .unwrap()
            .partition(1)
            .unwrap()
            .log_end_offset(),
        0
    );
}

#[test]
fn every_name_kafka_accepts_can_be_created_altered_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    let record = batch::build(&[(Some(b"k"), Some(b"v"), 1)]);
    for len in [200, 246, 247, 248, 249] {
        let name = "n".repeat(len);
        let topic = log
            .create_topic(&name, 1, TopicConfig::default())
            .unwrap_or_else(|e| panic!("create {len}: {e}"));
        topic.partition(0).unwrap().append(&record).unwrap();
        topic
            .partition(0)
            .unwrap()
            .delete_records_before(1)
            .unwrap();
        log.add_partitions(&name, 3)
            .unwrap_or_else(|e| panic!("grow {len}: {e}"));
        let config = TopicConfig {
            retention_ms: Some(60_000),
            ..TopicConfig::default()
        };
        log.set_topic_config(&name, config)
            .unwrap_or_else(|e| panic!("alter {len}: {e}"));
    }
    drop(log);
    let log = Log::open(dir.path()).unwrap();
    assert!(
        log.offline_topics().is_empty(),
        "{:?}",
        log.offline_topics()
    );
    for len in [200, 246, 247, 248, 249] {
        let name = "n".repeat(len);
        let topic = log.topic(&name).unwrap();
        assert_eq!(topic.partitions().len(), 3);
        assert_eq!(topic.partition(0).unwrap().log_start_offset(), 1);
        assert_eq!(topic.config().retention_ms, Some(60_000));
        log.delete_topic(&name)
            .unwrap_or_else(|e| panic!("delete {len}: {e}"));
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('n'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
