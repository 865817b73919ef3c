//! Compaction (the log cleaner) against a model: random keyed appends (tombstones among
//! them), cleaner passes, reopens and power cuts in the middle of a pass (after any number of
//! file changes: every write, fsync, rename and removal of the pass is a possible crash point),
//! over a storage fake whose power cut keeps of every file only what its last fsync covered.
//!
//! After every step: each record read is the one appended at its offset (offsets never
//! change), offsets rise strictly (nothing served twice), every key's latest record is there,
//! every record the last completed pass did not reach is there, and after a completed pass no
//! record it reached survives a later record of its key.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::sync::Arc;

use log_core::batch::{self, DecodedRecord};
use log_core::io::{Faults, FaultyStorage};
use log_core::{
    CleanerOptions, CleanupPolicy, Durability, Log, LogOptions, Partition, TopicConfig,
};
use proptest::prelude::*;

/// A record as appended: its key and value (`None`: a tombstone).
type Appended = (Vec<u8>, Option<Vec<u8>>);

#[derive(Clone, Debug)]
enum Op {
    /// One batch of records of these keys (of 8), every fifth a tombstone.
    Append {
        keys: Vec<u8>,
        compressed: bool,
    },
    Clean,
    Reopen,
    /// A pass whose power goes after this many file changes, then a reopen.
    CrashInClean {
        changes: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (prop::collection::vec(0u8..8, 1..6), any::<bool>())
            .prop_map(|(keys, compressed)| Op::Append { keys, compressed }),
        2 => Just(Op::Clean),
        1 => Just(Op::Reopen),
        2 => (0u16..40).prop_map(|changes| Op::CrashInClean { changes }),
    ]
}

/// The cleaner's options with a 1 MiB offset map.
fn small_map() -> log_core::CleanerOptions {
    log_core::CleanerOptions {
        dedupe_buffer_bytes: 1 << 20,
        ..log_core::CleanerOptions::default()
    }
}

fn config() -> TopicConfig {
    let mut config = TopicConfig {
        segment_bytes: 1024,
        index_interval_bytes: 100,
        retention_ms: None,
        durability: Durability::ALWAYS,
        cleanup: CleanupPolicy::parse("compact").unwrap(),
        ..TopicConfig::default()
    };
    config.set("min.cleanable.dirty.ratio", "0").unwrap();
    config
}

fn open(dir: &std::path::Path) -> (Log, Arc<Faults>) {
    let faults = Faults::new();
    let options = LogOptions {
        storage: Arc::new(FaultyStorage::new(faults.clone())),
        cleaner: CleanerOptions {
            enabled: false,
            ..CleanerOptions::default()
        },
        ..LogOptions::default()
    };
    (Log::open_with_options(dir, options).unwrap(), faults)
}

struct Harness {
    dir: tempfile::TempDir,
    faults: Arc<Faults>,
    log: Option<Log>,
    /// Every record appended, by offset.
    appended: BTreeMap<i64, Appended>,
    /// Records from here on are all there: where the furthest pass reached.
    cleaned_to: i64,
    serial: u64,
}

