//! Transactions on the partition side: which producers have a transaction open here (from its
//! first transactional batch to its marker), which ended in an abort, and the last stable
//! offset (LSO) that `read_committed` readers stop at.
//!
//! The state follows the batch headers of every append (under the writer lock, before the
//! append becomes visible, so a reader that sees a batch also sees what it did to the state):
//! a transactional data batch opens its producer's transaction if none is open, remembering
//! its base offset; a control batch holding a transaction marker ([`record_batch::control`])
//! ends it: COMMIT drops it, ABORT records an [`AbortedTxn`] (producer, first offset, the
//! marker's offset). A marker for a producer with nothing open changes nothing (Kafka's
//! `CompletedTxn` is only emitted for non-empty transactions). Whether a producer may write
//! what it writes (epochs, a non-transactional batch while its transaction is open) is the
//! broker's check, made before it appends.
//!
//! **LSO** = the smallest first offset of the open transactions (and of those whose marker is
//! written but not yet visible, under durability `always`), at least the log start offset,
//! else the high watermark ([`Partition::log_end_offset`]).
//!
//! **Persistence.** A partition that never held a transactional batch has no file and costs
//! nothing: no lock, no walk. The first transactional batch appended creates
//! `<partition dir>/transactions` (empty state, as of that batch's offset; written and fsynced
//! before the batch is); from then on the file holds the state as of an offset `at`: the open
//! transactions and the aborted ones still in the log. It is rewritten (atomically: temporary
//! file, fsync, rename) when a segment rolls (as of the new segment's base; the old segment is
//! fsynced first), on a clean close (as of the log end, after the flush), and at open when it
//! lagged the active segment. At open the file is read and the batch headers from `at` to the
//! log end walked (the active segment at most, which recovery walked anyway; nothing after a
//! clean shutdown), so a transaction open at a crash is open again, and the aborted list is
//! exactly what it was. A file that does not parse, or whose `at` is past the recovered log
//! end, is rebuilt by walking the whole partition (logged). Retention, DeleteRecords and the
//! log start moving drop the aborted transactions wholly below the log start; retention never
//! deletes a segment at or past `at` (normally the active segment's base: no restriction).
//! Memory and file: 16 bytes per open transaction, 24 per aborted one still in the log.
//!
//! File format: version byte 1, `at` (i64), the open count (u32) then (producer id i64, first
//! offset i64) each, the aborted count (u32) then (producer id, first offset, last offset)
//! each; big-endian; its length must match exactly.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;

use record_batch::{BatchHeader, ControlType};

use super::{lock, Partition};
use crate::error::{FileError, OpenError, ReadError};
use crate::io;

const FILE: &str = "transactions";
const VERSION: u8 = 1;

/// A transaction that ended in an abort: the records of `producer_id` from `first_offset` to
/// the marker at `last_offset` are not committed. What Kafka's Fetch returns as
/// `aborted_transactions` (producer id, first offset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    /// The transactional producer.
    pub producer_id: i64,
    /// Its first batch of the transaction.
    pub first_offset: i64,
    /// The abort marker's offset.
    pub last_offset: i64,
}

/// A transaction open on this partition: `producer_id`'s first transactional batch since its
/// last marker is at `first_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpenTxn {
    /// The transactional producer.
    pub producer_id: i64,
    /// Its first batch of the transaction: the last stable offset is at most this.
    pub first_offset: i64,
}

/// One partition's transaction state (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct Transactions {
    /// The state file exists (the partition holds or held a transactional batch).
    tracked: bool,
    /// The offset the file's state is as of.
    file_at: i64,
    /// Open transactions: producer id → first offset.
    open: HashMap<i64, i64>,
    /// Ended transactions whose marker may not be visible yet, oldest first: (first offset,
    /// marker offset). Dropped once the high watermark passes the marker.
    ending: VecDeque<(i64, i64)>,
    /// Aborted transactions, by marker offset.
    aborted: VecDeque<AbortedTxn>,
}

