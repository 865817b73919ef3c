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
    /// The handler succeeded on a record.
    Processed {
        /// The topic the record was read from: the main topic or a retry topic.
        topic: String,
        /// Its partition there.
        partition: i32,
        /// Its offset there.
        offset: i64,
        /// The attempt that succeeded (1: the main-topic delivery).
        attempt: u32,
    },
    /// Sent on to a retry topic for attempt `attempt`, due at `due_ms`.
    Forwarded {
        /// The topic the record was read from: the main topic or a retry topic.
        topic: String,
        /// Its partition there.
        partition: i32,
        /// Its offset there.
        offset: i64,
        /// The retry topic it was written to.
        to: String,
        /// The attempt that retry topic will deliver (the failed one plus one).
        attempt: u32,
        /// When that attempt is due, ms since the epoch (`retry_topic-backoff-timestamp`).
        due_ms: i64,
    },
    /// Sent on behind an earlier record of its key (per-key ordering), not attempted.
    Parked {
        /// The topic the record was read from: the main topic or a retry topic.
        topic: String,
        /// Its partition there.
        partition: i32,
        /// Its offset there.
        offset: i64,
        /// The retry topic it was written to: the furthest stage its key has a record in.
        to: String,
        /// Main-topic offset of the key's record in front, the one it waits for.
        behind: i64,
    },
    /// Written to the dead-letter topic: a fatal failure, attempts or the retry deadline ran
    /// out, its `deadline` header passed, or its chain headers could not be read.
    DeadLettered {
        /// The topic the record was read from: the main topic or a retry topic.
        topic: String,
        /// Its partition there.
        partition: i32,
        /// Its offset there.
        offset: i64,
        /// The dead-letter topic.
        to: String,
        /// The error class written to `kafka_dlt-exception-fqcn`.
        class: String,
        /// The error message written to `kafka_dlt-exception-message`.
        message: String,
    },
    /// A retry partition waits until its head record is due.
    Waiting {
        /// The retry topic.
        topic: String,
        /// The paused partition.
        partition: i32,
        /// When its head record is due and the partition resumes, ms since the epoch.
        until_ms: i64,
    },
    /// Most recent records failed: every partition is paused and one record probes.
    OutageStarted {
        /// The budget's threshold, `ceil(failure_ratio * window)`: the window held at least
        /// this many failures (not a count of them).
        failures: usize,
        /// The budget's window: the outcomes looked at.
        window: usize,
    },
    /// A probe record failed; its partition is paused again until the next probe.
    ProbeFailed {
        /// Probes started in this outage, this one included.
        failed_probes: u64,
    },
    /// A probe succeeded: every partition not waiting for a due record is resumed.
    OutageEnded,
    /// Done offsets were committed.
    Committed {
        /// How many partitions' committed offsets moved.
        partitions: usize,
    },
}

/// A hook for [`Event`]s.
pub type EventHook = Arc<dyn Fn(&Event) + Send + Sync>;

/// An outage in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutageStatus {
    /// When it started, ms since the epoch.
    pub since_ms: i64,
    /// Probes started in it, each counted as failed when it starts (a success ends the
    /// outage).
    pub failed_probes: u64,
}

/// A partition paused until its head record is due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitingPartition {
    /// The retry topic.
    pub topic: String,
    /// The paused partition.
    pub partition: i32,
    /// When its head record is due, ms since the epoch.
    pub until_ms: i64,
}

/// A snapshot of a retrying consumer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Status {
    /// The outage in progress; `None` when there is none (always without an outage budget).
    pub outage: Option<OutageStatus>,
    /// Keys with records parked (per-key ordering), whom and since when.
    pub parked: Vec<ParkedKey>,
    /// Retry partitions paused until their head record is due.
    pub waiting: Vec<WaitingPartition>,
    /// Records the handler succeeded on, since the consumer was created.
    pub processed: u64,
    /// Records sent to a retry topic after a failure (parked records not included).
    pub forwarded: u64,
    /// Records sent behind an earlier record of their key, unattempted.
    pub parked_records: u64,
    /// Records written to the dead-letter topic.
    pub dead_lettered: u64,
}

/// Reads the [`Status`] of a running consumer from another task.
#[derive(Debug, Clone, Default)]
pub struct StatusHandle(pub(crate) Arc<Mutex<Status>>);

impl StatusHandle {
    /// A copy of the latest status. The counters are current; `outage`, `parked` and
    /// `waiting` are as of the consumer's last refresh (on its timer, rebalances and outage
    /// changes), so they may lag a little.
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
