//! The process's resident set stays small however much of a partition is read: the pages a
//! read maps are released once the read is done (see the `segment` module's doc). One test in
//! its own binary, so no other test's memory is counted.
#![cfg(target_os = "linux")]
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::sync::Arc;

use bytes::Bytes;
use log_core::batch::{self, NewRecord};
use log_core::{Log, Partition, TopicConfig};

const MIB: u64 = 1 << 20;
/// Data written and read back: far more than the bound below.
const DATA: u64 = 96 * MIB;
/// How far the file-backed resident set may grow over its level before the writes. The old
/// code (pages kept mapped for the life of the segment) grew by about `DATA` per phase.
const BOUND: u64 = DATA / 6;

/// File-backed resident memory of this process (`RssFile` in /proc/self/status), in bytes.
fn rss_file() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("RssFile:"))
        .expect("no RssFile line in /proc/self/status")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}

fn check(phase: &str, baseline: u64) {
    let grown = rss_file().saturating_sub(baseline);
    eprintln!("{phase}: file-backed resident memory +{} KiB", grown / 1024);
    assert!(
        grown < BOUND,
        "{phase}: file-backed resident memory grew by {} MiB reading {} MiB (bound {} MiB)",
        grown / MIB,
        DATA / MIB,
        BOUND / MIB
    );
}

/// A batch of 64 records of 1000 bytes (64 KiB, incompressible enough: not compressed anyway).
fn batch(n: u64) -> Bytes {
    let values: Vec<Vec<u8>> = (0..64u64)
        .map(|i| {
            let seed = (n * 64 + i).to_be_bytes();
            (0..1000).map(|j| seed[j % 8] ^ (j as u8)).collect()
        })
        .collect();
    let records: Vec<NewRecord> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (None, Some(v.as_slice()), (n * 64) as i64 + i as i64))
        .collect();
    batch::build(&records)
}

/// Reads the whole partition in fetch-sized reads, two of them in flight at a time (as two
/// responses queued on a connection), and returns the bytes read.
fn read_all(p: &Partition) -> u64 {
    let (mut next, mut total, mut held) = (0, 0u64, Vec::new());
    while next < p.log_end_offset() {
        let read = p.read(next, MIB as usize).unwrap();
        let last = last_offset(&read.records);
        assert!(last >= next, "read at {next} ended at {last}");
        next = last + 1;
        total += read.records.len() as u64;
        held.push(read.records);
        if held.len() > 2 {
            held.remove(0);
        }
    }
    total
}

/// The last offset of a run of whole batches.
fn last_offset(mut records: &[u8]) -> i64 {
    let mut last = -1;
    while !records.is_empty() {
        let header = record_batch::BatchHeader::read(records).unwrap();
        last = header.last_offset();
        records = &records[header.size as usize..];
    }
    last
}

#[test]
fn reading_a_partition_back_does_not_keep_it_resident() {
    let dir = tempfile::tempdir().unwrap();
    let config = TopicConfig {
        // A closed segment of ~64 MiB and an active one of ~32 MiB: each alone is over the
        // bound, so a scrub (closed segments) and recovery (the last one) are measured too.
        segment_bytes: 64 * MIB as u32,
        ..TopicConfig::default()
    };
    let open = || Log::open(dir.path()).unwrap();
    let log = open();
    let p: Arc<Partition> = log.create_topic("t", 1, config).unwrap().partitions()[0].clone();
    // Warm up (first map, first reads) before the baseline.
    p.append(&batch(0)).unwrap();
    assert_eq!(last_offset(&p.read(0, MIB as usize).unwrap().records), 63);
    let baseline = rss_file();

    // A reader at the write head, as a consumer that keeps up: every batch is read as soon as
    // it is appended.
    let mut written = batch(0).len() as u64;
    let mut n = 1;
    while written < DATA {
        let b = batch(n);
        let info = p.append(&b).unwrap();
        let read = p.read(info.base_offset, MIB as usize).unwrap();
        assert_eq!(read.records.len(), b.len());
        assert_eq!(last_offset(&read.records), info.last_offset);
        written += b.len() as u64;
        n += 1;
    }
    assert_eq!(p.segment_count(), 2);
    check("reads at the write head", baseline);

    // A consumer from the start, through closed segments and the active one.
    assert_eq!(read_all(&p), p.size_bytes());
    check("a read from the start", baseline);

    // A time lookup and a scrub walk segments too.
    let (offset, _) = p
        .offset_for_timestamp((n * 64 / 2) as i64)
        .unwrap()
        .unwrap();
    assert_eq!(offset, (n * 64 / 2) as i64);
    p.scrub(|_| true).unwrap();
    check("a time lookup and a scrub", baseline);
    drop(p);

    // Recovery walks the last segment; an unclean start (no clean-shutdown marker) checks
    // its CRCs, and reads check the closed segments' CRCs as they first reach them.
    log.close().unwrap();
    std::fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
    let log = open();
    let p = log.topic("t").unwrap().partitions()[0].clone();
    check("recovery", baseline);
    assert_eq!(read_all(&p), p.size_bytes());
    check("a read from the start after an unclean start", baseline);
    log.close().unwrap();
}
