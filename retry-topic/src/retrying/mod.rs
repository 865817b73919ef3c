//! [`RetryingConsumer`]: one group consumer over the main topic and the retry topics, a handler
//! per record, and the forwarding that keeps a failing record from blocking its partition.
//!
//! The loop takes one record at a time. A retry-topic record not yet due pauses its partition
//! (seeking back to it) until it is; nothing else waits. A failed record is produced to the next
//! topic (acks=all) before its offset is committed, and everything before it is committed
//! first, so a crash in between repeats at most that record's forward.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use consumer::{
    Admin, ClientConfig, CommitError, ConsumeError, Consumer, ConsumerRecord, NewTopic, Producer,
    ProducerRecord, TopicPartition,
};

use crate::config::{Place, RetryConfig, Topology};
use crate::error::RetryError;
use crate::handler::{self, Class, Classifier, Delivery, Handler, HandlerError};
use crate::headers::{self, BadHeader, HeaderSet, HistoryEntry, Origin};
use crate::keyorder::{Decision, KeyChains};
use crate::outage::{Outage, Verdict};
use crate::status::{Event, EventHook, OutageStatus, StatusHandle, WaitingPartition};

mod commit;
mod forward;
mod outage;
mod rebuild;
mod topics;

use topics::ensure_topics;

/// Error class of a record past its `deadline` header.
pub const EXPIRED_CLASS: &str = "expired";
/// Error class of a record whose chain headers cannot be read.
pub const MALFORMED_CLASS: &str = "malformed-header";

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A failure as it is written into headers.
#[derive(Debug, Clone)]
struct Failure {
    class: String,
    message: String,
}

impl Failure {
    fn of(e: &HandlerError) -> Failure {
        Failure {
            class: e.type_name().to_string(),
            message: headers::clip(e.message()),
        }
    }

    fn bad_header(e: &BadHeader) -> Failure {
        Failure {
            class: MALFORMED_CLASS.to_string(),
            message: e.to_string(),
        }
    }
}

/// What the loop does next.
enum Step {
    Stop,
    Timer,
    Record(Result<ConsumerRecord, ConsumeError>),
}

/// A group consumer that runs a handler over the main topic and its retry chain.
///
/// Reads `<topic>` and its retry topics (`<topic>-retry`, …) in one group, forwards failures along the
/// chain and to `<topic>-dlt`, and commits only what is done or durably forwarded.
pub struct RetryingConsumer {
    config: RetryConfig,
    topology: Topology,
    base: ClientConfig,
    consumer: Consumer,
    producer: Producer,
    handler: Box<dyn Handler>,
    classifier: Classifier,
    identity: String,
    /// Partition counts of the chain's topics.
    partitions: BTreeMap<String, i32>,
    assignment: BTreeSet<TopicPartition>,
    /// Retry partitions paused until their head record is due (ms since the epoch).
    due: BTreeMap<TopicPartition, i64>,
    /// The next offset to commit of each partition: every record before it is done.
    done: BTreeMap<TopicPartition, i64>,
    committed: BTreeMap<TopicPartition, i64>,
    last_commit: Instant,
    outage: Option<Outage>,
    /// During an outage: the partition whose next record is the probe, once resumed.
    probe: Option<TopicPartition>,
    /// The probe's partition gave a record since it was resumed (or holds the record that
    /// began the outage).
    probe_answered: bool,
    keys: Option<KeyChains>,
    /// Main partitions whose key chains were rebuilt since they were assigned.
    rebuilt: BTreeSet<i32>,
    status: StatusHandle,
    hook: Option<EventHook>,
}

