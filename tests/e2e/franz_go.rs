//! franz-go (github.com/twmb/franz-go), an unmodified Go client, against the real binary: the
//! program of `tests/franz` (built by its `build.sh`, which `.ci/run` runs) creates a topic with
//! kadm, produces keyed records with franz-go's defaults (idempotent, its murmur2 key
//! partitioner), consumes them in a consumer group, commits and reads the group's lag back.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::external_clients::require;
use test_support::{lograil_stdout, TestBroker};

const RECORDS: u64 = 1000;
const KEYS: u32 = 20;
const PARTITIONS: u32 = 3;

#[test]
fn franz_go_produces_consumes_in_a_group_commits_and_reads_its_lag() {
    require(
        "go",
        &["version"],
        "apt-get install golang, or Go from go.dev",
    );
    let franz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/franz");
    let built = Command::new(franz.join("build.sh"))
        .env_remove("LD_LIBRARY_PATH")
        .status()
        .unwrap();
    assert!(built.success(), "tests/franz/build.sh: {built}");
    let broker = TestBroker::start_temp(&[]);
    let out = Command::new(franz.join("bin/franz-roundtrip"))
        .env_remove("LD_LIBRARY_PATH")
        .args([
            "-brokers",
            &broker.addr,
            "-topic",
            "franz",
            "-group",
            "franz-group",
        ])
        .args(["-n", &RECORDS.to_string(), "-keys", &KEYS.to_string()])
        .args(["-partitions", &PARTITIONS.to_string()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "franz-roundtrip: {}\n{stderr}",
        out.status
    );
    let summary: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("franz-roundtrip's summary ({e}): {stderr}"));
    assert_eq!(summary["produced"], RECORDS, "{summary}");
    assert_eq!(summary["consumed"], RECORDS, "{summary}");
    assert_eq!(summary["duplicates"], 0, "{summary}");
    // Committed offsets summed over the partitions: every record; nothing left.
    assert_eq!(summary["committed"], RECORDS, "{summary}");
    assert_eq!(summary["lag"], 0, "{summary}");
    assert_eq!(summary["group_state"], "Empty", "{summary}");
    // franz-go's key partitioner is the Java client's murmur2, as lograil's client is.
    let partition_of = summary["partition_of"].as_object().unwrap();
    assert_eq!(partition_of.len(), KEYS as usize);
    for (key, partition) in partition_of {
        assert_eq!(
            partition.as_u64(),
            Some(u64::from(consumer::partition_for_key(
                key.as_bytes(),
                PARTITIONS
            ))),
            "key {key}"
        );
    }
    // lograil's own view of the group franz-go committed for.
    let described = lograil_stdout(&[
        "group",
        "describe",
        "franz-group",
        "--bootstrap-server",
        &broker.addr,
    ]);
    assert!(described.contains("franz"), "{described}");
}
