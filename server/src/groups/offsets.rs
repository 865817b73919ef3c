//! Committed offsets: a map in memory, and records in the internal topic `__consumer_offsets`
//! (one partition, durability `always`) that rebuild the map when the broker starts: the log is
//! the database, recovery is replay.
//!
//! A record's key is `(group, topic, partition)`, its value the commit, each a format byte then
//! bincode (fixed-width little-endian integers). A null value is a tombstone (deleted offsets).
//! A classic group's own record (Kafka's group metadata record: its protocol type and
//! generation, so a group's generation keeps counting across restarts, and a Stable group's
//! members with their assignments) has the key `(group, "", -1)`, which no partition can
//! have, and a [`GroupMeta`] value ([`classic`]); a consumer-protocol group's (KIP-848: its
//! epoch, target assignment and members) are keyed with partitions -2 to -4 ([`consumer`]),
//! a streams group's (the whole group) with -5 ([`streams`]); each is deleted with the
//! group's offsets.
//! Without compaction the topic would only grow, so on start-up, when it holds far more records
//! than live offsets, the live offsets are written again and the segments before them deleted.
//!
//! Offsets of groups without members expire (`offsets.retention.minutes`, Kafka's KIP-211
//! rule): once a group has had no member, and no commit, for the retention period, its
//! offsets are deleted with tombstones ([`OffsetStore::expire`]). The last time a group was seen
//! with members is kept in memory only; after a restart every group counts as seen at start-up,
//! so a restart never expires offsets early.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use log_core::{batch, Log, StateLog, StateLogError};
use serde::{Deserialize, Serialize};

mod classic;
mod consumer;
mod streams;

pub use classic::{GroupMeta, MemberMeta};
pub use consumer::{
    ClassicMemberRecord, ConsumerGroupImage, ConsumerGroupMeta, ConsumerGroupWrite,
    ConsumerMemberRecord, ConsumerTargetRecord, StoredPartition,
};
use consumer::{Stored, StoredGroup};
use streams::StoredStreams;

use super::streams::StreamsGroupRecord;

pub const TOPIC: &str = "__consumer_offsets";
/// Kafka's `offset.metadata.max.bytes`.
pub const MAX_METADATA_BYTES: usize = 4096;
/// `max.message.bytes` of `__consumer_offsets`: a commit of many partitions is one batch.
const MAX_BATCH_BYTES: u32 = 64 << 20;

/// Why offsets could not be replayed or written.
pub type OffsetsError = StateLogError;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Key {
    group: String,
    topic: String,
    partition: i32,
}

impl Key {
    fn new(group: &str, topic: &str, partition: i32) -> Key {
        Key {
            group: group.to_string(),
            topic: topic.to_string(),
            partition,
        }
    }
}

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub commit_timestamp: i64,
}

/// The key of a classic group's own record: a topic name no topic has, partition -1.
const GROUP_TOPIC: &str = "";
const GROUP_PARTITION: i32 = -1;

impl Key {
    fn group(group: &str) -> Key {
        Key::new(group, GROUP_TOPIC, GROUP_PARTITION)
    }

    fn is_group(&self) -> bool {
        self.topic == GROUP_TOPIC && self.partition == GROUP_PARTITION
    }
}

/// A record's value: a commit, or a group's own record (serialized as the value alone).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
enum Value {
    Offset(Committed),
    Group(GroupMeta),
    ConsumerGroup(ConsumerGroupMeta),
    ConsumerTarget(ConsumerTargetRecord),
    ConsumerMember(Box<ConsumerMemberRecord>),
    Streams(Box<StreamsGroupRecord>),
}

/// The latest write per partition: the commit (`None` after a tombstone) and the offset of the
/// record that wrote it in `__consumer_offsets`, which orders concurrent writes.
type GroupOffsets = BTreeMap<(String, i32), (Option<Committed>, i64)>;

/// Whether any partition of a group still has a commit (not only tombstones).
fn live(offsets: &GroupOffsets) -> bool {
    offsets.values().any(|(c, _)| c.is_some())
}

