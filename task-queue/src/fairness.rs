//! Fair turns between tenants, and the overload mode, for share-group acquisition.
//!
//! With `lograil.share.fairness.key` set, acquisition does not take the available records
//! strictly in offset order: it serves the tenants (the records' keys, or one header's values)
//! in turn, by weighted deficit round robin, among the available records of a look-ahead
//! window past SPSO (`lograil.share.fairness.window` records). FIFO within a tenant; a tenant
//! gets as many records per turn as its weight (`lograil.share.fairness.weights`, 1 unless
//! listed). Work-conserving: while any record of the window is available, a fetch gets one.
//!
//! What a record's tenant, timestamp and deadline are is in the log, not in the share state:
//! the broker reads them for the window ([`crate::SharePartition::unknown_meta`]) and hands
//! them in ([`crate::SharePartition::learn`]). They are kept beside the entries, never
//! persisted (after a restart the broker reads them again).
//!
//! With `lograil.share.overload.target.ms` set, CoDel's rule decides an overload mode: once the
//! oldest available record of the window has waited longer than the target for a whole
//! `lograil.share.overload.interval.ms`, acquisition serves the newest records first and
//! archives every available record past its deadline as expired; once the oldest available
//! record waits no longer than the target (or none is left), it is off again.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Which part of a record names its tenant for fair turns.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FairnessKey {
    /// No fair turns: offset order (the default).
    #[default]
    None,
    /// The record's key.
    Key,
    /// The value of the record's first header of this name.
    Header(String),
}

impl FairnessKey {
    /// `none`, `key` or `header:<name>` (the first two in any case; a header name as given).
    pub fn parse(value: &str) -> Option<FairnessKey> {
        let value = value.trim();
        match value.to_ascii_lowercase().as_str() {
            "none" | "" => Some(FairnessKey::None),
            "key" => Some(FairnessKey::Key),
            lower if lower.starts_with("header:") => {
                let name = &value["header:".len()..];
                (!name.is_empty()).then(|| FairnessKey::Header(name.to_string()))
            }
            _ => None,
        }
    }
}

impl fmt::Display for FairnessKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FairnessKey::None => f.write_str("none"),
            FairnessKey::Key => f.write_str("key"),
            FairnessKey::Header(name) => write!(f, "header:{name}"),
        }
    }
}

/// A tenant: the bytes of its key or header value; a record without one belongs to the empty
/// tenant.
pub type Tenant = Arc<[u8]>;

/// What acquisition knows of a record beyond its offset, read from the log by the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMeta {
    pub tenant: Tenant,
    /// The record's timestamp (ms since the epoch).
    pub timestamp: i64,
    /// Its `deadline` header (ms since the epoch), if it has one.
    pub deadline: Option<i64>,
}

/// One tenant's share of a partition, for describe and metrics (`tenant: None` = the "other"
/// bucket).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantStats {
    pub tenant: Option<Tenant>,
    /// Records available now or later (a released record's delay not over yet included).
    pub available: u64,
    /// Records held by members.
    pub in_flight: u64,
    /// The timestamp of the oldest available record.
    pub oldest_available_ms: Option<i64>,
}

/// The meta of one offset of the look-ahead window: 24 bytes (and 8 more for the offset in its
/// tenant's list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub tenant: u32,
    pub timestamp: i64,
    /// `i64::MAX`: no deadline.
    pub deadline: i64,
}

/// Tenants of one partition's window by a small number, each kept while a record of the window
/// names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Interner {
    ids: HashMap<Tenant, u32>,
    /// By id: the tenant and how many slots name it (`None`: a free id).
    names: Vec<Option<(Tenant, usize)>>,
    free: Vec<u32>,
}

