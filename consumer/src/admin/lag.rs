//! Offsets and lag: a group's committed offsets (read, or committed from outside the group),
//! each partition's offsets at a time (ListOffsets to its leader), the timestamp at an offset,
//! and per partition how far behind a group is, in records and seconds.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, Bytes};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::records::RecordBatchDecoder;
use record_batch::BatchHeader;

use super::{Admin, AdminError, PartitionLag};
use crate::error::{check, CallError, ErrorCode};
use crate::offsets::{self, Committer, EARLIEST, LATEST};
use crate::util::text;
use crate::TopicPartition;

impl Admin {
    /// The group's committed offsets, by (topic, partition).
    pub async fn committed_offsets(
        &mut self,
        group: &str,
    ) -> Result<BTreeMap<(String, i32), i64>, AdminError> {
        let committed =
            offsets::fetch_committed(&self.cluster, group, None, Self::deadline()).await?;
        Ok(committed
            .into_iter()
            .map(|(tp, o)| ((tp.topic, tp.partition), o))
            .collect())
    }

    /// ListOffsets for every partition of `topic` at `timestamp` (-2 earliest, -1 latest, else
    /// the first record at or after it; -1 when there is none), each asked of its leader.
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        partitions: i32,
        timestamp: i64,
    ) -> Result<Vec<i64>, AdminError> {
        self.cluster.add_interest([topic]);
        if self.cluster.metadata().partition_count(topic).is_none() {
            self.topic_metadata(topic).await?;
        }
        let wanted: Vec<(TopicPartition, i64)> = (0..partitions)
            .map(|p| (TopicPartition::new(topic, p), timestamp))
            .collect();
        let found = offsets::list_offsets(&self.cluster, &wanted, Self::deadline()).await?;
        Ok(wanted
            .iter()
            .map(|(tp, _)| found.get(tp).map_or(-1, |(offset, _)| *offset))
            .collect())
    }

    /// Timestamp of the record at `offset` (the first record at or after it, transaction
    /// markers skipped), if there is one: under LogAppendTime the append time. Reads on past
    /// markers and compaction gaps, [`TIMESTAMP_FETCHES`] fetches at most.
    pub async fn timestamp_at(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<Option<i64>, AdminError> {
        let tp = TopicPartition::new(topic, partition);
        let mut from = offset;
        for _ in 0..TIMESTAMP_FETCHES {
            let Some(records) = self.fetch_batches(&tp, from).await? else {
                return Ok(None);
            };
            match first_timestamp(&tp, records, offset)? {
                Found::Timestamp(ts) => return Ok(Some(ts)),
                Found::NotBefore(next) if next > from => from = next,
                Found::NotBefore(_) => return Ok(None),
            }
        }
        Ok(None)
    }

    /// The batches of one Fetch of `tp` from `from` (up to 64 KiB, the first batch whole), or
    /// `None` when there are none.
    async fn fetch_batches(
        &mut self,
        tp: &TopicPartition,
        from: i64,
    ) -> Result<Option<Bytes>, AdminError> {
        let (topic, partition) = (tp.topic.as_str(), tp.partition);
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(text(topic)))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(from)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(64 << 10)])]);
        let leader = match self.cluster.metadata().leader(topic, partition) {
            Some(l) => l,
            None => {
                let seen = self.cluster.metadata().version;
                self.cluster.add_interest([topic]);
                self.cluster
                    .refresh(seen)
                    .await?
                    .leader(topic, partition)
                    .ok_or_else(|| {
                        CallError::broker(
                            ApiKey::Fetch,
                            tp.to_string(),
                            ErrorCode::LeaderNotAvailable,
                        )
                    })?
            }
        };
        let connection = self.cluster.connection(leader).await?;
        let response = connection.call(&request, 12).await?;
        let Some(data) = response
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .next()
        else {
            return Ok(None);
        };
        check(data.error_code, ApiKey::Fetch, || tp.to_string())?;
        Ok(data.records.filter(|r| !r.is_empty()))
    }

    /// Records behind and seconds behind, per partition, for every topic the group committed to.
    ///
    /// `also` adds topics the group has not committed to yet (those its members are assigned),
    /// so their partitions show up with no committed offset.
    pub async fn lag(
        &mut self,
        group: &str,
        also: &[String],
        now_ms: i64,
    ) -> Result<Vec<PartitionLag>, AdminError> {
        let committed = self.committed_offsets(group).await?;
        let topics: BTreeSet<String> = committed
            .keys()
            .map(|(topic, _)| topic.clone())
            .chain(also.iter().cloned())
            .collect();
        let mut out = Vec::new();
        for topic in topics {
            let partitions = self.partition_count(&topic).await?;
            let starts = self.list_offsets(&topic, partitions, EARLIEST).await?;
            let ends = self.list_offsets(&topic, partitions, LATEST).await?;
            for ((p, log_start), log_end) in (0..partitions).zip(starts).zip(ends) {
                let committed = committed.get(&(topic.clone(), p)).copied();
                let lag_records = committed.map(|c| (log_end - c.max(log_start)).max(0));
                let lag_seconds = match (committed, lag_records) {
                    (Some(c), Some(lag)) if lag > 0 => self
                        .timestamp_at(&topic, p, c.max(log_start))
                        .await?
                        .map(|ts| ((now_ms - ts).max(0)) as f64 / 1000.0),
                    (Some(_), _) => Some(0.0),
                    _ => None,
                };
                out.push(PartitionLag {
                    topic: topic.clone(),
                    partition: p,
                    committed,
                    log_start,
                    log_end,
                    lag_records,
                    lag_seconds,
                });
            }
        }
        Ok(out)
    }

    /// Commits offsets for a group without joining it (generation -1), as Kafka's
    /// `kafka-consumer-groups --reset-offsets` does. The broker refuses it while the group has
    /// members.
    pub async fn commit_offsets(
        &mut self,
        group: &str,
        offsets: &BTreeMap<(String, i32), i64>,
    ) -> Result<(), AdminError> {
        let offsets: BTreeMap<TopicPartition, i64> = offsets
            .iter()
            .map(|((t, p), o)| (TopicPartition::new(t, *p), *o))
            .collect();
        Ok(offsets::commit(
            &self.cluster,
            group,
            &Committer::outsider(),
            &offsets,
            Self::deadline(),
        )
        .await?)
    }
}

