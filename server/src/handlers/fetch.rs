//! Fetch, versions 4–12, session-less: every request names its partitions, and the response
//! says `session_id = 0`, which clients that ask for a session take as "no session". Records
//! are whole batches exactly as stored, sliced from the segment's memory map and written to
//! the socket from there. `max_wait_ms` and
//! `min_bytes` are honoured: a fetch short of `min_bytes` waits until an append wakes it (not a
//! timer) or `max_wait_ms` passes. `max_bytes` is capped by the broker's `fetch.max.bytes`
//! (`--fetch-max-bytes`, 55 MiB), whatever the request asks. `max_bytes` and
//! `partition_max_bytes` are soft for the first batch returned, as in Kafka (KIP-74), so a
//! consumer can always make progress; a later batch that does not fit is left for the next
//! fetch. Every partition answers its last stable offset (`Partition::last_stable_offset`);
//! with `isolation_level` 1 (read_committed) the records served stop at it (whole batches
//! below it, never a byte of one at or past it; `high_watermark` stays the high watermark)
//! and `aborted_transactions` lists the aborted transactions overlapping what was served
//! (Kafka's semantics: the client drops those producers' records from each first offset to
//! the abort marker); a long poll is woken by a marker's append too, which moves the LSO. A
//! partition of an offline topic (its files could not be opened) answers CORRUPT_MESSAGE, which
//! clients hand to the application, rather than Kafka's KAFKA_STORAGE_ERROR, which they retry
//! silently: one broker has no other replica to fail over to. Authorization: READ on each
//! topic, decided once per request (not per wake-up of a long poll); a topic without it answers
//! TOPIC_AUTHORIZATION_FAILED for its partitions, and at once, like any error. Without an
//! authorizer nothing is decided or allocated.

use std::sync::Arc;
use std::time::Duration;

use acl::Operation;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse};

use super::bounds::{topics_and_partitions, Counts};
use super::errors;
use super::Handler;
use super::RequestContext;
use crate::broker::{Access, Storage};
use crate::config::BrokerConfig;
use crate::metrics::Metrics;
use log_core::Partition;
use tokio::sync::watch;

impl Handler for FetchRequest {
    const SERVED: (i16, i16) = (4, 12);
    type Needs = (
        Arc<BrokerConfig>,
        Arc<Storage>,
        Arc<Access>,
        Arc<Metrics>,
        watch::Receiver<bool>,
    );

    fn counts(&self) -> Counts {
        let fetched = topics_and_partitions(&self.topics, |t| t.partitions.len());
        fetched + topics_and_partitions(&self.forgotten_topics_data, |t| t.partitions.len())
    }

