//! Share groups (KIP-932, Kafka queues) on the broker: membership and sessions
//! ([`members`]), the share partitions' state (the `task-queue` crate) kept here per (group,
//! topic partition) and persisted in `__share_group_state`, and group configs. Acquisition on
//! ShareFetch is in `acquire`, the dead letters of archived records in `dead_letter` (KIP-1191
//! as Kafka 4.4 ships it) with what they read from the log in [`delivery`]; what the admin
//! APIs read and reset is in `admin`.
//!
//! Every operation here is synchronous and may block on the log (reads, appends): handlers run
//! them on the blocking pool. An operation's state changes are appended before it returns; the
//! caller waits for their fsync ([`Pending`]) before answering, so what a client was told
//! survives a crash.

mod acquire;
pub mod admin;
mod dead_letter;
pub mod delivery;
pub mod members;
pub mod meta;
mod partition_log;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use log_core::{Log, Partition, Topic, TopicConfig};
use task_queue::{
    AckBatch, AckError, AutoOffsetReset, Change, Changes, ShareConfig, ShareKey, SharePartition,
    ShareStore, StoreError,
};
use tokio::sync::Notify;

use self::delivery::Source;
pub use self::members::{Membership, SessionUpdate, ShareBeat, TopicPartition};
use crate::metrics::Metrics;

/// Bytes asked of the log per read, by a share fetch (`delivery.rs`) and for the window's metas
/// (`meta.rs`). A read walks the batch headers up to this many bytes, so it is sized to what one
/// fetch takes rather than to the most it could (reads of 8 MiB made each fair-turns fetch walk
/// tens of thousands of headers); several reads are joined by a copy.
const READ_BYTES: usize = 1 << 20;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Appends an answer must wait for: (partition, offset everything below which must be
/// durable).
#[derive(Debug, Default)]
pub struct Pending(pub Vec<(Arc<Partition>, i64)>);

impl Pending {
    fn push(&mut self, partition: &Arc<Partition>, info: log_core::AppendInfo) {
        self.0.push((partition.clone(), info.last_offset + 1));
    }

    /// Waits until every state record appended is durable (an answer must not report a
    /// change that a crash could undo).
    pub async fn durable(self, syncer: &crate::durable::Syncer) {
        for (partition, end) in self.0 {
            if let Err(e) = syncer.wait(&partition, end).await {
                tracing::error!(partition = partition.name(), error = %e, "share state not durable");
            }
        }
    }
}

/// How much one ShareFetch may acquire.
#[derive(Debug, Clone, Copy)]
pub struct FetchLimits {
    /// Records (`MaxRecords`).
    pub records: usize,
    /// Bytes of batches (`MaxBytes`), checked between partitions.
    pub bytes: usize,
    /// Kafka's default `batch_optimized` acquire mode (KIP-1206): new records are acquired up
    /// to the end of the batch holding the last one asked for, so that no batch is sent for a
    /// part of its records; `MaxRecords` is then a soft limit. `record_limit` mode: strict.
    pub whole_batches: bool,
}

/// Why a partition of a ShareFetch got no records.
#[derive(Debug, Clone)]
pub enum FetchError {
    /// A share-group protocol error (an unknown topic id or partition).
    Protocol(ResponseError),
    /// Reading the acquired records failed (they were released again, unseen).
    Read(Arc<log_core::ReadError>),
}

/// What one ShareFetch got from one partition.
#[derive(Debug, Clone)]
pub struct PartitionFetch {
    pub topic_partition: TopicPartition,
    pub error: Option<FetchError>,
    /// Whole batches holding the acquired records (never absent: empty when none).
    pub records: Bytes,
    /// (first offset, last offset, delivery count)
    pub acquired: Vec<(i64, i64, u16)>,
}

/// Who a share request is from, and when it is handled.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub group: &'a str,
    pub member: &'a str,
    /// The request's time (ms).
    pub now: i64,
}

/// The share partition an operation works on: its key, the topic and log partition whose
/// records it shares, and its group's config.
#[derive(Debug, Clone, Copy)]
struct PartitionRef<'a> {
    key: &'a ShareKey,
    topic: &'a Topic,
    partition: &'a Partition,
    config: &'a ShareConfig,
}

#[derive(Debug)]
pub struct Shares {
    pub members: Membership,
    store: ShareStore,
    partitions: Mutex<HashMap<ShareKey, Arc<Mutex<SharePartition>>>>,
    /// Each group's config overrides, by Kafka name.
    overrides: Mutex<HashMap<String, Vec<(String, String)>>>,
    defaults: ShareConfig,
    /// Config of topics created for dead letters.
    topic_defaults: TopicConfig,
    /// Partitions of a topic created for dead letters (the broker's default partitions).
    dead_letter_partitions: u32,
    /// Notified when records become available again (released, timed out), to wake fetches.
    pub released: Notify,
    /// Counts the dead letters copied into dead-letter topics.
    metrics: Arc<Metrics>,
    /// Times each share partition's overload mode went [on, off] since start-up.
    overload_switches: Mutex<HashMap<ShareKey, [u64; 2]>>,
}

