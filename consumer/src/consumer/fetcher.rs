//! The fetcher task: resolves positions (committed offset, reset, timestamp), then keeps one
//! Fetch in flight per leader for the partitions whose buffer has room, checks the framing of
//! the batches that come back and queues them for `recv`, which decodes them (every codec;
//! control batches skipped) a batch at a time as it hands records out. Decoding on the
//! application's side, as the Java client does, keeps it off the fetch loop: the next Fetch
//! goes out while the last one is being read (measured: 2 of every 6 ms per 6 MB fetch were
//! decoding).
//!
//! Bounded: the whole buffer stays under `fetch.max.bytes` plus one fetch, shared out among the
//! assigned partitions (at least two `max.partition.fetch.bytes` each): a partition is fetched
//! only while less than its share is buffered. Buffering deep, as librdkafka does (64 MiB by
//! default), keeps fetches large and back to back: with a share of 2 MiB per partition, 6
//! partitions were consumed at 280-540 MB/s, with 8 MiB at 820-970 (`lograil-bench consume`).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::records::{RecordBatchDecoder, TimestampType as WireTimestampType};
use record_batch::{layout, BatchHeader, LOG_OVERHEAD};
use tokio::task::JoinSet;

use super::{Chunk, ConsumeError, ConsumerRecord, Position, Shared, TimestampType};
use crate::config::{IsolationLevel, OffsetReset};
use crate::error::{CallError, ErrorCode, NetError};
use crate::offsets::{self, EARLIEST, LATEST};
use crate::util::{backoff, text};
use crate::TopicPartition;

/// A partition in a fetch request: where it fetched from and under which epoch.
struct Fetched {
    partition: TopicPartition,
    epoch: u64,
    offset: i64,
}

struct Completion {
    node: i32,
    partitions: Vec<Fetched>,
    result: Result<FetchResponse, NetError>,
}

/// What one partition's fetch produced, decoded outside the lock.
enum Outcome {
    Records {
        /// Whole batches, not yet decoded.
        batches: Bytes,
        next_offset: i64,
        high_watermark: i64,
    },
    Error(ErrorCode),
    Corrupt {
        offset: i64,
        reason: String,
    },
}