    async fn handle(
        (broker_config, storage, access, metrics, shutdown): Self::Needs,
        request: FetchRequest,
        ctx: &RequestContext,
    ) -> FetchResponse {
        let denied: Option<Vec<bool>> = access.authorizer.is_enabled().then(|| {
            request
                .topics
                .iter()
                .map(|t| !ctx.authorize_topic(Operation::Read, &t.topic))
                .collect()
        });
        let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
        let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
        let deadline = tokio::time::Instant::now() + max_wait;
        let mut shutdown = shutdown.clone();
        loop {
            // Register for the next append before reading, so none is missed in between.
            let appended = storage.appended.notified();
            tokio::pin!(appended);
            appended.as_mut().enable();

            let (responses, bytes, any_error) =
                read_all(&broker_config, &storage, &request, denied.as_deref());
            let waited_enough =
                bytes >= min_bytes || any_error || tokio::time::Instant::now() >= deadline;
            if waited_enough || *shutdown.borrow() {
                count_out(&metrics, &responses);
                return FetchResponse::default().with_responses(responses);
            }
            tokio::select! {
                () = &mut appended => {}
                () = tokio::time::sleep_until(deadline) => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    fn throttle_time_ms(response: &mut FetchResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn shared(response: &FetchResponse) -> Vec<Bytes> {
        records(response)
    }

    fn each_error(r: &FetchResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.responses
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code));
    }
}

/// Bytes and records out per topic, for the metrics (from batch headers: no decoding).
fn count_out(metrics: &Arc<Metrics>, responses: &[FetchableTopicResponse]) {
    for topic in responses {
        let (mut records, mut bytes) = (0, 0);
        for p in &topic.partitions {
            if let Some(r) = &p.records {
                records += crate::metrics::count_records(r);
                bytes += r.len() as u64;
            }
        }
        metrics.fetched(&topic.topic, records, bytes);
    }
}

/// The response's record slices, in the order they are encoded (shared, not copied, on the way
/// out).
pub fn records(response: &FetchResponse) -> Vec<Bytes> {
    response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter_map(|p| p.records.clone())
        .collect()
}

/// `isolation_level` of a read_committed client.
const READ_COMMITTED: i8 = 1;

/// The aborted transactions overlapping the batches `records` read from `from` on.
fn aborted(partition: &Partition, from: i64, records: &[u8]) -> Vec<AbortedTransaction> {
    // Most partitions have none: found before the batches are walked for their end.
    if partition.aborted_transactions(from, i64::MAX).is_empty() {
        return Vec::new();
    }
    let mut to = from;
    let mut at = 0usize;
    while let Some(header) = records
        .get(at..)
        .and_then(|b| record_batch::BatchHeader::read(b).ok())
    {
        to = to.max(header.next_offset());
        at += header.size as usize;
    }
    partition
        .aborted_transactions(from, to)
        .into_iter()
        .map(|a| {
            AbortedTransaction::default()
                .with_producer_id(a.producer_id.into())
                .with_first_offset(a.first_offset)
        })
        .collect()
}

/// Reads every requested partition but those of `denied` topics (by index); returns the
/// responses, the record bytes, and whether any partition had an error (which answers the
/// fetch at once, as Kafka does).
fn read_all(
    broker_config: &BrokerConfig,
    storage: &Arc<Storage>,
    request: &FetchRequest,
    denied: Option<&[bool]>,
) -> (Vec<FetchableTopicResponse>, usize, bool) {
    let mut reads = Reads {
        committed: request.isolation_level == READ_COMMITTED,
        budget: usize::try_from(request.max_bytes)
            .unwrap_or(0)
            .min(broker_config.limits.fetch_max_bytes),
        total: 0,
        any_error: false,
    };
    let responses = request
        .topics
        .iter()
        .enumerate()
        .map(|(t, topic)| {
            let denied = denied.is_some_and(|d| d.get(t).copied().unwrap_or(true));
            let partitions = topic
                .partitions
                .iter()
                .map(|p| reads.partition(storage, &topic.topic, p, denied))
                .collect();
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    (responses, reads.total, reads.any_error)
}

/// One fetch's reads across its partitions, in order.
struct Reads {
    /// read_committed: records stop at the last stable offset.
    committed: bool,
    /// The bytes the fetch may still take (`max_bytes`, capped by `fetch.max.bytes`).
    budget: usize,
    /// The record bytes read so far.
    total: usize,
    /// Whether a partition had an error.
    any_error: bool,
}

impl Reads {
    /// One partition's answer: refused (`denied`), unknown or offline, or its records.
    fn partition(
        &mut self,
        storage: &Arc<Storage>,
        topic: &str,
        p: &FetchPartition,
        denied: bool,
    ) -> PartitionData {
        let response = PartitionData::default()
            .with_partition_index(p.partition)
            .with_aborted_transactions(Some(Vec::new()))
            .with_preferred_read_replica((-1).into());
        if denied {
            self.any_error = true;
            return response
                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_log_start_offset(-1);
        }
        let Some(partition) = storage.partition(topic, p.partition) else {
            self.any_error = true;
            let error = if storage.is_offline(topic, p.partition) {
                errors::OFFLINE_FETCH
            } else {
                ResponseError::UnknownTopicOrPartition
            };
            return response
                .with_error_code(error.code())
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_log_start_offset(-1);
        };
        let end = partition.log_end_offset();
        let response = response
            .with_high_watermark(end)
            .with_last_stable_offset(partition.last_stable_offset().min(end))
            .with_log_start_offset(partition.log_start_offset());
        self.read(&partition, p, response)
    }

    /// Reads a partition's records from the fetch offset within the partition's and the
    /// fetch's limits, into `response`.
    fn read(
        &mut self,
        partition: &Partition,
        p: &FetchPartition,
        response: PartitionData,
    ) -> PartitionData {
        let partition_max = usize::try_from(p.partition_max_bytes).unwrap_or(0);
        let limit = partition_max.min(self.budget);
        let first = self.total == 0;
        if partition_max == 0 || (limit == 0 && !first) {
            return response.with_records(Some(Bytes::new()));
        }
        // A read returns at least one whole batch: the first partition with data may exceed
        // the limits by that batch (KIP-74); any later one may not.
        let read = if self.committed {
            partition.read_committed(p.fetch_offset, limit.max(1))
        } else {
            partition.read(p.fetch_offset, limit.max(1))
        };
        match read {
            Ok(read) if !first && read.records.len() > limit => response
                .with_high_watermark(read.log_end_offset)
                .with_last_stable_offset(read.last_stable_offset)
                .with_log_start_offset(read.log_start_offset)
                .with_records(Some(Bytes::new())),
            Ok(read) => {
                let n = read.records.len();
                self.total += n;
                self.budget = self.budget.saturating_sub(n);
                let aborted = if self.committed && n > 0 {
                    aborted(partition, p.fetch_offset, &read.records)
                } else {
                    Vec::new()
                };
                response
                    .with_high_watermark(read.log_end_offset)
                    .with_last_stable_offset(read.last_stable_offset)
                    .with_log_start_offset(read.log_start_offset)
                    .with_aborted_transactions(Some(aborted))
                    .with_records(Some(read.records))
            }
            Err(e) => {
                self.any_error = true;
                response
                    .with_error_code(errors::read(&e).code())
                    .with_records(Some(Bytes::new()))
            }
        }
    }
}
