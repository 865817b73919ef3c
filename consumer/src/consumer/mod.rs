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

mod fetcher;

pub(crate) use fetcher::decode_all;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::Notify;

use crate::cluster::Cluster;
use crate::config::{ClientConfig, ConfigError, ConsumerConfig, OffsetReset};
use crate::error::{CallError, ErrorCode, NetError};
use crate::group::{self, RebalanceListener};
use crate::offsets::{self, Committer, EARLIEST, LATEST};
use crate::util::lock;
use crate::TopicPartition;

/// `LogAppendTime` or `CreateTime`, as the batch says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// The producer's timestamp, as sent (`message.timestamp.type=CreateTime`, the default).
    CreateTime,
    /// The broker's clock when it appended the batch (`message.timestamp.type=LogAppendTime`).
    LogAppendTime,
}

/// A record read from a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// The topic (shared by every record fetched for it).
    pub topic: Arc<str>,
    /// The partition within `topic`.
    pub partition: i32,
    /// The record's offset in its partition; committing `offset + 1` marks it consumed.
    pub offset: i64,
    /// Milliseconds since the epoch.
    pub timestamp: i64,
    /// Whose clock `timestamp` is.
    pub timestamp_type: TimestampType,
    /// None for a null key (not the same as an empty one).
    pub key: Option<Bytes>,
    /// None for a null value (a tombstone in a compacted topic).
    pub value: Option<Bytes>,
    /// Header names and values (None: a null value) in the record's order; a name given twice
    /// appears once, with its last value.
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// Why no record could be handed out.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumeError {
    /// `auto.offset.reset=none` and the partition has no committed offset, or its position is
    /// out of range: seek to go on.
    #[error("{partition}: no valid offset (auto.offset.reset=none); seek to go on")]
    NoOffset {
        /// The partition waiting for a seek.
        partition: TopicPartition,
    },
    /// A batch failed its checks (CRC, framing). The partition stays at `offset` until a seek.
    #[error("{partition} at offset {offset}: corrupt batch: {reason}")]
    Corrupt {
        /// The partition of the batch.
        partition: TopicPartition,
        /// The batch's base offset, or the partition's position if that is later.
        offset: i64,
        /// What the check found.
        reason: String,
    },
    /// The broker refused with a non-retriable error (authorization, …).
    #[error(transparent)]
    Broker(CallError),
    /// The group refused this member for good (`FENCED_INSTANCE_ID`, an inconsistent protocol,
    /// the group full, …): the consumer stops.
    #[error("group membership failed: {0}")]
    Group(CallError),
    /// The consumer is closing: its background tasks are stopping.
    #[error("the consumer is closed")]
    Closed,
}

/// Why a commit failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// The consumer has no `group.id`, so there is no group to commit to (or read commits of).
    #[error("no group.id: nothing to commit to")]
    NoGroup,
    /// A rebalance is on its way or took the partitions: the records will be read again by
    /// whoever owns them now (at least once).
    #[error("the group rebalanced; the commit was not applied: {0}")]
    Rebalanced(CallError),
    /// Any other failure: the coordinator refused the request, or none answered before
    /// `request.timeout.ms` ran out.
    #[error(transparent)]
    Call(CallError),
}

/// Why a seek or pause was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AssignmentError {
    /// A seek, pause or resume named a partition this consumer does not have now.
    #[error("{0} is not assigned to this consumer")]
    NotAssigned(TopicPartition),
    /// `subscribe` after `assign`, or `assign` after `subscribe`.
    #[error("subscribe and assign cannot be mixed on one consumer")]
    Mixed,
    /// `subscribe` on a consumer without `group.id`.
    #[error("subscribe needs group.id")]
    NoGroup,
}

/// Why a consumer could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// The properties were refused ([`Consumer::from_config`]).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No bootstrap server answered with the cluster's metadata.
    #[error(transparent)]
    Net(#[from] NetError),
}

/// Where a partition's next record comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Position {
    Known(i64),
    /// Newly assigned: the group's committed offset, else `auto.offset.reset`.
    Committed,
    Reset(OffsetReset),
    /// The first record at or after this time (the end if there is none).
    Time(i64),
}

#[derive(Debug)]
pub(crate) struct PartitionState {
    pub position: Position,
    /// The next offset to fetch (ahead of `position` while records are buffered).
    pub fetch_offset: i64,
    pub epoch: u64,
    pub paused: bool,
    pub in_flight: bool,
    /// Bytes of fetched records buffered for it.
    pub buffered: usize,
    /// The last offset committed (or found committed) for it.
    pub committed: Option<i64>,
    /// No fetch before this (after an error).
    pub retry_at: Option<Instant>,
    /// The end the last fetch reported: the high watermark, or with `read_committed` the last
    /// stable offset (what the consumer can reach).
    pub high_watermark: i64,
}

