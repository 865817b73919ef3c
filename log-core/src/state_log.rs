//! The broker's own state as keyed records in a one-partition internal topic (durability
//! `always`): the log is the database, recovery is replay. `__consumer_offsets` and
//! `__share_group_state` are both one.
//!
//! A record's key and value are each a format byte, then bincode (fixed-width little-endian
//! integers) of the caller's types; a null value deletes the key. A record that does not
//! decode is skipped on replay, with a warning. Without compaction the topic would only grow,
//! so the owner rewrites its live state when the topic holds far more records than that
//! ([`StateLog::needs_rewrite`], [`StateLog::rewrite`]): the live state is written again and
//! the segments before it deleted.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::batch::{self, NewRecord};
use crate::{
    AppendError, AppendInfo, BatchError, FileError, Log, Partition, ReadError, TopicError,
};

const FORMAT: u8 = 1;
/// Rewrite when the topic holds more than this many records per live key (and 256 at least).
const REWRITE_RATIO: usize = 4;

fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard().with_fixed_int_encoding()
}

/// Why a state log could not be opened, replayed or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateLogError {
    /// The internal topic could not be opened or created.
    #[error("opening {topic}: {source}")]
    Topic {
        /// The internal topic.
        topic: &'static str,
        /// Why.
        source: TopicError,
    },
    /// Its records could not be read on replay.
    #[error("replaying {topic}: {source}")]
    Read {
        /// The internal topic.
        topic: &'static str,
        /// Why.
        source: ReadError,
    },
    /// A batch read on replay does not decode.
    #[error("replaying {topic}: {source}")]
    Batch {
        /// The internal topic.
        topic: &'static str,
        /// Why.
        source: BatchError,
    },
    /// A rewrite of the live keys could not delete the segments it replaced.
    #[error("deleting old segments of {topic}: {source}")]
    Rewrite {
        /// The internal topic.
        topic: &'static str,
        /// Why.
        source: FileError,
    },
    /// A key or value could not be encoded.
    #[error("encoding a record of {topic}: {source}")]
    Encode {
        /// The internal topic.
        topic: &'static str,
        /// Why.
        source: bincode::error::EncodeError,
    },
    /// Records could not be appended.
    #[error("writing {topic}: {source}")]
    Append {
        /// The internal topic.
        topic: &'static str,
        /// Why.
        source: AppendError,
    },
}

/// A state topic's one partition, with its records' format.
#[derive(Debug)]
pub struct StateLog {
    topic: &'static str,
    partition: Arc<Partition>,
}

/// Replay's view of the partition's read errors.
enum ReplayError {
    Read(ReadError),
    Batch(BatchError),
}

impl From<ReadError> for ReplayError {
    fn from(e: ReadError) -> Self {
        ReplayError::Read(e)
    }
}

impl From<BatchError> for ReplayError {
    fn from(e: BatchError) -> Self {
        ReplayError::Batch(e)
    }
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, bincode::error::EncodeError> {
    let mut out = vec![FORMAT];
    out.extend_from_slice(&bincode::serde::encode_to_vec(value, bincode_config())?);
    Ok(out)
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    match bytes.split_first() {
        Some((&FORMAT, rest)) => bincode::serde::decode_from_slice(rest, bincode_config())
            .ok()
            .map(|(value, _)| value),
        _ => None,
    }
}

fn skipped(topic: &str, offset: i64) {
    tracing::warn!(topic, offset, "skipping a record that does not decode");
}

impl StateLog {
    /// Opens (creating if needed) the state topic `topic` of `log`, rolling segments at
    /// `segment_bytes` and taking batches up to `max_batch_bytes` (one operation is one batch).
    pub fn open(
        log: &Log,
        topic: &'static str,
        segment_bytes: u32,
        max_batch_bytes: u32,
    ) -> Result<StateLog, StateLogError> {
        let partition = log
            .state_log(topic, segment_bytes, max_batch_bytes)
            .map_err(|source| StateLogError::Topic { topic, source })?;
        // A topic created by an older version may take smaller batches.
        let mut config = partition.config();
        if config.max_message_bytes < max_batch_bytes {
            config.max_message_bytes = max_batch_bytes;
            partition.set_config(config);
        }
        Ok(StateLog { topic, partition })
    }

