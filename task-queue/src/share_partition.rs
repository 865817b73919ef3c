//! One share partition: the records of one topic partition as one share group sees them.
//!
//! Offsets below the share-partition start offset (SPSO) are done. From SPSO up to the end
//! offset (SPEO, the first offset never acquired) every record has a state; past SPEO every
//! record is available. A record is acquired by a member for a lock duration; the member
//! acknowledges it (accept → ACKNOWLEDGED), releases it (→ AVAILABLE again, possibly after a
//! delay) or rejects it (→ ARCHIVED); a lock that runs out releases it. Each acquisition counts
//! a delivery; a record released or timed out after its last allowed delivery is archived
//! instead. SPSO moves past every finished (acknowledged or archived) record at the front.
//!
//! Time is passed in (`now`, ms since the epoch), so the machine is tested on a clock of the
//! test's own.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::ShareConfig;
use crate::fairness::{Lookahead, Queues, RecordMeta, TenantStats};
use crate::window::Window;

/// The states of KIP-932 (AVAILABLE past SPEO is implicit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordState {
    /// Can be acquired, from `not_before` (ms; 0: at once) on.
    Available {
        not_before: i64,
    },
    /// Held by a member until its lock runs out (the member id shared by all it holds).
    Acquired {
        member: Arc<str>,
        until: i64,
    },
    Acknowledged,
    Archived(ArchiveReason),
}

impl RecordState {
    /// Acknowledged or archived: nothing more happens to it.
    pub fn is_final(&self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived(_))
    }
}

/// Why a record was archived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArchiveReason {
    /// A member rejected it.
    Rejected,
    /// Released or timed out after its last allowed delivery.
    DeliveryLimit,
    /// Its deadline passed before it could be delivered.
    Expired,
    /// Acknowledged as a gap (an offset without a record).
    Gap,
}

impl ArchiveReason {
    /// Whether the record goes to the dead-letter topic (a gap has no record to send).
    pub fn dead_letters(self) -> bool {
        !matches!(self, ArchiveReason::Gap)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ArchiveReason::Rejected => "rejected",
            ArchiveReason::DeliveryLimit => "delivery limit",
            ArchiveReason::Expired => "expired",
            ArchiveReason::Gap => "gap",
        }
    }
}

/// How one delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Accepted,
    Released,
    Rejected,
    /// The lock ran out.
    TimedOut,
    /// The member's session closed or the member left.
    SessionClosed,
}

/// One delivery of a record: who held it, from when to when, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    pub member: Arc<str>,
    pub acquired_at: i64,
    pub ended_at: i64,
    pub outcome: Outcome,
}

/// The state of one record between SPSO and SPEO.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub state: RecordState,
    pub deliveries: u16,
    /// Every finished delivery, oldest first (at most the delivery limit of them); dropped
    /// once the record is acknowledged, as only an archived record's is ever read.
    pub history: Vec<Attempt>,
    /// When the current delivery began (while acquired).
    pub acquired_at: i64,
}

impl Entry {
    fn new() -> Self {
        Entry {
            state: RecordState::Available { not_before: 0 },
            deliveries: 0,
            history: Vec::new(),
            acquired_at: 0,
        }
    }
}

/// Kafka's acknowledgement types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckType {
    /// 0: an offset without a record (archived).
    Gap,
    /// 1: processed.
    Accept,
    /// 2: give it back for another delivery (optionally after `delay` ms).
    Release { delay: i64 },
    /// 3: unprocessable (archived).
    Reject,
    /// 4 (Kafka 4.2): keep it, extend the lock.
    Renew,
}

impl AckType {
    /// The wire value's type; `None` for an unknown value.
    pub fn from_wire(value: i8) -> Option<AckType> {
        match value {
            0 => Some(AckType::Gap),
            1 => Some(AckType::Accept),
            2 => Some(AckType::Release { delay: 0 }),
            3 => Some(AckType::Reject),
            4 => Some(AckType::Renew),
            _ => None,
        }
    }
}

/// Acknowledgements of a contiguous range of offsets: one type for all, or one per offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub types: Vec<AckType>,
}