impl Interner {
    fn intern(&mut self, tenant: Tenant) -> u32 {
        if let Some(&id) = self.ids.get(&tenant) {
            if let Some(Some((_, count))) = self.names.get_mut(id as usize) {
                *count += 1;
            }
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.names[id as usize] = Some((tenant.clone(), 1));
                id
            }
            None => {
                self.names.push(Some((tenant.clone(), 1)));
                (self.names.len() - 1) as u32
            }
        };
        self.ids.insert(tenant, id);
        id
    }

    /// One slot fewer names `id`; whether that was its last.
    fn release(&mut self, id: u32) -> bool {
        let Some(named) = self.names.get_mut(id as usize) else {
            return false;
        };
        let last = match named {
            Some((_, count)) if *count > 1 => {
                *count -= 1;
                false
            }
            Some(_) => true,
            None => false,
        };
        if last {
            if let Some((tenant, _)) = named.take() {
                self.ids.remove(&tenant);
            }
            self.free.push(id);
        }
        last
    }

    fn name(&self, id: u32) -> Option<&Tenant> {
        self.names
            .get(id as usize)
            .and_then(|n| n.as_ref())
            .map(|(t, _)| t)
    }

    fn len(&self) -> usize {
        self.names.len()
    }
}

/// Candidates by tenant id, and the tenants with any in the order of their first candidate.
pub(crate) struct Queues {
    pub queues: Vec<VecDeque<i64>>,
    pub newcomers: Vec<u32>,
}

/// The look-ahead window's metas (offsets `first..first + slots.len()`, from SPSO on), the
/// round-robin state and the overload mode of one share partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lookahead {
    first: i64,
    slots: VecDeque<Slot>,
    tenants: Interner,
    /// By tenant id: its offsets of the window, ascending (finished ones dropped as met).
    by_tenant: Vec<VecDeque<i64>>,
    /// The earliest deadline of the window's records not finished when last looked at
    /// (`i64::MAX`: none): no record expires before it.
    pub next_expiry: i64,
    /// Tenants in turn, the one being served (or next) at the front.
    pub ring: VecDeque<u32>,
    /// By tenant id: what is left of its turn (0: its turn has not begun).
    pub deficits: Vec<u32>,
    /// Since when the oldest available record has waited longer than the target.
    pub above_since: Option<i64>,
    pub overloaded: bool,
}

impl Lookahead {
    pub fn new(first: i64) -> Self {
        Lookahead {
            first,
            next_expiry: i64::MAX,
            ..Lookahead::default()
        }
    }

    /// The offset after the last known meta.
    pub fn end(&self) -> i64 {
        self.first + self.slots.len() as i64
    }

    pub fn get(&self, offset: i64) -> Option<&Slot> {
        let i = usize::try_from(offset.checked_sub(self.first)?).ok()?;
        self.slots.get(i)
    }

    pub fn tenant(&self, id: u32) -> Option<&Tenant> {
        self.tenants.name(id)
    }

    /// How many tenant ids there may be (for per-id tables).
    pub fn tenant_ids(&self) -> usize {
        self.tenants.len()
    }

    /// Appends the metas of `first..`, skipping those already known; metas that would leave a
    /// gap after the last known one are ignored.
    pub fn learn(&mut self, first: i64, metas: Vec<RecordMeta>) {
        let end = self.end();
        for (offset, meta) in (first..).zip(metas) {
            if offset < end {
                continue;
            }
            if offset > self.end() {
                break;
            }
            let tenant = self.tenants.intern(meta.tenant);
            let deadline = meta.deadline.unwrap_or(i64::MAX);
            self.next_expiry = self.next_expiry.min(deadline);
            if self.by_tenant.len() <= tenant as usize {
                self.by_tenant.resize(tenant as usize + 1, VecDeque::new());
            }
            self.by_tenant[tenant as usize].push_back(offset);
            self.slots.push_back(Slot {
                tenant,
                timestamp: meta.timestamp,
                deadline,
            });
        }
    }

    /// Forgets the metas below `start`; before the first known one, forgets all (to be read
    /// again from `start`).
    pub fn start_at(&mut self, start: i64) {
        if start < self.first {
            while let Some(slot) = self.slots.pop_front() {
                self.forget(slot.tenant);
            }
            self.by_tenant.iter_mut().for_each(VecDeque::clear);
            self.first = start;
            return;
        }
        while self.first < start {
            let Some(slot) = self.slots.pop_front() else {
                self.first = start;
                break;
            };
            if let Some(list) = self.by_tenant.get_mut(slot.tenant as usize) {
                while list.front().is_some_and(|o| *o < start) {
                    list.pop_front();
                }
            }
            self.forget(slot.tenant);
            self.first += 1;
        }
    }

