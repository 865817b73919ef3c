//! What a partition's cleaner has done: kept by the partition, which owns it, and read by
//! `/metrics` and `topic describe`.

/// What a partition's cleaner has done since it opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanerStats {
    /// Passes that cleaned something.
    pub runs: u64,
    /// Bytes of segments the passes rewrote.
    pub bytes_read: u64,
    /// Bytes of cleaned segments they wrote.
    pub bytes_written: u64,
    /// Records the passes dropped.
    pub records_removed: u64,
    /// When the last pass ended (ms since the epoch).
    pub last_run_ms: Option<i64>,
    /// Why the last pass failed, if it did (cleared by a pass that succeeds).
    pub last_error: Option<String>,
}
