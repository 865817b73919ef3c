//! The I/O seam under the segment writer.
//!
//! Every write and fsync log-core makes goes through [`Storage`] and [`StoredFile`], so tests can
//! swap [`FileStorage`] for [`FaultyStorage`] and simulate a full disk, a torn write or a failed
//! fsync. Reads go through memory maps of [`StoredFile::file`].

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

/// Opens files for log-core.
pub trait Storage: Send + Sync + Debug {
    /// Opens `path` for reading and appending, creating it if missing.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StoredFile>>;
}

/// One open file: appended to, synced, truncated.
pub trait StoredFile: Send + Sync + Debug {
    /// The underlying file, for memory maps and metadata.
    fn file(&self) -> &File;
    /// Appends all of `bufs` at the end of the file, or fails (possibly after writing a prefix:
    /// the caller truncates back).
    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<()>;
    /// `fdatasync`.
    fn sync_data(&self) -> io::Result<()>;
    /// Truncates or extends the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileStorage;

impl Storage for FileStorage {
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StoredFile>> {
        Ok(Arc::new(PlainFile(open_append(path)?)))
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
}

#[derive(Debug)]
struct PlainFile(File);

impl StoredFile for PlainFile {
    fn file(&self) -> &File {
        &self.0
    }

    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        write_all_vectored(&self.0, bufs)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
}

/// `writev` until everything is written (std's `write_all_vectored` is unstable).
fn write_all_vectored(mut file: &File, bufs: &[IoSlice<'_>]) -> io::Result<()> {
    let mut owned: Vec<IoSlice<'_>> = bufs.iter().filter(|b| !b.is_empty()).copied().collect();
    let mut bufs = &mut owned[..];
    while !bufs.is_empty() {
        match file.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

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

/// `fsync` on a directory, so that files created or removed in it survive a crash.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}
