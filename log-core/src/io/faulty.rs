//! Test-only storage fakes (feature `test-util`): a [`FaultyStorage`] over the real file system
//! that injects the [`Faults`] a test sets — a full disk that tears the write crossing it,
//! failing fsyncs, fsyncs held until the test releases them, and a power cut that loses
//! everything written since each file's last fsync.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::{open_append, write_all_vectored, Storage, StoredFile};

/// Faults to inject, shared between a test and the [`FaultyStorage`] it hands to log-core.
#[derive(Debug, Default)]
pub struct Faults {
    state: Mutex<FaultState>,
    released: Condvar,
}

#[derive(Debug, Default)]
struct FaultState {
    fail_syncs: bool,
    /// Every `sync_data` waits while this is set.
    hold_syncs: bool,
    /// `sync_data` calls that succeeded, and those waiting on `hold_syncs`.
    syncs: u64,
    held: u64,
    /// Bytes that may still be written; the write that crosses the limit is torn there and
    /// fails with `StorageFull`, as on a full disk.
    write_budget: Option<u64>,
    /// The power is off: writes, truncations and fsyncs reach nothing (but report success).
    off: bool,
    /// Each file's length at its last successful fsync: what a power cut leaves of it.
    synced_len: HashMap<PathBuf, u64>,
    /// Changes (appends, fsyncs, truncations, renames, removals) that may still reach the
    /// disk before the power goes off by itself (`None`: no cut planned).
    changes_before_cut: Option<u64>,
}

impl Faults {
    /// No fault planned, nothing failed yet.
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

    /// Makes every `sync_data` wait (`true`) until released (`false`).
    pub fn hold_syncs(&self, hold: bool) {
        self.lock().hold_syncs = hold;
        self.released.notify_all();
    }

    /// How many `sync_data` calls have succeeded.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// How many `sync_data` calls are waiting on [`Faults::hold_syncs`].
    pub fn held_syncs(&self) -> u64 {
        self.lock().held
    }

    /// Cuts the power: from now on nothing reaches the files, so the log can be dropped (its
    /// flush reaching nothing) before [`Faults::restore_power`].
    pub fn cut_power(&self) {
        self.lock().off = true;
    }

    /// Cuts the power by itself after `changes` more changes to files (appends, fsyncs,
    /// truncations, renames, removals): a crash at that point of whatever runs.
    pub fn cut_power_after(&self, changes: u64) {
        let mut state = self.lock();
        state.changes_before_cut = Some(changes);
        state.off |= changes == 0;
    }

    /// Whether the power is off (cut by hand or by [`Faults::cut_power_after`]).
    pub fn power_is_off(&self) -> bool {
        self.lock().off
    }

    /// What the disk holds after the power cut: every file written through this storage is cut
    /// back to its length at its last successful fsync (a file never synced is left empty).
    pub fn restore_power(&self) -> io::Result<()> {
        let mut state = self.lock();
        for (path, len) in &state.synced_len {
            match OpenOptions::new().write(true).open(path) {
                Ok(file) if file.metadata()?.len() > *len => file.set_len(*len)?,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        state.synced_len.clear();
        state.off = false;
        state.changes_before_cut = None;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one change to a file; false when the power is (now) off and it must not happen.
    fn change(&self) -> bool {
        let mut state = self.lock();
        if let Some(left) = state.changes_before_cut.as_mut() {
            if *left == 0 {
                state.off = true;
            } else {
                *left -= 1;
            }
        }
        !state.off
    }
}

/// A [`Storage`] over the real file system that injects the [`Faults`] it shares with a test.
#[derive(Debug, Clone)]
pub struct FaultyStorage {
    faults: Arc<Faults>,
}

impl FaultyStorage {
    /// Storage on the real file system that fails as `faults` says (shared with the test,
    /// which plans faults while the log runs).
    pub fn new(faults: Arc<Faults>) -> Self {
        FaultyStorage { faults }
    }
}

impl Storage for FaultyStorage {
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StoredFile>> {
        let file = open_append(path)?;
        let len = file.metadata()?.len();
        // A file that exists when first opened is on disk as it is (it predates the test's
        // writes through this storage).
        self.faults
            .lock()
            .synced_len
            .entry(path.to_path_buf())
            .or_insert(len);
        Ok(Arc::new(FaultyFile {
            path: path.to_path_buf(),
            file,
            faults: self.faults.clone(),
        }))
    }

    /// A rename is durable at once (as the directory fsync that follows it makes it).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if !self.faults.change() {
            return Ok(());
        }
        std::fs::rename(from, to)?;
        let mut state = self.faults.lock();
        if let Some(len) = state.synced_len.remove(from) {
            state.synced_len.insert(to.to_path_buf(), len);
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        if !self.faults.change() {
            return Ok(());
        }
        self.faults.lock().synced_len.remove(path);
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

#[derive(Debug)]
struct FaultyFile {
    path: PathBuf,
    file: File,
    faults: Arc<Faults>,
}

impl StoredFile for FaultyFile {
    fn file(&self) -> &File {
        &self.file
    }

    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        if !self.faults.change() {
            return Ok(());
        }
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
        let mut state = self.faults.lock();
        state.held += 1;
        while state.hold_syncs {
            state = self
                .faults
                .released
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.held -= 1;
        drop(state);
        let on = self.faults.change();
        let state = self.faults.lock();
        if state.fail_syncs {
            return Err(io::Error::other("fsync failed (injected)"));
        }
        if !on {
            return Ok(());
        }
        drop(state);
        // What this fsync makes durable: the length before it starts.
        let len = self.file.metadata()?.len();
        self.file.sync_data()?;
        let mut state = self.faults.lock();
        let synced = state.synced_len.entry(self.path.clone()).or_insert(0);
        *synced = len;
        state.syncs += 1;
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        if !self.faults.change() {
            return Ok(());
        }
        self.file.set_len(len)
    }
}
