//! Times every fsync log-core makes, through its storage seam: the broker wraps whatever
//! [`Storage`] its log was configured with (the real file system, or a test's fake), so the
//! fsync latency histogram sees the fsyncs producers wait for (`flush.messages=1`), the
//! background `flush.ms` ones and those of segment rolls and internal topics alike, without
//! log-core knowing about metrics.

use std::fs::File;
use std::io::{self, IoSlice};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use log_core::io::{Storage, StoredFile};

use super::Metrics;

/// A [`Storage`] whose files time their `sync_data` into [`Metrics::fsynced`].
#[derive(Debug)]
pub struct TimedStorage {
    inner: Arc<dyn Storage>,
    metrics: Arc<Metrics>,
}

impl TimedStorage {
    /// Wraps `inner`, timing its files' fsyncs into `metrics`; every other call passes through.
    pub fn new(inner: Arc<dyn Storage>, metrics: Arc<Metrics>) -> TimedStorage {
        TimedStorage { inner, metrics }
    }
}

impl Storage for TimedStorage {
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StoredFile>> {
        Ok(Arc::new(TimedFile {
            inner: self.inner.open(path)?,
            metrics: self.metrics.clone(),
        }))
    }
}

#[derive(Debug)]
struct TimedFile {
    inner: Arc<dyn StoredFile>,
    metrics: Arc<Metrics>,
}

impl StoredFile for TimedFile {
    fn file(&self) -> &File {
        self.inner.file()
    }

    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        self.inner.append(bufs)
    }

    fn sync_data(&self) -> io::Result<()> {
        let started = Instant::now();
        let result = self.inner.sync_data();
        self.metrics.fsynced(started.elapsed());
        result
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
}
