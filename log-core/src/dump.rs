//! Inspecting a segment file as Kafka's `DumpLogSegments` does: every batch with its offsets,
//! timestamps, size and CRC, and a check of the segment's index files against the log. Damage
//! is reported with its byte and offset ranges, and the dump goes on after it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use record_batch::{BatchError, BatchHeader};

use crate::error::FileError;
use crate::index::{OFFSET_ENTRY_LEN, TIME_ENTRY_LEN};
use crate::segment::chain::{Chain, DamageReason, Link, UNKNOWN_END};
use crate::segment::{file_name, parse_file_name, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};

/// One batch as found in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchReport {
    /// Where the batch starts in the file.
    pub position: u64,
    /// Its header as read.
    pub header: BatchHeader,
    /// Whether its CRC-32C matches its bytes.
    pub crc_ok: bool,
}

/// Everything found in one segment.
#[derive(Clone, Debug, Default)]
pub struct SegmentReport {
    /// The `.log` file.
    pub path: PathBuf,
    /// Its length in bytes.
    pub file_len: u64,
    /// The batches found, in file order (the walk resumes after a stretch it cannot frame).
    pub batches: Vec<BatchReport>,
    /// Entries checked in `.index` / `.timeindex`; `None` when the file is absent (the active
    /// segment's indexes are written when it rolls).
    pub index_entries: Option<usize>,
    /// As `index_entries`, for `.timeindex`.
    pub time_index_entries: Option<usize>,
    /// Corruption found, each naming where. Empty means the segment is sound.
    pub problems: Vec<String>,
}