impl Shares {
    /// Opens `__share_group_state` and rebuilds every share partition and group config.
    pub fn open(
        log: &Log,
        defaults: ShareConfig,
        topic_defaults: TopicConfig,
        dead_letter_partitions: u32,
        metrics: Arc<Metrics>,
    ) -> Result<Shares, StoreError> {
        let (store, restored) = ShareStore::open(log)?;
        let partitions = restored
            .partitions
            .into_iter()
            .map(|(key, state)| (key, Arc::new(Mutex::new(state))))
            .collect();
        Ok(Shares {
            members: Membership::default(),
            store,
            partitions: Mutex::new(partitions),
            overrides: Mutex::new(restored.configs),
            defaults,
            topic_defaults,
            dead_letter_partitions: dead_letter_partitions.max(1),
            released: Notify::new(),
            metrics,
            overload_switches: Mutex::new(HashMap::new()),
        })
    }

    /// A group's effective config: the broker's defaults and its overrides.
    pub fn config(&self, group: &str) -> ShareConfig {
        let mut config = self.defaults.clone();
        if let Some(overrides) = lock(&self.overrides).get(group) {
            for (name, value) in overrides {
                // Stored overrides were checked when set.
                let _ = config.set(name, Some(value), &self.defaults);
            }
        }
        config
    }

