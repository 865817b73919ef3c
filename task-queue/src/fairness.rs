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
//! acquisition reads them for the window ([`crate::SharePartition::unknown_meta`],
//! [`crate::PartitionLog::read_meta`]) and learns them ([`crate::SharePartition::learn`]).
//! They are kept beside the entries, never persisted (after a restart they are read again).
//!
//! Here: the tenants and the look-ahead window with its round robin and CoDel state
//! (`Lookahead`); in `choice.rs`, how a share partition uses them as it acquires (the records
//! chosen in turns or newest first, expired ones archived, the per-tenant counts).
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
    /// The record's tenant, by the group's fairness key.
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
    /// The tenant; `None` for the "other" bucket.
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

/// What one acquisition asks of fair turns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask {
    /// SPSO: the offsets below are finished.
    pub start: i64,
    /// The end of the offsets whose metas acquisition may use.
    pub known_end: i64,
    /// Each tenant's newest records first (the overload mode), else its oldest.
    pub newest_first: bool,
    /// How many records at most.
    pub budget: usize,
    /// A record with this many deliveries or more is used up, not taken.
    pub delivery_limit: u16,
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

    /// Fair turns among the due records of the window: each tenant's due records served in
    /// turn, as many per turn as its `weight` ([`turns::turns`]). `state` says of an offset its
    /// deliveries so far if it is due, and whether it is finished. The offsets chosen, in the
    /// order chosen, and those met that had every delivery.
    pub fn fair_turns(
        &mut self,
        ask: Ask,
        state: impl Fn(i64) -> (Option<u16>, bool),
        weight: impl Fn(&Tenant) -> u32,
    ) -> (Vec<i64>, Vec<i64>) {
        let weights: Vec<u32> = (0..self.tenant_ids() as u32)
            .map(|id| self.tenant(id).map_or(1, &weight))
            .collect();
        let mut walk = turns::Walk::new(&mut self.by_tenant, ask, state);
        let chosen = turns::turns(
            &mut self.ring,
            &mut self.deficits,
            &mut walk,
            &weights,
            ask.budget,
        );
        (chosen, walk.finish())
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

mod choice;
mod turns;

#[cfg(test)]
mod tests;