/// Why acknowledgements were refused (nothing of them was applied).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// Ranges out of order or overlapping, a range backwards, or types not fitting the range.
    #[error("invalid acknowledgement batches: {0}")]
    InvalidRequest(&'static str),
    /// An offset not acquired by this member (Kafka's INVALID_RECORD_STATE).
    #[error("offset {0} is not acquired by this member")]
    InvalidRecordState(i64),
}

/// Records acquired by one ShareFetch: ranges of offsets with their delivery count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acquired {
    pub ranges: Vec<(i64, i64, u16)>,
}

impl Acquired {
    pub fn count(&self) -> i64 {
        self.ranges.iter().map(|(f, l, _)| l - f + 1).sum()
    }

    pub fn offsets(&self) -> impl Iterator<Item = i64> + '_ {
        self.ranges.iter().flat_map(|(f, l, _)| *f..=*l)
    }

    fn push(&mut self, offset: i64, deliveries: u16) {
        match self.ranges.last_mut() {
            Some((_, last, count)) if *last + 1 == offset && *count == deliveries => *last = offset,
            _ => self.ranges.push((offset, offset, deliveries)),
        }
    }
}

/// A record that was archived, for dead-lettering: its offset, why, and its deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archived {
    pub offset: i64,
    pub reason: ArchiveReason,
    pub deliveries: u16,
    pub history: Vec<Attempt>,
}

/// What an operation changed: the entries to persist, and the records it archived.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The offsets whose entries changed, in the order the operation came to them (an
    /// acquisition with fair turns or newest first: the order it chose them).
    pub offsets: Vec<i64>,
    pub archived: Vec<Archived>,
    /// `Some(true)`: this operation switched the overload mode on; `Some(false)`: off.
    pub overload: Option<bool>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

/// One acquisition under way: for whom, until when, how many more, and what it did so far.
struct Take<'a> {
    holder: &'a Arc<str>,
    now: i64,
    until: i64,
    budget: usize,
    acquired: &'a mut Acquired,
    changes: &'a mut Changes,
}

/// One share partition's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharePartition {
    /// SPSO: every offset below is finished.
    start: i64,
    /// SPEO: every offset from here on is available and was never acquired.
    end: i64,
    /// Every offset from SPSO to SPEO.
    entries: Window,
    /// The records' metas from SPSO on (not persisted), fair turns and the overload mode.
    meta: Box<Lookahead>,
}

impl SharePartition {
    /// A share partition starting at `start` (from `share.auto.offset.reset` or an admin).
    pub fn new(start: i64) -> Self {
        SharePartition {
            start,
            end: start,
            entries: Window::new(start),
            meta: Box::new(Lookahead::new(start)),
        }
    }

    pub fn start(&self) -> i64 {
        self.start
    }

    pub fn end(&self) -> i64 {
        self.end
    }

    pub fn entry(&self, offset: i64) -> Option<&Entry> {
        self.entries.get(offset)
    }

    pub fn entries(&self) -> impl Iterator<Item = (i64, &Entry)> {
        self.entries.iter()
    }

    /// Records held by members now.
    pub fn acquired_count(&self) -> usize {
        self.entries
            .iter()
            .filter(|(_, e)| matches!(e.state, RecordState::Acquired { .. }))
            .count()
    }

    /// Acquires up to `max_records` records for `member` until `now + config.lock_duration_ms`:
    /// first those released earlier (due by `now`), in offset order, then new ones from SPEO up
    /// to `log_end`, within `config.max_record_locks` acquired at once and
    /// `config.max_window` records between SPSO and SPEO. A released record that has had every
    /// delivery it may have (its lock was lost in a restart, or the limit was lowered) is
    /// archived instead.
    ///
    /// With fair turns (`config.fairness_key`), the due records of the look-ahead window whose
    /// metas were [learned](SharePartition::learn) are taken first, the tenants in turn
    /// (weighted deficit round robin, FIFO within a tenant; the turns carry over from call to
    /// call), then the rest in offset order. With the overload mode on (see
    /// `config.overload_target_ms`; `Changes.overload` says when it switches), the window's
    /// available records past their deadline are archived as expired and the newest are taken
    /// first (within each tenant with fair turns). A record taken past SPEO moves SPEO past it;
    /// the offsets on the way stay available, never delivered.
    pub fn acquire(
        &mut self,
        member: &str,
        now: i64,
        max_records: usize,
        log_end: i64,
        config: &ShareConfig,
    ) -> (Acquired, Changes) {
        let budget = max_records.min(self.lock_room(config));
        self.acquire_up_to(member, now, budget, log_end, config)
    }

