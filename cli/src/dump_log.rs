//! `lograil dump-log`: every batch of a segment file with its offsets, timestamps, size and
//! CRC, then a check of the segment's `.index` and `.timeindex` against it.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use log_core::dump::{dump_segment, SegmentReport};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Segment files (`<base offset>.log`) to dump.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Also decode and print every record (offset, timestamp, key and value sizes).
    #[arg(long)]
    records: bool,
}

/// Exit code 0 when every file is sound, 1 when corruption was found.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut sound = true;
    for path in &args.files {
        let report = dump_segment(path)?;
        print_report(&report, args.records, path)?;
        sound &= report.is_ok();
    }
    Ok(if sound {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_report(
    report: &SegmentReport,
    records: bool,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "Dumping {}", report.path.display())?;
    let data = if records {
        std::fs::read(path)?
    } else {
        Vec::new()
    };
    for b in &report.batches {
        let h = &b.header;
        writeln!(
            out,
            "baseOffset: {} lastOffset: {} count: {} baseTimestamp: {} maxTimestamp: {} size: {} position: {} producerId: {} producerEpoch: {} baseSequence: {} compressed: {} transactional: {} control: {} crc: {:#010x} ({})",
            h.base_offset,
            h.last_offset(),
            h.record_count,
            h.base_timestamp,
            h.max_timestamp,
            h.size,
            b.position,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            h.is_compressed(),
            h.is_transactional(),
            h.is_control(),
            h.crc,
            if b.crc_ok { "ok" } else { "BAD" },
        )?;
        if records && b.crc_ok {
            let start = usize::try_from(b.position)?;
            let batch = &data[start..start + h.size as usize];
            for r in log_core::batch::decode(batch)? {
                writeln!(
                    out,
                    "| offset: {} timestamp: {} keySize: {} valueSize: {}",
                    r.offset,
                    r.timestamp,
                    r.key.map_or(-1, |k| k.len() as i64),
                    r.value.map_or(-1, |v| v.len() as i64),
                )?;
            }
        }
    }
    let records: i64 = report
        .batches
        .iter()
        .map(|b| i64::from(b.header.record_count))
        .sum();
    writeln!(
        out,
        "{} batches, {records} records, {} bytes",
        report.batches.len(),
        report.file_len
    )?;
    for (name, entries) in [
        ("index", report.index_entries),
        ("timeindex", report.time_index_entries),
    ] {
        match entries {
            Some(n) => writeln!(out, "{name}: {n} entries checked")?,
            None => writeln!(
                out,
                "{name}: no file (an active segment's indexes are written when it rolls)"
            )?,
        }
    }
    if report.is_ok() {
        writeln!(out, "no corruption found")?;
    } else {
        for problem in &report.problems {
            writeln!(out, "CORRUPT: {problem}")?;
        }
    }
    Ok(())
}
