//! Model-based property test of the share-partition state machine: random appends,
//! acquisitions by several members, acknowledgements (accept, release, reject, gap, and invalid
//! ones), lock timeouts, closed sessions and restarts (the state written through the store,
//! replayed from the log) against a plain model that keeps one state per offset. A second
//! variant turns fair turns on (three tenants, one weighing 2, a small look-ahead window): the
//! same model of states, with acquisition checked for FIFO within each tenant and a bound on how
//! long a tenant with available records waits for its turn, and every record delivered in the
//! end.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::{BTreeMap, HashSet};

use log_core::{Log, Uuid};
use proptest::prelude::*;
use task_queue::{
    AckBatch, AckError, AckType, ArchiveReason, Change, FairnessKey, RecordMeta, RecordState,
    ShareConfig, ShareKey, SharePartition, ShareStore,
};

const MEMBERS: [&str; 3] = ["a", "b", "c"];
/// The tenants of the fair variant and their weights.
const TENANTS: [&str; 3] = ["t0", "t1", "t2"];
const WEIGHTS: [u32; 3] = [2, 1, 1];

#[derive(Clone, Debug)]
enum Op {
    /// `n` records of one tenant (the fair variant's; ignored by the other).
    Append {
        n: i64,
        tenant: usize,
    },
    Acquire {
        member: usize,
        max: usize,
    },
    /// Acknowledge every `stride`-th record `member` holds with `kind` (0 gap … 3 reject).
    Ack {
        member: usize,
        kind: u8,
        stride: usize,
    },
    /// Acknowledge an offset the member does not hold: refused, nothing changes.
    BadAck {
        member: usize,
        at: u16,
    },
    Expire,
    Close {
        member: usize,
    },
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1i64..20, 0usize..3).prop_map(|(n, tenant)| Op::Append { n, tenant }),
        4 => (0usize..3, 1usize..12).prop_map(|(member, max)| Op::Acquire { member, max }),
        4 => (0usize..3, 0u8..4, 1usize..4)
            .prop_map(|(member, kind, stride)| Op::Ack { member, kind, stride }),
        1 => (0usize..3, 0u16..1000).prop_map(|(member, at)| Op::BadAck { member, at }),
        2 => Just(Op::Expire),
        1 => (0usize..3).prop_map(|member| Op::Close { member }),
        1 => Just(Op::Restart),
    ]
}

/// The model: one state per offset of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
enum M {
    Available,
    Acquired(usize),
    Done,
}

struct Harness {
    dir: tempfile::TempDir,
    log: Option<Log>,
    store: Option<ShareStore>,
    key: ShareKey,
    real: SharePartition,
    model: Vec<(M, u16)>,
    /// By offset: its tenant (an index of TENANTS).
    tenants: Vec<usize>,
    /// By offset: when it was appended, and its deadline (the last tenant's records have one).
    times: Vec<(i64, Option<i64>)>,
    /// By tenant: records acquired for others since it was last served while it had available
    /// records in the window.
    waits: [u32; 3],
    fair: bool,
    now: i64,
    config: ShareConfig,
}

impl Harness {
    fn fair() -> Self {
        let mut harness = Harness::new();
        harness.fair = true;
        harness.config.fairness_key = FairnessKey::Key;
        // Smaller than the set() range allows, to cross its end often.
        harness.config.fairness_window = 16;
        harness.config.fairness_weights = TENANTS
            .iter()
            .zip(WEIGHTS)
            .map(|(t, w)| (t.as_bytes().to_vec(), w))
            .collect();
        harness
    }

