//! The queue consumer: a member of a share group (KIP-932) that receives records one consumer
//! at a time and acknowledges each — accept, release (with a delay on lograil), reject — or
//! renews its lock on it.
//!
//! Each partition leader gets a share session (ShareFetch at epoch 0 opens it; each request
//! moves the epoch on). Acknowledgements wait in an [`AckBook`] and ride on the next
//! ShareFetch to that leader, or go at once with ShareAcknowledge on [`QueueConsumer::commit`],
//! [`Delivery::renew`] and [`QueueConsumer::close`].

mod acks;
mod engine;
mod ledger;
mod membership;
mod request_topics;

pub use ledger::IdempotencyLedger;

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use self::acks::Ack;
use self::engine::Inner;
use self::membership::{Assignment, IdPartition};
use crate::cluster::Cluster;
use crate::config::{ClientConfig, ConfigError, QueueConfig};
use crate::error::{CallError, ErrorCode, NetError};
use crate::util::lock;
use crate::{ConsumerRecord, TopicPartition};

/// Why the queue consumer could not do what was asked.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// The properties were refused ([`QueueConsumer::from_config`]).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A request failed: no bootstrap server answered at start, or a fetch or acknowledgement
    /// failed with a non-retriable error.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The group refused this member for good (e.g. share groups are disabled on the cluster).
    #[error("share group {group}: {error}")]
    Group {
        /// The share group (`group.id`).
        group: String,
        /// The coordinator's refusal.
        error: CallError,
    },
    /// The record's lock is no longer this consumer's (its session ended meanwhile).
    #[error("{partition} offset {offset}: no share session holds it any more")]
    NotHeld {
        /// The record's partition.
        partition: TopicPartition,
        /// The record's offset.
        offset: i64,
    },
    /// `receive` after [`QueueConsumer::close`].
    #[error("the queue consumer is closed")]
    Closed,
}

impl From<NetError> for QueueError {
    fn from(e: NetError) -> QueueError {
        QueueError::Call(e.into())
    }
}

/// An acknowledgement the broker refused (the record's lock had run out, another consumer
/// holds it now, …): the record will be delivered again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckFailure {
    /// The partition of the records.
    pub partition: TopicPartition,
    /// The first offset of the refused run of records.
    pub first_offset: i64,
    /// The last offset of the run, inclusive.
    pub last_offset: i64,
    /// Why: the broker's code (`INVALID_RECORD_STATE` when the lock is lost, …);
    /// `NETWORK_EXCEPTION` when the request carrying it failed; `SHARE_SESSION_NOT_FOUND`
    /// when the session that held the records ended, or the partition was revoked, before it
    /// could be sent.
    pub error: ErrorCode,
}

/// A record received from the queue, held by this consumer until it is acknowledged or its
/// lock runs out. Dereferences to the record.
#[derive(Debug)]
pub struct Delivery {
    record: ConsumerRecord,
    delivery_count: i16,
    partition: IdPartition,
    inner: Arc<Inner>,
}

impl std::ops::Deref for Delivery {
    type Target = ConsumerRecord;

    fn deref(&self) -> &ConsumerRecord {
        &self.record
    }
}

impl Delivery {
    /// The record (also reachable through `Deref`).
    pub fn record(&self) -> &ConsumerRecord {
        &self.record
    }

    /// How many times the record has been delivered, this time included.
    pub fn delivery_count(&self) -> i16 {
        self.delivery_count
    }

    /// The value of the header `name` (its last occurrence).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.record
            .headers
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// Done with: the record is never delivered again. Sent with the next receive or commit.
    pub fn ack(&self) {
        self.acknowledge(Ack::Accept);
    }

    /// Back to the queue for another consumer (or this one), not before `delay` has passed on
    /// lograil; a Kafka broker releases at once. Counts as a delivery.
    pub fn release(&self, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.acknowledge(Ack::Release(ms));
    }

    /// Cannot be processed: never delivered again (dead-lettered where the group has a
    /// dead-letter topic).
    pub fn reject(&self) {
        self.acknowledge(Ack::Reject);
    }

    /// Restarts the record's lock (the group's `share.record.lock.duration.ms` from now), for
    /// work that takes longer than a lock. Needs ShareAcknowledge v2 (lograil, Kafka 4.2+).
    pub async fn renew(&self) -> Result<(), QueueError> {
        self.inner.renew(self.partition, &self.record).await
    }

    fn acknowledge(&self, ack: Ack) {
        lock(&self.inner.acks).set(self.partition, self.record.offset, ack);
    }
}

/// A share-group consumer. `receive` hands out records; each is acknowledged through its
/// [`Delivery`] (explicit mode) or accepted by the next `receive` (implicit mode, the default).
///
/// ```no_run
/// use consumer::{ClientConfig, QueueConsumer};
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let config = ClientConfig::new()
///     .with("bootstrap.servers", "127.0.0.1:9092")
///     .with("group.id", "workers")
///     .with("share.acknowledgement.mode", "explicit");
/// let queue = QueueConsumer::from_config(&config).await?;
/// queue.subscribe(&["tasks"]);
/// loop {
///     for task in queue.receive(Duration::from_secs(1)).await? {
///         match task.value.as_deref() {
///             Some(b"later") => task.release(Duration::from_secs(30)),
///             Some(_) => task.ack(),
///             None => task.reject(),
///         }
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct QueueConsumer {
    inner: Arc<Inner>,
    topics: watch::Sender<Vec<String>>,
    closing: watch::Sender<bool>,
    heartbeat: Mutex<Option<JoinHandle<()>>>,
}

