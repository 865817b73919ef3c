//! Share-group state, persisted as records in the internal topic `__share_group_state`
//! (one partition, durability `always`): the log is the database, recovery is replay.
//!
//! Each record's key names what it is about, its value what that is now, each a format byte
//! then bincode (fixed-width little-endian integers):
//! - a share partition (group, topic id, partition): a snapshot of its state, or the entries one
//!   operation changed (with SPSO and SPEO after it) as runs of consecutive offsets in the same
//!   state, so that acquiring or acknowledging a batch of 500 records writes one entry; a null
//!   value deletes it;
//! - a group's config overrides (Kafka names and values).
//!
//! On open, when the topic holds far more records than there are live share partitions, every
//! state is written again as a snapshot and the segments before them deleted.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use log_core::{AppendInfo, Log, Partition, StateLog, StateLogError, Uuid};
use serde::{Deserialize, Serialize};

use crate::record::Entry;
use crate::share_partition::SharePartition;

/// The internal topic the share groups' state is kept in (Kafka's name).
pub const TOPIC: &str = "__share_group_state";
/// `max.message.bytes` of the state topic: one operation's changes are one batch.
const MAX_BATCH_BYTES: u32 = 64 << 20;

/// A share partition: the group and the topic partition (topic by id, as share groups address
/// topics).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ShareKey {
    /// The share group.
    pub group: String,
    /// The topic's id, as bytes ([`ShareKey::topic_id`] gives it as a `Uuid`).
    pub topic_id: [u8; 16],
    /// The partition's index.
    pub partition: i32,
}

impl ShareKey {
    /// The share partition of `group` on `partition` of topic `topic_id`.
    pub fn new(group: &str, topic_id: Uuid, partition: i32) -> ShareKey {
        ShareKey {
            group: group.to_string(),
            topic_id: *topic_id.as_bytes(),
            partition,
        }
    }