    /// Records that may still be acquired before `config.max_record_locks` are held.
    pub fn lock_room(&self, config: &ShareConfig) -> usize {
        config
            .max_record_locks
            .saturating_sub(self.acquired_count())
    }

    /// [`SharePartition::acquire`] of exactly up to `max_records`, which the caller bounded by
    /// [`SharePartition::lock_room`] itself. The broker's batch-optimized acquisition does so
    /// and then rounds up to the end of a batch, passing the lock limit by less than a batch:
    /// acquiring only the few records the limit leaves would send a whole batch for them
    /// (measured: 2.6 bytes sent per byte completed with 8 workers on 2 partitions).
    pub fn acquire_up_to(
        &mut self,
        member: &str,
        now: i64,
        max_records: usize,
        log_end: i64,
        config: &ShareConfig,
    ) -> (Acquired, Changes) {
        let mut acquired = Acquired::default();
        let mut changes = Changes::default();
        let until = now.saturating_add(config.lock_duration_ms);
        let holder: Arc<str> = member.into();
        let mut take = Take {
            holder: &holder,
            now,
            until,
            budget: max_records,
            acquired: &mut acquired,
            changes: &mut changes,
        };
        if !config.needs_meta() {
            if self.meta.overloaded || self.meta.end() > self.start {
                // Fairness and overload were switched off: their state goes.
                take.changes.overload = self.meta.overloaded.then_some(false);
                *self.meta = Lookahead::new(self.start);
            }
            self.acquire_in_order(i64::MIN, log_end, config, &mut take);
        } else {
            let from = self.acquire_chosen(log_end, config, &mut take);
            self.acquire_in_order(from, log_end, config, &mut take);
        }
        (acquired, changes)
    }

    /// Offset order: the due records from `from` (archiving those that have had every
    /// delivery), then new ones from SPEO.
    fn acquire_in_order(&mut self, from: i64, log_end: i64, config: &ShareConfig, t: &mut Take) {
        let due: Vec<(i64, u16)> = self
            .entries
            .iter_from(from)
            .filter(|(o, e)| {
                *o < log_end
                    && matches!(e.state, RecordState::Available { not_before } if not_before <= t.now)
            })
            .map(|(o, e)| (o, e.deliveries))
            .collect();
        for (offset, deliveries) in due {
            if t.budget == 0 {
                break;
            }
            if deliveries >= config.delivery_limit {
                self.archive(offset, ArchiveReason::DeliveryLimit, t.changes);
                continue;
            }
            self.take(offset, t.holder, t.now, t.until, t.acquired, t.changes);
            t.budget -= 1;
        }
        self.advance_start();
        let window_end = self.start.saturating_add(config.max_window as i64);
        while t.budget > 0 && self.end < log_end.min(window_end) {
            let offset = self.end;
            self.entries.push(offset, Entry::new());
            self.end += 1;
            self.take(offset, t.holder, t.now, t.until, t.acquired, t.changes);
            t.budget -= 1;
        }
    }

