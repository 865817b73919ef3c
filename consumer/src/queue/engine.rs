//! The queue consumer's wire engine: share sessions per leader, ShareFetch rounds, and
//! acknowledgements sent on the next fetch or with ShareAcknowledge.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::{
    ApiKey, GroupId, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
    ShareFetchResponse,
};
use tokio::sync::watch;

use super::acks::{Ack, AckBook, Batch};
use super::membership::{Assignment, IdPartition};
use super::request_topics::{acknowledge_topics, fetch_topics, forgotten_topics};
use super::{AckFailure, Delivery, QueueError};
use crate::cluster::Cluster;
use crate::config::{AckMode, QueueConfig};
use crate::consumer::wanted::decode_wanted;
use crate::error::{CallError, ErrorCode, NetError};
use crate::util::{lock, text};
use crate::{ConsumerRecord, TopicPartition};

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) cluster: Arc<Cluster>,
    pub(super) config: QueueConfig,
    pub(super) member_id: String,
    pub(super) assignment: watch::Receiver<Assignment>,
    pub(super) acks: Mutex<AckBook>,
    /// The records of the last receive (implicit mode accepts what is left of them).
    pub(super) handed_out: Mutex<Vec<(IdPartition, i64)>>,
    /// Leader broker → its share session.
    pub(super) sessions: Mutex<HashMap<i32, Arc<tokio::sync::Mutex<Session>>>>,
    pub(super) failures: Mutex<Vec<AckFailure>>,
    pub(super) lock_timeout_ms: AtomicI32,
}

/// A share session with one broker.
#[derive(Debug, Default)]
pub(super) struct Session {
    /// 0: none open.
    epoch: i32,
    partitions: BTreeSet<IdPartition>,
}

impl Session {
    pub(super) fn advance(&mut self) {
        self.epoch = if self.epoch == i32::MAX {
            1
        } else {
            self.epoch + 1
        };
    }

    pub(super) fn reset(&mut self) {
        self.epoch = 0;
        self.partitions.clear();
    }

    /// The partitions to add to the session and to forget from it for it to hold `assigned`
    /// (a new session adds them all).
    fn changes(&self, assigned: &BTreeSet<IdPartition>) -> (Vec<IdPartition>, Vec<IdPartition>) {
        let add: Vec<IdPartition> = assigned
            .iter()
            .filter(|p| self.epoch == 0 || !self.partitions.contains(p))
            .copied()
            .collect();
        let forget: Vec<IdPartition> = if self.epoch == 0 {
            Vec::new()
        } else {
            self.partitions.difference(assigned).copied().collect()
        };
        (add, forget)
    }
}

impl Inner {
    pub(super) fn settle_implicit(&self) {
        if self.config.ack_mode != AckMode::Implicit {
            return;
        }
        let handed_out = std::mem::take(&mut *lock(&self.handed_out));
        let mut acks = lock(&self.acks);
        for (partition, offset) in handed_out {
            acks.set_if_absent(partition, offset, Ack::Accept);
        }
    }

    pub(super) fn session(&self, node: i32) -> Arc<tokio::sync::Mutex<Session>> {
        lock(&self.sessions).entry(node).or_default().clone()
    }

    /// The leader of each partition (metadata refreshed when one is unknown).
    pub(super) async fn leaders(
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

    pub(super) fn topic_partition(&self, (id, p): IdPartition) -> TopicPartition {
        let metadata = self.cluster.metadata();
        let name = metadata
            .topic_name(id)
            .map_or_else(|| id.to_string(), str::to_string);
        TopicPartition::new(name, p)
    }

    pub(super) fn fail(&self, partition: IdPartition, batches: &[Batch], error: ErrorCode) {
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
    pub(super) async fn fetch_round(
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

    /// One ShareFetch to `node` under its share session, for `partitions` and carrying their
    /// pending acknowledgements; the records acquired, as deliveries.
    pub(super) async fn fetch_from(
        self: &Arc<Self>,
        node: i32,
        partitions: Vec<IdPartition>,
        wait: Duration,
    ) -> Result<Vec<Delivery>, QueueError> {
        let connection = self.cluster.connection(node).await?;
        let slot = self.session(node);
        let mut session = slot.lock().await;
        let assigned: BTreeSet<IdPartition> = partitions.into_iter().collect();
        let acks = self.pending_acks(&session, &assigned);
        let (add, forget) = session.changes(&assigned);
        let request = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(text(&self.config.group_id))))
            .with_member_id(Some(text(&self.member_id)))
            .with_share_session_epoch(session.epoch)
            .with_max_wait_ms(i32::try_from(wait.as_millis()).unwrap_or(i32::MAX))
            .with_min_bytes(1)
            .with_max_bytes(self.config.fetch_max_bytes)
            .with_max_records(self.config.max_poll_records)
            .with_batch_size(self.config.max_poll_records)
            .with_topics(fetch_topics(&add, &acks))
            .with_forgotten_topics_data(forgotten_topics(&forget));
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
                self.fail_all(&acks, ErrorCode::NetworkException);
                return Err(e.into());
            }
        };
        if let Some(code) = ErrorCode::try_from_code(response.error_code) {
            session.reset();
            self.fail_all(&acks, code);
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
        self.note_lock_timeout(response.acquisition_lock_timeout_ms);
        Ok(self.fetched(response, &acks).await)
    }

