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

/// The meta of one offset of the look-ahead window: 24 bytes.
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

/// The look-ahead window's metas (offsets `first..first + slots.len()`, from SPSO on), the
/// round-robin state and the overload mode of one share partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lookahead {
    first: i64,
    slots: VecDeque<Slot>,
    tenants: Interner,
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
            self.slots.push_back(Slot {
                tenant,
                timestamp: meta.timestamp,
                deadline: meta.deadline.unwrap_or(i64::MAX),
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
            self.first = start;
            return;
        }
        while self.first < start {
            match self.slots.pop_front() {
                Some(slot) => self.forget(slot.tenant),
                None => {
                    self.first = start;
                    break;
                }
            }
            self.first += 1;
        }
    }

    fn forget(&mut self, id: u32) {
        if self.tenants.release(id) {
            self.ring.retain(|t| *t != id);
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
