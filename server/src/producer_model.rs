//! A model-based test across the seams of idempotence and transactions: random produces from
//! three idempotent producers and one transactional producer (its transactions committed or
//! aborted) to one partition of small segments that is both compacted and bounded by
//! `retention.bytes`, retries of each producer's last batch, cleaner passes, retention,
//! DeleteRecords, and restarts (a clean close, or a crash: the files left without the clean
//! shutdown's marker, as log-core's model test crashes). Every produce and marker goes through
//! the broker's own append path ([`crate::appender::Appender`]: the producer checks, the
//! producer snapshot at each roll) on log-core. Checked after every step:
//! - an offset is never handed out twice, and every record served is the one written there;
//! - a retry is answered at its first offsets and never stored again;
//! - `read_committed` never serves a record of an aborted or an open transaction, and serves
//!   the latest committed value of each key at or past the log start;
//! - after a restart, the rebuilt producer state is the state before it (epoch and last
//!   sequence of every producer whose last batch is at or past the log start): each retry is
//!   answered at its offsets, each next batch taken in sequence.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use log_core::{batch, Ack, CleanupPolicy, Log, Partition, TopicConfig};
use proptest::prelude::*;
use record_batch::{BatchHeader, ControlType};
use tokio::sync::Notify;

use crate::appender::{AppendMode, Appender, Batches, Marker, ProduceError};
use crate::metrics::Metrics;
use crate::producers::{ProducerIds, Producers};

/// Producers 0..IDEMPOTENT are idempotent; producer IDEMPOTENT is transactional.
const IDEMPOTENT: usize = 3;
const TRANSACTIONAL: usize = IDEMPOTENT;

#[derive(Debug, Clone)]
enum Op {
    /// A new batch of producer `.0` with these keys (values are unique); the transactional
    /// producer's opens its transaction if none is open.
    Produce(usize, Vec<u8>),
    /// Producer `.0` sends its last batch again (its ack was lost).
    Retry(usize),
    /// The transactional producer's transaction ends: committed (true) or aborted.
    EndTransaction(bool),
    Clean,
    Retention,
    /// DeleteRecords up to this share (in 1/8ths) of the log end.
    DeleteRecords(u8),
    Reopen,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..=TRANSACTIONAL, prop::collection::vec(0u8..6, 1..5))
            .prop_map(|(p, k)| Op::Produce(p, k)),
        3 => (0..=TRANSACTIONAL).prop_map(Op::Retry),
        3 => any::<bool>().prop_map(Op::EndTransaction),
        2 => Just(Op::Clean),
        1 => Just(Op::Retention),
        1 => (0u8..4).prop_map(Op::DeleteRecords),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
    ]
}

/// One producer as its client sees it: its id, the next sequence, and its last batch with
/// the offset it was acknowledged at.
#[derive(Debug, Clone)]
struct Client {
    id: i64,
    next_sequence: i32,
    last: Option<(Bytes, i64)>,
    /// Its last batch is below the log start: the broker forgot it at a restart and treats
    /// it as new, and it sends no retry of that batch.
    forgotten: bool,
}

struct World {
    dir: tempfile::TempDir,
    log: Option<Log>,
    producers: Producers,
    ids: ProducerIds,
    metrics: Metrics,
    appended: Notify,
    clients: Vec<Client>,
    /// Offset → (key, value) of every record written.
    written: BTreeMap<i64, (u8, String)>,
    /// The offsets of records committed: idempotent ones, and committed transactions'.
    committed: BTreeSet<i64>,
    /// The open transaction's records' offsets.
    open: Vec<i64>,
    /// Values of aborted transactions.
    aborted: BTreeSet<String>,
    values: u64,
}

