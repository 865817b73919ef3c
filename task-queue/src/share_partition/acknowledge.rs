//! Ending deliveries: a member's acknowledgements (accept, release, reject, gap, renew), lock
//! timeouts, closed sessions, and archiving.

use super::{Archived, Changes, SharePartition};
use crate::config::ShareConfig;
use crate::record::{ArchiveReason, Attempt, Entry, Outcome, RecordState};

/// Kafka's acknowledgement types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckType {
    /// 0: an offset without a record (archived).
    Gap,
    /// 1: processed.
    Accept,
    /// 2: give it back for another delivery (optionally after `delay` ms).
    Release {
        /// Ms before it can be acquired again (0: at once).
        delay: i64,
    },
    /// 3: unprocessable (archived).
    Reject,
    /// 4 (Kafka 4.2): keep it, extend the lock.
    Renew,
}

impl AckType {
    /// The wire value's type; `None` for an unknown value.
    pub fn from_wire(value: i8) -> Option<AckType> {
        match value {
            0 => Some(AckType::Gap),
            1 => Some(AckType::Accept),
            2 => Some(AckType::Release { delay: 0 }),
            3 => Some(AckType::Reject),
            4 => Some(AckType::Renew),
            _ => None,
        }
    }
}

/// Acknowledgements of a contiguous range of offsets: one type for all, or one per offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckBatch {
    /// The range's first offset.
    pub first_offset: i64,
    /// Its last offset (inclusive).
    pub last_offset: i64,
    /// One type for the whole range, or one per offset from `first_offset`.
    pub types: Vec<AckType>,
}

/// Why acknowledgements were refused (nothing of them was applied).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// Ranges out of order or overlapping, a range backwards, or types not fitting the range.
    #[error("invalid acknowledgement batches: {0}")]
    InvalidRequest(&'static str),
    /// An offset not acquired by this member (Kafka's INVALID_RECORD_STATE).
    #[error("offset {0} is not acquired by this member")]
    InvalidRecordState(i64),
}

impl SharePartition {
    /// Applies `member`'s acknowledgements, all or nothing.
    pub fn acknowledge(
        &mut self,
        member: &str,
        batches: &[AckBatch],
        now: i64,
        config: &ShareConfig,
    ) -> Result<Changes, AckError> {
        let mut previous_last = None;
        for batch in batches {
            let len = batch.last_offset - batch.first_offset + 1;
            if len < 1 {
                return Err(AckError::InvalidRequest("a range ends before it starts"));
            }
            if previous_last.is_some_and(|last| batch.first_offset <= last) {
                return Err(AckError::InvalidRequest(
                    "ranges out of order or overlapping",
                ));
            }
            if batch.types.len() != 1 && batch.types.len() as i64 != len {
                return Err(AckError::InvalidRequest(
                    "one type, or one type per offset, per range",
                ));
            }
            previous_last = Some(batch.last_offset);
            for offset in batch.first_offset..=batch.last_offset {
                let held = self.entries.get(offset).is_some_and(
                    |e| matches!(&e.state, RecordState::Acquired { member: m, .. } if **m == *member),
                );
                if !held {
                    return Err(AckError::InvalidRecordState(offset));
                }
            }
        }
        let mut changes = Changes::default();
        for batch in batches {
            for (i, offset) in (batch.first_offset..=batch.last_offset).enumerate() {
                let ack = batch.types[if batch.types.len() == 1 { 0 } else { i }];
                let until = now.saturating_add(config.lock_duration_ms);
                match ack {
                    AckType::Accept => {
                        self.finish(offset, now, Outcome::Accepted, None, &mut changes)
                    }
                    AckType::Reject => self.finish(
                        offset,
                        now,
                        Outcome::Rejected,
                        Some(ArchiveReason::Rejected),
                        &mut changes,
                    ),
                    AckType::Gap => self.finish(
                        offset,
                        now,
                        Outcome::Rejected,
                        Some(ArchiveReason::Gap),
                        &mut changes,
                    ),
                    AckType::Release { delay } => {
                        self.release(offset, now, delay, Outcome::Released, config, &mut changes)
                    }
                    AckType::Renew => {
                        // Checked above: acquired by `member`.
                        if let Some(RecordState::Acquired { until: held, .. }) =
                            self.entries.get_mut(offset).map(|e| &mut e.state)
                        {
                            *held = until;
                            changes.offsets.push(offset);
                        }
                    }
                }
            }
        }
        self.advance_start();
        Ok(changes)
    }

