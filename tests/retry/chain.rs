//! The retry chain: a failure that heals on attempt 3 (one effect, delays as configured, Spring
//! headers on the retry records), fatal errors, panics, expired deadlines, malformed headers,
//! and the outage budget.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use retry_topic::headers as h;
use retry_topic::{Delivery, Event, Handler, HandlerError, OutageBudget, RetryConfig};

use crate::harness::{
    chain_config, count, header, produce, produce_values, records_of, value_of, wait_for, Effects,
    Running,
};
use test_support::cluster::{unique, TestCluster};

#[derive(Debug, thiserror::Error)]
#[error("downstream timed out")]
struct Downstream;

#[derive(Debug, thiserror::Error)]
#[error("order {0} is malformed")]
struct Malformed(String);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_that_heals_on_attempt_3_has_one_effect_at_the_configured_delays() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("heal", 2).await;
    let group = unique("heal-g");
    let delays = [Duration::from_millis(400), Duration::from_millis(800)];
    let config = chain_config(&cluster, &topic, &group)
        .delays(delays)
        .max_attempts(4);
    let effects = Effects::default();
    // Wall-clock time of each attempt at "flaky".
    let attempts: Arc<Mutex<Vec<(u32, Instant)>>> = Arc::default();
    let (e, a) = (effects.clone(), attempts.clone());
    let handler = move |d: Delivery| {
        let (e, a) = (e.clone(), a.clone());
        async move {
            let value = value_of(&d.record);
            if value == "flaky" {
                a.lock().unwrap().push((d.attempt, Instant::now()));
                if d.attempt < 3 {
                    return Err(HandlerError::from(Downstream));
                }
            }
            e.add(&value);
            Ok(())
        }
    };
    let running = Running::start(&cluster, config, handler).await;
    produce_values(&cluster, &topic, &["before", "flaky", "after-1", "after-2"]).await;
    wait_for("all four records processed", 60, || effects.len() == 4).await;
    // Nothing more comes: wait past another full delay, then look.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    running.stop().await;

    assert_eq!(
        effects.get(),
        BTreeMap::from([
            ("after-1".to_string(), 1),
            ("after-2".to_string(), 1),
            ("before".to_string(), 1),
            ("flaky".to_string(), 1),
        ])
    );
    let attempts = attempts.lock().unwrap().clone();
    assert_eq!(
        attempts.iter().map(|a| a.0).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1].1 - w[0].1).collect();
    eprintln!("configured delays {delays:?}, observed gaps between attempts {gaps:?}");
    for (gap, delay) in gaps.iter().zip(delays) {
        // Never early. How late (the pause granularity: a fetch wait, a commit, plus a noisy
        // machine's scheduling) is printed above, not asserted.
        assert!(
            *gap >= delay,
            "attempt came {gap:?} after the last, before its {delay:?}"
        );
    }
    assert_eq!(count(&cluster, &format!("{topic}-dlt")).await, 0);

    // The retry records carry Spring's headers in Spring's encodings.
    let first = records_of(&cluster, &format!("{topic}-retry-400")).await;
    assert_eq!(first.len(), 1);
    let r = &first[0];
    assert_eq!(header(r, h::ATTEMPTS), Some(&[0, 0, 0, 2][..]));
    let history = h::history(r).unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!((history[0].attempt, history[0].offset), (1, 1));
    // Due the delay after the failure (Spring: failure time + back-off).
    let due = h::read_big_integer(header(r, h::BACKOFF_TIMESTAMP).unwrap()).unwrap();
    assert_eq!(due, history[0].at + 400);
    let original_ts = h::read_big_integer(header(r, h::ORIGINAL_TIMESTAMP).unwrap()).unwrap();
    assert_eq!(header(r, h::ORIGINAL_TOPIC), Some(topic.as_bytes()));
    assert_eq!(
        header(r, h::ORIGINAL_PARTITION),
        Some(&0i32.to_be_bytes()[..])
    );
    assert_eq!(header(r, h::ORIGINAL_OFFSET), Some(&1i64.to_be_bytes()[..]));
    assert_eq!(
        header(r, h::ORIGINAL_TIMESTAMP_KAFKA),
        Some(&original_ts.to_be_bytes()[..])
    );
    assert_eq!(
        header(r, h::DLT_ORIGINAL_CONSUMER_GROUP),
        Some(group.as_bytes())
    );
    assert!(std::str::from_utf8(header(r, h::EXCEPTION_FQCN).unwrap())
        .unwrap()
        .ends_with("Downstream"));
    assert_eq!(
        header(r, h::EXCEPTION_MESSAGE),
        Some(&b"downstream timed out"[..])
    );
    let second = records_of(&cluster, &format!("{topic}-retry-800")).await;
    assert_eq!(second.len(), 1);
    assert_eq!(header(&second[0], h::ATTEMPTS), Some(&[0, 0, 0, 3][..]));
    assert_eq!(h::history(&second[0]).unwrap().len(), 2);
    // The original timestamp stays the main record's through the chain.
    assert_eq!(
        h::read_big_integer(header(&second[0], h::ORIGINAL_TIMESTAMP).unwrap()),
        Some(original_ts)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fatal_errors_expired_deadlines_and_bad_headers_go_to_the_dlt_and_a_panic_is_retried() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("fatal", 1).await;
    let group = unique("fatal-g");
    let config = chain_config(&cluster, &topic, &group)
        .delays([Duration::from_millis(200)])
        .max_attempts(3);
    let effects = Effects::default();
    let calls = Effects::default();
    let (e, c) = (effects.clone(), calls.clone());
    let handler = move |d: Delivery| {
        let (e, c) = (e.clone(), c.clone());
        async move {
            let value = value_of(&d.record);
            c.add(&value);
            match value.as_str() {
                "fatal" => return Err(HandlerError::fatal(Malformed("fatal".into()))),
                "panic" if d.attempt == 1 => panic!("handler bug on attempt 1"),
                _ => {}
            }
            e.add(&value);
            Ok(())
        }
    };
    let running = Running::start(&cluster, config, handler).await;
    let past = (retry_topic_now() - 1000).to_string();
    let future = (retry_topic_now() + 3_600_000).to_be_bytes();
    let offsets = produce(
        &cluster,
        &topic,
        0,
        &[
            (
                Some("k1"),
                "fatal",
                vec![("trace", Bytes::from_static(b"t-1"))],
            ),
            (None, "panic", vec![]),
            (None, "late", vec![("deadline", Bytes::from(past))]),
            (
                None,
                "in-time",
                vec![("deadline", Bytes::copy_from_slice(&future))],
            ),
            (
                None,
                "bad-deadline",
                vec![("deadline", Bytes::from_static(b"next week"))],
            ),
        ],
    )
    .await;
    // A record in the retry topic whose backoff header is not a long.
    produce(
        &cluster,
        &format!("{topic}-retry"),
        0,
        &[(
            None,
            "garbled",
            vec![(h::BACKOFF_TIMESTAMP, Bytes::from_static(&[1; 12]))],
        )],
    )
    .await;
    wait_for("panic retried, in-time processed", 60, || {
        effects.len() == 2
    })
    .await;
    wait_for("four dead letters", 60, || {
        running.count(|e| matches!(e, Event::DeadLettered { .. })) == 4
    })
    .await;
    running.stop().await;

    assert_eq!(effects.get().get("panic"), Some(&1));
    assert_eq!(effects.get().get("in-time"), Some(&1));
    let calls = calls.get();
    // Attempt 1 panicked, attempt 2 ran (its effect above, once). At least once: a rebalance
    // between a forward and its commit hands the source record out again.
    assert!(
        calls.get("panic").is_some_and(|n| *n >= 2),
        "attempt 1 panicked, attempt 2 ran: {calls:?}"
    );
    assert_eq!(calls.get("fatal"), Some(&1), "fatal: no retry");
    assert_eq!(
        calls.get("late"),
        None,
        "an expired record is never handled"
    );
    assert_eq!(calls.get("bad-deadline"), None);

    let dlt: BTreeMap<String, consumer::ConsumerRecord> =
        records_of(&cluster, &format!("{topic}-dlt"))
            .await
            .into_iter()
            .map(|r| (value_of(&r), r))
            .collect();
    assert_eq!(
        dlt.keys().cloned().collect::<Vec<_>>(),
        vec!["bad-deadline", "fatal", "garbled", "late"]
    );
    // Our DLT records carry Spring's DeadLetterPublishingRecoverer headers, byte for byte.
    let f = &dlt["fatal"];
    assert_eq!(f.key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(header(f, "trace"), Some(&b"t-1"[..]), "user headers kept");
    assert_eq!(header(f, h::DLT_ORIGINAL_TOPIC), Some(topic.as_bytes()));
    assert_eq!(
        header(f, h::DLT_ORIGINAL_PARTITION),
        Some(&[0, 0, 0, 0][..])
    );
    assert_eq!(
        header(f, h::DLT_ORIGINAL_OFFSET),
        Some(&offsets[0].to_be_bytes()[..])
    );
    let main = records_of(&cluster, &topic).await;
    assert_eq!(
        header(f, h::DLT_ORIGINAL_TIMESTAMP),
        Some(&main[0].timestamp.to_be_bytes()[..])
    );
    assert_eq!(
        header(f, h::DLT_ORIGINAL_TIMESTAMP_TYPE),
        Some(&b"CreateTime"[..])
    );
    assert_eq!(
        header(f, h::DLT_ORIGINAL_CONSUMER_GROUP),
        Some(group.as_bytes())
    );
    assert!(
        std::str::from_utf8(header(f, h::DLT_EXCEPTION_FQCN).unwrap())
            .unwrap()
            .ends_with("Malformed")
    );
    assert_eq!(
        header(f, h::DLT_EXCEPTION_MESSAGE),
        Some(&b"order fatal is malformed"[..])
    );
    assert_eq!(header(f, h::ATTEMPTS), Some(&[0, 0, 0, 2][..]));
    assert_eq!(h::history(f).unwrap().len(), 1);
    assert_eq!(
        header(&dlt["late"], h::DLT_EXCEPTION_FQCN),
        Some(&b"expired"[..])
    );
    assert_eq!(
        header(&dlt["bad-deadline"], h::DLT_EXCEPTION_FQCN),
        Some(&b"malformed-header"[..])
    );
    let garbled = &dlt["garbled"];
    assert_eq!(
        header(garbled, h::DLT_EXCEPTION_FQCN),
        Some(&b"malformed-header"[..])
    );
    assert!(
        std::str::from_utf8(header(garbled, h::DLT_EXCEPTION_MESSAGE).unwrap())
            .unwrap()
            .contains(h::BACKOFF_TIMESTAMP)
    );
    assert_eq!(
        header(garbled, h::DLT_ORIGINAL_TOPIC),
        Some(format!("{topic}-retry").as_bytes())
    );
}

fn retry_topic_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The outage tests' chain: one retry topic (200 ms), two attempts, an outage at 4 failures of
/// 5 outcomes, probes every 300 to 600 ms.
fn outage_config(cluster: &TestCluster, topic: &str, group: &str) -> RetryConfig {
    chain_config(cluster, topic, group)
        .delays([Duration::from_millis(200)])
        .max_attempts(2)
        .outage(Some(OutageBudget {
            window: 5,
            failure_ratio: 0.8,
            probe_interval: Duration::from_millis(300),
            probe_max: Duration::from_millis(600),
        }))
}

/// A handler whose downstream fails while `down` is set (a record "poison" always fails, in
/// a class of its own); each record done goes to `effects`.
fn downstream(effects: &Effects, down: &Arc<AtomicBool>) -> impl Handler {
    let (effects, down) = (effects.clone(), down.clone());
    move |d: Delivery| {
        let (e, down) = (effects.clone(), down.clone());
        async move {
            let value = value_of(&d.record);
            if value == "poison" {
                return Err(HandlerError::new("test.Poison", "no renderer for it"));
            }
            if down.load(Ordering::SeqCst) {
                return Err(HandlerError::from(Downstream));
            }
            e.add(&value);
            Ok(())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_pauses_and_probes_instead_of_burning_attempts() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("outage", 1).await;
    let group = unique("outage-g");
    let config = outage_config(&cluster, &topic, &group);
    let down = Arc::new(AtomicBool::new(true));
    let effects = Effects::default();
    let handler = downstream(&effects, &down);
    let running = Running::start(&cluster, config, handler).await;
    let values: Vec<String> = (0..30).map(|i| format!("order-{i}")).collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    produce_values(&cluster, &topic, &refs).await;
    wait_for("outage detected", 60, || {
        running.count(|e| matches!(e, Event::OutageStarted { .. })) == 1
    })
    .await;
    wait_for("two failed probes", 60, || {
        running.count(|e| matches!(e, Event::ProbeFailed { .. })) >= 2
    })
    .await;
    let status = running.status.get();
    assert!(status.outage.is_some(), "the outage is visible: {status:?}");
    // Only the records before the switch took an attempt; nothing was dead-lettered.
    let forwarded = running.count(|e| matches!(e, Event::Forwarded { .. }));
    assert!(
        forwarded <= 4,
        "{forwarded} records burned an attempt during the outage"
    );
    assert_eq!(
        running.count(|e| matches!(e, Event::DeadLettered { .. })),
        0
    );

    down.store(false, Ordering::SeqCst);
    wait_for("every record processed after the outage", 60, || {
        effects.len() == 30
    })
    .await;
    assert!(running.count(|e| matches!(e, Event::OutageEnded)) == 1);
    running.stop().await;
    assert!(
        effects.get().values().all(|n| *n == 1),
        "{:?}",
        effects.get()
    );
    assert_eq!(count(&cluster, &format!("{topic}-dlt")).await, 0);
}

/// A poison record that trips an outage and is then its probe fails its own way (another error
/// class than the outage's): that says nothing of the outage. It takes its attempts into the
/// DLT, and the probe moves on to a partition with records when its own has no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_record_as_the_probe_does_not_hold_the_outage() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("outage-poison", 1).await;
    let group = unique("outage-poison-g");
    let config = outage_config(&cluster, &topic, &group);
    let down = Arc::new(AtomicBool::new(true));
    let effects = Effects::default();
    let handler = downstream(&effects, &down);
    let running = Running::start(&cluster, config, handler).await;
    // Four failures the outage's way, then the poison: the fifth failure of five trips the
    // outage, and the poison, the last record of its partition, is the first probe.
    produce_values(
        &cluster,
        &topic,
        &["order-0", "order-1", "order-2", "order-3", "poison"],
    )
    .await;
    wait_for("outage detected", 60, || {
        running.count(|e| matches!(e, Event::OutageStarted { .. })) == 1
    })
    .await;
    down.store(false, Ordering::SeqCst);
    wait_for("the outage ended and every order processed", 60, || {
        running.count(|e| matches!(e, Event::OutageEnded)) == 1 && effects.len() == 4
    })
    .await;
    wait_for("the poison dead-lettered", 60, || {
        running.count(|e| matches!(e, Event::DeadLettered { .. })) == 1
    })
    .await;
    assert_eq!(
        running.count(|e| matches!(e, Event::ProbeFailed { .. })),
        0,
        "the poison's own failure is no failed probe"
    );
    running.stop().await;
    assert!(
        effects.get().values().all(|n| *n == 1),
        "{:?}",
        effects.get()
    );
    let dead = records_of(&cluster, &format!("{topic}-dlt")).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(value_of(&dead[0]), "poison");
}
