//! The idempotent-consumer helper: a ledger of the idempotency keys whose work is done, so a
//! record delivered again (its lock ran out after the work, its acknowledgement was lost, a
//! producer sent it twice) is acknowledged without doing the work twice.
//!
//! The ledger is a file of `<expiry ms> <key in hex>` lines, appended on every completion and
//! rewritten whole (temporary file, then rename) when it holds more than twice the live keys.
//! A key counts for `ttl` after its completion; at most `max_keys` are kept, the ones expiring
//! first are forgotten beyond that. A torn last line (a crash mid-append) is skipped on open.
//! The ledger is local to one worker's file: workers on other machines have their own.

use std::collections::{BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Delivery;
use crate::util::now_ms;

/// Completed idempotency keys with a time to live, kept in a file (see the module docs).
#[derive(Debug)]
pub struct IdempotencyLedger {
    path: PathBuf,
    ttl_ms: i64,
    max_keys: usize,
    /// Key → when it expires (ms since the epoch).
    keys: HashMap<Vec<u8>, i64>,
    by_expiry: BTreeSet<(i64, Vec<u8>)>,
    file: BufWriter<File>,
    /// Lines in the file, live or not.
    lines: usize,
    sync: bool,
}

impl IdempotencyLedger {
    /// Opens (or creates) the ledger at `path`, keeping completions for `ttl` and at most
    /// `max_keys` of them.
    pub fn open(path: impl AsRef<Path>, ttl: Duration, max_keys: usize) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let mut ledger = IdempotencyLedger {
            file: BufWriter::new(open_append(&path)?),
            path,
            ttl_ms: i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX),
            max_keys: max_keys.max(1),
            keys: HashMap::new(),
            by_expiry: BTreeSet::new(),
            lines: 0,
            sync: false,
        };
        let now = now_ms();
        let bytes = std::fs::read(&ledger.path)?;
        // Only lines ended by a newline were written whole.
        let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let mut unreadable = usize::from(whole < bytes.len());
        for line in bytes[..whole]
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
        {
            match parse(line) {
                Some((expires, key)) if expires > now => ledger.insert(key, expires),
                Some(_) => {}
                None => unreadable += 1,
            }
        }
        if unreadable > 0 {
            tracing::warn!(path = %ledger.path.display(), lines = unreadable, "torn or unreadable ledger lines skipped");
        }
        ledger.compact()?;
        Ok(ledger)
    }

    /// Also fsync each completion (survives power loss, not only a crash of the process).
    pub fn with_sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// Whether the work for `key` was completed within its time to live.
    pub fn is_done(&self, key: &[u8]) -> bool {
        self.keys
            .get(key)
            .is_some_and(|expires| *expires > now_ms())
    }

    /// Records that the work for `key` is done; written before this returns.
    pub fn complete(&mut self, key: &[u8]) -> io::Result<()> {
        let expires = now_ms().saturating_add(self.ttl_ms);
        writeln!(self.file, "{expires} {}", hex(key))?;
        self.file.flush()?;
        if self.sync {
            self.file.get_ref().sync_data()?;
        }
        self.lines += 1;
        self.insert(key.to_vec(), expires);
        self.expire(now_ms());
        if self.lines > 2 * self.keys.len().max(1024) {
            self.compact()?;
        }
        Ok(())
    }

    /// Live keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it holds no live keys.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Acknowledges and drops the deliveries whose key (from `key_of`: a header, a field of the
    /// value, …) is already done; returns the others, whose work is to be done and then passed
    /// to [`IdempotencyLedger::complete`] before acknowledging.
    pub fn skip_done(
        &self,
        deliveries: Vec<Delivery>,
        key_of: impl Fn(&Delivery) -> Option<Vec<u8>>,
    ) -> Vec<Delivery> {
        deliveries
            .into_iter()
            .filter(|d| match key_of(d) {
                Some(key) if self.is_done(&key) => {
                    d.ack();
                    false
                }
                _ => true,
            })
            .collect()
    }

    fn insert(&mut self, key: Vec<u8>, expires: i64) {
        if let Some(old) = self.keys.insert(key.clone(), expires) {
            self.by_expiry.remove(&(old, key.clone()));
        }
        self.by_expiry.insert((expires, key));
        while self.keys.len() > self.max_keys {
            let Some((_, first)) = self.by_expiry.pop_first() else {
                break;
            };
            self.keys.remove(&first);
        }
    }

    fn expire(&mut self, now: i64) {
        while let Some((expires, _)) = self.by_expiry.first() {
            if *expires > now {
                break;
            }
            if let Some((_, key)) = self.by_expiry.pop_first() {
                self.keys.remove(&key);
            }
        }
    }

    /// Rewrites the file with the live keys only.
    fn compact(&mut self) -> io::Result<()> {
        let tmp = self.path.with_extension("compacting");
        {
            let mut out = BufWriter::new(File::create(&tmp)?);
            for (expires, key) in &self.by_expiry {
                writeln!(out, "{expires} {}", hex(key))?;
            }
            out.flush()?;
            out.get_ref().sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        self.file = BufWriter::new(open_append(&self.path)?);
        self.lines = self.keys.len();
        Ok(())
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse(line: &[u8]) -> Option<(i64, Vec<u8>)> {
    let line = std::str::from_utf8(line).ok()?;
    let (expires, key) = line.split_once(' ')?;
    if key.len() % 2 != 0 {
        return None;
    }
    let key = (0..key.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(key.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some((expires.parse().ok()?, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn completions_survive_a_reopen_and_a_torn_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger");
        let mut ledger = IdempotencyLedger::open(&path, DAY, 100).unwrap();
        ledger.complete(b"order-1").unwrap();
        ledger.complete(&[0, 255, 7]).unwrap();
        drop(ledger);
        // A crash in the middle of an append.
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"99999999999999 6f72").unwrap();
        drop(file);
        let ledger = IdempotencyLedger::open(&path, DAY, 100).unwrap();
        assert!(ledger.is_done(b"order-1"));
        assert!(ledger.is_done(&[0, 255, 7]));
        assert!(!ledger.is_done(b"order-2"));
        assert_eq!(ledger.len(), 2, "the torn line is not a key");
    }

    #[test]
    fn keys_expire_after_their_ttl_also_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger");
        // Long enough that the first check falls within it even on a loaded machine.
        let mut ledger = IdempotencyLedger::open(&path, Duration::from_secs(1), 100).unwrap();
        ledger.complete(b"short").unwrap();
        assert!(ledger.is_done(b"short"));
        std::thread::sleep(Duration::from_millis(1_100));
        assert!(!ledger.is_done(b"short"));
        drop(ledger);
        let ledger = IdempotencyLedger::open(&path, DAY, 100).unwrap();
        assert!(ledger.is_empty());
    }

    #[test]
    fn the_ledger_is_bounded_and_the_file_is_compacted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger");
        let mut ledger = IdempotencyLedger::open(&path, DAY, 10).unwrap();
        for i in 0..5000u32 {
            ledger.complete(&i.to_be_bytes()).unwrap();
        }
        assert_eq!(ledger.len(), 10);
        assert!(ledger.is_done(&4999u32.to_be_bytes()));
        assert!(
            !ledger.is_done(&0u32.to_be_bytes()),
            "the oldest are forgotten"
        );
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(
            lines <= 2 * 1024 + 1,
            "{lines} lines: the file is compacted"
        );
        drop(ledger);
        let ledger = IdempotencyLedger::open(&path, DAY, 10).unwrap();
        assert_eq!(ledger.len(), 10);
        assert!(ledger.is_done(&4990u32.to_be_bytes()));
    }
}