    /// Archives a record that is not held (it is not being delivered).
    pub(crate) fn archive(&mut self, offset: i64, reason: ArchiveReason, changes: &mut Changes) {
        let Some(entry) = self.entries.get_mut(offset) else {
            return;
        };
        entry.state = RecordState::Archived(reason);
        changes.archived.push(Archived {
            offset,
            reason,
            deliveries: entry.deliveries,
            history: entry.history.clone(),
        });
        changes.offsets.push(offset);
    }

    /// Ends a delivery with a final state: ACKNOWLEDGED, or ARCHIVED for `reason`.
    fn finish(
        &mut self,
        offset: i64,
        now: i64,
        outcome: Outcome,
        reason: Option<ArchiveReason>,
        changes: &mut Changes,
    ) {
        let Some(entry) = self.entries.get_mut(offset) else {
            return;
        };
        match reason {
            // Only a record that may be dead-lettered needs its deliveries' story.
            None => {
                entry.history = Vec::new();
                entry.state = RecordState::Acknowledged;
            }
            Some(reason) => {
                record_attempt(entry, now, outcome);
                entry.state = RecordState::Archived(reason);
                changes.archived.push(Archived {
                    offset,
                    reason,
                    deliveries: entry.deliveries,
                    history: entry.history.clone(),
                });
            }
        }
        changes.offsets.push(offset);
    }

    /// Ends a delivery without a result: AVAILABLE again (after `delay` ms), or ARCHIVED when
    /// that was its last allowed delivery.
    fn release(
        &mut self,
        offset: i64,
        now: i64,
        delay: i64,
        outcome: Outcome,
        config: &ShareConfig,
        changes: &mut Changes,
    ) {
        let Some(entry) = self.entries.get(offset) else {
            return;
        };
        if entry.deliveries >= config.delivery_limit {
            self.finish(
                offset,
                now,
                outcome,
                Some(ArchiveReason::DeliveryLimit),
                changes,
            );
            return;
        }
        if let Some(entry) = self.entries.get_mut(offset) {
            record_attempt(entry, now, outcome);
            entry.state = RecordState::Available {
                not_before: now.saturating_add(delay.max(0)),
            };
            changes.offsets.push(offset);
        }
    }

    /// Releases every record whose lock ran out by `now`.
    pub fn expire_locks(&mut self, now: i64, config: &ShareConfig) -> Changes {
        let expired: Vec<i64> = self
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.state, RecordState::Acquired { until, .. } if until <= now))
            .map(|(o, _)| o)
            .collect();
        let mut changes = Changes::default();
        for offset in expired {
            self.release(offset, now, 0, Outcome::TimedOut, config, &mut changes);
        }
        self.advance_start();
        changes
    }

    /// Releases every record `member` holds (its share session closed, or it left the group).
    pub fn release_member(&mut self, member: &str, now: i64, config: &ShareConfig) -> Changes {
        let held: Vec<i64> = self
            .entries
            .iter()
            .filter(
                |(_, e)| matches!(&e.state, RecordState::Acquired { member: m, .. } if **m == *member),
            )
            .map(|(o, _)| o)
            .collect();
        let mut changes = Changes::default();
        for offset in held {
            self.release(offset, now, 0, Outcome::SessionClosed, config, &mut changes);
        }
        self.advance_start();
        changes
    }

    /// Archives acquired records whose deadline passed before they could be delivered (the
    /// fetch that acquired them drops them from its answer).
    pub fn archive_expired(&mut self, offsets: &[i64], now: i64) -> Changes {
        let mut changes = Changes::default();
        for &offset in offsets {
            self.finish(
                offset,
                now,
                Outcome::TimedOut,
                Some(ArchiveReason::Expired),
                &mut changes,
            );
        }
        self.advance_start();
        changes
    }

    /// Archives acquired records that are never delivered: transaction markers and the records
    /// of aborted transactions (Kafka archives them too). Archived as gaps: no delivery is
    /// counted against them and none goes to a dead-letter topic.
    pub fn archive_undeliverable(&mut self, offsets: &[i64], now: i64) -> Changes {
        let mut changes = Changes::default();
        for &offset in offsets {
            self.finish(
                offset,
                now,
                Outcome::Rejected,
                Some(ArchiveReason::Gap),
                &mut changes,
            );
        }
        self.advance_start();
        changes
    }
}

fn record_attempt(entry: &mut Entry, now: i64, outcome: Outcome) {
    if let RecordState::Acquired { member, .. } = &entry.state {
        entry.history.push(Attempt {
            member: member.clone(),
            acquired_at: entry.acquired_at,
            ended_at: now,
            outcome,
        });
    }
}
