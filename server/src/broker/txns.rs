//! The transactions facade: the transaction coordinator with the effects it has on the log
//! (markers through the append path) and on the groups (offsets committed with a transaction).

use std::sync::Arc;

use record_batch::ControlType;

use super::groups::Groups;
use super::storage::Storage;
use crate::appender::{AppendMode, Marker, ProduceError};
use crate::transactions::{EffectError, Effects, PendingOffsets, Transactions};

/// The coordinator epoch of every marker: one node, whose transaction coordinator never moves.
const COORDINATOR_EPOCH: i32 = 0;

/// The transaction coordinator and what completing a transaction writes.
#[derive(Debug)]
pub struct Txns {
    /// The transaction coordinator and `__transaction_state`.
    pub coordinator: Transactions,
    storage: Arc<Storage>,
    groups: Arc<Groups>,
}

impl Txns {
    pub(super) fn new(
        coordinator: Transactions,
        storage: Arc<Storage>,
        groups: Arc<Groups>,
    ) -> Txns {
        Txns {
            coordinator,
            storage,
            groups,
        }
    }

    /// Producer ids for InitProducerId, allocated durably.
    pub fn producer_ids(&self) -> &crate::producers::ProducerIds {
        &self.storage.producer_ids
    }

    /// Completes the prepared transaction of `id` on the blocking pool: its markers, its
    /// offsets on commit, then Complete* (see `transactions`). On failure it stays prepared and
    /// the coordinator's timer tries again.
    pub async fn complete(self: Arc<Self>, id: String) {
        let owner = self.clone();
        let done = crate::blocking::spawn(move || {
            owner
                .coordinator
                .complete(&id, owner.as_ref(), log_core::now_ms)
                .map_err(|e| (id, e.to_string()))
        })
        .await;
        match done {
            Ok(Ok(_)) => self.storage.appended.notify_waiters(),
            Ok(Err((id, e))) => {
                tracing::error!(
                    transactional_id = id,
                    error = e,
                    "completing a transaction failed; retried later"
                )
            }
            Err(e) => tracing::error!(error = %e, "transaction completion task failed"),
        }
    }

    /// One marker, durable when this returns; a partition that no longer exists is skipped.
    fn write_marker(
        &self,
        topic: &str,
        index: i32,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), ProduceError> {
        let kind = if commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        };
        let marker = Marker {
            producer_id,
            producer_epoch: epoch,
            coordinator_epoch: COORDINATOR_EPOCH,
            kind,
        };
        let written =
            self.storage
                .appender()
                .write_marker(topic, index, marker, AppendMode::Blocking);
        let appended = match written {
            Ok(appended) => appended,
            Err(ProduceError::UnknownPartition { .. }) => {
                tracing::info!(
                    topic,
                    partition = index,
                    "no marker for a partition that no longer exists"
                );
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        appended.partition.await_durable(&appended.info)?;
        self.storage.appended.notify_waiters();
        Ok(())
    }
}

/// The coordinator's effects on the log and the groups: markers through the append path
/// (durable before returning), offsets through the offset store.
impl Effects for Txns {
    fn write_markers(
        &self,
        partitions: &[(String, i32)],
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), EffectError> {
        for (topic, index) in partitions {
            self.write_marker(topic, *index, producer_id, epoch, commit)
                .map_err(|reason| EffectError::Marker {
                    topic: topic.clone(),
                    index: *index,
                    reason: reason.to_string(),
                })?;
        }
        Ok(())
    }

    fn commit_offsets(&self, offsets: &PendingOffsets) -> Result<(), EffectError> {
        let now = log_core::now_ms();
        for (group, offsets) in offsets {
            let commits = offsets
                .iter()
                .map(|(partition, o)| {
                    (
                        partition.clone(),
                        crate::groups::Committed {
                            offset: o.offset,
                            leader_epoch: o.leader_epoch,
                            metadata: o.metadata.clone(),
                            commit_timestamp: now,
                        },
                    )
                })
                .collect();
            self.groups.offsets.commit(group, commits)?;
        }
        Ok(())
    }

    fn new_producer_id(&self) -> Result<i64, EffectError> {
        Ok(self.storage.producer_ids.allocate()?)
    }
}
