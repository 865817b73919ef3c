//! Settling the batches of a Produce request from its response (or its failure): delivered
//! records get their offsets, retriable errors put the batch back with a backoff, the rest fail
//! it, and fencing or a sequence the broker refuses stops the producer.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::ApiKey;

use super::{Completion, Sender};
use crate::error::{CallError, ErrorCode, NetError};
use crate::producer::batch::Batch;
use crate::producer::idempotence::wrap_sequence;
use crate::producer::{DeliveryError, FatalError, RecordMetadata};
use crate::util::{backoff, lock};

/// Errors after which the producer cannot go on: its identity is gone or fenced.
fn is_fatal(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::InvalidProducerEpoch
            | ErrorCode::ProducerFenced
            | ErrorCode::InvalidProducerIdMapping
            | ErrorCode::UnknownProducerId
            | ErrorCode::ClusterAuthorizationFailed
            | ErrorCode::TransactionalIdAuthorizationFailed
    )
}

/// Errors that mean the metadata is stale.
fn needs_metadata(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NotLeaderOrFollower
            | ErrorCode::LeaderNotAvailable
            | ErrorCode::UnknownTopicOrPartition
            | ErrorCode::FencedLeaderEpoch
            | ErrorCode::UnknownLeaderEpoch
            | ErrorCode::KafkaStorageError
    )
}

impl Sender {
    pub(super) fn complete(&mut self, done: Completion) {
        tracing::trace!(
            node = done.node,
            ok = done.result.is_ok(),
            "produce response"
        );
        if let Some(n) = self.node_in_flight.get_mut(&done.node) {
            *n = n.saturating_sub(1);
        }
        match done.result {
            Err(e) => {
                // The broker may be gone: look again.
                self.inner.refresh_metadata();
                for batch in done.batches {
                    self.settle_in_flight(&batch);
                    self.retry_or_fail(batch, CallError::Net(e.clone()));
                }
            }
            Ok(None) => {
                for batch in done.batches {
                    self.settle_in_flight(&batch);
                    self.succeed(batch, -1, -1);
                }
            }
            Ok(Some(response)) => {
                if response.throttle_time_ms > 0 {
                    self.throttled_until.insert(
                        done.node,
                        Instant::now()
                            + Duration::from_millis(
                                u64::try_from(response.throttle_time_ms).unwrap_or(0),
                            ),
                    );
                }
                let mut answers: HashMap<(&str, i32), &PartitionProduceResponse> = HashMap::new();
                for topic in &response.responses {
                    for p in &topic.partition_responses {
                        answers.insert((topic.name.0.as_str(), p.index), p);
                    }
                }
                let mut refresh = false;
                for batch in done.batches {
                    self.settle_in_flight(&batch);
                    let Some(answer) = answers.get(&(&*batch.topic, batch.partition)).copied()
                    else {
                        let error = NetError::Malformed {
                            addr: format!("broker {}", done.node),
                            api: ApiKey::Produce,
                            reason: format!("no answer for {}-{}", batch.topic, batch.partition),
                        };
                        self.retry_or_fail(batch, CallError::Net(error));
                        continue;
                    };
                    match ErrorCode::try_from_code(answer.error_code) {
                        None | Some(ErrorCode::DuplicateSequenceNumber) => {
                            self.succeed(batch, answer.base_offset, answer.log_append_time_ms)
                        }
                        Some(code) => {
                            refresh |= needs_metadata(code);
                            self.on_error(batch, code, answer);
                        }
                    }
                }
                if refresh {
                    self.inner.refresh_metadata();
                }
            }
        }
    }

    /// The batch is back from the wire.
    pub(super) fn settle_in_flight(&self, batch: &Batch) {
        let mut acc = lock(&self.inner.accumulator);
        if let Some(queue) = acc
            .partitions
            .get_mut(&(batch.topic.clone(), batch.partition))
        {
            queue.in_flight = queue.in_flight.saturating_sub(1);
        }
    }

