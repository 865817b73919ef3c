//! What an append checks of each record (KIP-467's per-record errors): a compacted topic's
//! keys and a CreateTime topic's timestamp window (KIP-937), on plain and compressed batches.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::sync::Arc;

use log_core::batch::{self, Compression, NewRecord};
use log_core::{AppendError, Log, Partition, RecordError, TopicConfig};

fn partition(config: TopicConfig) -> (tempfile::TempDir, Log, Arc<Partition>) {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    let p = log.create_topic("t", 1, config).unwrap().partitions()[0].clone();
    (dir, log, p)
}

fn config(names: &[(&str, &str)]) -> TopicConfig {
    let mut config = TopicConfig::default();
    for (name, value) in names {
        config.set(name, value).unwrap();
    }
    config
}

fn refused(error: AppendError) -> (Vec<RecordError>, bool, String) {
    let message = error.to_string();
    match error {
        AppendError::RefusedRecords {
            errors,
            invalid_timestamp,
            ..
        } => (errors, invalid_timestamp, message),
        other => panic!("not refused records: {other}"),
    }
}

#[test]
fn keyless_records_of_a_compacted_topic_are_each_named_and_nothing_is_written() {
    let (_dir, _log, p) = partition(config(&[("cleanup.policy", "compact")]));
    let now = log_core::now_ms();
    for compression in [Compression::None, Compression::Zstd] {
        let records: Vec<NewRecord> = (0..12)
            .map(|i| {
                let key: Option<&[u8]> = (i % 5 != 4).then_some(b"k");
                (key, Some(&b"v"[..]), now)
            })
            .collect();
        let error = p
            .append(&batch::build_with(&records, compression))
            .unwrap_err();
        let (errors, timestamp, message) = refused(error);
        assert!(!timestamp);
        let indexes: Vec<u32> = errors.iter().map(|e| e.index).collect();
        assert_eq!(indexes, vec![4, 9]);
        let why = "Compacted topic cannot accept message without key in topic partition t-0";
        assert!(errors.iter().all(|e| e.message == why), "{errors:?}");
        assert_eq!(
            message,
            format!(
                "One or more records have been rejected due to 2 record errors in total, and \
                 only showing the first three errors at most: [RecordError(batchIndex=4, \
                 message='{why}'), RecordError(batchIndex=9, message='{why}')]"
            )
        );
    }
    assert_eq!(p.log_end_offset(), 0, "nothing written");
}

#[test]
fn timestamps_outside_the_window_are_refused_and_the_others_kept() {
    let (_dir, _log, p) = partition(config(&[
        ("message.timestamp.before.max.ms", "60000"),
        ("message.timestamp.after.max.ms", "60000"),
    ]));
    let now = log_core::now_ms();
    let hour = 3_600_000;
    // Indexes 1 (an hour ago) and 3 (an hour ahead) are out; -1 is "no timestamp".
    let stamps = [now, now - hour, now + 1000, now + hour, -1];
    for compression in [Compression::None, Compression::Gzip] {
        let records: Vec<NewRecord> = stamps
            .iter()
            .map(|ts| (Some(&b"k"[..]), Some(&b"v"[..]), *ts))
            .collect();
        let (errors, timestamp, message) = refused(
            p.append(&batch::build_with(&records, compression))
                .unwrap_err(),
        );
        assert!(timestamp);
        assert_eq!(
            message,
            "One or more records have been rejected due to invalid timestamp"
        );
        let indexes: Vec<u32> = errors.iter().map(|e| e.index).collect();
        assert_eq!(indexes, vec![1, 3]);
        assert!(
            errors[0].message.starts_with(&format!(
                "Timestamp {} of message with offset 1 is out of range. The timestamp should be \
                 within [",
                now - hour
            )),
            "{}",
            errors[0].message
        );
    }
    assert_eq!(p.log_end_offset(), 0, "nothing written");
    let fine: Vec<NewRecord> = [now, now + 1000, -1]
        .iter()
        .map(|ts| (Some(&b"k"[..]), Some(&b"v"[..]), *ts))
        .collect();
    p.append(&batch::build(&fine)).unwrap();
    assert_eq!(p.log_end_offset(), 3);
}

#[test]
fn kafkas_defaults_refuse_only_timestamps_over_an_hour_ahead() {
    let (_dir, _log, p) = partition(TopicConfig::default());
    let now = log_core::now_ms();
    let old: Vec<NewRecord> = vec![(None, Some(b"1970"), 1_000)];
    p.append(&batch::build(&old)).unwrap();
    let ahead: Vec<NewRecord> = vec![(None, Some(b"later"), now + 2 * 3_600_000)];
    let (errors, timestamp, _) = refused(p.append(&batch::build(&ahead)).unwrap_err());
    assert!(timestamp);
    assert_eq!(errors.len(), 1);
    // LogAppendTime: the broker's time is stored, the producer's is not checked.
    let (_dir, _log, p) = partition(config(&[("message.timestamp.type", "LogAppendTime")]));
    p.append(&batch::build(&ahead)).unwrap();
}
