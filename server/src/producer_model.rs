//! A model-based test across the seams of idempotence: random idempotent produces from three
//! producers to one compacted partition of small segments, retries of each producer's last
//! batch, cleaner passes, DeleteRecords, and restarts (a clean close, or a crash: the files left
//! without the clean shutdown's marker, as log-core's model test crashes), through the broker's own producer state
//! ([`crate::producers`]) and log-core. Checked after every step: an offset is never handed
//! out twice, a retry is answered at its first offsets and never stored again, the latest value
//! of each key is what a read serves, and after a restart the rebuilt state answers each
//! producer's retry at its offsets and takes its next batch.
//!
//! The state is rebuilt from the producer snapshot written at each roll and at a clean close,
//! then the batches after it (`producers/`): every producer is known after any restart, but
//! one whose last batch DeleteRecords removed (as in Kafka).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use log_core::{batch, CleanupPolicy, Durability, Log, Partition, TopicConfig};
use proptest::prelude::*;

use crate::producers::{Producers, Verdict};

const PRODUCERS: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    /// A new batch of producer `.0` with these keys (values are unique).
    Produce(usize, Vec<u8>),
    /// Producer `.0` sends its last batch again (its ack was lost).
    Retry(usize),
    Clean,
    /// DeleteRecords up to this share (in 1/8ths) of the log end.
    DeleteRecords(u8),
    Reopen,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..PRODUCERS, prop::collection::vec(0u8..6, 1..5)).prop_map(|(p, k)| Op::Produce(p, k)),
        3 => (0..PRODUCERS).prop_map(Op::Retry),
        2 => Just(Op::Clean),
        1 => (0u8..4).prop_map(Op::DeleteRecords),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
    ]
}

/// A [`Verdict`], a duplicate by its offsets only (its log start is the partition's now).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Append,
    Duplicate(i64, i64),
    Reject(i16),
}

impl Answer {
    fn of(verdict: Verdict) -> Answer {
        match verdict {
            Verdict::Append => Answer::Append,
            Verdict::Duplicate(info) => Answer::Duplicate(info.base_offset, info.last_offset),
            Verdict::Reject(e) => Answer::Reject(e.code()),
        }
    }
}

/// One producer as its client sees it: its id, the next sequence, and its last batch with
/// the offset it was acknowledged at.
#[derive(Debug, Clone)]
struct Client {
    id: i64,
    next_sequence: i32,
    last: Option<(bytes::Bytes, i64)>,
    /// Its last batch is below the log start: the broker forgot it at a restart and treats
    /// it as new, and it sends no retry of that batch.
    forgotten: bool,
}

