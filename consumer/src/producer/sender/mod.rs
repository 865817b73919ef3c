//! The producer's background task: takes ready batches off the accumulator, sends one Produce
//! request per leader (up to `max.in.flight.requests.per.connection` at once), and settles each
//! batch from the response.
//!
//! Ordering and idempotence rules, as in the Java client:
//! - a batch is ready when full, when `linger.ms` has passed, on flush or close, or when it is a
//!   retry whose backoff is over;
//! - a retried batch (it has a sequence number) goes out only once every earlier batch of its
//!   partition has come back, so batches reach the new leader in sequence order;
//! - retriable errors (lost connection, timeout, `NOT_LEADER_OR_FOLLOWER`, …) refresh the
//!   metadata and retry with capped exponential backoff and full jitter, until `retries` or
//!   `delivery.timeout.ms`;
//! - `OUT_OF_ORDER_SEQUENCE_NUMBER` for a batch whose predecessor has not been acknowledged is
//!   retried too (the predecessor is being retried); for the batch the broker expects next, and
//!   fencing errors, it is fatal;
//! - a batch that fails for good after it was sent leaves a gap in the sequence: the epoch is
//!   bumped once nothing is in flight, and waiting batches are re-stamped from sequence 0.
//!
//! - `drain`: ready batches taken off the accumulator into one Produce request per leader.
//! - `settle`: each batch settled from the response: delivered, retried or failed.

mod drain;
mod settle;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, ProduceResponse, ProducerId};
use tokio::task::JoinSet;

use super::batch::Batch;
use super::idempotence::{self, wrap_sequence, Identity};
use super::{DeliveryError, FatalError, Inner};
use crate::error::{CallError, ErrorCode, NetError};
use crate::util::{backoff, lock};

/// A Produce request that came back (or failed).
struct Completion {
    node: i32,
    batches: Vec<Batch>,
    /// `None` for acks=0 (no response).
    result: Result<Option<ProduceResponse>, NetError>,
}

struct Sender {
    inner: Arc<Inner>,
    in_flight: JoinSet<Completion>,
    node_in_flight: HashMap<i32, usize>,
    /// Set once InitProducerId answered (idempotent producers only).
    identity: Option<Identity>,
    /// A sequence gap: bump the epoch before sending anything else.
    bump_needed: bool,
    init_attempts: u32,
    init_retry_at: Option<Instant>,
    throttled_until: HashMap<i32, Instant>,
    /// The last drain pass left a ready batch behind because its leader had
    /// `max.in.flight.requests.per.connection` requests out: a response wakes this task anyway.
    saturated: bool,
    /// Connections being opened, or failed and waiting out a backoff.
    connects: Arc<Mutex<HashMap<i32, Connect>>>,
}

#[derive(Debug, Clone, Copy)]
enum Connect {
    Pending,
    Failed { retry_at: Instant, attempts: u32 },
}

pub(super) async fn run(inner: Arc<Inner>) {
    let mut sender = Sender {
        inner,
        in_flight: JoinSet::new(),
        node_in_flight: HashMap::new(),
        identity: None,
        bump_needed: false,
        init_attempts: 0,
        init_retry_at: None,
        throttled_until: HashMap::new(),
        saturated: false,
        connects: Arc::default(),
    };
    sender.run().await;
}

impl Sender {
    fn idempotent(&self) -> bool {
        self.inner.config.enable_idempotence
    }

    /// A batch's fate is unknown for good: its partition's sequence has a gap. An idempotent
    /// producer bumps its epoch itself; a transactional one's abort does it (the transaction
    /// coordinator gives the epochs).
    fn gap(&mut self) {
        self.bump_needed = true;
        if let Some(txn) = &self.inner.txn {
            txn.bump_needed.store(true, Ordering::Release);
        }
    }

    /// A transactional producer takes the identity `init_transactions` (or an abort's epoch
    /// bump) put in `Inner::identity`, which also reset the sequences.
    fn adopt_identity(&mut self) {
        if self.inner.txn.is_none() {
            return;
        }
        let shared = *lock(&self.inner.identity);
        if shared != self.identity.map(|i| (i.id, i.epoch)) {
            self.identity = shared.map(|(id, epoch)| Identity { id, epoch });
            self.bump_needed = false;
        }
    }

    fn total_in_flight(&self) -> usize {
        self.in_flight.len()
    }