/// Fetched batches of one partition, not yet handed out: decoded a batch at a time by `recv`.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub topic: Arc<str>,
    pub partition: TopicPartition,
    pub epoch: u64,
    /// Whole batches not decoded yet.
    pub batches: Bytes,
    /// Records of the batch being handed out.
    pub records: VecDeque<ConsumerRecord>,
    /// Bytes it counts in the partition's buffer.
    pub bytes: usize,
    /// The offset after its last batch: once every record is handed out the position moves
    /// here, past control batches (transaction markers) and aborted transactions' batches, as
    /// the Java client's does.
    pub end: i64,
}

/// Group membership, for commits.
#[derive(Debug, Clone)]
pub(crate) struct Membership {
    pub generation: i32,
    pub member_id: String,
    pub rebalancing: bool,
}

#[derive(Debug)]
pub(crate) struct State {
    pub subscription: BTreeSet<String>,
    pub manual: bool,
    pub partitions: BTreeMap<TopicPartition, PartitionState>,
    pub buffer: VecDeque<Chunk>,
    next_epoch: u64,
    /// The last record handed out, not yet processed.
    pub in_hand: Option<(TopicPartition, i64)>,
    pub error: Option<ConsumeError>,
    pub fatal: Option<ConsumeError>,
    pub membership: Membership,
    /// When the application was last seen asking for records (see [`Shared::last_poll`]).
    pub last_poll: Instant,
    seen_polls: u64,
    /// The group task left the group because `recv` was not called for
    /// `max.poll.interval.ms`; the next `recv` makes it rejoin.
    pub left_for_poll_timeout: bool,
}

impl State {
    fn new() -> State {
        State {
            subscription: BTreeSet::new(),
            manual: false,
            partitions: BTreeMap::new(),
            buffer: VecDeque::new(),
            next_epoch: 1,
            in_hand: None,
            error: None,
            fatal: None,
            membership: Membership {
                generation: -1,
                member_id: String::new(),
                rebalancing: false,
            },
            last_poll: Instant::now(),
            seen_polls: 0,
            left_for_poll_timeout: false,
        }
    }

    /// Moves a partition to `position`: buffered and in-flight records for it are dropped.
    pub(crate) fn reposition(&mut self, tp: &TopicPartition, position: Position) {
        let epoch = self.next_epoch;
        self.next_epoch += 1;
        if let Some(p) = self.partitions.get_mut(tp) {
            p.position = position;
            p.fetch_offset = match position {
                Position::Known(o) => o,
                _ => -1,
            };
            p.epoch = epoch;
            p.buffered = 0;
            p.in_flight = false;
            p.retry_at = None;
        }
        self.buffer.retain(|c| c.partition != *tp);
    }

    /// Adds newly assigned partitions (their position: the committed offset).
    pub(crate) fn add_partitions(&mut self, added: &[TopicPartition]) {
        for tp in added {
            if self.partitions.contains_key(tp) {
                continue;
            }
            self.partitions.insert(
                tp.clone(),
                PartitionState {
                    position: Position::Committed,
                    fetch_offset: -1,
                    epoch: 0,
                    paused: false,
                    in_flight: false,
                    buffered: 0,
                    committed: None,
                    retry_at: None,
                    high_watermark: -1,
                },
            );
            self.reposition(tp, Position::Committed);
        }
    }

    pub(crate) fn remove_partitions(&mut self, removed: &[TopicPartition]) {
        for tp in removed {
            self.partitions.remove(tp);
        }
        self.buffer.retain(|c| !removed.contains(&c.partition));
        if self
            .in_hand
            .as_ref()
            .is_some_and(|(tp, _)| removed.contains(tp))
        {
            self.in_hand = None;
        }
    }

    /// The offsets to commit: every handed-out record (`all`), or only processed ones (the
    /// record in hand is not), for partitions whose offset moved since the last commit.
    pub(crate) fn commit_offsets(&self, all: bool) -> BTreeMap<TopicPartition, i64> {
        self.partitions
            .iter()
            .filter_map(|(tp, p)| {
                let Position::Known(position) = p.position else {
                    return None;
                };
                let offset = match &self.in_hand {
                    Some((held, offset)) if !all && held == tp => *offset,
                    _ => position,
                };
                (p.committed != Some(offset)).then(|| (tp.clone(), offset))
            })
            .collect()
    }