/// Applies a write unless a later one (by log offset) is already there.
fn apply(groups: &mut HashMap<String, GroupOffsets>, key: Key, value: Option<Committed>, at: i64) {
    let slot = groups
        .entry(key.group)
        .or_default()
        .entry((key.topic, key.partition))
        .or_insert((None, -1));
    if slot.1 < at {
        *slot = (value, at);
    }
}

/// What replaying `__consumer_offsets` rebuilds: each partition's latest commit (tombstones
/// included) and each group's own records (a deleted classic group's as `None`).
#[derive(Debug, Default)]
struct Replayed {
    groups: HashMap<String, GroupOffsets>,
    metas: HashMap<String, (Option<GroupMeta>, i64)>,
    consumer: HashMap<String, StoredGroup>,
    streams: StoredStreams,
}

impl Replayed {
    /// Applies the record at `at` (a record that does not decode is skipped, with a warning).
    fn record(&mut self, key: Key, value: Option<&[u8]>, at: i64) {
        if key.is_streams() {
            match value.map(StateLog::decode::<StreamsGroupRecord>) {
                Some(None) => {
                    tracing::warn!(offset = at, "skipping a group record that does not decode")
                }
                record => streams::apply(&mut self.streams, key.group, record.flatten(), at),
            }
            return;
        }
        if let Some(part) = key.consumer_part() {
            match Stored::decode(part, value) {
                None => tracing::warn!(offset = at, "skipping a group record that does not decode"),
                Some(stored) => self
                    .consumer
                    .entry(key.group)
                    .or_default()
                    .apply(stored, at),
            }
            return;
        }
        if key.is_group() {
            match value.map(GroupMeta::decode) {
                Some(None) => {
                    tracing::warn!(offset = at, "skipping a group record that does not decode")
                }
                meta => {
                    self.metas.insert(key.group, (meta.flatten(), at));
                }
            }
            return;
        }
        match value.map(StateLog::decode::<Committed>) {
            Some(None) => tracing::warn!(offset = at, "skipping a commit that does not decode"),
            committed => apply(&mut self.groups, key, committed.flatten(), at),
        }
    }
}

#[derive(Debug)]
pub struct OffsetStore {
    log: StateLog,
    groups: Mutex<HashMap<String, GroupOffsets>>,
    /// Each group's own record, with the log offset that wrote it.
    metas: Mutex<HashMap<String, (GroupMeta, i64)>>,
    /// Each consumer-protocol group's own records, with the log offsets that wrote them.
    consumer: Mutex<HashMap<String, StoredGroup>>,
    /// Each streams group's record, with the log offset that wrote it.
    streams: Mutex<StoredStreams>,
    /// When each group with offsets was last seen with members (ms), by [`OffsetStore::expire`].
    seen_with_members: Mutex<HashMap<String, i64>>,
    /// When the store was opened (ms): groups not seen since count as seen then.
    opened_ms: i64,
}

impl OffsetStore {
    /// Opens (creating if needed) `__consumer_offsets` and replays it.
    pub fn open(log: &Log) -> Result<Self, OffsetsError> {
        let state = StateLog::open(log, TOPIC, 16 << 20, MAX_BATCH_BYTES)?;
        let mut replayed = Replayed::default();
        let records = state.replay_encoded(batch::DECODE_MAX_BYTES, |key: Key, value, at| {
            replayed.record(key, value, at);
        })?;
        let store = OffsetStore::from_replayed(state, replayed);
        let kept = store.live_offset_records();
        if StateLog::needs_rewrite(records, kept.len()) {
            store.rewrite_live(kept, records)?;
        }
        Ok(store)
    }

