//! StreamsGroupDescribe, versions 0–1 (KIP-1071): a streams group's state (Empty, NotReady,
//! Assigning, Reconciling, Stable), group and assignment epochs, its topology (with the
//! partition counts the broker decided once it is ready, as sent before), and each member's
//! epoch, process, endpoint, client tags, current and target tasks. An unknown group, or one of
//! another kind, answers GROUP_ID_NOT_FOUND as Kafka does. Authorization, as Kafka: DESCRIBE on
//! the group (else GROUP_AUTHORIZATION_FAILED) and on every topic of its topology (else
//! TOPIC_AUTHORIZATION_FAILED, without members or topology); KIP-430's authorized operations
//! when asked. v1 adds the assignor (`sticky`, KIP-1357) and the topology description's status
//! (KIP-1331): lograil keeps no description (it does not serve
//! StreamsGroupTopologyDescriptionUpdate), so one asked for is NOT_STORED.

use std::collections::BTreeSet;
use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::streams_group_describe_response::{
    Assignment, DescribedGroup, Endpoint, KeyValue, Member, Subtopology, TaskIds, TopicInfo,
    Topology,
};
use kafka_protocol::messages::{
    GroupId, StreamsGroupDescribeRequest, StreamsGroupDescribeResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::bounds::Counts;
use super::Handler;
use super::RequestContext;
use crate::broker::{Groups, Storage};
use crate::groups::streams::assignor::{by_subtopology, Task, Tasks};
use crate::groups::streams::topology;
use crate::groups::streams::StreamsGroup;

/// The task assignor (Kafka's only one).
const ASSIGNOR: &str = "sticky";
/// "Not requested" for the authorized-operations field.
const OPERATIONS_OMITTED: i32 = i32::MIN;

impl Handler for StreamsGroupDescribeRequest {
    const SERVED: (i16, i16) = (0, 1);
    type Needs = (Arc<Storage>, Arc<Groups>);

    fn counts(&self) -> Counts {
        Counts {
            groups: self.group_ids.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        (storage, groups): Self::Needs,
        request: StreamsGroupDescribeRequest,
        ctx: &RequestContext,
    ) -> StreamsGroupDescribeResponse {
        let operations = request.include_authorized_operations;
        // KIP-1331's TopologyDescriptionStatus: NOT_REQUESTED (0) or NOT_STORED (1).
        let description = i8::from(request.include_topology_description);
        let groups = request
            .group_ids
            .into_iter()
            .map(|id| describe_group(&storage, &groups, ctx, id, operations))
            .map(|g| {
                let found = g.error_code == 0;
                g.with_topology_description_status(if found { description } else { 0 })
                    .with_assignor_name(found.then(|| text(ASSIGNOR)))
            })
            .collect();
        StreamsGroupDescribeResponse::default().with_groups(groups)
    }

    fn throttle_time_ms(response: &mut StreamsGroupDescribeResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &StreamsGroupDescribeResponse, f: &mut dyn FnMut(i16)) {
        r.groups.iter().for_each(|g| f(g.error_code))
    }
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn describe_group(
    storage: &Storage,
    groups: &Groups,
    ctx: &RequestContext,
    id: GroupId,
    operations: bool,
) -> DescribedGroup {
    let described = DescribedGroup::default()
        .with_group_id(id.clone())
        .with_authorized_operations(OPERATIONS_OMITTED);
    if id.is_empty() {
        return described.with_error_code(ResponseError::InvalidGroupId.code());
    }
    if !ctx.authorize_group(Operation::Describe, &id) {
        return described.with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let described = if operations {
        described.with_authorized_operations(ctx.authorized_operations(ResourceType::Group, &id))
    } else {
        described
    };
    let Some(group) = groups.streams.describe(&id) else {
        let why = if groups.consumer.contains(&id) || groups.classic.contains(&id) {
            format!("Group {} is not a streams group.", id.as_str())
        } else {
            format!("Group {} not found.", id.as_str())
        };
        return described
            .with_error_code(ResponseError::GroupIdNotFound.code())
            .with_error_message(Some(text(&why)))
            .with_group_state(text("Dead"));
    };
    let hidden = group
        .topology
        .iter()
        .flat_map(|t| &t.subtopologies)
        .any(|s| {
            s.source_topics
                .iter()
                .chain(&s.repartition_sinks)
                .chain(
                    s.repartition_sources
                        .iter()
                        .chain(&s.changelogs)
                        .map(|t| &t.name),
                )
                .any(|t| !ctx.authorize_topic(Operation::Describe, t))
        });
    if hidden {
        return described
            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
            .with_error_message(Some(text(
                "The described group uses topics that the client is not authorized to describe.",
            )));
    }
    let partitions = |topic: &str| {
        let t = storage.log.topic(topic)?;
        i32::try_from(t.partitions().len()).ok()
    };
    described
        .with_group_state(text(group.state()))
        .with_group_epoch(group.epoch)
        .with_assignment_epoch(group.assignment_epoch)
        .with_topology(
            group
                .topology
                .as_ref()
                .map(|t| described_topology(t, group.configured.ready(), &partitions)),
        )
        .with_members(members(&group))
}

/// The topology, sorted; once ready, with the partition counts the broker decided.
fn described_topology(
    t: &topology::Topology,
    ready: bool,
    partitions: &dyn Fn(&str) -> Option<i32>,
) -> Topology {
    let info = |i: &topology::TopicInfo| {
        let decided = ready.then(|| partitions(&i.name)).flatten();
        TopicInfo::default()
            .with_name(TopicName(text(&i.name)))
            .with_partitions(decided.unwrap_or(i.partitions))
            .with_replication_factor(i.replication)
            .with_topic_configs(
                i.configs
                    .iter()
                    .map(|(k, v)| KeyValue::default().with_key(text(k)).with_value(text(v)))
                    .collect(),
            )
    };
    let names = |topics: &[String]| {
        let sorted: BTreeSet<&String> = topics.iter().collect();
        sorted.into_iter().map(|t| TopicName(text(t))).collect()
    };
    let infos = |topics: &[topology::TopicInfo]| {
        let mut out: Vec<TopicInfo> = topics.iter().map(info).collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    };
    let mut subtopologies: Vec<Subtopology> = t
        .subtopologies
        .iter()
        .map(|s| {
            Subtopology::default()
                .with_subtopology_id(text(&s.id))
                .with_source_topics(names(&s.source_topics))
                .with_repartition_sink_topics(names(&s.repartition_sinks))
                .with_state_changelog_topics(infos(&s.changelogs))
                .with_repartition_source_topics(infos(&s.repartition_sources))
        })
        .collect();
    subtopologies.sort_by(|a, b| a.subtopology_id.cmp(&b.subtopology_id));
    Topology::default()
        .with_epoch(t.epoch)
        .with_subtopologies(Some(subtopologies))
}

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

fn assignment(tasks: &Tasks) -> Assignment {
    Assignment::default()
        .with_active_tasks(task_ids(&tasks.active))
        .with_standby_tasks(task_ids(&tasks.standby))
        .with_warmup_tasks(task_ids(&tasks.warmup))
}

fn members(group: &StreamsGroup) -> Vec<Member> {
    let empty = Tasks::default();
    group
        .members
        .iter()
        .map(|(id, m)| {
            Member::default()
                .with_member_id(text(id))
                .with_member_epoch(m.epoch)
                .with_rack_id(m.rack_id.as_deref().map(text))
                .with_client_id(text(&m.client_id))
                .with_client_host(text(&m.client_host))
                .with_topology_epoch(m.topology_epoch)
                .with_process_id(text(&m.process_id))
                .with_user_endpoint(
                    m.endpoint.as_ref().map(|(host, port)| {
                        Endpoint::default().with_host(text(host)).with_port(*port)
                    }),
                )
                .with_client_tags(
                    m.client_tags
                        .iter()
                        .map(|(k, v)| KeyValue::default().with_key(text(k)).with_value(text(v)))
                        .collect(),
                )
                .with_assignment(assignment(&m.assigned))
                .with_target_assignment(assignment(group.target.get(id).unwrap_or(&empty)))
        })
        .collect()
}