fn config() -> TopicConfig {
    let mut config = TopicConfig {
        segment_bytes: 1024,
        index_interval_bytes: 100,
        retention_ms: None,
        retention_bytes: Some(1024),
        cleanup: CleanupPolicy::parse("compact,delete").unwrap(),
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
        let ids = ProducerIds::open(dir.path()).unwrap();
        let clients = (0..=TRANSACTIONAL)
            .map(|_| Client {
                id: ids.allocate().unwrap(),
                next_sequence: 0,
                last: None,
                forgotten: false,
            })
            .collect();
        World {
            dir,
            log: Some(log),
            producers: Producers::default(),
            ids,
            metrics: Metrics::new(&crate::handlers::APIS),
            appended: Notify::new(),
            clients,
            written: BTreeMap::new(),
            committed: BTreeSet::new(),
            open: Vec::new(),
            aborted: BTreeSet::new(),
            values: 0,
        }
    }

    fn partition(&self) -> std::sync::Arc<Partition> {
        self.log.as_ref().unwrap().topic("t").unwrap().partitions()[0].clone()
    }

    fn appender(&self) -> Appender<'_> {
        Appender {
            log: self.log.as_ref().unwrap(),
            producers: &self.producers,
            producer_ids: &self.ids,
            metrics: &self.metrics,
            appended: &self.appended,
        }
    }

    /// The broker's produce path, acks=all: (first offset, last offset) stored or answered.
    fn produce(&self, bytes: &Bytes) -> Result<(i64, i64), ProduceError> {
        let batches = Batches::parse(bytes.clone());
        let appended = self.appender().append_records(
            "t",
            0,
            Some(&batches),
            Ack::All,
            AppendMode::Blocking,
        )?;
        appended.partition.await_durable(&appended.info).unwrap();
        Ok((appended.info.base_offset, appended.info.last_offset))
    }

    /// Starts again on the files: a new log and producer state rebuilt from it, which must be
    /// the state before for every producer still remembered.
    fn restart(&mut self, clean: bool) {
        let before = self.producer_state();
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
        for i in 0..self.clients.len() {
            if !self.remembered(i) {
                self.clients[i].forgotten = true;
            }
        }
        let after = self.producer_state();
        for (i, c) in self.clients.iter().enumerate() {
            if !c.forgotten && c.last.is_some() {
                assert_eq!(after.get(&c.id), before.get(&c.id), "producer {i} rebuilt");
            }
        }
    }

    /// Each producer's (epoch, last sequence), by id.
    fn producer_state(&self) -> BTreeMap<i64, (i16, i32)> {
        let state = self.producers.partition("t", 0);
        let state = state.lock().unwrap();
        state
            .active()
            .into_iter()
            .map(|(id, epoch, sequence, _)| (id, (epoch, sequence)))
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
            Op::Produce(p, keys) => self.produce_new(*p, keys),
            Op::Retry(p) => {
                let Some((bytes, offset)) = self.clients[*p].last.clone() else {
                    return;
                };
                if self.clients[*p].forgotten {
                    return;
                }
                let end = self.partition().next_offset();
                let (first, _) = self.produce(&bytes).expect("a retry is answered");
                assert_eq!(first, offset, "a retry answered elsewhere");
                assert_eq!(self.partition().next_offset(), end, "a retry stored again");
            }
            Op::EndTransaction(commit) => self.end_transaction(*commit),
            Op::Clean => {
                let options = log_core::CleanerOptions {
                    dedupe_buffer_bytes: 1 << 20,
                    ..log_core::CleanerOptions::default()
                };
                self.partition().clean(&options, 2_000, |_| {}).unwrap();
            }
            Op::Retention => {
                self.partition()
                    .apply_retention(log_core::now_ms())
                    .unwrap();
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

    fn produce_new(&mut self, p: usize, keys: &[u8]) {
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
        let c = &self.clients[p];
        let mut bytes = batch::build_for_producer(&records, c.id, 0, c.next_sequence).to_vec();
        if p == TRANSACTIONAL {
            record_batch::build::set_transactional(&mut bytes).unwrap();
        }
        let bytes = Bytes::from(bytes);
        let (first, _) = self
            .produce(&bytes)
            .expect("a new batch in sequence is appended");
        assert!(
            self.written.range(first..).next().is_none(),
            "offset {first} handed out again"
        );
        for (i, (k, v)) in keys.iter().zip(values).enumerate() {
            let offset = first + i as i64;
            self.written.insert(offset, (*k, v));
            if p == TRANSACTIONAL {
                self.open.push(offset);
            } else {
                self.committed.insert(offset);
            }
        }
        let c = &mut self.clients[p];
        c.next_sequence += keys.len() as i32;
        c.last = Some((bytes, first));
        c.forgotten = false;
    }

    /// The coordinator's marker for the transactional producer (nothing open: a marker that
    /// changes nothing, as Kafka writes it too).
    fn end_transaction(&mut self, commit: bool) {
        let id = self.clients[TRANSACTIONAL].id;
        let kind = if commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        };
        let marker = self
            .appender()
            .write_marker(
                "t",
                0,
                Marker {
                    producer_id: id,
                    producer_epoch: 0,
                    coordinator_epoch: 0,
                    kind,
                },
                AppendMode::Blocking,
            )
            .expect("the marker is written");
        marker.partition.await_durable(&marker.info).unwrap();
        for offset in std::mem::take(&mut self.open) {
            if commit {
                self.committed.insert(offset);
            } else {
                self.aborted.insert(self.written[&offset].1.clone());
            }
        }
    }

    /// What every read must show (see the module doc).
    fn check_reads(&self) {
        let partition = self.partition();
        let start = partition.log_start_offset();
        for (offset, record) in self.served(&partition, false) {
            assert_eq!(self.written.get(&offset), Some(&record), "offset {offset}");
        }
        let committed = self.served(&partition, true);
        for (offset, (_, value)) in &committed {
            assert!(
                !self.aborted.contains(value),
                "aborted {value} served at {offset}"
            );
            assert!(
                !self.open.contains(offset),
                "open {value} served at {offset}"
            );
        }
        let mut latest: BTreeMap<u8, i64> = BTreeMap::new();
        for offset in self.committed.range(start..) {
            latest.insert(self.written[offset].0, *offset);
        }
        let lso = partition.last_stable_offset();
        for (key, offset) in latest {
            assert!(
                offset >= lso || committed.contains_key(&offset),
                "key {key}'s latest committed value, at {offset}, is served"
            );
        }
    }

    /// The records a reader gets from the log start: all of them, or (`read_committed`)
    /// those below the last stable offset, aborted transactions' dropped as a client does
    /// with the aborted list a Fetch returns.
    fn served(&self, partition: &Partition, read_committed: bool) -> BTreeMap<i64, (u8, String)> {
        let mut served = BTreeMap::new();
        let mut offset = partition.log_start_offset();
        let end = partition.log_end_offset();
        let aborted = partition.aborted_transactions(offset, end);
        while offset < end {
            let read = if read_committed {
                partition.read_committed(offset, 1 << 20).unwrap()
            } else {
                partition.read(offset, 1 << 20).unwrap()
            };
            if read.records.is_empty() {
                break;
            }
            let mut at = 0;
            while at < read.records.len() {
                let h = BatchHeader::read(&read.records[at..]).unwrap();
                let batch = &read.records[at..at + h.size as usize];
                let dropped = h.is_control()
                    || (read_committed
                        && h.is_transactional()
                        && aborted.iter().any(|a| {
                            a.producer_id == h.producer_id
                                && (a.first_offset..=a.last_offset).contains(&h.base_offset)
                        }));
                if !dropped {
                    for r in batch::decode(batch).unwrap() {
                        if r.offset >= offset {
                            let value = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
                            served.insert(r.offset, (r.key.unwrap()[0], value));
                        }
                    }
                }
                offset = h.next_offset();
                at += h.size as usize;
            }
        }
        served
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn idempotence_and_transactions_hold_across_compaction_retention_and_restarts(
        ops in prop::collection::vec(op(), 1..120)
    ) {
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

/// A transaction open at a crash stays open after it (its records above the last stable
/// offset) and is aborted afterwards: none of its records is ever served read_committed.
#[test]
fn a_transaction_open_at_a_crash_is_aborted_after_it() {
    let mut world = World::new();
    for op in [
        Op::Produce(TRANSACTIONAL, vec![1, 2]),
        Op::Produce(0, vec![3]),
        Op::Crash,
        Op::Produce(TRANSACTIONAL, vec![1]),
        Op::EndTransaction(false),
        Op::Clean,
        Op::Reopen,
    ] {
        world.apply(&op);
    }
    assert_eq!(world.aborted.len(), 3);
}