    /// The store of what a replay rebuilt: its live commits, and the own records of groups
    /// that were not deleted.
    fn from_replayed(state: StateLog, replayed: Replayed) -> Self {
        let Replayed {
            mut groups,
            metas,
            mut consumer,
            streams,
        } = replayed;
        consumer.retain(|_, stored| !stored.is_empty());
        for offsets in groups.values_mut() {
            offsets.retain(|_, (value, _)| value.is_some());
        }
        groups.retain(|_, offsets| !offsets.is_empty());
        let metas: HashMap<String, (GroupMeta, i64)> = metas
            .into_iter()
            .filter_map(|(group, (meta, at))| Some((group, (meta?, at))))
            .collect();
        OffsetStore {
            log: state,
            groups: Mutex::new(groups),
            metas: Mutex::new(metas),
            consumer: Mutex::new(consumer),
            streams: Mutex::new(streams),
            seen_with_members: Mutex::new(HashMap::new()),
            opened_ms: log_core::now_ms(),
        }
    }

    /// A record of every live commit, as it would be written again.
    fn live_offset_records(&self) -> Vec<(Key, Option<Value>)> {
        self.lock()
            .iter()
            .flat_map(|(group, offsets)| {
                offsets.iter().filter_map(|((topic, partition), (c, _))| {
                    Some((
                        Key::new(group, topic, *partition),
                        Some(Value::Offset(c.clone()?)),
                    ))
                })
            })
            .collect()
    }

    /// Writes the live commits (`kept`) again, with the own records of the groups that have
    /// them, and deletes the `records` before them.
    fn rewrite_live(
        &self,
        mut kept: Vec<(Key, Option<Value>)>,
        records: usize,
    ) -> Result<(), OffsetsError> {
        // The records of groups that have offsets or members are kept; those of the others,
        // forgotten groups, are not written again.
        let offsets = self.lock();
        let metas: Vec<(Key, Option<Value>)> = self
            .lock_metas()
            .iter()
            .filter(|(group, (meta, _))| {
                !meta.members.is_empty() || offsets.get(*group).is_some_and(live)
            })
            .map(|(group, (meta, _))| (Key::group(group), Some(Value::Group(meta.clone()))))
            .collect();
        // A consumer group with members keeps its records without offsets too.
        let consumer: Vec<(Key, Option<Value>)> = self
            .lock_consumer()
            .iter()
            .filter(|(group, stored)| stored.has_members() || offsets.get(*group).is_some_and(live))
            .flat_map(|(group, stored)| stored.records(group))
            .collect();
        let streams: Vec<(Key, Option<Value>)> = self
            .lock_streams()
            .iter()
            .filter(|(group, (record, _))| {
                !record.members.is_empty() || offsets.get(*group).is_some_and(live)
            })
            .map(|(group, (record, _))| {
                (
                    Key::streams(group),
                    Some(Value::Streams(Box::new(record.clone()))),
                )
            })
            .collect();
        drop(offsets);
        kept.extend(metas);
        kept.extend(consumer);
        kept.extend(streams);
        self.log.rewrite(&kept, 1000, records)
    }

