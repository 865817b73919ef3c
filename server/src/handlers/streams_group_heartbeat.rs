//! StreamsGroupHeartbeat, version 0 (KIP-1071, Kafka Streams' `group.protocol=streams`): joins
//! (member epoch 0, with the application's topology), stays in (the member's epoch, with the
//! tasks it runs) or leaves (-1) a streams group; the broker configures the topology against
//! the topics that exist, creates the internal topics it asks for (changelogs and repartition
//! topics, with the configs the topology gives), assigns the tasks (`groups::streams`) and
//! answers each member its active and standby tasks, the group's status (missing source or
//! internal topics, incorrectly partitioned ones, a delayed assignment, a shutdown asked for)
//! and, for Interactive Queries, which member's endpoint serves which partitions. Version 0 only,
//! as Kafka 4.3: Kafka 4.4's v1 brings task offsets for warm-up tasks, which lograil does not
//! assign (the client then sends none).
//!
//! The request checks and their messages are Kafka 4.4's: INVALID_REQUEST for what Kafka does
//! not support either (static membership, warm-up tasks, task offsets, source topic regexes,
//! topology updates) and for a malformed heartbeat; STREAMS_INVALID_TOPOLOGY for a topology
//! that names internal or invalid topics, sets changelog partition counts, or whose
//! repartition topics cannot be sized. A group of another kind with members is
//! GROUP_ID_NOT_FOUND; an empty one becomes a streams group. Authorization, as Kafka: READ on
//! the group, DESCRIBE on every topic of the topology; an internal topic is created only with
//! CREATE on the cluster or on it (else the status says who may not create what).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::streams_group_heartbeat_response::{
    Endpoint, EndpointToPartitions, Status as StatusEntry, TaskIds, TopicPartition,
};
use kafka_protocol::messages::{
    StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::bounds::Counts;
use super::streams_beat::{beat, check, check_topics, topology};
use super::Handler;
use super::RequestContext;
use crate::broker::{Admin, Groups, Storage};
use crate::config::BrokerConfig;
use crate::groups::streams::assignor::{by_subtopology, Task, Tasks};
use crate::groups::streams::topology::{Status, TopicInfo, Topology};
use crate::groups::streams::Answer;
use crate::shares::Shares;

impl Handler for StreamsGroupHeartbeatRequest {
    const SERVED: (i16, i16) = (0, 0);
    type Needs = (
        Arc<BrokerConfig>,
        Arc<Storage>,
        Arc<Admin>,
        Arc<Groups>,
        Arc<Shares>,
    );

    /// The topology's topic names and the tasks the member lists, against the broker's caps.
    fn counts(&self) -> Counts {
        let topics = self
            .topology
            .iter()
            .flat_map(|t| &t.subtopologies)
            .map(|s| {
                s.source_topics.len()
                    + s.source_topic_regex.len()
                    + s.repartition_sink_topics.len()
                    + s.repartition_source_topics.len()
                    + s.state_changelog_topics.len()
                    + s.copartition_groups.len()
            });
        let lists = [&self.active_tasks, &self.standby_tasks, &self.warmup_tasks];
        let tasks = lists.iter().filter_map(|l| l.as_ref()).flatten();
        let offsets = [&self.task_offsets, &self.task_end_offsets];
        Counts {
            topics: topics.sum(),
            partitions: tasks.map(|t| t.partitions.len()).sum::<usize>()
                + offsets
                    .iter()
                    .filter_map(|o| o.as_ref())
                    .map(Vec::len)
                    .sum::<usize>(),
            ..Counts::default()
        }
    }

    async fn handle(
        (broker_config, storage, admin, groups, shares): Self::Needs,
        request: StreamsGroupHeartbeatRequest,
        ctx: &RequestContext,
    ) -> StreamsGroupHeartbeatResponse {
        let group = request.group_id.to_string();
        if !ctx.authorize_group(Operation::Read, &group) {
            return fail(ResponseError::GroupAuthorizationFailed, None);
        }
        let topology = request.topology.as_ref().map(topology);
        if let Some(t) = &topology {
            if let Err((error, why)) = check_topics(t, ctx) {
                return fail(error, Some(&why));
            }
        }
        if let Err((error, why)) = check(&request) {
            tracing::debug!(group = %group, member = %request.member_id, why, "StreamsGroupHeartbeat refused");
            return fail(error, Some(&why));
        }
        // The broker's settings with the group's own (`streams.*` group configs).
        let config = groups
            .streams
            .config
            .with_overrides(&shares.overrides(&group));
        let interval = config.heartbeat_interval;
        let interval = i32::try_from(interval.as_millis()).unwrap_or(i32::MAX);
        let member_id = request.member_id.to_string();
        if request.member_epoch < 0 {
            let left = leave(&groups, &group, request);
            groups.persist(true, Vec::new()).await;
            return left;
        }
        if request.member_epoch == 0 {
            if let Err(why) = take_group_id(&groups, &group) {
                return fail(ResponseError::GroupIdNotFound, Some(&why));
            }
        }
        let partitions = |topic: &str| {
            let t = storage.log.topic(topic)?;
            i32::try_from(t.partitions().len()).ok()
        };
        let beat = beat(request, topology, ctx);
        let answer =
            groups
                .streams
                .heartbeat_with(&group, beat, Instant::now(), &partitions, &config);
        // What changed is durable before it is answered, as in Kafka (the record of an empty
        // group of another kind it took deleted).
        let dirty = groups.streams.has_unpersisted();
        groups.persist(dirty, vec![group.clone()]).await;
        let mut answer = match answer {
            Ok(answer) => answer,
            Err((error, why)) => {
                return fail(error, Some(&why)).with_heartbeat_interval_ms(interval)
            }
        };
        if !answer.create.is_empty() {
            let refused =
                create_internal_topics(&broker_config, &storage, &admin, ctx, &answer.create).await;
            note_refused(&mut answer.status, &refused);
        }
        let endpoints = answer.endpoints.as_ref().map(|all| {
            let topology = groups.streams.describe(&group).and_then(|g| g.topology);
            all.iter()
                .map(|(endpoint, tasks)| {
                    endpoint_partitions(endpoint, tasks, topology.as_ref(), &partitions)
                })
                .collect()
        });
        response(member_id, interval, &answer, endpoints)
    }

    fn throttle_time_ms(response: &mut StreamsGroupHeartbeatResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &StreamsGroupHeartbeatResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}

/// The answer to a heartbeat the group took.
fn response(
    member_id: String,
    interval: i32,
    answer: &Answer,
    endpoints: Option<Vec<EndpointToPartitions>>,
) -> StreamsGroupHeartbeatResponse {
    let status = answer
        .status
        .iter()
        .map(|(code, detail)| {
            StatusEntry::default()
                .with_status_code(*code as i8)
                .with_status_detail(StrBytes::from_string(detail.clone()))
        })
        .collect();
    let tasks = answer.tasks.as_ref();
    StreamsGroupHeartbeatResponse::default()
        .with_member_id(StrBytes::from_string(member_id))
        .with_member_epoch(answer.member_epoch)
        .with_heartbeat_interval_ms(interval)
        .with_status(Some(status))
        .with_active_tasks(tasks.map(|t| task_ids(&t.active)))
        .with_standby_tasks(tasks.map(|t| task_ids(&t.standby)))
        .with_warmup_tasks(tasks.map(|t| task_ids(&t.warmup)))
        .with_endpoint_information_epoch(answer.endpoint_epoch)
        .with_partitions_by_user_endpoint(endpoints)
}

/// A leave (epoch -1): the member's tasks go to the others at once.
fn leave(
    groups: &Groups,
    group: &str,
    request: StreamsGroupHeartbeatRequest,
) -> StreamsGroupHeartbeatResponse {
    let left = groups
        .streams
        .leave(group, &request.member_id, request.shutdown_application);
    match left {
        Ok(()) => StreamsGroupHeartbeatResponse::default()
            .with_member_id(request.member_id)
            .with_member_epoch(request.member_epoch)
            .with_status(Some(Vec::new())),
        Err((error, why)) => fail(error, Some(&why)),
    }
}

/// Adds to the MISSING_INTERNAL_TOPICS status the topics the member may not create.
fn note_refused(status: &mut Vec<(Status, String)>, refused: &[String]) {
    if refused.is_empty() {
        return;
    }
    let note = format!("Unauthorized to CREATE on topics {}.", refused.join(", "));
    match status
        .iter_mut()
        .find(|(code, _)| *code == Status::MissingInternalTopics)
    {
        Some((_, detail)) => detail.push_str(&format!("; {note}")),
        None => status.push((Status::MissingInternalTopics, note)),
    }
}

/// One member's endpoint with the partitions its active and standby tasks read.
fn endpoint_partitions(
    (host, port): &(String, u16),
    tasks: &Tasks,
    topology: Option<&Topology>,
    partitions: &dyn Fn(&str) -> Option<i32>,
) -> EndpointToPartitions {
    EndpointToPartitions::default()
        .with_user_endpoint(
            Endpoint::default()
                .with_host(StrBytes::from_string(host.clone()))
                .with_port(*port),
        )
        .with_active_partitions(task_partitions(topology, &tasks.active, partitions))
        .with_standby_partitions(task_partitions(topology, &tasks.standby, partitions))
}

/// The answer of a refused heartbeat: `error`, with `message` or the error's own.
fn fail(error: ResponseError, message: Option<&str>) -> StreamsGroupHeartbeatResponse {
    let message = message.map_or_else(|| error.to_string(), str::to_string);
    StreamsGroupHeartbeatResponse::default()
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}

/// A joiner's group id: free, already a streams group, or an empty group of another kind
/// (which becomes a streams group); else why not.
fn take_group_id(groups: &Groups, group: &str) -> Result<(), String> {
    let other = format!("Group {group} is not a streams group.");
    if groups.consumer.contains(group) && groups.consumer.delete(group).is_err() {
        return Err(other);
    }
    if groups.classic.contains(group) && groups.classic.delete(group).is_err() {
        return Err(other);
    }
    Ok(())
}

/// Tasks by subtopology, partitions sorted.
fn task_ids(tasks: &BTreeSet<Task>) -> Vec<TaskIds> {
    by_subtopology(tasks)
        .into_iter()
        .map(|(subtopology, partitions)| {
            TaskIds::default()
                .with_subtopology_id(StrBytes::from_string(subtopology.to_string()))
                .with_partitions(partitions)
        })
        .collect()
}

/// The source partitions `tasks` read: partition p of each source and repartition source
/// topic of the task's subtopology that has it.
fn task_partitions(
    topology: Option<&Topology>,
    tasks: &BTreeSet<Task>,
    partitions: &dyn Fn(&str) -> Option<i32>,
) -> Vec<TopicPartition> {
    let mut by_topic: std::collections::BTreeMap<&str, Vec<i32>> = Default::default();
    for s in topology.iter().flat_map(|t| &t.subtopologies) {
        let topics = s
            .source_topics
            .iter()
            .chain(s.repartition_sources.iter().map(|t| &t.name));
        for topic in topics {
            let width = partitions(topic).unwrap_or(0);
            let mine = tasks
                .iter()
                .filter(|(id, p)| *id == s.id && *p < width)
                .map(|(_, p)| *p);
            by_topic.entry(topic).or_default().extend(mine);
        }
    }
    by_topic
        .into_iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(topic, mut p)| {
            p.sort_unstable();
            p.dedup();
            TopicPartition::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(p)
        })
        .collect()
}

/// Creates the internal topics the topology needs, as a CreateTopics of the member's
/// principal would (CREATE on the cluster or on each topic); returns those it may not create.
/// A topic another member's heartbeat created meanwhile is already there: that is no failure.
async fn create_internal_topics(
    broker_config: &Arc<BrokerConfig>,
    storage: &Arc<Storage>,
    admin: &Arc<Admin>,
    ctx: &RequestContext,
    topics: &[TopicInfo],
) -> Vec<String> {
    let cluster = ctx.authorize_cluster(Operation::Create);
    let (allowed, refused): (Vec<&TopicInfo>, Vec<&TopicInfo>) = topics
        .iter()
        .partition(|t| cluster || ctx.authorize_topic(Operation::Create, &t.name));
    let creatable: Vec<CreatableTopic> = allowed
        .into_iter()
        .map(|t| {
            CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(t.name.clone())))
                .with_num_partitions(t.partitions)
                .with_replication_factor(if t.replication == 0 {
                    -1
                } else {
                    t.replication
                })
                .with_configs(
                    t.configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(StrBytes::from_string(k.clone()))
                                .with_value(Some(StrBytes::from_string(v.clone())))
                        })
                        .collect(),
                )
        })
        .collect();
    let owner = (broker_config.clone(), storage.clone(), admin.clone());
    let results = crate::blocking::spawn(move || {
        creatable
            .into_iter()
            .map(|topic| super::create_topics::create_internal(&owner.0, &owner.1, &owner.2, topic))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    for (name, error) in results.into_iter().flatten() {
        tracing::warn!(topic = %name, error, "streams group: internal topic not created");
    }
    refused.into_iter().map(|t| t.name.clone()).collect()
}