    /// Fair turns and the overload mode among the records of the look-ahead window whose
    /// metas are known: decides the overload mode, archives what it expires, acquires in turns
    /// (or newest first); the offset where [`SharePartition::acquire_in_order`] goes on.
    fn acquire_chosen(&mut self, log_end: i64, config: &ShareConfig, t: &mut Take) -> i64 {
        let now = t.now;
        let known_end = self.known_end(log_end, config);
        if let Some(target) = config.overload_target_ms {
            // The oldest available record: the first due one (by offset).
            let oldest = (self.start..known_end)
                .find(|&o| self.due(o, now))
                .and_then(|o| self.meta.get(o))
                .map(|slot| slot.timestamp);
            t.changes.overload = self
                .meta
                .codel(now, oldest, target, config.overload_interval_ms);
        } else if self.meta.overloaded {
            self.meta.overloaded = false;
            self.meta.above_since = None;
            t.changes.overload = Some(false);
        }
        if self.meta.overloaded && self.meta.next_expiry < now {
            // Late is useless now: every available record past its deadline goes.
            let mut next = i64::MAX;
            let mut expired = Vec::new();
            for offset in self.start..self.meta.end() {
                let (Some(slot), true) = (self.meta.get(offset), self.open(offset)) else {
                    continue;
                };
                if slot.deadline < now && offset < known_end && self.available(offset) {
                    expired.push(offset);
                } else {
                    next = next.min(slot.deadline);
                }
            }
            self.meta.next_expiry = next;
            for offset in expired {
                self.extend_to(offset);
                self.archive(offset, ArchiveReason::Expired, t.changes);
            }
            self.advance_start();
        }
        let known_end = self.known_end(log_end, config);
        let newest_first = self.meta.overloaded;
        let fair = config.fairness_key != crate::FairnessKey::None;
        if !fair && !newest_first {
            return i64::MIN;
        }
        let mut used_up = Vec::new();
        let chosen: Vec<i64> = if t.budget == 0 {
            Vec::new()
        } else if fair {
            let queues = self.queues(now, known_end, newest_first, t.budget, config, &mut used_up);
            let weights: Vec<u32> = (0..self.meta.tenant_ids() as u32)
                .map(|id| self.meta.tenant(id).map_or(1, |t| config.weight(t)))
                .collect();
            self.meta.turns(queues, &weights, t.budget)
        } else {
            let mut chosen = Vec::new();
            for offset in (self.start..known_end).rev() {
                if chosen.len() == t.budget {
                    break;
                }
                match self.due_deliveries(offset, now) {
                    Some(d) if d >= config.delivery_limit => used_up.push(offset),
                    Some(_) => chosen.push(offset),
                    None => {}
                }
            }
            chosen
        };
        for offset in used_up {
            self.archive(offset, ArchiveReason::DeliveryLimit, t.changes);
        }
        // Taken in the order chosen (so `changes.offsets` tells it), answered in offset order.
        let mut taken = Acquired::default();
        for &offset in &chosen {
            self.extend_to(offset);
            self.take(offset, t.holder, t.now, t.until, &mut taken, t.changes);
            t.budget -= 1;
        }
        let mut taken: Vec<(i64, u16)> = taken
            .ranges
            .iter()
            .flat_map(|&(first, last, count)| (first..=last).map(move |o| (o, count)))
            .collect();
        taken.sort_unstable();
        for (offset, count) in taken {
            t.acquired.push(offset, count);
        }
        known_end
    }

    /// The end of the offsets whose metas acquisition may use: known, in the log, within the
    /// look-ahead window and `max_window`.
    fn known_end(&self, log_end: i64, config: &ShareConfig) -> i64 {
        let window = config.lookahead().min(config.max_window) as i64;
        self.meta
            .end()
            .min(log_end)
            .min(self.start.saturating_add(window))
    }