impl Transactions {
    /// What one appended batch (its header with the offset the log gave it) does; `marker` is
    /// the marker a control batch holds.
    pub(crate) fn apply(&mut self, header: &BatchHeader, marker: Option<ControlType>) {
        if !header.is_transactional() || header.producer_id < 0 {
            return;
        }
        let producer_id = header.producer_id;
        if !header.is_control() {
            self.open.entry(producer_id).or_insert(header.base_offset);
            return;
        }
        let Some(kind) = marker else {
            return;
        };
        let Some(first_offset) = self.open.remove(&producer_id) else {
            return;
        };
        self.ending.push_back((first_offset, header.base_offset));
        if kind == ControlType::Abort {
            self.aborted.push_back(AbortedTxn {
                producer_id,
                first_offset,
                last_offset: header.base_offset,
            });
        }
    }

    /// The LSO when readers see up to `high_watermark` and the log starts at `log_start`.
    fn last_stable_offset(&mut self, high_watermark: i64, log_start: i64) -> i64 {
        while self
            .ending
            .front()
            .is_some_and(|(_, marker)| *marker < high_watermark)
        {
            self.ending.pop_front();
        }
        let first_unstable = self
            .open
            .values()
            .copied()
            .chain(self.ending.iter().map(|(first, _)| *first))
            .min();
        match first_unstable {
            Some(first) => first.max(log_start).min(high_watermark),
            None => high_watermark,
        }
    }

    /// Forgets aborted transactions whose marker is below `log_start` (their records are gone).
    fn drop_below(&mut self, log_start: i64) {
        while self
            .aborted
            .front()
            .is_some_and(|a| a.last_offset < log_start)
        {
            self.aborted.pop_front();
        }
    }

    fn encode(&self, at: i64) -> Vec<u8> {
        let mut out = Vec::with_capacity(17 + self.open.len() * 16 + self.aborted.len() * 24);
        out.push(VERSION);
        out.extend_from_slice(&at.to_be_bytes());
        let mut open: Vec<(i64, i64)> = self.open.iter().map(|(p, f)| (*p, *f)).collect();
        open.sort_unstable();
        out.extend_from_slice(&(open.len() as u32).to_be_bytes());
        for (producer_id, first) in open {
            out.extend_from_slice(&producer_id.to_be_bytes());
            out.extend_from_slice(&first.to_be_bytes());
        }
        out.extend_from_slice(&(self.aborted.len() as u32).to_be_bytes());
        for a in &self.aborted {
            out.extend_from_slice(&a.producer_id.to_be_bytes());
            out.extend_from_slice(&a.first_offset.to_be_bytes());
            out.extend_from_slice(&a.last_offset.to_be_bytes());
        }
        out
    }

    /// The state a file holds, and the offset it is as of; `None` if it does not parse.
    fn decode(bytes: &[u8]) -> Option<(i64, Transactions)> {
        let mut reader = Reader(bytes);
        if reader.take::<1>()?[0] != VERSION {
            return None;
        }
        let at = i64::from_be_bytes(reader.take()?);
        let mut state = Transactions {
            tracked: true,
            file_at: at,
            ..Transactions::default()
        };
        let open = u32::from_be_bytes(reader.take()?);
        for _ in 0..open {
            let producer_id = i64::from_be_bytes(reader.take()?);
            state
                .open
                .insert(producer_id, i64::from_be_bytes(reader.take()?));
        }
        let aborted = u32::from_be_bytes(reader.take()?);
        for _ in 0..aborted {
            state.aborted.push_back(AbortedTxn {
                producer_id: i64::from_be_bytes(reader.take()?),
                first_offset: i64::from_be_bytes(reader.take()?),
                last_offset: i64::from_be_bytes(reader.take()?),
            });
        }
        reader.0.is_empty().then_some((at, state))
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_at_checked(N)?;
        self.0 = rest;
        head.try_into().ok()
    }
}

