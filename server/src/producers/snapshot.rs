//! Producer-state snapshots, as Kafka's `.snapshot` files: a partition's idempotent-producer
//! state as of an offset (every batch below it recorded), in `<partition dir>/producer-snapshot`.
//! Written by the append that rolls a segment (holding the partition's producer lock, so the
//! state and the offset agree) and at a clean shutdown. At start the state is the snapshot's,
//! then the batch headers from its offset on are replayed: the segments written since the last
//! roll, however long ago a producer last wrote. Without a usable snapshot (none yet, one that
//! does not read back, or one past the log's end after a power cut took the tail) the last two
//! segments are read instead, as before snapshots.
//!
//! Format: version byte 1, the CRC-32C (big-endian) of the rest, then bincode (fixed-width
//! integers) of [`Snapshot`]. Written atomically (temporary file, fsync, rename, directory
//! fsync); a file that fails its check is ignored, with a warning.

use std::collections::VecDeque;
use std::path::Path;

use log_core::{AppendInfo, FileError};
use serde::{Deserialize, Serialize};

use super::{PartitionProducers, ProducerEntry, RECENT_BATCHES};

const FILE: &str = "producer-snapshot";
const VERSION: u8 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct Snapshot {
    /// Every batch below this offset is in the state.
    at: i64,
    producers: Vec<Producer>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Producer {
    id: i64,
    epoch: i16,
    last_sequence: i32,
    sequence_known: bool,
    coordinator_epoch: i32,
    last_seen_ms: i64,
    recent: Vec<Batch>,
}

/// One of a producer's recent batches: its sequences and where it was stored.
#[derive(Debug, Serialize, Deserialize)]
struct Batch {
    first_sequence: i32,
    last_sequence: i32,
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    log_append_time: i64,
}

/// Why a snapshot was not used.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("{0}: not a producer snapshot of version {VERSION}, or damaged")]
    Damaged(String),
}

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_fixed_int_encoding()
}

impl PartitionProducers {
    /// Writes the state as of `at` (every batch below it recorded) into `dir`.
    pub fn save_snapshot(&self, dir: &Path, at: i64) -> Result<(), FileError> {
        let producers = self
            .entries
            .iter()
            .map(|(id, e)| Producer {
                id: *id,
                epoch: e.epoch,
                last_sequence: e.last_sequence,
                sequence_known: e.sequence_known,
                coordinator_epoch: e.coordinator_epoch,
                last_seen_ms: e.last_seen_ms,
                recent: e
                    .recent
                    .iter()
                    .map(|(first, last, info)| Batch {
                        first_sequence: *first,
                        last_sequence: *last,
                        base_offset: info.base_offset,
                        last_offset: info.last_offset,
                        max_timestamp: info.max_timestamp,
                        log_append_time: info.log_append_time,
                    })
                    .collect(),
            })
            .collect();
        let body = bincode::serde::encode_to_vec(Snapshot { at, producers }, config())
            .map_err(|e| FileError::new("encode", dir.join(FILE), std::io::Error::other(e)))?;
        let mut bytes = Vec::with_capacity(body.len() + 5);
        bytes.push(VERSION);
        bytes.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        bytes.extend_from_slice(&body);
        log_core::io::replace_file(dir, FILE, &bytes)
    }

