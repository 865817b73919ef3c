//! Fair turns and the overload mode as a share partition acquires: the look-ahead window's
//! metas learnt, CoDel's decision, expired records archived, the records chosen in turns (or
//! newest first) and taken, and the per-tenant counts describe and metrics show. The rest of
//! acquisition, in offset order, is `share_partition/acquire.rs`.

use crate::config::ShareConfig;
use crate::fairness::{Ask, FairnessKey, RecordMeta, TenantStats};
use crate::record::{ArchiveReason, Entry, RecordState};
use crate::share_partition::{Acquired, Changes, SharePartition, Take};

impl SharePartition {
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

    /// Fair turns and the overload mode among the records of the look-ahead window whose
    /// metas are known: decides the overload mode, archives what it expires, acquires in turns
    /// (or newest first); the offset where [`SharePartition::acquire_in_order`] goes on.
    pub(crate) fn acquire_chosen(
        &mut self,
        log_end: i64,
        config: &ShareConfig,
        t: &mut Take,
    ) -> i64 {
        let now = t.now;
        let known_end = self.known_end(log_end, config);
        t.changes.overload = self.decide_overload(now, known_end, config);
        if self.meta.overloaded && self.meta.next_expiry < now {
            self.expire_overdue(now, known_end, t.changes);
        }
        let known_end = self.known_end(log_end, config);
        let newest_first = self.meta.overloaded;
        let fair = config.fairness_key != FairnessKey::None;
        if !fair && !newest_first {
            return i64::MIN;
        }
        let ask = Ask {
            start: self.start,
            known_end,
            newest_first,
            budget: t.budget,
            delivery_limit: config.delivery_limit,
        };
        let (chosen, used_up) = if t.budget == 0 {
            (Vec::new(), Vec::new())
        } else if fair {
            self.fair_turns(ask, now, config)
        } else {
            self.newest_due(&ask, now)
        };
        for offset in used_up {
            self.archive(offset, ArchiveReason::DeliveryLimit, t.changes);
        }
        self.take_chosen(&chosen, t);
        known_end
    }

    /// CoDel's rule at `now` over the window below `known_end` (without a target, the mode is
    /// off); what changed.
    fn decide_overload(&mut self, now: i64, known_end: i64, config: &ShareConfig) -> Option<bool> {
        if let Some(target) = config.overload_target_ms {
            // The oldest available record: the first due one (by offset).
            let oldest = (self.start..known_end)
                .find(|&o| self.due(o, now))
                .and_then(|o| self.meta.get(o))
                .map(|slot| slot.timestamp);
            self.meta
                .codel(now, oldest, target, config.overload_interval_ms)
        } else if self.meta.overloaded {
            self.meta.overloaded = false;
            self.meta.above_since = None;
            Some(false)
        } else {
            None
        }
    }

    /// Archives as expired the available records of the window below `known_end` whose
    /// deadline passed by `now`, and notes the next deadline of those left.
    fn expire_overdue(&mut self, now: i64, known_end: i64, changes: &mut Changes) {
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
            self.archive(offset, ArchiveReason::Expired, changes);
        }
        self.advance_start();
    }

    /// The records fair turns choose ([`Lookahead::fair_turns`]), and those met that had every
    /// delivery.
    fn fair_turns(&mut self, ask: Ask, now: i64, config: &ShareConfig) -> (Vec<i64>, Vec<i64>) {
        let end = self.end;
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
        self.meta
            .fair_turns(ask, state, |tenant| config.weight(tenant))
    }

    /// Without fair turns in the overload mode: the due records of the window, newest first,
    /// and those met that had every delivery.
    fn newest_due(&self, ask: &Ask, now: i64) -> (Vec<i64>, Vec<i64>) {
        let mut chosen = Vec::new();
        let mut used_up = Vec::new();
        for offset in (ask.start..ask.known_end).rev() {
            if chosen.len() == ask.budget {
                break;
            }
            match self.due_deliveries(offset, now) {
                Some(d) if d >= ask.delivery_limit => used_up.push(offset),
                Some(_) => chosen.push(offset),
                None => {}
            }
        }
        (chosen, used_up)
    }

    /// Takes `chosen` in the order chosen (so `changes.offsets` tells it), answered in offset
    /// order.
    fn take_chosen(&mut self, chosen: &[i64], t: &mut Take) {
        let mut taken = Acquired::default();
        for &offset in chosen {
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
}
