//! The I/O seam under the segment writer.
//!
//! Every write and fsync log-core makes goes through [`Storage`] and [`StoredFile`], so tests can
//! swap [`FileStorage`] for a fake (`FaultyStorage`, with the `test-util` feature) and simulate a
//! full disk, a torn write or a failed fsync. Reads go through memory maps of
//! [`StoredFile::file`].

#[cfg(any(test, feature = "test-util"))]
mod faulty;
#[cfg(any(test, feature = "test-util"))]
pub use faulty::{Faults, FaultyStorage};

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::path::Path;
use std::sync::Arc;

/// Opens files for log-core.
pub trait Storage: Send + Sync + Debug {
    /// Opens `path` for reading and appending, creating it if missing.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StoredFile>>;

    /// Renames `from` to `to`, replacing `to` (the log cleaner's swap of a cleaned segment).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    /// Removes the file `path`; one already gone is no error.
    fn remove(&self, path: &Path) -> io::Result<()> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
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

pub(crate) fn open_append(path: &Path) -> io::Result<File> {
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
pub(crate) fn write_all_vectored(mut file: &File, bufs: &[IoSlice<'_>]) -> io::Result<()> {
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

/// Creates the directory `path` and its missing parents so that they survive a power cut: each
/// directory created, and the parent it was created in, fsynced.
pub fn create_dir_durably(path: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = path;
    while !at.is_dir() {
        missing.push(at);
        match at.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => at = parent,
            _ => break,
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(path)?;
    for dir in missing.iter().rev() {
        sync_dir(dir)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

/// `fsync` on a directory, so that files created or removed in it survive a crash.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// A file of one offset (a version byte, then a big-endian i64), or `None` when there is none.
pub(crate) fn read_offset_file(
    dir: &Path,
    name: &str,
    version: u8,
) -> Result<Option<i64>, crate::OpenError> {
    use crate::{FileError, OpenError};
    let path = dir.join(name);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(FileError::new("read", path, e).into()),
    };
    match bytes.as_slice() {
        [v, offset @ ..] if *v == version && offset.len() == 8 => {
            let mut be = [0u8; 8];
            be.copy_from_slice(offset);
            Ok(Some(i64::from_be_bytes(be).max(0)))
        }
        _ => Err(OpenError::Corrupt {
            path,
            reason: format!(
                "expected version {version} and an 8-byte offset, found {} bytes",
                bytes.len()
            ),
        }),
    }
}

/// Writes [`read_offset_file`]'s format as [`replace_file`] does, through `storage`.
pub(crate) fn write_offset_file(
    storage: &dyn Storage,
    dir: &Path,
    name: &str,
    version: u8,
    offset: i64,
) -> Result<(), crate::FileError> {
    let mut bytes = Vec::with_capacity(9);
    bytes.push(version);
    bytes.extend_from_slice(&offset.to_be_bytes());
    replace_file_with(storage, dir, name, &bytes)
}

/// Prefix of [`replace_file`]'s temporary files; one left by a crash is removed when the data
/// dir opens.
pub(crate) const REPLACE_TMP_PREFIX: &str = ".replace-";

/// Replaces `dir/name` with `bytes` so that a crash leaves the old file or the new one, never a
/// torn one: written to a temporary file and fsynced, renamed over `name`, the directory
/// fsynced. The temporary name is short (`.replace-<n>.tmp`), so `name` may be as long as the
/// file system allows.
pub fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), crate::FileError> {
    replace_file_with(&FileStorage, dir, name, bytes)
}

/// [`replace_file`] for a file holding secrets: the temporary file is created anew with mode
/// 0600 (on Unix), so no byte of it is ever readable by another user, and `dir/name` takes that
/// mode with the rename.
pub fn replace_private_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), crate::FileError> {
    replace_file_with(&PrivateStorage, dir, name, bytes)
}

/// Opens new files with mode 0600, replacing any left by a crash (whose mode it cannot trust).
#[derive(Debug)]
struct PrivateStorage;

impl Storage for PrivateStorage {
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StoredFile>> {
        self.remove(path)?;
        let mut options = OpenOptions::new();
        options.read(true).append(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        Ok(Arc::new(PlainFile(options.open(path)?)))
    }
}

/// [`replace_file`] through `storage`.
pub(crate) fn replace_file_with(
    storage: &dyn Storage,
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> Result<(), crate::FileError> {
    use crate::FileError;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(name);
    let tmp = dir.join(format!("{REPLACE_TMP_PREFIX}{n}.tmp"));
    let write = || -> io::Result<()> {
        let file = storage.open(&tmp)?;
        file.set_len(0)?;
        file.append(&[IoSlice::new(bytes)])?;
        file.sync_data()
    };
    write().map_err(|e| FileError::new("write", &tmp, e))?;
    storage
        .rename(&tmp, &path)
        .map_err(|e| FileError::new("rename", &path, e))?;
    sync_dir(dir).map_err(|e| FileError::new("fsync", dir, e))
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_private_file_is_created_0600_even_over_a_readable_one_a_crash_left() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join(".replace-7.tmp");
        std::fs::write(&stale, b"old").unwrap();
        std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o644)).unwrap();
        let file = PrivateStorage.open(&stale).unwrap();
        file.append(&[IoSlice::new(b"secret")]).unwrap();
        let mode = std::fs::metadata(&stale).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read(&stale).unwrap(), b"secret");

        replace_private_file(dir.path(), "secrets", b"s").unwrap();
        let mode = std::fs::metadata(dir.path().join("secrets"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
