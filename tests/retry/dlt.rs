//! `lograil dlt`: a Spring Kafka dead-letter record built byte for byte is shown and redriven;
//! a record without chain headers is reported, never dropped; redrive keeps its rate and
//! returns every record exactly once, also when run again.

use std::collections::BTreeSet;
use std::time::Instant;

use bytes::Bytes;
use retry_topic::headers as h;
use retry_topic::{Delivery, Event, HandlerError};
use serde_json::Value;

use crate::harness::{
    chain_config, count, header, lograil, produce, produce_values, records_of, value_of, wait_for,
    Running,
};
use test_support::cluster::{unique, TestCluster};

/// Headers as Spring Kafka's `DeadLetterPublishingRecoverer` and `@RetryableTopic` write them
/// for a record of `topic`-0@41 failed on its third attempt.
fn spring_headers(topic: &str) -> Vec<(&'static str, Bytes)> {
    let b = |s: &str| Bytes::from(s.to_string());
    vec![
        ("trace-id", b("abc-123")),
        (h::DLT_ORIGINAL_TOPIC, b(topic)),
        // ByteBuffer.allocate(4).putInt(0), allocate(8).putLong(41), putLong(timestamp)
        (h::DLT_ORIGINAL_PARTITION, Bytes::from_static(&[0, 0, 0, 0])),
        (h::DLT_ORIGINAL_OFFSET, Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 41])),
        (
            h::DLT_ORIGINAL_TIMESTAMP,
            Bytes::from_static(&[0, 0, 0x01, 0x9b, 0x76, 0xda, 0xa8, 0x00]),
        ),
        (h::DLT_ORIGINAL_TIMESTAMP_TYPE, b("CreateTime")),
        (h::DLT_ORIGINAL_CONSUMER_GROUP, b("spring-billing")),
        (
            h::DLT_EXCEPTION_FQCN,
            b("org.springframework.kafka.listener.ListenerExecutionFailedException"),
        ),
        (
            h::DLT_EXCEPTION_MESSAGE,
            b("Listener method threw exception; nested exception is java.lang.IllegalStateException: no stock"),
        ),
        (
            "kafka_dlt-exception-stacktrace",
            b("java.lang.IllegalStateException: no stock\n\tat com.example.Billing.on(Billing.java:42)"),
        ),
        // ByteBuffer.wrap(new byte[4]).putInt(3); BigInteger.valueOf(ts).toByteArray()
        (h::ATTEMPTS, Bytes::from_static(&[0, 0, 0, 3])),
        (
            h::ORIGINAL_TIMESTAMP,
            Bytes::from_static(&[0x01, 0x9b, 0x76, 0xda, 0xa8, 0x00]),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spring_dead_letter_is_shown_and_redriven_once() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("spring", 1).await;
    let dlt = format!("{topic}-dlt");
    cluster
        .admin()
        .await
        .create(&consumer::NewTopic {
            name: dlt.clone(),
            partitions: 1,
            replication_factor: cluster.replication(),
            configs: Vec::new(),
        })
        .await
        .unwrap();
    produce(
        &cluster,
        &dlt,
        0,
        &[
            (Some("order-41"), "{\"sku\":7}", spring_headers(&topic)),
            (None, "no headers at all", vec![]),
        ],
    )
    .await;

    let (ok, out, err) = lograil(&cluster, &["dlt", "show", "--from", &dlt, "--json"]);
    assert!(ok, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    let spring = &shown[0];
    assert_eq!(spring["key"], "order-41");
    assert_eq!(spring["origin"]["topic"], topic.as_str());
    assert_eq!(spring["origin"]["partition"], 0);
    assert_eq!(spring["origin"]["offset"], 41);
    assert_eq!(spring["origin"]["timestamp"], 1_767_225_600_000i64);
    assert_eq!(spring["origin"]["timestamp_type"], "CreateTime");
    assert_eq!(spring["origin"]["group"], "spring-billing");
    assert_eq!(
        spring["class"],
        "org.springframework.kafka.listener.ListenerExecutionFailedException"
    );
    assert_eq!(spring["attempts"], 2);
    assert_eq!(spring["problems"], serde_json::json!([]));
    let bare = &shown[1];
    assert!(bare["origin"].is_null());
    assert_eq!(bare["problems"].as_array().unwrap().len(), 1, "{bare}");
    let (ok, text, _) = lograil(&cluster, &["dlt", "list", "--from", &dlt]);
    assert!(ok);
    assert!(text.contains(&format!("{topic}-0@41")), "{text}");
    assert!(text.contains("ListenerExecutionFailedException"), "{text}");

    // Only Spring's record (filter), to its original topic.
    let (ok, out, err) = lograil(
        &cluster,
        &[
            "dlt",
            "redrive",
            "--from",
            &dlt,
            "--filter",
            "ListenerExecutionFailedException",
            "--json",
        ],
    );
    assert!(ok, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["redriven"].as_array().unwrap().len(), 1);
    assert_eq!(report["filtered"], 1);
    let back = records_of(&cluster, &topic).await;
    assert_eq!(back.len(), 1);
    let r = &back[0];
    assert_eq!(r.partition, 0, "back to its original partition");
    assert_eq!(
        (r.key.as_deref(), value_of(r).as_str()),
        (Some(&b"order-41"[..]), "{\"sku\":7}")
    );
    assert_eq!(
        header(r, "trace-id"),
        Some(&b"abc-123"[..]),
        "user headers kept"
    );
    assert_eq!(
        header(r, h::DLT_EXCEPTION_FQCN),
        None,
        "chain headers dropped"
    );
    assert_eq!(header(r, h::ATTEMPTS), None);
    assert_eq!(
        header(r, h::REDRIVE_OF),
        Some(format!("{dlt}/0/0").as_bytes())
    );

    // Without a filter: the header-less record has nowhere to go and says so; it stays.
    let (ok, _, err) = lograil(&cluster, &["dlt", "redrive", "--from", &dlt]);
    assert!(!ok);
    assert!(err.contains("--to"), "{err}");
    assert_eq!(
        count(&cluster, &topic).await,
        1,
        "Spring's record not produced twice"
    );
    assert_eq!(count(&cluster, &dlt).await, 2, "the DLT keeps every record");
    // With --to it goes; again, nothing is produced twice.
    let (ok, out, err) = lograil(
        &cluster,
        &["dlt", "redrive", "--from", &dlt, "--to", &topic, "--json"],
    );
    assert!(ok, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            report["redriven"].as_array().unwrap().len(),
            report["already"].as_u64()
        ),
        (1, Some(1))
    );
    let (ok, out, _) = lograil(
        &cluster,
        &["dlt", "redrive", "--from", &dlt, "--to", &topic, "--json"],
    );
    assert!(ok);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            report["redriven"].as_array().unwrap().len(),
            report["already"].as_u64()
        ),
        (0, Some(2))
    );
    assert_eq!(count(&cluster, &topic).await, 2);
    let (ok, _, err) = lograil(&cluster, &["dlt", "list", "--from", &unique("missing-dlt")]);
    assert!(!ok && err.contains("does not exist"), "{err}");
}

