//! [`acquire`] over a log of the test's own (the broker's implementation over log-core is
//! exercised by the share-group suites end to end).

use std::cell::Cell;
use std::sync::Mutex;

use super::*;
use crate::record::RecordState;

/// A log of batches of `batch` records each from `start` to `end`; `records` are the offsets
/// "read" (one byte each), so a test sees what was read.
struct FakeLog {
    start: i64,
    end: i64,
    batch: i64,
    uncommitted: Vec<i64>,
    expired: Vec<i64>,
    fail_reads: bool,
    reads: Cell<usize>,
}

impl FakeLog {
    fn new(start: i64, end: i64) -> FakeLog {
        FakeLog {
            start,
            end,
            batch: 1,
            uncommitted: Vec::new(),
            expired: Vec::new(),
            fail_reads: false,
            reads: Cell::new(0),
        }
    }
}

impl PartitionLog for FakeLog {
    type Records = Vec<u8>;
    type Error = String;

    fn name(&self) -> &str {
        "t-0"
    }
    fn log_start_offset(&self) -> i64 {
        self.start
    }
    fn last_stable_offset(&self) -> i64 {
        self.end
    }
    fn high_watermark(&self) -> i64 {
        self.end
    }
    fn to_batch_end(&self, from: i64, max_records: usize, log_end: i64) -> usize {
        let last = from + max_records as i64 - 1;
        let batch_last = (last / self.batch + 1) * self.batch - 1;
        (batch_last.min(log_end - 1) + 1 - from) as usize
    }
    fn read_meta(&self, _: i64, _: i64, _: &FairnessKey) -> Result<Vec<RecordMeta>, String> {
        Ok(Vec::new())
    }
    fn read_batches(&self, ranges: &[(i64, i64, u16)]) -> Result<Vec<u8>, String> {
        self.reads.set(self.reads.get() + 1);
        if self.fail_reads {
            return Err("disk on fire".to_string());
        }
        Ok(ranges
            .iter()
            .flat_map(|(f, l, _)| *f..=*l)
            .map(|o| o as u8)
            .collect())
    }
    fn uncommitted(&self, _: &Vec<u8>, offsets: &[i64], _: bool) -> Vec<i64> {
        offsets
            .iter()
            .copied()
            .filter(|o| self.uncommitted.contains(o))
            .collect()
    }
    fn past_deadline(&self, _: &Vec<u8>, offsets: &[i64], _: i64) -> Vec<i64> {
        offsets
            .iter()
            .copied()
            .filter(|o| self.expired.contains(o))
            .collect()
    }
}

fn fetch(max_records: usize, whole_batches: bool) -> Fetch<'static> {
    Fetch {
        member: "m",
        now: 1_000,
        max_records,
        whole_batches,
    }
}

#[test]
fn ranges_lose_the_removed_offsets() {
    assert_eq!(
        without(&[(0, 9, 1), (20, 21, 2)], &[0, 4, 5, 9, 21]),
        vec![(1, 3, 1), (6, 8, 1), (20, 20, 2)]
    );
    assert_eq!(without(&[(3, 3, 1)], &[3]), vec![]);
}

#[test]
fn acquires_and_reads_the_records_below_the_last_stable_offset() {
    let state = Mutex::new(SharePartition::new(0));
    let log = FakeLog::new(0, 5);
    let (guard, outcome) = acquire(&state, &log, fetch(10, false), &ShareConfig::default());
    let got = outcome.unwrap();
    assert_eq!(got.ranges, vec![(0, 4, 1)]);
    assert_eq!(got.records, vec![0, 1, 2, 3, 4]);
    assert_eq!(got.changes.offsets, vec![0, 1, 2, 3, 4]);
    assert_eq!(guard.end(), 5);
}

#[test]
fn nothing_acquired_reads_nothing() {
    let state = Mutex::new(SharePartition::new(3));
    let log = FakeLog::new(0, 3);
    let (_guard, outcome) = acquire(&state, &log, fetch(10, false), &ShareConfig::default());
    let got = outcome.unwrap();
    assert!(got.ranges.is_empty() && got.records.is_empty());
    assert_eq!(log.reads.get(), 0);
}

#[test]
fn whole_batches_run_to_the_end_of_the_last_batch() {
    let state = Mutex::new(SharePartition::new(0));
    let log = FakeLog {
        batch: 4,
        ..FakeLog::new(0, 10)
    };
    let (_guard, outcome) = acquire(&state, &log, fetch(2, true), &ShareConfig::default());
    assert_eq!(outcome.unwrap().ranges, vec![(0, 3, 1)]);
}

#[test]
fn the_start_moves_up_to_the_log_start() {
    let state = Mutex::new(SharePartition::new(0));
    let log = FakeLog::new(4, 6);
    let (guard, outcome) = acquire(&state, &log, fetch(10, false), &ShareConfig::default());
    assert_eq!(outcome.unwrap().ranges, vec![(4, 5, 1)]);
    assert_eq!(guard.start(), 4);
}

#[test]
fn uncommitted_and_expired_records_are_archived_not_delivered() {
    let state = Mutex::new(SharePartition::new(0));
    let log = FakeLog {
        uncommitted: vec![1],
        expired: vec![3],
        ..FakeLog::new(0, 5)
    };
    let (guard, outcome) = acquire(&state, &log, fetch(10, false), &ShareConfig::default());
    let got = outcome.unwrap();
    assert_eq!(got.ranges, vec![(0, 0, 1), (2, 2, 1), (4, 4, 1)]);
    let archived: Vec<i64> = got.changes.archived.iter().map(|a| a.offset).collect();
    assert_eq!(archived, vec![1, 3]);
    assert!(matches!(
        guard.entry(1).map(|e| &e.state),
        Some(RecordState::Archived(_))
    ));
    assert!(matches!(
        guard.entry(3).map(|e| &e.state),
        Some(RecordState::Archived(_))
    ));
}

#[test]
fn a_failed_read_gives_the_records_back() {
    let state = Mutex::new(SharePartition::new(0));
    let log = FakeLog {
        fail_reads: true,
        ..FakeLog::new(0, 3)
    };
    let (guard, outcome) = acquire(&state, &log, fetch(10, false), &ShareConfig::default());
    let failed = outcome.unwrap_err();
    assert_eq!(failed.error, "disk on fire");
    assert_eq!(guard.acquired_count(), 0);
    assert!(matches!(
        guard.entry(0).map(|e| &e.state),
        Some(RecordState::Available { .. })
    ));
}
