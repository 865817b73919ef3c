//! Behaviour of one partition and of the data directory, through the public API.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use log_core::batch::NewRecord;
use log_core::io::{Faults, FaultyStorage};
use log_core::{
    batch, Ack, AppendError, Durability, Log, OpenError, ReadError, TopicConfig, TopicError,
};

/// A batch of `n` records `"{tag}-{i}"` with timestamps `ts, ts+1, …`.
fn records(tag: &str, n: usize, ts: i64) -> Bytes {
    let values: Vec<String> = (0..n).map(|i| format!("{tag}-{i}")).collect();
    let entries: Vec<NewRecord> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (None, Some(v.as_bytes()), ts + i as i64))
        .collect();
    batch::build(&entries)
}

fn values(bytes: &[u8]) -> Vec<(i64, String)> {
    batch::decode(bytes)
        .unwrap()
        .into_iter()
        .map(|r| {
            (
                r.offset,
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            )
        })
        .collect()
}

fn small_segments() -> TopicConfig {
    TopicConfig {
        segment_bytes: 1024,
        index_interval_bytes: 128,
        ..TopicConfig::default()
    }
}

fn segment_files(dir: &Path, ext: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(&format!(".{ext}")))
        .collect();
    names.sort();
    names
}

/// Reads everything from `from` to the end, batch by batch.
fn read_all(p: &log_core::Partition, from: i64) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    let mut next = from;
    loop {
        let read = p.read(next, 1 << 20).unwrap();
        if read.records.is_empty() {
            return out;
        }
        let batch = values(&read.records);
        next = batch.last().unwrap().0 + 1;
        out.extend(batch.into_iter().filter(|(o, _)| *o >= from));
    }
}

/// A data dir with one topic `t` of one partition.
fn one_partition(config: TopicConfig) -> (tempfile::TempDir, Log, Arc<log_core::Partition>) {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    let p = log.create_topic("t", 1, config).unwrap().partitions()[0].clone();
    (dir, log, p)
}

#[test]
fn append_assigns_offsets_and_read_returns_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    let topic = log.create_topic("t", 2, TopicConfig::default()).unwrap();
    let p = topic.partition(1).unwrap();
    let a = p.append(&records("a", 3, 1000)).unwrap();
    let b = p.append(&records("b", 2, 2000)).unwrap();
    assert_eq!(
        (a.base_offset, a.last_offset, a.max_timestamp),
        (0, 2, 1002)
    );
    assert_eq!((b.base_offset, b.last_offset), (3, 4));
    assert_eq!(p.log_end_offset(), 5);
    assert_eq!(p.log_start_offset(), 0);

    // A read at an offset inside a batch returns that whole batch.
    let read = p.read(1, 1 << 20).unwrap();
    let got = values(&read.records);
    assert_eq!(got[0], (0, "a-0".into()));
    assert_eq!(got.len(), 5);
    assert_eq!(read.log_end_offset, 5);

    // max_bytes stops before the second batch, but the first is always whole.
    let first_len = records("a", 3, 1000).len();
    let read = p.read(0, first_len + 10).unwrap();
    assert_eq!(read.records.len(), first_len);
    assert_eq!(p.read(0, 1).unwrap().records.len(), first_len);

    // The stored bytes are the producer's, with our base offset in front.
    let stored = p.read(3, 1 << 20).unwrap().records;
    let mut sent = records("b", 2, 2000).to_vec();
    sent[..8].copy_from_slice(&3i64.to_be_bytes());
    assert_eq!(&stored[..], &sent[..]);

    assert!(p.read(5, 100).unwrap().records.is_empty());
    assert!(matches!(
        p.read(6, 100),
        Err(ReadError::OffsetOutOfRange {
            offset: 6,
            log_start: 0,
            log_end: 5
        })
    ));
    assert!(matches!(
        p.read(-1, 100),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    // The other partition is untouched.
    assert_eq!(topic.partition(0).unwrap().log_end_offset(), 0);
}

#[test]
fn several_batches_in_one_append_get_contiguous_offsets() {
    let (_dir, _log, p) = one_partition(TopicConfig::default());
    let mut two = records("x", 2, 0).to_vec();
    two.extend_from_slice(&records("y", 3, 0));
    let info = p.append(&two).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (0, 4));
    let all = read_all(&p, 0);
    assert_eq!(
        all.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    assert_eq!(all[2].1, "y-0");
}

#[test]
fn batches_parsed_by_the_caller_are_appended_with_the_remaining_checks() {
    let (_dir, _log, p) = one_partition(TopicConfig::default());
    let mut two = records("x", 2, 0).to_vec();
    two.extend_from_slice(&batch::build_with(
        &[(None, Some(b"z"), 0)],
        batch::Compression::Lz4,
    ));
    let headers = record_batch::parse_all(&two).unwrap();
    let info = p.append_pending_parsed(&two, &headers, Ack::All).unwrap();
    p.await_durable(&info).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (0, 2));
    let info = p
        .try_append_pending_parsed(&two, &headers, Ack::Written)
        .unwrap();
    assert_eq!((info.base_offset, info.last_offset), (3, 5));
    let values: Vec<String> = read_all(&p, 0).into_iter().map(|(_, v)| v).collect();
    assert_eq!(values, ["x-0", "x-1", "z", "x-0", "x-1", "z"]);

    // The CRC is still checked, and so are a compressed batch's records.
    let mut flipped = two.clone();
    flipped[70] ^= 1;
    let headers = record_batch::parse_all(&flipped).unwrap();
    assert!(matches!(
        p.append_pending_parsed(&flipped, &headers, Ack::All),
        Err(AppendError::InvalidBatch(log_core::BatchError::Invalid(
            record_batch::BatchError::CrcMismatch { .. }
        )))
    ));
    let liar = with_claimed_count(
        &batch::build_with(&[(None, Some(b"a"), 0)], batch::Compression::Gzip),
        2,
    );
    let headers = record_batch::parse_all(&liar).unwrap();
    assert!(matches!(
        p.append_pending_parsed(&liar, &headers, Ack::All),
        Err(AppendError::InvalidBatch(log_core::BatchError::Invalid(
            record_batch::BatchError::BadRecordOffsets { count: 2 }
        )))
    ));
    // Headers of more batches than the records hold.
    let headers = record_batch::parse_all(&two).unwrap();
    let first = headers[0].size as usize;
    assert!(p
        .append_pending_parsed(&two[..first], &headers, Ack::All)
        .is_err());
    assert_eq!(p.log_end_offset(), 6, "nothing refused was written");
}

