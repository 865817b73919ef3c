//! The consumer: records of its assigned partitions as an async stream, positions, commits,
//! seeks, pause and resume. Partitions come from a consumer group (`subscribe`, the group task
//! in `crate::group`) or are chosen by hand (`assign`).
//!
//! Two background tasks share [`State`] with the consumer handle: the fetcher (`fetcher`),
//! which keeps a bounded buffer of fetched records per partition, and the group task. Every
//! change of position (seek, reset, pause, a new assignment) bumps the partition's epoch, so
//! records fetched for an older position are dropped, never handed out.
//!
//! **Delivery is at least once.** A record handed out by [`Consumer::recv`] counts as processed
//! when `recv` is called again. Auto commit (and the commit before partitions are revoked)
//! covers processed records only; [`Consumer::commit`] covers every record handed out so far,
//! including the one in hand, as the Java client's `commitSync()` does.
//!
//! - `record`, `error`: what the consumer hands out, and why a call failed.
//! - `state`: the state the handle and the tasks share, and commits.
//! - `fetcher`: the fetch task; `decode`: the fetched batches checked, filtered and decoded.

pub(crate) mod decode;
pub(crate) mod error;
mod fetcher;
mod positions;
mod record;
pub(crate) mod state;
pub(crate) mod wanted;

pub use error::{AssignmentError, CommitError, ConsumeError, ConsumerError};
pub use record::{ConsumerRecord, TimestampType};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::cluster::Cluster;
use crate::config::{ClientConfig, ConsumerConfig, OffsetReset};
use crate::error::CallError;
use crate::group::{self, RebalanceListener};
use crate::offsets::{self, EARLIEST, LATEST};
use crate::TopicPartition;
use state::{Position, Shared, State, Waiting};

/// An asynchronous, cluster-aware Kafka consumer.
///
/// Records come from [`Consumer::recv`] or the [`Consumer::stream`]; the background tasks stop
/// when the consumer is closed ([`Consumer::close`]: commits if auto commit is on, leaves the
/// group) or dropped (no commit, no leave: the group notices after `session.timeout.ms`, as
/// after a crash).
#[derive(Debug)]
pub struct Consumer {
    shared: Arc<Shared>,
    fetcher: tokio::task::JoinHandle<()>,
    group: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::Release);
        self.fetcher.abort();
        if let Some(g) = &self.group {
            g.abort();
        }
    }
}

impl Consumer {
    /// Starts a consumer from the Java client's properties.
    pub async fn from_config(config: &ClientConfig) -> Result<Consumer, ConsumerError> {
        Consumer::new(ConsumerConfig::from_config(config)?).await
    }

    /// Starts a consumer from typed settings: connects to the cluster and, with a `group.id`,
    /// starts the group task (it joins once [`Consumer::subscribe`] names topics).
    pub async fn new(config: ConsumerConfig) -> Result<Consumer, ConsumerError> {
        Consumer::with_listener(config, None).await
    }

    /// Starts a consumer whose group rebalances are reported to `listener`.
    pub async fn with_listener(
        config: ConsumerConfig,
        listener: Option<Arc<dyn RebalanceListener>>,
    ) -> Result<Consumer, ConsumerError> {
        let cluster = Cluster::connect(config.net.clone()).await?;
        let shared = Arc::new(Shared {
            config,
            cluster,
            state: Mutex::new(State::new()),
            records: Notify::new(),
            fetcher: Notify::new(),
            group: Notify::new(),
            closing: AtomicBool::new(false),
            polls: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
        });
        let fetcher = tokio::spawn(fetcher::run(shared.clone()));
        let group = shared
            .config
            .group_id
            .is_some()
            .then(|| tokio::spawn(group::run(shared.clone(), listener)));
        Ok(Consumer {
            shared,
            fetcher,
            group,
        })
    }