impl SegmentReport {
    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The check of a stored batch's records: as appended, or as the cleaner may have left them.
fn stored_records(
    bytes: &[u8],
    header: &record_batch::BatchHeader,
    compacted: bool,
) -> Result<(), BatchError> {
    if compacted {
        record_batch::validate_stored(bytes).map(|_| ())
    } else {
        record_batch::check_records(bytes, header)
    }
}

/// Reads and checks the segment at `path` (a `.log` file).
pub fn dump_segment(path: &Path) -> Result<SegmentReport, FileError> {
    let data = fs::read(path).map_err(|e| FileError::new("read", path, e))?;
    let mut report = SegmentReport {
        path: path.to_path_buf(),
        file_len: data.len() as u64,
        ..Default::default()
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = parse_file_name(&name, LOG_EXT);
    if base.is_none() {
        report
            .problems
            .push(format!("{name} is not named <20-digit base offset>.log"));
    }
    // The walk checks structure and offsets; CRCs are checked here so that a batch with a bad
    // CRC is still listed. Where the structure breaks, the walk resumes at the next valid batch.
    let limit = path
        .parent()
        .and_then(|dir| next_segment_base(dir, base?))
        .unwrap_or(UNKNOWN_END);
    // A segment the log cleaner reached may have offset gaps.
    let compacted = path
        .parent()
        .and_then(|dir| crate::cleaner::swap::read_reach(dir).ok())
        .zip(base)
        .is_some_and(|(reach, base)| base < reach);
    for link in Chain::new(&data, 0, base.unwrap_or(0), limit, false).compacted(compacted) {
        match link {
            Link::Batch(pos, header) => {
                let bytes = &data[pos..pos + header.size as usize];
                let crc_ok = record_batch::compute_crc(bytes) == header.crc;
                if !crc_ok {
                    report.problems.push(format!(
                        "byte {pos}: CRC mismatch in batch at offset {}",
                        header.base_offset
                    ));
                } else if let Err(e) = stored_records(bytes, &header, compacted) {
                    // Served by no read: the broker's walk finds it as damage too.
                    report.problems.push(format!(
                        "bytes {pos}..{}: offsets {}..{} damaged: {e}",
                        pos + bytes.len(),
                        header.base_offset,
                        header.next_offset(),
                    ));
                }
                report.batches.push(BatchReport {
                    position: pos as u64,
                    header,
                    crc_ok,
                });
            }
            Link::Damage(damage) => {
                let torn = damage.resume_at == data.len() as u64
                    && matches!(
                        damage.reason,
                        DamageReason::Batch(BatchError::Truncated { .. })
                    );
                report.problems.push(format!(
                    "bytes {}..{}: offsets {}..{} damaged: {}{}",
                    damage.position,
                    damage.resume_at,
                    damage.first_offset,
                    damage.end_offset,
                    damage.reason,
                    if torn {
                        " (torn write)"
                    } else if damage.resume_at < data.len() as u64 {
                        "; the next valid batch follows"
                    } else {
                        ""
                    },
                ));
            }
        }
    }
    if let (Some(base), Some(dir)) = (base, path.parent()) {
        check_indexes(dir, base, &mut report);
    }
    Ok(report)
}

/// The base offset of the segment after `base` in `dir`, if there is one.
fn next_segment_base(dir: &Path, base: i64) -> Option<i64> {
    fs::read_dir(dir)
        .ok()?
        .filter_map(|e| parse_file_name(&e.ok()?.file_name().to_string_lossy(), LOG_EXT))
        .filter(|b| *b > base)
        .min()
}

fn check_indexes(dir: &Path, base: i64, report: &mut SegmentReport) {
    let starts: BTreeMap<u64, i64> = report
        .batches
        .iter()
        .map(|b| (b.position, b.header.base_offset))
        .collect();
    let batch_bases: BTreeMap<i64, i64> = report
        .batches
        .iter()
        .map(|b| (b.header.base_offset, b.header.max_timestamp))
        .collect();

    let index_name = file_name(base, INDEX_EXT);
    if let Ok(bytes) = fs::read(dir.join(&index_name)) {
        if bytes.len() % OFFSET_ENTRY_LEN != 0 {
            report.problems.push(format!(
                "{index_name}: size {} is not a multiple of {OFFSET_ENTRY_LEN}",
                bytes.len()
            ));
        }
        let entries: Vec<_> = bytes.chunks_exact(OFFSET_ENTRY_LEN).collect();
        for entry in &entries {
            let rel = u32::from_be_bytes([entry[0], entry[1], entry[2], entry[3]]);
            let position = u32::from_be_bytes([entry[4], entry[5], entry[6], entry[7]]);
            let offset = base + i64::from(rel);
            if starts.get(&u64::from(position)) != Some(&offset) {
                report.problems.push(format!(
                    "{index_name}: entry (offset {offset}, byte {position}) does not point at that batch"
                ));
            }
        }
        report.index_entries = Some(entries.len());
    }

    let time_name = file_name(base, TIME_INDEX_EXT);
    if let Ok(bytes) = fs::read(dir.join(&time_name)) {
        if bytes.len() % TIME_ENTRY_LEN != 0 {
            report.problems.push(format!(
                "{time_name}: size {} is not a multiple of {TIME_ENTRY_LEN}",
                bytes.len()
            ));
        }
        let entries: Vec<_> = bytes.chunks_exact(TIME_ENTRY_LEN).collect();
        let mut previous = i64::MIN;
        for entry in &entries {
            let mut ts = [0u8; 8];
            ts.copy_from_slice(&entry[..8]);
            let timestamp = i64::from_be_bytes(ts);
            let rel = u32::from_be_bytes([entry[8], entry[9], entry[10], entry[11]]);
            let offset = base + i64::from(rel);
            if timestamp < previous {
                report
                    .problems
                    .push(format!("{time_name}: timestamp {timestamp} goes backwards"));
            }
            previous = timestamp;
            if batch_bases.get(&offset) != Some(&timestamp) {
                report.problems.push(format!(
                    "{time_name}: entry (timestamp {timestamp}, offset {offset}) does not match a batch"
                ));
            }
        }
        report.time_index_entries = Some(entries.len());
    }
}
