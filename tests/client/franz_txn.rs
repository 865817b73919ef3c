//! franz-go's `GroupTransactSession` (consume-transform-produce, exactly once) in a group whose
//! members join and leave mid-run, on lograil and on Kafka 4.4 alike: the program of
//! `tests/franz` (`-txn-session`, `txn.go`) runs two, then three, then two, then three
//! members, each writing one output record per input record in a transaction with the group's
//! offsets. Every input record must come out exactly once, read_committed, with the group's
//! offsets at the input's end; in a classic group and in a KIP-848 consumer group (the one
//! lograil once answered every transactional commit of with ILLEGAL_GENERATION, so no
//! transaction ever committed).

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use test_support::cluster::{unique, TestCluster};

const RECORDS: u64 = 3000;
const PARTITIONS: u32 = 4;

fn franz_go(bootstrap: &str, server_side: bool) -> Value {
    let franz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/franz");
    let built = Command::new(franz.join("build.sh"))
        .env_remove("LD_LIBRARY_PATH")
        .status()
        .expect("tests/franz/build.sh needs Go (.ci/run installs it)");
    assert!(built.success(), "tests/franz/build.sh: {built}");
    let topic = unique("franz-txn");
    let mut command = Command::new(franz.join("bin/franz-roundtrip"));
    command
        .env_remove("LD_LIBRARY_PATH")
        .args(["-brokers", bootstrap, "-txn-session", "-timeout", "90s"])
        .args(["-topic", &topic, "-group", &format!("{topic}-group")])
        .args(["-n", &RECORDS.to_string()])
        .args(["-partitions", &PARTITIONS.to_string()]);
    if server_side {
        command.arg("-server-side");
    }
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "franz-roundtrip: {}\n{stderr}",
        out.status
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("franz-roundtrip's summary ({e}): {stderr}"))
}

fn check(summary: &Value) {
    assert_eq!(summary["transacted"], true, "{summary}");
    assert_eq!(summary["distinct"], RECORDS, "{summary}");
    assert_eq!(summary["output"], RECORDS, "exactly once: {summary}");
    assert_eq!(summary["committed"], RECORDS, "{summary}");
    assert!(summary["commits"].as_u64().unwrap() > 0, "{summary}");
}

#[tokio::test]
async fn franz_go_group_transact_sessions_survive_members_joining_and_leaving() {
    let cluster = TestCluster::start();
    check(&franz_go(cluster.plain_bootstrap(), false));
}

#[tokio::test]
async fn franz_go_group_transact_sessions_in_a_kip_848_consumer_group() {
    let cluster = TestCluster::start();
    check(&franz_go(cluster.plain_bootstrap(), true));
}
