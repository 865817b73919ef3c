//! Durability `always` against a power cut. The storage fake keeps, of every file, only what it
//! held at its last successful fsync; every append under `always` was acknowledged, so after
//! the cut and a reopen every one of them must be there, in order, and nothing else. This is
//! the test a kill -9 cannot be: the page cache survives a killed process, not a power cut.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::fs;
use std::sync::Arc;

use log_core::batch::{self, NewRecord};
use log_core::io::{Faults, FaultyStorage};
use log_core::{Durability, Log, Partition, TopicConfig};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Append { records: usize, len: usize },
    PowerCut,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1usize..6, 0usize..200).prop_map(|(records, len)| Op::Append { records, len }),
        1 => Just(Op::PowerCut),
        1 => Just(Op::Reopen),
    ]
}

fn config() -> TopicConfig {
    TopicConfig {
        segment_bytes: 1024,
        index_interval_bytes: 128,
        durability: Durability::ALWAYS,
        ..TopicConfig::default()
    }
}

struct Harness {
    dir: tempfile::TempDir,
    faults: Arc<Faults>,
    log: Option<Log>,
    /// Every value acknowledged, in offset order.
    model: Vec<Vec<u8>>,
    serial: u64,
}

impl Harness {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let faults = Faults::new();
        let log = Log::open_with(dir.path(), Arc::new(FaultyStorage::new(faults.clone()))).unwrap();
        log.create_topic("d", 1, config()).unwrap();
        Harness {
            dir,
            faults,
            log: Some(log),
            model: Vec::new(),
            serial: 0,
        }
    }

    fn partition(&self) -> Arc<Partition> {
        self.log.as_ref().unwrap().topic("d").unwrap().partitions()[0].clone()
    }

    fn reopen(&mut self) {
        self.faults = Faults::new();
        let storage = Arc::new(FaultyStorage::new(self.faults.clone()));
        self.log = Some(Log::open_with(self.dir.path(), storage).unwrap());
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Append { records, len } => {
                let values: Vec<Vec<u8>> = (0..records)
                    .map(|i| {
                        self.serial += 1;
                        let mut v = format!("{}:{i}:", self.serial).into_bytes();
                        v.resize(v.len() + len, b'x');
                        v
                    })
                    .collect();
                let entries: Vec<NewRecord> = values
                    .iter()
                    .map(|v| (None, Some(v.as_slice()), 1))
                    .collect();
                let info = self.partition().append(&batch::build(&entries)).unwrap();
                assert_eq!(info.base_offset, self.model.len() as i64);
                self.model.extend(values);
            }
            Op::PowerCut => {
                self.faults.cut_power();
                drop(self.log.take());
                // A power cut leaves no clean-shutdown marker either.
                let _ = fs::remove_file(self.dir.path().join(".clean-shutdown"));
                self.faults.restore_power().unwrap();
                self.reopen();
            }
            Op::Reopen => {
                self.log.take().unwrap().close().unwrap();
                self.reopen();
            }
        }
        self.check();
    }

    fn check(&self) {
        let p = self.partition();
        assert_eq!(p.log_end_offset(), self.model.len() as i64);
        let mut got = Vec::new();
        while (got.len() as i64) < p.log_end_offset() {
            let read = p.read(got.len() as i64, 1 << 16).unwrap();
            for record in batch::decode(&read.records).unwrap() {
                assert_eq!(record.offset, got.len() as i64);
                got.push(record.value.unwrap().to_vec());
            }
        }
        assert_eq!(got, self.model);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn acknowledged_appends_survive_a_power_cut(ops in proptest::collection::vec(op(), 1..50)) {
        let mut harness = Harness::new();
        for op in &ops {
            harness.apply(op);
        }
    }
}

/// Named regression: a power cut right after appends that rolled several segments.
#[test]
fn a_power_cut_after_rolls_keeps_every_acknowledged_append() {
    let mut harness = Harness::new();
    for _ in 0..20 {
        harness.apply(&Op::Append {
            records: 3,
            len: 100,
        });
    }
    harness.apply(&Op::PowerCut);
    harness.apply(&Op::Append { records: 1, len: 0 });
    harness.apply(&Op::PowerCut);
    assert_eq!(harness.model.len(), 61);
}

/// Appends that arrive while an fsync runs wait for the next one and share it (group commit).
#[test]
fn appends_during_an_fsync_share_the_next_one() {
    let harness = Harness::new();
    let p = harness.partition();
    p.append(&batch::build(&[(None, Some(b"first"), 1)]))
        .unwrap();
    let before = harness.faults.syncs();
    harness.faults.hold_syncs(true);
    let leader = {
        let p = p.clone();
        std::thread::spawn(move || {
            p.append(&batch::build(&[(None, Some(b"leader"), 1)]))
                .unwrap()
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let wait = |done: &dyn Fn() -> bool, what: &str| {
        while !done() {
            assert!(std::time::Instant::now() < deadline, "timed out: {what}");
            std::thread::yield_now();
        }
    };
    wait(&|| harness.faults.held_syncs() > 0, "the leader's fsync");
    // The leader's fsync is running (held): these four write and wait.
    let followers: Vec<_> = (0..4)
        .map(|i| {
            let p = p.clone();
            std::thread::spawn(move || {
                let value = format!("follower-{i}");
                p.append(&batch::build(&[(None, Some(value.as_bytes()), 1)]))
                    .unwrap()
            })
        })
        .collect();
    // Wait until all four have written (under `always` readers do not see it yet).
    wait(&|| p.next_offset() == 6, "the followers' writes");
    assert_eq!(p.log_end_offset(), 1, "nothing unsynced is visible");
    harness.faults.hold_syncs(false);
    leader.join().unwrap();
    for follower in followers {
        follower.join().unwrap();
    }
    let used = harness.faults.syncs() - before;
    assert!(used >= 1, "no fsync at all");
    assert!(
        used <= 2,
        "{used} fsyncs for 5 appends: the followers did not share one"
    );
    assert_eq!(p.log_end_offset(), 6);
}