struct World {
    dir: tempfile::TempDir,
    log: Option<Log>,
    producers: Producers,
    clients: Vec<Client>,
    /// Offset → (key, value) of every record acknowledged.
    acked: BTreeMap<i64, (u8, String)>,
    values: u64,
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

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path()).unwrap();
        log.create_topic("t", 1, config()).unwrap();
        World {
            dir,
            log: Some(log),
            producers: Producers::default(),
            clients: (0..PRODUCERS)
                .map(|i| Client {
                    id: 1000 + i as i64,
                    next_sequence: 0,
                    last: None,
                    forgotten: false,
                })
                .collect(),
            acked: BTreeMap::new(),
            values: 0,
        }
    }

    fn partition(&self) -> std::sync::Arc<Partition> {
        self.log.as_ref().unwrap().topic("t").unwrap().partitions()[0].clone()
    }

    /// What the broker's produce path does with `bytes`: check, append, record.
    fn produce(&self, bytes: &[u8]) -> Verdict {
        let partition = self.partition();
        let headers = record_batch::parse_all(bytes).unwrap();
        let state = self.producers.partition("t", 0);
        let mut state = state.lock().unwrap();
        match state.check(&headers) {
            Verdict::Append => {
                let info = partition.append(bytes).unwrap();
                state.record(&headers, info, 1_000);
                if info.rolled {
                    state
                        .save_snapshot(partition.dir(), info.last_offset + 1)
                        .unwrap();
                }
                Verdict::Duplicate(info)
            }
            other => other,
        }
    }

    /// Starts again on the files: a new log and producer state rebuilt from it.
    fn restart(&mut self, clean: bool) {
        let log = self.log.take().unwrap();
        if clean {
            self.producers.save_snapshots(&log);
            log.close().unwrap();
        } else {
            // As log-core's model test crashes: the files as they are, without the clean
            // shutdown's marker, so the open recovers as after kill -9.
            drop(log);
            let _ = std::fs::remove_file(self.dir.path().join(".clean-shutdown"));
        }
        self.log = Some(Log::open(self.dir.path()).unwrap());
        self.producers = Producers::default();
        self.producers.rebuild("t", 0, &self.partition());
        // Each producer whose last batch the rebuild read is known as it was: its last batch
        // a duplicate at its offsets, its next batch in sequence.
        let after = self.verdicts();
        for (i, answers) in after.iter().enumerate() {
            if !self.remembered(i) {
                self.clients[i].forgotten = true;
            }
            if self.clients[i].forgotten {
                continue;
            }
            if let Some((bytes, base)) = &self.clients[i].last {
                let count = record_batch::BatchHeader::read(bytes).unwrap().record_count;
                let expected = Answer::Duplicate(*base, base + i64::from(count) - 1);
                assert_eq!(
                    *answers,
                    (Some(expected), Answer::Append),
                    "producer {i} after the restart"
                );
            }
        }
    }

    /// How the state answers each producer's retry and next batch (nothing is appended).
    fn verdicts(&self) -> Vec<(Option<Answer>, Answer)> {
        let state = self.producers.partition("t", 0);
        let state = state.lock().unwrap();
        self.clients
            .iter()
            .map(|c| {
                let answer = |bytes: &[u8]| {
                    Answer::of(state.check(&record_batch::parse_all(bytes).unwrap()))
                };
                let retry = c.last.as_ref().map(|(bytes, _)| answer(bytes));
                let next = batch::build_for_producer(
                    &[(Some(b"k"), Some(b"v"), 1)],
                    c.id,
                    0,
                    c.next_sequence,
                );
                (retry, answer(&next))
            })
            .collect()
    }

    /// Whether producer `i`'s last batch is at or past the log start (what a restart keeps).
    fn remembered(&self, i: usize) -> bool {
        let from = self.partition().log_start_offset();
        self.clients[i]
            .last
            .as_ref()
            .is_some_and(|(_, offset)| *offset >= from)
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Produce(p, keys) => {
                let values: Vec<String> = keys
                    .iter()
                    .map(|_| {
                        self.values += 1;
                        format!("v{}", self.values)
                    })
                    .collect();
                let key_bytes: Vec<[u8; 1]> = keys.iter().map(|k| [*k]).collect();
                let records: Vec<batch::NewRecord> = key_bytes
                    .iter()
                    .zip(&values)
                    .map(|(k, v)| (Some(&k[..]), Some(v.as_bytes()), 1_000))
                    .collect();
                let c = &self.clients[*p];
                let bytes = batch::build_for_producer(&records, c.id, 0, c.next_sequence);
                let Verdict::Duplicate(info) = self.produce(&bytes) else {
                    panic!("a new batch in sequence is appended");
                };
                assert!(
                    self.acked.range(info.base_offset..).next().is_none(),
                    "offset {} handed out again",
                    info.base_offset
                );
                for (i, (k, v)) in keys.iter().zip(values).enumerate() {
                    self.acked.insert(info.base_offset + i as i64, (*k, v));
                }
                let c = &mut self.clients[*p];
                c.next_sequence += keys.len() as i32;
                c.last = Some((bytes, info.base_offset));
                c.forgotten = false;
            }
            Op::Retry(p) => {
                let Some((bytes, offset)) = self.clients[*p].last.clone() else {
                    return;
                };
                if self.clients[*p].forgotten {
                    return;
                }
                let end = self.partition().log_end_offset();
                match self.produce(&bytes) {
                    Verdict::Duplicate(info) => assert_eq!(info.base_offset, offset),
                    other => panic!("retry answered {other:?}"),
                }
                assert_eq!(
                    self.partition().log_end_offset(),
                    end,
                    "a retry stored again"
                );
            }
            Op::Clean => {
                let options = log_core::CleanerOptions {
                    dedupe_buffer_bytes: 1 << 20,
                    ..log_core::CleanerOptions::default()
                };
                self.partition().clean(&options, 2_000, |_| {}).unwrap();
            }
            Op::DeleteRecords(eighths) => {
                let partition = self.partition();
                let to = partition.log_end_offset() * i64::from(*eighths) / 8;
                if to > partition.log_start_offset() {
                    partition.delete_records_before(to).unwrap();
                }
            }
            Op::Reopen => self.restart(true),
            Op::Crash => self.restart(false),
        }
        self.check_reads();
    }

    /// Every record served is one acknowledged at that offset, and each key's latest
    /// acknowledged record at or past the log start is served.
    fn check_reads(&self) {
        let partition = self.partition();
        let start = partition.log_start_offset();
        let mut served = BTreeMap::new();
        let mut offset = start;
        while offset < partition.log_end_offset() {
            let read = partition.read(offset, 1 << 20).unwrap();
            if read.records.is_empty() {
                break;
            }
            for r in batch::decode(&read.records).unwrap() {
                if r.offset >= offset {
                    let value = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
                    served.insert(r.offset, (r.key.unwrap()[0], value));
                }
            }
            let mut at = 0;
            while at < read.records.len() {
                let h = record_batch::BatchHeader::read(&read.records[at..]).unwrap();
                offset = h.next_offset();
                at += h.size as usize;
            }
        }
        for (offset, record) in &served {
            assert_eq!(self.acked.get(offset), Some(record), "offset {offset}");
        }
        let mut latest: BTreeMap<u8, i64> = BTreeMap::new();
        for (offset, (key, _)) in self.acked.range(start..) {
            latest.insert(*key, *offset);
        }
        for (key, offset) in latest {
            assert!(
                served.contains_key(&offset),
                "key {key}'s latest, at {offset}, is served"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn idempotence_holds_across_compaction_deletion_and_restarts(ops in prop::collection::vec(op(), 1..60)) {
        let mut world = World::new();
        for op in &ops {
            world.apply(op);
        }
    }
}

/// A producer whose last batch the cleaner empties (its key written again by another) is still
/// known after a restart: the cleaner keeps the batch empty.
#[test]
fn a_producers_emptied_last_batch_keeps_it_known_after_a_restart() {
    let mut world = World::new();
    for op in [
        Op::Produce(2, vec![0]),
        Op::Reopen,
        Op::Produce(0, vec![0]),
        Op::Reopen,
        Op::Produce(0, vec![1]),
        Op::Clean,
        Op::Reopen,
        Op::Retry(2),
    ] {
        world.apply(&op);
    }
    assert!(!world.clients[2].forgotten);
}