/// The marker each of `headers`' control batches holds (`None` for data batches), reading
/// `records` (the whole batches `headers` are of).
pub(crate) fn markers(records: &[u8], headers: &[BatchHeader]) -> Vec<Option<ControlType>> {
    let mut at = 0usize;
    headers
        .iter()
        .map(|h| {
            let batch = records.get(at..at + h.size as usize).unwrap_or(&[]);
            at += h.size as usize;
            if h.is_control() {
                record_batch::control_type(batch)
            } else {
                None
            }
        })
        .collect()
}

impl Partition {
    /// The last stable offset: where `read_committed` readers stop (see the module doc). The
    /// high watermark on a partition without open transactions.
    pub fn last_stable_offset(&self) -> i64 {
        if !self.transactional.load(Ordering::Acquire) {
            return self.log_end_offset();
        }
        let mut txns = lock(&self.txns);
        // The high watermark is read under the lock: an append changes the state before it
        // moves the log end (see `append_unsynced`).
        let high_watermark = self.log_end_offset();
        txns.last_stable_offset(high_watermark, self.log_start_offset())
    }

    /// The aborted transactions whose records overlap `[from, to)`, by marker offset: what a
    /// Fetch of those offsets returns (a `read_committed` client drops their producers'
    /// records from each first offset up to its abort marker).
    pub fn aborted_transactions(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        if !self.transactional.load(Ordering::Acquire) {
            return Vec::new();
        }
        let txns = lock(&self.txns);
        let start = txns.aborted.partition_point(|a| a.last_offset < from);
        txns.aborted
            .range(start..)
            .filter(|a| a.first_offset < to)
            .copied()
            .collect()
    }

    /// Every aborted transaction still in the log, by marker offset (the log cleaner's).
    pub(crate) fn all_aborted(&self) -> Vec<AbortedTxn> {
        if !self.transactional.load(Ordering::Acquire) {
            return Vec::new();
        }
        lock(&self.txns).aborted.iter().copied().collect()
    }

    /// The transactions open here, by producer id (DescribeProducers' current transaction
    /// start offset, hanging transactions).
    pub fn open_transactions(&self) -> Vec<OpenTxn> {
        if !self.transactional.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut open: Vec<OpenTxn> = lock(&self.txns)
            .open
            .iter()
            .map(|(producer_id, first_offset)| OpenTxn {
                producer_id: *producer_id,
                first_offset: *first_offset,
            })
            .collect();
        open.sort_unstable();
        open
    }

    /// Whether `producer_id` has a transaction open here.
    pub fn has_open_transaction(&self, producer_id: i64) -> bool {
        self.transactional.load(Ordering::Acquire)
            && lock(&self.txns).open.contains_key(&producer_id)
    }

    /// Called under the writer lock before `headers` (transactional ones among them) are
    /// written at `base`: creates the state file the first time. `Err(None)`: it must be
    /// created and the caller may not block.
    pub(super) fn track_transactions(
        &self,
        base: i64,
        may_block: bool,
    ) -> Result<(), Option<FileError>> {
        let mut txns = lock(&self.txns);
        if txns.tracked {
            return Ok(());
        }
        if !may_block {
            return Err(None);
        }
        let bytes = txns.encode(base);
        io::replace_file_with(self.place.storage.as_ref(), &self.dir, FILE, &bytes)
            .map_err(Some)?;
        txns.tracked = true;
        txns.file_at = base;
        self.transactional.store(true, Ordering::Release);
        Ok(())
    }

    /// Writes the state as of `at` (every batch below it applied and on disk). A failure is
    /// logged: the older file stays right, the walk at open is just longer.
    pub(super) fn save_transactions(&self, at: i64) {
        let mut txns = lock(&self.txns);
        if !txns.tracked || txns.file_at >= at {
            return;
        }
        txns.drop_below(self.log_start_offset());
        let bytes = txns.encode(at);
        match io::replace_file_with(self.place.storage.as_ref(), &self.dir, FILE, &bytes) {
            Ok(()) => txns.file_at = at,
            // A deleted topic's partition: its directory went first, and nothing is lost.
            Err(_) if !self.dir.exists() => {}
            Err(e) => {
                tracing::warn!(partition = %self.name, error = %e, "could not save the transaction state; it is rebuilt from the log at open")
            }
        }
    }

