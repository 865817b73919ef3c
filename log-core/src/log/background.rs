//! The log's background threads: the flusher (`flush.ms`), the scrubber and the cleaner.

use std::path::Path;
use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::Shared;
use crate::cleaner::{self, CleanerOptions};
use crate::error::FileError;
use crate::partition::Partition;
use crate::scrub::{self, ScrubOptions};

/// Starts the background threads over `shared`; `unclean`: the data dir was not shut down
/// cleanly (the scrubber makes a pass at once); `dir` names the data dir in errors.
pub(super) fn spawn(
    shared: &Arc<Shared>,
    scrub: ScrubOptions,
    cleaner: CleanerOptions,
    unclean: bool,
    dir: &Path,
) -> Result<Vec<JoinHandle<()>>, FileError> {
    let flusher = {
        let shared = Arc::clone(shared);
        std::thread::Builder::new()
            .name("lograil-flusher".into())
            .spawn(move || shared.run_flusher())
            .map_err(|e| FileError::new("start the flusher for", dir, e))?
    };
    let scrubber = {
        let shared = Arc::clone(shared);
        std::thread::Builder::new()
            .name("lograil-scrubber".into())
            .spawn(move || {
                let partitions = || shared.partitions();
                scrub::run(scrub, &shared.scrub_stats, unclean, partitions, |d| {
                    shared.wait(d)
                })
            })
            .map_err(|e| FileError::new("start the scrubber for", dir, e))?
    };
    let cleaner = match cleaner.enabled {
        false => None,
        true => {
            let shared = Arc::clone(shared);
            let thread = std::thread::Builder::new()
                .name("lograil-cleaner".into())
                .spawn(move || cleaner::run(cleaner, || shared.partitions(), |d| shared.wait(d)))
                .map_err(|e| FileError::new("start the log cleaner for", dir, e))?;
            Some(thread)
        }
    };
    Ok([Some(flusher), Some(scrubber), cleaner]
        .into_iter()
        .flatten()
        .collect())
}

impl Shared {
    /// Background fsync of what was written under `flush.ms` (see `Partition::flush_if_due`).
    fn run_flusher(&self) {
        let mut stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
        while !*stop {
            let partitions: Vec<Arc<Partition>> = self
                .topics_read()
                .values()
                .flat_map(|t| t.partitions.iter().cloned())
                .collect();
            // A quarter of the shortest `flush.ms`: data is fsynced at most about 1.25 times
            // its `flush.ms` after it was written (plus the pass's own fsyncs).
            let tick = partitions
                .iter()
                .filter_map(|p| p.flush_interval())
                .min()
                .map_or(Duration::from_secs(1), |d| {
                    (d / 4).clamp(Duration::from_millis(1), Duration::from_secs(1))
                });
            drop(stop);
            for partition in &partitions {
                if let Err(e) = partition.flush_if_due() {
                    tracing::error!(partition = partition.name(), error = %e, "background flush failed");
                }
            }
            stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
            if !*stop {
                stop = self
                    .wake
                    .wait_timeout(stop, tick)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
    }
}