    /// Joins the group (`group.id`) for `topics`; partitions arrive with the rebalance.
    pub fn subscribe<S: AsRef<str>>(&self, topics: &[S]) -> Result<(), AssignmentError> {
        if self.shared.config.group_id.is_none() {
            return Err(AssignmentError::NoGroup);
        }
        let mut st = self.shared.state();
        if st.manual {
            return Err(AssignmentError::Mixed);
        }
        st.subscription = topics.iter().map(|t| t.as_ref().to_string()).collect();
        drop(st);
        self.shared
            .cluster
            .add_interest(topics.iter().map(AsRef::as_ref));
        self.shared.group.notify_one();
        Ok(())
    }

    /// Reads exactly these partitions, without a group (commits still go to `group.id` if
    /// set, as a "simple" consumer's do). Replaces an earlier `assign`.
    pub fn assign(&self, partitions: &[TopicPartition]) -> Result<(), AssignmentError> {
        let mut st = self.shared.state();
        if !st.subscription.is_empty() {
            return Err(AssignmentError::Mixed);
        }
        st.manual = true;
        let gone: Vec<TopicPartition> = st
            .partitions
            .keys()
            .filter(|tp| !partitions.contains(tp))
            .cloned()
            .collect();
        st.remove_partitions(&gone);
        st.add_partitions(partitions);
        drop(st);
        self.shared
            .cluster
            .add_interest(partitions.iter().map(|tp| tp.topic.as_str()));
        self.shared.fetcher.notify_one();
        Ok(())
    }

    /// The consumer's place in its group, for a transactional producer's
    /// [`crate::Producer::send_offsets_to_transaction`] (the Java client's
    /// `groupMetadata()`): the group, the generation and member id it holds now (-1 and empty
    /// while it has none, or for an assigned consumer), its `group.instance.id`. `None`
    /// without `group.id`.
    pub fn group_metadata(&self) -> Option<crate::ConsumerGroupMetadata> {
        let group_id = self.shared.config.group_id.clone()?;
        let st = self.shared.state();
        let manual = st.manual;
        Some(crate::ConsumerGroupMetadata {
            group_id,
            generation_id: if manual { -1 } else { st.membership.generation },
            member_id: if manual {
                String::new()
            } else {
                st.membership.member_id.clone()
            },
            group_instance_id: self.shared.config.group_instance_id.clone(),
        })
    }

