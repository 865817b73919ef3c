//! Model-based property test of the transaction state: random transactional and plain appends
//! from a few producers, commit and abort markers, retention, DeleteRecords, clean reopens,
//! power cuts, and power cuts in the middle of an append (at every file change it makes:
//! the transaction state file's creation, a segment roll and its save of the state), against a
//! plain model. After every step the last stable offset, the open transactions and the
//! aborted list must be the model's, and a `read_committed` reader (reading below the LSO and
//! dropping aborted producers' records as Kafka's clients do, from the aborted list a Fetch of
//! each range returns) must see exactly the committed records, in order.
//!
//! The topic is `Durability::ALWAYS` over [`FaultyStorage`]: an acknowledged append survives a
//! power cut, so the model keeps every append that returned before one.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use log_core::io::{Faults, FaultyStorage};
use log_core::{
    batch, AbortedTxn, Durability, Log, LogOptions, OpenTxn, Partition, ScrubOptions, TopicConfig,
};
use proptest::prelude::*;
use record_batch::{BatchHeader, ControlType};

const PRODUCERS: u8 = 3;

#[derive(Clone, Debug)]
enum Op {
    /// A batch of `records`: transactional from producer `producer` (opening its transaction if
    /// none is open), or plain when `producer` is `None`.
    Append {
        producer: Option<u8>,
        records: usize,
    },
    /// A marker for `producer` (ending its transaction, if it has one open).
    End {
        producer: u8,
        commit: bool,
    },
    /// Keep at least this many bytes (retention by size).
    Retention {
        keep: u64,
    },
    /// DeleteRecords at a point between the log start and the high watermark (per mille).
    DeleteRecords {
        at: u16,
    },
    Reopen,
    PowerCut,
    /// The power goes after `changes` file changes of the next append (`op`, an Append or an
    /// End), then comes back and the log reopens: the append is there whole or not at all.
    CutDuring {
        changes: u8,
        op: Box<Op>,
    },
}

fn append() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..PRODUCERS, 1usize..4).prop_map(|(p, records)| Op::Append { producer: Some(p), records }),
        2 => (1usize..4).prop_map(|records| Op::Append { producer: None, records }),
        3 => (0..PRODUCERS, any::<bool>()).prop_map(|(producer, commit)| Op::End { producer, commit }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        9 => append(),
        1 => (0u64..3000).prop_map(|keep| Op::Retention { keep }),
        1 => (0u16..=1000).prop_map(|at| Op::DeleteRecords { at }),
        1 => Just(Op::Reopen),
        1 => Just(Op::PowerCut),
        1 => (0u8..8, append()).prop_map(|(changes, op)| Op::CutDuring { changes, op: Box::new(op) }),
    ]
}

/// One batch as the model knows it.
#[derive(Clone, Debug)]
struct Batch {
    base: i64,
    /// The producer of a transactional batch (data or marker).
    producer: Option<i64>,
    marker: Option<ControlType>,
    values: Vec<Vec<u8>>,
    /// A transactional data batch's outcome, once its marker is written.
    committed: Option<bool>,
}

impl Batch {
    fn end(&self) -> i64 {
        self.base + self.values.len().max(1) as i64
    }
}

#[derive(Default, Clone)]
struct Model {
    batches: Vec<Batch>,
    next: i64,
    start: i64,
    /// Producer → first offset of its open transaction.
    open: BTreeMap<i64, i64>,
    aborted: Vec<AbortedTxn>,
}

impl Model {
    fn lso(&self) -> i64 {
        self.open
            .values()
            .min()
            .map_or(self.next, |first| (*first).max(self.start))
    }

