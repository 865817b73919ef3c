//! Opening segment files. A closed segment opens without reading it (its length from the file
//! system, its newest timestamp from the last `.timeindex` entry); its indexes are read and
//! checked when it is first loaded, and rebuilt from the log if they do not fit. The last
//! segment is recovered batch by batch.
//!
//! Closed segments are not read at open: they were fsynced when they rolled, so a crash cannot
//! tear them. Damage there (bit rot, tampering) is found when a read first walks over it: every
//! batch's CRC is checked once per run before it is first served (see [`super::read`]). The
//! last segment is CRC-checked at open unless the data dir was shut down cleanly, in which case
//! only its headers are walked and its CRCs are left to the first reads.

use std::fs;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use memmap2::Mmap;

use super::chain::{Chain, Link, UNKNOWN_END};
use super::{file_name, map_file, Place, Recovery, Segment, Touched, INDEX_EXT, TIME_INDEX_EXT};
use crate::error::{FileError, OpenError};
use crate::index::{EntriesError, IndexCursor, Indexes, OffsetIndex, TimeIndex, TIME_ENTRY_LEN};

impl Segment {
    /// Opens a closed segment whose offsets end at `end_offset` (the next segment's base),
    /// without loading it. If its `.timeindex` cannot tell its newest timestamp (which
    /// retention needs), it is loaded now, which rebuilds the indexes.
    /// `compacted`: the log cleaner may have removed records from it.
    pub fn open_closed(
        place: &Place,
        base_offset: i64,
        end_offset: i64,
        compacted: bool,
    ) -> Result<Arc<Segment>, OpenError> {
        let log_path = place.dir.join(file_name(base_offset, super::LOG_EXT));
        let len = fs::metadata(&log_path)
            .map_err(|e| FileError::new("stat", &log_path, e))?
            .len();
        let segment = Arc::new(Segment::new(place, base_offset, len, end_offset));
        if compacted {
            segment.set_compacted();
        }
        let span = u64::try_from(end_offset - base_offset).unwrap_or(0);
        match newest_timestamp(
            &place.dir.join(file_name(base_offset, TIME_INDEX_EXT)),
            span,
        ) {
            Some(ts) => segment.max_timestamp.store(ts, Ordering::Release),
            None => {
                if let Err(e) = segment.load() {
                    return Err(match e {
                        crate::ReadError::Io(e) => e.into(),
                        other => OpenError::Corrupt {
                            path: segment.log_path.clone(),
                            reason: other.to_string(),
                        },
                    });
                }
            }
        }
        Ok(segment)
    }