/// Fetches [`Admin::timestamp_at`] makes at most: a marker or a compaction gap each take one.
const TIMESTAMP_FETCHES: usize = 8;

/// What one fetch's batches say of the first record at or after an offset.
enum Found {
    Timestamp(i64),
    /// None in these batches: the next fetch starts here.
    NotBefore(i64),
}

/// The timestamp of the first record at or after `offset` in `records` (whole batches, the
/// last perhaps partial), transaction markers skipped; under LogAppendTime the batch's max
/// timestamp, every record's (the decoder gives each its create time).
fn first_timestamp(
    tp: &TopicPartition,
    mut records: Bytes,
    offset: i64,
) -> Result<Found, AdminError> {
    let undecodable = |reason: String| AdminError::Undecodable {
        partition: tp.clone(),
        reason,
    };
    let mut next = offset;
    while records.remaining() >= record_batch::HEADER_LEN {
        let header = BatchHeader::read(&records).map_err(|e| undecodable(e.to_string()))?;
        if records.len() < header.size as usize {
            break;
        }
        let set =
            RecordBatchDecoder::decode(&mut records).map_err(|e| undecodable(e.to_string()))?;
        next = next.max(header.next_offset());
        if header.is_control() {
            continue;
        }
        if let Some(r) = set.records.iter().find(|r| r.offset >= offset) {
            return Ok(Found::Timestamp(
                header.append_time().unwrap_or(r.timestamp),
            ));
        }
    }
    Ok(Found::NotBefore(next))
}