pub(super) async fn run(shared: Arc<Shared>) {
    let mut in_flight: JoinSet<Completion> = JoinSet::new();
    let mut busy: HashSet<i32> = HashSet::new();
    let mut attempt: u32 = 0;
    let mut wake_recv = false;
    loop {
        if shared.closing.load(Ordering::Acquire) {
            return;
        }
        let notified = shared.fetcher.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();

        let resolved = resolve_positions(&shared).await;
        let mut wake = match resolved {
            Ok(()) => {
                attempt = 0;
                None
            }
            Err(e) => {
                report(&shared, e);
                attempt += 1;
                let net = &shared.config.net;
                Some(Instant::now() + backoff(net.retry_backoff, net.retry_backoff_max, attempt))
            }
        };
        wake = earliest(wake, send_fetches(&shared, &mut in_flight, &mut busy));
        if std::mem::take(&mut wake_recv) {
            shared.records.notify_one();
        }

        let sleep = async {
            match wake {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => {
                if let Ok(done) = done {
                    busy.remove(&done.node);
                    wake_recv |= complete(&shared, done);
                }
            }
            () = notified => {}
            () = sleep => {}
        }
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Committed offsets for new partitions, then resets and timestamp seeks (ListOffsets).
async fn resolve_positions(shared: &Arc<Shared>) -> Result<(), CallError> {
    let config = &shared.config;
    let deadline = Instant::now() + config.net.request_timeout;
    // (partition, epoch) needing their committed offset.
    let wanted: Vec<(TopicPartition, u64)> = shared
        .state()
        .partitions
        .iter()
        .filter(|(_, p)| p.position == Position::Committed)
        .map(|(tp, p)| (tp.clone(), p.epoch))
        .collect();
    if !wanted.is_empty() {
        let committed = match config.group_id.as_deref() {
            Some(group) => {
                let tps: Vec<TopicPartition> = wanted.iter().map(|(tp, _)| tp.clone()).collect();
                let stable = config.isolation_level == IsolationLevel::ReadCommitted;
                match offsets::fetch_committed_as(
                    &shared.cluster,
                    group,
                    Some(&tps),
                    deadline,
                    stable,
                )
                .await
                {
                    Ok(c) => c,
                    Err(e) => return Err(e),
                }
            }
            None => BTreeMap::new(),
        };
        let mut st = shared.state();
        for (tp, epoch) in wanted {
            let current = st.partitions.get(&tp).map(|p| p.epoch);
            if current != Some(epoch) {
                continue;
            }
            let position = match committed.get(&tp) {
                Some(offset) => Position::Known(*offset),
                None => Position::Reset(config.auto_offset_reset),
            };
            st.reposition(&tp, position);
            if let (Some(p), Some(offset)) = (st.partitions.get_mut(&tp), committed.get(&tp)) {
                p.committed = Some(*offset);
            }
        }
    }

    // (partition, epoch, timestamp to look up).
    let mut lookups: Vec<(TopicPartition, u64, i64)> = Vec::new();
    {
        let mut st = shared.state();
        let mut no_offset = None;
        for (tp, p) in &st.partitions {
            match p.position {
                Position::Reset(OffsetReset::Earliest) => {
                    lookups.push((tp.clone(), p.epoch, EARLIEST))
                }
                Position::Reset(OffsetReset::Latest) => lookups.push((tp.clone(), p.epoch, LATEST)),
                Position::Time(ts) => lookups.push((tp.clone(), p.epoch, ts)),
                Position::Reset(OffsetReset::None) if p.retry_at.is_none() => {
                    no_offset = Some(tp.clone());
                }
                _ => {}
            }
        }
        if let Some(tp) = no_offset {
            if let Some(p) = st.partitions.get_mut(&tp) {
                // Reported once; it waits for a seek.
                p.retry_at = Some(Instant::now() + Duration::from_secs(3600 * 24 * 365));
            }
            st.error = Some(ConsumeError::NoOffset { partition: tp });
            shared.records.notify_one();
        }
    }
    if lookups.is_empty() {
        return Ok(());
    }
    let wanted: Vec<(TopicPartition, i64)> = lookups
        .iter()
        .map(|(tp, _, ts)| (tp.clone(), *ts))
        .collect();
    shared
        .cluster
        .add_interest(wanted.iter().map(|(tp, _)| tp.topic.as_str()));
    if wanted.iter().any(|(tp, _)| {
        shared
            .cluster
            .metadata()
            .leader(&tp.topic, tp.partition)
            .is_none()
    }) {
        let seen = shared.cluster.metadata().version;
        shared.cluster.refresh(seen).await?;
    }
    let isolation = config.isolation_level;
    let mut found = offsets::list_offsets_at(&shared.cluster, &wanted, deadline, isolation).await?;
    // Timestamp lookups that found nothing go to the end.
    let past_end: Vec<(TopicPartition, i64)> = lookups
        .iter()
        .filter(|(tp, _, ts)| *ts >= 0 && found.get(tp).is_none_or(|(o, _)| *o < 0))
        .map(|(tp, _, _)| (tp.clone(), LATEST))
        .collect();
    if !past_end.is_empty() {
        let ends =
            offsets::list_offsets_at(&shared.cluster, &past_end, deadline, isolation).await?;
        found.extend(ends);
    }
    let mut st = shared.state();
    for (tp, epoch, _) in lookups {
        let Some((offset, _)) = found.get(&tp).copied() else {
            continue;
        };
        if st.partitions.get(&tp).map(|p| p.epoch) == Some(epoch) && offset >= 0 {
            st.reposition(&tp, Position::Known(offset));
        }
    }
    drop(st);
    shared.fetcher.notify_one();
    Ok(())
}

/// A non-retriable failure is handed to `recv`; a retriable one is retried after a backoff.
fn report(shared: &Shared, e: CallError) {
    if !e.is_retriable() {
        shared.state().error = Some(ConsumeError::Broker(e));
        shared.records.notify_one();
    }
}

/// Starts a fetch to every leader that has fetchable partitions and none in flight. Returns
/// when to look again (the earliest partition backoff).
fn send_fetches(
    shared: &Arc<Shared>,
    in_flight: &mut JoinSet<Completion>,
    busy: &mut HashSet<i32>,
) -> Option<Instant> {
    let config = &shared.config;
    let now = Instant::now();
    let metadata = shared.cluster.metadata();
    let total_limit = usize::try_from(config.fetch_max_bytes).unwrap_or(50 << 20);
    let partition_fetch = usize::try_from(config.max_partition_fetch_bytes).unwrap_or(1 << 20);
    let mut wake = None;
    let mut need_metadata = false;
    let mut by_leader: BTreeMap<i32, Vec<Fetched>> = BTreeMap::new();
    {
        let mut st = shared.state();
        let buffered: usize = st.buffer.iter().map(|c| c.bytes).sum();
        if buffered >= total_limit {
            return None;
        }
        let per_partition_limit =
            (total_limit / st.partitions.len().max(1)).max(partition_fetch.saturating_mul(2));
        for (tp, p) in st.partitions.iter_mut() {
            let Position::Known(_) = p.position else {
                continue;
            };
            if p.paused || p.in_flight || p.fetch_offset < 0 || p.buffered >= per_partition_limit {
                continue;
            }
            if let Some(t) = p.retry_at {
                if t > now {
                    wake = earliest(wake, Some(t));
                    continue;
                }
                p.retry_at = None;
            }
            let Some(leader) = metadata.leader(&tp.topic, tp.partition) else {
                need_metadata = true;
                continue;
            };
            if busy.contains(&leader) {
                continue;
            }
            p.in_flight = true;
            by_leader.entry(leader).or_default().push(Fetched {
                partition: tp.clone(),
                epoch: p.epoch,
                offset: p.fetch_offset,
            });
        }
    }
    if need_metadata {
        let shared = shared.clone();
        let seen = metadata.version;
        tokio::spawn(async move {
            let _ = shared.cluster.refresh(seen).await;
            shared.fetcher.notify_one();
        });
        wake = earliest(wake, Some(now + config.net.retry_backoff));
    }
    for (node, partitions) in by_leader {
        busy.insert(node);
        let mut topics: Vec<FetchTopic> = Vec::new();
        for f in &partitions {
            let partition = FetchPartition::default()
                .with_partition(f.partition.partition)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(f.offset)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(config.max_partition_fetch_bytes);
            match topics
                .iter_mut()
                .find(|t| t.topic.0.as_str() == f.partition.topic)
            {
                Some(t) => t.partitions.push(partition),
                None => topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(text(&f.partition.topic)))
                        .with_partitions(vec![partition]),
                ),
            }
        }
        let max_wait = config.fetch_max_wait;
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX))
            .with_min_bytes(config.fetch_min_bytes)
            .with_max_bytes(config.fetch_max_bytes)
            .with_isolation_level(config.isolation_level.wire())
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(topics);
        let cluster = shared.cluster.clone();
        let timeout = config.net.request_timeout + max_wait;
        // On an open connection the request is written here, before `recv` is woken for the
        // last response's records (the thread that runs `recv` may take this one's core).
        let started = cluster.live_connection(node).map(|connection| {
            let version = connection.version::<FetchRequest>(12)?;
            let pending = connection.start(&request, version)?;
            Ok::<_, NetError>((connection, pending))
        });
        in_flight.spawn(async move {
            let result = match started {
                Some(Ok((connection, pending))) => pending.wait(&connection, timeout).await,
                Some(Err(e)) => Err(e),
                None => {
                    async {
                        let connection = cluster.connection(node).await?;
                        let version = connection.version::<FetchRequest>(12)?;
                        connection
                            .call_with_timeout(&request, version, timeout)
                            .await
                    }
                    .await
                }
            };
            Completion {
                node,
                partitions,
                result,
            }
        });
    }
    wake
}

