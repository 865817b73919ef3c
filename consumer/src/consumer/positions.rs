//! The fetcher's first step: positions for the partitions that have none yet, from their
//! committed offsets, then from resets and timestamp seeks (ListOffsets).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::ConsumeError;
use super::state::{Position, Shared};
use crate::config::{IsolationLevel, OffsetReset};
use crate::error::CallError;
use crate::offsets::{self, EARLIEST, LATEST};
use crate::TopicPartition;

/// Committed offsets for new partitions, then resets and timestamp seeks (ListOffsets).
pub(super) async fn resolve_positions(shared: &Arc<Shared>) -> Result<(), CallError> {
    let deadline = Instant::now() + shared.config.net.request_timeout;
    resolve_committed(shared, deadline).await?;
    let lookups = offset_lookups(shared);
    if lookups.is_empty() {
        return Ok(());
    }
    let found = look_up_offsets(shared, &lookups, deadline).await?;
    let mut st = shared.state();
    for (tp, epoch, _) in lookups {
        let Some((offset, _)) = found.get(&tp).copied() else {
            continue;
        };
        if st.partitions.get(&tp).map(|p| p.epoch) == Some(epoch) && offset >= 0 {
            st.reposition(&tp, Position::Known(offset));
        }
    }
    drop(st);
    shared.fetcher.notify_one();
    Ok(())
}

/// A partition whose offset is looked up: (partition, epoch, timestamp to look up).
type Lookup = (TopicPartition, u64, i64);

/// Positions the partitions waiting for their committed offset at it (or at the reset when
/// the group has none), if they were not repositioned meanwhile.
async fn resolve_committed(shared: &Arc<Shared>, deadline: Instant) -> Result<(), CallError> {
    let config = &shared.config;
    // (partition, epoch) needing their committed offset.
    let wanted: Vec<(TopicPartition, u64)> = shared
        .state()
        .partitions
        .iter()
        .filter(|(_, p)| p.position == Position::Committed)
        .map(|(tp, p)| (tp.clone(), p.epoch))
        .collect();
    if !wanted.is_empty() {
        let committed = match config.group_id.as_deref() {
            Some(group) => {
                let tps: Vec<TopicPartition> = wanted.iter().map(|(tp, _)| tp.clone()).collect();
                let stable = config.isolation_level == IsolationLevel::ReadCommitted;
                match offsets::fetch_committed_as(
                    &shared.cluster,
                    group,
                    Some(&tps),
                    deadline,
                    stable,
                )
                .await
                {
                    Ok(c) => c,
                    Err(e) => return Err(e),
                }
            }
            None => BTreeMap::new(),
        };
        let mut st = shared.state();
        for (tp, epoch) in wanted {
            let current = st.partitions.get(&tp).map(|p| p.epoch);
            if current != Some(epoch) {
                continue;
            }
            let position = match committed.get(&tp) {
                Some(offset) => Position::Known(*offset),
                None => Position::Reset(config.auto_offset_reset),
            };
            st.reposition(&tp, position);
            if let (Some(p), Some(offset)) = (st.partitions.get_mut(&tp), committed.get(&tp)) {
                p.committed = Some(*offset);
            }
        }
    }
    Ok(())
}

/// The partitions to reset or seek by timestamp; a partition reset to `none` is reported to
/// `recv` instead (once: it waits for a seek).
fn offset_lookups(shared: &Shared) -> Vec<Lookup> {
    let mut lookups: Vec<Lookup> = Vec::new();
    let mut st = shared.state();
    let mut no_offset = None;
    for (tp, p) in &st.partitions {
        match p.position {
            Position::Reset(OffsetReset::Earliest) => lookups.push((tp.clone(), p.epoch, EARLIEST)),
            Position::Reset(OffsetReset::Latest) => lookups.push((tp.clone(), p.epoch, LATEST)),
            Position::Time(ts) => lookups.push((tp.clone(), p.epoch, ts)),
            Position::Reset(OffsetReset::None) if p.retry_at.is_none() => {
                no_offset = Some(tp.clone());
            }
            _ => {}
        }
    }
    if let Some(tp) = no_offset {
        if let Some(p) = st.partitions.get_mut(&tp) {
            // Reported once; it waits for a seek.
            p.retry_at = Some(Instant::now() + Duration::from_secs(3600 * 24 * 365));
        }
        st.error = Some(ConsumeError::NoOffset { partition: tp });
        shared.records.notify_one();
    }
    lookups
}

/// The offsets of `lookups` (ListOffsets, after a metadata refresh if a leader is unknown);
/// timestamp lookups that found nothing go to the end.
async fn look_up_offsets(
    shared: &Arc<Shared>,
    lookups: &[Lookup],
    deadline: Instant,
) -> Result<HashMap<TopicPartition, (i64, i64)>, CallError> {
    let wanted: Vec<(TopicPartition, i64)> = lookups
        .iter()
        .map(|(tp, _, ts)| (tp.clone(), *ts))
        .collect();
    shared
        .cluster
        .add_interest(wanted.iter().map(|(tp, _)| tp.topic.as_str()));
    if wanted.iter().any(|(tp, _)| {
        shared
            .cluster
            .metadata()
            .leader(&tp.topic, tp.partition)
            .is_none()
    }) {
        let seen = shared.cluster.metadata().version;
        shared.cluster.refresh(seen).await?;
    }
    let isolation = shared.config.isolation_level;
    let mut found = offsets::list_offsets_at(&shared.cluster, &wanted, deadline, isolation).await?;
    // Timestamp lookups that found nothing go to the end.
    let past_end: Vec<(TopicPartition, i64)> = lookups
        .iter()
        .filter(|(tp, _, ts)| *ts >= 0 && found.get(tp).is_none_or(|(o, _)| *o < 0))
        .map(|(tp, _, _)| (tp.clone(), LATEST))
        .collect();
    if !past_end.is_empty() {
        let ends =
            offsets::list_offsets_at(&shared.cluster, &past_end, deadline, isolation).await?;
        found.extend(ends);
    }
    Ok(found)
}