    /// The state of the snapshot in `dir` and the offset it is as of, producers whose last
    /// batch lies below `log_start` left out (as a rebuild from the log would); `None` when
    /// there is none.
    pub(super) fn load_snapshot(
        dir: &Path,
        log_start: i64,
    ) -> Result<Option<(i64, PartitionProducers)>, SnapshotError> {
        let path = dir.join(FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(FileError::new("read", &path, e).into()),
        };
        let damaged = || SnapshotError::Damaged(path.display().to_string());
        let (head, body) = bytes.split_at_checked(5).ok_or_else(damaged)?;
        let crc = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
        if head[0] != VERSION || crc32c::crc32c(body) != crc {
            return Err(damaged());
        }
        let (snapshot, read): (Snapshot, usize) =
            bincode::serde::decode_from_slice(body, config()).map_err(|_| damaged())?;
        if read != body.len() {
            return Err(damaged());
        }
        let mut state = PartitionProducers::default();
        for p in snapshot.producers {
            let gone = p
                .recent
                .last()
                .is_some_and(|last| last.last_offset < log_start);
            if gone || p.recent.len() > RECENT_BATCHES {
                continue;
            }
            let recent: VecDeque<(i32, i32, AppendInfo)> = p
                .recent
                .into_iter()
                .map(|b| {
                    let info = AppendInfo {
                        base_offset: b.base_offset,
                        last_offset: b.last_offset,
                        max_timestamp: b.max_timestamp,
                        log_append_time: b.log_append_time,
                        log_start_offset: log_start,
                        must_sync: false,
                        rolled: false,
                    };
                    (b.first_sequence, b.last_sequence, info)
                })
                .collect();
            state.entries.insert(
                p.id,
                ProducerEntry {
                    epoch: p.epoch,
                    last_sequence: p.last_sequence,
                    sequence_known: p.sequence_known,
                    coordinator_epoch: p.coordinator_epoch,
                    recent,
                    last_seen_ms: p.last_seen_ms,
                },
            );
        }
        Ok(Some((snapshot.at, state)))
    }

    /// Removes the snapshot in `dir` (one the log no longer reaches), durably: a power cut
    /// must not bring it back once the log grows past it again with other batches.
    pub(super) fn remove_snapshot(dir: &Path) -> Result<(), FileError> {
        let path = dir.join(FILE);
        match std::fs::remove_file(&path) {
            Ok(()) => log_core::io::sync_dir(dir).map_err(|e| FileError::new("fsync", dir, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(FileError::new("remove", &path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producers::Verdict;
    use record_batch::BatchHeader;

    fn header(pid: i64, seq: i32, count: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            size: 100,
            partition_leader_epoch: -1,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: 3,
            base_sequence: seq,
            record_count: count,
        }
    }

    fn info(base: i64, last: i64) -> AppendInfo {
        AppendInfo {
            base_offset: base,
            last_offset: last,
            max_timestamp: 7,
            log_append_time: -1,
            log_start_offset: 0,
            must_sync: false,
            rolled: false,
        }
    }

    #[test]
    fn a_snapshot_reads_back_as_the_state_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = PartitionProducers::default();
        state.record(&[header(1, 0, 2)], info(0, 1), 100);
        state.record(&[header(1, 2, 2)], info(2, 3), 110);
        state.record(&[header(2, 0, 1)], info(4, 4), 120);
        state.record_marker(2, 4, 9, 130);
        state.save_snapshot(dir.path(), 5).unwrap();

        let (at, loaded) = PartitionProducers::load_snapshot(dir.path(), 0)
            .unwrap()
            .unwrap();
        assert_eq!(at, 5);
        assert_eq!(loaded.active(), state.active());
        assert_eq!(loaded.coordinator_epoch(2), 9);
        // A retry of producer 1's last batch is a duplicate at its offsets; its next batch is
        // in sequence; an older one is out of order.
        match loaded.check(&[header(1, 2, 2)]) {
            Verdict::Duplicate(i) => assert_eq!((i.base_offset, i.last_offset), (2, 3)),
            other => panic!("{other:?}"),
        }
        assert_eq!(loaded.check(&[header(1, 4, 1)]), Verdict::Append);

        // Producers whose last batch is below the log start are left out.
        let (_, trimmed) = PartitionProducers::load_snapshot(dir.path(), 4)
            .unwrap()
            .unwrap();
        assert_eq!(
            trimmed.active().iter().map(|p| p.0).collect::<Vec<_>>(),
            [2]
        );
    }

    #[test]
    fn a_damaged_or_missing_snapshot_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        assert!(PartitionProducers::load_snapshot(dir.path(), 0)
            .unwrap()
            .is_none());
        let mut state = PartitionProducers::default();
        state.record(&[header(1, 0, 2)], info(0, 1), 100);
        state.save_snapshot(dir.path(), 2).unwrap();
        let path = dir.path().join(FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            PartitionProducers::load_snapshot(dir.path(), 0),
            Err(SnapshotError::Damaged(_))
        ));
        std::fs::write(&path, [VERSION]).unwrap();
        assert!(PartitionProducers::load_snapshot(dir.path(), 0).is_err());
        PartitionProducers::remove_snapshot(dir.path()).unwrap();
        assert!(!path.exists());
    }
}
