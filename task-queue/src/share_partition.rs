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
//!
//! Acquisition is in `acquire.rs` (its fair turns and overload mode in `crate::fairness`),
//! acknowledgements and what else ends a delivery in `acknowledge.rs`; the records' states are
//! in `crate::record`.

use std::collections::BTreeMap;

use crate::fairness::Lookahead;
use crate::record::{ArchiveReason, Attempt, Entry, RecordState};
use crate::window::Window;

mod acknowledge;
mod acquire;

pub use acknowledge::{AckBatch, AckError, AckType};
pub use acquire::Acquired;
pub(crate) use acquire::Take;

/// A record that was archived, for dead-lettering: its offset, why, and its deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archived {
    /// The record's offset.
    pub offset: i64,
    /// Why it was archived.
    pub reason: ArchiveReason,
    /// How many times it was delivered.
    pub deliveries: u16,
    /// Those deliveries, oldest first.
    pub history: Vec<Attempt>,
}

/// What an operation changed: the entries to persist, and the records it archived.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The offsets whose entries changed, in the order the operation came to them (an
    /// acquisition with fair turns or newest first: the order it chose them).
    pub offsets: Vec<i64>,
    /// The records it archived, for the dead-letter topic.
    pub archived: Vec<Archived>,
    /// `Some(true)`: this operation switched the overload mode on; `Some(false)`: off.
    pub overload: Option<bool>,
}

impl Changes {
    /// Whether no entry changed (nothing to persist).
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

/// One share partition's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharePartition {
    /// SPSO: every offset below is finished.
    pub(crate) start: i64,
    /// SPEO: every offset from here on is available and was never acquired.
    pub(crate) end: i64,
    /// Every offset from SPSO to SPEO.
    pub(crate) entries: Window,
    /// The records' metas from SPSO on (not persisted), fair turns and the overload mode
    /// (`crate::fairness`).
    pub(crate) meta: Box<Lookahead>,
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

    /// SPSO, the share-partition start offset: every offset below it is finished.
    pub fn start(&self) -> i64 {
        self.start
    }

    /// SPEO, the share-partition end offset: every offset from it on is available and was
    /// never acquired.
    pub fn end(&self) -> i64 {
        self.end
    }

    /// The state of `offset`, if it lies in SPSO..SPEO.
    pub fn entry(&self, offset: i64) -> Option<&Entry> {
        self.entries.get(offset)
    }

    /// Every offset in SPSO..SPEO with its state, ascending.
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
    pub(crate) fn advance_start(&mut self) {
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

    /// When the oldest lock held now began, if any.
    pub fn oldest_lock(&self) -> Option<i64> {
        self.entries
            .iter()
            .filter(|(_, e)| matches!(e.state, RecordState::Acquired { .. }))
            .map(|(_, e)| e.acquired_at)
            .min()
    }
}