/// Applies a fetch response: records to the buffer, errors to positions or `recv`.
fn complete(shared: &Arc<Shared>, done: Completion) -> bool {
    let response = match done.result {
        Ok(r) if r.error_code == 0 => r,
        // A lost connection, or the whole fetch refused: back off, look at the metadata again.
        _ => {
            // The leader may be gone: refresh and retry these partitions after a backoff.
            let mut st = shared.state();
            let retry_at = Instant::now() + shared.config.net.retry_backoff;
            for f in &done.partitions {
                if let Some(p) = st.partitions.get_mut(&f.partition) {
                    if p.epoch == f.epoch {
                        p.in_flight = false;
                        p.retry_at = Some(retry_at);
                    }
                }
            }
            drop(st);
            spawn_refresh(shared);
            return false;
        }
    };
    let mut answers: HashMap<TopicPartition, (Arc<str>, Outcome)> = HashMap::new();
    for topic in response.responses {
        let topic_name: Arc<str> = Arc::from(topic.topic.0.as_str());
        for data in topic.partitions {
            let tp = TopicPartition::new(&*topic_name, data.partition_index);
            let Some(fetched) = done.partitions.iter().find(|f| f.partition == tp) else {
                continue;
            };
            let read_committed = shared.config.isolation_level == IsolationLevel::ReadCommitted;
            let outcome = match ErrorCode::try_from_code(data.error_code) {
                Some(code) => Outcome::Error(code),
                None if read_committed => {
                    let aborted: Vec<(i64, i64)> = data
                        .aborted_transactions
                        .unwrap_or_default()
                        .iter()
                        .map(|a| (a.producer_id.0, a.first_offset))
                        .collect();
                    // The end a read_committed consumer can reach: the last stable offset.
                    let end = if data.last_stable_offset >= 0 {
                        data.last_stable_offset
                    } else {
                        data.high_watermark
                    };
                    committed_only(
                        frame(fetched.offset, data.records.unwrap_or_default(), end),
                        &aborted,
                    )
                }
                None => frame(
                    fetched.offset,
                    data.records.unwrap_or_default(),
                    data.high_watermark,
                ),
            };
            answers.insert(tp, (topic_name.clone(), outcome));
        }
    }
    let mut refresh = false;
    let mut st = shared.state();
    let mut got_records = false;
    for f in done.partitions {
        let Some(p) = st.partitions.get_mut(&f.partition) else {
            continue;
        };
        if p.epoch != f.epoch {
            continue;
        }
        p.in_flight = false;
        let Some((topic, outcome)) = answers.remove(&f.partition) else {
            continue;
        };
        match outcome {
            Outcome::Records {
                batches,
                next_offset,
                high_watermark,
            } => {
                p.high_watermark = high_watermark;
                p.fetch_offset = p.fetch_offset.max(next_offset);
                // Also a chunk of no batches left (a read_committed fetch of aborted ones
                // only): the position moves past what was fetched once `recv` reaches it.
                if !batches.is_empty() || next_offset > f.offset {
                    p.buffered += batches.len();
                    got_records = true;
                    st.buffer.push_back(Chunk {
                        topic,
                        partition: f.partition,
                        epoch: f.epoch,
                        bytes: batches.len(),
                        batches,
                        records: VecDeque::new(),
                        end: next_offset,
                    });
                }
            }
            Outcome::Error(ErrorCode::OffsetOutOfRange) => {
                let reset = shared.config.auto_offset_reset;
                st.reposition(&f.partition, Position::Reset(reset));
            }
            Outcome::Error(code) if code.is_retriable() => {
                p.retry_at = Some(Instant::now() + shared.config.net.retry_backoff);
                refresh = true;
            }
            Outcome::Error(code) => {
                p.retry_at = Some(Instant::now() + shared.config.net.retry_backoff_max);
                st.error = Some(ConsumeError::Broker(CallError::broker(
                    kafka_protocol::messages::ApiKey::Fetch,
                    f.partition.to_string(),
                    code,
                )));
                got_records = true;
            }
            Outcome::Corrupt { offset, reason } => {
                p.retry_at = Some(Instant::now() + shared.config.net.retry_backoff_max);
                st.error = Some(ConsumeError::Corrupt {
                    partition: f.partition,
                    offset,
                    reason,
                });
                got_records = true;
            }
        }
    }
    drop(st);
    if refresh {
        spawn_refresh(shared);
    }
    got_records
}

