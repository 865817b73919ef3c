//! `lograil dump-log` on real segment files written by log-core.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::fs;
use std::process::Command;

use log_core::{batch, Log, TopicConfig};

fn dump(args: &[&std::path::Path]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lograil"))
        .arg("dump-log")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn dump_log_prints_batches_and_finds_corruption() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path()).unwrap();
        let config = TopicConfig {
            segment_bytes: 1024,
            index_interval_bytes: 100,
            ..TopicConfig::default()
        };
        let p = log.create_topic("t", 1, config).unwrap().partitions()[0].clone();
        for i in 0..20 {
            let value = format!("value-{i:03}-{}", "x".repeat(40));
            p.append(&batch::build(&[(
                Some(b"k"),
                Some(value.as_bytes()),
                1000 + i,
            )]))
            .unwrap();
        }
        assert!(p.segment_count() > 1);
    }
    let first = dir.path().join("t-0/00000000000000000000.log");
    let (code, out) = dump(&[&first]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("baseOffset: 0 lastOffset: 0 count: 1 baseTimestamp: 1000"),
        "{out}"
    );
    assert!(out.contains("crc: "), "{out}");
    assert!(out.contains("(ok)"), "{out}");
    assert!(out.contains("entries checked"), "{out}");
    assert!(out.contains("no corruption found"), "{out}");

    // Flip one byte inside the second batch's records: a bad CRC, exit 1.
    let mut bytes = fs::read(&first).unwrap();
    let second_batch_tail = bytes.len() / 2;
    bytes[second_batch_tail] ^= 0xFF;
    fs::write(&first, &bytes).unwrap();
    let (code, out) = dump(&[&first]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("CORRUPT"), "{out}");

    // A torn tail.
    fs::write(&first, &bytes[..bytes.len() - 7]).unwrap();
    let (code, out) = dump(&[&first]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("torn write"), "{out}");

    // A missing file: an error naming it, exit 2.
    let (code, _) = dump(&[&dir.path().join("nope.log")]);
    assert_eq!(code, 2);
}
