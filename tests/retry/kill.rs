//! A consumer killed (SIGKILL) after forwarding a failed record and before committing it: the
//! record is in the retry topic, everything before it was committed, and a restart loses
//! nothing and repeats only that record.
//!
//! The consumer runs in a child process: this test binary again, running only
//! `child_forwards_then_hangs` (ignored otherwise), which hangs inside the forward hook until
//! it is killed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use retry_topic::{Delivery, Event, HandlerError, RetryingConsumer};

use crate::harness::{
    chain_config, count, produce_values, records_of, value_of, wait_for, Effects, Running,
};
use test_support::cluster::{unique, TestCluster};

const CHILD_ENV: &str = "LOGRAIL_RETRY_KILL_CHILD";

#[derive(Debug, thiserror::Error)]
#[error("not yet")]
struct NotYet;

fn config_for(cluster: &TestCluster, topic: &str, group: &str) -> retry_topic::RetryConfig {
    chain_config(cluster, topic, group)
        .delays([Duration::from_millis(300)])
        .max_attempts(3)
        // Successes are committed only with a forward, so the test sees where commits happen.
        .commit_interval(Duration::from_secs(3600))
}

/// Run by the parent test in a child process; does nothing in a normal run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of killed_between_forward_and_commit"]
async fn child_forwards_then_hangs() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.split('|');
    let (bootstrap, topic, group) = (
        parts.next().unwrap().to_string(),
        parts.next().unwrap().to_string(),
        parts.next().unwrap().to_string(),
    );
    let cluster_config = test_support::cluster::client_config_for(&bootstrap);
    let rf: i16 = parts.next().unwrap().parse().unwrap();
    let config = retry_topic::RetryConfig::new(&topic, &group)
        .replication_factor(rf)
        .consumer_property("session.timeout.ms", "6000")
        .consumer_property("heartbeat.interval.ms", "300")
        .consumer_property("fetch.max.wait.ms", "100")
        .delays([Duration::from_millis(300)])
        .max_attempts(3)
        .commit_interval(Duration::from_secs(3600));
    let handler = |d: Delivery| async move {
        let value = value_of(&d.record);
        if value == "poison" {
            return Err(HandlerError::from(NotYet));
        }
        println!("PROCESSED {value}");
        Ok(())
    };
    let consumer = RetryingConsumer::new(&cluster_config, config, handler)
        .await
        .unwrap()
        .on_event(|e| {
            if let Event::Forwarded { offset, .. } = e {
                println!("FORWARDED {offset}");
                use std::io::Write;
                let _ = std::io::stdout().flush();
                // Between the acknowledged forward and its commit: wait to be killed.
                std::thread::sleep(Duration::from_secs(3600));
            }
        });
    let _ = consumer.run(std::future::pending()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_between_forward_and_commit_loses_nothing_and_repeats_only_that_record() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("kill", 1).await;
    let group = unique("kill-g");
    produce_values(&cluster, &topic, &["r0", "r1", "poison", "r3", "r4"]).await;

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "kill::child_forwards_then_hangs",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            CHILD_ENV,
            format!(
                "{}|{topic}|{group}|{}",
                cluster.bootstrap(),
                cluster.replication()
            ),
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest may print the test's name on the same line first.
            for mark in ["PROCESSED ", "FORWARDED "] {
                if let Some(at) = line.find(mark) {
                    let _ = tx.send(line[at..].to_string());
                }
            }
        }
    });
    let mut first_run = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the child forwards the poison record within 60 s");
        if line.starts_with("FORWARDED") {
            assert_eq!(line, "FORWARDED 2");
            break;
        }
        first_run.push(line.trim_start_matches("PROCESSED ").to_string());
    }
    let status = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    child.wait().unwrap();
    assert_eq!(first_run, vec!["r0", "r1"]);

    // The forward is durable; everything before the poison record was committed before it.
    assert_eq!(count(&cluster, &format!("{topic}-retry")).await, 1);
    let admin_committed = cluster
        .admin()
        .await
        .committed_offsets(&group)
        .await
        .unwrap();
    assert_eq!(admin_committed.get(&(topic.clone(), 0)), Some(&2));

    // A new consumer of the group (the dead member's session expires first).
    let effects = Effects::default();
    let e = effects.clone();
    let handler = move |d: Delivery| {
        let e = e.clone();
        async move {
            e.add(&value_of(&d.record));
            Ok::<(), HandlerError>(())
        }
    };
    let running = Running::start(&cluster, config_for(&cluster, &topic, &group), handler).await;
    wait_for("r3, r4 and the poison record processed", 60, || {
        let got = effects.get();
        got.contains_key("r3") && got.contains_key("r4") && got.get("poison") == Some(&2)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    running.stop().await;
    let got = effects.get();
    // r0 and r1 are not seen again; the poison record twice: once re-read from the main
    // topic (its commit was lost), once from the retry topic (its forward was not).
    assert_eq!(got.get("r0"), None);
    assert_eq!(got.get("r1"), None);
    assert_eq!(got.get("r3"), Some(&1));
    assert_eq!(got.get("r4"), Some(&1));
    assert_eq!(got.get("poison"), Some(&2));
    assert_eq!(
        records_of(&cluster, &format!("{topic}-retry")).await.len(),
        1,
        "the second run forwarded nothing"
    );
}
