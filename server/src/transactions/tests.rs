//! The coordinator against a model of Kafka's transaction semantics, with restarts (the state
//! replayed from `__transaction_state`) and marker writes that fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use proptest::prelude::*;

use super::state::{PendingOffset, PendingOffsets, State, TxnError};
use super::*;

const IDS: [&str; 2] = ["a", "b"];
const GROUPS: [&str; 2] = ["g", "h"];
const TIMEOUT_MS: i32 = 1_000;

/// A marker written: (partition, producer id, epoch, commit).
type Marker = ((String, i32), i64, i16, bool);
/// Offsets stored: group → partition → offset.
type Stored = BTreeMap<String, BTreeMap<(String, i32), i64>>;

/// Markers and offsets as the broker would have written them.
#[derive(Debug, Default)]
struct Fake {
    failing: AtomicBool,
    /// (partition, producer id, epoch, commit), in write order.
    markers: Mutex<Vec<Marker>>,
    /// group → partition → offset.
    offsets: Mutex<Stored>,
}

impl Effects for Fake {
    fn write_markers(
        &self,
        partitions: &[(String, i32)],
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), EffectError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(EffectError::Marker {
                topic: "t".into(),
                index: 0,
                reason: "disk failure (test)".into(),
            });
        }
        let mut markers = self.markers.lock().unwrap();
        for p in partitions {
            markers.push((p.clone(), producer_id, epoch, commit));
        }
        Ok(())
    }

    fn commit_offsets(&self, offsets: &PendingOffsets) -> Result<(), EffectError> {
        let mut stored = self.offsets.lock().unwrap();
        for (group, offsets) in offsets {
            for (p, o) in offsets {
                stored
                    .entry(group.clone())
                    .or_default()
                    .insert(p.clone(), o.offset);
            }
        }
        Ok(())
    }

    fn new_producer_id(&self) -> Result<i64, EffectError> {
        Ok(9_000)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ModelTxn {
    pid: i64,
    epoch: i16,
    state: State,
    partitions: BTreeSet<(String, i32)>,
    offsets: BTreeMap<String, BTreeMap<(String, i32), i64>>,
}

#[derive(Debug, Clone)]
enum Op {
    Init(usize),
    Add {
        id: usize,
        stale: bool,
        partition: i32,
    },
    AddOffsets {
        id: usize,
        group: usize,
    },
    CommitOffset {
        id: usize,
        group: usize,
        offset: i64,
    },
    End {
        id: usize,
        commit: bool,
        stale: bool,
    },
    Complete(usize),
    TimeoutPasses,
    Failing(bool),
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0..IDS.len();
    prop_oneof![
        3 => id.clone().prop_map(Op::Init),
        4 => (id.clone(), prop::bool::weighted(0.15), 0..3i32)
            .prop_map(|(id, stale, partition)| Op::Add { id, stale, partition }),
        1 => (id.clone(), 0..GROUPS.len()).prop_map(|(id, group)| Op::AddOffsets { id, group }),
        2 => (id.clone(), 0..GROUPS.len(), 0..100i64)
            .prop_map(|(id, group, offset)| Op::CommitOffset { id, group, offset }),
        3 => (id.clone(), any::<bool>(), prop::bool::weighted(0.15))
            .prop_map(|(id, commit, stale)| Op::End { id, commit, stale }),
        2 => id.prop_map(Op::Complete),
        1 => Just(Op::TimeoutPasses),
        1 => any::<bool>().prop_map(Op::Failing),
        1 => Just(Op::Restart),
    ]
}

struct Harness {
    dir: tempfile::TempDir,
    log: Option<Log>,
    coord: Option<Transactions>,
    fake: Fake,
    next_pid: i64,
    now: i64,
    model: BTreeMap<&'static str, ModelTxn>,
    /// Markers and offsets the model expects, in order.
    markers: Vec<Marker>,
    offsets: Stored,
}

fn partition(i: i32) -> (String, i32) {
    ("t".to_string(), i)
}

impl Harness {
    fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path()).unwrap();
        let coord = Transactions::open(&log, TxnConfig::default()).unwrap();
        Harness {
            dir,
            log: Some(log),
            coord: Some(coord),
            fake: Fake::default(),
            next_pid: 1000,
            now: 1,
            model: BTreeMap::new(),
            markers: Vec::new(),
            offsets: BTreeMap::new(),
        }
    }

    fn coord(&self) -> &Transactions {
        self.coord.as_ref().unwrap()
    }

    fn restart(&mut self) {
        self.coord = None;
        self.log = None;
        let log = Log::open(self.dir.path()).unwrap();
        self.coord = Some(Transactions::open(&log, TxnConfig::default()).unwrap());
        self.log = Some(log);
        // Recovery: what was prepared is completed (as the broker's timer does at start).
        self.recover();
    }

    fn recover(&mut self) {
        for id in self.coord().prepared() {
            let id = IDS.iter().find(|i| **i == id).copied().unwrap();
            self.complete(id);
        }
    }

    fn complete(&mut self, id: &'static str) {
        let now = self.now;
        let done = self.coord().complete(id, &self.fake, || now).unwrap();
        let failing = self.fake.failing.load(Ordering::SeqCst);
        let Some(m) = self.model.get_mut(id) else {
            assert_eq!(done, Completion::Nothing);
            return;
        };
        let commit = match m.state {
            State::PrepareCommit => true,
            State::PrepareAbort => false,
            _ => {
                assert_eq!(done, Completion::Nothing, "{id} is not prepared");
                return;
            }
        };
        if failing {
            assert_eq!(
                done,
                Completion::Nothing,
                "a failed marker write leaves it prepared"
            );
            return;
        }
        for p in &m.partitions {
            self.markers.push((p.clone(), m.pid, m.epoch, commit));
        }
        if commit {
            for (group, offsets) in &m.offsets {
                for (p, o) in offsets {
                    self.offsets
                        .entry(group.clone())
                        .or_default()
                        .insert(p.clone(), *o);
                }
            }
        }
        m.state = if commit {
            State::CompleteCommit
        } else {
            State::CompleteAbort
        };
        m.partitions.clear();
        m.offsets.clear();
        assert_eq!(done, Completion::Done(m.state));
    }

    /// The model's producer id and epoch for `id` (stale: one epoch older).
    fn producer(&self, id: &str, stale: bool) -> (i64, i16) {
        self.model.get(id).map_or((7, 0), |m| {
            (m.pid, if stale { m.epoch - 1 } else { m.epoch })
        })
    }

    /// What the model says a request with this producer gets, before the operation's own rules.
    fn expect_producer(&self, id: &str, pid: i64, epoch: i16) -> Result<&ModelTxn, TxnError> {
        let m = self.model.get(id).ok_or(TxnError::UnknownId)?;
        if pid != m.pid {
            return Err(TxnError::ProducerIdMismatch {
                given: pid,
                current: m.pid,
            });
        }
        if epoch != m.epoch {
            return Err(TxnError::Fenced {
                given: epoch,
                current: m.epoch,
            });
        }
        if matches!(m.state, State::PrepareCommit | State::PrepareAbort) {
            return Err(TxnError::Concurrent(m.state));
        }
        Ok(m)
    }

    fn begin(m: &mut ModelTxn) {
        if m.state != State::Ongoing {
            m.partitions.clear();
            m.offsets.clear();
            m.state = State::Ongoing;
        }
    }

    fn run(&mut self, op: &Op) {
        self.now += 1;
        let now = self.now;
        match *op {
            Op::Init(i) => {
                let id = IDS[i];
                let mut pid = self.next_pid;
                let got = self
                    .coord()
                    .init_producer_id(id, TIMEOUT_MS, None, now, || {
                        pid += 1;
                        Ok(pid)
                    });
                let allocated = pid != self.next_pid;
                self.next_pid = pid;
                let expected = match self.model.get_mut(id) {
                    None => {
                        assert!(allocated);
                        let m = ModelTxn {
                            pid,
                            epoch: 0,
                            state: State::Empty,
                            partitions: BTreeSet::new(),
                            offsets: BTreeMap::new(),
                        };
                        self.model.insert(id, m);
                        Ok((pid, 0))
                    }
                    Some(m) if matches!(m.state, State::PrepareCommit | State::PrepareAbort) => {
                        Err(TxnError::Concurrent(m.state))
                    }
                    Some(m) if m.state == State::Ongoing => {
                        m.epoch += 1;
                        m.state = State::PrepareAbort;
                        Err(TxnError::Concurrent(State::PrepareAbort))
                    }
                    Some(m) => {
                        m.epoch += 1;
                        m.state = State::Empty;
                        m.partitions.clear();
                        m.offsets.clear();
                        Ok((m.pid, m.epoch))
                    }
                };
                match (got, expected) {
                    (Ok(got), Ok(expected)) => assert_eq!(got, expected),
                    (Err(CoordError::Txn(got)), Err(expected)) => assert_eq!(got, expected),
                    (got, expected) => panic!("init {id}: got {got:?}, model {expected:?}"),
                }
            }
            Op::Add {
                id,
                stale,
                partition: p,
            } => {
                let id = IDS[id];
                let (pid, epoch) = self.producer(id, stale);
                let got = self
                    .coord()
                    .add_partitions(id, pid, epoch, &[partition(p)], now);
                let expected = self.expect_producer(id, pid, epoch).map(|_| ());
                if expected.is_ok() {
                    let m = self.model.get_mut(id).unwrap();
                    Self::begin(m);
                    m.partitions.insert(partition(p));
                }
                check(got, expected);
            }
            Op::AddOffsets { id, group } => {
                let id = IDS[id];
                let (pid, epoch) = self.producer(id, false);
                let got = self.coord().add_offsets(id, pid, epoch, GROUPS[group], now);
                let expected = self.expect_producer(id, pid, epoch).map(|_| ());
                if expected.is_ok() {
                    let m = self.model.get_mut(id).unwrap();
                    Self::begin(m);
                    m.offsets.entry(GROUPS[group].to_string()).or_default();
                }
                check(got, expected);
            }
            Op::CommitOffset { id, group, offset } => {
                let id = IDS[id];
                let group = GROUPS[group];
                let (pid, epoch) = self.producer(id, false);
                let pending = PendingOffset {
                    offset,
                    leader_epoch: -1,
                    metadata: None,
                };
                let got = self.coord().commit_offsets(
                    id,
                    (pid, epoch),
                    group,
                    vec![(partition(0), pending)],
                    false,
                    now,
                );
                let expected = self.expect_producer(id, pid, epoch).and_then(|m| {
                    if m.state == State::Ongoing && m.offsets.contains_key(group) {
                        Ok(())
                    } else {
                        Err(TxnError::InvalidState {
                            operation: "TxnOffsetCommit without AddOffsetsToTxn",
                            state: m.state,
                        })
                    }
                });
                if expected.is_ok() {
                    let m = self.model.get_mut(id).unwrap();
                    m.offsets
                        .entry(group.to_string())
                        .or_default()
                        .insert(partition(0), offset);
                }
                check(got, expected);
            }
            Op::End { id, commit, stale } => {
                let id = IDS[id];
                let (pid, epoch) = self.producer(id, stale);
                let got = self.coord().end(id, (pid, epoch), commit, false, now);
                let expected: Result<bool, TxnError> = match self.model.get_mut(id) {
                    None => Err(TxnError::UnknownId),
                    Some(m) if m.epoch != epoch => Err(TxnError::Fenced {
                        given: epoch,
                        current: m.epoch,
                    }),
                    Some(m) => match (m.state, commit) {
                        (State::Ongoing, _) => {
                            m.state = if commit {
                                State::PrepareCommit
                            } else {
                                State::PrepareAbort
                            };
                            Ok(true)
                        }
                        (State::PrepareCommit, true) | (State::PrepareAbort, false) => {
                            Err(TxnError::Concurrent(m.state))
                        }
                        (State::CompleteCommit, true) | (State::CompleteAbort, false) => Ok(false),
                        (state, _) => Err(TxnError::InvalidState {
                            operation: if commit {
                                "EndTxn(commit)"
                            } else {
                                "EndTxn(abort)"
                            },
                            state,
                        }),
                    },
                };
                match (got, expected) {
                    (Ok(got), Ok(expected)) => assert_eq!(got, expected),
                    (Err(CoordError::Txn(got)), Err(expected)) => assert_eq!(got, expected),
                    (got, expected) => panic!("end {id}: got {got:?}, model {expected:?}"),
                }
            }
            Op::Complete(i) => self.complete(IDS[i]),
            Op::TimeoutPasses => {
                self.now += i64::from(TIMEOUT_MS) + 1;
                let mut aborted = self.coord().abort_timed_out(self.now).unwrap();
                aborted.sort();
                let mut expected = Vec::new();
                for (id, m) in &mut self.model {
                    if m.state == State::Ongoing {
                        m.epoch += 1;
                        m.state = State::PrepareAbort;
                        expected.push(id.to_string());
                    }
                }
                assert_eq!(aborted, expected);
            }
            Op::Failing(failing) => self.fake.failing.store(failing, Ordering::SeqCst),
            Op::Restart => {
                self.restart();
            }
        }
        self.check_state();
    }

    fn check_state(&self) {
        for id in IDS {
            let got = self.coord().get(id).map(|t| ModelTxn {
                pid: t.producer_id,
                epoch: t.producer_epoch,
                state: t.state,
                partitions: t.partitions.clone(),
                offsets: t
                    .offsets
                    .iter()
                    .map(|(g, o)| {
                        (
                            g.clone(),
                            o.iter().map(|(p, v)| (p.clone(), v.offset)).collect(),
                        )
                    })
                    .collect(),
            });
            assert_eq!(got.as_ref(), self.model.get(id), "state of {id}");
        }
        assert_eq!(
            *self.fake.markers.lock().unwrap(),
            self.markers,
            "markers written"
        );
        assert_eq!(
            *self.fake.offsets.lock().unwrap(),
            self.offsets,
            "offsets stored"
        );
    }
}