    /// CoDel's rule, at an acquisition at `now` finding the oldest available record from
    /// `oldest` (its timestamp; `None`: none available): on once it has been older than
    /// `target` at every acquisition for `interval`, off once it is not. What changed.
    pub fn codel(
        &mut self,
        now: i64,
        oldest: Option<i64>,
        target: i64,
        interval: i64,
    ) -> Option<bool> {
        match oldest {
            Some(timestamp) if now.saturating_sub(timestamp) > target => {
                let since = *self.above_since.get_or_insert(now);
                if !self.overloaded && now.saturating_sub(since) >= interval {
                    self.overloaded = true;
                    return Some(true);
                }
                None
            }
            _ => {
                self.above_since = None;
                if self.overloaded {
                    self.overloaded = false;
                    return Some(false);
                }
                None
            }
        }
    }

    /// Weighted deficit round robin: up to `budget` of the [`Queues`]' offsets, each tenant's
    /// in its order, the tenants in turn, each turn as many as the tenant's weight (`weights`
    /// by id). The ring and what is left of a turn carry over to the next call; a tenant
    /// without candidates leaves the ring, a newcomer joins at the back (in the order of its
    /// first candidate). The chosen offsets, in the order chosen.
    pub fn turns(&mut self, queues: Queues, weights: &[u32], budget: usize) -> Vec<i64> {
        let Queues {
            mut queues,
            newcomers,
        } = queues;
        let ids = queues.len();
        self.deficits.resize(ids.max(self.deficits.len()), 0);
        let mut in_ring = vec![false; ids];
        let deficits = &mut self.deficits;
        self.ring.retain(|&id| {
            let keep = queues.get(id as usize).is_some_and(|q| !q.is_empty());
            if keep {
                in_ring[id as usize] = true;
            } else if let Some(d) = deficits.get_mut(id as usize) {
                *d = 0;
            }
            keep
        });
        for id in newcomers {
            if !in_ring[id as usize] {
                in_ring[id as usize] = true;
                self.ring.push_back(id);
            }
        }
        let mut chosen = Vec::with_capacity(budget);
        while chosen.len() < budget {
            let Some(&id) = self.ring.front() else {
                break;
            };
            let i = id as usize;
            if self.deficits[i] == 0 {
                self.deficits[i] = weights.get(i).copied().unwrap_or(1).max(1);
            }
            while self.deficits[i] > 0 && chosen.len() < budget {
                let Some(offset) = queues[i].pop_front() else {
                    break;
                };
                chosen.push(offset);
                self.deficits[i] -= 1;
            }
            if queues[i].is_empty() {
                self.ring.pop_front();
                self.deficits[i] = 0;
            } else if self.deficits[i] == 0 {
                self.ring.rotate_left(1);
            }
        }
        chosen
    }

    /// By tenant id: its offsets of the window, ascending (for [`Lookahead::turns`]'s
    /// candidates; finished ones may be dropped from them).
    pub fn lists_mut(&mut self) -> &mut [VecDeque<i64>] {
        &mut self.by_tenant
    }