/// Rewrites a batch's record count (and lastOffsetDelta to match) and fixes its CRC, as a
/// hostile producer would.
fn with_claimed_count(batch: &[u8], count: i32) -> Vec<u8> {
    use record_batch::layout::{CRC_AT, LAST_OFFSET_DELTA_AT, RECORD_COUNT_AT};
    let mut batch = batch.to_vec();
    batch[LAST_OFFSET_DELTA_AT..][..4].copy_from_slice(&(count - 1).to_be_bytes());
    batch[RECORD_COUNT_AT..][..4].copy_from_slice(&count.to_be_bytes());
    let crc = record_batch::compute_crc(&batch);
    batch[CRC_AT..][..4].copy_from_slice(&crc.to_be_bytes());
    batch
}

#[test]
fn compressed_batches_are_checked_as_kafka_does_with_bounded_decompression() {
    let config = TopicConfig {
        max_message_bytes: 16 * 1024,
        ..TopicConfig::default()
    };
    let (_dir, _log, p) = one_partition(config);
    let values: Vec<String> = (0..20).map(|i| format!("value-{i}")).collect();
    let records: Vec<NewRecord> = values
        .iter()
        .map(|v| (None, Some(v.as_bytes()), 5))
        .collect();
    // Every codec's honest batches are taken, offsets as the producer counted them.
    for codec in [
        batch::Compression::Gzip,
        batch::Compression::Snappy,
        batch::Compression::Lz4,
        batch::Compression::Zstd,
    ] {
        let info = p.append(&batch::build_with(&records, codec)).unwrap();
        assert_eq!(info.last_offset - info.base_offset, 19, "{codec:?}");
    }
    let end = p.log_end_offset();
    assert_eq!(end, 80);

    // A small compressed batch claiming 2^31-1 records would move the offsets by that much.
    let liar = with_claimed_count(
        &batch::build_with(&records, batch::Compression::Zstd),
        i32::MAX,
    );
    let bad_count = |err: AppendError| {
        matches!(
            err,
            AppendError::InvalidBatch(log_core::BatchError::Invalid(
                record_batch::BatchError::BadRecordOffsets { .. }
            ))
        )
    };
    assert!(bad_count(p.append(&liar).unwrap_err()));
    // One claiming fewer records than it holds.
    let short = with_claimed_count(&batch::build_with(&records, batch::Compression::Lz4), 3);
    assert!(bad_count(p.append(&short).unwrap_err()));

    // 4 MiB of zeros gzip to a few KiB: far below max.message.bytes, far above what it may
    // decompress to (8 x 16 KiB).
    let zeros = vec![0u8; 4 << 20];
    let bomb = batch::build_with(&[(None, Some(&zeros), 5)], batch::Compression::Gzip);
    assert!(bomb.len() < 16 * 1024, "{} bytes", bomb.len());
    let err = p.append(&bomb).unwrap_err();
    assert!(
        matches!(
            err,
            AppendError::InvalidBatch(log_core::BatchError::Decompress {
                position: 0,
                source: log_core::decompress::DecompressError::TooLarge { .. }
            })
        ),
        "{err}"
    );
    assert_eq!(p.log_end_offset(), end, "nothing refused was written");
    // Time lookups decode with a bound too.
    assert_eq!(p.offset_for_timestamp(5).unwrap(), Some((0, 5)));
}

#[test]
fn invalid_batches_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    let config = TopicConfig {
        max_message_bytes: 200,
        ..TopicConfig::default()
    };
    let p = log.create_topic("t", 1, config).unwrap().partitions()[0].clone();
    p.append(&records("ok", 1, 0)).unwrap();
    let before = p.size_bytes();

    let mut bad_crc = records("bad", 2, 0).to_vec();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 1;
    let mut good_then_bad = records("good", 1, 0).to_vec();
    good_then_bad.extend_from_slice(&bad_crc);
    let mut old_magic = records("m", 1, 0).to_vec();
    old_magic[16] = 1;
    let garbage = [0xAB; 100];
    for input in [
        &bad_crc[..],
        &good_then_bad[..],
        &old_magic[..],
        &garbage[..],
        &[][..],
        &bad_crc[..30],
    ] {
        let err = p.append(input).unwrap_err();
        assert!(matches!(err, AppendError::InvalidBatch(_)), "{err}");
    }
    let big = records("big", 20, 0);
    assert!(matches!(p.append(&big), Err(AppendError::TooLarge { .. })));

    assert_eq!(p.size_bytes(), before);
    assert_eq!(p.log_end_offset(), 1);
    assert_eq!(read_all(&p, 0), vec![(0, "ok-0".to_string())]);
}

#[test]
fn segments_roll_by_size_with_kafka_names_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("t-0");
    {
        let log = Log::open(dir.path()).unwrap();
        let p = log
            .create_topic("t", 1, small_segments())
            .unwrap()
            .partitions()[0]
            .clone();
        for i in 0..100 {
            p.append(&records(&format!("r{i}"), 5, i * 10)).unwrap();
        }
        assert!(p.segment_count() > 3, "{} segments", p.segment_count());
        assert_eq!(p.log_end_offset(), 500);
        log.close().unwrap();
    }
    let logs = segment_files(&pdir, "log");
    assert_eq!(logs[0], "00000000000000000000.log");
    assert!(logs.len() > 3);
    // Closed segments have their indexes on disk; each segment is within segment.bytes.
    assert_eq!(segment_files(&pdir, "index").len(), logs.len() - 1);
    assert_eq!(segment_files(&pdir, "timeindex").len(), logs.len() - 1);
    for name in &logs {
        let report = log_core::dump::dump_segment(&pdir.join(name)).unwrap();
        assert!(report.is_ok(), "{name}: {:?}", report.problems);
        assert!(report.file_len <= 1024);
    }

    let log = Log::open(dir.path()).unwrap();
    let p = log.topic("t").unwrap().partitions()[0].clone();
    assert_eq!(p.log_end_offset(), 500);
    let all = read_all(&p, 0);
    assert_eq!(all.len(), 500);
    for (i, (offset, value)) in all.iter().enumerate() {
        assert_eq!(*offset, i as i64);
        assert_eq!(*value, format!("r{}-{}", i / 5, i % 5));
    }
    // Random access lands in the right batch of the right segment.
    for target in [0, 1, 4, 5, 123, 250, 499] {
        let got = values(&p.read(target, 1).unwrap().records);
        assert!(got.first().unwrap().0 <= target && got.last().unwrap().0 >= target);
    }
    // Appends continue after the last offset.
    assert_eq!(p.append(&records("after", 1, 0)).unwrap().base_offset, 500);
}

