//! How a cleaned segment replaces the segments it was cleaned from, so that a crash at any
//! point leaves either the old segments or the new one, never both and never half of one.
//!
//! The cleaner writes the segments `[base, end)` cleaned into `<base>-<end>.cleaned` and
//! fsyncs it. The rename to `<base>-<end>.swap` (and the directory fsync) is the commit
//! point; then the old segments' files are removed (each `.log` with a base offset in
//! `(base, end)`, and every old `.index` and `.timeindex`), and the `.swap` is renamed over
//! `<base>.log`. At open, a `.cleaned` file is removed (its clean did not commit) and a
//! `.swap` file's replacement is finished.
//!
//! Two files of one offset each (a version byte, then a big-endian i64) say how far cleaning
//! went: `cleaner-reach`, written before a pass's first commit point, is where the pass may
//! swap segments in (segments below it may have offset gaps; a crash before the swaps only
//! makes the checks of the old segments laxer); `cleaner-offset`, written after its last
//! swap, is where the cleaned part ends (a crash before it leaves the pass's part dirty, and
//! the next pass maps it again).

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{FileError, OpenError};
use crate::io::{self, Storage};
use crate::segment::{self, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};

const CLEANED_EXT: &str = "cleaned";
const SWAP_EXT: &str = "swap";
const CHECKPOINT_FILE: &str = "cleaner-offset";
const REACH_FILE: &str = "cleaner-reach";
const CHECKPOINT_VERSION: u8 = 1;

/// `<base, 20 digits>-<end, 20 digits>.<ext>`.
fn group_file_name(base: i64, end: i64, ext: &str) -> String {
    format!("{base:020}-{end:020}.{ext}")
}

fn parse_group_file_name(name: &str, ext: &str) -> Option<(i64, i64)> {
    let stem = name.strip_suffix(ext)?.strip_suffix('.')?;
    let (base, end) = stem.split_once('-')?;
    let digits = |s: &str| s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit());
    (digits(base) && digits(end))
        .then(|| Some((base.parse().ok()?, end.parse().ok()?)))
        .flatten()
}

/// Where the cleaner writes the segments `[base, end)` cleaned.
pub(crate) fn cleaned_path(dir: &Path, base: i64, end: i64) -> PathBuf {
    dir.join(group_file_name(base, end, CLEANED_EXT))
}

/// The end of the cleaned part recorded in `dir` (0 when the partition was never cleaned).
pub(crate) fn read_checkpoint(dir: &Path) -> Result<i64, OpenError> {
    Ok(io::read_offset_file(dir, CHECKPOINT_FILE, CHECKPOINT_VERSION)?.unwrap_or(0))
}

pub(crate) fn write_checkpoint(
    storage: &dyn Storage,
    dir: &Path,
    offset: i64,
) -> Result<(), FileError> {
    io::write_offset_file(storage, dir, CHECKPOINT_FILE, CHECKPOINT_VERSION, offset)
}

/// Below which offset segments may have gaps (cleaned, or being cleaned by a pass a crash
/// cut short).
pub(crate) fn read_reach(dir: &Path) -> Result<i64, OpenError> {
    let reach = io::read_offset_file(dir, REACH_FILE, CHECKPOINT_VERSION)?.unwrap_or(0);
    Ok(reach.max(read_checkpoint(dir)?))
}

pub(crate) fn write_reach(storage: &dyn Storage, dir: &Path, offset: i64) -> Result<(), FileError> {
    io::write_offset_file(storage, dir, REACH_FILE, CHECKPOINT_VERSION, offset)
}

/// Commits the cleaned file of `[base, end)` (written and fsynced) in place of the segments
/// `old_bases` (every base offset in `[base, end)`), as the module says.
pub(crate) fn commit(
    dir: &Path,
    storage: &dyn Storage,
    base: i64,
    end: i64,
    old_bases: &[i64],
) -> Result<(), FileError> {
    let cleaned = cleaned_path(dir, base, end);
    let swap = dir.join(group_file_name(base, end, SWAP_EXT));
    storage
        .rename(&cleaned, &swap)
        .map_err(|e| FileError::new("rename", &cleaned, e))?;
    io::sync_dir(dir).map_err(|e| FileError::new("fsync", dir, e))?;
    finish(dir, storage, base, old_bases)
}

/// After the commit point: the old files go, then the swap becomes `<base>.log`.
fn finish(
    dir: &Path,
    storage: &dyn Storage,
    base: i64,
    old_bases: &[i64],
) -> Result<(), FileError> {
    for &old in old_bases {
        let exts: &[&str] = if old == base {
            &[INDEX_EXT, TIME_INDEX_EXT]
        } else {
            &[LOG_EXT, INDEX_EXT, TIME_INDEX_EXT]
        };
        for ext in exts {
            let path = dir.join(segment::file_name(old, ext));
            storage
                .remove(&path)
                .map_err(|e| FileError::new("remove", &path, e))?;
        }
    }
    let swap = find(dir, SWAP_EXT)?
        .into_iter()
        .find(|(b, _, _)| *b == base)
        .map(|(_, _, path)| path);
    if let Some(swap) = swap {
        let log = dir.join(segment::file_name(base, LOG_EXT));
        storage
            .rename(&swap, &log)
            .map_err(|e| FileError::new("rename", &swap, e))?;
    }
    io::sync_dir(dir).map_err(|e| FileError::new("fsync", dir, e))
}

/// The group files of `ext` in `dir`: (base, end, path).
fn find(dir: &Path, ext: &str) -> Result<Vec<(i64, i64, PathBuf)>, FileError> {
    let entries = fs::read_dir(dir).map_err(|e| FileError::new("list", dir, e))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| FileError::new("list", dir, e))?;
        let name = entry.file_name();
        if let Some((base, end)) = parse_group_file_name(&name.to_string_lossy(), ext) {
            found.push((base, end, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// At open, before the segments are listed: removes what a clean left uncommitted and
/// finishes a committed swap.
pub(crate) fn recover(dir: &Path, storage: &dyn Storage) -> Result<(), OpenError> {
    for (_, _, path) in find(dir, CLEANED_EXT)? {
        tracing::info!(file = %path.display(), "removing a cleaned segment whose clean did not finish");
        storage
            .remove(&path)
            .map_err(|e| FileError::new("remove", &path, e))?;
    }
    for (base, end, path) in find(dir, SWAP_EXT)? {
        tracing::info!(file = %path.display(), "finishing the swap of a cleaned segment");
        let mut old_bases = vec![base];
        let entries = fs::read_dir(dir).map_err(|e| FileError::new("list", dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| FileError::new("list", dir, e))?;
            let name = entry.file_name();
            if let Some(b) = segment::parse_file_name(&name.to_string_lossy(), LOG_EXT) {
                if b > base && b < end {
                    old_bases.push(b);
                }
            }
        }
        finish(dir, storage, base, &old_bases)?;
        debug_assert!(!path.exists());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_file_names_round_trip() {
        let name = group_file_name(5, 1200, SWAP_EXT);
        assert_eq!(name, "00000000000000000005-00000000000000001200.swap");
        assert_eq!(parse_group_file_name(&name, SWAP_EXT), Some((5, 1200)));
        assert_eq!(parse_group_file_name(&name, CLEANED_EXT), None);
        assert_eq!(parse_group_file_name("5-1200.swap", SWAP_EXT), None);
    }
}