    /// The due records of the look-ahead window below `known_end` by tenant, each tenant's
    /// oldest first (newest first with `newest_first`), at most `budget` of each; those that
    /// had every delivery go to `used_up` instead. A tenant's finished records are dropped from
    /// its list as they are met, so a call walks past the records in flight and the ones it
    /// takes, not the whole window.
    fn queues(
        &mut self,
        now: i64,
        known_end: i64,
        newest_first: bool,
        budget: usize,
        config: &ShareConfig,
        used_up: &mut Vec<i64>,
    ) -> Queues {
        let (start, end) = (self.start, self.end);
        let entries = &self.entries;
        // (deliveries if due, finished)
        let state = |offset: i64| -> (Option<u16>, bool) {
            if offset >= end {
                return (Some(0), false);
            }
            match entries.get(offset) {
                Some(Entry {
                    state: RecordState::Available { not_before },
                    deliveries,
                    ..
                }) => ((*not_before <= now).then_some(*deliveries), false),
                Some(e) => (None, e.state.is_final()),
                None => (None, true),
            }
        };
        let lists = self.meta.lists_mut();
        let mut queues: Vec<VecDeque<i64>> = vec![VecDeque::new(); lists.len()];
        let mut firsts: Vec<(i64, u32)> = Vec::new();
        for (id, list) in lists.iter_mut().enumerate() {
            let queue = &mut queues[id];
            if newest_first {
                for &offset in list.iter().rev() {
                    if queue.len() == budget {
                        break;
                    }
                    if offset < start || offset >= known_end {
                        continue;
                    }
                    match state(offset).0 {
                        Some(d) if d >= config.delivery_limit => used_up.push(offset),
                        Some(_) => queue.push_back(offset),
                        None => {}
                    }
                }
            } else {
                let mut kept = Vec::new();
                while queue.len() < budget {
                    let Some(offset) = list.pop_front() else {
                        break;
                    };
                    if offset >= known_end {
                        list.push_front(offset);
                        break;
                    }
                    if offset < start {
                        continue;
                    }
                    match state(offset) {
                        (_, true) => continue,
                        (Some(d), _) if d >= config.delivery_limit => used_up.push(offset),
                        (Some(_), _) => queue.push_back(offset),
                        (None, _) => {}
                    }
                    kept.push(offset);
                }
                for offset in kept.into_iter().rev() {
                    list.push_front(offset);
                }
            }
            if let Some(&first) = queue.front() {
                firsts.push((first, id as u32));
            }
        }
        if newest_first {
            firsts.sort_unstable_by(|a, b| b.cmp(a));
        } else {
            firsts.sort_unstable();
        }
        Queues {
            queues,
            newcomers: firsts.into_iter().map(|(_, id)| id).collect(),
        }
    }

    /// Not finished (at or past SPSO).
    fn open(&self, offset: i64) -> bool {
        offset >= self.end
            || self
                .entries
                .get(offset)
                .is_some_and(|e| !e.state.is_final())
    }

    /// The deliveries so far of a record due by `now`; `None` if it is not due.
    fn due_deliveries(&self, offset: i64, now: i64) -> Option<u16> {
        if offset >= self.end {
            return Some(0);
        }
        self.entries.get(offset).and_then(|e| match e.state {
            RecordState::Available { not_before } if not_before <= now => Some(e.deliveries),
            _ => None,
        })
    }

    /// Available now or later (past SPEO: never acquired).
    fn available(&self, offset: i64) -> bool {
        offset >= self.end
            || self
                .entries
                .get(offset)
                .is_some_and(|e| matches!(e.state, RecordState::Available { .. }))
    }

    /// Available by `now`.
    fn due(&self, offset: i64, now: i64) -> bool {
        offset >= self.end
            || self.entries.get(offset).is_some_and(
                |e| matches!(e.state, RecordState::Available { not_before } if not_before <= now),
            )
    }

    /// Moves SPEO past `offset`: the offsets on the way are available, never acquired.
    fn extend_to(&mut self, offset: i64) {
        while self.end <= offset {
            self.entries.push(self.end, Entry::new());
            self.end += 1;
        }
    }

    fn take(
        &mut self,
        offset: i64,
        member: &Arc<str>,
        now: i64,
        until: i64,
        acquired: &mut Acquired,
        changes: &mut Changes,
    ) {
        if let Some(entry) = self.entries.get_mut(offset) {
            entry.deliveries = entry.deliveries.saturating_add(1);
            entry.acquired_at = now;
            entry.state = RecordState::Acquired {
                member: member.clone(),
                until,
            };
            acquired.push(offset, entry.deliveries);
            changes.offsets.push(offset);
        }
    }

