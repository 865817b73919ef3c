//! What a StreamsGroupHeartbeat says, as a streams group takes it: Kafka's checks of the
//! request on its own and of its topology's topics (with Kafka's errors and messages), and the
//! topology, owned tasks and member fields translated into `groups::streams`' types.

use std::collections::BTreeSet;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::streams_group_heartbeat_request as req;
use kafka_protocol::messages::StreamsGroupHeartbeatRequest;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::broker::Storage;
use crate::groups::streams::assignor::{Task, Tasks};
use crate::groups::streams::topology::{Subtopology, TopicInfo, Topology};
use crate::groups::streams::Beat;

/// Kafka's checks of a heartbeat on its own, and what Kafka 4.4 does not support either.
pub(super) fn check(request: &StreamsGroupHeartbeatRequest) -> Result<(), (ResponseError, String)> {
    let invalid = |why: String| (ResponseError::InvalidRequest, why);
    check_fields(request).map_err(invalid)?;
    check_changelogs(request)
}

fn check_fields(request: &StreamsGroupHeartbeatRequest) -> Result<(), String> {
    let blank = |s: &StrBytes| s.trim().is_empty();
    if request.instance_id.is_some() {
        return Err("Static membership is not yet supported.".into());
    }
    if request.task_offsets.is_some() {
        return Err("TaskOffsets are not supported yet.".into());
    }
    if request.task_end_offsets.is_some() {
        return Err("TaskEndOffsets are not supported yet.".into());
    }
    if request.warmup_tasks.as_ref().is_some_and(|w| !w.is_empty()) {
        return Err("WarmupTasks are not supported yet.".into());
    }
    let subtopologies = request.topology.iter().flat_map(|t| &t.subtopologies);
    if subtopologies
        .clone()
        .any(|s| !s.source_topic_regex.is_empty())
    {
        return Err("Regular expressions for source topics are not supported yet.".into());
    }
    if blank(&request.member_id) {
        return Err("MemberId can't be empty.".into());
    }
    if blank(&request.group_id) {
        return Err("GroupId can't be empty.".into());
    }
    if request.rack_id.as_ref().is_some_and(blank) {
        return Err("RackId can't be empty.".into());
    }
    let lists = [
        &request.active_tasks,
        &request.standby_tasks,
        &request.warmup_tasks,
    ];
    match request.member_epoch {
        0 => {
            if request.rebalance_timeout_ms == -1 {
                return Err("RebalanceTimeoutMs must be provided in first request.".into());
            }
            for (name, list) in ["ActiveTasks", "StandbyTasks", "WarmupTasks"]
                .iter()
                .zip(lists)
            {
                if list.as_ref().is_none_or(|l| !l.is_empty()) {
                    return Err(format!("{name} must be empty when (re-)joining."));
                }
            }
            if request.topology.is_none() {
                return Err("Topology must be non-null when (re-)joining.".into());
            }
        }
        -2 => return Err("InstanceId can't be null.".into()),
        epoch if epoch < -2 => {
            return Err(format!(
                "MemberEpoch is {epoch}, but must be greater than or equal to -2."
            ))
        }
        _ => {}
    }
    let sent = lists.iter().filter(|l| l.is_some()).count();
    if sent != 0 && sent != 3 {
        return Err("If one task-type is non-null, all must be non-null.".into());
    }
    if request.member_epoch != 0 && request.topology.is_some() {
        return Err("Topology can only be provided when (re-)joining.".into());
    }
    Ok(())
}

/// STREAMS_INVALID_TOPOLOGY for a changelog with a partition count: the broker decides it.
fn check_changelogs(request: &StreamsGroupHeartbeatRequest) -> Result<(), (ResponseError, String)> {
    let subtopologies = request.topology.iter().flat_map(|t| &t.subtopologies);
    for changelog in subtopologies.flat_map(|s| &s.state_changelog_topics) {
        if changelog.partitions != 0 {
            let why = format!(
                "Changelog topic {} must have an undefined partition count, but it is set to {}.",
                changelog.name.as_str(),
                changelog.partitions
            );
            return Err((ResponseError::StreamsInvalidTopology, why));
        }
    }
    Ok(())
}

