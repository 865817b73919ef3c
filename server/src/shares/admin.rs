//! What the share-group admin APIs read and change: group configs (IncrementalAlterConfigs),
//! share-partition start offsets and lag (Describe/Alter/DeleteShareGroupOffsets), the groups,
//! and the per-partition summaries of `lograil queue describe`.

use std::sync::{Arc, Mutex};

use kafka_protocol::error::ResponseError;
use log_core::{Log, Uuid};
use task_queue::{Change, ShareConfig, ShareConfigError, ShareKey, SharePartition, TenantStats};

use super::{lock, resolve, Pending, Shares};
use crate::groups::streams::config as streams_config;

/// A share partition's start offset (SPSO) and lag (records from it to the log end not yet
/// completed; `None` when the topic is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ShareOffset {
    pub start: i64,
    pub lag: Option<i64>,
}

/// A share partition as `lograil queue describe` shows it.
#[derive(Debug, Clone)]
pub struct PartitionSummary {
    pub topic: String,
    pub partition: i32,
    pub start: i64,
    pub end: i64,
    pub available: usize,
    pub acquired: usize,
    pub archived: usize,
    /// When the oldest lock held now began (ms since the epoch).
    pub oldest_lock_ms: Option<i64>,
    /// Whether the overload mode is on (newest first, expired records archived).
    pub overloaded: bool,
    /// Times the overload mode went on and off since start-up.
    pub overload_switches: [u64; 2],
    /// With fair turns or the overload mode on: the [`TOP_TENANTS`] tenants with the most
    /// available records in the look-ahead window, then the rest as one `tenant: None` entry.
    pub tenants: Vec<TenantStats>,
}

/// A share partition's window as the console's share-group page shows it: how many times its
/// records were delivered, why those archived were, and its first records not acknowledged.
#[derive(Debug, Clone)]
pub struct WindowView {
    pub topic: String,
    pub partition: i32,
    /// Records in SPSO..SPEO not finished, by deliveries so far (index = deliveries, the last
    /// slot counting the delivery limit and above).
    pub deliveries: Vec<usize>,
    /// Archived records in the window, by reason, with their count.
    pub archived: Vec<(&'static str, usize)>,
    /// The first records of the window not acknowledged, at most the limit asked for.
    pub records: Vec<(i64, task_queue::Entry)>,
}

/// Tenants of a share partition shown on their own (in `lograil queue describe` and
/// `/metrics`); the others are summed as `other`, so the label set stays bounded.
pub const TOP_TENANTS: usize = 10;

impl Shares {
    /// Sets or (with `None`) deletes a group's configs, all or none.
    pub fn alter_configs(
        &self,
        group: &str,
        changes: &[(String, Option<String>)],
        pending: &mut Pending,
    ) -> Result<(), ShareConfigError> {
        self.check_configs(group, changes)?;
        let mut overrides = lock(&self.overrides);
        let group_overrides = overrides.entry(group.to_string()).or_default();
        for (name, value) in changes {
            // Stored under the name it is reported under, whichever alias set it.
            let name = ShareConfig::canonical(name).unwrap_or(name.as_str());
            group_overrides.retain(|(n, _)| n != name);
            if let Some(value) = value {
                group_overrides.push((name.to_string(), value.clone()));
            }
        }
        let change = Change::GroupConfig {
            group: group.to_string(),
            overrides: group_overrides.clone(),
        };
        match self.store.append(vec![change]) {
            Ok(Some(info)) => pending.push(self.store.partition(), info),
            Ok(None) => {}
            Err(e) => tracing::error!(group, error = %e, "persisting group configs failed"),
        }
        Ok(())
    }

    /// Checks a group's config changes: share group configs as [`ShareConfig::set`] does,
    /// streams group configs (kept here too, with the group's others) as
    /// [`streams_config::check`] does.
    pub fn check_configs(
        &self,
        group: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), ShareConfigError> {
        let mut check = self.config(group);
        for (name, value) in changes {
            if streams_config::is_streams_config(name) {
                let refused = value
                    .as_deref()
                    .map(|v| (v, streams_config::check(name, v)));
                if let Some((v, Err(expected))) = refused {
                    return Err(ShareConfigError::Invalid {
                        name: name.clone(),
                        value: v.to_string(),
                        expected,
                    });
                }
                continue;
            }
            check.set(name, value.as_deref(), &self.defaults)?;
        }
        Ok(())
    }

    /// A group's config overrides.
    pub fn overrides(&self, group: &str) -> Vec<(String, String)> {
        lock(&self.overrides)
            .get(group)
            .cloned()
            .unwrap_or_default()
    }

    /// A group's share partitions: (key, SPSO).
    pub fn offsets(&self, log: &Log, group: &str) -> Vec<(ShareKey, ShareOffset)> {
        let mut offsets: Vec<(ShareKey, ShareOffset)> = lock(&self.partitions)
            .iter()
            .filter(|(k, _)| k.group == group)
            .map(|(k, s)| {
                let state = lock(s);
                let lag = resolve(log, k).map(|(_, p)| state.lag(p.log_end_offset()));
                let start = state.start();
                (k.clone(), ShareOffset { start, lag })
            })
            .collect();
        offsets.sort();
        offsets
    }

