//! KIP-467 against lograil and Kafka alike: a Produce refused for some of its records names
//! them (`record_errors`, with the reason in `error_message`), so librdkafka fails only those
//! with the broker's error and the rest of their batch as `_INVALID_DIFFERENT_RECORD`, free to
//! be sent again; one record per batch, the others are stored.

use std::sync::{Arc, Mutex};

use rdkafka::config::ClientConfig as RdConfig;
use rdkafka::producer::{
    BaseRecord, DeliveryResult, Producer as _, ProducerContext, ThreadedProducer,
};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;

use test_support::cluster::{read_all, TestCluster};

/// A record's delivery: `Ok` or librdkafka's error code.
type Outcome = Result<(), RDKafkaErrorCode>;

/// Each record's delivery, by its index.
#[derive(Clone, Default)]
struct Outcomes(Arc<Mutex<Vec<(usize, Outcome)>>>);

impl ClientContext for Outcomes {}

impl ProducerContext for Outcomes {
    type DeliveryOpaque = Box<usize>;

    fn delivery(&self, result: &DeliveryResult<'_>, index: Box<usize>) {
        let outcome = match result {
            Ok(_) => Ok(()),
            Err((e, _)) => Err(e.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail)),
        };
        self.0.lock().unwrap().push((*index, outcome));
    }
}

/// Record `i` of 100: its key (every 10th, 9, 19, …, without one when `keyless`) and its
/// timestamp (every 10th an hour and a half ahead when `ahead`, else now).
fn record(i: usize, keyless: bool, ahead: bool) -> (Option<String>, i64) {
    let tenth = i % 10 == 9;
    let key = (!(keyless && tenth)).then(|| format!("k{i}"));
    let now = log_core::now_ms();
    (key, if ahead && tenth { now + 5_400_000 } else { now })
}

/// Sends 100 records ([`record`]) to partition 0 of `topic`, with `props` set; each record's
/// outcome, in index order.
fn send(
    bootstrap: &str,
    topic: &str,
    (keyless, ahead): (bool, bool),
    props: &[(&str, &str)],
) -> Vec<Outcome> {
    let outcomes = Outcomes::default();
    let mut config = RdConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "false")
        .set("retries", "0");
    for (k, v) in props {
        config.set(*k, *v);
    }
    let producer: ThreadedProducer<Outcomes> =
        config.create_with_context(outcomes.clone()).unwrap();
    for i in 0..100usize {
        let value = format!("v{i}");
        let (key, timestamp) = record(i, keyless, ahead);
        let mut record: BaseRecord<'_, str, str, Box<usize>> =
            BaseRecord::with_opaque_to(topic, Box::new(i))
                .partition(0)
                .payload(value.as_str())
                .timestamp(timestamp);
        if let Some(key) = &key {
            record = record.key(key.as_str());
        }
        producer.send(record).map_err(|(e, _)| e).unwrap();
    }
    producer.flush(std::time::Duration::from_secs(60)).unwrap();
    let mut got = outcomes.0.lock().unwrap().clone();
    got.sort_by_key(|(i, _)| *i);
    assert_eq!(got.len(), 100, "every record reported");
    got.into_iter().map(|(_, outcome)| outcome).collect()
}

/// [`send`] on the blocking pool, in one batch (`batched`) or one record per batch.
async fn sent(bootstrap: &str, topic: &str, mode: (bool, bool), batched: bool) -> Vec<Outcome> {
    let (b, t) = (bootstrap.to_string(), topic.to_string());
    let props: &'static [(&str, &str)] = if batched {
        &[("linger.ms", "200"), ("batch.num.messages", "1000")]
    } else {
        &[("batch.num.messages", "1")]
    };
    tokio::task::spawn_blocking(move || send(&b, &t, mode, props))
        .await
        .unwrap()
}

/// Checks that every 10th record (9, 19, …) got `named` and the others `rest`.
fn expect(outcomes: &[Outcome], named: Outcome, rest: Outcome, what: &str) {
    for (i, outcome) in outcomes.iter().enumerate() {
        let expected = if i % 10 == 9 { named } else { rest };
        assert_eq!(*outcome, expected, "record {i} {what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_keyless_records_for_a_compacted_topic_fails_only_those() {
    let cluster = TestCluster::start();
    let topic = cluster
        .create_topic_with("keyless", 1, &[("cleanup.policy", "compact")])
        .await;
    let bootstrap = cluster.plain_bootstrap().to_string();
    // One batch of 100: the 10 keyless ones are named, the 90 others fail with them.
    // (librdkafka reports named records as INVALID_RECORD when there are several.)
    let batched = sent(&bootstrap, &topic, (true, false), true).await;
    let (invalid, different) = (
        Err(RDKafkaErrorCode::InvalidRecord),
        Err(RDKafkaErrorCode::InvalidDifferentRecord),
    );
    expect(&batched, invalid, different, "of one batch");
    // One record per batch: the 90 keyed ones are stored, the 10 keyless ones refused with
    // the partition's error.
    let single = sent(&bootstrap, &topic, (true, false), false).await;
    expect(&single, invalid, Ok(()), "in a batch of its own");
    let stored = read_all(&cluster, &topic).await;
    let values: Vec<String> = stored[&0]
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap())
        .collect();
    let expected: Vec<String> = (0..100)
        .filter(|i| i % 10 != 9)
        .map(|i| format!("v{i}"))
        .collect();
    assert_eq!(
        values, expected,
        "only the keyed records of the second run, in order"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_over_an_hour_ahead_are_refused_by_kafkas_default_window() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("ahead", 1).await;
    let bootstrap = cluster.plain_bootstrap().to_string();
    // One batch: the 10 records an hour and a half ahead are named, the others fail with
    // them (librdkafka reports named records as INVALID_RECORD when there are several).
    let batched = sent(&bootstrap, &topic, (false, true), true).await;
    let (invalid, different) = (
        Err(RDKafkaErrorCode::InvalidRecord),
        Err(RDKafkaErrorCode::InvalidDifferentRecord),
    );
    expect(&batched, invalid, different, "of one batch");
    // One record per batch: each refused one gets the partition's error, INVALID_TIMESTAMP.
    let single = sent(&bootstrap, &topic, (false, true), false).await;
    let late = Err(RDKafkaErrorCode::InvalidTimestamp);
    expect(&single, late, Ok(()), "in a batch of its own");
    // A window of a day lets them all in.
    let wide = cluster
        .create_topic_with(
            "ahead-day",
            1,
            &[("message.timestamp.after.max.ms", "86400000")],
        )
        .await;
    let b = bootstrap.clone();
    let day = tokio::task::spawn_blocking(move || send(&b, &wide, (false, true), &[]))
        .await
        .unwrap();
    assert!(day.iter().all(Result::is_ok), "{day:?}");
}