    /// What `op` appends: (bytes, batch) for the model, `None` for an op that appends nothing.
    fn append(&mut self, op: &Op, serial: &mut u64) -> Option<(Vec<u8>, Batch)> {
        match *op {
            Op::Append { producer, records } => {
                let values: Vec<Vec<u8>> = (0..records)
                    .map(|i| {
                        *serial += 1;
                        let mut v = format!("{serial}:{i}:{producer:?}:").into_bytes();
                        v.resize(40, b'v');
                        v
                    })
                    .collect();
                let entries: Vec<batch::NewRecord> = values
                    .iter()
                    .map(|v| (Some(&b"k"[..]), Some(v.as_slice()), *serial as i64))
                    .collect();
                let bytes = match producer {
                    Some(p) => {
                        let mut bytes =
                            batch::build_for_producer(&entries, i64::from(p), 0, 0).to_vec();
                        record_batch::build::set_transactional(&mut bytes).unwrap();
                        bytes
                    }
                    None => batch::build(&entries).to_vec(),
                };
                let batch = Batch {
                    base: self.next,
                    producer: producer.map(i64::from),
                    marker: None,
                    values,
                    committed: None,
                };
                Some((bytes, batch))
            }
            Op::End { producer, commit } => {
                let kind = if commit {
                    ControlType::Commit
                } else {
                    ControlType::Abort
                };
                let bytes = record_batch::control_batch(i64::from(producer), 0, 0, kind, 1);
                let batch = Batch {
                    base: self.next,
                    producer: Some(i64::from(producer)),
                    marker: Some(kind),
                    values: Vec::new(),
                    committed: None,
                };
                Some((bytes, batch))
            }
            _ => None,
        }
    }

    /// The batch appended: what it does to the transactions.
    fn appended(&mut self, batch: Batch) {
        let base = batch.base;
        assert_eq!(base, self.next);
        self.next = batch.end();
        match (batch.producer, batch.marker) {
            (Some(p), None) => {
                self.open.entry(p).or_insert(base);
            }
            (Some(p), Some(kind)) => {
                if let Some(first) = self.open.remove(&p) {
                    let commit = kind == ControlType::Commit;
                    for b in &mut self.batches {
                        if b.producer == Some(p) && b.marker.is_none() && b.committed.is_none() {
                            b.committed = Some(commit);
                        }
                    }
                    if !commit {
                        self.aborted.push(AbortedTxn {
                            producer_id: p,
                            first_offset: first,
                            last_offset: base,
                        });
                    }
                }
            }
            _ => {}
        }
        self.batches.push(batch);
    }

    fn start_at(&mut self, start: i64) {
        self.start = self.start.max(start);
        self.batches.retain(|b| b.end() > start);
        self.aborted.retain(|a| a.last_offset >= start);
    }

    /// What a read_committed reader sees from the log start: (offset, value).
    fn committed(&self) -> Vec<(i64, Vec<u8>)> {
        let lso = self.lso();
        self.batches
            .iter()
            .filter(|b| b.marker.is_none() && b.end() <= lso)
            .filter(|b| b.producer.is_none() || b.committed == Some(true))
            .flat_map(|b| {
                b.values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (b.base + i as i64, v.clone()))
            })
            .filter(|(offset, _)| *offset >= self.start)
            .collect()
    }
}

struct Harness {
    dir: tempfile::TempDir,
    faults: Arc<Faults>,
    log: Option<Log>,
    model: Model,
    serial: u64,
}

/// The cleaner's options with a 1 MiB offset map.
fn small_map() -> log_core::CleanerOptions {
    log_core::CleanerOptions {
        dedupe_buffer_bytes: 1 << 20,
        ..log_core::CleanerOptions::default()
    }
}

fn config() -> TopicConfig {
    TopicConfig {
        segment_bytes: 1024,
        index_interval_bytes: 200,
        retention_ms: None,
        durability: Durability::ALWAYS,
        ..TopicConfig::default()
    }
}