    /// SPSO of `group`'s share partition, if it has state (a member fetched it, or it was
    /// restored).
    pub fn start_offset(&self, group: &str, topic_id: Uuid, index: i32) -> Option<i64> {
        let state = lock(&self.partitions)
            .get(&ShareKey::new(group, topic_id, index))
            .cloned()?;
        let start = lock(&state).start();
        Some(start)
    }

    /// Sets a share partition's start offset (AlterShareGroupOffsets), forgetting its state.
    pub fn alter_offset(
        &self,
        key: &ShareKey,
        start: i64,
        pending: &mut Pending,
    ) -> Result<(), ResponseError> {
        let state = lock(&self.partitions)
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Mutex::new(SharePartition::new(start))))
            .clone();
        let mut state = lock(&state);
        *state = SharePartition::new(start);
        let change = Change::Snapshot {
            key: key.clone(),
            state: state.clone(),
        };
        match self.store.append(vec![change]) {
            Ok(Some(info)) => pending.push(self.store.partition(), info),
            Ok(None) => {}
            Err(e) => {
                tracing::error!(error = %e, "persisting a share offset failed");
                return Err(ResponseError::KafkaStorageError);
            }
        }
        Ok(())
    }

    /// Deletes a group's state for a topic (DeleteShareGroupOffsets); how many partitions.
    pub fn delete_offsets(&self, group: &str, topic_id: Uuid, pending: &mut Pending) -> usize {
        let doomed: Vec<ShareKey> = lock(&self.partitions)
            .keys()
            .filter(|k| k.group == group && k.topic_id() == topic_id)
            .cloned()
            .collect();
        let changes: Vec<Change> = doomed.iter().cloned().map(Change::Delete).collect();
        match self.store.append(changes) {
            Ok(Some(info)) => pending.push(self.store.partition(), info),
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "deleting share offsets failed"),
        }
        let mut partitions = lock(&self.partitions);
        let mut switches = lock(&self.overload_switches);
        for key in &doomed {
            partitions.remove(key);
            switches.remove(key);
        }
        doomed.len()
    }

    /// Every group with share state or members.
    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = lock(&self.partitions)
            .keys()
            .map(|k| k.group.clone())
            .collect();
        groups.extend(self.members.list().into_iter().map(|(g, _)| g));
        groups.sort();
        groups.dedup();
        groups
    }

    /// A group's share partitions, for describing.
    pub fn summaries(&self, log: &Log, group: &str) -> Vec<PartitionSummary> {
        let per_tenant = self.config(group).needs_meta();
        let switches = lock(&self.overload_switches).clone();
        let mut out: Vec<PartitionSummary> = lock(&self.partitions)
            .iter()
            .filter(|(k, _)| k.group == group)
            .filter_map(|(key, state)| {
                let topic = log.topic_by_id(key.topic_id())?;
                let state = lock(state);
                let (available, acquired, archived) = state.counts();
                let tenants = if per_tenant {
                    state.tenant_stats(TOP_TENANTS)
                } else {
                    Vec::new()
                };
                Some(PartitionSummary {
                    topic: topic.name().to_string(),
                    partition: key.partition,
                    start: state.start(),
                    end: state.end(),
                    available,
                    acquired,
                    archived,
                    oldest_lock_ms: state.oldest_lock(),
                    overloaded: state.overloaded(),
                    overload_switches: switches.get(key).copied().unwrap_or_default(),
                    tenants,
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        out
    }

    /// Each share partition of `group`: its window's delivery counts, archive reasons, and
    /// first `limit` records not acknowledged. Holds each partition's lock while reading its
    /// window (at most `share.max.window` entries).
    pub fn windows(&self, log: &Log, group: &str, limit: usize) -> Vec<WindowView> {
        let slots = usize::from(self.config(group).delivery_limit) + 1;
        let partitions: Vec<_> = lock(&self.partitions)
            .iter()
            .filter(|(k, _)| k.group == group)
            .map(|(k, state)| (k.clone(), state.clone()))
            .collect();
        let mut out: Vec<WindowView> = partitions
            .into_iter()
            .filter_map(|(key, state)| {
                let topic = log.topic_by_id(key.topic_id())?;
                let state = lock(&state);
                let mut deliveries = vec![0; slots];
                let mut archived: Vec<(&'static str, usize)> = Vec::new();
                let mut records = Vec::new();
                for (offset, entry) in state.entries() {
                    match &entry.state {
                        task_queue::RecordState::Acknowledged => continue,
                        task_queue::RecordState::Archived(reason) => {
                            match archived.iter_mut().find(|(r, _)| *r == reason.as_str()) {
                                Some((_, n)) => *n += 1,
                                None => archived.push((reason.as_str(), 1)),
                            }
                        }
                        _ => deliveries[usize::from(entry.deliveries).min(slots - 1)] += 1,
                    }
                    if records.len() < limit {
                        records.push((offset, entry.clone()));
                    }
                }
                Some(WindowView {
                    topic: topic.name().to_string(),
                    partition: key.partition,
                    deliveries,
                    archived,
                    records,
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        out
    }
}
