//! Where the client and retry-topic suites run: a fresh lograil broker per test, or the Apache
//! Kafka cluster named by `LOGRAIL_TEST_KAFKA` (shared by all tests; each uses its own topics
//! and groups).
//!
//! On Kafka our client goes through the cluster's SASL_SSL listeners (SCRAM-SHA-512, TLS
//! checked against the cluster's CA: `kafka.sh` writes `client-sasl-ssl.properties`), unless
//! `LOGRAIL_TEST_KAFKA_SECURITY=plaintext`; librdkafka and the raw-protocol helpers use the
//! plaintext listeners ([`TestCluster::plain_bootstrap`], [`TestCluster::address_of`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use consumer::{
    Admin, ClientConfig, Consumer, ConsumerRecord, NewTopic, Producer, ProducerRecord,
    TopicPartition,
};

use crate::broker::TestBroker;

/// Tests that stop Kafka brokers hold this exclusively; all others share it.
static CLUSTER_LOCK: RwLock<()> = RwLock::new(());

/// [`CLUSTER_LOCK`] held for the test's whole run: shared, or exclusive.
#[derive(Debug)]
struct Guard {
    _shared: Option<RwLockReadGuard<'static, ()>>,
    _exclusive: Option<RwLockWriteGuard<'static, ()>>,
}

#[derive(Debug)]
enum Target {
    Lograil { broker: Box<TestBroker> },
    Kafka { dir: PathBuf },
}

/// Where a test runs: a lograil broker of its own in a temporary folder (killed when dropped),
/// or the shared Kafka cluster of `LOGRAIL_TEST_KAFKA`. Holds the cluster lock until dropped:
/// shared, or exclusive from [`TestCluster::start_exclusive`].
#[derive(Debug)]
pub struct TestCluster {
    target: Target,
    /// What our client connects to: the SASL_SSL listeners on a secured Kafka.
    bootstrap: String,
    /// The plaintext listeners (lograil: the broker).
    plain_bootstrap: String,
    /// The security properties our client needs (none on lograil or plaintext Kafka), and the
    /// file they come from (for the CLI's `--command-config`).
    security: Option<(ClientConfig, PathBuf)>,
    _guard: Guard,
}

/// The Kafka cluster's SASL_SSL bootstrap and client properties file, when the suite runs on a
/// Kafka cluster that has them and `LOGRAIL_TEST_KAFKA_SECURITY` is not `plaintext`.
pub fn kafka_security() -> Option<(String, PathBuf)> {
    let dir = kafka_dir()?;
    if std::env::var("LOGRAIL_TEST_KAFKA_SECURITY").is_ok_and(|v| v == "plaintext") {
        return None;
    }
    let bootstrap = std::fs::read_to_string(dir.join("bootstrap-sasl-ssl")).ok()?;
    let properties = dir.join("client-sasl-ssl.properties");
    properties
        .exists()
        .then(|| (bootstrap.trim().to_string(), properties))
}

/// Client properties for `bootstrap`, with the security properties of [`kafka_security`] when
/// the suite runs on a secured Kafka (for processes given only a bootstrap list).
pub fn client_config_for(bootstrap: &str) -> ClientConfig {
    let mut config = match kafka_security() {
        Some((_, file)) => ClientConfig::from_properties_file(&file)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display())),
        None => ClientConfig::new(),
    };
    config.set("bootstrap.servers", bootstrap);
    config
}

