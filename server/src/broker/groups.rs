//! The groups facade: classic and consumer-protocol groups, their committed offsets, the
//! one writer of the groups' own records in `__consumer_offsets`, and a live group's move
//! between the two protocols (KIP-848's online migration).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::groups::consumer::{ConsumerGroups, Metadata};
use crate::groups::offsets::OffsetsError;
use crate::groups::streams::StreamsGroups;
use crate::groups::{Coordinator, OffsetStore};

/// Consumer groups of both protocols and their offsets.
#[derive(Debug)]
pub struct Groups {
    /// Classic groups (JoinGroup, SyncGroup, Heartbeat).
    pub classic: Coordinator,
    /// Consumer-protocol groups (KIP-848); a group id is here or in `classic`, not both.
    pub consumer: ConsumerGroups,
    /// Streams groups (KIP-1071); a group id is of one kind only.
    pub streams: StreamsGroups,
    pub offsets: OffsetStore,
    /// One writer of the groups' own records at a time (`store_group_records`), so records
    /// reach the log in the order their changes were taken.
    records: tokio::sync::Mutex<()>,
    /// `offsets.retention.minutes`.
    retention: Duration,
}

impl Groups {
    /// The groups kept in `offsets` with committed offsets or members come back as they were
    /// (a classic group Stable with its members, or Empty, with its protocol type and
    /// generation; consumer-protocol and streams groups with their members); the records of the others
    /// (forgotten) wait for the next rewrite.
    pub(super) fn restore(
        classic: Coordinator,
        consumer: ConsumerGroups,
        offsets: OffsetStore,
        retention: Duration,
    ) -> Groups {
        classic.restore(
            offsets
                .group_metas()
                .into_iter()
                .filter(|(group, meta)| !meta.members.is_empty() || offsets.has_offsets(group))
                .collect(),
            Instant::now(),
        );
        consumer.restore(
            offsets
                .consumer_groups()
                .into_iter()
                .filter(|(group, image)| !image.members.is_empty() || offsets.has_offsets(group))
                .collect(),
            std::time::Instant::now(),
        );
        let streams = StreamsGroups::new(classic.config().streams.clone());
        streams.restore(
            offsets
                .streams_groups()
                .into_iter()
                .filter(|(group, record)| !record.members.is_empty() || offsets.has_offsets(group))
                .collect(),
            Instant::now(),
        );
        Groups {
            streams,
            classic,
            consumer,
            offsets,
            records: tokio::sync::Mutex::new(()),
            retention,
        }
    }

    /// Writes the own records of the groups that changed since theirs were written, and deletes those of `forgotten` groups, in `__consumer_offsets`
    /// (on the blocking pool, durable when this returns). One call at a time: a change taken
    /// by an earlier call is durable when a later one returns, and records land in the order
    /// their changes were taken. A failure is logged and its groups count as unwritten, so
    /// the next call (the group timer's, within 100 ms) writes them again.
    pub async fn store_group_records(self: &Arc<Self>, mut forgotten: Vec<String>) {
        let _turn = self.records.lock().await;
        // A group forgotten at the tick and joined again since keeps its new record.
        forgotten.retain(|group| !self.classic.contains(group));
        let changed = self.classic.unpersisted();
        let consumer = self.consumer.unpersisted();
        let streams = self.streams.unpersisted();
        if forgotten.is_empty() && changed.is_empty() && consumer.is_empty() && streams.is_empty() {
            return;
        }
        let names: Vec<String> = changed.iter().map(|(id, _)| id.clone()).collect();
        let consumer_names: Vec<String> = consumer.iter().map(|(id, _)| id.clone()).collect();
        let streams_names: Vec<String> = streams.iter().map(|(id, _)| id.clone()).collect();
        let owner = self.clone();
        let stored = crate::blocking::spawn(move || {
            for group in &forgotten {
                owner.offsets.delete_group_record(group)?;
            }
            owner.offsets.store_groups(changed)?;
            owner.offsets.store_consumer_groups(consumer)?;
            owner.offsets.store_streams_groups(streams)
        })
        .await;
        let error = match stored {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        tracing::error!(error, "writing group records failed");
        self.classic.unwritten(&names);
        self.consumer.unwritten(&consumer_names);
        self.streams.unwritten(&streams_names);
    }

    /// Waits until a write of group records in flight is durable: a change another call
    /// took to write is on disk when this returns (a handler that finds nothing of its own
    /// left to write calls it before answering).
    pub async fn settle(&self) {
        drop(self.records.lock().await);
    }

    /// Writes what changed ([`Groups::store_group_records`]), or waits for the write that took
    /// it ([`Groups::settle`]): either way a change is durable when this returns. `forgotten`:
    /// as for `store_group_records`.
    pub async fn persist(self: &Arc<Self>, dirty: bool, forgotten: Vec<String>) {
        if dirty || !forgotten.is_empty() {
            self.store_group_records(forgotten).await;
        } else {
            self.settle().await;
        }
    }

    /// KIP-848's online upgrade, as a consumer-protocol member joins `group`, a live classic
    /// group: when `group.consumer.migration.policy` allows it and the group uses the
    /// consumer's embedded protocol (within `group.consumer.max.size`), it becomes a
    /// consumer-protocol group with its members. `metadata` names topics by id. False when it
    /// stays classic.
    pub fn upgrade(&self, group: &str, now: Instant, metadata: Metadata<'_>) -> bool {
        if !self.consumer.config.migration.upgrades() {
            return false;
        }
        let max_size = self.consumer.config.max_size;
        let Some(image) = self.classic.take_for_upgrade(group, max_size) else {
            return false;
        };
        self.consumer.adopt(group, image, now, metadata)
    }

    /// KIP-848's online downgrade, after a member of `group` left or was fenced: when every
    /// member left speaks the classic protocol and the policy allows it, the group becomes a
    /// classic group (within `group.max.size`) that rebalances at once.
    pub fn maybe_downgrade(&self, group: &str, now: Instant) {
        if !self.consumer.config.migration.downgrades() {
            return;
        }
        let max_size = self.classic.config().max_size;
        if let Some(image) = self.consumer.take_for_downgrade(group, max_size) {
            self.classic.adopt(group, image, now);
        }
    }

    /// Deletes the committed offsets of groups empty for `offsets.retention.minutes` at
    /// `now_ms` (tombstones in `__consumer_offsets`, durable: call it on the blocking pool).
    pub fn expire_offsets(&self, now_ms: i64) -> Result<Vec<String>, OffsetsError> {
        let retention_ms = i64::try_from(self.retention.as_millis()).unwrap_or(i64::MAX);
        let mut with_members = self.classic.groups_with_members();
        with_members.extend(self.consumer.groups_with_members());
        with_members.extend(self.streams.groups_with_members());
        self.offsets.expire(now_ms, retention_ms, &with_members)
    }
}