    /// The topic's partition (for callers that wait for its durability their own way).
    pub fn partition(&self) -> &Arc<Partition> {
        &self.partition
    }

    /// Calls `apply(key, value, offset)` for every record in log order (`None`: deleted),
    /// decoding batches of up to `decode_max` bytes; returns how many records there were.
    pub fn replay<K: DeserializeOwned, V: DeserializeOwned>(
        &self,
        decode_max: usize,
        mut apply: impl FnMut(K, Option<V>, i64),
    ) -> Result<usize, StateLogError> {
        let topic = self.topic;
        self.replay_encoded(decode_max, |key: K, value, offset| match value {
            None => apply(key, None, offset),
            Some(value) => match StateLog::decode::<V>(value) {
                Some(value) => apply(key, Some(value), offset),
                None => skipped(topic, offset),
            },
        })
    }

    /// As [`StateLog::replay`], for a topic whose values differ in type by key: `apply` gets
    /// each value still encoded, to decode with [`StateLog::decode`] as its key says.
    pub fn replay_encoded<K: DeserializeOwned>(
        &self,
        decode_max: usize,
        mut apply: impl FnMut(K, Option<&[u8]>, i64),
    ) -> Result<usize, StateLogError> {
        let topic = self.topic;
        let mut records = 0;
        for decoded in self.partition.replay::<ReplayError>(decode_max) {
            let decoded = decoded.map_err(|e| match e {
                ReplayError::Read(source) => StateLogError::Read { topic, source },
                ReplayError::Batch(source) => StateLogError::Batch { topic, source },
            })?;
            for record in decoded {
                records += 1;
                match record.key.as_deref().and_then(decode::<K>) {
                    Some(key) => apply(key, record.value.as_deref(), record.offset),
                    None => skipped(topic, record.offset),
                }
            }
        }
        Ok(records)
    }

    /// A value as [`StateLog::replay_encoded`] gives it, decoded; `None` when it does not
    /// decode as a `V`.
    pub fn decode<V: DeserializeOwned>(encoded: &[u8]) -> Option<V> {
        decode(encoded)
    }

    /// A value as this log stores it (the format byte, then the value), as
    /// [`StateLog::decode`] reads it; `None` when it does not encode.
    pub fn encode<V: Serialize>(value: &V) -> Option<Vec<u8>> {
        encode(value).ok()
    }

    /// Whether a topic of `records` records holding `live` live keys should be rewritten.
    pub fn needs_rewrite(records: usize, live: usize) -> bool {
        records > REWRITE_RATIO * live.max(256)
    }

    /// Appends `entries` as one batch (a `None` value deletes its key), without waiting for
    /// the fsync: the caller waits ([`StateLog::await_durable`]) before acknowledging what
    /// they record. `None` when there is nothing to write.
    pub fn append_pending<K: Serialize, V: Serialize>(
        &self,
        entries: &[(K, Option<V>)],
    ) -> Result<Option<AppendInfo>, StateLogError> {
        if entries.is_empty() {
            return Ok(None);
        }
        let topic = self.topic;
        let now = crate::now_ms();
        let encoded = entries
            .iter()
            .map(|(k, v)| Ok((encode(k)?, v.as_ref().map(encode).transpose()?)))
            .collect::<Result<Vec<(Vec<u8>, Option<Vec<u8>>)>, bincode::error::EncodeError>>()
            .map_err(|source| StateLogError::Encode { topic, source })?;
        let records: Vec<NewRecord> = encoded
            .iter()
            .map(|(k, v)| (Some(k.as_slice()), v.as_deref(), now))
            .collect();
        self.partition
            .append_pending(&batch::build(&records), crate::Ack::Fsynced)
            .map(Some)
            .map_err(|source| StateLogError::Append { topic, source })
    }