    /// The partitions assigned now.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.shared.state().partitions.keys().cloned().collect()
    }

    /// The next record. Waits for one; cancel-safe (a record is taken only when returned).
    pub async fn recv(&self) -> Result<ConsumerRecord, ConsumeError> {
        self.shared.polls.fetch_add(1, Ordering::Relaxed);
        // The record handed out before this call has been processed.
        if let Some(ready) = self.take(true) {
            return ready;
        }
        self.shared.waiting.fetch_add(1, Ordering::Relaxed);
        let _waiting = Waiting(&self.shared.waiting);
        loop {
            let notified = self.shared.records.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(ready) = self.take(false) {
                return ready;
            }
            if self.shared.closing.load(Ordering::Acquire) {
                return Err(ConsumeError::Closed);
            }
            notified.await;
        }
    }

    /// A record or an error if one is there; `processed`: the record in hand is done.
    fn take(&self, processed: bool) -> Option<Result<ConsumerRecord, ConsumeError>> {
        let mut st = self.shared.state();
        if processed {
            st.in_hand = None;
            if st.left_for_poll_timeout {
                self.shared.group.notify_one();
            }
        }
        if let Some(e) = st.fatal.clone() {
            return Some(Err(e));
        }
        if let Some(e) = st.error.take() {
            return Some(Err(e));
        }
        let before = st.buffer.len();
        let record = st.next_record(self.shared.config.net.retry_backoff_max);
        if st.buffer.len() < before || (record.is_none() && before > 0) {
            self.shared.fetcher.notify_one();
        }
        record
    }

    /// [`Consumer::recv`] as a `Stream` (use `futures_util::StreamExt::next`).
    pub fn stream(
        &self,
    ) -> impl futures_core::Stream<Item = Result<ConsumerRecord, ConsumeError>> + '_ {
        futures_util::stream::unfold(self, |consumer| async move {
            Some((consumer.recv().await, consumer))
        })
    }

    /// Commits the position of every assigned partition (every record handed out, including
    /// the one in hand) and waits for the coordinator's answer.
    pub async fn commit(&self) -> Result<(), CommitError> {
        let offsets = self.shared.state().commit_offsets(true);
        self.shared.commit(offsets).await
    }

    /// [`Consumer::commit`] in the background; the outcome is dropped (a later commit
    /// supersedes it), as with the Java client's `commitAsync()` without a callback.
    pub fn commit_async(&self) {
        let offsets = self.shared.state().commit_offsets(true);
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let _ = shared.commit(offsets).await;
        });
    }

    /// Commits these offsets (each the next offset to read).
    pub async fn commit_offsets(
        &self,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), CommitError> {
        self.shared.commit(offsets.clone()).await
    }

    /// The group's committed offsets for `partitions` (with `read_committed`, offsets an open
    /// transaction holds are waited for, up to `request.timeout.ms`).
    pub async fn committed(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, i64>, CommitError> {
        let Some(group) = self.shared.config.group_id.as_deref() else {
            return Err(CommitError::NoGroup);
        };
        let deadline = Instant::now() + self.shared.config.net.request_timeout;
        // read_committed waits for offsets an open transaction holds, as the Java client.
        let stable =
            self.shared.config.isolation_level == crate::config::IsolationLevel::ReadCommitted;
        offsets::fetch_committed_as(
            &self.shared.cluster,
            group,
            Some(partitions),
            deadline,
            stable,
        )
        .await
        .map_err(CommitError::Call)
    }

    /// The offset of the next record `recv` will return for `partition`, once known.
    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        match self.shared.state().partitions.get(partition)?.position {
            Position::Known(o) => Some(o),
            _ => None,
        }
    }

    fn reposition(&self, partition: &TopicPartition, to: Position) -> Result<(), AssignmentError> {
        let mut st = self.shared.state();
        if !st.partitions.contains_key(partition) {
            return Err(AssignmentError::NotAssigned(partition.clone()));
        }
        st.reposition(partition, to);
        if matches!(st.error, Some(ConsumeError::NoOffset { partition: ref p }) if p == partition) {
            st.error = None;
        }
        drop(st);
        self.shared.fetcher.notify_one();
        Ok(())
    }

    /// The next record of `partition` will be the one at `offset`.
    pub fn seek(&self, partition: &TopicPartition, offset: i64) -> Result<(), AssignmentError> {
        self.reposition(partition, Position::Known(offset))
    }

    /// The next record of each partition will be its first (the log start offset, looked up
    /// on the next fetch). Refused at the first partition not assigned; those before it have
    /// moved.
    pub fn seek_to_beginning(&self, partitions: &[TopicPartition]) -> Result<(), AssignmentError> {
        partitions
            .iter()
            .try_for_each(|tp| self.reposition(tp, Position::Reset(OffsetReset::Earliest)))
    }

    /// The next record of each partition will be the first produced after the lookup (the log
    /// end offset, looked up on the next fetch). Refused at the first partition not assigned;
    /// those before it have moved.
    pub fn seek_to_end(&self, partitions: &[TopicPartition]) -> Result<(), AssignmentError> {
        partitions
            .iter()
            .try_for_each(|tp| self.reposition(tp, Position::Reset(OffsetReset::Latest)))
    }

    /// The next record of `partition` will be the first with a timestamp at or after
    /// `timestamp_ms` (the end of the partition if there is none).
    pub fn seek_to_timestamp(
        &self,
        partition: &TopicPartition,
        timestamp_ms: i64,
    ) -> Result<(), AssignmentError> {
        self.reposition(partition, Position::Time(timestamp_ms))
    }

    /// Stops handing out (and fetching) records of these partitions until resumed; their
    /// positions and assignment stay.
    pub fn pause(&self, partitions: &[TopicPartition]) -> Result<(), AssignmentError> {
        let mut st = self.shared.state();
        for tp in partitions {
            let Some(p) = st.partitions.get_mut(tp) else {
                return Err(AssignmentError::NotAssigned(tp.clone()));
            };
            p.paused = true;
            let position = p.position;
            // Buffered records are dropped; they are fetched again on resume.
            st.reposition(tp, position);
        }
        Ok(())
    }

    /// Fetches and hands out records of these paused partitions again, from their positions.
    /// Refused at the first partition not assigned; those before it are resumed.
    pub fn resume(&self, partitions: &[TopicPartition]) -> Result<(), AssignmentError> {
        let mut st = self.shared.state();
        for tp in partitions {
            let Some(p) = st.partitions.get_mut(tp) else {
                return Err(AssignmentError::NotAssigned(tp.clone()));
            };
            p.paused = false;
        }
        drop(st);
        self.shared.fetcher.notify_one();
        Ok(())
    }

    /// The partitions paused now.
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.shared
            .state()
            .partitions
            .iter()
            .filter(|(_, p)| p.paused)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// The first offset of each partition.
    pub async fn beginning_offsets(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, i64>, CallError> {
        self.list_offsets(partitions, EARLIEST).await
    }

    /// The log end offset of each partition (with `read_committed`, the last stable offset).
    pub async fn end_offsets(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, i64>, CallError> {
        self.list_offsets(partitions, LATEST).await
    }

    /// The first offset at or after `timestamp_ms` in each partition (absent when there is
    /// none), as the Java client's `offsetsForTimes`.
    pub async fn offsets_for_times(
        &self,
        partitions: &[TopicPartition],
        timestamp_ms: i64,
    ) -> Result<BTreeMap<TopicPartition, i64>, CallError> {
        let found = self.list_offsets(partitions, timestamp_ms).await?;
        Ok(found.into_iter().filter(|(_, o)| *o >= 0).collect())
    }

    async fn list_offsets(
        &self,
        partitions: &[TopicPartition],
        timestamp: i64,
    ) -> Result<BTreeMap<TopicPartition, i64>, CallError> {
        let cluster = &self.shared.cluster;
        cluster.add_interest(partitions.iter().map(|tp| tp.topic.as_str()));
        let seen = cluster.metadata().version;
        if partitions
            .iter()
            .any(|tp| cluster.metadata().leader(&tp.topic, tp.partition).is_none())
        {
            cluster.refresh(seen).await?;
        }
        let wanted: Vec<(TopicPartition, i64)> = partitions
            .iter()
            .map(|tp| (tp.clone(), timestamp))
            .collect();
        let deadline = Instant::now() + self.shared.config.net.request_timeout;
        // read_committed: the end is the last stable offset, as for the Java client.
        let isolation = self.shared.config.isolation_level;
        let found = offsets::list_offsets_at(cluster, &wanted, deadline, isolation).await?;
        Ok(found.into_iter().map(|(tp, (o, _))| (tp, o)).collect())
    }

    /// Commits (if `enable.auto.commit`), tells the listener the partitions are revoked,
    /// leaves the group (not for static members, as in Kafka) and stops the tasks.
    pub async fn close(mut self) {
        self.shared.closing.store(true, Ordering::Release);
        self.shared.group.notify_one();
        self.shared.fetcher.notify_one();
        if let Some(group) = self.group.take() {
            let limit = self.shared.config.net.request_timeout + Duration::from_secs(5);
            let _ = tokio::time::timeout(limit, group).await;
        } else if self.shared.config.enable_auto_commit && self.shared.config.group_id.is_some() {
            let offsets = self.shared.state().commit_offsets(true);
            let _ = self.shared.commit(offsets).await;
        }
    }
}