    /// The state of a share partition, created where the group's `share.auto.offset.reset`
    /// says if it has none (and persisted at once, so a restart keeps its start).
    fn state(
        &self,
        key: &ShareKey,
        partition: &Partition,
        config: &ShareConfig,
        now: i64,
        pending: &mut Pending,
    ) -> Arc<Mutex<SharePartition>> {
        let mut partitions = lock(&self.partitions);
        if let Some(state) = partitions.get(key) {
            return state.clone();
        }
        // Share groups see committed records only: "latest" is the last stable offset.
        let start = match config.auto_offset_reset {
            AutoOffsetReset::Latest => partition.last_stable_offset(),
            AutoOffsetReset::Earliest => partition.log_start_offset(),
            AutoOffsetReset::ByDuration(ms) => partition
                .offset_for_timestamp(now - ms)
                .ok()
                .flatten()
                .map_or(partition.last_stable_offset(), |(offset, _)| offset),
        };
        let state = SharePartition::new(start);
        let change = Change::Snapshot {
            key: key.clone(),
            state: state.clone(),
        };
        match self.store.append(vec![change]) {
            Ok(Some(info)) => pending.push(self.store.partition(), info),
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "persisting a share partition failed"),
        }
        let state = Arc::new(Mutex::new(state));
        partitions.insert(key.clone(), state.clone());
        state
    }

    /// Persists what an operation changed in a share partition and copies what it archived to
    /// the group's dead-letter topic (first, so a crash in between repeats the copy rather than
    /// losing it).
    fn record(
        &self,
        log: &Log,
        at: PartitionRef<'_>,
        state: &SharePartition,
        changes: &Changes,
        pending: &mut Pending,
    ) -> Result<(), ResponseError> {
        let PartitionRef {
            key,
            topic,
            partition,
            config,
        } = at;
        if let Some(on) = changes.overload {
            self.overload_switched(key, topic, state, on);
        }
        if changes.is_empty() {
            return Ok(());
        }
        if let Some(dlq) = &config.dead_letter_topic {
            let source = Source {
                group: &key.group,
                topic: topic.name(),
                partition: key.partition,
            };
            self.dead_letter(
                log,
                (config, dlq),
                source,
                partition,
                &changes.archived,
                pending,
            );
        }
        let change = Change::delta(key.clone(), state, &changes.offsets);
        match self.store.append(vec![change]) {
            Ok(Some(info)) => {
                pending.push(self.store.partition(), info);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                tracing::error!(group = key.group, error = %e, "persisting share state failed");
                Err(ResponseError::KafkaStorageError)
            }
        }
    }

    /// A share partition's overload mode went on or off: logged, and counted for `/metrics`.
    fn overload_switched(&self, key: &ShareKey, topic: &Topic, state: &SharePartition, on: bool) {
        let oldest = state
            .tenant_stats(0)
            .iter()
            .filter_map(|t| t.oldest_available_ms)
            .min();
        let age_ms = oldest.map(|ts| (now_ms() - ts).max(0));
        {
            let mut switches = lock(&self.overload_switches);
            let counts = switches.entry(key.clone()).or_default();
            counts[usize::from(!on)] += 1;
        }
        if on {
            tracing::warn!(
                group = key.group,
                topic = topic.name(),
                partition = key.partition,
                oldest_available_age_ms = age_ms,
                "share partition overloaded: serving the newest records first, archiving expired ones"
            );
        } else {
            tracing::info!(
                group = key.group,
                topic = topic.name(),
                partition = key.partition,
                oldest_available_age_ms = age_ms,
                "share partition no longer overloaded: serving in turn again"
            );
        }
    }

    /// Applies a member's acknowledgements on one partition.
    pub fn acknowledge(
        &self,
        log: &Log,
        from: Requester<'_>,
        (topic_id, index): TopicPartition,
        batches: &[AckBatch],
        pending: &mut Pending,
    ) -> Result<(), ResponseError> {
        let Requester { group, member, now } = from;
        let topic = log
            .topic_by_id(topic_id)
            .ok_or(ResponseError::UnknownTopicId)?;
        let partition = topic
            .partition(u32::try_from(index).map_err(|_| ResponseError::UnknownTopicOrPartition)?)
            .cloned()
            .ok_or(ResponseError::UnknownTopicOrPartition)?;
        let key = ShareKey::new(group, topic_id, index);
        let config = self.config(group);
        let state = self.state(&key, &partition, &config, now, pending);
        let mut state = lock(&state);
        let changes = state
            .acknowledge(member, batches, now, &config)
            .map_err(|e| match e {
                AckError::InvalidRequest(_) => ResponseError::InvalidRequest,
                AckError::InvalidRecordState(_) => ResponseError::InvalidRecordState,
            })?;
        let at = PartitionRef {
            key: &key,
            topic: &topic,
            partition: &partition,
            config: &config,
        };
        self.record(log, at, &state, &changes, pending)?;
        drop(state);
        self.released.notify_waiters();
        Ok(())
    }

    /// Releases every record `member` holds in `group` (its session closed or it left).
    pub fn release_member(
        &self,
        log: &Log,
        group: &str,
        member: &str,
        now: i64,
        pending: &mut Pending,
    ) {
        let config = self.config(group);
        let keys: Vec<(ShareKey, Arc<Mutex<SharePartition>>)> = lock(&self.partitions)
            .iter()
            .filter(|(k, _)| k.group == group)
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        for (key, state) in keys {
            let Some((topic, partition)) = resolve(log, &key) else {
                continue;
            };
            let mut state = lock(&state);
            let changes = state.release_member(member, now, &config);
            let at = PartitionRef {
                key: &key,
                topic: &topic,
                partition: &partition,
                config: &config,
            };
            let _ = self.record(log, at, &state, &changes, pending);
        }
        self.released.notify_waiters();
    }

    /// A connection closed: the share sessions opened on it close and their members' records
    /// are released at once (as Kafka does), not when their locks run out.
    pub fn connection_closed(&self, log: &Log, peer: SocketAddr) -> Pending {
        let mut pending = Pending::default();
        for (group, member) in self.members.close_sessions_of(peer) {
            self.release_member(log, &group, &member, log_core::now_ms(), &mut pending);
        }
        pending
    }

    /// Timers: releases records whose lock ran out and removes members silent past their
    /// session timeout (releasing what they held).
    pub fn tick(&self, log: &Log, now: i64) -> Pending {
        let mut pending = Pending::default();
        for (group, member) in self
            .members
            .expire(now, |group| self.config(group).session_timeout_ms)
        {
            self.release_member(log, &group, &member, now, &mut pending);
        }
        let all: Vec<(ShareKey, Arc<Mutex<SharePartition>>)> = lock(&self.partitions)
            .iter()
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        let mut any = false;
        for (key, state) in all {
            let Some((topic, partition)) = resolve(log, &key) else {
                continue;
            };
            let config = self.config(&key.group);
            let mut state = lock(&state);
            let changes = state.expire_locks(now, &config);
            any |= !changes.is_empty();
            let at = PartitionRef {
                key: &key,
                topic: &topic,
                partition: &partition,
                config: &config,
            };
            let _ = self.record(log, at, &state, &changes, &mut pending);
        }
        if any {
            self.released.notify_waiters();
        }
        pending
    }
}

fn resolve(log: &Log, key: &ShareKey) -> Option<(Arc<Topic>, Arc<Partition>)> {
    let topic = log.topic_by_id(key.topic_id())?;
    let partition = topic.partition(u32::try_from(key.partition).ok()?)?.clone();
    Some((topic, partition))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