    fn lock_metas(&self) -> MutexGuard<'_, HashMap<String, (GroupMeta, i64)>> {
        self.metas.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every classic group's own record (Kafka's group metadata).
    pub fn group_metas(&self) -> Vec<(String, GroupMeta)> {
        self.lock_metas()
            .iter()
            .map(|(group, (meta, _))| (group.clone(), meta.clone()))
            .collect()
    }

    fn lock_consumer(&self) -> MutexGuard<'_, HashMap<String, StoredGroup>> {
        self.consumer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every consumer-protocol group as its records keep it.
    pub fn consumer_groups(&self) -> Vec<(String, ConsumerGroupImage)> {
        self.lock_consumer()
            .iter()
            .filter_map(|(group, stored)| Some((group.clone(), stored.image()?)))
            .collect()
    }

    /// Writes the records of consumer-protocol groups where they differ from what they are
    /// (`None`: the group is gone, its records are deleted), and waits until they are durable.
    pub fn store_consumer_groups(
        &self,
        writes: Vec<(String, Option<ConsumerGroupWrite>)>,
    ) -> Result<(), OffsetsError> {
        let stored = self.lock_consumer();
        let none = StoredGroup::default();
        let entries: Vec<(Key, Option<Value>)> = writes
            .into_iter()
            .flat_map(|(group, write)| stored.get(&group).unwrap_or(&none).changes(&group, write))
            .collect();
        drop(stored);
        self.write(entries)
    }

    fn lock_streams(&self) -> MutexGuard<'_, StoredStreams> {
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every streams group as its record keeps it.
    pub fn streams_groups(&self) -> Vec<(String, StreamsGroupRecord)> {
        self.lock_streams()
            .iter()
            .map(|(group, (record, _))| (group.clone(), record.clone()))
            .collect()
    }

    /// Writes the records of streams groups that differ from what they are (`None`: the
    /// group is gone, its record deleted), and waits until they are durable.
    pub fn store_streams_groups(
        &self,
        writes: Vec<(String, Option<StreamsGroupRecord>)>,
    ) -> Result<(), OffsetsError> {
        let entries = streams::changes(&self.lock_streams(), writes);
        self.write(entries)
    }

    /// Writes the own records of groups whose protocol type or generation changed, and waits
    /// until they are durable.
    pub fn store_groups(&self, metas: Vec<(String, GroupMeta)>) -> Result<(), OffsetsError> {
        let entries: Vec<(Key, Option<Value>)> = metas
            .into_iter()
            .map(|(group, meta)| (Key::group(&group), Some(Value::Group(meta))))
            .collect();
        self.write(entries)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, GroupOffsets>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes records and waits until they are durable; then makes them visible, each ordered
    /// by the log offset it got (so a visible commit is always on disk).
    fn write(&self, entries: Vec<(Key, Option<Value>)>) -> Result<(), OffsetsError> {
        let Some(info) = self.log.append_pending(&entries)? else {
            return Ok(());
        };
        self.log.await_durable(&info)?;
        let mut groups = self.lock();
        let mut metas = self.lock_metas();
        let mut consumer = self.lock_consumer();
        let mut streams = self.lock_streams();
        for (at, (key, value)) in (info.base_offset..).zip(entries) {
            if key.is_streams() {
                let record = match value {
                    Some(Value::Streams(record)) => Some(*record),
                    _ => None,
                };
                streams::apply(&mut streams, key.group, record, at);
                continue;
            }
            if let Some(part) = key.consumer_part() {
                if let Some(written) = Stored::written(part, value) {
                    let group = consumer.entry(key.group.clone()).or_default();
                    group.apply(written, at);
                    if group.is_empty() {
                        consumer.remove(&key.group);
                    }
                }
                continue;
            }
            match value {
                Some(Value::Group(meta)) => {
                    if metas.get(&key.group).is_none_or(|(_, was)| *was < at) {
                        metas.insert(key.group, (meta, at));
                    }
                }
                None if key.is_group() => {
                    if metas.get(&key.group).is_some_and(|(_, was)| *was < at) {
                        metas.remove(&key.group);
                    }
                }
                Some(Value::Offset(c)) => apply(&mut groups, key, Some(c), at),
                None => apply(&mut groups, key, None, at),
                // Only ever written under a consumer or streams group's key, taken above.
                Some(
                    Value::ConsumerGroup(_)
                    | Value::ConsumerTarget(_)
                    | Value::ConsumerMember(_)
                    | Value::Streams(_),
                ) => {}
            }
        }
        Ok(())
    }

    /// Stores commits for `group`.
    pub fn commit(
        &self,
        group: &str,
        commits: Vec<((String, i32), Committed)>,
    ) -> Result<(), OffsetsError> {
        self.write(
            commits
                .into_iter()
                .map(|((topic, partition), c)| {
                    (Key::new(group, &topic, partition), Some(Value::Offset(c)))
                })
                .collect(),
        )
    }

    pub fn fetch(&self, group: &str, topic: &str, partition: i32) -> Option<Committed> {
        self.lock()
            .get(group)
            .and_then(|offsets| offsets.get(&(topic.to_string(), partition)))
            .and_then(|(c, _)| c.clone())
    }

    /// Every committed offset of `group`, by (topic, partition).
    pub fn group_offsets(&self, group: &str) -> Vec<((String, i32), Committed)> {
        self.lock()
            .get(group)
            .map(|o| {
                o.iter()
                    .filter_map(|(k, (c, _))| Some((k.clone(), c.clone()?)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Groups that have committed offsets.
    pub fn groups(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, offsets)| live(offsets))
            .map(|(g, _)| g.clone())
            .collect()
    }

    /// Whether `group` has committed offsets.
    pub fn has_offsets(&self, group: &str) -> bool {
        self.lock().get(group).is_some_and(live)
    }

    /// Deletes the offsets of every group that, at `now_ms`, has had no member and no commit
    /// for `retention_ms` (`offsets.retention.minutes`). `with_members` are the groups that have
    /// members now. Returns the groups whose offsets were deleted.
    pub fn expire(
        &self,
        now_ms: i64,
        retention_ms: i64,
        with_members: &HashSet<String>,
    ) -> Result<Vec<String>, OffsetsError> {
        let doomed: Vec<String> = {
            let groups = self.lock();
            let mut seen = self
                .seen_with_members
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            seen.retain(|g, _| groups.contains_key(g));
            groups
                .iter()
                .filter(|(_, offsets)| live(offsets))
                .filter_map(|(group, offsets)| {
                    if with_members.contains(group) {
                        seen.insert(group.clone(), now_ms);
                        return None;
                    }
                    let last_commit = offsets
                        .values()
                        .filter_map(|(c, _)| c.as_ref().map(|c| c.commit_timestamp))
                        .max()
                        .unwrap_or(i64::MIN);
                    let last_seen = seen.get(group).copied().unwrap_or(self.opened_ms);
                    let since = last_commit.max(last_seen);
                    (now_ms.saturating_sub(since) >= retention_ms).then(|| group.clone())
                })
                .collect()
        };
        for group in &doomed {
            let count = self.delete(group, None)?;
            tracing::info!(
                group = %group,
                offsets = count,
                "expired the offsets of an empty group (--offsets-retention-minutes)"
            );
        }
        Ok(doomed)
    }

    /// Deletes the own record of `group`, a group forgotten (no members, no offsets).
    pub fn delete_group_record(&self, group: &str) -> Result<(), OffsetsError> {
        if !self.lock_metas().contains_key(group) {
            return Ok(());
        }
        self.write(vec![(Key::group(group), None)])
    }

    /// Deletes offsets of `group`: the given partitions, or all of them. Returns how many.
    pub fn delete(
        &self,
        group: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<usize, OffsetsError> {
        let doomed: Vec<(String, i32)> = {
            let groups = self.lock();
            match groups.get(group) {
                None => Vec::new(),
                Some(offsets) => {
                    let live = |k: &(String, i32)| offsets.get(k).is_some_and(|(c, _)| c.is_some());
                    match partitions {
                        Some(list) => list.iter().filter(|k| live(k)).cloned().collect(),
                        None => offsets.keys().filter(|k| live(k)).cloned().collect(),
                    }
                }
            }
        };
        let count = doomed.len();
        let mut entries: Vec<(Key, Option<Value>)> = doomed
            .into_iter()
            .map(|(topic, partition)| (Key::new(group, &topic, partition), None))
            .collect();
        // All of a group's offsets go with its own record (a Kafka group without offsets and
        // members is deleted).
        if partitions.is_none() && self.lock_metas().contains_key(group) {
            entries.push((Key::group(group), None));
        }
        if partitions.is_none() {
            if let Some(stored) = self.lock_consumer().get(group) {
                entries.extend(stored.changes(group, None));
            }
            if self.lock_streams().contains_key(group) {
                entries.push((Key::streams(group), None));
            }
        }
        self.write(entries)?;
        Ok(count)
    }
}

#[cfg(test)]
mod tests;