    /// Fair turns and the overload mode: on once the oldest available record has waited
    /// 50 ms for 30 ms (each operation takes 10 ms, a lock timeout 1 s).
    fn fair_overloaded() -> Self {
        let mut harness = Harness::fair();
        harness.config.overload_target_ms = Some(50);
        harness.config.overload_interval_ms = 30;
        harness
    }

    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path()).unwrap();
        let (store, restored) = ShareStore::open(&log).unwrap();
        assert!(restored.partitions.is_empty());
        Harness {
            dir,
            log: Some(log),
            store: Some(store),
            key: ShareKey::new("g", Uuid::from_u128(7), 0),
            real: SharePartition::new(0),
            model: Vec::new(),
            tenants: Vec::new(),
            times: Vec::new(),
            waits: [0; 3],
            fair: false,
            now: 1_000_000,
            config: ShareConfig {
                delivery_limit: 3,
                max_record_locks: 8,
                lock_duration_ms: 1000,
                ..ShareConfig::default()
            },
        }
    }

    fn persist(&self, offsets: &[i64]) {
        let store = self.store.as_ref().unwrap();
        let change = Change::delta(self.key.clone(), &self.real, offsets);
        if let Some(info) = store.append(vec![change]).unwrap() {
            store.partition().await_durable(&info).unwrap();
        }
    }

    fn held(&self, member: usize) -> Vec<i64> {
        (0..self.model.len() as i64)
            .filter(|o| self.model[*o as usize].0 == M::Acquired(member))
            .collect()
    }

    /// The model's release: available again, or done after the last allowed delivery.
    fn release(&mut self, offset: i64) {
        let slot = &mut self.model[offset as usize];
        slot.0 = if slot.1 >= self.config.delivery_limit {
            M::Done
        } else {
            M::Available
        };
    }

    fn apply(&mut self, op: &Op) {
        self.now += 10;
        match *op {
            Op::Append { n, tenant } => {
                self.model.extend((0..n).map(|_| (M::Available, 0)));
                self.tenants.extend((0..n).map(|_| tenant));
                let deadline = (tenant == 2).then_some(self.now + 150);
                self.times.extend((0..n).map(|_| (self.now, deadline)));
            }
            Op::Acquire { member, max } if self.fair => self.acquire_fair(member, max),
            Op::Acquire { member, max } => {
                let log_end = self.model.len() as i64;
                let (acquired, changes) =
                    self.real
                        .acquire(MEMBERS[member], self.now, max, log_end, &self.config);
                let held = self
                    .model
                    .iter()
                    .filter(|(m, _)| matches!(m, M::Acquired(_)))
                    .count();
                let mut budget = max.min(self.config.max_record_locks - held);
                let mut expected = Vec::new();
                for offset in 0..log_end {
                    if budget == 0 {
                        break;
                    }
                    let slot = &mut self.model[offset as usize];
                    if slot.0 != M::Available {
                        continue;
                    }
                    // Every allowed delivery used (a lock lost in a restart): archived.
                    if slot.1 >= self.config.delivery_limit {
                        slot.0 = M::Done;
                        continue;
                    }
                    expected.push(offset);
                    budget -= 1;
                }
                assert_eq!(acquired.offsets().collect::<Vec<_>>(), expected);
                for offset in &expected {
                    let slot = &mut self.model[*offset as usize];
                    slot.0 = M::Acquired(member);
                    slot.1 += 1;
                }
                for (first, last, count) in &acquired.ranges {
                    for o in *first..=*last {
                        assert_eq!(self.model[o as usize].1, *count, "delivery count of {o}");
                    }
                }
                self.persist(&changes.offsets);
            }
            Op::Ack {
                member,
                kind,
                stride,
            } => {
                let chosen: Vec<i64> = self.held(member).into_iter().step_by(stride).collect();
                let ack = match kind {
                    0 => AckType::Gap,
                    1 => AckType::Accept,
                    2 => AckType::Release { delay: 0 },
                    _ => AckType::Reject,
                };
                let batches: Vec<AckBatch> = chosen
                    .iter()
                    .map(|o| AckBatch {
                        first_offset: *o,
                        last_offset: *o,
                        types: vec![ack],
                    })
                    .collect();
                let changes = self
                    .real
                    .acknowledge(MEMBERS[member], &batches, self.now, &self.config)
                    .unwrap();
                for offset in chosen {
                    match ack {
                        AckType::Release { .. } => self.release(offset),
                        _ => self.model[offset as usize].0 = M::Done,
                    }
                }
                let archived: Vec<i64> = changes.archived.iter().map(|a| a.offset).collect();
                if matches!(ack, AckType::Accept) {
                    assert!(archived.is_empty());
                }
                self.persist(&changes.offsets);
            }
            Op::BadAck { member, at } => {
                let len = self.model.len() as i64 + 5;
                let offset = len * i64::from(at) / 1000;
                let held = self
                    .model
                    .get(offset as usize)
                    .is_some_and(|(m, _)| *m == M::Acquired(member));
                if held {
                    return;
                }
                let before = self.real.clone();
                let batch = AckBatch {
                    first_offset: offset,
                    last_offset: offset,
                    types: vec![AckType::Accept],
                };
                assert_eq!(
                    self.real
                        .acknowledge(MEMBERS[member], &[batch], self.now, &self.config),
                    Err(AckError::InvalidRecordState(offset))
                );
                assert_eq!(
                    self.real, before,
                    "a refused acknowledgement changed the state"
                );
            }
            Op::Expire => {
                self.now += self.config.lock_duration_ms;
                let changes = self.real.expire_locks(self.now, &self.config);
                for offset in 0..self.model.len() as i64 {
                    if matches!(self.model[offset as usize].0, M::Acquired(_)) {
                        self.release(offset);
                    }
                }
                self.persist(&changes.offsets);
            }
            Op::Close { member } => {
                let changes = self
                    .real
                    .release_member(MEMBERS[member], self.now, &self.config);
                for offset in self.held(member) {
                    self.release(offset);
                }
                self.persist(&changes.offsets);
            }
            Op::Restart => {
                drop(self.store.take());
                self.log.take().unwrap().close().unwrap();
                let log = Log::open(self.dir.path()).unwrap();
                let (store, mut restored) = ShareStore::open(&log).unwrap();
                self.real = restored
                    .partitions
                    .remove(&self.key)
                    .unwrap_or_else(|| SharePartition::new(0));
                self.log = Some(log);
                self.store = Some(store);
                // Locks do not survive a restart; delivery counts do. Nor do the turns: the
                // bound on waiting holds within one run of the broker.
                self.waits = [0; 3];
                for slot in &mut self.model {
                    if matches!(slot.0, M::Acquired(_)) {
                        slot.0 = M::Available;
                    }
                }
            }
        }
        self.check();
    }

    /// The broker's part: the metas of the look-ahead window it does not know yet.
    fn learn(&mut self) {
        let log_end = self.model.len() as i64;
        if let Some((from, to)) = self.real.unknown_meta(log_end, &self.config) {
            let metas = (from..to)
                .map(|o| RecordMeta {
                    tenant: TENANTS[self.tenants[o as usize]].as_bytes().into(),
                    timestamp: self.times[o as usize].0,
                    deadline: self.times[o as usize].1,
                })
                .collect();
            self.real.learn(from, metas);
        }
        assert_eq!(self.real.unknown_meta(log_end, &self.config), None);
    }

    /// Acquisition with fair turns: which records is the machine's choice, checked against
    /// the rules (as many as before, only available ones, FIFO within a tenant, the window
    /// first, every tenant's turn within a round).
    fn acquire_fair(&mut self, member: usize, max: usize) {
        // The window is the one the broker read the metas of, from SPSO before this
        // acquisition (which may archive records at the front and so move SPSO).
        let window_end =
            (self.model.len() as i64).min(self.real.start() + self.config.fairness_window as i64);
        self.learn();
        let was_overloaded = self.real.overloaded();
        let log_end = self.model.len() as i64;
        let (acquired, changes) =
            self.real
                .acquire(MEMBERS[member], self.now, max, log_end, &self.config);
        // Records with every delivery used (locks lost in a restart) may be archived on the
        // way; never acquired. In the overload mode, every available record of the window past
        // its deadline is archived.
        let limit = self.config.delivery_limit;
        let overloaded = self.real.overloaded();
        assert_eq!(
            changes.overload,
            (was_overloaded != overloaded).then_some(overloaded),
            "a switch of the overload mode is reported"
        );
        for archived in &changes.archived {
            let o = archived.offset;
            let slot = &mut self.model[o as usize];
            assert_eq!(slot.0, M::Available, "archived {o}");
            match archived.reason {
                ArchiveReason::DeliveryLimit => assert!(slot.1 >= limit, "archived {o}"),
                ArchiveReason::Expired => {
                    assert!(overloaded, "{o} expired without overload");
                    assert!(self.times[o as usize].1.is_some_and(|d| d < self.now));
                }
                other => panic!("{o} archived as {other:?} by an acquisition"),
            }
            slot.0 = M::Done;
        }
        if overloaded {
            for o in self.real.start()..window_end {
                let late = self.times[o as usize].1.is_some_and(|d| d < self.now);
                assert!(
                    !(late && self.model[o as usize].0 == M::Available),
                    "{o} is late and still available in the overload mode"
                );
            }
        }
        let held = self
            .model
            .iter()
            .filter(|(m, _)| matches!(m, M::Acquired(_)))
            .count();
        let budget = max.min(self.config.max_record_locks - held);
        let start = self
            .model
            .iter()
            .position(|(m, _)| *m != M::Done)
            .unwrap_or(self.model.len()) as i64;
        let available = self
            .model
            .iter()
            .filter(|(m, d)| *m == M::Available && *d < limit)
            .count();
        let archived: HashSet<i64> = changes.archived.iter().map(|a| a.offset).collect();
        let order: Vec<i64> = changes
            .offsets
            .iter()
            .copied()
            .filter(|o| !archived.contains(o))
            .collect();
        assert_eq!(order.len(), budget.min(available), "work-conserving");
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(acquired.offsets().collect::<Vec<_>>(), sorted);
        let mut taken = HashSet::new();
        let open = |taken: &HashSet<i64>, model: &[(M, u16)], o: i64| {
            model[o as usize].0 == M::Available
                && model[o as usize].1 < limit
                && !taken.contains(&o)
        };
        let oldest_of = |taken: &HashSet<i64>, tenant: Option<usize>, from: i64, to: i64| {
            (from..to).find(|&p| {
                open(taken, &self.model, p) && tenant.is_none_or(|t| self.tenants[p as usize] == t)
            })
        };
        // Whom a tenant's turn serves: its oldest, or its newest in the overload mode.
        let next_of = |taken: &HashSet<i64>, tenant: usize, from: i64, to: i64| {
            let mine =
                |p: &i64| open(taken, &self.model, *p) && self.tenants[*p as usize] == tenant;
            if overloaded {
                (from..to).rev().find(mine)
            } else {
                (from..to).find(mine)
            }
        };
        for tenant in 0..3 {
            if oldest_of(&taken, Some(tenant), start, window_end).is_none() {
                self.waits[tenant] = 0;
            }
        }
        for &offset in &order {
            assert!(open(&taken, &self.model, offset), "{offset} not available");
            if offset < window_end {
                let tenant = self.tenants[offset as usize];
                assert_eq!(
                    next_of(&taken, tenant, start, window_end),
                    Some(offset),
                    "FIFO (newest first when overloaded) within {}",
                    TENANTS[tenant]
                );
                for other in (0..3).filter(|u| *u != tenant) {
                    if oldest_of(&taken, Some(other), start, window_end).is_some() {
                        self.waits[other] += 1;
                        let bound: u32 = (0..3).filter(|u| *u != other).map(|u| WEIGHTS[u]).sum();
                        assert!(
                            self.waits[other] <= bound,
                            "{} waited {} records for its turn",
                            TENANTS[other],
                            self.waits[other]
                        );
                    }
                }
                self.waits[tenant] = 0;
            } else {
                assert_eq!(
                    oldest_of(&taken, None, start, window_end),
                    None,
                    "past the window while a record in it is available"
                );
                assert_eq!(oldest_of(&taken, None, window_end, log_end), Some(offset));
            }
            taken.insert(offset);
        }
        for tenant in 0..3 {
            if oldest_of(&taken, Some(tenant), start, window_end).is_none() {
                self.waits[tenant] = 0;
            }
        }
        for offset in &order {
            let slot = &mut self.model[*offset as usize];
            slot.0 = M::Acquired(member);
            slot.1 += 1;
        }
        for (first, last, count) in &acquired.ranges {
            for o in *first..=*last {
                assert_eq!(self.model[o as usize].1, *count, "delivery count of {o}");
            }
        }
        self.persist(&changes.offsets);
    }

    /// Every record delivered in the end: locks run out, one member takes and accepts all.
    fn drain(&mut self) {
        let log_end = self.model.len() as i64;
        for _ in 0..=self.model.len() {
            if self.real.start() == log_end {
                return;
            }
            self.apply(&Op::Expire);
            self.apply(&Op::Acquire { member: 0, max: 8 });
            self.apply(&Op::Ack {
                member: 0,
                kind: 1,
                stride: 1,
            });
        }
        assert_eq!(self.real.start(), log_end, "SPSO reaches the end");
    }

    fn check(&self) {
        let first_open = self
            .model
            .iter()
            .position(|(m, _)| *m != M::Done)
            .unwrap_or(self.model.len()) as i64;
        assert_eq!(self.real.start(), first_open, "SPSO");
        for offset in first_open..self.real.end() {
            let (model, deliveries) = &self.model[offset as usize];
            let entry = self.real.entry(offset).unwrap();
            assert_eq!(entry.deliveries, *deliveries, "deliveries of {offset}");
            let matches = match (&entry.state, model) {
                (RecordState::Available { .. }, M::Available) => true,
                (RecordState::Acquired { member, .. }, M::Acquired(m)) => **member == *MEMBERS[*m],
                (RecordState::Acknowledged | RecordState::Archived(_), M::Done) => true,
                _ => false,
            };
            assert!(
                matches,
                "offset {offset}: {:?} vs model {model:?}",
                entry.state
            );
            assert!(entry.history.len() <= usize::from(self.config.delivery_limit));
        }
        for offset in self.real.end().max(first_open)..self.model.len() as i64 {
            assert_eq!(
                self.model[offset as usize],
                (M::Available, 0),
                "past SPEO: {offset}"
            );
        }
        let states: BTreeMap<i64, u16> = self
            .real
            .entries()
            .map(|(o, e)| (o, e.deliveries))
            .collect();
        assert!(states
            .keys()
            .all(|o| *o >= first_open && *o < self.real.end()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn share_partition_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        let mut harness = Harness::new();
        for op in &ops {
            harness.apply(op);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn share_partition_with_fair_turns_matches_model(
        ops in proptest::collection::vec(op(), 1..60)
    ) {
        let mut harness = Harness::fair();
        for op in &ops {
            harness.apply(op);
        }
        harness.drain();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn share_partition_with_fair_turns_and_overload_matches_model(
        ops in proptest::collection::vec(op(), 1..60)
    ) {
        let mut harness = Harness::fair_overloaded();
        for op in &ops {
            harness.apply(op);
        }
        harness.drain();
    }
}

/// The overload variant does reach the overload mode: a backlog older than the target for the
/// interval switches it on, late records are archived as expired, and a drained queue switches
/// it off; a restart forgets it (it is not persisted) and the next acquisitions decide afresh.
#[test]
fn the_overload_mode_switches_on_expires_and_switches_off() {
    let mut harness = Harness::fair_overloaded();
    harness.apply(&Op::Append { n: 6, tenant: 0 });
    harness.apply(&Op::Append { n: 6, tenant: 2 });
    let mut on = 0;
    // Records done without a delivery: archived as expired.
    let expired = |h: &Harness| {
        h.model
            .iter()
            .filter(|(m, d)| *m == M::Done && *d == 0)
            .count()
    };
    // One worker, one record at a time, 20 ms each: slower than the backlog's deadlines. Until
    // the first expiry (at most 10 rounds; the backlog lasts longer than that).
    for _ in 0..10 {
        let before = harness.real.overloaded();
        harness.apply(&Op::Acquire { member: 1, max: 1 });
        on += usize::from(!before && harness.real.overloaded());
        harness.apply(&Op::Ack {
            member: 1,
            kind: 1,
            stride: 1,
        });
        if expired(&harness) > 0 {
            break;
        }
    }
    assert_eq!(on, 1);
    assert!(harness.real.overloaded());
    // The tenant with deadlines was archived as its records passed them (150 ms after append).
    assert!(expired(&harness) > 0, "{:?}", harness.model);
    harness.apply(&Op::Restart);
    assert!(!harness.real.overloaded());
    harness.drain();
    assert!(!harness.real.overloaded(), "drained: off");
}

/// A record that every consumer crashes on (its lock always times out) reaches the delivery
/// limit and is archived, across restarts; the records behind it flow.
#[test]
fn a_poison_record_leaves_after_its_delivery_limit_across_restarts() {
    let mut harness = Harness::new();
    harness.apply(&Op::Append { n: 3, tenant: 0 });
    for round in 0..3 {
        harness.apply(&Op::Acquire {
            member: round % 3,
            max: 1,
        });
        assert_eq!(harness.real.entry(0).unwrap().deliveries, round as u16 + 1);
        // The consumer crashes with the record, and the broker restarts too.
        harness.apply(&Op::Restart);
        harness.apply(&Op::Expire);
    }
    // The next fetch finds its deliveries used up: archived, and the others are handed out.
    let (acquired, changes) = harness
        .real
        .acquire("a", harness.now, 5, 3, &harness.config);
    assert_eq!(acquired.ranges, vec![(1, 2, 1)]);
    assert_eq!(changes.archived.len(), 1);
    assert_eq!(changes.archived[0].offset, 0);
    assert_eq!(harness.real.start(), 1);
}
