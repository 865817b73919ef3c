//! Active segments beyond the open-files bound (`LogOptions::open_segments`): parked (fsynced,
//! file closed, map dropped) and opened again on their next write or read, so a data dir of
//! many partitions holds no more descriptors than the bound, loses nothing, and reports a
//! failed fsync at parking time as the partition's failure.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::fs;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use log_core::batch::{self, NewRecord};
use log_core::io::{Faults, FaultyStorage, Storage};
use log_core::{Ack, AppendError, Log, LogOptions, Partition, TopicConfig};

fn records(tag: &str) -> Bytes {
    let value = format!("{tag}-{}", "x".repeat(40));
    let entries: Vec<NewRecord> = vec![(None, Some(value.as_bytes()), 1)];
    batch::build(&entries)
}

fn values(p: &Partition) -> Vec<String> {
    let mut out = Vec::new();
    while (out.len() as i64) < p.log_end_offset() {
        let read = p.read(out.len() as i64, 1 << 16).unwrap();
        for record in batch::decode(&read.records).unwrap() {
            assert_eq!(record.offset, out.len() as i64);
            let value = String::from_utf8(record.value.unwrap().to_vec()).unwrap();
            out.push(value.split('-').next().unwrap().to_string());
        }
    }
    out
}

/// Descriptors this process holds on `.log` files under `dir`.
fn open_logs(dir: &Path) -> usize {
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| fs::read_link(e.unwrap().path()).ok())
        .filter(|t| t.starts_with(dir) && t.extension().is_some_and(|e| e == "log"))
        .count()
}

fn options(storage: Arc<dyn Storage>, open_segments: usize) -> LogOptions {
    LogOptions {
        storage,
        open_segments,
        ..LogOptions::default()
    }
}

fn small_segments() -> TopicConfig {
    TopicConfig {
        segment_bytes: 1024,
        index_interval_bytes: 128,
        ..TopicConfig::default()
    }
}

#[test]
fn more_partitions_than_the_bound_keep_at_most_the_bound_open_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(log_core::io::FileStorage);
    let partitions = 12;
    let bound = 3;
    let mut expected = vec![Vec::new(); partitions];
    {
        let log = Log::open_with_options(dir.path(), options(storage.clone(), bound)).unwrap();
        let topic = log
            .create_topic("t", partitions as u32, small_segments())
            .unwrap();
        assert!(log.open_segments() <= bound, "{}", log.open_segments());
        // Round robin over the partitions: every append opens a parked segment and parks
        // another; the small segments roll too.
        for round in 0..40 {
            for (i, p) in topic.partitions().iter().enumerate() {
                let tag = format!("r{round}p{i}");
                p.append(&records(&tag)).unwrap();
                expected[i].push(tag);
                assert!(open_logs(dir.path()) <= bound, "round {round}");
            }
        }
        assert!(topic.partitions()[0].segment_count() > 2);
        for (i, p) in topic.partitions().iter().enumerate() {
            assert_eq!(values(p), expected[i], "partition {i}");
        }
        assert!(open_logs(dir.path()) <= bound);
        assert!(log.open_segments() <= bound, "{}", log.open_segments());
        log.close().unwrap();
    }
    // A restart opens every partition's active segment to recover it, and keeps the bound.
    let log = Log::open_with_options(dir.path(), options(storage, bound)).unwrap();
    assert!(open_logs(dir.path()) <= bound, "{}", open_logs(dir.path()));
    let topic = log.topic("t").unwrap();
    for (i, p) in topic.partitions().iter().enumerate() {
        assert_eq!(values(p), expected[i], "partition {i} after a restart");
        p.append(&records("again")).unwrap();
    }
    assert!(open_logs(dir.path()) <= bound);
}

