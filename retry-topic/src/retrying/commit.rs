//! Committing: the offsets of what is done, alone or (exactly-once mode) in one transaction
//! with a forward.

use super::*;

impl RetryingConsumer {
    /// After a forward: the source record is done and committed at once.
    pub(super) async fn finish_forward(&mut self, record: &ConsumerRecord) {
        let tp = TopicPartition::new(&*record.topic, record.partition);
        self.mark_done(&tp, record.offset);
        self.commit().await;
    }

    pub(super) fn mark_done(&mut self, tp: &TopicPartition, offset: i64) {
        self.done.insert(tp.clone(), offset + 1);
    }

    /// Commits every partition's done offset that moved (failures are logged; what is not
    /// committed is read again, at least once).
    pub(super) async fn commit(&mut self) {
        self.last_commit = Instant::now();
        let offsets = self.pending_commits();
        if offsets.is_empty() {
            return;
        }
        if self.config.exactly_once {
            // Offsets only: a transaction of its own (there is none open between records).
            if let Err(e) = self.transact(None, &offsets).await {
                tracing::warn!(error = %e, "transactional commit failed; records will be read again");
                return;
            }
            self.committed_as(offsets, Ok(()));
            return;
        }
        let result = self.consumer.commit_offsets(&offsets).await;
        self.committed_as(offsets, result);
    }

    /// Exactly-once mode: one transaction with `record` (if any) and `offsets`; aborted on any
    /// failure. A fenced or fatal producer is `Err` for the caller to stop on; an aborted
    /// transaction is `Err` too, and nothing of it took effect.
    pub(super) async fn transact(
        &mut self,
        record: Option<ProducerRecord>,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), consumer::TransactionError> {
        let outcome = async {
            self.producer.begin_transaction()?;
            let delivery = match record {
                Some(record) => Some(self.producer.send(record).await.map_err(|e| match e {
                    consumer::SendError::Transaction(e) => e,
                    other => {
                        consumer::TransactionError::Abortable(consumer::AbortReason::Delivery(
                            consumer::DeliveryError::Encode(other.to_string()),
                        ))
                    }
                })?),
                None => None,
            };
            if !offsets.is_empty() {
                let group = self
                    .consumer
                    .group_metadata()
                    .unwrap_or_else(|| consumer::ConsumerGroupMetadata::new(&self.config.group));
                self.producer
                    .send_offsets_to_transaction(offsets, &group)
                    .await?;
            }
            self.producer.commit_transaction().await?;
            if let Some(d) = delivery {
                // Committed: the record was delivered.
                let _ = d.await;
            }
            Ok::<(), consumer::TransactionError>(())
        }
        .await;
        if let Err(e) = &outcome {
            let mut committing =
                self.producer.transaction_state() == Some(consumer::TransactionState::Committing);
            // A commit that timed out is finished, not aborted (the coordinator may have it).
            while committing {
                match self.producer.commit_transaction().await {
                    Ok(()) => return Ok(()),
                    Err(consumer::TransactionError::Timeout(_)) => {}
                    Err(_) => committing = false,
                }
            }
            if !e.is_fatal()
                && self.producer.transaction_state() != Some(consumer::TransactionState::FatalError)
            {
                if let Err(abort) = self.producer.abort_transaction().await {
                    tracing::warn!(error = %abort, "abort failed");
                }
            }
        }
        outcome
    }

    /// Done offsets not committed yet.
    pub(super) fn pending_commits(&self) -> BTreeMap<TopicPartition, i64> {
        self.done
            .iter()
            .filter(|(tp, o)| self.committed.get(*tp) != Some(*o))
            .map(|(tp, o)| (tp.clone(), *o))
            .collect()
    }

    pub(super) fn committed_as(
        &mut self,
        offsets: BTreeMap<TopicPartition, i64>,
        result: Result<(), CommitError>,
    ) {
        match result {
            Ok(()) if offsets.is_empty() => {}
            Ok(()) => {
                let n = offsets.len();
                self.committed.extend(offsets);
                self.emit(Event::Committed { partitions: n });
            }
            Err(CommitError::Rebalanced(e)) => {
                tracing::info!(error = %e, "commit skipped: the group is rebalancing");
            }
            Err(e) => tracing::warn!(error = %e, "commit failed; records will be read again"),
        }
    }
}