#[test]
fn batch_headers_walk_every_batch_across_segments() {
    let (_dir, _log, p) = one_partition(small_segments());
    for i in 0..60 {
        p.append(&records(&format!("r{i}"), 3, i * 10)).unwrap();
    }
    assert!(p.segment_count() > 3, "{} segments", p.segment_count());
    let bases: Vec<i64> = p.batch_headers(0).map(|h| h.unwrap().base_offset).collect();
    assert_eq!(bases, (0..60).map(|i| i * 3).collect::<Vec<i64>>());
    // From inside a batch: that batch first.
    let from_inside: Vec<i64> = p
        .batch_headers(100)
        .map(|h| h.unwrap().base_offset)
        .collect();
    assert_eq!(from_inside.first(), Some(&99));
    assert_eq!(from_inside.len(), 27);
    // From the start of the last segment (what producer-state rebuilding does).
    let last = *p.segment_base_offsets().last().unwrap();
    let tail: Vec<i64> = p
        .batch_headers(last)
        .map(|h| h.unwrap().base_offset)
        .collect();
    assert_eq!(tail.first(), Some(&last));
    assert_eq!(tail.last(), Some(&177));
    assert_eq!(p.batch_headers(180).count(), 0, "nothing at the log end");
}

#[test]
fn read_by_timestamp_finds_the_first_record_at_or_after() {
    let (_dir, _log, p) = one_partition(small_segments());
    // Batch i holds timestamps 1000*i + 0..5.
    for i in 0..60 {
        p.append(&records("r", 5, 1000 * i)).unwrap();
    }
    assert!(p.segment_count() > 2);
    assert_eq!(p.offset_for_timestamp(0).unwrap(), Some((0, 0)));
    assert_eq!(p.offset_for_timestamp(3).unwrap(), Some((3, 3)));
    assert_eq!(p.offset_for_timestamp(5).unwrap(), Some((5, 1000)));
    assert_eq!(p.offset_for_timestamp(31_002).unwrap(), Some((157, 31_002)));
    assert_eq!(p.offset_for_timestamp(59_004).unwrap(), Some((299, 59_004)));
    assert_eq!(p.offset_for_timestamp(59_005).unwrap(), None);

    // Compressed batches are searched record by record too.
    let entries: Vec<NewRecord> = (0..10)
        .map(|i| (None, Some(&b"zz"[..]), 100_000 + i))
        .collect();
    p.append(&batch::build_with(&entries, batch::Compression::Lz4))
        .unwrap();
    assert_eq!(
        p.offset_for_timestamp(100_007).unwrap(),
        Some((307, 100_007))
    );
}