    /// Fills the indexes of a segment being loaded from its index files, or rebuilds them from
    /// `map` (recording any damage on the way) when the files are missing or do not fit.
    pub(super) fn load_indexes(&self, map: Option<&Arc<Mmap>>) {
        let data: &[u8] = map.map_or(&[], |m| &m[..self.len() as usize]);
        let mut touched = Touched::new(map, 0);
        match self.read_index_files(data) {
            Ok(indexes) => {
                // The check read the batch header at the last index entry.
                if let Some((_, position)) = indexes.offsets.last() {
                    let at = position as usize;
                    touched.range = at..at + record_batch::HEADER_LEN;
                }
                let newest = indexes.times.last().map_or(-1, |(ts, _)| ts);
                self.max_timestamp.fetch_max(newest, Ordering::AcqRel);
                self.indexes.replace(indexes);
            }
            Err(reason) => {
                if self.is_compacted()
                    && matches!(&reason, IndexFileError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
                {
                    // A segment the cleaner just swapped in: its indexes are made here.
                    tracing::debug!(segment = %self.log_path.display(), "building the indexes of a cleaned segment");
                } else {
                    tracing::warn!(segment = %self.log_path.display(), %reason, "rebuilding indexes");
                }
                let rebuilt = Indexes::new();
                let mut cursor = IndexCursor::new(self.base_offset, self.index_interval);
                let chain = Chain::new(data, 0, self.base_offset, self.next_offset(), true)
                    .compacted(self.is_compacted());
                for link in chain {
                    touched.pass(&link, data.len());
                    match link {
                        Link::Batch(at, header) => {
                            let at = u32::try_from(at).unwrap_or(u32::MAX);
                            cursor.add(&rebuilt, &header, at);
                        }
                        Link::Damage(damage) => self.record_damage(&damage),
                    }
                }
                cursor.add_time_entry(&rebuilt);
                self.verified_up_to(data.len() as u64);
                self.max_timestamp
                    .fetch_max(cursor.max_timestamp(), Ordering::AcqRel);
                self.indexes.replace(rebuilt);
                if let Err(e) = self.write_indexes() {
                    tracing::warn!(error = %e, "could not write rebuilt indexes; they will be rebuilt again");
                }
            }
        }
    }

    /// Reads and checks a closed segment's index files against its log bytes.
    fn read_index_files(&self, data: &[u8]) -> Result<Indexes, IndexFileError> {
        let span = u64::try_from(self.next_offset() - self.base_offset).unwrap_or(0);
        let read = |ext: &str| -> Result<Vec<u8>, IndexFileError> {
            let path = self.dir.join(file_name(self.base_offset, ext));
            fs::read(&path).map_err(|source| IndexFileError::Read { path, source })
        };
        let entries = |ext: &str| {
            let file = file_name(self.base_offset, ext);
            move |source| IndexFileError::Entries { file, source }
        };
        let offsets = OffsetIndex::from_bytes(read(INDEX_EXT)?, data.len() as u64, span)
            .map_err(entries(INDEX_EXT))?;
        let times =
            TimeIndex::from_bytes(read(TIME_INDEX_EXT)?, span).map_err(entries(TIME_INDEX_EXT))?;
        if let Some((rel, position)) = offsets.last() {
            // The last entry must point at a batch with the offset it claims.
            let header = record_batch::BatchHeader::read(&data[position as usize..])
                .map_err(|source| IndexFileError::Batch { position, source })?;
            let claimed = self.base_offset + i64::from(rel);
            if header.base_offset != claimed {
                return Err(IndexFileError::Mismatch {
                    claimed,
                    position,
                    found: header.base_offset,
                });
            }
        }
        Ok(Indexes { offsets, times })
    }

    /// Opens the last segment of a partition and recovers it: walks every batch (with its CRC
    /// unless `clean`, after a clean shutdown: then each batch's CRC is checked when it is first
    /// read), steps over damage in the middle (recorded, see [`super::chain`]), truncates a
    /// torn or corrupt tail after the last whole valid batch, and rebuilds its indexes in
    /// memory.
    pub fn recover(
        place: &Place,
        base_offset: i64,
        capacity: u64,
        clean: bool,
    ) -> Result<(Arc<Segment>, IndexCursor, Recovery), OpenError> {
        let log_path = place.dir.join(file_name(base_offset, super::LOG_EXT));
        let file = place
            .storage
            .open(&log_path)
            .map_err(|e| FileError::new("open", &log_path, e))?;
        let file_len = file
            .file()
            .metadata()
            .map_err(|e| FileError::new("stat", &log_path, e))?
            .len();
        let map = map_file(file.as_ref(), capacity.max(file_len), &log_path)?;
        let segment = Segment::new(place, base_offset, file_len, base_offset);
        let data: &[u8] = map.as_deref().map_or(&[], |m| &m[..file_len as usize]);
        let mut touched = Touched::new(map.as_ref(), 0);
        let mut cursor = IndexCursor::new(base_offset, place.index_interval);
        let (mut valid_len, mut next_offset) = (0u64, base_offset);
        let mut tail = None;
        for link in Chain::new(data, 0, base_offset, UNKNOWN_END, !clean) {
            touched.pass(&link, data.len());
            match link {
                Link::Batch(at, header) => {
                    cursor.add(
                        &segment.indexes,
                        &header,
                        u32::try_from(at).unwrap_or(u32::MAX),
                    );
                    valid_len = at as u64 + u64::from(header.size);
                    next_offset = header.next_offset();
                    tail = None;
                }
                // Damage that runs to the end is a torn tail, cut below; damage with valid
                // batches after it is kept and refused to readers.
                Link::Damage(damage) if damage.resume_at as usize >= data.len() => {
                    valid_len = valid_len.min(damage.position);
                    tail = Some(damage.reason);
                }
                Link::Damage(damage) => segment.record_damage(&damage),
            }
        }
        drop(touched);
        let mut recovery = Recovery::default();
        if valid_len < file_len {
            recovery = Recovery {
                truncated_bytes: file_len - valid_len,
                reason: tail,
            };
            tracing::warn!(
                segment = %log_path.display(),
                at = valid_len,
                bytes = recovery.truncated_bytes,
                reason = ?recovery.reason,
                "truncating torn or corrupt tail"
            );
            file.set_len(valid_len)
                .and_then(|()| file.sync_data())
                .map_err(|e| FileError::new("truncate", &log_path, e))?;
        } else if !clean {
            // After a kill -9 what recovery keeps may be only in the page cache: it is served
            // and taken as durable from now on (a producer's retry is answered from it), so
            // it goes to disk first.
            file.sync_data()
                .map_err(|e| FileError::new("fsync", &log_path, e))?;
        }
        segment.len.store(valid_len, Ordering::Release);
        if !clean {
            segment.verified_up_to(valid_len);
        }
        segment.next_offset.store(next_offset, Ordering::Release);
        segment
            .max_timestamp
            .store(cursor.max_timestamp(), Ordering::Release);
        segment.opened_active(file, map, capacity);
        // The active segment's index files are written when it rolls; older copies are stale.
        for ext in [INDEX_EXT, TIME_INDEX_EXT] {
            let path = place.dir.join(file_name(base_offset, ext));
            if let Err(e) = fs::remove_file(&path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(FileError::new("remove", path, e).into());
                }
            }
        }
        let segment = Arc::new(segment);
        segment.open_files.admit(&segment);
        Ok((segment, cursor, recovery))
    }
}

/// The newest timestamp a `.timeindex` records (its last entry), read without loading it;
/// `None` if the file is missing or its size or last entry does not fit a segment of `span`
/// offsets.
fn newest_timestamp(path: &std::path::Path, span: u64) -> Option<i64> {
    let mut file = fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    if len == 0 {
        return Some(-1);
    }
    if !len.is_multiple_of(TIME_ENTRY_LEN as u64) {
        return None;
    }
    use std::io::Seek;
    file.seek(std::io::SeekFrom::Start(len - TIME_ENTRY_LEN as u64))
        .ok()?;
    let mut entry = [0u8; TIME_ENTRY_LEN];
    file.read_exact(&mut entry).ok()?;
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&entry[..8]);
    let rel = u32::from_be_bytes([entry[8], entry[9], entry[10], entry[11]]);
    (u64::from(rel) < span.max(1)).then_some(i64::from_be_bytes(ts))
}

/// Why a closed segment's index files cannot be used as they are (they are then rebuilt from
/// the log).
#[derive(Debug, thiserror::Error)]
enum IndexFileError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {source}")]
    Entries { file: String, source: EntriesError },
    #[error("index entry at byte {position}: {source}")]
    Batch {
        position: u32,
        source: record_batch::BatchError,
    },
    #[error("last index entry says offset {claimed} at byte {position}, the log has {found}")]
    Mismatch {
        claimed: i64,
        position: u32,
        found: i64,
    },
}