/// Opens the log in `dir` through a new storage fake. The scrubber makes only its pass after
/// an unclean shutdown, and the open waits for it: a power cut in the middle of an append
/// leaves the process running with segments whose last writes never reached the file (a real
/// one stops the process), which a scrub racing the cut would read past their end.
fn open(dir: &Path) -> (Log, Arc<Faults>) {
    let faults = Faults::new();
    let unclean = !dir.join(".clean-shutdown").exists() && dir.join("t.topic").exists();
    let options = LogOptions {
        storage: Arc::new(FaultyStorage::new(faults.clone())),
        scrub: ScrubOptions {
            interval: None,
            bytes_per_second: 1 << 40,
        },
        ..LogOptions::default()
    };
    let log = Log::open_with_options(dir, options).unwrap();
    assert!(
        log.offline_topics().is_empty(),
        "{:?}",
        log.offline_topics()
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while unclean && log.scrub_stats().passes.load(Ordering::Acquire) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the scrub pass did not end"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    (log, faults)
}

impl Harness {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (log, faults) = open(dir.path());
        log.create_topic("t", 1, config()).unwrap();
        Harness {
            dir,
            faults,
            log: Some(log),
            model: Model::default(),
            serial: 0,
        }
    }

    fn partition(&self) -> Arc<Partition> {
        self.log.as_ref().unwrap().topic("t").unwrap().partitions()[0].clone()
    }

    fn reopen(&mut self) {
        let (log, faults) = open(self.dir.path());
        self.log = Some(log);
        self.faults = faults;
    }

    fn power_cut_and_reopen(&mut self) {
        self.faults.cut_power();
        drop(self.log.take());
        let _ = fs::remove_file(self.dir.path().join(".clean-shutdown"));
        self.faults.restore_power().unwrap();
        self.reopen();
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Append { .. } | Op::End { .. } => {
                let (bytes, batch) = self.model.append(op, &mut self.serial).unwrap();
                let info = self.partition().append(&bytes).unwrap();
                assert_eq!(info.base_offset, batch.base);
                self.model.appended(batch);
            }
            Op::Retention { keep } => {
                let p = self.partition();
                p.set_config(TopicConfig {
                    retention_bytes: Some(*keep),
                    ..config()
                });
                p.apply_retention(log_core::now_ms()).unwrap();
                self.model.start_at(p.log_start_offset());
            }
            Op::DeleteRecords { at } => {
                let p = self.partition();
                let (start, end) = (self.model.start, self.model.next);
                let offset = start + (end - start) * i64::from(*at) / 1000;
                p.delete_records_before(offset).unwrap();
                self.model.start_at(offset);
            }
            Op::Reopen => {
                self.log.take().unwrap().close().unwrap();
                self.reopen();
            }
            Op::PowerCut => self.power_cut_and_reopen(),
            Op::CutDuring { changes, op } => {
                let (bytes, batch) = self.model.append(op, &mut self.serial).unwrap();
                self.faults.cut_power_after(u64::from(*changes));
                let result = self.partition().append(&bytes);
                let off = self.faults.power_is_off();
                self.power_cut_and_reopen();
                let end = self.partition().log_end_offset();
                if !off {
                    // The power held: the append is acknowledged and must be there.
                    assert_eq!(result.unwrap().base_offset, batch.base);
                }
                if end == batch.end() {
                    self.model.appended(batch);
                } else {
                    assert_eq!(end, self.model.next, "an append landed in part");
                    assert!(off, "an acknowledged append was lost");
                }
            }
        }
        self.check();
    }

    fn check(&self) {
        let p = self.partition();
        let model = &self.model;
        assert_eq!(p.log_start_offset(), model.start, "log start");
        assert_eq!(p.log_end_offset(), model.next, "high watermark");
        assert_eq!(p.last_stable_offset(), model.lso(), "last stable offset");
        let open: Vec<OpenTxn> = model
            .open
            .iter()
            .map(|(p, f)| OpenTxn {
                producer_id: *p,
                first_offset: *f,
            })
            .collect();
        assert_eq!(p.open_transactions(), open, "open transactions");
        assert_eq!(
            p.aborted_transactions(model.start, i64::MAX),
            model.aborted,
            "aborted transactions"
        );
        assert_eq!(read_committed(&p), model.committed(), "read_committed");
    }
}

