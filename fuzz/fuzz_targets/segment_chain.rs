//! The walk over stored batches and its measure of damage, through the public API: the input
//! becomes the closed first segment of a partition (`t-0/00000000000000000000.log`, without
//! index files), followed by an empty active segment whose base offset the input chooses, and
//! every offset of that closed segment is read through `Partition::read`.
//!
//! Input: `[end offset - 1][segment bytes...]`. Checked, for a fresh open (indexes rebuilt
//! from the log, damage found with CRCs) and again after a restart (indexes read from the files
//! written then, CRCs checked by reads):
//! - the data dir opens and the topic is online;
//! - every offset below the log end is either served (a read at it returns whole batches, the
//!   first containing it) or refused as damaged (with a damage covering it), never both: a
//!   read that spans several batches returns consecutive offsets, none of them refused;
//! - a time lookup never answers with a refused offset;
//! - the same offsets are served and refused before and after the restart;
//! - `dump_segment` (the `dump-log` command) reads the file without panicking.

#![no_main]

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use log_core::{Durability, Log, Partition, ReadError, TopicConfig};

const FIRST: &str = "00000000000000000000.log";

fn config() -> TopicConfig {
    TopicConfig {
        segment_bytes: log_core::MIN_SEGMENT_BYTES,
        // An index entry every batch or so: reads start from the index, not only from byte 0.
        index_interval_bytes: 64,
        retention_ms: None,
        durability: Durability::PAGE_CACHE,
        ..TopicConfig::default()
    }
}

/// A data dir holding topic `t` of one partition, closed cleanly: copied for every input.
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<tempfile::TempDir> = OnceLock::new();
    TEMPLATE
        .get_or_init(|| {
            let dir = tempfile::Builder::new()
                .prefix("lograil-fuzz-template-")
                .tempdir()
                .expect("a temporary dir");
            let log = Log::open(dir.path()).expect("an empty data dir opens");
            log.create_topic("t", 1, config()).expect("topic t");
            log.close().expect("clean close");
            dir
        })
        .path()
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create dir");
    for entry in fs::read_dir(from).expect("list template") {
        let entry = entry.expect("template entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy template file");
        }
    }
}

/// What reading every offset below the log end found.
#[derive(Debug, PartialEq, Eq)]
struct Reads {
    served: BTreeSet<i64>,
    refused: BTreeSet<i64>,
}

fn read_every_offset(p: &Partition) -> Reads {
    let end = p.log_end_offset();
    let mut reads = Reads {
        served: BTreeSet::new(),
        refused: BTreeSet::new(),
    };
    for offset in p.log_start_offset()..end {
        match p.read(offset, 1) {
            Ok(read) => {
                let headers = record_batch::parse_all(&read.records)
                    .unwrap_or_else(|e| panic!("read at {offset} served unparsable bytes: {e}"));
                let first = headers[0];
                assert!(
                    first.base_offset <= offset && offset <= first.last_offset(),
                    "read at {offset} served a batch of offsets {}..={}",
                    first.base_offset,
                    first.last_offset()
                );
                reads.served.insert(offset);
            }
            Err(ReadError::Damaged { damage, .. }) => {
                assert!(
                    damage.covers(offset),
                    "read at {offset} refused by {damage:?}"
                );
                reads.refused.insert(offset);
            }
            Err(e) => panic!("read at {offset} (log end {end}) failed: {e}"),
        }
    }
    // Reads that may span several batches: consecutive offsets, none of them refused.
    for offset in reads.served.iter().copied() {
        let read = p.read(offset, 1 << 20).expect("served once, served again");
        let headers = record_batch::parse_all(&read.records).expect("whole batches");
        let mut next = headers[0].base_offset;
        for h in &headers {
            assert_eq!(
                h.base_offset, next,
                "read at {offset} skips from {next} to {}",
                h.base_offset
            );
            next = h.next_offset();
            let covered = h.base_offset.max(offset)..h.next_offset().min(end);
            assert!(
                covered.clone().all(|o| !reads.refused.contains(&o)),
                "read at {offset} served a batch of offsets {covered:?}, some refused alone"
            );
        }
    }
    reads
}

fn check_time_lookups(p: &Partition, data: &[u8], reads: &Reads) {
    let mut timestamps = vec![i64::MIN, -1, 0, i64::MAX];
    if let Ok(headers) = record_batch::parse_all(data) {
        timestamps.extend(
            headers
                .iter()
                .flat_map(|h| [h.base_timestamp, h.max_timestamp]),
        );
    }
    for ts in timestamps {
        if let Ok(Some((offset, _))) = p.offset_for_timestamp(ts) {
            assert!(
                !reads.refused.contains(&offset),
                "a time lookup for {ts} answered refused offset {offset}"
            );
        }
    }
}

fn open(dir: &Path) -> (Log, std::sync::Arc<Partition>) {
    let log = Log::open(dir).unwrap_or_else(|e| panic!("the data dir does not open: {e}"));
    let topic = log
        .topic("t")
        .unwrap_or_else(|| panic!("topic t is offline: {:?}", log.offline_topics()));
    let partition = topic.partitions()[0].clone();
    (log, partition)
}

fuzz_target!(|data: &[u8]| {
    let Some((end, segment)) = data.split_first() else {
        return;
    };
    let end = 1 + i64::from(*end);
    let dir = tempfile::Builder::new()
        .prefix("lograil-fuzz-segment-")
        .tempdir()
        .expect("a temporary dir");
    copy_dir(template(), dir.path());
    let partition_dir = dir.path().join("t-0");
    fs::write(partition_dir.join(FIRST), segment).expect("write the segment");
    fs::write(partition_dir.join(format!("{end:020}.log")), b"").expect("write the active segment");

    let (log, p) = open(dir.path());
    assert_eq!(p.log_end_offset(), end);
    let first = read_every_offset(&p);
    check_time_lookups(&p, segment, &first);
    drop(p);
    log.close().expect("close");

    let report = log_core::dump::dump_segment(&partition_dir.join(FIRST)).expect("dump-log reads");
    let _ = report.is_ok();

    let (_log, p) = open(dir.path());
    let again = read_every_offset(&p);
    check_time_lookups(&p, segment, &again);
    assert_eq!(
        first, again,
        "the same bytes answered differently after a restart"
    );
});
