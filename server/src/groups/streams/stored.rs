//! A streams group as its record in `__consumer_offsets` keeps it, and back: its epochs, the
//! topology with what it came to against the topics, and every member with its tasks and
//! target (Kafka keeps the same in several records). One record per group, written whole when
//! it changed: a streams group has few members next to its tasks. Heartbeats, session timers
//! and the assignment's pacing are not kept: they start again at start-up.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::assignor::Tasks;
use super::group::{Member, MemberState, StreamsGroup};
use super::topology::{Configured, Topology};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamsGroupRecord {
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub topology: Option<Topology>,
    pub configured: Configured,
    pub endpoint_epoch: i32,
    pub standbys: u64,
    pub shutdown_by: Option<String>,
    pub members: BTreeMap<String, StreamsMemberRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamsMemberRecord {
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: u64,
    pub process_id: String,
    pub endpoint: Option<(String, u16)>,
    pub client_tags: Vec<(String, String)>,
    pub topology_epoch: i32,
    pub epoch: i32,
    pub previous_epoch: i32,
    /// Kafka's `MemberState` codes: 1 stable, 2 unrevoked, 3 unreleased tasks.
    pub state: u8,
    pub assigned: Tasks,
    pub revoking: Tasks,
    pub target: Tasks,
}

impl StreamsGroup {
    /// The record of member `id`, if it is one.
    pub(super) fn member_record(&self, id: &str) -> Option<StreamsMemberRecord> {
        let m = self.members.get(id)?;
        Some(StreamsMemberRecord {
            rack_id: m.rack_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            rebalance_timeout_ms: u64::try_from(m.rebalance_timeout.as_millis())
                .unwrap_or(u64::MAX),
            process_id: m.process_id.clone(),
            endpoint: m.endpoint.clone(),
            client_tags: m.client_tags.clone(),
            topology_epoch: m.topology_epoch,
            epoch: m.epoch,
            previous_epoch: m.previous_epoch,
            state: match m.state {
                MemberState::Stable => 1,
                MemberState::UnrevokedTasks => 2,
                MemberState::UnreleasedTasks => 3,
            },
            assigned: m.assigned.clone(),
            revoking: m.revoking.clone(),
            target: self.target.get(id).cloned().unwrap_or_default(),
        })
    }

    pub(super) fn record(&self) -> StreamsGroupRecord {
        StreamsGroupRecord {
            epoch: self.epoch,
            assignment_epoch: self.assignment_epoch,
            topology: self.topology.clone(),
            configured: self.configured.clone(),
            endpoint_epoch: self.endpoint_epoch,
            standbys: self.standbys as u64,
            shutdown_by: self.shutdown_by.clone(),
            members: self
                .members
                .keys()
                .filter_map(|id| Some((id.clone(), self.member_record(id)?)))
                .collect(),
        }
    }

    /// The group its record keeps, its members' session timers (and revocation deadlines)
    /// started again at `now`.
    pub(super) fn restored(record: StreamsGroupRecord, now: Instant) -> StreamsGroup {
        let mut group = StreamsGroup::new();
        group.epoch = record.epoch;
        group.assignment_epoch = record.assignment_epoch;
        group.topology = record.topology;
        group.configured = record.configured;
        group.endpoint_epoch = record.endpoint_epoch;
        group.standbys = usize::try_from(record.standbys).unwrap_or(usize::MAX);
        group.shutdown_by = record.shutdown_by;
        for (id, r) in record.members {
            let state = match r.state {
                2 => MemberState::UnrevokedTasks,
                3 => MemberState::UnreleasedTasks,
                _ => MemberState::Stable,
            };
            let rebalance_timeout = Duration::from_millis(r.rebalance_timeout_ms);
            let member = Member {
                rack_id: r.rack_id,
                client_id: r.client_id,
                client_host: r.client_host,
                rebalance_timeout,
                process_id: r.process_id,
                endpoint: r.endpoint,
                client_tags: r.client_tags,
                topology_epoch: r.topology_epoch,
                epoch: r.epoch,
                previous_epoch: r.previous_epoch,
                state,
                assigned: r.assigned,
                revoking: r.revoking,
                last_heartbeat: now,
                revoke_deadline: (state == MemberState::UnrevokedTasks)
                    .then(|| now + rebalance_timeout),
            };
            group.target.insert(id.clone(), r.target);
            group.members.insert(id, member);
        }
        group
    }
}