    fn on_error(&mut self, batch: Batch, code: ErrorCode, answer: &PartitionProduceResponse) {
        let error = CallError::Broker {
            api: ApiKey::Produce,
            resource: format!("{}-{}", batch.topic, batch.partition),
            code,
            message: answer.error_message.as_ref().map(|m| m.to_string()),
        };
        if code == ErrorCode::OutOfOrderSequenceNumber && self.identity.is_some() {
            // Retriable when an earlier batch of the partition is still unresolved (the broker
            // has not seen it yet) or a bump is coming; fatal for the batch it expects next.
            let expected = lock(&self.inner.accumulator)
                .partitions
                .get(&(batch.topic.clone(), batch.partition))
                .map(|q| q.acked_sequence);
            if self.bump_needed || batch.sequence() != expected {
                self.retry_or_fail(batch, error);
                return;
            }
        }
        if is_fatal(code) || code == ErrorCode::OutOfOrderSequenceNumber {
            let fatal = FatalError {
                code,
                topic: batch.topic.to_string(),
                partition: batch.partition,
            };
            *lock(&self.inner.fatal) = Some(fatal.clone());
            self.fail(batch, DeliveryError::Fatal(fatal));
            return;
        }
        if code.is_retriable() {
            self.retry_or_fail(batch, error);
            return;
        }
        if batch.sequence().is_some() {
            self.gap();
        }
        let error = DeliveryError::Broker {
            topic: batch.topic.to_string(),
            partition: batch.partition,
            code,
        };
        self.fail(batch, error);
    }

    /// Back in the queue with a backoff, or failed if out of retries or time.
    fn retry_or_fail(&mut self, mut batch: Batch, error: CallError) {
        if let Some(fatal) = self.inner.fatal() {
            self.fail(batch, DeliveryError::Fatal(fatal));
            return;
        }
        let inner = self.inner.clone();
        let config = &inner.config;
        let now = Instant::now();
        let expired = now.saturating_duration_since(batch.created) >= config.delivery_timeout;
        if expired || batch.attempts >= config.retries {
            tracing::warn!(
                partition = %format_args!("{}-{}", batch.topic, batch.partition),
                attempts = batch.attempts,
                %error,
                "batch failed after retries"
            );
            if batch.sequence().is_some() {
                self.gap();
            }
            let why = if expired {
                DeliveryError::Timeout(config.delivery_timeout)
            } else {
                DeliveryError::Retries(error)
            };
            self.fail(batch, why);
            return;
        }
        let pause = backoff(
            config.net.retry_backoff,
            config.net.retry_backoff_max,
            batch.attempts,
        );
        tracing::debug!(
            partition = %format_args!("{}-{}", batch.topic, batch.partition),
            sequence = ?batch.sequence(),
            attempt = batch.attempts + 1,
            ?pause,
            %error,
            "retrying a batch"
        );
        batch.attempts += 1;
        batch.retry_at = Some(now + pause);
        self.inner.counters.retries.fetch_add(1, Ordering::Relaxed);
        let mut acc = lock(&self.inner.accumulator);
        acc.partitions
            .entry((batch.topic.clone(), batch.partition))
            .or_default()
            .requeue(batch);
    }

    fn succeed(&mut self, batch: Batch, base_offset: i64, log_append_time: i64) {
        if let Some(seq) = batch.sequence() {
            let mut acc = lock(&self.inner.accumulator);
            if let Some(queue) = acc
                .partitions
                .get_mut(&(batch.topic.clone(), batch.partition))
            {
                let current = self.identity.map(|i| (i.id, i.epoch));
                let stamped = batch
                    .encoded
                    .as_ref()
                    .map(|e| (e.producer_id, e.producer_epoch));
                if current == stamped {
                    queue.acked_sequence = wrap_sequence(seq, batch.record_count());
                }
            }
        }
        // Memory first: whoever the delivery wakes finds the room already free.
        let freed: usize = batch.records.iter().map(|r| r.size).sum();
        self.inner.memory.release(freed);
        for (i, record) in (0i64..).zip(batch.records) {
            record.reply.send(Ok(RecordMetadata {
                topic: batch.topic.clone(),
                partition: batch.partition,
                offset: if base_offset >= 0 {
                    base_offset + i
                } else {
                    -1
                },
                timestamp: if log_append_time >= 0 {
                    log_append_time
                } else {
                    record.timestamp
                },
            }));
        }
        self.inner.flush.complete(batch.flush_generation);
    }

    pub(super) fn fail(&mut self, batch: Batch, error: DeliveryError) {
        if let Some(txn) = &self.inner.txn {
            txn.delivery_failed(&error);
        }
        let freed: usize = batch.records.iter().map(|r| r.size).sum();
        self.inner.memory.release(freed);
        for record in batch.records {
            record.reply.send(Err(error.clone()));
        }
        self.inner.flush.complete(batch.flush_generation);
    }
}