    /// The cleaner is removing the markers at `markers` (their transactions have no batch
    /// left): their aborted transactions go, from memory and from the state file (its own
    /// state, as of its offset, less them), before the removal is swapped in. A read_committed
    /// reader told of an abort drops its producer's records until it meets the abort's marker,
    /// so an abort whose marker is gone must never be told again, after a restart neither. On
    /// `Err` the file is as it was and the markers must stay.
    pub(crate) fn forget_aborted(&self, markers: &[i64]) -> Result<(), FileError> {
        let mut txns = lock(&self.txns);
        let gone = |a: &AbortedTxn| markers.contains(&a.last_offset);
        if !txns.tracked || !txns.aborted.iter().any(gone) {
            return Ok(());
        }
        let path = self.dir.join(FILE);
        let bytes = std::fs::read(&path).map_err(|e| FileError::new("read", &path, e))?;
        if let Some((at, mut saved)) = Transactions::decode(&bytes) {
            saved.aborted.retain(|a| !gone(a));
            let bytes = saved.encode(at);
            io::replace_file_with(self.place.storage.as_ref(), &self.dir, FILE, &bytes)?;
        }
        txns.aborted.retain(|a| !gone(a));
        Ok(())
    }

    /// The offset below which retention may delete segments (their transactions are in the
    /// state file).
    pub(super) fn transactions_saved_at(&self) -> i64 {
        if !self.transactional.load(Ordering::Acquire) {
            return i64::MAX;
        }
        lock(&self.txns).file_at
    }

    /// The log start moved to `log_start`: aborted transactions wholly below it go.
    pub(super) fn transactions_start_at(&self, log_start: i64) {
        if self.transactional.load(Ordering::Acquire) {
            lock(&self.txns).drop_below(log_start);
        }
    }

    /// At open: the state from the file and the batches after it (see the module doc).
    pub(super) fn load_transactions(&self) -> Result<(), OpenError> {
        let path = self.dir.join(FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(FileError::new("read", path, e).into()),
        };
        let end = self.next_offset();
        let first = self.segments().first().map_or(0, |s| s.base_offset);
        let (from, mut state) = match Transactions::decode(&bytes) {
            Some((at, state)) if at <= end => (at.max(first), state),
            found => {
                tracing::warn!(partition = %self.name, file = %path.display(), as_of = ?found.map(|f| f.0), log_end = end, "the transaction state file is unreadable or ahead of the log; rebuilding it from the whole partition");
                let state = Transactions {
                    tracked: true,
                    file_at: first,
                    ..Transactions::default()
                };
                (first, state)
            }
        };
        let active_base = self.segments().last().map_or(0, |s| s.base_offset);
        let saved_before = state.file_at;
        self.walk_transactions(&mut state, from, active_base)?;
        // Past the closed segments (fsynced when they rolled) the state is exact: saved as of
        // the active segment's base, unless the file already was.
        let at_active = (saved_before < active_base).then(|| state.encode(active_base));
        self.walk_transactions(&mut state, from.max(active_base), end)?;
        state.drop_below(self.log_start_offset());
        state.ending.clear();
        self.transactional.store(true, Ordering::Release);
        *lock(&self.txns) = state;
        if let Some(bytes) = at_active {
            // The walk passed the active segment's base: the state there is exact, and the
            // segments before it were fsynced when it rolled.
            match io::replace_file_with(self.place.storage.as_ref(), &self.dir, FILE, &bytes) {
                Ok(()) => lock(&self.txns).file_at = active_base,
                Err(e) => {
                    tracing::warn!(partition = %self.name, error = %e, "could not save the transaction state")
                }
            }
        }
        Ok(())
    }