/// The Kafka cluster directory, when the suite runs against Kafka.
pub fn kafka_dir() -> Option<PathBuf> {
    std::env::var_os("LOGRAIL_TEST_KAFKA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Whether the suite runs on the Kafka cluster (`LOGRAIL_TEST_KAFKA` set and not empty)
/// rather than on a lograil broker per test.
pub fn on_kafka() -> bool {
    kafka_dir().is_some()
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A name no other test (or earlier run against the same Kafka cluster) uses.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{prefix}-{}-{}-{}",
        std::process::id(),
        nanos % 1_000_000_000,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn kafka_sh(args: &[&str]) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/kafka/kafka.sh");
    let status = Command::new(script).args(args).status().unwrap();
    assert!(status.success(), "kafka.sh {args:?}: {status}");
}

/// A Kafka broker killed by a test; started again (waiting until it is back) when dropped.
#[derive(Debug)]
pub struct KilledNode {
    dir: PathBuf,
    node: i32,
}

impl Drop for KilledNode {
    fn drop(&mut self) {
        kafka_sh(&[
            "restart",
            &self.dir.display().to_string(),
            &self.node.to_string(),
        ]);
    }
}

impl TestCluster {
    /// A lograil broker of its own, or the shared Kafka cluster.
    pub fn start() -> TestCluster {
        let guard = Guard {
            _shared: Some(CLUSTER_LOCK.read().unwrap_or_else(|e| e.into_inner())),
            _exclusive: None,
        };
        TestCluster::with_guard(guard, &[])
    }

    /// As [`TestCluster::start`], with `serve_args` added to the lograil broker's command line
    /// (broker settings a test needs; a Kafka cluster keeps its own).
    pub fn start_with(serve_args: &[&str]) -> TestCluster {
        let guard = Guard {
            _shared: Some(CLUSTER_LOCK.read().unwrap_or_else(|e| e.into_inner())),
            _exclusive: None,
        };
        TestCluster::with_guard(guard, serve_args)
    }

    /// The cluster with no other test running on it (for killing brokers).
    pub fn start_exclusive() -> TestCluster {
        let guard = Guard {
            _shared: None,
            _exclusive: Some(CLUSTER_LOCK.write().unwrap_or_else(|e| e.into_inner())),
        };
        TestCluster::with_guard(guard, &[])
    }

    fn with_guard(guard: Guard, serve_args: &[&str]) -> TestCluster {
        // The client's warnings (batches that expire or run out of retries) by default;
        // RUST_LOG=consumer=debug shows every retry and rebalance.
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("consumer=warn"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init();
        match kafka_dir() {
            Some(dir) => {
                let plain_bootstrap = std::fs::read_to_string(dir.join("bootstrap"))
                    .unwrap_or_else(|e| panic!("{}/bootstrap: {e}", dir.display()))
                    .trim()
                    .to_string();
                let (bootstrap, security) = match kafka_security() {
                    Some((bootstrap, file)) => {
                        let config = ClientConfig::from_properties_file(&file)
                            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                        (bootstrap, Some((config, file)))
                    }
                    None => (plain_bootstrap.clone(), None),
                };
                TestCluster {
                    target: Target::Kafka { dir },
                    bootstrap,
                    plain_bootstrap,
                    security,
                    _guard: guard,
                }
            }
            None => {
                let mut args = vec!["--group-initial-rebalance-delay-ms", "0"];
                args.extend_from_slice(serve_args);
                let broker = TestBroker::start_temp(&args);
                let bootstrap = broker.addr.clone();
                TestCluster {
                    target: Target::Lograil {
                        broker: Box::new(broker),
                    },
                    plain_bootstrap: bootstrap.clone(),
                    bootstrap,
                    security: None,
                    _guard: guard,
                }
            }
        }
    }

    /// The bootstrap list our client uses (with [`TestCluster::config`]'s security
    /// properties).
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The plaintext listeners, for librdkafka and raw-protocol requests.
    pub fn plain_bootstrap(&self) -> &str {
        &self.plain_bootstrap
    }

    /// Whether our client goes through SASL_SSL listeners.
    pub fn is_secured(&self) -> bool {
        self.security.is_some()
    }

    /// The Kafka cluster's directory (certificates in `tls/`), on Kafka.
    pub fn kafka_dir(&self) -> Option<&std::path::Path> {
        match &self.target {
            Target::Kafka { dir } => Some(dir),
            Target::Lograil { .. } => None,
        }
    }

    /// `--bootstrap-server` (and `--command-config` on a secured cluster) for a `lograil`
    /// client command.
    pub fn cli_args(&self) -> Vec<String> {
        let mut args = vec!["--bootstrap-server".to_string(), self.bootstrap.clone()];
        if let Some((_, file)) = &self.security {
            args.extend(["--command-config".to_string(), file.display().to_string()]);
        }
        args
    }

    /// Whether this is the shared Kafka cluster rather than a lograil broker.
    pub fn is_kafka(&self) -> bool {
        matches!(self.target, Target::Kafka { .. })
    }

    /// Replication factor for test topics: 3 on the Kafka cluster (its node count if fewer,
    /// from kafka.sh's `cluster.env`: `kafka.sh start DIR --brokers 1` runs the suite too), the
    /// broker default on lograil.
    pub fn replication(&self) -> i16 {
        match &self.target {
            Target::Kafka { dir } => std::fs::read_to_string(dir.join("cluster.env"))
                .ok()
                .and_then(|env| {
                    env.lines()
                        .find_map(|l| l.strip_prefix("NODES=")?.trim().parse::<i16>().ok())
                })
                .map_or(3, |nodes| nodes.clamp(1, 3)),
            Target::Lograil { .. } => -1,
        }
    }

    /// An admin client connected to this cluster (with [`TestCluster::config`]'s properties);
    /// panics if it cannot connect.
    pub async fn admin(&self) -> Admin {
        Admin::from_config(&self.config()).await.unwrap()
    }

    /// Creates a topic (replicated on Kafka) and waits until every partition has a leader.
    pub async fn create_topic(&self, prefix: &str, partitions: i32) -> String {
        self.create_topic_with(prefix, partitions, &[]).await
    }

    /// As [`TestCluster::create_topic`], with topic `configs` (NAME, VALUE) set; returns the
    /// topic's name, [`unique`]`(prefix)`. Panics if the creation fails.
    pub async fn create_topic_with(
        &self,
        prefix: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> String {
        let name = unique(prefix);
        let mut admin = self.admin().await;
        admin
            .create(&NewTopic {
                name: name.clone(),
                partitions,
                replication_factor: self.replication(),
                configs: configs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            })
            .await
            .unwrap();
        name
    }

    /// Client properties pointing at this cluster (with the security properties on a secured
    /// Kafka).
    pub fn config(&self) -> ClientConfig {
        let mut config = match &self.security {
            Some((security, _)) => security.clone(),
            None => ClientConfig::new(),
        };
        config.set("bootstrap.servers", self.bootstrap.as_str());
        config
    }

    /// A producer of this cluster, `props` set over [`TestCluster::config`]'s; panics if it
    /// cannot be started.
    pub async fn producer(&self, props: &[(&str, &str)]) -> Producer {
        let mut config = self.config();
        for (k, v) in props {
            config.set(*k, *v);
        }
        Producer::from_config(&config).await.unwrap()
    }

    /// Sends `records` with a producer of its own (`props` set) and waits until each is
    /// delivered; their offsets, in order.
    pub async fn produce(
        &self,
        props: &[(&str, &str)],
        records: impl IntoIterator<Item = ProducerRecord>,
    ) -> Vec<i64> {
        let producer = self.producer(props).await;
        let mut deliveries = Vec::new();
        for record in records {
            deliveries.push(producer.send(record).await.unwrap());
        }
        let mut offsets = Vec::new();
        for d in deliveries {
            offsets.push(d.await.unwrap().offset);
        }
        producer.close().await;
        offsets
    }

    /// A consumer with test-friendly group timing (Kafka's minimum session timeout).
    pub async fn consumer(&self, group: Option<&str>, props: &[(&str, &str)]) -> Consumer {
        let mut config = self
            .config()
            .with("session.timeout.ms", "6000")
            .with("heartbeat.interval.ms", "300")
            .with("fetch.max.wait.ms", "200")
            .with("auto.offset.reset", "earliest");
        if let Some(g) = group {
            config.set("group.id", g);
        }
        for (k, v) in props {
            config.set(*k, *v);
        }
        Consumer::from_config(&config).await.unwrap()
    }

    /// The plaintext address of broker `node`, for raw-protocol requests (lograil: the broker;
    /// Kafka: the bootstrap list is in node order, node ids 1..N).
    pub fn address_of(&self, node: i32) -> String {
        match &self.target {
            Target::Lograil { .. } => self.bootstrap.clone(),
            Target::Kafka { .. } => self
                .plain_bootstrap
                .split(',')
                .nth(usize::try_from(node - 1).unwrap())
                .unwrap()
                .to_string(),
        }
    }

    /// The pid of the process serving `node` (lograil: the broker; Kafka: node id = NODE).
    pub fn pid_of(&self, node: i32) -> u32 {
        match &self.target {
            Target::Lograil { broker } => broker.pid(),
            Target::Kafka { dir } => std::fs::read_to_string(dir.join(format!("node-{node}.pid")))
                .unwrap()
                .trim()
                .parse()
                .unwrap(),
        }
    }

    /// SIGSTOP / SIGCONT the process of `node`.
    pub fn signal(&self, node: i32, signal: &str) {
        let pid = self.pid_of(node);
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {pid}");
    }

    /// Kafka only: SIGKILL a broker. It is started again when the returned guard goes (also
    /// when the test fails), so later tests find the whole cluster.
    pub fn kill_node(&self, node: i32) -> KilledNode {
        let Target::Kafka { dir } = &self.target else {
            panic!("kill_node needs the Kafka cluster");
        };
        kafka_sh(&["kill", &dir.display().to_string(), &node.to_string()]);
        KilledNode {
            dir: dir.clone(),
            node,
        }
    }

    /// lograil only: stop the broker (for tests that need it gone).
    pub fn kill_lograil(&mut self) {
        if let Target::Lograil { broker } = &mut self.target {
            broker.kill9();
        }
    }

    /// lograil only: the console's address (when started with `--console-listen`).
    pub fn console_addr(&self) -> Option<String> {
        match &self.target {
            Target::Lograil { broker } => broker.console_addr.clone(),
            Target::Kafka { .. } => None,
        }
    }

    /// lograil only: SIGKILL the broker and start it again on the same data dir and address,
    /// so running clients reconnect; false on Kafka.
    pub fn crash_and_restart_lograil(&mut self) -> bool {
        let Target::Lograil { broker } = &mut self.target else {
            return false;
        };
        broker.kill9();
        broker.restart_at_same_address();
        true
    }
}

/// Every record of `topic` from the beginning to the end offsets it has now, by partition, read
/// with an assign-mode consumer of our client. A partition is read once its last offset before
/// the end has come, so offsets without a record (a compacted topic) are fine.
pub async fn read_all(cluster: &TestCluster, topic: &str) -> BTreeMap<i32, Vec<ConsumerRecord>> {
    let consumer = cluster.consumer(None, &[]).await;
    let admin_partitions = cluster
        .admin()
        .await
        .describe_topic(topic)
        .await
        .unwrap()
        .partitions;
    let partitions: Vec<TopicPartition> = (0..admin_partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    let starts = consumer.beginning_offsets(&partitions).await.unwrap();
    let ends = consumer.end_offsets(&partitions).await.unwrap();
    consumer.assign(&partitions).unwrap();
    consumer.seek_to_beginning(&partitions).unwrap();
    let mut out: BTreeMap<i32, Vec<ConsumerRecord>> = BTreeMap::new();
    // The partitions not yet read to their end, and the last offset of each.
    let mut unread: BTreeMap<i32, i64> = ends
        .iter()
        .filter(|(tp, end)| **end > starts[*tp])
        .map(|(tp, end)| (tp.partition, end - 1))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !unread.is_empty() {
        let record = tokio::time::timeout_at(deadline.into(), consumer.recv())
            .await
            .unwrap_or_else(|_| {
                panic!("{topic} not read to its end offsets {ends:?} in 60 s: partitions {unread:?} (last offset) unread")
            })
            .unwrap();
        if record.offset < ends[&TopicPartition::new(topic, record.partition)] {
            if unread.get(&record.partition) == Some(&record.offset) {
                unread.remove(&record.partition);
            }
            out.entry(record.partition).or_default().push(record);
        }
    }
    consumer.close().await;
    out
}
