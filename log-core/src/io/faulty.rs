//! Test-only storage fakes (feature `test-util`): a [`FaultyStorage`] over the real file system
//! that injects the [`Faults`] a test sets — a full disk that tears the write crossing it, and
//! failing fsyncs.

use std::fs::File;
use std::io::{self, IoSlice};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use super::{open_append, write_all_vectored, Storage, StoredFile};

/// Faults to inject, shared between a test and the [`FaultyStorage`] it hands to log-core.
#[derive(Debug, Default)]
pub struct Faults {
    state: Mutex<FaultState>,
}

#[derive(Debug, Default)]
struct FaultState {
    fail_syncs: bool,
    /// Bytes that may still be written; the write that crosses the limit is torn there and
    /// fails with `StorageFull`, as on a full disk.
    write_budget: Option<u64>,
}

impl Faults {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// From now on every `sync_data` fails with an I/O error (or succeeds again with `false`).
    pub fn fail_syncs(&self, fail: bool) {
        self.lock().fail_syncs = fail;
    }

    /// Lets only `bytes` more bytes be written across all files (`None`: no limit).
    pub fn limit_writes(&self, bytes: Option<u64>) {
        self.lock().write_budget = bytes;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A [`Storage`] over the real file system that injects the [`Faults`] it shares with a test.
#[derive(Debug, Clone)]
pub struct FaultyStorage {
    faults: Arc<Faults>,
}

impl FaultyStorage {
    pub fn new(faults: Arc<Faults>) -> Self {
        FaultyStorage { faults }
    }
}

impl Storage for FaultyStorage {
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StoredFile>> {
        Ok(Arc::new(FaultyFile {
            file: open_append(path)?,
            faults: self.faults.clone(),
        }))
    }
}

#[derive(Debug)]
struct FaultyFile {
    file: File,
    faults: Arc<Faults>,
}

impl StoredFile for FaultyFile {
    fn file(&self) -> &File {
        &self.file
    }

    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        let allowed = {
            let mut state = self.faults.lock();
            match state.write_budget {
                None => total,
                Some(budget) => {
                    let allowed = budget.min(total);
                    state.write_budget = Some(budget - allowed);
                    allowed
                }
            }
        };
        if allowed == total {
            return write_all_vectored(&self.file, bufs);
        }
        // Tear the write: the first `allowed` bytes reach the file, then the disk is "full".
        let mut left = allowed as usize;
        let mut prefix = Vec::new();
        for buf in bufs {
            let take = left.min(buf.len());
            prefix.push(IoSlice::new(&buf[..take]));
            left -= take;
        }
        write_all_vectored(&self.file, &prefix)?;
        Err(io::Error::new(
            io::ErrorKind::StorageFull,
            "No space left on device (injected)",
        ))
    }

    fn sync_data(&self) -> io::Result<()> {
        if self.faults.lock().fail_syncs {
            return Err(io::Error::other("fsync failed (injected)"));
        }
        self.file.sync_data()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
}
