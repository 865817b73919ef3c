//! What a partition's cleaner has done: kept by the partition, which owns it, and read by
//! `/metrics` and `topic describe`.

/// What a partition's cleaner has done since it opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanerStats {
    /// Passes that cleaned something.
    pub runs: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_removed: u64,
    /// When the last pass ended (ms since the epoch).
    pub last_run_ms: Option<i64>,
    /// Why the last pass failed, if it did (cleared by a pass that succeeds).
    pub last_error: Option<String>,
}
