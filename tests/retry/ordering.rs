//! Per-key ordering: records of a key in retry park the key's later records in the chain; they
//! come back in their original order once it heals, other keys flow meanwhile, and the parked
//! key is visible from the API and from `lograil dlt parked`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use retry_topic::{Delivery, Event, HandlerError};

use crate::harness::{chain_config, lograil, produce, value_of, wait_for, Effects, Running};
use test_support::cluster::{unique, TestCluster};

#[derive(Debug, thiserror::Error)]
#[error("inventory service down for this customer")]
struct Down;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_a_parked_key_come_back_in_order_after_it_heals() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("keys", 1).await;
    let group = unique("keys-g");
    let config = chain_config(&cluster, &topic, &group)
        .delays([Duration::from_millis(300), Duration::from_millis(600)])
        .max_attempts(6)
        .key_ordering(true);
    // a-0 fails until `heal` is set; every success is logged in order with its time.
    let heal = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let effects = Effects::default();
    let (h, d, e) = (heal.clone(), done.clone(), effects.clone());
    let handler = move |del: Delivery| {
        let (h, d, e) = (h.clone(), d.clone(), e.clone());
        async move {
            let value = value_of(&del.record);
            if value == "a-0" && !h.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(HandlerError::from(Down));
            }
            e.add(&value);
            d.lock().unwrap().push((value, Instant::now()));
            Ok(())
        }
    };
    let running = Running::start(&cluster, config, handler).await;
    let mut records = Vec::new();
    for i in 0..5 {
        records.push((Some("a"), format!("a-{i}"), vec![]));
        records.push((Some("b"), format!("b-{i}"), vec![]));
    }
    let refs: Vec<_> = records
        .iter()
        .map(|(k, v, h)| (*k, v.as_str(), h.clone()))
        .collect();
    produce(&cluster, &topic, 0, &refs).await;

    wait_for("every b record processed", 60, || {
        done.lock()
            .unwrap()
            .iter()
            .filter(|(v, _)| v.starts_with("b-"))
            .count()
            == 5
    })
    .await;
    wait_for("a parked with 5 records", 60, || {
        running
            .status
            .get()
            .parked
            .iter()
            .any(|k| k.key == "a" && k.records == 5)
    })
    .await;
    let parked = running.status.get().parked;
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert_eq!(parked[0].head_offset, 0);
    assert!(
        parked[0].reason.contains("inventory service down"),
        "{parked:?}"
    );
    assert!(done
        .lock()
        .unwrap()
        .iter()
        .all(|(v, _)| v.starts_with("b-")));
    // The CLI sees the same key from the retry topics.
    let (ok, out, err) = lograil(
        &cluster,
        &[
            "dlt", "parked", "--topic", &topic, "--group", &group, "--json",
        ],
    );
    assert!(ok, "{err}");
    let keys: serde_json::Value = serde_json::from_str(&out).unwrap();
    let keys = keys.as_array().unwrap();
    assert_eq!(keys.len(), 1, "{out}");
    assert_eq!(keys[0]["key"], "a");
    assert!(keys[0]["records"].as_u64().unwrap() >= 1, "{out}");

    heal.store(true, std::sync::atomic::Ordering::SeqCst);
    wait_for("every a record processed", 60, || effects.len() == 10).await;
    wait_for("no key parked", 30, || {
        running.status.get().parked.is_empty()
    })
    .await;
    let parks = running.count(|e| matches!(e, Event::Parked { .. }));
    running.stop().await;

    let order: Vec<String> = done
        .lock()
        .unwrap()
        .iter()
        .filter(|(v, _)| v.starts_with("a-"))
        .map(|(v, _)| v.clone())
        .collect();
    assert_eq!(order, vec!["a-0", "a-1", "a-2", "a-3", "a-4"]);
    assert!(
        effects.get().values().all(|n| *n == 1),
        "{:?}",
        effects.get()
    );
    assert!(parks >= 4, "a-1..a-4 were parked ({parks} parks)");
    eprintln!(
        "{parks} parks (a record is parked again each time it reaches the head before a-0 heals)"
    );
}