fn spawn_refresh(shared: &Arc<Shared>) {
    let shared = shared.clone();
    let seen = shared.cluster.metadata().version;
    tokio::spawn(async move {
        let _ = shared.cluster.refresh(seen).await;
        shared.fetcher.notify_one();
    });
}

/// Every record in the whole batches of `bytes` (control batches skipped), for the share
/// consumer; a batch failing its checks is an error naming its offset.
pub(crate) fn decode_all(
    topic: &Arc<str>,
    partition: i32,
    bytes: Bytes,
) -> Result<Vec<ConsumerRecord>, (i64, String)> {
    let mut batches = match frame(0, bytes, -1) {
        Outcome::Records { batches, .. } => batches,
        Outcome::Corrupt { offset, reason } => return Err((offset, reason)),
        Outcome::Error(code) => return Err((-1, code.to_string())),
    };
    let mut records = VecDeque::new();
    while !batches.is_empty() {
        decode_next(topic, partition, 0, &mut batches, &mut records)?;
    }
    Ok(records.into())
}

/// The header of the batch at the start of `bytes`, or why it is unreadable (with its base
/// offset). `None` if the batch is not whole. Read as [`BatchHeader::read`] does, not checked as
/// a producer's batch is: Kafka's compaction leaves batches with fewer records than their offset
/// deltas span.
fn batch_frame(bytes: &[u8]) -> Option<Result<BatchHeader, (i64, String)>> {
    let length = layout::i32_at(bytes, layout::LENGTH_AT)?;
    let base = layout::i64_at(bytes, layout::BASE_OFFSET_AT)?;
    let whole = usize::try_from(length).map(|l| l + LOG_OVERHEAD);
    if whole.is_ok_and(|total| bytes.len() < total) {
        return None;
    }
    Some(BatchHeader::read(bytes).map_err(|e| (base, e.to_string())))
}