    /// The pending acknowledgements a ShareFetch under `session` carries: those of `assigned`
    /// partitions the session holds. Without a session, those are refused instead: the broker
    /// released their records when the session they were held under ended.
    fn pending_acks(
        &self,
        session: &Session,
        assigned: &BTreeSet<IdPartition>,
    ) -> BTreeMap<IdPartition, Vec<Batch>> {
        if session.epoch == 0 {
            // Held under a session that has ended: the broker has released them already.
            let stale = lock(&self.acks).take(|p| assigned.contains(p));
            for (p, batches) in &stale {
                self.fail(*p, batches, ErrorCode::ShareSessionNotFound);
            }
            BTreeMap::new()
        } else {
            let held = session.partitions.clone();
            lock(&self.acks).take(|p| held.contains(p) && assigned.contains(p))
        }
    }

    /// Records every acknowledgement of `acks` as refused with `error`.
    fn fail_all(&self, acks: &BTreeMap<IdPartition, Vec<Batch>>, error: ErrorCode) {
        for (p, batches) in acks {
            self.fail(*p, batches, error);
        }
    }

    /// Keeps the broker's acquisition lock timeout, when it gives one.
    fn note_lock_timeout(&self, ms: i32) {
        if ms > 0 {
            self.lock_timeout_ms.store(ms, Ordering::Relaxed);
        }
    }

    /// A ShareFetch answer, partition by partition: refused acknowledgements recorded,
    /// partition errors skipped (a retriable one refreshes the metadata), the acquired
    /// records as deliveries.
    async fn fetched(
        self: &Arc<Self>,
        response: ShareFetchResponse,
        acks: &BTreeMap<IdPartition, Vec<Batch>>,
    ) -> Vec<Delivery> {
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
        out
    }

    /// The acquired records of one partition as deliveries; offsets acquired without a record
    /// (compacted away, control records) are acknowledged as gaps.
    pub(super) fn deliveries(
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
        let mut ranges: Vec<_> = acquired.iter().collect();
        ranges.sort_by_key(|r| r.first_offset);
        let wanted: Vec<(i64, i64)> = ranges
            .iter()
            .map(|r| (r.first_offset, r.last_offset))
            .collect();
        let decoded = match decode_wanted(&topic, key.1, records.unwrap_or_default(), &wanted) {
            Ok(records) => records,
            Err((offset, reason)) => {
                // Unreadable: left to its lock (it comes back, counts towards the limit).
                tracing::warn!(partition = %tp, offset, reason, "corrupt records in a share fetch");
                return Vec::new();
            }
        };
        // Records come in offset order; the acquired ranges are walked in order beside them.
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
    pub(super) async fn flush_unrouted(&self) {
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
    pub(super) async fn acknowledge_now(&self, close: bool) -> Result<(), QueueError> {
        self.acknowledge_matching(|_| true, close).await
    }

    pub(super) async fn acknowledge_matching(
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
    pub(super) async fn send_acks(
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
            .with_topics(acknowledge_topics(acks));
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
                self.fail_all(acks, ErrorCode::NetworkException);
                return Err(e.into());
            }
        };
        if let Some(code) = ErrorCode::try_from_code(response.error_code) {
            self.fail_all(acks, code);
            return Err(CallError::broker(
                ApiKey::ShareAcknowledge,
                format!("share group {}", self.config.group_id),
                code,
            )
            .into());
        }
        self.note_lock_timeout(response.acquisition_lock_timeout_ms);
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

    pub(super) async fn renew(
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
