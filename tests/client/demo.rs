//! `lograil demo --bootstrap-server`, the command run as a process against the cluster: the
//! story plays unchanged on Apache Kafka too, its task queues in offset order there (Kafka
//! refuses lograil's fairness config, and the demo says so), and its summary adds up.

use std::process::Command;

use serde_json::Value;

use test_support::cluster::TestCluster;

#[test]
fn the_demo_plays_on_the_cluster_and_its_summary_adds_up() {
    let cluster = TestCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.html");
    let out = Command::new(env!("CARGO_BIN_EXE_lograil"))
        .arg("demo")
        .args(cluster.cli_args())
        .args(["--duration", "8", "--seed", "5", "--json", "--report"])
        .arg(&report)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "lograil demo: {}\n{stderr}",
        out.status
    );
    let summary: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the summary is JSON ({e}): {stderr}"));
    let n = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"));
    let produced = n(&summary["produced"]);
    let chain = &summary["chain"];
    assert!(produced > 100, "{summary}");
    assert_eq!(
        n(&chain["completed"]) + n(&chain["dead_lettered"]),
        produced,
        "every event completed or dead-lettered: {chain}"
    );
    assert_eq!(
        summary["poison"]["dead_lettered"], true,
        "{}",
        summary["poison"]
    );
    assert_eq!(n(&summary["poison"]["attempts"]), 3);
    let queues = summary["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 2);
    for queue in queues {
        assert_eq!(n(&queue["completed"]), produced, "every task done: {queue}");
    }
    let notes: Vec<&str> = summary["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if cluster.is_kafka() {
        assert!(
            notes.len() == 1
                && notes[0].contains("lograil.share.fairness.key=header:tenant refused"),
            "Kafka refuses fair turns, the demo says so: {notes:?}"
        );
    } else {
        assert!(notes.is_empty(), "lograil takes fair turns: {notes:?}");
    }
    assert!(std::fs::read_to_string(&report).unwrap().contains("<svg"));
}