    /// Applies `member`'s acknowledgements, all or nothing.
    pub fn acknowledge(
        &mut self,
        member: &str,
        batches: &[AckBatch],
        now: i64,
        config: &ShareConfig,
    ) -> Result<Changes, AckError> {
        let mut previous_last = None;
        for batch in batches {
            let len = batch.last_offset - batch.first_offset + 1;
            if len < 1 {
                return Err(AckError::InvalidRequest("a range ends before it starts"));
            }
            if previous_last.is_some_and(|last| batch.first_offset <= last) {
                return Err(AckError::InvalidRequest(
                    "ranges out of order or overlapping",
                ));
            }
            if batch.types.len() != 1 && batch.types.len() as i64 != len {
                return Err(AckError::InvalidRequest(
                    "one type, or one type per offset, per range",
                ));
            }
            previous_last = Some(batch.last_offset);
            for offset in batch.first_offset..=batch.last_offset {
                let held = self.entries.get(offset).is_some_and(
                    |e| matches!(&e.state, RecordState::Acquired { member: m, .. } if **m == *member),
                );
                if !held {
                    return Err(AckError::InvalidRecordState(offset));
                }
            }
        }
        let mut changes = Changes::default();
        for batch in batches {
            for (i, offset) in (batch.first_offset..=batch.last_offset).enumerate() {
                let ack = batch.types[if batch.types.len() == 1 { 0 } else { i }];
                let until = now.saturating_add(config.lock_duration_ms);
                match ack {
                    AckType::Accept => {
                        self.finish(offset, now, Outcome::Accepted, None, &mut changes)
                    }
                    AckType::Reject => self.finish(
                        offset,
                        now,
                        Outcome::Rejected,
                        Some(ArchiveReason::Rejected),
                        &mut changes,
                    ),
                    AckType::Gap => self.finish(
                        offset,
                        now,
                        Outcome::Rejected,
                        Some(ArchiveReason::Gap),
                        &mut changes,
                    ),
                    AckType::Release { delay } => {
                        self.release(offset, now, delay, Outcome::Released, config, &mut changes)
                    }
                    AckType::Renew => {
                        // Checked above: acquired by `member`.
                        if let Some(RecordState::Acquired { until: held, .. }) =
                            self.entries.get_mut(offset).map(|e| &mut e.state)
                        {
                            *held = until;
                            changes.offsets.push(offset);
                        }
                    }
                }
            }
        }
        self.advance_start();
        Ok(changes)
    }

    /// Archives a record that is not held (it is not being delivered).
    fn archive(&mut self, offset: i64, reason: ArchiveReason, changes: &mut Changes) {
        let Some(entry) = self.entries.get_mut(offset) else {
            return;
        };
        entry.state = RecordState::Archived(reason);
        changes.archived.push(Archived {
            offset,
            reason,
            deliveries: entry.deliveries,
            history: entry.history.clone(),
        });
        changes.offsets.push(offset);
    }

    /// Ends a delivery with a final state: ACKNOWLEDGED, or ARCHIVED for `reason`.
    fn finish(
        &mut self,
        offset: i64,
        now: i64,
        outcome: Outcome,
        reason: Option<ArchiveReason>,
        changes: &mut Changes,
    ) {
        let Some(entry) = self.entries.get_mut(offset) else {
            return;
        };
        match reason {
            // Only a record that may be dead-lettered needs its deliveries' story.
            None => {
                entry.history = Vec::new();
                entry.state = RecordState::Acknowledged;
            }
            Some(reason) => {
                record_attempt(entry, now, outcome);
                entry.state = RecordState::Archived(reason);
                changes.archived.push(Archived {
                    offset,
                    reason,
                    deliveries: entry.deliveries,
                    history: entry.history.clone(),
                });
            }
        }
        changes.offsets.push(offset);
    }

    /// Ends a delivery without a result: AVAILABLE again (after `delay` ms), or ARCHIVED when
    /// that was its last allowed delivery.
    fn release(
        &mut self,
        offset: i64,
        now: i64,
        delay: i64,
        outcome: Outcome,
        config: &ShareConfig,
        changes: &mut Changes,
    ) {
        let Some(entry) = self.entries.get(offset) else {
            return;
        };
        if entry.deliveries >= config.delivery_limit {
            self.finish(
                offset,
                now,
                outcome,
                Some(ArchiveReason::DeliveryLimit),
                changes,
            );
            return;
        }
        if let Some(entry) = self.entries.get_mut(offset) {
            record_attempt(entry, now, outcome);
            entry.state = RecordState::Available {
                not_before: now.saturating_add(delay.max(0)),
            };
            changes.offsets.push(offset);
        }
    }

