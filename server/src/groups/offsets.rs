//! Committed offsets: a map in memory, and records in the internal topic `__consumer_offsets`
//! (one partition, durability `always`) that rebuild the map when the broker starts: the log is
//! the database, recovery is replay.
//!
//! A record's key is `(group, topic, partition)`, its value the commit, each a format byte then
//! bincode (fixed-width little-endian integers). A null value is a tombstone (deleted offsets).
//! Without compaction the topic would only grow, so on start-up, when it holds far more records
//! than live offsets, the live offsets are written again and the segments before them deleted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use log_core::batch::{self, NewRecord};
use log_core::{AppendError, Durability, Log, Partition, TopicConfig, TopicError};
use serde::{Deserialize, Serialize};

pub const TOPIC: &str = "__consumer_offsets";
/// Kafka's `offset.metadata.max.bytes`.
pub const MAX_METADATA_BYTES: usize = 4096;
const FORMAT: u8 = 1;
/// Rewrite on start-up when the topic holds more than this many records per live offset.
const COMPACT_RATIO: usize = 4;

fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard().with_fixed_int_encoding()
}

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

type GroupOffsets = BTreeMap<(String, i32), Committed>;

#[derive(Debug)]
pub struct OffsetStore {
    partition: Arc<Partition>,
    groups: Mutex<HashMap<String, GroupOffsets>>,
}

