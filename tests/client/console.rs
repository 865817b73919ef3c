//! `lograil produce` and `lograil consume`, the console commands built on the client, run as
//! processes against the cluster.

use std::io::Write;
use std::process::{Command, Stdio};

use consumer::partition_for_key;
use serde_json::Value;

use test_support::cluster::{unique, TestCluster};

fn lograil() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lograil"))
}

fn produce(cluster: &TestCluster, topic: &str, extra: &[&str], input: &str) {
    let mut child = lograil()
        .arg("produce")
        .args(cluster.cli_args())
        .args(["--topic", topic])
        .args(extra)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "lograil produce: {status}");
}

fn consume(cluster: &TestCluster, topic: &str, extra: &[&str]) -> Vec<String> {
    let out = lograil()
        .arg("consume")
        .args(cluster.cli_args())
        .args(["--topic", topic])
        .args(["--timeout-ms", "20000"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "lograil consume: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_and_consume_commands() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("console", 3).await;
    let input: String = (0..30)
        .map(|i| format!("user-{}:event {i}\n", i % 7))
        .collect();
    produce(
        &cluster,
        &topic,
        &[
            "--key-separator",
            ":",
            "--header",
            "source=console",
            "--compression",
            "lz4",
            "--acks",
            "all",
        ],
        &input,
    );

    // JSON: every field, keys on their murmur2 partitions, per-key order kept.
    let lines = consume(
        &cluster,
        &topic,
        &[
            "--from-beginning",
            "--max-messages",
            "30",
            "--format",
            "json",
        ],
    );
    assert_eq!(lines.len(), 30);
    let mut per_key: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
    for line in &lines {
        let v: Value = serde_json::from_str(line).unwrap();
        let key = v["key"].as_str().unwrap().to_string();
        assert_eq!(
            v["partition"].as_i64().unwrap(),
            partition_for_key(key.as_bytes(), 3) as i64
        );
        assert_eq!(v["headers"][0]["key"], "source");
        assert_eq!(v["headers"][0]["value"], "console");
        assert_eq!(v["timestamp_type"], "CreateTime");
        assert!(v["offset"].as_i64().unwrap() >= 0);
        let value = v["value"].as_str().unwrap();
        let n: u32 = value.strip_prefix("event ").unwrap().parse().unwrap();
        assert_eq!(format!("user-{}", n % 7), key);
        per_key.entry(key).or_default().push(n);
    }
    for ids in per_key.values() {
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }

    // Text, one partition from an offset: Kafka's console layout. user-0's partition holds
    // at least its five records.
    let p = partition_for_key(b"user-0", 3).to_string();
    let lines = consume(
        &cluster,
        &topic,
        &["--partition", &p, "--offset", "1", "--max-messages", "1"],
    );
    assert_eq!(lines.len(), 1);
    let fields: Vec<&str> = lines[0].split('\t').collect();
    assert!(fields[0].starts_with("CreateTime:"), "{fields:?}");
    assert_eq!(fields[1], format!("Partition:{p}"));
    assert_eq!(fields[2], "Offset:1");
    assert_eq!(fields[3], "source:console");
    assert_eq!(partition_for_key(fields[4].as_bytes(), 3).to_string(), p);

    // A group: the second run continues where the first committed.
    let group = unique("console");
    let group_args = [
        "--group",
        group.as_str(),
        "--from-beginning",
        "--format",
        "json",
    ];
    let first = consume(
        &cluster,
        &topic,
        &[&group_args[..], &["--max-messages", "10"]].concat(),
    );
    let second = consume(
        &cluster,
        &topic,
        &[&group_args[..], &["--max-messages", "20"]].concat(),
    );
    let mut all: Vec<(i64, i64)> = first
        .iter()
        .chain(&second)
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["partition"].as_i64().unwrap(),
                v["offset"].as_i64().unwrap(),
            )
        })
        .collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 30, "the two runs read every record once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_refuses_a_line_without_the_separator() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("console-bad", 1).await;
    let mut child = lograil()
        .arg("produce")
        .args(cluster.cli_args())
        .args(["--topic", &topic, "--key-separator", ":"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"k:v\nno separator\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2"));
}
