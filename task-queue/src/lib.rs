//! # task-queue
//!
//! The task-queue layer of lograil: Kafka share groups (KIP-932, "queues for Kafka") as a
//! state machine over the log. Many consumers share a partition; each record is handed to one
//! of them at a time, and acknowledged one by one.
//!
//! **It is** the state of one share group on one partition ([`SharePartition`]), its settings
//! under Kafka's names ([`ShareConfig`]), and the store that persists that state as records in
//! the internal topic `__share_group_state` ([`ShareStore`]). **It is not** a network server:
//! the broker (`server/`) speaks ShareGroupHeartbeat, ShareFetch and ShareAcknowledge, keeps
//! members and sessions, and calls into this crate.
//!
//! ## States
//!
//! ```text
//!            acquire (delivery +1)           accept
//! AVAILABLE ─────────────────────────▶ ACQUIRED ───────▶ ACKNOWLEDGED
//!     ▲                                   │  │  reject
//!     │  release, lock timeout            │  └─────────▶ ARCHIVED (rejected)
//!     └───────────────────────────────────┘
//!        … after the last allowed delivery ───────────▶ ARCHIVED (delivery limit)
//! ```
//!
//! A record whose `deadline` header has passed when it would be delivered is archived as
//! expired instead. Archived records (not gaps) are what the broker copies to a dead-letter
//! topic. SPSO (the share-partition start offset) moves past every finished record at the
//! front; SPEO is the first offset never acquired.
//!
//! ## Tenants and overload
//!
//! A group with `lograil.share.fairness.key` (`key` or `header:<name>`) is served by tenant
//! rather than by offset: among the records of a look-ahead window past SPSO, acquisition gives
//! each tenant with available records a turn (weighted deficit round robin, FIFO within a
//! tenant), so a tenant that floods the partition does not delay the others, and no fetch waits
//! while any record is available. With `lograil.share.overload.target.ms`, CoDel's rule turns
//! an overload mode on when the oldest available record has waited longer than the target for
//! a whole interval: records past their deadline are archived as expired, the newest served
//! first, until the wait is back under the target. The window's tenants, timestamps and
//! deadlines are read from the log as acquisition needs them; they are not persisted. See the
//! `fairness` module.
//!
//! ## Acquisition over the log
//!
//! A fetch acquires with one call, [`acquire`], over what it reads of the log: the
//! [`PartitionLog`] trait (the log start and last stable offset, batch ends, record metas, the
//! batches themselves, which records are not committed data or past their deadline), which the
//! broker implements over a log-core partition. It returns the acquired ranges, their batches
//! and what changed, with the share partition's lock still held so the broker persists the
//! changes before another operation runs.
//!
//! ## What survives a crash
//!
//! Every operation's changes (acquisitions with their delivery counts, acknowledgements,
//! releases, lock timeouts, archives) are appended to `__share_group_state` (durability
//! `always`) before the broker answers; replay rebuilds them. Locks do not survive: a record
//! acquired when the broker stopped is available again, its delivery counted, so a record that
//! crashes every consumer still reaches its delivery limit across restarts.
//!
//! ```
//! use task_queue::{AckBatch, AckType, ShareConfig, SharePartition};
//!
//! let config = ShareConfig { delivery_limit: 2, ..ShareConfig::default() };
//! let mut partition = SharePartition::new(0);
//! // Member "a" takes offsets 0..=2 of a log that ends at 3.
//! let (acquired, _) = partition.acquire("a", 1_000, 10, 3, &config);
//! assert_eq!(acquired.ranges, vec![(0, 2, 1)]);
//! // It accepts 0 and 1 and releases 2: 2 comes back, delivery 2 of 2.
//! let acks = [
//!     AckBatch { first_offset: 0, last_offset: 1, types: vec![AckType::Accept] },
//!     AckBatch { first_offset: 2, last_offset: 2, types: vec![AckType::Release { delay: 0 }] },
//! ];
//! partition.acknowledge("a", &acks, 2_000, &config)?;
//! assert_eq!(partition.start(), 2);
//! let (again, _) = partition.acquire("b", 3_000, 10, 3, &config);
//! assert_eq!(again.ranges, vec![(2, 2, 2)]);
//! // Its lock runs out after the last allowed delivery: archived, and SPSO moves on.
//! let changes = partition.expire_locks(3_000 + config.lock_duration_ms, &config);
//! assert_eq!(changes.archived.len(), 1);
//! assert_eq!(partition.start(), 3);
//! # Ok::<(), task_queue::AckError>(())
//! ```
#![warn(missing_docs)]

mod acquisition;
mod config;
mod fairness;
mod record;
mod share_partition;
mod store;
mod window;

pub use acquisition::{acquire, AcquireResult, Acquisition, Fetch, PartitionLog, ReadFailed};
pub use config::{AutoOffsetReset, ShareConfig, ShareConfigError};
pub use fairness::{FairnessKey, RecordMeta, Tenant, TenantStats};
pub use record::{ArchiveReason, Attempt, Entry, Outcome, RecordState};
pub use share_partition::{
    AckBatch, AckError, AckType, Acquired, Archived, Changes, SharePartition,
};
pub use store::{Change, Restored, ShareKey, ShareStore, StoreError, TOPIC};
