//! One record of a share partition: its state (KIP-932's), its deliveries, and how each ended.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The states of KIP-932 (AVAILABLE past SPEO is implicit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordState {
    /// Can be acquired, from `not_before` (ms; 0: at once) on.
    Available {
        /// Ms since the epoch; 0: at once.
        not_before: i64,
    },
    /// Held by a member until its lock runs out (the member id shared by all it holds).
    Acquired {
        /// The member's id.
        member: Arc<str>,
        /// When the lock runs out (ms since the epoch).
        until: i64,
    },
    /// Accepted by a member: done.
    Acknowledged,
    /// Given up on, for the reason given: done (sent to the dead-letter topic if the group
    /// has one and the reason [`dead_letters`](ArchiveReason::dead_letters)).
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

    /// The reason as describe, metrics and dead letters print it (`delivery limit`, …).
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
    /// The member acknowledged it as processed.
    Accepted,
    /// The member gave it back for another delivery.
    Released,
    /// The member refused it: archived.
    Rejected,
    /// The lock ran out.
    TimedOut,
    /// The member's session closed or the member left.
    SessionClosed,
}

/// One delivery of a record: who held it, from when to when, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The member that held it.
    pub member: Arc<str>,
    /// When it was acquired (ms since the epoch).
    pub acquired_at: i64,
    /// When the delivery ended (ms since the epoch).
    pub ended_at: i64,
    /// How it ended.
    pub outcome: Outcome,
}

/// The state of one record between SPSO and SPEO.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Where the record is in KIP-932's states.
    pub state: RecordState,
    /// Deliveries so far (the current one included while acquired).
    pub deliveries: u16,
    /// Every finished delivery, oldest first (at most the delivery limit of them); dropped
    /// once the record is acknowledged, as only an archived record's is ever read.
    pub history: Vec<Attempt>,
    /// When the current delivery began (while acquired).
    pub acquired_at: i64,
}

impl Entry {
    /// Available, never delivered.
    pub(crate) fn new() -> Self {
        Entry {
            state: RecordState::Available { not_before: 0 },
            deliveries: 0,
            history: Vec::new(),
            acquired_at: 0,
        }
    }
}