    /// The next record to hand out, if one is buffered, decoding the next batch when the last
    /// one is used up. A batch that fails its checks is an error; its partition is fetched
    /// again from the same position after `retry_backoff_max` (and fails the same way until a
    /// seek moves it).
    fn next_record(
        &mut self,
        retry_backoff_max: Duration,
    ) -> Option<Result<ConsumerRecord, ConsumeError>> {
        while let Some(chunk) = self.buffer.front_mut() {
            let usable = self
                .partitions
                .get(&chunk.partition)
                .and_then(|p| match p.position {
                    Position::Known(pos) if p.epoch == chunk.epoch && !p.paused => Some(pos),
                    _ => None,
                });
            if let Some(position) = usable {
                loop {
                    if let Some(record) = chunk.records.pop_front() {
                        if record.offset < position {
                            continue;
                        }
                        let tp = chunk.partition.clone();
                        // The chunk's last record, with only markers behind it: the position
                        // moves past them now, so a commit after it covers them.
                        let next =
                            if chunk.records.is_empty() && fetcher::only_control(&chunk.batches) {
                                (record.offset + 1).max(chunk.end)
                            } else {
                                record.offset + 1
                            };
                        if let Some(p) = self.partitions.get_mut(&tp) {
                            p.position = Position::Known(next);
                        }
                        self.in_hand = Some((tp, record.offset));
                        return Some(Ok(record));
                    }
                    if chunk.batches.is_empty() {
                        let end = chunk.end;
                        if let Some(p) = self.partitions.get_mut(&chunk.partition) {
                            if let Position::Known(now) = p.position {
                                p.position = Position::Known(now.max(end));
                            }
                        }
                        break;
                    }
                    let decoded = fetcher::decode_next(
                        &chunk.topic,
                        chunk.partition.partition,
                        position,
                        &mut chunk.batches,
                        &mut chunk.records,
                    );
                    if let Err((offset, reason)) = decoded {
                        let tp = chunk.partition.clone();
                        self.reposition(&tp, Position::Known(position));
                        if let Some(p) = self.partitions.get_mut(&tp) {
                            p.retry_at = Some(Instant::now() + retry_backoff_max);
                        }
                        return Some(Err(ConsumeError::Corrupt {
                            partition: tp,
                            offset: offset.max(position),
                            reason,
                        }));
                    }
                }
            }
            if let Some(done) = self.buffer.pop_front() {
                if let Some(p) = self
                    .partitions
                    .get_mut(&done.partition)
                    .filter(|p| p.epoch == done.epoch)
                {
                    p.buffered = p.buffered.saturating_sub(done.bytes);
                }
            }
        }
        None
    }
}

/// State shared by the consumer handle, the fetcher and the group task.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: ConsumerConfig,
    pub cluster: Arc<Cluster>,
    pub state: Mutex<State>,
    /// Wakes `recv`: records or an error arrived.
    pub records: Notify,
    /// Wakes the fetcher: positions, assignment or pauses changed, or buffer space freed.
    pub fetcher: Notify,
    /// Wakes the group task: subscription changed, a poll after leaving, close.
    pub group: Notify,
    pub closing: AtomicBool,
    /// `recv` calls so far, and how many are waiting for a record now: the group task turns
    /// these into [`State::last_poll`], so `recv` reads no clock per record.
    polls: AtomicU64,
    waiting: AtomicUsize,
}

/// Counts a `recv` waiting for records (also when its future is dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Shared {
    /// When the application last asked for records: now if it asked since the last look, is
    /// waiting in `recv`, or has not asked yet (as in the Java client, whose poll timer starts
    /// with the first poll).
    pub(crate) fn last_poll(&self) -> Instant {
        let polls = self.polls.load(Ordering::Relaxed);
        let waiting = self.waiting.load(Ordering::Relaxed) > 0;
        let mut st = self.state();
        if polls != st.seen_polls || waiting || polls == 0 {
            st.seen_polls = polls;
            st.last_poll = Instant::now();
        }
        st.last_poll
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Commits `offsets` for the group; on success records them as committed.
    pub(crate) async fn commit(
        &self,
        offsets: BTreeMap<TopicPartition, i64>,
    ) -> Result<(), CommitError> {
        let Some(group) = self.config.group_id.as_deref() else {
            return Err(CommitError::NoGroup);
        };
        if offsets.is_empty() {
            return Ok(());
        }
        let (committer, manual) = {
            let st = self.state();
            (
                Committer {
                    generation: if st.manual {
                        -1
                    } else {
                        st.membership.generation
                    },
                    member_id: if st.manual {
                        String::new()
                    } else {
                        st.membership.member_id.clone()
                    },
                    instance_id: if st.manual {
                        None
                    } else {
                        self.config.group_instance_id.clone()
                    },
                },
                st.manual,
            )
        };
        if !manual && committer.generation < 0 {
            return Err(CommitError::Rebalanced(CallError::broker(
                kafka_protocol::messages::ApiKey::OffsetCommit,
                format!("group {group}"),
                ErrorCode::RebalanceInProgress,
            )));
        }
        let deadline = Instant::now() + self.config.net.request_timeout;
        match offsets::commit(&self.cluster, group, &committer, &offsets, deadline).await {
            Ok(()) => {
                let mut st = self.state();
                for (tp, offset) in offsets {
                    if let Some(p) = st.partitions.get_mut(&tp) {
                        p.committed = Some(offset);
                    }
                }
                Ok(())
            }
            Err(e) => match e.code() {
                Some(
                    ErrorCode::RebalanceInProgress
                    | ErrorCode::IllegalGeneration
                    | ErrorCode::UnknownMemberId
                    | ErrorCode::FencedInstanceId,
                ) => Err(CommitError::Rebalanced(e)),
                _ => Err(CommitError::Call(e)),
            },
        }
    }
}

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
