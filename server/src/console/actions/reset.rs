//! Reset a group's committed offsets on a topic (or one partition of it) to the earliest, the
//! latest, the first at or after a time, or a given offset: `kafka-consumer-groups
//! --reset-offsets --execute`. As there, only a group without members (its consumers stopped)
//! is reset, and an offset outside the log is moved to its nearest end. Done as an admin's
//! OffsetCommit (generation -1, no member), so it needs Read on the group and on the topic.

use acl::{Operation, ResourceType};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{kafka, missing, number, required, Action, Outcome};
use crate::broker::Broker;
use crate::console::html::Html;
use crate::console::pages::Context;
use crate::console::Query;
use crate::http::Response;

/// Where the offsets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Earliest,
    Latest,
    /// The first record at or after this time (ms since the epoch); the log end when none is.
    Time(i64),
    Offset(i64),
}

#[derive(Debug)]
pub struct ResetOffsets {
    group: String,
    topic: String,
    /// `None`: every partition of the topic.
    partition: Option<i32>,
    to: Target,
}

impl Action for ResetOffsets {
    const NAME: &'static str = "reset-offsets";
    const TITLE: &'static str = "Reset a group's offsets";
    const BUTTON: &'static str = "Reset the offsets";

    fn parse(query: &Query) -> Result<Self, Response> {
        let to = match required(query, "to")? {
            "earliest" => Target::Earliest,
            "latest" => Target::Latest,
            "time" => Target::Time(number(query, "value")?),
            "offset" => Target::Offset(number(query, "value")?),
            _ => {
                return Err(Response::text(
                    "400 Bad Request",
                    "to is earliest, latest, time or offset",
                ))
            }
        };
        let partition = match query.get("partition").filter(|p| !p.is_empty()) {
            None => None,
            Some(_) => Some(number(query, "partition")?),
        };
        Ok(ResetOffsets {
            group: required(query, "group")?.to_string(),
            topic: required(query, "topic")?.to_string(),
            partition,
            to,
        })
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        let (to, value) = match self.to {
            Target::Earliest => ("earliest", String::new()),
            Target::Latest => ("latest", String::new()),
            Target::Time(t) => ("time", t.to_string()),
            Target::Offset(o) => ("offset", o.to_string()),
        };
        vec![
            ("group", self.group.clone()),
            ("topic", self.topic.clone()),
            (
                "partition",
                self.partition.map(|p| p.to_string()).unwrap_or_default(),
            ),
            ("to", to.to_string()),
            ("value", value),
        ]
    }

    fn preview(&self, context: &Context<'_>, h: &mut Html) -> Result<(), Response> {
        let plan = self.plan(context)?;
        let (broker, viewer) = (context.broker, context.viewer);
        if !viewer.may(broker, Operation::Read, ResourceType::Group, &self.group)
            || !viewer.reads_topic(broker, &self.topic)
        {
            return Err(Response::text(
                "403 Forbidden",
                "resetting offsets needs Read on the group and on the topic, as OffsetCommit does",
            ));
        }
        h.raw("<p>Group ")
            .text(&self.group)
            .raw(", topic ")
            .text(&self.topic);
        h.raw(
            ": each partition's committed offset moves as below. Its consumers, when they \
               start again, read from there.</p>",
        );
        h.raw(
            "<table><tr><th>Partition</th><th>Committed now</th><th>Log start</th>\
               <th>Log end</th><th>New offset</th></tr>",
        );
        for row in &plan {
            h.raw("<tr><td class=\"n\">").int(i64::from(row.partition));
            h.raw("</td><td class=\"n\">");
            match row.committed {
                Some(offset) => h.int(offset),
                None => h.raw("—"),
            };
            h.raw("</td><td class=\"n\">").int(row.start);
            h.raw("</td><td class=\"n\">").int(row.end);
            h.raw("</td><td class=\"n\"><b>")
                .int(row.to)
                .raw("</b></td></tr>");
        }
        h.raw("</table>");
        Ok(())
    }

