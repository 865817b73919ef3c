//! log-core against the machine's raw rate for the same bytes, measured in the same run.
//!
//! Each group has a `raw` baseline (plain `write`/`fdatasync`/`read` on a file in the same
//! folder) beside the log-core figure, so the ratio is what BENCHMARKS.md quotes.
//! Run: `cargo bench -p lograil-benches --bench log_core`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use log_core::batch::NewRecord;
use log_core::{batch, Durability, Log, Partition, TopicConfig};

/// A batch of `count` records of `size` bytes each (values of pseudo-random bytes, so the
/// disk can't cheat with zero pages).
fn make_batch(count: usize, size: usize) -> Bytes {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let values: Vec<Vec<u8>> = (0..count)
        .map(|_| {
            (0..size)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect()
        })
        .collect();
    let entries: Vec<NewRecord> = values
        .iter()
        .map(|v| (None, Some(v.as_slice()), 1_700_000_000_000))
        .collect();
    batch::build(&entries)
}

/// The data dir: under the target dir, on the same disk as the build, not a tmpfs.
fn bench_dir() -> tempfile::TempDir {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-data");
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(base).unwrap()
}

fn partition(log: &Log, durability: Durability) -> Arc<Partition> {
    let config = TopicConfig {
        durability,
        max_message_bytes: 4 << 20,
        ..TopicConfig::default()
    };
    log.create_topic("bench", 1, config).unwrap().partitions()[0].clone()
}

fn raw_file(dir: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("raw.bin"))
        .unwrap()
}

/// Appends with durability `Never` vs a plain write loop of the same batches.
fn append_never(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_never");
    group
        .measurement_time(Duration::from_secs(4))
        .sample_size(20);
    for (label, count, size) in [("100B_x_16KiB", 160, 100), ("1KiB_x_1MiB", 1000, 1024)] {
        let batch = make_batch(count, size);
        group.throughput(Throughput::Bytes(batch.len() as u64));
        group.bench_with_input(BenchmarkId::new("raw_write", label), &batch, |b, batch| {
            b.iter_custom(|iters| {
                let dir = bench_dir();
                let mut file = raw_file(dir.path());
                let start = Instant::now();
                for _ in 0..iters {
                    file.write_all(batch).unwrap();
                }
                start.elapsed()
            })
        });
        group.bench_with_input(BenchmarkId::new("log_core", label), &batch, |b, batch| {
            b.iter_custom(|iters| {
                let dir = bench_dir();
                let log = Log::open(dir.path()).unwrap();
                let p = partition(&log, Durability::PAGE_CACHE);
                let start = Instant::now();
                for _ in 0..iters {
                    p.append(batch).unwrap();
                }
                start.elapsed()
            })
        });
    }
    group.finish();
}

/// `Always` with 4 concurrent appenders (group commit) vs one writer doing write + fdatasync
/// per batch.
fn append_always(c: &mut Criterion) {
    const APPENDERS: u64 = 4;
    let mut group = c.benchmark_group("append_always");
    group
        .measurement_time(Duration::from_secs(4))
        .sample_size(10);
    let batch = make_batch(160, 100);
    let label = "100B_x_16KiB";
    group.throughput(Throughput::Bytes(batch.len() as u64));
    group.bench_with_input(
        BenchmarkId::new("raw_write_fdatasync", label),
        &batch,
        |b, batch| {
            b.iter_custom(|iters| {
                let dir = bench_dir();
                let mut file = raw_file(dir.path());
                let start = Instant::now();
                for _ in 0..iters {
                    file.write_all(batch).unwrap();
                    file.sync_data().unwrap();
                }
                start.elapsed()
            })
        },
    );
    group.bench_with_input(
        BenchmarkId::new("log_core_4_appenders", label),
        &batch,
        |b, batch| {
            b.iter_custom(|iters| {
                let dir = bench_dir();
                let log = Log::open(dir.path()).unwrap();
                let p = partition(&log, Durability::ALWAYS);
                let start = Instant::now();
                std::thread::scope(|s| {
                    for t in 0..APPENDERS {
                        let p = p.clone();
                        // Split `iters` appends over the appenders.
                        let mine = iters / APPENDERS + u64::from(t < iters % APPENDERS);
                        s.spawn(move || {
                            for _ in 0..mine {
                                p.append(batch).unwrap();
                            }
                        });
                    }
                });
                start.elapsed()
            })
        },
    );
    group.finish();
}

/// Reading a whole 256 MiB log (from the page cache), copying each returned slice into a 1 MiB
/// buffer as a socket write would, vs `read` of the same bytes from a plain file.
fn sequential_read(c: &mut Criterion) {
    const TOTAL: usize = 256 << 20;
    const CHUNK: usize = 1 << 20;
    let batch = make_batch(160, 100);
    let dir = bench_dir();
    let log = Log::open(dir.path()).unwrap();
    let p = partition(&log, Durability::PAGE_CACHE);
    let mut raw = raw_file(dir.path());
    let mut written = 0;
    while written < TOTAL {
        p.append(&batch).unwrap();
        raw.write_all(&batch).unwrap();
        written += batch.len();
    }
    drop(raw);
    let end = p.log_end_offset();

    let mut group = c.benchmark_group("sequential_read");
    group
        .measurement_time(Duration::from_secs(5))
        .sample_size(20);
    group.throughput(Throughput::Bytes(written as u64));
    let mut buf = vec![0u8; CHUNK];
    group.bench_function("raw_read/256MiB", |b| {
        b.iter(|| {
            let mut file = File::open(dir.path().join("raw.bin")).unwrap();
            let mut total = 0;
            loop {
                let n = file.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                total += n;
            }
            assert_eq!(total, written);
        })
    });
    group.bench_function("log_core/256MiB", |b| {
        b.iter(|| {
            let mut offset = 0;
            let mut total = 0;
            while offset < end {
                let read = p.read(offset, CHUNK).unwrap();
                let records = &read.records;
                buf[..records.len()].copy_from_slice(records);
                total += records.len();
                // The next offset after the last whole batch, from its header.
                let mut at = 0;
                while at < records.len() {
                    let h = record_batch::BatchHeader::parse(&records[at..]).unwrap();
                    offset = h.next_offset();
                    at += h.size as usize;
                }
            }
            assert_eq!(total, written);
        })
    });
    group.finish();
}

/// What validating a batch on append costs beyond its CRC-32C: `crc` is the checksum alone,
/// `validate` the whole check (header, CRC, and the walk of the records' lengths and offset
/// deltas against the header's count), on the same bytes.
fn validate(c: &mut Criterion) {
    let mut group = c.benchmark_group("validate");
    group
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    for (label, count, size) in [
        ("10B_x_160", 160, 10),
        ("100B_x_16KiB", 160, 100),
        ("1KiB_x_1MiB", 1000, 1024),
    ] {
        let batch = make_batch(count, size);
        group.throughput(Throughput::Bytes(batch.len() as u64));
        group.bench_with_input(BenchmarkId::new("crc", label), &batch, |b, batch| {
            b.iter(|| record_batch::compute_crc(batch))
        });
        group.bench_with_input(BenchmarkId::new("validate", label), &batch, |b, batch| {
            b.iter(|| record_batch::validate(batch).unwrap())
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    append_never,
    append_always,
    sequential_read,
    validate
);
criterion_main!(benches);
