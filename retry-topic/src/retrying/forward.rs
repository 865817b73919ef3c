//! Where a failed record goes: the next retry topic, the dead-letter topic, or (ordered keys)
//! parked behind its key; the chain headers it carries there.

use super::*;

impl RetryingConsumer {
    /// Sends a failed record to its next stage, or to the DLT when attempts or time ran out.
    pub(super) async fn retry(
        &mut self,
        record: &ConsumerRecord,
        attempt: u32,
        original_ts: i64,
        failure: Failure,
    ) -> Result<(), RetryError> {
        let next = attempt + 1;
        let Some(stage) = (next <= self.config.max_attempts)
            .then(|| self.topology.stage_for_attempt(next))
            .flatten()
        else {
            return self.dead_letter(record, failure, attempt).await;
        };
        let now = now_ms();
        let wait = self.topology.wait(stage);
        let due = now + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX);
        if let Some(limit) = self.config.retry_deadline {
            let limit_ms = original_ts + i64::try_from(limit.as_millis()).unwrap_or(i64::MAX);
            if due > limit_ms {
                let failure = Failure {
                    message: format!("{} (retry deadline passed)", failure.message),
                    ..failure
                };
                return self.dead_letter(record, failure, attempt).await;
            }
        }
        let to = self.topology.stages[stage].topic.clone();
        let mut set = self.chain_headers(record, original_ts);
        set.set(headers::ATTEMPTS, next.to_be_bytes().to_vec());
        set.set(headers::BACKOFF_TIMESTAMP, headers::big_integer(due));
        self.set_failure(&mut set, record, attempt, &failure, now)?;
        if !self.send(record, &to, set).await? {
            return Ok(());
        }
        if let (Some(keys), Some(key)) = (&mut self.keys, &record.key) {
            let original = original_offset(record);
            keys.failed(
                record.partition,
                key,
                original,
                stage,
                now,
                format!("{}: {}", failure.class, failure.message),
            );
        }
        self.status.update(|s| s.forwarded += 1);
        self.emit(Event::Forwarded {
            topic: record.topic.to_string(),
            partition: record.partition,
            offset: record.offset,
            to,
            attempt: next,
            due_ms: due,
        });
        self.finish_forward(record).await;
        Ok(())
    }

    /// Sends a record to the dead-letter topic with Spring's headers and the history.
    pub(super) async fn dead_letter(
        &mut self,
        record: &ConsumerRecord,
        failure: Failure,
        attempt: u32,
    ) -> Result<(), RetryError> {
        let now = now_ms();
        let original_ts = headers::original_timestamp(record).unwrap_or(record.timestamp);
        let mut set = self.chain_headers(record, original_ts);
        let origin = Origin::from_headers(record)
            .ok()
            .flatten()
            .unwrap_or_else(|| Origin::of(record));
        set.set_origin(headers::DLT_ORIGIN_NAMES, &origin);
        set.set(
            headers::ATTEMPTS,
            attempt.max(1).saturating_add(1).to_be_bytes().to_vec(),
        );
        set.remove(headers::BACKOFF_TIMESTAMP);
        self.set_failure(&mut set, record, attempt, &failure, now)?;
        set.set(headers::DLT_EXCEPTION_FQCN, failure.class.clone());
        set.set(headers::DLT_EXCEPTION_MESSAGE, failure.message.clone());
        let to = self.topology.dlt.clone();
        tracing::warn!(partition = %record.topic, offset = record.offset, class = %failure.class, message = %failure.message, "dead-lettered");
        if !self.send(record, &to, set).await? {
            return Ok(());
        }
        self.key_finished(record);
        self.status.update(|s| s.dead_lettered += 1);
        self.emit(Event::DeadLettered {
            topic: record.topic.to_string(),
            partition: record.partition,
            offset: record.offset,
            to,
            class: failure.class,
            message: failure.message,
        });
        self.finish_forward(record).await;
        Ok(())
    }

    /// Sends a record behind an earlier one of its key, unattempted.
    pub(super) async fn park(
        &mut self,
        record: &ConsumerRecord,
        attempt: u32,
        original_ts: i64,
        behind: i64,
        stage: usize,
    ) -> Result<(), RetryError> {
        let to = self.topology.stages[stage].topic.clone();
        let due =
            now_ms() + i64::try_from(self.topology.wait(stage).as_millis()).unwrap_or(i64::MAX);
        let mut set = self.chain_headers(record, original_ts);
        set.set(headers::ATTEMPTS, attempt.to_be_bytes().to_vec());
        set.set(headers::BACKOFF_TIMESTAMP, headers::big_integer(due));
        set.set(headers::PARKED_BEHIND, behind.to_string());
        if !self.send(record, &to, set).await? {
            return Ok(());
        }
        self.status.update(|s| s.parked_records += 1);
        self.emit(Event::Parked {
            topic: record.topic.to_string(),
            partition: record.partition,
            offset: record.offset,
            to,
            behind,
        });
        self.finish_forward(record).await;
        Ok(())
    }

    /// The record's headers with the original-record headers added (Spring's retry family).
    pub(super) fn chain_headers(&self, record: &ConsumerRecord, original_ts: i64) -> HeaderSet {
        let mut set = HeaderSet::from_record(record);
        set.set_origin(headers::RETRY_ORIGIN_NAMES, &Origin::of(record));
        if !set.has(headers::ORIGINAL_TIMESTAMP) {
            set.set(
                headers::ORIGINAL_TIMESTAMP,
                headers::big_integer(original_ts),
            );
        }
        if !set.has(headers::DLT_ORIGINAL_CONSUMER_GROUP) {
            set.set(
                headers::DLT_ORIGINAL_CONSUMER_GROUP,
                self.config.group.clone(),
            );
        }
        set.remove(headers::PARKED_BEHIND);
        set
    }

    /// The exception headers, in place of any earlier attempt's (Spring's included), and the
    /// history with this failure appended.
    pub(super) fn set_failure(
        &self,
        set: &mut HeaderSet,
        record: &ConsumerRecord,
        attempt: u32,
        failure: &Failure,
        now: i64,
    ) -> Result<(), RetryError> {
        set.clear_exception();
        set.set(headers::EXCEPTION_FQCN, failure.class.clone());
        set.set(headers::EXCEPTION_MESSAGE, failure.message.clone());
        // A malformed history is replaced, not fatal: the failure itself is what matters.
        let mut history = headers::history(record).unwrap_or_default();
        history.push(HistoryEntry {
            attempt,
            at: now,
            topic: record.topic.to_string(),
            partition: record.partition,
            offset: record.offset,
            consumer: self.identity.clone(),
            class: failure.class.clone(),
            message: failure.message.clone(),
        });
        if history.len() > headers::HISTORY_LIMIT {
            history.drain(..history.len() - headers::HISTORY_LIMIT);
        }
        let json = serde_json::to_vec(&history).map_err(|e| RetryError::Forward {
            from: record.topic.to_string(),
            to: String::new(),
            reason: e.to_string(),
        })?;
        set.set(headers::HISTORY, json);
        Ok(())
    }

    /// Produces to `to` (same partition number, as Spring does) and waits for acks=all; the
    /// records done before it are committed meanwhile (so a crash after the forward repeats
    /// only this record). In exactly-once mode the forward and every done offset, this
    /// record's included, are one transaction. `Ok(false)`: that transaction aborted (a
    /// rebalance fenced this member, a record failed); the source record is read again.
    pub(super) async fn send(
        &mut self,
        record: &ConsumerRecord,
        to: &str,
        set: HeaderSet,
    ) -> Result<bool, RetryError> {
        let tp = TopicPartition::new(&*record.topic, record.partition);
        let count = self.partitions.get(to).copied().unwrap_or(1).max(1);
        let out = ProducerRecord {
            topic: Arc::from(to),
            partition: Some(record.partition.rem_euclid(count)),
            key: record.key.clone(),
            value: record.value.clone(),
            headers: set.0,
            timestamp: None,
        };
        let from = format!("{tp}@{}", record.offset);
        let before = self.pending_commits();
        if self.config.exactly_once {
            let mut offsets = before;
            offsets.insert(tp.clone(), record.offset + 1);
            return match self.transact(Some(out), &offsets).await {
                Ok(()) => {
                    self.committed_as(offsets, Ok(()));
                    Ok(true)
                }
                Err(e) if e.is_fatal() => Err(RetryError::Transaction(e)),
                Err(e) => {
                    tracing::info!(partition = %tp, offset = record.offset, to, error = %e, "forward aborted; the record is read again");
                    let _ = self.consumer.seek(&tp, record.offset);
                    Ok(false)
                }
            };
        }
        let forward = async {
            let delivery = self
                .producer
                .send(out)
                .await
                .map_err(|e| RetryError::send(from.clone(), to, &e))?;
            delivery
                .await
                .map_err(|e| RetryError::delivery(from.clone(), to, &e))
        };
        let commit = async {
            if before.is_empty() {
                Ok(())
            } else {
                self.consumer.commit_offsets(&before).await
            }
        };
        let (forwarded, committed) = tokio::join!(forward, commit);
        self.committed_as(before, committed);
        forwarded.map(|_| true)
    }
}