    fn run(&self, context: &Context<'_>, h: &mut Html) -> Outcome {
        let plan = match self.plan(context) {
            Ok(plan) => plan,
            Err(refused) => return Outcome::refused(h, &refused),
        };
        let partitions = plan
            .iter()
            .map(|row| {
                OffsetCommitRequestPartition::default()
                    .with_partition_index(row.partition)
                    .with_committed_offset(row.to)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(Some(StrBytes::from_static_str("")))
            })
            .collect();
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::from_static_str(""))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(self.topic.clone())))
                .with_partitions(partitions)]);
        let response = kafka::call(context.broker, context.viewer, 8, request);
        let results: Vec<(i32, i16)> = response
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        h.raw("<table><tr><th>Partition</th><th>New offset</th><th>Result</th></tr>");
        for (row, (_, code)) in plan.iter().zip(&results) {
            h.raw("<tr><td class=\"n\">").int(i64::from(row.partition));
            h.raw("</td><td class=\"n\">").int(row.to);
            if *code == 0 {
                h.raw("</td><td>committed</td></tr>");
            } else {
                h.raw("</td><td class=\"warn\">")
                    .text(&kafka::error_name(*code))
                    .raw("</td></tr>");
            }
        }
        h.raw("</table><p>");
        h.group_link(&self.group).raw("</p>");
        Outcome::of_codes(&results)
    }
}

/// A partition's reset.
struct Row {
    partition: i32,
    committed: Option<i64>,
    start: i64,
    end: i64,
    to: i64,
}

impl ResetOffsets {
    /// Each partition's new offset, or why the group may not be reset now.
    fn plan(&self, context: &Context<'_>) -> Result<Vec<Row>, Response> {
        let (broker, viewer) = (context.broker, context.viewer);
        if !viewer.sees_group(broker, &self.group) {
            return Err(missing("group"));
        }
        if !viewer.sees_topic(broker, &self.topic) {
            return Err(missing("topic"));
        }
        let topic = broker
            .storage()
            .log
            .topic(&self.topic)
            .ok_or_else(|| missing("topic"))?;
        if let Some(members) = members(broker, &self.group).filter(|n| *n > 0) {
            return Err(Response::text(
                "409 Conflict",
                &format!(
                    "the group has {members} members: only an inactive group's offsets are \
                     reset (stop its consumers first, as kafka-consumer-groups asks)"
                ),
            ));
        }
        let count = i32::try_from(topic.partitions().len()).unwrap_or(i32::MAX);
        let indexes: Vec<i32> = match self.partition {
            Some(p) if (0..count).contains(&p) => vec![p],
            Some(_) => return Err(missing("partition")),
            None => (0..count).collect(),
        };
        let groups = broker.groups();
        let mut plan = Vec::with_capacity(indexes.len());
        for index in indexes {
            let partition = broker
                .storage()
                .partition(&self.topic, index)
                .ok_or_else(|| missing("partition"))?;
            let (start, end) = (partition.log_start_offset(), partition.log_end_offset());
            let to = match self.to {
                Target::Earliest => start,
                Target::Latest => end,
                Target::Time(t) => match partition.offset_for_timestamp(t) {
                    Ok(found) => found.map_or(end, |(offset, _)| offset),
                    Err(e) => {
                        return Err(Response::text(
                            "500 Internal Server Error",
                            &format!("finding the offset for the time: {e}"),
                        ))
                    }
                },
                Target::Offset(o) => o.clamp(start, end),
            };
            let committed = groups.offsets.fetch(&self.group, &self.topic, index);
            plan.push(Row {
                partition: index,
                committed: committed.map(|c| c.offset),
                start,
                end,
                to,
            });
        }
        Ok(plan)
    }
}

/// The members of `group` now (`None` when it has no live state, only offsets).
fn members(broker: &Broker, group: &str) -> Option<usize> {
    let groups = broker.groups();
    groups
        .consumer
        .describe(group)
        .map(|g| g.members.len())
        .or_else(|| groups.classic.describe(group).map(|g| g.members.len()))
        .or_else(|| groups.streams.describe(group).map(|g| g.members.len()))
}