/// Kafka's checks of the topology's topics: none internal, every name valid, each one the
/// principal may DESCRIBE.
pub(super) fn check_topics(
    topology: &Topology,
    ctx: &RequestContext,
) -> Result<(), (ResponseError, String)> {
    let topics: BTreeSet<&String> = topology
        .subtopologies
        .iter()
        .flat_map(|s| {
            s.source_topics
                .iter()
                .chain(&s.repartition_sinks)
                .chain(s.repartition_sources.iter().map(|t| &t.name))
                .chain(s.changelogs.iter().map(|t| &t.name))
        })
        .collect();
    let list = |names: Vec<&String>| {
        names
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    let internal: Vec<&String> = topics
        .iter()
        .copied()
        .filter(|t| Storage::is_internal(t))
        .collect();
    if !internal.is_empty() {
        let why = format!(
            "Use of Kafka internal topics {} in a Kafka Streams topology is prohibited.",
            list(internal)
        );
        return Err((ResponseError::StreamsInvalidTopology, why));
    }
    let invalid: Vec<&String> = topics
        .iter()
        .copied()
        .filter(|t| log_core::validate_name(t).is_err())
        .collect();
    if !invalid.is_empty() {
        let why = format!("Topic names {} are not valid topic names.", list(invalid));
        return Err((ResponseError::StreamsInvalidTopology, why));
    }
    if topics
        .iter()
        .any(|t| !ctx.authorize_topic(Operation::Describe, t))
    {
        return Err((
            ResponseError::TopicAuthorizationFailed,
            ResponseError::TopicAuthorizationFailed.to_string(),
        ));
    }
    Ok(())
}

fn topic_info(t: &req::TopicInfo) -> TopicInfo {
    TopicInfo {
        name: t.name.to_string(),
        partitions: t.partitions,
        replication: t.replication_factor,
        configs: t
            .topic_configs
            .iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect(),
    }
}

/// The topology as the group keeps it.
pub(super) fn topology(t: &req::Topology) -> Topology {
    let subtopologies = t
        .subtopologies
        .iter()
        .map(|s| {
            let sources: Vec<String> = s.source_topics.iter().map(|t| t.to_string()).collect();
            let repartition_sources: Vec<TopicInfo> =
                s.repartition_source_topics.iter().map(topic_info).collect();
            let copartition_groups = s
                .copartition_groups
                .iter()
                .map(|g| {
                    let named = g
                        .source_topics
                        .iter()
                        .filter_map(|i| sources.get(usize::try_from(*i).ok()?).cloned());
                    let repartition = g.repartition_source_topics.iter().filter_map(|i| {
                        repartition_sources
                            .get(usize::try_from(*i).ok()?)
                            .map(|t| t.name.clone())
                    });
                    named.chain(repartition).collect()
                })
                .collect();
            Subtopology {
                id: s.subtopology_id.to_string(),
                source_regex: s.source_topic_regex.iter().map(|r| r.to_string()).collect(),
                changelogs: s.state_changelog_topics.iter().map(topic_info).collect(),
                repartition_sinks: s
                    .repartition_sink_topics
                    .iter()
                    .map(|t| t.to_string())
                    .collect(),
                source_topics: sources,
                repartition_sources,
                copartition_groups,
            }
        })
        .collect();
    Topology {
        epoch: t.epoch,
        subtopologies,
    }
}

fn tasks(list: &Option<Vec<req::TaskIds>>) -> BTreeSet<Task> {
    list.iter()
        .flatten()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.subtopology_id.to_string(), *p))
        })
        .collect()
}

/// The heartbeat as the group takes it.
pub(super) fn beat(
    request: StreamsGroupHeartbeatRequest,
    topology: Option<Topology>,
    ctx: &RequestContext,
) -> Beat {
    let owned = request.active_tasks.is_some().then(|| Tasks {
        active: tasks(&request.active_tasks),
        standby: tasks(&request.standby_tasks),
        warmup: tasks(&request.warmup_tasks),
    });
    Beat {
        member_id: request.member_id.to_string(),
        epoch: request.member_epoch,
        rack_id: request.rack_id.map(|r| r.to_string()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        topology,
        owned,
        process_id: request.process_id.map(|p| p.to_string()),
        endpoint: request.user_endpoint.map(|e| (e.host.to_string(), e.port)),
        client_tags: request.client_tags.map(|tags| {
            tags.into_iter()
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect()
        }),
        shutdown: request.shutdown_application,
        endpoint_epoch: request.endpoint_information_epoch,
        client_id: ctx.client_id.clone(),
        client_host: format!("/{}", ctx.peer.ip()),
    }
}