#[test]
fn retention_by_bytes_and_age_deletes_whole_closed_segments() {
    let (dir, log, p) = one_partition(small_segments());
    for i in 0..200 {
        p.append(&records("r", 5, i * 1000)).unwrap();
    }
    let segments = p.segment_count();
    let size = p.size_bytes();

    // Age: everything older than 100 s relative to now=200 s goes, segment by segment.
    let mut config = p.config();
    config.retention_ms = Some(100_000);
    p.set_config(config.clone());
    let report = p.apply_retention(200_000).unwrap();
    assert!(report.deleted_segments > 0);
    assert_eq!(p.segment_count(), segments - report.deleted_segments);
    let start = p.log_start_offset();
    assert_eq!(report.log_start_offset, start);
    // Whole segments only: the record at 100 s (offset 500) remains, and at most one
    // segment's worth of older records.
    assert!(start > 400 && start <= 500, "start {start}");
    assert!(matches!(
        p.read(start - 1, 10),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    assert_eq!(read_all(&p, start).len() as i64, 1000 - start);
    assert_eq!(segment_files(p.dir(), "log").len(), p.segment_count());
    assert_eq!(segment_files(p.dir(), "index").len(), p.segment_count() - 1);

    // Bytes: keep at least retention.bytes, deleting only whole segments.
    config.retention_ms = None;
    config.retention_bytes = Some(4096);
    p.set_config(config);
    let before = p.size_bytes();
    p.apply_retention(200_000).unwrap();
    assert!(p.size_bytes() >= 4096 && p.size_bytes() < before && before < size);
    assert!(p.size_bytes() < 4096 + 1024, "{}", p.size_bytes());
    // The active segment is never deleted and appends carry on.
    assert_eq!(p.append(&records("new", 1, 0)).unwrap().base_offset, 1000);

    // The new log start survives a reopen.
    let start = p.log_start_offset();
    drop(p);
    log.close().unwrap();
    let log = Log::open(dir.path()).unwrap();
    assert_eq!(
        log.topic("t").unwrap().partitions()[0].log_start_offset(),
        start
    );
}

#[test]
fn segments_roll_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    // Long enough that the first two appends fall within it even on a loaded machine.
    let config = TopicConfig {
        segment_ms: Some(2_000),
        ..TopicConfig::default()
    };
    let p = log.create_topic("t", 1, config).unwrap().partitions()[0].clone();
    p.append(&records("a", 1, 0)).unwrap();
    p.append(&records("b", 1, 0)).unwrap();
    assert_eq!(p.segment_count(), 1);
    std::thread::sleep(Duration::from_millis(2_100));
    p.append(&records("c", 1, 0)).unwrap();
    assert_eq!(p.segment_count(), 2);
    assert_eq!(read_all(&p, 0).len(), 3);
}

#[test]
fn topics_are_created_listed_reopened_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path()).unwrap();
        let mut config = TopicConfig::default();
        config.set("flush.messages", "1").unwrap();
        log.create_topic("orders", 3, config).unwrap();
        log.create_topic("audit.v1", 1, TopicConfig::default())
            .unwrap();
        assert!(matches!(
            log.create_topic("orders", 1, TopicConfig::default()),
            Err(TopicError::AlreadyExists(_))
        ));
        for bad in ["", ".", "..", "a/b", "../etc", "sp ace", &"x".repeat(250)] {
            assert!(
                matches!(
                    log.create_topic(bad, 1, TopicConfig::default()),
                    Err(TopicError::InvalidName { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(matches!(
            log.create_topic("zero", 0, TopicConfig::default()),
            Err(TopicError::InvalidPartitions(0))
        ));
        log.topic("orders").unwrap().partitions()[2]
            .append(&records("o", 2, 0))
            .unwrap();
    }
    let log = Log::open(dir.path()).unwrap();
    let names: Vec<String> = log.topics().iter().map(|t| t.name().to_string()).collect();
    assert_eq!(names, vec!["audit.v1", "orders"]);
    let orders = log.topic("orders").unwrap();
    assert_eq!(orders.partitions().len(), 3);
    assert_eq!(orders.config().durability.flush_messages, Some(1));
    assert_eq!(orders.partitions()[2].log_end_offset(), 2);

    log.delete_topic("orders").unwrap();
    assert!(log.topic("orders").is_none());
    assert!(!dir.path().join("orders-0").exists());
    assert!(!dir.path().join("orders.topic").exists());
    assert!(matches!(
        log.delete_topic("orders"),
        Err(TopicError::UnknownTopic(_))
    ));
    // A deleted topic's partition refuses appends.
    assert!(orders.partitions()[0].append(&records("x", 1, 0)).is_err());
    // The name can be reused, empty.
    let again = log
        .create_topic("orders", 1, TopicConfig::default())
        .unwrap();
    assert_eq!(again.partitions()[0].log_end_offset(), 0);
}

#[test]
fn topics_have_ids_that_last_and_change_on_re_create() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let log = Log::open(dir.path()).unwrap();
        let t = log.create_topic("t", 2, TopicConfig::default()).unwrap();
        assert!(!t.id().is_nil());
        assert_eq!(log.topic_by_id(t.id()).unwrap().name(), "t");
        t.id()
    };
    let log = Log::open(dir.path()).unwrap();
    assert_eq!(log.topic("t").unwrap().id(), first, "kept across a reopen");
    log.delete_topic("t").unwrap();
    let again = log.create_topic("t", 2, TopicConfig::default()).unwrap();
    assert_ne!(
        again.id(),
        first,
        "a new topic of the same name has a new id"
    );
    assert!(log.topic_by_id(first).is_none());
    drop(log);

    // A topic file written before ids existed gets one, kept from then on.
    fs::write(
        dir.path().join("old.topic"),
        "# lograil topic, format 1\npartitions=1\n",
    )
    .unwrap();
    let given = Log::open(dir.path()).unwrap().topic("old").unwrap().id();
    assert!(fs::read_to_string(dir.path().join("old.topic"))
        .unwrap()
        .contains(&given.to_string()));
    assert_eq!(
        Log::open(dir.path()).unwrap().topic("old").unwrap().id(),
        given
    );
}

#[test]
fn a_data_dir_is_locked_to_one_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    assert!(matches!(
        Log::open(dir.path()),
        Err(OpenError::Locked { .. })
    ));
    drop(log);
    Log::open(dir.path()).unwrap();
}

#[test]
fn bad_data_dirs_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    fs::write(&file, b"x").unwrap();
    let err = Log::open(&file).unwrap_err();
    assert!(err.to_string().contains("not-a-dir"), "{err}");

    // A topic file that is not ours: that topic stays offline, naming the file, and its name
    // cannot be taken (a new topic would remove its partitions' data); other topics open.
    let data = dir.path().join("data");
    {
        let log = Log::open(&data).unwrap();
        log.create_topic("fine", 1, TopicConfig::default()).unwrap();
    }
    fs::write(data.join("t.topic"), "partitions=banana\n").unwrap();
    fs::create_dir(data.join("t-0")).unwrap();
    fs::write(data.join("t-0/keep-me"), b"x").unwrap();
    let log = Log::open(&data).unwrap();
    assert!(log.topic("fine").is_some());
    assert!(log.topic("t").is_none());
    let offline = log.offline_topics();
    assert_eq!(offline.len(), 1);
    assert_eq!(offline[0].0, "t");
    assert!(offline[0].1.contains("t.topic"), "{offline:?}");
    let err = log
        .create_topic("t", 1, TopicConfig::default())
        .unwrap_err();
    assert!(matches!(err, TopicError::Offline { .. }), "{err}");
    assert!(data.join("t-0/keep-me").exists());
}

/// A data dir whose topic `t` has several closed segments of 5-record batches `r-i`; returns
/// the dir and the byte positions of the batches of the first segment.
fn closed_segments() -> (tempfile::TempDir, Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path()).unwrap();
        let p = log
            .create_topic("t", 1, small_segments())
            .unwrap()
            .partitions()[0]
            .clone();
        for i in 0..40 {
            p.append(&records(&format!("r{i}"), 5, i)).unwrap();
        }
        assert!(p.segment_count() > 2);
    }
    let report = log_core::dump::dump_segment(&first_segment(dir.path())).unwrap();
    assert!(report.is_ok());
    let starts = report.batches.iter().map(|b| b.position).collect();
    (dir, starts)
}

fn first_segment(data: &Path) -> std::path::PathBuf {
    data.join("t-0/00000000000000000000.log")
}

