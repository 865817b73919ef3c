//! Producer ids that are never reused, even across restarts.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use log_core::{ConfigError, FileError, OpenError};

use super::lock;

/// Hands out producer ids that are never reused, even across restarts: blocks of ids are
/// reserved in `<data-dir>/producer-ids` before any id of the block is handed out.
#[derive(Debug)]
pub struct ProducerIds {
    path: PathBuf,
    /// (next id to hand out, end of the reserved block)
    next: Mutex<(i64, i64)>,
    /// Every id below this may have been handed out (after a restart: every id reserved
    /// before). Read on each idempotent produce, without a lock.
    issued_below: AtomicI64,
}

const ID_BLOCK: i64 = 1000;
const IDS_FORMAT: &str = "# lograil producer ids, format 1";

impl ProducerIds {
    pub fn open(data_dir: &Path) -> Result<Self, OpenError> {
        let path = data_dir.join("producer-ids");
        let reserved = match fs::read_to_string(&path) {
            Ok(text) => text
                .lines()
                .find_map(|l| l.strip_prefix("reserved-up-to="))
                .and_then(|n| n.trim().parse::<i64>().ok())
                .filter(|n| *n >= 0)
                .ok_or_else(|| OpenError::BadConfig {
                    path: path.clone(),
                    source: ConfigError::Missing {
                        name: "reserved-up-to",
                    },
                })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(FileError::new("read", &path, e).into()),
        };
        Ok(ProducerIds {
            path,
            next: Mutex::new((reserved, reserved)),
            issued_below: AtomicI64::new(reserved),
        })
    }

    /// Whether this broker may have handed out `id`.
    pub fn issued(&self, id: i64) -> bool {
        (0..self.issued_below.load(Ordering::Acquire)).contains(&id)
    }

    /// A fresh producer id.
    pub fn allocate(&self) -> Result<i64, FileError> {
        let mut next = lock(&self.next);
        if next.0 >= next.1 {
            let reserved = next.1 + ID_BLOCK;
            let tmp = self.path.with_extension("tmp");
            let text = format!("{IDS_FORMAT}\nreserved-up-to={reserved}\n");
            let write = || -> std::io::Result<()> {
                fs::write(&tmp, &text)?;
                fs::File::open(&tmp)?.sync_all()?;
                fs::rename(&tmp, &self.path)?;
                log_core::io::sync_dir(self.path.parent().unwrap_or(Path::new(".")))
            };
            write().map_err(|e| FileError::new("write", &self.path, e))?;
            next.1 = reserved;
        }
        let id = next.0;
        next.0 += 1;
        self.issued_below.fetch_max(next.0, Ordering::AcqRel);
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ids_handed_out_count_as_issued() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIds::open(dir.path()).unwrap();
        assert!(!ids.issued(0));
        let a = ids.allocate().unwrap();
        assert!(ids.issued(a));
        assert!(!ids.issued(a + 1));
        assert!(!ids.issued(-1));
        drop(ids);
        // After a restart every id of the reserved block counts: any may have been handed out.
        let ids = ProducerIds::open(dir.path()).unwrap();
        assert!(ids.issued(a) && ids.issued(a + 1) && ids.issued(ID_BLOCK - 1));
        assert!(!ids.issued(ID_BLOCK));
    }

    #[test]
    fn producer_ids_are_not_reused_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIds::open(dir.path()).unwrap();
        let a = ids.allocate().unwrap();
        let b = ids.allocate().unwrap();
        assert_ne!(a, b);
        drop(ids);
        let ids = ProducerIds::open(dir.path()).unwrap();
        let c = ids.allocate().unwrap();
        assert!(c > b);
    }
}