/// Checks the framing of the batches in a fetched partition without decoding them: the whole
/// batches (a trailing partial batch is left for the next fetch) and the offset after them.
fn frame(fetch_offset: i64, bytes: Bytes, high_watermark: i64) -> Outcome {
    let mut whole = 0;
    let mut next_offset = fetch_offset;
    while let Some(framed) = batch_frame(&bytes[whole..]) {
        let header = match framed {
            Ok(header) => header,
            Err((offset, reason)) => return Outcome::Corrupt { offset, reason },
        };
        next_offset = next_offset.max(header.next_offset());
        whole += header.size as usize;
    }
    Outcome::Records {
        batches: bytes.slice(..whole),
        next_offset,
        high_watermark,
    }
}

/// A `read_committed` fetch's batches without those of aborted transactions (`aborted`: the
/// fetch response's producer ids and first offsets), as the Java client's `CompletedFetch`
/// reads them: walking the batches in order, a producer is aborted from the first offset of
/// one of its aborted transactions until its abort marker; its transactional batches in
/// between are dropped. Control batches stay (`recv` skips them; the position moves past
/// them). Copies the kept batches only when one is dropped. Kafka writes markers
/// uncompressed; one that is not read as an abort keeps its producer aborted until the end
/// of this fetch, at worst.
fn committed_only(outcome: Outcome, aborted: &[(i64, i64)]) -> Outcome {
    let Outcome::Records {
        batches,
        next_offset,
        high_watermark,
    } = outcome
    else {
        return outcome;
    };
    if aborted.is_empty() {
        return Outcome::Records {
            batches,
            next_offset,
            high_watermark,
        };
    }
    let mut pending: Vec<(i64, i64)> = aborted.to_vec();
    // By first offset, latest first, so the next one to open is at the end.
    pending.sort_by_key(|a| std::cmp::Reverse(a.1));
    let mut open: HashSet<i64> = HashSet::new();
    let mut kept: Vec<(usize, usize)> = Vec::new();
    let mut dropped = false;
    let mut at = 0;
    while let Some(Ok(header)) = batch_frame(&batches[at..]) {
        let size = header.size as usize;
        let mut keep = true;
        if header.producer_id >= 0 {
            while pending
                .last()
                .is_some_and(|(_, first)| *first <= header.last_offset())
            {
                if let Some((producer, _)) = pending.pop() {
                    open.insert(producer);
                }
            }
            if header.is_control() {
                let marker = record_batch::control_type(&batches[at..at + size]);
                if marker == Some(record_batch::ControlType::Abort) {
                    open.remove(&header.producer_id);
                }
            } else if header.is_transactional() && open.contains(&header.producer_id) {
                keep = false;
            }
        }
        if keep {
            kept.push((at, at + size));
        } else {
            dropped = true;
        }
        at += size;
    }
    let batches = if dropped {
        let mut out = bytes::BytesMut::with_capacity(kept.iter().map(|(a, b)| b - a).sum());
        for (from, to) in kept {
            out.extend_from_slice(&batches[from..to]);
        }
        out.freeze()
    } else {
        batches
    };
    Outcome::Records {
        batches,
        next_offset,
        high_watermark,
    }
}