impl QueueConsumer {
    /// Parses the Java share consumer's properties and connects.
    pub async fn from_config(config: &ClientConfig) -> Result<QueueConsumer, QueueError> {
        QueueConsumer::new(QueueConfig::from_config(config)?).await
    }

    /// Connects and starts the membership task (it heartbeats once [`QueueConsumer::subscribe`]
    /// names topics).
    pub async fn new(config: QueueConfig) -> Result<QueueConsumer, QueueError> {
        let cluster = Cluster::connect(config.net.clone()).await?;
        let member_id = membership::new_member_id();
        let (assignment_tx, assignment) = watch::channel(Assignment::default());
        let (topics, topics_rx) = watch::channel(Vec::new());
        let (closing, closing_rx) = watch::channel(false);
        let heartbeat = tokio::spawn(membership::run(
            cluster.clone(),
            config.group_id.clone(),
            member_id.clone(),
            topics_rx,
            assignment_tx,
            closing_rx,
        ));
        Ok(QueueConsumer {
            inner: Arc::new(Inner {
                cluster,
                config,
                member_id,
                assignment,
                acks: Mutex::default(),
                handed_out: Mutex::default(),
                sessions: Mutex::default(),
                failures: Mutex::default(),
                lock_timeout_ms: AtomicI32::new(0),
            }),
            topics,
            closing,
            heartbeat: Mutex::new(Some(heartbeat)),
        })
    }

    /// The member id this consumer has in its share group.
    pub fn member_id(&self) -> &str {
        &self.inner.member_id
    }

    /// Subscribes to `topics` (replacing earlier ones); the coordinator assigns partitions
    /// with the next heartbeat.
    pub fn subscribe(&self, topics: &[&str]) {
        self.inner.cluster.add_interest(topics.iter().copied());
        self.topics
            .send_replace(topics.iter().map(|t| (*t).to_string()).collect());
    }

    /// The partitions assigned to this member now.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        let metadata = self.inner.cluster.metadata();
        let assigned = self.inner.assignment.borrow().partitions.clone();
        assigned
            .into_iter()
            .filter_map(|(id, p)| Some(TopicPartition::new(metadata.topic_name(id)?, p)))
            .collect()
    }

    /// The lock duration the broker last reported (ms; 0 before the first fetch).
    pub fn lock_timeout(&self) -> Duration {
        let ms = self.inner.lock_timeout_ms.load(Ordering::Relaxed);
        Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }

    /// Waits up to `timeout` for records and returns those acquired (possibly none). In
    /// implicit mode the records of the previous call that were not acknowledged otherwise are
    /// accepted first; pending acknowledgements go with the fetch.
    pub async fn receive(&self, timeout: Duration) -> Result<Vec<Delivery>, QueueError> {
        if *self.closing.borrow() {
            return Err(QueueError::Closed);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        self.inner.settle_implicit();
        let mut assignment = self.inner.assignment.clone();
        loop {
            let current = assignment.borrow_and_update().clone();
            if let Some(error) = current.fatal {
                return Err(QueueError::Group {
                    group: self.inner.config.group_id.clone(),
                    error,
                });
            }
            let now = tokio::time::Instant::now();
            if current.partitions.is_empty() {
                // Not assigned yet (a new group's first heartbeat) or nothing to read.
                self.inner.flush_unrouted().await;
                tokio::select! {
                    _ = assignment.changed() => continue,
                    _ = tokio::time::sleep_until(deadline) => return Ok(Vec::new()),
                }
            }
            let wait = deadline.saturating_duration_since(now);
            let got = self.inner.fetch_round(&current.partitions, wait).await?;
            if !got.is_empty() || tokio::time::Instant::now() >= deadline {
                *lock(&self.inner.handed_out) =
                    got.iter().map(|d| (d.partition, d.record.offset)).collect();
                return Ok(got);
            }
        }
    }

    /// Sends every pending acknowledgement now (ShareAcknowledge) and returns those refused
    /// since the last commit, including ones that went with fetches.
    pub async fn commit(&self) -> Result<Vec<AckFailure>, QueueError> {
        self.inner.settle_implicit();
        self.inner.acknowledge_now(false).await?;
        Ok(std::mem::take(&mut *lock(&self.inner.failures)))
    }

    /// Sends the pending acknowledgements, closes the share sessions (records still held go
    /// back to the queue) and leaves the group.
    pub async fn close(&self) -> Result<Vec<AckFailure>, QueueError> {
        if *self.closing.borrow() {
            return Ok(Vec::new());
        }
        self.inner.settle_implicit();
        let sent = self.inner.acknowledge_now(true).await;
        self.closing.send_replace(true);
        let heartbeat = lock(&self.heartbeat).take();
        if let Some(task) = heartbeat {
            let _ = tokio::time::timeout(self.inner.cluster.net.request_timeout, task).await;
        }
        sent?;
        Ok(std::mem::take(&mut *lock(&self.inner.failures)))
    }
}

impl Drop for QueueConsumer {
    fn drop(&mut self) {
        // Without close: the broker releases this member's records when its connections close,
        // and its membership when the session times out.
        if let Some(task) = lock(&self.heartbeat).take() {
            task.abort();
        }
    }
}