impl Harness {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (log, faults) = open(dir.path());
        log.create_topic("c", 1, config()).unwrap();
        Harness {
            dir,
            faults,
            log: Some(log),
            appended: BTreeMap::new(),
            cleaned_to: 0,
            serial: 0,
        }
    }

    fn partition(&self) -> Arc<Partition> {
        self.log.as_ref().unwrap().topic("c").unwrap().partitions()[0].clone()
    }

    fn reopen(&mut self) {
        self.log = None;
        let (log, faults) = open(self.dir.path());
        self.log = Some(log);
        self.faults = faults;
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Append { keys, compressed } => {
                let records: Vec<Appended> = keys
                    .iter()
                    .map(|k| {
                        self.serial += 1;
                        let value = (!self.serial.is_multiple_of(5))
                            .then(|| format!("v{}-{k}", self.serial).into_bytes());
                        (vec![b'k', *k], value)
                    })
                    .collect();
                let new: Vec<batch::NewRecord> = records
                    .iter()
                    .map(|(k, v)| (Some(&k[..]), v.as_deref(), 1_000))
                    .collect();
                let bytes = if *compressed {
                    batch::build_with(&new, kafka_protocol::records::Compression::Lz4)
                } else {
                    batch::build(&new)
                };
                let info = self.partition().append(&bytes).unwrap();
                for (i, record) in records.into_iter().enumerate() {
                    self.appended.insert(info.base_offset + i as i64, record);
                }
            }
            Op::Clean => {
                let report = self.partition().clean(&small_map(), 2_000, |_| {}).unwrap();
                if let Some(report) = report {
                    self.cleaned_to = report.cleaned_to;
                    self.check_compacted_below(report.cleaned_to);
                }
            }
            Op::Reopen => self.reopen(),
            Op::CrashInClean { changes } => {
                self.faults.cut_power_after(u64::from(*changes));
                let cleaned = self.partition().clean(&small_map(), 2_000, |_| {});
                let finished = !self.faults.power_is_off();
                self.log = None;
                self.faults.restore_power().unwrap();
                self.reopen();
                // A pass cut short may have swapped some of its groups in: whatever lies past
                // the pass's reach (recorded before its first swap) is untouched.
                let reach = std::fs::read(self.partition().dir().join("cleaner-reach"))
                    .map_or(0, |b| i64::from_be_bytes(b[1..9].try_into().unwrap()));
                self.cleaned_to = self.cleaned_to.max(reach);
                if let (true, Ok(Some(report))) = (finished, cleaned) {
                    assert_eq!(self.partition().dirtiness(0).first_dirty, report.cleaned_to);
                    self.check_compacted_below(report.cleaned_to);
                }
            }
        }
        self.check();
    }

    fn read_all(&self) -> Vec<DecodedRecord> {
        let partition = self.partition();
        let mut offset = partition.log_start_offset();
        let mut out = Vec::new();
        while offset < partition.log_end_offset() {
            let read = partition.read(offset, 1 << 16).unwrap();
            if read.records.is_empty() {
                break;
            }
            let records = batch::decode(&read.records).unwrap();
            let next = records.last().map_or(offset, |r| r.offset + 1);
            out.extend(records.into_iter().filter(|r| r.offset >= offset));
            // A batch whose last records were removed still spans its offsets.
            let batch_end = record_batch::parse_all(&read.records)
                .ok()
                .or_else(|| {
                    let mut at = 0;
                    let mut headers = Vec::new();
                    while at < read.records.len() {
                        let h = record_batch::BatchHeader::read(&read.records[at..]).ok()?;
                        at += h.size as usize;
                        headers.push(h);
                    }
                    Some(headers)
                })
                .and_then(|h| h.last().map(|h| h.next_offset()))
                .unwrap_or(next);
            offset = next.max(batch_end);
        }
        out
    }

    fn check(&self) {
        let read = self.read_all();
        let mut seen = BTreeMap::new();
        for record in &read {
            let (key, value) = self
                .appended
                .get(&record.offset)
                .unwrap_or_else(|| panic!("offset {} was never appended", record.offset));
            assert_eq!(
                record.key.as_deref(),
                Some(&key[..]),
                "offset {}",
                record.offset
            );
            assert_eq!(
                record.value.as_deref(),
                value.as_deref(),
                "offset {}",
                record.offset
            );
            assert!(
                seen.insert(record.offset, ()).is_none(),
                "offset {} served twice",
                record.offset
            );
        }
        let offsets: Vec<i64> = read.iter().map(|r| r.offset).collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
        let mut latest = BTreeMap::new();
        for (offset, (key, _)) in &self.appended {
            latest.insert(key.clone(), *offset);
        }
        for (key, offset) in latest {
            assert!(
                seen.contains_key(&offset),
                "the latest record of {key:?} ({offset}) is gone"
            );
        }
        for offset in self.appended.range(self.cleaned_to..).map(|(o, _)| *o) {
            assert!(
                seen.contains_key(&offset),
                "offset {offset}, past the cleaned part, is gone"
            );
        }
    }

    /// After a pass that ended at `end`: below it, no record survives a later one of its key
    /// below `end`.
    fn check_compacted_below(&self, end: i64) {
        let read = self.read_all();
        let mut last_below: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        for (offset, (key, _)) in self.appended.range(..end) {
            last_below.insert(key.clone(), *offset);
        }
        for record in read.iter().filter(|r| r.offset < end) {
            let key = record.key.as_deref().unwrap().to_vec();
            assert_eq!(
                last_below.get(&key),
                Some(&record.offset),
                "offset {} of {key:?} survived a later record of its key",
                record.offset
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_the_latest_of_each_key_through_crashes(ops in prop::collection::vec(op(), 1..40)) {
        let mut h = Harness::new();
        for op in &ops {
            h.apply(op);
        }
        // A last full pass, and the log read again after a reopen.
        h.apply(&Op::Clean);
        h.apply(&Op::Reopen);
    }
}

/// KIP-534: a tombstone stays for `delete.retention.ms` after the pass that first cleans its
/// batch, however old its own timestamp, then a pass removes it.
#[test]
fn a_tombstone_stays_for_delete_retention_ms_after_its_first_clean() {
    let h = Harness::new();
    let partition = h.partition();
    let mut config = partition.config();
    config.set("delete.retention.ms", "10000").unwrap();
    partition.set_config(config);
    let append = |key: &[u8], value: Option<&[u8]>| {
        // Batches of ~1 KiB, so each append rolls the 1 KiB segments.
        let padding = vec![b'p'; 900];
        let records: Vec<batch::NewRecord> = vec![
            (Some(key), value, 1_000),
            (Some(b"pad"), Some(&padding[..]), 1_000),
        ];
        partition.append(&batch::build(&records)).unwrap();
    };
    let tombstoned = |read: &[DecodedRecord]| {
        read.iter()
            .any(|r| r.key.as_deref() == Some(&b"gone"[..]) && r.value.is_none())
    };
    append(b"gone", Some(b"v"));
    append(b"gone", None);
    append(b"other", Some(b"x"));
    // First pass at t=2000: the tombstone's batch gets the horizon 12000.
    assert!(partition
        .clean(&small_map(), 2_000, |_| {})
        .unwrap()
        .is_some());
    assert!(tombstoned(&h.read_all()), "kept after its first clean");
    append(b"other", Some(b"y"));
    assert!(partition
        .clean(&small_map(), 11_999, |_| {})
        .unwrap()
        .is_some());
    assert!(tombstoned(&h.read_all()), "kept until the horizon");
    append(b"other", Some(b"z"));
    assert!(partition
        .clean(&small_map(), 12_000, |_| {})
        .unwrap()
        .is_some());
    let read = h.read_all();
    assert!(
        !tombstoned(&read),
        "removed once the horizon passed: {read:?}"
    );
    assert!(
        read.iter().all(|r| r.timestamp == 1_000),
        "timestamps stay: {read:?}"
    );
}

/// The headers of every batch of `partition`, from its start.
fn headers(partition: &log_core::Partition) -> Vec<record_batch::BatchHeader> {
    partition
        .batch_headers(0)
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A producer's last batch whose records all go stays as an empty batch (as in Kafka), so its
/// sequence is still in the log; once the producer writes again further on, it goes.
#[test]
fn a_producers_last_batch_stays_empty_until_the_producer_writes_again() {
    let h = Harness::new();
    let partition = h.partition();
    let padding = vec![b'p'; 900];
    // Batches of ~1 KiB, so each append rolls the 1 KiB segments.
    let plain = |key: &[u8]| {
        let records: Vec<batch::NewRecord> = vec![
            (Some(key), Some(b"v"), 1_000),
            (Some(b"pad"), Some(&padding), 1_000),
        ];
        batch::build(&records)
    };
    let produced = |key: &[u8], sequence: i32| {
        let records: Vec<batch::NewRecord> = vec![
            (Some(key), Some(b"v"), 1_000),
            (Some(b"pad"), Some(&padding), 1_000),
        ];
        batch::build_for_producer(&records, 7, 0, sequence)
    };
    partition.append(&produced(b"k", 0)).unwrap();
    partition.append(&plain(b"k")).unwrap();
    partition.append(&plain(b"tail")).unwrap();
    let now = 2_000;
    assert!(partition
        .clean(&small_map(), now, |_| {})
        .unwrap()
        .is_some());
    let first = headers(&partition)[0];
    assert_eq!(
        (
            first.base_offset,
            first.record_count,
            first.last_offset_delta
        ),
        (0, 0, 1),
        "an empty batch over the producer's offsets"
    );
    assert_eq!((first.producer_id, first.base_sequence), (7, 0));
    assert!(
        h.read_all().iter().all(|r| r.offset != 0),
        "none of its records are served"
    );

    // The producer writes again: its empty batch is no longer its last, and goes.
    partition.append(&produced(b"k", 2)).unwrap();
    partition.append(&plain(b"tail")).unwrap();
    assert!(partition
        .clean(&small_map(), now, |_| {})
        .unwrap()
        .is_some());
    let after = headers(&partition);
    assert!(
        after.iter().all(|h| h.base_offset != 0),
        "the empty batch went: {after:?}"
    );

    // A producer expired (`producer.id.expiration.ms` past its last batch) keeps none.
    partition.append(&plain(b"k")).unwrap();
    partition.append(&plain(b"tail")).unwrap();
    let expired = log_core::CleanerOptions {
        producer_id_expiration: std::time::Duration::from_millis(1),
        ..small_map()
    };
    assert!(partition.clean(&expired, 10_000, |_| {}).unwrap().is_some());
    assert!(
        headers(&partition).iter().all(|h| h.producer_id != 7),
        "{:?}",
        headers(&partition)
    );
}
