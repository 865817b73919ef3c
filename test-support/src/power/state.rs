//! The power-cut file system's state: what processes see of each node beside what a disk would
//! hold after a cut (see [`super`]), and the cut itself.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::time::SystemTime;

use fuser::{Errno, FileAttr, FileType, INodeNo};

/// What processes see of a node, and what a cut leaves of it.
#[derive(Debug, Clone)]
pub(super) enum Node {
    File {
        data: Vec<u8>,
        durable: Vec<u8>,
        perm: u16,
        mtime: SystemTime,
    },
    Dir {
        entries: BTreeMap<OsString, u64>,
        durable: BTreeMap<OsString, u64>,
        perm: u16,
    },
}

/// How much syncing the file system saw, and what the last cut dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Syncs {
    /// fsync and fdatasync calls on files so far.
    pub file_syncs: u64,
    /// fsync calls on directories so far.
    pub dir_syncs: u64,
    /// Bytes of file contents the last cut dropped or rolled back.
    pub bytes_lost: u64,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// By inode number; nodes are kept until a cut (a durable entry may still name one
    /// that was removed).
    pub(super) nodes: HashMap<u64, Node>,
    next: u64,
    pub(super) syncs: Syncs,
}

impl State {
    pub(super) fn new() -> State {
        let root = Node::Dir {
            entries: BTreeMap::new(),
            durable: BTreeMap::new(),
            perm: 0o755,
        };
        State {
            nodes: HashMap::from([(u64::from(INodeNo::ROOT), root)]),
            next: u64::from(INodeNo::ROOT) + 1,
            syncs: Syncs::default(),
        }
    }

    /// Keeps what was durable: synced contents and entries, nodes reachable through them.
    pub(super) fn cut(&mut self) {
        let mut lost = 0u64;
        for node in self.nodes.values_mut() {
            match node {
                Node::File { data, durable, .. } => {
                    if data != durable {
                        lost += data.len().abs_diff(durable.len()).max(1) as u64;
                    }
                    *data = durable.clone();
                }
                Node::Dir {
                    entries, durable, ..
                } => *entries = durable.clone(),
            }
        }
        let mut reachable = vec![u64::from(INodeNo::ROOT)];
        let mut kept = HashMap::new();
        while let Some(ino) = reachable.pop() {
            if let Some(node) = self.nodes.remove(&ino) {
                if let Node::Dir { entries, .. } = &node {
                    reachable.extend(entries.values());
                }
                kept.insert(ino, node);
            }
        }
        self.nodes = kept;
        self.syncs.bytes_lost = lost;
    }

    pub(super) fn attr(&self, ino: u64) -> Option<FileAttr> {
        let (kind, size, perm, nlink, mtime) = match self.nodes.get(&ino)? {
            Node::File {
                data, perm, mtime, ..
            } => (FileType::RegularFile, data.len() as u64, *perm, 1, *mtime),
            Node::Dir { perm, .. } => (FileType::Directory, 0, *perm, 2, SystemTime::UNIX_EPOCH),
        };
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: mtime,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        })
    }

    pub(super) fn entries(&mut self, ino: u64) -> Result<&mut BTreeMap<OsString, u64>, Errno> {
        match self.nodes.get_mut(&ino) {
            Some(Node::Dir { entries, .. }) => Ok(entries),
            Some(Node::File { .. }) => Err(Errno::ENOTDIR),
            None => Err(Errno::ENOENT),
        }
    }

    pub(super) fn lookup(&mut self, parent: u64, name: &OsStr) -> Result<u64, Errno> {
        self.entries(parent)?
            .get(name)
            .copied()
            .ok_or(Errno::ENOENT)
    }

    pub(super) fn add(&mut self, parent: u64, name: &OsStr, node: Node) -> Result<FileAttr, Errno> {
        let ino = self.next;
        let entries = self.entries(parent)?;
        if entries.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        entries.insert(name.to_os_string(), ino);
        self.next += 1;
        self.nodes.insert(ino, node);
        self.attr(ino).ok_or(Errno::EIO)
    }

    pub(super) fn file(&mut self, ino: u64) -> Result<(&mut Vec<u8>, &mut Vec<u8>), Errno> {
        match self.nodes.get_mut(&ino) {
            Some(Node::File { data, durable, .. }) => Ok((data, durable)),
            Some(Node::Dir { .. }) => Err(Errno::EISDIR),
            None => Err(Errno::ENOENT),
        }
    }

    pub(super) fn remove(&mut self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?;
        match self.nodes.get(&ino) {
            Some(Node::Dir { entries, .. }) if dir && !entries.is_empty() => {
                return Err(Errno::ENOTEMPTY)
            }
            Some(Node::Dir { .. }) if !dir => return Err(Errno::EISDIR),
            Some(Node::File { .. }) if dir => return Err(Errno::ENOTDIR),
            _ => {}
        }
        self.entries(parent)?.remove(name);
        Ok(())
    }

    pub(super) fn rename(&mut self, from: (u64, &OsStr), to: (u64, &OsStr)) -> Result<(), Errno> {
        let ino = self.lookup(from.0, from.1)?;
        if let Ok(target) = self.lookup(to.0, to.1) {
            if let Some(Node::Dir { entries, .. }) = self.nodes.get(&target) {
                if !entries.is_empty() {
                    return Err(Errno::ENOTEMPTY);
                }
            }
        }
        self.entries(to.0)?;
        self.entries(from.0)?.remove(from.1);
        self.entries(to.0)?.insert(to.1.to_os_string(), ino);
        Ok(())
    }

    pub(super) fn sync(&mut self, ino: u64) -> Result<(), Errno> {
        match self.nodes.get_mut(&ino) {
            Some(Node::File { data, durable, .. }) => {
                durable.clone_from(data);
                self.syncs.file_syncs += 1;
            }
            Some(Node::Dir {
                entries, durable, ..
            }) => {
                durable.clone_from(entries);
                self.syncs.dir_syncs += 1;
            }
            None => return Err(Errno::ENOENT),
        }
        Ok(())
    }
}

pub(super) fn perm(mode: u32, umask: u32) -> u16 {
    (mode & !umask & 0o7777) as u16
}

impl Node {
    pub(super) fn new_file(mode: u32, umask: u32) -> Node {
        Node::File {
            data: Vec::new(),
            durable: Vec::new(),
            perm: perm(mode, umask),
            mtime: SystemTime::now(),
        }
    }
}