/// Reads from the log start to the LSO as a read_committed client does: each read's aborted
/// transactions (those overlapping what it returned) fed to the client's filter.
fn read_committed(p: &Partition) -> Vec<(i64, Vec<u8>)> {
    let mut seen = Vec::new();
    let mut offset = p.log_start_offset();
    // The client's state: aborted transactions not yet reached, by first offset, and the
    // producers whose records are being dropped.
    let mut pending: Vec<AbortedTxn> = Vec::new();
    let mut dropping: HashSet<i64> = HashSet::new();
    loop {
        let read = p.read_committed(offset, 300).unwrap();
        if read.records.is_empty() {
            break;
        }
        let mut at = 0usize;
        let mut to = offset;
        while at < read.records.len() {
            let h = BatchHeader::read(&read.records[at..]).unwrap();
            assert!(
                h.base_offset < read.last_stable_offset,
                "a batch past the LSO"
            );
            to = h.next_offset();
            at += h.size as usize;
        }
        for a in p.aborted_transactions(offset, to) {
            if !pending.contains(&a) {
                pending.push(a);
            }
        }
        pending.sort_by_key(|a| a.first_offset);
        let mut at = 0usize;
        while at < read.records.len() {
            let h = BatchHeader::read(&read.records[at..]).unwrap();
            let bytes = &read.records[at..at + h.size as usize];
            at += h.size as usize;
            while pending
                .first()
                .is_some_and(|a| a.first_offset <= h.last_offset())
            {
                dropping.insert(pending.remove(0).producer_id);
            }
            if h.is_control() {
                if record_batch::control_type(bytes) == Some(ControlType::Abort) {
                    dropping.remove(&h.producer_id);
                }
                continue;
            }
            if h.next_offset() <= offset
                || (h.is_transactional() && dropping.contains(&h.producer_id))
            {
                continue;
            }
            seen.extend(
                batch::decode(bytes)
                    .unwrap()
                    .into_iter()
                    .filter(|r| r.offset >= offset)
                    .map(|r| (r.offset, r.value.unwrap().to_vec())),
            );
        }
        offset = to;
    }
    assert_eq!(
        offset.max(p.log_start_offset()),
        p.last_stable_offset().max(offset)
    );
    seen
}

