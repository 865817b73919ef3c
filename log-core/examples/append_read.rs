//! Appends a million 100-byte records to a log-core partition, reads them all back, and prints
//! the rates and what the records cost on disk.
//!
//! `cargo run --release -p log-core --example append_read [DATA_DIR]` (default: a temp dir).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::error::Error;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use log_core::batch::NewRecord;
use log_core::{batch, Log, Partition, Topic, TopicConfig, TopicError};

const RECORDS: usize = 1_000_000;
const PER_BATCH: usize = 160;
const VALUE: usize = 100;

fn main() -> Result<(), Box<dyn Error>> {
    let temp = tempfile::tempdir()?;
    let dir = std::env::args()
        .nth(1)
        .map_or_else(|| temp.path().to_path_buf(), Into::into);
    let log = Log::open(&dir)?;
    let topic = example_topic(&log)?;
    let partition = topic.partitions()[0].clone();
    let first = partition.log_end_offset();

    let value = vec![b'v'; VALUE];
    let entries: Vec<NewRecord> = (0..PER_BATCH)
        .map(|_| (None, Some(value.as_slice()), log_core::now_ms()))
        .collect();
    let one = batch::build(&entries);
    let batches = RECORDS / PER_BATCH;
    let start = Instant::now();
    for _ in 0..batches {
        partition.append(&one)?;
    }
    let append = start.elapsed();
    let appended = batches * PER_BATCH;

    let start = Instant::now();
    let (read_records, read_bytes) = read_back(&partition, first)?;
    let read = start.elapsed();
    assert_eq!(read_records, appended, "every record read back");

    let mb = (batches * one.len()) as f64 / 1e6;
    println!(
        "appended {appended} records ({mb:.1} MB) in {batches} batches to {}",
        dir.display()
    );
    println!(
        "append: {:.0} MB/s, {:.0} records/s",
        mb / append.as_secs_f64(),
        appended as f64 / append.as_secs_f64()
    );
    println!(
        "read back (CRC-checked): {:.0} MB/s, {:.0} records/s",
        read_bytes as f64 / 1e6 / read.as_secs_f64(),
        read_records as f64 / read.as_secs_f64()
    );
    println!(
        "on disk: {:.1} bytes a record for {VALUE}-byte values ({} bytes a batch of {PER_BATCH}; batch header 61 bytes)",
        one.len() as f64 / PER_BATCH as f64,
        one.len()
    );
    drop(partition);
    drop(topic);
    log.close()?;
    print_index_overhead(&dir.join("example-0"))?;
    Ok(())
}

/// The example's topic, created if missing with 16 MiB segments, so that closed segments
/// (and their index files) exist.
fn example_topic(log: &Log) -> Result<Arc<Topic>, TopicError> {
    Ok(match log.topic("example") {
        Some(t) => t,
        None => log.create_topic(
            "example",
            1,
            TopicConfig {
                segment_bytes: 16 << 20,
                ..TopicConfig::default()
            },
        )?,
    })
}

/// Reads the partition from `first` to its end, checking every batch's CRC: the records and
/// bytes read.
fn read_back(partition: &Partition, first: i64) -> Result<(usize, usize), Box<dyn Error>> {
    let (mut offset, mut read_records, mut read_bytes) = (first, 0usize, 0usize);
    while offset < partition.log_end_offset() {
        let read = partition.read(offset, 1 << 20)?;
        let headers = record_batch::validate_all(&read.records)?;
        read_bytes += read.records.len();
        for h in headers {
            read_records += h.record_count as usize;
            offset = h.next_offset();
        }
    }
    Ok((read_records, read_bytes))
}

/// Prints how many bytes the index files of the partition directory `dir` take for its log.
fn print_index_overhead(dir: &Path) -> std::io::Result<()> {
    let (mut log_bytes, mut index_bytes) = (0u64, 0u64);
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let len = entry.metadata()?.len();
        match entry.path().extension().and_then(|e| e.to_str()) {
            Some("log") => log_bytes += len,
            Some("index" | "timeindex") => index_bytes += len,
            _ => {}
        }
    }
    println!(
        "index overhead: {index_bytes} index bytes for {log_bytes} log bytes ({:.3}%; the active segment's index is in memory until it rolls)",
        100.0 * index_bytes as f64 / log_bytes.max(1) as f64
    );
    Ok(())
}