#[derive(Debug, thiserror::Error)]
pub enum OffsetsError {
    #[error("opening {TOPIC}: {0}")]
    Topic(#[from] TopicError),
    #[error("replaying {TOPIC}: {0}")]
    Replay(String),
    #[error("writing {TOPIC}: {0}")]
    Append(#[from] AppendError),
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = vec![FORMAT];
    // Serialising plain structs of strings and integers into a Vec cannot fail.
    if let Ok(bytes) = bincode::serde::encode_to_vec(value, bincode_config()) {
        out.extend_from_slice(&bytes);
    }
    out
}

fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, String> {
    match bytes.split_first() {
        Some((&FORMAT, rest)) => bincode::serde::decode_from_slice(rest, bincode_config())
            .map(|(v, _)| v)
            .map_err(|e| e.to_string()),
        Some((other, _)) => Err(format!("unknown record format {other}")),
        None => Err("empty record".into()),
    }
}

impl OffsetStore {
    /// Opens (creating if needed) `__consumer_offsets` and replays it.
    pub fn open(log: &Log) -> Result<Self, OffsetsError> {
        let topic = match log.topic(TOPIC) {
            Some(topic) => topic,
            None => {
                let config = TopicConfig {
                    durability: Durability::Always,
                    segment_bytes: 16 << 20,
                    retention_ms: None,
                    ..TopicConfig::default()
                };
                log.create_topic(TOPIC, 1, config)?
            }
        };
        let partition = topic.partitions()[0].clone();
        let mut groups: HashMap<String, GroupOffsets> = HashMap::new();
        let mut records = 0usize;
        let mut offset = partition.log_start_offset();
        while offset < partition.log_end_offset() {
            let read = partition
                .read(offset, 1 << 20)
                .map_err(|e| OffsetsError::Replay(e.to_string()))?;
            let decoded =
                batch::decode(&read.records).map_err(|e| OffsetsError::Replay(e.to_string()))?;
            let Some(last) = decoded.last() else { break };
            offset = last.offset + 1;
            for record in decoded {
                records += 1;
                let Some(key) = record.key.as_deref() else {
                    continue;
                };
                let key: Key = match decode(key) {
                    Ok(key) => key,
                    Err(e) => {
                        tracing::warn!(offset = record.offset, error = %e, "skipping an unreadable offset record");
                        continue;
                    }
                };
                let entry = groups.entry(key.group).or_default();
                match record.value.as_deref().map(decode::<Committed>) {
                    Some(Ok(committed)) => {
                        entry.insert((key.topic, key.partition), committed);
                    }
                    Some(Err(e)) => {
                        tracing::warn!(offset = record.offset, error = %e, "skipping an unreadable offset record")
                    }
                    None => {
                        entry.remove(&(key.topic, key.partition));
                    }
                }
            }
        }
        groups.retain(|_, offsets| !offsets.is_empty());
        let store = OffsetStore {
            partition,
            groups: Mutex::new(groups),
        };
        let live: usize = store.lock().values().map(BTreeMap::len).sum();
        if records > COMPACT_RATIO * live.max(256) {
            store.compact(records, live)?;
        }
        Ok(store)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, GroupOffsets>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes every live offset again, then deletes the segments that only held older records.
    fn compact(&self, records: usize, live: usize) -> Result<(), OffsetsError> {
        let entries: Vec<(Key, Option<Committed>)> = self
            .lock()
            .iter()
            .flat_map(|(group, offsets)| {
                offsets.iter().map(|((topic, partition), c)| {
                    (Key::new(group, topic, *partition), Some(c.clone()))
                })
            })
            .collect();
        let rewritten_from = self.partition.log_end_offset();
        for chunk in entries.chunks(1000) {
            self.append(chunk)?;
        }
        let report = self
            .partition
            .delete_segments_before(rewritten_from)
            .map_err(|e| OffsetsError::Replay(e.to_string()))?;
        tracing::info!(
            records,
            live,
            deleted_segments = report.deleted_segments,
            "compacted {TOPIC}"
        );
        Ok(())
    }

    /// Appends records (a `None` value is a tombstone) and waits until they are durable.
    fn append(&self, entries: &[(Key, Option<Committed>)]) -> Result<(), AppendError> {
        let pending = self.append_pending(entries)?;
        pending.map_or(Ok(()), |info| self.partition.await_durable(&info))
    }

    /// Writes records without waiting for the fsync (see [`Partition::append_pending`]).
    fn append_pending(
        &self,
        entries: &[(Key, Option<Committed>)],
    ) -> Result<Option<log_core::AppendInfo>, AppendError> {
        if entries.is_empty() {
            return Ok(None);
        }
        let now = log_core::now_ms();
        let encoded: Vec<(Vec<u8>, Option<Vec<u8>>)> = entries
            .iter()
            .map(|(k, v)| (encode(k), v.as_ref().map(encode)))
            .collect();
        let records: Vec<NewRecord> = encoded
            .iter()
            .map(|(k, v)| (Some(k.as_slice()), v.as_deref(), now))
            .collect();
        self.partition
            .append_pending(&batch::build(&records))
            .map(Some)
    }

    /// Stores commits for `group`, durably, then makes them visible.
    pub fn commit(
        &self,
        group: &str,
        commits: Vec<((String, i32), Committed)>,
    ) -> Result<(), AppendError> {
        let entries: Vec<(Key, Option<Committed>)> = commits
            .iter()
            .map(|((topic, partition), c)| (Key::new(group, topic, *partition), Some(c.clone())))
            .collect();
        // Held across the write (not the fsync) so the map and the log agree on the order of
        // commits, while concurrent commits still share one fsync.
        let mut groups = self.lock();
        let pending = self.append_pending(&entries)?;
        groups.entry(group.to_string()).or_default().extend(commits);
        drop(groups);
        pending.map_or(Ok(()), |info| self.partition.await_durable(&info))
    }

    pub fn fetch(&self, group: &str, topic: &str, partition: i32) -> Option<Committed> {
        self.lock()
            .get(group)
            .and_then(|offsets| offsets.get(&(topic.to_string(), partition)).cloned())
    }

    /// Every committed offset of `group`, by (topic, partition).
    pub fn group_offsets(&self, group: &str) -> Vec<((String, i32), Committed)> {
        self.lock()
            .get(group)
            .map(|o| o.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    /// Groups that have committed offsets.
    pub fn groups(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// Deletes offsets of `group`: the given partitions, or all of them. Returns how many.
    pub fn delete(
        &self,
        group: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<usize, AppendError> {
        let mut groups = self.lock();
        let Some(offsets) = groups.get(group) else {
            return Ok(0);
        };
        let doomed: Vec<(String, i32)> = match partitions {
            Some(list) => list
                .iter()
                .filter(|k| offsets.contains_key(*k))
                .cloned()
                .collect(),
            None => offsets.keys().cloned().collect(),
        };
        let tombstones: Vec<(Key, Option<Committed>)> = doomed
            .iter()
            .map(|(topic, partition)| (Key::new(group, topic, *partition), None))
            .collect();
        self.append(&tombstones)?;
        if let Some(offsets) = groups.get_mut(group) {
            for key in &doomed {
                offsets.remove(key);
            }
            if offsets.is_empty() {
                groups.remove(group);
            }
        }
        Ok(doomed.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(offset: i64) -> Committed {
        Committed {
            offset,
            leader_epoch: -1,
            metadata: Some("m".into()),
            commit_timestamp: 1,
        }
    }

    #[test]
    fn commits_survive_reopen_and_tombstones_delete() {
        let dir = tempfile::tempdir().unwrap();
        {
            let log = Log::open(dir.path()).unwrap();
            let store = OffsetStore::open(&log).unwrap();
            store
                .commit(
                    "g",
                    vec![
                        (("t".into(), 0), committed(5)),
                        (("t".into(), 1), committed(7)),
                    ],
                )
                .unwrap();
            store
                .commit("g", vec![(("t".into(), 0), committed(9))])
                .unwrap();
            store
                .commit("h", vec![(("t".into(), 0), committed(1))])
                .unwrap();
            assert_eq!(store.delete("h", None).unwrap(), 1);
        }
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        assert_eq!(store.fetch("g", "t", 0), Some(committed(9)));
        assert_eq!(store.fetch("g", "t", 1), Some(committed(7)));
        assert_eq!(store.fetch("h", "t", 0), None);
        assert_eq!(store.groups(), vec!["g".to_string()]);
    }

    #[test]
    fn many_commits_are_compacted_on_start_up() {
        let dir = tempfile::tempdir().unwrap();
        {
            let log = Log::open(dir.path()).unwrap();
            let store = OffsetStore::open(&log).unwrap();
            for i in 0..3000 {
                store
                    .commit("g", vec![(("t".into(), 0), committed(i))])
                    .unwrap();
            }
        }
        {
            let log = Log::open(dir.path()).unwrap();
            let store = OffsetStore::open(&log).unwrap();
            assert_eq!(store.fetch("g", "t", 0), Some(committed(2999)));
        }
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        assert_eq!(store.fetch("g", "t", 0), Some(committed(2999)));
    }

    #[test]
    fn unknown_formats_are_refused() {
        assert!(decode::<Key>(&[9, 1, 2]).is_err());
        assert!(decode::<Key>(&[]).is_err());
        let key = Key {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
        };
        assert_eq!(decode::<Key>(&encode(&key)).unwrap(), key);
    }
}
