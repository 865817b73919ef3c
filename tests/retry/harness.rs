//! Shared pieces: a retrying consumer run in the background with its events recorded, a
//! producer of test records, and readers of what ended up in a topic.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use consumer::{ConsumerRecord, ProducerRecord};
use retry_topic::{Event, Handler, RetryConfig, RetryError, RetryingConsumer, StatusHandle};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use test_support::cluster::{read_all, TestCluster};
use test_support::kafka::wait_until_async;

/// Client properties for the chain's consumer: the suite's group timing, and short fetch
/// waits so a resumed partition is fetched promptly.
pub fn chain_config(cluster: &TestCluster, topic: &str, group: &str) -> RetryConfig {
    RetryConfig::new(topic, group)
        .replication_factor(cluster.replication())
        .consumer_property("session.timeout.ms", "6000")
        .consumer_property("heartbeat.interval.ms", "300")
        .consumer_property("fetch.max.wait.ms", "100")
        .producer_property("linger.ms", "0")
}

/// A retrying consumer running in the background.
pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), RetryError>>>,
    pub events: Arc<Mutex<Vec<Event>>>,
    pub status: StatusHandle,
}

impl Running {
    pub async fn start(
        cluster: &TestCluster,
        config: RetryConfig,
        handler: impl Handler,
    ) -> Running {
        let client = cluster.config();
        let events = Arc::new(Mutex::new(Vec::new()));
        let log = events.clone();
        let consumer = RetryingConsumer::new(&client, config, handler)
            .await
            .unwrap()
            .on_event(move |e| log.lock().unwrap().push(e.clone()));
        let status = consumer.status();
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(consumer.run(async {
            let _ = stopped.await;
        }));
        Running {
            stop: Some(stop),
            task: Some(task),
            events,
            status,
        }
    }

    pub fn count(&self, pred: impl Fn(&Event) -> bool) -> usize {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| pred(e))
            .count()
    }

    /// Stops it (commit, leave the group) and checks it ran without error.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let result = tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .expect("retrying consumer stops within 60 s")
                .expect("retrying consumer task");
            result.expect("retrying consumer ran without error");
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// A record to send: key, value, headers.
pub type Sent<'a> = (Option<&'a str>, &'a str, Vec<(&'a str, Bytes)>);

/// Sends records to partition `partition` of `topic` and waits for them; returns their offsets.
pub async fn produce(
    cluster: &TestCluster,
    topic: &str,
    partition: i32,
    records: &[Sent<'_>],
) -> Vec<i64> {
    let records = records.iter().map(|(key, value, headers)| {
        let mut r = ProducerRecord::new(topic)
            .value(value.to_string())
            .partition(partition);
        if let Some(k) = key {
            r = r.key(k.to_string());
        }
        for (n, v) in headers {
            r = r.header(n.to_string(), v.clone());
        }
        r
    });
    cluster.produce(&[("acks", "all")], records).await
}

/// Values only, no key or headers.
pub async fn produce_values(cluster: &TestCluster, topic: &str, values: &[&str]) -> Vec<i64> {
    let records: Vec<_> = values.iter().map(|v| (None, *v, Vec::new())).collect();
    produce(cluster, topic, 0, &records).await
}

/// Every record of `topic` now, in partition and offset order.
pub async fn records_of(cluster: &TestCluster, topic: &str) -> Vec<ConsumerRecord> {
    read_all(cluster, topic)
        .await
        .into_values()
        .flatten()
        .collect()
}

/// Records in `topic` now (sum of end offsets minus start offsets).
pub async fn count(cluster: &TestCluster, topic: &str) -> i64 {
    let mut admin = cluster.admin().await;
    let partitions = admin.describe_topic(topic).await.unwrap().partitions;
    let ends = admin.list_offsets(topic, partitions, -1).await.unwrap();
    let starts = admin.list_offsets(topic, partitions, -2).await.unwrap();
    ends.iter().sum::<i64>() - starts.iter().sum::<i64>()
}

/// The value of the last header `name` of `record`.
pub fn header<'a>(record: &'a ConsumerRecord, name: &str) -> Option<&'a [u8]> {
    retry_topic::headers::get(record, name).map(|b| b.as_ref())
}

/// Effects per record value, for "exactly one effect" checks.
#[derive(Debug, Default, Clone)]
pub struct Effects(pub Arc<Mutex<BTreeMap<String, u32>>>);

impl Effects {
    pub fn add(&self, value: &str) {
        *self.0.lock().unwrap().entry(value.to_string()).or_default() += 1;
    }
    pub fn get(&self) -> BTreeMap<String, u32> {
        self.0.lock().unwrap().clone()
    }
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

pub async fn wait_for(what: &str, secs: u64, check: impl FnMut() -> bool) {
    wait_until_async(what, Duration::from_secs(secs), check).await;
}

/// `lograil <args>` with `--bootstrap-server` (and `--command-config` on a secured cluster):
/// whether it succeeded, its stdout and stderr.
pub fn lograil(cluster: &TestCluster, args: &[&str]) -> (bool, String, String) {
    let connection = cluster.cli_args();
    let mut args = args.to_vec();
    args.extend(connection.iter().map(String::as_str));
    test_support::lograil(&args)
}

pub fn value_of(record: &ConsumerRecord) -> String {
    String::from_utf8_lossy(record.value.as_deref().unwrap_or_default()).into_owned()
}