fn run(ops: &[Op]) {
    let mut harness = Harness::new();
    for op in ops {
        harness.apply(op);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn transactions_match_the_model(ops in proptest::collection::vec(op(), 1..50)) {
        run(&ops);
    }
}

/// Named regressions and cases worth keeping whatever proptest's seed does.
#[test]
fn a_transaction_open_at_a_power_cut_is_open_after_it() {
    run(&[
        Op::Append {
            producer: Some(0),
            records: 2,
        },
        Op::Append {
            producer: None,
            records: 1,
        },
        Op::Append {
            producer: Some(1),
            records: 1,
        },
        Op::End {
            producer: 1,
            commit: false,
        },
        Op::PowerCut,
        Op::End {
            producer: 0,
            commit: true,
        },
        Op::Reopen,
    ]);
}

#[test]
fn the_state_survives_rolls_retention_and_a_cut_inside_each_file_change() {
    let mut ops = Vec::new();
    for i in 0..12u8 {
        ops.push(Op::Append {
            producer: Some(i % PRODUCERS),
            records: 3,
        });
        ops.push(Op::End {
            producer: (i + 1) % PRODUCERS,
            commit: i % 2 == 0,
        });
    }
    ops.push(Op::Retention { keep: 1500 });
    for changes in 0..8 {
        ops.push(Op::CutDuring {
            changes,
            op: Box::new(Op::Append {
                producer: Some(changes % PRODUCERS),
                records: 3,
            }),
        });
    }
    ops.push(Op::DeleteRecords { at: 500 });
    ops.push(Op::Reopen);
    run(&ops);
}

/// Every data record from the log start (any isolation): (offset, key, value), and the offsets
/// of the control batches.
/// A data record read back: offset, key, value.
type Stored = (i64, Vec<u8>, Vec<u8>);

fn everything(p: &Partition) -> (Vec<Stored>, Vec<i64>) {
    let (mut records, mut markers) = (Vec::new(), Vec::new());
    let mut offset = p.log_start_offset();
    while offset < p.log_end_offset() {
        let read = p.read(offset, 1 << 20).unwrap();
        let mut at = 0usize;
        while at < read.records.len() {
            let h = BatchHeader::read(&read.records[at..]).unwrap();
            let bytes = &read.records[at..at + h.size as usize];
            at += h.size as usize;
            offset = h.next_offset();
            if h.is_control() {
                markers.push(h.base_offset);
                continue;
            }
            for r in batch::decode(bytes).unwrap() {
                records.push((r.offset, r.key.unwrap().to_vec(), r.value.unwrap().to_vec()));
            }
        }
    }
    (records, markers)
}

/// A transactional batch of `records` (key, value) from producer `pid`: its offset.
fn append_txn(p: &Partition, pid: i64, records: &[(&[u8], &[u8])]) -> i64 {
    let entries: Vec<batch::NewRecord> = records
        .iter()
        .map(|(k, v)| (Some(*k), Some(*v), 1))
        .collect();
    let mut bytes = batch::build_for_producer(&entries, pid, 0, 0).to_vec();
    record_batch::build::set_transactional(&mut bytes).unwrap();
    p.append(&bytes).unwrap().base_offset
}

/// A marker of `kind` for producer `pid`: its offset.
fn append_marker(p: &Partition, pid: i64, kind: ControlType) -> i64 {
    p.append(&record_batch::control_batch(pid, 0, 0, kind, 1))
        .unwrap()
        .base_offset
}

/// `n` plain records over four keys, 100 bytes each: segments roll and close.
fn append_filler(p: &Partition, n: usize) {
    for i in 0..n {
        let key = format!("filler-{}", i % 4);
        p.append(&batch::build(&[(
            Some(key.as_bytes()),
            Some(&[b'f'; 100][..]),
            1,
        )]))
        .unwrap();
    }
}

#[test]
fn the_cleaner_removes_aborted_records_and_stops_at_the_lso() {
    let dir = tempfile::tempdir().unwrap();
    let options = LogOptions {
        cleaner: log_core::CleanerOptions {
            enabled: false,
            ..log_core::CleanerOptions::default()
        },
        ..LogOptions::default()
    };
    let log = Log::open_with_options(dir.path(), options).unwrap();
    let mut config = TopicConfig {
        segment_bytes: 1024,
        cleanup: log_core::CleanupPolicy::parse("compact").unwrap(),
        ..TopicConfig::default()
    };
    config.set("min.cleanable.dirty.ratio", "0").unwrap();
    log.create_topic("c", 1, config).unwrap();
    let p = log.topic("c").unwrap().partitions()[0].clone();
    let txn = |pid: i64, records: &[(&[u8], &[u8])]| append_txn(&p, pid, records);
    let end = |pid: i64, kind| append_marker(&p, pid, kind);
    let filler = |n: usize| append_filler(&p, n);
    assert_eq!(
        p.append(&batch::build(&[(Some(b"k1"), Some(b"a"), 1)]))
            .unwrap()
            .base_offset,
        0
    );
    assert_eq!(txn(10, &[(b"k1", b"aborted"), (b"k2", b"aborted")]), 1);
    assert_eq!(end(10, ControlType::Abort), 3);
    assert_eq!(txn(11, &[(b"k2", b"committed")]), 4);
    assert_eq!(end(11, ControlType::Commit), 5);
    assert_eq!(txn(12, &[(b"k1", b"open")]), 6);
    filler(30);
    assert!(
        p.segment_count() >= 3,
        "the transactions are in closed segments"
    );
    assert_eq!(p.last_stable_offset(), 6);

    p.clean(&small_map(), log_core::now_ms(), |_| {})
        .unwrap()
        .unwrap();
    let (records, markers) = everything(&p);
    let at = |offset: i64| records.iter().find(|r| r.0 == offset).map(|r| r.2.clone());
    // The aborted records went, and shadowed nothing; the open transaction's record stays and
    // shadows nothing yet (the pass stopped at the LSO).
    assert_eq!(at(0), Some(b"a".to_vec()));
    assert_eq!(at(1), None);
    assert_eq!(at(2), None);
    assert_eq!(at(4), Some(b"committed".to_vec()));
    assert_eq!(at(6), Some(b"open".to_vec()));
    assert_eq!(markers, vec![3, 5], "markers are kept");
    assert_eq!(p.last_stable_offset(), 6);
    let committed: Vec<(i64, Vec<u8>)> = read_committed(&p)
        .into_iter()
        .filter(|(o, _)| *o < 6)
        .collect();
    assert_eq!(
        committed,
        vec![(0, b"a".to_vec()), (4, b"committed".to_vec())]
    );

    // Committed, the open transaction's record becomes k1's latest: the next pass removes
    // the older one.
    end(12, ControlType::Commit);
    filler(30);
    p.clean(&small_map(), log_core::now_ms(), |_| {})
        .unwrap()
        .unwrap();
    let (records, markers) = everything(&p);
    let at = |offset: i64| records.iter().find(|r| r.0 == offset).map(|r| r.2.clone());
    assert_eq!(at(0), None);
    assert_eq!(at(6), Some(b"open".to_vec()));
    assert_eq!(markers.len(), 3);
    assert_eq!(p.last_stable_offset(), p.log_end_offset());
}

/// As Kafka's cleaner: a transaction marker stays while a batch of its transaction does; once
/// none does (aborted records removed, committed ones shadowed), it gets a delete horizon (the
/// pass's time plus `delete.retention.ms`) and goes at the first pass past it. A marker whose
/// transaction still has a record stays for good. Reopened, the partition has no transaction
/// open, its LSO is the log end, and read_committed sees the same records.
#[test]
fn a_marker_goes_after_delete_retention_once_its_transaction_has_no_batch_left() {
    let dir = tempfile::tempdir().unwrap();
    let options = || LogOptions {
        cleaner: log_core::CleanerOptions {
            enabled: false,
            ..log_core::CleanerOptions::default()
        },
        ..LogOptions::default()
    };
    let log = Log::open_with_options(dir.path(), options()).unwrap();
    let mut config = TopicConfig {
        segment_bytes: 1024,
        cleanup: log_core::CleanupPolicy::parse("compact").unwrap(),
        ..TopicConfig::default()
    };
    config.set("min.cleanable.dirty.ratio", "0").unwrap();
    config.set("delete.retention.ms", "1000").unwrap();
    log.create_topic("c", 1, config).unwrap();
    let p = log.topic("c").unwrap().partitions()[0].clone();
    let txn = |pid: i64, records: &[(&[u8], &[u8])]| append_txn(&p, pid, records);
    let end = |pid: i64, kind| append_marker(&p, pid, kind);
    let filler = |n: usize| append_filler(&p, n);
    // 0-1: aborted; 2-3: committed, then shadowed by 4-5; 4-5: committed, k's latest; 6-7:
    // the aborting producer's next transaction, committed.
    assert_eq!(txn(10, &[(b"k", b"aborted")]), 0);
    assert_eq!(end(10, ControlType::Abort), 1);
    assert_eq!(txn(11, &[(b"k", b"old")]), 2);
    assert_eq!(end(11, ControlType::Commit), 3);
    assert_eq!(txn(12, &[(b"k", b"new")]), 4);
    assert_eq!(end(12, ControlType::Commit), 5);
    assert_eq!(txn(10, &[(b"own", b"ten")]), 6);
    assert_eq!(end(10, ControlType::Commit), 7);
    filler(30);
    assert!(
        p.segment_count() >= 3,
        "the transactions are in closed segments"
    );

    let now = log_core::now_ms();
    p.clean(&small_map(), now, |_| {}).unwrap().unwrap();
    let (records, markers) = everything(&p);
    assert!(records.iter().all(|r| r.0 != 0 && r.0 != 2), "{records:?}");
    assert!(records.iter().any(|r| r.0 == 4));
    assert_eq!(
        markers,
        vec![1, 3, 5, 7],
        "markers stay until their horizon"
    );

    // Past the horizon: the markers of the transactions with no batch left go.
    filler(10);
    p.clean(&small_map(), now + 1001, |_| {}).unwrap().unwrap();
    let (records, markers) = everything(&p);
    assert!(records.iter().any(|r| r.0 == 4), "{records:?}");
    assert_eq!(
        markers,
        vec![5, 7],
        "the markers of transactions with a record stay"
    );
    assert!(p.open_transactions().is_empty());
    assert_eq!(p.last_stable_offset(), p.log_end_offset());
    // The abort whose marker went is no longer told: a read_committed reader keeps the
    // aborting producer's next transaction (it would drop it, waiting for the gone marker).
    assert!(p.aborted_transactions(0, p.log_end_offset()).is_empty());
    let committed = read_committed(&p);
    let values: Vec<&[u8]> = committed
        .iter()
        .filter(|(o, _)| *o < 8)
        .map(|(_, v)| v.as_slice())
        .collect();
    assert_eq!(values, [&b"new"[..], &b"ten"[..]]);

    // Reopened: the same.
    log.close().unwrap();
    let log = Log::open_with_options(dir.path(), options()).unwrap();
    let p = log.topic("c").unwrap().partitions()[0].clone();
    assert!(p.open_transactions().is_empty());
    assert_eq!(p.last_stable_offset(), p.log_end_offset());
    assert_eq!(read_committed(&p), committed);
    assert!(p.aborted_transactions(0, p.log_end_offset()).is_empty());
    assert_eq!(everything(&p).1, vec![5, 7]);
}