    fn forget(&mut self, id: u32) {
        if self.tenants.release(id) {
            self.ring.retain(|t| *t != id);
            if let Some(list) = self.by_tenant.get_mut(id as usize) {
                // Its room goes too (a flood's list must not outlive the flood).
                *list = VecDeque::new();
            }
            if let Some(d) = self.deficits.get_mut(id as usize) {
                *d = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn meta(tenant: &str) -> RecordMeta {
        RecordMeta {
            tenant: tenant.as_bytes().into(),
            timestamp: 1,
            deadline: None,
        }
    }

    #[test]
    fn fairness_keys_parse_and_print() {
        for (text, key) in [
            ("none", FairnessKey::None),
            ("KEY", FairnessKey::Key),
            ("header:Tenant-Id", FairnessKey::Header("Tenant-Id".into())),
        ] {
            assert_eq!(FairnessKey::parse(text), Some(key.clone()));
            assert_eq!(FairnessKey::parse(&key.to_string()), Some(key));
        }
        assert_eq!(FairnessKey::parse("header:"), None);
        assert_eq!(FairnessKey::parse("value"), None);
    }

    #[test]
    fn tenants_are_interned_while_named_and_their_ids_reused() {
        let mut w = Lookahead::new(10);
        w.learn(10, vec![meta("a"), meta("b"), meta("a")]);
        // Known already, and a gap: both ignored.
        w.learn(11, vec![meta("z")]);
        w.learn(20, vec![meta("z")]);
        assert_eq!(w.end(), 13);
        let ids: Vec<u32> = (10..13).map(|o| w.get(o).unwrap().tenant).collect();
        assert_eq!(ids[0], ids[2]);
        assert_ne!(ids[0], ids[1]);
        w.ring.push_back(ids[1]);
        w.start_at(12);
        // "b" is gone: its id is free, out of the ring, and taken by the next newcomer.
        assert!(w.ring.is_empty());
        assert!(w.tenant(ids[1]).is_none());
        w.learn(13, vec![meta("c")]);
        assert_eq!(w.get(13).unwrap().tenant, ids[1]);
        assert_eq!(&**w.tenant(ids[1]).unwrap(), b"c");
        assert_eq!(&**w.tenant(ids[0]).unwrap(), b"a");
        // Past the end: empty from there; before the start: empty and read again.
        w.start_at(50);
        assert_eq!((w.end(), w.tenants.ids.len()), (50, 0));
        w.learn(50, vec![meta("a")]);
        w.start_at(40);
        assert_eq!((w.end(), w.tenants.ids.len()), (40, 0));
    }
}

/// Acquisition with fair turns and the overload mode, on a test clock.
#[cfg(test)]
mod acquisition {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{AckBatch, AckType, ArchiveReason, RecordState, ShareConfig, SharePartition};

    fn fair() -> ShareConfig {
        ShareConfig {
            fairness_key: FairnessKey::Key,
            ..ShareConfig::default()
        }
    }

    fn meta(tenant: &str, timestamp: i64, deadline: Option<i64>) -> RecordMeta {
        RecordMeta {
            tenant: tenant.as_bytes().into(),
            timestamp,
            deadline,
        }
    }

    /// A partition whose log holds `tenants[i]`'s record at offset i, all metas learned.
    fn partition(tenants: &[&str], config: &ShareConfig) -> SharePartition {
        let mut p = SharePartition::new(0);
        let end = tenants.len() as i64;
        let (from, to) = p.unknown_meta(end, config).unwrap();
        assert_eq!((from, to), (0, end.min(config.lookahead() as i64)));
        p.learn(
            from,
            tenants[from as usize..to as usize]
                .iter()
                .map(|t| meta(t, 0, None))
                .collect(),
        );
        assert_eq!(p.unknown_meta(end, config), None);
        p
    }

    fn accept(p: &mut SharePartition, member: &str, offsets: &[i64], config: &ShareConfig) {
        let batches: Vec<AckBatch> = offsets
            .iter()
            .map(|&o| AckBatch {
                first_offset: o,
                last_offset: o,
                types: vec![AckType::Accept],
            })
            .collect();
        p.acknowledge(member, &batches, 0, config).unwrap();
    }

    fn offsets(p: &mut SharePartition, n: usize, end: i64, now: i64, c: &ShareConfig) -> Vec<i64> {
        p.acquire("w", now, n, end, c).0.offsets().collect()
    }

    #[test]
    fn one_record_fetches_take_turns_and_a_newcomer_waits_one_round() {
        let config = fair();
        let mut log = vec!["a"; 10];
        log.extend(["b", "b", "c", "c"]);
        let mut p = partition(&log, &config);
        let got: Vec<i64> = (0..8)
            .flat_map(|_| offsets(&mut p, 1, 14, 0, &config))
            .collect();
        assert_eq!(got, vec![0, 10, 12, 1, 11, 13, 2, 3]);
        // b and c are done; d arrives behind a: served at the very next turn.
        p.learn(14, vec![meta("d", 0, None)]);
        assert_eq!(offsets(&mut p, 2, 15, 0, &config), vec![4, 14]);
        // SPEO went to 15 on the way; the offsets between are entries, still available.
        assert_eq!(p.end(), 15);
        assert_eq!(p.entry(9).unwrap().deliveries, 0);
        assert!(matches!(
            p.entry(9).unwrap().state,
            RecordState::Available { .. }
        ));
    }

    #[test]
    fn weights_are_honoured_over_many_fetches() {
        let mut config = fair();
        config.fairness_weights.insert(b"a".to_vec(), 3);
        let log: Vec<&str> = (0..800)
            .map(|i| if i % 2 == 0 { "a" } else { "b" })
            .collect();
        let mut p = partition(&log, &config);
        let mut served = [0usize; 2];
        for fetch in 0..60 {
            // Fetches of 1 and of 7 alike.
            let n = if fetch % 2 == 0 { 1 } else { 7 };
            let got = offsets(&mut p, n, 800, 0, &config);
            assert_eq!(got.len(), n, "work-conserving");
            for &o in &got {
                served[(o % 2) as usize] += 1;
            }
            accept(&mut p, "w", &got, &config);
        }
        assert_eq!(served[0] + served[1], 240);
        assert_eq!((served[0], served[1]), (180, 60), "3:1");
        // FIFO within a tenant: each served its oldest records.
        assert_eq!(p.start(), 1 + 2 * 60);
    }

    #[test]
    fn work_conserving_within_the_window_and_past_it() {
        let mut config = fair();
        config.fairness_window = 100;
        // One tenant only, 300 records, metas for the first 100 (the window).
        let mut p = partition(&vec!["a"; 300], &config);
        assert_eq!(
            offsets(&mut p, 150, 300, 0, &config),
            (0..150).collect::<Vec<_>>()
        );
        // The lock limit still holds.
        config.max_record_locks = 160;
        assert_eq!(offsets(&mut p, 100, 300, 0, &config).len(), 10);
    }

    #[test]
    fn fairness_off_again_forgets_the_window() {
        let mut config = fair();
        let mut p = partition(&["a", "a", "b"], &config);
        assert_eq!(offsets(&mut p, 2, 3, 0, &config), vec![0, 2]);
        config.fairness_key = FairnessKey::None;
        assert_eq!(p.unknown_meta(3, &config), None);
        assert_eq!(offsets(&mut p, 2, 3, 0, &config), vec![1]);
        assert!(p.tenant_stats(10).is_empty());
    }

    #[test]
    fn codel_switches_on_after_an_interval_above_target_and_off_when_drained() {
        let config = ShareConfig {
            overload_target_ms: Some(100),
            overload_interval_ms: 1000,
            max_record_locks: 100,
            ..ShareConfig::default()
        };
        let mut p = SharePartition::new(0);
        p.learn(0, (0..10).map(|i| meta("", i, None)).collect());
        let at = |p: &mut SharePartition, now: i64| p.acquire("w", now, 0, 10, &config).1;
        assert_eq!(at(&mut p, 50).overload, None, "below target");
        assert_eq!(at(&mut p, 200).overload, None, "above since 200");
        assert_eq!(at(&mut p, 1100).overload, None);
        assert!(!p.overloaded());
        assert_eq!(at(&mut p, 1200).overload, Some(true));
        assert!(p.overloaded());
        assert_eq!(at(&mut p, 1300).overload, None, "still on");
        // Newest first while on.
        let (got, changes) = p.acquire("w", 1400, 3, 10, &config);
        assert_eq!(got.ranges, vec![(7, 9, 1)]);
        assert_eq!(changes.overload, None);
        // Drained: the next acquisition finds none available and switches it off.
        let (got, _) = p.acquire("w", 1500, 100, 10, &config);
        assert_eq!(got.count(), 7);
        assert_eq!(at(&mut p, 1600).overload, Some(false));
        assert!(!p.overloaded());
        // Above again, but it dipped in between: the interval starts over.
        let mut q = SharePartition::new(0);
        q.learn(0, vec![meta("", 0, None), meta("", 5_000, None)]);
        let at = |q: &mut SharePartition, now: i64, n| q.acquire("w", now, n, 2, &config).1;
        assert_eq!(at(&mut q, 1_000, 0).overload, None);
        // Offset 0 taken: the oldest available is 5000, within target at 5050.
        assert_eq!(at(&mut q, 1_100, 1).overload, None);
        assert_eq!(at(&mut q, 5_050, 0).overload, None);
        assert_eq!(at(&mut q, 5_200, 0).overload, None);
        assert_eq!(at(&mut q, 6_150, 0).overload, None, "950 ms above");
        assert_eq!(at(&mut q, 6_200, 0).overload, Some(true));
    }

    #[test]
    fn overload_archives_expired_records_and_serves_newest_first_per_tenant() {
        let config = ShareConfig {
            overload_target_ms: Some(100),
            overload_interval_ms: 100,
            fairness_key: FairnessKey::Key,
            ..ShareConfig::default()
        };
        let mut p = SharePartition::new(0);
        // a: 0..4 (1 and 2 due by 500), b: 4..6; all written at 0.
        p.learn(
            0,
            vec![
                meta("a", 0, None),
                meta("a", 0, Some(400)),
                meta("a", 0, Some(450)),
                meta("a", 0, Some(10_000)),
                meta("b", 0, None),
                meta("b", 0, Some(300)),
            ],
        );
        // Not overloaded yet: nothing expires, oldest first.
        let (got, changes) = p.acquire("w", 450, 1, 6, &config);
        assert_eq!(got.ranges, vec![(0, 0, 1)]);
        assert!(changes.archived.is_empty());
        let (got, changes) = p.acquire("w", 600, 3, 6, &config);
        assert_eq!(changes.overload, Some(true));
        let mut expired: Vec<(i64, ArchiveReason)> = changes
            .archived
            .iter()
            .map(|a| (a.offset, a.reason))
            .collect();
        expired.sort_unstable_by_key(|(o, _)| *o);
        assert_eq!(
            expired,
            vec![
                (1, ArchiveReason::Expired),
                (2, ArchiveReason::Expired),
                (5, ArchiveReason::Expired)
            ]
        );
        assert!(changes.offsets.contains(&5), "persisted");
        // Then a's newest (3), b's newest (4): all that is left.
        assert_eq!(got.offsets().collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(p.end(), 6);
    }

    #[test]
    fn tenant_stats_rank_by_available_and_sum_the_rest() {
        let config = fair();
        let mut log = vec!["a"; 5];
        log.extend(["b"; 3]);
        log.extend(["c", "c", "d"]);
        let mut p = SharePartition::new(0);
        p.learn(
            0,
            log.iter()
                .enumerate()
                .map(|(i, t)| meta(t, 100 + i as i64, None))
                .collect(),
        );
        // One record of each tenant in flight (a0, b5, c8, d10), a0 then accepted.
        let got = offsets(&mut p, 4, 11, 0, &config);
        assert_eq!(got, vec![0, 5, 8, 10]);
        accept(&mut p, "w", &[0], &config);
        let stats = p.tenant_stats(2);
        let tenant = |t: &str| Some(Tenant::from(t.as_bytes()));
        assert_eq!(
            stats,
            vec![
                TenantStats {
                    tenant: tenant("a"),
                    available: 4,
                    in_flight: 0,
                    oldest_available_ms: Some(101)
                },
                TenantStats {
                    tenant: tenant("b"),
                    available: 2,
                    in_flight: 1,
                    oldest_available_ms: Some(106)
                },
                TenantStats {
                    tenant: None,
                    available: 1,
                    in_flight: 2,
                    oldest_available_ms: Some(109)
                },
            ]
        );
        assert_eq!(p.tenant_stats(10).len(), 4);
    }

    #[test]
    fn restore_and_reset_ask_for_the_window_again() {
        let config = fair();
        let mut p = partition(&["a", "a", "b", "b"], &config);
        assert_eq!(offsets(&mut p, 2, 4, 0, &config), vec![0, 2]);
        // What the store would replay: the changed entries, SPSO and SPEO.
        let entries = p.entries().map(|(o, e)| (o, e.clone())).collect();
        let mut r = SharePartition::restore(p.start(), p.end(), entries);
        assert_eq!((r.start(), r.end()), (0, 3));
        assert!(matches!(
            r.entry(1).unwrap().state,
            RecordState::Available { .. }
        ));
        assert_eq!(r.entry(2).unwrap().deliveries, 1);
        assert_eq!(r.unknown_meta(4, &config), Some((0, 4)));
        r.learn(
            0,
            ["a", "a", "b", "b"]
                .iter()
                .map(|t| meta(t, 0, None))
                .collect(),
        );
        assert_eq!(offsets(&mut r, 4, 4, 0, &config), vec![0, 1, 2, 3]);
        p.reset_start(3);
        assert_eq!(p.unknown_meta(4, &config), None, "3 was known already");
        p.reset_start(1);
        assert_eq!(p.unknown_meta(4, &config), Some((1, 4)));
    }
}

/// What fair acquisition costs per call. `cargo test --release -p task-queue --lib -- --ignored
/// fair_acquire_cost --nocapture`
#[cfg(test)]
mod cost {
    #![allow(clippy::unwrap_used)]

    use std::time::{Duration, Instant};

    use super::*;
    use crate::{AckBatch, AckType, ShareConfig, SharePartition};

    #[test]
    #[ignore = "a measurement, not a check: run in a release build"]
    fn fair_acquire_cost() {
        let fair = ShareConfig {
            fairness_key: FairnessKey::Key,
            ..ShareConfig::default()
        };
        let overload = ShareConfig {
            overload_target_ms: Some(60_000),
            ..fair.clone()
        };
        for (name, config) in [
            ("offset order", ShareConfig::default()),
            ("fair turns", fair),
            ("fair turns and overload mode", overload),
        ] {
            measure(name, &config);
        }
    }

    fn measure(name: &str, config: &ShareConfig) {
        // 100 tenants; tenant 0 writes half of the records.
        let tenant = |o: i64| -> Tenant {
            let t = if o % 2 == 0 { 0 } else { (o / 2) % 99 + 1 };
            format!("tenant-{t}").into_bytes().into()
        };
        let mut p = SharePartition::new(0);
        let mut log_end = 20_000;
        let (mut acquire, mut learn, mut rounds) = (Duration::ZERO, Duration::ZERO, 0u32);
        for round in 0..200 {
            let started = Instant::now();
            if let Some((from, to)) = p.unknown_meta(log_end, config) {
                let metas = (from..to)
                    .map(|o| RecordMeta {
                        tenant: tenant(o),
                        timestamp: o,
                        deadline: None,
                    })
                    .collect();
                p.learn(from, metas);
            }
            let learned = started.elapsed();
            let started = Instant::now();
            let (got, _) = p.acquire("w", 1_000 + round, 500, log_end, config);
            let took = started.elapsed();
            assert_eq!(got.count(), 500);
            if round >= 20 {
                acquire += took;
                learn += learned;
                rounds += 1;
            }
            let acks: Vec<AckBatch> = got
                .ranges
                .iter()
                .map(|&(first, last, _)| AckBatch {
                    first_offset: first,
                    last_offset: last,
                    types: vec![AckType::Accept],
                })
                .collect();
            p.acknowledge("w", &acks, 1_000 + round, config).unwrap();
            log_end += 500;
        }
        let window = p.entries().count();
        println!(
            "{name}: acquire of 500 from a 20000-record window, 100 tenants: {:?} per call \
             (learning the new metas: {:?}); {window} entries SPSO..SPEO at the end",
            acquire / rounds,
            learn / rounds
        );
    }
}