/// Rewrites bytes `at..` of the first segment.
fn damage_first_segment(data: &Path, at: u64, bytes: &[u8]) {
    let path = first_segment(data);
    let mut content = fs::read(&path).unwrap();
    content[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
    fs::write(&path, content).unwrap();
}

/// Reads every offset from 0 to the end, one read per offset: (offsets served, offsets
/// refused as damaged). Never a silent skip: each offset is either served or refused.
fn read_each_offset(p: &log_core::Partition) -> (Vec<i64>, Vec<i64>) {
    let (mut served, mut refused) = (Vec::new(), Vec::new());
    for offset in 0..p.log_end_offset() {
        match p.read(offset, 1) {
            Ok(read) => {
                let got = values(&read.records);
                assert!(
                    got.iter().any(|(o, _)| *o == offset),
                    "read at {offset} served {:?}",
                    got.iter().map(|(o, _)| o).collect::<Vec<_>>()
                );
                served.push(offset);
            }
            Err(ReadError::Damaged { damage, path }) => {
                assert!(damage.covers(offset));
                assert!(path.ends_with("00000000000000000000.log"), "{path:?}");
                refused.push(offset);
            }
            Err(e) => panic!("read at {offset}: {e}"),
        }
    }
    (served, refused)
}

#[test]
fn a_corrupt_batch_length_in_a_closed_segment_refuses_that_batch_and_serves_the_rest() {
    let (dir, starts) = closed_segments();
    // The third batch (offsets 10..15) claims to be 2 GiB long.
    damage_first_segment(dir.path(), starts[2] + 8, &0x7fff_0000i32.to_be_bytes());
    let log = Log::open(dir.path()).unwrap();
    let p = log.topic("t").unwrap().partitions()[0].clone();
    let (served, refused) = read_each_offset(&p);
    assert_eq!(refused, (10..15).collect::<Vec<i64>>());
    assert_eq!(served.len() as i64, p.log_end_offset() - 5);
    // A read from before the damage stops at it; one from after it starts there.
    let before = values(&p.read(0, 1 << 20).unwrap().records);
    assert_eq!(before.last().unwrap().0, 9);
    let after = values(&p.read(15, 1 << 20).unwrap().records);
    assert_eq!(after[0], (15, "r3-0".to_string()));
    // The damage is reported with its file and byte position.
    let damage = p.damage();
    assert_eq!(damage.len(), 1);
    assert!(damage[0].0.ends_with("00000000000000000000.log"));
    assert_eq!(damage[0].1.position, starts[2]);
    assert_eq!((damage[0].1.first_offset, damage[0].1.end_offset), (10, 15));
}

#[test]
fn a_corrupt_base_offset_in_a_closed_segment_is_refused_not_skipped() {
    let (dir, starts) = closed_segments();
    // The third batch says it starts at offset 710: the CRC does not cover it.
    damage_first_segment(dir.path(), starts[2], &710i64.to_be_bytes());
    let log = Log::open(dir.path()).unwrap();
    let p = log.topic("t").unwrap().partitions()[0].clone();
    let (served, refused) = read_each_offset(&p);
    assert_eq!(refused, (10..15).collect::<Vec<i64>>());
    assert_eq!(served.len() as i64, p.log_end_offset() - 5);
    // A read over the damage never returns the batch with the wrong offset.
    let before = values(&p.read(5, 1 << 20).unwrap().records);
    assert_eq!(
        before.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
        (5..10).collect::<Vec<_>>()
    );
}

#[test]
fn damage_and_a_missing_index_do_not_stop_the_log_from_opening() {
    let (dir, starts) = closed_segments();
    damage_first_segment(dir.path(), starts[2] + 8, &0x7fff_0000i32.to_be_bytes());
    fs::remove_file(dir.path().join("t-0/00000000000000000000.index")).unwrap();
    fs::remove_file(dir.path().join("t-0/00000000000000000000.timeindex")).unwrap();
    let log = Log::open(dir.path()).unwrap();
    let p = log.topic("t").unwrap().partitions()[0].clone();
    // Rebuilding the indexes found the damage at open.
    assert_eq!(p.damage().len(), 1);
    let (served, refused) = read_each_offset(&p);
    assert_eq!(refused, (10..15).collect::<Vec<i64>>());
    assert_eq!(served.len() as i64, p.log_end_offset() - 5);
}

#[test]
fn a_closed_segment_full_of_garbage_refuses_its_offsets_and_serves_the_others() {
    let (dir, _) = closed_segments();
    let first = first_segment(dir.path());
    let len = fs::metadata(&first).unwrap().len() as usize;
    fs::write(&first, vec![0x5A; len]).unwrap();
    fs::remove_file(dir.path().join("t-0/00000000000000000000.index")).unwrap();
    let log = Log::open(dir.path()).unwrap();
    let p = log.topic("t").unwrap().partitions()[0].clone();
    let second_base = p.segment_base_offsets()[1];
    let (served, refused) = read_each_offset(&p);
    assert_eq!(refused, (0..second_base).collect::<Vec<i64>>());
    assert_eq!(
        served,
        (second_base..p.log_end_offset()).collect::<Vec<i64>>()
    );
    let report = log_core::dump::dump_segment(&first).unwrap();
    assert!(!report.is_ok());
    assert!(
        report.problems[0].contains(&format!("offsets 0..{second_base}")),
        "{:?}",
        report.problems
    );
}

/// Found by `fuzz/`'s `segment_chain` target: a closed segment cut at a batch boundary (or
/// emptied) walked cleanly to its end, so its missing offsets were neither served nor refused:
/// a read there answered with nothing (a consumer stuck at the log end minus some) or, once the
/// next segment had data, with that segment's first batch (a silent skip).
#[test]
fn a_closed_segment_that_ends_early_refuses_its_missing_offsets() {
    for cut_after in [3, 0] {
        let (dir, starts) = closed_segments();
        let first = first_segment(dir.path());
        let content = fs::read(&first).unwrap();
        fs::write(&first, &content[..starts[cut_after] as usize]).unwrap();
        let log = Log::open(dir.path()).unwrap();
        let p = log.topic("t").unwrap().partitions()[0].clone();
        let second_base = p.segment_base_offsets()[1];
        let lost = 5 * cut_after as i64..second_base;
        let (served, refused) = read_each_offset(&p);
        assert_eq!(
            refused,
            lost.clone().collect::<Vec<i64>>(),
            "cut after {cut_after}"
        );
        assert_eq!(
            served.len() as i64,
            p.log_end_offset() - (lost.end - lost.start)
        );
        let damage = p.damage();
        assert_eq!(damage.len(), 1, "{damage:?}");
        assert_eq!(damage[0].1.position, starts[cut_after]);
        let report = log_core::dump::dump_segment(&first).unwrap();
        assert!(
            report.problems[0].contains(&format!("offsets {}..{}", lost.start, lost.end)),
            "{:?}",
            report.problems
        );
    }
}

/// Found by `fuzz/`'s `segment_chain` target: a batch whose CRC fails, holding a valid batch
/// inside its bytes. The walk that rebuilt the indexes stepped over it to the inner batch and
/// marked the segment CRC-checked, but a read walking from byte 0 took the outer batch (its
/// header parses) as checked and served it, CRC mismatch and all; after a restart, a read that
/// found the bad CRC skipped the outer batch's whole claimed length instead of resuming at the
/// inner batch, and answered with nothing (offsets neither served nor refused).
#[test]
fn a_batch_that_fails_its_crc_is_never_served_and_the_walk_resumes_inside_it() {
    let inner = records("inner", 1, 0);
    // An outer batch claiming offsets 0..50, junk around the inner batch, a wrong CRC.
    let mut outer = vec![0u8; 61];
    outer.extend_from_slice(&[0x5a; 146]);
    outer.extend_from_slice(&inner);
    outer.extend_from_slice(&[0x5a; 300]);
    let len = outer.len() as i32 - 12;
    outer[8..12].copy_from_slice(&len.to_be_bytes());
    outer[16] = 2; // magic
    outer[17..21].copy_from_slice(&0xdead_beefu32.to_be_bytes());
    outer[23..27].copy_from_slice(&49i32.to_be_bytes()); // lastOffsetDelta
    outer[57..61].copy_from_slice(&50i32.to_be_bytes()); // records
    assert!(record_batch::validate(&outer).is_err());

    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path()).unwrap();
        log.create_topic("t", 1, small_segments()).unwrap();
        log.close().unwrap();
    }
    fs::write(first_segment(dir.path()), &outer).unwrap();
    fs::write(dir.path().join("t-0/00000000000000000050.log"), b"").unwrap();
    // First open: indexes rebuilt from the log; then a restart: indexes read from their files.
    for _ in 0..2 {
        let log = Log::open(dir.path()).unwrap();
        let p = log.topic("t").unwrap().partitions()[0].clone();
        let (served, refused) = read_each_offset(&p);
        assert_eq!(served, vec![0]);
        assert_eq!(refused, (1..50).collect::<Vec<i64>>());
        let read = p.read(0, 1 << 20).unwrap();
        assert_eq!(&read.records[..], &inner[..]);
        drop(p);
        log.close().unwrap();
    }
}