fn check(got: Result<(), CoordError>, expected: Result<(), TxnError>) {
    match (got, expected) {
        (Ok(()), Ok(())) => {}
        (Err(CoordError::Txn(got)), Err(expected)) => assert_eq!(got, expected),
        (got, expected) => panic!("got {got:?}, model {expected:?}"),
    }
}

fn run(ops: &[Op]) {
    let mut h = Harness::new();
    for op in ops {
        h.run(op);
    }
    // Whatever was prepared completes once writes work again, across a restart too.
    h.fake.failing.store(false, Ordering::SeqCst);
    h.restart();
    h.check_state();
    assert!(h.coord().prepared().is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_coordinator_follows_the_model_across_restarts(ops in prop::collection::vec(op(), 1..40)) {
        run(&ops);
    }
}

#[test]
fn a_commit_prepared_before_a_crash_completes_at_open() {
    run(&[
        Op::Init(0),
        Op::Add {
            id: 0,
            stale: false,
            partition: 1,
        },
        Op::AddOffsets { id: 0, group: 0 },
        Op::CommitOffset {
            id: 0,
            group: 0,
            offset: 42,
        },
        Op::Failing(true),
        Op::End {
            id: 0,
            commit: true,
            stale: false,
        },
        Op::Complete(0),
        Op::Restart,
    ]);
}

#[test]
fn a_timed_out_transaction_is_aborted_and_its_producer_fenced() {
    run(&[
        Op::Init(1),
        Op::Add {
            id: 1,
            stale: false,
            partition: 0,
        },
        Op::TimeoutPasses,
        Op::Complete(1),
        Op::Add {
            id: 1,
            stale: true,
            partition: 0,
        },
        Op::End {
            id: 1,
            commit: true,
            stale: true,
        },
    ]);
}