impl std::fmt::Debug for RetryingConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryingConsumer")
            .field("topology", &self.topology)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl RetryingConsumer {
    /// Connects, creates the missing retry and dead-letter topics (with the main topic's
    /// partition count) and prepares the consumer (`client`: the Java client's properties
    /// common to consumer and producer, such as `bootstrap.servers`).
    pub async fn new(
        client: &ClientConfig,
        config: RetryConfig,
        handler: impl Handler,
    ) -> Result<RetryingConsumer, RetryError> {
        let topology = config.topology()?;
        let partitions = ensure_topics(client, &config, &topology).await?;
        let mut consumer_config = client
            .clone()
            .with("group.id", config.group.as_str())
            .with("enable.auto.commit", "false");
        for (k, v) in &config.consumer_properties {
            consumer_config.set(k.as_str(), v.as_str());
        }
        match consumer_config.get("auto.offset.reset") {
            None => consumer_config.set("auto.offset.reset", "earliest"),
            Some("earliest") => &mut consumer_config,
            Some(other) => {
                return Err(RetryError::Config(crate::ConfigError(format!(
                    "auto.offset.reset={other}: retry topics must be read from the earliest \
                     offset, or records forwarded before the group's first commit are skipped"
                ))))
            }
        };
        let mut producer_config = client
            .clone()
            .with("acks", "all")
            .with("enable.idempotence", "true");
        for (k, v) in &config.producer_properties {
            producer_config.set(k.as_str(), v.as_str());
        }
        if config.exactly_once {
            match consumer_config.get("isolation.level") {
                None | Some("read_committed") => {
                    consumer_config.set("isolation.level", "read_committed");
                }
                Some(other) => {
                    return Err(RetryError::Config(crate::ConfigError(format!(
                        "isolation.level={other}: exactly-once mode reads read_committed, or \
                         forwards of aborted transactions would be handled"
                    ))))
                }
            }
            let id = config
                .transactional_id
                .clone()
                .unwrap_or_else(|| format!("{}-retry-{:016x}", config.group, fastrand::u64(..)));
            producer_config.set("transactional.id", id);
        }
        let consumer = Consumer::from_config(&consumer_config).await?;
        let producer = Producer::from_config(&producer_config).await?;
        if config.exactly_once {
            producer.init_transactions().await?;
        }
        let identity = format!(
            "{}/{}/{}",
            config.group,
            client.get("client.id").unwrap_or("lograil"),
            std::process::id()
        );
        Ok(RetryingConsumer {
            outage: config.outage.clone().map(Outage::new),
            keys: config.key_ordering.then(KeyChains::default),
            config,
            topology,
            base: client.clone(),
            consumer,
            producer,
            handler: Box::new(handler),
            classifier: Classifier::default(),
            identity,
            partitions,
            assignment: BTreeSet::new(),
            due: BTreeMap::new(),
            done: BTreeMap::new(),
            committed: BTreeMap::new(),
            last_commit: Instant::now(),
            probe: None,
            probe_answered: false,
            rebuilt: BTreeSet::new(),
            status: StatusHandle::default(),
            hook: None,
        })
    }

    /// Decides which errors are fatal (default: none; a handler can also say so itself).
    pub fn with_classifier(mut self, classifier: Classifier) -> RetryingConsumer {
        self.classifier = classifier;
        self
    }

    /// Calls `hook` for every [`Event`].
    pub fn on_event(mut self, hook: impl Fn(&Event) + Send + Sync + 'static) -> RetryingConsumer {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// A handle to read the consumer's [`crate::Status`] while it runs.
    pub fn status(&self) -> StatusHandle {
        self.status.clone()
    }

    /// The chain's topics, from the [`RetryConfig`] given to [`RetryingConsumer::new`].
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Runs until `shutdown` completes (then commits what is done and leaves the group) or a
    /// non-recoverable error (nothing uncommitted is lost: it is read again on restart).
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), RetryError> {
        self.consumer.subscribe(&self.topology.read_topics())?;
        let mut shutdown = std::pin::pin!(shutdown);
        let result = loop {
            self.sync_assignment();
            let wake = self.next_wake();
            let step = tokio::select! {
                biased;
                () = &mut shutdown => Step::Stop,
                () = tokio::time::sleep_until(wake.into()) => Step::Timer,
                r = self.consumer.recv() => Step::Record(r),
            };
            let outcome = match step {
                Step::Stop | Step::Record(Err(ConsumeError::Closed)) => break Ok(()),
                Step::Timer => self.on_timer().await,
                Step::Record(Ok(record)) => self.on_record(record).await,
                Step::Record(Err(e)) => Err(RetryError::Consume(e)),
            };
            if let Err(e) = outcome {
                break Err(e);
            }
        };
        self.commit().await;
        self.consumer.close().await;
        self.producer.close().await;
        result
    }

    fn emit(&self, event: Event) {
        if let Some(hook) = &self.hook {
            hook(&event);
        }
    }

    /// Forgets the state of partitions the group took away.
    fn sync_assignment(&mut self) {
        let now: BTreeSet<TopicPartition> = self.consumer.assignment().into_iter().collect();
        if now == self.assignment {
            return;
        }
        let gone: Vec<TopicPartition> = self.assignment.difference(&now).cloned().collect();
        for tp in &gone {
            self.due.remove(tp);
            self.done.remove(tp);
            self.committed.remove(tp);
            if self.probe.as_ref() == Some(tp) {
                self.probe = None;
            }
            if tp.topic == self.topology.main {
                self.rebuilt.remove(&tp.partition);
                if let Some(keys) = &mut self.keys {
                    keys.drop_partition(tp.partition);
                }
            }
        }
        // New partitions start unpaused; during an outage they wait with the others.
        if self.outage.as_ref().is_some_and(Outage::active) {
            let new: Vec<TopicPartition> = now.difference(&self.assignment).cloned().collect();
            let _ = self.consumer.pause(&new);
        }
        self.assignment = now;
        self.publish();
    }

    fn next_wake(&self) -> Instant {
        let now = Instant::now();
        let now_ms = now_ms();
        let mut wake = self.last_commit + self.config.commit_interval;
        if let Some(first) = self.due.values().min() {
            let wait = u64::try_from(first.saturating_sub(now_ms)).unwrap_or(0);
            wake = wake.min(now + Duration::from_millis(wait));
        }
        if let Some(probe) = self.outage.as_ref().and_then(Outage::next_probe) {
            wake = wake.min(probe);
        }
        wake
    }

    async fn on_timer(&mut self) -> Result<(), RetryError> {
        let now_ms = now_ms();
        let ready: Vec<TopicPartition> = self
            .due
            .iter()
            .filter(|(_, due)| **due <= now_ms)
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in &ready {
            self.due.remove(tp);
        }
        let outage = self.outage.as_ref().is_some_and(Outage::active);
        if !ready.is_empty() && !outage {
            let _ = self.consumer.resume(&ready);
        }
        if outage && self.outage.as_ref().and_then(Outage::next_probe) <= Some(Instant::now()) {
            self.start_probe();
        }
        if self.last_commit.elapsed() >= self.config.commit_interval {
            self.commit().await;
        }
        self.publish();
        Ok(())
    }

    async fn on_record(&mut self, record: ConsumerRecord) -> Result<(), RetryError> {
        let tp = TopicPartition::new(&*record.topic, record.partition);
        let Some(place) = self.topology.place(&record.topic) else {
            // Not a topic of ours (cannot happen with subscribe): skip nothing, just note it.
            tracing::warn!(partition = %tp, offset = record.offset, "record from an unknown topic");
            return Ok(());
        };
        let now = now_ms();
        if let Place::Retry(_) = place {
            match headers::backoff_timestamp(&record) {
                Ok(Some(due)) if due > now => {
                    self.wait_until(&tp, record.offset, due);
                    return Ok(());
                }
                Ok(_) => {}
                Err(e) => return self.dead_letter(&record, Failure::bad_header(&e), 0).await,
            }
        }
        let (attempt, original_ts) = match headers::attempts(&record)
            .and_then(|a| Ok((a, headers::original_timestamp(&record)?)))
        {
            Ok(v) => v,
            Err(e) => return self.dead_letter(&record, Failure::bad_header(&e), 0).await,
        };
        match headers::deadline(&record) {
            Ok(Some(deadline)) if deadline <= now => {
                let failure = Failure {
                    class: EXPIRED_CLASS.to_string(),
                    message: format!(
                        "deadline {deadline} passed {} ms before attempt {attempt}",
                        now - deadline
                    ),
                };
                return self.dead_letter(&record, failure, attempt).await;
            }
            Ok(_) => {}
            Err(e) => {
                return self
                    .dead_letter(&record, Failure::bad_header(&e), attempt)
                    .await
            }
        }
        if let Some(Decision::Park { behind, stage }) = self.key_decision(&record, place).await? {
            return self
                .park(&record, attempt, original_ts, behind, stage)
                .await;
        }
        let delivery = Delivery {
            record: record.clone(),
            attempt,
            original_timestamp: original_ts,
        };
        let result = handler::call(self.handler.as_ref(), delivery).await;
        let probing = self.outage.as_ref().is_some_and(Outage::active);
        match result {
            Ok(()) => {
                self.succeeded(&record, attempt, probing);
                Ok(())
            }
            Err(e) => self.failed(&record, attempt, original_ts, probing, e).await,
        }
    }

    /// A record handled: an outage probe that succeeded ends the outage, and the record is
    /// done (its key's chain moves on, its offset can be committed).
    fn succeeded(&mut self, record: &ConsumerRecord, attempt: u32, probing: bool) {
        let tp = TopicPartition::new(&*record.topic, record.partition);
        if let Some(outage) = &mut self.outage {
            if probing {
                outage.leave();
                self.end_outage();
            } else {
                outage.record(None);
            }
        }
        self.key_finished(record);
        self.mark_done(&tp, record.offset);
        self.status.update(|s| s.processed += 1);
        self.emit(Event::Processed {
            topic: tp.topic.clone(),
            partition: tp.partition,
            offset: record.offset,
            attempt,
        });
    }

    /// A handler failure: a fatal one dead-letters the record, a failed probe waits for the
    /// next, one that makes an outage starts it, and any other forwards the record to retry.
    async fn failed(
        &mut self,
        record: &ConsumerRecord,
        attempt: u32,
        original_ts: i64,
        probing: bool,
        e: HandlerError,
    ) -> Result<(), RetryError> {
        let tp = TopicPartition::new(&*record.topic, record.partition);
        let failure = Failure::of(&e);
        tracing::debug!(partition = %tp, offset = record.offset, attempt, class = %failure.class, message = %failure.message, "handler failed");
        if self.classifier.classify(&e) == Class::Fatal {
            return self.dead_letter(record, failure, attempt).await;
        }
        if probing {
            if self
                .outage
                .as_ref()
                .is_some_and(|o| o.is_outage_class(&failure.class))
            {
                return self.probe_failed(&tp, record.offset);
            }
            // Not the outage's error: the record's own failure, which says nothing of the
            // outage. It takes its attempt; its partition waits for the next probe, whose
            // record is the next one, so records failing that way spend at most one attempt
            // a probe interval.
            tracing::info!(partition = %tp, offset = record.offset, class = %failure.class, "outage: the probe failed another way; it is retried as any failure, the next record probes");
            let _ = self.consumer.pause(std::slice::from_ref(&tp));
            self.probe_answered = true;
        } else if let Some(outage) = &mut self.outage {
            if outage.record(Some(&failure.class)) == Verdict::Outage {
                return self.start_outage(&tp, record.offset, &failure);
            }
        }
        self.retry(record, attempt, original_ts, failure).await
    }

    /// Pauses a retry partition until its head record (at `offset`) is due.
    fn wait_until(&mut self, tp: &TopicPartition, offset: i64, due: i64) {
        let _ = self.consumer.pause(std::slice::from_ref(tp));
        let _ = self.consumer.seek(tp, offset);
        self.due.insert(tp.clone(), due);
        self.emit(Event::Waiting {
            topic: tp.topic.clone(),
            partition: tp.partition,
            until_ms: due,
        });
    }

    /// Per-key ordering's decision for a keyed record (rebuilding its partition's chains
    /// first if needed); `None` when the mode is off or the record has no key.
    async fn key_decision(
        &mut self,
        record: &ConsumerRecord,
        place: Place,
    ) -> Result<Option<Decision>, RetryError> {
        if self.keys.is_none() {
            return Ok(None);
        }
        let Some(key) = record.key.clone() else {
            return Ok(None);
        };
        if !self.rebuilt.contains(&record.partition) {
            self.rebuild(record.partition).await?;
        }
        let Some(keys) = &mut self.keys else {
            return Ok(None);
        };
        Ok(Some(match place {
            Place::Main => keys.on_main(record.partition, &key, record.offset),
            Place::Retry(_) => keys.on_retry(record.partition, &key, original_offset(record)),
        }))
    }

    fn key_finished(&mut self, record: &ConsumerRecord) {
        if let (Some(keys), Some(key)) = (&mut self.keys, &record.key) {
            keys.finished(record.partition, key, original_offset(record));
        }
    }

    /// Copies the live state into the status handle.
    fn publish(&self) {
        let outage =
            self.outage
                .as_ref()
                .and_then(Outage::state)
                .map(|(since_ms, failed_probes)| OutageStatus {
                    since_ms,
                    failed_probes,
                });
        let parked = self
            .keys
            .as_ref()
            .map(KeyChains::parked)
            .unwrap_or_default();
        let waiting = self
            .due
            .iter()
            .map(|(tp, until)| WaitingPartition {
                topic: tp.topic.clone(),
                partition: tp.partition,
                until_ms: *until,
            })
            .collect();
        self.status.update(|s| {
            s.outage = outage;
            s.parked = parked;
            s.waiting = waiting;
        });
    }
}

/// The record's main-topic offset (its own on the main topic).
fn original_offset(record: &ConsumerRecord) -> i64 {
    headers::get(record, headers::ORIGINAL_OFFSET)
        .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
        .map(i64::from_be_bytes)
        .unwrap_or(record.offset)
}