#[test]
fn a_bad_crc_in_a_closed_segment_is_found_on_first_read_and_after_a_restart() {
    let (dir, starts) = closed_segments();
    // A flipped byte inside the records of the second batch: only its CRC tells.
    damage_first_segment(dir.path(), starts[2] - 3, b"#");
    for _ in 0..2 {
        let log = Log::open(dir.path()).unwrap();
        let p = log.topic("t").unwrap().partitions()[0].clone();
        let (_, refused) = read_each_offset(&p);
        assert_eq!(refused, (5..10).collect::<Vec<i64>>());
        log.close().unwrap();
    }
}

#[test]
fn closed_segments_load_on_demand_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path()).unwrap();
        let p = log
            .create_topic("t", 1, small_segments())
            .unwrap()
            .partitions()[0]
            .clone();
        for i in 0..200 {
            p.append(&records(&format!("r{i}"), 5, i)).unwrap();
        }
        assert!(p.segment_count() > 20, "{}", p.segment_count());
    }
    let options = log_core::LogOptions {
        loaded_segments: 4,
        ..log_core::LogOptions::default()
    };
    let log = Log::open_with_options(dir.path(), options).unwrap();
    assert_eq!(log.loaded_segments(), 0, "nothing is loaded at open");
    let p = log.topic("t").unwrap().partitions()[0].clone();
    let all = read_all(&p, 0);
    assert_eq!(all.len(), 1000);
    assert!(
        log.loaded_segments() <= 4,
        "{} loaded",
        log.loaded_segments()
    );
    // Unloaded segments load again, and time lookups still work.
    assert_eq!(values(&p.read(3, 1).unwrap().records)[0].0, 0);
    // Batch i holds timestamps i..i+5: timestamp 150 is first at batch 146's last record.
    assert_eq!(p.offset_for_timestamp(150).unwrap(), Some((734, 150)));
    // No file of a closed segment is kept open.
    let open_logs = fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| fs::read_link(e.unwrap().path()).ok())
        .filter(|target| {
            target.starts_with(dir.path()) && target.extension().is_some_and(|e| e == "log")
        })
        .count();
    assert_eq!(open_logs, 1, "only the active segment's file is open");
}

#[test]
fn broken_index_files_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path()).unwrap();
        let p = log
            .create_topic("t", 1, small_segments())
            .unwrap()
            .partitions()[0]
            .clone();
        for i in 0..60 {
            p.append(&records("r", 5, i * 10)).unwrap();
        }
    }
    let pdir = dir.path().join("t-0");
    let index = pdir.join("00000000000000000000.index");
    let good = fs::read(&index).unwrap();
    assert!(!good.is_empty());
    // Wrong size, then wrong entries.
    fs::write(&index, &good[..good.len() - 3]).unwrap();
    fs::write(pdir.join("00000000000000000000.timeindex"), b"short").unwrap();
    let log = Log::open(dir.path()).unwrap();
    assert_eq!(
        read_all(&log.topic("t").unwrap().partitions()[0], 0).len(),
        300
    );
    drop(log);
    assert_eq!(fs::read(&index).unwrap(), good, "index rebuilt as it was");

    // An entry that points at the wrong byte passes the cheap checks at open; reads notice
    // it and scan instead, and dump-log reports it.
    let mut scrambled = good.clone();
    scrambled[4..8].copy_from_slice(&7u32.to_be_bytes());
    fs::write(&index, &scrambled).unwrap();
    let report = log_core::dump::dump_segment(&pdir.join("00000000000000000000.log")).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("does not point at that batch")),
        "{:?}",
        report.problems
    );
    let log = Log::open(dir.path()).unwrap();
    let p = log.topic("t").unwrap().partitions()[0].clone();
    for target in 0..300 {
        let got = values(&p.read(target, 1).unwrap().records);
        assert!(
            got[0].0 <= target && got.last().unwrap().0 >= target,
            "{target}"
        );
    }
    assert_eq!(p.offset_for_timestamp(205).unwrap(), Some((105, 210)));
}