    /// Waits until appended records are on disk.
    pub fn await_durable(&self, info: &AppendInfo) -> Result<(), StateLogError> {
        self.partition
            .await_durable(info)
            .map_err(|source| StateLogError::Append {
                topic: self.topic,
                source,
            })
    }

    /// Appends `entries` and waits until they are on disk.
    pub fn append<K: Serialize, V: Serialize>(
        &self,
        entries: &[(K, Option<V>)],
    ) -> Result<(), StateLogError> {
        match self.append_pending(entries)? {
            Some(info) => self.await_durable(&info),
            None => Ok(()),
        }
    }

    /// Writes the live state `entries` again, `chunk` to a batch, then deletes the segments
    /// that only held older records (`records` of them were replayed).
    pub fn rewrite<K: Serialize, V: Serialize>(
        &self,
        entries: &[(K, Option<V>)],
        chunk: usize,
        records: usize,
    ) -> Result<(), StateLogError> {
        let rewritten_from = self.partition.log_end_offset();
        for entries in entries.chunks(chunk.max(1)) {
            self.append(entries)?;
        }
        let report = self
            .partition
            .delete_segments_before(rewritten_from)
            .map_err(|source| StateLogError::Rewrite {
                topic: self.topic,
                source,
            })?;
        tracing::info!(
            topic = self.topic,
            records,
            live = entries.len(),
            deleted_segments = report.deleted_segments,
            "rewrote the state topic"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn records_are_a_format_byte_then_bincode_and_unknown_formats_are_refused() {
        let value = ("g".to_string(), 3i32);
        let encoded = encode(&value).unwrap();
        assert_eq!(encoded[0], FORMAT);
        assert_eq!(&encoded[1..9], &1u64.to_le_bytes(), "fixed-width length");
        assert_eq!(decode::<(String, i32)>(&encoded), Some(value));
        assert_eq!(decode::<(String, i32)>(&[9, 1, 2]), None);
        assert_eq!(decode::<(String, i32)>(&[]), None);
    }

    #[test]
    fn a_state_log_replays_what_was_written_in_order_and_rewrites_the_live_keys() {
        let dir = tempfile::tempdir().unwrap();
        // 4 KiB values: 600 of them fill two closed 1 MiB segments and part of a third.
        let filler = "x".repeat(4096);
        let records = {
            let log = Log::open(dir.path()).unwrap();
            let state = StateLog::open(&log, "__state", 1 << 20, 1 << 20).unwrap();
            state
                .append(&[("early".to_string(), Some("kept".to_string()))])
                .unwrap();
            for _ in 0..300 {
                state
                    .append(&[
                        ("filler".to_string(), Some(filler.clone())),
                        ("gone".to_string(), None),
                    ])
                    .unwrap();
            }
            let mut seen = Vec::new();
            let records = state
                .replay(1 << 20, |k: String, v: Option<String>, _| seen.push((k, v)))
                .unwrap();
            assert_eq!(records, 601);
            assert_eq!(seen[0], ("early".to_string(), Some("kept".to_string())));
            assert_eq!(seen[600], ("gone".to_string(), None));
            assert!(StateLog::needs_rewrite(records, 2) == (records > 1024));
            let live = [
                ("early".to_string(), Some("kept".to_string())),
                ("filler".to_string(), Some(filler.clone())),
            ];
            state.rewrite(&live, 1, records).unwrap();
            records
        };
        assert_eq!(records, 601);
        // Reopened: the segments before the rewrite are gone, the live keys are there.
        let log = Log::open(dir.path()).unwrap();
        let state = StateLog::open(&log, "__state", 1 << 20, 1 << 20).unwrap();
        let mut early = None;
        let records = state
            .replay(1 << 20, |k: String, v: Option<String>, _| {
                if k == "early" {
                    early = v;
                }
            })
            .unwrap();
        assert_eq!(early.as_deref(), Some("kept"));
        assert!(
            records < 601,
            "the old segments were deleted: {records} records left"
        );
    }
}