    /// Releases every record whose lock ran out by `now`.
    pub fn expire_locks(&mut self, now: i64, config: &ShareConfig) -> Changes {
        let expired: Vec<i64> = self
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.state, RecordState::Acquired { until, .. } if until <= now))
            .map(|(o, _)| o)
            .collect();
        let mut changes = Changes::default();
        for offset in expired {
            self.release(offset, now, 0, Outcome::TimedOut, config, &mut changes);
        }
        self.advance_start();
        changes
    }

    /// Releases every record `member` holds (its share session closed, or it left the group).
    pub fn release_member(&mut self, member: &str, now: i64, config: &ShareConfig) -> Changes {
        let held: Vec<i64> = self
            .entries
            .iter()
            .filter(
                |(_, e)| matches!(&e.state, RecordState::Acquired { member: m, .. } if **m == *member),
            )
            .map(|(o, _)| o)
            .collect();
        let mut changes = Changes::default();
        for offset in held {
            self.release(offset, now, 0, Outcome::SessionClosed, config, &mut changes);
        }
        self.advance_start();
        changes
    }

    /// Archives acquired records whose deadline passed before they could be delivered (the
    /// fetch that acquired them drops them from its answer).
    pub fn archive_expired(&mut self, offsets: &[i64], now: i64) -> Changes {
        let mut changes = Changes::default();
        for &offset in offsets {
            self.finish(
                offset,
                now,
                Outcome::TimedOut,
                Some(ArchiveReason::Expired),
                &mut changes,
            );
        }
        self.advance_start();
        changes
    }

    /// Archives acquired records that are never delivered: transaction markers and the records
    /// of aborted transactions (Kafka archives them too). Archived as gaps: no delivery is
    /// counted against them and none goes to a dead-letter topic.
    pub fn archive_undeliverable(&mut self, offsets: &[i64], now: i64) -> Changes {
        let mut changes = Changes::default();
        for &offset in offsets {
            self.finish(
                offset,
                now,
                Outcome::Rejected,
                Some(ArchiveReason::Gap),
                &mut changes,
            );
        }
        self.advance_start();
        changes
    }

    /// Moves SPSO to `offset` (an admin's reset, or the log start passing it): every record
    /// below is forgotten, every record from it on is available and never delivered if it lies
    /// past SPEO.
    pub fn reset_start(&mut self, offset: i64) -> Changes {
        let changes = Changes {
            offsets: self.entries.iter().map(|(o, _)| o).collect(),
            ..Changes::default()
        };
        self.entries.start_at(offset);
        self.meta.start_at(offset);
        self.end = self.end.max(offset);
        self.start = offset;
        self.advance_start();
        changes
    }

    /// Moves SPSO past every finished record at the front, forgetting them.
    fn advance_start(&mut self) {
        self.start += self.entries.pop_front_while(|e| e.state.is_final()) as i64;
        if self.start > self.end {
            self.end = self.start;
        }
        self.meta.start_at(self.start);
    }

    /// Rebuilds from persisted entries: locks do not survive a restart, so an acquired record
    /// is available again (its delivery counted).
    pub fn restore(start: i64, end: i64, mut entries: BTreeMap<i64, Entry>) -> Self {
        // Offsets past the last one with an entry were never acquired: past SPEO.
        let last_known = entries
            .range(start..end)
            .next_back()
            .map_or(start, |(o, _)| o + 1);
        let end = end.min(last_known).max(start);
        let mut partition = SharePartition {
            start,
            end,
            entries: Window::filled(start, end, |o| entries.remove(&o), Entry::new),
            meta: Box::new(Lookahead::new(start)),
        };
        for (_, entry) in partition.entries.iter_mut() {
            if matches!(entry.state, RecordState::Acquired { .. }) {
                entry.state = RecordState::Available { not_before: 0 };
            }
        }
        partition.advance_start();
        partition
    }

    /// Counts for describing: (available between SPSO and SPEO, acquired, archived).
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut counts = (0, 0, 0);
        for (_, entry) in self.entries.iter() {
            match entry.state {
                RecordState::Available { .. } => counts.0 += 1,
                RecordState::Acquired { .. } => counts.1 += 1,
                RecordState::Archived(_) => counts.2 += 1,
                RecordState::Acknowledged => {}
            }
        }
        counts
    }

    /// Records from the SPSO up to `log_end` not yet completed (Kafka's share-partition lag,
    /// KIP-1226): the span less the acknowledged and archived records inside it.
    pub fn lag(&self, log_end: i64) -> i64 {
        let done = self
            .entries
            .iter()
            .filter(|(o, e)| *o < log_end && e.state.is_final())
            .count();
        (log_end - self.start).max(0) - done as i64
    }

    /// The offsets `[from, to)` of the look-ahead window `[SPSO, min(SPSO + window, log_end))`
    /// whose metas are not known yet, for the broker to read from the log and
    /// [`SharePartition::learn`]; `None` when all are known or `config` needs none.
    pub fn unknown_meta(&self, log_end: i64, config: &ShareConfig) -> Option<(i64, i64)> {
        if !config.needs_meta() {
            return None;
        }
        let to = log_end.min(self.start.saturating_add(config.lookahead() as i64));
        let from = self.meta.end().max(self.start);
        (from < to).then_some((from, to))
    }

    /// The metas of offsets `first`, `first + 1`, …: one per offset (an offset without a
    /// record, such as a transaction marker, with the empty tenant and no deadline). Those
    /// known already are skipped; those that would leave a gap after the last known one (or
    /// lie below SPSO) are ignored.
    pub fn learn(&mut self, first: i64, metas: Vec<RecordMeta>) {
        self.meta.learn(first, metas);
    }

    /// Whether the overload mode is on now.
    pub fn overloaded(&self) -> bool {
        self.meta.overloaded
    }

    /// Per-tenant counts over the look-ahead window's known metas: the `top` tenants by
    /// available records (ties by tenant bytes), the rest summed in one `tenant: None` entry
    /// (left out when there is no rest).
    pub fn tenant_stats(&self, top: usize) -> Vec<TenantStats> {
        let mut by_id: Vec<(u64, u64, Option<i64>)> = vec![(0, 0, None); self.meta.tenant_ids()];
        for offset in self.start..self.meta.end() {
            let Some(slot) = self.meta.get(offset) else {
                continue;
            };
            let Some(counts) = by_id.get_mut(slot.tenant as usize) else {
                continue;
            };
            match self.entries.get(offset).map(|e| &e.state) {
                // Past SPEO: available, never acquired.
                None | Some(RecordState::Available { .. }) => {
                    counts.0 += 1;
                    counts.2 = Some(counts.2.map_or(slot.timestamp, |t| t.min(slot.timestamp)));
                }
                Some(RecordState::Acquired { .. }) => counts.1 += 1,
                Some(_) => {}
            }
        }
        let mut tenants: Vec<TenantStats> = by_id
            .into_iter()
            .enumerate()
            .filter(|(_, (available, in_flight, _))| available + in_flight > 0)
            .filter_map(|(id, (available, in_flight, oldest))| {
                Some(TenantStats {
                    tenant: Some(self.meta.tenant(id as u32)?.clone()),
                    available,
                    in_flight,
                    oldest_available_ms: oldest,
                })
            })
            .collect();
        tenants.sort_by(|a, b| b.available.cmp(&a.available).then(a.tenant.cmp(&b.tenant)));
        if tenants.len() > top {
            let rest = tenants.split_off(top);
            tenants.push(TenantStats {
                tenant: None,
                available: rest.iter().map(|t| t.available).sum(),
                in_flight: rest.iter().map(|t| t.in_flight).sum(),
                oldest_available_ms: rest.iter().filter_map(|t| t.oldest_available_ms).min(),
            });
        }
        tenants
    }

    /// When the oldest lock held now began, if any.
    pub fn oldest_lock(&self) -> Option<i64> {
        self.entries
            .iter()
            .filter(|(_, e)| matches!(e.state, RecordState::Acquired { .. }))
            .map(|(_, e)| e.acquired_at)
            .min()
    }
}

fn record_attempt(entry: &mut Entry, now: i64, outcome: Outcome) {
    if let RecordState::Acquired { member, .. } = &entry.state {
        entry.history.push(Attempt {
            member: member.clone(),
            acquired_at: entry.acquired_at,
            ended_at: now,
            outcome,
        });
    }
}