#[test]
fn a_full_disk_refuses_the_append_and_keeps_the_log_intact() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Faults::new();
    let log = Log::open_with(dir.path(), Arc::new(FaultyStorage::new(faults.clone()))).unwrap();
    let p = log
        .create_topic("t", 1, TopicConfig::default())
        .unwrap()
        .partitions()[0]
        .clone();
    p.append(&records("before", 2, 0)).unwrap();
    // The next write is torn after 20 bytes, as on a full disk.
    faults.limit_writes(Some(20));
    let err = p.append(&records("lost", 3, 0)).unwrap_err();
    assert!(err.is_disk_full(), "{err}");
    assert!(
        err.to_string().contains("00000000000000000000.log"),
        "{err}"
    );
    assert_eq!(p.log_end_offset(), 2);
    // Space comes back: appends carry on at the right offset and position.
    faults.limit_writes(None);
    assert_eq!(p.append(&records("after", 1, 0)).unwrap().base_offset, 2);
    let expected = vec![
        (0, "before-0".to_string()),
        (1, "before-1".to_string()),
        (2, "after-0".to_string()),
    ];
    assert_eq!(read_all(&p, 0), expected);
    drop(p);
    log.close().unwrap();
    let log = Log::open(dir.path()).unwrap();
    assert_eq!(
        read_all(&log.topic("t").unwrap().partitions()[0], 0),
        expected
    );
}

#[test]
fn a_failed_fsync_poisons_the_partition() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Faults::new();
    let log = Log::open_with(dir.path(), Arc::new(FaultyStorage::new(faults.clone()))).unwrap();
    let config = TopicConfig {
        durability: Durability::ALWAYS,
        ..TopicConfig::default()
    };
    let topic = log.create_topic("t", 2, config).unwrap();
    let p = topic.partitions()[0].clone();
    p.append(&records("durable", 1, 0)).unwrap();
    faults.fail_syncs(true);
    let err = p.append(&records("unknown", 1, 0)).unwrap_err();
    assert!(matches!(err, AppendError::Poisoned { .. }), "{err}");
    faults.fail_syncs(false);
    // Even with fsync working again, the partition stays refused until reopened.
    let err = p.append(&records("refused", 1, 0)).unwrap_err();
    assert!(err.to_string().contains("refuses writes"), "{err}");
    assert!(err.to_string().contains("fsync"), "{err}");
    // Reads still work.
    assert_eq!(read_all(&p, 0)[0], (0, "durable-0".to_string()));
    drop(p);
    drop(topic);
    drop(log);
    let log = Log::open(dir.path()).unwrap();
    let p = log.topic("t").unwrap().partitions()[0].clone();
    assert_eq!(read_all(&p, 0)[0], (0, "durable-0".to_string()));
    p.append(&records("again", 1, 0)).unwrap();
}

#[test]
fn interval_durability_is_flushed_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Faults::new();
    let log = Log::open_with(dir.path(), Arc::new(FaultyStorage::new(faults.clone()))).unwrap();
    let mut config = TopicConfig::default();
    config.set("flush.ms", "20").unwrap();
    // acks=all from the page cache too: only the flusher fsyncs.
    config.set("write.caching", "true").unwrap();
    let p = log.create_topic("t", 1, config).unwrap().partitions()[0].clone();
    p.append(&records("x", 1, 0)).unwrap();
    // Failing fsyncs show that the flusher ran: it poisons the partition.
    faults.fail_syncs(true);
    p.append(&records("y", 1, 0)).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while p.append(&records("z", 1, 0)).is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "no background flush in 5 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn under_always_readers_see_only_what_is_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    let config = TopicConfig {
        durability: Durability::ALWAYS,
        ..TopicConfig::default()
    };
    let p = log.create_topic("t", 1, config).unwrap().partitions()[0].clone();
    p.append(&records("synced", 1, 0)).unwrap();
    // Written but not yet fsynced: invisible to readers and to the log end.
    let pending = p
        .append_pending(&records("pending", 2, 5), Ack::All)
        .unwrap();
    assert_eq!(p.log_end_offset(), 1);
    assert_eq!(read_all(&p, 0), vec![(0, "synced-0".to_string())]);
    assert_eq!(p.offset_for_timestamp(5).unwrap(), None);
    p.await_durable(&pending).unwrap();
    assert_eq!(p.log_end_offset(), 3);
    assert_eq!(read_all(&p, 0).len(), 3);
}

#[test]
fn by_default_acks_all_waits_for_an_fsync_and_acks_1_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Faults::new();
    let log = Log::open_with(dir.path(), Arc::new(FaultyStorage::new(faults.clone()))).unwrap();
    let topic = log.create_topic("t", 2, TopicConfig::default()).unwrap();
    let p = topic.partitions()[0].clone();
    let all = p.append_pending(&records("all", 2, 0), Ack::All).unwrap();
    assert!(all.must_sync);
    // Not seen before its fsync.
    assert_eq!(p.log_end_offset(), 0);
    p.await_durable(&all).unwrap();
    assert!(p.is_durable(2).unwrap());
    assert_eq!(p.log_end_offset(), 2);

    let one = p
        .append_pending(&records("one", 1, 0), Ack::Written)
        .unwrap();
    assert!(!one.must_sync);
    assert_eq!(p.log_end_offset(), 3, "acks=1 is seen at once");
    assert!(!p.is_durable(3).unwrap(), "and rides the page cache");
    // An acks=all append behind it waits; an acks=1 one after that shows both (Redpanda's
    // rule: what is seen is the fsynced part and the last append that did not wait).
    let waiting = p.append_pending(&records("all", 1, 0), Ack::All).unwrap();
    assert_eq!(p.log_end_offset(), 3);
    p.append_pending(&records("one", 1, 0), Ack::Written)
        .unwrap();
    assert_eq!(p.log_end_offset(), 5);
    p.await_durable(&waiting).unwrap();

    // A failed fsync fails the acks=all append (and poisons the partition); acks=1 had
    // nothing to wait for.
    let other = topic.partitions()[1].clone();
    faults.fail_syncs(true);
    let one = other
        .append_pending(&records("one", 1, 0), Ack::Written)
        .unwrap();
    other.await_durable(&one).unwrap();
    let err = other.append(&records("all", 1, 0)).unwrap_err();
    assert!(matches!(err, AppendError::Poisoned { .. }), "{err}");
}

