//! What a running retrying consumer is doing: events as they happen, and a status snapshot
//! (outage, parked keys, partitions waiting for their head record).

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::keyorder::ParkedKey;

/// Something the retrying consumer did. Hooks run on the consumer's task, in order, after the
/// fact (a forward is reported once acknowledged and before its source offset is committed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Processed {
        topic: String,
        partition: i32,
        offset: i64,
        attempt: u32,
    },
    /// Sent on to a retry topic for attempt `attempt`, due at `due_ms`.
    Forwarded {
        topic: String,
        partition: i32,
        offset: i64,
        to: String,
        attempt: u32,
        due_ms: i64,
    },
    /// Sent on behind an earlier record of its key (per-key ordering), not attempted.
    Parked {
        topic: String,
        partition: i32,
        offset: i64,
        to: String,
        behind: i64,
    },
    DeadLettered {
        topic: String,
        partition: i32,
        offset: i64,
        to: String,
        class: String,
        message: String,
    },
    /// A retry partition waits until its head record is due.
    Waiting {
        topic: String,
        partition: i32,
        until_ms: i64,
    },
    /// Most recent records failed: every partition is paused and one record probes.
    OutageStarted {
        failures: usize,
        window: usize,
    },
    ProbeFailed {
        failed_probes: u64,
    },
    OutageEnded,
    Committed {
        partitions: usize,
    },
}

/// A hook for [`Event`]s.
pub type EventHook = Arc<dyn Fn(&Event) + Send + Sync>;

/// An outage in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutageStatus {
    pub since_ms: i64,
    pub failed_probes: u64,
}

/// A partition paused until its head record is due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitingPartition {
    pub topic: String,
    pub partition: i32,
    pub until_ms: i64,
}

/// A snapshot of a retrying consumer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Status {
    pub outage: Option<OutageStatus>,
    /// Keys with records parked (per-key ordering), whom and since when.
    pub parked: Vec<ParkedKey>,
    pub waiting: Vec<WaitingPartition>,
    pub processed: u64,
    pub forwarded: u64,
    pub parked_records: u64,
    pub dead_lettered: u64,
}

/// Reads the [`Status`] of a running consumer from another task.
#[derive(Debug, Clone, Default)]
pub struct StatusHandle(pub(crate) Arc<Mutex<Status>>);

impl StatusHandle {
    pub fn get(&self) -> Status {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner));
    }
}