    /// The topic's id.
    pub fn topic_id(&self) -> Uuid {
        Uuid::from_bytes(self.topic_id)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum Key {
    Partition(ShareKey),
    GroupConfig(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum Value {
    Snapshot {
        start: i64,
        end: i64,
        entries: Vec<(i64, Entry)>,
    },
    /// Per-offset changes, as written before `Runs` (still read on replay).
    Delta {
        start: i64,
        end: i64,
        entries: Vec<(i64, Entry)>,
    },
    GroupConfig(Vec<(String, String)>),
    /// What `Delta` says, with each entry for the offsets `first..=last`.
    Runs {
        start: i64,
        end: i64,
        runs: Vec<(i64, i64, Entry)>,
    },
}

/// What one write records.
#[derive(Debug, Clone)]
pub enum Change {
    /// Entries one operation changed in a share partition (with its SPSO and SPEO after it),
    /// as `(first, last, entry)` runs.
    Delta {
        /// The share partition.
        key: ShareKey,
        /// Its SPSO after the operation.
        start: i64,
        /// Its SPEO after the operation.
        end: i64,
        /// Offsets `first..=last` all in `entry`'s state.
        runs: Vec<(i64, i64, Entry)>,
    },
    /// A share partition's whole state (after an admin reset).
    Snapshot {
        /// The share partition.
        key: ShareKey,
        /// Its whole state.
        state: SharePartition,
    },
    /// A share partition deleted.
    Delete(ShareKey),
    /// A group's config overrides, all of them.
    GroupConfig {
        /// The share group.
        group: String,
        /// `(name, value)` of every config set on it (empty: none, all defaults).
        overrides: Vec<(String, String)>,
    },
}

impl Change {
    /// The entries `offsets` of `state` as they are now (those at or past SPSO).
    pub fn delta(key: ShareKey, state: &SharePartition, offsets: &[i64]) -> Change {
        let mut offsets = offsets.to_vec();
        offsets.sort_unstable();
        offsets.dedup();
        let mut runs: Vec<(i64, i64, Entry)> = Vec::new();
        for offset in offsets {
            let Some(entry) = state.entry(offset) else {
                continue;
            };
            match runs.last_mut() {
                Some((_, last, same)) if *last + 1 == offset && same == entry => *last = offset,
                _ => runs.push((offset, offset, entry.clone())),
            }
        }
        Change::Delta {
            key,
            start: state.start(),
            end: state.end(),
            runs,
        }
    }
}

/// Why the share state could not be replayed or written.
pub type StoreError = StateLogError;

/// What replaying the topic rebuilt.
#[derive(Debug, Default)]
pub struct Restored {
    /// Every share partition's state, by key.
    pub partitions: HashMap<ShareKey, SharePartition>,
    /// Every group's config overrides, by group.
    pub configs: HashMap<String, Vec<(String, String)>>,
}

/// The share-state topic.
#[derive(Debug)]
pub struct ShareStore {
    log: StateLog,
}

/// A share partition as replay builds it up.
#[derive(Debug, Default)]
struct Replayed {
    start: i64,
    end: i64,
    entries: BTreeMap<i64, Entry>,
}

impl ShareStore {
    /// Opens (creating if needed) the state topic and replays it.
    pub fn open(log: &Log) -> Result<(ShareStore, Restored), StoreError> {
        let state = StateLog::open(log, TOPIC, 64 << 20, MAX_BATCH_BYTES)?;
        let mut replayed: HashMap<ShareKey, Replayed> = HashMap::new();
        let mut configs = HashMap::new();
        let records = state.replay(MAX_BATCH_BYTES as usize * 8, |key, value, offset| {
            match (key, value) {
                (Key::Partition(key), None) => {
                    replayed.remove(&key);
                }
                (
                    Key::Partition(key),
                    Some(Value::Snapshot {
                        start,
                        end,
                        entries,
                    }),
                ) => {
                    replayed.insert(
                        key,
                        Replayed {
                            start,
                            end,
                            entries: entries.into_iter().collect(),
                        },
                    );
                }
                (
                    Key::Partition(key),
                    Some(Value::Delta {
                        start,
                        end,
                        entries,
                    }),
                ) => {
                    let state = replayed.entry(key).or_default();
                    state.start = start;
                    state.end = end;
                    state.entries.extend(entries);
                    state.entries = state.entries.split_off(&start);
                }
                (Key::Partition(key), Some(Value::Runs { start, end, runs })) => {
                    let state = replayed.entry(key).or_default();
                    state.start = start;
                    state.end = end;
                    for (first, last, entry) in runs {
                        state
                            .entries
                            .extend((first..=last).map(|o| (o, entry.clone())));
                    }
                    state.entries = state.entries.split_off(&start);
                }
                (Key::GroupConfig(group), Some(Value::GroupConfig(overrides))) => {
                    configs.insert(group, overrides);
                }
                (Key::GroupConfig(group), None) => {
                    configs.remove(&group);
                }
                _ => tracing::warn!(offset, "skipping a share state record of the wrong kind"),
            }
        })?;
        let store = ShareStore { log: state };
        let restored = Restored {
            partitions: replayed
                .into_iter()
                .map(|(key, r)| (key, SharePartition::restore(r.start, r.end, r.entries)))
                .collect(),
            configs,
        };
        let live = restored.partitions.len() + restored.configs.len();
        if StateLog::needs_rewrite(records, live) {
            store.rewrite(&restored, records)?;
        }
        Ok((store, restored))
    }

    /// Writes every state again, then deletes the segments that only held older records.
    fn rewrite(&self, restored: &Restored, records: usize) -> Result<(), StoreError> {
        let mut changes: Vec<Change> = restored
            .partitions
            .iter()
            .map(|(key, state)| Change::Snapshot {
                key: key.clone(),
                state: state.clone(),
            })
            .collect();
        changes.extend(
            restored
                .configs
                .iter()
                .map(|(group, overrides)| Change::GroupConfig {
                    group: group.clone(),
                    overrides: overrides.clone(),
                }),
        );
        let entries: Vec<(Key, Option<Value>)> = changes.into_iter().map(Change::record).collect();
        self.log.rewrite(&entries, 500, records)
    }

    /// The state topic's partition (callers wait for its durability their own way).
    pub fn partition(&self) -> &Arc<Partition> {
        self.log.partition()
    }

    /// Appends `changes` as one batch, without waiting for its fsync: the caller waits (see
    /// [`Partition::append_pending`]) before acknowledging what they record. `None` when there
    /// is nothing to write.
    pub fn append(&self, changes: Vec<Change>) -> Result<Option<AppendInfo>, StoreError> {
        let entries: Vec<(Key, Option<Value>)> = changes.into_iter().map(Change::record).collect();
        self.log.append_pending(&entries)
    }
}

impl Change {
    /// The record that writes this change.
    fn record(self) -> (Key, Option<Value>) {
        match self {
            Change::Delta {
                key,
                start,
                end,
                runs,
            } => (Key::Partition(key), Some(Value::Runs { start, end, runs })),
            Change::Snapshot { key, state } => (
                Key::Partition(key),
                Some(Value::Snapshot {
                    start: state.start(),
                    end: state.end(),
                    entries: state.entries().map(|(o, e)| (o, e.clone())).collect(),
                }),
            ),
            Change::Delete(key) => (Key::Partition(key), None),
            Change::GroupConfig { group, overrides } => {
                (Key::GroupConfig(group), Some(Value::GroupConfig(overrides)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::record::RecordState;
    use crate::ShareConfig;

    fn key() -> ShareKey {
        ShareKey::new("g", Uuid::from_bytes([7; 16]), 0)
    }

    #[test]
    fn a_batch_acquired_and_acknowledged_is_one_run_each_and_replays() {
        let dir = tempfile::tempdir().unwrap();
        let config = ShareConfig::default();
        let mut state = SharePartition::new(0);
        {
            let log = Log::open(dir.path()).unwrap();
            let (store, _) = ShareStore::open(&log).unwrap();
            let (_, changes) = state.acquire("worker", 1_000, 500, 1_000, &config);
            let acquire = Change::delta(key(), &state, &changes.offsets);
            let Change::Delta { runs, .. } = &acquire else {
                unreachable!()
            };
            assert_eq!(runs.len(), 1);
            assert_eq!((runs[0].0, runs[0].1), (0, 499));
            store.append(vec![acquire]).unwrap();
            // Accept 0..=199, release 200..=499: two runs.
            let acks = [
                crate::AckBatch {
                    first_offset: 0,
                    last_offset: 199,
                    types: vec![crate::AckType::Accept],
                },
                crate::AckBatch {
                    first_offset: 200,
                    last_offset: 499,
                    types: vec![crate::AckType::Release { delay: 0 }],
                },
            ];
            let changes = state.acknowledge("worker", &acks, 2_000, &config).unwrap();
            let ack = Change::delta(key(), &state, &changes.offsets);
            let Change::Delta { runs, .. } = &ack else {
                unreachable!()
            };
            assert_eq!(runs.len(), 1, "the accepted ones are behind SPSO: {runs:?}");
            let info = store.append(vec![ack]).unwrap().unwrap();
            store.partition().await_durable(&info).unwrap();
        }
        let log = Log::open(dir.path()).unwrap();
        let (_, restored) = ShareStore::open(&log).unwrap();
        let replayed = &restored.partitions[&key()];
        assert_eq!(replayed.start(), 200);
        assert_eq!(replayed.end(), 500);
        assert_eq!(replayed.entries().count(), 300);
        assert!(replayed
            .entries()
            .all(|(_, e)| e.deliveries == 1 && matches!(e.state, RecordState::Available { .. })));
    }

    #[test]
    fn a_per_offset_delta_written_by_an_older_broker_still_replays() {
        let dir = tempfile::tempdir().unwrap();
        {
            let log = Log::open(dir.path()).unwrap();
            let (store, _) = ShareStore::open(&log).unwrap();
            let mut entry = SharePartition::new(0);
            let (_, _) = entry.acquire("w", 1, 1, 10, &ShareConfig::default());
            let delta = Value::Delta {
                start: 0,
                end: 1,
                entries: vec![(0, entry.entry(0).unwrap().clone())],
            };
            store
                .log
                .append(&[(Key::Partition(key()), Some(delta))])
                .unwrap();
        }
        let log = Log::open(dir.path()).unwrap();
        let (_, restored) = ShareStore::open(&log).unwrap();
        let replayed = &restored.partitions[&key()];
        assert_eq!((replayed.start(), replayed.end()), (0, 1));
        assert_eq!(replayed.entry(0).unwrap().deliveries, 1);
    }
}
