//! Several appenders under `Durability::ALWAYS` while readers tail the partition: every
//! acknowledged batch is readable, offsets are contiguous, no reader ever sees a torn batch.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use log_core::batch::NewRecord;
use log_core::{batch, Durability, Log, TopicConfig};

const WRITERS: usize = 4;
const BATCHES: usize = 150;
const RECORDS: usize = 3;

#[test]
fn concurrent_appends_with_group_commit_and_tailing_readers() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path()).unwrap();
    let config = TopicConfig {
        durability: Durability::ALWAYS,
        segment_bytes: 16 * 1024,
        index_interval_bytes: 512,
        ..TopicConfig::default()
    };
    let p = log.create_topic("c", 1, config).unwrap().partitions()[0].clone();
    let done = Arc::new(AtomicBool::new(false));

    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (p, done) = (p.clone(), done.clone());
            std::thread::spawn(move || {
                let mut next = 0i64;
                let mut seen = 0usize;
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let read = p.read(next, 8 * 1024).unwrap();
                    if read.records.is_empty() {
                        if finished && next == p.log_end_offset() {
                            return seen;
                        }
                        std::thread::yield_now();
                        continue;
                    }
                    // Whole, valid batches only, starting exactly where we asked.
                    let headers = record_batch::validate_all(&read.records).unwrap();
                    assert_eq!(headers[0].base_offset, next);
                    for h in &headers {
                        assert_eq!(h.base_offset, next, "offsets are contiguous");
                        next = h.next_offset();
                        seen += h.record_count as usize;
                    }
                }
            })
        })
        .collect();

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let p = p.clone();
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0..BATCHES {
                    let values: Vec<String> =
                        (0..RECORDS).map(|j| format!("w{w}-{i}-{j}")).collect();
                    let entries: Vec<NewRecord> = values
                        .iter()
                        .map(|v| (None, Some(v.as_bytes()), 0))
                        .collect();
                    let info = p.append(&batch::build(&entries)).unwrap();
                    assert_eq!(info.last_offset - info.base_offset + 1, RECORDS as i64);
                    acked.push((info.base_offset, values));
                }
                acked
            })
        })
        .collect();

    let mut acked = BTreeMap::new();
    for (w, handle) in writers.into_iter().enumerate() {
        let mine = handle.join().unwrap();
        // Each writer's own appends are in its order.
        assert!(
            mine.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "writer {w}"
        );
        acked.extend(mine);
    }
    done.store(true, Ordering::Release);
    let total = WRITERS * BATCHES * RECORDS;
    for reader in readers {
        assert_eq!(reader.join().unwrap(), total);
    }
    assert!(p.segment_count() > 1, "the run should cross segment rolls");

    // Every acknowledged batch is where its acknowledgement said, with its values, after a
    // reopen too.
    drop(p);
    log.close().unwrap();
    let log = Log::open(dir.path()).unwrap();
    let p = log.topic("c").unwrap().partitions()[0].clone();
    assert_eq!(p.log_end_offset(), total as i64);
    for (base, values) in &acked {
        let read = p.read(*base, 1).unwrap();
        let records = batch::decode(&read.records).unwrap();
        assert_eq!(records[0].offset, *base);
        let got: Vec<String> = records
            .iter()
            .map(|r| String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap())
            .collect();
        assert_eq!(&got, values);
    }
}