/// Whether `batches` (whole, framed) holds control batches only (or nothing).
pub(super) fn only_control(batches: &[u8]) -> bool {
    let mut at = 0;
    while at < batches.len() {
        match batch_frame(&batches[at..]) {
            Some(Ok(header)) if header.is_control() => at += header.size as usize,
            _ => return false,
        }
    }
    true
}

/// Decodes the first batch of `batches` (whole, framed by [`frame`]) into `out`: its records
/// at or after `from`; nothing for a control batch. The batch is taken off `batches` either
/// way; an error names its base offset.
pub(super) fn decode_next(
    topic: &Arc<str>,
    partition: i32,
    from: i64,
    batches: &mut Bytes,
    out: &mut VecDeque<ConsumerRecord>,
) -> Result<(), (i64, String)> {
    let header = match batch_frame(batches) {
        Some(framed) => framed?,
        None => {
            *batches = Bytes::new();
            return Err((-1, "a partial batch".to_string()));
        }
    };
    let mut batch = batches.split_to(header.size as usize);
    if header.is_control() || header.next_offset() <= from {
        return Ok(());
    }
    let base = header.base_offset;
    let set = RecordBatchDecoder::decode(&mut batch).map_err(|e| (base, e.to_string()))?;
    for r in set.records {
        if r.offset < from || r.control {
            continue;
        }
        let headers: Vec<(String, Option<Bytes>)> = r
            .headers
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        out.push_back(ConsumerRecord {
            topic: topic.clone(),
            partition,
            offset: r.offset,
            timestamp: r.timestamp,
            timestamp_type: match r.timestamp_type {
                WireTimestampType::Creation => TimestampType::CreateTime,
                WireTimestampType::LogAppend => TimestampType::LogAppendTime,
            },
            key: r.key,
            value: r.value,
            headers,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn batch(base: i64, n: i64, control: bool) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: control,
                control,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: base + i,
                sequence: -1 + i as i32,
                timestamp: 1000 + i,
                key: Some(Bytes::from(format!("k{}", base + i))),
                value: Some(Bytes::from(format!("v{}", base + i))),
                headers: Default::default(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            records.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::Lz4,
            },
        )
        .unwrap();
        buf.freeze()
    }

    /// A transactional batch of producer `pid` (`marker`: a control batch, abort or commit),
    /// uncompressed as Kafka writes markers.
    fn txn_batch(base: i64, n: i64, pid: i64, marker: Option<bool>) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: true,
                control: marker.is_some(),
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: pid,
                producer_epoch: 0,
                timestamp_type: TimestampType::Creation,
                offset: base + i,
                sequence: base as i32 + i as i32,
                timestamp: 1000 + i,
                // A marker's key: version 0, type 0 (abort) or 1 (commit).
                key: Some(match marker {
                    Some(commit) => Bytes::from(vec![0, 0, 0, u8::from(commit)]),
                    None => Bytes::from(format!("k{}", base + i)),
                }),
                value: Some(Bytes::from(format!("v{}", base + i))),
                headers: Default::default(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            records.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        buf.freeze()
    }

    #[test]
    fn read_committed_drops_aborted_transactions_up_to_their_markers() {
        // Producer 7 aborts 0-1 (marker 2), producer 8 commits 3-4 (marker 6) while producer 7
        // writes 5 and aborts again (marker 7); producer 7's 8 after its abort is kept (a new
        // transaction, committed at 9).
        let mut all = bytes::BytesMut::new();
        all.extend_from_slice(&txn_batch(0, 2, 7, None));
        all.extend_from_slice(&txn_batch(2, 1, 7, Some(false)));
        all.extend_from_slice(&txn_batch(3, 2, 8, None));
        all.extend_from_slice(&txn_batch(5, 1, 7, None));
        all.extend_from_slice(&txn_batch(6, 1, 8, Some(true)));
        all.extend_from_slice(&txn_batch(7, 1, 7, Some(false)));
        all.extend_from_slice(&txn_batch(8, 1, 7, None));
        all.extend_from_slice(&txn_batch(9, 1, 7, Some(true)));
        let bytes = all.freeze();
        let aborted = [(7, 0), (7, 5)];
        let outcome = committed_only(frame(0, bytes.clone(), 10), &aborted);
        let Outcome::Records {
            mut batches,
            next_offset,
            ..
        } = outcome
        else {
            panic!("framing refused");
        };
        assert_eq!(
            next_offset, 10,
            "the position goes past every batch fetched"
        );
        let topic: Arc<str> = Arc::from("t");
        let mut records = VecDeque::new();
        while !batches.is_empty() {
            decode_next(&topic, 0, 0, &mut batches, &mut records).unwrap();
        }
        let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
        assert_eq!(
            offsets,
            vec![3, 4, 8],
            "aborted records and markers are never returned"
        );
        // Without aborted transactions (read_uncommitted sees them all but the markers).
        let (all_records, _) = decode(0, bytes).unwrap();
        let offsets: Vec<i64> = all_records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![0, 1, 3, 4, 5, 8]);
    }

    #[test]
    fn the_position_moves_past_trailing_markers() {
        use super::super::{Position, State};
        let tp = TopicPartition::new("t", 0);
        let mut st = State::new();
        st.add_partitions(std::slice::from_ref(&tp));
        st.reposition(&tp, Position::Known(0));
        let epoch = st.partitions[&tp].epoch;
        let mut all = bytes::BytesMut::new();
        all.extend_from_slice(&txn_batch(0, 2, 7, None));
        all.extend_from_slice(&txn_batch(2, 1, 7, Some(true)));
        let Outcome::Records {
            batches,
            next_offset,
            ..
        } = frame(0, all.freeze(), 3)
        else {
            panic!("framing refused");
        };
        st.buffer.push_back(Chunk {
            topic: Arc::from("t"),
            partition: tp.clone(),
            epoch,
            bytes: batches.len(),
            batches,
            records: VecDeque::new(),
            end: next_offset,
        });
        let backoff = Duration::from_secs(1);
        assert_eq!(st.next_record(backoff).unwrap().unwrap().offset, 0);
        assert_eq!(st.partitions[&tp].position, Position::Known(1));
        assert_eq!(st.next_record(backoff).unwrap().unwrap().offset, 1);
        assert_eq!(
            st.partitions[&tp].position,
            Position::Known(3),
            "past the commit marker with the last record"
        );
        assert!(st.next_record(backoff).is_none());
    }

    /// Frames `bytes` and decodes every batch from `from`.
    fn decode(from: i64, bytes: Bytes) -> Result<(Vec<ConsumerRecord>, i64), (i64, String)> {
        let Outcome::Records {
            mut batches,
            next_offset,
            ..
        } = frame(from, bytes, -1)
        else {
            return Err((-1, "not records".into()));
        };
        let topic: Arc<str> = Arc::from("t");
        let mut records = VecDeque::new();
        while !batches.is_empty() {
            decode_next(&topic, 0, from, &mut batches, &mut records)?;
        }
        Ok((records.into(), next_offset))
    }

    #[test]
    fn decodes_whole_batches_skipping_control_and_earlier_records() {
        let mut all = bytes::BytesMut::new();
        all.extend_from_slice(&batch(0, 3, false));
        all.extend_from_slice(&batch(3, 1, true));
        all.extend_from_slice(&batch(4, 2, false));
        let partial = batch(6, 5, false);
        all.extend_from_slice(&partial[..partial.len() - 3]);
        let (records, next_offset) = decode(1, all.freeze()).unwrap();
        let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![1, 2, 4, 5]);
        assert_eq!(next_offset, 6, "the partial batch is fetched again");
        assert_eq!(records[0].value.as_deref(), Some(&b"v1"[..]));
    }

    #[test]
    fn recv_decodes_batch_by_batch_and_stops_at_a_corrupt_one() {
        use super::super::{Position, State};
        let tp = TopicPartition::new("t", 0);
        let mut st = State::new();
        st.add_partitions(std::slice::from_ref(&tp));
        st.reposition(&tp, Position::Known(1));
        let epoch = st.partitions[&tp].epoch;
        let mut corrupt = batch(3, 2, false).to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        let mut all = bytes::BytesMut::new();
        all.extend_from_slice(&batch(0, 3, false));
        all.extend_from_slice(&corrupt);
        all.extend_from_slice(&batch(5, 1, false));
        let Outcome::Records { batches, .. } = frame(1, all.freeze(), 6) else {
            panic!("framing refused");
        };
        st.buffer.push_back(Chunk {
            topic: Arc::from("t"),
            partition: tp.clone(),
            epoch,
            bytes: batches.len(),
            batches,
            records: VecDeque::new(),
            end: 6,
        });
        let backoff = Duration::from_secs(1);
        let offsets: Vec<i64> = (0..2)
            .map(|_| st.next_record(backoff).unwrap().unwrap().offset)
            .collect();
        assert_eq!(
            offsets,
            vec![1, 2],
            "records before the fetch position are skipped"
        );
        match st.next_record(backoff) {
            Some(Err(ConsumeError::Corrupt { offset, .. })) => assert_eq!(offset, 3),
            other => panic!("expected a corrupt batch at 3, got {other:?}"),
        }
        let p = &st.partitions[&tp];
        assert_eq!(p.position, Position::Known(3), "stays at the corrupt batch");
        assert_eq!(p.fetch_offset, 3, "fetched again from there");
        assert!(p.retry_at.is_some(), "after a backoff");
        assert!(st.buffer.is_empty(), "the batches after it are dropped");
        assert!(st.next_record(backoff).is_none());
    }

    #[test]
    fn a_corrupt_batch_is_reported() {
        let mut b = batch(0, 2, false).to_vec();
        let last = b.len() - 1;
        b[last] ^= 0xff;
        assert!(matches!(decode(0, Bytes::from(b)), Err((0, _))));
        let mut framing = batch(5, 2, false).to_vec();
        framing[layout::MAGIC_AT] = 1;
        assert!(matches!(
            frame(5, Bytes::from(framing), -1),
            Outcome::Corrupt { offset: 5, .. }
        ));
    }
}