    /// Applies the batches of `[from, to)` to `state`, stepping over damage (logged).
    fn walk_transactions(
        &self,
        state: &mut Transactions,
        from: i64,
        to: i64,
    ) -> Result<(), OpenError> {
        let mut next = from;
        while next < to {
            let read = match self.read_any(next, 1 << 20, to) {
                Ok(read) => read,
                Err(ReadError::Damaged { path, damage }) if damage.end_offset > next => {
                    tracing::warn!(partition = %self.name, file = %path.display(), from = next, to = damage.end_offset, "transactions in a damaged stretch are not rebuilt");
                    next = damage.end_offset;
                    continue;
                }
                Err(e) => {
                    return Err(OpenError::Corrupt {
                        path: self.dir.clone(),
                        reason: format!("rebuilding the transaction state at offset {next}: {e}"),
                    })
                }
            };
            if read.is_empty() {
                break;
            }
            let before = next;
            let mut at = 0usize;
            while let Some(header) = read.get(at..).and_then(|b| BatchHeader::read(b).ok()) {
                let size = header.size as usize;
                if header.next_offset() > next {
                    let marker = header
                        .is_control()
                        .then(|| read.get(at..at + size).and_then(record_batch::control_type))
                        .flatten();
                    state.apply(&header, marker);
                    next = header.next_offset();
                }
                at += size;
            }
            if next == before {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, pid: i64, transactional: bool, control: bool) -> BatchHeader {
        let mut attributes = 0;
        if transactional {
            attributes |= record_batch::layout::TRANSACTIONAL_FLAG;
        }
        if control {
            attributes |= record_batch::layout::CONTROL_FLAG;
        }
        BatchHeader {
            base_offset: base,
            size: 100,
            partition_leader_epoch: -1,
            crc: 0,
            attributes,
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: 0,
            record_count: 1,
        }
    }

    #[test]
    fn open_commit_abort_and_the_lso() {
        let mut t = Transactions::default();
        t.apply(&batch(0, 1, false, false), None);
        assert_eq!(
            t.last_stable_offset(1, 0),
            1,
            "idempotent batches open nothing"
        );
        t.apply(&batch(1, 1, true, false), None);
        t.apply(&batch(2, 2, true, false), None);
        t.apply(&batch(3, 1, true, false), None);
        assert_eq!(t.last_stable_offset(4, 0), 1);
        t.apply(&batch(4, 1, true, true), Some(ControlType::Commit));
        // Under durability always the marker at 4 is not visible yet: the LSO holds.
        assert_eq!(t.last_stable_offset(4, 0), 1);
        assert_eq!(t.last_stable_offset(5, 0), 2);
        t.apply(&batch(5, 2, true, true), Some(ControlType::Abort));
        assert_eq!(t.last_stable_offset(6, 0), 6);
        assert_eq!(
            t.aborted.iter().copied().collect::<Vec<_>>(),
            vec![AbortedTxn {
                producer_id: 2,
                first_offset: 2,
                last_offset: 5
            }]
        );
        // A marker with nothing open changes nothing.
        t.apply(&batch(6, 3, true, true), Some(ControlType::Abort));
        assert_eq!(t.aborted.len(), 1);
        // An open transaction whose start was deleted holds the LSO at the log start.
        t.apply(&batch(7, 4, true, false), None);
        assert_eq!(t.last_stable_offset(8, 0), 7);
        assert_eq!(t.last_stable_offset(9, 8), 8);
        t.drop_below(6);
        assert!(t.aborted.is_empty());
    }

    #[test]
    fn the_file_round_trips_and_refuses_other_lengths() {
        let mut t = Transactions::default();
        t.apply(&batch(10, 1, true, false), None);
        t.apply(&batch(11, 2, true, false), None);
        t.apply(&batch(12, 2, true, true), Some(ControlType::Abort));
        let bytes = t.encode(13);
        let (at, back) = Transactions::decode(&bytes).unwrap();
        assert_eq!(at, 13);
        assert_eq!(back.open, t.open);
        assert_eq!(back.aborted, t.aborted);
        assert!(Transactions::decode(&bytes[..bytes.len() - 1]).is_none());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Transactions::decode(&longer).is_none());
        let mut other = bytes;
        other[0] = 2;
        assert!(Transactions::decode(&other).is_none());
    }
}
