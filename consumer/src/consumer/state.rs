//! The state the consumer handle, the fetcher and the group task share: each partition's
//! position, epoch and buffer, the fetched batches not handed out yet, the group membership
//! for commits, and the commit itself.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::Notify;

use super::decode::{decode_next, only_control};
use super::error::{CommitError, ConsumeError};
use super::record::ConsumerRecord;
use crate::cluster::Cluster;
use crate::config::{ConsumerConfig, OffsetReset};
use crate::error::{CallError, ErrorCode};
use crate::offsets::{self, Committer};
use crate::util::lock;
use crate::TopicPartition;

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
    pub(super) fn new() -> State {
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
    pub(super) fn next_record(
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
                        let next = if chunk.records.is_empty() && only_control(&chunk.batches) {
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
                    let decoded = decode_next(
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
    pub(super) polls: AtomicU64,
    pub(super) waiting: AtomicUsize,
}

/// Counts a `recv` waiting for records (also when its future is dropped).
pub(super) struct Waiting<'a>(pub(super) &'a AtomicUsize);

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
