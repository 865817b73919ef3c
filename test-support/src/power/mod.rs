//! A file system that loses power: an in-memory FUSE file system that keeps, beside what
//! processes see, what a disk would still hold after a power cut, and can cut the power.
//!
//! What survives a cut is what was made durable, by POSIX's strict reading (LazyFS's idea,
//! applied to directories too):
//! - a file's bytes (and length) as of its last `fsync` or `fdatasync`; a file never synced is
//!   empty;
//! - a directory's entries (creations, removals, renames in it) as of its last `fsync`; a
//!   directory never synced is empty, and the mount point's root too.
//!
//! [`PowerCutFs::cut`] unmounts (every process with files open on it must be gone: kill -9
//! them first), keeps only the durable state, and mounts it again: a fresh mount, so no page
//! cache of the kernel's carries anything over.

mod state;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
pub use state::Syncs;
use state::{perm, Node, State};

/// The FUSE side: every request answered from the shared state, with no caching by the
/// kernel of attributes or entries (a cut changes them behind its back); each file fsync
/// takes at least the shared delay (microseconds), as a busy disk's would.
#[derive(Debug)]
struct Fs(Arc<Mutex<State>>, Arc<AtomicU64>);

const NO_CACHE: Duration = Duration::ZERO;

impl Fs {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn reply_entry(result: Result<FileAttr, Errno>, reply: ReplyEntry) {
    match result {
        Ok(attr) => reply.entry(&NO_CACHE, &attr, Generation(0)),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(result: Result<(), Errno>, reply: ReplyEmpty) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for Fs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut state = self.state();
        let result = state
            .lookup(parent.into(), name)
            .and_then(|ino| state.attr(ino).ok_or(Errno::ENOENT));
        reply_entry(result, reply);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.state().attr(ino.into()) {
            Some(attr) => reply.attr(&NO_CACHE, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut state = self.state();
        let ino = u64::from(ino);
        let Some(node) = state.nodes.get_mut(&ino) else {
            return reply.error(Errno::ENOENT);
        };
        match node {
            Node::File {
                data, perm, mtime, ..
            } => {
                if let Some(size) = size {
                    data.resize(size as usize, 0);
                    *mtime = SystemTime::now();
                }
                if let Some(mode) = mode {
                    *perm = (mode & 0o7777) as u16;
                }
            }
            Node::Dir { perm, .. } => {
                if let Some(mode) = mode {
                    *perm = (mode & 0o7777) as u16;
                }
            }
        }
        match state.attr(ino) {
            Some(attr) => reply.attr(&NO_CACHE, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let node = Node::new_file(mode, umask);
        reply_entry(self.state().add(parent.into(), name, node), reply);
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let node = Node::Dir {
            entries: BTreeMap::new(),
            durable: BTreeMap::new(),
            perm: perm(mode, umask),
        };
        reply_entry(self.state().add(parent.into(), name, node), reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(self.state().remove(parent.into(), name, false), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(self.state().remove(parent.into(), name, true), reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let result = self
            .state()
            .rename((parent.into(), name), (newparent.into(), newname));
        reply_empty(result, reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.state().file(ino.into()) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut state = self.state();
        match state.file(ino.into()) {
            Ok((data, _)) => {
                let start = (offset as usize).min(data.len());
                let end = start.saturating_add(size as usize).min(data.len());
                reply.data(&data[start..end]);
            }
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        bytes: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut state = self.state();
        let ino = u64::from(ino);
        match state.file(ino) {
            Ok((data, _)) => {
                let at = if flags.0 & libc::O_APPEND != 0 {
                    data.len()
                } else {
                    offset as usize
                };
                if data.len() < at + bytes.len() {
                    data.resize(at + bytes.len(), 0);
                }
                data[at..at + bytes.len()].copy_from_slice(bytes);
                if let Some(Node::File { mtime, .. }) = state.nodes.get_mut(&ino) {
                    *mtime = SystemTime::now();
                }
                reply.written(bytes.len() as u32);
            }
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let delay = self.1.load(Ordering::Relaxed);
        if delay > 0 {
            std::thread::sleep(Duration::from_micros(delay));
        }
        reply_empty(self.state().sync(ino.into()), reply);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut state = self.state();
        let ino = u64::from(ino);
        let entries: Vec<(u64, OsString)> = match state.entries(ino) {
            Ok(entries) => entries.iter().map(|(n, i)| (*i, n.clone())).collect(),
            Err(e) => return reply.error(e),
        };
        let dots = [(ino, OsString::from(".")), (ino, OsString::from(".."))];
        let all = dots.into_iter().chain(entries);
        for (i, (child, name)) in all.enumerate().skip(offset as usize) {
            let kind = match state.nodes.get(&child) {
                Some(Node::Dir { .. }) => FileType::Directory,
                _ => FileType::RegularFile,
            };
            if reply.add(INodeNo(child), (i + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(self.state().sync(ino.into()), reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // 64 GiB in 4 KiB blocks, nearly all free: memory is the real bound.
        reply.statfs(1 << 24, 1 << 24, 1 << 24, 1 << 20, 1 << 20, 4096, 255, 4096);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let node = Node::new_file(mode, umask);
        match self.state().add(parent.into(), name, node) {
            Ok(attr) => reply.created(
                &NO_CACHE,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e),
        }
    }
}

/// A mounted [`Fs`] that can lose power; unmounted when dropped.
#[derive(Debug)]
pub struct PowerCutFs {
    mountpoint: PathBuf,
    state: Arc<Mutex<State>>,
    fsync_delay: Arc<AtomicU64>,
    session: Option<fuser::BackgroundSession>,
}

impl PowerCutFs {
    /// Mounts an empty file system at `mountpoint` (an existing, empty directory). Needs root
    /// (or fusermount) and `/dev/fuse`.
    pub fn mount(mountpoint: &Path) -> io::Result<PowerCutFs> {
        let mut fs = PowerCutFs {
            mountpoint: mountpoint.to_path_buf(),
            state: Arc::new(Mutex::new(State::new())),
            fsync_delay: Arc::new(AtomicU64::new(0)),
            session: None,
        };
        fs.session = Some(fs.spawn()?);
        Ok(fs)
    }

    fn spawn(&self) -> io::Result<fuser::BackgroundSession> {
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName("lograil-powercut".into()),
            fuser::MountOption::DefaultPermissions,
        ];
        fuser::spawn_mount(
            Fs(self.state.clone(), self.fsync_delay.clone()),
            &self.mountpoint,
            &config,
        )
    }

    /// Cuts the power: unmounts, drops everything not durable, mounts what is left. Kill
    /// every process with a file open here first (an unmount waits for none).
    pub fn cut(&mut self) -> io::Result<Syncs> {
        if let Some(session) = self.session.take() {
            match session.umount_and_join() {
                // A reply the kernel no longer takes (a dead process's last release, answered
                // as the unmount aborts the connection) ends the session as the unmount does.
                Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => {}
                result => result?,
            }
        }
        let syncs = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.cut();
            state.syncs
        };
        self.session = Some(self.spawn()?);
        Ok(syncs)
    }

    /// Makes each file fsync from now on take at least `delay` (the file system answers
    /// nothing else meanwhile, as a disk busy with it).
    pub fn set_fsync_delay(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.fsync_delay.store(micros, Ordering::Relaxed);
    }

    /// The syncs seen so far, and the bytes the last cut lost.
    pub fn syncs(&self) -> Syncs {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .syncs
    }
}

impl Drop for PowerCutFs {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            let _ = session.umount_and_join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_keeps_what_was_synced_and_drops_the_rest() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let mut fs = PowerCutFs::mount(dir.path()).expect("FUSE (/dev/fuse, as root)");
        let root = dir.path();
        std::fs::create_dir(root.join("d")).unwrap();
        let mut synced = std::fs::File::create(root.join("d/synced")).unwrap();
        synced.write_all(b"kept").unwrap();
        synced.sync_data().unwrap();
        synced.write_all(b" lost").unwrap();
        std::fs::write(root.join("d/unsynced"), b"lost").unwrap();
        std::fs::File::open(root.join("d"))
            .unwrap()
            .sync_all()
            .unwrap();
        std::fs::File::open(root).unwrap().sync_all().unwrap();
        std::fs::write(root.join("d/late"), b"lost").unwrap();
        std::fs::create_dir(root.join("never-synced-parent")).unwrap();
        drop(synced);

        let syncs = fs.cut().unwrap();
        assert!(syncs.bytes_lost > 0, "{syncs:?}");
        assert_eq!(std::fs::read(root.join("d/synced")).unwrap(), b"kept");
        assert_eq!(std::fs::read(root.join("d/unsynced")).unwrap(), b"");
        assert!(!root.join("d/late").exists());
        assert!(!root.join("never-synced-parent").exists());

        // A rename is durable once its directory is synced, and only then.
        std::fs::write(root.join("d/tmp"), b"new").unwrap();
        std::fs::File::open(root.join("d/tmp"))
            .unwrap()
            .sync_all()
            .unwrap();
        std::fs::File::open(root.join("d"))
            .unwrap()
            .sync_all()
            .unwrap();
        std::fs::rename(root.join("d/tmp"), root.join("d/synced")).unwrap();
        fs.cut().unwrap();
        assert_eq!(std::fs::read(root.join("d/synced")).unwrap(), b"kept");
        assert_eq!(std::fs::read(root.join("d/tmp")).unwrap(), b"new");
        std::fs::rename(root.join("d/tmp"), root.join("d/synced")).unwrap();
        std::fs::File::open(root.join("d"))
            .unwrap()
            .sync_all()
            .unwrap();
        fs.cut().unwrap();
        assert_eq!(std::fs::read(root.join("d/synced")).unwrap(), b"new");
        assert!(!root.join("d/tmp").exists());
    }
}