#[test]
fn flush_messages_makes_every_nth_offset_wait_and_write_caching_none() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    let mut config = TopicConfig::default();
    config.set("flush.messages", "4").unwrap();
    config.set("write.caching", "true").unwrap();
    let p = log.create_topic("t", 1, config).unwrap().partitions()[0].clone();
    let waits: Vec<bool> = (0..6)
        .map(|_| {
            let info = p.append_pending(&records("r", 1, 0), Ack::All).unwrap();
            p.await_durable(&info).unwrap();
            info.must_sync
        })
        .collect();
    // Offsets 0-3 are 4 unsynced at the 4th append, which waits; then 4 more.
    assert_eq!(waits, [false, false, false, true, false, false]);
    assert!(p.is_durable(4).unwrap());
    assert!(!p.is_durable(6).unwrap());
    // The broker's own writes wait whatever the topic says.
    let marker = p.append_pending(&records("m", 1, 0), Ack::Fsynced).unwrap();
    assert!(marker.must_sync);
}

/// Waits (at most 10 s) until `p` reports damage without any read; returns it.
fn damage_found_without_reads(
    p: &log_core::Partition,
) -> Vec<(std::path::PathBuf, log_core::Damage)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while p.damage().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    p.damage()
}

#[test]
fn the_scrubber_finds_damage_in_closed_segments_after_an_unclean_shutdown() {
    let (dir, starts) = closed_segments();
    // A flipped bit in the records of the third batch (offsets 10..15): only its CRC tells.
    damage_first_segment(dir.path(), starts[2] + 70, b"X");
    fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
    let log = Log::open(dir.path()).unwrap();
    let p = log.topic("t").unwrap().partitions()[0].clone();
    let damage = damage_found_without_reads(&p);
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert_eq!(damage[0].1.position, starts[2]);
    assert_eq!((damage[0].1.first_offset, damage[0].1.end_offset), (10, 15));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while log
        .scrub_stats()
        .passes
        .load(std::sync::atomic::Ordering::Relaxed)
        == 0
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        log.scrub_stats()
            .passes
            .load(std::sync::atomic::Ordering::Relaxed),
        1,
        "one pass at open, the next a day later"
    );
    assert_eq!(
        log.loaded_segments(),
        0,
        "the scrub maps segments for itself: it loads none into the cache"
    );
    // Every closed segment was read once; the active one is left to recovery and reads.
    let logs = segment_files(&dir.path().join("t-0"), "log");
    let closed: u64 = logs[..logs.len() - 1]
        .iter()
        .map(|name| {
            fs::metadata(dir.path().join("t-0").join(name))
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(
        log.scrub_stats()
            .bytes
            .load(std::sync::atomic::Ordering::Relaxed),
        closed
    );
}

#[test]
fn the_scrubber_runs_every_interval_after_a_clean_shutdown() {
    let (dir, starts) = closed_segments();
    damage_first_segment(dir.path(), starts[2] + 70, b"X");
    let clean = |scrub| {
        let options = log_core::LogOptions {
            scrub,
            ..log_core::LogOptions::default()
        };
        Log::open_with_options(dir.path(), options).unwrap()
    };
    // Default options, clean shutdown: no pass at open.
    let log = clean(log_core::ScrubOptions::default());
    std::thread::sleep(Duration::from_millis(200));
    let p = log.topic("t").unwrap().partitions()[0].clone();
    assert!(p.damage().is_empty(), "{:?}", p.damage());
    drop(p);
    drop(log);
    let log = clean(log_core::ScrubOptions {
        interval: Some(Duration::from_millis(20)),
        bytes_per_second: 100 << 20,
    });
    let p = log.topic("t").unwrap().partitions()[0].clone();
    let damage = damage_found_without_reads(&p);
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert_eq!((damage[0].1.first_offset, damage[0].1.end_offset), (10, 15));
}

#[test]
fn a_later_scrub_pass_finds_damage_that_came_after_the_first() {
    let (dir, starts) = closed_segments();
    let options = log_core::LogOptions {
        scrub: log_core::ScrubOptions {
            interval: Some(Duration::from_millis(20)),
            bytes_per_second: 100 << 20,
        },
        ..log_core::LogOptions::default()
    };
    let log = Log::open_with_options(dir.path(), options).unwrap();
    let p = log.topic("t").unwrap().partitions()[0].clone();
    let passes = || {
        log.scrub_stats()
            .passes
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while passes() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(passes() >= 2, "{} passes", passes());
    assert!(p.damage().is_empty(), "{:?}", p.damage());
    // Bit rot after the segment was checked: the next pass checks it again.
    damage_first_segment(dir.path(), starts[2] + 70, b"X");
    let damage = damage_found_without_reads(&p);
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert_eq!((damage[0].1.first_offset, damage[0].1.end_offset), (10, 15));
}

#[test]
fn a_recompression_is_never_done_where_blocking_is_not_allowed() {
    let config = TopicConfig {
        compression: log_core::TopicCompression::Zstd,
        ..TopicConfig::default()
    };
    let (_dir, _log, p) = one_partition(config);
    let plain = records("x", 3, 0);
    let headers = record_batch::parse_all(&plain).unwrap();
    // An async worker's append: refused before any work, nothing written.
    assert!(matches!(
        p.try_append_pending_parsed(&plain, &headers, Ack::All),
        Err(AppendError::WouldBlock)
    ));
    assert_eq!(p.log_end_offset(), 0);
    // A batch already of the topic's codec is stored as it came, even there.
    let zstd = batch::build_with(&[(None, Some(b"z"), 0)], batch::Compression::Zstd);
    let headers = record_batch::parse_all(&zstd).unwrap();
    let info = p
        .try_append_pending_parsed(&zstd, &headers, Ack::Written)
        .unwrap();
    assert_eq!(info.base_offset, 0);
    // Where blocking is allowed the batch is recompressed.
    let headers = record_batch::parse_all(&plain).unwrap();
    let info = p
        .append_pending_parsed(&plain, &headers, Ack::Written)
        .unwrap();
    assert_eq!((info.base_offset, info.last_offset), (1, 3));
    let read = p.read(0, 1 << 20).unwrap();
    let stored = record_batch::validate_all(&read.records).unwrap();
    assert!(stored
        .iter()
        .all(|h| h.codec() == Some(record_batch::Codec::Zstd)));
    assert_eq!(
        &read.records[..zstd.len()][12..],
        &zstd[12..],
        "kept byte for byte"
    );
    let values: Vec<String> = values(&read.records).into_iter().map(|(_, v)| v).collect();
    assert_eq!(values, ["z", "x-0", "x-1", "x-2"]);
}
