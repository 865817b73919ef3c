//! `lograil demo`, the real binary: its summary (`--json`) checked against the topics it wrote,
//! read back with librdkafka. On its embedded broker kept up with `--keep` (stopped by SIGINT,
//! its data dir removed) and on a separate broker with `--bootstrap-server`; one seed gives
//! the same events on both.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

use test_support::broker::lograil_bin;
use test_support::process::collect_lines;
use test_support::{lograil, TestBroker};

const SEED: &str = "11";
const DURATION: &str = "6";

type Lines = Arc<Mutex<Vec<String>>>;

/// `lograil demo ARGS --report REPORT`, and the lines of its stdout and stderr as they come.
fn spawn_demo(args: &[&str], report: &std::path::Path) -> (Child, Lines, Lines) {
    let mut child = Command::new(lograil_bin())
        .arg("demo")
        .args(args)
        .arg("--report")
        .arg(report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = collect_lines(child.stdout.take().unwrap());
    let stderr = collect_lines(child.stderr.take().unwrap());
    (child, stdout, stderr)
}

/// The first of `lines` starting with `prefix`, waited for up to `within` while the demo runs.
fn wait_for_line(child: &mut Child, lines: &Lines, prefix: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let found = lines
            .lock()
            .unwrap()
            .iter()
            .find(|l| l.starts_with(prefix))
            .cloned();
        if let Some(line) = found {
            return line;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the demo ended before {prefix:?}: {:?}",
            lines.lock().unwrap()
        );
        assert!(
            Instant::now() < deadline,
            "no {prefix:?} within {within:?}: {:?}",
            lines.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One record read back: headers, value.
struct Read {
    headers: BTreeMap<String, String>,
    value: String,
}

/// Every record of `topic`, each partition from its start to its end.
fn read_topic(addr: &str, topic: &str) -> Vec<Read> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "e2e-demo-check")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("fetch.wait.max.ms", "100")
        .create()
        .unwrap();
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let partitions = metadata.topics()[0].partitions().len() as i32;
    assert!(partitions > 0, "{topic} has no partitions");
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut out = Vec::new();
    let mut at_end = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while at_end.len() < partitions as usize {
        assert!(Instant::now() < deadline, "{topic}: no end in 30 s");
        match consumer.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => panic!("reading {topic}: {e}"),
            Some(Ok(m)) => {
                at_end.remove(&m.partition());
                let headers = m
                    .headers()
                    .map(|hs| {
                        hs.iter()
                            .map(|h| {
                                let v = h.value.map(String::from_utf8_lossy).unwrap_or_default();
                                (h.key.to_string(), v.into_owned())
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(Read {
                    headers,
                    value: String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
                });
            }
        }
    }
    out
}

/// The lines collected so far, joined, once `done` holds for them (or after 10 s).
fn joined_once(lines: &Lines, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = lines.lock().unwrap().join("\n");
        if done(&text) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The summary's counts against the topics on `addr`, and the report file.
fn check(addr: &str, summary: &Value, report: &std::path::Path) {
    let produced = count(&summary["produced"]);
    assert!(produced > 100, "{summary}");
    let chain = &summary["chain"];
    let (completed, dead) = (count(&chain["completed"]), count(&chain["dead_lettered"]));
    assert_eq!(
        completed + dead,
        produced,
        "every event done or dead-lettered: {summary}"
    );
    assert_eq!(summary["drained"], true);

    // Every event went to both topics once, under its seq.
    let topics = &summary["topics"];
    for topic in [&topics["webhooks"], &topics["tasks"]] {
        let records = read_topic(addr, topic.as_str().unwrap());
        let seqs: BTreeSet<u64> = records
            .iter()
            .map(|r| r.headers["demo-seq"].parse().unwrap())
            .collect();
        assert_eq!(records.len() as u64, produced, "{topic}");
        assert_eq!(seqs, (0..produced).collect(), "{topic}");
    }
    for q in summary["queues"].as_array().unwrap() {
        assert_eq!(count(&q["completed"]), produced, "{q}");
    }

    // The dead-letter topic holds what the summary says, the poison record among them with
    // its three attempts; anything else there failed on the outage.
    let dlt = read_topic(addr, topics["dlt"].as_str().unwrap());
    assert_eq!(dlt.len() as u64, dead, "{summary}");
    let poison = &summary["poison"];
    let seq = count(&poison["seq"]).to_string();
    let found: Vec<&Read> = dlt
        .iter()
        .filter(|r| r.headers["demo-seq"] == seq)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "the poison record is dead-lettered once: {summary}"
    );
    let p = found[0];
    assert!(p.value.contains("\"sticker\""), "{}", p.value);
    assert_eq!(
        p.headers["kafka_dlt-exception-fqcn"],
        "demo.UnsupportedMessageType"
    );
    assert_eq!(p.headers["kafka_dlt-original-topic"], topics["webhooks"]);
    assert_eq!(
        p.headers["kafka_dlt-original-partition"].as_bytes(),
        (poison["partition"].as_i64().unwrap() as i32).to_be_bytes(),
        "Spring's encoding: a 4-byte big-endian int"
    );
    let history: Vec<Value> =
        serde_json::from_str(&p.headers[retry_topic::headers::HISTORY]).unwrap();
    assert_eq!(history.len(), 3, "{history:?}");
    assert!(
        history
            .iter()
            .all(|h| h.to_string().contains("UnsupportedMessageType")),
        "{history:?}"
    );
    assert_eq!(count(&poison["attempts"]), 3);
    assert_eq!(poison["dead_lettered"], true);
    assert!(
        count(&poison["passed_by"]) > 0,
        "its partition kept flowing: {summary}"
    );
    for other in dlt.iter().filter(|r| r.headers["demo-seq"] != seq) {
        assert_eq!(
            other.headers["kafka_dlt-exception-fqcn"],
            "demo.DownstreamUnavailable"
        );
    }

    // The outage paused the chain: it was noticed, and the attempts spent while down are the
    // budget's window (10 outcomes) and the failed probes, not every record sent meanwhile.
    let outage = &summary["outage"];
    assert!(outage["detected_at_s"].is_f64(), "{outage}");
    assert!(
        count(&outage["retried_while_down"]) <= 12 + count(&outage["failed_probes"]),
        "{outage}"
    );

    // Fair turns: during the flood a quiet tenant's p99 wait is under the noisy one's.
    let fair = &summary["queues"][0];
    assert_eq!(fair["fairness"], "header:tenant");
    let flood_p99 = |t: &str| count(&fair["tenants"][t]["flood_wait_ms"]["p99"]);
    assert!(flood_p99("globex") < flood_p99("acme"), "{fair}");
    assert!(flood_p99("initech") < flood_p99("acme"), "{fair}");

    let html = std::fs::read_to_string(report).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    assert_eq!(html.matches("<svg ").count(), 4, "four plots");
    assert_eq!(html.matches("</svg>").count(), 4);
    assert!(html.matches("<polyline").count() >= 4);
    assert!(!html.contains("<script"), "no JavaScript");
    assert!(
        !html.contains(" src=") && !html.contains(" href="),
        "no external assets"
    );
    assert!(html.contains(&format!("--from {}", topics["dlt"].as_str().unwrap())));
}

#[test]
fn the_embedded_demo_adds_up_against_its_topics_and_stays_up_with_keep() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.html");
    let (mut child, stdout, stderr) = spawn_demo(
        &["--duration", DURATION, "--seed", SEED, "--json", "--keep"],
        &report,
    );
    let kept = wait_for_line(
        &mut child,
        &stderr,
        "the broker stays up at ",
        Duration::from_secs(90),
    );
    let lines = stdout.lock().unwrap().clone();
    assert_eq!(
        lines.len(),
        1,
        "stdout is the JSON summary alone: {lines:?}"
    );
    let summary: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(summary["embedded"], true);
    let addr = summary["broker"].as_str().unwrap().to_string();
    assert!(kept.contains(&addr), "{kept}");
    // The live table went to stderr: a row a second, the flood and the outage in it.
    let rows = stderr.lock().unwrap().clone();
    assert!(rows.iter().any(|l| l.contains(" flood ")), "{rows:?}");
    check(&addr, &summary, &report);

    // The printed commands work while it is up.
    let (ok, out, err) = lograil(&[
        "dlt",
        "list",
        "--bootstrap-server",
        &addr,
        "--from",
        summary["topics"]["dlt"].as_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("UnsupportedMessageType"), "{out}");
    // Each describe names the topic its group reads.
    for (command, group, topic) in [
        (
            "group",
            &summary["chain"]["group"],
            &summary["topics"]["webhooks"],
        ),
        (
            "queue",
            &summary["queues"][0]["group"],
            &summary["topics"]["tasks"],
        ),
    ] {
        let group = group.as_str().unwrap();
        let (ok, out, err) = lograil(&[command, "describe", "--bootstrap-server", &addr, group]);
        assert!(ok, "{command} describe {group}: {err}");
        assert!(out.contains(topic.as_str().unwrap()), "{out}");
    }

    // The printed redrive puts the dead letters back on the main topic, once.
    let dlt = summary["topics"]["dlt"].as_str().unwrap();
    let webhooks = summary["topics"]["webhooks"].as_str().unwrap();
    for _ in 0..2 {
        let (ok, _, err) = lograil(&[
            "dlt",
            "redrive",
            "--bootstrap-server",
            &addr,
            "--from",
            dlt,
            "--rate",
            "10",
        ]);
        assert!(ok, "{err}");
    }
    let after = read_topic(&addr, webhooks);
    let produced = count(&summary["produced"]);
    let dead = count(&summary["chain"]["dead_lettered"]);
    assert_eq!(
        after.len() as u64,
        produced + dead,
        "each dead letter redriven once"
    );
    let seq = count(&summary["poison"]["seq"]).to_string();
    assert_eq!(
        after
            .iter()
            .filter(|r| r.headers["demo-seq"] == seq)
            .count(),
        2
    );

    let data_dir = kept
        .split("(data dir ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap()
        .to_string();
    assert!(std::path::Path::new(&data_dir).is_dir());
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}: {:?}", stderr.lock().unwrap());
    assert!(
        !std::path::Path::new(&data_dir).exists(),
        "its data dir is removed"
    );

    // The same seed and duration are the same events on another broker.
    let broker = TestBroker::start_temp(&[]);
    let report = dir.path().join("external.html");
    let (ok, out, err) = lograil(&[
        "demo",
        "--bootstrap-server",
        &broker.addr,
        "--duration",
        DURATION,
        "--seed",
        SEED,
        "--json",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let external: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(external["embedded"], false);
    assert_eq!(external["produced"], summary["produced"]);
    assert_eq!(external["poison"]["seq"], summary["poison"]["seq"]);
    assert_eq!(external["poison"]["key"], summary["poison"]["key"]);
    let webhooks = external["topics"]["webhooks"].as_str().unwrap();
    assert!(
        webhooks.starts_with("webhooks-"),
        "a run's own topics: {webhooks}"
    );
    check(&broker.addr, &external, &report);
}

#[test]
fn ctrl_c_stops_the_story_with_what_was_done_and_removes_the_embedded_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, stdout, stderr) =
        spawn_demo(&["--duration", "30"], &dir.path().join("report.html"));
    // Plain text (stdout is a pipe): the opening line, the header, then a row a second.
    wait_for_line(&mut child, &stdout, "  2s ", Duration::from_secs(60));
    let opening = stdout.lock().unwrap()[0].clone();
    let data_dir = opening
        .split("data dir ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap()
        .to_string();
    assert!(std::path::Path::new(&data_dir).is_dir(), "{opening}");
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(2), "an unfinished story is a failure");
    // The reading threads may be a line behind the exit.
    let err = joined_once(&stderr, |t| t.contains("interrupted"));
    assert!(err.contains("interrupted"), "{err}");
    let out = joined_once(&stdout, |t| t.contains("look further"));
    assert!(out.contains("summary") && !out.contains('\x1b'), "{out}");
    assert!(dir.path().join("report.html").is_file());
    assert!(
        !std::path::Path::new(&data_dir).exists(),
        "its data dir is removed"
    );
}
