//! The queue consumer: a member of a share group (KIP-932) that receives records one consumer
//! at a time and acknowledges each — accept, release (with a delay on lograil), reject — or
//! renews its lock on it.
//!
//! Each partition leader gets a share session (ShareFetch at epoch 0 opens it; each request
//! moves the epoch on). Acknowledgements wait in an [`AckBook`] and ride on the next
//! ShareFetch to that leader, or go at once with ShareAcknowledge on [`QueueConsumer::commit`],
//! [`Delivery::renew`] and [`QueueConsumer::close`].

mod acks;
mod ledger;
mod membership;

pub use ledger::IdempotencyLedger;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckRequestBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch as FetchAckBatch, FetchPartition, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::{
    ApiKey, GroupId, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
    ShareFetchResponse,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use self::acks::{Ack, AckBook, Batch, RELEASE_DELAY_TAG};
use self::membership::{Assignment, IdPartition};
use crate::cluster::Cluster;
use crate::config::{AckMode, ClientConfig, ConfigError, QueueConfig};
use crate::consumer::decode_all;
use crate::error::{CallError, ErrorCode, NetError};
use crate::util::{lock, text};
use crate::{ConsumerRecord, TopicPartition};

/// Why the queue consumer could not do what was asked.
#[derive(Debug, Clone, thiserror::Error)]
pub enum QueueError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Call(#[from] CallError),
    /// The group refused this member for good (e.g. share groups are disabled on the cluster).
    #[error("share group {group}: {error}")]
    Group { group: String, error: CallError },
    /// The record's lock is no longer this consumer's (its session ended meanwhile).
    #[error("{partition} offset {offset}: no share session holds it any more")]
    NotHeld {
        partition: TopicPartition,
        offset: i64,
    },
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
    pub partition: TopicPartition,
    pub first_offset: i64,
    pub last_offset: i64,
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

#[derive(Debug)]
struct Inner {
    cluster: Arc<Cluster>,
    config: QueueConfig,
    member_id: String,
    assignment: watch::Receiver<Assignment>,
    acks: Mutex<AckBook>,
    /// The records of the last receive (implicit mode accepts what is left of them).
    handed_out: Mutex<Vec<(IdPartition, i64)>>,
    /// Leader broker → its share session.
    sessions: Mutex<HashMap<i32, Arc<tokio::sync::Mutex<Session>>>>,
    failures: Mutex<Vec<AckFailure>>,
    lock_timeout_ms: AtomicI32,
}

/// A share session with one broker.
#[derive(Debug, Default)]
struct Session {
    /// 0: none open.
    epoch: i32,
    partitions: BTreeSet<IdPartition>,
}

impl Session {
    fn advance(&mut self) {
        self.epoch = if self.epoch == i32::MAX {
            1
        } else {
            self.epoch + 1
        };
    }

    fn reset(&mut self) {
        self.epoch = 0;
        self.partitions.clear();
    }
}

impl QueueConsumer {
    /// Parses the Java share consumer's properties and connects.
    pub async fn from_config(config: &ClientConfig) -> Result<QueueConsumer, QueueError> {
        QueueConsumer::new(QueueConfig::from_config(config)?).await
    }

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

impl Inner {
    fn settle_implicit(&self) {
        if self.config.ack_mode != AckMode::Implicit {
            return;
        }
        let handed_out = std::mem::take(&mut *lock(&self.handed_out));
        let mut acks = lock(&self.acks);
        for (partition, offset) in handed_out {
            acks.set_if_absent(partition, offset, Ack::Accept);
        }
    }

    fn session(&self, node: i32) -> Arc<tokio::sync::Mutex<Session>> {
        lock(&self.sessions).entry(node).or_default().clone()
    }

    /// The leader of each partition (metadata refreshed when one is unknown).
    async fn leaders(
        &self,
        partitions: impl IntoIterator<Item = IdPartition>,
    ) -> BTreeMap<i32, Vec<IdPartition>> {
        let partitions: Vec<IdPartition> = partitions.into_iter().collect();
        let mut metadata = self.cluster.metadata();
        let known = |m: &crate::cluster::Metadata, (id, p): &IdPartition| {
            m.topic_name(*id).and_then(|t| m.leader(t, *p))
        };
        if partitions.iter().any(|tp| known(&metadata, tp).is_none()) {
            if let Ok(fresh) = self.cluster.refresh(metadata.version).await {
                metadata = fresh;
            }
        }
        let mut by_leader: BTreeMap<i32, Vec<IdPartition>> = BTreeMap::new();
        for tp in partitions {
            if let Some(leader) = known(&metadata, &tp) {
                by_leader.entry(leader).or_default().push(tp);
            }
        }
        by_leader
    }

    fn topic_partition(&self, (id, p): IdPartition) -> TopicPartition {
        let metadata = self.cluster.metadata();
        let name = metadata
            .topic_name(id)
            .map_or_else(|| id.to_string(), str::to_string);
        TopicPartition::new(name, p)
    }

    fn fail(&self, partition: IdPartition, batches: &[Batch], error: ErrorCode) {
        tracing::warn!(partition = %self.topic_partition(partition), %error, "acknowledgement refused");
        let tp = self.topic_partition(partition);
        lock(&self.failures).extend(batches.iter().map(|b| AckFailure {
            partition: tp.clone(),
            first_offset: b.first,
            last_offset: b.last,
            error,
        }));
    }

    /// One ShareFetch per leader of `assigned`, in parallel, each carrying the pending
    /// acknowledgements of its partitions.
    async fn fetch_round(
        self: &Arc<Self>,
        assigned: &BTreeSet<IdPartition>,
        wait: Duration,
    ) -> Result<Vec<Delivery>, QueueError> {
        self.flush_unrouted().await;
        let by_leader = self.leaders(assigned.iter().copied()).await;
        let fetches = by_leader.into_iter().map(|(node, partitions)| {
            let inner = self.clone();
            async move { inner.fetch_from(node, partitions, wait).await }
        });
        let results = futures_util::future::join_all(fetches).await;
        let mut out = Vec::new();
        for result in results {
            match result {
                Ok(mut got) => out.append(&mut got),
                Err(QueueError::Call(e)) if e.is_retriable() => {
                    tracing::debug!(error = %e, "share fetch failed; retrying");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    async fn fetch_from(
        self: &Arc<Self>,
        node: i32,
        partitions: Vec<IdPartition>,
        wait: Duration,
    ) -> Result<Vec<Delivery>, QueueError> {
        let connection = self.cluster.connection(node).await?;
        let slot = self.session(node);
        let mut session = slot.lock().await;
        let assigned: BTreeSet<IdPartition> = partitions.into_iter().collect();
        let acks = if session.epoch == 0 {
            // Held under a session that has ended: the broker has released them already.
            let stale = lock(&self.acks).take(|p| assigned.contains(p));
            for (p, batches) in &stale {
                self.fail(*p, batches, ErrorCode::ShareSessionNotFound);
            }
            BTreeMap::new()
        } else {
            let held = session.partitions.clone();
            lock(&self.acks).take(|p| held.contains(p) && assigned.contains(p))
        };
        let add: Vec<IdPartition> = assigned
            .iter()
            .filter(|p| session.epoch == 0 || !session.partitions.contains(p))
            .copied()
            .collect();
        let forget: Vec<IdPartition> = if session.epoch == 0 {
            Vec::new()
        } else {
            session.partitions.difference(&assigned).copied().collect()
        };
        let mut listed: BTreeMap<IdPartition, Vec<FetchAckBatch>> =
            add.iter().map(|p| (*p, Vec::new())).collect();
        for (p, batches) in &acks {
            listed
                .entry(*p)
                .or_default()
                .extend(batches.iter().map(|b| {
                    let batch = FetchAckBatch::default()
                        .with_first_offset(b.first)
                        .with_last_offset(b.last)
                        .with_acknowledge_types(b.types.clone());
                    match &b.delay_tag {
                        Some(tag) => {
                            batch.with_unknown_tagged_field(RELEASE_DELAY_TAG, tag.clone())
                        }
                        None => batch,
                    }
                }));
        }
        let request = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(text(&self.config.group_id))))
            .with_member_id(Some(text(&self.member_id)))
            .with_share_session_epoch(session.epoch)
            .with_max_wait_ms(i32::try_from(wait.as_millis()).unwrap_or(i32::MAX))
            .with_min_bytes(1)
            .with_max_bytes(self.config.fetch_max_bytes)
            .with_max_records(self.config.max_poll_records)
            .with_batch_size(self.config.max_poll_records)
            .with_topics(group_by_topic(
                listed,
                |(p, batches)| {
                    FetchPartition::default()
                        .with_partition_index(p)
                        .with_acknowledgement_batches(batches)
                },
                |id, partitions| {
                    FetchTopic::default()
                        .with_topic_id(id)
                        .with_partitions(partitions)
                },
            ))
            .with_forgotten_topics_data(group_by_topic(
                forget.iter().map(|p| (*p, ())).collect(),
                |(p, ())| p,
                |id, partitions| {
                    ForgottenTopic::default()
                        .with_topic_id(id)
                        .with_partitions(partitions)
                },
            ));
        let version = connection.version::<ShareFetchRequest>(2)?;
        let response: ShareFetchResponse = match connection
            .call_with_timeout(&request, version, connection.request_timeout() + wait)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                // The broker releases what the session held when the connection goes.
                session.reset();
                connection.close();
                for (p, batches) in &acks {
                    self.fail(*p, batches, ErrorCode::NetworkException);
                }
                return Err(e.into());
            }
        };
        if let Some(code) = ErrorCode::try_from_code(response.error_code) {
            session.reset();
            for (p, batches) in &acks {
                self.fail(*p, batches, code);
            }
            return match code {
                ErrorCode::ShareSessionNotFound
                | ErrorCode::InvalidShareSessionEpoch
                | ErrorCode::UnknownMemberId => Ok(Vec::new()),
                _ => Err(CallError::broker(
                    ApiKey::ShareFetch,
                    format!("share group {}", self.config.group_id),
                    code,
                )
                .into()),
            };
        }
        session.advance();
        session.partitions.extend(add);
        for p in &forget {
            session.partitions.remove(p);
        }
        drop(session);
        if response.acquisition_lock_timeout_ms > 0 {
            self.lock_timeout_ms
                .store(response.acquisition_lock_timeout_ms, Ordering::Relaxed);
        }
        let mut out = Vec::new();
        for topic in response.responses {
            for partition in topic.partitions {
                let key = (topic.topic_id, partition.partition_index);
                if let Some(code) = ErrorCode::try_from_code(partition.acknowledge_error_code) {
                    if let Some(batches) = acks.get(&key) {
                        self.fail(key, batches, code);
                    }
                }
                if let Some(code) = ErrorCode::try_from_code(partition.error_code) {
                    tracing::debug!(partition = %self.topic_partition(key), %code, "share fetch partition error");
                    if code.is_retriable() {
                        let seen = self.cluster.metadata().version;
                        let _ = self.cluster.refresh(seen).await;
                    }
                    continue;
                }
                out.extend(self.deliveries(key, partition.records, &partition.acquired_records));
            }
        }
        Ok(out)
    }

    /// The acquired records of one partition as deliveries; offsets acquired without a record
    /// (compacted away, control records) are acknowledged as gaps.
    fn deliveries(
        self: &Arc<Self>,
        key: IdPartition,
        records: Option<bytes::Bytes>,
        acquired: &[kafka_protocol::messages::share_fetch_response::AcquiredRecords],
    ) -> Vec<Delivery> {
        if acquired.is_empty() {
            return Vec::new();
        }
        let tp = self.topic_partition(key);
        let topic: Arc<str> = tp.topic.as_str().into();
        let decoded = match decode_all(&topic, key.1, records.unwrap_or_default()) {
            Ok(records) => records,
            Err((offset, reason)) => {
                // Unreadable: left to its lock (it comes back, counts towards the limit).
                tracing::warn!(partition = %tp, offset, reason, "corrupt records in a share fetch");
                return Vec::new();
            }
        };
        // Records come in offset order; the acquired ranges are walked in order beside them.
        let mut ranges: Vec<_> = acquired.iter().collect();
        ranges.sort_by_key(|r| r.first_offset);
        let mut records = decoded.into_iter().peekable();
        let mut out = Vec::new();
        let mut acks = lock(&self.acks);
        // Offsets of an overlap (a broker's mistake) are handed out once.
        let mut next = i64::MIN;
        for range in ranges {
            for offset in range.first_offset.max(next)..=range.last_offset {
                next = offset + 1;
                while records.next_if(|r| r.offset < offset).is_some() {}
                match records.next_if(|r| r.offset == offset) {
                    Some(record) => out.push(Delivery {
                        record,
                        delivery_count: range.delivery_count,
                        partition: key,
                        inner: self.clone(),
                    }),
                    None => acks.set(key, offset, Ack::Gap),
                }
            }
        }
        out
    }

    /// Acknowledgements of partitions no longer assigned go alone (ShareAcknowledge) while
    /// their session still holds them; any left then have no session and are refused.
    async fn flush_unrouted(&self) {
        let assigned = self.assignment.borrow().partitions.clone();
        if !lock(&self.acks).any(|p| !assigned.contains(p)) {
            return;
        }
        if let Err(e) = self
            .acknowledge_matching(|p| !assigned.contains(p), false)
            .await
        {
            tracing::debug!(error = %e, "acknowledging revoked partitions failed");
        }
        let stale = lock(&self.acks).take(|p| !assigned.contains(p));
        for (p, batches) in &stale {
            self.fail(*p, batches, ErrorCode::ShareSessionNotFound);
        }
    }

    /// Sends pending acknowledgements with ShareAcknowledge, one per leader; `close` also
    /// ends each session (epoch -1), releasing whatever it still holds.
    async fn acknowledge_now(&self, close: bool) -> Result<(), QueueError> {
        self.acknowledge_matching(|_| true, close).await
    }

    async fn acknowledge_matching(
        &self,
        wanted: impl Fn(&IdPartition) -> bool,
        close: bool,
    ) -> Result<(), QueueError> {
        let nodes: Vec<(i32, Arc<tokio::sync::Mutex<Session>>)> = lock(&self.sessions)
            .iter()
            .map(|(n, s)| (*n, s.clone()))
            .collect();
        let mut result = Ok(());
        for (node, slot) in nodes {
            let mut session = slot.lock().await;
            if session.epoch == 0 {
                continue;
            }
            let held = session.partitions.clone();
            let acks = lock(&self.acks).take(|p| held.contains(p) && wanted(p));
            if acks.is_empty() && !close {
                continue;
            }
            let epoch = if close { -1 } else { session.epoch };
            match self.send_acks(node, epoch, &acks, false).await {
                Ok(()) => {
                    if close {
                        session.reset();
                    } else {
                        session.advance();
                    }
                }
                Err(e) => {
                    session.reset();
                    result = Err(e);
                }
            }
        }
        result
    }

    /// One ShareAcknowledge to `node`; refused acknowledgements are recorded as failures.
    async fn send_acks(
        &self,
        node: i32,
        epoch: i32,
        acks: &BTreeMap<IdPartition, Vec<Batch>>,
        renew: bool,
    ) -> Result<(), QueueError> {
        let connection = self.cluster.connection(node).await?;
        let request = ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(text(&self.config.group_id))))
            .with_member_id(Some(text(&self.member_id)))
            .with_share_session_epoch(epoch)
            .with_is_renew_ack(renew)
            .with_topics(group_by_topic(
                acks.clone(),
                |(p, batches)| {
                    AcknowledgePartition::default()
                        .with_partition_index(p)
                        .with_acknowledgement_batches(
                            batches
                                .into_iter()
                                .map(|b| {
                                    let batch = AckRequestBatch::default()
                                        .with_first_offset(b.first)
                                        .with_last_offset(b.last)
                                        .with_acknowledge_types(b.types);
                                    match b.delay_tag {
                                        Some(tag) => {
                                            batch.with_unknown_tagged_field(RELEASE_DELAY_TAG, tag)
                                        }
                                        None => batch,
                                    }
                                })
                                .collect(),
                        )
                },
                |id, partitions| {
                    AcknowledgeTopic::default()
                        .with_topic_id(id)
                        .with_partitions(partitions)
                },
            ));
        let version = connection.version::<ShareAcknowledgeRequest>(2)?;
        if renew && version < 2 {
            return Err(NetError::Unsupported {
                addr: format!("broker {node}"),
                api: ApiKey::ShareAcknowledge,
            }
            .into());
        }
        let response: ShareAcknowledgeResponse = match connection.call_at(&request, version).await {
            Ok(r) => r,
            Err(e) => {
                connection.close();
                for (p, batches) in acks {
                    self.fail(*p, batches, ErrorCode::NetworkException);
                }
                return Err(e.into());
            }
        };
        if let Some(code) = ErrorCode::try_from_code(response.error_code) {
            for (p, batches) in acks {
                self.fail(*p, batches, code);
            }
            return Err(CallError::broker(
                ApiKey::ShareAcknowledge,
                format!("share group {}", self.config.group_id),
                code,
            )
            .into());
        }
        if response.acquisition_lock_timeout_ms > 0 {
            self.lock_timeout_ms
                .store(response.acquisition_lock_timeout_ms, Ordering::Relaxed);
        }
        for topic in &response.responses {
            for partition in &topic.partitions {
                let key = (topic.topic_id, partition.partition_index);
                if let Some(code) = ErrorCode::try_from_code(partition.error_code) {
                    if let Some(batches) = acks.get(&key) {
                        self.fail(key, batches, code);
                    }
                }
            }
        }
        Ok(())
    }

    async fn renew(
        &self,
        partition: IdPartition,
        record: &ConsumerRecord,
    ) -> Result<(), QueueError> {
        let not_held = || QueueError::NotHeld {
            partition: TopicPartition::new(record.topic.as_ref(), record.partition),
            offset: record.offset,
        };
        let leaders = self.leaders([partition]).await;
        let node = *leaders.keys().next().ok_or_else(not_held)?;
        let slot = self.session(node);
        let mut session = slot.lock().await;
        if session.epoch == 0 || !session.partitions.contains(&partition) {
            return Err(not_held());
        }
        let batch = Batch {
            first: record.offset,
            last: record.offset,
            types: vec![4],
            delay_tag: None,
        };
        let acks = BTreeMap::from([(partition, vec![batch])]);
        let before = lock(&self.failures).len();
        match self.send_acks(node, session.epoch, &acks, true).await {
            Ok(()) => session.advance(),
            Err(e) => {
                session.reset();
                return Err(e);
            }
        }
        let mut failures = lock(&self.failures);
        if failures.len() > before {
            let refused = failures.split_off(before);
            return Err(CallError::broker(
                ApiKey::ShareAcknowledge,
                refused[0].partition.to_string(),
                refused[0].error,
            )
            .into());
        }
        Ok(())
    }
}

/// Groups per-partition items into per-topic request entries, in topic id order.
fn group_by_topic<V, P, T>(
    items: BTreeMap<IdPartition, V>,
    partition: impl Fn((i32, V)) -> P,
    topic: impl Fn(uuid::Uuid, Vec<P>) -> T,
) -> Vec<T> {
    let mut by_topic: BTreeMap<uuid::Uuid, Vec<P>> = BTreeMap::new();
    for ((id, p), v) in items {
        by_topic.entry(id).or_default().push(partition((p, v)));
    }
    by_topic
        .into_iter()
        .map(|(id, partitions)| topic(id, partitions))
        .collect()
}