    async fn run(&mut self) {
        loop {
            let now = Instant::now();
            if let Some(fatal) = self.inner.fatal() {
                self.fail_queued(|| DeliveryError::Fatal(fatal.clone()));
            }
            self.expire(now);
            self.adopt_identity();
            if self.idempotent()
                && self.inner.txn.is_none()
                && self.inner.fatal().is_none()
                && (self.identity.is_none() || (self.bump_needed && self.total_in_flight() == 0))
                && self.init_retry_at.is_none_or(|t| t <= now)
                && !lock(&self.inner.accumulator).is_empty()
            {
                self.init_producer_id().await;
                continue;
            }
            let mut next_wake = self.init_retry_at.filter(|t| *t > now);
            loop {
                self.saturated = false;
                let (sent, wake) = self.drain(Instant::now());
                next_wake = earliest(next_wake, wake);
                if !sent {
                    break;
                }
            }
            if let Some(refreshed) = self.inner.cluster.metadata().refreshed {
                if refreshed.elapsed() > self.inner.config.net.metadata_max_age {
                    self.inner.refresh_metadata();
                }
            }
            if self.inner.closing.load(Ordering::Acquire)
                && self.in_flight.is_empty()
                && lock(&self.inner.accumulator).is_empty()
            {
                return;
            }
            // Publish when this task wakes by itself, so appends whose linger ends later do
            // not wake it; an append that saw it awake has left a permit in `wake`.
            let wake_at = next_wake.map_or(u64::MAX, |t| self.inner.nanos(t));
            self.inner.sender_wake_at.store(wake_at, Ordering::Release);
            // Full batches need not wake a task that waits for a response to send more.
            self.inner.sender_saturated.store(
                self.saturated && !self.in_flight.is_empty(),
                Ordering::Release,
            );
            let sleep = async {
                match next_wake {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Some(done) = self.in_flight.join_next(), if !self.in_flight.is_empty() => {
                    if let Ok(done) = done {
                        self.complete(done);
                    }
                    // Settle everything else that is done before draining again.
                    while let Some(Ok(done)) = self.in_flight.try_join_next() {
                        self.complete(done);
                    }
                }
                () = self.inner.wake.notified() => {}
                () = sleep => {}
            }
            self.inner
                .sender_wake_at
                .store(super::AWAKE, Ordering::Release);
        }
    }

    /// InitProducerId: a new identity, or (after a sequence gap) the same id with the epoch
    /// bumped; waiting batches are re-stamped from sequence 0.
    async fn init_producer_id(&mut self) {
        let net = &self.inner.config.net;
        let bump = self.identity.filter(|_| self.bump_needed);
        let attempt = async {
            let connection = self.inner.cluster.any_connection().await?;
            let version = connection.version::<InitProducerIdRequest>(4)?;
            let (id, epoch) = match bump {
                Some(i) if version >= 3 => (i.id, i.epoch),
                _ => (-1, -1),
            };
            let request = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(i32::MAX)
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(epoch);
            let response = connection.call_at(&request, version).await?;
            crate::error::check(response.error_code, ApiKey::InitProducerId, || {
                "producer id".to_string()
            })?;
            Ok::<_, CallError>(Identity {
                id: response.producer_id.0,
                epoch: response.producer_epoch,
            })
        };
        match attempt.await {
            Ok(identity) => {
                if self.bump_needed {
                    self.inner
                        .counters
                        .epoch_bumps
                        .fetch_add(1, Ordering::Relaxed);
                }
                self.identity = Some(identity);
                *lock(&self.inner.identity) = Some((identity.id, identity.epoch));
                self.bump_needed = false;
                self.init_attempts = 0;
                self.init_retry_at = None;
                let mut acc = lock(&self.inner.accumulator);
                for queue in acc.partitions.values_mut() {
                    queue.next_sequence = 0;
                    queue.acked_sequence = 0;
                    for batch in queue.batches.iter_mut() {
                        if let Some(encoded) = batch.encoded.as_ref() {
                            let seq = queue.next_sequence;
                            batch.encoded = Some(idempotence::restamp(encoded, identity, seq));
                            queue.next_sequence = wrap_sequence(seq, batch.record_count());
                        }
                    }
                }
            }
            Err(e) if e.is_retriable() => {
                self.init_retry_at = Some(
                    Instant::now()
                        + backoff(net.retry_backoff, net.retry_backoff_max, self.init_attempts),
                );
                self.init_attempts += 1;
            }
            Err(e) => {
                let code = e.code().unwrap_or(ErrorCode::UnknownServerError);
                *lock(&self.inner.fatal) = Some(FatalError {
                    code,
                    topic: String::new(),
                    partition: -1,
                });
            }
        }
    }

    /// Fails every batch past `delivery.timeout.ms` that is not in flight. The oldest batches
    /// are at the front of each queue (retries go back to the front).
    fn expire(&mut self, now: Instant) {
        let timeout = self.inner.config.delivery_timeout;
        let is_expired = |b: &Batch| now.saturating_duration_since(b.created) >= timeout;
        let mut expired = Vec::new();
        {
            let mut acc = lock(&self.inner.accumulator);
            for queue in acc.partitions.values_mut() {
                while queue.batches.front().is_some_and(is_expired) {
                    if let Some(b) = queue.batches.pop_front() {
                        expired.push(b);
                    }
                }
            }
        }
        for batch in expired {
            tracing::warn!(
                partition = %format_args!("{}-{}", batch.topic, batch.partition),
                records = batch.records.len(),
                attempts = batch.attempts,
                "batch not delivered within delivery.timeout.ms"
            );
            if batch.sequence().is_some() {
                self.gap();
            }
            self.fail(batch, DeliveryError::Timeout(timeout));
        }
    }

    fn fail_queued(&mut self, error: impl Fn() -> DeliveryError) {
        let batches: Vec<Batch> = {
            let mut acc = lock(&self.inner.accumulator);
            acc.partitions
                .values_mut()
                .flat_map(|q| q.batches.drain(..))
                .collect()
        };
        for batch in batches {
            self.fail(batch, error());
        }
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