#[test]
fn a_parked_segment_is_fsynced_first_and_its_failed_fsync_fails_the_partition() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Faults::new();
    let storage: Arc<dyn Storage> = Arc::new(FaultyStorage::new(faults.clone()));
    let log = Log::open_with_options(dir.path(), options(storage, 1)).unwrap();
    let topic = log.create_topic("t", 3, TopicConfig::default()).unwrap();
    let [p0, p1, p2] = [0, 1, 2].map(|i| topic.partitions()[i].clone());

    // acks=1 rides the page cache; parking p0 (to open p1) fsyncs it.
    let syncs = faults.syncs();
    p0.append_pending(&records("a"), Ack::Written).unwrap();
    p1.append_pending(&records("b"), Ack::Written).unwrap();
    assert!(faults.syncs() > syncs, "parking p0 fsynced it");

    // p1 is parked (to open p2) while fsyncs fail: its data's fate is unknown, and p1 says
    // so at its next fsync, though fsyncs work again by then.
    faults.fail_syncs(true);
    p2.append_pending(&records("c"), Ack::Written).unwrap();
    faults.fail_syncs(false);
    let err = p1.flush().unwrap_err();
    assert!(matches!(err, AppendError::Poisoned { .. }), "{err}");
    assert!(p1.append(&records("refused")).is_err());
    // The others go on.
    p0.append(&records("a2")).unwrap();
    p2.append(&records("c2")).unwrap();

    // A power cut keeps what was fsynced: p0's acks=1 record (fsynced when parked) and both
    // acks=all ones.
    faults.cut_power();
    drop((p0, p1, p2, topic));
    drop(log);
    let _ = fs::remove_file(dir.path().join(".clean-shutdown"));
    faults.restore_power().unwrap();
    let log = Log::open(dir.path()).unwrap();
    let topic = log.topic("t").unwrap();
    assert_eq!(values(&topic.partitions()[0]), ["a", "a2"]);
    assert_eq!(values(&topic.partitions()[2]).last().unwrap(), "c2");
}

#[test]
fn appends_spread_over_parked_segments_survive_power_cuts_and_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let partitions = 5;
    let mut model: Vec<Vec<String>> = vec![Vec::new(); partitions];
    let mut faults = Faults::new();
    let open = |faults: &Arc<Faults>| {
        let storage: Arc<dyn Storage> = Arc::new(FaultyStorage::new(faults.clone()));
        Log::open_with_options(dir.path(), options(storage, 2)).unwrap()
    };
    let mut log = open(&faults);
    log.create_topic("t", partitions as u32, small_segments())
        .unwrap();
    // A fixed pseudo-random walk: appends to any partition (acks=all: each acknowledged once
    // fsynced, through whatever descriptor the segment has then), acks=1 appends that parking
    // may or may not have fsynced, and power cuts.
    let mut seed = 7u64;
    for step in 0..400 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let pick = (seed >> 33) as usize;
        let p = log.topic("t").unwrap().partitions()[pick % partitions].clone();
        if pick.is_multiple_of(37) {
            faults.cut_power();
            drop(p);
            drop(log);
            let _ = fs::remove_file(dir.path().join(".clean-shutdown"));
            faults.restore_power().unwrap();
            faults = Faults::new();
            log = open(&faults);
            for (i, expected) in model.iter_mut().enumerate() {
                let got = values(&log.topic("t").unwrap().partitions()[i]);
                // What acks=1 left may or may not be there; everything acknowledged is.
                assert!(got.len() >= expected.len(), "step {step} partition {i}");
                assert_eq!(&got[..expected.len()], &expected[..], "step {step}");
                *expected = got;
            }
        } else if pick.is_multiple_of(5) {
            p.append_pending(&records("w"), Ack::Written).unwrap();
        } else {
            let tag = format!("s{step}");
            p.append(&records(&tag)).unwrap();
            // Everything before an acknowledged append is on disk with it.
            let all = values(&p);
            model[pick % partitions] = all;
        }
    }
    assert!(log.topic("t").unwrap().partitions()[0].segment_count() > 1);
}

#[test]
fn a_parked_segment_of_a_deleted_topic_never_touches_the_files_of_its_successor() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(log_core::io::FileStorage);
    let log = Log::open_with_options(dir.path(), options(storage, 1)).unwrap();
    let old = log
        .create_topic("t", 1, TopicConfig::default())
        .unwrap()
        .partitions()[0]
        .clone();
    old.append(&records("old")).unwrap();
    // Another topic's segment opens: the old one is parked.
    log.create_topic("other", 1, TopicConfig::default())
        .unwrap();
    log.delete_topic("t").unwrap();
    let new = log
        .create_topic("t", 1, TopicConfig::default())
        .unwrap()
        .partitions()[0]
        .clone();
    new.append(&records("new")).unwrap();
    log.create_topic("third", 1, TopicConfig::default())
        .unwrap();
    // The old handle finds another file at its path: it neither reads nor writes it.
    assert!(old.read(0, 1 << 16).is_err());
    assert!(old.append(&records("stray")).is_err());
    assert_eq!(values(&new), ["new"]);
    assert_eq!(fs::read_dir(dir.path().join("t-0")).unwrap().count(), 1);
}