#[derive(Debug, thiserror::Error)]
#[error("rejected by the ledger service")]
struct Rejected;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_returns_every_dead_letter_exactly_once_at_the_requested_rate() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("redrive", 2).await;
    let group = unique("redrive-g");
    // One attempt: every failure goes straight to the DLT (our own dead letters).
    let config = chain_config(&cluster, &topic, &group)
        .max_attempts(1)
        .outage(None);
    let running = Running::start(&cluster, config, |_d: Delivery| async {
        Err::<(), _>(HandlerError::from(Rejected))
    })
    .await;
    let values: Vec<String> = (0..40).map(|i| format!("v{i}")).collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    produce_values(&cluster, &topic, &refs).await;
    wait_for("40 dead letters", 60, || {
        running.count(|e| matches!(e, Event::DeadLettered { .. })) == 40
    })
    .await;
    running.stop().await;
    let dlt = format!("{topic}-dlt");
    assert_eq!(count(&cluster, &dlt).await, 40);

    let rate = 20.0;
    let started = Instant::now();
    let (ok, out, err) = lograil(
        &cluster,
        &["dlt", "redrive", "--from", &dlt, "--rate", "20/s", "--json"],
    );
    let took = started.elapsed();
    assert!(ok, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["redriven"].as_array().unwrap().len(), 40);
    let seconds = report["seconds"].as_f64().unwrap();
    eprintln!(
        "redrove 40 records at --rate 20/s in {seconds:.2} s ({:.1}/s), command {took:?}",
        40.0 / seconds
    );
    // Paced: the 40th record goes 39/20 s after the first at the earliest.
    assert!(
        seconds >= 39.0 / rate,
        "{seconds} s is faster than the rate allows"
    );

    let main = records_of(&cluster, &topic).await;
    let redriven: Vec<_> = main
        .iter()
        .filter(|r| header(r, h::REDRIVE_OF).is_some())
        .collect();
    assert_eq!(redriven.len(), 40);
    let sources: BTreeSet<Vec<u8>> = redriven
        .iter()
        .map(|r| header(r, h::REDRIVE_OF).unwrap().to_vec())
        .collect();
    assert_eq!(sources.len(), 40, "each dead letter once");
    let values_back: BTreeSet<String> = redriven.iter().map(|r| value_of(r)).collect();
    assert_eq!(values_back, values.iter().cloned().collect());

    let (ok, out, _) = lograil(&cluster, &["dlt", "redrive", "--from", &dlt, "--json"]);
    assert!(ok);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            report["redriven"].as_array().unwrap().len(),
            report["already"].as_u64()
        ),
        (0, Some(40))
    );
    assert_eq!(count(&cluster, &topic).await, 80);
}
